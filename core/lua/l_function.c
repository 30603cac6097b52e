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

static em_status out_backward(em_node *node, em_tensor *gy, em_tensor **gx);

/* The opdef of a Function's nodes (output false), or of the nodes of its
** outputs when it has several (output true: out_backward). */
static const em_opdef *opdef_for(const char *name, bool output) {
  named_opdef *d;
  pthread_mutex_lock(&opdefs_lock);
  for (d = opdefs; d; d = d->next)
    if (strncmp(d->name, name, sizeof d->name - 1) == 0 && (d->def.backward == out_backward) == output) break;
  if (!d && (d = (named_opdef *)calloc(1, sizeof *d)) != NULL) {
    snprintf(d->name, sizeof d->name, "%s", name); /* long names are cut */
    d->def.name = d->name;
    d->def.backward = output ? out_backward : lua_fn_backward;
    d->def.free_ctx = output ? free : lua_fn_free;
    d->next = opdefs;
    opdefs = d;
  }
  pthread_mutex_unlock(&opdefs_lock);
  return d ? &d->def : NULL;
}

/* What backward gets for one value forward returned: nil (not a tensor),
** zeros or nil (a tensor that is not differentiable: marked with
** ctx.mark_non_differentiable, or not floating), or the gradient of a
** differentiable output (a piece of the packed output's when there are
** several). */
enum { RES_NONE, RES_CONST, RES_DIFF };
typedef struct fn_res {
  int kind;
  int ndim;
  int64_t shape[EM_MAX_DIMS];
  em_dtype dtype;
  em_device dev;
  int64_t off, numel; /* RES_DIFF: where it lies in the packed output */
  bool got;           /* packed: a gradient reached it in this backward (out_backward) */
} fn_res;

/* The C context of one Function node. */
typedef struct lua_fn_ctx {
  lua_State *main;   /* the main thread, for refs; backward runs on lember_backward_thread() */
  int backward_ref;  /* registry: the Lua backward */
  int ctx_ref;       /* registry: the ctx table */
  const char *name;
  int n_args;        /* arguments of forward after ctx */
  int n_in;          /* of which tensors */
  int n_res;         /* values forward returned */
  bool packed;       /* several differentiable outputs, packed into the node's one */
  fn_res *res;       /* n_res */
  struct {
    int pos;         /* 1-based argument position of a tensor input */
    em_device dev;   /* its device, which its gradient must be on */
  } in[];
} lua_fn_ctx;

/* A node of one output of a Function with several, whose input is the
** packed output: the Function's node records one flat output, the outputs
** laid end to end (node->edges[0].fn is the Function's node), and each
** output keeps its own memory. Its backward marks that the output got a
** gradient (for materialize_grads off) and hands the packed output a
** gradient of its shape, zero elsewhere. */
typedef struct out_ctx {
  int res;              /* 0-based index among forward's results */
  int64_t off, numel;   /* where the output lies in the packed output */
} out_ctx;

static em_status out_backward(em_node *node, em_tensor *gy, em_tensor **gx) {
  const out_ctx *o = (const out_ctx *)node->ctx;
  em_node *fn = node->edges[0].fn;
  if (fn && fn->ctx && fn->op->backward == lua_fn_backward) ((lua_fn_ctx *)fn->ctx)->res[o->res].got = true;
  em_tensor *z = NULL, *piece = NULL, *flat = NULL;
  int64_t total = node->in_shape[0][0], n = o->numel;
  em_status s = em_zeros(&z, 1, &total, node->in_dtype[0], gy->device);
  if (!s) s = em_narrow(&piece, z, 0, o->off, n);
  if (!s) s = em_reshape(&flat, gy, 1, &n);
  if (!s) s = em_copy_(piece, flat);
  em_release(piece);
  em_release(flat);
  if (s) {
    em_release(z);
    return s;
  }
  gx[0] = z;
  return EM_OK;
}

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
  free(c->res);
  free(c);
}

