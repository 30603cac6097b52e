/*
** cuda_gemm.c -- batched matrix multiply through cuBLAS.
**
** ember is row-major, cuBLAS column-major. A row-major matrix read as
** column-major is its transpose, so C = op(A) op(B) is computed as
** C^T = op(B)^T op(A)^T: swap the operands and m with n, keep the flags.
** bfloat16 goes through cublasGemmStridedBatchedEx with float accumulation.
** float32 uses TF32 tensor cores only when EMBER_CUDA_TF32=1: it trades 10
** mantissa bits for speed, which must be a choice.
**
** cuBLAS is loaded with dlopen on the first matmul, not linked: libcublasLt
** alone is half a gigabyte, and every ember process loads every plugin on
** the search path, GPU or not (mapping it cost 0.3 s and 200 MB of resident
** memory per process, and valgrind runs far longer). Each device gets its
** handle, bound to the device's stream, on its first matmul.
*/
#include "cuda_internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct blas_api {
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  const char *(*status_string)(cublasStatus_t);
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const float *, const float *, int, long long, const float *, int,
                          long long, const float *, float *, int, long long, int);
  cublasStatus_t (*dgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                          const double *, const double *, int, long long, const double *, int,
                          long long, const double *, double *, int, long long, int);
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void *, const void *, cudaDataType, int, long long,
                            const void *, cudaDataType, int, long long, const void *, void *,
                            cudaDataType, int, long long, int, cublasComputeType_t,
                            cublasGemmAlgo_t);
} blas_api;

#ifndef EMC_EMU
/* The table's types are the toolkit's prototypes, checked at compile time. */
#define EMC_SAME_TYPE(field, fn) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(((blas_api *)0)->field), \
                                              __typeof__(&fn)), #fn " changed its prototype")
EMC_SAME_TYPE(create, cublasCreate_v2);
EMC_SAME_TYPE(destroy, cublasDestroy_v2);
EMC_SAME_TYPE(set_stream, cublasSetStream_v2);
EMC_SAME_TYPE(set_math_mode, cublasSetMathMode);
EMC_SAME_TYPE(status_string, cublasGetStatusString);
EMC_SAME_TYPE(sgemm, cublasSgemmStridedBatched);
EMC_SAME_TYPE(dgemm, cublasDgemmStridedBatched);
EMC_SAME_TYPE(gemm_ex, cublasGemmStridedBatchedEx);
#endif

static blas_api api;
static char api_error[600];
static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

#define EMC_STR2(x) #x
#define EMC_STR(x) EMC_STR2(x)

static void load_api(void) {
#ifdef EMC_EMU
  api.create = cublasCreate;
  api.destroy = cublasDestroy;
  api.set_stream = cublasSetStream;
  api.set_math_mode = cublasSetMathMode;
  api.status_string = cublasGetStatusString;
  api.sgemm = cublasSgemmStridedBatched;
  api.dgemm = cublasDgemmStridedBatched;
  api.gemm_ex = cublasGemmStridedBatchedEx;
#else
  /* The toolkit's own copy first (the one we compiled against), then the
  ** dynamic linker's search (LD_LIBRARY_PATH, ldconfig). */
  const char *names[] = {
#ifdef EMC_CUDA_LIBDIR
    EMC_CUDA_LIBDIR "/libcublas.so." EMC_STR(CUBLAS_VER_MAJOR),
#endif
    "libcublas.so." EMC_STR(CUBLAS_VER_MAJOR),
  };
  void *h = NULL;
  const char *why = "not found";
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
    if (!(h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL))) why = dlerror();
  if (!h) {
    snprintf(api_error, sizeof api_error, "cannot load cuBLAS (libcublas.so.%d): %s",
             CUBLAS_VER_MAJOR, why);
    return;
  }
  blas_api a;
  struct { void **slot; const char *name; } syms[] = {
    {(void **)&a.create, "cublasCreate_v2"},
    {(void **)&a.destroy, "cublasDestroy_v2"},
    {(void **)&a.set_stream, "cublasSetStream_v2"},
    {(void **)&a.set_math_mode, "cublasSetMathMode"},
    {(void **)&a.status_string, "cublasGetStatusString"},
    {(void **)&a.sgemm, "cublasSgemmStridedBatched"},
    {(void **)&a.dgemm, "cublasDgemmStridedBatched"},
    {(void **)&a.gemm_ex, "cublasGemmStridedBatchedEx"},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(h, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(api_error, sizeof api_error, "cuBLAS has no %s: %s", syms[i].name, dlerror());
      dlclose(h);
      return;
    }
  }
  api = a; /* complete, or left all NULL */
#endif
}

em_status emc_blas_error(cublasStatus_t s, const char *op) {
  const char *msg = api.status_string ? api.status_string(s) : "cuBLAS error";
  if (s == CUBLAS_STATUS_ALLOC_FAILED)
    return em_error(EM_ERR_OOM, "%s: cuBLAS could not allocate memory (%s)", op, msg);
  return em_error(EM_ERR_BACKEND, "%s: %s (cuBLAS status %d)", op, msg, (int)s);
}

