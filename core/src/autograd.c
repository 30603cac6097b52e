/*
** autograd.c -- reverse-mode automatic differentiation.
**
** Each differentiable result points at the node (em_node) that made it;
** a node points at the nodes of its inputs, or at the leaf tensors that
** want a gradient. backward() visits the nodes reachable from the root in
** reverse topological order, calling each op's backward once all of the
** node's consumers have delivered their gradient. The engine knows ops
** only through em_opdef, so core ops, plugin ops and Lua functions are all
** the same to it.
*/
#include "internal.h"

#include <math.h>
#include <stddef.h>

static _Thread_local bool em__no_grad = false;
static uint64_t em__seq = 0;

/* ------------------------------------------------------------------ */
/* Anomaly detection (torch.autograd.set_detect_anomaly)               */
/* ------------------------------------------------------------------ */

/* Process-wide, as PyTorch's. Off, it costs one branch where a node is
** recorded, run and freed. On, every gradient a node's backward returns is
** scanned for NaN and inf (the backward then fails naming the node), and
** every node recorded keeps where it was made, from the origin callback a
** binding sets (the Lua binding: the user's Lua frames); ember.h declares
** the three. */
static bool em__anomaly;
typedef char *(*em__origin_fn)(const char *op, void *ud);
static em__origin_fn em__origin;
static void *em__origin_ud;

EM_API bool em_set_detect_anomaly(bool on) {
  bool prev = em__anomaly;
  em__anomaly = on;
  return prev;
}

EM_API bool em_is_anomaly_enabled(void) { return em__anomaly; }

EM_API void em_set_anomaly_origin(em__origin_fn fn, void *ud) {
  em__origin = fn;
  em__origin_ud = ud;
}

/* Every node is allocated behind this head (em__node_alloc), which holds
** what anomaly mode records about it; only this file makes and frees nodes. */
typedef union { char *origin; max_align_t align; } em__node_head;
#define EM__HEAD(n) ((em__node_head *)((char *)(n) - sizeof(em__node_head)))

bool em_grad_enabled(void) { return !em__no_grad; }

bool em_set_grad_enabled(bool on) {
  bool prev = !em__no_grad;
  em__no_grad = !on;
  return prev;
}

em_status em_set_requires_grad(em_tensor *t, bool on) {
  if (t->grad_fn && on) return EM_OK; /* a non-leaf requires grad already (PyTorch's no-op) */
  if (t->grad_fn)
    return em_error(EM_ERR_AUTOGRAD,
                    "requires_grad: can only be turned off on leaf tensors (this one was made by '%s'); "
                    "use :detach() for a tensor outside the graph", t->grad_fn->op->name);
  if (on && !em_dtype_is_float(t->dtype))
    return em_error(EM_ERR_DTYPE, "requires_grad: only floating point tensors can require grad, got %s",
                    em_dtype_name(t->dtype));
  t->requires_grad = on;
  return EM_OK;
}

bool em_autograd_needed(int n, em_tensor *const *inputs) {
  if (em__no_grad) return false;
  for (int i = 0; i < n; i++)
    if (inputs[i] && inputs[i]->requires_grad) return true;
  return false;
}

/* ------------------------------------------------------------------ */
/* Nodes                                                               */
/* ------------------------------------------------------------------ */

void em_node_retain(em_node *n) { n->refcount++; }

/* Drops the saved state: after a backward without retain_graph, or when
** the node dies. */
static void em__node_drop_saved(em_node *n) {
  for (int i = 0; i < n->n_saved; i++) {
    if (n->saved[i] && n->saved[i]->storage) n->saved[i]->storage->saved_refs--;
    em_release(n->saved[i]);
    n->saved[i] = NULL;
  }
  if (n->ctx && n->op->free_ctx) n->op->free_ctx(n->ctx);
  n->ctx = NULL;
}

