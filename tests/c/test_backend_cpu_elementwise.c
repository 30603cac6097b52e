/*
** test_backend_cpu_elementwise.c -- the plugin header, memory and threads, copy
** and fill (casts, bfloat16 rounding), binary ops and where, unary ops and
** their derivatives, and the time of a small kernel call.
** Checks the CPU backend plugin's kernels against straightforward
** reference loops (in double), and their error paths; backend_cpu.h has
** the harness.
*/
#include "backend_cpu.h"
#include "ember_bf16.h"

#include <float.h>

#include <time.h>

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
  /* the rule's very bits (ember_bf16.h) on special values, cycled through
  ** whole vectors and a tail: NaNs keep their payload, made quiet; ties
  ** (normal and denormal) go to even; denormals round as numbers, where
  ** vcvtneps2bf16 alone would flush them to zero; the largest float
  ** rounds to inf. EMBER_CPU_BF16=avx512/plain runs the other paths. */
  static const uint32_t special[] = {
      0x7f800001u, 0xffa12345u, 0x7fc00000u, 0x7fffffffu, 0x7f800000u, 0xff800000u, 0x00000000u,
      0x80000000u, 0x00000001u, 0x80000001u, 0x00008000u, 0x00018000u, 0x00007fffu, 0x007fffffu,
      0x807f8000u, 0x00800000u, 0x7f7fffffu, 0x7f7f8000u, 0xff7f8000u, 0x3f808000u, 0x3f818000u,
      0x3f80ffffu, 0x00408000u, 0x80c18000u};
  enum { NS = sizeof special / sizeof special[0], NSP = 16 * NS + 5 };
  float sp[NSP], spb[NSP];
  uint32_t spu[NSP];
  uint16_t sph[NSP];
  for (int i = 0; i < NSP; i++) {
    /* lane i of each vector in turn a special value, among ordinary ones */
    spu[i] = (i / 16) % 2 ? special[i % NS]
             : i % 16 == (i / 32) % 16 ? special[(i / 32) % NS] : 0x3fc01234u + (uint32_t)i;
    memcpy(&sp[i], &spu[i], 4);
  }
  int64_t spshape[1] = {NSP};
  em_kview vsp = kv(sp, EM_F32, 1, spshape), vsph = kv(sph, EM_BF16, 1, spshape),
           vspb = kv(spb, EM_F32, 1, spshape);
  ok = be->copy(0, &vsph, &vsp) == EM_OK && be->copy(0, &vspb, &vsph) == EM_OK;
  bad = -1;
  for (int i = 0; i < NSP && ok; i++) {
    const uint32_t wb = (uint32_t)em_f32_to_bf16(sp[i]) << 16;
    if (sph[i] != em_f32_to_bf16(sp[i]) || memcmp(&spb[i], &wb, 4) != 0) bad = i, ok = 0;
  }
  check(ok, "copy f32 -> bf16 -> f32 gives ember_bf16.h's bits on NaN, inf, denormals, ties "
        "(first bad %d: %04x for %08x)", bad, bad >= 0 ? sph[bad] : 0, bad >= 0 ? (unsigned)spu[bad] : 0u);
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
    case EM_FMOD: return fmod(x, y); /* int64's % too: the values are small */
    default: return NAN;
  }
}

static const char *const bin_names[] = {"add",     "sub", "mul", "div", "pow", "maximum",
                                        "minimum", "eq",  "ne",  "lt",  "le",  "gt",
                                        "ge",      "and", "or",  "xor", "fmod"};

