/*
** l_function.c -- ember.Function: ops whose forward and backward are Lua
** functions (torch.autograd.Function). A Function's node carries a C
** context with registry references to the Lua backward and the ctx table.
** The engine calls the backward from C, on the thread that called
** t:backward() (lember_backward_thread), under lua_pcall: a Lua error must
** not longjmp through the engine, it becomes EM_ERR_AUTOGRAD with the Lua
** message, and t:backward() raises it again as a Lua error.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lember.h"

/* ---------------------------------------------------------------- */
/* ember.Function                                                    */
/* ---------------------------------------------------------------- */

/* One em_opdef per Function name, kept for the life of the process: nodes
** point at their opdef and may outlive the Function that made them. */
typedef struct named_opdef {
  em_opdef def;
  struct named_opdef *next;
  char name[64];
} named_opdef;

static named_opdef *opdefs;
static int opdefs_users; /* Lua states that loaded the module */
static pthread_mutex_t opdefs_lock = PTHREAD_MUTEX_INITIALIZER; /* states on several threads */

/* The module is unloaded (dlclose) when its state closes; the list goes
** first. A sentinel in the registry runs this from its __gc, after the
** finalizers of every tensor (finalizers run in reverse order of creation,
** and the sentinel predates all tensors), so no node still points here. */
static int opdefs_release(lua_State *L) {
  (void)L;
  pthread_mutex_lock(&opdefs_lock);
  if (--opdefs_users == 0) {
    while (opdefs) {
      named_opdef *next = opdefs->next;
      free(opdefs);
      opdefs = next;
    }
  }
  pthread_mutex_unlock(&opdefs_lock);
  return 0;
}

static em_status lua_fn_backward(em_node *node, em_tensor *gy, em_tensor **gx);
static void lua_fn_free(void *ctx);

static const em_opdef *opdef_for(const char *name) {
  named_opdef *d;
  pthread_mutex_lock(&opdefs_lock);
  for (d = opdefs; d; d = d->next)
    if (strncmp(d->name, name, sizeof d->name - 1) == 0) break;
  if (!d && (d = (named_opdef *)calloc(1, sizeof *d)) != NULL) {
    snprintf(d->name, sizeof d->name, "%s", name); /* long names are cut */
    d->def.name = d->name;
    d->def.backward = lua_fn_backward;
    d->def.free_ctx = lua_fn_free;
    d->next = opdefs;
    opdefs = d;
  }
  pthread_mutex_unlock(&opdefs_lock);
  return d ? &d->def : NULL;
}

/* The C context of one Function node. */
typedef struct lua_fn_ctx {
  lua_State *main;   /* the main thread, for refs; backward runs on lember_backward_thread() */
  int backward_ref;  /* registry: the Lua backward */
  int ctx_ref;       /* registry: the ctx table */
  const char *name;
  int n_args;        /* arguments of forward after ctx */
  int n_in;          /* of which tensors */
  struct {
    int pos;         /* 1-based argument position of a tensor input */
    em_device dev;   /* its device, which its gradient must be on */
  } in[];
} lua_fn_ctx;

static lua_State *main_thread(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *m = lua_tothread(L, -1);
  lua_pop(L, 1);
  return m;
}

static void lua_fn_free(void *p) {
  lua_fn_ctx *c = (lua_fn_ctx *)p;
  if (!c) return;
  /* May run from a finalizer while another thread runs; the main
  ** thread's stack is only borrowed for the two unrefs. */
  if (lua_checkstack(c->main, 4)) {
    luaL_unref(c->main, LUA_REGISTRYINDEX, c->backward_ref);
    luaL_unref(c->main, LUA_REGISTRYINDEX, c->ctx_ref);
  }
  free(c);
}

typedef struct backward_call {
  em_node *node;
  lua_fn_ctx *c;
  em_tensor *gy;
  em_tensor **gx;
} backward_call;

