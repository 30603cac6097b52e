/*
** cuda_elementwise.cu -- copy (with dtype casts), fill, unary ops and
** their derivatives, binary ops with broadcasting, and where.
**
** Views are coalesced on the host (emc_coalesce); when every operand is
** then a dense run or a broadcast scalar, kernels index with i * stride,
** otherwise each thread turns its flat index into per-operand offsets.
** The op is a kernel argument, not a template parameter: every thread of
** a launch takes the same branch, and it keeps the number of kernel
** instances (and the compile time) down. The unary ops' and derivatives'
** element rules are core/include/ember_unary_rules.h, which the CPU
** backend includes too; the other formulas are those of cpu_elementwise.c.
** gpu_vs_cpu checks both.
*/
#include "cuda_kernels.cuh"

/* Offsets of element i for the first N operands of a layout. */
template <int N>
__device__ __forceinline__ void layout_offsets(const emc_layout &L, bool linear, int64_t i,
                                               int64_t off[N]) {
  if (linear) {
    for (int k = 0; k < N; k++) off[k] = i * L.stride[k][0];
    return;
  }
  for (int k = 0; k < N; k++) off[k] = 0;
  for (int d = L.ndim - 1; d >= 0; d--) {
    int64_t s = L.shape[d], c = i % s;
    i /= s;
    for (int k = 0; k < N; k++) off[k] += c * L.stride[k][d];
  }
}

/* Checks that views share a shape and builds their coalesced layout. */
static em_status make_layout(const char *op, int nops, const em_kview *const *v, emc_layout *L,
                             int64_t *numel) {
  for (int k = 1; k < nops; k++) {
    bool same = v[k]->ndim == v[0]->ndim;
    for (int d = 0; same && d < v[0]->ndim; d++) same = v[k]->shape[d] == v[0]->shape[d];
    if (!same)
      return em_error(EM_ERR_SHAPE, "cuda %s: operand %d has %d dims and operand 0 %d, or a "
                      "different size, expected one shape", op, k, v[k]->ndim, v[0]->ndim);
  }
  const int64_t *strides[EMC_MAX_OPS];
  for (int k = 0; k < nops; k++) strides[k] = v[k]->stride;
  *numel = emc_coalesce(v[0]->ndim, v[0]->shape, nops, strides, L);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* copy and fill                                                       */
/* ------------------------------------------------------------------ */

template <class D, class S>
__global__ void copy_kernel(emc_layout L, bool linear, int64_t n, D *dst, const S *src) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[2];
    layout_offsets<2>(L, linear, i, off);
    dst[off[0]] = cast_to<D>(src[off[1]]);
  }
}

template <class D, class S>
static void launch_copy(emc_device *d, const emc_layout &L, bool linear, int64_t n, void *dst,
                        const void *src) {
  auto k = copy_kernel<D, S>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             (D *)dst, (const S *)src);
}

template <class D>
static em_status copy_from(emc_device *d, em_dtype src_dt, const emc_layout &L, bool linear,
                           int64_t n, void *dst, const void *src) {
  EMC_SWITCH_ALL(src_dt, S,
                 return emc_bad_dtype("copy", src_dt, "float32, float64, int64, bool, bfloat16"),
                 launch_copy<D, S>(d, L, linear, n, dst, src))
  return EM_OK;
}

extern "C" em_status emc_copy(int device, const em_kview *dst, const em_kview *src) {
  const char *op = "cuda copy";
  const em_kview *v[2] = {dst, src};
  emc_layout L;
  int64_t n = 0;
  em_status s = make_layout("copy", 2, v, &L, &n);
  if (s || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  bool linear = emc_layout_is_linear(&L);
  /* Same dtype and one dense run on both sides: a plain memcpy. */
  if (dst->dtype == src->dtype && linear && L.stride[0][0] == 1 && L.stride[1][0] == 1) {
    size_t bytes = (size_t)n * em_dtype_size(dst->dtype);
    EMC_CHECK(cudaMemcpyAsync(dst->data, src->data, bytes, cudaMemcpyDeviceToDevice, d->stream),
              op);
    return EM_OK;
  }
  EMC_SWITCH_ALL(dst->dtype, D,
                 return emc_bad_dtype("copy", dst->dtype, "float32, float64, int64, bool, bfloat16"),
                 s = copy_from<D>(d, src->dtype, L, linear, n, dst->data, src->data))
  return s ? s : emc_launch_status(op);
}

template <class T>
__global__ void fill_kernel(emc_layout L, bool linear, int64_t n, T *dst, T value) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[1];
    layout_offsets<1>(L, linear, i, off);
    dst[off[0]] = value;
  }
}

