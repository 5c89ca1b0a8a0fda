/* The kernel plan (plan.h). */
#include "plan.h"

#include <limits.h>
#include <string.h>

#include "matmul.h"
#include "matmul_amx.h"
#include "matmul_q8.h"
#include "io/settings.h"

Caps plan_caps(void) {
    static int probed;
    static Caps caps;
    if (!probed) {
        Settings s = settings_read();
        caps.bf16 = matmul_bf16_ready();
        caps.vnni = matmul_q8_vnni(-1);
        caps.amx = !s.amx_off && matmul_amx_ready();
        probed = 1;
    }
    return caps;
}

Plan plan_make(Caps caps, Precision precision) {
    Plan p = {caps, precision, 0};
    if (precision == PRECISION_INT8) p.q8_batch = INT_MAX;
    else if (precision == PRECISION_AUTO && caps.bf16 && caps.vnni) p.q8_batch = caps.amx ? Q8_AMX_BATCH : Q8_VNNI_BATCH;
    return p;
}

static int precision_set = -1;   /* --precision, or -1: the environment's */

void plan_set_precision(Precision p) { precision_set = (int)p; }

Plan plan_default(void) {
    Precision p = precision_set >= 0 ? (Precision)precision_set : settings_read().precision;
    return plan_make(plan_caps(), p);
}

static const char *const precision_names[] = {"auto", "f32", "bf16", "int8"};

int plan_parse_precision(const char *s, Precision *p) {
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, precision_names[k])) { *p = (Precision)k; return 0; }
    return -1;
}

const char *plan_precision_name(Precision p) { return precision_names[p]; }

Copies plan_copies(const Plan *p, int half, int head) {
    Copies c = {0, 0, 0};
    int steps_bf16 = p->caps.bf16 && (p->precision == PRECISION_AUTO || p->precision == PRECISION_BF16);
    c.bf16 = half && !head && steps_bf16;
    c.amx = half && p->caps.amx;
    /* 8-bit weights for every step (int8), or for the small batches whose larger ones run in
     * bfloat16 (auto) */
    c.q8 = !head && (p->q8_batch == INT_MAX || (p->q8_batch > 0 && c.bf16));
    return c;
}

Kernel plan_kernel(const Plan *p, Copies c, int T, int B, int exact) {
    int step = T == 1 && !exact;
    if (step && c.q8 && B <= p->q8_batch) return KERNEL_INT8;
    if (step && c.bf16) return c.amx ? KERNEL_AMX_BF16 : KERNEL_BF16;
    if (T != 1 && c.amx) return KERNEL_AMX;
    return KERNEL_F32;
}

const char *plan_kernel_name(Kernel k) {
    static const char *const names[] = {"float32", "AMX", "bfloat16", "AMX-BF16", "int8"};
    return names[k];
}
