/*
** l_autograd.c -- autograd from Lua: t:backward(), grad mode, and
** ember.Function, ops whose forward and backward are Lua functions.
**
** A Function's node carries a C context with registry references to the
** Lua backward and the ctx table. The engine calls the backward from C, so
** the Lua call runs under lua_pcall: a Lua error must not longjmp through
** the engine, it becomes EM_ERR_AUTOGRAD with the Lua message, and
** t:backward() raises it again as a Lua error.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lember.h"

/* The thread that called t:backward(), so Lua backwards run on it. */
static _Thread_local lua_State *backward_thread;

static void grad_hooks_sweep(lua_State *L);

em_status lember_backward(lua_State *L, em_tensor *root, em_tensor *grad, int retain) {
  lua_State *prev = backward_thread;
  backward_thread = L;
  em_status s = em_backward(root, grad, retain);
  backward_thread = prev;
  if (!prev) grad_hooks_sweep(L); /* the outermost backward: drop the hooks of freed nodes */
  return s;
}

/* retain_graph from an options table at idx (PyTorch's keyword), and the
** gradient when the table is the first argument. */
static void backward_options(lua_State *L, int idx, em_tensor **g, int *retain) {
  static const char *const names[] = {"gradient", "retain_graph", "create_graph", NULL};
  lember_checkoptions(L, idx, "backward", names);
  if (lua_getfield(L, idx, "create_graph") != LUA_TNIL && lua_toboolean(L, -1))
    luaL_error(L, "ember.backward: create_graph is not supported: ember's backward is not itself "
                  "differentiable (no higher-order gradients)");
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "retain_graph") != LUA_TNIL) {
    if (!lua_isboolean(L, -1)) luaL_error(L, "ember.backward: retain_graph must be a boolean");
    *retain = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  if (g && lua_getfield(L, idx, "gradient") != LUA_TNIL) *g = lember_checktensor(L, -1);
  if (g) lua_pop(L, 1);
}

/* t:backward([grad] [, retain_graph]), or with PyTorch's keywords as a
** table: t:backward{gradient = g, retain_graph = true}, t:backward(g, {retain_graph = true}) */
static int m_backward(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  em_tensor *g = NULL;
  int retain = 0;
  if (lua_isboolean(L, 2)) { /* t:backward(true) */
    lember_noextra(L, 2, "backward", "retain_graph");
    retain = lua_toboolean(L, 2);
  } else if (lua_istable(L, 2)) {
    lember_noextra(L, 2, "backward", "options");
    backward_options(L, 2, &g, &retain);
  } else {
    if (!lua_isnoneornil(L, 2)) {
      if (!lember_istensor(L, 2))
        return luaL_error(L, "ember.backward: gradient must be a tensor (or nil), got %s", luaL_typename(L, 2));
      g = lember_checktensor(L, 2);
    }
    if (lua_istable(L, 3)) {
      backward_options(L, 3, NULL, &retain);
    } else if (!lua_isnoneornil(L, 3)) {
      if (!lua_isboolean(L, 3))
        return luaL_error(L, "ember.backward: retain_graph must be a boolean, got %s", luaL_typename(L, 3));
      retain = lua_toboolean(L, 3);
    }
    lember_noextra(L, 3, "backward", "gradient, retain_graph");
  }
  em_status s = lember_backward(L, t, g, retain);
  if (s) return lember_error(L, "backward", s);
  return 0;
}

/* t:requires_grad_([on=true]) returns t */
static int m_requires_grad_(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (!lua_isnoneornil(L, 2) && !lua_isboolean(L, 2))
    return luaL_error(L, "ember.requires_grad_: expected a boolean, got %s", luaL_typename(L, 2));
  int on = lua_isnoneornil(L, 2) ? 1 : lua_toboolean(L, 2);
  em_status s = em_set_requires_grad(t, on);
  if (s) return lember_error(L, "requires_grad_", s);
  lua_settop(L, 1);
  return 1;
}

