/*
** autocast.c -- mixed precision: the autocast state and the one table that
** says which ops run in the low-precision dtype and which in float32.
**
** Under `em_autocast_set(true, EM_BF16)` (Lua: ember.autocast), ops follow
** PyTorch's CPU autocast lists: the products (matmul, bmm, conv2d, and so
** nn.Linear and nn.Conv2d) cast float32 inputs to bfloat16 and return bfloat16; the ops
** that need range or precision (softmax, log_softmax, layer_norm, the
** losses, the reductions) cast bfloat16 inputs up to float32; elementwise
** ops given one bfloat16 and one float32 operand run in float32 (PyTorch's
** "promote"). Attention (attention.c em_attention) runs in bfloat16 for
** the variants that declare their terms (fused kernel or composition). Every cast is an ordinary differentiable em_to_dtype, so
** float32 parameters stay float32 and their gradients arrive in float32.
** float64 tensors are never touched. The state is per thread, as PyTorch's.
**
** Casts of parameters are cached, as PyTorch's autocast caches them: with
** grad mode off (inference, decoding), a float32 leaf that requires grad
** is cast once per autocast region and the bfloat16 copy reused while its
** storage's version (em_tensor_written: every in-place op bumps it) stays
** the same. A decoding step of a 4-layer d256 model cast every weight on
** every token: 75 casts, most of its time. The cache empties when the
** outermost region ends. Under grad mode nothing is cached: each forward's
** casts are nodes of its own graph.
*/
#include "internal.h"

#include <stdlib.h>

static _Thread_local bool ac_on;
static _Thread_local em_dtype ac_dtype = EM_BF16;

/* The cast cache: src (retained, so its address is not reused while
** cached), its storage's version when cast, and the low-precision copy. */
typedef struct ac_entry {
  em_tensor *src, *low;
  uint64_t version;
} ac_entry;
/* A region keeps at most this many (a model's parameters); past it, new
** casts are not cached. */
#define AC_CACHE_MAX 4096
static _Thread_local ac_entry *ac_cache;
static _Thread_local int ac_cached, ac_cache_cap;

static void ac_cache_clear(void) {
  for (int i = 0; i < ac_cached; i++) em_release(ac_cache[i].src), em_release(ac_cache[i].low);
  free(ac_cache);
  ac_cache = NULL;
  ac_cached = ac_cache_cap = 0;
}

/* PyTorch's rule (autocast_mode.cpp, cached_cast): a leaf parameter, and
** here only with grad mode off. */
static bool ac_cacheable(const em_tensor *x, em_dtype want) {
  return want == ac_dtype && x->dtype == EM_F32 && x->requires_grad && !x->grad_fn &&
         !em_grad_enabled();
}

/* x cast to want, from the cache when it holds x at its current version. */
static em_status ac_cast_cached(em_tensor **out, em_tensor *x, em_dtype want) {
  const uint64_t version = __atomic_load_n(&x->storage->version, __ATOMIC_RELAXED);
  for (int i = 0; i < ac_cached; i++) {
    ac_entry *e = &ac_cache[i];
    if (e->src != x) continue;
    if (e->version == version) {
      *out = em_retain(e->low);
      return EM_OK;
    }
    EM_TRY(em_to_dtype(out, x, want)); /* written since: cast again, keep the new copy */
    em_release(e->low);
    e->low = em_retain(*out);
    e->version = version;
    return EM_OK;
  }
  EM_TRY(em_to_dtype(out, x, want));
  if (ac_cached == ac_cache_cap && ac_cache_cap < AC_CACHE_MAX) {
    const int cap = ac_cache_cap ? 2 * ac_cache_cap : 64;
    ac_entry *grown = realloc(ac_cache, (size_t)cap * sizeof *grown);
    if (grown) ac_cache = grown, ac_cache_cap = cap; /* else: not cached, still correct */
  }
  if (ac_cached < ac_cache_cap)
    ac_cache[ac_cached++] = (ac_entry){em_retain(x), em_retain(*out), version};
  return EM_OK;
}

/* An op's autocast policy. */
typedef enum { AC_LOW, AC_F32 } ac_policy;

