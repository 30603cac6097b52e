/*
** internal.h -- helpers shared by the core's own files (not installed).
** Prefix: em__ (double underscore) for internal functions.
*/
#ifndef EMBER_INTERNAL_H
#define EMBER_INTERNAL_H

#include "ember.h"
#include "ember_attention.h"
#include "ember_backend.h"
#include "ember_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Return on error: `EM_TRY(em_add(&t, a, b));` */
#define EM_TRY(expr)                 \
  do {                               \
    em_status em__s = (expr);        \
    if (em__s != EM_OK) return em__s; \
  } while (0)

/* Largest tensor we agree to allocate (elements); beyond it is EM_ERR_OOM
** with a clear message, not a malloc of 8 TB. */
#define EM__MAX_NUMEL ((int64_t)1 << 40)

/* A fresh contiguous tensor structure over new storage. */
em_status em__new(em_tensor **out, int ndim, const int64_t *shape, em_dtype dt, em_device dev,
                  const char *op);
/* A new tensor header viewing x's storage with the given geometry
** (no autograd recording, requires_grad off). */
em_status em__alias(em_tensor **out, em_tensor *x, int ndim, const int64_t *shape,
                    const int64_t *stride, int64_t offset);
/* Backward engine: a narrow/select/slice node's gradient put into its
** input's (node `to`'s) pending gradient in place where that is safe
** (ops_view.c). */
em_status em__region_accumulate(em_node *n, em_tensor *gy, em_node *to, bool *done);
/* Zeroes what the pieces left unwritten of node n's pending gradient
** (em_node.pieces_unset); before anything else reads or adds to it. */
em_status em__settle_pieces(em_node *n);

/* Normalises a dim (negative counts from the end) against ndim; error names op. */
em_status em__dim(const char *op, int dim, int ndim, int *out);
/* Checks that tensors share a device; error names op and both devices. */
em_status em__same_device(const char *op, const em_tensor *a, const em_tensor *b);
/* The ops that autocast (autocast.c) casts, each with its policy:
** X(ENUM, name, policy), LOW = into the autocast dtype, F32 = up to
** float32. One list makes the enum and the policy table, so an op cannot
** lack a policy; "attention" is a variant that declares its terms (fused
** kernel or composition), "attention_own_kernels" one with its own kernels (the forward route, float32). */
#define EM_AUTOCAST_OPS(X)                                                     \
  X(EM_AC_MATMUL, matmul, LOW)                                                 \
  X(EM_AC_BMM, bmm, LOW)                                                       \
  X(EM_AC_CONV, conv2d, LOW)                                                   \
  X(EM_AC_ATTENTION, attention, LOW)                                           \
  X(EM_AC_ATTENTION_OWN, attention_own_kernels, F32)                           \
  X(EM_AC_SOFTMAX, softmax, F32)                                               \
  X(EM_AC_LOG_SOFTMAX, log_softmax, F32)                                       \
  X(EM_AC_LAYER_NORM, layer_norm, F32)                                         \
  X(EM_AC_CROSS_ENTROPY, cross_entropy, F32)                                   \
  X(EM_AC_MSE_LOSS, mse_loss, F32)                                             \
  X(EM_AC_SUM, sum, F32)                                                       \
  X(EM_AC_MEAN, mean, F32)                                                     \
  X(EM_AC_VAR, var, F32)
typedef enum {
#define EM_AC_ENUM(e, name, policy) e,
  EM_AUTOCAST_OPS(EM_AC_ENUM)
#undef EM_AC_ENUM
  EM_AC_NOPS,
  EM_AC_NONE = EM_AC_NOPS /* an op autocast leaves alone (max, min, ...) */
} em_autocast_op;
/* Autocast: out[i] is in[i] cast as op's autocast policy says (a new
** reference either way); all retained copies when autocast is off or op
** is EM_AC_NONE. */
em_status em__autocast_op(em_autocast_op op, int n, em_tensor *const *in, em_tensor **out);
/* Whether a binary op with operands of dtypes a and b runs in float32
** because autocast is on and one of them is the autocast dtype. */
bool em__autocast_promotes(em_dtype a, em_dtype b);
/* For an op whose operands must share a dtype (matmul, bmm, linear,
** conv2d): EM_OK unless autocast cast some of in[] (into cast[]) and they
** still disagree (a float64 or int64 operand beside a float32 one); then
** an error that names the dtypes the caller gave, not the cast's. */
em_status em__autocast_same_dtype(const char *op, int n, em_tensor *const *in, em_tensor *const *cast);

