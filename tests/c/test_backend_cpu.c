/*
** test_backend_cpu.c -- checks the CPU backend plugin's kernels against
** straightforward reference loops (in double), and its error paths.
**
**   test_backend_cpu path/to/ember_backend_cpu.so
**
** Prints "ok N - name" / "not ok N - name" per check and "N passed, M
** failed" at the end; exits 1 on any failure. Build with libember, or
** with -DEMBER_TEST_SHIM -rdynamic to supply em_error here instead.
*/
#include "ember.h"
#include "ember_backend.h"
#include "ember_philox.h"
#include "ember_plugin.h"

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef EMBER_TEST_SHIM
static _Thread_local char shim_msg[1024];
em_status em_verror(em_status code, const char *fmt, va_list ap) {
  vsnprintf(shim_msg, sizeof shim_msg, fmt, ap);
  return code;
}
em_status em_error(em_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  em_verror(code, fmt, ap);
  va_end(ap);
  return code;
}
const char *em_error_message(void) { return shim_msg; }
#endif

static const em_backend *be;
static int n_pass, n_fail;

static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf(ok ? "ok %d - " : "not ok %d - ", n_pass + n_fail + 1);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok)
    n_pass++;
  else
    n_fail++;
}

/* ---- helpers ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;
}

static void *xmalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static size_t esize(em_dtype dt) {
  return dt == EM_F32 ? 4 : dt == EM_BOOL ? 1 : dt == EM_BF16 ? 2 : 8;
}

/* Random array of n values of dtype dt, scaled, also returned as doubles. */
static void *rand_arr(em_dtype dt, int64_t n, double lo, double hi, double *copy) {
  void *p = xmalloc((size_t)n * esize(dt));
  for (int64_t i = 0; i < n; i++) {
    double v = lo + (hi - lo) * (urand() + 1) / 2;
    if (dt == EM_F32) {
      ((float *)p)[i] = (float)v;
      v = ((float *)p)[i];
    } else if (dt == EM_F64)
      ((double *)p)[i] = v;
    else if (dt == EM_I64) {
      ((int64_t *)p)[i] = (int64_t)floor(v);
      v = floor(v);
    } else if (dt == EM_BOOL) {
      ((uint8_t *)p)[i] = v > 0;
      v = v > 0;
    }
    if (copy) copy[i] = v;
  }
  return p;
}

static double get(const void *p, em_dtype dt, int64_t i) {
  switch (dt) {
    case EM_F32: return ((const float *)p)[i];
    case EM_F64: return ((const double *)p)[i];
    case EM_I64: return (double)((const int64_t *)p)[i];
    case EM_BOOL: return ((const uint8_t *)p)[i];
    default: return NAN;
  }
}

/* All |got - want| <= atol + rtol * |want| (NaN matches NaN, inf matches inf). */
static int close_to(const char *name, const void *got, em_dtype dt, const double *want, int64_t n,
                    double atol, double rtol) {
  for (int64_t i = 0; i < n; i++) {
    double g = get(got, dt, i), w = want[i];
    int ok = (isnan(w) && isnan(g)) || (isinf(w) && g == w) ||
             (isfinite(w) && fabs(g - w) <= atol + rtol * fabs(w));
    if (!ok) {
      printf("# %s: element %lld is %.17g, expected %.17g\n", name, (long long)i, g, w);
      return 0;
    }
  }
  return 1;
}

static em_kview kv(void *data, em_dtype dt, int ndim, const int64_t *shape) {
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = data;
  v.dtype = dt;
  v.ndim = ndim;
  int64_t st = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    v.shape[d] = shape[d];
    v.stride[d] = st;
    st *= shape[d];
  }
  return v;
}

static em_kview kvs(void *data, em_dtype dt, int ndim, const int64_t *shape,
                    const int64_t *stride) {
  em_kview v = kv(data, dt, ndim, shape);
  for (int d = 0; d < ndim; d++) v.stride[d] = stride[d];
  return v;
}

static int msg_has(const char *a, const char *b) {
  const char *m = em_error_message();
  return strstr(m, a) && (!b || strstr(m, b));
}

static const char *dtn(em_dtype dt) {
  return dt == EM_F32 ? "f32" : dt == EM_F64 ? "f64" : dt == EM_I64 ? "i64" : "bool";
}

/* ---- plugin, memory, threads ---- */

static void test_plugin(void *h) {
  const em_plugin_info *info = dlsym(h, EM_PLUGIN_INFO_SYMBOL);
  check(info && info->abi_version == EM_BACKEND_ABI_VERSION && info->kind == EM_PLUGIN_BACKEND &&
            strcmp(info->name, "cpu") == 0,
        "plugin info: abi, kind backend, name cpu");
  check(be->abi_version == EM_BACKEND_ABI_VERSION && be->struct_size == sizeof(em_backend) &&
            be->host_memory && strcmp(be->name, "cpu") == 0 && be->device_count() == 1,
        "backend header: abi, struct_size, host_memory, one device");
  /* every field, optional ones included, is set */
  const void *const *fields =
      (const void *const *)((const char *)be + offsetof(em_backend, device_count));
  size_t nf = (sizeof(em_backend) - offsetof(em_backend, device_count)) / sizeof(void *);
  size_t missing = 0;
  for (size_t i = 0; i < nf; i++) missing += fields[i] == NULL;
  check(missing == 0, "all %zu function fields are set (%zu missing)", nf, missing);
  char name[256] = "";
  check(be->device_name(0, name, sizeof name) == EM_OK && name[0], "device_name: \"%s\"", name);
  check(be->device_name(1, name, sizeof name) == EM_ERR_DEVICE, "device_name(1) is a device error");
}

static void test_memory(void) {
  size_t used0, used1, used2, cached;
  void *p = NULL;
  be->memory_stats(0, &used0, &cached);
  em_status s = be->alloc(0, 1000, &p);
  be->memory_stats(0, &used1, &cached);
  check(s == EM_OK && p && ((uintptr_t)p % 64) == 0, "alloc 1000 bytes, 64-byte aligned");
  check(used1 - used0 == 1000 && cached == 0, "memory_stats counts the allocation");
  unsigned char host[1000], back[1000];
  for (int i = 0; i < 1000; i++) host[i] = (unsigned char)(i * 7);
  void *q = NULL;
  be->alloc(0, 1000, &q);
  s = be->copy_h2d(0, p, host, 1000);
  if (!s) s = be->copy_d2d(0, q, 0, p, 1000);
  if (!s) s = be->copy_d2h(0, back, q, 1000);
  check(s == EM_OK && memcmp(host, back, 1000) == 0, "copy h2d, d2d, d2h round trip");
  be->free(0, q, 1000);
  be->free(0, p, 1000);
  be->memory_stats(0, &used2, &cached);
  check(used2 == used0, "free returns the bytes");
  p = (void *)1;
  check(be->alloc(0, 0, &p) == EM_OK, "alloc of 0 bytes is fine");
  be->free(0, p, 0);
  s = be->alloc(0, (size_t)1 << 62, &p);
  check(s == EM_ERR_OOM && msg_has("4611686018427387904", NULL),
        "absurd alloc is EM_ERR_OOM naming the size: %s", em_error_message());
  check(be->synchronize(0) == EM_OK && be->empty_cache(0) == EM_OK, "synchronize, empty_cache");
  be->set_num_threads(1);
  int one = be->get_num_threads();
  be->set_num_threads(2);
  check(one == 1 && be->get_num_threads() == 2, "set_num_threads / get_num_threads");
}

/* ---- copy and fill ---- */

/* bf16 by brute force: the nearer of the two bf16 neighbours, ties to even. */
static uint16_t ref_bf16(float f) {
  if (isnan(f)) return 0x7fc0;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
  float flo, fhi;
  memcpy(&flo, &lo, 4);
  memcpy(&fhi, &hi, 4);
  /* above the largest bf16, IEEE rounds as if the next value were 2^128 */
  double vhi = isinf(fhi) ? copysign(ldexp(1.0, 128), f) : (double)fhi;
  double dl = fabs((double)f - flo), dh = fabs(vhi - f);
  if (isinf(f)) return (uint16_t)(u >> 16);
  if (dl < dh || (dl == dh && !((lo >> 16) & 1))) return (uint16_t)(lo >> 16);
  return (uint16_t)(hi >> 16);
}

