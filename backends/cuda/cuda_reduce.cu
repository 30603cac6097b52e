/*
** cuda_reduce.cu -- sum, mean, var, max and min along the middle dim of a
** contiguous [outer, n, inner] tensor.
**
** A block is bx threads along inner (neighbouring threads read
** neighbouring addresses) by by threads along n; each thread folds its
** elements into a state, the block folds the states in shared memory.
** When outer*inner alone cannot fill the GPU, n is cut into pieces whose
** states go to a scratch buffer, and a second pass folds those
** (emc_plan_reduce decides, test_cuda_plan checks the partition).
**
** States: sums in double (int64 wraps through uint64, as the CPU backend);
** max/min keep the value and its position, the first NaN wins and ties go
** to the earlier position, so the answer does not depend on the order of
** folding; var is Chan et al.'s parallel form of Welford's update.
*/
#include "cuda_kernels.cuh"

#include <type_traits>

/* The widened value of an element: floats to their compute type. */
__device__ __forceinline__ float wide(float x) { return x; }
__device__ __forceinline__ float wide(bf16_t x) { return __bfloat162float(x); }
__device__ __forceinline__ double wide(double x) { return x; }
__device__ __forceinline__ int64_t wide(int64_t x) { return x; }

template <class T> __device__ __forceinline__ T narrow(float v) { return cast_from_double<T>(v); }
template <class T> __device__ __forceinline__ T narrow(double v) { return cast_from_double<T>(v); }
template <class T> __device__ __forceinline__ T narrow(int64_t v) { return cast_from_i64<T>(v); }
template <class T> __device__ __forceinline__ T narrow(uint64_t v) {
  return cast_from_i64<T>((int64_t)v);
}

/* ---- the states ---------------------------------------------------- */

/* Sum (and mean) with accumulator A: double for floats, uint64 for int64. */
template <class A> struct SumOp {
  struct State { A s; };
  bool mean;
  __device__ State init() const { return State{(A)0}; }
  template <class T> __device__ State load(T x, int64_t) const { return State{(A)wide(x)}; }
  __device__ State combine(State a, State b) const { return State{(A)(a.s + b.s)}; }
  template <class T> __device__ void finish(State st, int64_t n, T *out, int64_t *) const {
    if (mean) *out = narrow<T>((double)st.s / (double)n);
    else *out = narrow<T>(st.s);
  }
};

/* Max or min with its position; i < 0 is "no element yet". */
template <class A> struct ExtOp {
  struct State { A v; int64_t i; };
  bool is_max;
  __device__ State init() const { return State{(A)0, -1}; }
  template <class T> __device__ State load(T x, int64_t j) const { return State{wide(x), j}; }
  /* Is b preferred over a? */
  __device__ bool better(State b, State a) const {
    if (b.i < 0) return false;
    if (a.i < 0) return true;
    bool an = a.v != a.v, bn = b.v != b.v;
    if (an || bn) return an && bn ? b.i < a.i : bn;
    if (b.v == a.v) return b.i < a.i;
    return is_max ? b.v > a.v : b.v < a.v;
  }
  __device__ State combine(State a, State b) const { return better(b, a) ? b : a; }
  template <class T> __device__ void finish(State st, int64_t, T *out, int64_t *idx) const {
    *out = narrow<T>(st.v);
    if (idx) *idx = st.i;
  }
};

/* Variance: count, mean and sum of squared deviations, all in double. */
struct VarOp {
  struct State { double n, mean, m2; };
  int correction;
  __device__ State init() const { return State{0, 0, 0}; }
  template <class T> __device__ State load(T x, int64_t) const {
    return State{1, (double)wide(x), 0};
  }
  __device__ State combine(State a, State b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    double n = a.n + b.n, d = b.mean - a.mean;
    return State{n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)};
  }
  template <class T> __device__ void finish(State st, int64_t n, T *out, int64_t *) const {
    double dof = (double)(n - correction > 0 ? n - correction : 0);
    *out = narrow<T>(st.m2 / dof);
  }
};

/* ---- the kernel ------------------------------------------------------ */

/* One pass of a plan over `len` positions along the reduced dim. The first
** pass reads elements (PARTIAL false); the second reads the states the
** first left in `part`. A pass whose plan is split writes states to part,
** otherwise it finishes into out/idx. n_total is the full length of the
** reduced dim (for mean and var). */
template <class T, class Op, bool PARTIAL>
__global__ void __launch_bounds__(EMC_THREADS)
reduce_kernel(emc_reduce_plan p, int64_t len, int64_t inner, int64_t n_total, const T *in,
              typename Op::State *part, T *out, int64_t *idx, Op op) {
  typedef typename Op::State State;
  __shared__ State sm[EMC_THREADS];
  const int tx = threadIdx.x, ty = threadIdx.y, bx = p.bx, by = p.by;
  for (int64_t w = blockIdx.x; w < p.items; w += gridDim.x) {
    int64_t o, ib, s;
    emc_reduce_item(&p, w, &o, &ib, &s);
    const int64_t i = ib * bx + tx;
    State st = op.init();
    if (i < inner) {
      int64_t j0 = s * p.chunk, j1 = j0 + p.chunk < len ? j0 + p.chunk : len;
      for (int64_t j = j0 + ty; j < j1; j += by) {
        int64_t at = (o * len + j) * inner + i;
        if constexpr (PARTIAL) st = op.combine(st, part[at]);
        else st = op.combine(st, op.load(in[at], j));
      }
    }
    sm[ty * bx + tx] = st;
    __syncthreads();
    for (int half = by / 2; half > 0; half /= 2) {
      if (ty < half) sm[ty * bx + tx] = op.combine(sm[ty * bx + tx], sm[(ty + half) * bx + tx]);
      __syncthreads();
    }
    if (ty == 0 && i < inner) {
      if (!PARTIAL && p.nsplit > 1) part[(o * p.nsplit + s) * inner + i] = sm[tx];
      else op.finish(sm[tx], n_total, out + o * inner + i, idx ? idx + o * inner + i : nullptr);
    }
    __syncthreads(); /* sm is refilled by the next item */
  }
}

