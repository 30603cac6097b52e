/*
** cpu_index_tmpl.h -- the index kernels for one element type; included by
** cpu_index.c with T and SUF set. gather only moves elements and is built
** for one unsigned type per element size; index_add and scatter_add are
** built for the arithmetic types, with ADD(x, y) set. Indices are checked
** by the caller.
*/

#define FN(name) CPU_CAT(name, SUF)

#ifdef ADD

/* out[o, idx[j], i] += src[o, j, i]; each piece owns columns (o, i0..). */
static void FN(index_add)(T *out, const T *src, const int64_t *idx, int64_t nidx, int64_t outer,
                          int64_t n_out, int64_t inner) {
  const int64_t nblk = (inner + COLS - 1) / COLS;
  CPU_FOR(outer * nidx * inner > CPU_PAR_MIN, t, outer * nblk,
    int64_t o = t / nblk, i0 = (t % nblk) * COLS;
    int64_t nb = inner - i0 < COLS ? inner - i0 : COLS;
    for (int64_t j = 0; j < nidx; j++) {
      T *dst = out + (o * n_out + idx[j]) * inner + i0;
      const T *from = src + (o * nidx + j) * inner + i0;
      for (int64_t i = 0; i < nb; i++) dst[i] = ADD(dst[i], from[i]);
    });
}

/* out[o, idx[o,j,i], i] += src[o,j,i]; each piece owns columns (o, i). */
static void FN(scatter_add)(T *out, const T *src, const int64_t *idx, int64_t outer,
                            int64_t n_out, int64_t n_idx, int64_t inner) {
  const int64_t nblk = (inner + COLS - 1) / COLS;
  CPU_FOR(outer * n_idx * inner > CPU_PAR_MIN, t, outer * nblk,
    int64_t o = t / nblk, i0 = (t % nblk) * COLS;
    int64_t nb = inner - i0 < COLS ? inner - i0 : COLS;
    for (int64_t j = 0; j < n_idx; j++) {
      const int64_t *ix = idx + (o * n_idx + j) * inner + i0;
      const T *from = src + (o * n_idx + j) * inner + i0;
      T *base = out + o * n_out * inner + i0;
      for (int64_t i = 0; i < nb; i++)
        base[ix[i] * inner + i] = ADD(base[ix[i] * inner + i], from[i]);
    });
}

#else

/* out[o,j,i] = in[o, idx[o,j,i], i]. */
static void FN(gather)(T *out, const T *in, const int64_t *idx, int64_t n_in, int64_t n_idx,
                       int64_t inner, int64_t total) {
  CPU_FOR(total > CPU_PAR_MIN, t, total,
    int64_t i = t % inner, o = t / (n_idx * inner);
    out[t] = in[(o * n_in + idx[t]) * inner + i];);
}

#endif

#undef FN