template <class T>
static void launch_fill(emc_device *d, const emc_layout &L, bool linear, int64_t n, void *dst,
                        T value) {
  auto k = fill_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             (T *)dst, value);
}

/* The value in each dtype, converted on the host as the CPU backend does. */
static float host_f32(double v) { return (float)v; }
static bf16_t host_bf16(double v) {
  uint16_t h = em_f32_to_bf16((float)v);
  bf16_t r;
  memcpy((void *)&r, &h, sizeof h);
  return r;
}

extern "C" em_status emc_fill(int device, const em_kview *dst, double value) {
  const char *op = "cuda fill";
  const em_kview *v[1] = {dst};
  emc_layout L;
  int64_t n = 0;
  em_status s = make_layout("fill", 1, v, &L, &n);
  if (s || n == 0) return s;
  if (dst->dtype == EM_I64 &&
      (value != value || value >= 9223372036854775808.0 || value < -9223372036854775808.0))
    return em_error(EM_ERR_ARG, "cuda fill: value %g does not fit in int64", value);
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  bool linear = emc_layout_is_linear(&L);
  switch (dst->dtype) {
    case EM_F32: launch_fill<float>(d, L, linear, n, dst->data, host_f32(value)); break;
    case EM_F64: launch_fill<double>(d, L, linear, n, dst->data, value); break;
    case EM_I64: launch_fill<int64_t>(d, L, linear, n, dst->data, (int64_t)value); break;
    case EM_BOOL: launch_fill<uint8_t>(d, L, linear, n, dst->data, (uint8_t)(value != 0)); break;
    case EM_BF16: launch_fill<bf16_t>(d, L, linear, n, dst->data, host_bf16(value)); break;
    default: return emc_bad_dtype("fill", dst->dtype, "float32, float64, int64, bool, bfloat16");
  }
  return emc_launch_status(op);
}

/* ------------------------------------------------------------------ */
/* unary                                                               */
/* ------------------------------------------------------------------ */

/* The element rules, shared with the CPU backend: included once for
** float and once for double, with unsuffixed names, so that u_exp(x, a, b)
** and the like are overloads on the compute type (m_exp ... are
** cuda_kernels.cuh's). */
#define FN(name) name
#define ACC float
#include "ember_unary_rules.h"
#undef ACC
#define ACC double
#include "ember_unary_rules.h"
#undef ACC
#undef FN

template <class A> __device__ __forceinline__ A unary_f(int op, A x, A a, A b) {
  switch (op) {
    case EM_NEG: return u_neg(x, a, b);
    case EM_EXP: return u_exp(x, a, b);
    case EM_LOG: return u_log(x, a, b);
    case EM_SQRT: return u_sqrt(x, a, b);
    case EM_RSQRT: return u_rsqrt(x, a, b);
    case EM_ABS: return u_abs(x, a, b);
    case EM_TANH: return u_tanh(x, a, b);
    case EM_SIGMOID: return u_sigmoid(x, a, b);
    case EM_RELU: return u_relu(x, a, b);
    case EM_GELU: return u_gelu(x, a, b);
    case EM_GELU_TANH: return u_gelu_tanh(x, a, b);
    case EM_ELU: return u_elu(x, a, b);
    case EM_CLAMP: return u_clamp(x, a, b);
    case EM_POW_SCALAR:
      return a == (A)2 ? u_square(x, a, b) : (a == (A)1 ? u_ident(x, a, b) : u_pow(x, a, b));
    case EM_AFFINE: return u_affine(x, a, b);
    case EM_SILU: return u_silu(x, a, b);
    case EM_SIN: return u_sin(x, a, b);
    case EM_LOG1P: return u_log1p(x, a, b);
    case EM_EXPM1: return u_expm1(x, a, b);
    case EM_ERF: return u_erf(x, a, b);
    case EM_ATAN: return u_atan(x, a, b);
    case EM_ASIN: return u_asin(x, a, b);
    case EM_ACOS: return u_acos(x, a, b);
    case EM_ERFINV: return u_erfinv(x, a, b);
    case EM_LGAMMA: return u_lgamma(x, a, b);
    case EM_DIGAMMA: return u_digamma(x, a, b);
    case EM_COS: return u_cos(x, a, b);
    case EM_FLOOR: return u_floor(x, a, b);
    case EM_CEIL: return u_ceil(x, a, b);
    case EM_ROUND: return u_round(x, a, b);
    case EM_TRUNC: return u_trunc(x, a, b);
    case EM_SIGN: return u_sign(x, a, b);
    default: return x;
  }
}

