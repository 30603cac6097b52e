/*
** l_optim.c -- fused optimizer updates for the optimizers in lua/ember/optim/. One Lua
** call updates one parameter tensor in place:
**
**   core.adam_step(param, grad, m, v, lr, beta1, beta2, eps, weight_decay,
**                  step, decoupled [, composed])
**   core.sgd_step(param, grad, buf|nil, lr, momentum, dampening,
**                 weight_decay, nesterov, first_step [, composed])
**
** The update runs in the backend's adam_step / sgd_step kernel. A backend
** without those kernels (they are optional in the ABI) gets the same update
** composed of core in-place ops; `composed = true` forces that path, so
** tests can compare the two.
**
** param, m, v and buf must be contiguous and share param's dtype, device and
** shape (the optimizer makes them with zeros_like-style calls); grad must
** match param's shape, dtype and device and may have any strides.
*/
#include <math.h>
#include <string.h>

#include "ember_backend.h"
#include "lember.h"

/* Checks that `t` fits `p` (same shape, dtype, device). */
static void check_like(lua_State *L, const char *op, const char *what, const em_tensor *t,
                       const em_tensor *p, int need_contig) {
  char a[160], b[160], da[32], db[32];
  int same = t->ndim == p->ndim && memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) == 0;
  if (!same)
    luaL_error(L, "ember.%s: %s has shape %s, the parameter %s", op, what,
               em_shape_str(t->ndim, t->shape, a, sizeof a), em_shape_str(p->ndim, p->shape, b, sizeof b));
  if (t->dtype != p->dtype)
    luaL_error(L, "ember.%s: %s is %s, the parameter %s", op, what, em_dtype_name(t->dtype),
               em_dtype_name(p->dtype));
  if (!em_device_eq(t->device, p->device))
    luaL_error(L, "ember.%s: %s is on %s, the parameter on %s", op, what,
               em_device_str(t->device, da, sizeof da), em_device_str(p->device, db, sizeof db));
  if (need_contig && !em_is_contiguous(t))
    luaL_error(L, "ember.%s: %s must be contiguous", op, what);
}

static void check_param(lua_State *L, const char *op, const em_tensor *p) {
  if (p->dtype != EM_F32 && p->dtype != EM_F64)
    luaL_error(L, "ember.%s: parameters must be float32 or float64, got %s", op,
               em_dtype_name(p->dtype));
  if (!em_is_contiguous(p)) luaL_error(L, "ember.%s: the parameter must be contiguous", op);
}

/* ---------------------------------------------------------------- */
/* Adam / AdamW                                                      */
/* ---------------------------------------------------------------- */

typedef struct adam_args {
  double lr, beta1, beta2, eps, wd;
  int64_t step;
  bool decoupled;
} adam_args;

/* The same update as cpu_adam_step, from core ops (grad mode is off). */
static em_status adam_composed(em_tensor *p, em_tensor *g, em_tensor *m, em_tensor *v,
                               const adam_args *a) {
  em_tensor *gg = NULL, *g2 = NULL, *den = NULL, *upd = NULL, *wdp = NULL;
  em_status s = EM_OK;
  double bc1 = 1 - pow(a->beta1, (double)a->step), bc2s = sqrt(1 - pow(a->beta2, (double)a->step));
  if (a->wd != 0 && a->decoupled) s = em_mul_scalar_(p, 1 - a->lr * a->wd);
  if (!s && a->wd != 0 && !a->decoupled) {
    s = em_binary_scalar(&wdp, EM_MUL, p, a->wd);
    if (!s) s = em_add(&gg, g, wdp);
  } else if (!s) {
    gg = em_retain(g);
  }
  if (!s) s = em_mul_scalar_(m, a->beta1);
  if (!s) s = em_add_(m, gg, 1 - a->beta1);
  if (!s) s = em_mul(&g2, gg, gg);
  if (!s) s = em_mul_scalar_(v, a->beta2);
  if (!s) s = em_add_(v, g2, 1 - a->beta2);
  if (!s) s = em_unary(&den, EM_SQRT, v, 0, 0);
  if (!s) s = em_mul_scalar_(den, 1 / bc2s);
  if (!s) {
    em_tensor *d2 = NULL;
    s = em_binary_scalar(&d2, EM_ADD, den, a->eps);
    em_release(den);
    den = d2;
  }
  if (!s) s = em_div(&upd, m, den);
  if (!s) s = em_add_(p, upd, -a->lr / bc1);
  em_release(gg);
  em_release(g2);
  em_release(den);
  em_release(upd);
  em_release(wdp);
  return s;
}

