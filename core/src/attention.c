/*
** attention.c -- the core side of attention variants (ember_attention.h):
** finding a variant among the loaded plugins, checking its options, and
** running it on one of three routes, named as em_attn_route_counts names them:
** fused (a declaration, or a traced variant's programs, on the backend's
** fused kernel: attention_sdpa.c), forward (the variant's own
** forward/backward as one autograd op) or composed (core ops).
**
** The autograd engine does not know about attention: a call on the forward (or fused) route records
** an ordinary em_opdef whose ctx holds the variant and its saved state.
*/
#include "internal.h"
#include "ember_attention.h"
#include "ember_plugin.h"

#include <math.h>

/* ------------------------------------------------------------------ */
/* Finding variants                                                    */
/* ------------------------------------------------------------------ */

static bool fail(char *err, size_t n, const char *msg, const char *arg) {
  if (n) snprintf(err, n, msg, arg);
  return false;
}

bool em_attention_variant_check(const void *vtable, char *err, size_t n) {
  const em_attention_variant *v = vtable;
  char num[96];
  if (!v) return fail(err, n, "%sinit returned NULL", "");
  if (v->abi_version != EM_ATTENTION_ABI_VERSION) {
    snprintf(num, sizeof num, "%u, this ember expects %u", v->abi_version, EM_ATTENTION_ABI_VERSION);
    return fail(err, n, "vtable ABI version %s", num);
  }
  if (v->struct_size != sizeof(em_attention_variant)) {
    snprintf(num, sizeof num, "%u bytes, expected %zu", v->struct_size, sizeof(em_attention_variant));
    return fail(err, n, "vtable is %s", num);
  }
  if (!v->name || !v->name[0]) return fail(err, n, "%svariant has no name", "");
  /* what is wrong with the option table, said exactly */
  if (v->n_options < 0 || v->n_options > EM_ATTN_MAX_OPTIONS) {
    if (n) snprintf(err, n, "variant '%s' declares n_options = %d (0..%d)", v->name, v->n_options, EM_ATTN_MAX_OPTIONS);
    return false;
  }
  if (v->n_options && !v->options) {
    if (n) snprintf(err, n, "variant '%s' declares n_options = %d but options is NULL", v->name, v->n_options);
    return false;
  }
  for (int i = 0; i < v->n_options; i++) {
    const em_attn_option_spec *s = &v->options[i];
    if (!s->name || !s->name[0]) {
      if (n) snprintf(err, n, "variant '%s': option %d has no name", v->name, i + 1);
      return false;
    }
    if (s->type < EM_ATTN_OPT_INT || s->type > EM_ATTN_OPT_STRING) {
      if (n) snprintf(err, n, "variant '%s': option '%s' has type %d, not EM_ATTN_OPT_INT, _FLOAT, _BOOL or _STRING",
                      v->name, s->name, (int)s->type);
      return false;
    }
  }
  if (v->forward && !v->backward)
    return fail(err, n, "variant '%s' has forward but no backward", v->name);
  if (!v->forward && !v->compose && !v->declare)
    return fail(err, n, "variant '%s' has neither declare, forward/backward nor compose", v->name);
  return true;
}

const char *em_attention_list(char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = '\0';
  int count = em_plugin_count();
  for (int i = 0; i < count; i++) {
    const em_plugin_record *r = em_plugin_get(i);
    if (!r->loaded || r->kind != EM_PLUGIN_ATTENTION || k >= n) continue;
    k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? ", " : "", r->name);
  }
  if (k == 0 && n) snprintf(buf, n, "(none)");
  return buf;
}

em_status em_attention_find(const char *name, const em_attention_variant **out) {
  *out = NULL;
  em_plugin_count(); /* loads plugins on first use */
  const em_plugin_record *r = em_plugin_find(EM_PLUGIN_ATTENTION, name);
  char list[512], report[1500];
  if (!r)
    return em_error(EM_ERR_PLUGIN, "attention: no variant named '%s'; available: %s (%s)", name,
                    em_attention_list(list, sizeof list),
                    em_plugin_report(EM_PLUGIN_ATTENTION, name, report, sizeof report));
  char err[256];
  if (!em_attention_variant_check(r->vtable, err, sizeof err))
    return em_error(EM_ERR_PLUGIN, "attention: variant '%s' (%s) is unusable: %s", name, r->path, err);
  *out = r->vtable;
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static const char *type_name(em_attn_opt_type t) {
  switch (t) {
  case EM_ATTN_OPT_INT: return "int";
  case EM_ATTN_OPT_FLOAT: return "float";
  case EM_ATTN_OPT_BOOL: return "bool";
  default: return "string";
  }
}

/* "window_left (int, default 64), ..." */
static const char *accepted(const em_attention_variant *v, char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < v->n_options && k < n; i++) {
    const em_attn_option_spec *s = &v->options[i];
    char def[80];
    if (s->type == EM_ATTN_OPT_STRING)
      snprintf(def, sizeof def, "\"%s\"%s%s", s->default_str ? s->default_str : "",
               s->choices ? " of " : "", s->choices ? s->choices : "");
    else if (s->type == EM_ATTN_OPT_BOOL)
      snprintf(def, sizeof def, "%s", s->default_num != 0 ? "true" : "false");
    else
      snprintf(def, sizeof def, "%.6g", s->default_num);
    k += (size_t)snprintf(buf + k, n - k, "%s%s (%s, default %s)", i ? ", " : "", s->name,
                          type_name(s->type), def);
  }
  if (v->n_options == 0 && n) snprintf(buf, n, "none");
  return buf;
}

int em_attn_option_index(const em_attention_variant *v, const char *name) {
  for (int i = 0; i < v->n_options; i++)
    if (strcmp(v->options[i].name, name) == 0) return i;
  return -1;
}

