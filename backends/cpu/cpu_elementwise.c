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

/* A run of n elements; CONV turns a TS into a TD. */
#define CAST_RUN(TS, TD, CONV)                                                  \
  do {                                                                          \
    if (s[0] == (int64_t)sizeof(TD) && s[1] == (int64_t)sizeof(TS)) {           \
      TD *d_ = (TD *)p[0];                                                      \
      const TS *s_ = (const TS *)p[1];                                          \
      for (int64_t i = 0; i < n; i++) d_[i] = CONV(s_[i]);                      \
    } else {                                                                    \
      char *d_ = p[0];                                                          \
      const char *s_ = p[1];                                                    \
      for (int64_t i = 0; i < n; i++, d_ += s[0], s_ += s[1])                   \
        *(TD *)d_ = CONV(*(const TS *)s_);                                      \
    }                                                                           \
  } while (0)

/* The same dtype: a move of element-sized words. */
#define MOVE_RUN(T)                                                             \
  do {                                                                          \
    if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {             \
      memmove(p[0], p[1], (size_t)n * sizeof(T));                               \
    } else {                                                                    \
      char *d_ = p[0];                                                          \
      const char *s_ = p[1];                                                    \
      for (int64_t i = 0; i < n; i++, d_ += s[0], s_ += s[1])                   \
        *(T *)d_ = *(const T *)s_;                                              \
    }                                                                           \
  } while (0)

static inline int64_t f32_to_i64(float x) { return cpu_f64_to_i64((double)x); }
static inline float bf16_f32(uint16_t h) { return cpu_bf16_to_f32(h); }
static inline double bf16_f64(uint16_t h) { return (double)cpu_bf16_to_f32(h); }
static inline int64_t bf16_i64(uint16_t h) { return cpu_f64_to_i64(cpu_bf16_to_f32(h)); }
static inline uint8_t bf16_bool(uint16_t h) { return (uint8_t)(cpu_bf16_to_f32(h) != 0.0f); }
static inline uint16_t f64_bf16(double x) { return cpu_f32_to_bf16((float)x); }
static inline uint16_t i64_bf16(int64_t x) { return cpu_f32_to_bf16((float)x); }
static inline uint16_t u8_bf16(uint8_t x) { return x ? 0x3f80 : 0; } /* 1.0 or 0.0 */
static inline int64_t u8_i64(uint8_t x) { return x != 0; }
static inline float u8_f32(uint8_t x) { return x != 0; }
static inline double u8_f64(uint8_t x) { return x != 0; }

