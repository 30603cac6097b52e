/*
** attention_sdpa.c -- the fused route of em_attention: a variant's declaration
** (em_attn_decl) run by the backend's fused kernel (attention_forward /
** attention_backward in ember_backend.h) as one autograd op, or by the
** core's composition (attention_compose.c) when the kernel does not cover
** the call. Plugins never see the backend: this file is the one place that
** turns a declaration into em_attention_args.
**
** What the kernel gets, on q's device: q, k, v where they lie when the
** backend reads strided heads (em_backend.attention_strided_heads), with
** out, dq, dk and dv laid out as [B,L,H,d] and handed back as [B,H,L,d]
** views of it (merging the heads, nn.MultiHeadAttention's
** transpose+reshape, is then a view, and so are the gradients' way back
** through its split), else contiguous q, k, v, out and gradients; the attn mask as
** an additive bias with broadcast dims kept at stride 0; a traced variant's
** programs, or the declaration's terms lowered to programs
** (attention_lower.c), with their captures and the mask's block map; for
** Shaw's terms, the table row of every relative position (int64
** [Lq+Lk-1]) and the two tables.
*/
#include "internal.h"
#include "ember_attention.h"

#include <math.h>

static em_attn_route_counts g_routes;

void em_attention_route_counts(em_attn_route_counts *out) {
  out->fused = __atomic_load_n(&g_routes.fused, __ATOMIC_RELAXED);
  out->composed = __atomic_load_n(&g_routes.composed, __ATOMIC_RELAXED);
  out->forward = __atomic_load_n(&g_routes.forward, __ATOMIC_RELAXED);
  out->kv_in_place = __atomic_load_n(&g_routes.kv_in_place, __ATOMIC_RELAXED);
}

void em_attention_count_route(int route) {
  if (route >= 0 && route <= 2) em__attn_count(route);
}

void em__attn_count(int route) {
  uint64_t *p = route == 0 ? &g_routes.fused : route == 1 ? &g_routes.composed : &g_routes.forward;
  __atomic_add_fetch(p, 1, __ATOMIC_RELAXED);
}

/* Checks a declaration against the call's params and sizes. */
em_status em__attn_decl_check(const em_attn_call *c, const em_attn_decl *d) {
  const char *vn = c->variant->name;
  if (d->bias < EM_ATTN_BIAS_NONE || d->bias > EM_ATTN_BIAS_SHAW || d->rel < EM_ATTN_REL_CLIP ||
      d->rel > EM_ATTN_REL_T5 || d->mask.kind < EM_ATTN_MASK_NONE ||
      d->mask.kind > EM_ATTN_MASK_BLOCKS || d->route < EM_ATTN_ROUTE_AUTO ||
      d->route > EM_ATTN_ROUTE_COMPOSED)
    return em_error(EM_ERR_PLUGIN, "attention '%s': declaration with an unknown kind", vn);
  if (d->mask.left < 0 || d->mask.right < 0 || d->mask.local < 0 || d->mask.global < 0 ||
      (d->mask.kind == EM_ATTN_MASK_BLOCKS && d->mask.block <= 0))
    return em_error(EM_ERR_PLUGIN, "attention '%s': declared block mask has negative sizes", vn);
  const int64_t n = em_attn_decl_rows(d);
  if ((d->bias == EM_ATTN_BIAS_TABLE || d->bias == EM_ATTN_BIAS_SHAW) &&
      (n <= 0 || d->max_distance < 0 || (d->rel == EM_ATTN_REL_T5 && (d->max_distance < 1 || d->num_buckets < 2))))
    return em_error(EM_ERR_PLUGIN, "attention '%s': declared relative table has %lld rows", vn,
                    (long long)n);
  struct { int idx; int64_t cols; const char *what; } want[3] = {
    {d->bias == EM_ATTN_BIAS_TABLE ? d->table_param : -1, c->H, "bias table [rows, heads]"},
    {d->bias == EM_ATTN_BIAS_SHAW ? d->rel_k_param : -1, c->dims.dk, "rel_k [rows, dk]"},
    {d->bias == EM_ATTN_BIAS_SHAW ? d->rel_v_param : -1, c->dims.dv, "rel_v [rows, dv]"}};
  if (d->bias == EM_ATTN_BIAS_TABLE && d->table_param < 0)
    return em_error(EM_ERR_PLUGIN, "attention '%s': a table bias without its table", vn);
  if (d->bias == EM_ATTN_BIAS_SHAW && d->rel_k_param < 0)
    return em_error(EM_ERR_PLUGIN, "attention '%s': a Shaw bias without rel_k", vn);
  for (int t = 0; t < 3; t++) {
    if (want[t].idx < 0) continue;
    char got[200];
    if (want[t].idx >= c->n_params)
      return em_error(EM_ERR_ARG, "attention '%s': the declared %s is param %d, but the call has %d",
                      vn, want[t].what, want[t].idx + 1, c->n_params);
    em_tensor *p = c->params[want[t].idx];
    if (p->ndim != 2 || p->shape[0] != n || p->shape[1] != want[t].cols)
      return em_error(EM_ERR_SHAPE, "attention '%s': %s must be [%lld, %lld], got %s", vn,
                      want[t].what, (long long)n, (long long)want[t].cols, em__desc(p, got, sizeof got));
  }
  return EM_OK;
}