void em_attn_options_free(em_attn_options *o) {
  if (!o) return;
  for (int i = 0; i < o->n; i++) free((char *)o->values[i].str);
  free(o->values);
  free(o);
}

static bool choice_ok(const char *choices, const char *s) {
  size_t len = strlen(s);
  for (const char *p = choices; *p;) {
    const char *bar = strchr(p, '|');
    size_t k = bar ? (size_t)(bar - p) : strlen(p);
    if (k == len && strncmp(p, s, k) == 0) return true;
    if (!bar) break;
    p = bar + 1;
  }
  return false;
}

/* Checks one user value against its spec; writes the canonical value. */
static em_status check_value(const em_attention_variant *v, const em_attn_option_spec *s,
                             const em_attn_value *in, em_attn_value *out) {
  const char *vn = v->name, *on = s->name;
  out->type = s->type;
  switch (s->type) {
  case EM_ATTN_OPT_INT:
  case EM_ATTN_OPT_FLOAT:
    if (in->type != EM_ATTN_OPT_INT && in->type != EM_ATTN_OPT_FLOAT)
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be a number (%s), got %s", vn,
                      on, type_name(s->type), type_name(in->type));
    if (!isfinite(in->num))
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be finite, got %g", vn, on, in->num);
    if (s->type == EM_ATTN_OPT_INT && in->num != floor(in->num))
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be an integer, got %g", vn, on,
                      in->num);
    if (s->bounded && (in->num < s->min || in->num > s->max)) {
      /* a spec bounded on one side (a Lua variant's min without max) has +-1e300 on the other */
      char range[96];
      if (s->max >= 1e300) snprintf(range, sizeof range, ">= %g", s->min);
      else if (s->min <= -1e300) snprintf(range, sizeof range, "<= %g", s->max);
      else snprintf(range, sizeof range, "in [%g, %g]", s->min, s->max);
      bool help = s->help && s->help[0];
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be %s, got %g%s%s%s", vn, on, range,
                      in->num, help ? " (" : "", help ? s->help : "", help ? ")" : "");
    }
    out->num = in->num;
    return EM_OK;
  case EM_ATTN_OPT_BOOL:
    if (in->type != EM_ATTN_OPT_BOOL)
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be a boolean, got %s", vn, on,
                      type_name(in->type));
    out->num = in->num != 0;
    return EM_OK;
  default:
    if (in->type != EM_ATTN_OPT_STRING || !in->str)
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be a string, got %s", vn, on,
                      type_name(in->type));
    if (s->choices && !choice_ok(s->choices, in->str))
      return em_error(EM_ERR_ARG, "attention '%s': option '%s' must be one of %s, got \"%s\"", vn, on,
                      s->choices, in->str);
    if (!(out->str = strdup(in->str))) return em_error(EM_ERR_OOM, "attention: out of memory");
    return EM_OK;
  }
}

em_status em_attn_options_new(em_attn_options **out, const em_attention_variant *v, int n,
                              const char *const *names, const em_attn_value *values,
                              const em_attn_dims *dims) {
  *out = NULL;
  em_attn_options *o = calloc(1, sizeof *o);
  if (!o || !(o->values = calloc((size_t)v->n_options + 1, sizeof *o->values))) {
    free(o);
    return em_error(EM_ERR_OOM, "attention: out of memory");
  }
  o->variant = v;
  o->n = v->n_options;
  bool given[EM_ATTN_MAX_OPTIONS] = {false};
  em_status s = EM_OK;
  for (int i = 0; i < n && s == EM_OK; i++) {
    int j = em_attn_option_index(v, names[i]);
    if (j < 0) {
      char acc[1500];
      s = em_error(EM_ERR_ARG, "attention '%s': unknown option '%s'; accepted options: %s", v->name,
                   names[i], accepted(v, acc, sizeof acc));
    } else if (given[j]) {
      s = em_error(EM_ERR_ARG, "attention '%s': option '%s' given twice", v->name, names[i]);
    } else {
      given[j] = true;
      s = check_value(v, &v->options[j], &values[i], &o->values[j]);
    }
  }
  /* Defaults for the rest. */
  for (int j = 0; j < v->n_options && s == EM_OK; j++) {
    if (given[j]) continue;
    const em_attn_option_spec *sp = &v->options[j];
    o->values[j].type = sp->type;
    o->values[j].num = sp->default_num;
    if (sp->type == EM_ATTN_OPT_STRING && !(o->values[j].str = strdup(sp->default_str ? sp->default_str : "")))
      s = em_error(EM_ERR_OOM, "attention: out of memory");
  }
  if (s == EM_OK && v->check) s = v->check(o, dims);
  if (s != EM_OK) {
    em_attn_options_free(o);
    return s;
  }
  *out = o;
  return EM_OK;
}

static const em_attn_value *find_value(const em_attn_options *o, const char *name) {
  int j = o ? em_attn_option_index(o->variant, name) : -1;
  return j < 0 ? NULL : &o->values[j];
}

double em_attn_opt_num(const em_attn_options *o, const char *name) {
  const em_attn_value *x = find_value(o, name);
  return x ? x->num : 0;
}
int64_t em_attn_opt_int(const em_attn_options *o, const char *name) {
  return (int64_t)em_attn_opt_num(o, name);
}
bool em_attn_opt_bool(const em_attn_options *o, const char *name) {
  return em_attn_opt_num(o, name) != 0;
}
const char *em_attn_opt_str(const em_attn_options *o, const char *name) {
  const em_attn_value *x = find_value(o, name);
  return x && x->str ? x->str : "";
}