/* The device's cuBLAS handle, created on first use. */
static em_status device_blas(emc_device *d, const char *op, cublasHandle_t *out) {
  cublasHandle_t h = __atomic_load_n(&d->blas, __ATOMIC_ACQUIRE);
  if (h) {
    *out = h;
    return EM_OK;
  }
  pthread_once(&api_once, load_api);
  if (!api.create) return em_error(EM_ERR_BACKEND, "%s: %s", op, api_error);
  pthread_mutex_lock(&handle_lock);
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  if (!d->blas) {
    st = api.create(&h);
    if (st == CUBLAS_STATUS_SUCCESS) st = api.set_stream(h, d->stream);
    const char *tf32 = getenv("EMBER_CUDA_TF32");
    if (st == CUBLAS_STATUS_SUCCESS && tf32 && strcmp(tf32, "1") == 0)
      st = api.set_math_mode(h, CUBLAS_TF32_TENSOR_OP_MATH);
    if (st == CUBLAS_STATUS_SUCCESS) __atomic_store_n(&d->blas, h, __ATOMIC_RELEASE);
    else if (h) api.destroy(h);
  }
  *out = d->blas;
  pthread_mutex_unlock(&handle_lock);
  return st == CUBLAS_STATUS_SUCCESS ? EM_OK : emc_blas_error(st, op);
}

void emc_blas_destroy(emc_device *d) {
  if (d->blas && api.destroy) api.destroy(d->blas);
  d->blas = NULL;
}

/* The smallest legal leading dimension of a row-major matrix with `cols`
** columns (cuBLAS wants >= 1 even when a dim is 0). */
static int64_t min_ld(int64_t cols) { return cols > 1 ? cols : 1; }

/* k == 0: C = beta C, with beta == 0 writing zeros without reading C
** (BLAS semantics, so NaN in C does not survive). */
static em_status scale_c(int device, em_dtype dt, int64_t m, int64_t n, double beta, void *c,
                         int64_t ldc, int64_t stride_c, int64_t batch) {
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = c;
  v.dtype = dt;
  v.ndim = 3;
  v.shape[0] = batch, v.shape[1] = m, v.shape[2] = n;
  v.stride[0] = stride_c, v.stride[1] = ldc, v.stride[2] = 1;
  if (beta == 0) return emc_fill(device, &v, 0.0);
  return emc_unary(device, EM_AFFINE, &v, &v, beta, 0.0);
}

em_status emc_gemm(int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const void *a, int64_t lda, int64_t stride_a, const void *b,
                   int64_t ldb, int64_t stride_b, double beta, void *c, int64_t ldc,
                   int64_t stride_c, int64_t batch) {
  const char *op = "cuda gemm";
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return em_error(EM_ERR_SHAPE, "%s: negative size m=%lld n=%lld k=%lld batch=%lld", op,
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX || batch > INT_MAX || lda > INT_MAX ||
      ldb > INT_MAX || ldc > INT_MAX)
    return em_error(EM_ERR_UNSUPPORTED,
                    "%s: sizes m=%lld n=%lld k=%lld batch=%lld exceed cuBLAS's 32-bit limit", op,
                    (long long)m, (long long)n, (long long)k, (long long)batch);
  if (m == 0 || n == 0 || batch == 0) return EM_OK;
  /* Stored shapes: A is [m,k] ([k,m] when ta), B [k,n] ([n,k] when tb), C
  ** [m,n]; a leading dim must cover a row (and be >= 1), as for BLAS. */
  int64_t need_a = min_ld(ta ? m : k), need_b = min_ld(tb ? k : n), need_c = min_ld(n);
  if (lda < need_a || ldb < need_b || ldc < need_c)
    return em_error(EM_ERR_ARG,
                    "%s: leading dimensions lda=%lld ldb=%lld ldc=%lld, expected >= %lld, %lld, "
                    "%lld (row-major, m=%lld n=%lld k=%lld, ta=%d tb=%d)",
                    op, (long long)lda, (long long)ldb, (long long)ldc, (long long)need_a,
                    (long long)need_b, (long long)need_c, (long long)m, (long long)n, (long long)k,
                    (int)ta, (int)tb);
  if (!c || (k > 0 && (!a || !b)))
    return em_error(EM_ERR_ARG, "%s: NULL matrix pointer for [%lld x %lld] @ [%lld x %lld]", op,
                    (long long)m, (long long)k, (long long)k, (long long)n);

  if (k == 0) return scale_c(device, dt, m, n, beta, c, ldc, stride_c, batch);
  emc_device *d = NULL;
  cublasHandle_t blas = NULL;
  em_status s = emc_device_get(device, op, &d);
  if (!s) s = device_blas(d, op, &blas);
  if (s) return s;
  cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  switch (dt) {
    case EM_F32: {
      float al = (float)alpha, be = (float)beta;
      st = api.sgemm(blas, opb, opa, (int)n, (int)m, (int)k, &al, b, (int)ldb,
                                     stride_b, a, (int)lda, stride_a, &be, c, (int)ldc, stride_c,
                                     (int)batch);
      break;
    }
    case EM_F64:
      st = api.dgemm(blas, opb, opa, (int)n, (int)m, (int)k, &alpha, b,
                                     (int)ldb, stride_b, a, (int)lda, stride_a, &beta, c,
                                     (int)ldc, stride_c, (int)batch);
      break;
    case EM_BF16: {
      float al = (float)alpha, be = (float)beta;
      st = api.gemm_ex(blas, opb, opa, (int)n, (int)m, (int)k, &al, b,
                                      CUDA_R_16BF, (int)ldb, stride_b, a, CUDA_R_16BF, (int)lda,
                                      stride_a, &be, c, CUDA_R_16BF, (int)ldc, stride_c,
                                      (int)batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      break;
    }
    default:
      return em_error(EM_ERR_DTYPE,
                      "%s: dtype %s is not supported (supported: float32, float64, bfloat16)", op,
                      em_dtype_name(dt));
  }
  if (st != CUBLAS_STATUS_SUCCESS) return emc_blas_error(st, op);
  return emc_launch_status(op);
}