static void test_copy_fill(void) {
  int64_t n = 7, shape[1] = {7};
  double src[7] = {1.5, -2.7, 0.0, 1e10, -0.4, 3.99, 255.5};
  float f[7];
  int64_t iv[7];
  uint8_t bv[7];
  em_kview vs = kv(src, EM_F64, 1, shape);
  em_kview vf = kv(f, EM_F32, 1, shape), vi = kv(iv, EM_I64, 1, shape),
           vb = kv(bv, EM_BOOL, 1, shape);
  int ok = be->copy(0, &vf, &vs) == EM_OK;
  for (int i = 0; i < n; i++) ok &= f[i] == (float)src[i];
  check(ok, "copy f64 -> f32");
  ok = be->copy(0, &vi, &vs) == EM_OK;
  for (int i = 0; i < n; i++) ok &= iv[i] == (int64_t)src[i];
  check(ok, "copy f64 -> i64 truncates");
  ok = be->copy(0, &vb, &vs) == EM_OK;
  for (int i = 0; i < n; i++) ok &= bv[i] == (src[i] != 0);
  check(ok, "copy f64 -> bool");
  double d[7];
  em_kview vd = kv(d, EM_F64, 1, shape);
  ok = be->copy(0, &vd, &vb) == EM_OK;
  for (int i = 0; i < n; i++) ok &= d[i] == (src[i] != 0);
  check(ok, "copy bool -> f64");
  ok = be->copy(0, &vd, &vi) == EM_OK;
  for (int i = 0; i < n; i++) ok &= d[i] == (double)(int64_t)src[i];
  check(ok, "copy i64 -> f64");

  /* bf16: every rounding case, through f32 and back */
  enum { NB = 4003 }; /* 16-lane blocks and a tail */
  float bsrc[NB], bback[NB];
  uint16_t bh[NB];
  for (int i = 0; i < NB; i++) {
    uint32_t u =
        (uint32_t)(rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull) >> 0;
    u = (uint32_t)(rng_state >> 32);
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
    memcpy(&bsrc[i], &u, 4);
  }
  bsrc[0] = NAN;
  bsrc[1] = INFINITY;
  bsrc[2] = -0.0f;
  bsrc[3] = 3.4028235e38f;
  int64_t bshape[1] = {NB};
  em_kview vbs = kv(bsrc, EM_F32, 1, bshape), vbh = kv(bh, EM_BF16, 1, bshape),
           vbb = kv(bback, EM_F32, 1, bshape);
  ok = be->copy(0, &vbh, &vbs) == EM_OK && be->copy(0, &vbb, &vbh) == EM_OK;
  int bad = -1;
  for (int i = 0; i < NB && ok; i++) {
    uint16_t want = ref_bf16(bsrc[i]);
    uint32_t wb = (uint32_t)want << 16;
    float wf;
    memcpy(&wf, &wb, 4);
    if (isnan(bsrc[i]) ? !(isnan(bback[i]) && (bh[i] & 0x7f80) == 0x7f80)
                       : (bh[i] != want || memcmp(&bback[i], &wf, 4) != 0))
      bad = i, ok = 0;
  }
  check(ok, "copy f32 -> bf16 rounds to nearest even, bf16 -> f32 exact (first bad %d)", bad);
  double d2[3] = {1.0, 1.00390625, -2.5};
  uint16_t h2[3];
  int64_t s3[1] = {3};
  em_kview vd2 = kv(d2, EM_F64, 1, s3), vh2 = kv(h2, EM_BF16, 1, s3);
  check(be->copy(0, &vh2, &vd2) == EM_OK && h2[0] == 0x3f80 && h2[1] == 0x3f80 && h2[2] == 0xc020,
        "copy f64 -> bf16");

  /* strided: transpose a [3,4] into a contiguous [4,3]; broadcast a row */
  float m[12], t[12], row[4] = {1, 2, 3, 4}, bc[12];
  for (int i = 0; i < 12; i++) m[i] = (float)i;
  int64_t sh43[2] = {4, 3}, st_t[2] = {1, 4}, st_b[2] = {0, 1}, sh34[2] = {3, 4};
  em_kview vt = kv(t, EM_F32, 2, sh43), vm = kvs(m, EM_F32, 2, sh43, st_t);
  ok = be->copy(0, &vt, &vm) == EM_OK;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ok &= t[i * 3 + j] == m[j * 4 + i];
  check(ok, "copy of a transposed view");
  em_kview vbc = kv(bc, EM_F32, 2, sh34), vrow = kvs(row, EM_F32, 2, sh34, st_b);
  ok = be->copy(0, &vbc, &vrow) == EM_OK;
  for (int i = 0; i < 12; i++) ok &= bc[i] == row[i % 4];
  check(ok, "copy of a broadcast row");

  /* fill, contiguous and every other element */
  double fd[10] = {0};
  int64_t sh5[1] = {5}, st2[1] = {2};
  em_kview vfd = kvs(fd, EM_F64, 1, sh5, st2);
  ok = be->fill(0, &vfd, 2.5) == EM_OK;
  for (int i = 0; i < 10; i++) ok &= fd[i] == (i % 2 ? 0 : 2.5);
  check(ok, "fill a strided f64 view");
  ok = be->fill(0, &vi, -3) == EM_OK && be->fill(0, &vb, 0.5) == EM_OK &&
       be->fill(0, &vh2, 1.0) == EM_OK;
  for (int i = 0; i < n; i++) ok &= iv[i] == -3 && bv[i] == 1;
  check(ok && h2[2] == 0x3f80, "fill i64, bool and bf16");
  check(be->fill(0, &vi, NAN) == EM_ERR_ARG, "fill i64 with NaN is an error");
}

/* ---- binary and where ---- */

static double ref_binary(em_binary_op op, double x, double y) {
  switch (op) {
    case EM_ADD: return x + y;
    case EM_SUB: return x - y;
    case EM_MUL: return x * y;
    case EM_DIV: return x / y;
    case EM_POW: return pow(x, y);
    case EM_MAXIMUM: return x > y ? x : y;
    case EM_MINIMUM: return x < y ? x : y;
    case EM_EQ: return x == y;
    case EM_NE: return x != y;
    case EM_LT: return x < y;
    case EM_LE: return x <= y;
    case EM_GT: return x > y;
    case EM_GE: return x >= y;
    case EM_AND: return x && y;
    case EM_OR: return x || y;
    case EM_XOR: return (x != 0) != (y != 0);
    default: return NAN;
  }
}

static const char *const bin_names[] = {"add",     "sub", "mul", "div", "pow", "maximum",
                                        "minimum", "eq",  "ne",  "lt",  "le",  "gt",
                                        "ge",      "and", "or",  "xor"};

/* out [3,5,4] = a [3,1,4] op b [1,5,4] with broadcasting strides. */
static void binary_case(em_binary_op op, em_dtype dt) {
  int64_t shape[3] = {3, 5, 4}, sa[3] = {4, 0, 1}, sb[3] = {0, 4, 1};
  double ad[12], bd[20], want[60];
  double lo = op == EM_POW ? 0.1 : -3, hi = 3;
  void *a = rand_arr(dt, 12, lo, hi, ad), *b = rand_arr(dt, 20, op == EM_POW ? -2 : lo, hi, bd);
  if (dt == EM_I64 && op == EM_DIV)
    for (int i = 0; i < 20; i++)
      if (bd[i] == 0) ((int64_t *)b)[i] = 1, bd[i] = 1;
  if (dt == EM_I64 && op == EM_POW)
    for (int i = 0; i < 20; i++) ((int64_t *)b)[i] = i % 4, bd[i] = i % 4;
  bool cmp = op >= EM_EQ;
  em_dtype odt = cmp ? EM_BOOL : dt;
  void *out = xmalloc(60 * 8);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++)
      for (int k = 0; k < 4; k++) {
        double r = ref_binary(op, ad[i * 4 + k], bd[j * 4 + k]);
        if (dt == EM_I64 && op == EM_DIV) r = floor(ad[i * 4 + k] / bd[j * 4 + k]);
        if (dt == EM_F32 && !cmp) r = (float)r;
        want[(i * 5 + j) * 4 + k] = r;
      }
  em_kview vo = kv(out, odt, 3, shape), va = kvs(a, dt, 3, shape, sa),
           vb = kvs(b, dt, 3, shape, sb);
  em_status s = be->binary(0, op, &vo, &va, &vb);
  check(s == EM_OK && close_to(bin_names[op], out, odt, want, 60, 0, dt == EM_F32 ? 1e-6 : 1e-14),
        "binary %s %s with broadcasting", bin_names[op], dtn(dt));
  free(a);
  free(b);
  free(out);
}

static void test_binary(void) {
  for (int op = EM_ADD; op <= EM_GE; op++) {
    binary_case((em_binary_op)op, EM_F32);
    binary_case((em_binary_op)op, EM_F64);
    binary_case((em_binary_op)op, EM_I64);
  }
  for (int op = EM_EQ; op <= EM_XOR; op++)
    if (op == EM_EQ || op == EM_NE || op >= EM_AND) binary_case((em_binary_op)op, EM_BOOL);

  /* a big strided add takes the parallel path */
  int64_t n = 200000, sh[2] = {1000, 200}, st[2] = {1, 1000};
  double *ad = xmalloc(n * 8), *bd = xmalloc(n * 8), *want = xmalloc(n * 8);
  float *a = rand_arr(EM_F32, n, -1, 1, ad), *b = rand_arr(EM_F32, n, -1, 1, bd),
        *o = xmalloc(n * 4);
  for (int64_t i = 0; i < 1000; i++)
    for (int64_t j = 0; j < 200; j++)
      want[i * 200 + j] = (float)(ad[j * 1000 + i] + bd[i * 200 + j]);
  em_kview vo = kv(o, EM_F32, 2, sh), va = kvs(a, EM_F32, 2, sh, st), vb = kv(b, EM_F32, 2, sh);
  check(be->binary(0, EM_ADD, &vo, &va, &vb) == EM_OK &&
            close_to("big add", o, EM_F32, want, n, 0, 1e-6),
        "binary add of 200000 elements, one operand transposed");
  free(ad);
  free(bd);
  free(want);
  free(a);
  free(b);
  free(o);

  int64_t x[3] = {7, -7, 5}, y[3] = {2, 2, 0}, r[3], s3[1] = {3};
  em_kview vx = kv(x, EM_I64, 1, s3), vy = kv(y, EM_I64, 1, s3), vr = kv(r, EM_I64, 1, s3);
  check(be->binary(0, EM_DIV, &vr, &vx, &vy) == EM_ERR_ARG && msg_has("division by zero", NULL),
        "int64 division by zero is an error: %s", em_error_message());
  check(r[0] == 3 && r[1] == -4, "int64 division floors (7//2 = 3, -7//2 = -4)");
  float f[3];
  em_kview vf = kv(f, EM_F32, 1, s3);
  check(be->binary(0, EM_ADD, &vf, &vx, &vf) == EM_ERR_DTYPE,
        "binary with mixed dtypes is a dtype error");
  check(be->binary(0, EM_AND, &vr, &vx, &vy) == EM_ERR_DTYPE && msg_has("and", "int64"),
        "logical and on int64 names kernel and dtype: %s", em_error_message());
  uint16_t h[3] = {0x3fc0, 0x3fc0, 0xbf80}; /* 1.5, 1.5, -1 */
  em_kview vh = kv(h, EM_BF16, 1, s3);
  check(be->binary(0, EM_ADD, &vh, &vh, &vh) == EM_OK && h[0] == 0x4040 && h[2] == 0xc000,
        "bf16 add computes in float and rounds (1.5 + 1.5 = 3, -1 + -1 = -2)");
  double nan2[2] = {NAN, 1}, one2[2] = {1, NAN}, mx[2];
  int64_t s2[1] = {2};
  em_kview va2 = kv(nan2, EM_F64, 1, s2), vb2 = kv(one2, EM_F64, 1, s2),
           vm2 = kv(mx, EM_F64, 1, s2);
  check(be->binary(0, EM_MAXIMUM, &vm2, &va2, &vb2) == EM_OK && isnan(mx[0]) && isnan(mx[1]),
        "maximum propagates NaN");

  /* where with a broadcast condition, f64 and i64 */
  uint8_t cond[4] = {1, 0, 0, 1};
  double wa[12], wb[12], wo[12], ww[12];
  int64_t sh34[2] = {3, 4}, cst[2] = {0, 1};
  for (int i = 0; i < 12; i++) wa[i] = i, wb[i] = -i, ww[i] = cond[i % 4] ? i : -i;
  em_kview vo2 = kv(wo, EM_F64, 2, sh34), vc = kvs(cond, EM_BOOL, 2, sh34, cst);
  em_kview vwa = kv(wa, EM_F64, 2, sh34), vwb = kv(wb, EM_F64, 2, sh34);
  check(be->where(0, &vo2, &vc, &vwa, &vwb) == EM_OK && close_to("where", wo, EM_F64, ww, 12, 0, 0),
        "where f64 with broadcast condition");
  int64_t ia[12], ib[12], io[12];
  for (int i = 0; i < 12; i++) ia[i] = i, ib[i] = -i;
  em_kview vio = kv(io, EM_I64, 2, sh34), via = kv(ia, EM_I64, 2, sh34),
           vib = kv(ib, EM_I64, 2, sh34);
  check(be->where(0, &vio, &vc, &via, &vib) == EM_OK && close_to("where", io, EM_I64, ww, 12, 0, 0),
        "where i64");
}

