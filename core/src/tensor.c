/*
** tensor.c -- storages, tensor headers, creation, host transfer, and the
** small checking helpers every op uses.
*/
#include "ember_bf16.h"
#include "internal.h"

#include <math.h>
#include <stdatomic.h>

static _Atomic size_t em__live = 0;
static _Atomic size_t em__peak = 0; /* the most em__live has been since the last reset */

size_t em_live_bytes(void) { return atomic_load(&em__live); }
size_t em_peak_bytes(void) { return atomic_load(&em__peak); }
void em_reset_peak_bytes(void) { atomic_store(&em__peak, atomic_load(&em__live)); }

/* Raises the peak to `now` unless another thread raised it past. */
static void peak_raise(size_t now) {
  size_t seen = atomic_load(&em__peak);
  while (now > seen && !atomic_compare_exchange_weak(&em__peak, &seen, now)) {
  }
}

/* Small ops allocate two headers each (tensor and storage); a per-thread
** cache of freed headers keeps malloc off the dispatch path of a Lua loop
** of tiny ops. Blocks in the cache are ordinary malloc blocks. */
#define EM__HEADER_CACHE 256
typedef union em__header { em_tensor t; em_storage s; union em__header *next; } em__header;
static _Thread_local em__header *em__free_headers;
static _Thread_local int em__nfree_headers;

static void *em__header_alloc(void) {
  em__header *h = em__free_headers;
  if (h) {
    em__free_headers = h->next;
    em__nfree_headers--;
    return h;
  }
  return malloc(sizeof(em__header));
}

static void em__header_free(void *p) {
  if (!p) return;
  if (em__nfree_headers >= EM__HEADER_CACHE) {
    free(p);
    return;
  }
  em__header *h = p;
  h->next = em__free_headers;
  em__free_headers = h;
  em__nfree_headers++;
}

/* ------------------------------------------------------------------ */
/* Storage                                                             */
/* ------------------------------------------------------------------ */

static em_status em__storage_new(em_storage **out, size_t nbytes, em_device dev, const char *op) {
  const em_backend *be = em_backend_get(dev.backend);
  if (!be) return em_error(EM_ERR_DEVICE, "%s: no backend in slot %d", op, dev.backend);
  em_storage *s = em__header_alloc();
  if (!s) return em_error(EM_ERR_OOM, "%s: out of memory for a storage header", op);
  s->refcount = 1;
  s->device = dev;
  s->nbytes = nbytes;
  s->data = NULL;
  s->version = 0;
  s->saved_refs = 0;
  em_status st = be->alloc(dev.index, nbytes, &s->data);
  if (st != EM_OK) {
    em__header_free(s);
    return em__kernel_fail(op, st);
  }
  peak_raise(atomic_fetch_add(&em__live, nbytes) + nbytes);
  *out = s;
  return EM_OK;
}

void em_tensor_written(em_tensor *t) {
  if (t && t->storage) __atomic_add_fetch(&t->storage->version, 1, __ATOMIC_RELAXED);
}

void em__storage_release(em_storage *s) {
  if (!s || --s->refcount > 0) return;
  const em_backend *be = em_backend_get(s->device.backend);
  if (be && s->data) be->free(s->device.index, s->data, s->nbytes);
  atomic_fetch_sub(&em__live, s->nbytes);
  em__header_free(s);
}

/* ------------------------------------------------------------------ */
/* Tensor headers                                                      */
/* ------------------------------------------------------------------ */

em_tensor *em_retain(em_tensor *t) {
  if (t) t->refcount++;
  return t;
}

void em_release(em_tensor *t) {
  if (!t || --t->refcount > 0) return;
  em__storage_release(t->storage);
  em_release(t->grad);
  if (t->grad_fn) em_node_release(t->grad_fn);
  em__header_free(t);
}

int64_t em__numel_of(int ndim, const int64_t *shape) {
  /* The product of the non-zero sizes is bounded too: contiguous strides
  ** are products of sizes (a 0 counting as 1), so [0, 2^40, 2^40] must not
  ** pass because its element count is 0. */
  int64_t n = 1, extent = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (__builtin_mul_overflow(extent, shape[i] ? shape[i] : 1, &extent) || extent > EM__MAX_NUMEL)
      return -1;
    n *= shape[i];
  }
  return n;
}