/* Indexed by em_autocast_op, made from the one list (internal.h). */
static const struct {
  const char *name;
  ac_policy policy;
} AC_OPS[] = {
#define AC_ROW(e, name, policy) [e] = {#name, AC_##policy},
    EM_AUTOCAST_OPS(AC_ROW)
#undef AC_ROW
};
_Static_assert(sizeof AC_OPS / sizeof AC_OPS[0] == EM_AC_NOPS,
               "every autocast op has one policy row");

em_status em_autocast_set(bool enabled, em_dtype dt, bool *was_enabled, em_dtype *was_dt) {
  if (enabled && dt != EM_BF16)
    return em_error(EM_ERR_DTYPE, "autocast: dtype %s is not supported (supported: bfloat16)",
                    em_dtype_name(dt));
  if (was_enabled) *was_enabled = ac_on;
  if (was_dt) *was_dt = ac_dtype;
  if (!enabled || dt != ac_dtype) ac_cache_clear(); /* the outermost region ended */
  ac_on = enabled;
  if (enabled) ac_dtype = dt;
  return EM_OK;
}

bool em_autocast_pause(bool on) {
  const bool was = ac_on;
  ac_on = on;
  return was;
}

bool em_autocast_enabled(em_dtype *dt) {
  if (dt) *dt = ac_dtype;
  return ac_on;
}

em_status em__autocast_op(em_autocast_op op, int n, em_tensor *const *in, em_tensor **out) {
  for (int i = 0; i < n; i++) out[i] = NULL;
  if ((unsigned)op > EM_AC_NONE) return em_error(EM_ERR_ARG, "autocast: unknown op %d", (int)op);
  const bool cast = ac_on && op != EM_AC_NONE;
  for (int i = 0; i < n; i++) {
    em_tensor *x = in[i];
    if (!x) continue;
    em_dtype want = x->dtype;
    if (cast && AC_OPS[op].policy == AC_LOW && x->dtype == EM_F32) want = ac_dtype;
    if (cast && AC_OPS[op].policy == AC_F32 && x->dtype == ac_dtype) want = EM_F32;
    em_status s = want == x->dtype         ? (out[i] = em_retain(x), EM_OK)
                  : ac_cacheable(x, want) ? ac_cast_cached(&out[i], x, want)
                                          : em_to_dtype(&out[i], x, want);
    if (s) {
      for (int j = 0; j < i; j++) em_release(out[j]), out[j] = NULL;
      return s;
    }
  }
  return EM_OK;
}

em_status em_autocast_cast(em_tensor **out, em_tensor *x) {
  *out = NULL;
  if (!x) return em_error(EM_ERR_ARG, "autocast_cast: NULL tensor");
  if (!ac_on || x->dtype != EM_F32) {
    *out = em_retain(x);
    return EM_OK;
  }
  return ac_cacheable(x, ac_dtype) ? ac_cast_cached(out, x, ac_dtype) : em_to_dtype(out, x, ac_dtype);
}

bool em__autocast_promotes(em_dtype a, em_dtype b) {
  return ac_on && ((a == ac_dtype && b == EM_F32) || (a == EM_F32 && b == ac_dtype));
}

em_status em__autocast_same_dtype(const char *op, int n, em_tensor *const *in, em_tensor *const *cast) {
  int first = -1, other = -1, changed = 0;
  for (int i = 0; i < n; i++) {
    if (!in[i] || !cast[i]) continue;
    changed |= in[i]->dtype != cast[i]->dtype;
    if (first < 0) first = i;
    else if (other < 0 && cast[i]->dtype != cast[first]->dtype) other = i;
  }
  if (!changed || other < 0) return EM_OK; /* the op's own check names what it was given */
  char a[200], b[200];
  return em_error(EM_ERR_DTYPE,
                  "%s: dtype mismatch: %s vs %s (autocast runs the product in %s, casting float32 "
                  "operands, but leaves float64 and integer tensors as they are: convert one, "
                  "e.g. x:float())",
                  op, em__dt_shape(in[first], a, sizeof a), em__dt_shape(in[other], b, sizeof b),
                  em_dtype_name(ac_dtype));
}
