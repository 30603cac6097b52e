/*
** ember_attention.h -- the attention-variant plugin ABI.
**
** An attention variant is a plugin (see ember_plugin.h) of kind
** EM_PLUGIN_ATTENTION whose ember_plugin_init returns a
** const em_attention_variant *. The core looks variants up by name, checks
** and fills their options, owns their parameters (inside a module such as
** MultiHeadAttention) and joins their forward/backward to autograd as one
** op (an em_opdef), so the autograd engine knows nothing about attention.
**
** Shapes. q [B,H,Lq,dk], k [B,H,Lk,dk], v [B,H,Lk,dv]; out [B,H,Lq,dv];
** weights (optional) [B,H,Lq,Lk]. All float32 or all float64, one device.
**
** Mask semantics -- the same for every variant, enforced by the checker:
** - attn mask, boolean: true = MAY attend (as torch SDPA). Float: added to
**   the scores (-inf forbids). Broadcastable to [B,H,Lq,Lk].
** - key padding mask [B,Lk], boolean: true = padding (never attended).
** - causal, bottom-right aligned: query i sees key j iff j <= i + Lk - Lq
**   (so a query block at the end of a KV cache is right).
** - a query row that can see no key gives output 0 and gradient 0, never NaN.
** - scale defaults to 1/sqrt(dk).
** - dropout acts on the attention probabilities, with the seeded global
**   generator (em_initial_seed / em_rng_advance): the core reserves a Philox
**   stream of B*H*Lq*Lk counters per call; element (b,h,i,j) of the
**   row-major [B,H,Lq,Lk] grid is kept iff em_philox_keep(seed, offset,
**   index, em_philox_keep_threshold(p)) (ember_philox.h: word index % 4 of
**   counter offset + index / 4), the rule the backends' attention kernels
**   follow, and the core's own composition of a declared variant (weights
**   asked for, kernel = "dense", a backend without the fused kernel) too.
**   (A variant's own compose may use em_dropout instead, which draws its
**   own seeded stream.)
** - weights, when asked for, are the probabilities before dropout, detached
**   (for inspection: they carry no gradient).
** - masks get no gradient.
**
** Three ways to implement a variant (plugins/README.md walks through them;
** a variant written in Lua, lua/ember/variant.lua, is the fourth: it is
** declared here as standard attention and brings traced programs with each
** call, em_attn_mods). Each call then takes one ROUTE, counted by
** em_attention_route_counts: fused, forward or composed.
** - declare: the variant says, as data (em_attn_decl below), how it
**   changes standard attention -- a score bias of a built-in kind, a block
**   mask, Shaw's output term -- and the core runs it: the backend's fused
**   kernel (the fused route) when that kernel covers the call (the core
**   lowers the bias and the mask to traced programs, attention_lower.c, so
**   kernels see programs, not these kinds; table gradients come out of its
**   backward), the variant's compose (or, without
**   one, the core's own composition of the declaration; the composed route)
**   otherwise. No kernel to write.
** - forward + backward (+ free_saved), the forward route: one autograd
**   node. forward computes the output and returns an opaque saved state;
**   backward gets dout and that state and returns dq, dk, dv and the
**   gradients of the variant's own parameters. Both run with grad mode OFF,
**   on detached inputs, so any core op may be used inside without recording
**   anything.
** - compose, the composed route: a forward made of differentiable core ops,
**   run with grad mode as the caller has it; autograd records each core op.
**   No backward to write. Used when forward is NULL, or when can_forward
**   says no.
** A variant may have several (e.g. declare, and compose for devices whose
** fused kernel does not take the declaration). em_attn_route, in a
** declaration, is the route it asks for: auto, fused or composed.
**
** Adding a field: append it at the end and bump EM_ATTENTION_ABI_VERSION.
*/
#ifndef EMBER_ATTENTION_H
#define EMBER_ATTENTION_H

#include "ember.h"
#include "ember_expr.h"
#include "ember_plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EM_ATTENTION_ABI_VERSION 2

/* Most options / parameters a variant may declare. */
#define EM_ATTN_MAX_OPTIONS 32
#define EM_ATTN_MAX_PARAMS 8

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

typedef enum em_attn_opt_type {
  EM_ATTN_OPT_INT = 1,  /* a whole number (Lua integer or integral float) */
  EM_ATTN_OPT_FLOAT,
  EM_ATTN_OPT_BOOL,
  EM_ATTN_OPT_STRING
} em_attn_opt_type;

