/*
** l_attention.c -- an attention variant instance as Lua userdata, the C
** half of ember.Attention:
**
**   core._attention_core(spec, dtype, device) -> core, tables (private to
**   lua/ember/nn/Attention.lua)
**     spec = {attention=, heads=, head_dim=, v_head_dim=, <variant options>}
**     tables = { {name=, tensor=, learned=}, ... } in the variant's order
**   core:forward(tables, q, k, v [, {key_padding_mask=, attn_mask=, causal=,
**                need_weights=, scale=, dropout=, training=}]) -> out [, weights]
**   core:options() -> the checked option values
**   core:declaration() -> what a declaring variant declares (em_attn_decl)
**   core.attention / .caps / .heads / .head_dim / .v_head_dim
**
**   ember.attention_variants([name]) -> descriptions of the loaded variants
**   ember.attention_routes() -> {fused=, composed=, forward=, kv_in_place=}: calls per
**     route so far (em_attention_route_counts), for tests and benchmarks
**   core._attention_tape() -> tape (em_attn_tape, private to
**     lua/ember/nn/activation_checkpoint.lua): tape:push("record" | "replay")
**     returns the tape, whose __close (or tape:pop()) pops it;
**     tape:clear(); tape:stats() -> {recorded=, reused=, missed=, kept=};
**     core._attention_tapes() -> how many are pushed (for tests)
**
** The split: this object is what only C can be -- the variant's handle, its
** checked options, the sizes it was built for, and the fused call. The
** variant's tables (relpos distances, FAVOR features...) are module state,
** so they live where every other module's state lives: they are handed to
** the Lua module (lua/ember/nn/Attention.lua) at construction, registered
** there as parameters or buffers, and passed back on every call. Devices,
** dtypes, state dicts, tying and printing are therefore written once, in
** nn.Module.
**
** Binding rule (lember.h): Lua arguments are all read before any core
** reference is taken.
*/
#include <stdlib.h>
#include <string.h>

#include "ember_attention.h"
#include "lember.h"

#define CORE_MT "ember.AttentionCore"

/* A traced variant's programs for one instance (lua/ember/variant.lua). */
typedef struct attn_progs {
  em_expr *p[5];               /* score, score_grad, mask, sink, sink_grad */
  int n_caps;
  int cap_param[EM_EXPR_MAX_CAPS];
  int cap_ndim[EM_EXPR_MAX_CAPS];
  char cap_name[EM_EXPR_MAX_CAPS][64];
  int64_t cap_shape[EM_EXPR_MAX_CAPS][EM_EXPR_MAX_DIMS]; /* tables' shapes */
} attn_progs;

typedef struct attn_core {
  const em_attention_variant *variant;
  em_attn_options *opts;
  em_attn_dims dims;
  attn_progs *progs;           /* a traced variant's, or NULL */
  int n_tables;
  struct {
    const char *name; /* static in the plugin */
    int ndim;
    int64_t shape[EM_MAX_DIMS];
  } tables[EM_ATTN_MAX_PARAMS];
} attn_core;

/* Keys of the spec table that are the instance's own, not variant options. */
static const char *const core_own[] = {"attention", "heads", "head_dim", "v_head_dim", NULL};

static attn_core *check_core(lua_State *L, int idx) { return luaL_checkudata(L, idx, CORE_MT); }

static void progs_free(attn_progs *g) {
  if (!g) return;
  for (int i = 0; i < 5; i++) em_expr_free(g->p[i]);
  free(g);
}

static int core_gc(lua_State *L) {
  attn_core *c = check_core(L, 1);
  em_attn_options_free(c->opts);
  c->opts = NULL;
  progs_free(c->progs);
  c->progs = NULL;
  return 0;
}

/* Variant options read from a Lua table, borrowed from the stack. */
typedef struct opt_list {
  int n;
  const char *names[EM_ATTN_MAX_OPTIONS];
  em_attn_value values[EM_ATTN_MAX_OPTIONS];
} opt_list;

static int is_own(const char *k) {
  for (int i = 0; core_own[i]; i++)
    if (strcmp(k, core_own[i]) == 0) return 1;
  return 0;
}

