/*
** profiler_wrap_tmpl.h -- the recording kernels of backend slot PROF_SLOT,
** included once per slot by profiler.c (a plain C function cannot know
** which backend's vtable it was called through, so each slot has its
** own). Each wrapper calls the real kernel directly when the profiler is
** off (an autograd node may hold a wrapped vtable past a profile) and
** otherwise brackets it with a span: name, bytes each tensor moves once,
** FLOPs where known, and what computed it (impl_of).
*/
#define RE prof_real[PROF_SLOT]
#define W(f) PROF_CAT(PROF_CAT(prof_, f), PROF_CAT(_, PROF_SLOT))
/* span i of a kernel of static name `nm` on this backend */
#define OPEN(nm, own) prof_begin((nm), EM_PROF_KERNEL, RE->name, (own))

static em_status W(copy_h2d)(int device, void *dst, const void *src, size_t nbytes) {
  if (!em__prof_is_on()) return RE->copy_h2d(device, dst, src, nbytes);
  int64_t i = OPEN("copy_h2d", false);
  em_status s = RE->copy_h2d(device, dst, src, nbytes);
  prof_end(i, 2 * (int64_t)nbytes, 0, NULL);
  return s;
}

static em_status W(copy_d2h)(int device, void *dst, const void *src, size_t nbytes) {
  if (!em__prof_is_on()) return RE->copy_d2h(device, dst, src, nbytes);
  int64_t i = OPEN("copy_d2h", false);
  em_status s = RE->copy_d2h(device, dst, src, nbytes);
  prof_end(i, 2 * (int64_t)nbytes, 0, NULL);
  return s;
}

static em_status W(copy_d2d)(int dd, void *dst, int sd, const void *src, size_t nbytes) {
  if (!em__prof_is_on()) return RE->copy_d2d(dd, dst, sd, src, nbytes);
  int64_t i = OPEN("copy_d2d", false);
  em_status s = RE->copy_d2d(dd, dst, sd, src, nbytes);
  prof_end(i, 2 * (int64_t)nbytes, 0, NULL);
  return s;
}

static em_status W(copy)(int device, const em_kview *dst, const em_kview *src) {
  if (!em__prof_is_on()) return RE->copy(device, dst, src);
  int64_t i = OPEN(dst->dtype == src->dtype ? "copy" : "cast", false);
  em_status s = RE->copy(device, dst, src);
  prof_end(i, kv_bytes(dst) + kv_bytes(src), 0, impl_of(PROF_SLOT, dst->dtype, IMPL_KERN));
  return s;
}

static em_status W(fill)(int device, const em_kview *dst, double value) {
  if (!em__prof_is_on()) return RE->fill(device, dst, value);
  int64_t i = OPEN("fill", false);
  em_status s = RE->fill(device, dst, value);
  prof_end(i, kv_bytes(dst), 0, impl_of(PROF_SLOT, dst->dtype, IMPL_KERN));
  return s;
}

static em_status W(unary)(int device, em_unary_op op, const em_kview *out, const em_kview *x,
                          double alpha, double beta) {
  if (!em__prof_is_on()) return RE->unary(device, op, out, x, alpha, beta);
  int64_t i = OPEN(em_kernel_unary_name(op), false);
  em_status s = RE->unary(device, op, out, x, alpha, beta);
  prof_end(i, kv_bytes(out) + kv_bytes(x), 0, impl_of(PROF_SLOT, x->dtype, IMPL_KERN));
  return s;
}