em_status em_attn_unused_options(const em_attn_options *o, const char *const *names, const char *why) {
  for (; names && *names; names++) {
    int j = em_attn_option_index(o->variant, *names);
    if (j < 0) continue;
    const em_attn_option_spec *sp = &o->variant->options[j];
    const em_attn_value *x = &o->values[j];
    char val[80];
    if (sp->type == EM_ATTN_OPT_STRING) {
      if (strcmp(x->str ? x->str : "", sp->default_str ? sp->default_str : "") == 0) continue;
      snprintf(val, sizeof val, "\"%s\"", x->str ? x->str : "");
    } else {
      if (x->num == sp->default_num) continue;
      if (sp->type == EM_ATTN_OPT_BOOL) snprintf(val, sizeof val, "%s", x->num ? "true" : "false");
      else snprintf(val, sizeof val, "%g", x->num);
    }
    return em_error(EM_ERR_ARG, "attention '%s': option '%s' (= %s) is not used %s; leave it out", o->variant->name,
                    sp->name, val, why);
  }
  return EM_OK;
}

const char *em_attn_options_str(const em_attn_options *o, char *buf, size_t n) {
  size_t k = 0;
  if (n) buf[0] = '\0';
  for (int i = 0; i < o->n && k < n; i++) {
    const em_attn_value *x = &o->values[i];
    const char *name = o->variant->options[i].name;
    if (x->type == EM_ATTN_OPT_STRING)
      k += (size_t)snprintf(buf + k, n - k, "%s%s=\"%s\"", i ? ", " : "", name, x->str);
    else if (x->type == EM_ATTN_OPT_BOOL)
      k += (size_t)snprintf(buf + k, n - k, "%s%s=%s", i ? ", " : "", name, x->num ? "true" : "false");
    else
      k += (size_t)snprintf(buf + k, n - k, "%s%s=%.17g", i ? ", " : "", name, x->num);
  }
  return buf;
}

/* An error from a variant's own code, its message starting with the
** variant's name once (the core's checks name it already). */
static em_status named_error(const em_attention_variant *v, em_status s) {
  char head[96];
  int len = snprintf(head, sizeof head, "attention '%s'", v->name);
  if (len > 0 && strncmp(em_error_message(), head, (size_t)len) == 0) return s;
  return em_error(s, "%s: %s", head, em_error_message());
}

em_status em_attn_init_params(const em_attention_variant *v, const em_attn_options *o,
                              const em_attn_dims *dims, em_dtype dt, em_device dev, int *n,
                              em_attn_param *params) {
  *n = 0;
  memset(params, 0, EM_ATTN_MAX_PARAMS * sizeof *params);
  if (!v->init_params) return EM_OK;
  em_status s = v->init_params(o, dims, dt, dev, n, params);
  if (s == EM_OK && (*n < 0 || *n > EM_ATTN_MAX_PARAMS))
    s = em_error(EM_ERR_PLUGIN, "attention '%s': init_params made %d params (max %d)", v->name, *n,
                 EM_ATTN_MAX_PARAMS);
  for (int i = 0; s == EM_OK && i < *n; i++)
    if (!params[i].tensor || !params[i].name)
      s = em_error(EM_ERR_PLUGIN, "attention '%s': init_params left param %d without a tensor or name",
                   v->name, i);
  if (s != EM_OK) {
    s = named_error(v, s);
    for (int i = 0; i < EM_ATTN_MAX_PARAMS; i++) em_release(params[i].tensor);
    memset(params, 0, EM_ATTN_MAX_PARAMS * sizeof *params);
    *n = 0;
  }
  return s;
}

/* ------------------------------------------------------------------ */
/* Checking a call                                                     */
/* ------------------------------------------------------------------ */

/* The error says what the variant does support and which loaded variants
** have the missing capability, so the user knows where to go. */
static em_status need_cap(const em_attention_variant *v, uint32_t cap, const char *what) {
  static const struct { uint32_t cap; const char *name; } names[] = {
    {EM_ATTN_CAP_MASK, "attn_mask"}, {EM_ATTN_CAP_KEY_PADDING, "key_padding_mask"},
    {EM_ATTN_CAP_CAUSAL, "causal"}, {EM_ATTN_CAP_DROPOUT, "attention dropout"},
    {EM_ATTN_CAP_WEIGHTS, "need_weights"}, {EM_ATTN_CAP_CROSS, "cross-attention"},
  };
  if (v->caps & cap) return EM_OK;
  char has[160] = "", others[256] = "";
  size_t n = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (v->caps & names[i].cap)
      n += (size_t)snprintf(has + n, n < sizeof has ? sizeof has - n : 0, "%s%s", n ? ", " : "", names[i].name);
  n = 0;
  for (int i = 0; i < em_plugin_count(); i++) {
    const em_plugin_record *r = em_plugin_get(i);
    const em_attention_variant *o = r->vtable;
    if (r->kind != EM_PLUGIN_ATTENTION || !r->loaded || !o || !(o->caps & cap)) continue;
    n += (size_t)snprintf(others + n, n < sizeof others ? sizeof others - n : 0, "%s%s", n ? ", " : "", o->name);
  }
  return em_error(EM_ERR_UNSUPPORTED, "attention '%s': does not support %s (it supports: %s; loaded variants that do: %s)",
                  v->name, what, has[0] ? has : "none of the options", others[0] ? others : "none");
}