/* Runs under lua_pcall: calls the Lua backward and collects gradients. */
static int backward_protected(lua_State *L) {
  backward_call *b = (backward_call *)lua_touserdata(L, 1);
  lua_fn_ctx *c = b->c;
  em_node *node = b->node;
  char s1[128], s2[128];
  luaL_checkstack(L, c->n_args + 4, "ember.Function backward");
  int base = lua_gettop(L); /* result k is at base + k */
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->backward_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ctx_ref);
  lember_pushtensor(L, em_retain(b->gy));
  lua_call(L, 2, LUA_MULTRET);
  /* One gradient (or nil) per forward argument after ctx, as PyTorch;
  ** extra nils are harmless, an extra gradient is a bug in the backward. */
  int nres = lua_gettop(L) - base;
  for (int k = c->n_args + 1; k <= nres; k++)
    if (!lua_isnil(L, base + k))
      return luaL_error(L, "backward returned %d values for the %d arguments of forward (after ctx)",
                        nres, c->n_args);
  lua_settop(L, base + c->n_args); /* missing results are nil */
  for (int i = 0; i < c->n_in; i++) {
    int at = base + c->in[i].pos;
    if (lua_isnil(L, at)) continue;
    em_tensor *g = lember_testtensor(L, at);
    char d1[32], d2[32];
    if (!g)
      return luaL_error(L, "backward returned a %s for argument %d, expected a tensor or nil",
                        luaL_typename(L, at), c->in[i].pos);
    if (g->ndim != node->in_ndim[i] ||
        memcmp(g->shape, node->in_shape[i], sizeof(int64_t) * g->ndim) != 0)
      return luaL_error(L, "backward returned a gradient of shape %s for argument %d of shape %s",
                        em_shape_str(g->ndim, g->shape, s1, sizeof s1), c->in[i].pos,
                        em_shape_str(node->in_ndim[i], node->in_shape[i], s2, sizeof s2));
    if (g->dtype != node->in_dtype[i])
      return luaL_error(L, "backward returned a gradient of dtype %s for argument %d of dtype %s",
                        em_dtype_name(g->dtype), c->in[i].pos, em_dtype_name(node->in_dtype[i]));
    if (!em_device_eq(g->device, c->in[i].dev))
      return luaL_error(L, "backward returned a gradient on %s for argument %d on %s",
                        em_device_str(g->device, d1, sizeof d1), c->in[i].pos,
                        em_device_str(c->in[i].dev, d2, sizeof d2));
    b->gx[i] = em_retain(g);
  }
  return 0;
}

/* ctx's private list of what save_for_backward saved: alias, storage
** version when saved, alias, version, ... (ctx.saved is the user's). */
static const char saved_versions_key = 'V';

/* The core's version check (autograd.c) for a Lua Function's saved
** tensors: one written in place since would give a wrong gradient. */
static em_status check_saved_versions(lua_State *L, const lua_fn_ctx *c) {
  em_status s = EM_OK;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ctx_ref);
  if (lua_rawgetp(L, -1, &saved_versions_key) == LUA_TTABLE) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i + 1 <= n && !s; i += 2) {
      lua_rawgeti(L, -1, i);
      lua_rawgeti(L, -2, i + 1);
      em_tensor **p = (em_tensor **)lua_touserdata(L, -2);
      uint64_t was = (uint64_t)lua_tointeger(L, -1);
      if (p && *p && (*p)->storage) {
        uint64_t now = __atomic_load_n(&(*p)->storage->version, __ATOMIC_RELAXED);
        char d[160], dev[32];
        if (now != was)
          s = em_error(EM_ERR_AUTOGRAD,
                       "%s: a tensor saved with save_for_backward (%s %s %s) has been modified by an "
                       "in-place operation since (version %llu, expected %llu); do the in-place op "
                       "after backward, or on a clone", c->name,
                       em_shape_str((*p)->ndim, (*p)->shape, d, sizeof d), em_dtype_name((*p)->dtype),
                       em_device_str((*p)->device, dev, sizeof dev), (unsigned long long)now,
                       (unsigned long long)was);
      }
      lua_pop(L, 2);
    }
  }
  lua_settop(L, top);
  return s;
}