/* ---- unary ---- */

static double ref_unary(em_unary_op op, double x, double a, double b) {
  switch (op) {
    case EM_NEG: return -x;
    case EM_EXP: return exp(x);
    case EM_LOG: return log(x);
    case EM_SQRT: return sqrt(x);
    case EM_RSQRT: return 1 / sqrt(x);
    case EM_ABS: return fabs(x);
    case EM_TANH: return tanh(x);
    case EM_SIGMOID: return 1 / (1 + exp(-x));
    case EM_RELU: return x > 0 ? x : 0;
    case EM_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case EM_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case EM_ELU: return x > 0 ? x : a * (exp(x) - 1);
    case EM_CLAMP: return x < a ? a : x > b ? b : x;
    case EM_POW_SCALAR: return pow(x, a);
    case EM_AFFINE: return a * x + b;
    case EM_SILU: return x / (1 + exp(-x));
    case EM_SIN: return sin(x);
    case EM_COS: return cos(x);
    case EM_FLOOR: return floor(x);
    case EM_CEIL: return ceil(x);
    case EM_ROUND: return nearbyint(x); /* halves to even */
    case EM_TRUNC: return trunc(x);
    case EM_SIGN: return (x > 0) - (x < 0);
    default: return NAN;
  }
}

static void test_unary(void) {
  const double alpha[EM_NUNARY] = {
      [EM_ELU] = 1.3, [EM_CLAMP] = -0.5, [EM_POW_SCALAR] = 2.5, [EM_AFFINE] = 2};
  const double beta[EM_NUNARY] = {[EM_CLAMP] = 0.5, [EM_AFFINE] = 0.5};
  for (int op = 0; op < EM_NUNARY; op++) {
    if (op == EM_NOT) continue; /* bool only: below */
    bool pos = op == EM_LOG || op == EM_SQRT || op == EM_RSQRT || op == EM_POW_SCALAR;
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      /* x is read through a [6,5] transposed view of a [5,6] buffer */
      int64_t sh[2] = {6, 5}, st[2] = {1, 6};
      double xd[30], want[30];
      void *x = rand_arr(dt, 30, pos ? 0.1 : -3, 3, xd), *out = xmalloc(30 * 8);
      for (int i = 0; i < 6; i++)
        for (int j = 0; j < 5; j++)
          want[i * 5 + j] = ref_unary(op, xd[j * 6 + i], alpha[op], beta[op]);
      em_kview vo = kv(out, dt, 2, sh), vx = kvs(x, dt, 2, sh, st);
      em_status s = be->unary(0, (em_unary_op)op, &vo, &vx, alpha[op], beta[op]);
      check(s == EM_OK && close_to(em_kernel_unary_name((em_unary_op)op), out, dt, want, 30, dt == EM_F32 ? 1e-6 : 1e-14,
                                   dt == EM_F32 ? 2e-6 : 1e-13),
            "unary %s %s (strided input)", em_kernel_unary_name((em_unary_op)op), dtn(dt));
      free(x);
      free(out);
    }
    /* derivative against a central difference of the reference, in f64 */
    double xd[16], gy[16], gx[16], y[16], want[16];
    for (int i = 0; i < 16; i++) {
      xd[i] = pos ? 0.2 + 1.5 * (urand() + 1) : 2 * urand();
      if (op == EM_CLAMP && fabs(fabs(xd[i]) - 0.5) < 1e-3) xd[i] += 0.01;
      /* the steps of floor..sign: keep the difference off them (derivative 0) */
      if (op >= EM_FLOOR && fabs(2 * xd[i] - nearbyint(2 * xd[i])) < 1e-3) xd[i] += 0.01;
      gy[i] = urand();
      y[i] = ref_unary(op, xd[i], alpha[op], beta[op]);
      double h = 1e-6;
      want[i] = gy[i] *
                (ref_unary(op, xd[i] + h, alpha[op], beta[op]) -
                 ref_unary(op, xd[i] - h, alpha[op], beta[op])) /
                (2 * h);
    }
    em_status s =
        be->unary_backward(0, (em_unary_op)op, EM_F64, 16, gx, gy, xd, y, alpha[op], beta[op]);
    check(s == EM_OK && close_to(em_kernel_unary_name((em_unary_op)op), gx, EM_F64, want, 16, 1e-7, 1e-6),
          "unary_backward %s f64", em_kernel_unary_name((em_unary_op)op));
  }
  uint8_t b[4] = {0, 1, 1, 0}, nb[4];
  int64_t s4[1] = {4};
  em_kview vb = kv(b, EM_BOOL, 1, s4), vn = kv(nb, EM_BOOL, 1, s4);
  check(be->unary(0, EM_NOT, &vn, &vb, 0, 0) == EM_OK && nb[0] == 1 && nb[1] == 0 && nb[3] == 1,
        "unary not on bool");
  int64_t iv[4] = {-3, 4, INT64_MIN, 0}, io[4];
  em_kview vi = kv(iv, EM_I64, 1, s4), vio = kv(io, EM_I64, 1, s4);
  check(be->unary(0, EM_ABS, &vio, &vi, 0, 0) == EM_OK && io[0] == 3 && io[1] == 4 &&
            io[2] == INT64_MIN,
        "unary abs on int64 (INT64_MIN wraps)");
  check(be->unary(0, EM_SIGN, &vio, &vi, 0, 0) == EM_OK && io[0] == -1 && io[1] == 1 && io[2] == -1 &&
            io[3] == 0,
        "unary sign on int64");
  for (int op = EM_FLOOR; op <= EM_TRUNC; op++)
    check(be->unary(0, (em_unary_op)op, &vio, &vi, 0, 0) == EM_OK && memcmp(io, iv, sizeof iv) == 0,
          "unary %s on int64 is the identity", em_kernel_unary_name((em_unary_op)op));
  /* rounding's ties and signed zeros, and sign of NaN and -0, as PyTorch */
  double sv[8] = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, NAN}, so[8];
  int64_t s8[1] = {8};
  em_kview vs = kv(sv, EM_F64, 1, s8), vso = kv(so, EM_F64, 1, s8);
  check(be->unary(0, EM_ROUND, &vso, &vs, 0, 0) == EM_OK && so[0] == -2 && so[1] == -2 && so[2] == 0 &&
            signbit(so[2]) && so[3] == 0 && !signbit(so[3]) && so[4] == 2 && so[5] == 2 && isnan(so[7]),
        "unary round: halves to even, -0.5 to -0");
  check(be->unary(0, EM_SIGN, &vso, &vs, 0, 0) == EM_OK && so[0] == -1 && so[5] == 1 && so[6] == 0 &&
            !signbit(so[6]) && so[7] == 0,
        "unary sign: 0 for -0 and NaN");
  check(be->unary(0, EM_EXP, &vio, &vi, 0, 0) == EM_ERR_DTYPE && msg_has("exp", "int64"),
        "unary exp on int64 names kernel and dtype: %s", em_error_message());
  float x1 = 1, g1 = 1, r1;
  check(be->unary_backward(0, EM_LOG, EM_F32, 1, &r1, &g1, NULL, &x1, 0, 0) == EM_ERR_ARG,
        "unary_backward log without x is an argument error");
}

/* GELU's float32 kernels use their own erfc and exp (cpu_vmath.h) so that
** they vectorise: check them on a long contiguous run, from the left tail
** (where 1 + erf is tiny and only a relative bound means anything) to the
** right, and on the special values. */
static double ref_gelu_grad(double x) {
  return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
}

static void test_gelu_f32(void) {
  enum { N = 4001 };
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4), *gy = xmalloc(N * 4), *gx = xmalloc(N * 4);
  for (int i = 0; i < N; i++) {
    x[i] = -10.0f + 20.0f * (float)i / (N - 1);
    gy[i] = 1.0f;
  }
  int64_t sh[1] = {N};
  em_kview vy = kv(y, EM_F32, 1, sh), vx = kv(x, EM_F32, 1, sh);
  check(be->unary(0, EM_GELU, &vy, &vx, 0, 0) == EM_OK, "gelu f32 over [-10, 10]");
  check(be->unary_backward(0, EM_GELU, EM_F32, N, gx, gy, x, y, 0, 0) == EM_OK,
        "gelu_backward f32 over [-10, 10]");
  /* In the far tail the float rounding of z = |x|/sqrt2 alone moves erfc(z)
  ** by about 2 z^2 ulp, so the bound there is looser. */
  double worst_y = 0, worst_tail = 0, worst_g = 0;
  for (int i = 0; i < N; i++) {
    double xi = x[i], want = 0.5 * xi * erfc(-xi / sqrt(2.0)), wg = ref_gelu_grad(xi);
    double ey = want == 0 ? fabs(y[i]) : fabs(y[i] - want) / fabs(want), eg = fabs(gx[i] - wg);
    if (xi >= -3 && ey > worst_y) worst_y = ey;
    if (xi < -3 && ey > worst_tail) worst_tail = ey;
    if (eg > worst_g) worst_g = eg;
  }
  check(worst_y < 2e-6, "gelu f32 relative error on [-3, 10]: %.2e < 2e-6", worst_y);
  check(worst_tail < 1e-5, "gelu f32 relative error on [-10, -3): %.2e < 1e-5", worst_tail);
  check(worst_g < 2e-6, "gelu_backward f32 absolute error %.2e < 2e-6", worst_g);
  float sx[6] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, -30.0f}, sy[6];
  int64_t s6[1] = {6};
  em_kview vsy = kv(sy, EM_F32, 1, s6), vsx = kv(sx, EM_F32, 1, s6);
  check(be->unary(0, EM_GELU, &vsy, &vsx, 0, 0) == EM_OK && isnan(sy[0]) &&
            sy[1] == INFINITY && isnan(sy[2]) && sy[3] == 0 && sy[4] == 0 &&
            fabsf(sy[5]) < 1e-30f,
        "gelu f32: NaN -> NaN, inf -> inf, -inf -> NaN (as PyTorch), 0 -> 0, -30 -> ~0");
  free(x);
  free(y);
  free(gy);
  free(gx);
}