/* Checks q, k, v, params and masks; fills the sizes into c. */
static em_status check_inputs(em_attn_call *c, const em_attention_variant *v, em_tensor *q,
                              em_tensor *k, em_tensor *vv, int n_params, em_tensor *const *params,
                              const em_attn_args *a) {
  char dq[200], dk[200], dv[200];
  if (q->ndim != 4 || k->ndim != 4 || vv->ndim != 4)
    return em_error(EM_ERR_SHAPE,
                    "attention '%s': q, k, v must be 4-d [B,H,L,d], got q %s, k %s, v %s", v->name,
                    em__desc(q, dq, sizeof dq), em__desc(k, dk, sizeof dk), em__desc(vv, dv, sizeof dv));
  /* bfloat16 only where the core runs the call (a declaration: the fused
  ** kernel or the composition); a variant's own kernels take float32/64 */
  const bool bf16_ok = v->declare != NULL;
  if ((q->dtype != EM_F32 && q->dtype != EM_F64 && !(q->dtype == EM_BF16 && bf16_ok)) ||
      k->dtype != q->dtype || vv->dtype != q->dtype)
    return em_error(EM_ERR_DTYPE,
                    "attention '%s': q, k, v must share a %s dtype, got q %s, k %s, v %s", v->name,
                    bf16_ok ? "float32, float64 or bfloat16" : "float32 or float64",
                    em__desc(q, dq, sizeof dq), em__desc(k, dk, sizeof dk), em__desc(vv, dv, sizeof dv));
  if (!em_device_eq(q->device, k->device) || !em_device_eq(q->device, vv->device))
    return em_error(EM_ERR_DEVICE, "attention '%s': q, k, v on different devices: q %s, k %s, v %s",
                    v->name, em__desc(q, dq, sizeof dq), em__desc(k, dk, sizeof dk),
                    em__desc(vv, dv, sizeof dv));
  int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2], Lk = k->shape[2];
  const int64_t Hkv = k->shape[1];
  if (k->shape[0] == B && vv->shape[0] == B && vv->shape[1] == Hkv && Hkv > 0 && Hkv != H &&
      H % Hkv != 0)
    return em_error(EM_ERR_SHAPE,
                    "attention '%s': q has %lld heads and k, v %lld: grouped-query attention needs the "
                    "query heads to be a multiple of the key/value heads", v->name, (long long)H,
                    (long long)Hkv);
  if (k->shape[0] != B || vv->shape[0] != B || Hkv <= 0 || H % Hkv != 0 || vv->shape[1] != Hkv ||
      vv->shape[2] != Lk || k->shape[3] != q->shape[3])
    return em_error(EM_ERR_SHAPE,
                    "attention '%s': expected q [B,H,Lq,dk], k [B,H,Lk,dk], v [B,H,Lk,dv], got q %s, k %s, v %s",
                    v->name, em__desc(q, dq, sizeof dq), em__desc(k, dk, sizeof dk),
                    em__desc(vv, dv, sizeof dv));
  if (Lq != Lk) EM_TRY(need_cap(v, EM_ATTN_CAP_CROSS, "Lq != Lk (cross-attention)"));
  for (int i = 0; i < n_params; i++)
    if ((params[i]->dtype != q->dtype && !(a->mods && params[i]->dtype == EM_I64)) ||
        !em_device_eq(params[i]->device, q->device))
      return em_error(EM_ERR_DTYPE, "attention '%s': parameter %d is %s but q is %s", v->name, i + 1,
                      em__desc(params[i], dk, sizeof dk), em__desc(q, dq, sizeof dq));
  if (a->causal) EM_TRY(need_cap(v, EM_ATTN_CAP_CAUSAL, "causal masking"));
  if (a->key_padding) {
    em_tensor *m = a->key_padding;
    EM_TRY(need_cap(v, EM_ATTN_CAP_KEY_PADDING, "a key padding mask"));
    if (m->dtype != EM_BOOL || m->ndim != 2 || m->shape[0] != B || m->shape[1] != Lk ||
        !em_device_eq(m->device, q->device))
      return em_error(EM_ERR_SHAPE,
                      "attention '%s': key_padding_mask must be bool [%lld, %lld] (B, Lk) on q's device, got %s",
                      v->name, (long long)B, (long long)Lk, em__desc(m, dk, sizeof dk));
  }
  if (a->mask) {
    em_tensor *m = a->mask;
    EM_TRY(need_cap(v, EM_ATTN_CAP_MASK, "an attention mask (attn_mask)"));
    /* bfloat16 q may come with a float32 mask (autocast made q bfloat16) */
    if (m->dtype != EM_BOOL && m->dtype != q->dtype && !(q->dtype == EM_BF16 && m->dtype == EM_F32))
      return em_error(EM_ERR_DTYPE, "attention '%s': attn_mask must be bool or %s (q's dtype), got %s",
                      v->name, em_dtype_name(q->dtype), em__desc(m, dk, sizeof dk));
    int64_t full[4] = {B, H, Lq, Lk};
    bool ok = m->ndim <= 4 && em_device_eq(m->device, q->device);
    for (int i = 0; ok && i < m->ndim; i++) {
      int64_t s = m->shape[m->ndim - 1 - i];
      ok = s == 1 || s == full[3 - i];
    }
    if (!ok)
      return em_error(EM_ERR_SHAPE,
                      "attention '%s': attn_mask must broadcast to [%lld, %lld, %lld, %lld] on q's device, got %s",
                      v->name, (long long)B, (long long)H, (long long)Lq, (long long)Lk,
                      em__desc(m, dk, sizeof dk));
  }
  if (a->training && a->dropout_p > 0) {
    EM_TRY(need_cap(v, EM_ATTN_CAP_DROPOUT, "dropout on attention weights"));
  }
  if (!(a->dropout_p >= 0 && a->dropout_p < 1))
    return em_error(EM_ERR_ARG, "attention '%s': dropout must be in [0, 1), got %g", v->name,
                    a->dropout_p);
  if (a->need_weights) EM_TRY(need_cap(v, EM_ATTN_CAP_WEIGHTS, "returning attention weights"));
  if (!isfinite(a->scale))
    return em_error(EM_ERR_ARG, "attention '%s': scale must be finite, got %g", v->name, a->scale);
  c->B = B, c->H = H, c->Lq = Lq, c->Lk = Lk, c->Hkv = Hkv;
  c->dims.heads = H, c->dims.dk = q->shape[3], c->dims.dv = vv->shape[3];
  return EM_OK;
}

