/*
** ember.h -- public C API of libember: tensors, ops, autograd, errors.
**
** Conventions
** - Every fallible function returns an em_status. EM_OK is 0. On failure the
**   thread-local message (em_error_message) names the op, what it got and
**   what it expected. Nothing here calls abort() or exit().
** - Results come back through an `em_tensor **out` argument as a NEW
**   reference; the caller releases it with em_release(). On failure *out is
**   left NULL.
** - Arguments are borrowed: an op never takes ownership of its inputs.
** - Dims in the C API are 0-based; a negative dim counts from the end
**   (-1 is the last). The Lua binding turns 1-based user dims into these.
*/
#ifndef EMBER_H
#define EMBER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EM_VERSION_MAJOR 0
#define EM_VERSION_MINOR 1
#define EM_MAX_DIMS 8

#if defined(__GNUC__)
#define EM_API __attribute__((visibility("default")))
#define EM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define EM_API
#define EM_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

typedef enum em_status {
  EM_OK = 0,
  EM_ERR_ARG,         /* a bad argument or option */
  EM_ERR_SHAPE,       /* shapes that do not fit together */
  EM_ERR_DTYPE,       /* wrong or mismatched dtype */
  EM_ERR_DEVICE,      /* wrong or mismatched device, no such device */
  EM_ERR_INDEX,       /* an index out of range */
  EM_ERR_OOM,         /* an allocation failed or is absurdly large */
  EM_ERR_BACKEND,     /* a backend kernel or driver failed */
  EM_ERR_PLUGIN,      /* a plugin could not be found, loaded or used */
  EM_ERR_AUTOGRAD,    /* misuse of autograd (backward twice, non-scalar...) */
  EM_ERR_IO,          /* a file could not be read or written, or is corrupt */
  EM_ERR_UNSUPPORTED  /* a valid request this build or backend cannot serve */
} em_status;

/* Set the thread's error message and return `code`, so that a failing
** function can `return em_error(EM_ERR_SHAPE, "matmul: ...")`. */
EM_API em_status em_error(em_status code, const char *fmt, ...) EM_PRINTF(2, 3);
EM_API em_status em_verror(em_status code, const char *fmt, va_list ap);
/* The last message set on this thread ("" if none). */
EM_API const char *em_error_message(void);
/* A short name for a status: "shape error", "dtype error", ... */
EM_API const char *em_status_name(em_status s);

/* ------------------------------------------------------------------ */
/* Dtypes and devices                                                  */
/* ------------------------------------------------------------------ */

/* Each dtype once: X(enum, name, bytes per element). The enum, the core's
** name and size tables and the backends' messages are all built from it. */
#define EM_DTYPE_LIST(X)                                                      \
  X(EM_F32, "float32", 4) /* default */                                       \
  X(EM_F64, "float64", 8)                                                     \
  X(EM_I64, "int64", 8)                                                       \
  X(EM_BOOL, "bool", 1)   /* 1 byte, 0 or 1: results of comparisons, masks */ \
  X(EM_BF16, "bfloat16", 2)

typedef enum em_dtype {
#define EM_X_(e, name, size) e,
  EM_DTYPE_LIST(EM_X_)
#undef EM_X_
  EM_NDTYPES
} em_dtype;

/* Bytes per element of a dtype. */
EM_API size_t em_dtype_size(em_dtype dt);
EM_API const char *em_dtype_name(em_dtype dt); /* "float32", ... */
/* Accepts "float32"/"float"/"f32", "float64"/"double"/"f64",
** "int64"/"long"/"i64", "bool", "bfloat16"/"bf16". */
EM_API em_status em_dtype_parse(const char *s, em_dtype *out);
EM_API bool em_dtype_is_float(em_dtype dt);
/* The dtype of a floating tensor made without one (torch.get_default_dtype):
** float32 unless em_set_default_dtype changed it. One value for the process,
** as torch's; the factories, a Lua float next to an int64 or bool tensor,
** int64 / int64 and the float functions of integers use it. */
EM_API em_dtype em_default_dtype(void);
/* Sets it: float32, float64 or bfloat16; another dtype is EM_ERR_DTYPE. */
EM_API em_status em_set_default_dtype(em_dtype dt);
/* torch.promote_types: the dtype two dimensioned tensors of dtypes a and b
** combine to (bool < int64 < float, then the wider float). */
EM_API em_dtype em_promote_types(em_dtype a, em_dtype b);
/* torch.can_cast: false when the cast would lower the category (float to
** int64 or bool, int64 to bool). */
EM_API bool em_can_cast(em_dtype from, em_dtype to);

/* A device is a backend slot (index into the loaded backends) plus a
** device index inside that backend, 0-based here. Users write "cpu",
** "cuda" or "cuda:1" (1-based, as everywhere in the Lua API). */
typedef struct em_device {
  int16_t backend; /* slot of the backend, see em_backend_get() */
  int16_t index;   /* 0-based device index inside the backend */
} em_device;

/* The CPU device. Loads plugins on first use. */
EM_API em_status em_cpu_device(em_device *out);
EM_API em_status em_device_parse(const char *s, em_device *out);
/* Writes "cpu" or "cuda:1" into buf and returns buf. */
EM_API const char *em_device_str(em_device d, char *buf, size_t n);
EM_API bool em_device_eq(em_device a, em_device b);
/* Waits until every kernel and copy queued on device d has finished (a
** no-op on the CPU): for code that hands d's memory to another library. */
EM_API em_status em_device_synchronize(em_device d);