/* ---- reductions ---- */

static void reduce_case(em_reduce_op op, em_dtype dt, int64_t outer, int64_t n, int64_t inner,
                        int corr) {
  static const char *names[] = {"sum", "mean", "max", "min", "var"};
  int64_t total = outer * n * inner;
  double *xd = xmalloc(total * 8), *want = xmalloc(outer * inner * 8),
         *wi = xmalloc(outer * inner * 8);
  void *x = rand_arr(dt, total, dt == EM_I64 ? -1000 : -2, dt == EM_I64 ? 1000 : 2, xd);
  void *out = xmalloc(outer * inner * 8);
  int64_t *idx = xmalloc(outer * inner * 8);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0, best = xd[o * n * inner + i];
      int64_t bi = 0;
      for (int64_t j = 0; j < n; j++) {
        double v = xd[(o * n + j) * inner + i];
        s += v;
        if ((op == EM_RED_MAX && v > best) || (op == EM_RED_MIN && v < best)) best = v, bi = j;
      }
      double r = s;
      if (op == EM_RED_MEAN) r = s / n;
      if (op == EM_RED_MAX || op == EM_RED_MIN) r = best;
      if (op == EM_RED_VAR) {
        double m2 = 0, mu = s / n;
        for (int64_t j = 0; j < n; j++) m2 += pow(xd[(o * n + j) * inner + i] - mu, 2);
        r = m2 / (n - corr);
      }
      want[o * inner + i] = r;
      wi[o * inner + i] = (double)bi;
    }
  bool ext = op == EM_RED_MAX || op == EM_RED_MIN;
  em_status s = be->reduce(0, op, dt, out, ext ? idx : NULL, x, outer, n, inner, corr);
  double tol = dt == EM_F32 ? 2e-6 : 1e-12;
  int ok = s == EM_OK && close_to(names[op], out, dt, want, outer * inner, tol, tol);
  if (ok && ext) ok = close_to("argmax", idx, EM_I64, wi, outer * inner, 0, 0);
  check(ok, "reduce %s %s [%lld, %lld, %lld]%s", names[op], dtn(dt), (long long)outer, (long long)n,
        (long long)inner, op == EM_RED_VAR ? (corr ? " correction 1" : " correction 0") : "");
  free(xd);
  free(want);
  free(wi);
  free(x);
  free(out);
  free(idx);
}

static void test_reduce(void) {
  const int64_t shapes[][3] = {{3, 7, 1}, {2, 9, 70}, {1, 100000, 1}, {4, 50, 300}, {5, 1, 3}};
  for (int op = EM_RED_SUM; op <= EM_RED_VAR; op++)
    for (int s = 0; s < 5; s++) {
      reduce_case(op, EM_F32, shapes[s][0], shapes[s][1], shapes[s][2], 1);
      if (s < 3)
        reduce_case(op, EM_F64, shapes[s][0], shapes[s][1], shapes[s][2], op == EM_RED_VAR ? 0 : 1);
      if (s < 3 && (op == EM_RED_SUM || op == EM_RED_MAX || op == EM_RED_MIN))
        reduce_case(op, EM_I64, shapes[s][0], shapes[s][1], shapes[s][2], 0);
    }
  double x[5] = {1, NAN, 3, NAN, 0}, v;
  int64_t i;
  check(be->reduce(0, EM_RED_MAX, EM_F64, &v, &i, x, 1, 5, 1, 0) == EM_OK && isnan(v) && i == 1,
        "max returns the first NaN and its position");
  check(be->reduce(0, EM_RED_MAX, EM_F64, &v, &i, x, 1, 0, 1, 0) == EM_ERR_SHAPE,
        "max over an empty dim is an error");
  check(be->reduce(0, EM_RED_MEAN, EM_I64, &v, NULL, x, 1, 5, 1, 0) == EM_ERR_DTYPE &&
            msg_has("mean", "int64"),
        "mean of int64 names kernel and dtype: %s", em_error_message());
  /* the chunked parallel sum does not depend on the thread count */
  int64_t n = 300000;
  double *big = rand_arr(EM_F64, n, -1, 1, NULL), s1, s2;
  be->set_num_threads(1);
  be->reduce(0, EM_RED_SUM, EM_F64, &s1, NULL, big, 1, n, 1, 0);
  be->set_num_threads(2);
  be->reduce(0, EM_RED_SUM, EM_F64, &s2, NULL, big, 1, n, 1, 0);
  check(s1 == s2, "sum of 300000 is the same with 1 and 2 threads");
  free(big);
}

/* ---- gemm ---- */

static void gemm_case(em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t batch,
                      double beta) {
  int64_t lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
  int64_t sa = (ta ? k : m) * lda + 5, sb = (tb ? n : k) * ldb, sc = m * ldc + 1;
  double *ad = xmalloc(batch * sa * 8), *bd = xmalloc(batch * sb * 8),
         *cd = xmalloc(batch * sc * 8);
  void *a = rand_arr(dt, batch * sa, -1, 1, ad), *b = rand_arr(dt, batch * sb, -1, 1, bd);
  void *c = rand_arr(dt, batch * sc, -1, 1, cd);
  double *want = xmalloc(batch * sc * 8);
  memcpy(want, cd, batch * sc * 8);
  if (beta == 0) /* NaN in C must not leak through beta = 0 */
    for (int64_t i = 0; i < batch * sc; i += 3) {
      if (dt == EM_F32)
        ((float *)c)[i] = NAN;
      else
        ((double *)c)[i] = NAN;
      want[i] = NAN;
    }
  const double alpha = 0.75;
  for (int64_t q = 0; q < batch; q++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t p = 0; p < k; p++)
          s += ad[q * sa + (ta ? p * lda + i : i * lda + p)] *
               bd[q * sb + (tb ? j * ldb + p : p * ldb + j)];
        double *w = &want[q * sc + i * ldc + j];
        *w = alpha * s + (beta == 0 ? 0 : beta * cd[q * sc + i * ldc + j]);
      }
  em_status s =
      be->gemm(0, dt, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
  double tol = dt == EM_F32 ? 1e-4 : 1e-12;
  check(s == EM_OK && close_to("gemm", c, dt, want, batch * sc, tol, tol),
        "gemm %s ta=%d tb=%d m=%lld n=%lld k=%lld batch=%lld beta=%g", dtn(dt), ta, tb,
        (long long)m, (long long)n, (long long)k, (long long)batch, beta);
  free(ad);
  free(bd);
  free(cd);
  free(a);
  free(b);
  free(c);
  free(want);
}

static void test_gemm(void) {
  for (int t = 0; t < 4; t++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      gemm_case(dt, t & 1, t & 2, 3, 5, 4, 3, 0.5);   /* plain loops */
      gemm_case(dt, t & 1, t & 2, 70, 300, 40, 2, 0); /* BLAS */
    }
  gemm_case(EM_F32, false, false, 64, 64, 64, 2, 0);
  gemm_case(EM_F64, true, false, 1, 1, 0, 1, 0.5);
  /* one product split over threads: into row blocks (tall C) and column
  ** blocks (wide C), under every transpose, with beta reading C */
  be->set_num_threads(3);
  for (int t = 0; t < 4; t++) {
    gemm_case(EM_F32, t & 1, t & 2, 301, 70, 40, 1, 0.5);
    gemm_case(EM_F64, t & 1, t & 2, 70, 301, 40, 1, 0.5);
  }
  be->set_num_threads(2);
  float z[4];
  check(
      be->gemm(0, EM_F32, false, false, 2, 2, 2, 1, z, 1, 0, z, 2, 0, 0, z, 2, 0, 1) == EM_ERR_ARG,
      "gemm with lda too small is an argument error");
  check(be->gemm(0, EM_I64, false, false, 2, 2, 2, 1, z, 2, 0, z, 2, 0, 0, z, 2, 0, 1) ==
                EM_ERR_DTYPE &&
            msg_has("gemm", "int64"),
        "gemm on int64 is a dtype error: %s", em_error_message());
}

/* ---- softmax and layer norm ---- */

static void ref_softmax_row(const double *x, int64_t n, bool log_, double *y) {
  double mx = -INFINITY, s = 0;
  for (int64_t j = 0; j < n; j++) mx = fmax(mx, x[j]);
  for (int64_t j = 0; j < n; j++) s += exp(x[j] - mx);
  for (int64_t j = 0; j < n; j++) y[j] = log_ ? x[j] - mx - log(s) : exp(x[j] - mx) / s;
}

static void test_softmax(void) {
  for (int lg = 0; lg < 2; lg++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      int64_t rows = 300, n = 130; /* big enough for the parallel path */
      double *xd = xmalloc(rows * n * 8), *want = xmalloc(rows * n * 8);
      void *x = rand_arr(dt, rows * n, -20, 20, xd), *y = xmalloc(rows * n * 8);
      for (int64_t r = 0; r < rows; r++) ref_softmax_row(xd + r * n, n, lg, want + r * n);
      check(be->softmax(0, dt, y, x, rows, n, lg) == EM_OK &&
                close_to("softmax", y, dt, want, rows * n, k ? 1e-14 : 1e-6, k ? 1e-13 : 1e-5),
            "%s %s [%lld, %lld]", lg ? "log_softmax" : "softmax", dtn(dt), (long long)rows,
            (long long)n);
      free(xd);
      free(want);
      free(x);
      free(y);
    }
  /* backward: central differences of sum(gy * f(x)) in f64 */
  for (int lg = 0; lg < 2; lg++) {
    enum { R = 3, N = 8 };
    double x[R * N], gy[R * N], y[R * N], gx[R * N], want[R * N], yp[N], ym[N];
    for (int i = 0; i < R * N; i++) x[i] = 2 * urand(), gy[i] = urand();
    be->softmax(0, EM_F64, y, x, R, N, lg);
    for (int r = 0; r < R; r++)
      for (int j = 0; j < N; j++) {
        double *row = x + r * N, h = 1e-6, save = row[j], lp = 0, lm = 0;
        row[j] = save + h;
        ref_softmax_row(row, N, lg, yp);
        row[j] = save - h;
        ref_softmax_row(row, N, lg, ym);
        row[j] = save;
        for (int c = 0; c < N; c++) lp += gy[r * N + c] * yp[c], lm += gy[r * N + c] * ym[c];
        want[r * N + j] = (lp - lm) / (2 * h);
      }
    check(be->softmax_backward(0, EM_F64, gx, gy, y, R, N, lg) == EM_OK &&
              close_to("softmax_backward", gx, EM_F64, want, R * N, 1e-8, 1e-6),
          "%s backward f64 vs central differences", lg ? "log_softmax" : "softmax");
  }
  double row[3] = {1000, 1000, -INFINITY}, out[3];
  check(be->softmax(0, EM_F64, out, row, 1, 3, false) == EM_OK && out[0] == 0.5 && out[2] == 0,
        "softmax of large values does not overflow");
}