/* Checks the dtype is float32/float64 (and bf16 where allowed). */
em_status em__need_float(const char *op, const em_tensor *t, const char *what);
em_status em__need_dtype(const char *op, const em_tensor *t, em_dtype dt, const char *what);
/* The backend of a tensor (never NULL for a live tensor). */
const em_backend *em__be(const em_tensor *t);
/* "[2, 3] float32 cpu" into buf. */
const char *em__desc(const em_tensor *t, char *buf, size_t n);

/* attention_sdpa.c: the fused route of em_attention (declared and traced variants) */
struct em_attn_call;
struct em_attn_decl;
em_status em__attn_decl_check(const struct em_attn_call *c, const struct em_attn_decl *d);
em_status em__sdpa_forward(const struct em_attn_call *c, const struct em_attn_decl *d,
                           em_tensor **out, void **saved);
em_status em__sdpa_backward(void *saved, em_tensor *dout, const bool *needs, em_tensor **grads);
void em__sdpa_free(void *saved);
/* attention_lower.c: a declaration's terms (ALiBi, a bias table, a block
** mask) as traced programs, with the captured tensors of one call (own[],
** released by em__attn_lowered_free). mods.n_caps > 0: there was a term
** to lower (every lowered term reads at least one capture). */
typedef struct em__attn_lowered {
  struct em_attn_mods mods;
  em_tensor *own[EM_EXPR_MAX_CAPS];
} em__attn_lowered;
em_status em__attn_lower(const struct em_attn_call *c, const struct em_attn_decl *d, em__attn_lowered *lo);
void em__attn_lowered_free(em__attn_lowered *lo);
/* The same programs evaluated densely on the host for the composed route:
** mask [Lq*Lk] (1 = may attend) and the ALiBi bias with s = 0 [H*Lq*Lk];
** either may be NULL. */
em_status em__attn_lowered_dense(const struct em_attn_call *c, const struct em_attn_decl *d, uint8_t *mask,
                                 double *bias);
/* The block map of a mask program (attention_expr.c): bytes EM_XTILE_* on
** a grid of g x g positions, [Bm][Hm][nq][nk] with strides sb, sh (0 where
** the mask reads no batch or head). */
struct em_expr;
struct em_xcap;
em_status em__xmap_build(const struct em_expr *e, const struct em_xcap *caps, int64_t B, int64_t H,
                         int64_t Lq, int64_t Lk, int64_t grain, em_tensor **map, int64_t *nq,
                         int64_t *nk, int64_t *sb, int64_t *sh);
/* The same, from a small cache keyed by program, shape and the content of
** the captures the mask reads. */
em_status em__xmap_get(const struct em_expr *e, const struct em_xcap *caps, int64_t B, int64_t H,
                       int64_t Lq, int64_t Lk, int64_t grain, em_tensor **map, int64_t *nq,
                       int64_t *nk, int64_t *sb, int64_t *sh);
/* counts a call in em_attention_route_counts: 0 fused, 1 composed, 2 forward */
void em__attn_count(int route);
/* The tape of em_attn_tape (attention_reuse.c): whether one is pushed; a
** fused call's key (0 words: not recordable; k holds EM__ATTN_KEY_MAX); take hands
** back a recorded out and lse (retained) or says false; put records them. */
#define EM__ATTN_KEY_MAX 160
bool em__attn_tape_active(void);
int em__attn_tape_key(uint64_t *k, const em_attn_call *c, const em_attention_args *a,
                      em_tensor *const *ins, int n_ins);