/* ember.no_grad(fn, ...) runs fn with grad mode off and returns its results. */
static int f_no_grad(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  bool prev = em_set_grad_enabled(false);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  em_set_grad_enabled(prev);
  if (status != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

static int f_set_grad_enabled(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  lua_pushboolean(L, em_set_grad_enabled(lua_toboolean(L, 1)));
  return 1;
}

static int f_is_grad_enabled(lua_State *L) {
  lua_pushboolean(L, em_grad_enabled());
  return 1;
}

/* ---------------------------------------------------------------- */
/* Gradient-ready hooks                                              */
/* ---------------------------------------------------------------- */

/* The registry holds, under &hooks_key, a table leaf pointer (light
** userdata) -> {tensor, fn, fn, ...}: the entry keeps the tensor alive,
** so its address cannot be reused by another tensor while hooked. Under
** &end_hooks_key a table of the backward-end functions (as keys). The C
** hook is set while any hook is registered. */
static const char hooks_key = 'h', end_hooks_key = 'e';
static int n_hooks;

static int hooks_dispatch_protected(lua_State *L) {
  em_tensor *leaf = (em_tensor *)lua_touserdata(L, 1);
  if (!leaf) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &end_hooks_key) != LUA_TTABLE) return 0;
    lua_newtable(L); /* a copy, so a hook may remove itself */
    for (lua_pushnil(L); lua_next(L, -3); lua_pop(L, 1)) {
      lua_pushvalue(L, -2);
      lua_rawseti(L, -4, (lua_Integer)luaL_len(L, -4) + 1);
    }
    for (lua_Integer i = 1, n = luaL_len(L, -1); i <= n; i++) {
      lua_rawgeti(L, -1, i);
      lua_call(L, 0, 0);
    }
    return 0;
  }
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &hooks_key) != LUA_TTABLE) return 0;
  if (lua_rawgetp(L, -1, leaf) != LUA_TTABLE) return 0;
  int entry = lua_gettop(L);
  for (lua_Integer i = 2, n = luaL_len(L, entry); i <= n; i++) {
    lua_rawgeti(L, entry, i);
    lua_rawgeti(L, entry, 1);
    lua_call(L, 1, 0);
  }
  return 0;
}

/* The C hook: runs the Lua hooks on the thread that called backward; a
** Lua error becomes the backward's error instead of a longjmp through
** the engine. */
static em_status hooks_dispatch(em_tensor *leaf, void *ud) {
  (void)ud;
  lua_State *L = backward_thread;
  if (!L) return EM_OK; /* a backward started from C */
  if (!lua_checkstack(L, 8)) return em_error(EM_ERR_OOM, "backward hook: Lua stack overflow");
  lua_pushcfunction(L, hooks_dispatch_protected);
  lua_pushlightuserdata(L, leaf);
  if (lua_pcall(L, 1, 0, 0) == LUA_OK) return EM_OK;
  em_status s = em_error(EM_ERR_AUTOGRAD, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "a hook failed");
  lua_pop(L, 1);
  return s;
}

static void hooks_count(int delta) {
  n_hooks += delta;
  em_set_grad_ready_hook(n_hooks > 0 ? hooks_dispatch : NULL, NULL);
}

static int grad_hooks_gc(lua_State *L);
static const char grad_hooks_key = 'g';

static void hooks_table(lua_State *L, const char *key) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    if (key == &grad_hooks_key) { /* its entries hold node references: released when the state closes */
      lua_createtable(L, 0, 1);
      lua_pushcfunction(L, grad_hooks_gc);
      lua_setfield(L, -2, "__gc");
      lua_setmetatable(L, -2);
    }
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, key);
  }
}

/* handle:remove(): upvalues are the tensor's pointer (or false for a
** backward-end hook) and the function; a second call does nothing. */
/* A handle's key: a light userdata as it is (a node), or the tensor a
** full userdata wraps now (a leaf: t:_assign may have given it another
** tensor, and lember_rekey_hooks moved its entries there); NULL for false. */
static void *hook_key(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TLIGHTUSERDATA) return lua_touserdata(L, idx);
  if (lua_type(L, idx) == LUA_TUSERDATA) return *(em_tensor **)lua_touserdata(L, idx);
  return NULL;
}

