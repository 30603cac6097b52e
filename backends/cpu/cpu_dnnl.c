/*
** cpu_dnnl.c -- batched gemm through oneDNN's matmul primitive (bfloat16
** always, float32 where the rule in cpu_gemm.c picks it).
**
** oneDNN JIT-compiles a kernel for the machine it runs on: AMX tiles
** where the CPU has them, AVX512-BF16 or plain AVX-512 otherwise (or what
** ONEDNN_MAX_CPU_ISA caps it to). Creating a primitive costs tens of
** microseconds to milliseconds, so primitives are cached here by
** everything that defines one (dtype, sizes, strides, transposes, alpha,
** beta); a training loop meets the same few shapes every step. Debian's
** libdnnl is built on OpenMP (libgomp), the runtime our own kernels use,
** so its threads are our OpenMP team (cpu_backend.c, Threads).
**
** bfloat16 products accumulate in float32 inside oneDNN and are rounded
** once to bfloat16 on the way out (alpha and beta applied in float32).
*/
#include "cpu_dnnl.h"

#include <pthread.h>
#include <stdio.h>

/* Entries kept; past this, a product runs on a primitive created and
** destroyed for the call (correct, only slower). Entries are never evicted,
** so a primitive is never destroyed while another thread runs it. */
#define DNNL_CACHE_MAX 256

typedef struct dnnl_key {
  em_dtype dt;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
  double alpha, beta;
  bool bias; /* C = op(A) op(B) + bias[n] (gemm_bias) */
} dnnl_key;

typedef struct dnnl_entry {
  dnnl_key key;
  dnnl_primitive_t prim; /* NULL: oneDNN has no kernel for it (remembered) */
  dnnl_memory_desc_t a_md, b_md, c_md, bias_md;
} dnnl_entry;

static pthread_mutex_t dnnl_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t dnnl_eng;
static dnnl_stream_t dnnl_strm;      /* executions are serialised by exec_lock */
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_entry dnnl_cache[DNNL_CACHE_MAX];
static int dnnl_cached;
/* The implementation oneDNN chose for the last primitive of each dtype
** ("brg:avx512_core_amx", ...), for cpu_info. */
static char dnnl_impl[EM_NDTYPES][64];

/* dnnl_unimplemented is EM_ERR_UNSUPPORTED: cpu_gemm then takes its own
** path (and nn.Conv2d its composition). */
em_status cpu_dnnl_fail(const char *who, const char *what, dnnl_status_t st) {
  return em_error(st == dnnl_unimplemented ? EM_ERR_UNSUPPORTED : EM_ERR_BACKEND,
                  "%s (oneDNN): %s failed (dnnl status %d)", who, what, (int)st);
}

static em_status dnnl_fail(const char *what, dnnl_status_t st) {
  return cpu_dnnl_fail("cpu gemm", what, st);
}

/* Engine and stream, created on first use (under dnnl_lock). */
static em_status dnnl_ready(const char *who) {
  dnnl_status_t st;
  if (!dnnl_eng && (st = dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0)) != dnnl_success)
    return cpu_dnnl_fail(who, "engine_create", st);
  if (!dnnl_strm &&
      (st = dnnl_stream_create(&dnnl_strm, dnnl_eng, dnnl_stream_default_flags)) != dnnl_success)
    return cpu_dnnl_fail(who, "stream_create", st);
  return EM_OK;
}

em_status cpu_dnnl_engine(const char *who, dnnl_engine_t *eng) {
  pthread_mutex_lock(&dnnl_lock);
  em_status s = dnnl_ready(who);
  pthread_mutex_unlock(&dnnl_lock);
  if (s) return s;
  *eng = dnnl_eng;
  return EM_OK;
}

em_status cpu_dnnl_execute(const char *who, dnnl_primitive_t p, int nargs,
                           const dnnl_exec_arg_t *args) {
  pthread_mutex_lock(&exec_lock);
  dnnl_status_t st = dnnl_primitive_execute(p, dnnl_strm, nargs, args);
  if (st == dnnl_success) st = dnnl_stream_wait(dnnl_strm);
  pthread_mutex_unlock(&exec_lock);
  return st ? cpu_dnnl_fail(who, "primitive_execute", st) : EM_OK;
}

