/* lingen info: a model's configuration, size, and the per-image memory of its attention. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "modelpath.h"
#include "transformer.h"

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    Opt opts[] = {{"model", 'm', OPT_STR, &path, "NAME", "model file, or a name from lingen models (default mnist)", 0, 0}};
    int r = args_parse(argc, argv, 2, opts, 1, "info",
                       "Show a model's configuration, parameter count, and the bytes of memory per image:\n"
                       "the RNN state (S, z) of a linear model, or the KV cache at full length of a softmax one.",
                       NULL, 0, NULL);
    if (r) return r < 0 ? 0 : r;
    char found[MODELPATH_LEN];
    Model m;
    if (modelpath_find(path ? path : "mnist", found, sizeof found) || cli_load_model(&m, path = found)) return 1;
    const Config *c = &m.cfg;
    int N = c->seq_len;
    printf("model        %s\n", path);
    printf("dataset      %s (%dx%dx%d, N = %d sub-pixels)\n", c->dataset, c->height, c->width, c->channels, N);
    printf("attention    %s\n", c->attention == ATTN_LINEAR ? "linear (phi = elu + 1)" : "softmax (scale 1/sqrt(D))");
    printf("layers       %d, %s-norm, %s\n", c->n_layers, c->pre_norm ? "pre" : "post", c->gelu ? "gelu" : "relu");
    printf("width        d = %d = %d heads x %d, d_ff = %d\n", c->d, c->n_heads, c->d_head, c->d_ff);
    printf("output       mixture of %d discretized logistics\n", c->n_mix);
    printf("parameters   %zu (%.1f MB as float32)\n", m.n_params, m.n_params * 4 / 1e6);
    Config lin = *c, sm = *c;
    lin.attention = ATTN_LINEAR;
    sm.attention = ATTN_SOFTMAX;
    size_t st = model_state_bytes(&lin, N), kv = model_state_bytes(&sm, N);
    if (c->attention == ATTN_LINEAR) {
        printf("memory/image RNN state %zu B (%.1f KB) = %d layers x %d heads x (%dx%d + %d) x 4 B, the same at every position\n",
               st, st / 1e3, c->n_layers, c->n_heads, c->d_head, c->d_head, c->d_head);
        printf("             (a softmax model of this shape needs a KV cache of %zu B = %.1f MB at full length)\n", kv, kv / 1e6);
    } else {
        printf("memory/image KV cache %zu B (%.1f MB) at full length = %d layers x %d positions x 2 x %d x 4 B\n",
               kv, kv / 1e6, c->n_layers, N, c->d);
        printf("             (a linear model of this shape needs an RNN state of %zu B = %.1f KB)\n", st, st / 1e3);
    }
    printf("FLOP/image   %.2f G (step form)\n", transformer_flops_per_image(c) / 1e9);
    const char *keys[] = {"test_bits_per_dim", "test_images", "epochs", "steps", "gpu_seconds", "date", "recipe", "fixture"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = model_meta(&m, keys[i]);
        if (v) printf("%-12s %s\n", keys[i], v);
    }
    model_free(&m);
    return 0;
}
