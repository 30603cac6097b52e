/*
** ops_create.c -- tensors made from nothing: arange and random draws, and
** the global random generator.
**
** The generator is a Philox key (the seed) plus a counter. A draw of n
** numbers reserves n counter values, and element i of the draw uses
** counter offset + i (see ember_philox.h), so any backend produces the same
** numbers for the same seed and sequence of draws.
*/
#include "internal.h"

#include <math.h>
#include <pthread.h>

/* A fixed default seed, so runs are reproducible without em_manual_seed. */
#define DEFAULT_SEED UINT64_C(0x853c49e6748fea9b)

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed = DEFAULT_SEED;
static uint64_t rng_counter = 0;

void em_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_counter = 0;
  pthread_mutex_unlock(&rng_lock);
}

uint64_t em_initial_seed(void) {
  pthread_mutex_lock(&rng_lock);
  uint64_t seed = rng_seed;
  pthread_mutex_unlock(&rng_lock);
  return seed;
}

uint64_t em_rng_advance(uint64_t n) {
  pthread_mutex_lock(&rng_lock);
  uint64_t offset = rng_counter;
  rng_counter += n;
  pthread_mutex_unlock(&rng_lock);
  return offset;
}

void em_rng_get_state(uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&rng_lock);
  if (seed) *seed = rng_seed;
  if (offset) *offset = rng_counter;
  pthread_mutex_unlock(&rng_lock);
}

void em_rng_set_state(uint64_t seed, uint64_t offset) {
  pthread_mutex_lock(&rng_lock);
  rng_seed = seed;
  rng_counter = offset;
  pthread_mutex_unlock(&rng_lock);
}

/* Seed and offset of one draw of n numbers, read together so that a
** concurrent em_manual_seed cannot pair a new seed with an old offset. */
static void rng_draw(uint64_t n, uint64_t *seed, uint64_t *offset) {
  pthread_mutex_lock(&rng_lock);
  *seed = rng_seed;
  *offset = rng_counter;
  rng_counter += n;
  pthread_mutex_unlock(&rng_lock);
}

/* ---------------------------------------------------------------- */
/* arange                                                            */
/* ---------------------------------------------------------------- */

/* Writes start + i*step for i < n into host memory of dtype dt. */
static void arange_fill(void *buf, em_dtype dt, int64_t n, double start, double step) {
  for (int64_t i = 0; i < n; i++) {
    double v = start + (double)i * step;
    switch (dt) {
    case EM_F32: ((float *)buf)[i] = (float)v; break;
    case EM_F64: ((double *)buf)[i] = v; break;
    case EM_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: break;
    }
  }
}

em_status em_arange(em_tensor **out, double start, double end, double step, em_dtype dt,
                    em_device dev) {
  *out = NULL;
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return em_error(EM_ERR_ARG, "arange: start, end and step must be finite, got %g, %g, %g",
                    start, end, step);
  if (step == 0) return em_error(EM_ERR_ARG, "arange: step must not be 0");
  if ((end - start) / step < 0)
    return em_error(EM_ERR_ARG, "arange: step %g never reaches end %g from start %g", step, end,
                    start);
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_I64 && dt != EM_BF16)
    return em_error(EM_ERR_DTYPE, "arange: dtype must be float32, float64, int64 or bfloat16, "
                    "got %s", em_dtype_name(dt));
  double count = ceil((end - start) / step);
  if (count > (double)EM__MAX_NUMEL)
    return em_error(EM_ERR_OOM, "arange: %g elements (start %g, end %g, step %g) is too many",
                    count, start, end, step);
  int64_t n = (int64_t)count;
  /* bfloat16 is computed in float32 and converted by the backend. */
  em_dtype host_dt = dt == EM_BF16 ? EM_F32 : dt;
  void *buf = malloc((size_t)(n > 0 ? n : 1) * em_dtype_size(host_dt));
  if (!buf) return em_error(EM_ERR_OOM, "arange: out of memory for %lld elements", (long long)n);
  arange_fill(buf, host_dt, n, start, step);
  em_tensor *t = NULL;
  em_status s = em_from_host(&t, 1, &n, host_dt, buf, dev);
  free(buf);
  if (s || dt == host_dt) {
    *out = t;
    return s;
  }
  s = em_to_dtype(out, t, dt);
  em_release(t);
  return s;
}

/* ---------------------------------------------------------------- */
/* uniform and normal                                                */
/* ---------------------------------------------------------------- */

static em_status random_tensor(em_tensor **out, const char *op, em_random_kind kind, int ndim,
                               const int64_t *shape, double a, double b, em_dtype dt,
                               em_device dev) {
  *out = NULL;
  if (!em_dtype_is_float(dt))
    return em_error(EM_ERR_DTYPE, "%s: dtype must be a float type, got %s", op,
                    em_dtype_name(dt));
  em_tensor *t;
  EM_TRY(em__new(&t, ndim, shape, dt, dev, op));
  int64_t n = em_numel(t);
  if (n > 0) {
    uint64_t seed, offset;
    em_kview kv;
    em_kview_of(t, &kv);
    rng_draw((uint64_t)n, &seed, &offset);
    em_status s = em__be(t)->random(dev.index, kind, &kv, a, b, seed, offset);
    if (s) {
      em_release(t);
      return em__kernel_fail(op, s);
    }
  }
  *out = t;
  return EM_OK;
}

em_status em_uniform(em_tensor **out, int ndim, const int64_t *shape, double lo, double hi,
                     em_dtype dt, em_device dev) {
  *out = NULL;
  if (!isfinite(lo) || !isfinite(hi) || lo > hi)
    return em_error(EM_ERR_ARG, "uniform: need finite lo <= hi, got lo %g, hi %g", lo, hi);
  return random_tensor(out, "uniform", EM_RAND_UNIFORM, ndim, shape, lo, hi, dt, dev);
}

em_status em_normal(em_tensor **out, int ndim, const int64_t *shape, double mean, double std,
                    em_dtype dt, em_device dev) {
  *out = NULL;
  if (!isfinite(mean) || !isfinite(std) || std < 0)
    return em_error(EM_ERR_ARG, "normal: need a finite mean and std >= 0, got mean %g, std %g",
                    mean, std);
  return random_tensor(out, "normal", EM_RAND_NORMAL, ndim, shape, mean, std, dt, dev);
}