static bool key_eq(const dnnl_key *x, const dnnl_key *y) {
  return x->dt == y->dt && x->ta == y->ta && x->tb == y->tb && x->m == y->m && x->n == y->n &&
         x->k == y->k && x->lda == y->lda && x->ldb == y->ldb && x->ldc == y->ldc &&
         x->stride_a == y->stride_a && x->stride_b == y->stride_b &&
         x->stride_c == y->stride_c && x->batch == y->batch && x->alpha == y->alpha &&
         x->beta == y->beta && x->bias == y->bias;
}

/* [batch, rows, cols] with the given strides; a batch stride of 0 is a
** batch dim of 1, which oneDNN broadcasts. */
static dnnl_status_t md3(dnnl_memory_desc_t *md, dnnl_data_type_t t, int64_t batch,
                         int64_t rows, int64_t cols, int64_t bstride, int64_t rs, int64_t cs) {
  dnnl_dims_t dims = {bstride == 0 ? 1 : batch, rows, cols};
  dnnl_dims_t strides = {bstride == 0 ? rows * cols : bstride, rs, cs};
  return dnnl_memory_desc_init_by_strides(md, 3, dims, t, strides);
}

static em_status entry_create(dnnl_entry *e, const dnnl_key *key) {
  const dnnl_data_type_t t = key->dt == EM_BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_status_t st;
  e->key = *key;
  /* op(A)[i,p] = A[i*lda + p], or A[p*lda + i] when transposed */
  if ((st = md3(&e->a_md, t, key->batch, key->m, key->k, key->stride_a, key->ta ? 1 : key->lda,
                key->ta ? key->lda : 1)) ||
      (st = md3(&e->b_md, t, key->batch, key->k, key->n, key->stride_b, key->tb ? 1 : key->ldb,
                key->tb ? key->ldb : 1)) ||
      (st = md3(&e->c_md, t, key->batch, key->m, key->n, key->stride_c == 0 ? 1 : key->stride_c,
                key->ldc, 1)) ||
      (key->bias && (st = md3(&e->bias_md, t, 1, 1, key->n, 0, key->n, 1))))
    return dnnl_fail("memory_desc_init", st);
  dnnl_matmul_desc_t desc;
  if ((st = dnnl_matmul_desc_init(&desc, &e->a_md, &e->b_md, key->bias ? &e->bias_md : NULL,
                                  &e->c_md)))
    return dnnl_fail("matmul_desc_init", st);
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  em_status s = EM_OK;
  if ((st = dnnl_primitive_attr_create(&attr))) {
    s = dnnl_fail("primitive_attr_create", st);
    goto done;
  }
  if (key->alpha != 1) {
    const float alpha = (float)key->alpha;
    if ((st = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha))) {
      s = dnnl_fail("set_output_scales", st);
      goto done;
    }
  }
  if (key->beta != 0) {
    if ((st = dnnl_post_ops_create(&po)) || (st = dnnl_post_ops_append_sum(po, (float)key->beta)) ||
        (st = dnnl_primitive_attr_set_post_ops(attr, po))) {
      s = dnnl_fail("post_ops (beta)", st);
      goto done;
    }
  }
  if ((st = dnnl_primitive_desc_create(&pd, &desc, attr, dnnl_eng, NULL))) {
    s = dnnl_fail("primitive_desc_create", st);
    goto done;
  }
  const char *impl = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
    snprintf(dnnl_impl[key->dt], sizeof dnnl_impl[key->dt], "%s", impl);
  if ((st = dnnl_primitive_create(&e->prim, pd))) s = dnnl_fail("primitive_create", st);
done:
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return s;
}

static em_status run(const dnnl_entry *e, const void *a, const void *b, const void *bias,
                     void *c) {
  dnnl_memory_t ma = NULL, mb = NULL, mc = NULL, mbias = NULL;
  dnnl_status_t st;
  em_status s = EM_OK;
  if ((st = dnnl_memory_create(&ma, &e->a_md, dnnl_eng, (void *)a)) ||
      (st = dnnl_memory_create(&mb, &e->b_md, dnnl_eng, (void *)b)) ||
      (st = dnnl_memory_create(&mc, &e->c_md, dnnl_eng, c)) ||
      (e->key.bias && (st = dnnl_memory_create(&mbias, &e->bias_md, dnnl_eng, (void *)bias)))) {
    s = dnnl_fail("memory_create", st);
  } else {
    dnnl_exec_arg_t args[4] = {
      {DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_BIAS, mbias}};
    s = cpu_dnnl_execute("cpu gemm", e->prim, e->key.bias ? 4 : 3, args);
  }
  if (ma) dnnl_memory_destroy(ma);
  if (mb) dnnl_memory_destroy(mb);
  if (mc) dnnl_memory_destroy(mc);
  if (mbias) dnnl_memory_destroy(mbias);
  return s;
}

