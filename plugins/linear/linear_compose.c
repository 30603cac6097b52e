/*
** linear_compose.c -- linear attention as core ops (see linear.c).
*/
#include "linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The same function as the host kernel, written with differentiable core
** ops (autograd records them; no backward to write). Causal attention
** runs as a chunked prefix sum: the key axis is cut into blocks of `chunk`
** keys; a block's queries see the earlier blocks through the running sums
** S = sum phi(k) v^T [m, dv] and z = sum phi(k) [m], and their own block
** through a chunk x chunk lower-triangular product. No L x L tensor exists
** (unless weights are asked for): memory is O(L m + (L / chunk) m dv). */

/* References taken while composing, released together. */
typedef struct tlist {
  int n, cap;
  em_tensor **t;
} tlist;

static em_tensor *keep(tlist *l, em_tensor *t) {
  if (!t) return NULL;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    em_tensor **nt = realloc(l->t, (size_t)cap * sizeof *nt);
    if (!nt) return NULL; /* the caller releases t and reports OOM */
    l->t = nt, l->cap = cap;
  }
  return l->t[l->n++] = t;
}

static void drop_all(tlist *l) {
  for (int i = 0; i < l->n; i++) em_release(l->t[i]);
  free(l->t);
  l->n = l->cap = 0, l->t = NULL;
}

/* Runs one core op producing *out, and files the result in the list. */
#define OP(l, out, call)                                                  \
  do {                                                                    \
    if (s == EM_OK) {                                                     \
      em_tensor *op_r_ = NULL;                                            \
      em_tensor **op_out_ = &op_r_;                                       \
      s = call;                                                           \
      if (s == EM_OK && !keep(l, op_r_)) {                                \
        em_release(op_r_);                                                \
        s = em_error(EM_ERR_OOM, "linear attention: out of memory");     \
      }                                                                   \
      (out) = s == EM_OK ? op_r_ : NULL;                                  \
    }                                                                     \
  } while (0)
#define R op_out_ /* the result slot inside OP */

/* phi(x) as core ops. Queries (is_key false) subtract their own max
** exponent per row (favor); keys subtract one per head, over the visible
** keys, except in causal mode (see head_features). pad4 is [B,1,Lk,1]
** bool (padding) or NULL. */
static em_status compose_features(tlist *l, const em_attn_call *c, em_tensor *W, double xs, em_tensor *x,
                                  bool is_key, em_tensor *pad4, em_tensor **phi) {
  em_status s = EM_OK;
  em_tensor *f = NULL;
  if (!W) { /* elu(x) + 1 */
    em_tensor *e = NULL;
    OP(l, e, em_unary(R, EM_ELU, x, 1.0, 0));
    OP(l, f, em_binary_scalar(R, EM_ADD, e, 1.0));
  } else {
    em_tensor *xp = NULL, *wt = NULL, *proj = NULL, *sq = NULL, *half = NULL, *e = NULL, *stab = NULL;
    const int last = 3;
    OP(l, xp, em_binary_scalar(R, EM_MUL, x, xs));
    OP(l, wt, em_transpose(R, W, 0, 1));
    OP(l, proj, em_matmul(R, xp, wt)); /* [B,H,L,m] */
    OP(l, sq, em_mul(R, xp, xp));
    OP(l, sq, em_sum(R, sq, 1, &last, true));
    OP(l, half, em_binary_scalar(R, EM_MUL, sq, 0.5));
    OP(l, e, em_sub(R, proj, half));
    if (!is_key) {
      OP(l, stab, em_max(R, NULL, e, 3, true));
    } else if (!c->causal) {
      em_tensor *em = e, *none = NULL;
      if (pad4) OP(l, em, em_masked_fill(R, e, pad4, -INFINITY));
      OP(l, stab, em_max(R, NULL, em, 3, true));
      OP(l, stab, em_max(R, NULL, stab, 2, true)); /* [B,H,1,1] */
      OP(l, none, em_binary_scalar(R, EM_EQ, stab, -INFINITY)); /* every key padding */
      OP(l, stab, em_masked_fill(R, stab, none, 0));
    }
    if (stab) OP(l, e, em_sub(R, e, stab));
    OP(l, f, em_unary(R, EM_EXP, e, 0, 0));
    OP(l, f, em_binary_scalar(R, EM_MUL, f, 1.0 / sqrt((double)W->shape[0])));
  }
  if (is_key && pad4) OP(l, f, em_masked_fill(R, f, pad4, 0));
  *phi = f;
  return s;
}