/* out [3,5,4] = a [3,1,4] op b [1,5,4] with broadcasting strides. */
static void binary_case(em_binary_op op, em_dtype dt) {
  int64_t shape[3] = {3, 5, 4}, sa[3] = {4, 0, 1}, sb[3] = {0, 4, 1};
  double ad[12], bd[20], want[60];
  double lo = op == EM_POW ? 0.1 : -3, hi = 3;
  void *a = rand_arr(dt, 12, lo, hi, ad), *b = rand_arr(dt, 20, op == EM_POW ? -2 : lo, hi, bd);
  if (dt == EM_I64 && (op == EM_DIV || op == EM_FMOD))
    for (int i = 0; i < 20; i++)
      if (bd[i] == 0) ((int64_t *)b)[i] = 1, bd[i] = 1;
  if (dt == EM_I64 && op == EM_POW)
    for (int i = 0; i < 20; i++) ((int64_t *)b)[i] = i % 4, bd[i] = i % 4;
  bool cmp = op >= EM_EQ && op <= EM_GE;
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
  for (int op = EM_ADD; op < EM_NBINARY; op++) {
    if (op >= EM_AND && op <= EM_XOR) continue;
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
  check(be->binary(0, EM_FMOD, &vr, &vx, &vy) == EM_ERR_ARG && msg_has("fmod", "integer division by zero"),
        "int64 fmod by zero is an error naming fmod: %s", em_error_message());
  {
    /* C's %: the dividend's sign; INT64_MIN % -1 is 0 (x86's idiv traps);
    ** 2^53 + 1 exact; a broadcast divisor */
    int64_t fx[5] = {INT64_MIN, -7, 7, 9007199254740993LL, INT64_MAX}, fy[5] = {-1, 2, -2, 2, -1}, fr[5],
            s5[1] = {5}, z1[1] = {0};
    em_kview vfx = kv(fx, EM_I64, 1, s5), vfy = kv(fy, EM_I64, 1, s5), vfr = kv(fr, EM_I64, 1, s5);
    check(be->binary(0, EM_FMOD, &vfr, &vfx, &vfy) == EM_OK && fr[0] == 0 && fr[1] == -1 && fr[2] == 1 &&
              fr[3] == 1 && fr[4] == 0,
          "int64 fmod: C's %% (INT64_MIN %% -1 = 0, -7 %% 2 = -1, 7 %% -2 = 1, (2^53 + 1) %% 2 = 1)");
    int64_t m3 = -3;
    em_kview vb3 = kvs(&m3, EM_I64, 1, s5, z1);
    check(be->binary(0, EM_FMOD, &vfr, &vfx, &vb3) == EM_OK && fr[0] == INT64_MIN % 3 && fr[1] == -1 &&
              fr[2] == 1 && fr[3] == 9007199254740993LL % 3 && fr[4] == INT64_MAX % 3,
          "int64 fmod by a broadcast -3");
    float gx[4] = {7.5f, -0.0f, -4.0f, 1e17f}, gy[4] = {0.1f, 2.0f, 2.0f, 3.3f}, gr[4];
    int64_t s4[1] = {4};
    em_kview vgx = kv(gx, EM_F32, 1, s4), vgy = kv(gy, EM_F32, 1, s4), vgr = kv(gr, EM_F32, 1, s4);
    bool same = be->binary(0, EM_FMOD, &vgr, &vgx, &vgy) == EM_OK;
    for (int i = 0; i < 4; i++) same &= memcmp(&gr[i], &(float){fmodf(gx[i], gy[i])}, 4) == 0;
    check(same && signbit(gr[1]) && signbit(gr[2]), "float32 fmod gives fmodf's bits (signed zeros)");
  }
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

/* erfinv by bisection on libm's erf, for |y| < 1 */
static double ref_erfinv(double y) {
  double lo = -7, hi = 7;
  for (int i = 0; i < 200; i++) {
    double mid = 0.5 * (lo + hi);
    if (erf(mid) < y) lo = mid;
    else hi = mid;
  }
  return 0.5 * (lo + hi);
}

/* digamma, independently of the kernel's recurrence to 10: the recurrence
** to x + 60, the asymptotic series there, and the reflection below 0 */
static double ref_digamma(double x) {
  if (x < 0) return ref_digamma(1 - x) - M_PI / tan(M_PI * x);
  double r = 0;
  for (int k = 0; k < 60; k++) r -= 1 / (x + k);
  double z = x + 60, iz2 = 1 / (z * z);
  return r + log(z) - 0.5 / z - iz2 * (1.0 / 12 - iz2 * (1.0 / 120 - iz2 / 252));
}

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
    case EM_LOG1P: return log1p(x);
    case EM_EXPM1: return expm1(x);
    case EM_ERF: return erf(x);
    case EM_ATAN: return atan(x);
    case EM_ASIN: return asin(x);
    case EM_ACOS: return acos(x);
    case EM_ERFINV: return ref_erfinv(x);
    case EM_LGAMMA: return lgamma(x);
    case EM_DIGAMMA: return ref_digamma(x);
    default: return NAN;
  }
}