/* y = (x - mean) / sqrt(var + eps) * w + b per row; loss = sum(y * R) */
static void ref_layer_norm(const double *x, const double *w, const double *b, int64_t rows,
                           int64_t n, double eps, double *y) {
  for (int64_t r = 0; r < rows; r++) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; j++) mu += x[r * n + j] / n;
    for (int64_t j = 0; j < n; j++) var += pow(x[r * n + j] - mu, 2) / n;
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (x[r * n + j] - mu) / sqrt(var + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
  }
}

static double ln_loss(const double *x, const double *w, const double *b, int64_t rows, int64_t n,
                      const double *R, double *tmp) {
  ref_layer_norm(x, w, b, rows, n, 1e-5, tmp);
  double s = 0;
  for (int64_t i = 0; i < rows * n; i++) s += tmp[i] * R[i];
  return s;
}

static void test_layer_norm(void) {
  enum { R = 4, N = 10 };
  double x[R * N], w[N], b[N], Rg[R * N], y[R * N], want[R * N], mean[R], rstd[R], tmp[R * N];
  double dx[R * N], dw[N], db[N], wdx[R * N], wdw[N], wdb[N];
  for (int i = 0; i < R * N; i++) x[i] = 3 * urand() + 1, Rg[i] = urand();
  for (int j = 0; j < N; j++) w[j] = 1 + urand() / 2, b[j] = urand();
  for (int wb = 0; wb < 2; wb++) {
    const double *W = wb ? w : NULL, *B = wb ? b : NULL;
    ref_layer_norm(x, W, B, R, N, 1e-5, want);
    check(be->layer_norm(0, EM_F64, y, mean, rstd, x, W, B, R, N, 1e-5) == EM_OK &&
              close_to("layer_norm", y, EM_F64, want, R * N, 1e-12, 1e-12),
          "layer_norm f64 %s", wb ? "with weight and bias" : "without weight and bias");
    const double h = 1e-6;
    for (int i = 0; i < R * N; i++) {
      double s = x[i];
      x[i] = s + h;
      double lp = ln_loss(x, W, B, R, N, Rg, tmp);
      x[i] = s - h;
      double lm = ln_loss(x, W, B, R, N, Rg, tmp);
      x[i] = s;
      wdx[i] = (lp - lm) / (2 * h);
    }
    for (int j = 0; j < N; j++) {
      double s = w[j];
      w[j] = s + h;
      double lp = ln_loss(x, w, b, R, N, Rg, tmp);
      w[j] = s - h;
      double lm = ln_loss(x, w, b, R, N, Rg, tmp);
      w[j] = s;
      wdw[j] = (lp - lm) / (2 * h);
      s = b[j];
      b[j] = s + h;
      lp = ln_loss(x, w, b, R, N, Rg, tmp);
      b[j] = s - h;
      lm = ln_loss(x, w, b, R, N, Rg, tmp);
      b[j] = s;
      wdb[j] = (lp - lm) / (2 * h);
    }
    em_status s = be->layer_norm_backward(0, EM_F64, dx, wb ? dw : NULL, wb ? db : NULL, Rg, x,
                                          mean, rstd, W, R, N);
    int ok = s == EM_OK && close_to("layer_norm dx", dx, EM_F64, wdx, R * N, 1e-6, 1e-5);
    if (wb)
      ok = ok && close_to("dw", dw, EM_F64, wdw, N, 1e-6, 1e-5) &&
           close_to("db", db, EM_F64, wdb, N, 1e-6, 1e-5);
    check(ok, "layer_norm_backward f64 %s vs central differences", wb ? "dx, dw, db" : "dx");
  }
  /* big f32 case (parallel path) against the f64 kernel checked above */
  int64_t rows = 500, n = 96;
  double *xd = xmalloc(rows * n * 8), *yd = xmalloc(rows * n * 8), *dyd = xmalloc(rows * n * 8);
  double md[500], rd[500], *dxd = xmalloc(rows * n * 8), dwd[96], dbd[96], wd[96], bd[96];
  float *xf = rand_arr(EM_F32, rows * n, -2, 2, xd), *dyf = rand_arr(EM_F32, rows * n, -1, 1, dyd);
  float *wf = rand_arr(EM_F32, n, 0.5, 1.5, wd), *bf = rand_arr(EM_F32, n, -1, 1, bd);
  float *yf = xmalloc(rows * n * 4), mf[500], rf[500], *dxf = xmalloc(rows * n * 4), dwf[96],
        dbf[96];
  be->layer_norm(0, EM_F64, yd, md, rd, xd, wd, bd, rows, n, 1e-5);
  be->layer_norm_backward(0, EM_F64, dxd, dwd, dbd, dyd, xd, md, rd, wd, rows, n);
  int ok = be->layer_norm(0, EM_F32, yf, mf, rf, xf, wf, bf, rows, n, 1e-5) == EM_OK &&
           be->layer_norm_backward(0, EM_F32, dxf, dwf, dbf, dyf, xf, mf, rf, wf, rows, n) == EM_OK;
  ok = ok && close_to("ln y", yf, EM_F32, yd, rows * n, 1e-5, 1e-5) &&
       close_to("ln dx", dxf, EM_F32, dxd, rows * n, 1e-4, 1e-4) &&
       close_to("ln dw", dwf, EM_F32, dwd, n, 1e-3, 1e-4) &&
       close_to("ln db", dbf, EM_F32, dbd, n, 1e-3, 1e-4);
  check(ok, "layer_norm f32 [500, 96] forward and backward match f64");
  free(xd);
  free(yd);
  free(dyd);
  free(dxd);
  free(xf);
  free(dyf);
  free(wf);
  free(bf);
  free(yf);
  free(dxf);
}

/* ---- indexing ---- */

static void test_index(void) {
  /* index_select: [2,5,3] -> [2,4,3] with idx {4,0,4,2} */
  int64_t idx[4] = {4, 0, 4, 2};
  double in[30], out[24], want[24], acc[30], wacc[30], src[24];
  for (int i = 0; i < 30; i++) in[i] = i, acc[i] = wacc[i] = 0.5 * i;
  for (int o = 0; o < 2; o++)
    for (int j = 0; j < 4; j++)
      for (int i = 0; i < 3; i++) {
        want[(o * 4 + j) * 3 + i] = in[(o * 5 + idx[j]) * 3 + i];
        src[(o * 4 + j) * 3 + i] = urand();
        wacc[(o * 5 + idx[j]) * 3 + i] += src[(o * 4 + j) * 3 + i];
      }
  check(be->index_select(0, EM_F64, out, in, idx, 4, 2, 5, 3) == EM_OK &&
            close_to("index_select", out, EM_F64, want, 24, 0, 0),
        "index_select f64 with a repeated index");
  check(be->index_add(0, EM_F64, acc, src, idx, 4, 2, 5, 3) == EM_OK &&
            close_to("index_add", acc, EM_F64, wacc, 30, 1e-15, 1e-15),
        "index_add f64 with a repeated index");
  int64_t bad[2] = {1, 5};
  check(be->index_select(0, EM_F64, out, in, bad, 2, 2, 5, 3) == EM_ERR_INDEX &&
            msg_has("index 5", "size 5"),
        "index_select out of range names index and size: %s", em_error_message());
  bad[1] = -1;
  check(be->index_add(0, EM_F64, acc, src, bad, 2, 2, 5, 3) == EM_ERR_INDEX &&
            msg_has("index -1", "size 5"),
        "index_add with a negative index: %s", em_error_message());
  uint8_t bin[5] = {1, 0, 1, 1, 0}, bout[4];
  check(be->index_select(0, EM_BOOL, bout, bin, idx, 4, 1, 5, 1) == EM_OK && bout[0] == 0 &&
            bout[1] == 1 && bout[3] == 1,
        "index_select on bool");

  /* embedding backward sized index_add (parallel path), f32 and i64 */
  int64_t V = 300, D = 130, T = 400, *tok = xmalloc(T * 8);
  for (int64_t t = 0; t < T; t++) tok[t] = (int64_t)((urand() + 1) / 2 * V) % V;
  double *g = xmalloc(T * D * 8), *wt = xmalloc(V * D * 8);
  float *gf = rand_arr(EM_F32, T * D, -1, 1, g), *wf = xmalloc(V * D * 4);
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < D; i++) wt[tok[t] * D + i] += g[t * D + i];
  check(be->index_add(0, EM_F32, wf, gf, tok, T, 1, V, D) == EM_OK &&
            close_to("index_add big", wf, EM_F32, wt, V * D, 1e-5, 1e-5),
        "index_add f32 [400 tokens x 130] into [300 x 130]");
  int64_t *gi = rand_arr(EM_I64, T * D, -50, 50, g), *wi = xmalloc(V * D * 8);
  memset(wt, 0, V * D * 8);
  for (int64_t t = 0; t < T; t++)
    for (int64_t i = 0; i < D; i++) wt[tok[t] * D + i] += g[t * D + i];
  check(be->index_add(0, EM_I64, wi, gi, tok, T, 1, V, D) == EM_OK &&
            close_to("index_add i64", wi, EM_I64, wt, V * D, 0, 0),
        "index_add i64");
  free(tok);
  free(g);
  free(wt);
  free(gf);
  free(wf);
  free(gi);
  free(wi);

  /* gather / scatter_add: in [2,5,4], idx [2,3,4] */
  int64_t gidx[24];
  double gin[40], gout[24], gwant[24], gsrc[24], sacc[40], swant[40];
  for (int i = 0; i < 40; i++) gin[i] = urand(), sacc[i] = swant[i] = i;
  for (int o = 0; o < 2; o++)
    for (int j = 0; j < 3; j++)
      for (int i = 0; i < 4; i++) {
        int t = (o * 3 + j) * 4 + i;
        gidx[t] = (o + j * 3 + i * 2) % 5;
        if (j == 2) gidx[t] = gidx[t - 4]; /* duplicates for scatter_add */
        gwant[t] = gin[(o * 5 + gidx[t]) * 4 + i];
        gsrc[t] = urand();
        swant[(o * 5 + gidx[t]) * 4 + i] += gsrc[t];
      }
  check(be->gather(0, EM_F64, gout, gin, gidx, 2, 5, 3, 4) == EM_OK &&
            close_to("gather", gout, EM_F64, gwant, 24, 0, 0),
        "gather f64 along a middle dim");
  check(be->scatter_add(0, EM_F64, sacc, gsrc, gidx, 2, 5, 3, 4) == EM_OK &&
            close_to("scatter_add", sacc, EM_F64, swant, 40, 1e-14, 1e-14),
        "scatter_add f64 with duplicates");
  gidx[13] = 9;
  check(be->gather(0, EM_F64, gout, gin, gidx, 2, 5, 3, 4) == EM_ERR_INDEX &&
            msg_has("index 9", "size 5"),
        "gather out of range names index and size: %s", em_error_message());
  memcpy(swant, sacc, sizeof sacc);
  check(be->scatter_add(0, EM_F64, sacc, gsrc, gidx, 2, 5, 3, 4) == EM_ERR_INDEX &&
            memcmp(swant, sacc, sizeof sacc) == 0,
        "scatter_add with a bad index fails and leaves the output alone");
  check(be->index_add(0, EM_BOOL, bout, bin, idx, 1, 1, 5, 1) == EM_ERR_DTYPE &&
            msg_has("index_add", "bool"),
        "index_add on bool names kernel and dtype: %s", em_error_message());
}

