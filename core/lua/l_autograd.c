/*
** l_autograd.c -- autograd from Lua: t:backward(), grad mode, and the
** gradient hooks (register_hook, retain_grad, grad-ready and end-of-
** backward hooks). ember.Function, ops whose forward and backward are Lua
** functions, is l_function.c's.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lember.h"

/* The thread that called t:backward(), so Lua backwards run on it. */
static _Thread_local lua_State *backward_thread;

lua_State *lember_backward_thread(void) { return backward_thread; }

static void grad_hooks_sweep(lua_State *L);

em_status lember_backward(lua_State *L, em_tensor *root, em_tensor *grad, int retain, em_tensor *const *only,
                          int n_only) {
  lua_State *prev = backward_thread;
  backward_thread = L;
  em_status s = n_only < 0 ? em_backward(root, grad, retain) : em_backward_only(root, grad, retain, only, n_only);
  backward_thread = prev;
  if (!prev) grad_hooks_sweep(L); /* the outermost backward: drop the hooks of freed nodes */
  return s;
}

/* retain_graph from an options table at idx (PyTorch's keyword), and the
** gradient when the table is the first argument. */
static void backward_options(lua_State *L, int idx, em_tensor **g, int *retain) {
  static const char *const names[] = {"gradient", "retain_graph", "create_graph", "inputs", NULL};
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

static int m_retain_grad(lua_State *L);

/* The options' `inputs` (PyTorch's backward(inputs=)): a tensor or a list
** of tensors that require grad. Returns how many leaves it put in *only
** (a GC-owned array), -1 when the option is absent; a non-leaf among them
** keeps its gradient (retain_grad), as PyTorch accumulates into its .grad. */
static int backward_inputs(lua_State *L, int opts, em_tensor ***only) {
  if (opts == 0 || lua_getfield(L, opts, "inputs") == LUA_TNIL) {
    if (opts) lua_pop(L, 1);
    return -1;
  }
  const int list = lua_absindex(L, -1);
  const bool one = lember_istensor(L, list);
  if (!one && !lua_istable(L, list))
    luaL_error(L, "ember.backward: inputs must be a tensor or a list of tensors, got %s", luaL_typename(L, list));
  const int n = one ? 1 : (int)luaL_len(L, list);
  *only = lua_newuserdatauv(L, sizeof **only * (size_t)(n ? n : 1), 0); /* freed by the GC, errors too */
  int leaves = 0;
  for (int i = 1; i <= n; i++) {
    if (one) lua_pushvalue(L, list);
    else lua_geti(L, list, i);
    em_tensor *t = lember_testtensor(L, -1);
    if (!t) luaL_error(L, "ember.backward: inputs[%d] is a %s, not a tensor", i, luaL_typename(L, -1));
    if (!t->requires_grad) luaL_error(L, "ember.backward: inputs[%d] does not require grad", i);
    if (t->grad_fn) {
      lua_pushcfunction(L, m_retain_grad);
      lua_pushvalue(L, -2);
      lua_call(L, 1, 0);
    } else {
      (*only)[leaves++] = t;
    }
    lua_pop(L, 1);
  }
  return leaves;
}

/* t:backward([grad] [, retain_graph [, create_graph [, inputs]]]) as
** PyTorch's positional form (create_graph true is refused), or with its
** keywords as a table: t:backward{gradient = g, retain_graph = true,
** inputs = {w}}, t:backward(g, {retain_graph = true}) */
static int m_backward(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  em_tensor *g = NULL;
  int retain = 0, opts = 0;
  if (lua_isboolean(L, 2)) { /* t:backward(true) */
    lember_noextra(L, 2, "backward", "retain_graph");
    retain = lua_toboolean(L, 2);
  } else if (lua_istable(L, 2)) {
    lember_noextra(L, 2, "backward", "options");
    backward_options(L, 2, &g, &retain);
    opts = 2;
  } else {
    if (!lua_isnoneornil(L, 2)) {
      if (!lember_istensor(L, 2))
        return luaL_error(L, "ember.backward: gradient must be a tensor (or nil), got %s", luaL_typename(L, 2));
      g = lember_checktensor(L, 2);
    }
    if (lua_istable(L, 3)) {
      lember_noextra(L, 3, "backward", "gradient, options");
      backward_options(L, 3, NULL, &retain);
      opts = 3;
    } else {
      if (!lua_isnoneornil(L, 3)) {
        if (!lua_isboolean(L, 3))
          return luaL_error(L, "ember.backward: retain_graph must be a boolean, got %s", luaL_typename(L, 3));
        retain = lua_toboolean(L, 3);
      }
      /* PyTorch's positional t.backward(gradient, retain_graph, create_graph, inputs) */
      lember_noextra(L, 5, "backward", "gradient, retain_graph, create_graph, inputs");
      if (!lua_isnoneornil(L, 4) && !lua_isboolean(L, 4))
        return luaL_error(L, "ember.backward: create_graph must be a boolean, got %s", luaL_typename(L, 4));
      if (lua_toboolean(L, 4))
        return luaL_error(L, "ember.backward: create_graph is not supported: ember's backward is not itself "
                          "differentiable (no higher-order gradients)");
      if (!lua_isnoneornil(L, 5)) { /* as the options' inputs */
        lua_createtable(L, 0, 1);
        lua_pushvalue(L, 5);
        lua_setfield(L, -2, "inputs");
        opts = lua_gettop(L);
      }
    }
  }
  em_tensor **only = NULL;
  const int n_only = backward_inputs(L, opts, &only);
  em_status s = lember_backward(L, t, g, retain, only, n_only);
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

/* core._backward_filtered(): inside a backward(inputs=) / autograd.grad
** pass? (nn.checkpoint's recompute then names the leaves it reads.) */
static int f_backward_filtered(lua_State *L) {
  lua_pushboolean(L, em_backward_is_filtered());
  return 1;
}

/* ---------------------------------------------------------------- */
/* Anomaly detection                                                 */
/* ---------------------------------------------------------------- */

/* The state whose Lua frames a node recorded in anomaly mode names: the
** main thread of the state that turned the mode on, on this thread (a
** node made inside a coroutine shows where the coroutine was resumed).
** Frames of ember's own Lua files (anomaly_prefix, their source folder)
** are left out, so the first line is the user's call. */
static _Thread_local lua_State *anomaly_L;
static _Thread_local char anomaly_prefix[512];

static char *anomaly_origin(const char *op, void *ud) {
  (void)op, (void)ud;
  lua_State *L = anomaly_L;
  if (!L) return NULL;
  char buf[768];
  size_t len = 0, plen = strlen(anomaly_prefix);
  int shown = 0;
  lua_Debug ar;
  buf[0] = '\0';
  for (int level = 0; shown < 6 && lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sln", &ar) || ar.currentline <= 0 || strcmp(ar.what, "C") == 0) continue;
    if (plen && strncmp(ar.source, anomaly_prefix, plen) == 0) continue;
    int k;
    if (strcmp(ar.what, "main") == 0)
      k = snprintf(buf + len, sizeof buf - len, "\n\t%s:%d: in main chunk", ar.short_src, ar.currentline);
    else if (ar.name)
      k = snprintf(buf + len, sizeof buf - len, "\n\t%s:%d: in function '%s'", ar.short_src, ar.currentline,
                   ar.name);
    else
      k = snprintf(buf + len, sizeof buf - len, "\n\t%s:%d: in function <%s:%d>", ar.short_src, ar.currentline,
                   ar.short_src, ar.linedefined);
    if (k < 0 || (size_t)k >= sizeof buf - len) break;
    len += (size_t)k;
    shown++;
  }
  if (!shown) return NULL;
  char *out = malloc(len + 1);
  if (out) memcpy(out, buf, len + 1);
  return out; /* NULL on OOM: the node just has no origin */
}

/* ember._set_detect_anomaly(on [, library_source_prefix]) -> previous mode */
static int f_set_detect_anomaly(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  int on = lua_toboolean(L, 1);
  if (on) {
    size_t n = 0;
    const char *prefix = luaL_optlstring(L, 2, "", &n);
    if (n >= sizeof anomaly_prefix) n = 0; /* too long to be a folder: keep every frame */
    memcpy(anomaly_prefix, prefix, n);
    anomaly_prefix[n] = '\0';
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    anomaly_L = lua_tothread(L, -1);
    lua_pop(L, 1);
    em_set_anomaly_origin(anomaly_origin, NULL);
  }
  lua_pushboolean(L, em_set_detect_anomaly(on));
  return 1;
}

static int f_is_anomaly_enabled(lua_State *L) {
  lua_pushboolean(L, em_is_anomaly_enabled());
  return 1;
}

/* Lua states open on this module: the origin callback is this module's
** code, which goes away (dlclose) with the last of them. */
static int anomaly_states;

/* The state closes: its frames can no longer be read, and after the last
** state the callback must not be called any more. */
static int anomaly_state_gc(lua_State *L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  if (anomaly_L == lua_tothread(L, -1)) anomaly_L = NULL;
  lua_pop(L, 1);
  if (__atomic_sub_fetch(&anomaly_states, 1, __ATOMIC_ACQ_REL) == 0) em_set_anomaly_origin(NULL, NULL);
  return 0;
}

/* ---------------------------------------------------------------- */
/* Hook tables                                                       */
/* ---------------------------------------------------------------- */

/* A leaf's hooks live and die with its Lua value, as PyTorch's with the
** tensor. Its entries ({fn, fn, ...}) sit in ephemeron tables (weak keys)
** keyed by the tensor's userdata, under &hooks_key (gradient-ready hooks)
** and &leaf_hooks_key (register_hook): a hook that captures its own tensor
** does not keep it alive. The C hooks get the em_tensor, so the registry
** also maps (under &anchors_key, weak values) a tensor's address (light
** userdata) to the userdata its entries are keyed by, its anchor: the
** first userdata that hooked it (one em_tensor may be wrapped by more
** than one). Lua 5.4 clears weak values before it runs finalizers (manual
** §2.5.4), so when the anchor's __gc releases the tensor the address no
** longer maps to it, and a new tensor at that address finds nothing; an
** anchor that no longer wraps the address (t:close(), t:_assign) counts as
** none. An entry has a __gc that gives back what it counted (n_hooks,
** n_grad_entries) once it is collected with its tensor. Unlike PyTorch's,
** a leaf's hooks go with its Lua value, not with the em_tensor: a leaf
** that only a graph still holds (its value dropped and collected before
** the backward) runs none. */
static const char hooks_key = 'h', end_hooks_key = 'e', leaf_hooks_key = 'l', anchors_key = 'a';
static const char ready_entry_mt_key = 'r', leaf_entry_mt_key = 'm', handle_mt_key = 'w';

/* The registry table at key (created, with a metatable of mode if not
** NULL, when missing) on the top of the stack. */
static void registry_table(lua_State *L, const char *key, const char *mode) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  if (mode) {
    lua_createtable(L, 0, 1);
    lua_pushstring(L, mode);
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
  }
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

/* Pushes the anchor of leaf t and returns 1, or returns 0 (nothing pushed)
** when t has none. */
static int push_anchor(lua_State *L, em_tensor *t) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &anchors_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  if (lua_rawgetp(L, -1, t) == LUA_TUSERDATA && *(em_tensor **)lua_touserdata(L, -1) == t) {
    lua_remove(L, -2);
    return 1;
  }
  lua_pop(L, 2);
  return 0;
}

/* Pushes the anchor of the leaf at stack index ti (wrapping t): its
** existing one, or the value at ti, which becomes it. */
static void anchor_of(lua_State *L, int ti, em_tensor *t) {
  if (push_anchor(L, t)) return;
  registry_table(L, &anchors_key, "v");
  lua_pushvalue(L, ti);
  lua_rawsetp(L, -2, t);
  lua_pop(L, 1);
  lua_pushvalue(L, ti);
}

/* The entry under the anchor on the top of the stack in the ephemeron
** table at tkey, which replaces the anchor on the stack: created (with the
** metatable at mtkey) when create, else nil when missing. Returns 1 when
** it was created. */
static int leaf_entry(lua_State *L, const char *tkey, const char *mtkey, int create) {
  int created = 0;
  registry_table(L, tkey, "k");
  lua_pushvalue(L, -2);
  if (lua_rawget(L, -2) != LUA_TTABLE && create) {
    created = 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_rawgetp(L, LUA_REGISTRYINDEX, mtkey);
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -3);
    lua_pushvalue(L, -2);
    lua_rawset(L, -4);
  }
  lua_replace(L, -3);
  lua_pop(L, 1);
  return created;
}

