/*
** attn_common.h -- helpers shared by the shipped attention variants
** (compiled into each plugin; not part of the installed ABI).
**
**   ac_*  core-op compositions (any backend, differentiable) and call
**         bookkeeping;
**   ra_*  the host "row-range" kernel: exact softmax attention of each
**         query over a few key ranges [lo, hi), flash-style (online softmax,
**         the logsumexp saved, the backward recomputes), so memory is O(L)
**         and time O(sum of range lengths). Standard attention is one range
**         [0, Lk); a sliding window is one range per query; block-sparse is a
**         few ranges per query.
*/
#ifndef ATTN_COMMON_H
#define ATTN_COMMON_H

#include "ember.h"
#include "ember_attention.h"
#include "ember_backend.h"

/* ---- call bookkeeping -------------------------------------------------- */

/* Copies a call for use in backward: retains q, k, v and the masks, and
** clears the pointers that do not outlive the call (options, params). */
void ac_call_keep(em_attn_call *dst, const em_attn_call *src);
void ac_call_drop(em_attn_call *c);
/* Do the call's tensors live in host memory? */
bool ac_host(const em_attn_call *c);
/* Query i's position on the key axis (bottom-right alignment). */
static inline int64_t ac_qpos(const em_attn_call *c, int64_t i) { return i + c->Lk - c->Lq; }

/* ---- core-op compositions ---------------------------------------------- */

/* A bool tensor broadcastable to [B,H,Lq,Lk], true where attending is
** allowed by the causal flag, the key padding mask, the boolean attn mask
** and `extra` (another bool mask or NULL). *allowed = NULL when all is
** allowed. Not differentiable (masks are constants). */
em_status ac_allowed(const em_attn_call *c, em_tensor *extra, em_tensor **allowed);

/* From scores [B,H,Lq,Lk] (scaled, any biases added), applies the additive
** attn mask, the `allowed` mask (may be NULL), a softmax that gives 0 on
** rows that see nothing, and dropout. *probs are the probabilities before
** dropout (for weights; may be NULL), *dropped after. Differentiable. */
em_status ac_softmax(const em_attn_call *c, em_tensor *scores, em_tensor *allowed,
                     em_tensor **probs, em_tensor **dropped);

/* Dense softmax attention of the call as core ops (plus an extra additive
** bias [.., Lq, Lk] and an extra allowed mask, both may be NULL):
** out = dropout(softmax(q k^T * scale + bias)) v. Differentiable; O(L^2). */
em_status ac_dense(const em_attn_call *c, em_tensor *bias, em_tensor *extra_allowed,
                   em_tensor **out, em_tensor **weights);

/* ---- the host row-range kernel ----------------------------------------- */

#define RA_MAX_RANGES 64
/* Writes query i's key ranges, sorted and disjoint, into lo/hi (at most
** RA_MAX_RANGES); returns their number. Causal and masks are applied by the
** kernel on top of the ranges. */
typedef int (*ra_range_fn)(const void *ud, const em_attn_call *c, int64_t i, int64_t *lo,
                           int64_t *hi);
typedef struct ra_spec {
  ra_range_fn ranges;
  const void *ud;
} ra_spec;

/* out [B,H,Lq,dv] and lse float64 [B,H,Lq] are written; weights
** [B,H,Lq,Lk] (zeros outside the ranges, probabilities before dropout)
** when not NULL. All tensors contiguous, in host memory. */
em_status ra_forward(const em_attn_call *c, const ra_spec *rs, em_tensor *out, em_tensor *lse,
                     em_tensor *weights);
/* Writes dq, dk, dv (contiguous, q/k/v's shapes). */
em_status ra_backward(const em_attn_call *c, const ra_spec *rs, em_tensor *dout, em_tensor *out,
                      em_tensor *lse, em_tensor *dq, em_tensor *dk, em_tensor *dv);

/* The whole route-1 glue for a variant whose forward is ra_forward: saved
** state, backward, free. `ud` (ud_size bytes) is copied into the saved
** state so the ranges outlive the call. */
em_status ra_run_forward(const em_attn_call *c, ra_range_fn ranges, const void *ud, size_t ud_size,
                         em_tensor **out, em_tensor **weights, void **saved);
em_status ra_run_backward(void *saved, em_tensor *dout, const bool *needs, em_tensor **grads);
void ra_free_saved(void *saved);

#endif