template <class T, class Op>
static em_status run_reduce(emc_device *d, const char *name, Op op, void *out, int64_t *idx,
                            const void *in, int64_t outer, int64_t n, int64_t inner) {
  typedef typename Op::State State;
  emc_reduce_plan p;
  emc_plan_reduce(outer, n, inner, d->sm_count, &p);
  State *part = nullptr;
  if (p.nsplit > 1) {
    size_t bytes = (size_t)outer * (size_t)p.nsplit * (size_t)inner * sizeof(State);
    em_status s = emc_scratch(d, bytes, name, (void **)&part);
    if (s) return s;
  }
  auto first = reduce_kernel<T, Op, false>;
  EMC_LAUNCH(first, emc_grid(p.grid), dim3(p.bx, p.by), d->stream, p, n, inner, n,
             (const T *)in, part, (T *)out, idx, op);
  if (p.nsplit > 1) {
    emc_reduce_plan p2;
    emc_plan_reduce(outer, p.nsplit, inner, 0, &p2);
    auto second = reduce_kernel<T, Op, true>;
    EMC_LAUNCH(second, emc_grid(p2.grid), dim3(p2.bx, p2.by), d->stream, p2, p.nsplit, inner, n,
               (const T *)in, part, (T *)out, idx, op);
    emc_scratch_free(d, part); /* stream ordered: reused only after the kernels */
  }
  return emc_launch_status(name);
}

template <class T, class A>
static em_status reduce_typed(emc_device *d, const char *name, em_reduce_op op, void *out,
                              int64_t *idx, const void *in, int64_t outer, int64_t n,
                              int64_t inner, int correction) {
  switch (op) {
    case EM_RED_SUM:
    case EM_RED_MEAN: {
      SumOp<A> o;
      o.mean = op == EM_RED_MEAN;
      return run_reduce<T>(d, name, o, out, idx, in, outer, n, inner);
    }
    case EM_RED_VAR:
      if constexpr (std::is_floating_point<A>::value) { /* never int64 (checked above) */
        VarOp o;
        o.correction = correction;
        return run_reduce<T>(d, name, o, out, idx, in, outer, n, inner);
      }
      return emc_bad_dtype(name, EM_I64, "float32, float64, bfloat16");
    default: {
      ExtOp<decltype(wide(T()))> o;
      o.is_max = op == EM_RED_MAX;
      return run_reduce<T>(d, name, o, out, idx, in, outer, n, inner);
    }
  }
}

static const char *reduce_name(em_reduce_op op) {
  switch (op) {
    case EM_RED_SUM: return "reduce sum";
    case EM_RED_MEAN: return "reduce mean";
    case EM_RED_MAX: return "reduce max";
    case EM_RED_MIN: return "reduce min";
    case EM_RED_VAR: return "reduce var";
    default: return "reduce";
  }
}

extern "C" em_status emc_reduce(int device, em_reduce_op op, em_dtype dt, void *out,
                                int64_t *idx, const void *in, int64_t outer, int64_t n,
                                int64_t inner, int correction) {
  const char *name = reduce_name(op);
  if ((unsigned)op > EM_RED_VAR) return em_error(EM_ERR_ARG, "cuda reduce: unknown op %d", (int)op);
  if (outer < 0 || n < 0 || inner < 0)
    return em_error(EM_ERR_SHAPE, "cuda %s: bad sizes outer=%lld n=%lld inner=%lld", name,
                    (long long)outer, (long long)n, (long long)inner);
  if (outer == 0 || inner == 0) return EM_OK;
  if (n == 0 && (op == EM_RED_MAX || op == EM_RED_MIN))
    return em_error(EM_ERR_SHAPE, "cuda %s: cannot take the %s of an empty dim (size 0)", name,
                    op == EM_RED_MAX ? "max" : "min");
  if (correction < 0)
    return em_error(EM_ERR_ARG, "cuda reduce var: correction %d, expected >= 0", correction);
  bool float_only = op == EM_RED_MEAN || op == EM_RED_VAR;
  if (dt != EM_F32 && dt != EM_F64 && dt != EM_BF16 && (dt != EM_I64 || float_only))
    return emc_bad_dtype(name, dt,
                         float_only ? "float32, float64, bfloat16"
                                    : "float32, float64, bfloat16, int64");
  emc_device *d = NULL;
  em_status s = emc_device_get(device, name, &d);
  if (s) return s;
  switch (dt) {
    case EM_F32:
      return reduce_typed<float, double>(d, name, op, out, idx, in, outer, n, inner, correction);
    case EM_F64:
      return reduce_typed<double, double>(d, name, op, out, idx, in, outer, n, inner, correction);
    case EM_BF16:
      return reduce_typed<bf16_t, double>(d, name, op, out, idx, in, outer, n, inner, correction);
    default:
      return reduce_typed<int64_t, uint64_t>(d, name, op, out, idx, in, outer, n, inner,
                                             correction);
  }
}