/* Iterative, so that releasing a 100,000-op chain cannot overflow the stack. */
void em_node_release(em_node *n) {
  em_node *stack_small[64], **stack = stack_small;
  int top = 0, cap = 64;
  if (!n || --n->refcount > 0) return;
  stack[top++] = n;
  while (top > 0) {
    em_node *d = stack[--top];
    for (int i = 0; i < d->n_inputs; i++) {
      em_release(d->edges[i].leaf);
      em_node *fn = d->edges[i].fn;
      if (fn && --fn->refcount == 0) {
        if (top == cap) {
          em_node **bigger = malloc((size_t)cap * 2 * sizeof *bigger);
          if (!bigger) continue; /* leaks on OOM rather than crashing */
          memcpy(bigger, stack, (size_t)top * sizeof *stack);
          if (stack != stack_small) free(stack);
          stack = bigger;
          cap *= 2;
        }
        stack[top++] = fn;
      }
    }
    em__node_drop_saved(d);
    em_release(d->pending_grad);
    em__node_head *head = EM__HEAD(d);
    if (head->origin) free(head->origin);
    free(head);
  }
  if (stack != stack_small) free(stack);
}

/* One allocation holds the node and all its arrays. */
static em_node *em__node_alloc(int n_in, int n_saved) {
  size_t sz = sizeof(em_node);
  size_t off_edges = sz;
  sz += (size_t)n_in * sizeof(em_edge);
  size_t off_shape = sz = (sz + 7) & ~(size_t)7;
  sz += (size_t)n_in * sizeof(int64_t[EM_MAX_DIMS]);
  size_t off_saved = sz;
  sz += (size_t)n_saved * sizeof(em_tensor *);
  size_t off_ndim = sz;
  sz += (size_t)n_in * sizeof(int);
  size_t off_dtype = sz;
  sz += (size_t)n_in * sizeof(em_dtype);
  size_t off_needs = sz;
  sz += (size_t)n_in * sizeof(bool);
  size_t off_version = sz = (sz + 7) & ~(size_t)7;
  sz += (size_t)n_saved * sizeof(uint64_t);
  char *block = calloc(1, sizeof(em__node_head) + sz);
  if (!block) return NULL;
  char *mem = block + sizeof(em__node_head);
  em_node *n = (em_node *)mem;
  n->edges = (em_edge *)(mem + off_edges);
  n->in_shape = (int64_t(*)[EM_MAX_DIMS])(mem + off_shape);
  n->saved = (em_tensor **)(mem + off_saved);
  n->in_ndim = (int *)(mem + off_ndim);
  n->in_dtype = (em_dtype *)(mem + off_dtype);
  n->needs_grad = (bool *)(mem + off_needs);
  n->saved_version = (uint64_t *)(mem + off_version);
  n->n_inputs = n_in;
  n->n_saved = n_saved;
  n->refcount = 1;
  return n;
}

