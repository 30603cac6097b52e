/*
** autocast.c -- mixed precision: the autocast state and the one table that
** says which ops run in the low-precision dtype and which in float32.
**
** Under `em_autocast_set(true, EM_BF16)` (Lua: ember.autocast), ops follow
** PyTorch's CPU autocast lists: the products (matmul, bmm, conv2d, and so
** nn.Linear and nn.Conv2d) cast float32 inputs to bfloat16 and return bfloat16; the ops
** that need range or precision (softmax, log_softmax, layer_norm, the
** losses, the reductions) cast bfloat16 inputs up to float32; elementwise
** ops given one bfloat16 and one float32 operand run in float32 (PyTorch's
** "promote"). Attention (attention.c em_attention) runs in bfloat16 for
** the variants that declare their terms (fused kernel or composition). Every cast is an ordinary differentiable em_to_dtype, so
** float32 parameters stay float32 and their gradients arrive in float32.
** float64 tensors are never touched. The state is per thread, as PyTorch's.
*/
#include "internal.h"

static _Thread_local bool ac_on;
static _Thread_local em_dtype ac_dtype = EM_BF16;

/* An op's autocast policy. */
typedef enum { AC_LOW, AC_F32 } ac_policy;

/* Indexed by em_autocast_op, made from the one list (internal.h). */
static const struct {
  const char *name;
  ac_policy policy;
} AC_OPS[] = {
#define AC_ROW(e, name, policy) [e] = {#name, AC_##policy},
    EM_AUTOCAST_OPS(AC_ROW)
#undef AC_ROW
};
_Static_assert(sizeof AC_OPS / sizeof AC_OPS[0] == EM_AC_NOPS,
               "every autocast op has one policy row");

em_status em_autocast_set(bool enabled, em_dtype dt, bool *was_enabled, em_dtype *was_dt) {
  if (enabled && dt != EM_BF16)
    return em_error(EM_ERR_DTYPE, "autocast: dtype %s is not supported (supported: bfloat16)",
                    em_dtype_name(dt));
  if (was_enabled) *was_enabled = ac_on;
  if (was_dt) *was_dt = ac_dtype;
  ac_on = enabled;
  if (enabled) ac_dtype = dt;
  return EM_OK;
}

bool em_autocast_enabled(em_dtype *dt) {
  if (dt) *dt = ac_dtype;
  return ac_on;
}

em_status em__autocast_op(em_autocast_op op, int n, em_tensor *const *in, em_tensor **out) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  if ((unsigned)op > EM_AC_NONE) return em_error(EM_ERR_ARG, "autocast: unknown op %d", (int)op);
  const bool cast = ac_on && op != EM_AC_NONE;
  for (int i = 0; i < n; i++) {
    em_tensor *x = in[i];
    if (!x) continue;
    em_dtype want = x->dtype;
    if (cast && AC_OPS[op].policy == AC_LOW && x->dtype == EM_F32) want = ac_dtype;
    if (cast && AC_OPS[op].policy == AC_F32 && x->dtype == ac_dtype) want = EM_F32;
    em_status s = want == x->dtype ? (out[i] = em_retain(x), EM_OK) : em_to_dtype(&out[i], x, want);
    if (s) {
      for (int j = 0; j < i; j++) em_release(out[j]), out[j] = NULL;
      return s;
    }
  }
  return EM_OK;
}

bool em__autocast_promotes(em_dtype a, em_dtype b) {
  return ac_on && ((a == ac_dtype && b == EM_F32) || (a == EM_F32 && b == ac_dtype));
}
