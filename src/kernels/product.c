/* product.h */
#include "product.h"

#include "matmul_amx.h"
#include "matmul_q8.h"

void product(Kernel k, float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act,
             Rounded r) {
    switch (k) {
    case KERNEL_INT8:
        matmul_q8(out, x, W.q8, b, rows, n_in, n_out, act);
        return;
    case KERNEL_AMX:
    case KERNEL_AMX_BF16: {
        int bf16 = k == KERNEL_AMX_BF16;
        const uint16_t *x16 = bf16 && n_in % MATMUL_ROUNDED_ALIGN == 0 ? r.x16 : NULL;
        uint16_t *out16 = bf16 && n_out % MATMUL_ROUNDED_ALIGN == 0 ? r.out16 : NULL;
        matmul_amx(out, x, W.amx, b, rows, n_in, n_out, act, bf16, x16, out16);
        return;
    }
    case KERNEL_BF16:
        matmul_bf16(out, x, W, b, rows, n_in, n_out, act, r);
        return;
    case KERNEL_F32:
        matmul_ex(out, x, W, b, rows, n_in, n_out, act);
        return;
    }
}