/* Collects the keys of the table at idx that are not the instance's own
** (Lua work only: may raise). The strings stay valid while the table is
** alive. */
static void collect_options(lua_State *L, int idx, const char *op, opt_list *o) {
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "ember.%s: options must have string keys, got a %s key", op, luaL_typename(L, -2));
    const char *k = lua_tostring(L, -2);
    if (!is_own(k)) {
      if (o->n >= EM_ATTN_MAX_OPTIONS) luaL_error(L, "ember.%s: more than %d options", op, EM_ATTN_MAX_OPTIONS);
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

static int64_t opt_int(lua_State *L, int t, const char *key, int64_t def, const char *op) {
  int64_t v = def;
  if (lua_getfield(L, t, key) != LUA_TNIL) v = lember_checkint(L, -1, op, key);
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int t, const char *key, int def, const char *op) {
  int v = def, ty = lua_getfield(L, t, key);
  if (ty != LUA_TNIL) {
    if (ty != LUA_TBOOLEAN) luaL_error(L, "ember.%s: %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static double opt_num(lua_State *L, int t, const char *key, double def, const char *op) {
  double v = def;
  if (lua_getfield(L, t, key) != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "ember.%s: %s must be a number, got %s", op, key, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* attention_core(spec, dtype, device) -> core, tables */
static int core_new(lua_State *L) {
  const char *op = "Attention";
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *variant = "standard";
  if (lua_getfield(L, 1, "attention") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "ember.%s: attention must be a variant name (a string), got %s", op, luaL_typename(L, -1));
    variant = lua_tostring(L, -1);
  }
  lua_pop(L, 1); /* the table keeps the string */
  int64_t heads = opt_int(L, 1, "heads", 1, op), dk = opt_int(L, 1, "head_dim", 0, op);
  int64_t dv = opt_int(L, 1, "v_head_dim", dk, op);
  if (heads <= 0 || dk <= 0 || dv <= 0)
    return luaL_error(L, "ember.%s: heads and head_dim must be positive (got heads=%I head_dim=%I v_head_dim=%I)",
                      op, (lua_Integer)heads, (lua_Integer)dk, (lua_Integer)dv);
  em_dtype dt = lua_isnoneornil(L, 2) ? em_default_dtype() : lember_checkdtype(L, 2, op);
  em_device dev = lua_isnoneornil(L, 3) ? lember_cpu(L) : lember_checkdevice(L, 3, op);
  opt_list o;
  o.n = 0;
  collect_options(L, 1, op, &o);

  attn_core *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  luaL_setmetatable(L, CORE_MT);
  c->dims.heads = heads, c->dims.dk = dk, c->dims.dv = dv;
  em_attn_param params[EM_ATTN_MAX_PARAMS];
  int n = 0;
  em_status s = em_attention_find(variant, &c->variant);
  if (s == EM_OK) s = em_attn_options_new(&c->opts, c->variant, o.n, o.names, o.values, &c->dims);
  if (s == EM_OK) s = em_attn_init_params(c->variant, c->opts, &c->dims, dt, dev, &n, params);
  for (int i = 0; s == EM_OK && i < n; i++)
    if (params[i].learned) s = em_set_requires_grad(params[i].tensor, true);
  if (s != EM_OK) {
    for (int i = 0; i < n; i++) em_release(params[i].tensor);
    return lember_error(L, op, s); /* __gc frees the options */
  }
  c->n_tables = n;
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    c->tables[i].name = params[i].name;
    c->tables[i].ndim = params[i].tensor->ndim;
    memcpy(c->tables[i].shape, params[i].tensor->shape, sizeof(int64_t) * (size_t)params[i].tensor->ndim);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, params[i].name), lua_setfield(L, -2, "name");
    lember_pushtensor(L, params[i].tensor), lua_setfield(L, -2, "tensor"); /* takes the reference */
    lua_pushboolean(L, params[i].learned), lua_setfield(L, -2, "learned");
    lua_rawseti(L, -2, i + 1);
  }
  return 2;
}

static const char *const fwd_opts[] = {"key_padding_mask", "attn_mask", "causal", "need_weights",
                                       "scale", "dropout", "training", NULL};

/* Reads the tables list at idx into t[], checking it against the instance. */
static void check_tables(lua_State *L, int idx, const attn_core *c, em_tensor **t, const char *op) {
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  if (n != c->n_tables)
    luaL_error(L, "ember.%s: '%s' has %d tables, got %I", op, c->variant->name, c->n_tables, n);
  for (int i = 0; i < c->n_tables; i++) {
    lua_rawgeti(L, idx, i + 1);
    t[i] = lember_checktensor(L, -1);
    lua_pop(L, 1); /* the list keeps it alive */
    if (t[i]->ndim != c->tables[i].ndim ||
        memcmp(t[i]->shape, c->tables[i].shape, sizeof(int64_t) * (size_t)t[i]->ndim) != 0) {
      char a[160], b[160];
      luaL_error(L, "ember.%s: table '%s' has shape %s, the variant was built for %s", op, c->tables[i].name,
                 em_shape_str(t[i]->ndim, t[i]->shape, a, sizeof a),
                 em_shape_str(c->tables[i].ndim, c->tables[i].shape, b, sizeof b));
    }
  }
}

/* forward(tables, q, k, v [, opts]) */
static int core_forward(lua_State *L) {
  const char *op = "Attention.forward";
  attn_core *c = check_core(L, 1);
  em_tensor *tables[EM_ATTN_MAX_PARAMS];
  check_tables(L, 2, c, tables, op);
  em_tensor *q = lember_checktensor(L, 3), *k = lember_checktensor(L, 4), *v = lember_checktensor(L, 5);
  em_attn_args args = {0};
  if (!lua_isnoneornil(L, 6)) {
    luaL_checktype(L, 6, LUA_TTABLE);
    lember_checkoptions(L, 6, op, fwd_opts);
    if (lua_getfield(L, 6, "key_padding_mask") != LUA_TNIL) args.key_padding = lember_checktensor(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 6, "attn_mask") != LUA_TNIL) args.mask = lember_checktensor(L, -1);
    lua_pop(L, 1); /* the options table keeps both alive */
    args.causal = opt_bool(L, 6, "causal", 0, op);
    args.need_weights = opt_bool(L, 6, "need_weights", 0, op);
    args.training = opt_bool(L, 6, "training", 0, op);
    args.scale = opt_num(L, 6, "scale", 0, op);
    args.dropout_p = opt_num(L, 6, "dropout", 0, op);
  }
  if (q->ndim == 4 && (q->shape[1] != c->dims.heads || q->shape[3] != c->dims.dk || v->ndim != 4 ||
                       v->shape[3] != c->dims.dv))
    return luaL_error(L, "ember.%s: this Attention was built for heads=%I, head_dim=%I, v_head_dim=%I; got q [.., %I, .., %I], v [.., %I]",
                      op, (lua_Integer)c->dims.heads, (lua_Integer)c->dims.dk, (lua_Integer)c->dims.dv,
                      (lua_Integer)q->shape[1], (lua_Integer)q->shape[3],
                      (lua_Integer)(v->ndim == 4 ? v->shape[3] : -1));
  em_attn_mods mods;
  if (c->progs) {
    const attn_progs *g = c->progs;
    memset(&mods, 0, sizeof mods);
    mods.score = g->p[0], mods.score_grad = g->p[1], mods.mask = g->p[2];
    mods.sink = g->p[3], mods.sink_grad = g->p[4];
    mods.n_caps = g->n_caps;
    for (int i = 0; i < g->n_caps; i++) {
      mods.cap_param[i] = g->cap_param[i], mods.cap_ndim[i] = g->cap_ndim[i];
      mods.cap_name[i] = g->cap_name[i];
      if (g->cap_param[i] < 0) { /* the per-call tensors: argument 7, by capture */
        if (lua_type(L, 7) != LUA_TTABLE || lua_rawgeti(L, 7, i + 1) == LUA_TNIL)
          return luaL_error(L, "ember.%s: variant '%s' needs the per-call tensor '%s' (variant_inputs = {%s = ...})",
                            op, c->variant->name, g->cap_name[i], g->cap_name[i]);
        mods.cap_input[i] = lember_checktensor(L, -1);
        lua_pop(L, 1); /* the table keeps it alive */
      }
    }
    args.mods = &mods;
  }
  em_tensor *out = NULL, *w = NULL;
  em_status s = em_attention(&out, args.need_weights ? &w : NULL, c->variant, c->opts, c->n_tables,
                             tables, q, k, v, &args);
  /* argument 8 true: a call the device's fused kernel declines (its
  ** status, not its wording) answers nil, message, so the caller can run
  ** its dense route instead (nn/Attention.lua) */
  if (s == EM_ERR_UNSUPPORTED && lua_toboolean(L, 8)) {
    lua_pushnil(L);
    lua_pushstring(L, em_error_message());
    return 2;
  }
  if (s != EM_OK) return lember_error(L, op, s);
  lember_pushtensor(L, out);
  if (!args.need_weights) return 1;
  lember_pushtensor(L, w);
  return 2;
}

static void push_caps(lua_State *L, uint32_t caps) {
  static const struct { uint32_t bit; const char *name; } names[] = {
    {EM_ATTN_CAP_MASK, "mask"},       {EM_ATTN_CAP_KEY_PADDING, "key_padding"},
    {EM_ATTN_CAP_CAUSAL, "causal"},   {EM_ATTN_CAP_DROPOUT, "dropout"},
    {EM_ATTN_CAP_WEIGHTS, "weights"}, {EM_ATTN_CAP_CROSS, "cross"}};
  lua_createtable(L, 0, 6);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    lua_pushboolean(L, (caps & names[i].bit) != 0);
    lua_setfield(L, -2, names[i].name);
  }
}

