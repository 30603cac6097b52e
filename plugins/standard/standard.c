/*
** standard.c -- scaled dot-product attention, the reference variant.
**
** Three ways to run, picked per call (option `kernel`, default "auto"):
**   fused  the backend's attention_forward/backward (flash-style: online
**          softmax, logsumexp saved, backward recomputes; O(L) memory;
**          the CPU kernel skips fully masked causal tiles);
**   rows   this plugin's host row kernel (plugins/common/rowattn.c): same
**          math, O(L) memory, causal rows stop at the diagonal;
**   dense  core ops (any backend): materialises the [B,H,Lq,Lk] scores.
** auto = fused when the backend has it and no weights are asked for, else
** rows on host memory, else dense. Under auto, a fused kernel that declines
** a call (EM_ERR_UNSUPPORTED: the CUDA kernel does for float64 or head dims
** over 256) is not an error: the call runs unfused instead, rows on host
** memory, else dense core ops with their own little autograd graph (see
** "fallback" below).
*/
#include "attn_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto",
   .choices = "auto|fused|rows|dense",
   .help = "fused backend kernel, host row kernel, or dense core ops"},
};

static const char *kernel_of(const em_attn_call *c) { return em_attn_opt_str(c->options, "kernel"); }

static bool has_fused(const em_attn_call *c) {
  const em_backend *be = em_backend_of(c->q);
  return be->attention_forward && be->attention_backward;
}

/* fused or rows? (only asked when forward runs) */
static bool use_fused(const em_attn_call *c) {
  const char *k = kernel_of(c);
  if (strcmp(k, "fused") == 0) return true;
  if (strcmp(k, "rows") == 0) return false;
  return has_fused(c) && !c->need_weights;
}

static bool std_can_forward(const em_attn_call *c) {
  const char *k = kernel_of(c);
  if (strcmp(k, "dense") == 0) return false;
  if (strcmp(k, "fused") == 0) return true; /* forward explains if it cannot */
  if (strcmp(k, "rows") == 0) return ac_host(c);
  return (has_fused(c) && !c->need_weights) || ac_host(c);
}

/* ---- fused path ---------------------------------------------------------- */

typedef struct fused_saved {
  em_attn_call c;
  em_tensor *out, *lse, *bias;
  em_attention_args args;
  bool auto_kernel; /* kernel="auto": backward may replay the call unfused */
} fused_saved;

static void fused_free(fused_saved *s) {
  ac_call_drop(&s->c);
  em_release(s->out), em_release(s->lse), em_release(s->bias);
  free(s);
}

/* The attn mask as an additive bias without expanding broadcast dims:
** dims the user broadcast (stride 0) are narrowed to 1 and get stride 0. */
static em_status make_bias(const em_attn_call *c, em_tensor **bias, int64_t stride[4]) {
  *bias = NULL;
  memset(stride, 0, 4 * sizeof stride[0]);
  if (!c->mask) return EM_OK;
  em_tensor *m = em_retain(c->mask), *t = NULL;
  em_status s = EM_OK;
  for (int d = 0; d < 4 && s == EM_OK; d++)
    if (m->stride[d] == 0 && m->shape[d] > 1) {
      s = em_narrow(&t, m, d, 0, 1);
      em_release(m);
      m = t;
    }
  if (s == EM_OK && m->dtype == EM_BOOL) {
    em_tensor *z = NULL, *nm = NULL;
    s = em_zeros(&z, 4, m->shape, c->q->dtype, c->q->device);
    if (s == EM_OK) s = em_unary(&nm, EM_NOT, m, 0, 0);
    if (s == EM_OK) s = em_masked_fill(bias, z, nm, -INFINITY);
    em_release(z), em_release(nm);
  } else if (s == EM_OK) {
    s = em_contiguous(bias, m); /* may alias the caller's mask: the kernel only reads it */
  }
  em_release(m);
  if (s != EM_OK) return s;
  int64_t st = 1;
  for (int d = 3; d >= 0; d--) {
    stride[d] = (*bias)->shape[d] == 1 ? 0 : st;
    st *= (*bias)->shape[d];
  }
  return EM_OK;
}