template <class T>
__global__ void unary_float_kernel(emc_layout L, bool linear, int64_t n, int op, T *out,
                                   const T *x, double alpha, double beta) {
  typedef typename Acc<T>::type A;
  const A a = (A)alpha, b = (A)beta;
  EMC_GRID_LOOP(i, n) {
    int64_t off[2];
    layout_offsets<2>(L, linear, i, off);
    out[off[0]] = from_acc<T>(unary_f<A>(op, to_acc(x[off[1]]), a, b));
  }
}

/* int64 negation and abs wrap at INT64_MIN (through uint64); floor, ceil,
** round and trunc are the identity; NOT is bool. */
__global__ void unary_int_kernel(emc_layout L, bool linear, int64_t n, int op, void *out,
                                 const void *x) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[2];
    layout_offsets<2>(L, linear, i, off);
    if (op == EM_NOT) {
      ((uint8_t *)out)[off[0]] = (uint8_t)(((const uint8_t *)x)[off[1]] == 0);
    } else {
      int64_t v = ((const int64_t *)x)[off[1]];
      uint64_t neg = 0u - (uint64_t)v;
      int64_t r = v;
      if (op == EM_NEG) r = (int64_t)neg;
      else if (op == EM_ABS) r = v < 0 ? (int64_t)neg : v;
      else if (op == EM_SIGN) r = (v > 0) - (v < 0);
      ((int64_t *)out)[off[0]] = r;
    }
  }
}


template <class T>
static void launch_unary_float(emc_device *d, const emc_layout &L, bool linear, int64_t n, int op,
                               void *out, const void *x, double alpha, double beta) {
  auto k = unary_float_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             op, (T *)out, (const T *)x, alpha, beta);
}

extern "C" em_status emc_unary(int device, em_unary_op op, const em_kview *out,
                               const em_kview *x, double alpha, double beta) {
  if ((unsigned)op >= EM_NUNARY) return em_error(EM_ERR_ARG, "cuda unary: unknown op %d", (int)op);
  char kernel[40];
  snprintf(kernel, sizeof kernel, "unary %s", em_kernel_unary_name(op));
  if (out->dtype != x->dtype)
    return em_error(EM_ERR_DTYPE, "cuda %s: output is %s and input %s, expected one dtype",
                    kernel, emc_dtype_name(out->dtype), emc_dtype_name(x->dtype));
  em_dtype dt = x->dtype;
  bool is_int = op == EM_NOT || dt == EM_I64;
  if (op == EM_NOT && dt != EM_BOOL) return emc_bad_dtype(kernel, dt, "bool");
  if (dt == EM_I64 && !em_unary_takes_int64(op))
    return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16");
  if (!is_int && dt != EM_F32 && dt != EM_F64 && dt != EM_BF16)
    return emc_bad_dtype(kernel, dt,
                         em_unary_takes_int64(op) ? "float32, float64, bfloat16, int64"
                                                  : "float32, float64, bfloat16");
  const em_kview *v[2] = {out, x};
  emc_layout L;
  int64_t n = 0;
  em_status s = make_layout(kernel, 2, v, &L, &n);
  if (s || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  bool linear = emc_layout_is_linear(&L);
  if (is_int) {
    auto k = unary_int_kernel;
    EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
               (int)op, out->data, (const void *)x->data);
  } else if (dt == EM_F32) {
    launch_unary_float<float>(d, L, linear, n, op, out->data, x->data, alpha, beta);
  } else if (dt == EM_F64) {
    launch_unary_float<double>(d, L, linear, n, op, out->data, x->data, alpha, beta);
  } else {
    launch_unary_float<bf16_t>(d, L, linear, n, op, out->data, x->data, alpha, beta);
  }
  return emc_launch_status(kernel);
}