/* options() -> {name = value} of the checked options, defaults filled in. */
static int core_options(lua_State *L) {
  const em_attn_options *o = check_core(L, 1)->opts;
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
  return 1;
}

/* core:declaration() -> what the variant declares (ember_attention.h
** em_attn_decl) for this instance, or nil for a variant that does not
** declare; table indices are 1-based. The checker reads it. */
static int core_declaration(lua_State *L) {
  attn_core *c = check_core(L, 1);
  if (!c->variant->declare) return 0;
  em_attn_decl d;
  em_attn_decl_init(&d);
  em_status s = c->variant->declare(c->opts, &c->dims, &d);
  if (s != EM_OK) return lember_error(L, "Attention.declaration", s);
  static const char *const bias[] = {"none", "alibi", "table", "shaw"};
  static const char *const rel[] = {"clip", "abs_clip", "t5"};
  static const char *const mask[] = {"none", "window", "blocks"};
  static const char *const route[] = {"auto", "fused", "composed"};
  lua_createtable(L, 0, 12);
  lua_pushstring(L, bias[d.bias & 3]), lua_setfield(L, -2, "bias");
  lua_pushstring(L, rel[d.rel % 3]), lua_setfield(L, -2, "rel");
  lua_pushstring(L, route[d.route % 3]), lua_setfield(L, -2, "route");
  lua_pushinteger(L, d.max_distance), lua_setfield(L, -2, "max_distance");
  lua_pushinteger(L, d.num_buckets), lua_setfield(L, -2, "num_buckets");
  lua_pushboolean(L, d.bidirectional), lua_setfield(L, -2, "bidirectional");
  const int idx[3] = {d.table_param, d.rel_k_param, d.rel_v_param};
  const char *const names[3] = {"table", "rel_k", "rel_v"};
  for (int i = 0; i < 3; i++)
    if (idx[i] >= 0) lua_pushinteger(L, idx[i] + 1), lua_setfield(L, -2, names[i]);
  lua_pushstring(L, mask[d.mask.kind % 3]), lua_setfield(L, -2, "mask");
  lua_pushinteger(L, d.mask.left), lua_setfield(L, -2, "left");
  lua_pushinteger(L, d.mask.right), lua_setfield(L, -2, "right");
  lua_pushinteger(L, d.mask.block), lua_setfield(L, -2, "block");
  lua_pushinteger(L, d.mask.local), lua_setfield(L, -2, "local_blocks");
  lua_pushinteger(L, d.mask.global), lua_setfield(L, -2, "global");
  return 1;
}

