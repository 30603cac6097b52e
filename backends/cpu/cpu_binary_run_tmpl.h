/*
** cpu_binary_run_tmpl.h -- one run of a binary op, over an op function;
** included by cpu_binary_tmpl.h with T (the operand type), TO (the result
** type) and RUN_NAME set, and undefines TO and RUN_NAME.
**
** out[i] = f(x, y) over a run; x from a, y from b. The contiguous and
** one-side-broadcast cases get plain loops the compiler can vectorise.
*/

static inline __attribute__((always_inline)) void RUN_NAME(
    char **p, const int64_t *s, int64_t n, TO (*f)(T, T, binary_ctx *), binary_ctx *c) {
  TO *o = (TO *)p[0];
  const int64_t ei = (int64_t)sizeof(T), eo = (int64_t)sizeof(TO);
  if (s[0] == eo && s[1] == ei && s[2] == ei) {
    const T *A = (const T *)p[1], *B = (const T *)p[2];
    for (int64_t i = 0; i < n; i++) o[i] = f(A[i], B[i], c);
  } else if (s[0] == eo && s[1] == ei && s[2] == 0) {
    const T *A = (const T *)p[1];
    const T y = *(const T *)p[2];
    for (int64_t i = 0; i < n; i++) o[i] = f(A[i], y, c);
  } else if (s[0] == eo && s[1] == 0 && s[2] == ei) {
    const T x = *(const T *)p[1];
    const T *B = (const T *)p[2];
    for (int64_t i = 0; i < n; i++) o[i] = f(x, B[i], c);
  } else {
    char *po = p[0];
    const char *pa = p[1], *pb = p[2];
    for (int64_t i = 0; i < n; i++, po += s[0], pa += s[1], pb += s[2])
      *(TO *)po = f(*(const T *)pa, *(const T *)pb, c);
  }
}

#undef TO
#undef RUN_NAME