/* ------------------------------------------------------------------ */
/* unary derivatives (the d_ rules of ember_unary_rules.h)              */
/* ------------------------------------------------------------------ */

template <class A> __device__ __forceinline__ A unary_grad(int op, A g, A x, A y, A a, A b) {
  switch (op) {
    case EM_NEG: return d_neg(g, x, y, a, b);
    case EM_EXP: return d_exp(g, x, y, a, b);
    case EM_LOG: return d_log(g, x, y, a, b);
    case EM_SQRT: return d_sqrt(g, x, y, a, b);
    case EM_RSQRT: return d_rsqrt(g, x, y, a, b);
    case EM_ABS: return d_abs(g, x, y, a, b);
    case EM_TANH: return d_tanh(g, x, y, a, b);
    case EM_SIGMOID: return d_sigmoid(g, x, y, a, b);
    case EM_RELU: return d_relu(g, x, y, a, b);
    case EM_GELU: return d_gelu(g, x, y, a, b);
    case EM_GELU_TANH: return d_gelu_tanh(g, x, y, a, b);
    case EM_ELU: return d_elu(g, x, y, a, b);
    case EM_CLAMP: return d_clamp(g, x, y, a, b);
    case EM_POW_SCALAR: return a == (A)0 ? d_zero(g, x, y, a, b) : d_pow(g, x, y, a, b);
    case EM_AFFINE: return d_affine(g, x, y, a, b);
    case EM_SILU: return d_silu(g, x, y, a, b);
    case EM_SIN: return d_sin(g, x, y, a, b);
    case EM_LOG1P: return d_log1p(g, x, y, a, b);
    case EM_EXPM1: return d_expm1(g, x, y, a, b);
    case EM_ERF: return d_erf(g, x, y, a, b);
    case EM_ATAN: return d_atan(g, x, y, a, b);
    case EM_ASIN: return d_asin(g, x, y, a, b);
    case EM_ACOS: return d_acos(g, x, y, a, b);
    case EM_ERFINV: return d_erfinv(g, x, y, a, b);
    case EM_LGAMMA: return d_lgamma(g, x, y, a, b);
    case EM_DIGAMMA: return d_digamma(g, x, y, a, b);
    case EM_COS: return d_cos(g, x, y, a, b);
    case EM_FLOOR: case EM_CEIL: case EM_ROUND: case EM_TRUNC: case EM_SIGN:
      return d_zero(g, x, y, a, b);
    default: return g;
  }
}

template <class T>
__global__ void unary_grad_kernel(int64_t n, int op, T *gx, const T *gy, const T *x, const T *y,
                                  double alpha, double beta) {
  typedef typename Acc<T>::type A;
  const A a = (A)alpha, b = (A)beta;
  EMC_GRID_LOOP(i, n) {
    A xv = x ? to_acc(x[i]) : (A)0, yv = y ? to_acc(y[i]) : (A)0;
    gx[i] = from_acc<T>(unary_grad<A>(op, to_acc(gy[i]), xv, yv, a, b));
  }
}

template <class T>
static void launch_unary_grad(emc_device *d, int64_t n, int op, void *gx, const void *gy,
                              const void *x, const void *y, double alpha, double beta) {
  auto k = unary_grad_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, n, op, (T *)gx,
             (const T *)gy, (const T *)x, (const T *)y, alpha, beta);
}