typedef struct sdpa_saved {
  em_tensor *q, *k, *v, *out, *lse, *bias, *kp, *rel_row;
  em_tensor *tab[2];   /* Shaw's rel_k and rel_v (detached) or NULL */
  int tab_param[2];    /* their indices in the params, or -1 */
  /* a traced variant: its captures as the kernel reads them, the block map */
  em_tensor *xt[EM_EXPR_MAX_CAPS], *xmap;
  em_xcap xcap[EM_EXPR_MAX_CAPS];
  int xparam[EM_EXPR_MAX_CAPS]; /* the param a capture is, or -1 */
  em_attention_args args;
  bool own_progs;      /* args' programs retained by fill_mods: the backward runs them after the
                          variant instance that made them may be gone (a Lua variant's Attention
                          collected, or traced again, between forward and backward) */
  const em_backend *be;
  int device;
} sdpa_saved;

static void sdpa_free(void *p) {
  sdpa_saved *s = p;
  if (!s) return;
  em_release(s->q), em_release(s->k), em_release(s->v), em_release(s->out), em_release(s->lse);
  em_release(s->bias), em_release(s->kp), em_release(s->rel_row);
  for (int t = 0; t < 2; t++) em_release(s->tab[t]);
  for (int t = 0; t < EM_EXPR_MAX_CAPS; t++) em_release(s->xt[t]);
  em_release(s->xmap);
  /* the programs fill_mods retained */
  const em_expr *prog[5] = {s->args.score_mod, s->args.score_grad, s->args.mask_mod, s->args.sink,
                            s->args.sink_grad};
  if (s->own_progs)
    for (int i = 0; i < 5; i++) em_expr_free((em_expr *)prog[i]);
  free(s);
}

/* The attn mask as an additive bias without expanding broadcast dims:
** dims the user broadcast (stride 0) are narrowed to 1 and get stride 0. */
static em_status make_bias(const em_attn_call *c, em_tensor **bias, int64_t stride[4]) {
  *bias = NULL;
  memset(stride, 0, 4 * sizeof stride[0]);
  if (!c->mask) return EM_OK;
  const em_dtype cdt = c->q->dtype == EM_BF16 ? EM_F32 : c->q->dtype; /* the kernel's compute dtype */
  em_tensor *m = em_retain(c->mask), *t = NULL;
  em_status s = EM_OK;
  for (int d = 0; d < 4 && s == EM_OK; d++)
    if (m->stride[d] == 0 && m->shape[d] > 1) {
      s = em_narrow(&t, m, d, 0, 1);
      em_release(m);
      m = t;
    }
  if (s == EM_OK && m->dtype == EM_BOOL) {
    em_tensor *z = NULL, *nm = NULL;
    s = em_zeros(&z, 4, m->shape, cdt, c->q->device);
    if (s == EM_OK) s = em_unary(&nm, EM_NOT, m, 0, 0);
    if (s == EM_OK) s = em_masked_fill(bias, z, nm, -INFINITY);
    em_release(z), em_release(nm);
  } else if (s == EM_OK && m->dtype != cdt) {
    s = em_to_dtype(bias, m, cdt);
  } else if (s == EM_OK) {
    s = em_contiguous(bias, m); /* may alias the caller's mask: the kernel only reads it */
  }
  em_release(m);
  if (s != EM_OK) return s;
  int64_t st = 1;
  for (int d = 3; d >= 0; d--) {
    stride[d] = (*bias)->shape[d] == 1 ? 0 : st;
    st *= (*bias)->shape[d];
  }
  return EM_OK;
}