/* "relpos{mode=shaw, max_relative_position=2}": how modules print it. */
static int core_tostring(lua_State *L) {
  attn_core *c = check_core(L, 1);
  char opts[1024];
  lua_pushfstring(L, "%s{%s}", c->variant->name, em_attn_options_str(c->opts, opts, sizeof opts));
  return 1;
}

static int core_index(lua_State *L) {
  attn_core *c = check_core(L, 1);
  const char *k = luaL_checkstring(L, 2);
  if (lua_getfield(L, lua_upvalueindex(1), k) != LUA_TNIL) return 1; /* a method */
  if (strcmp(k, "attention") == 0) lua_pushstring(L, c->variant->name);
  else if (strcmp(k, "caps") == 0) push_caps(L, c->variant->caps);
  else if (strcmp(k, "heads") == 0) lua_pushinteger(L, (lua_Integer)c->dims.heads);
  else if (strcmp(k, "head_dim") == 0) lua_pushinteger(L, (lua_Integer)c->dims.dk);
  else if (strcmp(k, "v_head_dim") == 0) lua_pushinteger(L, (lua_Integer)c->dims.dv);
  else lua_pushnil(L);
  return 1;
}

/* ---------------------------------------------------------------- */
/* ember.attention_variants()                                         */
/* ---------------------------------------------------------------- */