static em_status W(unary_backward)(int device, em_unary_op op, em_dtype dt, int64_t n, void *gx,
                                   const void *gy, const void *x, const void *y, double alpha,
                                   double beta) {
  if (!em__prof_is_on()) return RE->unary_backward(device, op, dt, n, gx, gy, x, y, alpha, beta);
  char nm[64];
  int64_t i = OPEN(joined(nm, sizeof nm, em_kernel_unary_name(op), "_grad"), true);
  em_status s = RE->unary_backward(device, op, dt, n, gx, gy, x, y, alpha, beta);
  prof_end(i, n * dsz(dt) * (2 + (x != NULL) + (y != NULL)), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(binary)(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                           const em_kview *b) {
  if (!em__prof_is_on()) return RE->binary(device, op, out, a, b);
  int64_t i = OPEN(em_kernel_binary_name(op), false);
  em_status s = RE->binary(device, op, out, a, b);
  prof_end(i, kv_bytes(out) + kv_bytes(a) + kv_bytes(b), 0, impl_of(PROF_SLOT, a->dtype, IMPL_KERN));
  return s;
}

static em_status W(where)(int device, const em_kview *out, const em_kview *cond,
                          const em_kview *a, const em_kview *b) {
  if (!em__prof_is_on()) return RE->where(device, out, cond, a, b);
  int64_t i = OPEN("where", false);
  em_status s = RE->where(device, out, cond, a, b);
  prof_end(i, kv_bytes(out) + kv_bytes(cond) + kv_bytes(a) + kv_bytes(b), 0,
           impl_of(PROF_SLOT, out->dtype, IMPL_KERN));
  return s;
}

static em_status W(reduce)(int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx,
                           const void *in, int64_t outer, int64_t n, int64_t inner,
                           int correction) {
  if (!em__prof_is_on()) return RE->reduce(device, op, dt, out, idx, in, outer, n, inner, correction);
  static const char *const names[] = {"sum", "mean", "max", "min", "var"};
  int64_t i = OPEN((unsigned)op < 5 ? names[op] : "reduce", false);
  em_status s = RE->reduce(device, op, dt, out, idx, in, outer, n, inner, correction);
  prof_end(i, (outer * n * inner + outer * inner) * dsz(dt) + (idx ? outer * inner * 8 : 0), 0,
           impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(gemm)(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n,
                         int64_t k, double alpha, const void *a, int64_t lda, int64_t stride_a,
                         const void *b, int64_t ldb, int64_t stride_b, double beta, void *c,
                         int64_t ldc, int64_t stride_c, int64_t batch) {
  if (!em__prof_is_on())
    return RE->gemm(device, dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                    c, ldc, stride_c, batch);
  int64_t i = OPEN("gemm", false);
  em_status s = RE->gemm(device, dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                         beta, c, ldc, stride_c, batch);
  const int64_t ba = stride_a ? batch : 1, bb = stride_b ? batch : 1;
  prof_end(i, (ba * m * k + bb * k * n + (beta != 0 ? 2 : 1) * batch * m * n) * dsz(dt),
           2.0 * (double)m * (double)n * (double)k * (double)batch,
           impl_of(PROF_SLOT, dt, IMPL_GEMM));
  return s;
}

static em_status W(softmax)(int device, em_dtype dt, void *out, const void *x, int64_t rows,
                            int64_t n, bool log) {
  if (!em__prof_is_on()) return RE->softmax(device, dt, out, x, rows, n, log);
  int64_t i = OPEN(log ? "log_softmax" : "softmax", false);
  em_status s = RE->softmax(device, dt, out, x, rows, n, log);
  prof_end(i, 2 * rows * n * dsz(dt), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(softmax_backward)(int device, em_dtype dt, void *gx, const void *gy,
                                     const void *y, int64_t rows, int64_t n, bool log) {
  if (!em__prof_is_on()) return RE->softmax_backward(device, dt, gx, gy, y, rows, n, log);
  int64_t i = OPEN(log ? "log_softmax_grad" : "softmax_grad", false);
  em_status s = RE->softmax_backward(device, dt, gx, gy, y, rows, n, log);
  prof_end(i, 3 * rows * n * dsz(dt), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(layer_norm)(int device, em_dtype dt, void *y, void *mean, void *rstd,
                               const void *x, const void *w, const void *b, int64_t rows,
                               int64_t n, double eps) {
  if (!em__prof_is_on()) return RE->layer_norm(device, dt, y, mean, rstd, x, w, b, rows, n, eps);
  int64_t i = OPEN("layer_norm", false);
  em_status s = RE->layer_norm(device, dt, y, mean, rstd, x, w, b, rows, n, eps);
  prof_end(i, (2 * rows * n + 2 * rows + (w != NULL) * n + (b != NULL) * n) * dsz(dt), 0,
           impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(layer_norm_backward)(int device, em_dtype dt, void *dx, void *dw, void *db,
                                        const void *dy, const void *x, const void *mean,
                                        const void *rstd, const void *w, int64_t rows,
                                        int64_t n) {
  if (!em__prof_is_on())
    return RE->layer_norm_backward(device, dt, dx, dw, db, dy, x, mean, rstd, w, rows, n);
  int64_t i = OPEN("layer_norm_grad", false);
  em_status s = RE->layer_norm_backward(device, dt, dx, dw, db, dy, x, mean, rstd, w, rows, n);
  prof_end(i, (3 * rows * n + 2 * rows + ((dw != NULL) + (db != NULL) + (w != NULL)) * n) * dsz(dt),
           0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(index_select)(int device, em_dtype dt, void *out, const void *in,
                                 const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_in,
                                 int64_t inner) {
  if (!em__prof_is_on()) return RE->index_select(device, dt, out, in, idx, nidx, outer, n_in, inner);
  int64_t i = OPEN("index_select", false);
  em_status s = RE->index_select(device, dt, out, in, idx, nidx, outer, n_in, inner);
  prof_end(i, 2 * outer * nidx * inner * dsz(dt) + nidx * 8, 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(index_add)(int device, em_dtype dt, void *out, const void *src,
                              const int64_t *idx, int64_t nidx, int64_t outer, int64_t n_out,
                              int64_t inner) {
  if (!em__prof_is_on()) return RE->index_add(device, dt, out, src, idx, nidx, outer, n_out, inner);
  int64_t i = OPEN("index_add", false);
  em_status s = RE->index_add(device, dt, out, src, idx, nidx, outer, n_out, inner);
  prof_end(i, 3 * outer * nidx * inner * dsz(dt) + nidx * 8, 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(gather)(int device, em_dtype dt, void *out, const void *in, const int64_t *idx,
                           int64_t outer, int64_t n_in, int64_t n_idx, int64_t inner) {
  if (!em__prof_is_on()) return RE->gather(device, dt, out, in, idx, outer, n_in, n_idx, inner);
  int64_t i = OPEN("gather", false);
  em_status s = RE->gather(device, dt, out, in, idx, outer, n_in, n_idx, inner);
  prof_end(i, outer * n_idx * inner * (2 * dsz(dt) + 8), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(scatter_add)(int device, em_dtype dt, void *out, const void *src,
                                const int64_t *idx, int64_t outer, int64_t n_out, int64_t n_idx,
                                int64_t inner) {
  if (!em__prof_is_on()) return RE->scatter_add(device, dt, out, src, idx, outer, n_out, n_idx, inner);
  int64_t i = OPEN("scatter_add", false);
  em_status s = RE->scatter_add(device, dt, out, src, idx, outer, n_out, n_idx, inner);
  prof_end(i, outer * n_idx * inner * (3 * dsz(dt) + 8), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(cross_entropy)(int device, em_dtype dt, void *loss, void *lse,
                                  const void *logits, const int64_t *target, int64_t rows,
                                  int64_t classes, int64_t ignore_index, double smoothing) {
  if (!em__prof_is_on())
    return RE->cross_entropy(device, dt, loss, lse, logits, target, rows, classes, ignore_index,
                             smoothing);
  int64_t i = OPEN("cross_entropy", false);
  em_status s = RE->cross_entropy(device, dt, loss, lse, logits, target, rows, classes,
                                  ignore_index, smoothing);
  prof_end(i, (rows * classes + 2 * rows) * dsz(dt) + rows * 8, 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(cross_entropy_backward)(int device, em_dtype dt, void *dlogits,
                                           const void *dloss, const void *logits, const void *lse,
                                           const int64_t *target, int64_t rows, int64_t classes,
                                           int64_t ignore_index, double smoothing) {
  if (!em__prof_is_on())
    return RE->cross_entropy_backward(device, dt, dlogits, dloss, logits, lse, target, rows,
                                      classes, ignore_index, smoothing);
  int64_t i = OPEN("cross_entropy_grad", false);
  em_status s = RE->cross_entropy_backward(device, dt, dlogits, dloss, logits, lse, target, rows,
                                           classes, ignore_index, smoothing);
  prof_end(i, (2 * rows * classes + 2 * rows) * dsz(dt) + rows * 8, 0,
           impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(random)(int device, em_random_kind kind, const em_kview *out, double a,
                           double b, uint64_t seed, uint64_t offset) {
  if (!em__prof_is_on()) return RE->random(device, kind, out, a, b, seed, offset);
  int64_t i = OPEN(kind == EM_RAND_NORMAL ? "normal" : "uniform", false);
  em_status s = RE->random(device, kind, out, a, b, seed, offset);
  prof_end(i, kv_bytes(out), 0, impl_of(PROF_SLOT, out->dtype, IMPL_KERN));
  return s;
}

static em_status W(dropout)(int device, em_dtype dt, void *out, void *mask, const void *x,
                            int64_t n, double p, uint64_t seed, uint64_t offset) {
  if (!em__prof_is_on()) return RE->dropout(device, dt, out, mask, x, n, p, seed, offset);
  int64_t i = OPEN("dropout", false);
  em_status s = RE->dropout(device, dt, out, mask, x, n, p, seed, offset);
  prof_end(i, 3 * n * dsz(dt), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(adam_step)(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                              void *m, void *v, double lr, double beta1, double beta2, double eps,
                              double weight_decay, int64_t step, bool decoupled) {
  if (!em__prof_is_on())
    return RE->adam_step(device, dt, n, param, grad, m, v, lr, beta1, beta2, eps, weight_decay,
                         step, decoupled);
  int64_t i = OPEN(decoupled ? "adamw_step" : "adam_step", false);
  em_status s = RE->adam_step(device, dt, n, param, grad, m, v, lr, beta1, beta2, eps,
                              weight_decay, step, decoupled);
  prof_end(i, 7 * n * dsz(dt), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(sgd_step)(int device, em_dtype dt, int64_t n, void *param, const void *grad,
                             void *buf, double lr, double momentum, double dampening,
                             double weight_decay, bool nesterov, bool first_step) {
  if (!em__prof_is_on())
    return RE->sgd_step(device, dt, n, param, grad, buf, lr, momentum, dampening, weight_decay,
                        nesterov, first_step);
  int64_t i = OPEN("sgd_step", false);
  em_status s = RE->sgd_step(device, dt, n, param, grad, buf, lr, momentum, dampening,
                             weight_decay, nesterov, first_step);
  prof_end(i, (3 + (buf ? 2 : 0)) * n * dsz(dt), 0, impl_of(PROF_SLOT, dt, IMPL_KERN));
  return s;
}

static em_status W(attention_forward)(int device, const em_attention_args *a) {
  if (!em__prof_is_on()) return RE->attention_forward(device, a);
  int64_t i = OPEN("attention", false);
  em_status s = RE->attention_forward(device, a);
  prof_end(i, attn_bytes(a, false), attn_flops(a, false), impl_of(PROF_SLOT, a->dtype, IMPL_ATTN));
  return s;
}

static em_status W(attention_backward)(int device, const em_attention_args *a) {
  if (!em__prof_is_on()) return RE->attention_backward(device, a);
  int64_t i = OPEN("attention_grad", false);
  em_status s = RE->attention_backward(device, a);
  prof_end(i, attn_bytes(a, true), attn_flops(a, true), impl_of(PROF_SLOT, a->dtype, IMPL_ATTN));
  return s;
}

/* The wrappers of this slot over a copy of the backend's vtable; optional
** kernels the backend lacks stay NULL, so the core's checks still see it. */
static void W(wrap)(em_backend *w) {
#define SET(f) if (w->f) w->f = W(f)
  SET(copy_h2d); SET(copy_d2h); SET(copy_d2d); SET(copy); SET(fill); SET(unary);
  SET(unary_backward); SET(binary); SET(where); SET(reduce); SET(gemm); SET(softmax);
  SET(softmax_backward); SET(layer_norm); SET(layer_norm_backward); SET(index_select);
  SET(index_add); SET(gather); SET(scatter_add); SET(cross_entropy);
  SET(cross_entropy_backward); SET(random); SET(dropout); SET(adam_step); SET(sgd_step);
  SET(attention_forward); SET(attention_backward);
#undef SET
}

#undef OPEN
#undef W
#undef RE