/* The favor features [m, dk] for this call, in q's dtype and device. */
static em_status compose_weights_of(tlist *l, const em_attn_call *c, em_tensor **W) {
  *W = NULL;
  if (!is_favor(c->options)) return EM_OK;
  int64_t m = em_attn_opt_int(c->options, "num_features"), dk = c->dims.dk, shape[2] = {m, dk};
  em_status s = EM_OK;
  if (c->training && em_attn_opt_bool(c->options, "redraw")) {
    double *w = malloc((size_t)(m * dk) * sizeof *w);
    if (!w) return em_error(EM_ERR_OOM, "out of memory");
    em_tensor *t64 = NULL;
    s = lin_draw_features(m, dk, w);
    OP(l, t64, em_from_host(R, 2, shape, EM_F64, w, c->q->device));
    free(w);
    OP(l, *W, em_to_dtype(R, t64, c->q->dtype));
    return s;
  }
  if (c->n_params < 1 || c->params[0]->shape[0] != m || c->params[0]->shape[1] != dk)
    return em_error(EM_ERR_ARG, "favor features buffer missing or not [%lld, %lld]", (long long)m,
                    (long long)dk);
  OP(l, *W, em_detach(R, c->params[0]));
  return s;
}

/* Causal numerator [B,H,Lk,dv] and denominator [B,H,Lk,1] (without eps)
** for queries placed at key positions 0..Lk-1 (fq [B,H,Lk,m]). */
static em_status compose_causal(tlist *l, const em_attn_call *c, em_tensor *fq, em_tensor *fk, em_tensor *v,
                                int64_t chunk, em_tensor **num, em_tensor **den) {
  const int64_t Lk = c->Lk, nb = (Lk + chunk - 1) / chunk;
  em_status s = EM_OK;
  em_tensor **nums = calloc((size_t)(2 * nb), sizeof *nums), **dens = nums ? nums + nb : NULL;
  double *tri = malloc((size_t)(chunk * chunk) * sizeof *tri);
  if (!nums || !tri) {
    free(nums), free(tri);
    return em_error(EM_ERR_OOM, "linear attention: out of memory for %lld blocks", (long long)nb);
  }
  for (int64_t i = 0; i < chunk; i++)
    for (int64_t j = 0; j < chunk; j++) tri[i * chunk + j] = j <= i;
  int64_t tshape[2] = {chunk, chunk};
  em_tensor *tri64 = NULL, *trit = NULL, *Sp = NULL, *zp = NULL;
  OP(l, tri64, em_from_host(R, 2, tshape, EM_F64, tri, c->q->device));
  OP(l, trit, em_to_dtype(R, tri64, c->q->dtype));
  free(tri);
  const int rows = 2, feat = 3;
  for (int64_t b = 0; b < nb && s == EM_OK; b++) {
    const int64_t t0 = b * chunk, n = Lk - t0 < chunk ? Lk - t0 : chunk;
    em_tensor *Q = NULL, *K = NULL, *V = NULL, *Kt = NULL, *A = NULL, *tr = NULL, *nb_ = NULL, *db = NULL;
    OP(l, Q, em_narrow(R, fq, 2, t0, n));
    OP(l, K, em_narrow(R, fk, 2, t0, n));
    OP(l, V, em_narrow(R, v, 2, t0, n));
    OP(l, Kt, em_transpose(R, K, 2, 3));
    OP(l, tr, n == chunk ? em_detach(R, trit) : em_narrow(R, trit, 0, 0, n));
    if (n != chunk) OP(l, tr, em_narrow(R, tr, 1, 0, n));
    OP(l, A, em_matmul(R, Q, Kt)); /* [B,H,n,n], within the block */
    OP(l, A, em_mul(R, A, tr));
    OP(l, nb_, em_matmul(R, A, V));
    OP(l, db, em_sum(R, A, 1, &feat, true));
    if (b > 0) { /* the earlier blocks, through the running sums */
      em_tensor *pn = NULL, *pd = NULL;
      OP(l, pn, em_matmul(R, Q, Sp));
      OP(l, nb_, em_add(R, nb_, pn));
      OP(l, pd, em_mul(R, Q, zp));
      OP(l, pd, em_sum(R, pd, 1, &feat, true));
      OP(l, db, em_add(R, db, pd));
    }
    em_tensor *kv = NULL, *ks = NULL;
    OP(l, kv, em_matmul(R, Kt, V)); /* [B,H,m,dv] */
    OP(l, ks, em_sum(R, K, 1, &rows, true)); /* [B,H,1,m] */
    if (b == 0) {
      Sp = kv, zp = ks;
    } else {
      OP(l, Sp, em_add(R, Sp, kv));
      OP(l, zp, em_add(R, zp, ks));
    }
    nums[b] = nb_, dens[b] = db;
  }
  OP(l, *num, em_cat(R, (int)nb, nums, 2));
  OP(l, *den, em_cat(R, (int)nb, dens, 2));
  free(nums);
  return s;
}