extern "C" em_status emc_unary_backward(int device, em_unary_op op, em_dtype dt, int64_t n,
                                        void *gx, const void *gy, const void *x, const void *y,
                                        double alpha, double beta) {
  if ((unsigned)op >= EM_NUNARY)
    return em_error(EM_ERR_ARG, "cuda unary_backward: unknown op %d", (int)op);
  const char *name = em_kernel_unary_name(op);
  if (op == EM_NOT)
    return em_error(EM_ERR_ARG, "cuda unary_backward not: logical not has no derivative");
  if (n < 0) return em_error(EM_ERR_ARG, "cuda unary_backward %s: n = %lld", name, (long long)n);
  if (n == 0) return EM_OK;
  if (!gx || !gy)
    return em_error(EM_ERR_ARG, "cuda unary_backward %s: gx and gy must not be NULL", name);
  if (em_unary_grad_needs_x(op) && !x)
    return em_error(EM_ERR_ARG, "cuda unary_backward %s: needs the forward input x, got NULL", name);
  if (em_unary_grad_needs_y(op) && !y)
    return em_error(EM_ERR_ARG, "cuda unary_backward %s: needs the forward output y, got NULL", name);
  char kernel[48];
  snprintf(kernel, sizeof kernel, "unary_backward %s", name);
  emc_device *d = NULL;
  em_status s = emc_device_get(device, kernel, &d);
  if (s) return s;
  EMC_SWITCH_FLOAT(dt, T, return emc_bad_dtype(kernel, dt, "float32, float64, bfloat16"),
                   launch_unary_grad<T>(d, n, op, gx, gy, x, y, alpha, beta))
  return emc_launch_status(kernel);
}

/* ------------------------------------------------------------------ */
/* binary                                                              */
/* ------------------------------------------------------------------ */

static bool is_comparison(int op) { return op >= EM_EQ && op <= EM_GE; }
static bool is_logical(int op) { return op >= EM_AND && op <= EM_XOR; }

template <class A> __device__ __forceinline__ A fmax_nan(A x, A y) {
  return x != x ? x : (y != y ? y : (x > y ? x : y));
}
template <class A> __device__ __forceinline__ A fmin_nan(A x, A y) {
  return x != x ? x : (y != y ? y : (x < y ? x : y));
}

template <class A> __device__ __forceinline__ bool compare(int op, A x, A y) {
  switch (op) {
    case EM_EQ: return x == y;
    case EM_NE: return x != y;
    case EM_LT: return x < y;
    case EM_LE: return x <= y;
    case EM_GT: return x > y;
    default: return x >= y; /* EM_GE */
  }
}

/* Floats (bfloat16 computes in float): arithmetic into T, comparisons into bool. */
template <class T>
__global__ void binary_float_kernel(emc_layout L, bool linear, int64_t n, int op, void *out,
                                    const T *a, const T *b) {
  typedef typename Acc<T>::type A;
  EMC_GRID_LOOP(i, n) {
    int64_t off[3];
    layout_offsets<3>(L, linear, i, off);
    A x = to_acc(a[off[1]]), y = to_acc(b[off[2]]);
    if (op >= EM_EQ && op <= EM_GE) {
      ((uint8_t *)out)[off[0]] = (uint8_t)compare<A>(op, x, y);
      continue;
    }
    A r;
    switch (op) {
      case EM_ADD: r = x + y; break;
      case EM_SUB: r = x - y; break;
      case EM_MUL: r = x * y; break;
      case EM_DIV: r = x / y; break;
      case EM_POW: r = m_pow(x, y); break;
      case EM_MAXIMUM: r = fmax_nan(x, y); break;
      case EM_FMOD: r = m_fmod(x, y); break; /* C's fmod, exact: the sign of x */
      default: r = fmin_nan(x, y); break; /* EM_MINIMUM */
    }
    ((T *)out)[off[0]] = from_acc<T>(r);
  }
}

