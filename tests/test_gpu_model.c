/* The hand-over to the GPU engine (src/cuda/gpu_model.c), checked without a GPU: what the CUDA engine
 * receives is each Linear weight in the model file's own row-major layout, element for element
 * the file's tensor and the CPU engine's packed weight; the canary's reference is the CPU's
 * float32 forward of its two tokens; the canary's comparison passes and fails where it should. */
#include "testutil.h"

#include <math.h>
#include "cuda/gpu_model.h"
#include "io/half.h"
#include "io/safetensors.h"
#include "engine/transformer.h"

static float file_weight_at(FileWeight w, size_t k) {
    return w.half ? half_to_float(((const uint16_t *)w.w)[k]) : ((const float *)w.w)[k];
}

/* Every element of one Linear: the GPU's view == the file's tensor (read here through the
 * container alone) == the CPU's packed weight. */
static void check_linear(const SafeTensors *st, const char *name, FileWeight w, Packed cpu, int n_out, int n_in) {
    const StTensor *t = st_find(st, name);
    assert_non_null(t);
    assert_int_equal(t->shape[0], n_out);
    assert_int_equal(t->shape[1], n_in);
    assert_int_equal(w.half, t->dtype == ST_F16);
    float *file = xmalloc(st_numel(t) * sizeof(float));
    st_to_f32(t, file);
    for (int o = 0; o < n_out; o++)
        for (int i = 0; i < n_in; i++) {
            size_t k = (size_t)o * n_in + i;
            float v = file_weight_at(w, k);
            if (v != file[k] || v != matmul_packed_get(cpu, n_in, o, i))
                fail_msg("%s[%d][%d]: GPU view %g, file %g, CPU %g", name, o, i, v, file[k],
                         matmul_packed_get(cpu, n_in, o, i));
        }
    free(file);
}

static void check_model(const char *path) {
    Model m;
    Err e;
    if (model_load_with(&m, path, NULL, MODEL_FILE_WEIGHTS, &e)) fail_msg("%s", e.msg);
    GpuModel g;
    if (gpu_model_init(&g, &m, &e)) fail_msg("%s", e.msg);
    SafeTensors st;
    if (st_open(&st, path, &e)) fail_msg("%s", e.msg);
    const Config *c = &m.cfg;
    assert_memory_equal(&g.cfg, c, sizeof *c);
    int d = c->d, F = c->d_ff;
    check_linear(&st, "head.weight", g.head, m.head_w, 3 * c->n_mix, d);
    assert_ptr_equal(g.emb, m.emb);
    assert_ptr_equal(g.head_b, m.head_b);
    for (int l = 0; l < c->n_layers; l++) {
        char name[64];
        const GpuLayer *L = &g.layers[l];
        const LayerWeights *w = &m.layers[l];
        snprintf(name, sizeof name, "layers.%d.attn.qkv.weight", l);
        check_linear(&st, name, L->qkv, w->qkv_w, 3 * d, d);
        snprintf(name, sizeof name, "layers.%d.attn.out.weight", l);
        check_linear(&st, name, L->out, w->out_w, d, d);
        snprintf(name, sizeof name, "layers.%d.ff1.weight", l);
        check_linear(&st, name, L->ff1, w->ff1_w, F, d);
        snprintf(name, sizeof name, "layers.%d.ff2.weight", l);
        check_linear(&st, name, L->ff2, w->ff2_w, d, F);
        const float *mine[] = {L->qkv_b, L->out_b, L->norm1_w, L->norm1_b, L->norm2_w, L->norm2_b, L->ff1_b, L->ff2_b};
        const float *cpus[] = {w->qkv_b, w->out_b, w->norm1_w, w->norm1_b, w->norm2_w, w->norm2_b, w->ff1_b, w->ff2_b};
        for (size_t k = 0; k < sizeof mine / sizeof *mine; k++) assert_ptr_equal(mine[k], cpus[k]);
    }
    /* the canary's reference: the CPU's exact forward of BOS, CANARY_TOKEN, one call a token */
    RunState s;
    if (runstate_init(&s, c, 1, 1, &e)) fail_msg("%s", e.msg);
    s.exact = 1;
    int K = 3 * c->n_mix, tok[2] = {BOS_TOKEN, CANARY_TOKEN};
    for (int t = 0; t < 2; t++) {
        transformer_forward(&m, &s, &tok[t], 1, 1);
        for (int k = 0; k < K; k++)
            if (fabsf(s.out[k] - g.canary[t * K + k]) > 1e-5f * fmaxf(1, fabsf(s.out[k])))
                fail_msg("%s: canary position %d output %d: %g, the step form's %g", path, t, k, g.canary[t * K + k], s.out[k]);
    }
    assert_int_equal(gpu_canary_check(g.canary, g.canary, 1, 2 * K, K, &e), 0);
    runstate_free(&s);
    st_close(&st);
    gpu_model_free(&g);
    model_free(&m);
}

