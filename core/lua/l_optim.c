/*
** l_optim.c -- the fused optimizer steps (core/src/ops_optim.c) for the
** optimizers in lua/ember/optim/. One Lua call updates one parameter in
** place:
**
**   core.adam_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay,
**                  step, decoupled [, composed])
**   core.sgd_step(param, grad, buf|nil, lr, momentum, dampening,
**                 weight_decay, nesterov, first_step [, composed])
**   core._sum_squares({t1, ...} [, composed]) -> number (clip_grad_norm)
**
** `composed = true` runs the update composed of core ops instead of the
** backend's fused kernel, so tests can compare the two.
*/
#include "lember.h"

static int l_adam_step(lua_State *L) {
  em_tensor *p = lember_checktensor(L, 1), *g = lember_checktensor(L, 2);
  em_tensor *m = lember_checktensor(L, 3), *v = lember_checktensor(L, 4);
  em_adam_opts o;
  o.lr = luaL_checknumber(L, 5);
  o.beta1 = luaL_checknumber(L, 6);
  o.beta2 = luaL_checknumber(L, 7);
  o.eps = luaL_checknumber(L, 8);
  o.weight_decay = luaL_checknumber(L, 9);
  o.step = lember_checkint(L, 10, "adam_step", "step");
  o.decoupled = lua_toboolean(L, 11);
  o.composed = lua_toboolean(L, 12);
  em_status s = em_adam_step(p, g, m, v, &o);
  if (s) return lember_error(L, o.decoupled ? "adamw_step" : "adam_step", s);
  return 0;
}

/* core._sum_squares({t1, t2, ...} [, composed]) -> number: the sum of the
** squares of every element, in float64 (clip_grad_norm). */
static int l_sum_squares(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const int n = (int)luaL_len(L, 1);
  em_tensor *small[64], **ts = n <= 64 ? small : lua_newuserdatauv(L, (size_t)n * sizeof *ts, 0);
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    ts[i] = lember_checktensor(L, -1);
    lua_pop(L, 1);
  }
  double total;
  em_status s = em_sum_squares(&total, n, ts, lua_toboolean(L, 2));
  if (s) return lember_error(L, "sum_squares", s);
  lua_pushnumber(L, total);
  return 1;
}

static int l_sgd_step(lua_State *L) {
  em_tensor *p = lember_checktensor(L, 1), *g = lember_checktensor(L, 2);
  em_tensor *buf = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  em_sgd_opts o;
  o.lr = luaL_checknumber(L, 4);
  o.momentum = luaL_checknumber(L, 5);
  o.dampening = luaL_checknumber(L, 6);
  o.weight_decay = luaL_checknumber(L, 7);
  o.nesterov = lua_toboolean(L, 8);
  o.first_step = lua_toboolean(L, 9);
  o.composed = lua_toboolean(L, 10);
  em_status s = em_sgd_step(p, g, buf, &o);
  if (s) return lember_error(L, "sgd_step", s);
  return 0;
}

void lember_open_optim(lua_State *L, int module) {
  static const luaL_Reg fns[] = {
    {"adam_step", l_adam_step},
    {"sgd_step", l_sgd_step},
    {"_sum_squares", l_sum_squares},
    {NULL, NULL},
  };
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