/* ------------------------------------------------------------------ */
/* Tensors                                                             */
/* ------------------------------------------------------------------ */

/* Refcounted memory on one device. Views share it. */
typedef struct em_storage {
  int refcount;
  em_device device;
  void *data;    /* device pointer; host pointer when the backend is host */
  size_t nbytes;
  uint64_t version; /* counts in-place writes (em_tensor_written): autocast's cast
                    ** cache keeps a copy only while this stays the same */
  int saved_refs;   /* of refcount, the aliases autograd nodes saved: an in-place op
                    ** is recorded where no other tensor shares the memory */
} em_storage;

typedef struct em_node em_node;

/* A strided view of a storage. Fields are public for reading (kernels and
** plugins read shape/stride/offset); change them only through the API. */
typedef struct em_tensor {
  int refcount;
  em_dtype dtype;
  int ndim;                       /* 0..EM_MAX_DIMS; 0 is a scalar */
  int64_t shape[EM_MAX_DIMS];
  int64_t stride[EM_MAX_DIMS];    /* in elements */
  int64_t offset;                 /* in elements, into storage */
  em_storage *storage;
  em_device device;
  bool requires_grad;             /* leaf wants .grad, or result of such */
  struct em_tensor *grad;         /* accumulated gradient of a leaf */
  em_node *grad_fn;               /* the node that made it; NULL on leaves */
} em_tensor;

/* Marks t's memory as changed in place (bumps its storage's version). The
** core's in-place ops (copy_, fill_, add_, mul_, the optimizer steps) do it
** themselves; code that writes em_data(t) directly (MPI, a plugin) calls it,
** so that caches of values derived from t (autocast's casts) drop them. */
EM_API void em_tensor_written(em_tensor *t);

/* Reference counting: retain returns t with one more reference; release
** drops one and frees the tensor (and its storage) at zero. */
EM_API em_tensor *em_retain(em_tensor *t);
EM_API void em_release(em_tensor *t); /* NULL is fine */

/* The number of elements, and whether the strides are row-major contiguous. */
EM_API int64_t em_numel(const em_tensor *t);
EM_API bool em_is_contiguous(const em_tensor *t);
/* Pointer to element 0 of the view (device pointer for device tensors). */
EM_API void *em_data(const em_tensor *t);
/* Human-readable "[2, 3]" into buf, returns buf. */
EM_API const char *em_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
/* Memory used by all live storages, in bytes (for GC accounting). */
EM_API size_t em_live_bytes(void);
/* The most em_live_bytes has been since the last em_reset_peak_bytes (or
** the start), and the reset, which sets it to the bytes live now. */
EM_API size_t em_peak_bytes(void);
EM_API void em_reset_peak_bytes(void);

/* Creation. `shape` has `ndim` entries; ndim 0 makes a scalar. */
EM_API em_status em_empty(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev);
EM_API em_status em_zeros(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev);
EM_API em_status em_ones(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev);
EM_API em_status em_full(em_tensor **out, int ndim, const int64_t *shape, double value, em_dtype dt, em_device dev);
/* start, start+step, ... < end (as torch.arange). */
EM_API em_status em_arange(em_tensor **out, double start, double end, double step, em_dtype dt, em_device dev);
/* From host memory laid out contiguously in dtype `dt`. */
EM_API em_status em_from_host(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, const void *host, em_device dev);
/* Copy a tensor's elements to contiguous host memory of numel*elsize bytes. */
EM_API em_status em_to_host(const em_tensor *t, void *host);
/* The single value of a one-element tensor, as double. */
EM_API em_status em_item(const em_tensor *t, double *out);
EM_API em_status em_one_hot(em_tensor **out, const em_tensor *index, int64_t num_classes);

/* Random numbers: one global seeded generator (Philox counter based, so
** every backend draws the same numbers for the same seed). */
EM_API void em_manual_seed(uint64_t seed);
EM_API uint64_t em_initial_seed(void);
/* Reserve `n` counter values; returns the offset to use with the seed. */
EM_API uint64_t em_rng_advance(uint64_t n);
/* The generator's whole state: the seed and the next counter value (what
** the next em_rng_advance returns). Saving it and setting it back later
** replays the same draws (activation checkpointing recomputes dropout so). */
EM_API void em_rng_get_state(uint64_t *seed, uint64_t *offset);
EM_API void em_rng_set_state(uint64_t seed, uint64_t offset);
EM_API em_status em_uniform(em_tensor **out, int ndim, const int64_t *shape, double lo, double hi, em_dtype dt, em_device dev);
EM_API em_status em_normal(em_tensor **out, int ndim, const int64_t *shape, double mean, double std, em_dtype dt, em_device dev);

/* ------------------------------------------------------------------ */
/* Views and copies                                                    */
/* ------------------------------------------------------------------ */

