#include "paper.h"

#include <string.h>

static const PaperFigure PAPER[] = {
    {"mnist", ATTN_SOFTMAX, 0.621, 0.45},      /* table 1 */
    {"mnist", ATTN_LINEAR, 0.644, 142.8},
    {"cifar10", ATTN_SOFTMAX, 3.47, 0.004},    /* table 2 */
    {"cifar10", ATTN_LINEAR, 3.40, 17.85},
};

const PaperFigure *paper_figure(const char *dataset, int attention) {
    for (size_t i = 0; i < sizeof PAPER / sizeof PAPER[0]; i++)
        if (!strcmp(PAPER[i].dataset, dataset) && PAPER[i].attention == attention) return &PAPER[i];
    return NULL;
}
