/*
** linear.h -- the parts of the linear variant (not installed):
**   linear.c          options, random features, the vtable;
**   linear_kernel.c   the host kernel (prefix sums, O(L) memory) and its backward;
**   linear_compose.c  the same function as core ops (any backend).
*/
#ifndef EMBER_LINEAR_H
#define EMBER_LINEAR_H

#include "ember_attention.h"

#include <string.h>

static inline bool is_favor(const em_attn_options *o) {
  return strcmp(em_attn_opt_str(o, "feature_map"), "favor") == 0;
}

/* m positive orthogonal random features of dimension d into w [m, d]
** (row-major float64), from the seeded global generator. */
em_status lin_draw_features(int64_t m, int64_t d, double *w);

/* What the host kernel keeps between forward and backward. */
typedef struct lin_state {
  em_attn_call c;       /* kept: q, k, v, key padding */
  bool favor;
  int64_t m;            /* feature dim */
  double eps, xs;       /* xs = sqrt(scale) for favor */
  double *w;            /* favor features [m, dk] */
  double *den;          /* [B,H,Lq] */
  em_tensor *out;
} lin_state;

void lin_state_free(void *p);
/* out [B,H,Lq,dv] (and weights [B,H,Lq,Lk] when not NULL) from st->c. */
em_status lin_run(lin_state *st, em_tensor *out, em_tensor *weights);
/* dq, dk, dv from dout. */
em_status lin_backward_run(const lin_state *st, em_tensor *dout, em_tensor *dq, em_tensor *dk,
                           em_tensor *dv);
/* the composed route: the variant as core ops. */
em_status lin_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights);

#endif