/* The user's mask as a [B,H,Lq,Lk] view with 0 strides (no copy). */
static em_status expand_mask(em_tensor **out, em_tensor *m, const em_attn_call *c) {
  int64_t shape4[4] = {1, 1, 1, 1};
  for (int i = 0; i < m->ndim; i++) shape4[4 - m->ndim + i] = m->shape[i];
  em_tensor *r = NULL;
  EM_TRY(em_reshape(&r, m, 4, shape4));
  int64_t full[4] = {c->B, c->H, c->Lq, c->Lk};
  em_status s = em_expand(out, r, 4, full);
  em_release(r);
  return s;
}

/* k or v [B,Hkv,L,d] repeated to H heads, each kv head for H/Hkv query
** heads in a row (torch's repeat_interleave on dim 1), differentiable: the
** routes that do not read grouped heads in place get these. */
static em_status repeat_heads(em_tensor **out, em_tensor *t, int64_t H) {
  const int64_t B = t->shape[0], Hkv = t->shape[1], L = t->shape[2], d = t->shape[3];
  if (Hkv == H) {
    *out = em_retain(t);
    return EM_OK;
  }
  int64_t s5[5] = {B, Hkv, 1, L, d}, e5[5] = {B, Hkv, H / Hkv, L, d}, s4[4] = {B, H, L, d};
  em_tensor *a = NULL, *b = NULL;
  em_status s = em_reshape(&a, t, 5, s5);
  if (s == EM_OK) s = em_expand(&b, a, 5, e5);
  if (s == EM_OK) s = em_reshape(out, b, 4, s4);
  em_release(a), em_release(b);
  return s;
}

/* ------------------------------------------------------------------ */
/* Route 1: one autograd op around forward/backward                   */
/* ------------------------------------------------------------------ */

/* What the forward route (the variant's forward) and the fused route (the fused kernel of
** a declaration, attention_sdpa.c) have in common: a forward returning
** saved state, a backward, a free. */
typedef struct attn_route {
  em_status (*forward)(const em_attn_call *c, const em_attn_decl *d, em_tensor **out,
                       em_tensor **weights, void **saved);
  em_status (*backward)(void *saved, em_tensor *dout, const bool *needs, em_tensor **grads);
  void (*free_saved)(void *saved);
  const em_attn_decl *decl;
  bool views; /* the forward takes q, k, v and the backward dout as views (copying what it must) */
} attn_route;

typedef struct attn_ctx {
  const em_attention_variant *v;
  attn_route r;
  void *saved;
  int n_inputs; /* 3 + n_params */
} attn_ctx;

static void attn_free_ctx(void *p) {
  attn_ctx *x = p;
  if (!x) return;
  if (x->r.free_saved) x->r.free_saved(x->saved);
  free(x);
}

/* A variant plugin computes its forward in its own code, which the
** profiler's backend wrappers do not see: while a profile runs, the call
** is a span of its own ("attention linear"), holding any backend kernels
** it calls, as each node's backward is. */
static em_status variant_forward(const em_attn_call *c, const em_attn_decl *d, em_tensor **out,
                                 em_tensor **weights, void **saved) {
  (void)d;
  bool span = false;
  if (em__prof_is_on()) {
    char name[96];
    snprintf(name, sizeof name, "attention %.80s", c->variant->name);
    span = em_profiler_push(name) == EM_OK;
  }
  em_status s = c->variant->forward(c, out, weights, saved);
  if (span) em_profiler_pop();
  return s;
}

static em_status fused_forward(const em_attn_call *c, const em_attn_decl *d, em_tensor **out,
                               em_tensor **weights, void **saved) {
  (void)weights; /* never asked: calls wanting weights are composed */
  return em__sdpa_forward(c, d, out, saved);
}

static em_status attn_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  attn_ctx *x = node->ctx;
  int n = x->n_inputs;
  em_tensor *grads[3 + EM_ATTN_MAX_PARAMS] = {NULL};
  bool needs[3 + EM_ATTN_MAX_PARAMS] = {false};
  for (int i = 0; i < n; i++) needs[i] = node->needs_grad[i];
  em_tensor *dout = NULL;
  EM_TRY(x->r.views ? em_detach(&dout, gy) : em_contiguous(&dout, gy));
  em_status s = x->r.backward(x->saved, dout, needs, grads);
  em_release(dout);
  if (s != EM_OK) {
    for (int i = 0; i < n; i++) em_release(grads[i]);
    return em_error(s, "attention '%s' backward: %s", x->v->name, em_error_message());
  }
  for (int i = 0; i < n && s == EM_OK; i++) {
    if (!needs[i]) {
      em_release(grads[i]);
      grads[i] = NULL;
      continue;
    }
    if (!grads[i]) {
      s = em_zeros(&grads[i], node->in_ndim[i], node->in_shape[i], node->in_dtype[i], node->out_device);
    } else if (grads[i]->ndim != node->in_ndim[i] ||
               memcmp(grads[i]->shape, node->in_shape[i], (size_t)grads[i]->ndim * sizeof(int64_t)) ||
               grads[i]->dtype != node->in_dtype[i] || !em_device_eq(grads[i]->device, node->out_device)) {
      /* a plugin's gradient must be its input's: a float32 one for a float64
      ** leaf would become that leaf's .grad as it is */
      char got[200], want[200], dev[32];
      em_shape_str(node->in_ndim[i], node->in_shape[i], want, sizeof want);
      s = em_error(EM_ERR_PLUGIN, "attention '%s' backward: gradient %d is %s, input is %s %s %s",
                   x->v->name, i + 1, em__desc(grads[i], got, sizeof got), want,
                   em_dtype_name(node->in_dtype[i]), em_device_str(node->out_device, dev, sizeof dev));
    }
  }
  /* gradients past the call's inputs (params it does not have) are dropped */
  for (int i = n; i < 3 + EM_ATTN_MAX_PARAMS; i++) em_release(grads[i]), grads[i] = NULL;
  if (s != EM_OK) {
    for (int i = 0; i < n; i++) em_release(grads[i]);
    return s;
  }
  for (int i = 0; i < n; i++) gx[i] = grads[i];
  return EM_OK;
}