/* Shaw's terms into the kernel's arguments (tensors kept in sv); the
** other declared terms are programs (attention_lower.c). */
static em_status fill_shaw(sdpa_saved *sv, const em_attn_call *c, const em_attn_decl *d) {
  em_attention_args *a = &sv->args;
  sv->tab_param[0] = sv->tab_param[1] = -1;
  if (d->bias != EM_ATTN_BIAS_SHAW) return EM_OK;
  const int64_t nr = c->Lq + c->Lk - 1;
  int64_t *rows = malloc((size_t)nr * sizeof *rows);
  if (!rows) return em_error(EM_ERR_OOM, "attention: out of memory");
  for (int64_t n = 0; n < nr; n++) rows[n] = em_attn_rel_row(d, n - (c->Lk - 1));
  em_status s = em_from_host(&sv->rel_row, 1, &nr, EM_I64, rows, c->q->device);
  free(rows);
  EM_TRY(s);
  a->rel_row = em_data(sv->rel_row);
  a->n_rel = em_attn_decl_rows(d);
  sv->tab_param[0] = d->rel_k_param, sv->tab_param[1] = d->rel_v_param;
  for (int t = 0; t < 2; t++)
    if (sv->tab_param[t] >= 0) EM_TRY(em_contiguous(&sv->tab[t], c->params[sv->tab_param[t]]));
  a->rel_k = sv->tab[0] ? em_data(sv->tab[0]) : NULL;
  a->rel_v = sv->tab[1] ? em_data(sv->tab[1]) : NULL;
  return EM_OK;
}

/* Block maps are made on a grid of this many positions: the kernels' tiles
** (16 to 128 a side, powers of two) are whole numbers of cells. */
#define XMAP_GRAIN 16

/* The mask's block map on q's device. It is made on the host: a device
** backend's captures that the mask reads are copied back for it (document
** ids: O(B*L) bytes), and the map (O(B*L^2/grain^2) bytes) goes to the
** device. */
static em_status xmap_for(sdpa_saved *sv, const em_attn_call *c, const em_attn_mods *m) {
  em_attention_args *a = &sv->args;
  if (em_backend_of(c->q)->host_memory)
    return em__xmap_get(m->mask, sv->xcap, c->B, c->H, c->Lq, c->Lk, XMAP_GRAIN, &sv->xmap,
                        &a->map_nq, &a->map_nk, &a->map_sb, &a->map_sh);
  em_xcap hc[EM_EXPR_MAX_CAPS];
  em_tensor *ht[EM_EXPR_MAX_CAPS] = {NULL}, *hmap = NULL;
  em_device cpu;
  em_status s = em_cpu_device(&cpu);
  for (int i = 0; i < m->n_caps; i++) {
    hc[i] = sv->xcap[i];
    hc[i].data = NULL; /* captures the mask does not read stay on the device */
  }
  for (int i = 0; i < m->mask->n && s == EM_OK; i++) {
    const int cap = m->mask->ins[i].cap;
    if (m->mask->ins[i].op != EM_XOP_LOAD || ht[cap]) continue;
    s = em_to_device(&ht[cap], sv->xt[cap], cpu);
    if (s == EM_OK) hc[cap].data = em_data(ht[cap]);
  }
  if (s == EM_OK)
    s = em__xmap_get(m->mask, hc, c->B, c->H, c->Lq, c->Lk, XMAP_GRAIN, &hmap, &a->map_nq, &a->map_nk,
                     &a->map_sb, &a->map_sh);
  if (s == EM_OK) s = em_to_device(&sv->xmap, hmap, c->q->device);
  for (int i = 0; i < EM_EXPR_MAX_CAPS; i++) em_release(ht[i]);
  em_release(hmap);
  return s;
}