/* view: shape must fit the strides (else error, use reshape); one -1 infers. */
EM_API em_status em_view(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape);
/* reshape: a view when possible, a copy otherwise. */
EM_API em_status em_reshape(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape);
EM_API em_status em_transpose(em_tensor **out, em_tensor *x, int d0, int d1);
EM_API em_status em_permute(em_tensor **out, em_tensor *x, int ndim, const int *perm);
EM_API em_status em_narrow(em_tensor **out, em_tensor *x, int dim, int64_t start, int64_t length);
/* Python-style slice on one dim: start:end:step, step > 0, clamped. */
EM_API em_status em_slice(em_tensor **out, em_tensor *x, int dim, int64_t start, int64_t end, int64_t step);
/* Removes `dim`; index is 0-based, negative counts from the end. */
EM_API em_status em_select(em_tensor **out, em_tensor *x, int dim, int64_t index);
/* expand: size -1 keeps a dim; new leading dims may be added. */
EM_API em_status em_expand(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape);
/* squeeze one dim (must be size 1) or, with dim == EM_ALL_DIMS, every size-1 dim. */
#define EM_ALL_DIMS 0x7fff
EM_API em_status em_squeeze(em_tensor **out, em_tensor *x, int dim);
EM_API em_status em_unsqueeze(em_tensor **out, em_tensor *x, int dim);
EM_API em_status em_flatten(em_tensor **out, em_tensor *x, int start_dim, int end_dim);
EM_API em_status em_contiguous(em_tensor **out, em_tensor *x); /* retains x if already */
EM_API em_status em_clone(em_tensor **out, em_tensor *x);
EM_API em_status em_to_dtype(em_tensor **out, em_tensor *x, em_dtype dt);
EM_API em_status em_to_device(em_tensor **out, em_tensor *x, em_device dev);
/* A new tensor sharing x's storage with no grad_fn and requires_grad off. */
EM_API em_status em_detach(em_tensor **out, em_tensor *x);

/* In place (never recorded by autograd; an error on a tensor that needs
** grad while grad mode is on). Broadcasting src to dst's shape. */
EM_API em_status em_copy_(em_tensor *dst, em_tensor *src);
EM_API em_status em_fill_(em_tensor *dst, double value);
/* dst += alpha * src */
EM_API em_status em_add_(em_tensor *dst, em_tensor *src, double alpha);
EM_API em_status em_mul_scalar_(em_tensor *dst, double s);

/* ------------------------------------------------------------------ */
/* Elementwise                                                         */
/* ------------------------------------------------------------------ */

/* Each unary op once: X(enum, name, its derivative reads the input x,
** reads the output y). The enum, the op names, the autograd nodes and the
** backends' checks of which forward tensors a derivative needs all come
** from this list, so adding an op is one line. New ops go at the end: a
** backend built before them rejects their numbers as unknown ops. */
#define EM_UNARY_LIST(X)                                                      \
  X(EM_NEG, "neg", 0, 0)                                                      \
  X(EM_EXP, "exp", 0, 1)                                                      \
  X(EM_LOG, "log", 1, 0)                                                      \
  X(EM_SQRT, "sqrt", 0, 1)                                                    \
  X(EM_RSQRT, "rsqrt", 0, 1)                                                  \
  X(EM_ABS, "abs", 1, 0)                                                      \
  X(EM_TANH, "tanh", 0, 1)                                                    \
  X(EM_SIGMOID, "sigmoid", 0, 1)                                              \
  X(EM_RELU, "relu", 1, 0)                                                    \
  X(EM_GELU, "gelu", 1, 0)           /* exact, erf form (PyTorch default) */  \
  X(EM_GELU_TANH, "gelu_tanh", 1, 0) /* tanh approximation */                 \
  X(EM_ELU, "elu", 1, 0)             /* alpha = alpha */                      \
  X(EM_CLAMP, "clamp", 1, 0)   /* alpha = min, beta = max (either may be +-inf) */ \
  X(EM_POW_SCALAR, "pow", 1, 0)      /* x ^ alpha */                          \
  X(EM_AFFINE, "affine", 0, 0)       /* alpha * x + beta */                   \
  X(EM_SILU, "silu", 1, 0)                                                    \
  X(EM_SIN, "sin", 1, 0)                                                      \
  X(EM_COS, "cos", 1, 0)                                                      \
  X(EM_NOT, "logical_not", 0, 0)     /* logical not, bool only */        \
  X(EM_FLOOR, "floor", 0, 0)   /* floor..sign: derivative 0, int64 too */ \
  X(EM_CEIL, "ceil", 0, 0)                                                    \
  X(EM_ROUND, "round", 0, 0)         /* half to even, as torch.round */     \
  X(EM_TRUNC, "trunc", 0, 0)                                                  \
  X(EM_SIGN, "sign", 0, 0)           /* -1, 0, 1; NaN and -0 give 0 */    \
  X(EM_LOG1P, "log1p", 1, 0)         /* log(1 + x), exact for small x */   \
  X(EM_EXPM1, "expm1", 0, 1)         /* e^x - 1, exact for small x */      \
  X(EM_ERF, "erf", 1, 0)                                                      \
  X(EM_ATAN, "atan", 1, 0)                                                    \
  X(EM_ASIN, "asin", 1, 0)           /* NaN outside [-1, 1], as torch */     \
  X(EM_ACOS, "acos", 1, 0)                                                    \
  X(EM_ERFINV, "erfinv", 0, 1)       /* +-inf at +-1, NaN outside */         \
  X(EM_LGAMMA, "lgamma", 1, 0)       /* log|gamma(x)| */                     \
  X(EM_DIGAMMA, "digamma", 1, 0)     /* lgamma's derivative */

