/* lingen info: a model's configuration, size, and the per-image memory of its attention. The
 * model is opened by liblingen; the lines describe its engine's model (lib/engine_model.h): how
 * the weights are held, the memory either attention would take. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli_job.h"
#include "commands.h"
#include "lib/engine_model.h"
#include "engine/transformer.h"

/* --json: every figure the text prints, and all of the file's metadata. */
static cJSON *info_json(const Model *m, const char *path, size_t state_bytes, size_t kv_bytes) {
    const Config *c = &m->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", path);
    cJSON_AddStringToObject(o, "dataset", c->dataset);
    cJSON_AddNumberToObject(o, "height", c->height);
    cJSON_AddNumberToObject(o, "width", c->width);
    cJSON_AddNumberToObject(o, "channels", c->channels);
    cJSON_AddNumberToObject(o, "seq_len", c->seq_len);
    cJSON_AddStringToObject(o, "attention", c->attention == ATTN_LINEAR ? "linear" : "softmax");
    cJSON_AddNumberToObject(o, "layers", c->n_layers);
    cJSON_AddStringToObject(o, "norm", c->pre_norm ? "pre" : "post");
    cJSON_AddStringToObject(o, "activation", c->gelu ? "gelu" : "relu");
    cJSON_AddNumberToObject(o, "d", c->d);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    cJSON_AddNumberToObject(o, "d_head", c->d_head);
    cJSON_AddNumberToObject(o, "d_ff", c->d_ff);
    cJSON_AddNumberToObject(o, "n_mix", c->n_mix);
    cJSON_AddNumberToObject(o, "parameters", (double)m->n_params);
    cJSON_AddNumberToObject(o, "parameter_bytes_f32", (double)m->n_params * 4);
    cJSON_AddNumberToObject(o, "weight_bytes_held", (double)m->arena_floats * sizeof(float));
    cJSON_AddNumberToObject(o, "rnn_state_bytes_per_image", (double)state_bytes);
    cJSON_AddNumberToObject(o, "kv_cache_bytes_per_image", (double)kv_bytes);
    cJSON_AddNumberToObject(o, "memory_bytes_per_image", (double)(c->attention == ATTN_LINEAR ? state_bytes : kv_bytes));
    cJSON_AddNumberToObject(o, "flops_per_image", transformer_flops_per_image(c));
    cJSON *meta = cJSON_AddObjectToObject(o, "metadata");
    for (int i = 0; i < m->n_meta; i++) cJSON_AddStringToObject(meta, m->meta_keys[i], m->meta_vals[i]);
    return o;
}

/* The configuration's lines, and the parameters: how many, and how the weights are held. */
static void print_config(const Model *m, const char *path) {
    const Config *c = &m->cfg;
    char *file = text_escape(path);   /* a file's name: no terminal escapes */
    printf("model        %s\n", file);
    free(file);
    printf("dataset      %s (%dx%dx%d, N = %d sub-pixels)\n", c->dataset, c->height, c->width, c->channels, c->seq_len);
    printf("attention    %s\n", c->attention == ATTN_LINEAR ? "linear (phi = elu + 1)" : "softmax (scale 1/sqrt(D))");
    printf("layers       %d, %s-norm, %s\n", c->n_layers, c->pre_norm ? "pre" : "post", c->gelu ? "gelu" : "relu");
    printf("width        d = %d = %d heads x %d, d_ff = %d\n", c->d, c->n_heads, c->d_head, c->d_ff);
    printf("output       mixture of %d discretized logistics\n", c->n_mix);
    const Packed *w = &m->layers[0].qkv_w;
    char q8[64];
    int q8_batch = m->plan.q8_batch;
    if (q8_batch == INT_MAX) snprintf(q8, sizeof q8, ", again as 8-bit integers (the steps, --precision int8)");
    else if (q8_batch == 1) snprintf(q8, sizeof q8, ", again as 8-bit integers (the steps at batch 1)");
    else snprintf(q8, sizeof q8, ", again as 8-bit integers (the steps at batches 1-%d)", q8_batch);
    printf("parameters   %zu (%.1f MB as float32; held in %.1f MB, %s%s%s%s)\n", m->n_params, m->n_params * 4 / 1e6,
           m->arena_floats * sizeof(float) / 1e6, w->half ? "Linear weights as float16, as in the file" : "as float32",
           w->bf16 ? ", again in bfloat16" : "", w->amx ? ", again split for AMX tiles" : "", !w->q8 ? "" : q8);
}

/* The memory per image of either attention at this shape (its bytes in *st, the RNN state, and
 * *kv, the KV cache), the FLOPs, and the metadata that training recorded. */
static void print_memory(const Model *m, size_t *st, size_t *kv) {
    const Config *c = &m->cfg;
    int N = c->seq_len;
    Config lin = *c, sm = *c;
    lin.attention = ATTN_LINEAR;
    sm.attention = ATTN_SOFTMAX;
    *st = model_state_bytes(&lin, N);
    *kv = model_state_bytes(&sm, N);
    if (c->attention == ATTN_LINEAR) {
        printf("memory/image RNN state %zu B (%.1f KB) = %d layers x %d heads x (%dx%d + %d) x 4 B, the same at every position\n",
               *st, *st / 1e3, c->n_layers, c->n_heads, c->d_head, c->d_head, c->d_head);
        printf("             (a softmax model of this shape needs a KV cache of %zu B = %.1f MB at full length)\n", *kv,
               *kv / 1e6);
    } else {
        printf("memory/image KV cache %zu B (%.1f MB) at full length = %d layers x %d positions x 2 x %d x 4 B\n", *kv,
               *kv / 1e6, c->n_layers, N, c->d);
        printf("             (a linear model of this shape needs an RNN state of %zu B = %.1f KB)\n", *st, *st / 1e3);
    }
    printf("FLOP/image   %.2f G (step form)\n", transformer_flops_per_image(c) / 1e9);
    const char *keys[] = {"test_bits_per_dim", "test_images", "epochs", "steps", "gpu_seconds", "date", "recipe", "fixture"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = model_meta(m, keys[i]);
        char *safe = v ? text_escape(v) : NULL;   /* a value is the file's text: no terminal escapes */
        if (v) printf("%-12s %s\n", keys[i], safe);
        free(safe);
    }
}

int cmd_info(int argc, char **argv) {
    CliJob j = {.cmd = "info"};   /* no --device: the model is read for the CPU */
    Opt opts[] = {OPT_MODEL(j.model), OPT_JSON(j.json), OPT_FORCE(j.force)};
    int rc = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "info",
                        "Show a model's configuration, parameter count, and the bytes of memory per image:\n"
                        "the RNN state (S, z) of a linear model, or the KV cache at full length of a softmax one.",
                        NULL, 0, NULL);
    if (rc) return rc < 0 ? EXIT_OK : rc;
    if (cli_job_options(&j, 0) || cli_job_json(&j) || cli_job_open_model(&j)) return j.rc;
    const Model *m = lib_engine_model(j.m);
    size_t st, kv;
    print_config(m, j.model);
    print_memory(m, &st, &kv);
    if (j.json) rc = cli_report_json(info_json(m, j.model, st, kv), NULL, j.json);
    cli_job_free(&j);
    return rc;
}