static em_status lua_fn_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  lua_fn_ctx *c = (lua_fn_ctx *)node->ctx;
  lua_State *L = lember_backward_thread();
  if (!L || main_thread(L) != c->main) L = c->main;
  if (!lua_checkstack(L, 8))
    return em_error(EM_ERR_AUTOGRAD, "%s: no Lua stack space to run the backward", c->name);
  em_status vs = check_saved_versions(L, c);
  if (vs) return vs;
  backward_call b = {node, c, gy, gx};
  for (int i = 0; i < c->n_in; i++) gx[i] = NULL;
  int top = lua_gettop(L);
  lua_pushcfunction(L, backward_protected);
  lua_pushlightuserdata(L, &b);
  int status = lua_pcall(L, 1, 0, 0);
  if (status == LUA_OK) {
    lua_settop(L, top);
    return EM_OK;
  }
  const char *msg = lua_tostring(L, -1);
  em_status s = em_error(EM_ERR_AUTOGRAD, "%s: error in the Lua backward: %s", c->name,
                         msg ? msg : "(error object is not a string)");
  lua_settop(L, top);
  for (int i = 0; i < c->n_in; i++) {
    em_release(gx[i]);
    gx[i] = NULL;
  }
  return s;
}

/* ctx:save_for_backward(t1, ...) stores detached aliases in ctx.saved, so
** the ctx (held by the node) does not keep the graph alive. */
static int ctx_save_for_backward(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = lua_gettop(L) - 1;
  lua_createtable(L, 0, 0); /* the versions (saved_versions_key) */
  int versions = lua_gettop(L);
  lua_createtable(L, n, 1);
  for (int i = 1; i <= n; i++) {
    em_tensor *t = lember_testtensor(L, i + 1);
    if (t) {
      em_tensor **out = lember_newslot(L);
      em_status s = em_detach(out, t);
      if (s) return lember_error(L, "save_for_backward", s);
      lember_account(L, *out);
      lua_Integer k = (lua_Integer)lua_rawlen(L, versions);
      lua_pushvalue(L, -1);
      lua_rawseti(L, versions, k + 1);
      lua_pushinteger(L, t->storage ? (lua_Integer)__atomic_load_n(&t->storage->version, __ATOMIC_RELAXED) : 0);
      lua_rawseti(L, versions, k + 2);
    } else {
      lua_pushvalue(L, i + 1);
    }
    lua_rawseti(L, -2, i);
  }
  lua_pushinteger(L, n);
  lua_setfield(L, -2, "n");
  lua_setfield(L, 1, "saved");
  lua_pushvalue(L, versions);
  lua_rawsetp(L, 1, &saved_versions_key);
  return 0;
}

static const char fn_mt_key = 'F';
static const char ctx_mt_key = 'C';
static const char opdefs_key = 'O';

