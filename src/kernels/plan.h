/* Which kernel runs each product, decided here and nowhere else: from what the processor offers
 * (Caps, probed once) and the arithmetic asked for (Precision), a Plan says which copies of each
 * weight a model holds and, for a call of the forward pass, which kernel each product takes. The
 * kernels (matmul.c, matmul_amx.c, matmul_q8.c) only execute it (product.c); tests/test_plan.c
 * reads the table below as data. docs/speed.md says why each choice is made.
 *
 *   a step (T = 1) of a run of batch B, not exact:
 *     8-bit weights           where B <= q8_batch (the small batches: the weights stream from
 *                             memory at every step, and 8-bit weights are a quarter of floats)
 *     bfloat16 on AMX tiles   where the processor has AMX and AVX512-BF16
 *     bfloat16 (vdpbf16ps)    where it has AVX512-BF16
 *     float32                 elsewhere
 *   the parallel form (T > 1), and an exact step (evaluation):
 *     float32 on AMX tiles    where it has AMX (float16 weights: exact, split into two bfloat16)
 *     float32                 elsewhere
 * The head's weight never takes bfloat16 or 8 bits: its means must land inside a bin (2/255
 * wide), and it is a hundredth of the work. */
#ifndef LINGEN_PLAN_H
#define LINGEN_PLAN_H
#include "io/settings.h"   /* Precision */

typedef struct {
    int bf16;   /* AVX512-BF16: the build has the kernel and the processor the instructions */
    int vnni;   /* AVX512-VNNI (vpdpwssd), for the 8-bit kernel's small batches */
    int amx;    /* AMX-BF16 tiles, and the operating system grants them */
} Caps;

typedef enum { KERNEL_F32, KERNEL_AMX, KERNEL_BF16, KERNEL_AMX_BF16, KERNEL_INT8 } Kernel;

typedef struct {
    Caps caps;
    Precision precision;
    int q8_batch;   /* steps of runs of at most this many images take 8-bit weights (0: none) */
} Plan;

/* The copies of one Linear weight a model holds beside its float32/float16 panels. */
typedef struct { int bf16, amx, q8; } Copies;

/* Runs of batch at most Q8_VNNI_BATCH take 8-bit weights where the processor has AVX512-VNNI
 * but no AMX; with AMX the tiles take batch 2 on. */
#define Q8_VNNI_BATCH 4
#define Q8_AMX_BATCH 1

/* The processor's capabilities, probed once, less those the environment turns off (settings.h). */
Caps plan_caps(void);
/* The plan for caps and a precision: a pure function. */
Plan plan_make(Caps caps, Precision precision);
/* The plan of this process: plan_caps() and the precision of plan_set_precision, or of the
 * environment (settings.h), or auto. */
Plan plan_default(void);
/* --precision: from now on, plan_default's precision (before any model is loaded). */
void plan_set_precision(Precision p);
/* "auto" | "f32" | "bf16" | "int8" -> *p; -1 for another word. */
int plan_parse_precision(const char *s, Precision *p);
const char *plan_precision_name(Precision p);

/* Which copies a weight gets: half, whether the file holds it as float16; head, whether it is
 * the head's. */
Copies plan_copies(const Plan *p, int half, int head);
/* The kernel of a product over T positions of B sequences, exact or not, on a weight that has
 * the copies c. */
Kernel plan_kernel(const Plan *p, Copies c, int T, int B, int exact);
/* "float32", "AMX", "bfloat16", "AMX-BF16" or "int8". */
const char *plan_kernel_name(Kernel k);
#endif
