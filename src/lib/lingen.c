/* liblingen (include/lingen.h): the public API over the engine layer (generate.h, evaluate.h,
 * complete.h), which the `lingen` command's sample, eval, complete and info run on too. What is
 * the process's, not a model's: the worker threads (threads.h), hence the lock every computing
 * call takes; and OpenBLAS's thread count, set to 1 for a call and put back. The defaults (batch,
 * threads, the memory check) are the command's. */
#include "lingen.h"
#include "engine_model.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/complete.h"
#include "cuda/lingen_cuda.h"
#include "engine/device.h"
#include "engine/dmol.h"
#include "engine/evaluate.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "io/modelpath.h"
#include "kernels/plan.h"
#include "io/reslimits.h"
#include "io/settings.h"
#include "kernels/threads.h"
#include "engine/transformer.h"

#define MAX_THREADS_ASKED 1024

struct lingen_model {
    Model m;
    Device device;
    int threads;                 /* lingen_open_options' */
    char path[MODELPATH_LEN];    /* the file opened */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_call;   /* this thread holds the lock: a progress callback called back in */

/* err (when not NULL) set to status s and the message; returns s. */
static lingen_status fail(lingen_error *err, lingen_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static lingen_status fail(lingen_error *err, lingen_status s, const char *fmt, ...) {
    if (!err) return s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = s;
    return s;
}

/* A call that succeeded: err says so. */
static lingen_status ok(lingen_error *err) {
    if (err) {
        err->status = LINGEN_OK;
        err->message[0] = 0;
    }
    return LINGEN_OK;
}

/* A computing call's start: the process's lock, and OpenBLAS at one thread (lingen's threads each
 * call it). *blas keeps its count for call_end. LINGEN_ERR_ARGUMENT from inside a callback. */
static lingen_status call_begin(int *blas, lingen_error *err) {
    if (in_call)
        return fail(err, LINGEN_ERR_ARGUMENT, "lingen called from inside a progress callback of one of its calls");
    pthread_mutex_lock(&lock);
    in_call = 1;
    *blas = openblas_get_num_threads();
    if (*blas != 1) openblas_set_num_threads(1);
    return LINGEN_OK;
}

static void call_end(int blas) {
    if (blas != 1) openblas_set_num_threads(blas);
    in_call = 0;
    pthread_mutex_unlock(&lock);
}

const char *lingen_version(void) { return LINGEN_VERSION; }

const char *lingen_status_name(lingen_status status) {
    static const char *const names[] = {"LINGEN_OK",         "LINGEN_ERR_ARGUMENT", "LINGEN_ERR_NOT_FOUND",
                                        "LINGEN_ERR_MODEL",  "LINGEN_ERR_MEMORY",   "LINGEN_ERR_DEVICE",
                                        "LINGEN_ERR_RUN",    "LINGEN_STOPPED"};
    unsigned s = (unsigned)status;
    return s < sizeof names / sizeof names[0] ? names[s] : "LINGEN_UNKNOWN";
}

lingen_run_options lingen_run_options_default(void) {
    lingen_run_options o;
    memset(&o, 0, sizeof o);
    o.seed = 1;
    return o;
}

/* The device ready to run a model: the CPU always; CUDA where built in and a GPU answers. */
static lingen_status check_device(Device d, lingen_error *err) {
    if (d == DEVICE_CPU) return LINGEN_OK;
#ifdef LINGEN_CUDA
    Err e;
    if (cuda_probe(&e)) return fail(err, LINGEN_ERR_DEVICE, "device cuda: %s", e.msg);
    return LINGEN_OK;
#else
    return fail(err, LINGEN_ERR_DEVICE, "device cuda: this liblingen was built without CUDA (build it with make CUDA=1)");
#endif
}

/* The file at path loaded for the device: on the CPU with the precision's plan; on a GPU with
 * its weights in the file's layout (what the GPU engine takes), float32 only. */
static int load_for(Model *m, const char *path, Device d, lingen_precision precision, Err *e) {
    static const Precision precisions[] = {PRECISION_AUTO, PRECISION_F32, PRECISION_BF16, PRECISION_INT8, PRECISION_AUTO};
    if (d == DEVICE_CUDA) {
        Plan f32 = plan_make((Caps){0, 0, 0}, PRECISION_F32);
        return model_load_with(m, path, &f32, MODEL_FILE_WEIGHTS, e);
    }
    Precision p = precision == LINGEN_PRECISION_AUTO ? settings_read().precision : precisions[precision];
    Plan plan = plan_make(plan_caps(), p);
    return model_load_with(m, path, &plan, 0, e);
}

lingen_status lingen_open(const char *name_or_path, const lingen_open_options *options, lingen_model **model,
                          lingen_error *err) {
    if (!model) return fail(err, LINGEN_ERR_ARGUMENT, "lingen_open: model is NULL (where the open model goes)");
    *model = NULL;
    if (!name_or_path || !*name_or_path) return fail(err, LINGEN_ERR_ARGUMENT, "lingen_open: no model name or path");
    lingen_open_options o = {LINGEN_DEVICE_CPU, LINGEN_PRECISION_AUTO, 0};
    if (options) o = *options;
    if (o.device != LINGEN_DEVICE_CPU && o.device != LINGEN_DEVICE_CUDA)
        return fail(err, LINGEN_ERR_ARGUMENT, "device %d: must be LINGEN_DEVICE_CPU or LINGEN_DEVICE_CUDA", (int)o.device);
    if ((unsigned)o.precision > LINGEN_PRECISION_FASTEST)
        return fail(err, LINGEN_ERR_ARGUMENT, "precision %d: must be a lingen_precision", (int)o.precision);
    if (o.threads < 0 || o.threads > MAX_THREADS_ASKED)
        return fail(err, LINGEN_ERR_ARGUMENT, "threads %d: must be in 0..%d (0: every core)", o.threads, MAX_THREADS_ASKED);
    Device d = o.device == LINGEN_DEVICE_CUDA ? DEVICE_CUDA : DEVICE_CPU;
    lingen_status s;
    int blas = 1;
    if ((s = call_begin(&blas, err))) return s;
    lingen_model *md = calloc(1, sizeof *md);
    Err e;
    struct stat st;
    if (!md) {
        s = fail(err, LINGEN_ERR_MEMORY, "lingen_open: out of memory");
    } else if ((s = check_device(d, err))) {
    } else if (modelpath_lookup(name_or_path, md->path, sizeof md->path, &e)) {
        s = fail(err, LINGEN_ERR_NOT_FOUND, "%s", e.msg);
    } else if (load_for(&md->m, md->path, d, o.precision, &e)) {   /* the loader's message, as the command's */
        s = fail(err, stat(md->path, &st) && errno == ENOENT ? LINGEN_ERR_NOT_FOUND : LINGEN_ERR_MODEL, "%s", e.msg);
    }
    call_end(blas);
    if (s) {
        free(md);
        return s;
    }
    md->device = d;
    md->threads = o.threads;
    *model = md;
    return ok(err);
}

void lingen_close(lingen_model *model) {
    if (!model) return;
    model_free(&model->m);
    free(model);
}

int lingen_height(const lingen_model *model) { return model->m.cfg.height; }
int lingen_width(const lingen_model *model) { return model->m.cfg.width; }
int lingen_channels(const lingen_model *model) { return model->m.cfg.channels; }
int lingen_seq_len(const lingen_model *model) { return model->m.cfg.seq_len; }
int lingen_layers(const lingen_model *model) { return model->m.cfg.n_layers; }
int lingen_heads(const lingen_model *model) { return model->m.cfg.n_heads; }
int lingen_d_model(const lingen_model *model) { return model->m.cfg.d; }
int lingen_d_ff(const lingen_model *model) { return model->m.cfg.d_ff; }
int lingen_mixtures(const lingen_model *model) { return model->m.cfg.n_mix; }
size_t lingen_parameters(const lingen_model *model) { return model->m.n_params; }
const char *lingen_attention(const lingen_model *model) {
    return model->m.cfg.attention == ATTN_LINEAR ? "linear" : "softmax";
}
const char *lingen_dataset(const lingen_model *model) { return model->m.cfg.dataset; }
const char *lingen_path(const lingen_model *model) { return model->path; }
lingen_device lingen_model_device(const lingen_model *model) {
    return model->device == DEVICE_CUDA ? LINGEN_DEVICE_CUDA : LINGEN_DEVICE_CPU;
}
int lingen_meta_count(const lingen_model *model) { return model->m.n_meta; }
const char *lingen_meta_key(const lingen_model *model, int i) {
    return i >= 0 && i < model->m.n_meta ? model->m.meta_keys[i] : NULL;
}
const char *lingen_meta_value(const lingen_model *model, int i) {
    return i >= 0 && i < model->m.n_meta ? model->m.meta_vals[i] : NULL;
}
const char *lingen_meta(const lingen_model *model, const char *key) { return key ? model_meta(&model->m, key) : NULL; }

const Model *lib_engine_model(const lingen_model *model) { return &model->m; }

/* A call's options checked: NULL is the defaults. what names the call in messages. */
static lingen_status check_options(const lingen_run_options *in, lingen_run_options *o, const char *what,
                                   lingen_error *err) {
    *o = in ? *in : lingen_run_options_default();
    if (o->first < 0) return fail(err, LINGEN_ERR_ARGUMENT, "%s: first = %lld: must be 0 or more", what, (long long)o->first);
    if (o->temperature != 0 && !(o->temperature >= TEMPERATURE_MIN && o->temperature <= TEMPERATURE_MAX))
        return fail(err, LINGEN_ERR_ARGUMENT, "%s: temperature %g: must be in %g..%g (1 is the model's distribution)",
                    what, o->temperature, TEMPERATURE_MIN, TEMPERATURE_MAX);
    if (o->batch < 0) return fail(err, LINGEN_ERR_ARGUMENT, "%s: batch %d: must be 0 (the default) or more", what, o->batch);
    if (o->threads < 0 || o->threads > MAX_THREADS_ASKED)
        return fail(err, LINGEN_ERR_ARGUMENT, "%s: threads %d: must be in 0..%d (0: the model's)", what, o->threads,
                    MAX_THREADS_ASKED);
    if (o->step_form != 0 && o->step_form != 1)
        return fail(err, LINGEN_ERR_ARGUMENT, "%s: step_form %d: must be 0 or 1", what, o->step_form);
    return LINGEN_OK;
}

/* The threads of a call (its own, else the model's; 0: every usable core), no more than the
 * cores unless LINGEN_FORCE_THREADS=1, as the command picks them. Inside the lock. */
static void use_threads(const lingen_model *model, int asked) {
    long t = asked ? asked : model->threads;
    char note[200];
    long pick = reslimits_pick_threads(t, threads_usable_cores(), settings_read().force_threads, note, sizeof note);
    threads_set(t ? (int)pick : 0);
}

/* The checks every run's arguments share: model, the count, a buffer. */
static lingen_status check_run(const lingen_model *model, long n, const void *buf, const char *buf_name,
                               const char *what, lingen_error *err) {
    if (!model) return fail(err, LINGEN_ERR_ARGUMENT, "%s: model is NULL", what);
    if (n < 0) return fail(err, LINGEN_ERR_ARGUMENT, "%s: n = %ld: must be 0 or more", what, n);
    if (!buf && n > 0) return fail(err, LINGEN_ERR_ARGUMENT, "%s: %s is NULL", what, buf_name);
    return LINGEN_OK;
}

/* The positions one forward of a call takes: every one in bits/dim's parallel form (1 in its step
 * form), the kept ones in completion's prefill, else 1 (a step). */
static int forward_positions(const lingen_model *model, lingen_task task, int keep, const lingen_run_options *o) {
    if (task == LINGEN_TASK_BITS_PER_DIM) return o && o->step_form ? 1 : model->m.cfg.seq_len;
    return task == LINGEN_TASK_COMPLETE && keep > 1 ? keep : 1;
}

int lingen_batch(const lingen_model *model, lingen_task task, int n, const lingen_run_options *options) {
    if (!model) return 0;
    static const RunKind kinds[] = {[LINGEN_TASK_SAMPLE] = RUN_SAMPLE, [LINGEN_TASK_BITS_PER_DIM] = RUN_BITS_PER_DIM,
                                    [LINGEN_TASK_COMPLETE] = RUN_COMPLETE};
    RunKind kind = task >= 0 && task <= LINGEN_TASK_COMPLETE ? kinds[task] : RUN_SAMPLE;
    long batch = options && options->batch > 0 ? options->batch
                 : device_default_batch(&model->m.cfg, model->device, kind, forward_positions(model, task, 0, options));
    if (batch > n) batch = n;
    return batch > 1 ? (int)batch : 1;
}

const char *lingen_kernel(const lingen_model *model, lingen_task task, int n, const lingen_run_options *options) {
    if (!model) return NULL;
    if (model->device == DEVICE_CUDA) return plan_kernel_name(KERNEL_F32);
    /* bits/dim is exact: float32 products, whatever the precision */
    int bpd = task == LINGEN_TASK_BITS_PER_DIM, T = bpd ? forward_positions(model, task, 0, options) : 1;
    return plan_kernel_name(transformer_products(&model->m, lingen_batch(model, task, n, options), T, bpd));
}

size_t lingen_weight_bytes(const lingen_model *model) { return model ? model->m.arena_floats * sizeof(float) : 0; }

size_t lingen_run_bytes(const lingen_model *model, lingen_task task, int batch, int keep,
                        const lingen_run_options *options) {
    if (!model || batch < 0) return 0;
    return runstate_bytes(&model->m.cfg, batch, forward_positions(model, task, keep, options));
}

/* A generation (sample, complete) of `total` images on the engine, after the memory check:
 * *done and the status from generate's result. fn runs it. */
typedef struct {
    const lingen_model *model;
    const uint8_t *inputs;   /* complete's, or NULL */
    int n, samples, keep;
    uint8_t *out;
} Generation;

static lingen_status run_generation(const Generation *g, const lingen_run_options *o, const char *what, int *done,
                                    lingen_error *err) {
    const Model *m = &g->model->m;
    const Config *c = &m->cfg;
    int total = g->inputs ? g->n * g->samples : g->n, N = c->seq_len, P = g->keep;
    if (total == 0) return ok(err);
    lingen_task task = g->inputs ? LINGEN_TASK_COMPLETE : LINGEN_TASK_SAMPLE;
    int batch = lingen_batch(g->model, task, total, o);
    Err e;
    size_t prefixes = g->inputs ? (size_t)total * N : 0;   /* complete_images' copy of the inputs */
    if (engine_check_memory(m, what, batch, forward_positions(g->model, task, P, o), prefixes, &e))
        return fail(err, LINGEN_ERR_MEMORY, "%s", e.msg);
    Progress prog;
    progress_start_positions(&prog, what, total, N - P);
    if (o->progress) progress_report_to(&prog, o->progress, o->progress_user);
    GenOptions go = {.device = g->model->device, .seed = o->seed, .first = (long)o->first, .batch = batch,
                     .temperature = o->temperature, .stop = o->stop, .progress = o->progress ? &prog : NULL};
    use_threads(g->model, o->threads);
    int finished = g->inputs ? complete_images(m, g->inputs, g->n, g->samples, P, &go, g->out, &e)
                             : generate(m, g->out, g->n, &go, &e);
    if (finished < 0) return fail(err, LINGEN_ERR_RUN, "%s: %s", what, e.msg);
    if (done) *done = finished;
    if (finished < total) return fail(err, LINGEN_STOPPED, "%s: stopped after %d of %d images", what, finished, total);
    return ok(err);
}

lingen_status lingen_sample(lingen_model *model, int n, const lingen_run_options *options, uint8_t *images,
                            int *done, lingen_error *err) {
    lingen_run_options o;
    lingen_status s;
    if (done) *done = 0;
    if ((s = check_run(model, n, images, "images", "sample", err)) || (s = check_options(options, &o, "sample", err)))
        return s;
    int blas = 1;
    if ((s = call_begin(&blas, err))) return s;
    Generation g = {model, NULL, n, 1, 0, images};
    s = run_generation(&g, &o, "sample", done, err);
    call_end(blas);
    return s;
}

lingen_status lingen_complete(lingen_model *model, const uint8_t *inputs, int n, int keep, int samples,
                              const lingen_run_options *options, uint8_t *out, int *done, lingen_error *err) {
    lingen_run_options o;
    lingen_status s;
    if (done) *done = 0;
    if ((s = check_run(model, n, inputs, "inputs", "complete", err)) || (s = check_run(model, n, out, "out", "complete", err)) ||
        (s = check_options(options, &o, "complete", err)))
        return s;
    int N = model->m.cfg.seq_len;
    if (keep < 0 || keep >= N)
        return fail(err, LINGEN_ERR_ARGUMENT, "complete: keep = %d: must be in 0..%d (values kept of the %d)", keep,
                    N - 1, N);
    if (samples < 1 || (n > 0 && samples > INT_MAX / n))
        return fail(err, LINGEN_ERR_ARGUMENT, "complete: samples = %d: must be 1 or more, with n * samples <= %d",
                    samples, INT_MAX);
    int blas = 1;
    if ((s = call_begin(&blas, err))) return s;
    Generation g = {model, inputs, n, samples, keep, out};
    s = run_generation(&g, &o, "complete", done, err);
    call_end(blas);
    return s;
}

lingen_status lingen_bits_per_dim(lingen_model *model, const uint8_t *images, int n, double *per_image,
                                  double *per_image_given, const lingen_run_options *options, lingen_error *err) {
    lingen_run_options o;
    lingen_status s;
    if ((s = check_run(model, n, images, "images", "bits_per_dim", err)) ||
        (s = check_run(model, n, per_image, "per_image", "bits_per_dim", err)) ||
        (s = check_options(options, &o, "bits_per_dim", err)))
        return s;
    if (n == 0) return ok(err);
    const Model *m = &model->m;
    int T = forward_positions(model, LINGEN_TASK_BITS_PER_DIM, 0, &o);
    int batch = lingen_batch(model, LINGEN_TASK_BITS_PER_DIM, n, &o);
    int blas = 1;
    if ((s = call_begin(&blas, err))) return s;
    Err e;
    Progress prog;
    progress_start(&prog, "images", n);
    if (o.progress) progress_report_to(&prog, o.progress, o.progress_user);
    if (engine_check_memory(m, "bits_per_dim", batch, T, 0, &e)) {
        s = fail(err, LINGEN_ERR_MEMORY, "%s", e.msg);
    } else {
        use_threads(model, o.threads);
        int done = evaluate_bits_per_dim(m, model->device, images, n, batch, o.step_form, per_image, per_image_given,
                                         o.progress ? &prog : NULL, o.stop, &e);
        if (done < 0) {
            s = fail(err, LINGEN_ERR_RUN, "bits_per_dim: %s", e.msg);
        } else if (done < n) {   /* stopped: the unfinished images' entries say so */
            for (int i = done; i < n; i++) {
                per_image[i] = NAN;
                if (per_image_given) per_image_given[i] = NAN;
            }
            s = fail(err, LINGEN_STOPPED, "bits_per_dim: stopped after %d of %d images", done, n);
        }
    }
    call_end(blas);
    return s ? s : ok(err);
}
