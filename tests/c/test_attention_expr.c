/*
** test_attention_expr.c -- the core's checks of a traced program and the
** dependencies it derives (core/src/attention_expr.c): which registers
** depend on the key (kvar) and which only through k - q (dvar), the rule
** that lets the CPU kernel compute the latter once per tile diagonal.
*/
#include "ember.h"
#include "ember_expr.h"
#include "tap.h"

#include <stdlib.h>

#define OP(o) {.op = EM_XOP_##o, .cap = -1, .arg = {-1, -1, -1, -1}}
#define OP1(o, a) {.op = EM_XOP_##o, .cap = -1, .arg = {a, -1, -1, -1}}
#define OP2(o, a, b) {.op = EM_XOP_##o, .cap = -1, .arg = {a, b, -1, -1}}
#define LOAD2(c, a, b) {.op = EM_XOP_LOAD, .cap = c, .arg = {a, b, -1, -1}}

enum {
  R_K, R_Q, R_H, R_B, R_S, R_REL, R_DIST, R_TBL, R_SCORE, R_PLUSQ, R_QK, R_KK,
  R_DOCQ, R_DOCK, R_SAME, R_ONE, R_WIN, R_N
};

static void test_dependencies(void) {
  const em_xins ins[R_N] = {
    [R_K] = OP(K), [R_Q] = OP(Q), [R_H] = OP(H), [R_B] = OP(B), [R_S] = OP(S),
    [R_REL] = OP2(SUB, R_K, R_Q),                /* k - q */
    [R_DIST] = OP1(ABS, R_REL),                  /* |k - q| */
    [R_TBL] = LOAD2(0, R_DIST, R_H),             /* t[|k - q|][h] */
    [R_SCORE] = OP2(ADD, R_S, R_TBL),            /* s + t[..] */
    [R_PLUSQ] = OP2(ADD, R_DIST, R_Q),           /* |k - q| + q: q alone too */
    [R_QK] = OP2(SUB, R_Q, R_K),                 /* q - k */
    [R_KK] = OP2(SUB, R_K, R_K),                 /* k - k: not a relative position */
    [R_DOCQ] = LOAD2(1, R_B, R_Q),               /* doc[b][q] */
    [R_DOCK] = LOAD2(1, R_B, R_K),               /* doc[b][k] */
    [R_SAME] = OP2(EQ, R_DOCQ, R_DOCK),
    [R_ONE] = {.op = EM_XOP_CONST, .cap = -1, .arg = {-1, -1, -1, -1}, .k = 1},
    [R_WIN] = OP2(LE, R_QK, R_ONE),              /* q - k <= 1 */
  };
  const int32_t outs[1] = {R_SCORE};
  const int cap_ndim[2] = {2, 2};
  em_expr *e = NULL;
  CHECK(em_expr_new(&e, R_N, ins, 1, outs, 0, NULL, 2, cap_ndim) == EM_OK && e, "a program is accepted");
  if (!e) return;
  CHECK(e->dvar[R_REL] && e->dvar[R_QK], "k - q and q - k are relative positions");
  CHECK(e->dvar[R_DIST] && e->dvar[R_TBL] && e->dvar[R_WIN], "what is made of them (and h, constants) is too");
  CHECK(e->kvar[R_REL] && e->kvar[R_TBL], "and depends on the key");
  CHECK(!e->dvar[R_SCORE] && e->kvar[R_SCORE], "the score read from s is not on the diagonals");
  CHECK(!e->dvar[R_PLUSQ] && e->kvar[R_PLUSQ], "a term that reads q itself is not");
  CHECK(!e->dvar[R_KK] && !e->dvar[R_K] && e->kvar[R_K], "k alone, and k - k, are not");
  CHECK(!e->dvar[R_DOCK] && !e->dvar[R_SAME] && e->kvar[R_SAME], "a document mask is not");
  CHECK(!e->kvar[R_DOCQ] && !e->dvar[R_DOCQ] && !e->kvar[R_H] && !e->dvar[R_ONE], "row scalars are neither");
  CHECK((e->deps & EM_XDEP_S) && (e->deps & EM_XDEP_H) && !(e->deps & EM_XDEP_B), "the output's deps");
  /* the reference evaluator is unchanged by the analysis */
  const double tbl[4] = {10, 20, 30, 40}, doc[2] = {1, 1};
  const em_xcap caps[2] = {{.data = tbl, .dtype = EM_F64, .ndim = 2, .shape = {2, 2}, .name = "t"},
                           {.data = doc, .dtype = EM_F64, .ndim = 2, .shape = {1, 2}, .name = "doc"}};
  double regs[R_N];
  /* b 1, h 2, q 2, k 3, s 0.5: s + t[|3 - 2|][2] = 0.5 + t[1][2] */
  CHECK(em_expr_eval(e, caps, 0, 1, 2, 2, 3, 0.5, regs) == 0.5 + 20, "the reference evaluator gives s + t[|k - q|][h]");
  em_expr_free(e);
}

int main(void) {
  test_dependencies();
  return tap_done();
}
