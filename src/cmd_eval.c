/* lingen eval bits-per-dim: the test-set likelihood of a model, in bits per dimension. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ceiling.h"
#include "commands.h"
#include "modelpath.h"
#include "output.h"
#include "device.h"
#include "dataset.h"
#include "evaluate.h"
#include "jsonout.h"
#include "paper.h"
#include "shard.h"
#include "transformer.h"

/* 16 MNIST or 4 CIFAR-10 images a pass on the CPU. On a GPU a pass takes little longer for
 * hundreds of images than for a few (its linear attention runs the positions in order, each
 * (image, head) pair on its own threads): as many as 8 GB of activations and state hold, at most
 * 256. */
static long default_batch(const Config *c, int T) {
    long cpu = c->seq_len > 1000 ? 4 : 16;
    if (device_current() != DEVICE_CUDA) return cpu;
    return device_batch_fit((double)(runstate_bytes(c, 1, T) - runstate_bytes(c, 0, T)), cpu, 256);
}

int cmd_eval(int argc, char **argv) {
    const char *path = NULL, *data = NULL, *split = "test", *mode = "parallel", *json = NULL;
    long limit = 0, batch = 0, threads = 0;
    int ceiling = 0;
    const char *device = "cpu";
    int force = 0;
    Opt opts[] = {
        OPT_MODEL(path),
        OPT_DATA(data),
        {"split", 0, OPT_STR, &split, "test|train", "which split (default test)", 0, 0},
        OPT_LIMIT(limit, "only the first N images (default all)"),
        OPT_BATCH(batch, 4096, "images per pass (default: 16 for MNIST, 4 for CIFAR-10; on a GPU up to 256, as 8 GB hold)"),
        {"mode", 0, OPT_STR, &mode, "parallel|rnn", "parallel form (default) or step form with teacher forcing", 0, 0},
        OPT_THREADS(threads),
        OPT_DEVICE(device),
        OPT_CEILING(ceiling),
        OPT_JSON(json),
        OPT_FORCE(force),
    };
    const char *pos[1];
    int npos = 0;
    int r = args_parse(argc, argv, 2, opts, sizeof opts / sizeof opts[0], "eval bits-per-dim",
                       "Bits per dimension of the test images under the model: -(sum of log2 p)/N over all N\n"
                       "sub-pixels of each image (the first predicted from BOS), averaged over images, with its\n"
                       "standard error; and the paper's convention: the first sub-pixel given, the mean over N-1.",
                       pos, 1, &npos);
    if (r) return r < 0 ? 0 : r;
    output_set_force(force);
    if ((r = device_option(device, "eval", 1)) == EXIT_USAGE) return r;
    int device_rc = r;
    if (npos != 1 || strcmp(pos[0], "bits-per-dim")) {
        fprintf(stderr, "lingen eval: the metric must be 'bits-per-dim' (see lingen eval --help)\n");
        return 2;
    }
    if (strcmp(split, "test") && strcmp(split, "train")) {
        fprintf(stderr, "lingen eval: --split must be test or train, not '%s'\n", split);
        return 2;
    }
    if (strcmp(mode, "parallel") && strcmp(mode, "rnn")) {
        fprintf(stderr, "lingen eval: --mode must be parallel or rnn, not '%s'\n", mode);
        return 2;
    }
    if (cli_check_ceiling("eval", ceiling)) return 2;
    int rnn = !strcmp(mode, "rnn");   /* the step form (one position at a time), else the parallel form */
    /* From here a failure can be one rank's alone (a file, a GPU): every rank learns of it at the
     * next shard_agree, and all stop together. */
    int rc = device_rc, rank = shard_rank();
    if (!rc && json && rank == 0 && jsonout_prepare(json)) rc = 1;
    char found[MODELPATH_LEN];
    Model m = {0};
    Dataset ds = {0};
    if (!rc && cli_open_model(&m, &path, found)) rc = 1;
    const Config *c = &m.cfg;
    if (!rc) cli_set_threads(threads);
    if (!batch) batch = default_batch(c, rnn ? 1 : c->seq_len);
    if (!rc && cli_load_dataset(&ds, &m, path, data, split, (int)limit)) rc = 1;
    if (batch > ds.n) batch = ds.n;
    long first, count;   /* this rank's images; rank 0 gathers their figures */
    shard_range(ds.n, rank, shard_size(), &first, &count);
    if (!rc && cli_check_memory(&m, "eval", batch < count ? batch : count, rnn ? 1 : c->seq_len,
                                (size_t)ds.n * c->seq_len))
        rc = 1;
    double *per = NULL, *given = NULL;
    if ((rc = shard_agree(rc))) goto out;

    Err e;
    per = xcalloc(ds.n, sizeof(double));
    given = xcalloc(ds.n, sizeof(double));
    Progress prog;
    progress_start(&prog, "images", ds.n);
    progress_share(&prog, (double)count / ds.n, rank == 0);
    double t0 = now_seconds();
    rc = evaluate_bits_per_dim(&m, ds.images + first * c->seq_len, (int)count, (int)batch, rnn,
                               per + first, given + first, &prog, &e);
    progress_end(&prog);
    if (rc) fprintf(stderr, "lingen: %s\n", e.msg);
    if ((rc = shard_agree(rc ? 1 : 0))) goto out;
    shard_gather(per + first, count, sizeof(double));   /* rank 0: every image's figures, in order */
    shard_gather(given + first, count, sizeof(double));
    double secs = now_seconds() - t0;             /* so far as the slowest rank */
    if (rank == 0) {
        double mean, se, mean_given, se_given;
        mean_and_stderr(per, ds.n, &mean, &se);
        mean_and_stderr(given, ds.n, &mean_given, &se_given);
        const char *attn = c->attention == ATTN_LINEAR ? "linear" : "softmax", *form = rnn ? "step (RNN)" : "parallel";
        if (ds.n > 1) {
            printf("bits/dim     %.5f +- %.5f (standard error over %d %s images, all %d dims)\n", mean, se, ds.n, split,
                   c->seq_len);
            printf("paper conv.  %.5f +- %.5f (first sub-pixel given: the mean over the other %d, as the paper counts)\n",
                   mean_given, se_given, c->seq_len - 1);
        } else {   /* one image has no spread to measure */
            printf("bits/dim     %.5f (1 %s image, all %d dims; the standard error needs two or more)\n", mean, split,
                   c->seq_len);
            printf("paper conv.  %.5f (first sub-pixel given: the mean over the other %d, as the paper counts)\n",
                   mean_given, c->seq_len - 1);
        }
        char *file = text_escape(path);   /* the file's name and text: no terminal escapes */
        printf("model        %s (%s attention, %s)\n", file, attn, c->dataset);
        free(file);
        const char *card = model_meta(&m, "test_bits_per_dim");
        char *card_s = card ? text_escape(card) : NULL;
        if (card) printf("model card   %s (full test set, PyTorch evaluation at export)\n", card_s);
        free(card_s);
        const PaperFigure *pf = paper_figure(c->dataset, c->attention);
        double paper = pf ? pf->bits_per_dim : 0;
        if (paper) printf("paper        %.3g (Katharopoulos et al. 2020: %s attention on %s, first sub-pixel given)\n", paper,
                          attn, c->dataset);
        char ranks[32] = "";
        if (shard_size() > 1) snprintf(ranks, sizeof ranks, ", %d ranks", shard_size());
        printf("speed        %.2f images/s, %.1f s, %s form, batch %ld%s\n", ds.n / secs, secs, form, batch, ranks);
        double flops = transformer_flops(c, rnn ? 1 : c->seq_len);
        Ceiling sgemm = {0};
        if (ceiling)   /* the arithmetic of an image in the form that ran (transformer.h); the steps in float32 */
            sgemm = ceiling_report("ceiling      ", flops, ds.n / secs, rnn ? CEILING_FLOAT32 : CEILING_PARALLEL,
                                   rnn ? ceiling_state_traffic(c, batch) : (StateTraffic){0, 0, 0});
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "bits_per_dim", mean);
            cJSON_AddNumberToObject(o, "bits_per_dim_stderr", se);
            cJSON_AddNumberToObject(o, "bits_per_dim_first_given", mean_given);
            cJSON_AddNumberToObject(o, "bits_per_dim_first_given_stderr", se_given);
            cJSON_AddNumberToObject(o, "images", ds.n);
            cJSON_AddStringToObject(o, "split", split);
            cJSON_AddNumberToObject(o, "dims", c->seq_len);
            cJSON_AddStringToObject(o, "model", path);
            cJSON_AddStringToObject(o, "attention", attn);
            cJSON_AddStringToObject(o, "dataset", c->dataset);
            if (card) cJSON_AddNumberToObject(o, "model_card_bits_per_dim", atof(card));
            if (paper) cJSON_AddNumberToObject(o, "paper_bits_per_dim", paper);
            cJSON_AddNumberToObject(o, "images_per_s", ds.n / secs);
            cJSON_AddNumberToObject(o, "seconds", secs);
            cJSON_AddStringToObject(o, "form", rnn ? "rnn" : "parallel");
            cJSON_AddNumberToObject(o, "batch", batch);
            jsonout_ranks(o);
            if (ceiling) cJSON_AddItemToObject(o, "ceiling", jsonout_ceiling(flops, ds.n / secs, &sgemm));
            if (jsonout_write(o, json, &e)) { fprintf(stderr, "lingen: %s\n", e.msg); rc = 1; }
            cJSON_Delete(o);
        }
    }
out:
    free(per);
    free(given);
    dataset_free(&ds);
    model_free(&m);
    return rc ? 1 : 0;
}