int64_t em_numel(const em_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

bool em_is_contiguous(const em_tensor *t) {
  /* As PyTorch: a tensor without elements is contiguous whatever its strides. */
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] == 0) return true;
  int64_t expect = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != expect) return false;
    expect *= t->shape[i];
  }
  return true;
}

void *em_data(const em_tensor *t) {
  /* An empty storage may have no buffer; NULL + 0 is undefined in C. */
  if (!t->storage->data) return NULL;
  return (char *)t->storage->data + (size_t)t->offset * em_dtype_size(t->dtype);
}

const char *em_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

const char *em__desc(const em_tensor *t, char *buf, size_t n) {
  char sh[160], dev[32];
  em_shape_str(t->ndim, t->shape, sh, sizeof sh);
  snprintf(buf, n, "%s %s %s", sh, em_dtype_name(t->dtype), em_device_str(t->device, dev, sizeof dev));
  return buf;
}

static void em__contig_strides(int ndim, const int64_t *shape, int64_t *stride) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    stride[i] = s;
    s *= shape[i] > 0 ? shape[i] : 1;
  }
}

em_status em__new(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev,
                  const char *op) {
  *out = NULL;
  if (ndim < 0 || ndim > EM_MAX_DIMS)
    return em_error(EM_ERR_SHAPE, "%s: %d dims requested, at most %d are supported", op, ndim,
                    EM_MAX_DIMS);
  if ((unsigned)dt >= EM_NDTYPES) return em_error(EM_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return em_error(EM_ERR_SHAPE, "%s: negative size %lld at dim %d", op, (long long)shape[i], i + 1);
  int64_t numel = em__numel_of(ndim, shape);
  size_t elsize = em_dtype_size(dt);
  if (numel < 0 || (uint64_t)numel > SIZE_MAX / elsize) {
    char sh[160];
    return em_error(EM_ERR_OOM, "%s: cannot allocate a tensor of shape %s (%s): too large", op,
                    em_shape_str(ndim, shape, sh, sizeof sh), em_dtype_name(dt));
  }
  em_tensor *t = em__header_alloc();
  if (!t) return em_error(EM_ERR_OOM, "%s: out of memory for a tensor header", op);
  em_status s = em__storage_new(&t->storage, (size_t)numel * elsize, dev, op);
  if (s != EM_OK) {
    em__header_free(t);
    if (s == EM_ERR_OOM) { /* say which tensor, in the user's terms */
      char sh[160], msg[512];
      snprintf(msg, sizeof msg, "%s", em_error_message());
      return em_error(EM_ERR_OOM, "%s: cannot allocate a tensor of shape %s (%s, %.1f GiB): %s", op,
                      em_shape_str(ndim, shape, sh, sizeof sh), em_dtype_name(dt),
                      (double)numel * (double)elsize / (1024.0 * 1024.0 * 1024.0), msg);
    }
    return s;
  }
  t->refcount = 1;
  t->dtype = dt;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  em__contig_strides(ndim, shape, t->stride);
  t->offset = 0;
  t->device = dev;
  t->requires_grad = false;
  t->grad = NULL;
  t->grad_fn = NULL;
  *out = t;
  return EM_OK;
}

em_status em__alias(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape,
                    const int64_t *stride, int64_t offset) {
  em_tensor *t = em__header_alloc();
  *out = NULL;
  if (!t) return em_error(EM_ERR_OOM, "view: out of memory for a tensor header");
  t->refcount = 1;
  t->dtype = x->dtype;
  t->ndim = ndim;
  if (ndim) {
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    memcpy(t->stride, stride, (size_t)ndim * sizeof *stride);
  }
  t->offset = offset;
  t->storage = x->storage;
  x->storage->refcount++;
  t->device = x->device;
  t->requires_grad = false;
  t->grad = NULL;
  t->grad_fn = NULL;
  *out = t;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Creation and host transfer                                          */
/* ------------------------------------------------------------------ */

em_status em_empty(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev) {
  return em__new(out, ndim, shape, dt, dev, "empty");
}

em_status em_full(em_tensor **out, int ndim, const int64_t *shape, double value, em_dtype dt,
                  em_device dev) {
  em_tensor *t;
  EM_TRY(em__new(&t, ndim, shape, dt, dev, "full"));
  em_kview kv;
  em_kview_of(t, &kv);
  em_status s = em__be(t)->fill(dev.index, &kv, value);
  if (s != EM_OK) {
    em_release(t);
    return em__kernel_fail("full", s);
  }
  *out = t;
  return EM_OK;
}

em_status em_zeros(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev) {
  return em_full(out, ndim, shape, 0.0, dt, dev);
}

em_status em_ones(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev) {
  return em_full(out, ndim, shape, 1.0, dt, dev);
}

em_status em_from_host(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt,
                       const void *host, em_device dev) {
  em_tensor *t;
  EM_TRY(em__new(&t, ndim, shape, dt, dev, "tensor"));
  size_t nbytes = (size_t)em_numel(t) * em_dtype_size(dt);
  em_status s = nbytes ? em__be(t)->copy_h2d(dev.index, em_data(t), host, nbytes) : EM_OK;
  if (s != EM_OK) {
    em_release(t);
    return em__kernel_fail("tensor", s);
  }
  *out = t;
  return EM_OK;
}

em_status em_to_host(const em_tensor *t, void *host) {
  em_tensor *c;
  /* em__contig takes a non-const pointer but does not modify t. */
  EM_TRY(em__contig(&c, (em_tensor *)t));
  size_t nbytes = (size_t)em_numel(c) * em_dtype_size(c->dtype);
  em_status s = nbytes ? em__be(c)->copy_d2h(c->device.index, host, em_data(c), nbytes) : EM_OK;
  em_release(c);
  return s == EM_OK ? EM_OK : em__kernel_fail("to_host", s);
}

em_status em_item(const em_tensor *t, double *out) {
  if (em_numel(t) != 1) {
    char d[200];
    return em_error(EM_ERR_SHAPE, "item: expected a tensor with one element, got %s",
                    em__desc(t, d, sizeof d));
  }
  union { float f; double d; int64_t i; uint8_t b; uint16_t h; } v;
  const em_backend *be = em__be(t);
  em_status s = be->copy_d2h(t->device.index, &v, em_data(t), em_dtype_size(t->dtype));
  if (s != EM_OK) return em__kernel_fail("item", s);
  switch (t->dtype) {
    case EM_F32: *out = v.f; break;
    case EM_F64: *out = v.d; break;
    case EM_I64: *out = (double)v.i; break;
    case EM_BOOL: *out = v.b ? 1.0 : 0.0; break;
    case EM_BF16: *out = em_bf16_to_f32(v.h); break;
    default: return em_error(EM_ERR_DTYPE, "item: invalid dtype");
  }
  return EM_OK;
}

em_status em__scalar(em_tensor **out, double s, em_dtype dt, em_device dev) {
  return em_full(out, 0, NULL, s, dt, dev);
}

/* ------------------------------------------------------------------ */
/* Checks and shape helpers                                            */
/* ------------------------------------------------------------------ */

em_status em__dim(const char *op, int dim, int ndim, int *out) {
  int d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= (ndim ? ndim : 1)) {
    /* Messages speak the Lua user's 1-based language. */
    return em_error(EM_ERR_INDEX, "%s: dim %d out of range for a %d-d tensor (valid: 1..%d or -%d..-1)",
                    op, dim >= 0 ? dim + 1 : dim, ndim, ndim ? ndim : 1, ndim ? ndim : 1);
  }
  *out = d;
  return EM_OK;
}

em_status em__same_device(const char *op, const em_tensor *a, const em_tensor *b) {
  if (em_device_eq(a->device, b->device)) return EM_OK;
  char da[32], db[32];
  return em_error(EM_ERR_DEVICE, "%s: tensors are on different devices (%s and %s); move one with :to()",
                  op, em_device_str(a->device, da, sizeof da), em_device_str(b->device, db, sizeof db));
}

em_status em__need_float(const char *op, const em_tensor *t, const char *what) {
  if (em_dtype_is_float(t->dtype)) return EM_OK;
  return em_error(EM_ERR_DTYPE, "%s: %s must be float32, float64 or bfloat16, got %s", op, what,
                  em_dtype_name(t->dtype));
}

em_status em__need_dtype(const char *op, const em_tensor *t, em_dtype dt, const char *what) {
  if (t->dtype == dt) return EM_OK;
  return em_error(EM_ERR_DTYPE, "%s: %s must be %s, got %s", op, what, em_dtype_name(dt),
                  em_dtype_name(t->dtype));
}

/* Every op reaches its kernels here: while the profiler records, through
** its timing copy of the vtable (profiler.c). */
const em_backend *em__be(const em_tensor *t) {
  if (em__prof_is_on()) return em__prof_backend(t->device.backend);
  return em_backend_get(t->device.backend);
}

const em_backend *em_backend_of(const em_tensor *t) { return em__be(t); }

void em_kview_of(const em_tensor *t, em_kview *kv) {
  kv->data = em_data(t);
  kv->dtype = t->dtype;
  kv->ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++) {
    kv->shape[i] = t->shape[i];
    kv->stride[i] = t->stride[i];
  }
}