typedef enum em_unary_op {
#define EM_X_(e, name, needs_x, needs_y) e,
  EM_UNARY_LIST(EM_X_)
#undef EM_X_
  EM_NUNARY
} em_unary_op;

/* Each binary op once: X(enum, name). Comparisons give EM_BOOL; the
** logical ops take bool. Keep the comparisons (EM_EQ..EM_GE) and the
** logical ops (EM_AND..EM_XOR) contiguous: kernels test ranges. New ops go
** at the end, so that the values above keep their numbers; a backend
** announces one it runs (em_backend.binary_fmod for EM_FMOD).
** EM_FMOD is C's fmod, as torch.fmod: a - trunc(a / b) b computed exactly,
** with the sign of a (floats; bfloat16 computes in float); int64 is C's %
** (a zero divisor is an error, INT64_MIN % -1 is 0). */
#define EM_BINARY_LIST(X)                                                     \
  X(EM_ADD, "add") X(EM_SUB, "sub") X(EM_MUL, "mul") X(EM_DIV, "div")         \
  X(EM_POW, "pow") X(EM_MAXIMUM, "maximum") X(EM_MINIMUM, "minimum")          \
  X(EM_EQ, "eq") X(EM_NE, "ne") X(EM_LT, "lt") X(EM_LE, "le")                 \
  X(EM_GT, "gt") X(EM_GE, "ge")                                               \
  X(EM_AND, "logical_and") X(EM_OR, "logical_or") X(EM_XOR, "logical_xor")   \
  X(EM_FMOD, "fmod")

typedef enum em_binary_op {
#define EM_X_(e, name) e,
  EM_BINARY_LIST(EM_X_)
#undef EM_X_
  EM_NBINARY
} em_binary_op;

/* The op's name as errors and autograd print it ("exp", "add"). */
EM_API const char *em_unary_name(em_unary_op op);
EM_API const char *em_binary_name(em_binary_op op);

/* torch.result_type of two tensors: em_promote_types, except that a 0-d
** tensor against a dimensioned one decides only when its category is higher. */
EM_API em_dtype em_result_type(const em_tensor *a, const em_tensor *b);

/* Broadcasting as NumPy/PyTorch. Operands of different dtypes are promoted
** as torch.result_type (ops_elementwise.c); two bools add (EM_ADD,
** EM_MAXIMUM) as a logical or and multiply (EM_MUL, EM_MINIMUM) as an and,
** and EM_SUB with a bool operand is an EM_ERR_DTYPE, as PyTorch's. */
EM_API em_status em_binary(em_tensor **out, em_binary_op op, em_tensor *a, em_tensor *b);
EM_API em_status em_binary_scalar(em_tensor **out, em_binary_op op, em_tensor *a, double s);
/* s op a, for `2 - t` and `1 / t`. */
EM_API em_status em_scalar_binary(em_tensor **out, em_binary_op op, double s, em_tensor *a);
EM_API em_status em_unary(em_tensor **out, em_unary_op op, em_tensor *x, double alpha, double beta);

/* act(gate) * up, elementwise: the gated linear unit of SwiGLU (act
** EM_SILU) and GeGLU (EM_GELU, exact), torch's F.silu(gate) * up. One pass
** forward and one backward where the backend has em_backend.gated; else,
** and when gate and up differ in shape, dtype or device, em_unary then
** em_mul (broadcasting, promoting as those do). Other acts: EM_ERR_ARG. */
EM_API em_status em_gated(em_tensor **out, em_unary_op act, em_tensor *gate, em_tensor *up);

/* em_binary with EM_ADD, EM_SUB, EM_MUL, EM_DIV. */
EM_API em_status em_add(em_tensor **out, em_tensor *a, em_tensor *b);
EM_API em_status em_sub(em_tensor **out, em_tensor *a, em_tensor *b);
EM_API em_status em_mul(em_tensor **out, em_tensor *a, em_tensor *b);
EM_API em_status em_div(em_tensor **out, em_tensor *a, em_tensor *b);

/* floor(a / b) of two int64 tensors (broadcast), in int64 and exact, as
** torch.floor_divide's integer case (em_binary's EM_DIV of int64 is true
** division, float32). A zero divisor is an EM_ERR_ARG error. Not
** differentiable. */
EM_API em_status em_floor_divide_int(em_tensor **out, em_tensor *a, em_tensor *b);

/* cond must be bool; result = cond ? a : b, all three broadcast. */
EM_API em_status em_where(em_tensor **out, em_tensor *cond, em_tensor *a, em_tensor *b);
/* result = mask ? value : x; mask is bool, broadcastable to x. */
EM_API em_status em_masked_fill(em_tensor **out, em_tensor *x, em_tensor *mask, double value);

/* ------------------------------------------------------------------ */
/* Reductions                                                          */
/* ------------------------------------------------------------------ */