/* Programs (a traced variant's, or a declaration's lowered) and their
** captures into the kernel's arguments: each capture contiguous on q's
** device, floats in the compute dtype, integers as int64; the mask's block
** map. */
static em_status fill_mods(sdpa_saved *sv, const em_attn_call *c, const em_attn_mods *m) {
  em_attention_args *a = &sv->args;
  const em_dtype cdt = c->q->dtype == EM_BF16 ? EM_F32 : c->q->dtype;
  const char *vn = c->variant->name;
  if (m->n_caps < 0 || m->n_caps > EM_EXPR_MAX_CAPS)
    return em_error(EM_ERR_ARG, "attention '%s': %d captured tensors", vn, m->n_caps);
  for (int i = 0; i < m->n_caps; i++) {
    const int p = m->cap_param[i];
    em_tensor *t = p >= 0 ? (p < c->n_params ? c->params[p] : NULL) : m->cap_input[i];
    const char *name = m->cap_name[i] ? m->cap_name[i] : "?";
    char got[160];
    if (!t) return em_error(EM_ERR_ARG, "attention '%s': captured tensor '%s' was not given", vn, name);
    if (t->ndim != m->cap_ndim[i])
      return em_error(EM_ERR_SHAPE, "attention '%s': captured tensor '%s' is indexed with %d indices, got %s",
                      vn, name, m->cap_ndim[i], em__desc(t, got, sizeof got));
    if (!em_device_eq(t->device, c->q->device))
      return em_error(EM_ERR_DEVICE, "attention '%s': captured tensor '%s' is %s, q is on another device",
                      vn, name, em__desc(t, got, sizeof got));
    const bool is_int = t->dtype == EM_I64 || t->dtype == EM_BOOL;
    const em_dtype want = is_int ? EM_I64 : cdt;
    if (t->dtype != want) EM_TRY(em_to_dtype(&sv->xt[i], t, want));
    else EM_TRY(em_contiguous(&sv->xt[i], t));
    em_xcap *x = &sv->xcap[i];
    x->data = em_data(sv->xt[i]), x->dtype = want, x->ndim = t->ndim, x->name = name;
    for (int d = 0; d < t->ndim; d++) x->shape[d] = t->shape[d];
    sv->xparam[i] = p;
  }
  a->score_mod = m->score, a->score_grad = m->score_grad, a->mask_mod = m->mask;
  a->sink = m->sink, a->sink_grad = m->sink_grad;
  em_expr_retain(m->score), em_expr_retain(m->score_grad), em_expr_retain(m->mask);
  em_expr_retain(m->sink), em_expr_retain(m->sink_grad);
  sv->own_progs = true;
  a->n_caps = m->n_caps, a->caps = sv->xcap;
  if (m->mask) {
    EM_TRY(xmap_for(sv, c, m));
    a->block_map = em_data(sv->xmap);
    a->map_grain = XMAP_GRAIN;
  }
  return EM_OK;
}

/* Rows per head of k or v [B, Hkv, L, d] whose rows are contiguous and
** whose heads are equally far apart, as the filled part of a KV cache (a
** narrow of [B, Hkv, capacity, d] along L) is: L when contiguous, the
** capacity for such a narrow, 0 for any other layout. */
static int64_t kv_rows_of(const em_tensor *t) {
  if (t->ndim != 4) return 0;
  if (em_is_contiguous(t)) return t->shape[2];
  const int64_t B = t->shape[0], Hkv = t->shape[1], L = t->shape[2], d = t->shape[3];
  if ((t->stride[3] != 1 && d > 1) || (t->stride[2] != d && L > 1)) return 0;
  int64_t rows = Hkv > 1 ? t->stride[1] / d : B > 1 ? t->stride[0] / d : L;
  if (rows < L || (Hkv > 1 && t->stride[1] != rows * d) || (B > 1 && t->stride[0] != Hkv * rows * d))
    return 0;
  return rows;
}

/* Can a kernel with attention_strided_heads read t [B,H,L,d] where it
** lies? Unit stride in the last dim, none negative, and not every stride
** over B, H and L 0 (the args' code for contiguous) past one row. */
static bool heads_in_place(const em_tensor *t) {
  const int64_t *st = t->stride, *sh = t->shape;
  if (t->ndim != 4 || (sh[3] > 1 && st[3] != 1)) return false;
  for (int d = 0; d < 3; d++)
    if (st[d] < 0) return false;
  return st[0] || st[1] || st[2] || sh[0] * sh[1] * sh[2] <= 1;
}

