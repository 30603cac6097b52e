/*
** cpu_binary_tmpl.h -- runs of binary ops for one operand type; included
** by cpu_elementwise.c with T and SUF set (and FLOAT_POW and FLOAT_FMOD,
** the pow and fmod of ACC, for float types, which also get their op functions and dispatcher; they
** compute in ACC, with LD(x) / ST(v) taking an element to ACC and back:
** identities for float and double, bfloat16 computes in float).
**
** A run is written once, over an op function; the runs are always inlined
** into the dispatcher, where the op is a constant, so the compiler inlines
** the op too and vectorises each case as a plain loop.
*/

#define FN(name) CPU_CAT(name, SUF)

/* bin_run: ops with a T result; cmp_run: ops with a bool result. */
#define RUN_NAME FN(bin_run)
#define TO T
#include "cpu_binary_run_tmpl.h"
#define RUN_NAME FN(cmp_run)
#define TO uint8_t
#include "cpu_binary_run_tmpl.h"

#ifdef FLOAT_POW

/* binary_ctx is unused by float ops (nothing can fail). */
static inline T FN(op_add)(T x, T y, binary_ctx *c) { (void)c; return ST(LD(x) + LD(y)); }
static inline T FN(op_sub)(T x, T y, binary_ctx *c) { (void)c; return ST(LD(x) - LD(y)); }
static inline T FN(op_mul)(T x, T y, binary_ctx *c) { (void)c; return ST(LD(x) * LD(y)); }
static inline T FN(op_div)(T x, T y, binary_ctx *c) { (void)c; return ST(LD(x) / LD(y)); }
static inline T FN(op_pow)(T x, T y, binary_ctx *c) { (void)c; return ST(FLOAT_POW(LD(x), LD(y))); }
/* C's fmod, exact (torch.fmod): the sign of x; NaN for y = 0 or infinite x */
static inline T FN(op_fmod)(T x, T y, binary_ctx *c) { (void)c; return ST(FLOAT_FMOD(LD(x), LD(y))); }
/* NaN-propagating maximum and minimum, as torch.maximum/minimum. */
static inline T FN(op_max)(T x, T y, binary_ctx *c) {
  (void)c;
  const ACC u = LD(x), v = LD(y);
  return u != u ? x : (v != v ? y : (u > v ? x : y));
}
static inline T FN(op_min)(T x, T y, binary_ctx *c) {
  (void)c;
  const ACC u = LD(x), v = LD(y);
  return u != u ? x : (v != v ? y : (u < v ? x : y));
}
static inline uint8_t FN(op_eq)(T x, T y, binary_ctx *c) { (void)c; return LD(x) == LD(y); }
static inline uint8_t FN(op_ne)(T x, T y, binary_ctx *c) { (void)c; return LD(x) != LD(y); }
static inline uint8_t FN(op_lt)(T x, T y, binary_ctx *c) { (void)c; return LD(x) < LD(y); }
static inline uint8_t FN(op_le)(T x, T y, binary_ctx *c) { (void)c; return LD(x) <= LD(y); }
static inline uint8_t FN(op_gt)(T x, T y, binary_ctx *c) { (void)c; return LD(x) > LD(y); }
static inline uint8_t FN(op_ge)(T x, T y, binary_ctx *c) { (void)c; return LD(x) >= LD(y); }

CPU_VECTOR_CLONES_512 static void FN(binary)(char **p, const int64_t *s, int64_t n, void *vctx) {
  binary_ctx *c = vctx;
  switch (c->op) {
    case EM_ADD: FN(bin_run)(p, s, n, FN(op_add), c); return;
    case EM_SUB: FN(bin_run)(p, s, n, FN(op_sub), c); return;
    case EM_MUL: FN(bin_run)(p, s, n, FN(op_mul), c); return;
    case EM_DIV: FN(bin_run)(p, s, n, FN(op_div), c); return;
    case EM_POW: FN(bin_run)(p, s, n, FN(op_pow), c); return;
    case EM_MAXIMUM: FN(bin_run)(p, s, n, FN(op_max), c); return;
    case EM_MINIMUM: FN(bin_run)(p, s, n, FN(op_min), c); return;
    case EM_FMOD: FN(bin_run)(p, s, n, FN(op_fmod), c); return;
    case EM_EQ: FN(cmp_run)(p, s, n, FN(op_eq), c); return;
    case EM_NE: FN(cmp_run)(p, s, n, FN(op_ne), c); return;
    case EM_LT: FN(cmp_run)(p, s, n, FN(op_lt), c); return;
    case EM_LE: FN(cmp_run)(p, s, n, FN(op_le), c); return;
    case EM_GT: FN(cmp_run)(p, s, n, FN(op_gt), c); return;
    case EM_GE: FN(cmp_run)(p, s, n, FN(op_ge), c); return;
    default: return;
  }
}

#endif

#undef FN