/* ndims == 0 reduces over every dim. */
EM_API em_status em_sum(em_tensor **out, em_tensor *x, int ndims, const int *dims, bool keepdim);
EM_API em_status em_mean(em_tensor **out, em_tensor *x, int ndims, const int *dims, bool keepdim);
/* correction 1 is the unbiased estimator (PyTorch default). */
EM_API em_status em_var(em_tensor **out, em_tensor *x, int ndims, const int *dims, int correction, bool keepdim);
/* values and indices (int64, 0-based) along dim; either out may be NULL. */
EM_API em_status em_max(em_tensor **values, em_tensor **indices, em_tensor *x, int dim, bool keepdim);
EM_API em_status em_min(em_tensor **values, em_tensor **indices, em_tensor *x, int dim, bool keepdim);
EM_API em_status em_argmax(em_tensor **out, em_tensor *x, int dim, bool keepdim);
EM_API em_status em_argmin(em_tensor **out, em_tensor *x, int dim, bool keepdim);
/* The max / min over all elements, a 0-d tensor. */
EM_API em_status em_max_all(em_tensor **out, em_tensor *x);
EM_API em_status em_min_all(em_tensor **out, em_tensor *x);
/* Reduce a broadcast gradient back to `shape` by summing (autograd helper). */
EM_API em_status em_sum_to(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape);

/* ------------------------------------------------------------------ */
/* Linear algebra, normalisation, indexing, joining                     */
/* ------------------------------------------------------------------ */

/* torch.matmul semantics: 1-d operands, batch broadcasting. */
EM_API em_status em_matmul(em_tensor **out, em_tensor *a, em_tensor *b);
/* Strict [B,n,m] x [B,m,p]. */
EM_API em_status em_bmm(em_tensor **out, em_tensor *a, em_tensor *b);
/* nn.Linear: x [..., in] @ w^T (w [out, in]) + b ([out], may be NULL), the
** bias added in the product's pass. Runs in the autocast dtype under
** autocast, as matmul. */
EM_API em_status em_linear(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *b);

/* Softmax and log-softmax along dim (0-based, negative from the end). */
EM_API em_status em_softmax(em_tensor **out, em_tensor *x, int dim);
EM_API em_status em_log_softmax(em_tensor **out, em_tensor *x, int dim);

/* Normalises over the last `nnorm` dims; weight and bias (shape of those
** dims) may be NULL. */
EM_API em_status em_layer_norm(em_tensor **out, em_tensor *x, int nnorm, em_tensor *weight, em_tensor *bias, double eps);
/* RMS norm over the last `nnorm` dims: x / sqrt(mean(x^2) + eps) * weight
** (weight may be NULL). Runs in float32 under autocast. EM_ERR_UNSUPPORTED
** when the backend has no RMS norm kernel (it is optional): the caller
** composes it then (nn.RMSNorm does). */
EM_API em_status em_rms_norm(em_tensor **out, em_tensor *x, int nnorm, em_tensor *weight, double eps);
/* Rotary position embedding, rotate-half form (GPT-NeoX, Llama), over the
** last two dims [..., L, d] of x (any strides): with h = d/2 and j < h,
** out[j] = x[j] cos[l,j] - x[j+h] sin[l,j], out[j+h] = x[j+h] cos[l,j] +
** x[j] sin[l,j] at position l. cos and sin are [L, h] of x's dtype and take
** no gradient. EM_ERR_UNSUPPORTED when the backend has no rotary kernel
** (it is optional): the caller composes it then (nn.MultiHeadAttention). */
EM_API em_status em_rope(em_tensor **out, em_tensor *x, em_tensor *cos, em_tensor *sin);

/* Dense linear algebra on the backend's optional kernel (ember_backend.h,
** em_linalg_args, says what each op computes and its outputs' order):
** a [..., m, n] (float32 or float64), b [..., n, k] of the same batch dims
** for SOLVE and TRSOLVE (NULL otherwise). out[0..2] receive the outputs
** (unused ones NULL), with a's batch dims in front. name names the
** operation in messages (NULL: "linalg.cholesky", ...). flags: EM_LINALG_UPPER,
** EM_LINALG_UNIT (TRSOLVE), EM_LINALG_FULL (QR complete, SVD full matrices). With info NULL a numerical failure (not
** positive-definite, singular, no convergence) is an EM_ERR_ARG error as
** torch words it, naming the batch element; with info the outputs come
** back and info[0] is the failing batch element (-1: none), info[1]
** LAPACK's info (torch's *_ex). Not recorded by autograd (ember.linalg's
** Lua functions carry the gradients). EM_ERR_UNSUPPORTED when the backend
** has no linalg kernel. */
typedef enum em_linalg_op {
  EM_LINALG_CHOLESKY,
  EM_LINALG_LU,
  EM_LINALG_SOLVE,
  EM_LINALG_TRSOLVE,
  EM_LINALG_QR,
  EM_LINALG_EIGH,
  EM_LINALG_SVD
} em_linalg_op;
#define EM_LINALG_UPPER 1
#define EM_LINALG_UNIT 2
#define EM_LINALG_FULL 4
EM_API em_status em_linalg(em_tensor **out, em_linalg_op op, em_tensor *a, em_tensor *b, int flags,
                           const char *name, int64_t info[2]);

