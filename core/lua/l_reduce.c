/*
** l_reduce.c -- reductions: sum, mean, var, max, min, argmax, argmin.
** Returned indices are 1-based.
*/
#include <string.h>

#include "lember.h"

/* The dim of a 0-d tensor (lember_checkdim_scalar) or of another, as a C dim. */
static int reduce_dim(lua_State *L, int idx, const char *op, const em_tensor *t) {
  if (t->ndim > 0) return lember_checkdim_n(L, idx, op, t->ndim);
  lember_checkdim_scalar(L, idx, op);
  return 0;
}

/* The dims argument at idx: nil (all dims), a number or a table. A 0-d
** tensor's dims (1 or -1) come back as dim 0 of the [1] it is viewed as
** (scalar_view). */
static int reduce_dims(lua_State *L, int idx, const char *op, const em_tensor *t, int *dims) {
  int n = 0;
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_Integer len = luaL_len(L, idx);
    if (len > EM_MAX_DIMS) luaL_error(L, "ember.%s: at most %d dims", op, EM_MAX_DIMS);
    for (n = 0; n < (int)len; n++) {
      lua_geti(L, idx, n + 1);
      dims[n] = reduce_dim(L, -1, op, t);
      lua_pop(L, 1);
    }
    if (n == 0) luaL_error(L, "ember.%s: empty dims table", op);
    if (t->ndim == 0 && n > 1) luaL_error(L, "ember.%s: dim 1 appears more than once", op);
    return n;
  }
  dims[0] = reduce_dim(L, idx, op, t);
  return 1;
}

/* A 0-d t reduced over its dim: t viewed as [1] (a new reference in *view)
** over dim 0 without keepdim, so the result is 0-d, as torch's. Call after
** every argument check (this takes a reference). */
static em_tensor *scalar_view(lua_State *L, em_tensor *t, const char *op, em_tensor **view) {
  int64_t one = 1;
  em_status s = em_reshape(view, t, 1, &one);
  if (s) lember_error(L, op, s);
  return *view;
}

static int opt_keepdim(lua_State *L, int idx, const char *op) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (!lua_isboolean(L, idx))
    luaL_error(L, "ember.%s: keepdim must be a boolean, got %s", op, luaL_typename(L, idx));
  return lua_toboolean(L, idx);
}

static int sum_mean(lua_State *L, int mean) {
  const char *op = mean ? "mean" : "sum";
  em_tensor *t = lember_checktensor(L, 1);
  int dims[EM_MAX_DIMS];
  int n = reduce_dims(L, 2, op, t, dims);
  lember_noextra(L, 3, op, "dim, keepdim");
  int keep = opt_keepdim(L, 3, op);
  em_tensor **out = lember_newslot(L);
  em_tensor *view = NULL;
  if (t->ndim == 0 && n > 0) t = scalar_view(L, t, op, &view), n = 1, keep = 0;
  em_status s = mean ? em_mean(out, t, n, dims, keep) : em_sum(out, t, n, dims, keep);
  em_release(view);
  if (s) return lember_error(L, op, s);
  lember_account(L, *out);
  return 1;
}

static int m_sum(lua_State *L) { return sum_mean(L, 0); }
static int m_mean(lua_State *L) { return sum_mean(L, 1); }

