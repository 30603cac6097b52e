/*
** relpos.c -- attention with relative positions.
** Relative position of key j to query i: r = j - p with p = i + Lk - Lq
** (bottom-right, as causal).
**
** mode = "shaw"  (Shaw et al. 2018): learned tables rel_k [2K+1, dk] and
**   rel_v [2K+1, dv], shared by the heads, K = max_relative_position:
**     e_ij = (q_i . k_j + q_i . rel_k[clip(r)]) * scale
**     out_i = sum_j P_ij (v_j + rel_v[clip(r)])
**   computed as gather(q rel_k^T) and scatter_add(P) rel_v, so no
**   [Lq, Lk, d] tensor is built.
** mode = "t5"  (Raffel et al. 2020): a learned bias table [num_buckets, H]
**   indexed by T5's log-spaced bucket of r (bidirectional or not, exact
**   below num_buckets/2 (or /4 when bidirectional), log-spaced up to
**   max_distance), added to the scaled scores. (T5 itself uses scale=1:
**   pass scale=1 to the call to match it.)
** mode = "alibi"  (Press et al. 2022): no parameters; head h adds
**   -slope_h * |r| with the paper's slopes 2^(-8/n), 2^(-16/n), ...; for a
**   head count n that is not a power of 2, the slopes of the closest power
**   of 2 below, then every other slope of the next power of 2.
** With zero tables, shaw and t5 equal the standard variant exactly.
**
** The variant only declares these terms (ember_attention.h, em_attn_decl):
** the backend's fused kernel computes them, table gradients included, and
** the core composes them of core ops where the kernel does not reach
** (kernel="dense" asks for that route, as a reference).
*/
#include "ember_attention.h"

#include <stdio.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "mode", .type = EM_ATTN_OPT_STRING, .default_str = "shaw", .choices = "shaw|t5|alibi",
   .help = "Shaw learned key/value embeddings, T5 bucketed bias, or ALiBi slopes"},
  {.name = "max_relative_position", .type = EM_ATTN_OPT_INT, .default_num = 16, .bounded = true,
   .min = 0, .max = 1e6, .help = "shaw: relative positions are clipped to +-this"},
  {.name = "num_buckets", .type = EM_ATTN_OPT_INT, .default_num = 32, .bounded = true, .min = 2,
   .max = 1e6, .help = "t5: number of buckets"},
  {.name = "max_distance", .type = EM_ATTN_OPT_INT, .default_num = 128, .bounded = true, .min = 1,
   .max = 1e9, .help = "t5: distances from here on share the last bucket"},
  {.name = "bidirectional", .type = EM_ATTN_OPT_BOOL, .default_num = 1,
   .help = "t5: separate buckets for keys before and after the query"},
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto", .choices = "auto|dense",
   .help = "auto: the fused kernel where it covers the call; dense: core ops"},
};

static int mode_of(const em_attn_options *o) {
  const char *m = em_attn_opt_str(o, "mode");
  return strcmp(m, "shaw") == 0 ? 0 : strcmp(m, "t5") == 0 ? 1 : 2;
}