em_status em_autograd_record(em_tensor *output, const em_opdef *op, int n_inputs,
                             em_tensor *const *inputs, int n_saved, em_tensor *const *saved,
                             void *ctx) {
  em_node *n = em__node_alloc(n_inputs, n_saved);
  if (!n) {
    if (ctx && op->free_ctx) op->free_ctx(ctx);
    return em_error(EM_ERR_OOM, "%s: out of memory recording the autograd node", op->name);
  }
  n->op = op;
  n->ctx = ctx;
  for (int i = 0; i < n_inputs; i++) {
    em_tensor *x = inputs[i];
    if (!x) continue;
    n->in_ndim[i] = x->ndim;
    memcpy(n->in_shape[i], x->shape, sizeof x->shape);
    n->in_dtype[i] = x->dtype;
    n->needs_grad[i] = x->requires_grad;
    if (!x->requires_grad) continue;
    if (x->grad_fn) {
      n->edges[i].fn = x->grad_fn;
      em_node_retain(x->grad_fn);
    } else {
      n->edges[i].leaf = em_retain(x);
    }
  }
  for (int i = 0; i < n_saved; i++) {
    em_tensor *s = saved[i];
    if (!s) continue;
    em_status st = em__alias(&n->saved[i], s, s->ndim, s->shape, s->stride, s->offset);
    if (st != EM_OK) {
      em_node_release(n);
      return st;
    }
    if (s->storage) n->saved_version[i] = __atomic_load_n(&s->storage->version, __ATOMIC_RELAXED);
    if (n->saved[i]->storage) n->saved[i]->storage->saved_refs++;
  }
  n->out_ndim = output->ndim;
  memcpy(n->out_shape, output->shape, sizeof output->shape);
  n->out_dtype = output->dtype;
  n->out_device = output->device;
  n->seq = ++em__seq;
  if (em__anomaly && em__origin) EM__HEAD(n)->origin = em__origin(op->name, em__origin_ud);
  if (output->grad_fn) em_node_release(output->grad_fn);
  output->grad_fn = n;
  output->requires_grad = true;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* backward                                                            */
/* ------------------------------------------------------------------ */

typedef struct { em_node **v; int n, cap; } em__nodelist;

static bool em__push(em__nodelist *l, em_node *n) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    em_node **v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) return false;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = n;
  return true;
}

/* Collects every node reachable from root and counts, for each, how many
** reachable nodes feed gradient into it. */
static em_status em__collect(em_node *root, em__nodelist *all) {
  em__nodelist stack = {0};
  em_status s = EM_OK;
  root->mark = 1;
  if (!em__push(all, root) || !em__push(&stack, root)) s = EM_ERR_OOM;
  while (s == EM_OK && stack.n > 0) {
    em_node *n = stack.v[--stack.n];
    for (int i = 0; i < n->n_inputs; i++) {
      em_node *fn = n->edges[i].fn;
      if (!fn) continue;
      fn->pending_deps++;
      if (fn->mark) continue;
      fn->mark = 1;
      if (!em__push(all, fn) || !em__push(&stack, fn)) s = EM_ERR_OOM;
    }
  }
  free(stack.v);
  return s == EM_OK ? EM_OK : em_error(EM_ERR_OOM, "backward: out of memory walking the graph");
}

/* Adds g into leaf->grad; the first gradient is copied so that .grad
** never shares storage with anything else. Takes ownership of g. */
/* Can g become a leaf's .grad as it is? Only when nothing else can see
** its memory: the engine holds its one reference, it is alone on its whole
** storage, contiguous, and outside any graph. Copying every first gradient
** was a pass over each parameter's gradient each step (8 MB for a
** ResNet-sized convolution's input). */
static bool em__grad_owned(const em_tensor *g) {
  return g->refcount == 1 && g->storage->refcount == 1 && !g->grad_fn && !g->requires_grad &&
         g->offset == 0 && em_is_contiguous(g) &&
         g->storage->nbytes == (size_t)em_numel(g) * em_dtype_size(g->dtype);
}

/* The leaves of this thread's em_backward_only pass (NULL: every leaf). */
static _Thread_local em_tensor *const *em__only;
static _Thread_local int em__only_n;

static bool em__leaf_wanted(const em_tensor *leaf) {
  if (!em__only) return true;
  for (int i = 0; i < em__only_n; i++)
    if (em__only[i] == leaf) return true;
  return false;
}

static em_status em__accumulate_leaf(em_tensor *leaf, em_tensor *g) {
  em_status s;
  if (!em__leaf_wanted(leaf)) { /* autograd.grad's pass: not one of its inputs */
    em_release(g);
    return EM_OK;
  }
  if (!leaf->grad && em__grad_owned(g)) {
    leaf->grad = g;
    return EM_OK;
  }
  if (!leaf->grad) {
    em_tensor *c;
    s = em_clone(&c, g);
    em_release(g);
    if (s == EM_OK) leaf->grad = c;
    return s;
  }
  s = em_add_(leaf->grad, g, 1.0);
  em_release(g);
  return s;
}