/* The entry tables' metatables (their __gc) and the handles' weak table. */
static void entry_mt(lua_State *L, const char *key, lua_CFunction gc) {
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

/* A handle's remove() has as upvalues a weak table {key, fn} (the hook's
** anchor, node or false, and its function: a handle keeps neither alive)
** and a done flag. */
static void push_handle(lua_State *L, int key, int fn, lua_CFunction remove) {
  lua_newtable(L);
  lua_createtable(L, 2, 0);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &handle_mt_key);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, key);
  lua_rawseti(L, -2, 1);
  lua_pushvalue(L, fn);
  lua_rawseti(L, -2, 2);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, remove, 2);
  lua_setfield(L, -2, "remove");
}

/* Starts a handle's remove(): 0 if it ran before; else the key, then the
** function, on the stack. */
static int handle_begin(lua_State *L) {
  if (lua_toboolean(L, lua_upvalueindex(2))) return 0;
  lua_pushboolean(L, 1);
  lua_replace(L, lua_upvalueindex(2));
  lua_rawgeti(L, lua_upvalueindex(1), 1);
  lua_rawgeti(L, lua_upvalueindex(1), 2);
  return 1;
}

/* Removes the first fn (stack index) from the list part, from index first,
** of the entry at idx; returns what was its length, 0 if fn was not there. */
static lua_Integer entry_remove(lua_State *L, int entry, int fn, lua_Integer first) {
  lua_Integer n = luaL_len(L, entry), at = 0;
  for (lua_Integer i = first; i <= n && !at; i++) {
    lua_rawgeti(L, entry, i);
    if (lua_rawequal(L, -1, fn)) at = i;
    lua_pop(L, 1);
  }
  if (!at) return 0;
  for (lua_Integer i = at; i < n; i++) {
    lua_rawgeti(L, entry, i + 1);
    lua_rawseti(L, entry, i);
  }
  lua_pushnil(L);
  lua_rawseti(L, entry, n);
  return n;
}