static int l_adam_step(lua_State *L) {
  const char *op = "adam_step";
  em_tensor *p = lember_checktensor(L, 1), *g = lember_checktensor(L, 2);
  em_tensor *m = lember_checktensor(L, 3), *v = lember_checktensor(L, 4);
  adam_args a;
  a.lr = luaL_checknumber(L, 5);
  a.beta1 = luaL_checknumber(L, 6);
  a.beta2 = luaL_checknumber(L, 7);
  a.eps = luaL_checknumber(L, 8);
  a.wd = luaL_checknumber(L, 9);
  a.step = lember_checkint(L, 10, op, "step");
  a.decoupled = lua_toboolean(L, 11);
  int composed = lua_toboolean(L, 12);
  if (a.decoupled) op = "adamw_step";
  check_param(L, op, p);
  check_like(L, op, "the gradient", g, p, 0);
  check_like(L, op, "exp_avg", m, p, 1);
  check_like(L, op, "exp_avg_sq", v, p, 1);
  if (a.step < 1) return luaL_error(L, "ember.%s: step %I, expected >= 1", op, (lua_Integer)a.step);
  if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1))
    return luaL_error(L, "ember.%s: betas (%f, %f) must lie in [0, 1)", op, a.beta1, a.beta2);
  if (!(a.lr >= 0) || !(a.eps >= 0) || !(a.wd >= 0))
    return luaL_error(L, "ember.%s: lr, eps and weight_decay must be >= 0, got %f, %f, %f", op,
                      a.lr, a.eps, a.wd);
  const em_backend *be = em_backend_of(p);
  em_tensor *gc = NULL;
  em_status s = em_contiguous(&gc, g);
  if (s) return lember_error(L, op, s);
  if (be->adam_step && !composed) {
    s = be->adam_step(p->device.index, p->dtype, em_numel(p), em_data(p), em_data(gc), em_data(m),
                      em_data(v), a.lr, a.beta1, a.beta2, a.eps, a.wd, a.step, a.decoupled);
  } else {
    bool prev = em_set_grad_enabled(false);
    s = adam_composed(p, gc, m, v, &a);
    em_set_grad_enabled(prev);
  }
  em_release(gc);
  if (s) return lember_error(L, op, s);
  return 0;
}

/* ---------------------------------------------------------------- */
/* SGD                                                               */
/* ---------------------------------------------------------------- */

typedef struct sgd_args {
  double lr, momentum, dampening, wd;
  bool nesterov, first;
} sgd_args;

/* The same update as cpu_sgd_step, from core ops (grad mode is off). */
static em_status sgd_composed(em_tensor *p, em_tensor *g, em_tensor *buf, const sgd_args *a) {
  em_tensor *d = NULL, *wdp = NULL, *nd = NULL;
  em_status s = EM_OK;
  if (a->wd != 0) {
    s = em_binary_scalar(&wdp, EM_MUL, p, a->wd);
    if (!s) s = em_add(&d, g, wdp);
  } else {
    d = em_retain(g);
  }
  if (!s && a->momentum != 0) {
    if (a->first) {
      s = em_copy_(buf, d);
    } else {
      s = em_mul_scalar_(buf, a->momentum);
      if (!s) s = em_add_(buf, d, 1 - a->dampening);
    }
    if (!s && a->nesterov) {
      s = em_clone(&nd, d);
      if (!s) s = em_add_(nd, buf, a->momentum);
    } else if (!s) {
      nd = em_retain(buf);
    }
    if (!s) {
      em_release(d);
      d = nd;
      nd = NULL;
    }
  }
  if (!s) s = em_add_(p, d, -a->lr);
  em_release(d);
  em_release(wdp);
  em_release(nd);
  return s;
}

static int l_sgd_step(lua_State *L) {
  const char *op = "sgd_step";
  em_tensor *p = lember_checktensor(L, 1), *g = lember_checktensor(L, 2);
  em_tensor *buf = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  sgd_args a;
  a.lr = luaL_checknumber(L, 4);
  a.momentum = luaL_checknumber(L, 5);
  a.dampening = luaL_checknumber(L, 6);
  a.wd = luaL_checknumber(L, 7);
  a.nesterov = lua_toboolean(L, 8);
  a.first = lua_toboolean(L, 9);
  int composed = lua_toboolean(L, 10);
  check_param(L, op, p);
  check_like(L, op, "the gradient", g, p, 0);
  if (buf) check_like(L, op, "momentum_buffer", buf, p, 1);
  if (a.momentum != 0 && !buf)
    return luaL_error(L, "ember.sgd_step: momentum %f needs a momentum buffer", a.momentum);
  if (a.nesterov && (a.momentum <= 0 || a.dampening != 0))
    return luaL_error(L, "ember.sgd_step: nesterov needs momentum > 0 and dampening 0, got "
                         "momentum %f, dampening %f", a.momentum, a.dampening);
  if (!(a.lr >= 0) || !(a.momentum >= 0) || !(a.wd >= 0))
    return luaL_error(L, "ember.sgd_step: lr, momentum and weight_decay must be >= 0, got %f, %f, %f",
                      a.lr, a.momentum, a.wd);
  const em_backend *be = em_backend_of(p);
  em_tensor *gc = NULL;
  em_status s = em_contiguous(&gc, g);
  if (s) return lember_error(L, op, s);
  if (be->sgd_step && !composed) {
    s = be->sgd_step(p->device.index, p->dtype, em_numel(p), em_data(p), em_data(gc),
                     buf ? em_data(buf) : NULL, a.lr, a.momentum, a.dampening, a.wd, a.nesterov,
                     a.first);
  } else {
    bool prev = em_set_grad_enabled(false);
    s = sgd_composed(p, gc, buf, &a);
    em_set_grad_enabled(prev);
  }
  em_release(gc);
  if (s) return lember_error(L, op, s);
  return 0;
}

void lember_open_optim(lua_State *L, int module) {
  static const luaL_Reg fns[] = {
    {"adam_step", l_adam_step},
    {"sgd_step", l_sgd_step},
    {NULL, NULL},
  };
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