static em_status fused_forward(const em_attn_call *c, em_tensor **out, void **saved) {
  const em_backend *be = em_backend_of(c->q);
  if (!has_fused(c))
    return em_error(EM_ERR_UNSUPPORTED, "kernel=\"fused\" but the %s backend has no fused attention kernel",
                    be->name);
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, lshape[3] = {c->B, c->H, c->Lq};
  fused_saved *sv = calloc(1, sizeof *sv);
  if (!sv) return em_error(EM_ERR_OOM, "out of memory");
  em_status s = em_empty(&sv->out, 4, oshape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&sv->lse, 3, lshape, c->q->dtype, c->q->device);
  em_attention_args *a = &sv->args;
  if (s == EM_OK) s = make_bias(c, &sv->bias, a->bias_stride);
  if (s != EM_OK) {
    fused_free(sv);
    return s;
  }
  a->dtype = c->q->dtype;
  a->B = c->B, a->H = c->H, a->Lq = c->Lq, a->Lk = c->Lk, a->dk = c->dims.dk, a->dv = c->dims.dv;
  a->key_padding = c->key_padding ? em_data(c->key_padding) : NULL;
  a->bias = sv->bias ? em_data(sv->bias) : NULL;
  a->causal = c->causal;
  a->scale = c->scale;
  a->dropout_p = c->dropout_p;
  a->seed = c->seed, a->offset = c->offset;
  a->q = em_data(c->q), a->k = em_data(c->k), a->v = em_data(c->v);
  a->out = em_data(sv->out);
  a->lse = em_data(sv->lse);
  s = be->attention_forward(c->q->device.index, a);
  if (s != EM_OK) {
    fused_free(sv);
    return s;
  }
  *out = em_retain(sv->out);
  sv->auto_kernel = strcmp(kernel_of(c), "auto") == 0;
  if (c->need_grad) {
    ac_call_keep(&sv->c, c);
    *saved = sv;
  } else {
    fused_free(sv);
  }
  return EM_OK;
}

static em_status fused_backward(fused_saved *sv, em_tensor *dout, em_tensor **grads) {
  const em_attn_call *c = &sv->c;
  em_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  em_status s = em_empty(&dq, 4, c->q->shape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&dk, 4, c->k->shape, c->k->dtype, c->k->device);
  if (s == EM_OK) s = em_empty(&dv, 4, c->v->shape, c->v->dtype, c->v->device);
  if (s == EM_OK) {
    em_attention_args a = sv->args; /* a copy: backward may run twice */
    a.dout = em_data(dout);
    a.dq = em_data(dq), a.dk_ = em_data(dk), a.dv_ = em_data(dv);
    s = em_backend_of(c->q)->attention_backward(c->q->device.index, &a);
  }
  if (s != EM_OK) {
    em_release(dq), em_release(dk), em_release(dv);
    return s;
  }
  grads[0] = dq, grads[1] = dk, grads[2] = dv;
  return EM_OK;
}

/* ---- fallback when the fused kernel declines a call -------------------- */

/* No CPU test reaches this code: the CPU kernel takes every float32 and
** float64 call (it declines only head dims past INT_MAX / 2), and a fake
** backend would need a backend plugin of its own. It was exercised by a
** throwaway build in which fused_forward (and, separately, fused_backward)
** always declined and ac_host said no: scripts/check_plugin.lua standard
** then passed everything but its explicit kernel="fused" check (and, for
** the backward-only decline off host, the dropout gradient check, which
** fused_backward_or_replay refuses on purpose). */

/* Unfused route for a device without the row kernel: the dense core ops
** run with grad mode on over fresh leaves that share q, k and v's memory,
** so they record a graph of their own (not linked to the caller's: forward
** runs on detached inputs); backward runs that graph from dout. O(L^2)
** memory, as kernel="dense". Dropout draws em_dropout's stream here. */
typedef struct graph_saved {
  em_tensor *leaf[3]; /* q, k, v */
  em_tensor *out;     /* the root of the private graph */
} graph_saved;

static void graph_free(graph_saved *g) {
  if (!g) return;
  for (int i = 0; i < 3; i++) em_release(g->leaf[i]);
  em_release(g->out);
  free(g);
}

static em_status graph_forward(const em_attn_call *c, em_tensor **out, void **saved) {
  graph_saved *g = calloc(1, sizeof *g);
  if (!g) return em_error(EM_ERR_OOM, "out of memory");
  em_tensor *const src[3] = {c->q, c->k, c->v};
  em_status s = EM_OK;
  for (int i = 0; i < 3 && s == EM_OK; i++) {
    s = em_detach(&g->leaf[i], src[i]);
    if (s == EM_OK && c->need_grad) s = em_set_requires_grad(g->leaf[i], true);
  }
  if (s == EM_OK) {
    em_attn_call d = *c;
    d.q = g->leaf[0], d.k = g->leaf[1], d.v = g->leaf[2];
    d.need_weights = false;
    bool prev = em_set_grad_enabled(c->need_grad);
    s = ac_dense(&d, NULL, NULL, &g->out, NULL);
    em_set_grad_enabled(prev);
  }
  if (s == EM_OK) s = em_detach(out, g->out);
  if (s != EM_OK || !c->need_grad) {
    graph_free(g);
    return s;
  }
  *saved = g;
  return EM_OK;
}

