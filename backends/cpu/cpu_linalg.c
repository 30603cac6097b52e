/*
** cpu_linalg.c -- em_backend.linalg on LAPACK: the routines of the
** OpenBLAS the plugin links (Debian's libopenblas carries LAPACK), called
** by their Fortran symbols, declared here (no lapacke.h needed; int is
** LAPACK's 32-bit integer, and each character argument has its hidden
** length after the others, as gfortran passes them). float32 runs the
** s routines, float64 the d ones; batches run one matrix after another,
** each with OpenBLAS's own threads. What each op computes:
** em_linalg_args (core/include/ember_backend.h).
*/
#include <limits.h>
#include <stdlib.h>

#include "cpu_internal.h"

#define DECLARE(T, p)                                                                              \
  void p##potrf_(const char *, const int *, T *, const int *, int *, size_t);                      \
  void p##getrf_(const int *, const int *, T *, const int *, int *, int *);                        \
  void p##getrs_(const char *, const int *, const int *, const T *, const int *, const int *, T *,  \
                 const int *, int *, size_t);                                                      \
  void p##trtrs_(const char *, const char *, const char *, const int *, const int *, const T *,     \
                 const int *, T *, const int *, int *, size_t, size_t, size_t);                    \
  void p##geqrf_(const int *, const int *, T *, const int *, T *, T *, const int *, int *);         \
  void p##orgqr_(const int *, const int *, const int *, T *, const int *, const T *, T *,           \
                 const int *, int *);                                                              \
  void p##syevd_(const char *, const char *, const int *, T *, const int *, T *, T *, const int *,  \
                 int *, const int *, int *, size_t, size_t);                                       \
  void p##gesdd_(const char *, const int *, const int *, T *, const int *, T *, T *, const int *, T *, \
                 const int *, T *, const int *, int *, int *, size_t);
DECLARE(float, s)
DECLARE(double, d)

#define T float
#define L(x) s##x
#define LF(x) f32_##x
#include "cpu_linalg_tmpl.h"
#undef T
#undef L
#undef LF
#define T double
#define L(x) d##x
#define LF(x) f64_##x
#include "cpu_linalg_tmpl.h"
#undef T
#undef L
#undef LF

em_status cpu_linalg(int device, const em_linalg_args *a, void *const *out, const void *x, const void *b,
                     int64_t info[2]) {
  (void)device;
  /* LAPACK's int: sizes and the scratch a workspace query may ask for */
  if (a->m > INT_MAX / 8 || a->n > INT_MAX / 8 || a->k > INT_MAX / 8 || a->m * a->n > INT_MAX / 8)
    return em_error(EM_ERR_UNSUPPORTED, "cpu linalg: a %lld by %lld matrix is past LAPACK's 32-bit sizes",
                    (long long)a->m, (long long)a->n);
  if (a->dtype == EM_F32) return f32_run(a, out, x, b, info);
  if (a->dtype == EM_F64) return f64_run(a, out, x, b, info);
  return em_error(EM_ERR_DTYPE, "cpu linalg: float32 or float64 only, got %s", em_dtype_name(a->dtype));
}
