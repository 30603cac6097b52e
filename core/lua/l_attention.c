/*
** l_attention.c -- attention as Lua userdata:
**
**   ember.MultiHeadAttention{d_model=, heads=, attention="standard", ...}
**     a C object owning W_q, W_k, W_v, W_o (+ biases) and an attention
**     variant with its options and parameters; the same method names as a
**     Lua nn module so containers hold it like any other.
**
** Also here: what both attention objects share (l_attention.h: a variant
** instance, option readers, parameter walks, class registration). The bare
** variant, ember.Attention, and ember.attention_variants() are in
** l_attention_fn.c.
**
** Binding rule (lember.h): Lua arguments are all read before any core
** reference is taken; core references live in the userdata (which __gc
** frees) or in a small per-call list released before raising.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l_attention.h"

/* ---------------------------------------------------------------- */
/* A variant instance: variant + checked options + its parameters     */
/* ---------------------------------------------------------------- */


void lattn_core_free(attn_core *c) {
  em_attn_options_free(c->opts);
  for (int i = 0; i < c->n_params; i++) em_release(c->params[i].tensor);
  memset(c, 0, sizeof *c);
}


static int is_own(const char *k, const char *const *own) {
  for (int i = 0; own && own[i]; i++)
    if (strcmp(k, own[i]) == 0) return 1;
  return 0;
}

/* Collects the keys of the table at idx that are not in `own` (only Lua
** work: may raise). The strings stay valid while the table is alive. */
void lattn_collect_options(lua_State *L, int idx, const char *op, const char *const *own,
                            opt_list *o) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "ember.%s: options must have string keys, got a %s key", op, luaL_typename(L, -2));
    const char *k = lua_tostring(L, -2);
    if (!is_own(k, own)) {
      if (o->n > EM_ATTN_MAX_OPTIONS) luaL_error(L, "ember.%s: too many options", op);
      em_attn_value *v = &o->values[o->n];
      memset(v, 0, sizeof *v);
      switch (lua_type(L, -1)) {
      case LUA_TNUMBER:
        v->type = lua_isinteger(L, -1) ? EM_ATTN_OPT_INT : EM_ATTN_OPT_FLOAT;
        v->num = lua_tonumber(L, -1);
        break;
      case LUA_TBOOLEAN:
        v->type = EM_ATTN_OPT_BOOL;
        v->num = lua_toboolean(L, -1);
        break;
      case LUA_TSTRING:
        v->type = EM_ATTN_OPT_STRING;
        v->str = lua_tostring(L, -1); /* the table keeps it alive */
        break;
      default:
        luaL_error(L, "ember.%s: option '%s' must be a number, boolean or string, got %s", op, k,
                   luaL_typename(L, -1));
      }
      o->names[o->n++] = k;
    }
    lua_pop(L, 1);
  }
}

/* Builds a variant instance. On failure sets the core error and returns
** the status, with *c untouched. */
em_status lattn_core_make(attn_core *c, const char *variant, const opt_list *o,
                           const em_attn_dims *dims, em_dtype dt, em_device dev) {
  attn_core n;
  memset(&n, 0, sizeof n);
  em_status s = em_attention_find(variant, &n.variant);
  if (s == EM_OK) s = em_attn_options_new(&n.opts, n.variant, o->n, o->names, o->values, dims);
  if (s == EM_OK) s = em_attn_init_params(n.variant, n.opts, dims, dt, dev, &n.n_params, n.params);
  for (int i = 0; s == EM_OK && i < n.n_params; i++)
    if (n.params[i].learned) s = em_set_requires_grad(n.params[i].tensor, true);
  if (s != EM_OK) {
    lattn_core_free(&n);
    return s;
  }
  lattn_core_free(c);
  *c = n;
  return EM_OK;
}