/* ctx's private list of what save_for_backward saved: alias, storage
** version when saved, alias, version, ... (ctx.saved is the user's). */
static const char saved_versions_key = 'V';
/* ctx's private sets of the tensors mark_dirty and mark_non_differentiable
** named (tensor -> true), and set_materialize_grads' flag. */
static const char dirty_key = 'D';
static const char nondiff_key = 'N';
static const char materialize_key = 'M';

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
  luaL_checkstack(L, c->n_args + c->n_res + 4, "ember.Function backward");
  int base = lua_gettop(L); /* result k is at base + k */
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->backward_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->ctx_ref);
  bool materialize = lua_rawgetp(L, -1, &materialize_key) != LUA_TBOOLEAN || lua_toboolean(L, -1);
  lua_pop(L, 1);
  /* One gradient per value forward returned, as PyTorch: nil for a
  ** non-tensor, zeros (nil without materialize_grads) for a tensor that
  ** is not differentiable. */
  for (int r = 0; r < c->n_res; r++) {
    const fn_res *o = &c->res[r];
    em_tensor *g = NULL;
    em_status s = EM_OK;
    if (o->kind == RES_DIFF && !c->packed) {
      g = em_retain(b->gy);
    } else if (o->kind == RES_DIFF && (materialize || o->got)) {
      em_tensor *piece = NULL;
      s = em_narrow(&piece, b->gy, 0, o->off, o->numel);
      if (!s) s = em_reshape(&g, piece, o->ndim, o->shape);
      em_release(piece);
    } else if (o->kind == RES_CONST && materialize) {
      s = em_zeros(&g, o->ndim, o->shape, o->dtype, o->dev);
    }
    if (s) return luaL_error(L, "%s", em_error_message());
    if (g) lember_pushtensor(L, g);
    else lua_pushnil(L);
  }
  lua_call(L, 1 + c->n_res, LUA_MULTRET);
  /* One gradient (or nil) per forward argument after ctx, as PyTorch;
  ** extra nils are harmless, an extra gradient is a bug in the backward. */
  int nres = lua_gettop(L) - base;
  for (int k = c->n_args + 1; k <= nres; k++)
    if (!lua_isnil(L, base + k))
      return luaL_error(L, "backward returned %d values for the %d arguments of forward (after ctx)",
                        nres, c->n_args);
  lua_settop(L, base + c->n_args); /* missing results are nil */
  /* A gradient for an argument that was not a tensor is a mistake (torch:
  ** "returned a gradient different than None at position k"). */
  for (int k = 1, i = 0; k <= c->n_args; k++) {
    if (i < c->n_in && c->in[i].pos == k) {
      i++;
      continue;
    }
    if (!lua_isnil(L, base + k))
      return luaL_error(L, "backward returned a %s for argument %d, which was not a tensor in forward: return nil there",
                        lember_testtensor(L, base + k) ? "tensor" : luaL_typename(L, base + k), k);
  }
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
  for (int r = 0; r < c->n_res; r++) c->res[r].got = false; /* for the next backward (retain_graph) */
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

/* The ctx methods are bound to their ctx (ctx.__index makes a closure with
** the ctx as upvalue), so that both torch's ctx.save_for_backward(a, b)
** and Lua's ctx:save_for_backward(a, b) work: a first argument that is
** the ctx itself is the method call's self. Leaves the ctx at index 1. */
static void bound_ctx(lua_State *L) {
  if (lua_gettop(L) >= 1 && lua_rawequal(L, 1, lua_upvalueindex(1))) return;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
}

/* ctx.save_for_backward(t1, ...) stores detached aliases in ctx.saved
** (ctx.saved_tensors), so the ctx (held by the node) does not keep the
** graph alive. */
static int ctx_save_for_backward(lua_State *L) {
  bound_ctx(L);
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

/* ctx.mark_dirty(t, ...) / ctx.mark_non_differentiable(t, ...): adds the
** tensors to the ctx's private set under key (upvalue 2). */
static int ctx_mark(lua_State *L) {
  const char *what = lua_tostring(L, lua_upvalueindex(3));
  bound_ctx(L);
  int n = lua_gettop(L);
  void *key = lua_touserdata(L, lua_upvalueindex(2));
  if (lua_rawgetp(L, 1, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, 1, key);
  }
  for (int i = 2; i <= n; i++) {
    if (!lember_testtensor(L, i))
      return luaL_error(L, "ctx.%s: argument %d is a %s, expected tensors", what, i - 1, luaL_typename(L, i));
    lua_pushvalue(L, i);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
  }
  return 0;
}

/* ctx.set_materialize_grads(on) */
static int ctx_set_materialize_grads(lua_State *L) {
  bound_ctx(L);
  if (lua_type(L, 2) != LUA_TBOOLEAN)
    return luaL_error(L, "ctx.set_materialize_grads: expected a boolean, got %s", luaL_typename(L, 2));
  lua_pushvalue(L, 2);
  lua_rawsetp(L, 1, &materialize_key);
  return 0;
}

/* ctx.__index: the bound methods, and ctx.saved_tensors (torch's name for
** ctx.saved). */
static int ctx_index(lua_State *L) {
  const char *k = lua_tostring(L, 2);
  if (!k || lua_type(L, 2) != LUA_TSTRING) return 0;
  if (strcmp(k, "saved_tensors") == 0) {
    lua_getfield(L, 1, "saved");
    return 1;
  }
  lua_pushvalue(L, 1);
  if (strcmp(k, "save_for_backward") == 0) {
    lua_pushcclosure(L, ctx_save_for_backward, 1);
  } else if (strcmp(k, "set_materialize_grads") == 0) {
    lua_pushcclosure(L, ctx_set_materialize_grads, 1);
  } else if (strcmp(k, "mark_dirty") == 0 || strcmp(k, "mark_non_differentiable") == 0) {
    lua_pushlightuserdata(L, (void *)(k[5] == 'd' ? &dirty_key : &nondiff_key));
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, ctx_mark, 3);
  } else {
    return 0;
  }
  return 1;
}