static em_status rp_check(const em_attn_options *o, const em_attn_dims *d) {
  (void)d;
  /* the options of another mode, set by the user, would be ignored: refused */
  static const char *const SHAW[] = {"max_relative_position", NULL};
  static const char *const T5[] = {"num_buckets", "max_distance", "bidirectional", NULL};
  const char *mode = em_attn_opt_str(o, "mode");
  for (int m = 0; m < 2; m++) {
    if (m == mode_of(o)) continue;
    char why[128];
    snprintf(why, sizeof why, "with mode=\"%s\"%s (it is for mode=\"%s\")", mode,
             strcmp(mode, "shaw") == 0 ? ", the default" : "", m == 0 ? "shaw" : "t5");
    em_status s = em_attn_unused_options(o, m == 0 ? SHAW : T5, why);
    if (s != EM_OK) return s;
  }
  if (mode_of(o) == 1) {
    int64_t nb = em_attn_opt_int(o, "num_buckets");
    if (em_attn_opt_bool(o, "bidirectional") && nb < 4)
      return em_error(EM_ERR_ARG, "relpos t5: bidirectional needs num_buckets >= 4, got %lld", (long long)nb);
    /* T5's log-spaced buckets run from the exact ones (half the buckets of a
       direction) up to max_distance: log(max_distance / max_exact) must be > 0,
       or the buckets past the exact ones fall outside the table */
    int64_t exact = (em_attn_opt_bool(o, "bidirectional") ? nb / 2 : nb) / 2;
    int64_t md = em_attn_opt_int(o, "max_distance");
    if (md <= exact)
      return em_error(EM_ERR_ARG,
                      "relpos t5: max_distance (%lld) must exceed the %lld exact buckets (num_buckets / %d%s): the "
                      "log-spaced buckets run from there to max_distance",
                      (long long)md, (long long)exact, em_attn_opt_bool(o, "bidirectional") ? 4 : 2,
                      em_attn_opt_bool(o, "bidirectional") ? ", bidirectional" : "");
  }
  return EM_OK;
}

static em_status rp_init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                                em_device dev, int *n, em_attn_param *params) {
  *n = 0;
  int mode = mode_of(o);
  if (mode == 0) {
    int64_t R = 2 * em_attn_opt_int(o, "max_relative_position") + 1;
    int64_t sk[2] = {R, d->dk}, sv[2] = {R, d->dv};
    em_status s = em_normal(&params[0].tensor, 2, sk, 0, 0.02, dt, dev);
    if (s == EM_OK) s = em_normal(&params[1].tensor, 2, sv, 0, 0.02, dt, dev);
    if (s != EM_OK) {
      em_release(params[0].tensor), params[0].tensor = NULL;
      return s;
    }
    params[0].name = "rel_k", params[0].learned = true;
    params[1].name = "rel_v", params[1].learned = true;
    *n = 2;
  } else if (mode == 1) {
    int64_t sh[2] = {em_attn_opt_int(o, "num_buckets"), d->heads};
    em_status s = em_normal(&params[0].tensor, 2, sh, 0, 0.02, dt, dev);
    if (s != EM_OK) return s;
    params[0].name = "bias", params[0].learned = true;
    *n = 1;
  }
  return EM_OK;
}

static em_status rp_declare(const em_attn_options *o, const em_attn_dims *dims, em_attn_decl *d) {
  (void)dims;
  int mode = mode_of(o);
  d->route = strcmp(em_attn_opt_str(o, "kernel"), "dense") == 0 ? EM_ATTN_ROUTE_COMPOSED
                                                                 : EM_ATTN_ROUTE_AUTO;
  if (mode == 0) {
    d->bias = EM_ATTN_BIAS_SHAW;
    d->rel = EM_ATTN_REL_CLIP;
    d->max_distance = em_attn_opt_int(o, "max_relative_position");
    d->rel_k_param = 0, d->rel_v_param = 1;
  } else if (mode == 1) {
    d->bias = EM_ATTN_BIAS_TABLE;
    d->rel = EM_ATTN_REL_T5;
    d->num_buckets = em_attn_opt_int(o, "num_buckets");
    d->max_distance = em_attn_opt_int(o, "max_distance");
    d->bidirectional = em_attn_opt_bool(o, "bidirectional");
    d->table_param = 0;
  } else {
    d->bias = EM_ATTN_BIAS_ALIBI;
  }
  return EM_OK;
}

static const em_attention_variant RELPOS = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "relpos",
  .version = "2.0",
  .description = "relative positions: Shaw (learned key/value tables), T5 buckets, ALiBi",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .check = rp_check,
  .init_params = rp_init_params,
  .declare = rp_declare,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "relpos", "2.0",
  "relative-position attention: Shaw 2018, T5 bucketed bias, ALiBi"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &RELPOS;
}
