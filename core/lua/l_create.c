/*
** l_create.c -- creation functions: zeros, ones, empty, full, arange,
** rand, randn, uniform, normal, one_hot, and the random seed.
*/
#include <math.h>

#include "lember.h"

/* Finishes a creation: requires_grad if asked, GC accounting. */
static int finish(lua_State *L, em_tensor **out, em_status s, const lember_opts *o,
                  const char *op) {
  if (!s && o->requires_grad) s = em_set_requires_grad(*out, true);
  if (s) return lember_error(L, op, s);
  lember_account(L, *out);
  return 1;
}

/* zeros/ones/empty(shape... [, opts]) */
static int fill_like(lua_State *L, const char *op, int kind) {
  int64_t shape[EM_MAX_DIMS];
  int next;
  lember_opts o;
  int ndim = lember_checkshape(L, 1, op, shape, 0, &next);
  lember_checkopts(L, next, op, &o);
  if (!lua_isnone(L, next + 1))
    return luaL_error(L, "ember.%s: unexpected argument #%d (%s) after the options", op, next + 1,
                      luaL_typename(L, next + 1));
  em_tensor **out = lember_newslot(L);
  em_status s = kind == 0   ? em_zeros(out, ndim, shape, o.dtype, o.device)
                : kind == 1 ? em_ones(out, ndim, shape, o.dtype, o.device)
                            : em_empty(out, ndim, shape, o.dtype, o.device);
  return finish(L, out, s, &o, op);
}

static int f_zeros(lua_State *L) { return fill_like(L, "zeros", 0); }
static int f_ones(lua_State *L) { return fill_like(L, "ones", 1); }
static int f_empty(lua_State *L) { return fill_like(L, "empty", 2); }

/* A shape given as one argument: a table, or a single number. */
static int shape_arg(lua_State *L, int idx, const char *op, int64_t *shape) {
  int next;
  if (lua_type(L, idx) != LUA_TTABLE && lua_type(L, idx) != LUA_TNUMBER)
    return luaL_error(L, "ember.%s: shape must be a number or a table of numbers, got %s", op,
                      luaL_typename(L, idx));
  if (lua_type(L, idx) == LUA_TNUMBER) {
    shape[0] = lember_checkint(L, idx, op, "shape");
    if (shape[0] < 0) return luaL_error(L, "ember.%s: shape entries must be >= 0", op);
    return 1;
  }
  int ndim = lember_checkshape(L, idx, op, shape, 0, &next);
  if (next == idx) /* an options table where the shape should be */
    return luaL_error(L, "ember.%s: shape must be a table of numbers, got a table without them", op);
  return ndim;
}

/* full(shape, value [, opts]) */
static int f_full(lua_State *L) {
  int64_t shape[EM_MAX_DIMS];
  lember_opts o;
  int ndim = shape_arg(L, 1, "full", shape);
  double v;
  if (lua_isboolean(L, 2)) v = lua_toboolean(L, 2);
  else v = luaL_checknumber(L, 2);
  lember_checkopts(L, 3, "full", &o);
  for (int i = 4; i <= lua_gettop(L); i++) /* full({2}, 3, nil, {dtype = "int64"}) ran as float32 */
    if (!lua_isnil(L, i))
      luaL_error(L, "ember.full: takes (shape, value [, opts]), got a %s as argument %d (the dtype name or the "
                    "options table goes third: ember.full({2, 3}, 7, \"int64\"))", luaL_typename(L, i), i);
  if (!o.has_dtype && lua_isboolean(L, 2)) o.dtype = EM_BOOL;
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_full(out, ndim, shape, v, o.dtype, o.device), &o, "full");
}

/* arange([start,] stop [, step] [, opts]) */
static int f_arange(lua_State *L) {
  double a[3];
  int n = 0;
  lember_opts o;
  while (n < 3 && lua_type(L, n + 1) == LUA_TNUMBER) {
    a[n] = lua_tonumber(L, n + 1);
    n++;
  }
  if (n == 0)
    return luaL_error(L, "ember.arange: expected ([start,] stop [, step] [, opts]) with numbers, got %s",
                      luaL_typename(L, 1));
  lember_checkopts(L, n + 1, "arange", &o);
  double start = n >= 2 ? a[0] : 0, stop = n >= 2 ? a[1] : a[0], step = n == 3 ? a[2] : 1;
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_arange(out, start, stop, step, o.dtype, o.device), &o, "arange");
}