/* One option a variant accepts, with its default and its validation. The
** core rejects unknown names, wrong types, values out of [min, max] and
** strings not in `choices`, with a message listing what is accepted. */
typedef struct em_attn_option_spec {
  const char *name;          /* Lua key, snake_case: "window_left" */
  em_attn_opt_type type;
  double default_num;        /* default for INT, FLOAT and BOOL (0 or 1) */
  const char *default_str;   /* default for STRING */
  bool bounded;              /* INT/FLOAT: enforce min <= value <= max */
  double min, max;
  const char *choices;       /* STRING: allowed values joined by '|'; NULL = any */
  const char *help;          /* one line, shown in errors and the checker */
} em_attn_option_spec;

/* A value as given by a user (before checking). */
typedef struct em_attn_value {
  em_attn_opt_type type;     /* INT, FLOAT and BOOL all read `num` */
  double num;
  const char *str;           /* STRING; borrowed */
} em_attn_value;

/* Checked values of every option of a variant, in spec order (defaults
** filled in). Made by em_attn_options_new; strings are owned copies. */
typedef struct em_attn_options {
  const struct em_attention_variant *variant;
  int n;                     /* variant->n_options */
  em_attn_value *values;     /* n entries, in spec order */
} em_attn_options;

/* ------------------------------------------------------------------ */
/* Parameters and calls                                                */
/* ------------------------------------------------------------------ */

/* Sizes an instance of a variant is built for (a module knows them at
** construction; the tensors of a call must agree). */
typedef struct em_attn_dims {
  int64_t heads, dk, dv;
} em_attn_dims;

/* A tensor a variant owns per instance: a learned table (gradient) or a
** buffer (saved with the module's state, no gradient: random features). */
typedef struct em_attn_param {
  const char *name;          /* static string in the plugin: "rel_k" */
  em_tensor *tensor;         /* a new reference made by init_params */
  bool learned;              /* true: parameter with gradient; false: buffer */
} em_attn_param;

/* One call of a variant. Filled and checked by the core (em_attention):
** shapes agree, dtypes match, masks have the shapes below, options are
** valid. A variant may rely on all of it. */
typedef struct em_attn_call {
  const struct em_attention_variant *variant;
  em_tensor *q, *k, *v;        /* forward: contiguous and detached;
                                  compose: the caller's tensors, any strides */
  em_tensor *key_padding;      /* bool [B,Lk] contiguous, true = padding; or NULL */
  em_tensor *mask;             /* [B,H,Lq,Lk] view (0 strides where broadcast):
                                  bool (true = may attend) or additive, q's
                                  dtype; or NULL */
  bool causal;                 /* bottom-right aligned */
  double scale;                /* > 0; 1/sqrt(dk) unless the user set it */
  double dropout_p;            /* in [0,1); 0 outside training */
  uint64_t seed, offset;       /* Philox stream for dropout (see above) */
  bool training;
  bool need_weights;           /* write *weights [B,H,Lq,Lk] */
  bool need_grad;              /* false: no backward will follow; forward may
                                  skip saving state (*saved may stay NULL) */
  const em_attn_options *options;
  int n_params;
  em_tensor *const *params;    /* the instance's params, in init order
                                  (detached in forward) */
  em_attn_dims dims;           /* heads = H, dk, dv of this call */
  int64_t B, H, Lq, Lk;        /* for convenience: from q, k */
  const struct em_attn_mods *mods; /* a traced variant's programs, or NULL */
  int64_t Hkv;                 /* heads of k and v: H, or a divisor of H (grouped-query
                                  attention; only the fused route sees Hkv < H -- a variant's
                                  forward or compose gets k and v repeated to H heads) */
} em_attn_call;

/* Capabilities. The core refuses, with a clear message, a call that needs
** one the variant lacks (for example an arbitrary mask on linear attention). */
#define EM_ATTN_CAP_MASK        (1u << 0) /* boolean or additive attn mask */
#define EM_ATTN_CAP_KEY_PADDING (1u << 1)
#define EM_ATTN_CAP_CAUSAL      (1u << 2)
#define EM_ATTN_CAP_DROPOUT     (1u << 3)
#define EM_ATTN_CAP_WEIGHTS     (1u << 4) /* can return the [B,H,Lq,Lk] weights */
#define EM_ATTN_CAP_CROSS       (1u << 5) /* Lq != Lk */
#define EM_ATTN_CAP_ALL         0x3fu

