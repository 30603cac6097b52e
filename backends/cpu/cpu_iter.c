/*
** cpu_iter.c -- walking several same-shaped strided views together.
**
** Elementwise kernels (copy, fill, unary, binary, where) describe their
** operands as em_kviews. The iterator drops size-1 dims and merges dims
** that are contiguous for every operand, so a contiguous tensor of any
** shape becomes one run and the kernel's inner loop sees plain arrays.
** What is left is walked with an N-d index counter, one innermost run at
** a time; big tensors are split into equal element ranges, one per thread.
*/
#include "cpu_internal.h"

#include <omp.h>
#include <stdio.h>

const char *cpu_dtype_name(em_dtype dt) { return em_kernel_dtype_name(dt); }

size_t cpu_dtype_size(em_dtype dt) { return em_kernel_dtype_size(dt); }

em_status cpu_bad_dtype(const char *kernel, em_dtype dt, const char *supported) {
  return em_error(EM_ERR_DTYPE, "cpu %s: dtype %s is not supported (supported: %s)", kernel,
                  cpu_dtype_name(dt), supported);
}

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t used = 0;
  used += (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < ndim && used < n; d++)
    used += (size_t)snprintf(buf + used, n - used, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (used < n) snprintf(buf + used, n - used, "]");
  return buf;
}

em_status cpu_iter_init(cpu_iter *it, const char *op, int nops, const em_kview *const *v) {
  const em_kview *ref = v[0];
  size_t es[CPU_MAX_OPS];
  if (nops < 1 || nops > CPU_MAX_OPS)
    return em_error(EM_ERR_ARG, "cpu %s: %d operands, expected 1..%d", op, nops, CPU_MAX_OPS);
  if (ref->ndim < 0 || ref->ndim > EM_MAX_DIMS)
    return em_error(EM_ERR_ARG, "cpu %s: ndim %d, expected 0..%d", op, ref->ndim, EM_MAX_DIMS);
  for (int k = 0; k < nops; k++) {
    es[k] = cpu_dtype_size(v[k]->dtype);
    if (es[k] == 0)
      return em_error(EM_ERR_DTYPE, "cpu %s: operand %d has invalid dtype %d", op, k,
                      (int)v[k]->dtype);
    int same = v[k]->ndim == ref->ndim;
    for (int d = 0; same && d < ref->ndim; d++) same = v[k]->shape[d] == ref->shape[d];
    if (!same) {
      char b1[128], b2[128];
      return em_error(EM_ERR_SHAPE, "cpu %s: operand %d has shape %s, expected %s", op, k,
                      shape_str(v[k]->ndim, v[k]->shape, b1, sizeof b1),
                      shape_str(ref->ndim, ref->shape, b2, sizeof b2));
    }
    it->data[k] = (char *)v[k]->data;
  }
  it->nops = nops;
  it->numel = 1;
  for (int d = 0; d < ref->ndim; d++) {
    if (ref->shape[d] < 0)
      return em_error(EM_ERR_SHAPE, "cpu %s: negative size %lld in dim %d", op,
                      (long long)ref->shape[d], d);
    it->numel *= ref->shape[d];
  }

  /* Drop size-1 dims, then merge each dim into the one outside it when
  ** that is contiguous with it for every operand. */
  int nd = 0;
  for (int d = 0; d < ref->ndim; d++) {
    if (ref->shape[d] == 1) continue;
    if (nd > 0) {
      int merge = 1;
      for (int k = 0; k < nops && merge; k++)
        merge = it->stride[k][nd - 1] == v[k]->stride[d] * (int64_t)es[k] * ref->shape[d];
      if (merge) {
        it->shape[nd - 1] *= ref->shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][nd - 1] = v[k]->stride[d] * (int64_t)es[k];
        continue;
      }
    }
    it->shape[nd] = ref->shape[d];
    for (int k = 0; k < nops; k++) it->stride[k][nd] = v[k]->stride[d] * (int64_t)es[k];
    nd++;
  }
  if (nd == 0) { /* a scalar, or all dims of size 1 */
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->stride[k][0] = (int64_t)es[k];
    nd = 1;
  }
  it->ndim = nd;
  return EM_OK;
}

/* Runs fn over the elements [lo, hi) in row-major order. */
static void run_range(const cpu_iter *it, cpu_loop_fn fn, void *ctx, int64_t lo, int64_t hi) {
  int nd = it->ndim, nops = it->nops;
  int64_t inner = it->shape[nd - 1];
  int64_t idx[EM_MAX_DIMS];
  char *p[CPU_MAX_OPS];
  int64_t s[CPU_MAX_OPS];

  int64_t r = lo; /* divisions are slow: the serial case starts at 0 */
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = r ? r % it->shape[d] : 0;
    r = r ? r / it->shape[d] : 0;
  }
  for (int k = 0; k < nops; k++) s[k] = it->stride[k][nd - 1];

  int64_t pos = lo;
  while (pos < hi) {
    for (int k = 0; k < nops; k++) {
      char *q = it->data[k];
      for (int d = 0; d < nd; d++) q += idx[d] * it->stride[k][d];
      p[k] = q;
    }
    int64_t run = inner - idx[nd - 1];
    if (run > hi - pos) run = hi - pos;
    fn(p, s, run, ctx);
    pos += run;
    /* next row: the innermost index wraps, carry outward */
    idx[nd - 1] = 0;
    for (int d = nd - 2; d >= 0; d--) {
      if (++idx[d] < it->shape[d]) break;
      idx[d] = 0;
    }
  }
}

void cpu_iter_run(const cpu_iter *it, cpu_loop_fn fn, void *ctx) {
  int64_t numel = it->numel;
  if (numel <= 0) return;
  if (numel <= CPU_PAR_MIN || !cpu_team_go(0)) {
    run_range(it, fn, ctx, 0, numel);
    return;
  }
  const uint64_t t0 = cpu_team_now();
  uint64_t lag = 0;
#pragma omp parallel
  {
    CPU_TEAM_MARK(t0, lag);
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t lo = numel / nt * t + (t < numel % nt ? t : numel % nt);
    int64_t hi = lo + numel / nt + (t < numel % nt ? 1 : 0);
    if (lo < hi) run_range(it, fn, ctx, lo, hi);
  }
  cpu_team_note(t0, lag);
}