void lattn_push_caps(lua_State *L, uint32_t caps) {
  lua_createtable(L, 0, 6);
  static const struct { uint32_t bit; const char *name; } names[] = {
    {EM_ATTN_CAP_MASK, "mask"},       {EM_ATTN_CAP_KEY_PADDING, "key_padding"},
    {EM_ATTN_CAP_CAUSAL, "causal"},   {EM_ATTN_CAP_DROPOUT, "dropout"},
    {EM_ATTN_CAP_WEIGHTS, "weights"}, {EM_ATTN_CAP_CROSS, "cross"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    lua_pushboolean(L, (caps & names[i].bit) != 0);
    lua_setfield(L, -2, names[i].name);
  }
}

/* The checked option values as a Lua table. */
void lattn_push_option_values(lua_State *L, const em_attn_options *o) {
  lua_createtable(L, 0, o->n);
  for (int i = 0; i < o->n; i++) {
    const em_attn_value *v = &o->values[i];
    switch (v->type) {
    case EM_ATTN_OPT_INT: lua_pushinteger(L, (lua_Integer)v->num); break;
    case EM_ATTN_OPT_FLOAT: lua_pushnumber(L, v->num); break;
    case EM_ATTN_OPT_BOOL: lua_pushboolean(L, v->num != 0); break;
    default: lua_pushstring(L, v->str); break;
    }
    lua_setfield(L, -2, o->variant->options[i].name);
  }
}

/* ---------------------------------------------------------------- */
/* Per-call list of temporaries                                       */
/* ---------------------------------------------------------------- */

typedef struct tmps {
  int n;
  em_tensor *t[48];
} tmps;

static em_tensor *keep(tmps *k, em_tensor *t) {
  if (t) k->t[k->n++] = t;
  return t;
}
static void drop_all(tmps *k) {
  for (int i = 0; i < k->n; i++) em_release(k->t[i]);
  k->n = 0;
}

/* y = x W^T + b */
static em_status linear(tmps *k, em_tensor **y, em_tensor *x, em_tensor *w, em_tensor *b) {
  em_tensor *wt = NULL, *xw = NULL;
  em_status s = em_transpose(&wt, w, 0, 1);
  keep(k, wt);
  if (s == EM_OK) s = em_matmul(&xw, x, wt);
  keep(k, xw);
  if (s != EM_OK || !b) {
    *y = xw;
    return s;
  }
  s = em_add(y, xw, b);
  keep(k, *y);
  return s;
}

/* [B,L,H*dh] -> [B,H,L,dh] */
static em_status split_heads(tmps *k, em_tensor **out, em_tensor *x, int64_t H) {
  int64_t sh[4] = {x->shape[0], x->shape[1], H, x->shape[2] / H};
  em_tensor *r = NULL;
  em_status s = em_reshape(&r, x, 4, sh);
  keep(k, r);
  if (s == EM_OK) s = em_transpose(out, r, 1, 2);
  keep(k, *out);
  return s;
}

/* Rotary position embedding (rotate-half form, as GPT-NeoX / LLaMA) on
** x [B,H,L,dh], positions first_pos.. ; dh is even. */
static em_status rope(tmps *k, em_tensor **out, em_tensor *x, int64_t first_pos, double base) {
  int64_t L = x->shape[2], dh = x->shape[3], half = dh / 2;
  double *cs = malloc((size_t)(2 * L * half) * sizeof *cs);
  if (!cs) return em_error(EM_ERR_OOM, "MultiHeadAttention: out of memory for RoPE tables");
  double *sn = cs + L * half;
  for (int64_t p = 0; p < L; p++)
    for (int64_t m = 0; m < half; m++) {
      double ang = (double)(first_pos + p) * pow(base, -2.0 * (double)m / (double)dh);
      cs[p * half + m] = cos(ang);
      sn[p * half + m] = sin(ang);
    }
  int64_t shape[2] = {L, half};
  em_tensor *c64 = NULL, *s64 = NULL, *c = NULL, *sn_t = NULL;
  em_status s = em_from_host(&c64, 2, shape, EM_F64, cs, x->device);
  keep(k, c64);
  if (s == EM_OK) s = em_from_host(&s64, 2, shape, EM_F64, sn, x->device);
  keep(k, s64);
  free(cs);
  if (s == EM_OK) s = em_to_dtype(&c, c64, x->dtype);
  keep(k, c);
  if (s == EM_OK) s = em_to_dtype(&sn_t, s64, x->dtype);
  keep(k, sn_t);
  em_tensor *x1 = NULL, *x2 = NULL, *a = NULL, *b = NULL, *r1 = NULL, *c2 = NULL, *d = NULL, *r2 = NULL;
  if (s == EM_OK) s = em_narrow(&x1, x, 3, 0, half);
  keep(k, x1);
  if (s == EM_OK) s = em_narrow(&x2, x, 3, half, half);
  keep(k, x2);
  if (s == EM_OK) s = em_mul(&a, x1, c);
  keep(k, a);
  if (s == EM_OK) s = em_mul(&b, x2, sn_t);
  keep(k, b);
  if (s == EM_OK) s = em_sub(&r1, a, b);
  keep(k, r1);
  if (s == EM_OK) s = em_mul(&c2, x2, c);
  keep(k, c2);
  if (s == EM_OK) s = em_mul(&d, x1, sn_t);
  keep(k, d);
  if (s == EM_OK) s = em_add(&r2, c2, d);
  keep(k, r2);
  em_tensor *parts[2] = {r1, r2};
  if (s == EM_OK) s = em_cat(out, 2, parts, 3);
  keep(k, *out);
  return s;
}

/* ---------------------------------------------------------------- */
/* MultiHeadAttention                                                 */
/* ---------------------------------------------------------------- */

enum { W_Q, W_K, W_V, W_O, B_Q, B_K, B_V, B_O, N_PROJ };
static const char *const proj_names[N_PROJ] = {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"};

typedef struct mha {
  int64_t d_model, heads, kdim, vdim;
  int bias, rope, causal, training;
  double dropout, rope_base;
  em_dtype dtype;
  em_device device;
  em_tensor *w[N_PROJ]; /* biases NULL when bias=false */
  attn_core core;
} mha;

static const char *const mha_own[] = {"d_model", "heads", "attention", "kdim", "vdim", "dropout",
                                      "bias", "rope", "rope_base", "causal", "dtype", "device", NULL};

static mha *check_mha(lua_State *L, int idx) { return luaL_checkudata(L, idx, MHA_MT); }

static int mha_gc(lua_State *L) {
  mha *m = check_mha(L, 1);
  for (int i = 0; i < N_PROJ; i++) em_release(m->w[i]), m->w[i] = NULL;
  lattn_core_free(&m->core);
  return 0;
}

/* Field readers for the constructor table (Lua only; may raise). */
int64_t lattn_opt_int(lua_State *L, int t, const char *key, int64_t def, const char *op) {
  int64_t v = def;
  if (lua_getfield(L, t, key) != LUA_TNIL) v = lember_checkint(L, -1, op, key);
  lua_pop(L, 1);
  return v;
}
int lattn_opt_bool(lua_State *L, int t, const char *key, int def, const char *op) {
  int v = def, ty = lua_getfield(L, t, key);
  if (ty != LUA_TNIL) {
    if (ty != LUA_TBOOLEAN) luaL_error(L, "ember.%s: %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}
double lattn_opt_num(lua_State *L, int t, const char *key, double def, const char *op) {
  double v = def;
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "ember.%s: %s must be a number, got %s", op, key, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static em_status init_proj(mha *m) {
  /* As torch.nn.MultiheadAttention: xavier-uniform input projections,
  ** kaiming-style uniform output projection, zero biases. */
  int64_t E = m->d_model, ins[3] = {m->d_model, m->kdim, m->vdim};
  for (int i = 0; i < 3; i++) {
    int64_t sh[2] = {E, ins[i]};
    double bound = sqrt(6.0 / (double)(E + ins[i]));
    TRY(em_uniform(&m->w[W_Q + i], 2, sh, -bound, bound, m->dtype, m->device));
  }
  int64_t sh[2] = {E, E};
  double bound = 1.0 / sqrt((double)E);
  TRY(em_uniform(&m->w[W_O], 2, sh, -bound, bound, m->dtype, m->device));
  if (m->bias)
    for (int i = B_Q; i <= B_O; i++) TRY(em_zeros(&m->w[i], 1, &E, m->dtype, m->device));
  for (int i = 0; i < N_PROJ; i++)
    if (m->w[i]) TRY(em_set_requires_grad(m->w[i], true));
  return EM_OK;
}

static em_attn_dims mha_dims(const mha *m) {
  em_attn_dims d = {m->heads, m->d_model / m->heads, m->d_model / m->heads};
  return d;
}

static int mha_new(lua_State *L) {
  const char *op = "MultiHeadAttention";
  luaL_checktype(L, 1, LUA_TTABLE);
  int64_t d_model = lattn_opt_int(L, 1, "d_model", 0, op), heads = lattn_opt_int(L, 1, "heads", 0, op);
  if (d_model <= 0 || heads <= 0)
    return luaL_error(L, "ember.%s: d_model and heads must be positive integers, got d_model=%I heads=%I",
                      op, (lua_Integer)d_model, (lua_Integer)heads);
  if (d_model % heads != 0)
    return luaL_error(L, "ember.%s: d_model (%I) must be divisible by heads (%I): each head gets d_model/heads dims",
                      op, (lua_Integer)d_model, (lua_Integer)heads);
  int64_t kdim = lattn_opt_int(L, 1, "kdim", d_model, op), vdim = lattn_opt_int(L, 1, "vdim", d_model, op);
  if (kdim <= 0 || vdim <= 0) return luaL_error(L, "ember.%s: kdim and vdim must be positive", op);
  double dropout = lattn_opt_num(L, 1, "dropout", 0, op);
  if (!(dropout >= 0 && dropout < 1)) return luaL_error(L, "ember.%s: dropout must be in [0, 1), got %f", op, dropout);
  int bias = lattn_opt_bool(L, 1, "bias", 1, op), use_rope = lattn_opt_bool(L, 1, "rope", 0, op);
  int causal = lattn_opt_bool(L, 1, "causal", 0, op);
  double rope_base = lattn_opt_num(L, 1, "rope_base", 10000, op);
  if (use_rope && (d_model / heads) % 2 != 0)
    return luaL_error(L, "ember.%s: rope needs an even head dim, got d_model/heads = %I", op,
                      (lua_Integer)(d_model / heads));
  em_dtype dt = EM_F32;
  if (lua_getfield(L, 1, "dtype") != LUA_TNIL) dt = lember_checkdtype(L, -1, op);
  lua_pop(L, 1);
  if (dt != EM_F32 && dt != EM_F64)
    return luaL_error(L, "ember.%s: dtype must be float32 or float64, got %s", op, em_dtype_name(dt));
  em_device dev = lember_cpu(L);
  if (lua_getfield(L, 1, "device") != LUA_TNIL) dev = lember_checkdevice(L, -1, op);
  lua_pop(L, 1);
  const char *variant = "standard";
  if (lua_getfield(L, 1, "attention") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "ember.%s: attention must be a variant name (string)", op);
    variant = lua_tostring(L, -1);
  }
  lua_pop(L, 1); /* the table still holds the string */
  opt_list o;
  o.n = 0;
  lattn_collect_options(L, 1, op, mha_own, &o);

  mha *m = lua_newuserdatauv(L, sizeof *m, 0);
  memset(m, 0, sizeof *m);
  luaL_setmetatable(L, MHA_MT);
  m->d_model = d_model, m->heads = heads, m->kdim = kdim, m->vdim = vdim;
  m->bias = bias, m->rope = use_rope, m->causal = causal, m->training = 1;
  m->dropout = dropout, m->rope_base = rope_base, m->dtype = dt, m->device = dev;
  em_attn_dims dims = mha_dims(m);
  em_status s = lattn_core_make(&m->core, variant, &o, &dims, dt, dev);
  if (s != EM_OK) {
    if (s == EM_ERR_ARG && strstr(em_error_message(), "unknown option")) {
      /* An unknown key may also be a misspelt module option: say both. */
      char msg[2048];
      snprintf(msg, sizeof msg, "%s; MultiHeadAttention's own options: d_model, heads, attention, kdim, vdim, dropout, bias, rope, rope_base, causal, dtype, device",
               em_error_message());
      em_error(s, "%s", msg);
    }
    return lember_error(L, op, s);
  }
  s = init_proj(m);
  if (s != EM_OK) return lember_error(L, op, s); /* __gc frees what was made */
  return 1;
}

/* forward(query [, key_value | key, value] [, opts]) */
static const char *const fwd_opts[] = {"key_padding_mask", "attn_mask", "causal", "need_weights", NULL};

static int mha_forward(lua_State *L) {
  const char *op = "MultiHeadAttention.forward";
  mha *m = check_mha(L, 1);
  em_tensor *query = lember_checktensor(L, 2), *key = NULL, *value = NULL;
  int top = lua_gettop(L), opts = 0, ntens = 0;
  for (int i = 3; i <= top; i++) {
    if (lua_istable(L, i) && !lember_istensor(L, i)) {
      if (i != top) return luaL_error(L, "ember.%s: the options table must be the last argument", op);
      opts = i;
    } else if (lember_istensor(L, i)) {
      em_tensor *t = lember_checktensor(L, i);
      if (i == 3) key = t;
      else if (i == 4) value = t;
      else return luaL_error(L, "ember.%s: expected (query [, key_value | key, value] [, options])", op);
      ntens++;
    } else if (!lua_isnil(L, i)) {
      return luaL_error(L, "ember.%s: argument %d must be a tensor, nil or an options table, got %s", op, i, luaL_typename(L, i));
    }
  }
  if (!key) key = query;
  if (!value) value = key;
  em_tensor *kpm = NULL, *amask = NULL;
  int causal = m->causal, need_weights = 0;
  if (opts) {
    lember_checkoptions(L, opts, op, fwd_opts);
    if (lua_getfield(L, opts, "key_padding_mask") != LUA_TNIL) kpm = lember_checktensor(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "attn_mask") != LUA_TNIL) amask = lember_checktensor(L, -1);
    lua_pop(L, 1);
    causal = lattn_opt_bool(L, opts, "causal", causal, op);
    need_weights = lattn_opt_bool(L, opts, "need_weights", 0, op);
  }
  /* Shapes, with messages that speak the module's terms. */
  char a[160], b[160];
  if (query->ndim != 3 || query->shape[2] != m->d_model)
    return luaL_error(L, "ember.%s: query must be [B, Lq, d_model=%I], got %s", op, (lua_Integer)m->d_model,
                      em_shape_str(query->ndim, query->shape, a, sizeof a));
  if (key->ndim != 3 || key->shape[2] != m->kdim || key->shape[0] != query->shape[0])
    return luaL_error(L, "ember.%s: key must be [B=%I, Lk, kdim=%I], got %s%s", op, (lua_Integer)query->shape[0],
                      (lua_Integer)m->kdim, em_shape_str(key->ndim, key->shape, a, sizeof a),
                      key == query ? " (self-attention uses the query as key: kdim must equal d_model)" : "");
  if (value->ndim != 3 || value->shape[2] != m->vdim || value->shape[0] != key->shape[0] ||
      value->shape[1] != key->shape[1])
    return luaL_error(L, "ember.%s: value must be [B, Lk=%I, vdim=%I], got %s (key %s)", op,
                      (lua_Integer)key->shape[1], (lua_Integer)m->vdim,
                      em_shape_str(value->ndim, value->shape, a, sizeof a),
                      em_shape_str(key->ndim, key->shape, b, sizeof b));
  if (query->dtype != m->dtype || key->dtype != m->dtype || value->dtype != m->dtype)
    return luaL_error(L, "ember.%s: inputs must be %s like the module (use :to(dtype)), got query %s, key %s, value %s",
                      op, em_dtype_name(m->dtype), em_dtype_name(query->dtype), em_dtype_name(key->dtype),
                      em_dtype_name(value->dtype));

  /* Core work from here: every reference goes into k. */
  tmps k = {0};
  em_tensor *qp, *kp, *vp, *qh = NULL, *kh = NULL, *vh = NULL, *o = NULL, *w = NULL;
  em_status s = linear(&k, &qp, query, m->w[W_Q], m->w[B_Q]);
  if (s == EM_OK) s = linear(&k, &kp, key, m->w[W_K], m->w[B_K]);
  if (s == EM_OK) s = linear(&k, &vp, value, m->w[W_V], m->w[B_V]);
  if (s == EM_OK) s = split_heads(&k, &qh, qp, m->heads);
  if (s == EM_OK) s = split_heads(&k, &kh, kp, m->heads);
  if (s == EM_OK) s = split_heads(&k, &vh, vp, m->heads);
  if (s == EM_OK && m->rope) {
    int64_t Lq = query->shape[1], Lk = key->shape[1];
    s = rope(&k, &qh, qh, Lk - Lq, m->rope_base); /* bottom-right, as causal */
    if (s == EM_OK) s = rope(&k, &kh, kh, 0, m->rope_base);
  }
  em_tensor *params[EM_ATTN_MAX_PARAMS];
  for (int i = 0; i < m->core.n_params; i++) params[i] = m->core.params[i].tensor;
  em_attn_args args = {kpm, amask, causal != 0, 0, m->dropout, m->training != 0, need_weights != 0};
  if (s == EM_OK)
    s = em_attention(&o, need_weights ? &w : NULL, m->core.variant, m->core.opts, m->core.n_params,
                     params, qh, kh, vh, &args);
  keep(&k, o);
  em_tensor *ot = NULL, *merged = NULL, *out = NULL;
  if (s == EM_OK) s = em_transpose(&ot, o, 1, 2);
  keep(&k, ot);
  int64_t msh[3] = {query->shape[0], query->shape[1], m->d_model};
  if (s == EM_OK) s = em_reshape(&merged, ot, 3, msh);
  keep(&k, merged);
  if (s == EM_OK) s = linear(&k, &out, merged, m->w[W_O], m->w[B_O]);
  if (s != EM_OK) {
    drop_all(&k);
    em_release(w);
    return lember_error(L, op, s);
  }
  em_retain(out);
  drop_all(&k);
  lember_pushtensor(L, out);
  if (!need_weights) return 1;
  lember_pushtensor(L, w);
  return 2;
}

static int mha_call(lua_State *L) { return mha_forward(L); }

/* Pushes a new userdata for a parameter tensor (shared, not copied). */
static void push_shared(lua_State *L, em_tensor *t) { lember_pushtensor(L, em_retain(t)); }


void lattn_each_core(lua_State *L, attn_core *c, each_fn fn) {
  for (int i = 0; i < c->n_params; i++)
    fn(L, c->variant->name, c->params[i].name, c->params[i].tensor, c->params[i].learned);
}

static void each_mha(lua_State *L, mha *m, each_fn fn) {
  for (int i = 0; i < N_PROJ; i++)
    if (m->w[i]) fn(L, NULL, proj_names[i], m->w[i], 1);
  lattn_each_core(L, &m->core, fn);
}

void lattn_full_name(char *buf, size_t n, const char *prefix, const char *name) {
  if (prefix) snprintf(buf, n, "%s.%s", prefix, name);
  else snprintf(buf, n, "%s", name);
}

/* Callbacks: the result table is at -1. */
void lattn_cb_list(lua_State *L, const char *p, const char *n, em_tensor *t, int learned) {
  (void)p, (void)n;
  if (!learned) return;
  push_shared(L, t);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}
void lattn_cb_named(lua_State *L, const char *p, const char *n, em_tensor *t, int learned) {
  char name[160];
  if (!learned) return;
  lattn_full_name(name, sizeof name, p, n);
  push_shared(L, t);
  lua_setfield(L, -2, name);
}
void lattn_cb_state(lua_State *L, const char *p, const char *n, em_tensor *t, int learned) {
  char name[160];
  em_tensor *d = NULL;
  (void)learned;
  lattn_full_name(name, sizeof name, p, n);
  if (em_detach(&d, t) != EM_OK) return; /* a header only: cannot fail but OOM */
  lember_pushtensor(L, d);
  lua_setfield(L, -2, name);
}
void lattn_cb_zero_grad(lua_State *L, const char *p, const char *n, em_tensor *t, int learned) {
  (void)L, (void)p, (void)n, (void)learned;
  em_release(t->grad);
  t->grad = NULL;
}

static int mha_parameters(lua_State *L) {
  mha *m = check_mha(L, 1);
  lua_newtable(L);
  each_mha(L, m, lattn_cb_list);
  return 1;
}
static int mha_named_parameters(lua_State *L) {
  mha *m = check_mha(L, 1);
  lua_newtable(L);
  each_mha(L, m, lattn_cb_named);
  return 1;
}
static int mha_state_dict(lua_State *L) {
  mha *m = check_mha(L, 1);
  lua_newtable(L);
  each_mha(L, m, lattn_cb_state);
  return 1;
}
static int mha_zero_grad(lua_State *L) {
  mha *m = check_mha(L, 1);
  each_mha(L, m, lattn_cb_zero_grad);
  lua_settop(L, 1);
  return 1;
}
static int mha_train(lua_State *L) {
  mha *m = check_mha(L, 1);
  m->training = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
  lua_settop(L, 1);
  return 1;
}
static int mha_eval(lua_State *L) {
  check_mha(L, 1)->training = 0;
  lua_settop(L, 1);
  return 1;
}


static int mha_slots(mha *m, slot *out) {
  int n = 0;
  for (int i = 0; i < N_PROJ; i++)
    if (m->w[i]) {
      snprintf(out[n].name, sizeof out[n].name, "%s", proj_names[i]);
      out[n].t = &m->w[i], out[n++].learned = 1;
    }
  for (int i = 0; i < m->core.n_params; i++) {
    lattn_full_name(out[n].name, sizeof out[n].name, m->core.variant->name, m->core.params[i].name);
    out[n].t = &m->core.params[i].tensor, out[n++].learned = m->core.params[i].learned;
  }
  return n;
}

/* Moves every slot to dtype/device (new leaves), all or nothing. */
static em_status move_slots(slot *sl, int n, int to_dtype, em_dtype dt, em_device dev) {
  em_tensor *fresh[N_PROJ + EM_ATTN_MAX_PARAMS] = {NULL};
  em_status s = EM_OK;
  bool prev = em_set_grad_enabled(false);
  for (int i = 0; i < n && s == EM_OK; i++) {
    em_tensor *d = NULL;
    s = em_detach(&d, *sl[i].t);
    if (s == EM_OK) s = to_dtype ? em_to_dtype(&fresh[i], d, dt) : em_to_device(&fresh[i], d, dev);
    em_release(d);
    if (s == EM_OK && fresh[i] == *sl[i].t) { /* no-op conversions may return the same tensor */
      em_release(fresh[i]);
      fresh[i] = NULL;
      s = em_clone(&fresh[i], *sl[i].t);
    }
    if (s == EM_OK && sl[i].learned) s = em_set_requires_grad(fresh[i], true);
  }
  em_set_grad_enabled(prev);
  if (s != EM_OK) {
    for (int i = 0; i < n; i++) em_release(fresh[i]);
    return s;
  }
  for (int i = 0; i < n; i++) {
    em_release(*sl[i].t);
    *sl[i].t = fresh[i];
  }
  return EM_OK;
}

static int mha_to(lua_State *L) {
  mha *m = check_mha(L, 1);
  const char *what = luaL_checkstring(L, 2);
  em_dtype dt;
  em_device dev = m->device;
  int to_dtype = em_dtype_parse(what, &dt) == EM_OK;
  if (to_dtype && dt != EM_F32 && dt != EM_F64)
    return luaL_error(L, "ember.MultiHeadAttention.to: dtype must be float32 or float64, got %s", what);
  if (!to_dtype) dev = lember_checkdevice(L, 2, "MultiHeadAttention.to");
  slot sl[N_PROJ + EM_ATTN_MAX_PARAMS];
  int n = mha_slots(m, sl);
  em_status s = move_slots(sl, n, to_dtype, dt, dev);
  if (s != EM_OK) return lember_error(L, "MultiHeadAttention.to", s);
  if (to_dtype) m->dtype = dt;
  else m->device = dev;
  lua_settop(L, 1);
  return 1;
}

/* Copies matching tensors of the table at idx into the slots (strict:
** every slot present and no unknown key). */
int lattn_load_slots(lua_State *L, const char *op, slot *sl, int n, int idx, int strict) {
  luaL_checktype(L, idx, LUA_TTABLE);
  em_tensor *src[N_PROJ + EM_ATTN_MAX_PARAMS] = {NULL};
  char have[1024] = "";
  for (int i = 0; i < n; i++) {
    size_t k = strlen(have);
    snprintf(have + k, sizeof have - k, "%s%s", i ? ", " : "", sl[i].name);
  }
  for (int i = 0; i < n; i++) {
    if (lua_getfield(L, idx, sl[i].name) != LUA_TNIL) {
      src[i] = lember_checktensor(L, -1);
      if (src[i]->ndim != (*sl[i].t)->ndim ||
          memcmp(src[i]->shape, (*sl[i].t)->shape, (size_t)src[i]->ndim * sizeof(int64_t))) {
        char a[160], b[160];
        return luaL_error(L, "ember.%s: '%s' has shape %s, the module expects %s", op, sl[i].name,
                          em_shape_str(src[i]->ndim, src[i]->shape, a, sizeof a),
                          em_shape_str((*sl[i].t)->ndim, (*sl[i].t)->shape, b, sizeof b));
      }
    } else if (strict) {
      return luaL_error(L, "ember.%s: missing key '%s' (the module has: %s)", op, sl[i].name, have);
    }
    lua_pop(L, 1); /* the table keeps the tensor alive */
  }
  if (strict) {
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      int found = 0;
      if (lua_type(L, -2) == LUA_TSTRING)
        for (int i = 0; i < n && !found; i++) found = strcmp(lua_tostring(L, -2), sl[i].name) == 0;
      if (!found)
        return luaL_error(L, "ember.%s: unexpected key '%s' (the module has: %s)", op,
                          lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?", have);
      lua_pop(L, 1);
    }
  }
  bool prev = em_set_grad_enabled(false);
  em_status s = EM_OK;
  for (int i = 0; i < n && s == EM_OK; i++)
    if (src[i]) s = em_copy_(*sl[i].t, src[i]);
  em_set_grad_enabled(prev);
  if (s != EM_OK) return lember_error(L, op, s);
  return 0;
}

static int mha_load_state_dict(lua_State *L) {
  mha *m = check_mha(L, 1);
  int strict = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  slot sl[N_PROJ + EM_ATTN_MAX_PARAMS];
  int n = mha_slots(m, sl);
  lattn_load_slots(L, "MultiHeadAttention.load_state_dict", sl, n, 2, strict);
  lua_settop(L, 1);
  return 1;
}

/* set_attention(name [, options]) swaps the variant (fresh parameters). */
static int mha_set_attention(lua_State *L) {
  mha *m = check_mha(L, 1);
  const char *name = luaL_checkstring(L, 2);
  opt_list o;
  o.n = 0;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lattn_collect_options(L, 3, "MultiHeadAttention.set_attention", NULL, &o);
  }
  em_attn_dims dims = mha_dims(m);
  em_status s = lattn_core_make(&m->core, name, &o, &dims, m->dtype, m->device);
  if (s != EM_OK) return lember_error(L, "MultiHeadAttention.set_attention", s);
  lua_settop(L, 1);
  return 1;
}

static int mha_options(lua_State *L) {
  mha *m = check_mha(L, 1);
  lattn_push_option_values(L, m->core.opts);
  return 1;
}

static int mha_tostring(lua_State *L) {
  mha *m = check_mha(L, 1);
  char opts[1024], dev[32];
  lua_pushfstring(L, "MultiHeadAttention(d_model=%I, heads=%I, attention=%s{%s}, kdim=%I, vdim=%I, dropout=%f, bias=%s, rope=%s, causal=%s, dtype=%s, device=%s%s)",
                  (lua_Integer)m->d_model, (lua_Integer)m->heads, m->core.variant->name,
                  em_attn_options_str(m->core.opts, opts, sizeof opts), (lua_Integer)m->kdim,
                  (lua_Integer)m->vdim, m->dropout, m->bias ? "true" : "false",
                  m->rope ? "true" : "false", m->causal ? "true" : "false", em_dtype_name(m->dtype),
                  em_device_str(m->device, dev, sizeof dev), m->training ? "" : ", eval");
  return 1;
}

/* heatmap(weights, path, opts) = ember.attention_heatmap(...) */
static int mha_heatmap(lua_State *L) {
  check_mha(L, 1);
  lua_getfield(L, lua_upvalueindex(1), "attention_heatmap");
  if (lua_isnil(L, -1)) return luaL_error(L, "ember.MultiHeadAttention.heatmap: this build has no heatmap writer");
  lua_rotate(L, 2, 1); /* fn, weights, path, opts */
  lua_call(L, lua_gettop(L) - 2, LUA_MULTRET);
  return lua_gettop(L) - 1;
}

static int mha_index(lua_State *L) {
  mha *m = check_mha(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (lua_getfield(L, lua_upvalueindex(1), k) != LUA_TNIL) return 1;
  char buf[32];
  if (strcmp(k, "d_model") == 0) lua_pushinteger(L, (lua_Integer)m->d_model);
  else if (strcmp(k, "heads") == 0) lua_pushinteger(L, (lua_Integer)m->heads);
  else if (strcmp(k, "head_dim") == 0) lua_pushinteger(L, (lua_Integer)(m->d_model / m->heads));
  else if (strcmp(k, "kdim") == 0) lua_pushinteger(L, (lua_Integer)m->kdim);
  else if (strcmp(k, "vdim") == 0) lua_pushinteger(L, (lua_Integer)m->vdim);
  else if (strcmp(k, "attention") == 0) lua_pushstring(L, m->core.variant->name);
  else if (strcmp(k, "training") == 0) lua_pushboolean(L, m->training);
  else if (strcmp(k, "dropout") == 0) lua_pushnumber(L, m->dropout);
  else if (strcmp(k, "causal") == 0) lua_pushboolean(L, m->causal);
  else if (strcmp(k, "rope") == 0) lua_pushboolean(L, m->rope);
  else if (strcmp(k, "rope_base") == 0) lua_pushnumber(L, m->rope_base);
  else if (strcmp(k, "bias") == 0) lua_pushboolean(L, m->bias);
  else if (strcmp(k, "dtype") == 0) lua_pushstring(L, em_dtype_name(m->dtype));
  else if (strcmp(k, "device") == 0) lua_pushstring(L, em_device_str(m->device, buf, sizeof buf));
  else lua_pushnil(L);
  return 1;
}

static const luaL_Reg mha_methods[] = {
  {"forward", mha_forward},
  {"parameters", mha_parameters},
  {"named_parameters", mha_named_parameters},
  {"state_dict", mha_state_dict},
  {"load_state_dict", mha_load_state_dict},
  {"zero_grad", mha_zero_grad},
  {"train", mha_train},
  {"eval", mha_eval},
  {"to", mha_to},
  {"set_attention", mha_set_attention},
  {"options", mha_options},
  {"heatmap", mha_heatmap},
  {NULL, NULL}
};

/* ---------------------------------------------------------------- */
/* Registration                                                       */
/* ---------------------------------------------------------------- */

void lember_open_heatmap(lua_State *L, int module) __attribute__((weak));

void lattn_new_class(lua_State *L, int module, const char *mt, const luaL_Reg *methods,
                      lua_CFunction gc, lua_CFunction index, lua_CFunction call, lua_CFunction tostr) {
  luaL_newmetatable(L, mt);
  int mti = lua_gettop(L);
  lua_newtable(L);
  lua_pushvalue(L, module);
  luaL_setfuncs(L, methods, 1); /* upvalue: the module table (heatmap looks there) */
  lua_pushvalue(L, -1);
  lua_setfield(L, mti, "__methods");
  lua_pushcclosure(L, index, 1);
  lua_setfield(L, mti, "__index");
  lua_pushcfunction(L, gc), lua_setfield(L, mti, "__gc");
  lua_pushcfunction(L, call), lua_setfield(L, mti, "__call");
  lua_pushcfunction(L, tostr), lua_setfield(L, mti, "__tostring");
  lua_pop(L, 1);
}

void lember_open_attention(lua_State *L, int module) {
  module = lua_absindex(L, module);
  lattn_new_class(L, module, MHA_MT, mha_methods, mha_gc, mha_index, mha_call, mha_tostring);
  lua_pushcfunction(L, mha_new), lua_setfield(L, module, "MultiHeadAttention");
  lattn_open_functional(L, module);
  if (lember_open_heatmap) lember_open_heatmap(L, module);
}