/* int64 wraps through uint64; division floors (as Lua's //), fmod is C's
** %; a zero divisor or a negative power gives 0 and raises the flag (1 or 2). */
__global__ void binary_i64_kernel(emc_layout L, bool linear, int64_t n, int op, void *out,
                                  const int64_t *a, const int64_t *b, int64_t *flag) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[3];
    layout_offsets<3>(L, linear, i, off);
    int64_t x = a[off[1]], y = b[off[2]];
    if (op >= EM_EQ && op <= EM_GE) {
      ((uint8_t *)out)[off[0]] = (uint8_t)compare<int64_t>(op, x, y);
      continue;
    }
    int64_t r;
    switch (op) {
      case EM_ADD: r = (int64_t)((uint64_t)x + (uint64_t)y); break;
      case EM_SUB: r = (int64_t)((uint64_t)x - (uint64_t)y); break;
      case EM_MUL: r = (int64_t)((uint64_t)x * (uint64_t)y); break;
      case EM_DIV:
        if (y == 0) {
          flag[0] = 1;
          r = 0;
        } else if (y == -1) {
          r = (int64_t)(0u - (uint64_t)x); /* INT64_MIN / -1 would trap */
        } else {
          r = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) r--;
        }
        break;
      case EM_POW: {
        if (y < 0) {
          flag[0] = 2;
          r = 0;
          break;
        }
        uint64_t acc = 1, base = (uint64_t)x;
        while (y) {
          if (y & 1) acc *= base;
          base *= base;
          y >>= 1;
        }
        r = (int64_t)acc;
        break;
      }
      case EM_FMOD: /* C's %, the sign of x; INT64_MIN % -1 would trap */
        if (y == 0) {
          flag[0] = 1;
          r = 0;
        } else {
          r = y == -1 ? 0 : x % y;
        }
        break;
      case EM_MAXIMUM: r = x > y ? x : y; break;
      default: r = x < y ? x : y; break; /* EM_MINIMUM */
    }
    ((int64_t *)out)[off[0]] = r;
  }
}

/* bool operands read "nonzero is true". */
__global__ void binary_bool_kernel(emc_layout L, bool linear, int64_t n, int op, uint8_t *out,
                                   const uint8_t *a, const uint8_t *b) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[3];
    layout_offsets<3>(L, linear, i, off);
    int x = a[off[1]] != 0, y = b[off[2]] != 0, r;
    switch (op) {
      case EM_AND: case EM_MINIMUM: r = x & y; break;
      case EM_OR: case EM_MAXIMUM: r = x | y; break;
      case EM_XOR: r = x ^ y; break;
      default: r = compare<int>(op, x, y); break;
    }
    out[off[0]] = (uint8_t)r;
  }
}


template <class T>
static void launch_binary_float(emc_device *d, const emc_layout &L, bool linear, int64_t n,
                                int op, void *out, const void *a, const void *b) {
  auto k = binary_float_kernel<T>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             op, out, (const T *)a, (const T *)b);
}

extern "C" em_status emc_binary(int device, em_binary_op op, const em_kview *out,
                                const em_kview *a, const em_kview *b) {
  if ((unsigned)op >= EM_NBINARY) return em_error(EM_ERR_ARG, "cuda binary: unknown op %d", (int)op);
  char kernel[32];
  snprintf(kernel, sizeof kernel, "binary %s", em_kernel_binary_name(op));
  if (a->dtype != b->dtype)
    return em_error(EM_ERR_DTYPE, "cuda %s: operands are %s and %s, expected one dtype", kernel,
                    emc_dtype_name(a->dtype), emc_dtype_name(b->dtype));
  em_dtype dt = a->dtype;
  em_dtype want = (is_comparison(op) || is_logical(op)) ? EM_BOOL : dt;
  if (out->dtype != want)
    return em_error(EM_ERR_DTYPE, "cuda %s: output is %s, expected %s for %s operands", kernel,
                    emc_dtype_name(out->dtype), emc_dtype_name(want), emc_dtype_name(dt));
  bool ok;
  switch (dt) {
    case EM_F32: case EM_F64: case EM_BF16: case EM_I64: ok = !is_logical(op); break;
    case EM_BOOL: ok = is_logical(op) || is_comparison(op) || op == EM_MAXIMUM || op == EM_MINIMUM; break;
    default: ok = false; break;
  }
  if (!ok) {
    const char *supported = is_logical(op) ? "bool"
                          : is_comparison(op) || op == EM_MAXIMUM || op == EM_MINIMUM
                              ? "float32, float64, bfloat16, int64, bool"
                              : "float32, float64, bfloat16, int64";
    return emc_bad_dtype(kernel, dt, supported);
  }
  const em_kview *v[3] = {out, a, b};
  emc_layout L;
  int64_t n = 0;
  em_status s = make_layout(kernel, 3, v, &L, &n);
  if (s || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, kernel, &d))) return s;
  bool linear = emc_layout_is_linear(&L);
  unsigned grid = emc_grid(emc_blocks_for(n, EMC_THREADS));
  switch (dt) {
    case EM_F32: launch_binary_float<float>(d, L, linear, n, op, out->data, a->data, b->data); break;
    case EM_F64: launch_binary_float<double>(d, L, linear, n, op, out->data, a->data, b->data); break;
    case EM_BF16: launch_binary_float<bf16_t>(d, L, linear, n, op, out->data, a->data, b->data); break;
    case EM_BOOL: {
      auto k = binary_bool_kernel;
      EMC_LAUNCH(k, grid, EMC_THREADS, d->stream, L, linear, n, (int)op, (uint8_t *)out->data,
                 (const uint8_t *)a->data, (const uint8_t *)b->data);
      break;
    }
    default: { /* EM_I64 */
      bool checks = op == EM_DIV || op == EM_POW || op == EM_FMOD;
      int64_t *flag = NULL;
      if (checks && (s = emc_flag_new(d, kernel, &flag))) return s;
      auto k = binary_i64_kernel;
      EMC_LAUNCH(k, grid, EMC_THREADS, d->stream, L, linear, n, (int)op, out->data,
                 (const int64_t *)a->data, (const int64_t *)b->data, flag);
      if (!checks) break;
      if ((s = emc_launch_status(kernel))) {
        emc_scratch_free(d, flag);
        return s;
      }
      int64_t h[2];
      if ((s = emc_flag_fetch(d, flag, kernel, h))) return s;
      if (h[0] == 1) return em_error(EM_ERR_ARG, "cuda %s: integer division by zero", kernel);
      if (h[0] == 2) return em_error(EM_ERR_ARG, "cuda binary pow: int64 raised to a negative power");
      return EM_OK;
    }
  }
  return emc_launch_status(kernel);
}