/* rand(shape... [, opts]) and randn(...) */
static int random_like(lua_State *L, const char *op, int normal) {
  int64_t shape[EM_MAX_DIMS];
  int next;
  lember_opts o;
  int ndim = lember_checkshape(L, 1, op, shape, 0, &next);
  lember_checkopts(L, next, op, &o);
  em_tensor **out = lember_newslot(L);
  em_status s = normal ? em_normal(out, ndim, shape, 0.0, 1.0, o.dtype, o.device)
                       : em_uniform(out, ndim, shape, 0.0, 1.0, o.dtype, o.device);
  return finish(L, out, s, &o, op);
}

static int f_rand(lua_State *L) { return random_like(L, "rand", 0); }
static int f_randn(lua_State *L) { return random_like(L, "randn", 1); }

/* uniform(shape, lo, hi [, opts]) and normal(shape, mean, std [, opts]) */
static int random_params(lua_State *L, const char *op, int normal) {
  int64_t shape[EM_MAX_DIMS];
  lember_opts o;
  int ndim = shape_arg(L, 1, op, shape);
  double a = luaL_optnumber(L, 2, normal ? 0.0 : 0.0);
  double b = luaL_optnumber(L, 3, 1.0);
  lember_checkopts(L, 4, op, &o);
  em_tensor **out = lember_newslot(L);
  em_status s = normal ? em_normal(out, ndim, shape, a, b, o.dtype, o.device)
                       : em_uniform(out, ndim, shape, a, b, o.dtype, o.device);
  return finish(L, out, s, &o, op);
}

static int f_uniform(lua_State *L) { return random_params(L, "uniform", 0); }
static int f_normal(lua_State *L) { return random_params(L, "normal", 1); }

static int f_manual_seed(lua_State *L) {
  em_manual_seed((uint64_t)lember_checkint(L, 1, "manual_seed", "seed"));
  return 0;
}

static int f_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)em_initial_seed());
  return 1;
}

/* ember.get_rng_state() -> {seed = s, offset = o}: the generator's whole
** state (the 64-bit values as Lua integers, wrapping past 2^63). */
static int f_get_rng_state(lua_State *L) {
  uint64_t seed, offset;
  em_rng_get_state(&seed, &offset);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_setfield(L, -2, "seed");
  lua_pushinteger(L, (lua_Integer)offset);
  lua_setfield(L, -2, "offset");
  return 1;
}

/* ember.set_rng_state(state): back to a state get_rng_state returned. */
static int f_set_rng_state(lua_State *L) {
  if (!lua_istable(L, 1))
    return luaL_error(L, "ember.set_rng_state: expected the table get_rng_state returns, got %s",
                      luaL_typename(L, 1));
  lua_Integer v[2];
  static const char *const keys[2] = {"seed", "offset"};
  for (int i = 0; i < 2; i++) {
    int isnum = 0;
    lua_getfield(L, 1, keys[i]);
    v[i] = lua_tointegerx(L, -1, &isnum);
    if (!isnum)
      return luaL_error(L, "ember.set_rng_state: state.%s must be an integer, got %s", keys[i],
                        luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  em_rng_set_state((uint64_t)v[0], (uint64_t)v[1]);
  return 0;
}

/* one_hot(labels, num_classes): labels are 1-based. */
static int f_one_hot(lua_State *L) {
  em_tensor *labels = lember_checktensor(L, 1);
  int64_t c = lember_checkint(L, 2, "one_hot", "num_classes");
  em_tensor *idx = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&idx, labels);
  if (!s) s = em_one_hot(out, idx, c);
  em_release(idx);
  if (s) return lember_index_error(L, "one_hot", s, labels, c, "label", INT64_MIN);
  lember_account(L, *out);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"zeros", f_zeros},
  {"ones", f_ones},
  {"empty", f_empty},
  {"full", f_full},
  {"arange", f_arange},
  {"rand", f_rand},
  {"randn", f_randn},
  {"uniform", f_uniform},
  {"normal", f_normal},
  {"manual_seed", f_manual_seed},
  {"initial_seed", f_initial_seed},
  {"get_rng_state", f_get_rng_state},
  {"set_rng_state", f_set_rng_state},
  {"one_hot", f_one_hot},
  {NULL, NULL}
};

void lember_open_create(lua_State *L, int module, int methods, int mt) {
  (void)methods;
  (void)mt;
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