em_status lin_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  const int64_t B = c->B, H = c->H, Lq = c->Lq, Lk = c->Lk, dv = c->dims.dv;
  const double eps = em_attn_opt_num(c->options, "eps");
  const int last = 3, rows = 2;
  tlist l = {0};
  em_status s = EM_OK;
  em_tensor *W = NULL, *pad4 = NULL, *fq = NULL, *fk = NULL, *num = NULL, *den = NULL, *o = NULL;
  if (Lk == 0) { /* no key at all: zeros, attached to nothing */
    int64_t oshape[4] = {B, H, Lq, dv}, wshape[4] = {B, H, Lq, 0};
    s = em_zeros(out, 4, oshape, c->q->dtype, c->q->device);
    if (s == EM_OK && weights && c->need_weights) s = em_zeros(weights, 4, wshape, c->q->dtype, c->q->device);
    return s;
  }
  s = compose_weights_of(&l, c, &W);
  if (c->key_padding) {
    int64_t pshape[4] = {B, 1, Lk, 1};
    OP(&l, pad4, em_view(R, c->key_padding, 4, pshape));
  }
  if (s == EM_OK) s = compose_features(&l, c, W, sqrt(c->scale), c->q, false, NULL, &fq);
  if (s == EM_OK) s = compose_features(&l, c, W, sqrt(c->scale), c->k, true, pad4, &fk);
  if (!c->causal) {
    em_tensor *fkt = NULL, *S = NULL, *z = NULL, *qz = NULL;
    OP(&l, fkt, em_transpose(R, fk, 2, 3));
    OP(&l, S, em_matmul(R, fkt, c->v)); /* [B,H,m,dv] */
    OP(&l, z, em_sum(R, fk, 1, &rows, true)); /* [B,H,1,m] */
    OP(&l, num, em_matmul(R, fq, S));
    OP(&l, qz, em_mul(R, fq, z));
    OP(&l, den, em_sum(R, qz, 1, &last, true));
  } else {
    /* query i sits at key position i + Lk - Lq: pad the queries to the key
    ** axis (shift > 0), or drop those that see no key (shift < 0) */
    const int64_t shift = Lk - Lq;
    em_tensor *fqp = fq;
    if (shift > 0) {
      int64_t zshape[4] = {B, H, shift, fq ? fq->shape[3] : 0};
      em_tensor *zq = NULL;
      OP(&l, zq, em_zeros(R, 4, zshape, c->q->dtype, c->q->device));
      em_tensor *parts[2] = {zq, fq};
      OP(&l, fqp, em_cat(R, 2, parts, 2));
    } else if (shift < 0) {
      OP(&l, fqp, em_narrow(R, fq, 2, -shift, Lk));
    }
    const int64_t chunk = em_attn_opt_int(c->options, "chunk");
    if (s == EM_OK) s = compose_causal(&l, c, fqp, fk, c->v, chunk, &num, &den);
    if (shift > 0) {
      OP(&l, num, em_narrow(R, num, 2, shift, Lq));
      OP(&l, den, em_narrow(R, den, 2, shift, Lq));
    } else if (shift < 0) { /* the dropped queries: numerator and denominator 0 */
      int64_t nshape[4] = {B, H, -shift, dv}, dshape[4] = {B, H, -shift, 1};
      em_tensor *zn = NULL, *zd = NULL;
      OP(&l, zn, em_zeros(R, 4, nshape, c->q->dtype, c->q->device));
      OP(&l, zd, em_zeros(R, 4, dshape, c->q->dtype, c->q->device));
      em_tensor *np[2] = {zn, num}, *dp[2] = {zd, den};
      OP(&l, num, em_cat(R, 2, np, 2));
      OP(&l, den, em_cat(R, 2, dp, 2));
    }
  }
  /* out = num / (den + eps), and 0 where that is 0 (eps = 0, nothing seen) */
  em_tensor *zero = NULL;
  OP(&l, den, em_binary_scalar(R, EM_ADD, den, eps));
  OP(&l, zero, em_binary_scalar(R, EM_EQ, den, 0));
  OP(&l, den, em_masked_fill(R, den, zero, 1));
  OP(&l, o, em_div(R, num, den));
  if (weights && c->need_weights && s == EM_OK) { /* the effective attention matrix, for inspection */
    em_tensor *fkt = NULL, *A = NULL, *allowed = NULL, *hidden = NULL;
    OP(&l, fkt, em_transpose(R, fk, 2, 3));
    OP(&l, A, em_matmul(R, fq, fkt));
    if (s == EM_OK && (s = em_attn_allowed(c, NULL, &allowed)) == EM_OK && allowed) {
      if (!keep(&l, allowed)) {
        em_release(allowed);
        s = em_error(EM_ERR_OOM, "linear attention: out of memory");
      }
      OP(&l, hidden, em_unary(R, EM_NOT, allowed, 0, 0));
      OP(&l, A, em_masked_fill(R, A, hidden, 0));
    }
    OP(&l, A, em_div(R, A, den));
    if (s == EM_OK) s = em_detach(weights, A);
  }
  if (s == EM_OK) *out = em_retain(o);
  drop_all(&l);
  return s;
}

#undef R
#undef OP