/* t as the kernel reads it: itself with its strides over B, H, L in st
** where the backend can read it there, else a contiguous copy (st 0). */
static em_status heads_input(em_tensor **out, em_tensor *t, const em_backend *be, int64_t st[3]) {
  st[0] = st[1] = st[2] = 0;
  if (!be->attention_strided_heads || !heads_in_place(t)) return em_contiguous(out, t);
  for (int d = 0; d < 3; d++) st[d] = t->stride[d];
  *out = em_retain(t);
  return EM_OK;
}

/* A new [B,H,L,d] tensor for the kernel to write: a view of [B,L,H,d]
** storage with its strides in st where the backend writes strided heads,
** else contiguous (st 0). */
static em_status heads_output(em_tensor **out, const int64_t shape[4], em_dtype dt, em_device dev,
                              const em_backend *be, int64_t st[3]) {
  st[0] = st[1] = st[2] = 0;
  if (!be->attention_strided_heads) return em_empty(out, 4, shape, dt, dev);
  const int64_t lh[4] = {shape[0], shape[2], shape[1], shape[3]};
  em_tensor *t = NULL;
  EM_TRY(em_empty(&t, 4, lh, dt, dev));
  em_status s = em_transpose(out, t, 1, 2);
  em_release(t);
  if (s == EM_OK)
    for (int d = 0; d < 3; d++) st[d] = (*out)->stride[d];
  return s;
}

/* sv->k and sv->v as the kernel reads them: where they lie on a backend
** that reads strided heads; on another with host memory, a forward without
** backward reads a KV cache in place (args.kv_rows); every other call gets
** contiguous copies. */
static em_status kv_inputs(sdpa_saved *sv, const em_attn_call *c, const em_backend *be) {
  const int64_t rows = kv_rows_of(c->k);
  if (be->attention_strided_heads) {
    EM_TRY(heads_input(&sv->k, c->k, be, sv->args.k_stride));
    EM_TRY(heads_input(&sv->v, c->v, be, sv->args.v_stride));
    /* a KV cache's filled part, read in place */
    if (rows > c->Lk && sv->k == c->k && sv->v == c->v)
      __atomic_add_fetch(&g_routes.kv_in_place, 1, __ATOMIC_RELAXED);
    return EM_OK;
  }
  if (be->host_memory && !c->need_grad && rows > 0 && rows == kv_rows_of(c->v)) {
    sv->k = em_retain(c->k), sv->v = em_retain(c->v);
    sv->args.kv_rows = rows;
    if (rows != c->Lk) __atomic_add_fetch(&g_routes.kv_in_place, 1, __ATOMIC_RELAXED);
    return EM_OK;
  }
  EM_TRY(em_contiguous(&sv->k, c->k));
  return em_contiguous(&sv->v, c->v);
}

