/* The commands' shared steps (cli_job.h): each applies its option or refuses with the exit code
 * and message the commands give; once one failed, the later ones do nothing (no message, no
 * model, no file); and the report's JSON carries the ceiling's figures, computed here again. */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <fcntl.h>

#include "cli/cli_job.h"
#include "io/output.h"
#include "kernels/plan.h"

/* What fn(j) printed on stderr, into buf (n bytes); its return value in *rc. */
static void capture_stderr(int (*fn)(CliJob *), CliJob *j, int *rc, char *buf, size_t n) {
    char path[] = "/tmp/lingen-test-stderr-XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, STDERR_FILENO);
    *rc = fn(j);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    ssize_t got = pread(fd, buf, n - 1, 0);
    buf[got > 0 ? got : 0] = 0;
    close(fd);
    unlink(path);
}

static int options_probe(CliJob *j) { return cli_job_options(j, 1); }
static int open_model(CliJob *j) { return cli_job_open_model(j); }
static int check_json(CliJob *j) { return cli_job_json(j); }
static int huge_batch(CliJob *j) { return cli_job_memory(j, LINGEN_TASK_BITS_PER_DIM, 1L << 40, 0, 0); }

/* A bad --precision or --device word is a usage error naming the command; rc keeps it. */
static void test_options_refused(void **state) {
    (void)state;
    char msg[512];
    int rc;
    CliJob j = {.cmd = "sample", .device = "cpu", .precision = "fast"};
    capture_stderr(options_probe, &j, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_USAGE);
    assert_int_equal(j.rc, EXIT_USAGE);
    assert_string_equal(msg, "lingen sample: --precision must be auto, f32, bf16 or int8, not 'fast'\n");
    CliJob k = {.cmd = "eval", .device = "tpu"};
    capture_stderr(options_probe, &k, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_USAGE);
    assert_int_equal(k.rc, EXIT_USAGE);
    assert_non_null(strstr(msg, "lingen eval: --device"));
    assert_non_null(strstr(msg, "'tpu'"));
#ifndef LINGEN_CUDA
    /* a device this build lacks is a failure, not a usage error: the commands go on to agree on it */
    CliJob g = {.cmd = "complete", .device = "cuda"};
    capture_stderr(options_probe, &g, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_int_equal(g.rc, EXIT_FAIL);
    assert_non_null(strstr(msg, "lingen complete: --device cuda: "));
#endif
}

/* --force and --precision take effect; a command without --device (device NULL) needs none. */
static void test_options_applied(void **state) {
    (void)state;
    const char *ro = test_in_dir("ro.png");
    FILE *f = fopen(ro, "w");
    assert_non_null(f);
    fclose(f);
    chmod(ro, 0444);
    Err e;
    CliJob j = {.cmd = "info", .precision = "f32"};
    assert_int_equal(cli_job_options(&j, 0), 0);
    assert_int_equal(plan_default().precision, PRECISION_F32);
    assert_int_not_equal(output_check(ro, &e), 0);   /* read-only, and no --force */
    CliJob k = {.cmd = "info", .force = 1};
    assert_int_equal(cli_job_options(&k, 0), 0);
    assert_int_equal(output_check(ro, &e), 0);
    output_set_force(0);
    plan_set_precision(PRECISION_AUTO);
}

/* After a failure every step returns it and does nothing: no message, no model, no probe file. */
static void test_steps_after_failure(void **state) {
    (void)state;
    char msg[512];
    int rc;
    CliJob j = {.cmd = "sample", .model = "no-such-model", .json = test_in_dir("missing/out.json"), .rc = EXIT_FAIL};
    capture_stderr(open_model, &j, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_string_equal(msg, "");
    assert_string_equal(j.model, "no-such-model");   /* not resolved */
    assert_null(j.m);
    capture_stderr(check_json, &j, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_string_equal(msg, "");
    assert_int_equal(cli_job_threads(&j), EXIT_FAIL);
    assert_int_equal(cli_job_memory(&j, LINGEN_TASK_SAMPLE, 1L << 40, 0, 0), EXIT_FAIL);
    assert_int_equal(cli_job_agree(&j), EXIT_FAIL);   /* one process: its own rc */
    cli_job_free(&j);
}

/* The model opened by path; then a batch that no memory holds fails, its message naming the
 * command; a missing model fails with the name in its message. */
static void test_model_and_memory(void **state) {
    (void)state;
    char msg[512];
    int rc;
    CliJob j = {.cmd = "eval", .model = FIXTURE("tiny-linear-mnist.bin")};
    assert_int_equal(cli_job_open_model(&j), 0);
    assert_ptr_equal(j.model, j.found);
    assert_int_equal(lingen_seq_len(j.m), 784);
    assert_int_equal(cli_job_memory(&j, LINGEN_TASK_BITS_PER_DIM, 1, 0, 0), 0);
    capture_stderr(huge_batch, &j, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_int_equal(j.rc, EXIT_FAIL);
    assert_non_null(strstr(msg, "lingen: eval: batch 1099511627776 needs "));
    cli_job_free(&j);
    assert_null(j.m);
    CliJob k = {.cmd = "info", .model = "no-such-model"};
    capture_stderr(open_model, &k, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_non_null(strstr(msg, "no-such-model"));
}

/* --json: a file in a missing directory fails before the work; a writable one passes and is
 * not created. */
static void test_json_checked(void **state) {
    (void)state;
    char msg[512];
    int rc;
    CliJob j = {.cmd = "info", .json = test_in_dir("missing/out.json")};
    capture_stderr(check_json, &j, &rc, msg, sizeof msg);
    assert_int_equal(rc, EXIT_FAIL);
    assert_non_null(strstr(msg, "missing/out.json"));
    CliJob k = {.cmd = "info", .json = test_in_dir("out.json")};
    assert_int_equal(cli_job_json(&k), 0);
    struct stat st;
    assert_int_not_equal(stat(k.json, &st), 0);
}

/* The JSON read back from path (NULL if it is not JSON). */
static cJSON *read_json(const char *path) {
    size_t len;
    Err e;
    unsigned char *text = read_file(path, &len, &e);
    assert_non_null(text);
    cJSON *o = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    return o;
}

/* The report's JSON: o as given; with --ceiling its figures from the measured sgemm; no ranks in
 * one process; a path that cannot be written fails, o freed all the same (ASan: no leak). */
static void test_report_json(void **state) {
    (void)state;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "images", 8);
    assert_int_equal(cli_report_json(o, NULL, test_in_dir("plain.json")), 0);
    cJSON *back = read_json(test_in_dir("plain.json"));
    assert_non_null(back);
    assert_int_equal(cJSON_GetArraySize(back), 1);
    assert_int_equal(cJSON_GetObjectItem(back, "images")->valuedouble, 8);
    cJSON_Delete(back);

    CliReport r = {.images = 8, .seconds = 2, .flops = 5e9, .ceiling = 1, .sgemm = {.gflops = 40}};
    o = cJSON_CreateObject();
    assert_int_equal(cli_report_json(o, &r, test_in_dir("ceiling.json")), 0);
    back = read_json(test_in_dir("ceiling.json"));
    assert_non_null(back);
    assert_null(cJSON_GetObjectItem(back, "ranks"));
    cJSON *c = cJSON_GetObjectItem(back, "ceiling");
    assert_non_null(c);
    /* 8 images in 2 s of 5 GFLOP each: 20 GFLOP/s, half of 40 */
    assert_true(cJSON_GetObjectItem(c, "useful_gflops")->valuedouble == 20);
    assert_true(cJSON_GetObjectItem(c, "fraction_of_sgemm")->valuedouble == 0.5);
    assert_null(cJSON_GetObjectItem(c, "state_gbs"));   /* no state pass measured */
    cJSON_Delete(back);

    r.ceiling = 0;
    o = cJSON_CreateObject();
    assert_int_equal(cli_report_json(o, &r, test_in_dir("none.json")), 0);
    back = read_json(test_in_dir("none.json"));
    assert_null(cJSON_GetObjectItem(back, "ceiling"));
    cJSON_Delete(back);

    o = cJSON_CreateObject();
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO);
    int rc = cli_report_json(o, &r, test_in_dir("missing/x.json"));
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(null);
    assert_int_equal(rc, EXIT_FAIL);
}

/* Without --ceiling nothing is measured; one process has no ranks to mention. */
static void test_report_text(void **state) {
    (void)state;
    CliReport r = {.images = 8, .seconds = 2, .flops = 5e9};
    cli_report_ceiling(&r, "ceiling: ", CEILING_STEPS, (StateTraffic){0, 0, 0});
    assert_true(r.sgemm.gflops == 0);
    char buf[32] = "junk";
    assert_string_equal(cli_ranks_text(buf, sizeof buf), "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_refused),
        TEST_IN_DIR(test_options_applied),
        TEST_IN_DIR(test_steps_after_failure),
        cmocka_unit_test(test_model_and_memory),
        TEST_IN_DIR(test_json_checked),
        TEST_IN_DIR(test_report_json),
        cmocka_unit_test(test_report_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