static em_status em__check_grad(const em_node *n, int i, const em_tensor *g) {
  bool same = g->ndim == n->in_ndim[i];
  for (int d = 0; same && d < g->ndim; d++) same = g->shape[d] == n->in_shape[i][d];
  if (same) return EM_OK;
  char a[160], b[160];
  return em_error(EM_ERR_AUTOGRAD, "backward of '%s': gradient %d has shape %s, expected %s",
                  n->op->name, i + 1, em_shape_str(g->ndim, g->shape, a, sizeof a),
                  em_shape_str(n->in_ndim[i], n->in_shape[i], b, sizeof b));
}

/* ------------------------------------------------------------------ */
/* The gradient-ready hook                                             */
/* ------------------------------------------------------------------ */

/* Set once by a binding or a library (the distributed module), so a
** process-wide pair rather than per thread. */
static em_grad_ready_fn em__ready_fn;
static void *em__ready_ud;

void em_set_grad_ready_hook(em_grad_ready_fn fn, void *ud) {
  em__ready_fn = fn;
  em__ready_ud = ud;
}

/* How many reachable edges still owe each leaf a gradient in this
** backward: open addressing on the pointer, built only while a hook is
** set, so a plain backward pays nothing. */
typedef struct { em_tensor *leaf; int pending; em_tensor *buf; } em__leafcount;
typedef struct { em__leafcount *v; size_t cap; } em__leafmap;

static em__leafcount *em__leaf_slot(em__leafmap *m, const em_tensor *leaf) {
  size_t h = ((uintptr_t)leaf >> 4) * 0x9E3779B97F4A7C15ull;
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1))
    if (m->v[i].leaf == leaf || !m->v[i].leaf) return &m->v[i];
}