/* ---------------------------------------------------------------- */
/* Gradient-ready hooks                                              */
/* ---------------------------------------------------------------- */

/* Gradient-ready hooks: entries {fn, fn, ...} under &hooks_key (above).
** Under &end_hooks_key a table of the backward-end functions (as keys).
** (as keys; the values count its registrations). The C hook is set while
** any hook is registered (n_hooks). */
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
  if (!push_anchor(L, leaf)) return 0;
  int anchor = lua_gettop(L);
  lua_pushvalue(L, anchor);
  leaf_entry(L, &hooks_key, &ready_entry_mt_key, 0);
  if (!lua_istable(L, -1)) return 0;
  int entry = lua_gettop(L);
  for (lua_Integer i = 1, n = luaL_len(L, entry); i <= n; i++) {
    lua_rawgeti(L, entry, i);
    lua_pushvalue(L, anchor);
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

/* An entry collected with its tensor: the hooks it still held. */
static int ready_entry_gc(lua_State *L) {
  hooks_count(-(int)luaL_len(L, 1));
  return 0;
}

/* handle:remove() of a gradient-ready or backward-end hook; a no-op the
** second time and once the tensor is gone (its hooks went with it). */
static int hook_remove(lua_State *L) {
  if (!handle_begin(L)) return 0;
  int key = lua_gettop(L) - 1, fn = key + 1;
  if (lua_isboolean(L, key)) { /* a backward-end hook: registered (so held) until its last handle goes */
    registry_table(L, &end_hooks_key, NULL);
    lua_pushvalue(L, fn);
    lua_Integer n = lua_rawget(L, -2) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
    if (n < 1) return 0;
    lua_pushvalue(L, fn);
    if (n > 1) lua_pushinteger(L, n - 1); else lua_pushnil(L);
    lua_rawset(L, -4);
  } else {
    if (lua_isnil(L, key) || lua_isnil(L, fn)) return 0; /* the tensor was collected */
    lua_pushvalue(L, key);
    leaf_entry(L, &hooks_key, &ready_entry_mt_key, 0);
    if (!lua_istable(L, -1)) return 0;
    lua_Integer n = entry_remove(L, lua_gettop(L), fn, 1);
    if (!n) return 0;
    if (n == 1) { /* nothing left: drop the entry */
      registry_table(L, &hooks_key, "k");
      lua_pushvalue(L, key);
      lua_pushnil(L);
      lua_rawset(L, -3);
    }
  }
  hooks_count(-1);
  return 0;
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
  lua_settop(L, 2);
  anchor_of(L, 1, t);
  lua_pushvalue(L, 3);
  leaf_entry(L, &hooks_key, &ready_entry_mt_key, 1);
  lua_pushvalue(L, 2);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  hooks_count(1);
  push_handle(L, 3, 2, hook_remove);
  return 1;
}

/* ember.register_backward_end_hook(fn) -> handle: fn() runs at the end of
** every backward that succeeded so far, still inside it. */
static int f_register_backward_end_hook(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  registry_table(L, &end_hooks_key, NULL);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 1);
  lua_Integer n = lua_rawget(L, -3) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  lua_pushinteger(L, n + 1);
  lua_rawset(L, -3);
  hooks_count(1);
  lua_pushboolean(L, 0);
  push_handle(L, 3, 1, hook_remove);
  return 1;
}

