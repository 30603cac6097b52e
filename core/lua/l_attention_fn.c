/*
** l_attention_fn.c -- the bare attention variant as Lua userdata:
**
**   ember.Attention{attention=, heads=, head_dim=, ...}
**     the variant on [B,H,L,d] tensors (what the conformance checker and
**     researchers poking at a variant use).
**   ember.attention_variants() -> descriptions of the loaded variants.
**
** MultiHeadAttention and the helpers both share are in l_attention.c.
** Binding rule (lember.h): Lua arguments are all read before any core
** reference is taken; core references live in the userdata (which __gc
** frees) or in a small per-call list released before raising.
*/
#include <stdlib.h>
#include <string.h>

#include "l_attention.h"

/* ---------------------------------------------------------------- */
/* ember.Attention: a bare variant on [B,H,L,d]                        */
/* ---------------------------------------------------------------- */

typedef struct attn_obj {
  int training;
  em_dtype dtype;
  em_device device;
  em_attn_dims dims;
  attn_core core;
} attn_obj;

static const char *const attn_own[] = {"attention", "heads", "head_dim", "v_head_dim", "dtype", "device", NULL};

static attn_obj *check_attn(lua_State *L, int idx) { return luaL_checkudata(L, idx, ATTN_MT); }

static int attn_gc(lua_State *L) {
  lattn_core_free(&check_attn(L, 1)->core);
  return 0;
}

static int attn_new(lua_State *L) {
  const char *op = "Attention";
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *variant = "standard";
  if (lua_getfield(L, 1, "attention") != LUA_TNIL) variant = luaL_checkstring(L, -1);
  lua_pop(L, 1);
  int64_t heads = lattn_opt_int(L, 1, "heads", 1, op), dk = lattn_opt_int(L, 1, "head_dim", 0, op);
  int64_t dv = lattn_opt_int(L, 1, "v_head_dim", dk, op);
  if (heads <= 0 || dk <= 0 || dv <= 0)
    return luaL_error(L, "ember.%s: heads and head_dim must be positive (got heads=%I head_dim=%I v_head_dim=%I)",
                      op, (lua_Integer)heads, (lua_Integer)dk, (lua_Integer)dv);
  em_dtype dt = EM_F32;
  if (lua_getfield(L, 1, "dtype") != LUA_TNIL) dt = lember_checkdtype(L, -1, op);
  lua_pop(L, 1);
  em_device dev = lember_cpu(L);
  if (lua_getfield(L, 1, "device") != LUA_TNIL) dev = lember_checkdevice(L, -1, op);
  lua_pop(L, 1);
  opt_list o;
  o.n = 0;
  lattn_collect_options(L, 1, op, attn_own, &o);
  attn_obj *a = lua_newuserdatauv(L, sizeof *a, 0);
  memset(a, 0, sizeof *a);
  luaL_setmetatable(L, ATTN_MT);
  a->training = 1, a->dtype = dt, a->device = dev;
  a->dims.heads = heads, a->dims.dk = dk, a->dims.dv = dv;
  em_status s = lattn_core_make(&a->core, variant, &o, &a->dims, dt, dev);
  if (s != EM_OK) return lember_error(L, op, s);
  return 1;
}

static const char *const attn_fwd_opts[] = {"key_padding_mask", "attn_mask", "causal", "need_weights",
                                            "scale", "dropout", NULL};