/* 2-d convolution (cross-correlation, torch.nn.functional.conv2d) of x
** [N, C, H, W] with w [O, C/groups, kh, kw] and bias [O] (may be NULL), on
** the backend's kernel; stride and dilation {h, w}, padding {top, bottom,
** left, right}. Runs in bfloat16 under autocast. EM_ERR_UNSUPPORTED when
** the backend has no kernel for the call (none at all, float64, ...): the
** caller composes it from other ops then (nn.Conv2d does). */
EM_API em_status em_conv2d(em_tensor **out, em_tensor *x, em_tensor *w, em_tensor *bias,
                           const int64_t stride[2], const int64_t padding[4],
                           const int64_t dilation[2], int64_t groups);
/* Calls so far that ran on the backend's kernel, and those a caller
** composed and counted with em_conv_count_composed. */
EM_API void em_conv_route_counts(uint64_t *kernel, uint64_t *composed);
EM_API void em_conv_count_composed(void);

/* Indices here are int64 and 0-based in C (Lua adds the 1). */
EM_API em_status em_embedding(em_tensor **out, em_tensor *weight, em_tensor *index);
EM_API em_status em_index_select(em_tensor **out, em_tensor *x, int dim, em_tensor *index);
/* index has x's ndim; index.size(k) == x.size(k) for k != dim. */
EM_API em_status em_gather(em_tensor **out, em_tensor *x, int dim, em_tensor *index);
/* out = x with src added at index along dim (out of place). */
EM_API em_status em_scatter_add(em_tensor **out, em_tensor *x, int dim, em_tensor *index, em_tensor *src);

/* cat joins n tensors along an existing dim; stack along a new one. Tensors
** of several dtypes join in their common one (torch.cat's promotion). */
EM_API em_status em_cat(em_tensor **out, int n, em_tensor *const *xs, int dim);
EM_API em_status em_stack(em_tensor **out, int n, em_tensor *const *xs, int dim);
/* Splits into pieces of `size` (the last may be smaller). *outs is a
** malloc'd array of *n new references; free it with em_free_list. */
EM_API em_status em_split(em_tensor ***outs, int *n, em_tensor *x, int64_t size, int dim);
EM_API em_status em_chunk(em_tensor ***outs, int *n, em_tensor *x, int64_t chunks, int dim);
EM_API void em_free_list(em_tensor **list, int n);

/* Inverted dropout: scales kept values by 1/(1-p). Identity when !train or p == 0. */
EM_API em_status em_dropout(em_tensor **out, em_tensor *x, double p, bool train);

typedef enum em_reduction { EM_REDUCE_MEAN = 0, EM_REDUCE_SUM, EM_REDUCE_NONE } em_reduction;
/* logits [N,C] (or [C]), target int64 [N] with 0-based classes. Rows whose
** target == ignore_index are skipped; mean divides by the kept rows. */
EM_API em_status em_cross_entropy(em_tensor **out, em_tensor *logits, em_tensor *target,
                                  int64_t ignore_index, double label_smoothing, em_reduction red);
EM_API em_status em_mse_loss(em_tensor **out, em_tensor *input, em_tensor *target, em_reduction red);

/* ------------------------------------------------------------------ */
/* Autograd                                                            */
/* ------------------------------------------------------------------ */

/* Grad mode is thread-local and on by default. */
/* Mixed precision, per thread (see core/src/autocast.c for the op lists):
** products run in dt (bfloat16 only), softmax, layer_norm, losses and
** reductions in float32. The previous state goes to was_* (may be NULL). */
EM_API em_status em_autocast_set(bool enabled, em_dtype dt, bool *was_enabled, em_dtype *was_dt);
EM_API bool em_autocast_enabled(em_dtype *dt);
/* x as autocast's products take it: cast to the low dtype when autocast is
** on and x is float32 (a parameter from the cast cache when grad mode is
** off), else x itself (retained). For modules that cast a weight before
** making a view of it (nn.Linear's transpose), which the cache, keyed by
** the parameter, would not recognise. */
EM_API em_status em_autocast_cast(em_tensor **out, em_tensor *x);
/* Sets this thread's autocast on or off without ending its region (its
** cast cache is kept); returns the state it had. For a part of an op that
** runs as outside autocast: a backward pass, ember.linalg's compositions,
** the pools and norms that keep their input's dtype. */
EM_API bool em_autocast_pause(bool on);

/* Grad mode of this thread: whether ops record autograd nodes. */
EM_API bool em_grad_enabled(void);
EM_API bool em_set_grad_enabled(bool on); /* returns the previous mode */
/* Anomaly mode (torch.autograd.set_detect_anomaly), process-wide: while
** on, a backward whose node returns a NaN or inf gradient fails naming the
** node, and each node recorded keeps where it was made, the string the
** origin callback returns (malloc'ed, or NULL; the node owns it). */
EM_API bool em_set_detect_anomaly(bool on); /* returns the previous mode */
EM_API bool em_is_anomaly_enabled(void);
EM_API void em_set_anomaly_origin(char *(*fn)(const char *op, void *ud), void *ud);
/* Marks a leaf; an error on a non-float tensor. On a non-leaf (it requires
** grad already) on is a no-op and off an error, as PyTorch's. */
EM_API em_status em_set_requires_grad(em_tensor *t, bool on);
/* grad may be NULL only for a one-element root. Frees the graph unless
** retain_graph. */
EM_API em_status em_backward(em_tensor *root, em_tensor *grad, bool retain_graph);
/* em_backward that accumulates into the .grad of the n leaves in `only`
** and of no other leaf (PyTorch's backward(inputs=) and autograd.grad):
** every other leaf's gradient is dropped, and the gradient-ready hook
** does not run. A backward run inside such a pass (a Lua backward's own,
** nn.checkpoint's recompute) keeps its leaves, plus its own `only` ones;
** em_backward_is_filtered says whether this thread is inside one. */
EM_API em_status em_backward_only(em_tensor *root, em_tensor *grad, bool retain_graph,
                                  em_tensor *const *only, int n);