static void push_option_spec(lua_State *L, const em_attn_option_spec *s) {
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
}

static void push_variant(lua_State *L, const em_attention_variant *v, const char *path) {
  lua_newtable(L);
  lua_pushstring(L, v->name), lua_setfield(L, -2, "name");
  lua_pushstring(L, v->version ? v->version : ""), lua_setfield(L, -2, "version");
  lua_pushstring(L, v->description ? v->description : ""), lua_setfield(L, -2, "description");
  lua_pushstring(L, path), lua_setfield(L, -2, "path");
  push_caps(L, v->caps), lua_setfield(L, -2, "caps");
  lua_createtable(L, v->n_options, 0);
  for (int i = 0; i < v->n_options; i++) {
    push_option_spec(L, &v->options[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "options");
  lua_pushboolean(L, v->declare != NULL), lua_setfield(L, -2, "declares");
}

static int f_routes(lua_State *L) {
  em_attn_route_counts r;
  em_attention_route_counts(&r);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)r.fused), lua_setfield(L, -2, "fused");
  lua_pushinteger(L, (lua_Integer)r.composed), lua_setfield(L, -2, "composed");
  lua_pushinteger(L, (lua_Integer)r.forward), lua_setfield(L, -2, "forward");
  lua_pushinteger(L, (lua_Integer)r.kv_in_place), lua_setfield(L, -2, "kv_in_place");
  return 1;
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

/* ---------------------------------------------------------------- */
/* Variants written in Lua                                            */
/* ---------------------------------------------------------------- */

/* Reads one program {ins = {{op=, cap=, args=, k=}, ...}, out = {...},
** grad_load = {...}} (registers 0-based) at idx; NULL for nil. */
static em_status read_program(lua_State *L, int idx, const attn_progs *g, em_expr **out) {
  *out = NULL;
  if (lua_isnil(L, idx)) return EM_OK;
  idx = lua_absindex(L, idx);
  em_xins ins[EM_EXPR_MAX_INS];
  int32_t outs[EM_EXPR_MAX_OUT], gl[EM_EXPR_MAX_OUT];
  lua_getfield(L, idx, "ins");
  int n = (int)lua_rawlen(L, -1);
  if (n > EM_EXPR_MAX_INS) n = EM_EXPR_MAX_INS + 1; /* em_expr_new says why */
  for (int i = 0; i < n && i < EM_EXPR_MAX_INS; i++) {
    lua_rawgeti(L, -1, i + 1);
    em_xins *x = &ins[i];
    memset(x, 0, sizeof *x);
    for (int a = 0; a < EM_EXPR_MAX_DIMS; a++) x->arg[a] = -1;
    lua_getfield(L, -1, "op"), x->op = (int32_t)lua_tointeger(L, -1), lua_pop(L, 1);
    lua_getfield(L, -1, "cap"), x->cap = (int32_t)lua_tointeger(L, -1), lua_pop(L, 1);
    lua_getfield(L, -1, "k"), x->k = lua_tonumber(L, -1), lua_pop(L, 1);
    lua_getfield(L, -1, "args");
    int na = (int)lua_rawlen(L, -1);
    for (int a = 0; a < na && a < EM_EXPR_MAX_DIMS; a++)
      lua_rawgeti(L, -1, a + 1), x->arg[a] = (int32_t)lua_tointeger(L, -1), lua_pop(L, 1);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  lua_getfield(L, idx, "out");
  int n_out = (int)lua_rawlen(L, -1);
  for (int i = 0; i < n_out && i < EM_EXPR_MAX_OUT; i++)
    lua_rawgeti(L, -1, i + 1), outs[i] = (int32_t)lua_tointeger(L, -1), lua_pop(L, 1);
  lua_pop(L, 1);
  lua_getfield(L, idx, "grad_load");
  int n_grad = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 0;
  for (int i = 0; i < n_grad && i < EM_EXPR_MAX_OUT - 2; i++)
    lua_rawgeti(L, -1, i + 1), gl[i] = (int32_t)lua_tointeger(L, -1), lua_pop(L, 1);
  lua_pop(L, 1);
  return em_expr_new(out, n, ins, n_out, outs, n_grad, gl, g->n_caps, g->cap_ndim);
}

/* core:set_programs{score=, score_grad=, mask=, sink=, sink_grad=,
** caps = {{name=, ndim=, param=}, ...}} (param 1-based, nil for per-call) */
static int core_set_programs(lua_State *L) {
  const char *op = "attention_variant";
  attn_core *c = check_core(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  attn_progs *g = calloc(1, sizeof *g);
  if (!g) return luaL_error(L, "ember.%s: out of memory", op);
  lua_getfield(L, 2, "caps");
  g->n_caps = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 0;
  if (g->n_caps > EM_EXPR_MAX_CAPS) g->n_caps = EM_EXPR_MAX_CAPS;
  for (int i = 0; i < g->n_caps; i++) {
    lua_rawgeti(L, -1, i + 1);
    lua_getfield(L, -1, "name");
    snprintf(g->cap_name[i], sizeof g->cap_name[i], "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    lua_getfield(L, -1, "ndim"), g->cap_ndim[i] = (int)lua_tointeger(L, -1), lua_pop(L, 1);
    lua_getfield(L, -1, "param");
    g->cap_param[i] = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) - 1 : -1;
    lua_pop(L, 1);
    lua_getfield(L, -1, "shape");
    for (int d = 0; d < g->cap_ndim[i] && d < EM_EXPR_MAX_DIMS && lua_istable(L, -1); d++)
      lua_rawgeti(L, -1, d + 1), g->cap_shape[i][d] = (int64_t)lua_tointeger(L, -1), lua_pop(L, 1);
    lua_pop(L, 1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  static const char *const names[5] = {"score", "score_grad", "mask", "sink", "sink_grad"};
  em_status s = EM_OK;
  for (int i = 0; i < 5 && s == EM_OK; i++) {
    lua_getfield(L, 2, names[i]);
    s = read_program(L, -1, g, &g->p[i]);
    lua_pop(L, 1);
  }
  if (s != EM_OK) {
    progs_free(g);
    return lember_error(L, op, s);
  }
  progs_free(c->progs);
  c->progs = g;
  /* the tables of the instance, checked on every call as C plugins' are */
  c->n_tables = 0;
  for (int i = 0; i < g->n_caps; i++) {
    const int p = g->cap_param[i];
    if (p < 0 || p >= EM_ATTN_MAX_PARAMS || g->cap_ndim[i] > EM_MAX_DIMS) continue;
    c->tables[p].name = g->cap_name[i];
    c->tables[p].ndim = g->cap_ndim[i];
    for (int d = 0; d < g->cap_ndim[i]; d++) c->tables[p].shape[d] = g->cap_shape[i][d];
    if (p + 1 > c->n_tables) c->n_tables = p + 1;
  }
  return 0;
}

/* A variant written in Lua, as the core sees it: its options (checked by
** the core like a C plugin's) and a declaration that changes nothing --
** what it changes travels with each call as programs (em_attn_mods). */
typedef struct lua_variant {
  em_attention_variant v;
  em_attn_option_spec opts[EM_ATTN_MAX_OPTIONS];
  char *strings;               /* every string the vtable points into */
  struct lua_variant *prev;    /* earlier definitions stay valid for live instances */
} lua_variant;

static lua_variant *lua_variants; /* reachable, so never reported as leaks */

static em_status lua_declare(const em_attn_options *o, const em_attn_dims *dims, em_attn_decl *d) {
  (void)o, (void)dims, (void)d;
  return EM_OK;
}

/* Copies a string into the arena. */
static const char *arena_put(char **at, const char *str) {
  size_t n = strlen(str) + 1;
  memcpy(*at, str, n);
  const char *r = *at;
  *at += n;
  return r;
}

static const char *field_str(lua_State *L, int t, const char *key, const char *def) {
  lua_getfield(L, t, key);
  const char *r = lua_isstring(L, -1) ? lua_tostring(L, -1) : def;
  lua_pop(L, 1); /* the table keeps it */
  return r;
}

/* ember._register_variant{name=, version=, description=, path=, options={specs}} */
static int f_register_variant(lua_State *L) {
  const char *op = "attention_variant";
  luaL_checktype(L, 1, LUA_TTABLE);
  const char *name = field_str(L, 1, "name", NULL), *path = field_str(L, 1, "path", "(defined in Lua)");
  const char *version = field_str(L, 1, "version", "lua"), *desc = field_str(L, 1, "description", "");
  if (!name) return luaL_error(L, "ember.%s: a variant needs a name", op);
  lua_getfield(L, 1, "options");
  const int ot = lua_gettop(L);
  int n = lua_istable(L, ot) ? (int)lua_rawlen(L, ot) : 0;
  if (n > EM_ATTN_MAX_OPTIONS) return luaL_error(L, "ember.%s: '%s' has %d options (at most %d)", op, name, n, EM_ATTN_MAX_OPTIONS);
  size_t bytes = strlen(name) + strlen(version) + strlen(desc) + 3;
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, ot, i + 1);
    const char *keys[4] = {"name", "help", "choices", "default"};
    for (int k = 0; k < 4; k++) bytes += strlen(field_str(L, -1, keys[k], "")) + 1;
    lua_pop(L, 1);
  }
  lua_variant *lv = calloc(1, sizeof *lv);
  char *arena = lv ? malloc(bytes) : NULL;
  if (!arena) {
    free(lv);
    return luaL_error(L, "ember.%s: out of memory", op);
  }
  char *at = arena;
  lv->strings = arena;
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, ot, i + 1);
    em_attn_option_spec *sp = &lv->opts[i];
    sp->name = arena_put(&at, field_str(L, -1, "name", ""));
    const char *type = field_str(L, -1, "type", "");
    sp->type = strcmp(type, "int") == 0 ? EM_ATTN_OPT_INT : strcmp(type, "float") == 0 ? EM_ATTN_OPT_FLOAT
               : strcmp(type, "bool") == 0 ? EM_ATTN_OPT_BOOL : EM_ATTN_OPT_STRING;
    sp->help = arena_put(&at, field_str(L, -1, "help", ""));
    const char *choices = field_str(L, -1, "choices", "");
    sp->choices = choices[0] ? arena_put(&at, choices) : NULL;
    lua_getfield(L, -1, "default");
    if (lua_isboolean(L, -1)) sp->default_num = lua_toboolean(L, -1);
    else if (lua_type(L, -1) == LUA_TNUMBER) sp->default_num = lua_tonumber(L, -1);
    lua_pop(L, 1);
    sp->default_str = arena_put(&at, sp->type == EM_ATTN_OPT_STRING ? field_str(L, -1, "default", "") : "");
    lua_getfield(L, -1, "min");
    lua_getfield(L, -1 - 1, "max");
    if (lua_type(L, -2) == LUA_TNUMBER || lua_type(L, -1) == LUA_TNUMBER) {
      sp->bounded = true;
      sp->min = lua_type(L, -2) == LUA_TNUMBER ? lua_tonumber(L, -2) : -1e300;
      sp->max = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 1e300;
    }
    lua_pop(L, 3);
  }
  em_attention_variant *v = &lv->v;
  v->abi_version = EM_ATTENTION_ABI_VERSION;
  v->struct_size = sizeof *v;
  v->name = arena_put(&at, name);
  v->version = arena_put(&at, version);
  v->description = arena_put(&at, desc);
  v->caps = EM_ATTN_CAP_ALL;
  v->n_options = n;
  v->options = n ? lv->opts : NULL;
  v->declare = lua_declare;
  char err[256];
  em_status s = em_attention_variant_check(v, err, sizeof err)
                    ? em_plugin_register(EM_PLUGIN_ATTENTION, path, v->name, v->version, v->description, v, NULL)
                    : em_error(EM_ERR_PLUGIN, "%s", err);
  if (s != EM_OK) {
    free(arena), free(lv);
    return lember_error(L, op, s);
  }
  lv->prev = lua_variants;
  lua_variants = lv;
  return 0;
}

/* ember._reject_plugin(path, reason [, name]): a variant file that failed
** (listed under its file name) or was shadowed (under the variant's name). */
static int f_reject_plugin(lua_State *L) {
  const char *path = luaL_checkstring(L, 1), *reason = luaL_checkstring(L, 2);
  const char *base = strrchr(path, '/');
  const char *name = luaL_optstring(L, 3, base ? base + 1 : path);
  em_status s = em_plugin_register(EM_PLUGIN_ATTENTION, path, name, "", "", NULL, reason);
  if (s != EM_OK) return lember_error(L, "load_plugin", s);
  return 0;
}

/* ember.alibi_slopes(n) -> the ALiBi paper's slopes of n heads (the rule of
** relpos's alibi mode, em_attn_alibi_slope), for variants written in Lua. */
static int f_alibi_slopes(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1 || n > 1 << 20) return luaL_error(L, "ember.alibi_slopes: n must be in 1..2^20, got %I", n);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer h = 0; h < n; h++) lua_pushnumber(L, em_attn_alibi_slope(h, n)), lua_rawseti(L, -2, h + 1);
  return 1;
}