/* forward(q, k, v [, {key_padding_mask=, attn_mask=, causal=, need_weights=, scale=, dropout=}]) */
static int attn_forward(lua_State *L) {
  const char *op = "Attention.forward";
  attn_obj *a = check_attn(L, 1);
  em_tensor *q = lember_checktensor(L, 2), *k = lember_checktensor(L, 3), *v = lember_checktensor(L, 4);
  em_attn_args args = {0};
  args.training = a->training != 0;
  if (!lua_isnoneornil(L, 5)) {
    luaL_checktype(L, 5, LUA_TTABLE);
    lember_checkoptions(L, 5, op, attn_fwd_opts);
    if (lua_getfield(L, 5, "key_padding_mask") != LUA_TNIL) args.key_padding = lember_checktensor(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 5, "attn_mask") != LUA_TNIL) args.mask = lember_checktensor(L, -1);
    lua_pop(L, 1);
    args.causal = lattn_opt_bool(L, 5, "causal", 0, op);
    args.need_weights = lattn_opt_bool(L, 5, "need_weights", 0, op);
    args.scale = lattn_opt_num(L, 5, "scale", 0, op);
    args.dropout_p = lattn_opt_num(L, 5, "dropout", 0, op);
  }
  if (q->ndim == 4 && (q->shape[1] != a->dims.heads || q->shape[3] != a->dims.dk || v->ndim != 4 ||
                       v->shape[3] != a->dims.dv))
    return luaL_error(L, "ember.%s: this Attention was built for heads=%I, head_dim=%I, v_head_dim=%I; got q [.., %I, .., %I], v [.., %I]",
                      op, (lua_Integer)a->dims.heads, (lua_Integer)a->dims.dk, (lua_Integer)a->dims.dv,
                      (lua_Integer)q->shape[1], (lua_Integer)q->shape[3],
                      (lua_Integer)(v->ndim == 4 ? v->shape[3] : -1));
  em_tensor *params[EM_ATTN_MAX_PARAMS];
  for (int i = 0; i < a->core.n_params; i++) params[i] = a->core.params[i].tensor;
  em_tensor *out = NULL, *w = NULL;
  em_status s = em_attention(&out, args.need_weights ? &w : NULL, a->core.variant, a->core.opts,
                             a->core.n_params, params, q, k, v, &args);
  if (s != EM_OK) return lember_error(L, op, s);
  lember_pushtensor(L, out);
  if (!args.need_weights) return 1;
  lember_pushtensor(L, w);
  return 2;
}

static int attn_call(lua_State *L) { return attn_forward(L); }