/* The ops of the unit interval, whose inputs the tests keep in (-1, 1). */
static bool unit_op(int op) { return op == EM_ASIN || op == EM_ACOS || op == EM_ERFINV; }

static void test_unary(void) {
  const double alpha[EM_NUNARY] = {
      [EM_ELU] = 1.3, [EM_CLAMP] = -0.5, [EM_POW_SCALAR] = 2.5, [EM_AFFINE] = 2};
  const double beta[EM_NUNARY] = {[EM_CLAMP] = 0.5, [EM_AFFINE] = 0.5};
  for (int op = 0; op < EM_NUNARY; op++) {
    if (op == EM_NOT) continue; /* bool only: below */
    bool pos = op == EM_LOG || op == EM_SQRT || op == EM_RSQRT || op == EM_POW_SCALAR || op == EM_LOG1P ||
               op == EM_LGAMMA || op == EM_DIGAMMA; /* their poles: the torch fixtures go below 0 */
    const bool unit = unit_op(op);
    for (int k = 0; k < 2; k++) {
      em_dtype dt = k ? EM_F64 : EM_F32;
      /* x is read through a [6,5] transposed view of a [5,6] buffer */
      int64_t sh[2] = {6, 5}, st[2] = {1, 6};
      double xd[30], want[30];
      void *x = rand_arr(dt, 30, pos ? 0.1 : unit ? -0.95 : -3, unit ? 0.95 : 3, xd), *out = xmalloc(30 * 8);
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
      xd[i] = pos ? 0.2 + 1.5 * (urand() + 1) : unit ? 0.9 * urand() : 2 * urand();
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
  /* The tail is bounded as tightly as the middle: cpu_gauss_f32 splits x^2
  ** exactly, so no rounded z^2 moves e^{-z^2} (a rounded z = |x|/sqrt2
  ** alone had moved it by about 2 z^2 ulp, 8e-6 at x = -10). */
  double worst_y = 0, worst_tail = 0, worst_g = 0;
  for (int i = 0; i < N; i++) {
    double xi = x[i], want = 0.5 * xi * erfc(-xi / sqrt(2.0)), wg = ref_gelu_grad(xi);
    double ey = want == 0 ? fabs(y[i]) : fabs(y[i] - want) / fabs(want), eg = fabs(gx[i] - wg);
    if (xi >= -3 && ey > worst_y) worst_y = ey;
    if (xi < -3 && ey > worst_tail) worst_tail = ey;
    if (eg > worst_g) worst_g = eg;
  }
  check(worst_y < 1e-6, "gelu f32 relative error on [-3, 10]: %.2e < 1e-6", worst_y);
  check(worst_tail < 1e-6, "gelu f32 relative error on [-10, -3): %.2e < 1e-6", worst_tail);
  check(worst_g < 1e-6, "gelu_backward f32 absolute error %.2e < 1e-6", worst_g);
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

/* exp, sigmoid, SiLU, ELU and tanh in float32 run cpu_vmath.h's
** straight-line exp and tanh (so that their loops vectorise) instead of
** libm's: over the whole float range, on a long contiguous run (the
** vector clone), against double: exp within 4 ulp where the result is
** normal, +inf past ln(FLT_MAX), subnormal and then 0 below -87.3; the
** others within their stated bounds; NaN and the infinities as libm. */
static void test_exp_family_f32(void) {
  enum { N = 20001 };
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4), *gy = xmalloc(N * 4), *gx = xmalloc(N * 4);
  int64_t sh[1] = {N};
  em_kview vy = kv(y, EM_F32, 1, sh), vx = kv(x, EM_F32, 1, sh);
  for (int i = 0; i < N; i++) x[i] = -110.0f + 205.0f * (float)i / (N - 1), gy[i] = 1.0f;
  check(be->unary(0, EM_EXP, &vy, &vx, 0, 0) == EM_OK, "exp f32 over [-110, 95]");
  double worst = 0;
  int bad_inf = 0, bad_tiny = 0;
  for (int i = 0; i < N; i++) {
    const double want = exp((double)x[i]);
    if (want > FLT_MAX) bad_inf += y[i] != INFINITY;
    else if (want < FLT_MIN) bad_tiny += !(fabs(y[i] - want) <= 2 * 1.4e-45);
    else if (fabs(y[i] - want) / want > worst) worst = fabs(y[i] - want) / want;
  }
  check(worst < 4.8e-7 && bad_inf == 0 && bad_tiny == 0,
        "exp f32: relative error %.2e < 4 ulp; %d not +inf past ln(FLT_MAX), %d subnormals off", worst,
        bad_inf, bad_tiny);
  /* sigmoid, SiLU and their derivatives over [-100, 100], tanh over [-12, 12] */
  for (int i = 0; i < N; i++) x[i] = -100.0f + 200.0f * (float)i / (N - 1);
  const em_unary_op ops[3] = {EM_SIGMOID, EM_SILU, EM_TANH};
  for (int k = 0; k < 3; k++) {
    const em_unary_op op = ops[k];
    const float span = op == EM_TANH ? 12.0f : 100.0f;
    for (int i = 0; i < N; i++) x[i] = -span + 2 * span * (float)i / (N - 1);
    check(be->unary(0, op, &vy, &vx, 0, 0) == EM_OK &&
              be->unary_backward(0, op, EM_F32, N, gx, gy, x, y, 0, 0) == EM_OK,
          "%s f32 and its derivative", em_kernel_unary_name(op));
    double wy = 0, wg = 0;
    for (int i = 0; i < N; i++) {
      const double xi = x[i], sg = 1 / (1 + exp(-xi)), t = tanh(xi);
      const double want = op == EM_SIGMOID ? sg : op == EM_SILU ? xi * sg : t;
      const double wgrad = op == EM_SIGMOID ? sg * (1 - sg) : op == EM_SILU ? sg * (1 + xi * (1 - sg)) : 1 - t * t;
      /* relative where e^-|x| is normal (below -87.3 it is subnormal and
      ** carries fewer bits, in libm's expf too), absolute for tanh */
      const double ey = op == EM_TANH ? fabs(y[i] - want)
                        : exp(-fabs(xi)) < FLT_MIN ? fabs(y[i] - want)
                                                   : fabs(y[i] - want) / fabs(want);
      if (ey > wy) wy = ey;
      if (fabs(gx[i] - wgrad) > wg) wg = fabs(gx[i] - wgrad);
    }
    check(wy < (op == EM_TANH ? 3e-7 : 1e-6) && wg < 2e-6, "%s f32: error %.2e, derivative's %.2e",
          em_kernel_unary_name(op), wy, wg);
  }
  float sx[5] = {NAN, INFINITY, -INFINITY, 0.0f, 89.0f}, sy[5];
  int64_t s5[1] = {5};
  em_kview vsy = kv(sy, EM_F32, 1, s5), vsx = kv(sx, EM_F32, 1, s5);
  check(be->unary(0, EM_EXP, &vsy, &vsx, 0, 0) == EM_OK && isnan(sy[0]) && sy[1] == INFINITY &&
            sy[2] == 0 && sy[3] == 1 && sy[4] == INFINITY,
        "exp f32: NaN -> NaN, inf -> inf, -inf -> 0, 0 -> 1, 89 -> inf");
  check(be->unary(0, EM_SIGMOID, &vsy, &vsx, 0, 0) == EM_OK && isnan(sy[0]) && sy[1] == 1 &&
            sy[2] == 0 && sy[3] == 0.5f && sy[4] == 1,
        "sigmoid f32: NaN -> NaN, inf -> 1, -inf -> 0, 0 -> 1/2");
  check(be->unary(0, EM_TANH, &vsy, &vsx, 0, 0) == EM_OK && isnan(sy[0]) && sy[1] == 1 &&
            sy[2] == -1 && sy[3] == 0 && sy[4] == 1,
        "tanh f32: NaN -> NaN, +-inf -> +-1, 0 -> 0");
  /* bfloat16 GELU and its derivative compute in float32: one rounding of
  ** the float32 kernel's result */
  uint16_t *bx = xmalloc(N * 2), *by = xmalloc(N * 2), *bg = xmalloc(N * 2), *bgx = xmalloc(N * 2);
  for (int i = 0; i < N; i++) {
    bx[i] = em_f32_to_bf16(-8.0f + 16.0f * (float)i / (N - 1));
    x[i] = em_bf16_to_f32(bx[i]);
    bg[i] = em_f32_to_bf16(1.0f);
  }
  em_kview vby = kv(by, EM_BF16, 1, sh), vbx = kv(bx, EM_BF16, 1, sh);
  check(be->unary(0, EM_GELU, &vby, &vbx, 0, 0) == EM_OK && be->unary(0, EM_GELU, &vy, &vx, 0, 0) == EM_OK &&
            be->unary_backward(0, EM_GELU, EM_BF16, N, bgx, bg, bx, by, 0, 0) == EM_OK &&
            be->unary_backward(0, EM_GELU, EM_F32, N, gx, gy, x, y, 0, 0) == EM_OK,
        "gelu bf16 and f32");
  int differ = 0;
  for (int i = 0; i < N; i++) differ += by[i] != em_f32_to_bf16(y[i]) || bgx[i] != em_f32_to_bf16(gx[i]);
  check(differ == 0, "gelu bf16 is the float32 kernel rounded once (%d of %d differ)", differ, N);
  free(bx), free(by), free(bg), free(bgx);
  free(x), free(y), free(gy), free(gx);
}

/* bfloat16 unary ops and derivatives compute in float32 and round once:
** every op's bfloat16 result (a contiguous run long enough for several
** stack chunks, and a strided one) equals the float32 kernel's on the
** widened input, rounded. */
static void test_bf16_unary_is_f32_rounded(void) {
  enum { N = 2500 };
  const double alpha[EM_NUNARY] = {[EM_ELU] = 1.3, [EM_CLAMP] = -0.5, [EM_POW_SCALAR] = 2.5, [EM_AFFINE] = 2};
  const double beta[EM_NUNARY] = {[EM_CLAMP] = 0.5, [EM_AFFINE] = 0.5};
  uint16_t *bx = xmalloc(N * 2), *by = xmalloc(N * 2), *bg = xmalloc(N * 2), *bgx = xmalloc(N * 2);
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4), *g = xmalloc(N * 4), *gx = xmalloc(N * 4);
  int64_t sh[1] = {N}, half[1] = {N / 2}, st2[1] = {2};
  for (int op = 0; op < EM_NUNARY; op++) {
    if (op == EM_NOT) continue;
    const bool pos = op == EM_LOG || op == EM_SQRT || op == EM_RSQRT || op == EM_POW_SCALAR || op == EM_LOG1P;
    for (int i = 0; i < N; i++) {
      bx[i] = em_f32_to_bf16(pos ? 0.05f + 4.0f * (float)i / N
                             : unit_op(op) ? -0.99f + 1.98f * (float)i / N : -6.0f + 12.0f * (float)i / N);
      x[i] = em_bf16_to_f32(bx[i]);
      bg[i] = em_f32_to_bf16(0.5f + (float)(i % 7) / 7);
      g[i] = em_bf16_to_f32(bg[i]);
    }
    em_kview vby = kv(by, EM_BF16, 1, sh), vbx = kv(bx, EM_BF16, 1, sh);
    em_kview vy = kv(y, EM_F32, 1, sh), vx = kv(x, EM_F32, 1, sh);
    const em_unary_op u = (em_unary_op)op;
    bool ok = be->unary(0, u, &vby, &vbx, alpha[op], beta[op]) == EM_OK &&
              be->unary(0, u, &vy, &vx, alpha[op], beta[op]) == EM_OK;
    int differ = 0;
    for (int i = 0; ok && i < N; i++) differ += by[i] != em_f32_to_bf16(y[i]);
    /* the strided run: every other element */
    em_kview vbh = kv(by, EM_BF16, 1, half), vbs = kvs(bx, EM_BF16, 1, half, st2);
    ok = ok && be->unary(0, u, &vbh, &vbs, alpha[op], beta[op]) == EM_OK;
    for (int i = 0; ok && i < N / 2; i++) differ += by[i] != em_f32_to_bf16(y[2 * i]);
    /* the derivative, from the forward's x and y */
    for (int i = 0; i < N; i++) by[i] = em_f32_to_bf16(y[i]), y[i] = em_bf16_to_f32(by[i]);
    ok = ok && be->unary_backward(0, u, EM_BF16, N, bgx, bg, bx, by, alpha[op], beta[op]) == EM_OK &&
         be->unary_backward(0, u, EM_F32, N, gx, g, x, y, alpha[op], beta[op]) == EM_OK;
    for (int i = 0; ok && i < N; i++) differ += bgx[i] != em_f32_to_bf16(gx[i]);
    check(ok && differ == 0, "unary %s bfloat16 = float32 rounded once, forward (contiguous, strided) and derivative "
          "(%d of %d differ)", em_kernel_unary_name(u), differ, 2 * N + N / 2);
  }
  free(bx), free(by), free(bg), free(bgx);
  free(x), free(y), free(g), free(gx);
}

/* ReLU's bfloat16 kernels work on the bits (cpu_unary.c): over every bit
** pattern of x (and of g, in another order), forward and derivative give
** the float32 path's result rounded once, -0, infinities and NaNs too. */
static void test_bf16_relu_every_pattern(void) {
  enum { N = 65536 + 37 }; /* an odd tail after the vector loop */
  uint16_t *bx = xmalloc(N * 2), *by = xmalloc(N * 2), *bg = xmalloc(N * 2), *bgx = xmalloc(N * 2);
  float *x = xmalloc(N * 4), *y = xmalloc(N * 4), *g = xmalloc(N * 4), *gx = xmalloc(N * 4);
  for (int i = 0; i < N; i++) {
    bx[i] = (uint16_t)i, bg[i] = (uint16_t)(i * 40503u + 7u); /* every g beside many x */
    x[i] = em_bf16_to_f32(bx[i]), g[i] = em_bf16_to_f32(bg[i]);
  }
  int64_t sh[1] = {N};
  em_kview vby = kv(by, EM_BF16, 1, sh), vbx = kv(bx, EM_BF16, 1, sh);
  em_kview vy = kv(y, EM_F32, 1, sh), vx = kv(x, EM_F32, 1, sh);
  bool ok = be->unary(0, EM_RELU, &vby, &vbx, 0, 0) == EM_OK && be->unary(0, EM_RELU, &vy, &vx, 0, 0) == EM_OK &&
            be->unary_backward(0, EM_RELU, EM_BF16, N, bgx, bg, bx, NULL, 0, 0) == EM_OK &&
            be->unary_backward(0, EM_RELU, EM_F32, N, gx, g, x, NULL, 0, 0) == EM_OK;
  int fwd = 0, bwd = 0, first = -1;
  for (int i = 0; ok && i < N; i++) {
    const bool f = by[i] != em_f32_to_bf16(y[i]), b = bgx[i] != em_f32_to_bf16(gx[i]);
    fwd += f, bwd += b;
    if ((f || b) && first < 0) first = i;
  }
  check(ok && fwd == 0 && bwd == 0, "relu bfloat16 on every bit pattern = float32 rounded once "
        "(forward %d, derivative %d differ; first x bits 0x%04x)", fwd, bwd, first < 0 ? 0 : bx[first]);
  free(bx), free(by), free(bg), free(bgx);
  free(x), free(y), free(g), free(gx);
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

int main(int argc, char **argv) {
  void *h = backend_cpu_open(argc, argv);
  if (!h) return 2;
  test_plugin(h);
  test_memory();
  test_copy_fill();
  test_binary();
  test_unary();
  test_gelu_f32();
  test_exp_family_f32();
  test_bf16_unary_is_f32_rounded();
  test_bf16_relu_every_pattern();
  time_small_add();
  return backend_cpu_done(h);
}