/* ------------------------------------------------------------------ */
/* where                                                               */
/* ------------------------------------------------------------------ */

/* Only the element size matters, so every dtype works. */
template <class W>
__global__ void where_kernel(emc_layout L, bool linear, int64_t n, W *out, const uint8_t *cond,
                             const W *a, const W *b) {
  EMC_GRID_LOOP(i, n) {
    int64_t off[4];
    layout_offsets<4>(L, linear, i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

template <class W>
static void launch_where(emc_device *d, const emc_layout &L, bool linear, int64_t n,
                         const em_kview *out, const em_kview *cond, const em_kview *a,
                         const em_kview *b) {
  auto k = where_kernel<W>;
  EMC_LAUNCH(k, emc_grid(emc_blocks_for(n, EMC_THREADS)), EMC_THREADS, d->stream, L, linear, n,
             (W *)out->data, (const uint8_t *)cond->data, (const W *)a->data, (const W *)b->data);
}

extern "C" em_status emc_where(int device, const em_kview *out, const em_kview *cond,
                               const em_kview *a, const em_kview *b) {
  const char *op = "cuda where";
  if (cond->dtype != EM_BOOL)
    return em_error(EM_ERR_DTYPE, "cuda where: condition is %s, expected bool",
                    emc_dtype_name(cond->dtype));
  if (a->dtype != b->dtype || out->dtype != a->dtype)
    return em_error(EM_ERR_DTYPE, "cuda where: out, a and b are %s, %s and %s, expected one dtype",
                    emc_dtype_name(out->dtype), emc_dtype_name(a->dtype), emc_dtype_name(b->dtype));
  const em_kview *v[4] = {out, cond, a, b};
  emc_layout L;
  int64_t n = 0;
  em_status s = make_layout("where", 4, v, &L, &n);
  if (s || n == 0) return s;
  emc_device *d = NULL;
  if ((s = emc_device_get(device, op, &d))) return s;
  bool linear = emc_layout_is_linear(&L);
  switch (em_dtype_size(out->dtype)) {
    case 1: launch_where<uint8_t>(d, L, linear, n, out, cond, a, b); break;
    case 2: launch_where<uint16_t>(d, L, linear, n, out, cond, a, b); break;
    case 4: launch_where<uint32_t>(d, L, linear, n, out, cond, a, b); break;
    case 8: launch_where<uint64_t>(d, L, linear, n, out, cond, a, b); break;
    default: return emc_bad_dtype("where", out->dtype, "float32, float64, int64, bool, bfloat16");
  }
  return emc_launch_status(op);
}
