/*
** attention_reuse.c -- fused attention results kept for a recompute
** (em_attn_tape in ember_attention.h), for activation checkpointing
** (lua/ember/nn/activation_checkpoint.lua): the checkpointed region's first
** forward records each fused attention call's out and lse, in call order;
** its recompute in the backward gets them back instead of running the
** forward kernel again (O(L^2) work for O(L*d) bytes kept), and still
** records the autograd node, so the backward is the same.
**
** The one rule, here: a recorded call is handed back only when the kernel
** would see the same call -- the same variant and options, the same
** programs (by content), the same sizes and scalars (scale, causal,
** dropout's seed and offset, ...),
** and the same sampled values of every tensor it reads (q, k, v, the mask
** bias, the key padding, Shaw's tables, the captures) -- and when its out
** was not written in place since. Anything else computes, as without a
** tape. Only host-memory backends record (the values are sampled in
** place). Tapes stack per thread (a checkpoint inside a recompute records
** while the outer one replays): every replaying tape on the stack advances
** with each call, every recording one keeps it.
*/
#include "internal.h"
#include "ember_attention.h"

#include <string.h>

#define KEY_MAX EM__ATTN_KEY_MAX
#define SAMPLES 256    /* elements sampled from each input tensor */

typedef struct tape_entry {
  uint64_t key[KEY_MAX];
  int n_key;
  em_tensor *out, *lse;
  uint64_t version; /* out's storage version when recorded */
} tape_entry;

struct em_attn_tape {
  int mode; /* 0: not on the stack; EM_ATTN_TAPE_RECORD or EM_ATTN_TAPE_REPLAY */
  em_attn_tape *below;
  tape_entry *e;
  int n, cap, cursor;
  em_attn_tape_stats stats;
};

static _Thread_local em_attn_tape *g_top;

em_status em_attn_tape_new(em_attn_tape **out) {
  *out = calloc(1, sizeof **out);
  return *out ? EM_OK : em_error(EM_ERR_OOM, "attention tape: out of memory");
}

void em_attn_tape_clear(em_attn_tape *t) {
  if (!t) return;
  for (int i = 0; i < t->n; i++) em_release(t->e[i].out), em_release(t->e[i].lse);
  free(t->e);
  t->e = NULL, t->n = t->cap = t->cursor = 0;
}

void em_attn_tape_free(em_attn_tape *t) {
  if (!t) return;
  em_attn_tape_pop(t);
  em_attn_tape_clear(t);
  free(t);
}

em_status em_attn_tape_push(em_attn_tape *t, int mode) {
  if (mode != EM_ATTN_TAPE_RECORD && mode != EM_ATTN_TAPE_REPLAY)
    return em_error(EM_ERR_ARG, "attention tape: unknown mode %d", mode);
  if (t->mode) return em_error(EM_ERR_ARG, "attention tape: already recording or replaying");
  t->mode = mode, t->cursor = 0;
  t->below = g_top, g_top = t;
  return EM_OK;
}

void em_attn_tape_pop(em_attn_tape *t) {
  if (!t || !t->mode) return;
  bool on = false;
  for (em_attn_tape *p = g_top; p; p = p->below) on = on || p == t;
  /* t and whatever a failed region left above it come off */
  while (on && g_top) {
    em_attn_tape *p = g_top;
    g_top = p->below;
    p->mode = 0, p->below = NULL;
    if (p == t) break;
  }
  t->mode = 0;
}

void em_attn_tape_get_stats(const em_attn_tape *t, em_attn_tape_stats *out) {
  *out = t->stats;
  out->kept = (uint64_t)t->n;
}

bool em__attn_tape_active(void) { return g_top != NULL; }

int em_attn_tape_depth(void) {
  int n = 0;
  for (const em_attn_tape *p = g_top; p; p = p->below) n++;
  return n;
}

/* A hash of up to SAMPLES elements spread over t (host, any strides: the
** samples are at the same logical indices whatever the layout, as the
** fused kernel reads heads where they lie). */
static uint64_t sample_hash(const em_tensor *t) {
  uint64_t h = 1469598103934665603ull;
  const int64_t n = em_numel(t);
  const size_t es = em_dtype_size(t->dtype);
  const unsigned char *p = em_data(t);
  const int64_t m = n < SAMPLES ? n : SAMPLES;
  for (int64_t s = 0; s < m; s++) {
    int64_t i = m > 1 ? s * (n - 1) / (m - 1) : 0, at = 0;
    for (int d = t->ndim - 1; d >= 0; d--) { /* logical index -> element offset */
      at += i % t->shape[d] * t->stride[d];
      i /= t->shape[d];
    }
    for (size_t b = 0; b < es; b++) h = (h ^ p[at * (int64_t)es + (int64_t)b]) * 1099511628211ull;
  }
  return h;
}