/* ---------------------------------------------------------------- */
/* Tensor gradient hooks: t:register_hook(fn), t:retain_grad()       */
/* ---------------------------------------------------------------- */

/* A leaf's entry {fn, fn, ..., counted = true} is under &leaf_hooks_key
** (above). A non-leaf's is in the registry table under &grad_hooks_key,
** keyed by the light userdata of its node (the grad_fn when the hook was
** registered): {fn, fn, ..., retain = a weak {userdata} whose .grad keeps
** the gradient}. It holds a reference to the node, so the node's address
** cannot be reused while the entry lives; the entry goes when its node is
** freed by a backward, or when nothing but the entry holds the node any
** more (no tensor, no later node: the hooks can never fire again; swept at
** the end of a backward and, outside one, when a new entry is made, so a
** loop that hooks tensors it never backpropagates keeps none), or when the
** last hook is removed. A hook that captures its own tensor still keeps
** the node (the registry holds the hook). The C hook is set while any
** entry exists (n_grad_entries). */
static const char grad_hooks_key = 'g';
static int n_grad_entries;

static em_status grad_hook_dispatch(em_node *node, em_tensor *leaf, em_tensor **g, void *ud);

static void grad_entries_count(int delta) {
  n_grad_entries += delta;
  em_set_grad_hook(n_grad_entries > 0 ? grad_hook_dispatch : NULL, NULL);
}