/* var([dim] [, unbiased [, keepdim]]), PyTorch 1.13's positional order;
** var(unbiased); var([dim] [, {correction=1, unbiased=, keepdim=false}]);
** var({dim=, ...}).
** unbiased = false is correction 0. */
static int m_var(lua_State *L) {
  static const char *const names[] = {"dim", "correction", "unbiased", "keepdim", NULL};
  em_tensor *t = lember_checktensor(L, 1);
  int dims[EM_MAX_DIMS];
  int n = 0, keep = 0, optidx = 3;
  lua_Integer correction = 1;
  /* a table without array items in place of the dims is the options, a
  ** boolean is unbiased */
  if (lua_type(L, 2) == LUA_TTABLE && luaL_len(L, 2) == 0) optidx = 2;
  else if (lua_isboolean(L, 2)) optidx = 2;
  else n = reduce_dims(L, 2, "var", t, dims);
  if (lua_isboolean(L, optidx)) {
    correction = lua_toboolean(L, optidx) ? 1 : 0;
    if (optidx == 3) {
      keep = opt_keepdim(L, 4, "var");
      lember_noextra(L, 4, "var", "dim, unbiased, keepdim");
    } else if (!lua_isnoneornil(L, 3)) {
      return luaL_error(L, "ember.var: after unbiased without a dim, nothing more is taken (got a %s); "
                           "use var(dim, unbiased, keepdim)", luaL_typename(L, 3));
    } else {
      lember_noextra(L, 2, "var", "unbiased");
    }
  } else if (lua_type(L, optidx) == LUA_TTABLE) {
    lember_noextra(L, optidx, "var", optidx == 2 ? "options" : "dim, options");
    lember_checkoptions(L, optidx, "var", names);
    int has_c = lua_getfield(L, optidx, "correction") != LUA_TNIL;
    if (has_c) correction = lember_checkint(L, -1, "var", "correction");
    if (lua_getfield(L, optidx, "unbiased") != LUA_TNIL) {
      if (has_c) return luaL_error(L, "ember.var: give unbiased or correction, not both");
      if (!lua_isboolean(L, -1))
        return luaL_error(L, "ember.var: unbiased must be a boolean, got %s", luaL_typename(L, -1));
      correction = lua_toboolean(L, -1) ? 1 : 0;
    }
    if (lua_getfield(L, optidx, "keepdim") != LUA_TNIL) keep = opt_keepdim(L, -1, "var");
    if (lua_getfield(L, optidx, "dim") != LUA_TNIL) { /* var({dim=, ...}), as the keyword form */
      if (n) return luaL_error(L, "ember.var: the dim is given twice (argument and option)");
      n = reduce_dims(L, lua_absindex(L, -1), "var", t, dims);
    }
    lua_pop(L, 4);
  } else if (lua_isnil(L, optidx) && !lua_isnone(L, optidx)) { /* var(dim, nil, keepdim): unbiased's default */
    keep = opt_keepdim(L, 4, "var");
    lember_noextra(L, 4, "var", "dim, unbiased, keepdim");
  } else if (!lua_isnoneornil(L, optidx)) {
    return luaL_error(L, "ember.var: expected unbiased (a boolean) or an options table "
                         "{dim=, correction=, unbiased=, keepdim=} after the dim, got %s", luaL_typename(L, optidx));
  }
  em_tensor **out = lember_newslot(L);
  em_tensor *view = NULL;
  if (t->ndim == 0 && n > 0) t = scalar_view(L, t, "var", &view), n = 1, keep = 0;
  em_status s = em_var(out, t, n, dims, (int)correction, keep);
  em_release(view);
  if (s) return lember_error(L, "var", s);
  lember_account(L, *out);
  return 1;
}

/* max/min([dim [, keepdim]]): no dim gives a 0-d tensor, a dim gives
** values and 1-based indices; max/min(other) is maximum/minimum, as
** torch.max(a, b). */
/* No dim (nil or absent) and nothing after it: keepdim alone has no dims
** to keep (PyTorch's x.max(keepdim=True) is a TypeError too). */
static void no_dim_nothing_more(lua_State *L, const char *op) {
  int top = lua_gettop(L);
  while (top > 2 && lua_isnil(L, top)) top--;
  if (top > 2) luaL_error(L, "ember.%s: keepdim needs a dim (got a %s after no dim)", op, luaL_typename(L, 3));
}

