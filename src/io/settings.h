/* Every environment variable lingen reads, read here and nowhere else (the man page's
 * ENVIRONMENT section lists them; `lingen version` prints those set). */
#ifndef LINGEN_SETTINGS_H
#define LINGEN_SETTINGS_H
/* The arithmetic of a sampling step's products (--precision; evaluation is float32 always). */
typedef enum {
    PRECISION_AUTO,   /* the fastest of the kinds below that this processor has, per batch */
    PRECISION_F32,    /* float32 products (float16 weights widened exactly) */
    PRECISION_BF16,   /* bfloat16 products where the processor has AVX512-BF16, else float32 */
    PRECISION_INT8,   /* 8-bit weights at every batch */
} Precision;

typedef struct {
    const char *data;        /* LINGEN_DATA: the datasets' root (or NULL) */
    const char *models;      /* LINGEN_MODELS: folders to search for models, ':' between (or NULL) */
    Precision precision;     /* LINGEN_INT8=1: int8; LINGEN_BF16=0: f32; LINGEN_INT8=0: bf16; else auto */
    int amx_off;             /* LINGEN_AMX=0: no AMX tiles */
    int profile;             /* LINGEN_PROFILE=1: time every parallel loop, print at exit */
    int force_threads;       /* LINGEN_FORCE_THREADS=1: more threads than cores, if asked */
    int cuda_sgemm;          /* LINGEN_CUDA_SGEMM=1: the GPU's products in plain SGEMM */
    int cuda_tf32;           /* LINGEN_CUDA_TF32=1: on TF32 tensor cores (not float32: diagnostics) */
    int cuda_pdl;            /* LINGEN_CUDA_PDL=1: a few-row product starts while the one before ends */
    int cuda_fused;          /* a step of a few images in one kernel, unless LINGEN_CUDA_FUSED=0 */
} Settings;

/* The environment now (cheap: a few getenv calls). */
Settings settings_read(void);
/* The names of the variables above, NULL-terminated, for version and the man page's test. */
extern const char *const settings_names[];
#endif
