/*
** cpu_expr_ops.h -- what each op of a traced program (ember_expr.h)
** computes on the CPU, for float32 and float64 alike, as one expression
** in its operands a_, b_, c_ (type T, the kernel's compute type).
**
** Two evaluators expand this one list: the interpreter
** (cpu_attention_expr_tmpl.h) into its vector loops, and the compiled
** programs (cpu_expr_jit.c) as text -- CPU_XOPS_TEXT stringifies it into
** the generated C, which includes this header for the functions below.
** So the interpreter and the compiled code cannot disagree on a rule.
** The integer/selection rules themselves (floor division, min, where...)
** are ember_expr.h's EM_XRULE_*, shared with the core and CUDA.
**
** Included after <tgmath.h>: fabs, floor, log, pow and sqrt take the
** operand's type.
*/
#ifndef EMBER_CPU_EXPR_OPS_H
#define EMBER_CPU_EXPR_OPS_H

#include "cpu_vmath.h"
#include "ember_expr.h"

/* float32: the vectorising exp, log and tanh of cpu_vmath.h (a libm call per element
** would stop the loops vectorising); float64: libm, for gradchecks. exp is
** the whole-range one (cpu_exp_any_f32), as ember.exp: a traced exp that
** overflows gives +inf, which the kernel reports, not a saturated value. */
static inline double cpu_xexp_f64(double x) { return exp(x); }
static inline double cpu_xtanh_f64(double x) { return tanh(x); }
static inline double cpu_xlog_f64(double x) { return log(x); }
static inline float cpu_xtanh_f32(float x) { return cpu_tanh_f32(x); }
#define cpu_xexp(x) _Generic((x), float: cpu_exp_any_f32, default: cpu_xexp_f64)(x)
#define cpu_xlog(x) _Generic((x), float: cpu_log_f32, default: cpu_xlog_f64)(x)
#define cpu_xtanh(x) _Generic((x), float: cpu_xtanh_f32, default: cpu_xtanh_f64)(x)

/* X(OP, arity, expression) for every op with operands (not CONST, S, B,
** H, Q, K or LOAD, which read the row's inputs). Comparisons give 0/1. */
#define CPU_XOPS(X)                                                                            \
  X(ADD, 2, a_ + b_) X(SUB, 2, a_ - b_) X(MUL, 2, a_ * b_) X(DIV, 2, a_ / b_)                  \
  X(IDIV, 2, EM_XRULE_IDIV(a_, b_)) X(MOD, 2, EM_XRULE_MOD(a_, b_)) X(POW, 2, pow(a_, b_))     \
  X(MIN, 2, EM_XRULE_MIN(a_, b_)) X(MAX, 2, EM_XRULE_MAX(a_, b_)) X(LT, 2, (T)(a_ < b_))       \
  X(LE, 2, (T)(a_ <= b_)) X(EQ, 2, (T)(a_ == b_)) X(NE, 2, (T)(a_ != b_))                      \
  X(AND, 2, (T)(a_ != 0 && b_ != 0)) X(OR, 2, (T)(a_ != 0 || b_ != 0))                         \
  X(NEG, 1, -a_) X(ABS, 1, fabs(a_)) X(FLOOR, 1, floor(a_)) X(CEIL, 1, ceil(a_))               \
  X(EXP, 1, cpu_xexp(a_)) X(LOG, 1, cpu_xlog(a_)) X(TANH, 1, cpu_xtanh(a_)) X(SQRT, 1, sqrt(a_))    \
  X(SIGMOID, 1, 1 / (1 + cpu_xexp(-a_))) X(NOT, 1, (T)(a_ == 0))                               \
  X(SIGN, 1, (T)EM_XRULE_SIGN(a_)) X(WHERE, 3, EM_XRULE_WHERE(a_, b_, c_))

#endif