/* Runs the product of key on the cached primitive, created on first use. */
static em_status run_key(const dnnl_key *key, const void *a, const void *b, const void *bias,
                         void *c) {
  pthread_mutex_lock(&dnnl_lock);
  em_status s = dnnl_ready("cpu gemm");
  const dnnl_entry *hit = NULL;
  for (int i = 0; !s && i < dnnl_cached && !hit; i++)
    if (key_eq(&dnnl_cache[i].key, key)) hit = &dnnl_cache[i];
  dnnl_entry tmp = {0};
  if (!s && !hit) {
    dnnl_entry *e = dnnl_cached < DNNL_CACHE_MAX ? &dnnl_cache[dnnl_cached] : &tmp;
    s = entry_create(e, key);
    if ((!s || s == EM_ERR_UNSUPPORTED) && e != &tmp) dnnl_cached++;
    hit = e;
  }
  pthread_mutex_unlock(&dnnl_lock);
  if (s) return s;
  if (!hit->prim)
    return em_error(EM_ERR_UNSUPPORTED, "cpu gemm (oneDNN): no kernel for %s on this CPU",
                    cpu_dtype_name(key->dt));
  s = run(hit, a, b, bias, c);
  if (tmp.prim) dnnl_primitive_destroy(tmp.prim);
  return s;
}

em_status cpu_dnnl_gemm(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                        double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                        int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                        int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return EM_OK;
  if (stride_a == 0 && stride_b == 0 && batch > 1) {
    /* oneDNN cannot broadcast both operands into a batched result: one
    ** product per output matrix */
    const size_t es = cpu_dtype_size(dt);
    for (int64_t i = 0; i < batch; i++) {
      em_status s = cpu_dnnl_gemm(dt, ta, tb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta,
                                  (char *)c + (size_t)(i * stride_c) * es, ldc, 0, 1);
      if (s) return s;
    }
    return EM_OK;
  }
  const dnnl_key key = {dt,  ta,       tb,       m,        n,     k,     lda,  ldb,
                        ldc, stride_a, stride_b, stride_c, batch, alpha, beta, false};
  return run_key(&key, a, b, NULL, c);
}

/* One product plus a bias row added in oneDNN's own pass (its matmul's
** bias argument): C = op(A) op(B) + bias, accumulated in float32 and, for
** bfloat16, rounded once. */
em_status cpu_dnnl_gemm_bias(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, const void *b, int64_t ldb,
                             const void *bias, void *c, int64_t ldc) {
  if (m == 0 || n == 0) return EM_OK;
  const dnnl_key key = {dt, ta, tb, m, n, k, lda, ldb, ldc, 0, 0, 0, 1, 1.0, 0.0, true};
  return run_key(&key, a, b, bias, c);
}

/* Creates (or finds) a probe primitive for dt and reports what oneDNN
** chose for it: the ISA it will use for that dtype. */
em_status cpu_dnnl_impl(em_dtype dt, char *buf, size_t n) {
  static const int64_t p = 256;
  const dnnl_key key = {dt, false, false, p, p, p, p, p, p, p * p, p * p, p * p, 1, 1.0, 0.0, false};
  pthread_mutex_lock(&dnnl_lock);
  em_status s = dnnl_ready("cpu gemm");
  if (!s) {
    dnnl_entry e = {0};
    s = entry_create(&e, &key);
    if (e.prim) dnnl_primitive_destroy(e.prim);
  }
  if (!s) snprintf(buf, n, "%s", dnnl_impl[dt]);
  else if (s == EM_ERR_UNSUPPORTED) {
    snprintf(buf, n, "none (no oneDNN kernel on this CPU)");
    s = EM_OK;
  }
  pthread_mutex_unlock(&dnnl_lock);
  return s;
}