/* ember._attention_count(route): a call the Lua side ran ("composed"). */
static int f_count(lua_State *L) {
  static const char *const routes[] = {"fused", "composed", "forward", NULL};
  em_attention_count_route(luaL_checkoption(L, 1, NULL, routes));
  return 0;
}

/* ---------------------------------------------------------------- */
/* Tapes of fused results, for activation checkpointing               */
/* ---------------------------------------------------------------- */

#define TAPE_MT "ember.AttentionTape"

static em_attn_tape **check_tape(lua_State *L) {
  em_attn_tape **t = luaL_checkudata(L, 1, TAPE_MT);
  if (!*t) luaL_error(L, "attention tape: already freed");
  return t;
}

static int f_tape(lua_State *L) {
  em_attn_tape **t = lua_newuserdatauv(L, sizeof *t, 0);
  *t = NULL;
  luaL_setmetatable(L, TAPE_MT);
  em_status s = em_attn_tape_new(t);
  if (s != EM_OK) return lember_error(L, "attention tape", s);
  return 1;
}

static int tape_push(lua_State *L) {
  static const char *const modes[] = {"record", "replay", NULL};
  em_attn_tape **t = check_tape(L);
  const int mode = luaL_checkoption(L, 2, NULL, modes) + 1; /* EM_ATTN_TAPE_RECORD / _REPLAY */
  em_status s = em_attn_tape_push(*t, mode);
  if (s != EM_OK) return lember_error(L, "attention tape", s);
  lua_settop(L, 1);
  return 1;
}