static const em_opdef ATTENTION_OP = {"attention", attn_backward, attn_free_ctx};

/* Detached, contiguous copies of the inputs for a forward (grad mode off). */
static em_status detached(em_tensor **out, em_tensor *t) {
  em_tensor *d = NULL;
  EM_TRY(em_detach(&d, t));
  em_status s = em_contiguous(out, d);
  em_release(d);
  return s;
}

static em_status run_forward(em_tensor **out, em_tensor **weights, em_attn_call *c,
                             const attn_route *route, em_tensor *q, em_tensor *k, em_tensor *vv,
                             int n_params, em_tensor *const *params) {
  const em_attention_variant *v = c->variant;
  em_tensor *inputs[3 + EM_ATTN_MAX_PARAMS] = {q, k, vv};
  for (int i = 0; i < n_params; i++) inputs[3 + i] = params[i];
  int n_in = 3 + n_params;
  bool record = em_autograd_needed(n_in, inputs);
  c->need_grad = record;

  em_tensor *dq = NULL, *dk = NULL, *dv = NULL, *dp[EM_ATTN_MAX_PARAMS] = {NULL};
  em_tensor *y = NULL, *w = NULL;
  void *saved = NULL;
  bool prev = em_set_grad_enabled(false);
  /* the fused route reads heads where they lie, and a KV cache's filled
  ** part, where the backend can (attention_sdpa.c) */
  em_status s = route->views ? em_detach(&dq, q) : detached(&dq, q);
  if (s == EM_OK) s = route->views ? em_detach(&dk, k) : detached(&dk, k);
  if (s == EM_OK) s = route->views ? em_detach(&dv, vv) : detached(&dv, vv);
  for (int i = 0; s == EM_OK && i < n_params; i++) s = em_detach(&dp[i], params[i]);
  if (s == EM_OK) {
    c->q = dq, c->k = dk, c->v = dv, c->params = dp;
    s = route->forward(c, route->decl, &y, c->need_weights ? &w : NULL, &saved);
    if (s == EM_OK && (!y || (c->need_weights && !w)))
      s = em_error(EM_ERR_PLUGIN, "attention '%s': forward returned no %s", v->name, y ? "weights" : "output");
    if (s == EM_OK && (y->ndim != 4 || y->shape[0] != c->B || y->shape[1] != c->H ||
                       y->shape[2] != c->Lq || y->shape[3] != c->dims.dv || y->dtype != q->dtype)) {
      char got[200];
      s = em_error(EM_ERR_PLUGIN, "attention '%s': forward returned %s, expected [%lld, %lld, %lld, %lld] %s",
                   v->name, em__desc(y, got, sizeof got), (long long)c->B, (long long)c->H,
                   (long long)c->Lq, (long long)c->dims.dv, em_dtype_name(q->dtype));
    } else if (s != EM_OK && s != EM_ERR_PLUGIN && !(s == EM_ERR_UNSUPPORTED && route->decl)) {
      s = named_error(v, s);
    }
    if (s == EM_OK && w && (w->ndim != 4 || w->shape[0] != c->B || w->shape[1] != c->H ||
                            w->shape[2] != c->Lq || w->shape[3] != c->Lk)) {
      char got[200];
      s = em_error(EM_ERR_PLUGIN, "attention '%s': forward returned weights %s, expected [%lld, %lld, %lld, %lld]",
                   v->name, em__desc(w, got, sizeof got), (long long)c->B, (long long)c->H,
                   (long long)c->Lq, (long long)c->Lk);
    }
  }
  em_release(dq), em_release(dk), em_release(dv);
  for (int i = 0; i < n_params; i++) em_release(dp[i]);
  em_set_grad_enabled(prev);
  c->q = c->k = c->v = NULL, c->params = NULL;
  if (s != EM_OK) {
    if (saved && route->free_saved) route->free_saved(saved);
    em_release(y), em_release(w);
    return s;
  }
  if (record) {
    /* Hand out an alias: saved may hold y itself, and the node must not be
    ** reachable from saved (that would be a reference cycle). */
    em_tensor *alias = NULL;
    attn_ctx *x = malloc(sizeof *x);
    s = x ? em_detach(&alias, y) : em_error(EM_ERR_OOM, "attention: out of memory");
    if (s != EM_OK) {
      free(x);
      if (route->free_saved) route->free_saved(saved);
      em_release(y), em_release(w);
      return s;
    }
    x->v = v, x->r = *route, x->r.decl = NULL, x->saved = saved, x->n_inputs = n_in;
    em_release(y);
    /* Everything the backward reads, as the node's saved tensors (aliases:
    ** the route's own state holds the data), so that backward refuses to
    ** run after one was written in place (autograd.c's version check):
    ** q, k, v, the tables, a Lua variant's per-call tensors, the masks. */
    em_tensor *keep[3 + EM_ATTN_MAX_PARAMS + EM_EXPR_MAX_CAPS + 2];
    int n_keep = 0;
    for (int i = 0; i < n_in; i++) keep[n_keep++] = inputs[i];
    for (int i = 0; c->mods && i < c->mods->n_caps; i++)
      if (c->mods->cap_input[i]) keep[n_keep++] = c->mods->cap_input[i];
    if (c->key_padding) keep[n_keep++] = c->key_padding;
    if (c->mask) keep[n_keep++] = c->mask;
    s = em_autograd_record(alias, &ATTENTION_OP, n_in, inputs, n_keep, keep, x); /* frees x on failure */
    if (s != EM_OK) {
      em_release(alias), em_release(w);
      return s;
    }
    y = alias;
  } else if (saved && route->free_saved) {
    route->free_saved(saved);
  }
  *out = y;
  if (weights) *weights = w;
  else em_release(w);
  return EM_OK;
}

