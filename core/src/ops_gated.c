/*
** ops_gated.c -- gated activations, act(gate) * up: the gated linear units
** of SwiGLU (SiLU) and GeGLU (exact GELU) in Llama's and T5's FFNs.
**
** Why an op of its own: unary then mul reads and writes the [tokens, d_ff]
** activations three times forward and, with their gradients, five times
** backward, and computes the activation twice (its derivative recomputes
** it). A backend with em_backend.gated does each direction in one pass. The
** element rules stay where they are (ember_unary_rules.h, and the CPU's
** GELU); this file only decides which path runs. Without the kernels, or
** for operands a one-pass kernel does not take (broadcast shapes, mixed
** dtypes or devices), the op is the composition it replaces, with its
** autograd.
*/
#include "internal.h"

#include <stdlib.h>

typedef struct gated_ctx { em_unary_op act; } gated_ctx;

static const char *gated_name(em_unary_op act) { return act == EM_SILU ? "swiglu" : "geglu"; }

/* saved: gate, up (contiguous) */
static em_status gated_backward(em_node *n, em_tensor *gy, em_tensor **gx) {
  const gated_ctx *c = n->ctx;
  em_tensor *g = NULL, *dgate = NULL, *dup = NULL;
  em_tensor *gate = n->saved[0], *up = n->saved[1];
  const char *name = gated_name(c->act);
  em_status s = em__contig(&g, gy);
  if (!s && n->needs_grad[0])
    s = em__new(&dgate, gate->ndim, gate->shape, gate->dtype, gate->device, name);
  if (!s && n->needs_grad[1]) s = em__new(&dup, up->ndim, up->shape, up->dtype, up->device, name);
  if (!s) {
    s = em__be(gate)->gated_backward(gate->device.index, c->act, gate->dtype, em_numel(gate),
                                     dgate ? em_data(dgate) : NULL, dup ? em_data(dup) : NULL,
                                     em_data(g), em_data(gate), em_data(up));
    if (s) s = em__kernel_fail(name, s);
  }
  em_release(g);
  if (s) {
    em_release(dgate);
    em_release(dup);
    return s;
  }
  gx[0] = dgate;
  gx[1] = dup;
  return EM_OK;
}

static const em_opdef GATED_DEFS[2] = {
  {"swiglu", gated_backward, free},
  {"geglu", gated_backward, free},
};

/* What a one-pass kernel takes: one shape, dtype and device, a float dtype. */
static bool gated_fused(const em_backend *be, const em_tensor *gate, const em_tensor *up) {
  if (!be->gated || !be->gated_backward) return false;
  if (gate->dtype != up->dtype || !em_device_eq(gate->device, up->device)) return false;
  if (gate->dtype != EM_F32 && gate->dtype != EM_F64 && gate->dtype != EM_BF16) return false;
  if (gate->ndim != up->ndim) return false;
  for (int d = 0; d < gate->ndim; d++)
    if (gate->shape[d] != up->shape[d]) return false;
  return true;
}

static em_status gated_composed(em_tensor **out, em_unary_op act, em_tensor *gate, em_tensor *up) {
  em_tensor *a = NULL;
  EM_TRY(em_unary(&a, act, gate, 0, 0));
  em_status s = em_mul(out, a, up);
  em_release(a);
  return s;
}

em_status em_gated(em_tensor **out, em_unary_op act, em_tensor *gate, em_tensor *up) {
  if (!out || !gate || !up) return em_error(EM_ERR_ARG, "gated: NULL argument");
  *out = NULL;
  if (act != EM_SILU && act != EM_GELU)
    return em_error(EM_ERR_ARG, "gated: the activation must be silu or gelu, got %s",
                    (unsigned)act < EM_NUNARY ? em_unary_name(act) : "an unknown op");
  const em_backend *be = em__be(gate);
  if (!gated_fused(be, gate, up)) return gated_composed(out, act, gate, up);
  const char *name = gated_name(act);
  em_tensor *gc = NULL, *uc = NULL, *y = NULL;
  em_status s = em__contig(&gc, gate);
  if (!s) s = em__contig(&uc, up);
  if (!s) s = em__new(&y, gate->ndim, gate->shape, gate->dtype, gate->device, name);
  if (!s) {
    s = be->gated(gate->device.index, act, gate->dtype, em_numel(gate), em_data(y), em_data(gc),
                  em_data(uc));
    if (s) s = em__kernel_fail(name, s);
  }
  em_tensor *inputs[2] = {gate, up};
  if (!s && em_autograd_needed(2, inputs)) {
    gated_ctx *c = malloc(sizeof *c);
    if (!c) {
      s = em_error(EM_ERR_OOM, "%s: out of memory recording autograd", name);
    } else {
      c->act = act;
      em_tensor *saved[2] = {gc, uc};
      s = em_autograd_record(y, &GATED_DEFS[act == EM_SILU ? 0 : 1], 2, inputs, 2, saved, c);
    }
  }
  em_release(gc);
  em_release(uc);
  if (s) {
    em_release(y);
    return s;
  }
  *out = y;
  return EM_OK;
}
