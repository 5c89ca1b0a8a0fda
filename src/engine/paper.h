/* The paper's figures (Katharopoulos et al. 2020, tables 1 and 2), by dataset and attention:
 * test bits/dim (the first sub-pixel given, not predicted) and images/s sampled on a GPU. */
#ifndef LINGEN_PAPER_H
#define LINGEN_PAPER_H
#include "model.h"

typedef struct {
    const char *dataset;       /* as in a model's config: "mnist", "cifar10" */
    int attention;             /* ATTN_LINEAR or ATTN_SOFTMAX */
    double bits_per_dim, images_per_s;
} PaperFigure;

/* NULL if the paper has no figure for them. */
const PaperFigure *paper_figure(const char *dataset, int attention);
#endif