/* ------------------------------------------------------------------ */
/* Declarations (the fused route)                                       */
/* ------------------------------------------------------------------ */

/* Relative position of key j to query i: r = j - p with p = i + Lk - Lq
** (bottom-right, as causal). The declared terms all depend on (h, r). */

/* The score bias a variant adds. */
typedef enum em_attn_bias_kind {
  EM_ATTN_BIAS_NONE = 0,
  EM_ATTN_BIAS_ALIBI,  /* s -= slope_h * |r|, the ALiBi paper's slopes for H heads */
  EM_ATTN_BIAS_TABLE,  /* s += table[idx(r), h]; table = params[table_param], [n, H] */
  EM_ATTN_BIAS_SHAW    /* s += scale * q_i . rel_k[idx(r)] (params[rel_k_param], [n, dk]);
                          with rel_v_param >= 0 also out_i += sum_j P_ij rel_v[idx(r)] ([n, dv]) */
} em_attn_bias_kind;

/* How r becomes a table row idx(r) (TABLE and SHAW). */
typedef enum em_attn_rel_kind {
  EM_ATTN_REL_CLIP = 0,  /* clip(r, -max_distance, max_distance) + max_distance: n = 2K+1 */
  EM_ATTN_REL_ABS_CLIP,  /* min(|r|, max_distance): n = K+1 (a learned distance penalty) */
  EM_ATTN_REL_T5         /* T5's log-spaced bucket of r: num_buckets rows, bidirectional or
                            not, distances from max_distance on share the last bucket */
} em_attn_rel_kind;

/* Which keys a query may see, on top of causal and the masks:
**   WINDOW: p - left <= j <= p + right;
**   BLOCKS: key block j/block within +-local of query block p/block;
** and with global > 0, positions [0, global) see and are seen by all. The
** core lowers it to a mask program (attention_lower.c: the one place the
** rule is written), whose block map lets kernels skip the (query tile,
** key tile) pairs it hides, in forward and backward. */
typedef enum em_attn_mask_kind {
  EM_ATTN_MASK_NONE = 0,
  EM_ATTN_MASK_WINDOW,
  EM_ATTN_MASK_BLOCKS
} em_attn_mask_kind;

typedef struct em_attn_block_mask {
  em_attn_mask_kind kind;
  int64_t left, right;   /* WINDOW, >= 0 */
  int64_t block, local;  /* BLOCKS: block > 0, local >= 0 */
  int64_t global;        /* >= 0 */
} em_attn_block_mask;

/* Which route the core takes for a declared call. */
typedef enum em_attn_route {
  EM_ATTN_ROUTE_AUTO = 0,  /* fused kernel when it covers the call, else composed */
  EM_ATTN_ROUTE_FUSED,     /* fused kernel or an error saying why not */
  EM_ATTN_ROUTE_COMPOSED   /* core ops (O(L^2) memory), e.g. as a reference */
} em_attn_route;

/* What a variant declares about an instance (from its options and dims). */
typedef struct em_attn_decl {
  em_attn_route route;
  em_attn_bias_kind bias;
  em_attn_rel_kind rel;        /* TABLE and SHAW */
  int64_t max_distance;        /* CLIP/ABS_CLIP: K; T5: max_distance */
  int64_t num_buckets;         /* T5 */
  bool bidirectional;          /* T5 */
  int table_param;             /* TABLE: index into params; -1 otherwise */
  int rel_k_param, rel_v_param; /* SHAW: indices into params (rel_v may be -1) */
  em_attn_block_mask mask;
} em_attn_decl;

/* A declaration that changes nothing (standard attention): table indices -1. */
EM_API void em_attn_decl_init(em_attn_decl *d);
/* Rows of the table a declaration indexes (0 for NONE and ALIBI). */
EM_API int64_t em_attn_decl_rows(const em_attn_decl *d);
/* idx(r) of a declaration (TABLE/SHAW). */
EM_API int64_t em_attn_rel_row(const em_attn_decl *d, int64_t r);
/* ALiBi slope of head h of n heads. */
EM_API double em_attn_alibi_slope(int64_t h, int64_t n);
/* Does the block mask let the query at key-axis position p see key j?
** (Its lowered program, evaluated once.) */
EM_API bool em_attn_mask_allows(const em_attn_block_mask *m, int64_t p, int64_t j);

/* Query i's position on the key axis (bottom-right alignment). */
static inline int64_t em_attn_qpos(const em_attn_call *c, int64_t i) { return i + c->Lk - c->Lq; }