/* A leaf's entry collected with its tensor, unless it was dropped before. */
static int leaf_entry_gc(lua_State *L) {
  if (lua_getfield(L, 1, "counted") == LUA_TBOOLEAN) grad_entries_count(-1);
  return 0;
}

typedef struct grad_hook_call {
  em_node *node;
  em_tensor *leaf;
  em_tensor **g;
} grad_hook_call;

static int grad_hook_protected(lua_State *L) {
  grad_hook_call *c = (grad_hook_call *)lua_touserdata(L, 1);
  if (c->node) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_hooks_key) != LUA_TTABLE) return 0;
    lua_rawgetp(L, -1, c->node);
  } else {
    if (!push_anchor(L, c->leaf)) return 0;
    leaf_entry(L, &leaf_hooks_key, &leaf_entry_mt_key, 0);
  }
  if (!lua_istable(L, -1)) return 0;
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
  if (lua_getfield(L, entry, "retain") == LUA_TTABLE && lua_rawgeti(L, -1, 1) == LUA_TUSERDATA) {
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

/* Drops the node entry at key from the table at tbl, with its node
** reference. */
static void grad_entry_drop(lua_State *L, int tbl, void *key) {
  if (lua_rawgetp(L, tbl, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushnil(L);
  lua_rawsetp(L, tbl, key);
  em_node_release((em_node *)key);
  grad_entries_count(-1);
}

/* The node table's __gc (lua_close): the node references of hooks that
** never fired (a non-leaf never backpropagated through) are released. */
static int grad_hooks_gc(lua_State *L) {
  for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
    em_node_release((em_node *)lua_touserdata(L, -2));
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
    const em_node *n = (const em_node *)lua_touserdata(L, -2);
    if (n->released || n->refcount == 1) { /* freed by a backward, or held by this entry only */
      lua_pushvalue(L, -2);
      lua_rawseti(L, dead, ++n_dead);
    }
  }
  for (lua_Integer i = 1; i <= n_dead; i++) {
    lua_rawgeti(L, dead, i);
    void *key = lua_touserdata(L, -1);
    lua_pop(L, 1);
    grad_entry_drop(L, tbl, key);
  }
  lua_settop(L, top);
}

/* Pushes the key of t's entry (its anchor for a leaf, its node for a
** non-leaf), then the entry, created when missing; returns the entry's
** index. */
static int grad_entry_of(lua_State *L, int ti, em_tensor *t) {
  if (!t->grad_fn) {
    anchor_of(L, ti, t);
    lua_pushvalue(L, -1);
    if (leaf_entry(L, &leaf_hooks_key, &leaf_entry_mt_key, 1)) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "counted");
      grad_entries_count(1);
    }
    return lua_gettop(L);
  }
  if (!backward_thread) grad_hooks_sweep(L); /* outside a backward: no node is held by pointer only */
  lua_pushlightuserdata(L, t->grad_fn);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_hooks_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    registry_table(L, &grad_hooks_key, NULL);
    lua_createtable(L, 0, 1); /* its entries hold node references: released when the state closes */
    lua_pushcfunction(L, grad_hooks_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
  }
  if (lua_rawgetp(L, -1, t->grad_fn) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    em_node_retain(t->grad_fn);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, t->grad_fn);
    grad_entries_count(1);
  }
  lua_remove(L, -2);
  return lua_gettop(L);
}