bool em__attn_tape_take(const uint64_t *key, int n_key, em_tensor **out, em_tensor **lse);
void em__attn_tape_put(const uint64_t *key, int n_key, em_tensor *out, em_tensor *lse);
/* Prefixes the current error message with "op: " when a kernel failed. */
em_status em__kernel_fail(const char *op, em_status s);
/* Broadcast two shapes; error names op and both shapes. */
em_status em__broadcast_shape(const char *op, int na, const int64_t *sa, int nb,
                              const int64_t *sb, int *nout, int64_t *sout);
/* A kview of t expanded to (ndim, shape) with 0 strides on broadcast dims. */
void em__kview_bcast(const em_tensor *t, int ndim, const int64_t *shape, em_kview *kv);
/* Contiguous input for a kernel: retains t or makes a copy (no autograd). */
em_status em__contig(em_tensor **out, em_tensor *t);
/* A new contiguous copy of t's values, always (no autograd); op names a failure. */
em_status em__copy_of(em_tensor **out, em_tensor *t, const char *op);
/* ops_elementwise.c's rules that ops_inplace.c shares: an operand shown as
** "float32 [2, 3]" in dtype messages; a binary op's dtype check (a and b
** share a dtype); all n elements of a contiguous tensor as one run; a and b
** given a common dtype and device (new references); a number rounded to
** dt as PyTorch rounds a float32 scalar. */
const char *em__dt_shape(const em_tensor *t, char *buf, size_t n);
em_status em__binary_check(em_binary_op op, const em_tensor *a, const em_tensor *b);
/* PyTorch's refusal of subtraction with a bool operand (either may be NULL:
** a number). */
em_status em__bool_sub_check(const em_tensor *a, const em_tensor *b);
void em__kview_flat(const em_tensor *t, int64_t n, em_kview *kv);
em_status em__unify(const char *op, em_tensor *a, em_tensor *b, em_tensor **pa, em_tensor **pb);
double em__as_dtype(em_dtype dt, double s);

/* em_dropout on the given Philox stream (ops_loss.c): the composed
** attention route drops what the fused kernel drops under the same seed. */
em_status em__dropout_at(em_tensor **out, em_tensor *x, double p, uint64_t seed, uint64_t offset);
/* [outer, n, inner] sizes of a contiguous shape around dim. */
void em__split_dims(int ndim, const int64_t *shape, int dim, int64_t *outer, int64_t *n,
                    int64_t *inner);
/* A 0-d tensor holding s in dtype dt on dev. */
em_status em__scalar(em_tensor **out, double s, em_dtype dt, em_device dev);
/* Product of shape entries; -1 on overflow beyond EM__MAX_NUMEL. */
int64_t em__numel_of(int ndim, const int64_t *shape);
/* Accumulates into *acc (a new reference or NULL): *acc = *acc + g. Takes
** ownership of g. Used by the engine and by ops that sum gradients. */
em_status em__accumulate(em_tensor **acc, em_tensor *g);

/* Plugins (plugin.c) */
void em__plugins_ensure_loaded(void);
/* Checks on untrusted plugin bytes (plugin_check.c), run before dlopen and
** before any plugin code: a 64-bit ELF shared object for this machine whose
** program headers and every loadable segment lie inside the `size` bytes. */
bool em__elf_check(const unsigned char *file, size_t size, char *reason, size_t n);
/* A plugin's info struct: known kind, matching ABI, a sane name. */
bool em__plugin_info_check(const em_plugin_info *info, char *reason, size_t n);

/* Profiler (profiler.c). em__be hands out the recording vtable of
** em__prof_backend while em__prof_on; the engine brackets each node's
** backward with em__prof_backward_begin/end while it is on. */
#include <stdatomic.h>
extern _Atomic bool em__prof_on;
static inline bool em__prof_is_on(void) {
  return atomic_load_explicit(&em__prof_on, memory_order_relaxed);
}
const em_backend *em__prof_backend(int slot);
/* op NULL: the whole pass ("backward"); else one node ("matmul backward") */
void em__prof_backward_begin(const char *op);
void em__prof_backward_end(void);

/* Storages (tensor.c) */
void em__storage_release(em_storage *s);

#endif