static int tape_pop(lua_State *L) {
  em_attn_tape_pop(*check_tape(L));
  return 0;
}

static int tape_clear(lua_State *L) {
  em_attn_tape_clear(*check_tape(L));
  return 0;
}

static int tape_stats(lua_State *L) {
  em_attn_tape_stats st;
  em_attn_tape_get_stats(*check_tape(L), &st);
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)st.recorded), lua_setfield(L, -2, "recorded");
  lua_pushinteger(L, (lua_Integer)st.reused), lua_setfield(L, -2, "reused");
  lua_pushinteger(L, (lua_Integer)st.missed), lua_setfield(L, -2, "missed");
  lua_pushinteger(L, (lua_Integer)st.kept), lua_setfield(L, -2, "kept");
  return 1;
}

static int tape_gc(lua_State *L) {
  em_attn_tape **t = luaL_checkudata(L, 1, TAPE_MT);
  em_attn_tape_free(*t);
  *t = NULL;
  return 0;
}

static int f_tapes(lua_State *L) {
  lua_pushinteger(L, em_attn_tape_depth());
  return 1;
}

static void open_tape(lua_State *L, int module) {
  static const luaL_Reg methods[] = {{"push", tape_push}, {"pop", tape_pop}, {"clear", tape_clear},
                                      {"stats", tape_stats}, {NULL, NULL}};
  luaL_newmetatable(L, TAPE_MT);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, tape_pop), lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, tape_gc), lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, f_tape), lua_setfield(L, module, "_attention_tape");
  lua_pushcfunction(L, f_tapes), lua_setfield(L, module, "_attention_tapes");
}

