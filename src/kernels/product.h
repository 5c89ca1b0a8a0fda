/* A Linear layer's product on the kernel the plan chose (plan.h): the one place that calls the
 * three kernels. */
#ifndef LINGEN_PRODUCT_H
#define LINGEN_PRODUCT_H
#include "matmul.h"
#include "plan.h"

/* out[rows, n_out] = x[rows, n_in] W^T + b (b may be NULL), then act, on kernel k, whose copy W
 * must hold (plan_copies); r: the bfloat16 kernels' rounded input and output (matmul.h). */
void product(Kernel k, float *out, const float *x, Packed W, const float *b, int rows, int n_in, int n_out, int act,
             Rounded r);
#endif