em_status em__broadcast_shape(const char *op, int na, const int64_t *sa, int nb,
                              const int64_t *sb, int *nout, int64_t *sout) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t a = i < n - na ? 1 : sa[i - (n - na)];
    int64_t b = i < n - nb ? 1 : sb[i - (n - nb)];
    if (a != b && a != 1 && b != 1) {
      char s1[160], s2[160];
      return em_error(EM_ERR_SHAPE,
                      "%s: shapes %s and %s cannot be broadcast (size %lld vs %lld at dim %d)", op,
                      em_shape_str(na, sa, s1, sizeof s1), em_shape_str(nb, sb, s2, sizeof s2),
                      (long long)a, (long long)b, i + 1);
    }
    sout[i] = a == 1 ? b : a;
  }
  *nout = n;
  return EM_OK;
}

void em__kview_bcast(const em_tensor *t, int ndim, const int64_t *shape, em_kview *kv) {
  int lead = ndim - t->ndim;
  kv->data = em_data(t);
  kv->dtype = t->dtype;
  kv->ndim = ndim;
  for (int i = 0; i < ndim; i++) {
    kv->shape[i] = shape[i];
    if (i < lead)
      kv->stride[i] = 0;
    else
      kv->stride[i] = t->shape[i - lead] == 1 && shape[i] != 1 ? 0 : t->stride[i - lead];
  }
}

