/*
** linear.c -- linear attention (Katharopoulos et al. 2020):
**
**   out_i = phi(q_i)^T S_i / (phi(q_i) . z_i + eps),
**   S_i = sum_{j visible} phi(k_j) v_j^T,   z_i = sum_{j visible} phi(k_j)
**
** Feature maps (option feature_map):
**   "elu"    phi(x) = elu(x) + 1 (the paper's); the scale is not used.
**   "favor"  Performer FAVOR+ (Choromanski et al. 2021): positive orthogonal
**            random features, phi(x)_r = exp(w_r . x' - |x'|^2 / 2) / sqrt(m)
**            with x' = x * sqrt(scale), so phi(q).phi(k) estimates
**            exp(scale * q.k). W [num_features, dk] is a buffer drawn at
**            construction from the seeded generator (state_dict key
**            "linear.features"); redraw=true draws fresh features at every
**            training forward.
**
** Causal (bottom-right aligned) keeps running prefix sums S, z while the
** queries advance, so no L x L matrix exists, and memory is O(L) (plus
** O(L m) feature rows per head while a head is computed). The backward
** recomputes the features, runs the prefix sums again for dq and suffix
** sums over the queries for dk and dv. Key padding zeroes a key's features.
** A query that sees no key (or only padding) gets 0: its numerator is 0.
** That kernel needs host memory; on other backends (or with
** kernel="composed") the same function runs as core ops, causal by a
** chunked prefix sum (see "composed path" below).
** Files: this one (options, features, vtable), linear_kernel.c (the host
** kernel), linear_compose.c (core ops); linear.h joins them.
** Arbitrary attn masks and dropout do not factor through the features:
** the variant does not declare them, so the core refuses them.
*/
#include "linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "feature_map", .type = EM_ATTN_OPT_STRING, .default_str = "elu", .choices = "elu|favor",
   .help = "elu+1 (Katharopoulos) or FAVOR+ positive orthogonal random features (Performer)"},
  {.name = "eps", .type = EM_ATTN_OPT_FLOAT, .default_num = 1e-6, .bounded = true, .min = 0, .max = 1,
   .help = "added to the denominator"},
  {.name = "num_features", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 1,
   .max = 65536, .help = "favor: number of random features m"},
  {.name = "redraw", .type = EM_ATTN_OPT_BOOL, .default_num = 0,
   .help = "favor: draw fresh random features at every training forward"},
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto", .choices = "auto|host|composed",
   .help = "host kernel, or core ops (any backend); auto = host kernel on host memory"},
  {.name = "chunk", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 1, .max = 65536,
   .help = "composed causal path: keys per block of the chunked prefix sum"},
};


/* ---- random features ----------------------------------------------------- */

/* m x d positive orthogonal random features into w (host, double): blocks
** of d orthonormal rows (Gram-Schmidt on Gaussian rows), each row scaled by
** the norm of an independent Gaussian d-vector. */
em_status lin_draw_features(int64_t m, int64_t d, double *w) {
  em_device cpu;
  em_status s = em_cpu_device(&cpu);
  if (s != EM_OK) return s;
  int64_t n = m * d * 2;
  em_tensor *g = NULL;
  double *buf = malloc((size_t)n * sizeof *buf);
  if (!buf) return em_error(EM_ERR_OOM, "out of memory for %lld random features", (long long)m);
  s = em_normal(&g, 1, &n, 0, 1, EM_F64, cpu);
  if (s == EM_OK) s = em_to_host(g, buf);
  em_release(g);
  if (s != EM_OK) {
    free(buf);
    return s;
  }
  const double *gauss = buf, *norms = buf + m * d;
  for (int64_t r = 0; r < m; r++) {
    double *row = w + r * d;
    memcpy(row, gauss + r * d, (size_t)d * sizeof *row);
    int64_t first = r - r % d; /* orthogonal to the earlier rows of its block */
    for (int64_t p = first; p < r; p++) {
      double dot = 0;
      for (int64_t t = 0; t < d; t++) dot += row[t] * w[p * d + t];
      for (int64_t t = 0; t < d; t++) row[t] -= dot * w[p * d + t];
    }
    double nr = 0, ng = 0;
    for (int64_t t = 0; t < d; t++) nr += row[t] * row[t], ng += norms[r * d + t] * norms[r * d + t];
    nr = sqrt(nr), ng = sqrt(ng);
    for (int64_t t = 0; t < d; t++) row[t] = nr > 0 ? row[t] / nr * ng : 0;
  }
  free(buf);
  return EM_OK;
}

/* favor's options, set by the user with feature_map="elu", would be ignored: refused */
static em_status lin_check(const em_attn_options *o, const em_attn_dims *d) {
  (void)d;
  static const char *const FAVOR[] = {"num_features", "redraw", NULL};
  if (is_favor(o)) return EM_OK;
  return em_attn_unused_options(o, FAVOR, "with feature_map=\"elu\", the default (it is for feature_map=\"favor\")");
}