/* ------------------------------------------------------------------ */
/* Route 2 and the entry point                                         */
/* ------------------------------------------------------------------ */

static em_status run_compose(em_tensor **out, em_tensor **weights, em_attn_call *c,
                             const em_attn_decl *d, em_tensor *q, em_tensor *k, em_tensor *vv,
                             em_tensor *const *params) {
  if (c->Hkv != c->H) { /* grouped heads: the composition sees them repeated */
    em_tensor *kf = NULL, *vf = NULL;
    em_status s = repeat_heads(&kf, k, c->H);
    if (s == EM_OK) s = repeat_heads(&vf, vv, c->H);
    const int64_t hkv = c->Hkv;
    c->Hkv = c->H;
    if (s == EM_OK) s = run_compose(out, weights, c, d, q, kf, vf, params);
    c->Hkv = hkv;
    em_release(kf), em_release(vf);
    return s;
  }
  const em_attention_variant *v = c->variant;
  em_tensor *y = NULL, *w = NULL;
  c->q = q, c->k = k, c->v = vv, c->params = params;
  c->need_grad = em_grad_enabled();
  em__attn_count(1);
  em_status s = v->compose ? v->compose(c, &y, c->need_weights ? &w : NULL)
                           : em_attn_compose_decl(c, d, &y, c->need_weights ? &w : NULL);
  if (s == EM_OK && (!y || (c->need_weights && !w)))
    s = em_error(EM_ERR_PLUGIN, "attention '%s': compose returned no %s", v->name, y ? "weights" : "output");
  else if (s != EM_OK)
    s = named_error(v, s);
  if (s != EM_OK) {
    em_release(y), em_release(w);
    return s;
  }
  *out = y;
  if (w && weights) {
    /* Weights are for inspection: detached, as on the forward route. */
    s = em_detach(weights, w);
    em_release(w);
    if (s != EM_OK) {
      em_release(y);
      *out = NULL;
    }
    return s;
  }
  em_release(w);
  return EM_OK;
}

/* Route 0: the declaration on the fused kernel when it covers the call,
** else composed (the variant's compose, or the core's composition of the
** declaration). */
static em_status run_declared(em_tensor **out, em_tensor **weights, em_attn_call *c,
                              em_tensor *q, em_tensor *k, em_tensor *vv, int n_params,
                              em_tensor *const *params) {
  const em_attention_variant *v = c->variant;
  em_attn_decl d;
  em_attn_decl_init(&d);
  c->q = q, c->k = k, c->v = vv, c->params = params;
  em_status s = v->declare(c->options, &c->dims, &d);
  if (s == EM_OK) s = em__attn_decl_check(c, &d);
  if (s != EM_OK) return named_error(v, s);
  /* a traced variant's composition is its Lua functions run densely
  ** (lua/ember/variant.lua): the binding sends it here for the kernel only */
  if (c->mods && (c->need_weights || d.route == EM_ATTN_ROUTE_COMPOSED))
    return em_error(EM_ERR_UNSUPPORTED, "attention '%s': a traced variant runs composed from Lua, not here",
                    v->name);
  if (d.route == EM_ATTN_ROUTE_FUSED && c->need_weights)
    return em_error(EM_ERR_UNSUPPORTED,
                    "attention '%s': kernel = \"fused\" cannot return the weights (need_weights): the "
                    "fused kernel never forms the [B, H, Lq, Lk] probabilities; use kernel = \"auto\"",
                    v->name);
  /* the weights are an L x L tensor anyway: they come from core ops */
  if (d.route == EM_ATTN_ROUTE_COMPOSED || c->need_weights)
    return run_compose(out, weights, c, &d, q, k, vv, params);
  const attn_route route = {fused_forward, em__sdpa_backward, em__sdpa_free, &d, true};
  s = run_forward(out, weights, c, &route, q, k, vv, n_params, params);
  if (s == EM_OK) {
    em__attn_count(0);
    return EM_OK;
  }
  if (s != EM_ERR_UNSUPPORTED) return s;
  if (d.route == EM_ATTN_ROUTE_FUSED || c->mods)
    return em_error(s, "attention '%s': the fused kernel does not cover this call: %s", v->name,
                    em_error_message());
  return run_compose(out, weights, c, &d, q, k, vv, params);
}

