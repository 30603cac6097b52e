/*
** profiler_wrap_tmpl.h -- the recording kernels of backend slot PROF_SLOT,
** included once per slot by profiler.c (a plain C function cannot know
** which backend's vtable it was called through, so each slot has its
** own). Each wrapper calls the real kernel directly when the profiler is
** off (an autograd node may hold a wrapped vtable past a profile) and
** otherwise brackets it with a span: name, bytes each tensor moves once,
** FLOPs where known, and what computed it (impl_of).
**
** The wrappers are written once, as the list PROF_KERNELS below: a new
** vtable kernel is one entry (and PROF_KERNELS is the one place that
** says what a kernel's span records).
*/
#ifndef PROF_KERNELS
/* X(kernel, (its parameters), (the same as arguments), span name, whether
**   the name must be copied (not a static string), bytes moved, FLOPs,
**   what computed it) -- the last four are expressions of the parameters. */
#define PROF_KERN(dt) impl_of(PROF_SLOT, (dt), IMPL_KERN)
#define PROF_KERNELS(X)                                                                             \
  X(copy_h2d, (int device, void *dst, const void *src, size_t nbytes), (device, dst, src, nbytes),   \
    "copy_h2d", false, 2 * (int64_t)nbytes, 0, NULL)                                                 \
  X(copy_d2h, (int device, void *dst, const void *src, size_t nbytes), (device, dst, src, nbytes),   \
    "copy_d2h", false, 2 * (int64_t)nbytes, 0, NULL)                                                 \
  X(copy_d2d, (int dd, void *dst, int sd, const void *src, size_t nbytes),                           \
    (dd, dst, sd, src, nbytes), "copy_d2d", false, 2 * (int64_t)nbytes, 0, NULL)                     \
  X(copy, (int device, const em_kview *dst, const em_kview *src), (device, dst, src),                \
    dst->dtype == src->dtype ? "copy" : "cast", false, kv_bytes(dst) + kv_bytes(src), 0,             \
    PROF_KERN(dst->dtype))                                                                           \
  X(fill, (int device, const em_kview *dst, double value), (device, dst, value), "fill", false,      \
    kv_bytes(dst), 0, PROF_KERN(dst->dtype))                                                         \
  X(unary,                                                                                           \
    (int device, em_unary_op op, const em_kview *out, const em_kview *x, double alpha, double beta), \
    (device, op, out, x, alpha, beta), em_kernel_unary_name(op), false,                              \
    kv_bytes(out) + kv_bytes(x), 0, PROF_KERN(x->dtype))                                             \
  X(unary_backward,                                                                                  \
    (int device, em_unary_op op, em_dtype dt, int64_t n, void *gx, const void *gy, const void *x,    \
     const void *y, double alpha, double beta),                                                      \
    (device, op, dt, n, gx, gy, x, y, alpha, beta), grad_name(em_kernel_unary_name(op)), true,       \
    n * dsz(dt) * (2 + (x != NULL) + (y != NULL)), 0, PROF_KERN(dt))                                 \
  X(binary,                                                                                          \
    (int device, em_binary_op op, const em_kview *out, const em_kview *a, const em_kview *b),        \
    (device, op, out, a, b), em_kernel_binary_name(op), false,                                       \
    kv_bytes(out) + kv_bytes(a) + kv_bytes(b), 0, PROF_KERN(a->dtype))                               \
  X(where,                                                                                           \
    (int device, const em_kview *out, const em_kview *cond, const em_kview *a, const em_kview *b),   \
    (device, out, cond, a, b), "where", false,                                                       \
    kv_bytes(out) + kv_bytes(cond) + kv_bytes(a) + kv_bytes(b), 0, PROF_KERN(out->dtype))            \
  X(reduce,                                                                                          \
    (int device, em_reduce_op op, em_dtype dt, void *out, int64_t *idx, const void *in,              \
     int64_t outer, int64_t n, int64_t inner, int correction),                                       \
    (device, op, dt, out, idx, in, outer, n, inner, correction), reduce_name(op), false,             \
    (outer * n * inner + outer * inner) * dsz(dt) + (idx ? outer * inner * 8 : 0), 0, PROF_KERN(dt)) \
  X(gemm,                                                                                            \
    (int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,       \
     const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,     \
     double beta, void *c, int64_t ldc, int64_t stride_c, int64_t batch),                            \
    (device, dt, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,           \
     stride_c, batch),                                                                               \
    "gemm", false,                                                                                   \
    ((stride_a ? batch : 1) * m * k + (stride_b ? batch : 1) * k * n +                               \
     (beta != 0 ? 2 : 1) * batch * m * n) * dsz(dt),                                                 \
    2.0 * (double)m * (double)n * (double)k * (double)batch,                                         \
    gemm_impl(PROF_SLOT, device, dt, ta, tb, m, n, k, batch))                                        \
  X(sum_squares, (int device, em_dtype dt, const void *x, int64_t n, double *out),                  \
    (device, dt, x, n, out), "sum_squares", false, n * dsz(dt), 0, PROF_KERN(dt))                   \
  X(gemm_bias,                                                                                       \
    (int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *a,      \
     int64_t lda, const void *b, int64_t ldb, const void *bias, void *c, int64_t ldc),               \
    (device, dt, ta, tb, m, n, k, a, lda, b, ldb, bias, c, ldc), "gemm", false,                      \
    (m * k + k * n + n + m * n) * dsz(dt), 2.0 * (double)m * (double)n * (double)k,                  \
    gemm_impl(PROF_SLOT, device, dt, ta, tb, m, n, k, 1))                                            \
  X(softmax, (int device, em_dtype dt, void *out, const void *x, int64_t rows, int64_t n, bool log), \
    (device, dt, out, x, rows, n, log), log ? "log_softmax" : "softmax", false,                      \
    2 * rows * n * dsz(dt), 0, PROF_KERN(dt))                                                        \
  X(softmax_backward,                                                                                \
    (int device, em_dtype dt, void *gx, const void *gy, const void *y, int64_t rows, int64_t n,      \
     bool log),                                                                                      \
    (device, dt, gx, gy, y, rows, n, log), log ? "log_softmax_grad" : "softmax_grad", false,         \
    3 * rows * n * dsz(dt), 0, PROF_KERN(dt))                                                        \
  X(layer_norm,                                                                                      \
    (int device, em_dtype dt, void *y, void *mean, void *rstd, const void *x, const void *w,         \
     const void *b, int64_t rows, int64_t n, double eps),                                            \
    (device, dt, y, mean, rstd, x, w, b, rows, n, eps), "layer_norm", false,                         \
    (2 * rows * n + 2 * rows + (w != NULL) * n + (b != NULL) * n) * dsz(dt), 0, PROF_KERN(dt))       \
  X(layer_norm_backward,                                                                             \
    (int device, em_dtype dt, void *dx, void *dw, void *db, const void *dy, const void *x,           \
     const void *mean, const void *rstd, const void *w, int64_t rows, int64_t n),                    \
    (device, dt, dx, dw, db, dy, x, mean, rstd, w, rows, n), "layer_norm_grad", false,               \
    (3 * rows * n + 2 * rows + ((dw != NULL) + (db != NULL) + (w != NULL)) * n) * dsz(dt), 0,        \
    PROF_KERN(dt))                                                                                   \
  X(index_select,                                                                                    \
    (int device, em_dtype dt, void *out, const void *in, const int64_t *idx, int64_t nidx,           \
     int64_t outer, int64_t n_in, int64_t inner),                                                    \
    (device, dt, out, in, idx, nidx, outer, n_in, inner), "index_select", false,                     \
    2 * outer * nidx * inner * dsz(dt) + nidx * 8, 0, PROF_KERN(dt))                                 \
  X(index_add,                                                                                       \
    (int device, em_dtype dt, void *out, const void *src, const int64_t *idx, int64_t nidx,          \
     int64_t outer, int64_t n_out, int64_t inner),                                                   \
    (device, dt, out, src, idx, nidx, outer, n_out, inner), "index_add", false,                      \
    3 * outer * nidx * inner * dsz(dt) + nidx * 8, 0, PROF_KERN(dt))                                 \
  X(gather,                                                                                          \
    (int device, em_dtype dt, void *out, const void *in, const int64_t *idx, int64_t outer,          \
     int64_t n_in, int64_t n_idx, int64_t inner),                                                    \
    (device, dt, out, in, idx, outer, n_in, n_idx, inner), "gather", false,                          \
    outer * n_idx * inner * (2 * dsz(dt) + 8), 0, PROF_KERN(dt))                                     \
  X(scatter_add,                                                                                     \
    (int device, em_dtype dt, void *out, const void *src, const int64_t *idx, int64_t outer,         \
     int64_t n_out, int64_t n_idx, int64_t inner),                                                   \
    (device, dt, out, src, idx, outer, n_out, n_idx, inner), "scatter_add", false,                   \
    outer * n_idx * inner * (3 * dsz(dt) + 8), 0, PROF_KERN(dt))                                     \
  X(cross_entropy,                                                                                   \
    (int device, em_dtype dt, void *loss, void *lse, const void *logits, const int64_t *target,      \
     int64_t rows, int64_t classes, int64_t ignore_index, double smoothing),                         \
    (device, dt, loss, lse, logits, target, rows, classes, ignore_index, smoothing),                 \
    "cross_entropy", false, (rows * classes + 2 * rows) * dsz(dt) + rows * 8, 0, PROF_KERN(dt))      \
  X(cross_entropy_backward,                                                                          \
    (int device, em_dtype dt, void *dlogits, const void *dloss, const void *logits, const void *lse, \
     const int64_t *target, int64_t rows, int64_t classes, int64_t ignore_index, double smoothing),  \
    (device, dt, dlogits, dloss, logits, lse, target, rows, classes, ignore_index, smoothing),       \
    "cross_entropy_grad", false, (2 * rows * classes + 2 * rows) * dsz(dt) + rows * 8, 0,            \
    PROF_KERN(dt))                                                                                   \
  X(random,                                                                                          \
    (int device, em_random_kind kind, const em_kview *out, double a, double b, uint64_t seed,        \
     uint64_t offset),                                                                               \
    (device, kind, out, a, b, seed, offset), kind == EM_RAND_NORMAL ? "normal" : "uniform", false,   \
    kv_bytes(out), 0, PROF_KERN(out->dtype))                                                         \
  X(dropout,                                                                                         \
    (int device, em_dtype dt, void *out, void *mask, const void *x, int64_t n, double p,             \
     uint64_t seed, uint64_t offset),                                                                \
    (device, dt, out, mask, x, n, p, seed, offset), "dropout", false, 3 * n * dsz(dt), 0,            \
    PROF_KERN(dt))                                                                                   \
  X(adam_step,                                                                                       \
    (int device, em_dtype dt, int64_t n, void *param, const void *grad, void *m, void *v, double lr, \
     double beta1, double beta2, double eps, double weight_decay, int64_t step, bool decoupled),     \
    (device, dt, n, param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step, decoupled),        \
    decoupled ? "adamw_step" : "adam_step", false, 7 * n * dsz(dt), 0, PROF_KERN(dt))                \
  X(sgd_step,                                                                                        \
    (int device, em_dtype dt, int64_t n, void *param, const void *grad, void *buf, double lr,        \
     double momentum, double dampening, double weight_decay, bool nesterov, bool first_step),        \
    (device, dt, n, param, grad, buf, lr, momentum, dampening, weight_decay, nesterov, first_step),  \
    "sgd_step", false, (3 + (buf ? 2 : 0)) * n * dsz(dt), 0, PROF_KERN(dt))                          \
  X(attention_forward, (int device, const em_attention_args *a), (device, a), "attention", false,    \
    attn_bytes(a, false), attn_flops(a, false), impl_of(PROF_SLOT, a->dtype, IMPL_ATTN))             \
  X(attention_backward, (int device, const em_attention_args *a), (device, a), "attention_grad",     \
    false, attn_bytes(a, true), attn_flops(a, true), impl_of(PROF_SLOT, a->dtype, IMPL_ATTN))       \
  X(conv2d, (int device, const em_conv_args *a, void *y, const void *x, const void *w, const void *b), \
    (device, a, y, x, w, b), "conv2d", false, conv_bytes(a, false), conv_flops(a, false),            \
    impl_of(PROF_SLOT, a->dtype, IMPL_CONV))                                                                             \
  X(conv2d_backward,                                                                                 \
    (int device, const em_conv_args *a, void *dx, void *dw, void *db, const void *dy, const void *x, \
     const void *w),                                                                                 \
    (device, a, dx, dw, db, dy, x, w), "conv2d_grad", false, conv_bytes(a, true), conv_flops(a, true), \
    impl_of(PROF_SLOT, a->dtype, IMPL_CONV))                                                                             \
  X(conv2d_keep,                                                                                     \
    (int device, const em_conv_args *a, void *y, void *xk, const void *x, const void *w,             \
     const void *b),                                                                                 \
    (device, a, y, xk, x, w, b), "conv2d", false,                                                    \
    conv_bytes(a, false) + a->N * a->C * a->H * a->W * dsz(a->dtype), conv_flops(a, false),          \
    impl_of(PROF_SLOT, a->dtype, IMPL_CONV))                                                         \
  X(conv2d_backward_kept,                                                                            \
    (int device, const em_conv_args *a, void *dx, void *dw, void *db, const void *dy, const void *x, \
     const void *xk, const void *w),                                                                 \
    (device, a, dx, dw, db, dy, x, xk, w), "conv2d_grad", false, conv_bytes(a, true),               \
    conv_flops(a, true), impl_of(PROF_SLOT, a->dtype, IMPL_CONV))                                    \
  X(rms_norm,                                                                                        \
    (int device, em_dtype dt, void *y, void *rstd, const void *x, const void *w, int64_t rows,       \
     int64_t n, double eps),                                                                         \
    (device, dt, y, rstd, x, w, rows, n, eps), "rms_norm", false,                                    \
    (2 * rows * n + rows + (w != NULL) * n) * dsz(dt), 0, PROF_KERN(dt))                             \
  X(rms_norm_backward,                                                                               \
    (int device, em_dtype dt, void *dx, void *dw, const void *dy, const void *x, const void *rstd,   \
     const void *w, int64_t rows, int64_t n),                                                        \
    (device, dt, dx, dw, dy, x, rstd, w, rows, n), "rms_norm_grad", false,                           \
    (3 * rows * n + rows + ((dw != NULL) + (w != NULL)) * n) * dsz(dt), 0, PROF_KERN(dt))         \
  X(rope,                                                                                            \
    (int device, const em_kview *out, const em_kview *x, const void *cos, const void *sin,           \
     bool inverse),                                                                                  \
    (device, out, x, cos, sin, inverse), inverse ? "rope_grad" : "rope", false,                      \
    kv_bytes(out) + kv_bytes(x) + x->shape[x->ndim - 2] * x->shape[x->ndim - 1] * dsz(x->dtype), 0,  \
    PROF_KERN(x->dtype))                                                                             \
  X(linalg,                                                                                          \
    (int device, const em_linalg_args *a, void *const *out, const void *x, const void *b,            \
     int64_t info[2]),                                                                               \
    (device, a, out, x, b, info), linalg_name(a->op), false,                                         \
    2 * a->batch * a->m * a->n * dsz(a->dtype), 0, "lapack")                                         \
  X(gated,                                                                                           \
    (int device, em_unary_op act, em_dtype dt, int64_t n, void *out, const void *gate,               \
     const void *up),                                                                                \
    (device, act, dt, n, out, gate, up), act == EM_SILU ? "swiglu" : "geglu", false,                 \
    3 * n * dsz(dt), 0, PROF_KERN(dt))                                                               \
  X(gated_backward,                                                                                  \
    (int device, em_unary_op act, em_dtype dt, int64_t n, void *dgate, void *dup, const void *dout,  \
     const void *gate, const void *up),                                                              \
    (device, act, dt, n, dgate, dup, dout, gate, up),                                                \
    act == EM_SILU ? "swiglu_grad" : "geglu_grad", false,                                            \
    (3 + (dgate != NULL) + (dup != NULL)) * n * dsz(dt), 0, PROF_KERN(dt))
#endif

#define RE prof_real[PROF_SLOT]
#define W(f) PROF_CAT(PROF_CAT(prof_, f), PROF_CAT(_, PROF_SLOT))

#define PROF_WRAPPER(f, params, args, span, own, bytes, flops, impl)                                \
  static em_status W(f) params {                                                                    \
    if (!em__prof_is_on()) return RE->f args;                                                       \
    int64_t i = prof_begin((span), EM_PROF_KERNEL, RE->name, (own));                                \
    em_status s = RE->f args;                                                                       \
    prof_end(i, (bytes), (flops), (impl));                                                          \
    return s;                                                                                       \
  }
PROF_KERNELS(PROF_WRAPPER)
#undef PROF_WRAPPER

/* The wrappers of this slot over a copy of the backend's vtable; optional
** kernels the backend lacks stay NULL, so the core's checks still see it. */
static void W(wrap)(em_backend *w) {
#define SET(f, ...) if (w->f) w->f = W(f);
  PROF_KERNELS(SET)
#undef SET
}

#undef W
#undef RE