static int hook_remove(lua_State *L) {
  if (lua_toboolean(L, lua_upvalueindex(3))) return 0;
  lua_pushboolean(L, 1);
  lua_replace(L, lua_upvalueindex(3));
  void *leaf = hook_key(L, lua_upvalueindex(1));
  if (!leaf && !lua_toboolean(L, lua_upvalueindex(1))) {
    hooks_table(L, &end_hooks_key);
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_pushnil(L);
    lua_rawset(L, -3);
  } else {
    if (!leaf) return 0; /* the tensor was closed */
    hooks_table(L, &hooks_key);
    if (lua_rawgetp(L, -1, leaf) != LUA_TTABLE) return 0;
    lua_Integer n = luaL_len(L, -1), at = 0;
    for (lua_Integer i = 2; i <= n && !at; i++) {
      lua_rawgeti(L, -1, i);
      if (lua_rawequal(L, -1, lua_upvalueindex(2))) at = i;
      lua_pop(L, 1);
    }
    if (!at) return 0;
    for (lua_Integer i = at; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      lua_rawseti(L, -2, i);
    }
    lua_pushnil(L);
    lua_rawseti(L, -2, n);
    if (n == 2) { /* nothing left: drop the entry and with it the tensor */
      lua_pushnil(L);
      lua_rawsetp(L, -3, leaf);
    }
  }
  hooks_count(-1);
  return 0;
}

/* leaf: the stack index of the tensor, or 0 for a backward-end hook. */
static void push_hook_handle(lua_State *L, int leaf, int fn) {
  lua_newtable(L);
  if (leaf) lua_pushvalue(L, leaf); else lua_pushboolean(L, 0);
  lua_pushvalue(L, fn);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, hook_remove, 3);
  lua_setfield(L, -2, "remove");
  hooks_count(1);
}

/* t:register_grad_ready_hook(fn) -> handle: fn(t) runs inside backward
** once t.grad holds this pass's whole gradient (PyTorch's
** register_post_accumulate_grad_hook); handle:remove() takes it away. */
static int m_register_grad_ready_hook(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (t->grad_fn || !t->requires_grad)
    return luaL_error(L, "ember.register_grad_ready_hook: only leaf tensors that require grad "
                         "get a gradient to hook");
  hooks_table(L, &hooks_key);
  if (lua_rawgetp(L, -1, t) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, t);
  }
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  push_hook_handle(L, 1, 2);
  return 1;
}

/* ember.register_backward_end_hook(fn) -> handle: fn() runs at the end of
** every backward that succeeded so far, still inside it. */
static int f_register_backward_end_hook(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  hooks_table(L, &end_hooks_key);
  lua_pushvalue(L, 1);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  push_hook_handle(L, 0, 1);
  return 1;
}

/* ---------------------------------------------------------------- */
/* Tensor gradient hooks: t:register_hook(fn), t:retain_grad()       */
/* ---------------------------------------------------------------- */

/* The registry holds, under &grad_hooks_key, a table keyed by the light
** userdata of a node (a non-leaf's grad_fn when the hook was registered)
** or of a leaf tensor, to an entry {fn, fn, ..., node = true|false,
** owner = the leaf's userdata, retain = a non-leaf's userdata whose .grad
** keeps the gradient}. A node entry holds a reference to the node, so its
** address cannot be reused while the entry lives; the entry goes when its
** node is freed by a backward (the hooks can never fire again) or when the
** last hook is removed. The C hook is set while any entry exists. */
static int n_grad_entries;

static em_status grad_hook_dispatch(em_node *node, em_tensor *leaf, em_tensor **g, void *ud);

static void grad_entries_count(int delta) {
  n_grad_entries += delta;
  em_set_grad_hook(n_grad_entries > 0 ? grad_hook_dispatch : NULL, NULL);
}

typedef struct grad_hook_call {
  em_node *node;
  em_tensor *leaf;
  em_tensor **g;
} grad_hook_call;

static int grad_hook_protected(lua_State *L) {
  grad_hook_call *c = (grad_hook_call *)lua_touserdata(L, 1);
  void *key = c->node ? (void *)c->node : (void *)c->leaf;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_hooks_key) != LUA_TTABLE) return 0;
  if (lua_rawgetp(L, -1, key) != LUA_TTABLE) return 0;
  int entry = lua_gettop(L);
  for (lua_Integer i = 1, n = luaL_len(L, entry); i <= n; i++) {
    lua_rawgeti(L, entry, i);
    lember_pushtensor(L, em_retain(*c->g));
    lua_call(L, 1, 1);
    if (!lua_isnil(L, -1)) {
      em_tensor *r = lember_testtensor(L, -1);
      if (!r) return luaL_error(L, "ember.register_hook: a hook must return nil or a tensor, got %s",
                                luaL_typename(L, -1));
      em_release(*c->g);
      *c->g = em_retain(r);
    }
    lua_pop(L, 1);
  }
  if (lua_getfield(L, entry, "retain") == LUA_TUSERDATA) {
    em_tensor *t = lember_checktensor(L, -1);
    em_status s;
    if (!t->grad) {
      em_tensor *copy;
      s = em_clone(&copy, *c->g);
      if (s == EM_OK) t->grad = copy;
    } else {
      s = em_add_(t->grad, *c->g, 1.0);
    }
    if (s) return lember_error(L, "retain_grad", s);
  }
  return 0;
}