/* How em_attention ran its calls since the process started (for tests and
** benchmarks: a declared variant that lands in `composed` on a host float
** call fell back where the fused kernel should have covered it). */
typedef struct em_attn_route_counts {
  uint64_t fused;      /* the backend's fused kernel: a declaration or traced programs */
  uint64_t composed;   /* core ops: compose, and a declaration where the kernel declines */
  uint64_t forward;    /* the variant's own forward/backward */
  uint64_t kv_in_place; /* fused calls that read k and v in place from a KV cache's
                           buffers (em_attention_args.kv_rows, or k_stride and v_stride)
                           instead of copying them */
} em_attn_route_counts;
EM_API void em_attention_route_counts(em_attn_route_counts *out);
/* Counts a call a caller ran itself (0 fused, 1 composed, 2 forward): a
** traced variant's composition runs in Lua. */
EM_API void em_attention_count_route(int route);

/* A tape of fused attention results, for a recompute (activation
** checkpointing, lua/ember/nn/activation_checkpoint.lua;
** core/src/attention_reuse.c has the rule). Pushed in RECORD mode around a
** region's first forward, it keeps each fused call's out and lse (O(L*d)
** bytes a call); pushed in REPLAY mode around the recompute, it hands them
** back in call order instead of running the forward kernel, when the call
** is the same (variant, options, sizes, scalars, sampled input values) and
** out was not written since; else the call computes. The autograd node is
** recorded either way. Tapes stack per thread; pop takes t (and anything
** left above it) off. Host-memory backends only. */
typedef struct em_attn_tape em_attn_tape;
enum { EM_ATTN_TAPE_RECORD = 1, EM_ATTN_TAPE_REPLAY = 2 };
typedef struct em_attn_tape_stats {
  uint64_t recorded; /* calls kept while recording */
  uint64_t reused;   /* calls handed back while replaying */
  uint64_t missed;   /* calls that computed while replaying */
  uint64_t kept;     /* entries held now */
} em_attn_tape_stats;
EM_API em_status em_attn_tape_new(em_attn_tape **out);
EM_API void em_attn_tape_free(em_attn_tape *t); /* pops it first; NULL is fine */
EM_API em_status em_attn_tape_push(em_attn_tape *t, int mode);
EM_API void em_attn_tape_pop(em_attn_tape *t);   /* a no-op when t is not pushed */
EM_API void em_attn_tape_clear(em_attn_tape *t); /* drops the kept results */
EM_API void em_attn_tape_get_stats(const em_attn_tape *t, em_attn_tape_stats *out);
EM_API int em_attn_tape_depth(void); /* tapes pushed on this thread */

/* ------------------------------------------------------------------ */
/* The vtable                                                          */
/* ------------------------------------------------------------------ */