static em_status attention_run(em_tensor **out, em_tensor **weights, const em_attention_variant *v,
                               const em_attn_options *o, int n_params, em_tensor *const *params,
                               em_tensor *q, em_tensor *k, em_tensor *vv, const em_attn_args *a) {
  *out = NULL;
  if (weights) *weights = NULL;
  if (!v || !o || o->variant != v)
    return em_error(EM_ERR_ARG, "attention: options do not belong to variant '%s'", v ? v->name : "?");
  if (n_params < 0 || n_params > EM_ATTN_MAX_PARAMS)
    return em_error(EM_ERR_ARG, "attention '%s': %d params (max %d)", v->name, n_params, EM_ATTN_MAX_PARAMS);
  em_attn_args none = {0};
  if (!a) a = &none;
  em_attn_call c;
  memset(&c, 0, sizeof c);
  c.variant = v;
  EM_TRY(check_inputs(&c, v, q, k, vv, n_params, params, a));
  if (c.dims.dk == 0 || c.dims.dv == 0 || c.H == 0)
    return em_error(EM_ERR_SHAPE, "attention '%s': empty head dims (H=%lld dk=%lld dv=%lld)", v->name,
                    (long long)c.H, (long long)c.dims.dk, (long long)c.dims.dv);
  if (v->check) EM_TRY(v->check(o, &c.dims));
  if (c.B == 0 || c.Lq == 0 || c.Lk == 0) {
    /* an empty batch, no queries, or no keys: softmax over nothing weighs
    ** nothing, so the output is zeros (an empty tensor for B = 0 or Lq =
    ** 0), as PyTorch's attention gives; no kernel sees an empty buffer.
    ** Under autograd it is (q k^T) v, an empty sum (never 0 * inf), so that
    ** the output is in the graph as the inputs are and their gradients are
    ** zeros (a bare zeros tensor would stop a backward there) */
    const int64_t shape[4] = {c.B, c.H, c.Lq, c.dims.dv}, wshape[4] = {c.B, c.H, c.Lq, c.Lk};
    if (em_grad_enabled() && (q->requires_grad || k->requires_grad || vv->requires_grad)) {
      em_tensor *kr = NULL, *vr = NULL, *kt = NULL, *qk = NULL;
      em_status s = repeat_heads(&kr, k, c.H);
      if (s == EM_OK) s = repeat_heads(&vr, vv, c.H);
      if (s == EM_OK) s = em_transpose(&kt, kr, -2, -1);
      if (s == EM_OK) s = em_matmul(&qk, q, kt);
      if (s == EM_OK) s = em_matmul(out, qk, vr);
      em_release(kr), em_release(vr), em_release(kt), em_release(qk);
      EM_TRY(s);
    } else {
      EM_TRY(em_zeros(out, 4, shape, q->dtype, q->device));
    }
    if (a->need_weights && weights) {
      em_status s = em_zeros(weights, 4, wshape, q->dtype, q->device);
      if (s) {
        em_release(*out);
        *out = NULL;
        return s;
      }
    }
    return EM_OK;
  }
  c.causal = a->causal;
  c.scale = a->scale > 0 ? a->scale : 1.0 / sqrt((double)c.dims.dk);
  c.training = a->training;
  c.dropout_p = a->training ? a->dropout_p : 0;
  c.need_weights = a->need_weights && weights != NULL;
  c.options = o;
  c.n_params = n_params;
  c.mods = a->mods;
  if (c.dropout_p > 0) {
    c.seed = em_initial_seed();
    c.offset = em_rng_advance((uint64_t)(c.B * c.H * c.Lq * c.Lk));
  }

  /* Masks are constants: reshape them with grad mode off. */
  bool prev = em_set_grad_enabled(false);
  em_tensor *kp = NULL, *mask = NULL, *kpd = NULL, *md = NULL;
  em_status s = EM_OK;
  if (a->key_padding && (s = em_detach(&kpd, a->key_padding)) == EM_OK) s = em_contiguous(&kp, kpd);
  if (s == EM_OK && a->mask && (s = em_detach(&md, a->mask)) == EM_OK) s = expand_mask(&mask, md, &c);
  em_release(kpd), em_release(md);
  em_set_grad_enabled(prev);
  c.key_padding = kp;
  c.mask = mask;

  if (s == EM_OK && v->declare) {
    s = run_declared(out, weights, &c, q, k, vv, n_params, params);
  } else if (s == EM_OK && c.Hkv != c.H) { /* a variant's own kernels get H heads */
    em_tensor *kf = NULL, *vf = NULL;
    s = repeat_heads(&kf, k, c.H);
    if (s == EM_OK) s = repeat_heads(&vf, vv, c.H);
    em_release(kp), em_release(mask);
    if (s == EM_OK) s = attention_run(out, weights, v, o, n_params, params, q, kf, vf, a);
    em_release(kf), em_release(vf);
    return s;
  } else if (s == EM_OK) {
    c.q = q, c.k = k, c.v = vv, c.params = params; /* can_forward looks at them */
    bool fwd = v->forward && (!v->can_forward || v->can_forward(&c));
    const attn_route route = {variant_forward, v->backward, v->free_saved, NULL, false};
    if (fwd) {
      em__attn_count(2);
      s = run_forward(out, weights, &c, &route, q, k, vv, n_params, params);
    } else if (v->compose)
      s = run_compose(out, weights, &c, NULL, q, k, vv, params);
    else {
      char dev[32];
      s = em_error(EM_ERR_UNSUPPORTED, "attention '%s': cannot run on %s tensors (no composed fallback)",
                   v->name, em_device_str(q->device, dev, sizeof dev));
    }
  }
  em_release(kp), em_release(mask);
  return s;
}

/* Under autocast (autocast.c) a variant that declares runs in the low
** dtype: q, k, v and its tables are cast from float32, so the fused kernel
** (or the composition) computes in bfloat16, as PyTorch's CPU autocast
** runs scaled_dot_product_attention. A variant with its own kernels gets
** float32 (EM_AC_ATTENTION_OWN). The casts are differentiable: float32
** tables get float32 gradients. */
em_status em_attention(em_tensor **out, em_tensor **weights, const em_attention_variant *v,
                       const em_attn_options *o, int n_params, em_tensor *const *params,
                       em_tensor *q, em_tensor *k, em_tensor *vv, const em_attn_args *a) {
  if (!em_autocast_enabled(NULL) || !v || !q || !k || !vv || n_params < 0 ||
      n_params > EM_ATTN_MAX_PARAMS)
    return attention_run(out, weights, v, o, n_params, params, q, k, vv, a);
  *out = NULL;
  if (weights) *weights = NULL;
  em_tensor *in[3 + EM_ATTN_MAX_PARAMS], *cast[3 + EM_ATTN_MAX_PARAMS];
  in[0] = q, in[1] = k, in[2] = vv;
  for (int i = 0; i < n_params; i++) in[3 + i] = params[i];
  EM_TRY(em__autocast_op(v->declare ? EM_AC_ATTENTION : EM_AC_ATTENTION_OWN, 3 + n_params, in, cast));
  em_status s = attention_run(out, weights, v, o, n_params, cast + 3, cast[0], cast[1], cast[2], a);
  for (int i = 0; i < 3 + n_params; i++) em_release(cast[i]);
  return s;
}
