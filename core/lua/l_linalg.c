/*
** l_linalg.c -- ember._linalg, the C op under lua/ember/linalg.lua (which
** adds the gradients, broadcasting and torch's names):
**   ember._linalg(op, A [, B] [, {upper=, unitriangular=, full=, name=, ex=}])
** op: "cholesky", "lu", "solve", "trsolve", "qr", "eigh", "svd". Returns
** em_linalg's outputs in its order (em_linalg_args, ember_backend.h); with
** ex = true a numerical failure is no error, and two more values follow:
** the failing batch element (1-based, 0: none) and LAPACK's info.
*/
#include <string.h>

#include "lember.h"

static int f_linalg(lua_State *L) {
  static const char *const ops[] = {"cholesky", "lu", "solve", "trsolve", "qr", "eigh", "svd", NULL};
  static const char *const names[] = {"upper", "unitriangular", "name", "ex", "full", NULL};
  const int op = luaL_checkoption(L, 1, NULL, ops);
  em_tensor *a = lember_checktensor(L, 2);
  const bool two = op == EM_LINALG_SOLVE || op == EM_LINALG_TRSOLVE;
  em_tensor *b = two ? lember_checktensor(L, 3) : NULL;
  const int o = two ? 4 : 3;
  int flags = 0, ex = 0;
  const char *name = NULL;
  if (!lua_isnoneornil(L, o)) {
    lember_checkoptions(L, o, "_linalg", names);
    if (lua_getfield(L, o, "upper") != LUA_TNIL && lua_toboolean(L, -1)) flags |= EM_LINALG_UPPER;
    if (lua_getfield(L, o, "unitriangular") != LUA_TNIL && lua_toboolean(L, -1)) flags |= EM_LINALG_UNIT;
    if (lua_getfield(L, o, "name") == LUA_TSTRING) name = lua_tostring(L, -1); /* kept by the table */
    ex = lua_getfield(L, o, "ex") != LUA_TNIL && lua_toboolean(L, -1);
    if (lua_getfield(L, o, "full") != LUA_TNIL && lua_toboolean(L, -1)) flags |= EM_LINALG_FULL;
    lua_pop(L, 5);
  }
  em_tensor **slot[3];
  for (int i = 0; i < 3; i++) slot[i] = lember_newslot(L);
  em_tensor *out[3];
  int64_t info[2] = {-1, 0};
  em_status s = em_linalg(out, (em_linalg_op)op, a, b, flags, name, ex ? info : NULL);
  static const char *const dflt[] = {"linalg.cholesky", "linalg.lu_factor", "linalg.solve",
                                     "linalg.solve_triangular", "linalg.qr", "linalg.eigh", "linalg.svd"};
  if (s) return lember_error(L, name ? name : dflt[op], s);
  int n = 0;
  for (int i = 0; i < 3; i++)
    if (out[i]) {
      *slot[i] = out[i];
      lember_account(L, out[i]);
      n++;
    }
  /* the filled slots are the first n (em_linalg fills out[] in order) */
  lua_settop(L, lua_gettop(L) - 3 + n);
  if (!ex) return n;
  lua_pushinteger(L, (lua_Integer)(info[0] + 1));
  lua_pushinteger(L, (lua_Integer)info[1]);
  return n + 2;
}

void lember_open_linalg(lua_State *L, int module) {
  lua_pushcfunction(L, f_linalg);
  lua_setfield(L, module, "_linalg");
}