EM_API bool em_backward_is_filtered(void);

/* Gradient-ready hook (what DistributedDataParallel starts its bucket
** all-reduces from). While set, em_backward calls fn(leaf, ud) once per
** leaf and pass, as soon as every reachable node has delivered its share
** of that leaf's gradient, so leaf->grad is final for this pass (NULL when
** no gradient came); the rest of the backward still runs after it. Then,
** after the last node, fn(NULL, ud) once: the pass is over (a backward
** run from inside another, by a Lua backward such as nn.checkpoint's
** recompute, calls fn for its leaves but not fn(NULL)). Grad mode is
** off during the calls. A status other than EM_OK stops the backward,
** which returns it. One hook per process; fn NULL removes it. */
typedef em_status (*em_grad_ready_fn)(em_tensor *leaf, void *ud);
EM_API void em_set_grad_ready_hook(em_grad_ready_fn fn, void *ud);

/* Gradient hook (what t:register_hook and t:retain_grad are built on).
** While set, em_backward calls fn(node, NULL, &g, ud) with the whole
** gradient of a node's output just before the node's backward runs, and
** fn(NULL, leaf, &g, ud) with the whole gradient a leaf gets in this pass
** (the contributions of every edge summed) before it is added into
** leaf->grad. fn may replace *g (release it, store a new reference of the
** same shape and dtype); anything else is an error naming the shapes.
** Grad mode is off during the calls. A status other than EM_OK stops the
** backward, which returns it. One hook per process; fn NULL removes it. */
typedef em_status (*em_grad_hook_fn)(em_node *node, em_tensor *leaf, em_tensor **grad, void *ud);
EM_API void em_set_grad_hook(em_grad_hook_fn fn, void *ud);

/*
** Declaring an op. An op's forward is an ordinary C function that computes
** its result and then, if em_autograd_needed(), calls em_autograd_record()
** with a static em_opdef. The engine knows nothing else about the op, so
** a plugin's op joins autograd the same way as a core op.
*/
typedef struct em_opdef {
  const char *name;
  /* Computes grad_inputs[i] (a new reference, or NULL for "no gradient")
  ** for each input from grad_output (shaped like the output). Inputs whose
  ** node->needs_grad[i] is false may be skipped. Runs with grad mode off. */
  em_status (*backward)(em_node *node, em_tensor *grad_output, em_tensor **grad_inputs);
  /* Optional: frees node->ctx. */
  void (*free_ctx)(void *ctx);
} em_opdef;

/* Where one input's gradient goes. */
typedef struct em_edge {
  em_node *fn;         /* producer of the input, or NULL */
  em_tensor *leaf;     /* the input itself when it is a leaf requiring grad */
} em_edge;

/* Narrow pieces of one output whose gradients a node records as written
** into its pending gradient (q, k and v of a joined projection: 3). */
#define EM_NODE_PIECES 4

struct em_node {
  const em_opdef *op;
  int refcount;
  int n_inputs;
  int n_saved;
  em_edge *edges;           /* n_inputs */
  bool *needs_grad;         /* n_inputs: does input i want a gradient? */
  /* Shapes/dtypes of the inputs, for reducing broadcast gradients. */
  int *in_ndim;
  int64_t (*in_shape)[EM_MAX_DIMS];
  em_dtype *in_dtype;
  em_tensor **saved;        /* n_saved, detached aliases, or NULL entries */
  void *ctx;                /* op-private data */
  /* The output's shape, dtype and device (checked against grad_output). */
  int out_ndim;
  int64_t out_shape[EM_MAX_DIMS];
  em_dtype out_dtype;
  em_device out_device;
  /* Engine bookkeeping. */
  em_tensor *pending_grad;
  int pending_deps;
  int mark;                 /* visited during the current backward */
  uint64_t seq;
  bool released;            /* saved tensors freed by a backward */
  /* pending_grad's pieces (em__region_accumulate): when n_pieces > 0, it
  ** was made for narrow pieces of this node's output along dim piece_dim,
  ** and only [piece_lo, piece_hi) were written since, so a piece outside
  ** them is copied in, not added. Outside them it is zero, or with
  ** pieces_unset not yet written at all: em__settle_pieces zeroes the
  ** rest before anything else reads or adds to it. Any other gradient
  ** accumulated into it clears the record (n_pieces = 0). */
  int piece_dim, n_pieces;
  int64_t piece_lo[EM_NODE_PIECES], piece_hi[EM_NODE_PIECES];
  bool pieces_unset;
  /* n_saved: each saved tensor's storage version when recorded; backward
  ** refuses to run the node when one has been written in place since (its
  ** gradient would use the new values), as PyTorch's version counter. */
  uint64_t *saved_version;
};