/* ---------------------------------------------------------------- */
/* Registration                                                       */
/* ---------------------------------------------------------------- */

void lember_open_heatmap(lua_State *L, int module) __attribute__((weak));

void lember_open_attention(lua_State *L, int module) {
  static const luaL_Reg methods[] = {{"forward", core_forward}, {"options", core_options},
                                      {"declaration", core_declaration},
                                      {"set_programs", core_set_programs}, {NULL, NULL}};
  module = lua_absindex(L, module);
  luaL_newmetatable(L, CORE_MT);
  luaL_newlib(L, methods);
  lua_pushcclosure(L, core_index, 1); /* upvalue: the methods */
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, core_gc), lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, core_tostring), lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  lua_pushcfunction(L, core_new), lua_setfield(L, module, "_attention_core");
  lua_pushcfunction(L, f_variants), lua_setfield(L, module, "attention_variants");
  lua_pushcfunction(L, f_routes), lua_setfield(L, module, "attention_routes");
  lua_pushcfunction(L, f_register_variant), lua_setfield(L, module, "_register_variant");
  lua_pushcfunction(L, f_reject_plugin), lua_setfield(L, module, "_reject_plugin");
  lua_pushcfunction(L, f_count), lua_setfield(L, module, "_attention_count");
  lua_pushcfunction(L, f_alibi_slopes), lua_setfield(L, module, "alibi_slopes");
  open_tape(L, module);
  if (lember_open_heatmap) lember_open_heatmap(L, module);
}