/* ---- cross entropy ---- */

static double ref_ce_row(const double *x, int64_t C, int64_t t, double eps) {
  double mx = -INFINITY, s = 0, sum_nlogp = 0;
  for (int64_t c = 0; c < C; c++) mx = fmax(mx, x[c]);
  for (int64_t c = 0; c < C; c++) s += exp(x[c] - mx);
  double lse = mx + log(s);
  for (int64_t c = 0; c < C; c++) sum_nlogp += -(x[c] - lse);
  return (1 - eps) * -(x[t] - lse) + eps * sum_nlogp / C;
}

static void test_cross_entropy(void) {
  enum { R = 6, C = 5 };
  int64_t tgt[R] = {0, 4, -100, 2, 2, 1};
  for (int k = 0; k < 4; k++) {
    em_dtype dt = k & 1 ? EM_F64 : EM_F32;
    double eps = k & 2 ? 0.1 : 0, xd[R * C], want[R], wlse[R];
    void *x = rand_arr(dt, R * C, -4, 4, xd), *loss = xmalloc(R * 8), *lse = xmalloc(R * 8);
    for (int r = 0; r < R; r++) {
      double mx = -INFINITY, s = 0;
      for (int c = 0; c < C; c++) mx = fmax(mx, xd[r * C + c]);
      for (int c = 0; c < C; c++) s += exp(xd[r * C + c] - mx);
      wlse[r] = mx + log(s);
      want[r] = tgt[r] == -100 ? 0 : ref_ce_row(xd + r * C, C, tgt[r], eps);
    }
    double tol = dt == EM_F32 ? 1e-5 : 1e-13;
    check(be->cross_entropy(0, dt, loss, lse, x, tgt, R, C, -100, eps) == EM_OK &&
              close_to("ce loss", loss, dt, want, R, tol, tol) &&
              close_to("ce lse", lse, dt, wlse, R, tol, tol),
          "cross_entropy %s smoothing %g with an ignored row", dtn(dt), eps);
    if (dt == EM_F64) {
      double dloss[R], g[R * C], wg[R * C], h = 1e-6;
      for (int r = 0; r < R; r++) dloss[r] = urand();
      for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
          double *row = xd + r * C, s = row[c];
          row[c] = s + h;
          double lp = tgt[r] == -100 ? 0 : ref_ce_row(row, C, tgt[r], eps);
          row[c] = s - h;
          double lm = tgt[r] == -100 ? 0 : ref_ce_row(row, C, tgt[r], eps);
          row[c] = s;
          wg[r * C + c] = dloss[r] * (lp - lm) / (2 * h);
        }
      check(be->cross_entropy_backward(0, dt, g, dloss, x, lse, tgt, R, C, -100, eps) == EM_OK &&
                close_to("ce grad", g, EM_F64, wg, R * C, 1e-8, 1e-6),
            "cross_entropy_backward f64 smoothing %g vs central differences", eps);
    }
    free(x);
    free(loss);
    free(lse);
  }
  int64_t badt[2] = {1, 5};
  double x[10] = {0}, l[2], s[2];
  check(be->cross_entropy(0, EM_F64, l, s, x, badt, 2, 5, -100, 0) == EM_ERR_INDEX &&
            msg_has("target 5", "5 classes"),
        "cross_entropy target out of range: %s", em_error_message());
}

/* ---- random ---- */

static void test_random(void) {
  int64_t n = 1000, sh[1] = {1000};
  double *d = xmalloc(n * 8);
  float *f = xmalloc(n * 4);
  em_philox_block kat = em_philox(0, 0);
  check(kat.w[0] == 0x6627e8d5u && kat.w[1] == 0xe169c58du && kat.w[2] == 0xbc57ac4cu &&
            kat.w[3] == 0x9b00dbd8u,
        "Philox4x32-10 known answer (Random123, counter 0, key 0)");
  em_kview vd = kv(d, EM_F64, 1, sh), vf = kv(f, EM_F32, 1, sh);
  int ok = be->random(0, EM_RAND_UNIFORM, &vd, -2, 3, 42, 7) == EM_OK &&
           be->random(0, EM_RAND_UNIFORM, &vf, -2, 3, 42, 7) == EM_OK;
  for (int64_t i = 0; i < n && ok; i++) {
    double u = -2 + 5 * em_philox_uniform_at(42, 7, (uint64_t)i);
    ok = d[i] == u && f[i] == (float)u;
  }
  check(ok, "uniform f64 and f32 follow the stream rule exactly");
  ok = be->random(0, EM_RAND_NORMAL, &vd, 1, 2, 9, 123) == EM_OK &&
       be->random(0, EM_RAND_NORMAL, &vf, 1, 2, 9, 123) == EM_OK;
  for (int64_t i = 0; i < n && ok; i++) {
    double z = 1 + 2 * em_philox_normal_at(9, 123, (uint64_t)i);
    ok = d[i] == z && f[i] == (float)z;
  }
  check(ok, "normal f64 and f32 follow the stream rule exactly");
  int64_t big = 200000, bsh[1] = {200000};
  double *b = xmalloc(big * 8), m = 0, v = 0;
  em_kview vb = kv(b, EM_F64, 1, bsh);
  be->random(0, EM_RAND_NORMAL, &vb, 0, 1, 5, 0);
  for (int64_t i = 0; i < big; i++) m += b[i] / big;
  for (int64_t i = 0; i < big; i++) v += (b[i] - m) * (b[i] - m) / big;
  check(fabs(m) < 0.01 && fabs(v - 1) < 0.02, "normal draws: mean %.4f, variance %.4f", m, v);
  /* dropout */
  double *x = rand_arr(EM_F64, big, -1, 1, NULL), *out = xmalloc(big * 8), *mask = xmalloc(big * 8);
  ok = be->dropout(0, EM_F64, out, mask, x, big, 0.3, 77, 1000) == EM_OK;
  int64_t kept = 0;
  for (int64_t i = 0; i < big && ok; i++) {
    bool keep = em_philox_keep(77, 1000, (uint64_t)i, em_philox_keep_threshold(0.3));
    kept += keep;
    ok = mask[i] == (keep ? 1 / 0.7 : 0) && out[i] == (keep ? x[i] * (1 / 0.7) : 0);
  }
  check(ok && fabs((double)kept / big - 0.7) < 0.01, "dropout follows the stream rule, keeps %.4f",
        (double)kept / big);
  /* offsets whose low word wraps inside a vector of 16 counters, odd lengths */
  const uint64_t offs[3] = {0xFFFFFFF9ull, 0x1FFFFFFF3ull, 5};
  for (int t = 0; t < 3; t++) {
    const int64_t n = 1000 + 7 * t;
    ok = be->dropout(0, EM_F64, out, mask, x, n, 0.45, 0x123456789ull, offs[t]) == EM_OK;
    for (int64_t i = 0; i < n && ok; i++)
      ok = mask[i] == (em_philox_keep(0x123456789ull, offs[t], (uint64_t)i, em_philox_keep_threshold(0.45))
                           ? 1 / 0.55 : 0);
    check(ok, "dropout follows the stream rule across a 2^32 counter boundary (offset %#llx)",
          (unsigned long long)offs[t]);
  }
  ok = be->dropout(0, EM_F64, out, mask, x, big, 1, 77, 0) == EM_OK;
  for (int64_t i = 0; i < big && ok; i++) ok = out[i] == 0 && mask[i] == 0;
  check(ok, "dropout with p = 1 gives zeros");
  check(be->dropout(0, EM_F64, out, mask, x, big, 1.5, 77, 0) == EM_ERR_ARG,
        "dropout with p = 1.5 is an error");
  free(d);
  free(f);
  free(b);
  free(x);
  free(out);
  free(mask);
}

/* ---- optimizers ---- */