/* True when grad mode is on and some input requires grad. */
EM_API bool em_autograd_needed(int n, em_tensor *const *inputs);
/* Attaches a node to `output` (sets output->grad_fn and requires_grad).
** `saved` tensors are stored as detached aliases (no reference cycles).
** On failure the ctx is freed with op->free_ctx. */
EM_API em_status em_autograd_record(em_tensor *output, const em_opdef *op,
                                    int n_inputs, em_tensor *const *inputs,
                                    int n_saved, em_tensor *const *saved, void *ctx);
EM_API void em_node_retain(em_node *n);
EM_API void em_node_release(em_node *n);

/* ------------------------------------------------------------------ */
/* Fused optimizer steps (ops_optim.c)                                 */
/* ------------------------------------------------------------------ */

/* One Adam (decoupled = false) or AdamW step on one parameter, in place,
** under no grad. param, exp_avg and exp_avg_sq are contiguous and share
** dtype, device and shape; grad matches them but may have any strides.
** step is 1-based. Runs the backend's fused kernel when it has one and the
** same update composed of core ops otherwise (composed = true forces that,
** so tests can compare the two). Errors name "adam_step"/"adamw_step". */
typedef struct em_adam_opts {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;
  bool decoupled, composed;
} em_adam_opts;
EM_API em_status em_adam_step(em_tensor *param, em_tensor *grad, em_tensor *exp_avg,
                              em_tensor *exp_avg_sq, const em_adam_opts *o);

/* One SGD step (momentum, dampening, Nesterov, weight decay as
** torch.optim.SGD) in place. momentum_buf is needed when momentum != 0;
** first_step copies the gradient into it. Same dispatch as em_adam_step. */
typedef struct em_sgd_opts {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first_step, composed;
} em_sgd_opts;
EM_API em_status em_sgd_step(em_tensor *param, em_tensor *grad, em_tensor *momentum_buf,
                             const em_sgd_opts *o);

/* *out = the sum of the squares of every element of the n floating
** tensors (clip_grad_norm's 2-norm, squared), in float64: the backend's
** sum_squares where it has one, else squared and summed by core ops.
** composed = true forces the latter, for tests. */
EM_API em_status em_sum_squares(double *out, int n, em_tensor *const *ts, bool composed);

/* ------------------------------------------------------------------ */
/* Profiler (profiler.c)                                               */
/* ------------------------------------------------------------------ */

/* What a recorded span is: a backend kernel call ("gemm", "exp", "add",
** "attention", ...), the backward of one autograd node ("matmul backward",
** holding its kernels), or a range a user opened (em_profiler_push). */
typedef enum em_prof_kind { EM_PROF_KERNEL = 0, EM_PROF_BACKWARD, EM_PROF_RANGE } em_prof_kind;

/* One span. Times are nanoseconds of a monotonic clock; parent is the index
** of the span that encloses it in the same thread, -1 at the top. bytes
** counts each tensor a kernel reads or writes once; flops are known for
** gemm and attention (0 elsewhere). impl is what computed it on that
** backend (the library and instruction set its kernel_info names), or NULL.
** A backend with asynchronous kernels (CUDA) is timed at launch. */
typedef struct em_prof_event {
  const char *name;   /* owned by the profiler until the next em_profiler_start */
  const char *impl;   /* likewise; NULL when unknown */
  const char *device; /* the backend's name: "cpu", "cuda" */
  int64_t start_ns, dur_ns;
  int64_t bytes;
  double flops;
  int64_t parent;
  int tid;            /* 1, 2, ... in the order threads first recorded */
  em_prof_kind kind;
  bool backward;      /* inside em_backward */
} em_prof_event;

/* Starts recording (dropping what an earlier run recorded); EM_ERR_ARG when
** one is already running. While it runs every backend call an op makes is
** a span; when off, the ops pay one branch on a global flag. */
EM_API em_status em_profiler_start(void);
/* Stops recording; spans still open end now. The events stay readable. */
EM_API void em_profiler_stop(void);
/* Whether the profiler is recording. */
EM_API bool em_profiler_enabled(void);
/* Opens a range named `name` in this thread (a no-op when not recording);
** em_profiler_pop closes the innermost one. */
EM_API em_status em_profiler_push(const char *name);
EM_API void em_profiler_pop(void);
/* The spans of the last run, in the order they began; em_profiler_dropped
** counts those not kept: past the buffer's limit (EM_PROF_MAX_EVENTS), or
** nested more than 256 deep in their thread (their time stays in the
** innermost span kept). */
EM_API int64_t em_profiler_count(void);
EM_API const em_prof_event *em_profiler_event(int64_t i);
EM_API int64_t em_profiler_dropped(void);

/* ------------------------------------------------------------------ */
/* Library state                                                       */
/* ------------------------------------------------------------------ */

/* Loads plugins (idempotent; also done lazily). Never fails hard: broken
** plugins are recorded, see ember_plugin.h. */
EM_API void em_init(void);
EM_API void em_set_num_threads(int n);
EM_API int em_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif
