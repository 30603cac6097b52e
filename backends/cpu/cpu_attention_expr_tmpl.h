/*
** cpu_attention_expr_tmpl.h -- a traced variant's programs (ember_expr.h)
** inside the fused attention kernel, for one float type; included by
** cpu_attention_tmpl.h. See cpu_attention.c for the algorithm.
**
** An interpreter, vectorised over the keys of a tile row: each instruction
** is one loop over up to ATT_XCH keys (a register of the row), so its
** dispatch is paid once per 64-128 elements and the loop itself
** vectorises. Registers that do not depend on the key (kvar 0: everything
** made of b, h, q and constants -- a head's slope, a row's document id)
** are one scalar per row. Where a compiler is present the score and mask
** tiles run compiled instead (cpu_expr_jit.c, xjit_tile below); this
** interpreter is the path without one, and runs the sinks, the learned
** tables' scatter and every row that must report an error.
**
** Registers live in per-thread scratch X: n registers of ATT_XCH values,
** then three broadcast buffers and ATT_XCH int64 load offsets.
*/

/* Register r of the row as a vector of n values (a scalar is broadcast
** into tmp). */
ATT_ROW const T *FN(xvec)(const em_expr *p, const T *R, int32_t r, T *tmp, int64_t n) {
  if (p->kvar[r]) return R + (int64_t)r * ATT_XCH;
  const T v = R[(int64_t)r * ATT_XCH];
  for (int64_t j = 0; j < n; j++) tmp[j] = v;
  return tmp;
}

/* Records the first failure of any thread (an index out of range, a NaN
** score); the kernel returns it once its loops end. */
static void FN(xfail)(const att_ctx *c, int kind, int cap, int64_t b, int64_t h, int64_t q, int64_t k,
                      double idx) {
  att_xerr *e = c->xerr;
  int expected = 0;
  if (!__atomic_compare_exchange_n(&e->kind, &expected, kind, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    return;
  e->cap = cap, e->b = b, e->h = h, e->q = q, e->k = k, e->idx = idx;
}

/* Offsets of a load for keys k0.., n of them, into off; false (recorded)
** when an index leaves its capture. */
ATT_ROW bool FN(xoffsets)(const att_ctx *c, const em_expr *p, const em_xins *x, T *R, T *tmp,
                          int64_t n, int64_t *off, int64_t b, int64_t h, int64_t q, int64_t k0) {
  const em_xcap *cp = &c->a->caps[x->cap];
  for (int64_t j = 0; j < n; j++) off[j] = 0;
  for (int d = 0; d < cp->ndim; d++) {
    const T *Ix = FN(xvec)(p, R, x->arg[d], tmp, n);
    const int64_t size = cp->shape[d];
    bool bad = false;
    for (int64_t j = 0; j < n; j++) {
      bad |= !(Ix[j] >= 1 && Ix[j] <= (T)size);
      off[j] = off[j] * size + (int64_t)Ix[j] - 1;
    }
    if (bad) {
      for (int64_t j = 0; j < n; j++)
        if (!(Ix[j] >= 1 && Ix[j] <= (T)size)) {
          FN(xfail)(c, 1 + d, x->cap, b, h, q, k0 + j, (double)Ix[j]);
          break;
        }
      return false;
    }
  }
  return true;
}

/* Runs program p for query row (b, h, q) (1-based; q on the key axis)
** and keys k0 .. k0+n-1, with s the row's raw scores (or NULL). Results
** are registers of X. False when a load failed (recorded). XROW_HOISTED:
** the registers on the diagonals are not computed, the roots are read
** from hrow[slot * hs + j] (the row's place in its tile's xview);
** XROW_DIAGONALS: only the row's scalars and the registers on the
** diagonals are (the hoisting pass itself). */
CPU_VECTOR_CLONES_512 static bool FN(xrow)(const att_ctx *c, const em_expr *p, int64_t b, int64_t h,
                                           int64_t q, int64_t k0, int64_t n, const T *s, T *X,
                                           const cpu_xhoist *hp, const T *hrow, int64_t hs, int mode) {
  T *tmp = X + (int64_t)p->n * ATT_XCH, *tb = tmp + ATT_XCH, *tc = tb + ATT_XCH;
  int64_t *off = (int64_t *)(tc + ATT_XCH);
  const T *RP[EM_EXPR_MAX_INS]; /* where each register's values are (S: the scores themselves) */
  for (int i = 0; i < p->n; i++) {
    const em_xins *x = &p->ins[i];
    T *r = X + (int64_t)i * ATT_XCH;
    RP[i] = r;
    /* (k - q needs k: the diagonal pass computes the key register too) */
    if (p->kvar[i] && (mode == XROW_DIAGONALS ? !p->dvar[i] && x->op != EM_XOP_K
                                              : mode == XROW_HOISTED && p->dvar[i])) {
      if (mode == XROW_HOISTED && hp->slot[i] >= 0) memcpy(r, hrow + hp->slot[i] * hs, (size_t)n * sizeof(T));
      continue;
    }
    if (!p->kvar[i]) { /* one value for the row */
      double v;
      switch (x->op) {
      case EM_XOP_CONST: v = x->k; break;
      case EM_XOP_B: v = (double)b; break;
      case EM_XOP_H: v = (double)h; break;
      case EM_XOP_Q: v = (double)q; break;
      case EM_XOP_LOAD: {
        const em_xcap *cp = &c->a->caps[x->cap];
        double idx[EM_EXPR_MAX_DIMS];
        for (int d = 0; d < cp->ndim; d++) idx[d] = (double)X[(int64_t)x->arg[d] * ATT_XCH];
        const int64_t o = em_xcap_offset(cp, idx);
        if (o < 0) {
          int d = 0;
          while (d < cp->ndim - 1 && idx[d] >= 1 && idx[d] <= (double)cp->shape[d]) d++;
          FN(xfail)(c, 1 + d, x->cap, b, h, q, k0, idx[d]);
          return false;
        }
        v = em_xcap_read(cp, o);
        break;
      }
      default:
        v = em_xeval1(x->op, (double)X[(int64_t)x->arg[0] * ATT_XCH],
                      x->arg[1] >= 0 && em_xop_arity(x->op) > 1 ? (double)X[(int64_t)x->arg[1] * ATT_XCH] : 0,
                      em_xop_arity(x->op) > 2 ? (double)X[(int64_t)x->arg[2] * ATT_XCH] : 0);
      }
      r[0] = (T)v;
      continue;
    }
    if (x->op == EM_XOP_S) { /* read in place unless an output names it */
      bool out = false;
      for (int o = 0; o < p->n_out; o++) out |= p->out[o] == i;
      if (s && !out) {
        RP[i] = s;
        continue;
      }
      for (int64_t j = 0; j < n; j++) r[j] = s ? s[j] : 0;
      continue;
    }
    if (x->op == EM_XOP_K) {
      for (int64_t j = 0; j < n; j++) r[j] = (T)(k0 + j);
      continue;
    }
    if (x->op == EM_XOP_LOAD) {
      if (!FN(xoffsets)(c, p, x, X, tmp, n, off, b, h, q, k0)) return false;
      const void *d = c->a->caps[x->cap].data;
      switch (c->a->caps[x->cap].dtype) {
      case EM_F32: for (int64_t j = 0; j < n; j++) r[j] = (T)((const float *)d)[off[j]]; break;
      case EM_F64: for (int64_t j = 0; j < n; j++) r[j] = (T)((const double *)d)[off[j]]; break;
      default: for (int64_t j = 0; j < n; j++) r[j] = (T)((const int64_t *)d)[off[j]]; break;
      }
      continue;
    }
    const int ar = em_xop_arity(x->op);
    T *restrict rr = r;
    const bool va = p->kvar[x->arg[0]], vb = ar > 1 && p->kvar[x->arg[1]];
    /* every op's rule is cpu_expr_ops.h's; expanded twice below */
    if (ar == 2 && va != vb) { /* one operand is the row's scalar: kept in a register, no broadcast pass */
      const T *restrict V = RP[va ? x->arg[0] : x->arg[1]];
      const T k_ = X[(int64_t)(va ? x->arg[1] : x->arg[0]) * ATT_XCH];
#define XVS(OP, AR, EXPR)                                                \
  case EM_XOP_##OP:                                                      \
    if (va)                                                              \
      for (int64_t j = 0; j < n; j++) { const T a_ = V[j], b_ = k_, c_ = 0; (void)b_, (void)c_; rr[j] = (EXPR); } \
    else                                                                 \
      for (int64_t j = 0; j < n; j++) { const T a_ = k_, b_ = V[j], c_ = 0; (void)b_, (void)c_; rr[j] = (EXPR); } \
    break;
      switch (x->op) {
        CPU_XOPS(XVS)
      default: for (int64_t j = 0; j < n; j++) rr[j] = NAN;
      }
#undef XVS
      continue;
    }
    const T *restrict A = va ? RP[x->arg[0]] : FN(xvec)(p, X, x->arg[0], tmp, n);
    const T *restrict Bv = ar > 1 ? (vb ? RP[x->arg[1]] : FN(xvec)(p, X, x->arg[1], tb, n)) : A;
    const T *restrict Cv = ar > 2 ? (p->kvar[x->arg[2]] ? RP[x->arg[2]] : FN(xvec)(p, X, x->arg[2], tc, n)) : A;
#define XVV(OP, AR, EXPR)                               \
  case EM_XOP_##OP:                                     \
    for (int64_t j = 0; j < n; j++) {                   \
      const T a_ = A[j], b_ = Bv[j], c_ = Cv[j];        \
      (void)b_, (void)c_;                               \
      rr[j] = (EXPR);                                   \
    }                                                   \
    break;
    switch (x->op) {
      CPU_XOPS(XVV)
    default: for (int64_t j = 0; j < n; j++) rr[j] = NAN;
    }
#undef XVV
  }
  return true;
}

/* Output o of the last xrow as a vector (broadcast when it is a scalar). */
ATT_ROW const T *FN(xout)(const em_expr *p, T *X, int o, int64_t n) {
  T *tmp = X + (int64_t)p->n * ATT_XCH;
  return FN(xvec)(p, X, p->out[o], tmp, n);
}

/* A tile's registers on the diagonals (cpu_xhoist), when on: row ii
** reads root `slot` at H[slot * hs + (br - 1 - ii) + jj]; in the
** backward's scatter, the learned loads on the diagonals sum into
** acc[gslot * as + t] and go to their table at offsets O[gslot * os + t]. */
typedef struct FN(xview) {
  bool on;
  const T *H;
  int64_t hs;
  T *acc;
  int64_t as;
  const int64_t *O;
  int64_t os;
} FN(xview);

/* Row ii's place in a tile's view (NULL when it is off). */
ATT_ROW const T *FN(xview_row)(const FN(xview) *v, int64_t br, int64_t ii) {
  return v->on && v->H ? v->H + (br - 1 - ii) : NULL;
}

/* The score program on one row s of a tile (q: 1-based, on the key
** axis), in place; d score/ds into d when not NULL; hrow: the row's
** hoisted registers (xview_row), or NULL. */
ATT_ROW void FN(xscore_row)(const att_ctx *c, const em_expr *p, int64_t b, int64_t h, int64_t q, int64_t j0,
                            int64_t bc, T *s, T *X, T *d, const cpu_xhoist *hp, const FN(xview) *v,
                            int64_t ii, int64_t br) {
  const bool hz = v && v->on;
  if (!FN(xrow)(c, p, b, h, q, j0 + 1, bc, s, X, hp, hz ? FN(xview_row)(v, br, ii) : NULL, hz ? v->hs : 0,
                hz ? XROW_HOISTED : XROW_ALL)) {
    for (int64_t jj = 0; jj < bc; jj++) s[jj] = -INFINITY;
    return;
  }
  if (d) {
    const T *g = FN(xout)(p, X, 1, bc);
    for (int64_t jj = 0; jj < bc; jj++) d[jj] = g[jj];
  }
  const T *o = FN(xout)(p, X, 0, bc);
  /* NaN or +inf: no probability comes of it (-inf hides the key). A
  ** score that was NaN already (from q and k) stays NaN, as in standard
  ** attention: the error is for what the function made. */
  int64_t bad = -1;
  for (int64_t jj = 0; jj < bc; jj++) {
    if (bad < 0 && !(o[jj] < (T)INFINITY) && s[jj] == s[jj]) bad = jj;
    s[jj] = o[jj];
  }
  if (bad >= 0) FN(xfail)(c, ATT_XERR_NAN, -1, b, h, q, j0 + bad + 1, (double)s[bad]);
}

/* The mask program on one row: -inf where it says no. */
ATT_ROW void FN(xmask_row)(const att_ctx *c, int64_t b, int64_t h, int64_t q, int64_t j0, int64_t bc, T *s,
                           T *X, const FN(xview) *v, int64_t ii, int64_t br) {
  const em_expr *p = c->a->mask_mod;
  const bool hz = v && v->on;
  if (!FN(xrow)(c, p, b, h, q, j0 + 1, bc, NULL, X, &c->xh[CPU_XJIT_MASK], hz ? FN(xview_row)(v, br, ii) : NULL,
                hz ? v->hs : 0, hz ? XROW_HOISTED : XROW_ALL)) {
    for (int64_t jj = 0; jj < bc; jj++) s[jj] = -INFINITY;
    return;
  }
  const T *o = FN(xout)(p, X, 0, bc);
  for (int64_t jj = 0; jj < bc; jj++) s[jj] = o[jj] != 0 ? s[jj] : -INFINITY;
}

/* Program p's registers on the diagonals (plan hp) for head (b, h)
** (1-based), n diagonals from the one through (q_last, k_first): the
** program run for row q_last over keys k_first.., the other registers
** left alone; roots into H[slot * hs + t], and with O the offsets of the
** learned loads on the diagonals into O[gslot * hs + t]. False when a load
** fails: nothing is recorded (the rows that meet it report it). */
static bool FN(xdiagonals)(const att_ctx *c, const em_expr *p, const cpu_xhoist *hp, int64_t b, int64_t h,
                           int64_t q_last, int64_t k_first, int64_t n_diag, T *X, T *H, int64_t *O, int64_t hs) {
  att_ctx quiet = *c;
  att_xerr e = {0};
  quiet.xerr = &e;
  T *tmp = X + (int64_t)p->n * ATT_XCH;
  for (int64_t t0 = 0; t0 < n_diag; t0 += ATT_XCH) {
    const int64_t n = n_diag - t0 < ATT_XCH ? n_diag - t0 : ATT_XCH;
    if (!FN(xrow)(&quiet, p, b, h, q_last, k_first + t0, n, NULL, X, hp, NULL, 0, XROW_DIAGONALS)) return false;
    for (int i = 0; i < p->n; i++)
      if (hp->slot[i] >= 0) memcpy(H + hp->slot[i] * hs + t0, X + (int64_t)i * ATT_XCH, (size_t)n * sizeof(T));
    if (O)
      for (int g = 0; g < p->n_grad; g++)
        if (hp->gslot[g] >= 0 && !FN(xoffsets)(&quiet, p, &p->ins[p->grad_load[g]], X, tmp, n,
                                                O + hp->gslot[g] * hs + t0, b, h, q_last, k_first + t0))
          return false;
  }
  return true;
}

/* The tile [i0, i0+br) x [j0, j0+bc) of head bh's view of its registers
** on the diagonals for `role`: a window of the call's table (xdiag_prepare)
** or, where there is none, computed for the tile (br + bc - 1 diagonals
** into the thread's registers). Off when the plan is empty or a load
** fails. With scatter, the per-diagonal sums are zeroed. */
ATT_ROW FN(xview) FN(xview_tile)(const att_ctx *c, int role, const em_expr *p, int64_t bh, int64_t i0,
                                 int64_t br, int64_t j0, int64_t bc, T *X, bool scatter) {
  const em_attention_args *a = c->a;
  const cpu_xhoist *hp = &c->xh[role];
  FN(xview) v = {0};
  if (!hp->n_roots && !(scatter && hp->n_gd)) return v;
  const int64_t ths = ATT_HS(c);
  T *local = X + c->xh_at;
  if (c->xd[role]) {
    /* the tile's first diagonal, (j0 + 1) - (i0 + br + shift), counted from the table's, 1 - Lk */
    const int64_t n_r = c->xd_n, first = j0 - i0 - br + a->Lq;
    const int64_t cell = (hp->reads_b ? bh / a->H : 0) * (hp->reads_h ? a->H : 1) + (hp->reads_h ? bh % a->H : 0);
    v.H = (const T *)c->xd[role] + cell * hp->n_roots * n_r + first, v.hs = n_r;
    if (scatter) v.O = c->xdo + cell * hp->n_gd * n_r + first, v.os = n_r;
  } else {
    int64_t *O = scatter ? (int64_t *)(local + (hp->n_roots + hp->n_gd) * ths) : NULL;
    if (!FN(xdiagonals)(c, p, hp, bh / a->H + 1, bh % a->H + 1, i0 + br + c->shift, j0 + 1, br + bc - 1, X, local,
                        O, ths))
      return v;
    v.H = local, v.hs = ths, v.O = O, v.os = ths;
  }
  if (scatter) {
    v.acc = local + hp->n_roots * ths, v.as = ths;
    memset(v.acc, 0, (size_t)(hp->n_gd * ths) * sizeof(T));
  }
  v.on = true;
  return v;
}

/* The compiled program of `role` over rows of a tile (v: its hoisted
** registers); each row it leaves (one that must report a bad index or a
** NaN) the interpreter runs, without them. False when the role is not
** compiled, or compiled with hoisted registers that v does not have. */
ATT_ROW bool FN(xjit_tile)(const att_ctx *c, int role, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                           int64_t bc, T *S, T *X, T *dsc, const FN(xview) *v) {
  const cpu_xjit_fn f = c->xjit[role];
  if (!f || bc > CPU_XJIT_MAX_COLS || (c->xh[role].n_roots && !v->on)) return false;
  const em_attention_args *a = c->a;
  const int64_t b = bh / a->H + 1, h = bh % a->H + 1, ld = c->ld, q0 = i0 + c->shift + 1;
  for (int64_t ii = 0; ii < br;) {
    const int64_t left = f(c->xcap_data, c->xcap_shape, b, h, q0, j0 + 1, ii, br, bc, ld, S, dsc, v->H, v->hs);
    if (left < 0) break;
    if (role == CPU_XJIT_MASK) FN(xmask_row)(c, b, h, q0 + left, j0, bc, S + left * ld, X, NULL, left, br);
    else FN(xscore_row)(c, role == CPU_XJIT_GRAD ? a->score_grad : a->score_mod, b, h, q0 + left, j0, bc,
                        S + left * ld, X, dsc ? dsc + left * ld : NULL, NULL, NULL, left, br);
    ii = left + 1;
  }
  return true;
}

/* A score s + d (or s - d) where d is a register on the diagonals
** (att_ctx.x_diag_bias, x_diag_sub) over a tile: each row adds (subtracts)
** its slice of the diagonals' values, as a vector. False (the program
** runs) when the view is off or a value in the tile's window is not
** finite: those rows report their NaN. */
ATT_ROW bool FN(xdiag_bias_tile)(const att_ctx *c, int64_t br, int64_t bc, T *S, const FN(xview) *v) {
  if (c->x_diag_bias < 0 || !v->on) return false;
  const T *d = v->H + c->x_diag_bias * v->hs;
  bool finite = true;
  for (int64_t t = 0; t < br + bc - 1; t++) finite &= d[t] - d[t] == 0;
  if (!finite) return false;
  for (int64_t ii = 0; ii < br; ii++) {
    const T *dr = d + (br - 1 - ii);
    T *s = S + ii * c->ld;
    if (c->x_diag_sub)
      for (int64_t jj = 0; jj < bc; jj++) s[jj] -= dr[jj];
    else
      for (int64_t jj = 0; jj < bc; jj++) s[jj] += dr[jj];
  }
  return true;
}

/* The score program over a score tile, in place. In the backward (dsc not
** NULL) the gradient program runs instead, one pass for both: the score
** into S and d score/ds into dsc; raw (when not NULL) keeps the scores it
** started from, for the learned tables' scatter (xscore_scatter_row). */
ATT_ROW void FN(xscore_tile)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                             int64_t bc, T *S, T *X, T *dsc, T *raw) {
  const em_attention_args *a = c->a;
  const int role = dsc ? CPU_XJIT_GRAD : CPU_XJIT_SCORE;
  const em_expr *p = dsc ? a->score_grad : a->score_mod;
  const int64_t b = bh / a->H + 1, h = bh % a->H + 1, ld = c->ld;
  if (raw)
    for (int64_t ii = 0; ii < br; ii++)
      for (int64_t jj = 0; jj < bc; jj++) raw[ii * ld + jj] = S[ii * ld + jj];
  const FN(xview) v = FN(xview_tile)(c, role, p, bh, i0, br, j0, bc, X, false);
  if (!dsc && FN(xdiag_bias_tile)(c, br, bc, S, &v)) return;
  if (FN(xjit_tile)(c, role, bh, i0, br, j0, bc, S, X, dsc, &v)) return;
  for (int64_t ii = 0; ii < br; ii++)
    FN(xscore_row)(c, p, b, h, i0 + ii + c->shift + 1, j0, bc, S + ii * ld, X, dsc ? dsc + ii * ld : NULL,
                   &c->xh[role], &v, ii, br);
}

/* The mask program over a tile: -inf where it says no. Full tiles of the
** block map are left alone. */
ATT_ROW void FN(xmask_tile)(const att_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t j0,
                            int64_t bc, T *S, T *X) {
  const em_attention_args *a = c->a;
  if (a->block_map && att_tile_class(c, bh, i0, br, j0, bc) == ATT_TILE_FULL) return;
  const FN(xview) v = FN(xview_tile)(c, CPU_XJIT_MASK, a->mask_mod, bh, i0, br, j0, bc, X, false);
  if (FN(xjit_tile)(c, CPU_XJIT_MASK, bh, i0, br, j0, bc, S, X, NULL, &v)) return;
  const int64_t b = bh / a->H + 1, h = bh % a->H + 1, ld = c->ld;
  for (int64_t ii = 0; ii < br; ii++)
    FN(xmask_row)(c, b, h, i0 + ii + c->shift + 1, j0, bc, S + ii * ld, X, &v, ii, br);
}

/* The sink logit of query row i of head bh (-inf without a sink). */
ATT_ROW T FN(xsink)(const att_ctx *c, int64_t bh, int64_t i, T *X) {
  const em_attention_args *a = c->a;
  if (!a->sink) return -INFINITY;
  if (!FN(xrow)(c, a->sink, bh / a->H + 1, bh % a->H + 1, i + c->shift + 1, 1, 1, NULL, X, NULL, NULL, 0, XROW_ALL))
    return -INFINITY;
  return FN(xout)(a->sink, X, 0, 1)[0];
}

/* Backward, one row of a head's owner: adds ds * d score/d(load g) (ds:
** the gradient of the modified scores) into the head's table sums at each
** load's element, the program run again on the row's raw scores. With v
** on (xview_tile with scatter; ii: the row in its tile of br), the loads
** on the diagonals add into their per-diagonal sums instead
** (xscatter_flush). */
ATT_ROW void FN(xscore_scatter_row)(const att_ctx *c, int64_t bh, int64_t i, int64_t j0, int64_t bc,
                                    const T *raw, const T *ds, T *X, const FN(xview) *v, int64_t ii, int64_t br) {
  const em_attention_args *a = c->a;
  const em_expr *p = a->score_grad;
  const cpu_xhoist *hp = &c->xh[CPU_XJIT_SCATTER];
  const int64_t b = bh / a->H + 1, h = bh % a->H + 1, q = i + c->shift + 1, hoff = br - 1 - ii;
  T *G = (T *)c->xg + bh * c->xg_size;
  if (c->xjit[CPU_XJIT_SCATTER] && bc <= CPU_XJIT_MAX_COLS && (v->on || !(hp->n_roots || hp->n_gd))) {
    void *Gc[EM_EXPR_MAX_CAPS];
    for (int k = 0; k < EM_EXPR_MAX_CAPS; k++) Gc[k] = k < a->n_caps && c->xg_off[k] >= 0 ? G + c->xg_off[k] : NULL;
    cpu_xjit_scatter_fn f; /* stored as a cpu_xjit_fn (cpu_internal.h) */
    memcpy(&f, &c->xjit[CPU_XJIT_SCATTER], sizeof f);
    f(c->xcap_data, c->xcap_shape, b, h, q, j0 + 1, bc, raw, ds, Gc, v->H, v->hs, hoff, v->acc, v->as);
    return;
  }
  if (!FN(xrow)(c, p, b, h, q, j0 + 1, bc, raw, X, hp, FN(xview_row)(v, br, ii), v->hs,
                v->on ? XROW_HOISTED : XROW_ALL))
    return;
  int64_t *off = (int64_t *)(X + (int64_t)(p->n + 3) * ATT_XCH);
  T *tmp = X + (int64_t)p->n * ATT_XCH;
  for (int g = 0; g < p->n_grad; g++) {
    const em_xins *x = &p->ins[p->grad_load[g]];
    if (c->xg_off[x->cap] < 0) continue;
    const T *dl = FN(xout)(p, X, 2 + g, bc);
    /* the offsets again (xrow checked them): tmp is free once dl is read */
    T dlv[ATT_XCH];
    for (int64_t jj = 0; jj < bc; jj++) dlv[jj] = dl[jj] * ds[jj];
    if (v->on && hp->gslot[g] >= 0) {
      T *ad = v->acc + hp->gslot[g] * v->as + hoff;
      for (int64_t jj = 0; jj < bc; jj++) ad[jj] += dlv[jj];
      continue;
    }
    if (!FN(xoffsets)(c, p, x, X, tmp, bc, off, b, h, q, j0 + 1)) return;
    T *gc = G + c->xg_off[x->cap];
    for (int64_t jj = 0; jj < bc; jj++) gc[off[jj]] += dlv[jj];
  }
}

/* Backward, row ii of a tile where every learned load is on the diagonals
** with d score/d load = 1 (att_ctx.x_diag_grad): dS adds into each one's
** per-diagonal sums, no program run. False when the view is off. */
ATT_ROW bool FN(xdiag_grad_row)(const att_ctx *c, const T *ds, const FN(xview) *v, int64_t ii, int64_t br,
                                int64_t bc) {
  if (!v->on) return false;
  const em_expr *p = c->a->score_grad;
  const cpu_xhoist *hp = &c->xh[CPU_XJIT_SCATTER];
  for (int g = 0; g < p->n_grad; g++) {
    if (c->xg_off[p->ins[p->grad_load[g]].cap] < 0) continue;
    T *ad = v->acc + hp->gslot[g] * v->as + (br - 1 - ii);
    for (int64_t jj = 0; jj < bc; jj++) ad[jj] += ds[jj];
  }
  return true;
}

/* Backward, after a tile's rows (v from xview_tile with scatter): each
** diagonal's sum into the head's table sums, once per diagonal. */
ATT_ROW void FN(xscatter_flush)(const att_ctx *c, int64_t bh, int64_t br, int64_t bc, const FN(xview) *v) {
  if (!v->on) return;
  const em_expr *p = c->a->score_grad;
  const cpu_xhoist *hp = &c->xh[CPU_XJIT_SCATTER];
  const int64_t nd = br + bc - 1;
  T *G = (T *)c->xg + bh * c->xg_size;
  for (int g = 0; g < p->n_grad; g++) {
    const int cap = p->ins[p->grad_load[g]].cap;
    if (hp->gslot[g] < 0 || c->xg_off[cap] < 0) continue;
    const T *ad = v->acc + hp->gslot[g] * v->as;
    const int64_t *od = v->O + hp->gslot[g] * v->os;
    T *gc = G + c->xg_off[cap];
    for (int64_t t = 0; t < nd; t++) gc[od[t]] += ad[t];
  }
}

/* Before the tiles: each role's registers on the diagonals for every
** diagonal of the whole score matrix (Lq + Lk - 1, from k - q = 1 - Lk),
** per batch and head where they read b or h, so that a tile only reads
** its window (xview_tile): once a call instead of once a tile. A role
** whose pass fails (a load out of range on some diagonal) gets none, and
** its tiles compute their own, whose rows report the error. */
static void FN(xdiag_prepare)(att_ctx *c, bool backward) {
  const em_attention_args *a = c->a;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) c->xd[r] = NULL, c->xd_bytes[r] = 0;
  c->xdo = NULL, c->xdo_bytes = 0;
  c->xd_n = a->Lq + a->Lk - 1;
  if (!c->xregs || c->xd_n < 1) return;
  const em_expr *progs[CPU_XJIT_ROLES] = {a->score_mod, a->score_grad, a->mask_mod, a->score_grad};
  bool want[CPU_XJIT_ROLES] = {a->score_mod && (!backward || c->x_additive), backward && a->score_grad && !c->x_additive,
                               a->mask_mod != NULL, backward && c->xg != NULL};
  T *X = NULL;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) {
    const cpu_xhoist *hp = &c->xh[r];
    const bool scatter = r == CPU_XJIT_SCATTER;
    if (!want[r] || !progs[r] || (!hp->n_roots && !(scatter && hp->n_gd))) continue;
    const int64_t n_r = c->xd_n, Bm = hp->reads_b ? a->B : 1, Hm = hp->reads_h ? a->H : 1;
    const size_t bytes = (size_t)(Bm * Hm * (hp->n_roots > 0 ? hp->n_roots : 1) * n_r) * sizeof(T);
    const size_t obytes = scatter ? (size_t)(Bm * Hm * hp->n_gd * n_r) * sizeof(int64_t) : 0;
    if (bytes + obytes > ((size_t)256 << 20)) continue; /* per batch and head at long L: the tiles make their own */
    if (!X && !(X = cpu_scratch_alloc((size_t)c->xregs * sizeof(T)))) return;
    T *H = cpu_scratch_alloc(bytes);
    int64_t *O = obytes ? cpu_scratch_alloc(obytes) : NULL;
    bool ok = H && (!obytes || O);
    for (int64_t cell = 0; ok && cell < Bm * Hm; cell++)
      ok = FN(xdiagonals)(c, progs[r], hp, cell / Hm + 1, cell % Hm + 1, a->Lk, 1, n_r, X,
                          H + cell * hp->n_roots * n_r, O ? O + cell * hp->n_gd * n_r : NULL, n_r);
    if (!ok) {
      if (H) cpu_scratch_free(H, bytes);
      if (O) cpu_scratch_free(O, obytes);
      continue;
    }
    c->xd[r] = H, c->xd_bytes[r] = bytes;
    if (scatter) c->xdo = O, c->xdo_bytes = obytes;
  }
  if (X) cpu_scratch_free(X, (size_t)c->xregs * sizeof(T));
}

static void FN(xdiag_release)(att_ctx *c) {
  for (int r = 0; r < CPU_XJIT_ROLES; r++)
    if (c->xd[r]) cpu_scratch_free(c->xd[r], c->xd_bytes[r]), c->xd[r] = NULL;
  if (c->xdo) cpu_scratch_free(c->xdo, c->xdo_bytes), c->xdo = NULL;
}

/* Backward: where the learned captures' gradients are summed per head
** (c->xg, [BH][xg_size]: each head is one thread's, so no two threads add
** to one place and the sums do not depend on the thread count). */
static em_status FN(xprepare)(att_ctx *c) {
  const em_attention_args *a = c->a;
  if (!a->score_grad || !a->d_caps || a->score_grad->n_grad == 0) return EM_OK;
  int64_t size = 0;
  for (int g = 0; g < a->score_grad->n_grad; g++) {
    const int cap = a->score_grad->ins[a->score_grad->grad_load[g]].cap;
    if (!a->d_caps[cap] || c->xg_off[cap] >= 0) continue;
    c->xg_off[cap] = size;
    int64_t n = 1;
    for (int d = 0; d < a->caps[cap].ndim; d++) n *= a->caps[cap].shape[d];
    size += n;
  }
  if (size == 0) return EM_OK;
  const double bytes = (double)a->B * a->H * size * sizeof(T);
  if (bytes > 1e9)
    return em_error(EM_ERR_UNSUPPORTED,
                    "cpu attention_backward: learned tables of %lld elements summed per head need %.0f MB",
                    (long long)size, bytes / 1e6);
  c->xg = cpu_scratch_alloc((size_t)bytes);
  if (!c->xg) return em_error(EM_ERR_OOM, "cpu attention_backward: out of memory for %.0f bytes", bytes);
  memset(c->xg, 0, (size_t)bytes);
  c->xg_size = size;
  return EM_OK;
}

static void FN(xrelease)(att_ctx *c) {
  if (c->xg) cpu_scratch_free(c->xg, (size_t)(c->a->B * c->a->H * c->xg_size) * sizeof(T));
  c->xg = NULL;
}

/* Backward, after the tiles: d_caps = the per-head sums, in head order,
** plus the sinks' share, -exp(sink - lse_i) D_i for every row. */
static void FN(xfinish)(att_ctx *c) {
  const em_attention_args *a = c->a;
  if (!a->d_caps) return;
  const int64_t BH = a->B * a->H;
  for (int i = 0; i < a->n_caps; i++) {
    if (!a->d_caps[i]) continue;
    int64_t n = 1;
    for (int d = 0; d < a->caps[i].ndim; d++) n *= a->caps[i].shape[d];
    T *dst = a->d_caps[i];
    for (int64_t e = 0; e < n; e++) dst[e] = 0;
    if (c->xg && c->xg_off[i] >= 0)
      for (int64_t bh = 0; bh < BH; bh++) {
        const T *src = (const T *)c->xg + bh * c->xg_size + c->xg_off[i];
        for (int64_t e = 0; e < n; e++) dst[e] += src[e];
      }
  }
  const em_expr *p = a->sink_grad;
  if (!p || p->n_grad == 0) return;
  T *X = cpu_scratch_alloc((size_t)c->xregs * sizeof(T));
  if (!X) return; /* xregs is small; the forward allocated more */
  const T *lse = a->lse;
  for (int64_t bh = 0; bh < BH; bh++)
    for (int64_t i = 0; i < a->Lq; i++) {
      const int64_t b = bh / a->H + 1, h = bh % a->H + 1, q = i + c->shift + 1;
      if (!FN(xrow)(c, p, b, h, q, 1, 1, NULL, X, NULL, NULL, 0, XROW_ALL)) continue;
      const T sink = FN(xout)(p, X, 0, 1)[0];
      const T dsink = -FN(att_exp)(sink - lse[bh * a->Lq + i]) * (T)c->D[bh * a->Lq + i];
      for (int g = 0; g < p->n_grad; g++) {
        const em_xins *x = &p->ins[p->grad_load[g]];
        if (!a->d_caps[x->cap]) continue;
        const T dl = FN(xout)(p, X, 2 + g, 1)[0];
        int64_t off;
        T tmp[1];
        (void)tmp;
        double idx[EM_EXPR_MAX_DIMS];
        for (int d = 0; d < a->caps[x->cap].ndim; d++) idx[d] = (double)X[(int64_t)x->arg[d] * ATT_XCH];
        off = em_xcap_offset(&a->caps[x->cap], idx);
        if (off >= 0) ((T *)a->d_caps[x->cap])[off] += dsink * dl;
      }
    }
  cpu_scratch_free(X, (size_t)c->xregs * sizeof(T));
}