/* F(...) runs forward(ctx, ...) with grad off and records a node. */
static int fn_call(lua_State *L) {
  int nargs = lua_gettop(L) - 1; /* after the Function itself */
  em_tensor *inputs[64];
  int pos[64];
  int n_in = 0;
  const char *name;
  lua_getfield(L, 1, "name");
  name = lua_tostring(L, -1);
  lua_pop(L, 1); /* the Function table keeps the string alive */
  for (int i = 1; i <= nargs; i++) {
    em_tensor *t = lember_testtensor(L, i + 1);
    if (!t) continue;
    if (n_in == 64) return luaL_error(L, "ember.Function '%s': at most 64 tensor inputs", name);
    inputs[n_in] = t;
    pos[n_in++] = i;
  }
  /* ctx table */
  lua_newtable(L);
  int ctx = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &ctx_mt_key);
  lua_setmetatable(L, ctx);
  lua_newtable(L);
  lua_setfield(L, ctx, "saved");
  /* forward(ctx, ...) with grad mode off */
  luaL_checkstack(L, nargs + 4, "ember.Function");
  lua_getfield(L, 1, "forward");
  lua_pushvalue(L, ctx);
  for (int i = 1; i <= nargs; i++) lua_pushvalue(L, i + 1);
  bool prev = em_set_grad_enabled(false);
  int status = lua_pcall(L, nargs + 1, 1, 0);
  em_set_grad_enabled(prev);
  if (status != LUA_OK) return lua_error(L);
  int res = lua_gettop(L);
  em_tensor *y = lember_testtensor(L, res);
  if (!y)
    return luaL_error(L, "ember.Function '%s': forward must return a tensor, got %s", name,
                      luaL_typename(L, res));
  if (!em_autograd_needed(n_in, inputs)) return 1;

  /* The output gets its own header (forward may return an input or a
  ** view of one), and the node records the op on it. */
  const em_opdef *def = opdef_for(name);
  lua_fn_ctx *c = def ? (lua_fn_ctx *)malloc(sizeof *c + sizeof c->in[0] * (size_t)n_in) : NULL;
  if (!c) return luaL_error(L, "ember.Function '%s': out of memory", name);
  c->main = main_thread(L);
  c->name = def->name;
  c->n_args = nargs;
  c->n_in = n_in;
  for (int i = 0; i < n_in; i++) {
    c->in[i].pos = pos[i];
    c->in[i].dev = inputs[i]->device;
  }
  lua_getfield(L, 1, "backward");
  c->backward_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, ctx);
  c->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  em_tensor **out = lember_newslot(L);
  em_status s = em_detach(out, y);
  if (s) {
    lua_fn_free(c);
    return lember_error(L, name, s);
  }
  s = em_autograd_record(*out, def, n_in, inputs, 0, NULL, c); /* frees c on failure */
  if (s) return lember_error(L, name, s);
  lember_account(L, *out);
  return 1;
}

/* ember.Function{name=, forward=, backward=} */
static int f_Function(lua_State *L) {
  static const char *const names[] = {"name", "forward", "backward", NULL};
  luaL_checktype(L, 1, LUA_TTABLE);
  lember_checkoptions(L, 1, "Function", names);
  lua_newtable(L);
  if (lua_getfield(L, 1, "name") == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushliteral(L, "lua_function");
  } else if (lua_type(L, -1) != LUA_TSTRING) {
    return luaL_error(L, "ember.Function: name must be a string, got %s", luaL_typename(L, -1));
  }
  lua_setfield(L, -2, "name");
  for (int i = 1; i <= 2; i++) {
    if (lua_getfield(L, 1, names[i]) != LUA_TFUNCTION)
      return luaL_error(L, "ember.Function: %s must be a function, got %s", names[i],
                        luaL_typename(L, -1));
    lua_setfield(L, -2, names[i]);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &fn_mt_key);
  lua_setmetatable(L, -2);
  return 1;
}

void lember_open_function(lua_State *L, int module, int methods, int mt) {
  (void)methods, (void)mt;
  lua_pushcfunction(L, f_Function);
  lua_setfield(L, module, "Function");
  /* metatable of Functions: callable */
  lua_newtable(L);
  lua_pushcfunction(L, fn_call);
  lua_setfield(L, -2, "__call");
  lua_pushliteral(L, "ember.Function");
  lua_setfield(L, -2, "__name");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &fn_mt_key);
  /* metatable of ctx tables: ctx:save_for_backward() */
  lua_newtable(L);
  lua_newtable(L);
  lua_pushcfunction(L, ctx_save_for_backward);
  lua_setfield(L, -2, "save_for_backward");
  lua_setfield(L, -2, "__index");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &ctx_mt_key);
  /* one sentinel per state, even if the module is loaded twice */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &opdefs_key) == LUA_TNIL) {
    lua_newuserdatauv(L, 1, 0);
    lua_newtable(L);
    lua_pushcfunction(L, opdefs_release);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &opdefs_key);
    pthread_mutex_lock(&opdefs_lock);
    opdefs_users++;
    pthread_mutex_unlock(&opdefs_lock);
  }
  lua_pop(L, 1);
}