static bool in_set(lua_State *L, int set, int idx) {
  if (set == 0) return false;
  lua_pushvalue(L, idx);
  bool r = lua_rawget(L, set) != LUA_TNIL;
  lua_pop(L, 1);
  return r;
}

/* How many tensors other than t, and than the aliases save_for_backward
** made in this ctx, share t's memory (views of it, or the tensor it views). */
static int other_headers(lua_State *L, int ctx, const em_tensor *t) {
  if (!t->storage) return 0;
  int n = t->storage->refcount - t->storage->saved_refs - 1;
  if (lua_rawgetp(L, ctx, &saved_versions_key) == LUA_TTABLE) {
    lua_Integer len = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= len; i += 2) {
      lua_rawgeti(L, -1, i);
      em_tensor *a = lember_testtensor(L, -1);
      if (a && a->storage == t->storage) n--;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return n;
}

static const char fn_mt_key = 'F';
static const char ctx_mt_key = 'C';
static const char opdefs_key = 'O';

/* F(...) runs forward(ctx, ...) with grad off and records a node. Its
** outputs: every value forward returned. One differentiable tensor output
** gets the node itself; several (of one dtype and device) are packed
** into the node's one output, each behind a node of its own
** (out_backward), so that the backward gets one gradient per output. */
static int fn_call(lua_State *L) {
  int nargs = lua_gettop(L) - 1; /* after the Function itself */
  em_tensor *inputs[64];
  int pos[64];
  int n_in = 0;
  const char *name;
  char s1[128], s2[128];
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
  /* ctx.needs_input_grad: one boolean per argument of forward after ctx */
  bool grad_on = em_grad_enabled();
  lua_createtable(L, nargs, 0);
  for (int i = 1; i <= nargs; i++) {
    em_tensor *t = lember_testtensor(L, i + 1);
    lua_pushboolean(L, grad_on && t && t->requires_grad);
    lua_rawseti(L, -2, i);
  }
  lua_setfield(L, ctx, "needs_input_grad");
  /* forward(ctx, ...) with grad mode off */
  luaL_checkstack(L, nargs + 4, "ember.Function");
  int fbase = lua_gettop(L);
  lua_getfield(L, 1, "forward");
  lua_pushvalue(L, ctx);
  for (int i = 1; i <= nargs; i++) lua_pushvalue(L, i + 1);
  bool prev = em_set_grad_enabled(false);
  int status = lua_pcall(L, nargs + 1, LUA_MULTRET, 0);
  em_set_grad_enabled(prev);
  if (status != LUA_OK) return lua_error(L);
  int nres = lua_gettop(L) - fbase;
  int n_tensors = 0;
  for (int r = 1; r <= nres; r++) n_tensors += lember_testtensor(L, fbase + r) != NULL;
  if (n_tensors == 0)
    return luaL_error(L, "ember.Function '%s': forward must return a tensor, got %s", name,
                      nres ? luaL_typename(L, fbase + 1) : "nothing");
  if (!em_autograd_needed(n_in, inputs)) return nres;

  luaL_checkstack(L, nres + 8, "ember.Function");
  int dirty = lua_rawgetp(L, ctx, &dirty_key) == LUA_TTABLE ? lua_gettop(L) : (lua_pop(L, 1), 0);
  int nondiff = lua_rawgetp(L, ctx, &nondiff_key) == LUA_TTABLE ? lua_gettop(L) : (lua_pop(L, 1), 0);
  const em_opdef *def = opdef_for(name, false);
  const em_opdef *out_def = opdef_for(name, true);
  lua_fn_ctx *c = def && out_def ? (lua_fn_ctx *)calloc(1, sizeof *c + sizeof c->in[0] * (size_t)n_in) : NULL;
  fn_res *res = c ? (fn_res *)calloc((size_t)nres, sizeof *res) : NULL;
  if (!res) {
    free(c);
    return luaL_error(L, "ember.Function '%s': out of memory", name);
  }
  c->res = res;
  c->n_res = nres;
  c->main = main_thread(L);
  c->backward_ref = c->ctx_ref = LUA_NOREF; /* lua_fn_free may run before they are set */
  int n_diff = 0, first = 0, dirty_out = 0, n_dirty = 0;
  for (int r = 1; r <= nres; r++) {
    em_tensor *t = lember_testtensor(L, fbase + r);
    fn_res *o = &res[r - 1];
    if (!t) continue;
    o->kind = em_dtype_is_float(t->dtype) && !in_set(L, nondiff, fbase + r) ? RES_DIFF : RES_CONST;
    o->ndim = t->ndim;
    memcpy(o->shape, t->shape, sizeof o->shape);
    o->dtype = t->dtype;
    o->dev = t->device;
    o->numel = em_numel(t);
    if (in_set(L, dirty, fbase + r)) n_dirty++, dirty_out = o->kind == RES_DIFF ? r : dirty_out;
    if (o->kind != RES_DIFF) continue;
    if (!first) {
      first = r;
    } else if (t->dtype != res[first - 1].dtype || !em_device_eq(t->device, res[first - 1].dev)) {
      const em_dtype dt = res[first - 1].dtype;
      em_device_str(res[first - 1].dev, s1, sizeof s1);
      lua_fn_free(c); /* frees res */
      return luaL_error(L, "ember.Function '%s': forward's differentiable outputs must share a dtype and a device "
                        "(output %d is %s on %s, output %d is %s on %s); mark the others with "
                        "ctx.mark_non_differentiable", name, first, em_dtype_name(dt), s1, r,
                        em_dtype_name(t->dtype), em_device_str(t->device, s2, sizeof s2));
    }
    n_diff++;
  }
  if (dirty) {
    lua_Integer marked = 0;
    for (lua_pushnil(L); lua_next(L, dirty); lua_pop(L, 1)) marked++;
    if (marked != n_dirty) {
      lua_fn_free(c);
      return luaL_error(L, "ember.Function '%s': a tensor given to ctx.mark_dirty must be returned by forward "
                        "(the input it modified in place)", name);
    }
  }
  if (n_diff == 0) { /* nothing to differentiate: outputs as constants */
    lua_fn_free(c);
    for (int r = 1; r <= nres; r++) {
      em_tensor *t = lember_testtensor(L, fbase + r);
      if (!t || (!t->requires_grad && in_set(L, dirty, fbase + r))) {
        lua_pushvalue(L, fbase + r); /* a non-tensor, or an input written in place (mark_dirty) */
        continue;
      }
      em_tensor **out = lember_newslot(L);
      em_status s = em_detach(out, t);
      if (s) return lember_error(L, name, s);
      lember_account(L, *out);
    }
    return nres;
  }
  if (dirty_out && n_diff > 1) {
    lua_fn_free(c);
    return luaL_error(L, "ember.Function '%s': ctx.mark_dirty with several differentiable outputs is not "
                      "supported; mark the others with ctx.mark_non_differentiable", name);
  }
  em_tensor *dirty_t = dirty_out ? lember_testtensor(L, fbase + dirty_out) : NULL;
  if (dirty_t) {
    bool is_input = false;
    for (int i = 0; i < n_in; i++) is_input = is_input || inputs[i] == dirty_t;
    if (!is_input) {
      dirty_t = NULL; /* not an input: an ordinary output */
    } else if (dirty_t->requires_grad && !dirty_t->grad_fn) {
      lua_fn_free(c);
      return luaL_error(L, "ember.Function '%s': a leaf tensor that requires grad (%s %s) is being used in an "
                        "in-place operation (ctx.mark_dirty); do it on a clone, or with grad mode off", name,
                        em_shape_str(dirty_t->ndim, dirty_t->shape, s1, sizeof s1), em_dtype_name(dirty_t->dtype));
    } else if (other_headers(L, ctx, dirty_t) > 0 &&
               (lua_gc(L, LUA_GCCOLLECT, 0), other_headers(L, ctx, dirty_t) > 0)) {
      /* A view of it, or the tensor it views, would keep its old history with
      ** the new values (a wrong gradient): refused, as the core's in-place ops
      ** (a collection first: dropped temporaries may still hold the memory). */
      lua_fn_free(c);
      return luaL_error(L, "ember.Function '%s': ctx.mark_dirty: the tensor (%s %s) shares its memory with other "
                        "tensors (it is a view, or has views), whose history cannot follow the in-place change; "
                        "give the Function a tensor of its own (a clone)", name,
                        em_shape_str(dirty_t->ndim, dirty_t->shape, s1, sizeof s1), em_dtype_name(dirty_t->dtype));
    }
  }

  c->name = def->name;
  c->n_args = nargs;
  c->n_in = n_in;
  c->packed = n_diff > 1;
  for (int i = 0; i < n_in; i++) {
    c->in[i].pos = pos[i];
    c->in[i].dev = inputs[i]->device;
  }
  lua_getfield(L, 1, "backward");
  c->backward_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, ctx);
  c->ctx_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* The node's output: the dirty input itself (its history now goes
  ** through this node, as PyTorch's), the one differentiable output in its
  ** own header (forward may return an input or a view of one), or for several
  ** the packed output. */
  em_tensor *node_out = NULL;
  em_status s = EM_OK;
  if (dirty_t) {
    node_out = em_retain(dirty_t);
  } else if (!c->packed) {
    s = em_detach(&node_out, lember_testtensor(L, fbase + first));
  } else {
    /* Only its shape matters (nothing reads its values): one zero expanded */
    int64_t off = 0, one = 1;
    for (int r = 1; r <= nres; r++) {
      if (res[r - 1].kind != RES_DIFF) continue;
      res[r - 1].off = off;
      off += res[r - 1].numel;
    }
    em_tensor *z = NULL;
    s = em_zeros(&z, 1, &one, res[first - 1].dtype, res[first - 1].dev);
    if (!s) s = em_expand(&node_out, z, 1, &off);
    em_release(z);
  }
  if (s) {
    lua_fn_free(c);
    return lember_error(L, name, s);
  }
  s = em_autograd_record(node_out, def, n_in, inputs, 0, NULL, c); /* frees c on failure */
  if (s) {
    em_release(node_out);
    return lember_error(L, name, s);
  }
  for (int r = 1; r <= nres; r++) {
    const fn_res *o = &res[r - 1];
    em_tensor *t = lember_testtensor(L, fbase + r);
    if (!t || (dirty_t && r == dirty_out)) {
      lua_pushvalue(L, fbase + r); /* a non-tensor, or the dirty input itself */
      continue;
    }
    em_tensor **out = lember_newslot(L);
    if (o->kind == RES_CONST) {
      s = em_detach(out, t);
    } else if (!c->packed) {
      *out = em_retain(node_out);
    } else { /* in its own header, with a node of its own (out_backward) */
      s = em_detach(out, t);
      out_ctx *oc = s ? NULL : (out_ctx *)malloc(sizeof *oc);
      if (!s && !oc) s = em_error(EM_ERR_OOM, "%s: out of memory", name);
      if (!s) {
        oc->res = r - 1, oc->off = o->off, oc->numel = o->numel;
        s = em_autograd_record(*out, out_def, 1, &node_out, 0, NULL, oc); /* frees oc on failure */
      }
    }
    if (s) {
      em_release(node_out);
      return lember_error(L, name, s);
    }
    lember_account(L, *out);
  }
  em_release(node_out);
  return nres;
}

/* F.apply(...) (torch's MyFunction.apply) and F:apply(...): F(...). */
static int fn_apply(lua_State *L) {
  if (lua_gettop(L) < 1 || !lua_rawequal(L, 1, lua_upvalueindex(1))) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
  }
  return fn_call(L);
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
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, fn_apply, 1); /* a cycle Lua's GC collects */
  lua_setfield(L, -2, "apply");
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
  /* metatable of ctx tables: the methods, saved_tensors (ctx_index) */
  lua_newtable(L);
  lua_pushcfunction(L, ctx_index);
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