typedef struct em_attention_variant {
  uint32_t abi_version;        /* EM_ATTENTION_ABI_VERSION */
  uint32_t struct_size;        /* sizeof(em_attention_variant) as built */
  const char *name;            /* same as the plugin info name: "linear" */
  const char *version;         /* the variant's own version, free text */
  const char *description;     /* one line */
  uint32_t caps;               /* EM_ATTN_CAP_* */

  int n_options;               /* 0..EM_ATTN_MAX_OPTIONS */
  const em_attn_option_spec *options; /* n_options specs (may be NULL if 0) */

  /* optional: cross-option and size checks at construction, after each
  ** option passed its own spec. Fail with em_error(EM_ERR_ARG, "...").
  ** dims may be NULL when sizes are not known yet. */
  em_status (*check)(const em_attn_options *opts, const em_attn_dims *dims);

  /* optional: makes the instance's parameters and buffers (up to
  ** EM_ATTN_MAX_PARAMS) in dtype dt on dev, initialised (random ones from
  ** the global generator). Sets *n. NULL: the variant has none. */
  em_status (*init_params)(const em_attn_options *opts, const em_attn_dims *dims, em_dtype dt,
                           em_device dev, int *n, em_attn_param *params);

  /* optional (the forward route): computes *out [B,H,Lq,dv] (a new tensor), and
  ** *weights [B,H,Lq,Lk] when c->need_weights, and *saved (anything the
  ** backward needs; NULL is fine). Grad mode is off and the inputs are
  ** detached. The caller receives a fresh alias of *out that carries the
  ** autograd node, so *saved may keep references to *out and the inputs
  ** without making a reference cycle. */
  em_status (*forward)(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved);

  /* optional (the forward route, required with forward): from dout [B,H,Lq,dv]
  ** (contiguous) and the saved state, sets grads[0..2] = dq, dk, dv and
  ** grads[3 + i] = gradient of params[i] (new references). needs[i] says
  ** whether grads[i] is wanted; an unwanted one may be left NULL. A wanted
  ** one left NULL means zero. Grad mode is off. May be called more than
  ** once for one forward (retain_graph): do not change `saved`. */
  em_status (*backward)(void *saved, em_tensor *dout, const bool *needs, em_tensor **grads);

  /* optional: frees what forward saved (called once, when the graph goes). */
  void (*free_saved)(void *saved);

  /* optional (the composed route): the output as a composition of differentiable core
  ** ops on c->q, c->k, c->v and c->params (grad mode as the caller has it).
  ** Sets *out and, when c->need_weights, *weights. */
  em_status (*compose)(const em_attn_call *c, em_tensor **out, em_tensor **weights);

  /* optional: whether forward can serve this call (for example: false for
  ** tensors not in host memory when forward is a host kernel). False sends
  ** the call to compose. NULL: forward serves every call. The call is
  ** complete except that q, k, v and params are the caller's tensors. */
  bool (*can_forward)(const em_attn_call *c);

  /* optional (the fused route, ABI 2): fills d (already em_attn_decl_init'ed) with
  ** what this instance changes in standard attention. When set, the core
  ** runs the call (see the top of this file) and forward/backward/
  ** can_forward are not used. */
  em_status (*declare)(const em_attn_options *opts, const em_attn_dims *dims, em_attn_decl *d);
} em_attention_variant;

/* ------------------------------------------------------------------ */
/* Core API (libember)                                                 */
/* ------------------------------------------------------------------ */

/* Checks a vtable returned by a plugin's init: ABI version, struct size,
** name, and that it can run (forward+backward, or compose). Writes the
** reason into err and returns false when it is unusable. The plugin loader
** calls it; em_attention_find calls it again. */
EM_API bool em_attention_variant_check(const void *vtable, char *err, size_t errlen);

/* The loaded variant with that name. The error lists the loaded variants
** and the rejected candidates with their reasons. */
EM_API em_status em_attention_find(const char *name, const em_attention_variant **out);
/* The names of loaded variants, joined by ", " into buf. */
EM_API const char *em_attention_list(char *buf, size_t n);

/* Checks user options (n pairs of name and value) against the variant's
** specs and fills defaults; dims may be NULL (then check() sees NULL). The
** error names the option and lists the accepted ones with their types. */
EM_API em_status em_attn_options_new(em_attn_options **out, const em_attention_variant *v, int n,
                                     const char *const *names, const em_attn_value *values,
                                     const em_attn_dims *dims);
EM_API void em_attn_options_free(em_attn_options *o);
/* Index of an option in spec order, or -1. */
EM_API int em_attn_option_index(const em_attention_variant *v, const char *name);
/* Typed reads for variants (name must be one of the variant's options; an
** unknown name gives 0 / "" -- a programming error the checker catches). */
EM_API double em_attn_opt_num(const em_attn_options *o, const char *name);
EM_API int64_t em_attn_opt_int(const em_attn_options *o, const char *name);
EM_API bool em_attn_opt_bool(const em_attn_options *o, const char *name);
EM_API const char *em_attn_opt_str(const em_attn_options *o, const char *name);
/* "window_left=4, window_right=0, ..." into buf. */
EM_API const char *em_attn_options_str(const em_attn_options *o, char *buf, size_t n);
/* For a variant's check: the first of `names` (NULL-terminated) whose value
** differs from its default is an EM_ERR_ARG naming the variant, the option
** and its value, then `why` ("with mode=\"block\" (it is for mode=
** \"sliding\")"): an option the chosen mode never reads is refused, not
** silently ignored. EM_OK when all of them are at their defaults. */
EM_API em_status em_attn_unused_options(const em_attn_options *o, const char *const *names, const char *why);

/* Makes the variant's parameters (see init_params); *n = 0 if it has none. */
EM_API em_status em_attn_init_params(const em_attention_variant *v, const em_attn_options *o,
                                     const em_attn_dims *dims, em_dtype dt, em_device dev, int *n,
                                     em_attn_param *params);

