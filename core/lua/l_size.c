/*
** l_size.c -- ember.Size, what t.shape and t:size() return: a plain
** sequence of integers (so t.shape[1], #t.shape, ipairs and table.unpack
** work, and any function taking a shape table takes it) with a metatable
** that prints it as `ember.Size{2, 3}` and compares it by value with ==
** (against another Size or a plain table of numbers).
** Every t.shape and t:size() is a fresh copy, so writing into one never
** reaches the tensor or a later t:size() (Torch7's t:size() was a copy
** too). Its entries are plain fields, so that next, pairs and luassert's
** `same` see a sequence; writes to them cannot be caught, but every other
** write is: s[-1] = n writes the last size (as s[-1] reads it), and new
** positions (s[3] of a 2-d Size, s[0]), names and non-integer sizes at a
** negative position raise naming ember.Size, so a Size holds a shape.
**   ember.Size{2, 3}      -- makes one
**   s:numel()             -- the number of elements of that shape
**   s[-1]                 -- the last size (negative positions from the end)
*/
#include "lember.h"

static char size_key; /* registry key of the metatable */

void lember_pushsize(lua_State *L, int ndim, const int64_t *shape) {
  lua_createtable(L, ndim, 0);
  for (int i = 0; i < ndim; i++) {
    lua_pushinteger(L, (lua_Integer)shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &size_key);
  lua_setmetatable(L, -2);
}

static int s_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "ember.Size{");
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    luaL_addvalue(&b); /* numbers convert; anything else was put there by hand */
    if (i < n) luaL_addstring(&b, ", ");
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return 1;
}

/* Equal when both are tables with the same length and equal entries. */
static int s_eq(lua_State *L) {
  if (!lua_istable(L, 1) || !lua_istable(L, 2) || lua_rawlen(L, 1) != lua_rawlen(L, 2)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    lua_rawgeti(L, 2, i);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) {
      lua_pushboolean(L, 0);
      return 1;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int s_numel(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1), p = 1;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    p *= lua_tointeger(L, -1);
    lua_pop(L, 1);
  }
  lua_pushinteger(L, p);
  return 1;
}

/* s[-1] is the last size (negative positions count from the end, as dims
** do everywhere in ember: x.shape[-1] as in PyTorch); other missing
** integer keys are nil (ipairs stops there); names are the methods. */
static int s_index(lua_State *L) {
  if (lua_isinteger(L, 2)) {
    lua_Integer k = lua_tointeger(L, 2), n = (lua_Integer)lua_rawlen(L, 1);
    if (k < 0 && k >= -n) {
      lua_rawgeti(L, 1, n + 1 + k);
      return 1;
    }
    lua_pushnil(L);
    return 1;
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &size_key);
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

/* s[k] = v where s has no field k (see the header). */
static int s_newindex(lua_State *L) {
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if (!lua_isinteger(L, 2)) {
    if (lua_type(L, 2) == LUA_TSTRING)
      return luaL_error(L, "ember.Size: cannot set '%s': a Size holds only its sizes", lua_tostring(L, 2));
    return luaL_error(L, "ember.Size: cannot set a %s key: a Size holds only its sizes", luaL_typename(L, 2));
  }
  lua_Integer k = lua_tointeger(L, 2);
  if (k >= 0 || k < -n)
    return luaL_error(L, "ember.Size: position %I is outside a Size of %I dims (a Size does not grow: "
                      "make a table, {table.unpack(s)}, to build another shape)", k, n);
  if (!lua_isinteger(L, 3)) {
    if (lua_type(L, 3) == LUA_TNUMBER)
      return luaL_error(L, "ember.Size: a size must be an integer, got %f", lua_tonumber(L, 3));
    return luaL_error(L, "ember.Size: a size must be an integer, got a %s", luaL_typename(L, 3));
  }
  lua_settop(L, 3);
  lua_rawseti(L, 1, n + 1 + k);
  return 0;
}

/* ember.Size{2, 3} or ember.Size(2, 3): a new Size (argument 1 is the
** Size table itself, since this is its __call). */
static int s_new(lua_State *L) {
  int64_t shape[EM_MAX_DIMS];
  int next;
  int n = lember_checkshape(L, 2, "Size", shape, 0, &next);
  if (!lua_isnone(L, next)) return luaL_error(L, "ember.Size: expected sizes (numbers or one table), got extra %s", luaL_typename(L, next));
  lember_pushsize(L, n, shape);
  return 1;
}

void lember_open_size(lua_State *L, int module, int methods, int mt) {
  (void)methods;
  (void)mt;
  lua_newtable(L);
  lua_pushstring(L, "ember.Size");
  lua_setfield(L, -2, "__name");
  lua_pushcfunction(L, s_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushcfunction(L, s_eq);
  lua_setfield(L, -2, "__eq");
  lua_pushcfunction(L, s_numel);
  lua_setfield(L, -2, "numel");
  lua_pushcfunction(L, s_index);
  lua_setfield(L, -2, "__index"); /* s[-1], s:numel() */
  lua_pushcfunction(L, s_newindex);
  lua_setfield(L, -2, "__newindex"); /* s[-1] = n; new positions and names refused */
  lua_newtable(L); /* the Size table's own metatable: ember.Size{...} */
  lua_pushcfunction(L, s_new);
  lua_setfield(L, -2, "__call");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &size_key);
  lua_setfield(L, module, "Size");
}
