/*
** cpu_elementwise.c -- copy (with dtype casts), fill, binary ops with
** broadcasting, and where.
**
** Every kernel builds a cpu_iter over its operands and hands it an inner
** loop that processes one run. Inner loops switch on the op once per run,
** then loop over plain arrays when the strides allow (contiguous, or one
** operand broadcast), which is what the compiler vectorises.
*/
#include "cpu_internal.h"

#include <stdio.h>

/* ------------------------------------------------------------------ */
/* copy                                                                */
/* ------------------------------------------------------------------ */

/* Conversions to each destination type, from a value of the source type. */
#define TO_F32(x) ((float)(x))
#define TO_F64(x) ((double)(x))
#define TO_BOOL(x) ((uint8_t)((x) != 0))

typedef struct copy_ctx { em_dtype src, dst; } copy_ctx;

static inline int64_t f32_to_i64(float x) { return cpu_f64_to_i64((double)x); }
static inline float bf16_f32(uint16_t h) { return em_bf16_to_f32(h); }
static inline double bf16_f64(uint16_t h) { return (double)em_bf16_to_f32(h); }
static inline int64_t bf16_i64(uint16_t h) { return cpu_f64_to_i64(em_bf16_to_f32(h)); }
static inline uint8_t bf16_bool(uint16_t h) { return (uint8_t)(em_bf16_to_f32(h) != 0.0f); }
static inline uint16_t f64_bf16(double x) { return em_f32_to_bf16((float)x); }
static inline uint16_t i64_bf16(int64_t x) { return em_f32_to_bf16((float)x); }
static inline uint16_t u8_bf16(uint8_t x) { return x ? 0x3f80 : 0; } /* 1.0 or 0.0 */
static inline int64_t u8_i64(uint8_t x) { return x != 0; }
static inline float u8_f32(uint8_t x) { return x != 0; }
static inline double u8_f64(uint8_t x) { return x != 0; }

/* One cast function per (source, destination) pair. */
#define TS double
#define TD float
#define CONV TO_F32
#define NAME cast_f64_f32
#include "cpu_cast_tmpl.h"

#define TS int64_t
#define TD float
#define CONV TO_F32
#define NAME cast_i64_f32
#include "cpu_cast_tmpl.h"

#define TS uint8_t
#define TD float
#define CONV u8_f32
#define NAME cast_bool_f32
#include "cpu_cast_tmpl.h"

#define TS uint16_t
#define TD float
#define CONV bf16_f32
#define NAME cast_bf16_f32
#include "cpu_cast_tmpl.h"

#define TS float
#define TD double
#define CONV TO_F64
#define NAME cast_f32_f64
#include "cpu_cast_tmpl.h"

#define TS int64_t
#define TD double
#define CONV TO_F64
#define NAME cast_i64_f64
#include "cpu_cast_tmpl.h"

#define TS uint8_t
#define TD double
#define CONV u8_f64
#define NAME cast_bool_f64
#include "cpu_cast_tmpl.h"

#define TS uint16_t
#define TD double
#define CONV bf16_f64
#define NAME cast_bf16_f64
#include "cpu_cast_tmpl.h"

#define TS float
#define TD int64_t
#define CONV f32_to_i64
#define NAME cast_f32_i64
#include "cpu_cast_tmpl.h"

#define TS double
#define TD int64_t
#define CONV cpu_f64_to_i64
#define NAME cast_f64_i64
#include "cpu_cast_tmpl.h"

#define TS uint8_t
#define TD int64_t
#define CONV u8_i64
#define NAME cast_bool_i64
#include "cpu_cast_tmpl.h"

#define TS uint16_t
#define TD int64_t
#define CONV bf16_i64
#define NAME cast_bf16_i64
#include "cpu_cast_tmpl.h"

#define TS float
#define TD uint8_t
#define CONV TO_BOOL
#define NAME cast_f32_bool
#include "cpu_cast_tmpl.h"

#define TS double
#define TD uint8_t
#define CONV TO_BOOL
#define NAME cast_f64_bool
#include "cpu_cast_tmpl.h"

#define TS int64_t
#define TD uint8_t
#define CONV TO_BOOL
#define NAME cast_i64_bool
#include "cpu_cast_tmpl.h"

#define TS uint16_t
#define TD uint8_t
#define CONV bf16_bool
#define NAME cast_bf16_bool
#include "cpu_cast_tmpl.h"

#define TS float
#define TD uint16_t
#define CONV em_f32_to_bf16
#define NAME cast_f32_bf16
#include "cpu_cast_tmpl.h"

#define TS double
#define TD uint16_t
#define CONV f64_bf16
#define NAME cast_f64_bf16
#include "cpu_cast_tmpl.h"

#define TS int64_t
#define TD uint16_t
#define CONV i64_bf16
#define NAME cast_i64_bf16
#include "cpu_cast_tmpl.h"

#define TS uint8_t
#define TD uint16_t
#define CONV u8_bf16
#define NAME cast_bool_bf16
#include "cpu_cast_tmpl.h"

/* Runs that move elements, by element size: move_run_N, fill_loop_N,
** where_loop_N. */
typedef struct fill_ctx { uint64_t bits; } fill_ctx;

#define T uint8_t
#define SUF 8
#include "cpu_bysize_tmpl.h"
#undef T
#undef SUF

#define T uint16_t
#define SUF 16
#include "cpu_bysize_tmpl.h"
#undef T
#undef SUF

#define T uint32_t
#define SUF 32
#include "cpu_bysize_tmpl.h"
#undef T
#undef SUF

#define T uint64_t
#define SUF 64
#include "cpu_bysize_tmpl.h"
#undef T
#undef SUF

static void copy_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const copy_ctx *c = vctx;
  switch (c->dst) {
    case EM_F32:
      switch (c->src) {
        case EM_F32: move_run_32(p, s, n); return;
        case EM_F64: cast_f64_f32(p, s, n); return;
        case EM_I64: cast_i64_f32(p, s, n); return;
        case EM_BOOL: cast_bool_f32(p, s, n); return;
        case EM_BF16: cast_bf16_f32(p, s, n); return;
        default: return;
      }
    case EM_F64:
      switch (c->src) {
        case EM_F32: cast_f32_f64(p, s, n); return;
        case EM_F64: move_run_64(p, s, n); return;
        case EM_I64: cast_i64_f64(p, s, n); return;
        case EM_BOOL: cast_bool_f64(p, s, n); return;
        case EM_BF16: cast_bf16_f64(p, s, n); return;
        default: return;
      }
    case EM_I64:
      switch (c->src) {
        case EM_F32: cast_f32_i64(p, s, n); return;
        case EM_F64: cast_f64_i64(p, s, n); return;
        case EM_I64: move_run_64(p, s, n); return;
        case EM_BOOL: cast_bool_i64(p, s, n); return;
        case EM_BF16: cast_bf16_i64(p, s, n); return;
        default: return;
      }
    case EM_BOOL:
      switch (c->src) {
        case EM_F32: cast_f32_bool(p, s, n); return;
        case EM_F64: cast_f64_bool(p, s, n); return;
        case EM_I64: cast_i64_bool(p, s, n); return;
        case EM_BOOL: move_run_8(p, s, n); return;
        case EM_BF16: cast_bf16_bool(p, s, n); return;
        default: return;
      }
    case EM_BF16:
      switch (c->src) {
        case EM_F32:
          if (s[0] == 2 && s[1] == 4) cpu_bf16_round((uint16_t *)p[0], (const float *)p[1], n);
          else cast_f32_bf16(p, s, n);
          return;
        case EM_F64: cast_f64_bf16(p, s, n); return;
        case EM_I64: cast_i64_bf16(p, s, n); return;
        case EM_BOOL: cast_bool_bf16(p, s, n); return;
        case EM_BF16: move_run_16(p, s, n); return;
        default: return;
      }
    default: return;
  }
}

em_status cpu_copy(int device, const em_kview *dst, const em_kview *src) {
  (void)device;
  cpu_iter it;
  const em_kview *v[2] = {dst, src};
  em_status s = cpu_iter_init(&it, "copy", 2, v);
  if (s) return s;
  copy_ctx c = {src->dtype, dst->dtype};
  cpu_iter_run(&it, copy_loop, &c);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* fill                                                                */
/* ------------------------------------------------------------------ */

em_status cpu_fill(int device, const em_kview *dst, double value) {
  (void)device;
  fill_ctx c = {0};
  cpu_loop_fn fn;
  switch (dst->dtype) {
    case EM_F32: { float f = (float)value; memcpy(&c.bits, &f, 4); fn = fill_loop_32; break; }
    case EM_F64: memcpy(&c.bits, &value, 8); fn = fill_loop_64; break;
    case EM_I64: {
      if (value != value || value >= 9223372036854775808.0 || value < -9223372036854775808.0)
        return em_error(EM_ERR_ARG, "cpu fill: value %g does not fit in int64", value);
      int64_t i = (int64_t)value;
      memcpy(&c.bits, &i, 8);
      fn = fill_loop_64;
      break;
    }
    case EM_BOOL: { uint8_t b = value != 0; memcpy(&c.bits, &b, 1); fn = fill_loop_8; break; }
    case EM_BF16: {
      uint16_t h = em_f32_to_bf16((float)value);
      memcpy(&c.bits, &h, 2);
      fn = fill_loop_16;
      break;
    }
    default: return cpu_bad_dtype("fill", dst->dtype, "float32, float64, int64, bool, bfloat16");
  }
  cpu_iter it;
  const em_kview *v[1] = {dst};
  em_status s = cpu_iter_init(&it, "fill", 1, v);
  if (s) return s;
  cpu_iter_run(&it, fn, &c);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* binary                                                              */
/* ------------------------------------------------------------------ */

typedef struct binary_ctx {
  em_binary_op op;
  int failed; /* int64 division (div, fmod) by zero or negative power, set atomically */
} binary_ctx;

/* C's fmod, exact (libm's bits), without libm's loop over the quotient's
** bits where the quotient is below 2^52 (the common case): there
** trunc(a / b) is at most one off,
** fma(-q, |b|, a) is a - q |b| rounded once, exact when q is right (the
** result is fmod's, representable), and a wrong q shows as a result of
** the wrong sign or past |b|, so one more fma with q corrected gives it. */
static inline double cpu_fmod(double a, double b) {
  const double y = fabs(b), q = trunc(a / y);
  if (!(fabs(q) < 0x1p52) || !(y < INFINITY)) return fmod(a, b);
  const double s = copysign(1.0, a); /* a select, not a branch: signs are random */
  double r = fma(-q, y, a);
  if (r != 0 && (r < 0) != (a < 0)) r = fma(-(q - s), y, a);
  else if (fabs(r) >= y) r = fma(-(q + s), y, a);
  return r == 0 ? copysign(0.0, a) : r;
}

/* float32 (and bfloat16, computed in float) through it: fmod of two floats
** is a float, so the double result is exact again once rounded. */
static inline float cpu_fmodf(float a, float b) { return (float)cpu_fmod(a, b); }

#define LD(x) (x)
#define ST(x) (x)
#define T float
#define ACC float
#define SUF f32
#define FLOAT_POW powf
#define FLOAT_FMOD cpu_fmodf
#include "cpu_binary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef FLOAT_POW
#undef FLOAT_FMOD

#define T double
#define ACC double
#define SUF f64
#define FLOAT_POW pow
#define FLOAT_FMOD cpu_fmod
#include "cpu_binary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef FLOAT_POW
#undef FLOAT_FMOD
#undef LD
#undef ST

/* bfloat16 computes in float: one rounding per result */
#define T uint16_t
#define ACC float
#define LD(x) em_bf16_to_f32(x)
#define ST(x) em_f32_to_bf16(x)
#define SUF bf16
#define FLOAT_POW powf
#define FLOAT_FMOD cpu_fmodf
#include "cpu_binary_tmpl.h"
#undef T
#undef ACC
#undef SUF
#undef LD
#undef ST
#undef FLOAT_POW
#undef FLOAT_FMOD

#define T int64_t
#define SUF i64
#include "cpu_binary_tmpl.h"
#undef T
#undef SUF

#define T uint8_t
#define SUF u8
#include "cpu_binary_tmpl.h"
#undef T
#undef SUF

/* int64 arithmetic wraps (through uint64) instead of overflowing, which
** would be undefined behaviour. Division floors, as Lua's // and Python's
** //; a zero divisor marks the run failed and gives 0. */
static inline int64_t i64_add(int64_t x, int64_t y, binary_ctx *c) {
  (void)c;
  return (int64_t)((uint64_t)x + (uint64_t)y);
}
static inline int64_t i64_sub(int64_t x, int64_t y, binary_ctx *c) {
  (void)c;
  return (int64_t)((uint64_t)x - (uint64_t)y);
}
static inline int64_t i64_mul(int64_t x, int64_t y, binary_ctx *c) {
  (void)c;
  return (int64_t)((uint64_t)x * (uint64_t)y);
}

static inline int64_t i64_floordiv(int64_t x, int64_t y, binary_ctx *c) {
  if (y == 0) {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
    return 0;
  }
  if (y == -1) return (int64_t)(0u - (uint64_t)x); /* INT64_MIN / -1 traps */
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
}

/* C's %: the sign of x (torch.fmod of int64); INT64_MIN % -1 is 0 (the
** quotient overflows, so % traps on x86); a zero divisor fails the run. */
static inline int64_t i64_fmod(int64_t x, int64_t y, binary_ctx *c) {
  if (y == 0) {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
    return 0;
  }
  return y == -1 ? 0 : x % y;
}

static inline int64_t i64_pow(int64_t x, int64_t y, binary_ctx *c) {
  if (y < 0) {
    __atomic_store_n(&c->failed, 2, __ATOMIC_RELAXED);
    return 0;
  }
  uint64_t r = 1, b = (uint64_t)x;
  while (y) {
    if (y & 1) r *= b;
    b *= b;
    y >>= 1;
  }
  return (int64_t)r;
}

static inline int64_t i64_max(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x > y ? x : y; }
static inline int64_t i64_min(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x < y ? x : y; }
static inline uint8_t i64_eq(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x == y; }
static inline uint8_t i64_ne(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x != y; }
static inline uint8_t i64_lt(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x < y; }
static inline uint8_t i64_le(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x <= y; }
static inline uint8_t i64_gt(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x > y; }
static inline uint8_t i64_ge(int64_t x, int64_t y, binary_ctx *c) { (void)c; return x >= y; }

static void binary_i64(char **p, const int64_t *s, int64_t n, void *vctx) {
  binary_ctx *c = vctx;
  switch (c->op) {
    case EM_ADD: bin_run_i64(p, s, n, i64_add, c); return;
    case EM_SUB: bin_run_i64(p, s, n, i64_sub, c); return;
    case EM_MUL: bin_run_i64(p, s, n, i64_mul, c); return;
    case EM_DIV: bin_run_i64(p, s, n, i64_floordiv, c); return;
    case EM_POW: bin_run_i64(p, s, n, i64_pow, c); return;
    case EM_MAXIMUM: bin_run_i64(p, s, n, i64_max, c); return;
    case EM_MINIMUM: bin_run_i64(p, s, n, i64_min, c); return;
    case EM_FMOD: bin_run_i64(p, s, n, i64_fmod, c); return;
    case EM_EQ: cmp_run_i64(p, s, n, i64_eq, c); return;
    case EM_NE: cmp_run_i64(p, s, n, i64_ne, c); return;
    case EM_LT: cmp_run_i64(p, s, n, i64_lt, c); return;
    case EM_LE: cmp_run_i64(p, s, n, i64_le, c); return;
    case EM_GT: cmp_run_i64(p, s, n, i64_gt, c); return;
    case EM_GE: cmp_run_i64(p, s, n, i64_ge, c); return;
    default: return;
  }
}

/* bool operands are read as "nonzero is true". */
static inline uint8_t b_eq(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) == (y != 0); }
static inline uint8_t b_ne(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) != (y != 0); }
static inline uint8_t b_lt(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) < (y != 0); }
static inline uint8_t b_le(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) <= (y != 0); }
static inline uint8_t b_gt(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) > (y != 0); }
static inline uint8_t b_ge(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) >= (y != 0); }
static inline uint8_t b_and(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) & (y != 0); }
static inline uint8_t b_or(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) | (y != 0); }
static inline uint8_t b_xor(uint8_t x, uint8_t y, binary_ctx *c) { (void)c; return (x != 0) ^ (y != 0); }

static void binary_bool(char **p, const int64_t *s, int64_t n, void *vctx) {
  binary_ctx *c = vctx;
  switch (c->op) {
    case EM_EQ: bin_run_u8(p, s, n, b_eq, c); return;
    case EM_NE: bin_run_u8(p, s, n, b_ne, c); return;
    case EM_LT: bin_run_u8(p, s, n, b_lt, c); return;
    case EM_LE: bin_run_u8(p, s, n, b_le, c); return;
    case EM_GT: bin_run_u8(p, s, n, b_gt, c); return;
    case EM_GE: bin_run_u8(p, s, n, b_ge, c); return;
    case EM_AND: bin_run_u8(p, s, n, b_and, c); return;
    case EM_OR: bin_run_u8(p, s, n, b_or, c); return;
    case EM_XOR: bin_run_u8(p, s, n, b_xor, c); return;
    case EM_MAXIMUM: bin_run_u8(p, s, n, b_or, c); return;
    case EM_MINIMUM: bin_run_u8(p, s, n, b_and, c); return;
    default: return;
  }
}

static int is_comparison(em_binary_op op) { return op >= EM_EQ && op <= EM_GE; }
static int is_logical(em_binary_op op) { return op >= EM_AND && op <= EM_XOR; }

/* float32 add and sub with one bfloat16 operand (em_backend's
** binary_mixed_bf16): the bfloat16 values widened as they are read, which
** is exact, then float32's add or sub, so the bits of a cast to float32
** followed by binary_f32, without the cast's pass and copy. */
typedef struct mixed_ctx {
  bool sub, a_bf16; /* a - b; which operand is bfloat16 */
} mixed_ctx;

CPU_VECTOR_CLONES_512 static void mixed_run(float *restrict o, const float *restrict x,
                                            const uint16_t *restrict h, int64_t n, bool sub,
                                            bool h_first) {
  if (!sub)
    for (int64_t i = 0; i < n; i++) o[i] = x[i] + em_bf16_to_f32(h[i]);
  else if (h_first)
    for (int64_t i = 0; i < n; i++) o[i] = em_bf16_to_f32(h[i]) - x[i];
  else
    for (int64_t i = 0; i < n; i++) o[i] = x[i] - em_bf16_to_f32(h[i]);
}

static void binary_mixed(char **p, const int64_t *s, int64_t n, void *vctx) {
  const mixed_ctx *c = vctx;
  const int xi = c->a_bf16 ? 2 : 1, hi = c->a_bf16 ? 1 : 2;
  if (s[0] == 4 && s[xi] == 4 && s[hi] == 2) {
    mixed_run((float *)p[0], (const float *)p[xi], (const uint16_t *)p[hi], n, c->sub, c->a_bf16);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    const float x = *(const float *)(p[xi] + i * s[xi]);
    const float h = em_bf16_to_f32(*(const uint16_t *)(p[hi] + i * s[hi]));
    *(float *)(p[0] + i * s[0]) = !c->sub ? x + h : c->a_bf16 ? h - x : x - h;
  }
}

static bool is_mixed_bf16(em_binary_op op, const em_kview *out, const em_kview *a,
                          const em_kview *b) {
  return (op == EM_ADD || op == EM_SUB) && out->dtype == EM_F32 &&
         ((a->dtype == EM_F32 && b->dtype == EM_BF16) || (a->dtype == EM_BF16 && b->dtype == EM_F32));
}

em_status cpu_binary(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                     const em_kview *b) {
  (void)device;
  if ((unsigned)op >= EM_NBINARY)
    return em_error(EM_ERR_ARG, "cpu binary: unknown op %d", (int)op);
  const char *name = em_kernel_binary_name(op);
  if (is_mixed_bf16(op, out, a, b)) {
    cpu_iter it;
    const em_kview *v[3] = {out, a, b};
    em_status s = cpu_iter_init(&it, name, 3, v);
    if (s) return s;
    mixed_ctx c = {op == EM_SUB, a->dtype == EM_BF16};
    cpu_iter_run(&it, binary_mixed, &c);
    return EM_OK;
  }
  if (a->dtype != b->dtype)
    return em_error(EM_ERR_DTYPE, "cpu binary %s: operands are %s and %s, expected one dtype",
                    name, cpu_dtype_name(a->dtype), cpu_dtype_name(b->dtype));
  em_dtype dt = a->dtype;
  em_dtype want = (is_comparison(op) || is_logical(op)) ? EM_BOOL : dt;
  if (out->dtype != want)
    return em_error(EM_ERR_DTYPE, "cpu binary %s: output is %s, expected %s for %s operands",
                    name, cpu_dtype_name(out->dtype), cpu_dtype_name(want), cpu_dtype_name(dt));
  cpu_loop_fn fn = NULL;
  switch (dt) {
    case EM_F32: fn = is_logical(op) ? NULL : binary_f32; break;
    case EM_F64: fn = is_logical(op) ? NULL : binary_f64; break;
    case EM_BF16: fn = is_logical(op) ? NULL : binary_bf16; break;
    case EM_I64: fn = is_logical(op) ? NULL : binary_i64; break;
    case EM_BOOL:
      fn = (is_logical(op) || is_comparison(op) || op == EM_MAXIMUM || op == EM_MINIMUM)
               ? binary_bool : NULL;
      break;
    default: break;
  }
  if (!fn) {
    const char *supported = is_logical(op) ? "bool"
                          : is_comparison(op) || op == EM_MAXIMUM || op == EM_MINIMUM
                              ? "float32, float64, bfloat16, int64, bool"
                              : "float32, float64, bfloat16, int64";
    char kernel[32];
    snprintf(kernel, sizeof kernel, "binary %s", name);
    return cpu_bad_dtype(kernel, dt, supported);
  }
  cpu_iter it;
  const em_kview *v[3] = {out, a, b};
  em_status s = cpu_iter_init(&it, name, 3, v);
  if (s) return s;
  binary_ctx c = {op, 0};
  cpu_iter_run(&it, fn, &c);
  if (c.failed == 1) return em_error(EM_ERR_ARG, "cpu binary %s: integer division by zero", name);
  if (c.failed == 2)
    return em_error(EM_ERR_ARG, "cpu binary pow: int64 raised to a negative power");
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* where                                                               */
/* ------------------------------------------------------------------ */

/* out = cond ? a : b. Only the element size matters, so every dtype works. */
em_status cpu_where(int device, const em_kview *out, const em_kview *cond, const em_kview *a,
                    const em_kview *b) {
  (void)device;
  if (cond->dtype != EM_BOOL)
    return em_error(EM_ERR_DTYPE, "cpu where: condition is %s, expected bool",
                    cpu_dtype_name(cond->dtype));
  if (a->dtype != b->dtype || out->dtype != a->dtype)
    return em_error(EM_ERR_DTYPE, "cpu where: out, a and b are %s, %s and %s, expected one dtype",
                    cpu_dtype_name(out->dtype), cpu_dtype_name(a->dtype), cpu_dtype_name(b->dtype));
  cpu_loop_fn fn;
  switch (cpu_dtype_size(out->dtype)) {
    case 1: fn = where_loop_8; break;
    case 2: fn = where_loop_16; break;
    case 4: fn = where_loop_32; break;
    case 8: fn = where_loop_64; break;
    default: return cpu_bad_dtype("where", out->dtype, "float32, float64, int64, bool, bfloat16");
  }
  cpu_iter it;
  const em_kview *v[4] = {out, cond, a, b};
  em_status s = cpu_iter_init(&it, "where", 4, v);
  if (s) return s;
  cpu_iter_run(&it, fn, NULL);
  return EM_OK;
}