static void test_shipped_f16(void **state) { (void)state; check_model("models/mnist.bin"); }
static void test_fixture_f32(void **state) { (void)state; check_model(FIXTURE("tiny-softmax-cifar.bin")); }

/* The file-layout copy is extra: the CPU's weights are the same with or without it. */
static void test_keep_changes_nothing_else(void **state) {
    (void)state;
    Model a, b;
    Err e;
    if (model_load(&a, "models/mnist.bin", &e) || model_load_with(&b, "models/mnist.bin", NULL, MODEL_FILE_WEIGHTS, &e))
        fail_msg("%s", e.msg);
    assert_null(a.head_f.w);
    assert_null(a.layers[0].ff1_f.w);
    assert_non_null(b.layers[0].ff1_f.w);
    assert_int_equal(a.n_params, b.n_params);
    assert_true(b.arena_floats > a.arena_floats);
    const Config *c = &a.cfg;
    for (int o = 0; o < c->d_ff; o++)
        for (int i = 0; i < c->d; i++)
            assert_true(matmul_packed_get(a.layers[0].ff1_w, c->d, o, i) == matmul_packed_get(b.layers[0].ff1_w, c->d, o, i));
    /* without the copy the GPU engine is refused, with the reason */
    GpuModel g;
    assert_int_not_equal(gpu_model_init(&g, &a, &e), 0);
    assert_non_null(strstr(e.msg, "MODEL_FILE_WEIGHTS"));
    model_free(&a);
    model_free(&b);
}

static void test_canary_check(void **state) {
    (void)state;
    enum { K = 3, ROWS = 2 };
    const float cpu[2 * K] = {0.5f, -20.0f, 1e-4f, 3.0f, 100.0f, -0.25f};
    float got[ROWS * 2 * K];
    Err e;
    for (int r = 0; r < ROWS; r++) memcpy(got + r * 2 * K, cpu, sizeof cpu);
    assert_int_equal(gpu_canary_check(cpu, got, ROWS, 2 * K, K, &e), 0);
    const float tol = (float)CANARY_TOL;
    got[2 * K + 4] = 100.0f * (1 + 0.9f * tol);   /* within the tolerance of 100, relative */
    got[1] = -20.0f + 19.0f * tol;
    got[2] = 1e-4f + 0.9f * tol;                  /* small values: within it absolute */
    assert_int_equal(gpu_canary_check(cpu, got, ROWS, 2 * K, K, &e), 0);
    got[2 * K + 4] = 100.0f * (1 + 1.2f * tol);  /* row 1, position 1, output 1 */
    assert_int_not_equal(gpu_canary_check(cpu, got, ROWS, 2 * K, K, &e), 0);
    assert_non_null(strstr(e.msg, "head output 1 at position 1 of row 1"));
    char want[96];
    snprintf(want, sizeof want, "%.6g on the GPU, 100 on the CPU", got[2 * K + 4]);
    assert_non_null(strstr(e.msg, want));
    got[2 * K + 4] = 100.0f;
    got[0] = NAN;
    assert_int_not_equal(gpu_canary_check(cpu, got, ROWS, 2 * K, K, &e), 0);
    assert_non_null(strstr(e.msg, "head output 0 at position 0 of row 0"));
    got[0] = cpu[0];
    got[2] = 1e-4f + 1.1f * tol;
    assert_int_not_equal(gpu_canary_check(cpu, got, ROWS, 2 * K, K, &e), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_f16),
        cmocka_unit_test(test_fixture_f32),
        cmocka_unit_test(test_keep_changes_nothing_else),
        cmocka_unit_test(test_canary_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