static em_status lin_init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                                 em_device dev, int *n, em_attn_param *params) {
  *n = 0;
  if (!is_favor(o)) return EM_OK;
  int64_t m = em_attn_opt_int(o, "num_features"), shape[2] = {m, d->dk};
  double *w = malloc((size_t)(m * d->dk) * sizeof *w);
  if (!w) return em_error(EM_ERR_OOM, "out of memory");
  em_status s = lin_draw_features(m, d->dk, w);
  em_tensor *t64 = NULL;
  if (s == EM_OK) s = em_from_host(&t64, 2, shape, EM_F64, w, dev);
  free(w);
  if (s == EM_OK) s = em_to_dtype(&params[0].tensor, t64, dt);
  em_release(t64);
  if (s != EM_OK) return s;
  params[0].name = "features";
  params[0].learned = false;
  *n = 1;
  return EM_OK;
}

/* ---- vtable functions ---------------------------------------------------- */

/* The host kernel, unless kernel="composed" or the tensors are elsewhere
** (kernel="host" there: forward explains). */
static bool lin_can_forward(const em_attn_call *c) {
  const char *k = em_attn_opt_str(c->options, "kernel");
  if (strcmp(k, "composed") == 0) return false;
  return strcmp(k, "host") == 0 || em_attn_on_host(c);
}

static em_status lin_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved) {
  if (!em_attn_on_host(c))
    return em_error(EM_ERR_UNSUPPORTED,
                    "linear attention: kernel=\"host\" needs host memory (kernel=\"auto\" composes core ops elsewhere)");
  lin_state *st = calloc(1, sizeof *st);
  if (!st) return em_error(EM_ERR_OOM, "out of memory");
  em_attn_call_keep(&st->c, c);
  st->favor = is_favor(c->options);
  st->eps = em_attn_opt_num(c->options, "eps");
  st->xs = sqrt(c->scale);
  st->m = st->favor ? em_attn_opt_int(c->options, "num_features") : c->dims.dk;
  em_status s = EM_OK;
  st->den = malloc((size_t)(c->B * c->H * c->Lq) * sizeof *st->den);
  if (!st->den) s = em_error(EM_ERR_OOM, "out of memory");
  if (s == EM_OK && st->favor) {
    int64_t n = st->m * c->dims.dk;
    if (!(st->w = malloc((size_t)n * sizeof *st->w))) s = em_error(EM_ERR_OOM, "out of memory");
    else if (c->training && em_attn_opt_bool(c->options, "redraw")) s = lin_draw_features(st->m, c->dims.dk, st->w);
    else if (c->n_params < 1 || c->params[0]->shape[0] != st->m || c->params[0]->shape[1] != c->dims.dk)
      s = em_error(EM_ERR_ARG, "favor features buffer missing or not [%lld, %lld]", (long long)st->m,
                   (long long)c->dims.dk);
    else {
      em_tensor *f64 = NULL;
      s = em_to_dtype(&f64, c->params[0], EM_F64);
      if (s == EM_OK) s = em_to_host(f64, st->w);
      em_release(f64);
    }
  }
  int64_t oshape[4] = {c->B, c->H, c->Lq, c->dims.dv}, wshape[4] = {c->B, c->H, c->Lq, c->Lk};
  em_tensor *w = NULL;
  if (s == EM_OK) s = em_empty(&st->out, 4, oshape, c->q->dtype, c->q->device);
  if (s == EM_OK && weights) s = em_empty(&w, 4, wshape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = lin_run(st, st->out, w);
  if (s != EM_OK) {
    em_release(w);
    lin_state_free(st);
    return s;
  }
  *out = em_retain(st->out);
  if (weights) *weights = w;
  if (c->need_grad) *saved = st;
  else lin_state_free(st);
  return EM_OK;
}

static em_status lin_backward(void *p, em_tensor *dout, const bool *needs, em_tensor **grads) {
  lin_state *st = p;
  (void)needs;
  if (!st) return em_error(EM_ERR_AUTOGRAD, "backward without saved state");
  const em_attn_call *c = &st->c;
  em_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  em_status s = em_empty(&dq, 4, c->q->shape, c->q->dtype, c->q->device);
  if (s == EM_OK) s = em_empty(&dk, 4, c->k->shape, c->k->dtype, c->k->device);
  if (s == EM_OK) s = em_empty(&dv, 4, c->v->shape, c->v->dtype, c->v->device);
  if (s == EM_OK) s = lin_backward_run(st, dout, dq, dk, dv);
  if (s != EM_OK) {
    em_release(dq), em_release(dk), em_release(dv);
    return s;
  }
  grads[0] = dq, grads[1] = dk, grads[2] = dv; /* the features buffer gets no gradient */
  return EM_OK;
}

static const em_attention_variant LINEAR = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "linear",
  .version = "1.0",
  .description = "linear attention: elu+1 (Katharopoulos 2020) or FAVOR+ (Performer); O(L) memory",
  .caps = EM_ATTN_CAP_KEY_PADDING | EM_ATTN_CAP_CAUSAL | EM_ATTN_CAP_WEIGHTS | EM_ATTN_CAP_CROSS,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .check = lin_check,
  .init_params = lin_init_params,
  .forward = lin_forward,
  .backward = lin_backward,
  .free_saved = lin_state_free,
  .compose = lin_compose,
  .can_forward = lin_can_forward,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "linear", "1.0",
  "linear attention (elu+1 or FAVOR+ random features), causal by prefix sums, O(L) memory"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &LINEAR;
}