static int attn_parameters(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  lua_newtable(L);
  lattn_each_core(L, &a->core, lattn_cb_list);
  return 1;
}
static int attn_named_parameters(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  lua_newtable(L);
  lattn_each_core(L, &a->core, lattn_cb_named);
  return 1;
}
static int attn_state_dict(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  lua_newtable(L);
  lattn_each_core(L, &a->core, lattn_cb_state);
  return 1;
}
static int attn_load_state_dict(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  int strict = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  slot sl[EM_ATTN_MAX_PARAMS];
  for (int i = 0; i < a->core.n_params; i++) {
    lattn_full_name(sl[i].name, sizeof sl[i].name, a->core.variant->name, a->core.params[i].name);
    sl[i].t = &a->core.params[i].tensor, sl[i].learned = a->core.params[i].learned;
  }
  lattn_load_slots(L, "Attention.load_state_dict", sl, a->core.n_params, 2, strict);
  lua_settop(L, 1);
  return 1;
}
static int attn_zero_grad(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  lattn_each_core(L, &a->core, lattn_cb_zero_grad);
  lua_settop(L, 1);
  return 1;
}
static int attn_train(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  a->training = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
  lua_settop(L, 1);
  return 1;
}
static int attn_eval(lua_State *L) {
  check_attn(L, 1)->training = 0;
  lua_settop(L, 1);
  return 1;
}
static int attn_options(lua_State *L) {
  lattn_push_option_values(L, check_attn(L, 1)->core.opts);
  return 1;
}
static int attn_tostring(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  char opts[1024];
  lua_pushfstring(L, "Attention(%s{%s}, heads=%I, head_dim=%I, v_head_dim=%I, %s)", a->core.variant->name,
                  em_attn_options_str(a->core.opts, opts, sizeof opts), (lua_Integer)a->dims.heads,
                  (lua_Integer)a->dims.dk, (lua_Integer)a->dims.dv, em_dtype_name(a->dtype));
  return 1;
}
static int attn_index(lua_State *L) {
  attn_obj *a = check_attn(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (lua_getfield(L, lua_upvalueindex(1), k) != LUA_TNIL) return 1;
  if (strcmp(k, "attention") == 0) lua_pushstring(L, a->core.variant->name);
  else if (strcmp(k, "caps") == 0) lattn_push_caps(L, a->core.variant->caps);
  else if (strcmp(k, "heads") == 0) lua_pushinteger(L, (lua_Integer)a->dims.heads);
  else if (strcmp(k, "head_dim") == 0) lua_pushinteger(L, (lua_Integer)a->dims.dk);
  else if (strcmp(k, "v_head_dim") == 0) lua_pushinteger(L, (lua_Integer)a->dims.dv);
  else if (strcmp(k, "training") == 0) lua_pushboolean(L, a->training);
  else if (strcmp(k, "dtype") == 0) lua_pushstring(L, em_dtype_name(a->dtype));
  else lua_pushnil(L);
  return 1;
}

static const luaL_Reg attn_methods[] = {
  {"forward", attn_forward},
  {"parameters", attn_parameters},
  {"named_parameters", attn_named_parameters},
  {"state_dict", attn_state_dict},
  {"load_state_dict", attn_load_state_dict},
  {"zero_grad", attn_zero_grad},
  {"train", attn_train},
  {"eval", attn_eval},
  {"options", attn_options},
  {NULL, NULL}
};

/* ---------------------------------------------------------------- */
/* ember.attention_variants()                                         */
/* ---------------------------------------------------------------- */

static void push_variant(lua_State *L, const em_attention_variant *v, const char *path) {
  lua_newtable(L);
  lua_pushstring(L, v->name), lua_setfield(L, -2, "name");
  lua_pushstring(L, v->version ? v->version : ""), lua_setfield(L, -2, "version");
  lua_pushstring(L, v->description ? v->description : ""), lua_setfield(L, -2, "description");
  lua_pushstring(L, path), lua_setfield(L, -2, "path");
  lattn_push_caps(L, v->caps), lua_setfield(L, -2, "caps");
  lua_createtable(L, v->n_options, 0);
  for (int i = 0; i < v->n_options; i++) {
    const em_attn_option_spec *s = &v->options[i];
    static const char *const types[] = {"?", "int", "float", "bool", "string"};
    lua_newtable(L);
    lua_pushstring(L, s->name), lua_setfield(L, -2, "name");
    lua_pushstring(L, types[s->type]), lua_setfield(L, -2, "type");
    if (s->type == EM_ATTN_OPT_STRING) lua_pushstring(L, s->default_str ? s->default_str : "");
    else if (s->type == EM_ATTN_OPT_BOOL) lua_pushboolean(L, s->default_num != 0);
    else if (s->type == EM_ATTN_OPT_INT) lua_pushinteger(L, (lua_Integer)s->default_num);
    else lua_pushnumber(L, s->default_num);
    lua_setfield(L, -2, "default");
    if (s->bounded) {
      lua_pushnumber(L, s->min), lua_setfield(L, -2, "min");
      lua_pushnumber(L, s->max), lua_setfield(L, -2, "max");
    }
    if (s->choices) lua_pushstring(L, s->choices), lua_setfield(L, -2, "choices");
    lua_pushstring(L, s->help ? s->help : ""), lua_setfield(L, -2, "help");
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "options");
}

/* attention_variants() -> list; attention_variants(name) -> one or error */
static int f_variants(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) {
    const char *name = luaL_checkstring(L, 1);
    const em_attention_variant *v;
    em_status s = em_attention_find(name, &v);
    if (s != EM_OK) return lember_error(L, "attention_variants", s);
    const em_plugin_record *r = em_plugin_find(EM_PLUGIN_ATTENTION, name);
    push_variant(L, v, r ? r->path : "");
    return 1;
  }
  lua_newtable(L);
  int n = em_plugin_count();
  for (int i = 0; i < n; i++) {
    const em_plugin_record *r = em_plugin_get(i);
    char err[256];
    if (!r->loaded || r->kind != EM_PLUGIN_ATTENTION || !em_attention_variant_check(r->vtable, err, sizeof err))
      continue;
    push_variant(L, r->vtable, r->path);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  return 1;
}

/* Registers ember.Attention and ember.attention_variants (called by
** lember_open_attention). */
void lattn_open_functional(lua_State *L, int module) {
  module = lua_absindex(L, module);
  lattn_new_class(L, module, ATTN_MT, attn_methods, attn_gc, attn_index, attn_call, attn_tostring);
  lua_pushcfunction(L, attn_new), lua_setfield(L, module, "Attention");
  lua_pushcfunction(L, f_variants), lua_setfield(L, module, "attention_variants");
}