static em_status em__leafmap_build(em__leafmap *m, const em__nodelist *all) {
  size_t edges = 0;
  for (int i = 0; i < all->n; i++) edges += (size_t)all->v[i]->n_inputs;
  m->cap = 16;
  while (m->cap < 2 * edges) m->cap *= 2;
  if (!(m->v = calloc(m->cap, sizeof *m->v)))
    return em_error(EM_ERR_OOM, "backward: out of memory");
  for (int i = 0; i < all->n; i++) {
    em_node *n = all->v[i];
    for (int k = 0; k < n->n_inputs; k++) {
      if (!n->edges[k].leaf || !n->needs_grad[k]) continue;
      em__leafcount *c = em__leaf_slot(m, n->edges[k].leaf);
      c->leaf = n->edges[k].leaf;
      c->pending++;
    }
  }
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Tensor gradient hooks                                               */
/* ------------------------------------------------------------------ */

static em_grad_hook_fn em__grad_hook;
static void *em__grad_hook_ud;

void em_set_grad_hook(em_grad_hook_fn fn, void *ud) {
  em__grad_hook = fn;
  em__grad_hook_ud = ud;
}

/* Runs the gradient hook on *g, the whole gradient of node n's output or
** of leaf; a replacement must keep the shape and dtype. */
static em_status em__run_grad_hook(em_node *n, em_tensor *leaf, em_tensor **g) {
  em_tensor *before = *g;
  EM_TRY(em__grad_hook(n, leaf, g, em__grad_hook_ud));
  em_tensor *after = *g;
  if (after == before) return EM_OK;
  int ndim = n ? n->out_ndim : leaf->ndim;
  const int64_t *shape = n ? n->out_shape : leaf->shape;
  em_dtype dt = n ? n->out_dtype : leaf->dtype;
  bool same = after && after->ndim == ndim && after->dtype == dt;
  for (int d = 0; same && d < ndim; d++) same = after->shape[d] == shape[d];
  if (same) return EM_OK;
  char a[160], b[160];
  return em_error(EM_ERR_AUTOGRAD, "backward: a gradient hook returned %s %s for a gradient of %s %s",
                  after ? em_shape_str(after->ndim, after->shape, a, sizeof a) : "nothing",
                  after ? em_dtype_name(after->dtype) : "", em_shape_str(ndim, shape, b, sizeof b),
                  em_dtype_name(dt));
}

/* Node n has routed its gradients: leaves it was the last debtor of are
** final now. With a gradient hook, their gradients of this pass were
** summed in the map; the hook sees the sum, which then goes into .grad. */
static em_status em__leaves_done(em__leafmap *m, em_node *n) {
  for (int k = 0; k < n->n_inputs; k++) {
    if (!n->edges[k].leaf || !n->needs_grad[k]) continue;
    em__leafcount *c = em__leaf_slot(m, n->edges[k].leaf);
    if (!c->leaf || --c->pending != 0) continue;
    if (c->buf) {
      em_tensor *g = c->buf;
      c->buf = NULL;
      em_status s = em__grad_hook ? em__run_grad_hook(NULL, c->leaf, &g) : EM_OK;
      if (s != EM_OK) {
        em_release(g);
        return s;
      }
      EM_TRY(em__accumulate_leaf(c->leaf, g));
    }
    if (em__ready_fn && !em__only) EM_TRY(em__ready_fn(c->leaf, em__ready_ud));
  }
  return EM_OK;
}

/* PyTorch's version check: a tensor node n saved has been written in place
** since (x:add_(1), x[i] = v, an optimizer step, or a view of it), so the
** gradient would be computed from the new values. */
static em_status em__check_saved(const em_node *n) {
  for (int i = 0; i < n->n_saved; i++) {
    const em_tensor *t = n->saved[i];
    if (!t || !t->storage) continue;
    uint64_t now = __atomic_load_n(&t->storage->version, __ATOMIC_RELAXED);
    if (now == n->saved_version[i]) continue;
    char d[200];
    return em_error(EM_ERR_AUTOGRAD,
                    "backward: a tensor that '%s' saved for its gradient (%s) has been modified by an "
                    "in-place operation since (version %llu, expected %llu); do the in-place op after "
                    "backward, or on a clone",
                    n->op->name, em__desc(t, d, sizeof d), (unsigned long long)now,
                    (unsigned long long)n->saved_version[i]);
  }
  return EM_OK;
}

static const char *em__ordinal(int k) {
  if (k % 100 >= 11 && k % 100 <= 13) return "th";
  return k % 10 == 1 ? "st" : k % 10 == 2 ? "nd" : k % 10 == 3 ? "rd" : "th";
}

/* Anomaly mode: the gradients node n's backward returned must be finite
** (PyTorch checks for NaN; inf is as sure a sign of trouble). Each is
** read back as float64 on the host: this mode is for finding a bug, not
** for speed. On failure the message names the node's op, which gradient,
** its first bad element (1-based) and where the forward made the node. */
static em_status em__anomaly_check(const em_node *n, em_tensor *const *grads) {
  for (int i = 0; i < n->n_inputs; i++) {
    em_tensor *g = grads[i];
    if (!g || !n->needs_grad[i] || !em_dtype_is_float(g->dtype)) continue;
    int64_t numel = em_numel(g), first = -1, nans = 0, infs = 0;
    if (numel == 0) continue;
    em_tensor *d = NULL;
    double *buf = malloc((size_t)numel * sizeof *buf);
    if (!buf) return em_error(EM_ERR_OOM, "backward: out of memory checking gradients for anomalies");
    em_status s = em_to_dtype(&d, g, EM_F64);
    if (s == EM_OK) s = em_to_host(d, buf);
    em_release(d);
    if (s != EM_OK) {
      free(buf);
      return s;
    }
    for (int64_t k = 0; k < numel; k++) {
      if (isnan(buf[k])) nans++;
      else if (isinf(buf[k])) infs++;
      else continue;
      if (first < 0) first = k;
    }
    free(buf);
    if (first < 0) continue;
    char at[160], shape[160];
    int len = snprintf(at, sizeof at, "[");
    int64_t rest = first, div = 1;
    for (int dd = 0; dd < g->ndim; dd++) div *= g->shape[dd] ? g->shape[dd] : 1;
    for (int dd = 0; dd < g->ndim && len < (int)sizeof at - 24; dd++) {
      div /= g->shape[dd];
      len += snprintf(at + len, sizeof at - (size_t)len, "%s%lld", dd ? ", " : "",
                      (long long)(rest / div + 1));
      rest %= div;
    }
    snprintf(at + len, sizeof at - (size_t)len, "]");
    const char *origin = EM__HEAD(n)->origin;
    return em_error(EM_ERR_AUTOGRAD,
                    "backward: function '%s backward' returned %s values in its %d%s output "
                    "(%lld of %lld elements of the gradient %s; the first at %s)%s%s",
                    n->op->name, nans && infs ? "nan and inf" : nans ? "nan" : "inf", i + 1,
                    em__ordinal(i + 1), (long long)(nans + infs), (long long)numel,
                    em_shape_str(g->ndim, g->shape, shape, sizeof shape), at,
                    origin ? "; the forward call that made it:" : "; turn anomaly detection on "
                    "before the forward to see where it was called",
                    origin ? origin : "");
  }
  return EM_OK;
}

/* Runs one node's backward and routes the input gradients. */
static em_status em__run_node(em_node *n, em__nodelist *ready, em__leafmap *buffered) {
  em_tensor *grad_small[8], **grads = grad_small;
  em_status s = EM_OK;
  if (n->n_inputs > 8 && !(grads = calloc((size_t)n->n_inputs, sizeof *grads)))
    return em_error(EM_ERR_OOM, "backward: out of memory");
  for (int i = 0; i < n->n_inputs; i++) grads[i] = NULL;
  if (n->pending_grad) {
    if (n->released)
      s = em_error(EM_ERR_AUTOGRAD,
                   "backward: the graph through '%s' was already freed by an earlier backward(); "
                   "call backward with retain_graph=true to go through it twice "
                   "(t:backward(nil, true), or t:backward{retain_graph = true})", n->op->name);
    else {
      s = em__check_saved(n);
      if (s == EM_OK) s = em__settle_pieces(n);
      if (s == EM_OK && em__grad_hook) s = em__run_grad_hook(n, NULL, &n->pending_grad);
      const bool prof = s == EM_OK && em__prof_is_on();
      if (prof) em__prof_backward_begin(n->op->name);
      bool routed = false; /* a piece of a tensor, added straight into its gradient */
      if (s == EM_OK && n->n_inputs == 1 && n->needs_grad[0] && n->edges[0].fn && !n->edges[0].leaf)
        s = em__region_accumulate(n, n->pending_grad, n->edges[0].fn, &routed);
      if (s == EM_OK && !routed) s = n->op->backward(n, n->pending_grad, grads);
      if (prof) em__prof_backward_end();
      if (em__anomaly && s == EM_OK && !routed) s = em__anomaly_check(n, grads);
    }
  }
  for (int i = 0; i < n->n_inputs; i++) {
    em_tensor *g = grads[i];
    grads[i] = NULL;
    if (g && s == EM_OK && n->needs_grad[i]) s = em__check_grad(n, i, g);
    if (!g || s != EM_OK || !n->needs_grad[i]) {
      em_release(g);
    } else if (n->edges[i].leaf && buffered) { /* summed for the gradient hook */
      s = em__accumulate(&em__leaf_slot(buffered, n->edges[i].leaf)->buf, g);
    } else if (n->edges[i].leaf) {
      s = em__accumulate_leaf(n->edges[i].leaf, g);
    } else if (n->edges[i].fn) {
      s = em__settle_pieces(n->edges[i].fn);
      n->edges[i].fn->n_pieces = 0; /* no longer zero outside the recorded pieces */
      if (s == EM_OK) s = em__accumulate(&n->edges[i].fn->pending_grad, g);
      else em_release(g);
    } else {
      em_release(g);
    }
  }
  for (int i = 0; i < n->n_inputs; i++) {
    em_node *fn = n->edges[i].fn;
    if (fn && --fn->pending_deps == 0 && !em__push(ready, fn) && s == EM_OK)
      s = em_error(EM_ERR_OOM, "backward: out of memory");
  }
  if (grads != grad_small) free(grads);
  if (s != EM_OK && strncmp(em_error_message(), "backward", 8) != 0)
    em__kernel_fail("backward", s);
  return s;
}

static em_status em__seed_grad(em_tensor *root, em_tensor *grad, em_tensor **out) {
  if (!grad) {
    if (em_numel(root) != 1) {
      char d[200];
      return em_error(EM_ERR_AUTOGRAD,
                      "backward: grad can be implicitly created only for scalar outputs; got %s "
                      "(pass a gradient of the same shape)", em__desc(root, d, sizeof d));
    }
    return em_full(out, root->ndim, root->shape, 1.0, root->dtype, root->device);
  }
  /* a floating gradient of another floating dtype is cast, as PyTorch's */
  const bool cast = grad->dtype != root->dtype && em_dtype_is_float(grad->dtype) && em_dtype_is_float(root->dtype);
  bool same = grad->ndim == root->ndim && (grad->dtype == root->dtype || cast);
  for (int d = 0; same && d < root->ndim; d++) same = grad->shape[d] == root->shape[d];
  if (!same) {
    char a[200], b[200];
    return em_error(EM_ERR_SHAPE, "backward: gradient is %s, but the output is %s",
                    em__desc(grad, a, sizeof a), em__desc(root, b, sizeof b));
  }
  EM_TRY(em__same_device("backward", grad, root));
  return cast ? em_to_dtype(out, grad, root->dtype) : em_detach(out, grad);
}

/* How many em_backward calls this thread is inside: a Lua backward may run
** a backward of its own (nn.checkpoint's recompute), which must not end
** the outer pass for the hook (fn(NULL) runs for the outermost only). */
static _Thread_local int em__backward_depth;

static em_status em__backward_pass(em_tensor *root, em_tensor *grad, bool retain_graph, bool outermost);

/* The whole pass is one profiler span ("backward"), so every kernel in it,
** leaf accumulations included, counts as backward. */
static em_status em__backward_run(em_tensor *root, em_tensor *grad, bool retain_graph, em_tensor *const *only,
                                  int n) {
  em_tensor *const *prev = em__only;
  const int prev_n = em__only_n;
  em__only = only;
  em__only_n = n;
  const bool prof = em__prof_is_on();
  if (prof) em__prof_backward_begin(NULL);
  em__backward_depth++;
  /* backward() called inside an autocast region: its ops run as outside it */
  const bool autocast_was = em_autocast_pause(false);
  em_status s = em__backward_pass(root, grad, retain_graph, em__backward_depth == 1);
  em_autocast_pause(autocast_was);
  em__backward_depth--;
  if (prof) em__prof_backward_end();
  em__only = prev;
  em__only_n = prev_n;
  return s;
}

/* Inside an em_backward_only pass (a Lua backward's own backward: nn.checkpoint's
** recompute) a plain pass keeps its leaves, so nothing else gains a gradient. */
em_status em_backward(em_tensor *root, em_tensor *grad, bool retain_graph) {
  return em__backward_run(root, grad, retain_graph, em__only, em__only_n);
}

/* Inside another em_backward_only pass, the leaves are both lists'. */
em_status em_backward_only(em_tensor *root, em_tensor *grad, bool retain_graph, em_tensor *const *only,
                           int n) {
  static em_tensor *const none = NULL; /* a filter with no leaf in it is still a filter */
  if (n < 0 || (n > 0 && !only)) return em_error(EM_ERR_ARG, "backward: bad list of inputs");
  if (!em__only) return em__backward_run(root, grad, retain_graph, n > 0 ? only : &none, n);
  const int total = em__only_n + n;
  em_tensor **both = malloc(sizeof *both * (size_t)(total ? total : 1));
  if (!both) return em_error(EM_ERR_OOM, "backward: out of memory");
  for (int i = 0; i < em__only_n; i++) both[i] = em__only[i];
  for (int i = 0; i < n; i++) both[em__only_n + i] = only[i];
  em_status s = em__backward_run(root, grad, retain_graph, both, total);
  free(both);
  return s;
}

bool em_backward_is_filtered(void) { return em__only != NULL; }

static em_status em__backward_pass(em_tensor *root, em_tensor *grad, bool retain_graph, bool outermost) {
  if (!root->requires_grad)
    return em_error(EM_ERR_AUTOGRAD,
                    "backward: the tensor does not require grad and has no grad_fn (did any input "
                    "have requires_grad = true? was grad mode off? a gradient from ember.grad is a "
                    "constant: ember has no double backward, so a penalty on it has no graph)");
  em_tensor *seed;
  EM_TRY(em__seed_grad(root, grad, &seed));
  bool prev = em_set_grad_enabled(false);
  em_status s = EM_OK;
  em_grad_ready_fn hook = em__only ? NULL : em__ready_fn; /* autograd.grad's pass: no DDP hook */
  const bool map = hook || em__grad_hook; /* leaves counted: gradients final per pass */
  if (!root->grad_fn) { /* a leaf: its gradient is the seed */
    if (em__grad_hook) s = em__run_grad_hook(NULL, root, &seed);
    if (s == EM_OK) s = em__accumulate_leaf(root, seed);
    else em_release(seed);
    if (s == EM_OK && hook) s = hook(root, em__ready_ud);
    if (s == EM_OK && hook && outermost) s = hook(NULL, em__ready_ud);
    em_set_grad_enabled(prev);
    return s;
  }
  em__nodelist all = {0}, ready = {0};
  em__leafmap leaves = {0};
  em_node *top = root->grad_fn;
  s = em__collect(top, &all);
  if (s == EM_OK && map) s = em__leafmap_build(&leaves, &all);
  if (s == EM_OK) {
    top->pending_grad = seed;
    seed = NULL;
    if (!em__push(&ready, top)) s = em_error(EM_ERR_OOM, "backward: out of memory");
  }
  while (s == EM_OK && ready.n > 0) {
    em_node *n = ready.v[--ready.n];
    s = em__run_node(n, &ready, em__grad_hook ? &leaves : NULL);
    if (s == EM_OK && map) s = em__leaves_done(&leaves, n);
    em_release(n->pending_grad);
    n->pending_grad = NULL;
  }
  if (s == EM_OK && hook && outermost) s = hook(NULL, em__ready_ud); /* the pass is over */
  /* Reset bookkeeping on every node, whatever happened. */
  for (int i = 0; i < all.n; i++) {
    em_node *n = all.v[i];
    n->mark = 0;
    n->pending_deps = 0;
    em_release(n->pending_grad);
    n->pending_grad = NULL;
    if (s == EM_OK && !retain_graph) {
      em__node_drop_saved(n);
      n->released = true;
    }
  }
  em_release(seed);
  for (size_t i = 0; leaves.v && i < leaves.cap; i++) em_release(leaves.v[i].buf); /* after an error */
  free(leaves.v);
  free(all.v);
  free(ready.v);
  em_set_grad_enabled(prev);
  return s;
}
