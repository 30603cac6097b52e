/*
** cpu_bysize_tmpl.h -- the runs that only move elements (copy within one
** dtype, fill, where), for one element size; included by cpu_elementwise.c
** with T (an unsigned type of that size) and SUF set.
*/

#define FN(name) CPU_CAT(name, SUF)

/* The same dtype: a move of element-sized words. */
static void FN(move_run)(char **p, const int64_t *s, int64_t n) {
  if (s[0] == (int64_t)sizeof(T) && s[1] == (int64_t)sizeof(T)) {
    memmove(p[0], p[1], (size_t)n * sizeof(T));
  } else {
    char *d = p[0];
    const char *src = p[1];
    for (int64_t i = 0; i < n; i++, d += s[0], src += s[1]) *(T *)d = *(const T *)src;
  }
}

/* Fill only needs the bit pattern of one element, in c->bits. */
static void FN(fill_loop)(char **p, const int64_t *s, int64_t n, void *vctx) {
  const fill_ctx *c = vctx;
  T v;
  memcpy(&v, &c->bits, sizeof v);
  if (s[0] == (int64_t)sizeof(T)) {
    T *d = (T *)p[0];
    for (int64_t i = 0; i < n; i++) d[i] = v;
  } else {
    char *d = p[0];
    for (int64_t i = 0; i < n; i++, d += s[0]) *(T *)d = v;
  }
}

/* out = cond ? a : b */
static void FN(where_loop)(char **p, const int64_t *s, int64_t n, void *vctx) {
  (void)vctx;
  char *po = p[0];
  const char *pc = p[1], *pa = p[2], *pb = p[3];
  for (int64_t i = 0; i < n; i++, po += s[0], pc += s[1], pa += s[2], pb += s[3])
    *(T *)po = *(const uint8_t *)pc ? *(const T *)pa : *(const T *)pb;
}

#undef FN