/* Runs the private graph from dout. The graph is kept (retain_graph) and
** the leaves' grads cleared first, so a retained outer graph may run
** backward again, as with the other paths. */
static em_status graph_backward(graph_saved *g, em_tensor *dout, em_tensor **grads) {
  for (int i = 0; i < 3; i++) em_release(g->leaf[i]->grad), g->leaf[i]->grad = NULL;
  em_status s = em_backward(g->out, dout, true);
  for (int i = 0; i < 3 && s == EM_OK; i++) {
    if (g->leaf[i]->grad) grads[i] = em_retain(g->leaf[i]->grad);
    else s = em_zeros(&grads[i], g->leaf[i]->ndim, g->leaf[i]->shape, g->leaf[i]->dtype,
                      g->leaf[i]->device); /* not reached by the graph: zero */
  }
  if (s != EM_OK)
    for (int i = 0; i < 3; i++) em_release(grads[i]), grads[i] = NULL;
  return s;
}

/* ---- the vtable glue: saved state tagged with its path ------------------ */

typedef enum std_path { PATH_FUSED, PATH_ROWS, PATH_GRAPH } std_path;

typedef struct std_saved {
  std_path path;
  void *inner; /* fused_saved, the row kernel's state or graph_saved */
} std_saved;

static int full_range(const void *ud, const em_attn_call *c, int64_t i, int64_t *lo, int64_t *hi) {
  (void)ud, (void)i;
  lo[0] = 0, hi[0] = c->Lk;
  return 1;
}

static void path_free(std_path path, void *inner) {
  if (!inner) return;
  if (path == PATH_FUSED) fused_free(inner);
  else if (path == PATH_ROWS) ra_free_saved(inner);
  else graph_free(inner);
}

/* The unfused route for a call the fused kernel declined. */
static em_status unfused_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights,
                                 std_path *path, void **inner) {
  *path = ac_host(c) ? PATH_ROWS : PATH_GRAPH;
  return *path == PATH_ROWS ? ra_run_forward(c, full_range, NULL, 0, out, weights, inner)
                            : graph_forward(c, out, inner);
}

static em_status std_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved) {
  std_path path = use_fused(c) ? PATH_FUSED : PATH_ROWS;
  void *inner = NULL;
  em_status s = path == PATH_FUSED ? fused_forward(c, out, &inner)
                                   : ra_run_forward(c, full_range, NULL, 0, out, weights, &inner);
  if (s == EM_ERR_UNSUPPORTED && path == PATH_FUSED && strcmp(kernel_of(c), "auto") == 0) {
    inner = NULL;
    s = unfused_forward(c, out, weights, &path, &inner);
  }
  if (s != EM_OK || !inner) return s;
  std_saved *sv = malloc(sizeof *sv);
  if (!sv) {
    path_free(path, inner);
    em_release(*out), *out = NULL;
    if (weights) em_release(*weights), *weights = NULL;
    return em_error(EM_ERR_OOM, "out of memory");
  }
  sv->path = path, sv->inner = inner;
  *saved = sv;
  return EM_OK;
}

/* The fused forward ran but its backward declines (a kernel that takes a
** call forward and not backward): the backward replays the call unfused.
** Only under kernel="auto", and not with dropout off host memory, where
** em_dropout would drop other elements than the forward did. */
static em_status fused_backward_or_replay(fused_saved *fs, em_tensor *dout, em_tensor **grads) {
  em_status s = fused_backward(fs, dout, grads);
  em_attn_call *c = &fs->c;
  if (s != EM_ERR_UNSUPPORTED || !fs->auto_kernel || (c->dropout_p > 0 && !ac_host(c))) return s;
  std_path path;
  void *inner = NULL;
  em_tensor *out = NULL;
  c->need_grad = true, c->need_weights = false;
  s = unfused_forward(c, &out, NULL, &path, &inner);
  em_release(out);
  if (s == EM_OK) {
    const bool needs[3] = {true, true, true};
    s = path == PATH_ROWS ? ra_run_backward(inner, dout, needs, grads) : graph_backward(inner, dout, grads);
  }
  path_free(path, inner);
  return s;
}

static em_status std_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  std_saved *sv = p;
  if (!sv) return em_error(EM_ERR_AUTOGRAD, "backward without saved state");
  switch (sv->path) {
    case PATH_FUSED: return fused_backward_or_replay(sv->inner, dout, grads);
    case PATH_ROWS: return ra_run_backward(sv->inner, dout, needs, grads);
    default: return graph_backward(sv->inner, dout, grads);
  }
}

static void std_free(void *p) {
  std_saved *sv = p;
  if (!sv) return;
  path_free(sv->path, sv->inner);
  free(sv);
}

static em_status std_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  return ac_dense(c, NULL, NULL, out, weights);
}

static const em_attention_variant STANDARD = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "standard",
  .version = "1.0",
  .description = "scaled dot-product attention (fused flash-style kernel, host row kernel, or core ops)",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .forward = std_forward,
  .backward = std_backward,
  .free_saved = std_free,
  .compose = std_compose,
  .can_forward = std_can_forward,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "standard", "1.0",
  "scaled dot-product attention: causal, key padding, masks, dropout; O(L) memory without weights"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &STANDARD;
}