/* What a caller hands to em_attention. Masks as in the rules above, in
** their user shapes (the core checks and broadcasts them). */
typedef struct em_attn_args {
  em_tensor *key_padding;      /* bool [B,Lk] or NULL */
  em_tensor *mask;             /* bool or float, broadcastable to [B,H,Lq,Lk], or NULL */
  bool causal;
  double scale;                /* <= 0: 1/sqrt(dk) */
  double dropout_p;            /* used only when training */
  bool training;
  bool need_weights;
  const struct em_attn_mods *mods; /* a traced variant's programs, or NULL */
} em_attn_args;

/* A traced variant's programs (ember_expr.h; lua/ember/variant.lua makes
** them) and its captures for one call. Loads name captures 0..n_caps-1:
** capture c is the call's param cap_param[c] (a table: learned ones get
** their gradient from the kernel's backward) or, when cap_param[c] < 0,
** the per-call tensor cap_input[c] (document ids ...: no gradient). The
** score is modified first, on s = scale * q.k; the user's additive mask,
** key padding, causal and the mask program then hide keys. */
typedef struct em_attn_mods {
  const em_expr *score;        /* out[0]: the new score; or NULL */
  const em_expr *score_grad;   /* out[0]: score, out[1]: d/ds, out[2+g]: d/d(load grad_load[g]) */
  const em_expr *mask;         /* out[0] != 0: the key may be attended; or NULL */
  const em_expr *sink;         /* out[0]: a logit per query row (no k, no s) that joins each
                                  softmax's normaliser without a value (attention sinks); or NULL */
  const em_expr *sink_grad;    /* out[0]: sink, out[2+g]: d/d(load grad_load[g]) */
  int n_caps;
  int cap_param[EM_EXPR_MAX_CAPS];
  em_tensor *cap_input[EM_EXPR_MAX_CAPS];
  const char *cap_name[EM_EXPR_MAX_CAPS];
  int cap_ndim[EM_EXPR_MAX_CAPS];  /* the dims the programs index each capture with */
} em_attn_mods;

/* Runs a variant on q, k, v with its options and params, recording one
** autograd op (the fused or forward route) or the composed ops (the composed route). *weights (when
** args->need_weights; detached, for inspection) may be NULL otherwise. */
EM_API em_status em_attention(em_tensor **out, em_tensor **weights, const em_attention_variant *v,
                              const em_attn_options *o, int n_params, em_tensor *const *params,
                              em_tensor *q, em_tensor *k, em_tensor *v_, const em_attn_args *args);

/* ---- helpers for variants (compositions of core ops, saved state) ---- */

/* Copies a call for use in backward: retains q, k, v and the masks, and
** clears the pointers that do not outlive the call (options, params). */
EM_API void em_attn_call_keep(em_attn_call *dst, const em_attn_call *src);
EM_API void em_attn_call_drop(em_attn_call *c);
/* Do the call's tensors live in host memory? */
EM_API bool em_attn_on_host(const em_attn_call *c);
/* A bool tensor broadcastable to [B,H,Lq,Lk], true where attending is
** allowed by the causal flag, the key padding mask, the boolean attn mask
** and `extra` (another bool mask or NULL). *allowed = NULL when all is
** allowed. Not differentiable (masks are constants). */
EM_API em_status em_attn_allowed(const em_attn_call *c, em_tensor *extra, em_tensor **allowed);
/* From scores [B,H,Lq,Lk] (scaled, any biases added), applies the additive
** attn mask, the `allowed` mask (may be NULL), a softmax that gives 0 on
** rows that see nothing, and dropout (em_dropout's stream). *probs are the
** probabilities before dropout (may be NULL), *dropped after. */
EM_API em_status em_attn_softmax(const em_attn_call *c, em_tensor *scores, em_tensor *allowed,
                                 em_tensor **probs, em_tensor **dropped);
/* Dense softmax attention of the call as core ops (plus an extra additive
** bias [.., Lq, Lk] and an extra allowed mask, both may be NULL):
** out = dropout(softmax(q k^T * scale + bias)) v. Differentiable; O(L^2). */
EM_API em_status em_attn_dense(const em_attn_call *c, em_tensor *bias, em_tensor *extra_allowed,
                               em_tensor **out, em_tensor **weights);
/* A declared call as core ops (the composed fallback): differentiable in
** q, k, v and the declared tables. */
EM_API em_status em_attn_compose_decl(const em_attn_call *c, const em_attn_decl *d,
                                      em_tensor **out, em_tensor **weights);

#ifdef __cplusplus
}
#endif
#endif