static int max_min(lua_State *L, int is_max) {
  const char *op = is_max ? "max" : "min";
  em_tensor *t = lember_checktensor(L, 1);
  em_status s;
  if (lember_istensor(L, 2)) {
    lember_noextra(L, 2, op, "other");
    em_tensor **out = lember_newslot(L);
    s = em_binary(out, is_max ? EM_MAXIMUM : EM_MINIMUM, t, lember_checktensor(L, 2));
    if (s) return lember_error(L, op, s);
    lember_account(L, *out);
    return 1;
  }
  if (lua_isnoneornil(L, 2)) {
    no_dim_nothing_more(L, op);
    em_tensor **out = lember_newslot(L);
    s = is_max ? em_max_all(out, t) : em_min_all(out, t);
    if (s) return lember_error(L, op, s);
    lember_account(L, *out);
    return 1;
  }
  int d = reduce_dim(L, 2, op, t);
  int keep = opt_keepdim(L, 3, op);
  lember_noextra(L, 3, op, "dim, keepdim");
  em_tensor **vals = lember_newslot(L);
  em_tensor **idx = lember_newslot(L);
  em_tensor *view = NULL;
  if (t->ndim == 0) t = scalar_view(L, t, op, &view), keep = 0;
  s = is_max ? em_max(vals, idx, t, d, keep) : em_min(vals, idx, t, d, keep);
  em_release(view);
  if (!s) s = lember_index_to_lua(idx);
  if (s) return lember_error(L, op, s);
  lember_account(L, *vals);
  lember_account(L, *idx);
  return 2;
}

static int m_max(lua_State *L) { return max_min(L, 1); }
static int m_min(lua_State *L) { return max_min(L, 0); }

/* argmax/argmin([dim [, keepdim]]), 1-based; no dim: over all elements,
** every dim kept as size 1 with keepdim (torch.argmax(x, keepdim=True)). */
static int arg_max_min(lua_State *L, int is_max) {
  const char *op = is_max ? "argmax" : "argmin";
  em_tensor *t = lember_checktensor(L, 1);
  em_tensor *flat = NULL;
  em_status s = EM_OK;
  int d = 0, keep = 0;
  if (lua_isnoneornil(L, 2)) {
    keep = opt_keepdim(L, 3, op);
    lember_noextra(L, 3, op, "dim, keepdim");
    int64_t all = -1;
    s = em_reshape(&flat, t, 1, &all);
    if (s) return lember_error(L, op, s);
  } else {
    d = reduce_dim(L, 2, op, t);
    keep = opt_keepdim(L, 3, op);
    lember_noextra(L, 3, op, "dim, keepdim");
    if (t->ndim == 0) flat = scalar_view(L, t, op, &flat), keep = 0;
  }
  em_tensor **out = lember_newslot(L);
  em_tensor *x = flat ? flat : t;
  s = is_max ? em_argmax(out, x, d, flat ? 0 : keep) : em_argmin(out, x, d, flat ? 0 : keep);
  em_release(flat);
  if (!s && flat && keep) { /* every dim kept, as size 1 */
    int64_t ones[EM_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) ones[i] = 1;
    em_tensor *r = NULL;
    s = em_reshape(&r, *out, t->ndim, ones);
    em_release(*out);
    *out = r;
  }
  if (!s) s = lember_index_to_lua(out);
  if (s) return lember_error(L, op, s);
  lember_account(L, *out);
  return 1;
}

static int m_argmax(lua_State *L) { return arg_max_min(L, 1); }
static int m_argmin(lua_State *L) { return arg_max_min(L, 0); }

static const luaL_Reg methods[] = {
  {"sum", m_sum}, {"mean", m_mean}, {"var", m_var}, {"max", m_max}, {"min", m_min},
  {"argmax", m_argmax}, {"argmin", m_argmin},
  {NULL, NULL}
};

void lember_open_reduce(lua_State *L, int module, int methods_idx, int mt) {
  (void)module;
  (void)mt;
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
}