/* The fused forward; EM_ERR_UNSUPPORTED (with nothing allocated) when the
** backend has no fused kernel or its kernel declines. */
em_status em__sdpa_forward(const em_attn_call *c, const em_attn_decl *d, em_tensor **out,
                           void **saved) {
  const em_backend *be = em_backend_of(c->q);
  if (!be->attention_forward || !be->attention_backward)
    return em_error(EM_ERR_UNSUPPORTED, "the %s backend has no fused attention kernel", be->name);
  /* grouped heads read in place where the kernels can (a capability);
  ** other backends' kernels get the call composed, heads repeated */
  if (c->Hkv != c->H && !be->attention_grouped_kv)
    return em_error(EM_ERR_UNSUPPORTED, "the %s backend's fused kernel does not read grouped heads", be->name);
  sdpa_saved *sv = calloc(1, sizeof *sv);
  if (!sv) return em_error(EM_ERR_OOM, "attention: out of memory");
  sv->be = be, sv->device = c->q->device.index;
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, lshape[3] = {c->B, c->H, c->Lq};
  em_attention_args *a = &sv->args;
  em_status s = make_bias(c, &sv->bias, a->bias_stride);
  if (s == EM_OK) s = fill_shaw(sv, c, d);
  for (int i = 0; i < EM_EXPR_MAX_CAPS; i++) sv->xparam[i] = -1;
  em__attn_lowered low = {0};
  if (s == EM_OK) s = em__attn_lower(c, d, &low);
  if (s == EM_OK && low.mods.n_caps && c->mods)
    s = em_error(EM_ERR_PLUGIN, "attention '%s': a traced variant that also declares terms", c->variant->name);
  if (s == EM_OK && (c->mods || low.mods.n_caps)) s = fill_mods(sv, c, c->mods ? c->mods : &low.mods);
  em__attn_lowered_free(&low); /* fill_mods keeps its own references */
  if (s != EM_OK) {
    sdpa_free(sv);
    return s;
  }
  s = heads_input(&sv->q, c->q, be, a->q_stride);
  if (s == EM_OK) s = kv_inputs(sv, c, be);
  if (s != EM_OK) {
    sdpa_free(sv);
    return s;
  }
  if (c->key_padding) sv->kp = em_retain(c->key_padding);
  a->dtype = c->q->dtype;
  a->B = c->B, a->H = c->H, a->Lq = c->Lq, a->Lk = c->Lk, a->dk = c->dims.dk, a->dv = c->dims.dv;
  a->Hkv = c->Hkv;
  a->key_padding = c->key_padding ? em_data(c->key_padding) : NULL;
  a->bias = sv->bias ? em_data(sv->bias) : NULL;
  a->causal = c->causal;
  a->scale = c->scale;
  a->dropout_p = c->dropout_p;
  a->seed = c->seed, a->offset = c->offset;
  a->q = em_data(sv->q), a->k = em_data(sv->k), a->v = em_data(sv->v);
  /* a recompute under a replaying tape takes out and lse as its first
  ** forward made them (attention_reuse.c); else the kernel writes them */
  uint64_t key[EM__ATTN_KEY_MAX];
  int n_key = 0;
  if (em__attn_tape_active()) {
    em_tensor *ins[7 + EM_EXPR_MAX_CAPS] = {sv->q, sv->k, sv->v, sv->bias, sv->kp};
    int n_ins = 5;
    for (int t = 0; t < 2; t++) ins[n_ins++] = sv->tab[t];
    for (int i = 0; i < a->n_caps; i++) ins[n_ins++] = sv->xt[i];
    n_key = em__attn_tape_key(key, c, a, ins, n_ins);
  }
  if (!n_key || !em__attn_tape_take(key, n_key, &sv->out, &sv->lse)) {
    /* lse in the kernel's compute dtype: float32 for bfloat16 */
    const em_dtype cdt = c->q->dtype == EM_BF16 ? EM_F32 : c->q->dtype;
    s = heads_output(&sv->out, oshape, c->q->dtype, c->q->device, be, a->out_stride);
    if (s == EM_OK) s = em_empty(&sv->lse, 3, lshape, cdt, c->q->device);
    if (s == EM_OK) {
      a->out = em_data(sv->out), a->lse = em_data(sv->lse);
      s = be->attention_forward(sv->device, a);
    }
  }
  /* a checkpoint inside a recompute keeps what the outer one handed back */
  if (s == EM_OK && n_key) em__attn_tape_put(key, n_key, sv->out, sv->lse);
  a->out = sv->out ? em_data(sv->out) : NULL;
  a->lse = sv->lse ? em_data(sv->lse) : NULL;
  /* the backward reads out as it lies (one the tape handed back included) */
  for (int d = 0; d < 3; d++)
    a->out_stride[d] = sv->out && be->attention_strided_heads ? sv->out->stride[d] : 0;
  if (s != EM_OK) {
    sdpa_free(sv);
    return s;
  }
  *out = em_retain(sv->out);
  if (c->need_grad) *saved = sv;
  else sdpa_free(sv);
  return EM_OK;
}