static em_status grad_hook_dispatch(em_node *node, em_tensor *leaf, em_tensor **g, void *ud) {
  (void)ud;
  lua_State *L = backward_thread;
  if (!L) return EM_OK; /* a backward started from C */
  if (!lua_checkstack(L, 8)) return em_error(EM_ERR_OOM, "gradient hook: Lua stack overflow");
  grad_hook_call c = {node, leaf, g};
  lua_pushcfunction(L, grad_hook_protected);
  lua_pushlightuserdata(L, &c);
  if (lua_pcall(L, 1, 0, 0) == LUA_OK) return EM_OK;
  em_status s = em_error(EM_ERR_AUTOGRAD, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "a gradient hook failed");
  lua_pop(L, 1);
  return s;
}

/* Drops the entry at key from the table at idx (and the node reference). */
static void grad_entry_drop(lua_State *L, int tbl, void *key) {
  if (lua_rawgetp(L, tbl, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  bool node = lua_getfield(L, -1, "node") == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 2);
  lua_pushnil(L);
  lua_rawsetp(L, tbl, key);
  if (node) em_node_release((em_node *)key);
  grad_entries_count(-1);
}

/* The table's __gc (lua_close): the node references of hooks that never
** fired (a non-leaf never backpropagated through) are released. */
static int grad_hooks_gc(lua_State *L) {
  for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
    if (lua_type(L, -1) != LUA_TTABLE) continue;
    const bool node = lua_getfield(L, -1, "node") == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (node) em_node_release((em_node *)lua_touserdata(L, -2));
    grad_entries_count(-1);
  }
  return 0;
}

static void grad_hooks_sweep(lua_State *L) {
  if (n_grad_entries == 0 || !lua_checkstack(L, 8)) return;
  int top = lua_gettop(L);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_hooks_key) != LUA_TTABLE) {
    lua_settop(L, top);
    return;
  }
  int tbl = lua_gettop(L);
  lua_newtable(L); /* the keys to drop: a table may not lose keys while next() walks it */
  int dead = lua_gettop(L);
  lua_Integer n_dead = 0;
  for (lua_pushnil(L); lua_next(L, tbl); lua_pop(L, 1)) {
    lua_getfield(L, -1, "node");
    if (lua_toboolean(L, -1) && ((em_node *)lua_touserdata(L, -3))->released) {
      lua_pushvalue(L, -3);
      lua_rawseti(L, dead, ++n_dead);
    }
    lua_pop(L, 1);
  }
  for (lua_Integer i = 1; i <= n_dead; i++) {
    lua_rawgeti(L, dead, i);
    void *key = lua_touserdata(L, -1);
    lua_pop(L, 1);
    grad_entry_drop(L, tbl, key);
  }
  lua_settop(L, top);
}

/* The entry of t (created when missing) on the top of the stack; its key
** through *key. */
static int grad_entry_of(lua_State *L, int ti, em_tensor *t, void **key) {
  hooks_table(L, &grad_hooks_key);
  int tbl = lua_gettop(L);
  *key = t->grad_fn ? (void *)t->grad_fn : (void *)t;
  if (lua_rawgetp(L, tbl, *key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    if (t->grad_fn) {
      em_node_retain(t->grad_fn);
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "node");
    } else {
      lua_pushvalue(L, ti);
      lua_setfield(L, -2, "owner");
    }
    lua_pushvalue(L, -1);
    lua_rawsetp(L, tbl, *key);
    grad_entries_count(1);
  }
  lua_remove(L, tbl);
  return lua_gettop(L);
}