/* A tensor the kernel reads: presence, dtype, shape and sampled values.
** false when its values cannot be sampled (then nothing is recorded). */
static bool key_tensor(uint64_t *k, int *n, const em_tensor *t) {
  if (!t) {
    k[(*n)++] = 0;
    return true;
  }
  if (!em_backend_of(t)->host_memory || *n + 3 + t->ndim > KEY_MAX) return false;
  k[(*n)++] = 1 + (uint64_t)t->dtype;
  k[(*n)++] = (uint64_t)t->ndim;
  for (int d = 0; d < t->ndim; d++) k[(*n)++] = (uint64_t)t->shape[d];
  k[(*n)++] = sample_hash(t);
  return true;
}

static uint64_t dbits(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

static uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * 1099511628211ull; }

/* A traced program by its content (a variant's programs may be made anew
** for each call): instructions, constants, outputs. */
static uint64_t expr_hash(const em_expr *e) {
  if (!e) return 0;
  uint64_t h = mix(1469598103934665603ull, (uint64_t)e->n);
  for (int i = 0; i < e->n; i++) {
    const em_xins *x = &e->ins[i];
    h = mix(mix(mix(h, (uint64_t)x->op), (uint64_t)x->cap), dbits(x->k));
    for (int d = 0; d < EM_EXPR_MAX_DIMS; d++) h = mix(h, (uint64_t)x->arg[d]);
  }
  h = mix(h, (uint64_t)e->n_out);
  for (int i = 0; i < e->n_out; i++) h = mix(h, (uint64_t)e->out[i]);
  return h;
}

int em__attn_tape_key(uint64_t *k, const em_attn_call *c, const em_attention_args *a,
                      em_tensor *const *ins, int n_ins) {
  int n = 0;
  const uint64_t head[] = {
      (uint64_t)(uintptr_t)c->variant, (uint64_t)(uintptr_t)c->options,
      /* the backend by slot: its vtable pointer is the profiler's while one records */
      (uint64_t)c->q->device.backend, (uint64_t)c->q->device.index, (uint64_t)a->dtype,
      (uint64_t)a->B, (uint64_t)a->H, (uint64_t)a->Lq, (uint64_t)a->Lk, (uint64_t)a->dk, (uint64_t)a->dv,
      (uint64_t)a->Hkv, (uint64_t)(a->kv_rows ? a->kv_rows : a->Lk), (uint64_t)a->causal,
      dbits(a->scale), dbits(a->dropout_p), a->seed, a->offset,
      (uint64_t)a->bias_stride[0], (uint64_t)a->bias_stride[1], (uint64_t)a->bias_stride[2],
      (uint64_t)a->bias_stride[3], (uint64_t)a->n_rel, (uint64_t)(a->rel_row != NULL),
      /* the backward's programs (score_grad, sink_grad) are the recompute's own */
      expr_hash(a->score_mod), expr_hash(a->mask_mod), expr_hash(a->sink), (uint64_t)a->n_caps,
      (uint64_t)a->map_grain,
      (uint64_t)a->map_nq, (uint64_t)a->map_nk, (uint64_t)a->map_sb, (uint64_t)a->map_sh};
  const int nh = (int)(sizeof head / sizeof head[0]);
  memcpy(k, head, sizeof head);
  n = nh;
  /* k and v read in place from a cache are not sampled: such calls do not record */
  if (a->kv_rows && a->kv_rows != a->Lk) return 0;
  for (int i = 0; i < n_ins; i++)
    if (!key_tensor(k, &n, ins[i])) return 0;
  return n;
}

bool em__attn_tape_take(const uint64_t *key, int n_key, em_tensor **out, em_tensor **lse) {
  bool found = false;
  for (em_attn_tape *t = g_top; t; t = t->below) {
    if (t->mode != EM_ATTN_TAPE_REPLAY) continue;
    /* the next entry; a call the recompute skips is passed over */
    int hit = -1;
    for (int i = t->cursor; n_key && i < t->n && hit < 0; i++) {
      const tape_entry *e = &t->e[i];
      if (e->n_key == n_key && !memcmp(e->key, key, (size_t)n_key * sizeof *key)) hit = i;
    }
    if (hit < 0) {
      t->stats.missed++;
      continue;
    }
    tape_entry *e = &t->e[hit];
    t->cursor = hit + 1;
    if (e->out->storage->version != e->version) { /* written in place since */
      t->stats.missed++;
      continue;
    }
    t->stats.reused++;
    if (!found) {
      *out = em_retain(e->out), *lse = em_retain(e->lse);
      found = true;
    }
  }
  return found;
}

void em__attn_tape_put(const uint64_t *key, int n_key, em_tensor *out, em_tensor *lse) {
  if (!n_key) return;
  for (em_attn_tape *t = g_top; t; t = t->below) {
    if (t->mode != EM_ATTN_TAPE_RECORD) continue;
    if (t->n == t->cap) {
      const int cap = t->cap ? 2 * t->cap : 8;
      tape_entry *e = realloc(t->e, (size_t)cap * sizeof *e);
      if (!e) continue; /* not kept: the recompute computes it */
      t->e = e, t->cap = cap;
    }
    tape_entry *e = &t->e[t->n++];
    memcpy(e->key, key, (size_t)n_key * sizeof *key);
    e->n_key = n_key;
    e->out = em_retain(out), e->lse = em_retain(lse);
    e->version = out->storage->version;
    t->stats.recorded++;
  }
}