em_status em__copy_of(em_tensor **out, em_tensor *t, const char *op) {
  em_tensor *c;
  EM_TRY(em__new(&c, t->ndim, t->shape, t->dtype, t->device, op));
  em_kview dst, src;
  em_kview_of(c, &dst);
  em_kview_of(t, &src);
  em_status s = em__be(t)->copy(t->device.index, &dst, &src);
  if (s != EM_OK) {
    em_release(c);
    return em__kernel_fail(op, s);
  }
  *out = c;
  return EM_OK;
}

em_status em__contig(em_tensor **out, em_tensor *t) {
  if (em_is_contiguous(t)) {
    *out = em_retain(t);
    return EM_OK;
  }
  em_tensor *c;
  EM_TRY(em__copy_of(&c, t, "contiguous"));
  *out = c;
  return EM_OK;
}

void em__split_dims(int ndim, const int64_t *shape, int dim, int64_t *outer, int64_t *n,
                    int64_t *inner) {
  int64_t o = 1, in = 1;
  for (int i = 0; i < dim; i++) o *= shape[i];
  for (int i = dim + 1; i < ndim; i++) in *= shape[i];
  *outer = o;
  *n = ndim ? shape[dim] : 1;
  *inner = in;
}

em_status em__accumulate(em_tensor **acc, em_tensor *g) {
  if (!*acc) {
    *acc = g;
    return EM_OK;
  }
  em_tensor *sum;
  em_status s = em_add(&sum, *acc, g);
  em_release(g);
  if (s != EM_OK) return s;
  em_release(*acc);
  *acc = sum;
  return EM_OK;
}

void em_init(void) { em__plugins_ensure_loaded(); }

void em_set_num_threads(int n) {
  em__plugins_ensure_loaded();
  for (int i = 0; i < em_backend_count(); i++) {
    const em_backend *be = em_backend_get(i);
    if (be->set_num_threads) be->set_num_threads(n);
  }
}

int em_get_num_threads(void) {
  int slot;
  if (em_backend_find("cpu", &slot) != EM_OK) return 1;
  const em_backend *be = em_backend_get(slot);
  return be->get_num_threads ? be->get_num_threads() : 1;
}