static void copy_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
  const copy_ctx *c = vctx;
  switch (c->dst) {
    case EM_F32:
      switch (c->src) {
        case EM_F32: MOVE_RUN(float); return;
        case EM_F64: CAST_RUN(double, float, TO_F32); return;
        case EM_I64: CAST_RUN(int64_t, float, TO_F32); return;
        case EM_BOOL: CAST_RUN(uint8_t, float, u8_f32); return;
        case EM_BF16: CAST_RUN(uint16_t, float, bf16_f32); return;
        default: return;
      }
    case EM_F64:
      switch (c->src) {
        case EM_F32: CAST_RUN(float, double, TO_F64); return;
        case EM_F64: MOVE_RUN(double); return;
        case EM_I64: CAST_RUN(int64_t, double, TO_F64); return;
        case EM_BOOL: CAST_RUN(uint8_t, double, u8_f64); return;
        case EM_BF16: CAST_RUN(uint16_t, double, bf16_f64); return;
        default: return;
      }
    case EM_I64:
      switch (c->src) {
        case EM_F32: CAST_RUN(float, int64_t, f32_to_i64); return;
        case EM_F64: CAST_RUN(double, int64_t, cpu_f64_to_i64); return;
        case EM_I64: MOVE_RUN(int64_t); return;
        case EM_BOOL: CAST_RUN(uint8_t, int64_t, u8_i64); return;
        case EM_BF16: CAST_RUN(uint16_t, int64_t, bf16_i64); return;
        default: return;
      }
    case EM_BOOL:
      switch (c->src) {
        case EM_F32: CAST_RUN(float, uint8_t, TO_BOOL); return;
        case EM_F64: CAST_RUN(double, uint8_t, TO_BOOL); return;
        case EM_I64: CAST_RUN(int64_t, uint8_t, TO_BOOL); return;
        case EM_BOOL: MOVE_RUN(uint8_t); return;
        case EM_BF16: CAST_RUN(uint16_t, uint8_t, bf16_bool); return;
        default: return;
      }
    case EM_BF16:
      switch (c->src) {
        case EM_F32: CAST_RUN(float, uint16_t, cpu_f32_to_bf16); return;
        case EM_F64: CAST_RUN(double, uint16_t, f64_bf16); return;
        case EM_I64: CAST_RUN(int64_t, uint16_t, i64_bf16); return;
        case EM_BOOL: CAST_RUN(uint8_t, uint16_t, u8_bf16); return;
        case EM_BF16: MOVE_RUN(uint16_t); return;
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

/* Fill only needs the bit pattern of one element, so it works by size. */
typedef struct fill_ctx { uint64_t bits; } fill_ctx;

#define FILL_RUN(T)                                                             \
  do {                                                                          \
    T v_;                                                                       \
    memcpy(&v_, &c->bits, sizeof v_);                                           \
    if (s[0] == (int64_t)sizeof(T)) {                                           \
      T *d_ = (T *)p[0];                                                        \
      for (int64_t i = 0; i < n; i++) d_[i] = v_;                               \
    } else {                                                                    \
      char *d_ = p[0];                                                          \
      for (int64_t i = 0; i < n; i++, d_ += s[0]) *(T *)d_ = v_;                \
    }                                                                           \
  } while (0)

static void fill_loop1(char **p, const int64_t *s, int64_t n, void *vctx) {
  const fill_ctx *c = vctx;
  FILL_RUN(uint8_t);
}
static void fill_loop2(char **p, const int64_t *s, int64_t n, void *vctx) {
  const fill_ctx *c = vctx;
  FILL_RUN(uint16_t);
}
static void fill_loop4(char **p, const int64_t *s, int64_t n, void *vctx) {
  const fill_ctx *c = vctx;
  FILL_RUN(uint32_t);
}
static void fill_loop8(char **p, const int64_t *s, int64_t n, void *vctx) {
  const fill_ctx *c = vctx;
  FILL_RUN(uint64_t);
}

em_status cpu_fill(int device, const em_kview *dst, double value) {
  (void)device;
  fill_ctx c = {0};
  cpu_loop_fn fn;
  switch (dst->dtype) {
    case EM_F32: { float f = (float)value; memcpy(&c.bits, &f, 4); fn = fill_loop4; break; }
    case EM_F64: memcpy(&c.bits, &value, 8); fn = fill_loop8; break;
    case EM_I64: {
      if (value != value || value >= 9223372036854775808.0 || value < -9223372036854775808.0)
        return em_error(EM_ERR_ARG, "cpu fill: value %g does not fit in int64", value);
      int64_t i = (int64_t)value;
      memcpy(&c.bits, &i, 8);
      fn = fill_loop8;
      break;
    }
    case EM_BOOL: { uint8_t b = value != 0; memcpy(&c.bits, &b, 1); fn = fill_loop1; break; }
    case EM_BF16: {
      uint16_t h = cpu_f32_to_bf16((float)value);
      memcpy(&c.bits, &h, 2);
      fn = fill_loop2;
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
  int failed; /* int64 division by zero or negative power, set atomically */
} binary_ctx;

/* out[i] = EXPR(x, y) over a run; x from a, y from b. The contiguous and
** one-side-broadcast cases get plain loops the compiler can vectorise. */
#define BIN_RUN(TI, TO, EXPR)                                                    \
  do {                                                                           \
    TO *o_ = (TO *)p[0];                                                         \
    const int64_t ei_ = (int64_t)sizeof(TI);                                     \
    if (s[0] == (int64_t)sizeof(TO) && s[1] == ei_ && s[2] == ei_) {             \
      const TI *A_ = (const TI *)p[1], *B_ = (const TI *)p[2];                   \
      for (int64_t i = 0; i < n; i++) { TI x = A_[i], y = B_[i]; o_[i] = (EXPR); } \
    } else if (s[0] == (int64_t)sizeof(TO) && s[1] == ei_ && s[2] == 0) {        \
      const TI *A_ = (const TI *)p[1];                                           \
      const TI y = *(const TI *)p[2];                                            \
      for (int64_t i = 0; i < n; i++) { TI x = A_[i]; o_[i] = (EXPR); }          \
    } else if (s[0] == (int64_t)sizeof(TO) && s[1] == 0 && s[2] == ei_) {        \
      const TI x = *(const TI *)p[1];                                            \
      const TI *B_ = (const TI *)p[2];                                           \
      for (int64_t i = 0; i < n; i++) { TI y = B_[i]; o_[i] = (EXPR); }          \
    } else {                                                                     \
      char *po_ = p[0];                                                          \
      const char *pa_ = p[1], *pb_ = p[2];                                       \
      for (int64_t i = 0; i < n; i++, po_ += s[0], pa_ += s[1], pb_ += s[2]) {   \
        TI x = *(const TI *)pa_, y = *(const TI *)pb_;                           \
        *(TO *)po_ = (EXPR);                                                     \
      }                                                                          \
    }                                                                            \
  } while (0)

/* NaN-propagating maximum and minimum, as torch.maximum/minimum. */
#define FMAX(x, y) ((x) != (x) ? (x) : ((y) != (y) ? (y) : ((x) > (y) ? (x) : (y))))
#define FMIN(x, y) ((x) != (x) ? (x) : ((y) != (y) ? (y) : ((x) < (y) ? (x) : (y))))

#define FLOAT_BINARY(T, POW)                                                     \
  switch (c->op) {                                                               \
    case EM_ADD: BIN_RUN(T, T, x + y); return;                                   \
    case EM_SUB: BIN_RUN(T, T, x - y); return;                                   \
    case EM_MUL: BIN_RUN(T, T, x * y); return;                                   \
    case EM_DIV: BIN_RUN(T, T, x / y); return;                                   \
    case EM_POW: BIN_RUN(T, T, POW(x, y)); return;                               \
    case EM_MAXIMUM: BIN_RUN(T, T, FMAX(x, y)); return;                          \
    case EM_MINIMUM: BIN_RUN(T, T, FMIN(x, y)); return;                          \
    case EM_EQ: BIN_RUN(T, uint8_t, x == y); return;                             \
    case EM_NE: BIN_RUN(T, uint8_t, x != y); return;                             \
    case EM_LT: BIN_RUN(T, uint8_t, x < y); return;                              \
    case EM_LE: BIN_RUN(T, uint8_t, x <= y); return;                             \
    case EM_GT: BIN_RUN(T, uint8_t, x > y); return;                              \
    case EM_GE: BIN_RUN(T, uint8_t, x >= y); return;                             \
    default: return;                                                             \
  }

CPU_VECTOR_CLONES static void binary_f32(char **p, const int64_t *s, int64_t n, void *vctx) {
  const binary_ctx *c = vctx;
  FLOAT_BINARY(float, powf)
}

CPU_VECTOR_CLONES static void binary_f64(char **p, const int64_t *s, int64_t n, void *vctx) {
  const binary_ctx *c = vctx;
  FLOAT_BINARY(double, pow)
}

/* int64 arithmetic wraps (through uint64) instead of overflowing, which
** would be undefined behaviour. Division floors, as Lua's // and Python's
** //; a zero divisor marks the run failed and gives 0. */
#define WRAP(e) ((int64_t)(e))
static inline int64_t i64_floordiv(int64_t x, int64_t y, binary_ctx *c) {
  if (y == 0) {
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
    return 0;
  }
  if (y == -1) return WRAP(0u - (uint64_t)x); /* INT64_MIN / -1 traps */
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) q--;
  return q;
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
  return WRAP(r);
}

static void binary_i64(char **p, const int64_t *s, int64_t n, void *vctx) {
  binary_ctx *c = vctx;
  switch (c->op) {
    case EM_ADD: BIN_RUN(int64_t, int64_t, WRAP((uint64_t)x + (uint64_t)y)); return;
    case EM_SUB: BIN_RUN(int64_t, int64_t, WRAP((uint64_t)x - (uint64_t)y)); return;
    case EM_MUL: BIN_RUN(int64_t, int64_t, WRAP((uint64_t)x * (uint64_t)y)); return;
    case EM_DIV: BIN_RUN(int64_t, int64_t, i64_floordiv(x, y, c)); return;
    case EM_POW: BIN_RUN(int64_t, int64_t, i64_pow(x, y, c)); return;
    case EM_MAXIMUM: BIN_RUN(int64_t, int64_t, x > y ? x : y); return;
    case EM_MINIMUM: BIN_RUN(int64_t, int64_t, x < y ? x : y); return;
    case EM_EQ: BIN_RUN(int64_t, uint8_t, x == y); return;
    case EM_NE: BIN_RUN(int64_t, uint8_t, x != y); return;
    case EM_LT: BIN_RUN(int64_t, uint8_t, x < y); return;
    case EM_LE: BIN_RUN(int64_t, uint8_t, x <= y); return;
    case EM_GT: BIN_RUN(int64_t, uint8_t, x > y); return;
    case EM_GE: BIN_RUN(int64_t, uint8_t, x >= y); return;
    default: return;
  }
}

/* bool operands are read as "nonzero is true". */
#define B(v) ((v) != 0)
static void binary_bool(char **p, const int64_t *s, int64_t n, void *vctx) {
  const binary_ctx *c = vctx;
  switch (c->op) {
    case EM_EQ: BIN_RUN(uint8_t, uint8_t, B(x) == B(y)); return;
    case EM_NE: BIN_RUN(uint8_t, uint8_t, B(x) != B(y)); return;
    case EM_LT: BIN_RUN(uint8_t, uint8_t, B(x) < B(y)); return;
    case EM_LE: BIN_RUN(uint8_t, uint8_t, B(x) <= B(y)); return;
    case EM_GT: BIN_RUN(uint8_t, uint8_t, B(x) > B(y)); return;
    case EM_GE: BIN_RUN(uint8_t, uint8_t, B(x) >= B(y)); return;
    case EM_AND: BIN_RUN(uint8_t, uint8_t, B(x) & B(y)); return;
    case EM_OR: BIN_RUN(uint8_t, uint8_t, B(x) | B(y)); return;
    case EM_XOR: BIN_RUN(uint8_t, uint8_t, B(x) ^ B(y)); return;
    case EM_MAXIMUM: BIN_RUN(uint8_t, uint8_t, B(x) | B(y)); return;
    case EM_MINIMUM: BIN_RUN(uint8_t, uint8_t, B(x) & B(y)); return;
    default: return;
  }
}

static const char *const binary_names[EM_NBINARY] = {
  "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
  "and", "or", "xor",
};

static int is_comparison(em_binary_op op) { return op >= EM_EQ && op <= EM_GE; }
static int is_logical(em_binary_op op) { return op >= EM_AND && op <= EM_XOR; }

em_status cpu_binary(int device, em_binary_op op, const em_kview *out, const em_kview *a,
                     const em_kview *b) {
  (void)device;
  if ((unsigned)op >= EM_NBINARY)
    return em_error(EM_ERR_ARG, "cpu binary: unknown op %d", (int)op);
  const char *name = binary_names[op];
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
                              ? "float32, float64, int64, bool"
                              : "float32, float64, int64";
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
  if (c.failed == 1)
    return em_error(EM_ERR_ARG, "cpu binary div: int64 division by zero");
  if (c.failed == 2)
    return em_error(EM_ERR_ARG, "cpu binary pow: int64 raised to a negative power");
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* where                                                               */
/* ------------------------------------------------------------------ */

/* out = cond ? a : b. Only the element size matters, so every dtype works. */
#define WHERE_RUN(T)                                                             \
  do {                                                                           \
    char *po_ = p[0];                                                            \
    const char *pc_ = p[1], *pa_ = p[2], *pb_ = p[3];                            \
    for (int64_t i = 0; i < n; i++, po_ += s[0], pc_ += s[1], pa_ += s[2], pb_ += s[3]) \
      *(T *)po_ = *(const uint8_t *)pc_ ? *(const T *)pa_ : *(const T *)pb_;     \
  } while (0)

static void where1(char **p, const int64_t *s, int64_t n, void *c) { (void)c; WHERE_RUN(uint8_t); }
static void where2(char **p, const int64_t *s, int64_t n, void *c) { (void)c; WHERE_RUN(uint16_t); }
static void where4(char **p, const int64_t *s, int64_t n, void *c) { (void)c; WHERE_RUN(uint32_t); }
static void where8(char **p, const int64_t *s, int64_t n, void *c) { (void)c; WHERE_RUN(uint64_t); }

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
    case 1: fn = where1; break;
    case 2: fn = where2; break;
    case 4: fn = where4; break;
    case 8: fn = where8; break;
    default: return cpu_bad_dtype("where", out->dtype, "float32, float64, int64, bool, bfloat16");
  }
  cpu_iter it;
  const em_kview *v[4] = {out, cond, a, b};
  em_status s = cpu_iter_init(&it, "where", 4, v);
  if (s) return s;
  cpu_iter_run(&it, fn, NULL);
  return EM_OK;
}