/* handle:remove(): upvalues are the key, the function and a done flag. */
static int grad_hook_remove(lua_State *L) {
  if (lua_toboolean(L, lua_upvalueindex(3))) return 0;
  lua_pushboolean(L, 1);
  lua_replace(L, lua_upvalueindex(3));
  void *key = hook_key(L, lua_upvalueindex(1));
  if (!key) return 0; /* the tensor was closed */
  hooks_table(L, &grad_hooks_key);
  int tbl = lua_gettop(L);
  if (lua_rawgetp(L, tbl, key) != LUA_TTABLE) return 0;
  int entry = lua_gettop(L);
  lua_Integer n = luaL_len(L, entry), at = 0;
  for (lua_Integer i = 1; i <= n && !at; i++) {
    lua_rawgeti(L, entry, i);
    if (lua_rawequal(L, -1, lua_upvalueindex(2))) at = i;
    lua_pop(L, 1);
  }
  if (!at) return 0;
  for (lua_Integer i = at; i < n; i++) {
    lua_rawgeti(L, entry, i + 1);
    lua_rawseti(L, entry, i);
  }
  lua_pushnil(L);
  lua_rawseti(L, entry, n);
  bool retains = lua_getfield(L, entry, "retain") != LUA_TNIL;
  lua_pop(L, 1);
  if (n == 1 && !retains) grad_entry_drop(L, tbl, key);
  return 0;
}

static void rekey(lua_State *L, const char *key, void *from, void *to) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE && lua_rawgetp(L, -1, from) != LUA_TNIL) {
    lua_rawsetp(L, -2, to); /* the entry, now under the new address */
    lua_pushnil(L);
    lua_rawsetp(L, -2, from);
  } else if (lua_istable(L, -1)) {
    lua_pop(L, 1); /* the nil */
  }
  lua_pop(L, 1);
}

void lember_rekey_hooks(lua_State *L, em_tensor *from, em_tensor *to) {
  if (from == to || !lua_checkstack(L, 4)) return;
  rekey(L, &hooks_key, from, to);
  rekey(L, &grad_hooks_key, from, to);
}

/* t:register_hook(fn) -> handle: fn(grad) runs in every backward with the
** whole gradient of t (of this pass, for a leaf: before it goes into
** t.grad); a tensor it returns replaces the gradient (torch's
** Tensor.register_hook). handle:remove() takes it away. */
static int m_register_hook(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!t->requires_grad)
    return luaL_error(L, "ember.register_hook: cannot register a hook on a tensor that does not require grad");
  void *key;
  int entry = grad_entry_of(L, 1, t, &key);
  lua_pushvalue(L, 2);
  lua_rawseti(L, entry, (lua_Integer)luaL_len(L, entry) + 1);
  lua_newtable(L);
  if (t->grad_fn) lua_pushlightuserdata(L, key); else lua_pushvalue(L, 1); /* a leaf: found through its value */
  lua_pushvalue(L, 2);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, grad_hook_remove, 3);
  lua_setfield(L, -2, "remove");
  return 1;
}

/* t:retain_grad(): a non-leaf keeps its gradient in t.grad (accumulated
** over backwards, as a leaf's); nothing to do on a leaf. Returns t. */
static int m_retain_grad(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (!t->requires_grad)
    return luaL_error(L, "ember.retain_grad: the tensor does not require grad, so it gets no gradient");
  lua_settop(L, 1);
  if (!t->grad_fn) return 1;
  void *key;
  int entry = grad_entry_of(L, 1, t, &key);
  lua_pushvalue(L, 1);
  lua_setfield(L, entry, "retain");
  lua_settop(L, 1);
  return 1;
}

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
  lua_State *main;   /* the main thread, for refs; backward runs on backward_thread */
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
  lua_State *L = backward_thread;
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

static const luaL_Reg methods[] = {
  {"backward", m_backward},
  {"requires_grad_", m_requires_grad_},
  {"register_grad_ready_hook", m_register_grad_ready_hook},
  {"register_hook", m_register_hook},
  {"retain_grad", m_retain_grad},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"no_grad", f_no_grad},
  {"set_grad_enabled", f_set_grad_enabled},
  {"is_grad_enabled", f_is_grad_enabled},
  {"Function", f_Function},
  {"register_backward_end_hook", f_register_backward_end_hook},
  {NULL, NULL}
};

void lember_open_autograd(lua_State *L, int module, int methods_idx, int mt) {
  (void)mt;
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
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