/* handle:remove() of register_hook; a no-op the second time and once the
** leaf or the node is gone (its hooks went with it). */
static int grad_hook_remove(lua_State *L) {
  if (!handle_begin(L)) return 0;
  int key = lua_gettop(L) - 1, fn = key + 1;
  if (lua_isnil(L, key) || lua_isnil(L, fn)) return 0; /* the tensor was collected */
  bool node = lua_type(L, key) == LUA_TLIGHTUSERDATA;
  if (node) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &grad_hooks_key) != LUA_TTABLE) return 0;
    lua_rawgetp(L, -1, lua_touserdata(L, key));
  } else {
    lua_pushvalue(L, key);
    leaf_entry(L, &leaf_hooks_key, &leaf_entry_mt_key, 0);
  }
  if (!lua_istable(L, -1)) return 0;
  int entry = lua_gettop(L);
  if (entry_remove(L, entry, fn, 1) != 1) return 0;
  if (node) {
    bool retains = lua_getfield(L, entry, "retain") != LUA_TNIL;
    lua_pop(L, 1);
    if (!retains) grad_entry_drop(L, entry - 1, lua_touserdata(L, key));
  } else { /* nothing left: drop the entry */
    lua_pushnil(L);
    lua_setfield(L, entry, "counted");
    grad_entries_count(-1);
    registry_table(L, &leaf_hooks_key, "k");
    lua_pushvalue(L, key);
    lua_pushnil(L);
    lua_rawset(L, -3);
  }
  return 0;
}

void lember_rekey_hooks(lua_State *L, int idx, em_tensor *from, em_tensor *to) {
  if (from == to || !lua_checkstack(L, 4)) return;
  idx = lua_absindex(L, idx);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &anchors_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    return;
  }
  lua_rawgetp(L, -1, from);
  if (lua_rawequal(L, -1, idx)) { /* t anchors from's hooks: they follow it to to */
    lua_pushnil(L);
    lua_rawsetp(L, -3, from);
    lua_pushvalue(L, idx);
    lua_rawsetp(L, -3, to);
  }
  lua_pop(L, 2);
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
  lua_settop(L, 2);
  int entry = grad_entry_of(L, 1, t);
  lua_pushvalue(L, 2);
  lua_rawseti(L, entry, (lua_Integer)luaL_len(L, entry) + 1);
  push_handle(L, entry - 1, 2, grad_hook_remove);
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
  int entry = grad_entry_of(L, 1, t);
  lua_createtable(L, 1, 0); /* weak: a dropped tensor's gradient has no reader */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &handle_mt_key);
  lua_setmetatable(L, -2);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_setfield(L, entry, "retain");
  lua_settop(L, 1);
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
  {"_backward_filtered", f_backward_filtered},
  {"register_backward_end_hook", f_register_backward_end_hook},
  {"_set_detect_anomaly", f_set_detect_anomaly},
  {"_is_anomaly_enabled", f_is_anomaly_enabled},
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
  entry_mt(L, &ready_entry_mt_key, ready_entry_gc);
  entry_mt(L, &leaf_entry_mt_key, leaf_entry_gc);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "v");
  lua_setfield(L, -2, "__mode");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &handle_mt_key);
  /* a sentinel whose __gc forgets this state for anomaly mode's origins */
  __atomic_add_fetch(&anomaly_states, 1, __ATOMIC_ACQ_REL);
  lua_newuserdata(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, anomaly_state_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  luaL_ref(L, LUA_REGISTRYINDEX);
}