static void test_optim(void) {
  enum { N = 50, STEPS = 5 };
  for (int dec = 0; dec < 2; dec++)
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      double p[N], m[N] = {0}, v[N] = {0}, g[STEPS][N];
      void *P = rand_arr(dt, N, -1, 1, p), *M = xmalloc(N * 8), *V = xmalloc(N * 8), *G[STEPS];
      for (int s = 0; s < STEPS; s++) G[s] = rand_arr(dt, N, -1, 1, g[s]);
      const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
      em_status st = EM_OK;
      for (int s = 1; s <= STEPS && !st; s++) {
        st = be->adam_step(0, dt, N, P, G[s - 1], M, V, lr, b1, b2, eps, wd, s, dec);
        for (int i = 0; i < N; i++) { /* torch.optim.Adam / AdamW, written out */
          double gi = g[s - 1][i];
          if (dec)
            p[i] *= 1 - lr * wd;
          else
            gi += wd * p[i];
          m[i] = b1 * m[i] + (1 - b1) * gi;
          v[i] = b2 * v[i] + (1 - b2) * gi * gi;
          double mhat = m[i] / (1 - pow(b1, s)), vhat = v[i] / (1 - pow(b2, s));
          p[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
      }
      double tol = dt == EM_F32 ? 1e-6 : 1e-13;
      check(st == EM_OK && close_to("adam p", P, dt, p, N, tol, tol) &&
                close_to("adam m", M, dt, m, N, tol, tol) &&
                close_to("adam v", V, dt, v, N, tol, tol),
            "%s %s: %d steps match the reference formula", dec ? "adamw_step" : "adam_step",
            dtn(dt), STEPS);
      free(P);
      free(M);
      free(V);
      for (int s = 0; s < STEPS; s++) free(G[s]);
    }
  check(be->adam_step(0, EM_F32, 1, (float[1]){0}, (float[1]){0}, (float[1]){0}, (float[1]){0}, 0.1,
                      0.9, 0.999, 1e-8, 0, 0, false) == EM_ERR_ARG,
        "adam_step with step 0 is an error");
  /* SGD: plain, momentum with dampening, nesterov */
  const double cfg[3][4] = {{0, 0, 0, 0}, {0.9, 0.1, 0.01, 0}, {0.9, 0, 0.01, 1}};
  for (int c = 0; c < 3; c++) {
    double p[N], buf[N], g[STEPS][N], mom = cfg[c][0], damp = cfg[c][1], wd = cfg[c][2], lr = 0.1;
    bool nest = cfg[c][3] != 0;
    double *P = rand_arr(EM_F64, N, -1, 1, p), *B = xmalloc(N * 8), *G[STEPS];
    for (int s = 0; s < STEPS; s++) G[s] = rand_arr(EM_F64, N, -1, 1, g[s]);
    em_status st = EM_OK;
    for (int s = 0; s < STEPS && !st; s++) {
      st =
          be->sgd_step(0, EM_F64, N, P, G[s], mom != 0 ? B : NULL, lr, mom, damp, wd, nest, s == 0);
      for (int i = 0; i < N; i++) { /* torch.optim.SGD, written out */
        double d = g[s][i] + wd * p[i];
        if (mom != 0) {
          buf[i] = s == 0 ? d : mom * buf[i] + (1 - damp) * d;
          d = nest ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
      }
    }
    check(st == EM_OK && close_to("sgd", P, EM_F64, p, N, 1e-14, 1e-14),
          "sgd_step momentum %g dampening %g nesterov %d", mom, damp, nest);
    free(P);
    free(B);
    for (int s = 0; s < STEPS; s++) free(G[s]);
  }
}

/* ---- attention ---- */

typedef struct att_case {
  const char *name;
  int64_t B, H, Lq, Lk, dk, dv;
  bool causal, pad, bias;
  double p;
  bool numeric; /* also check gradients by central differences */
} att_case;

typedef struct att_data {
  double *q, *k, *v, *bias, *dout; /* inputs */
  uint8_t *pad;
  int64_t bst[4];
  double scale;
} att_data;

/* Naive attention in double, one query row at a time; with grads != NULL
** also the analytic backward from dout. */
static void ref_attention(const att_case *c, const att_data *d, double *out, double *lse,
                          double **grads) {
  const int64_t Lq = c->Lq, Lk = c->Lk, dk = c->dk, dv = c->dv;
  double *s = xmalloc((Lk + 1) * 8), *pr = xmalloc((Lk + 1) * 8), *z = xmalloc((Lk + 1) * 8),
         *dp = xmalloc((Lk + 1) * 8);
  if (grads) {
    memset(grads[0], 0, c->B * c->H * Lq * dk * 8);
    memset(grads[1], 0, c->B * c->H * Lk * dk * 8);
    memset(grads[2], 0, c->B * c->H * Lk * dv * 8);
  }
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < Lq; i++) {
        int64_t bh = b * c->H + h;
        const double *qi = d->q + (bh * Lq + i) * dk;
        double mx = -INFINITY;
        for (int64_t j = 0; j < Lk; j++) {
          const double *kj = d->k + (bh * Lk + j) * dk;
          double dot = 0;
          for (int64_t x = 0; x < dk; x++) dot += qi[x] * kj[x];
          s[j] = dot * d->scale;
          if (c->bias)
            s[j] += d->bias[b * d->bst[0] + h * d->bst[1] + i * d->bst[2] + j * d->bst[3]];
          if ((c->pad && d->pad[b * Lk + j]) || (c->causal && j > i + Lk - Lq)) s[j] = -INFINITY;
          mx = fmax(mx, s[j]);
        }
        double *o = out + (bh * Lq + i) * dv;
        memset(o, 0, dv * 8);
        if (mx == -INFINITY) {
          lse[bh * Lq + i] = INFINITY;
          continue;
        }
        double sum = 0;
        for (int64_t j = 0; j < Lk; j++) sum += exp(s[j] - mx);
        lse[bh * Lq + i] = mx + log(sum);
        for (int64_t j = 0; j < Lk; j++) {
          pr[j] = exp(s[j] - mx) / sum;
          uint64_t e = (uint64_t)((bh * Lq + i) * Lk + j);
          z[j] = c->p > 0 ? (em_philox_keep(7, 11, e, em_philox_keep_threshold(c->p)) ? 1 / (1 - c->p) : 0) : 1;
          for (int64_t x = 0; x < dv; x++) o[x] += pr[j] * z[j] * d->v[(bh * Lk + j) * dv + x];
        }
        if (!grads) continue;
        const double *go = d->dout + (bh * Lq + i) * dv;
        double D = 0;
        for (int64_t j = 0; j < Lk; j++) {
          double t = 0;
          for (int64_t x = 0; x < dv; x++) t += go[x] * d->v[(bh * Lk + j) * dv + x];
          dp[j] = t * z[j];
          D += pr[j] * dp[j];
        }
        for (int64_t j = 0; j < Lk; j++) {
          double ds = pr[j] * (dp[j] - D) * d->scale;
          for (int64_t x = 0; x < dk; x++) {
            grads[0][(bh * Lq + i) * dk + x] += ds * d->k[(bh * Lk + j) * dk + x];
            grads[1][(bh * Lk + j) * dk + x] += ds * qi[x];
          }
          for (int64_t x = 0; x < dv; x++) grads[2][(bh * Lk + j) * dv + x] += pr[j] * z[j] * go[x];
        }
      }
  free(s);
  free(pr);
  free(z);
  free(dp);
}

static double att_loss(const att_case *c, const att_data *d, double *out, double *lse) {
  ref_attention(c, d, out, lse, NULL);
  double l = 0;
  for (int64_t i = 0; i < c->B * c->H * c->Lq * c->dv; i++) l += out[i] * d->dout[i];
  return l;
}

static float *to_f32(const double *x, int64_t n) {
  float *f = xmalloc(n * 4 + 4);
  for (int64_t i = 0; i < n; i++) f[i] = (float)x[i];
  return f;
}

static void attention_case(const att_case *c) {
  const int64_t BH = c->B * c->H, nq = BH * c->Lq * c->dk, nk = BH * c->Lk * c->dk,
                nv = BH * c->Lk * c->dv;
  const int64_t no = BH * c->Lq * c->dv, nl = BH * c->Lq, nb = c->H * c->Lq * c->Lk;
  att_data d;
  d.q = rand_arr(EM_F64, nq, -1.5, 1.5, NULL);
  d.k = rand_arr(EM_F64, nk, -1.5, 1.5, NULL);
  d.v = rand_arr(EM_F64, nv, -1, 1, NULL);
  d.dout = rand_arr(EM_F64, no, -1, 1, NULL);
  d.bias = rand_arr(EM_F64, nb + 1, -1, 1, NULL); /* [1,H,Lq,Lk], broadcast over B */
  for (int64_t i = 0; i < nb; i += 5) d.bias[i] = -INFINITY;
  d.bst[0] = 0, d.bst[1] = c->Lq * c->Lk, d.bst[2] = c->Lk, d.bst[3] = 1;
  d.pad = xmalloc(c->B * c->Lk + 1);
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t j = 0; j < c->Lk; j++)
      d.pad[b * c->Lk + j] = b == 1 || j % 3 == 2; /* batch 1: all padding */
  d.scale = 1 / sqrt((double)c->dk ? (double)c->dk : 1);

  double *ro = xmalloc(no * 8), *rl = xmalloc(nl * 8),
         *g[3] = {xmalloc(nq * 8), xmalloc(nk * 8), xmalloc(nv * 8)};
  ref_attention(c, &d, ro, rl, g);

  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.B = c->B, a.H = c->H, a.Lq = c->Lq, a.Lk = c->Lk, a.dk = c->dk, a.dv = c->dv;
  a.key_padding = c->pad ? d.pad : NULL;
  memcpy(a.bias_stride, d.bst, sizeof d.bst);
  a.causal = c->causal, a.scale = d.scale, a.dropout_p = c->p, a.seed = 7, a.offset = 11;
  for (int k = 0; k < 2; k++) {
    em_dtype dt = k ? EM_F64 : EM_F32;
    size_t es = esize(dt);
    a.dtype = dt;
    void *in[5];
    double *src[5] = {d.q, d.k, d.v, d.bias, d.dout};
    int64_t cnt[5] = {nq, nk, nv, nb, no};
    for (int t = 0; t < 5; t++) {
      if (dt == EM_F32)
        in[t] = to_f32(src[t], cnt[t]);
      else {
        in[t] = xmalloc(cnt[t] * 8 + 8);
        memcpy(in[t], src[t], cnt[t] * 8);
      }
    }
    a.q = in[0], a.k = in[1], a.v = in[2], a.bias = c->bias ? in[3] : NULL, a.dout = in[4];
    a.out = xmalloc(no * es + 8), a.lse = xmalloc(nl * es + 8);
    a.dq = xmalloc(nq * es + 8), a.dk_ = xmalloc(nk * es + 8), a.dv_ = xmalloc(nv * es + 8);
    double tol = dt == EM_F32 ? 2e-5 : 1e-12;
    em_status s = be->attention_forward(0, &a);
    check(s == EM_OK && close_to("attention out", a.out, dt, ro, no, tol, 10 * tol) &&
              close_to("attention lse", a.lse, dt, rl, nl, tol, tol),
          "attention_forward %s %s", dtn(dt), c->name);
    s = be->attention_backward(0, &a);
    check(s == EM_OK && close_to("attention dq", a.dq, dt, g[0], nq, 5 * tol, 10 * tol) &&
              close_to("attention dk", a.dk_, dt, g[1], nk, 5 * tol, 10 * tol) &&
              close_to("attention dv", a.dv_, dt, g[2], nv, 5 * tol, 10 * tol),
          "attention_backward %s %s", dtn(dt), c->name);
    for (int t = 0; t < 5; t++) free(in[t]);
    free(a.out);
    free((void *)a.lse);
    free(a.dq);
    free(a.dk_);
    free(a.dv_);
  }
  if (c->numeric) { /* the reference's own gradients against central differences */
    double *arrs[3] = {d.q, d.k, d.v}, *tmp_o = xmalloc(no * 8), *tmp_l = xmalloc(nl * 8),
           worst = 0;
    int64_t cnt[3] = {nq, nk, nv};
    for (int t = 0; t < 3; t++)
      for (int64_t i = 0; i < cnt[t]; i++) {
        double sv = arrs[t][i], h = 1e-6;
        arrs[t][i] = sv + h;
        double lp = att_loss(c, &d, tmp_o, tmp_l);
        arrs[t][i] = sv - h;
        double lm = att_loss(c, &d, tmp_o, tmp_l);
        arrs[t][i] = sv;
        worst = fmax(worst, fabs((lp - lm) / (2 * h) - g[t][i]));
      }
    check(worst < 1e-6,
          "attention reference gradients %s match central differences (max error %.2g)", c->name,
          worst);
    free(tmp_o);
    free(tmp_l);
  }
  free(d.q);
  free(d.k);
  free(d.v);
  free(d.dout);
  free(d.bias);
  free(d.pad);
  free(ro);
  free(rl);
  free(g[0]);
  free(g[1]);
  free(g[2]);
}