/* dq, dk, dv and the declared tables' gradients (the other params: NULL,
** which the caller turns into zeros). */
static em_status sdpa_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  sdpa_saved *sv = p;
  if (!sv) return em_error(EM_ERR_AUTOGRAD, "attention: backward without saved state");
  em_tensor *g[3] = {NULL}, *gt[2] = {NULL}, *gx[EM_EXPR_MAX_CAPS] = {NULL}, *go = NULL;
  em_attention_args a = sv->args; /* a copy: backward may run twice */
  void *dx[EM_EXPR_MAX_CAPS] = {NULL};
  em_tensor *const src[3] = {sv->q, sv->k, sv->v};
  em_status s = EM_OK;
  /* learned captures: gradients in the compute dtype, written by the kernel */
  for (int i = 0; i < sv->args.n_caps && s == EM_OK; i++)
    if (sv->xparam[i] >= 0 && needs[3 + sv->xparam[i]] && sv->xcap[i].dtype != EM_I64) {
      s = em_empty(&gx[i], sv->xt[i]->ndim, sv->xt[i]->shape, sv->xt[i]->dtype, sv->xt[i]->device);
      if (s == EM_OK) dx[i] = em_data(gx[i]);
    }
  /* dk and dv per query head; grouped heads are summed below */
  int64_t *const gst[3] = {a.dq_stride, a.dk_stride, a.dv_stride};
  for (int i = 0; i < 3 && s == EM_OK; i++) {
    int64_t shape[4] = {src[i]->shape[0], sv->args.H, src[i]->shape[2], src[i]->shape[3]};
    s = heads_output(&g[i], shape, src[i]->dtype, src[i]->device, sv->be, gst[i]);
  }
  if (s == EM_OK) s = heads_input(&go, dout, sv->be, a.dout_stride);
  for (int t = 0; t < 2 && s == EM_OK; t++)
    if (sv->tab[t] && needs[3 + sv->tab_param[t]])
      s = em_empty(&gt[t], 2, sv->tab[t]->shape, sv->tab[t]->dtype, sv->tab[t]->device);
  if (s == EM_OK) {
    a.dout = em_data(go);
    a.dq = em_data(g[0]), a.dk_ = em_data(g[1]), a.dv_ = em_data(g[2]);
    a.d_rel_k = gt[0] ? em_data(gt[0]) : NULL;
    a.d_rel_v = gt[1] ? em_data(gt[1]) : NULL;
    a.d_caps = a.n_caps ? dx : NULL;
    s = sv->be->attention_backward(sv->device, &a);
  }
  em_release(go);
  /* grouped-query attention: a kv head's gradient is the sum over its query
  ** heads; summed as [B,L,Hkv,H/Hkv,d] when the kernel wrote [B,L,H,d], so
  ** that the sum is laid out as [B,L,Hkv,d] too */
  for (int i = 1; i < 3 && s == EM_OK && sv->args.Hkv && sv->args.Hkv != sv->args.H; i++) {
    const int64_t *sh = src[i]->shape, Hkv = sv->args.Hkv, G = sv->args.H / Hkv;
    const bool lh = sv->be->attention_strided_heads;
    int64_t s5[5] = {sh[0], Hkv, G, sh[2], sh[3]}, l5[5] = {sh[0], sh[2], Hkv, G, sh[3]};
    const int dim = lh ? 3 : 2;
    em_tensor *t = NULL, *r = NULL, *sum = NULL;
    s = lh ? em_transpose(&t, g[i], 1, 2) : EM_OK;
    if (s == EM_OK) s = em_reshape(&r, lh ? t : g[i], 5, lh ? l5 : s5);
    if (s == EM_OK) s = em_sum(&sum, r, 1, &dim, false);
    em_release(t), em_release(r);
    if (s == EM_OK && lh) {
      s = em_transpose(&t, sum, 1, 2);
      em_release(sum);
      sum = s == EM_OK ? t : NULL;
    }
    if (s == EM_OK) {
      em_release(g[i]);
      g[i] = sum;
    }
  }
  /* a bfloat16 table's float32 gradient goes back to bfloat16 */
  for (int i = 0; i < sv->args.n_caps && s == EM_OK; i++)
    if (gx[i] && sv->q->dtype == EM_BF16) {
      em_tensor *r = NULL;
      s = em_to_dtype(&r, gx[i], EM_BF16);
      em_release(gx[i]);
      gx[i] = r;
    }
  if (s != EM_OK) {
    for (int i = 0; i < 3; i++) em_release(g[i]);
    for (int i = 0; i < 2; i++) em_release(gt[i]);
    for (int i = 0; i < EM_EXPR_MAX_CAPS; i++) em_release(gx[i]);
    return s;
  }
  for (int i = 0; i < EM_EXPR_MAX_CAPS; i++)
    if (gx[i]) grads[3 + sv->xparam[i]] = gx[i];
  for (int i = 0; i < 3; i++) grads[i] = g[i];
  for (int t = 0; t < 2; t++)
    if (gt[t]) grads[3 + sv->tab_param[t]] = gt[t];
  return EM_OK;
}

/* The vtable-shaped callbacks attention.c records around the fused route. */
em_status em__sdpa_backward(void *saved, em_tensor *dout, const bool *needs, em_tensor **grads) {
  return sdpa_backward(saved, dout, needs, grads);
}
void em__sdpa_free(void *saved) { sdpa_free(saved); }