static void test_attention(void) {
  const att_case cases[] = {
      {"plain B2 H3 Lq5 Lk7", 2, 3, 5, 7, 4, 6, false, false, false, 0, true},
      {"causal Lq5 < Lk7", 2, 2, 5, 7, 4, 3, true, false, false, 0, true},
      {"causal Lq7 > Lk5 (fully masked rows)", 1, 2, 7, 5, 3, 4, true, false, false, 0, true},
      {"padding + bias with -inf (fully masked rows)", 2, 2, 4, 6, 4, 4, false, true, true, 0,
       true},
      {"causal + padding + bias + dropout 0.25", 2, 2, 6, 6, 4, 5, true, true, true, 0.25, true},
      {"Lk = 0 (every row masked)", 1, 1, 3, 0, 4, 4, false, false, false, 0, false},
      {"tiles Lq70 Lk130 causal + padding + bias", 2, 2, 70, 130, 16, 8, true, true, true, 0,
       false},
      {"tiles Lq100 Lk40 causal + dropout 0.1", 1, 3, 100, 40, 8, 8, true, false, false, 0.1,
       false},
      {"tiles Lq65 Lk129 plain d=32", 1, 2, 65, 129, 32, 32, false, false, false, 0, false},
      /* rows of 131 keys start between Philox blocks (4 elements each), and
      ** a tile row of 128 takes the 64-at-a-time keep path after that */
      {"tiles Lq9 Lk131 dropout 0.3", 1, 2, 9, 131, 8, 8, false, false, false, 0.3, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attention_case(&cases[i]);
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = EM_I64, a.B = a.H = a.Lq = a.Lk = a.dk = a.dv = 1; /* bfloat16 is computed (attention_bf16_spec.lua) */
  check(be->attention_forward(0, &a) == EM_ERR_DTYPE && msg_has("attention_forward", "bfloat16"),
        "attention on int64 is a dtype error naming the supported ones: %s", em_error_message());
}

/* ---- speed (informational) ---- */

static void time_small_add(void) {
  float a[16], b[16], o[16];
  for (int i = 0; i < 16; i++) a[i] = (float)i, b[i] = 1;
  int64_t sh[1] = {16};
  em_kview vo = kv(o, EM_F32, 1, sh), va = kv(a, EM_F32, 1, sh), vb = kv(b, EM_F32, 1, sh);
  const int iters = 200000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < iters; i++) be->binary(0, EM_ADD, &vo, &va, &vb);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters;
  printf("# binary add of 16 float32 elements: %.1f ns per kernel call\n", ns);
  check(o[15] == 16, "16-element add result");
}

/* ---- bfloat16 compute ---- */

static uint16_t to_bf16(double v) { /* round to nearest even, finite v */
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* bf16 arrays of n random values; `copy` gets the rounded values. */
static uint16_t *rand_bf16(int64_t n, double *copy) {
  uint16_t *p = xmalloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) {
    p[i] = to_bf16(urand());
    copy[i] = from_bf16(p[i]);
  }
  return p;
}

/* bf16 products (oneDNN) and the float32 ones large enough for oneDNN,
** every transpose, alpha and beta, against double loops on the same
** (rounded) inputs. One rounding of a float32-accumulated result: within
** 2^-8 of the largest |C|. Also runs oneDNN's JIT under valgrind/ASan. */
static void test_bf16_gemm(void) {
  const int64_t m = 37, n = 45, k = 29, batch = 3;
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    double *A = xmalloc(batch * m * k * 8), *B = xmalloc(batch * k * n * 8),
           *C0 = xmalloc(batch * m * n * 8), *want = xmalloc(batch * m * n * 8);
    uint16_t *a = rand_bf16(batch * m * k, A), *b = rand_bf16(batch * k * n, B),
             *c = rand_bf16(batch * m * n, C0);
    const int64_t lda = ta ? m : k, ldb = tb ? k : n;
    double big = 0;
    for (int64_t q = 0; q < batch; q++)
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
          double acc = 0;
          for (int64_t p = 0; p < k; p++) {
            double x = ta ? A[q * m * k + p * lda + i] : A[q * m * k + i * lda + p];
            double y = tb ? B[q * k * n + j * ldb + p] : B[q * k * n + p * ldb + j];
            acc += x * y;
          }
          double v = 0.5 * acc + 0.25 * C0[q * m * n + i * n + j];
          want[q * m * n + i * n + j] = v;
          if (fabs(v) > big) big = fabs(v);
        }
    em_status s = be->gemm(0, EM_BF16, ta, tb, m, n, k, 0.5, a, lda, m * k, b, ldb, k * n, 0.25,
                           c, n, m * n, batch);
    double worst = 0;
    for (int64_t i = 0; s == EM_OK && i < batch * m * n; i++)
      worst = fmax(worst, fabs(from_bf16(c[i]) - want[i]));
    check(s == EM_OK && worst <= big / 256, "bf16 gemm ta=%d tb=%d alpha, beta, batch: error %.3g of %.3g (%s)",
          ta, tb, worst, big, s ? em_error_message() : "ok");
    free(A), free(B), free(C0), free(want), free(a), free(b), free(c);
  }
  /* float32 at 160^3 (past the oneDNN threshold) */
  const int64_t N = 160;
  double *A = xmalloc(N * N * 8), *B = xmalloc(N * N * 8), *want = xmalloc(N * N * 8);
  float *a = rand_arr(EM_F32, N * N, -1, 1, A), *b = rand_arr(EM_F32, N * N, -1, 1, B);
  float *c = xmalloc(N * N * 4);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = 0;
      for (int64_t p = 0; p < N; p++) acc += A[i * N + p] * B[j * N + p];
      want[i * N + j] = acc;
    }
  em_status s = be->gemm(0, EM_F32, false, true, N, N, N, 1, a, N, 0, b, N, 0, 0, c, N, 0, 1);
  check(s == EM_OK && close_to("f32 gemm 160^3", c, EM_F32, want, N * N, 1e-4, 1e-4),
        "float32 gemm 160^3, B transposed (oneDNN by the rule)");
  free(A), free(B), free(want), free(a), free(b), free(c);
}

/* The fused optimizers on bf16 parameters against the same step in f32:
** each stored value rounds once, so within 2^-8 of the largest |param|
** (near-zero results make an elementwise relative bound meaningless). */
static void test_bf16_optim(void) {
  enum { N = 300 };
  double P[N], G[N], Z[N];
  uint16_t *p = rand_bf16(N, P), *g = rand_bf16(N, G), m[N] = {0}, v[N] = {0};
  float pf[N], gf[N], mf[N] = {0}, vf[N] = {0};
  for (int i = 0; i < N; i++) pf[i] = (float)P[i], gf[i] = (float)G[i], Z[i] = 0;
  em_status s1 = be->adam_step(0, EM_BF16, N, p, g, m, v, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, true);
  em_status s2 = be->adam_step(0, EM_F32, N, pf, gf, mf, vf, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, true);
  double worst = 0, big = 0;
  for (int i = 0; i < N; i++) big = fmax(big, fabs(pf[i]));
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(from_bf16(p[i]) - pf[i]) / big);
  check(s1 == EM_OK && s2 == EM_OK && worst <= 1.0 / 256, "bf16 adamw step vs float32: %.3g", worst);
  uint16_t buf[N];
  s1 = be->sgd_step(0, EM_BF16, N, p, g, buf, 0.1, 0.9, 0, 0, false, true);
  s2 = be->sgd_step(0, EM_F32, N, pf, gf, vf, 0.1, 0.9, 0, 0, false, true);
  worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs(from_bf16(p[i]) - pf[i]) / big);
  check(s1 == EM_OK && s2 == EM_OK && worst <= 2.0 / 256, "bf16 sgd momentum step vs float32: %.3g", worst);
  (void)Z;
  free(p), free(g);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/ember_backend_cpu.so\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 2;
  }
  em_plugin_init_fn init = (em_plugin_init_fn)dlsym(h, EM_PLUGIN_INIT_SYMBOL);
  char err[256] = "";
  be = init ? init(err, sizeof err) : NULL;
  if (!be) {
    fprintf(stderr, "ember_plugin_init failed: %s\n", err);
    return 2;
  }
  test_plugin(h);
  test_memory();
  test_copy_fill();
  test_binary();
  test_unary();
  test_gelu_f32();
  test_reduce();
  test_gemm();
  test_softmax();
  test_layer_norm();
  test_index();
  test_cross_entropy();
  test_random();
  test_optim();
  test_bf16_gemm();
  test_bf16_optim();
  test_attention();
  time_small_add();
  printf("%d passed, %d failed\n", n_pass, n_fail);
  dlclose(h);
  return n_fail ? 1 : 0;
}
