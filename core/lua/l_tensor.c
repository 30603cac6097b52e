/*
** l_tensor.c -- the tensor userdata: its metatable, lifetime (__gc,
** __close), GC accounting, properties (__index) and assignment
** (__newindex).
**
** The userdata is one em_tensor pointer. The metatable is found through a
** light-userdata registry key (not luaL_checkudata's string lookup), and
** the metamethods that run in hot loops keep it as upvalue 1.
*/
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "lember.h"

static const char tensor_mt_key = 'T'; /* registry[&tensor_mt_key] = metatable */

void lember_pushmetatable(lua_State *L) { lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key); }

/* ---------------------------------------------------------------- */
/* Creating and checking                                             */
/* ---------------------------------------------------------------- */

em_tensor **lember_newslot(lua_State *L) {
  em_tensor **p = (em_tensor **)lua_newuserdatauv(L, sizeof(em_tensor *), 0);
  *p = NULL;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
  lua_setmetatable(L, -2);
  return p;
}

void lember_pushtensor(lua_State *L, em_tensor *t) {
  em_tensor **p = lember_newslot(L);
  *p = t;
  lember_account(L, t);
}

int lember_istensor(lua_State *L, int idx) {
  int ok;
  if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx)) return 0;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);
  ok = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  return ok;
}

static int closed_error(lua_State *L) {
  return luaL_error(L, "ember: tensor was closed (released by <close> or :close())");
}

em_tensor *lember_testtensor(lua_State *L, int idx) {
  if (!lember_istensor(L, idx)) return NULL;
  em_tensor *t = *(em_tensor **)lua_touserdata(L, idx);
  if (!t) closed_error(L);
  return t;
}

/* Copies into buf the key under which table t (an absolute index) holds
** the value on the top of the stack; 0 if none. */
static int key_of(lua_State *L, int t, char *buf, size_t n) {
  int fn = lua_gettop(L), found = 0;
  if (!lua_istable(L, t)) return 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (!found && lua_type(L, -2) == LUA_TSTRING && lua_rawequal(L, -1, fn)) {
      snprintf(buf, n, "%s", lua_tostring(L, -2));
      found = 1;
    }
    lua_pop(L, 1);
  }
  return found;
}

/* The name, as a tensor method or an ember function, of the op that is
** running: the C function, or one of ember's Lua functions that called it
** (up to the user's code), for an error that names it (luaL_typeerror says
** '?' for a method). 0 if not found (a C function a wrapper tail-called). */
static int running_op(lua_State *L, char *buf, size_t n) {
  lua_Debug ar;
  int level, found = 0, top = lua_gettop(L);
  if (!lua_checkstack(L, 8)) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "ember.core");
  if (!lua_istable(L, -1)) { lua_settop(L, top); return 0; }
  int core = lua_gettop(L);
  lua_getfield(L, core, "Tensor");
  int methods = lua_gettop(L);
  for (level = 0; level <= 8 && !found; level++) {
    if (!lua_getstack(L, level, &ar) || !lua_getinfo(L, "fS", &ar)) break;
    /* the user's code (a Lua file outside ember's folder) ends the search */
    if (strcmp(ar.what, "C") != 0 && !strstr(ar.source, "/ember/")) { lua_pop(L, 1); break; }
    found = key_of(L, methods, buf, n) || key_of(L, core, buf, n);
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return found;
}

em_tensor *lember_checktensor(lua_State *L, int idx) {
  em_tensor *t = lember_testtensor(L, idx);
  int tt = lua_type(L, 1);
  if (!t && idx == 1 && (tt == LUA_TNONE || tt == LUA_TNIL || tt == LUA_TNUMBER)) {
    /* x.sum() for x:sum(), the usual slip: say so */
    lua_Debug ar;
    const char *name = lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) ? ar.name : NULL;
    if (name)
      luaL_error(L, "bad argument #1 to '%s' (ember.Tensor expected, got %s): call tensor methods with a colon, "
                    "x:%s(...), not x.%s(...)", name, luaL_typename(L, 1), name, name);
    luaL_error(L, "bad argument #1 (ember.Tensor expected, got %s): call tensor methods with a colon, "
                  "x:name(...), not x.name(...)", luaL_typename(L, 1));
  }
  if (!t) {
    char op[64];
    if (running_op(L, op, sizeof op))
      luaL_error(L, "ember.%s: bad argument #%d (ember.Tensor expected, got %s)", op, idx, luaL_typename(L, idx));
    luaL_typeerror(L, idx, "ember.Tensor");
  }
  return t;
}

em_tensor *lember_totensor(lua_State *L, int idx, em_dtype like, em_device dev) {
  em_tensor *t;
  em_status s;
  int tt = lua_type(L, idx);
  idx = lua_absindex(L, idx);
  if (tt == LUA_TUSERDATA) return lember_checktensor(L, idx);
  if (tt != LUA_TNUMBER && tt != LUA_TBOOLEAN) {
    char op[64];
    if (running_op(L, op, sizeof op)) luaL_error(L, "ember.%s: expected a tensor or a number, got %s", op, luaL_typename(L, idx));
    luaL_error(L, "ember: expected a tensor or a number, got %s", luaL_typename(L, idx));
  }
  double v = tt == LUA_TNUMBER ? lua_tonumber(L, idx) : (double)lua_toboolean(L, idx);
  if (tt == LUA_TBOOLEAN) like = EM_BOOL;
  em_tensor **slot = lember_newslot(L);
  s = em_full(slot, 0, NULL, v, like, dev);
  if (s) return lember_error(L, "tensor", s), (em_tensor *)NULL;
  t = *slot;
  lember_account(L, t);
  lua_replace(L, idx);
  return t;
}

/* ---------------------------------------------------------------- */
/* GC accounting                                                     */
/* ---------------------------------------------------------------- */

/* The Lua GC sees only a pointer-sized userdata per tensor. We tell it
** about the rest: growth of the core's live bytes plus a fixed overhead for
** the tensor header (and autograd node) per new tensor, as debt
** (LUA_GCSTEP), so unreachable tensors get finalized at the pace they pile
** up.
**
** The mode is generational (luaopen_ember_core): a training step makes
** thousands of tensors that die young beside a Lua heap (the library, the
** model) that lives for ever, which is what a minor collection is for: it
** visits the young objects, not the whole heap. The incremental mode ran a
** full cycle, about the whole heap, per budget of tensor bytes: 6-10 ms of
** a small Transformer's 53-60 ms step (a 2 MB heap); the minors cost about
** what no collection at all does (the step 47 ms either way, its garbage
** freed after it). Counting tensor bytes one for one in the incremental
** mode, as before, ran 27 cycles a step, 15% of it.
**
** How much debt a tensor byte is worth: H/L bytes, and never more than
** one (while tensors are few, they count as Lua would count them), H being
** the Lua heap and L the low point of the live tensor bytes (what survives:
** weights, optimizer state) within [2 MB, 256 MB]. Lua collects once per
** share of its heap (a minor per 20% of H of debt), so a minor comes once
** per L/5 new tensor bytes: often enough that what a step drops goes at
** once, not so often that a layer's intermediates live through two minors
** and grow old. Measured on 8 checkpointed layers, where each layer's
** first forward drops its graph: a minor per L/20 let the fwd+bwd peak
** reach 0.46x of a plain run's, per L/5 0.25x. The cap: a model of 12 GB
** (weights, optimizer state) would otherwise pile up gigabytes of dropped
** activations between collections.
**
** A tensor whose userdata lives through two minors (a layer's output, held
** by a Lua local through the next layer) becomes old, and only a major
** collection frees it; Lua's own majors follow its own (small) heap. So a
** full collection also runs when the live bytes grow past their low point
** since the last full one by that low point (at most 256 MB) plus 64 MB: a
** small Transformer's step promotes some of its tensors, and with 16 MB
** the full collections took 3 ms of its 50.
** The same rules pace the incremental mode, for a program that selects it
** (collectgarbage("incremental")). */
#define LEMBER_TENSOR_OVERHEAD 320
#define LEMBER_GC_STEP_KB 8 /* the smallest debt worth a GC step */
#define LEMBER_GC_MIN_LOW ((size_t)2 << 20) /* L, when next to nothing is live */
#define LEMBER_GC_MAX_LOW ((size_t)256 << 20)
#define LEMBER_GC_MAX_EXTRA ((size_t)256 << 20)
#define LEMBER_GC_FULL_SLACK ((size_t)64 << 20)

/* Per thread: a Lua state runs on one thread at a time. */
static _Thread_local size_t gc_last_live;
static _Thread_local size_t gc_pending;   /* new tensor bytes not yet turned into debt */
static _Thread_local size_t gc_full_base; /* low point of live bytes since the last full GC */

/* Debt in KB for 'pending' tensor bytes: pending * min(1, H / L). */
static size_t gc_debt_kb(lua_State *L, size_t pending) {
  const double heap = (double)lua_gc(L, LUA_GCCOUNT) * 1024.0 + (double)lua_gc(L, LUA_GCCOUNTB);
  const size_t low = gc_full_base < LEMBER_GC_MIN_LOW   ? LEMBER_GC_MIN_LOW
                     : gc_full_base > LEMBER_GC_MAX_LOW ? LEMBER_GC_MAX_LOW : gc_full_base;
  const double per_byte = heap < (double)low ? heap / (double)low : 1.0;
  const double kb = (double)pending * per_byte / 1024.0;
  return kb > (double)(1u << 30) ? (size_t)1 << 30 : (size_t)kb;
}

static void gc_run(lua_State *L, size_t kb, size_t live) {
  if (!lua_gc(L, LUA_GCISRUNNING)) return; /* GCSTEP would run even when stopped */
  lua_gc(L, LUA_GCSTEP, (int)kb);
  if (live < gc_full_base) gc_full_base = live;
  const size_t extra = gc_full_base < LEMBER_GC_MAX_EXTRA ? gc_full_base : LEMBER_GC_MAX_EXTRA;
  if (live > gc_full_base + extra + LEMBER_GC_FULL_SLACK) {
    lua_gc(L, LUA_GCCOLLECT);
    gc_full_base = em_live_bytes();
  }
}

void lember_account(lua_State *L, const em_tensor *t) {
  (void)t;
  size_t live = em_live_bytes();
  gc_pending += LEMBER_TENSOR_OVERHEAD;
  if (live > gc_last_live) gc_pending += live - gc_last_live;
  gc_last_live = live;
  /* cheap test first: a byte is worth at most a byte of debt */
  if (gc_pending < ((size_t)LEMBER_GC_STEP_KB << 10)) return;
  size_t kb = gc_debt_kb(L, gc_pending);
  if (kb >= LEMBER_GC_STEP_KB) {
    gc_pending = 0;
    gc_run(L, kb, live);
  }
}

/* ---------------------------------------------------------------- */
/* Lifetime                                                          */
/* ---------------------------------------------------------------- */

static int t_gc(lua_State *L) {
  em_tensor **p = (em_tensor **)lua_touserdata(L, 1);
  if (p && *p) {
    em_release(*p);
    *p = NULL;
  }
  return 0;
}

/* t:close() and __close: releases now; later use raises. */
static int t_close(lua_State *L) {
  if (!lember_istensor(L, 1)) return luaL_typeerror(L, 1, "ember.Tensor");
  return t_gc(L);
}

/* ---------------------------------------------------------------- */
/* Properties                                                        */
/* ---------------------------------------------------------------- */

static void push_shape(lua_State *L, const em_tensor *t) {
  lember_pushsize(L, t->ndim, t->shape);
}

static const char *const properties[] = {
  "shape", "dtype", "device", "grad", "requires_grad", "is_leaf", "grad_fn", "ndim", "T", "mT", NULL
};

/* t.T (every dim reversed, PyTorch's; a transpose for a matrix) and t.mT
** (the last two dims swapped: a batch of matrices), as views. */
static int push_transposed(lua_State *L, em_tensor *t, bool matrices) {
  em_tensor **out = lember_newslot(L);
  em_status s;
  if (matrices) {
    if (t->ndim < 2) return luaL_error(L, "ember.mT: needs a tensor of 2 or more dims, got %d", t->ndim);
    s = em_transpose(out, t, t->ndim - 2, t->ndim - 1);
  } else {
    int perm[EM_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = t->ndim - 1 - i;
    s = em_permute(out, t, t->ndim, perm);
  }
  if (s) return lember_error(L, matrices ? "mT" : "T", s);
  lember_account(L, *out);
  return 1;
}

static int push_property(lua_State *L, em_tensor *t, const char *k) {
  char buf[64];
  if (strcmp(k, "shape") == 0) {
    push_shape(L, t);
  } else if (strcmp(k, "dtype") == 0) {
    lua_pushstring(L, em_dtype_name(t->dtype));
  } else if (strcmp(k, "device") == 0) {
    lua_pushstring(L, em_device_str(t->device, buf, sizeof buf));
  } else if (strcmp(k, "grad") == 0) {
    if (t->grad)
      lember_pushtensor(L, em_retain(t->grad));
    else
      lua_pushnil(L);
  } else if (strcmp(k, "requires_grad") == 0) {
    lua_pushboolean(L, t->requires_grad);
  } else if (strcmp(k, "is_leaf") == 0) {
    lua_pushboolean(L, t->grad_fn == NULL);
  } else if (strcmp(k, "grad_fn") == 0) {
    if (t->grad_fn)
      lua_pushstring(L, t->grad_fn->op->name);
    else
      lua_pushnil(L);
  } else if (strcmp(k, "ndim") == 0) {
    lua_pushinteger(L, t->ndim);
  } else if (strcmp(k, "T") == 0 || strcmp(k, "mT") == 0) {
    return push_transposed(L, t, k[0] == 'm');
  } else if (strcmp(k, "data") == 0) { /* PyTorch's x.data: x:detach(), the same memory */
    em_tensor **out = lember_newslot(L);
    em_status s = em_detach(out, t);
    if (s) return lember_error(L, "data", s);
    lember_account(L, *out);
  } else if (strcmp(k, "_version") == 0) { /* PyTorch's: the in-place writes to t's memory so far */
    lua_pushinteger(L, t->storage ? (lua_Integer)__atomic_load_n(&t->storage->version, __ATOMIC_RELAXED) : 0);
  } else if (strcmp(k, "is_cuda") == 0) {
    lua_pushboolean(L, strncmp(em_device_str(t->device, buf, sizeof buf), "cuda", 4) == 0);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

/* Is ipairs' iterator the one reading t[i]? (the C function that invoked
** this metamethod, compared with the iterator a call of ipairs returns) */
static bool called_by_ipairs(lua_State *L) {
  static lua_CFunction ipairs_iter; /* the base library's, the same in every state */
  lua_Debug ar;
  int top = lua_gettop(L);
  if (!ipairs_iter && lua_getglobal(L, "ipairs") == LUA_TFUNCTION) {
    lua_newtable(L);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) ipairs_iter = lua_tocfunction(L, -1);
  }
  lua_settop(L, top);
  if (!ipairs_iter || !lua_getstack(L, 1, &ar) || !lua_getinfo(L, "f", &ar)) return false;
  bool is = lua_tocfunction(L, -1) == ipairs_iter;
  lua_settop(L, top);
  return is;
}

/* t[i] is t:select(1, i), with i 1-based (negative from the end). Past
** the end it is an error, except for ipairs, which reads t[#t + 1] to
** stop: `for i, row in ipairs(t)` walks the rows as torch's `for row in t`. */
static int index_integer(lua_State *L, em_tensor *t) {
  if (t->ndim == 0) return luaL_error(L, "ember.index: a 0-d tensor cannot be indexed (use :item())");
  if (lua_isinteger(L, 2) && lua_tointeger(L, 2) == t->shape[0] + 1 && called_by_ipairs(L)) {
    lua_pushnil(L);
    return 1;
  }
  int64_t i = lember_checkpos(L, 2, t->shape[0], "index", "index");
  em_tensor **out = lember_newslot(L);
  em_status s = em_select(out, t, 0, i);
  if (s) return lember_error(L, "index", s);
  lember_account(L, *out);
  return 1;
}

/* t[idx] with an int64 tensor of 1-based positions in dim 1: as
** t:index_select(1, idx), and for an idx of any shape the result is idx's
** shape followed by t's other dims (PyTorch's x[idx]). */
static int call_table_index(lua_State *L, const char *handler, int nargs);

/* Whether the int64 index tensor idx holds negatives and every entry is in
** 1..size or -size..-1 (read on the host: only after the core refused it). */
static bool has_negatives_in_range(em_tensor *idx, int64_t size) {
  int64_t n = em_numel(idx);
  if (n == 0) return false;
  int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
  bool neg = false, ok = v != NULL && em_to_host(idx, v) == EM_OK;
  for (int64_t i = 0; ok && i < n; i++) {
    if (v[i] < 0) neg = true;
    ok = (v[i] >= 1 && v[i] <= size) || (v[i] < 0 && v[i] >= -size);
  }
  free(v);
  return ok && neg;
}

static int index_tensor(lua_State *L, em_tensor *t) {
  em_tensor *idx = lember_checktensor(L, 2);
  if (t->ndim == 0) return luaL_error(L, "ember.index: a 0-d tensor cannot be indexed (use :item())");
  if (idx->dtype == EM_BOOL) return call_table_index(L, "__mask_index", 2); /* x[mask], Lua side */
  if (idx->dtype != EM_I64)
    return luaL_error(L, "ember.index: an index tensor must be int64 (1-based positions in dim 1) or a bool "
                         "mask, got %s", em_dtype_name(idx->dtype));
  if (idx->ndim + t->ndim - 1 > EM_MAX_DIMS)
    return luaL_error(L, "ember.index: the result would have more than %d dims", EM_MAX_DIMS);
  int64_t shape[EM_MAX_DIMS], flat_n = em_numel(idx);
  int n = 0;
  for (int i = 0; i < idx->ndim; i++) shape[n++] = idx->shape[i];
  for (int i = 1; i < t->ndim; i++) shape[n++] = t->shape[i];
  em_tensor **out = lember_newslot(L);
  em_tensor *flat = NULL, *c = NULL, *y = NULL;
  em_status s = em_reshape(&flat, idx, 1, &flat_n);
  if (!s) s = lember_index_to_c(&c, flat);
  if (!s) s = em_index_select(&y, t, 0, c);
  if (!s) s = em_reshape(out, y, n, shape);
  em_release(flat);
  em_release(c);
  em_release(y);
  /* negative positions (-1 the last, as x[-1]) go the table way, x[{idx}],
  ** which counts them from the end: only when every entry names a row */
  if (s == EM_ERR_INDEX && has_negatives_in_range(idx, t->shape[0])) {
    lua_settop(L, 2);
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 1);
    lua_replace(L, 2);
    return call_table_index(L, "__table_index", 2);
  }
  if (s) return lember_index_error(L, "index", s, idx, t->shape[0], "index", INT64_MIN);
  lember_account(L, *out);
  return 1;
}

/* Torch7's table indices, t[{i, {a, b}, {}}], are built from select and
** slice in Lua (lua/ember/_helpers.lua), which stores the handlers in the
** metatable as __table_index(t, key) and __table_newindex(t, key, value).
** Calls the handler with the nargs values from index 1 on. */
static int call_table_index(lua_State *L, const char *handler, int nargs) {
  lember_checktensor(L, 1);
  lua_getmetatable(L, 1);
  if (lua_getfield(L, -1, handler) != LUA_TFUNCTION)
    return luaL_error(L, "ember.index: table indices need ember's Lua side (require \"ember\")");
  for (int i = 1; i <= nargs; i++) lua_pushvalue(L, i);
  lua_call(L, nargs, 1);
  return 1;
}

/* __index: upvalue 1 is the methods table. */
static int t_index(lua_State *L) {
  int kt = lua_type(L, 2);
  if (kt == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    return push_property(L, lember_checktensor(L, 1), lua_tostring(L, 2));
  }
  if (kt == LUA_TNUMBER) return index_integer(L, lember_checktensor(L, 1));
  if (lember_istensor(L, 2)) return index_tensor(L, lember_checktensor(L, 1));
  if (kt == LUA_TTABLE) return call_table_index(L, "__table_index", 2);
  if (kt == LUA_TBOOLEAN) /* most likely t[t > 0]: the operator gave one boolean */
    return luaL_error(L, "ember.index: cannot index a tensor with a boolean (t > 0 is one Lua boolean, whether "
                         "it holds for every element; the elementwise mask is t:gt(0), as in t[t:gt(0)])");
  return luaL_error(L, "ember.index: cannot index a tensor with a %s (use t[i], an int64 tensor, t[{i, j}], "
                       "t[{{a, b}, {}}] or a method name)", luaL_typename(L, 2));
}

/* ---------------------------------------------------------------- */
/* Assignment                                                        */
/* ---------------------------------------------------------------- */

/* t[i] = number | tensor copies into the slice t:select(1, i). */
static int assign_integer(lua_State *L, em_tensor *t) {
  em_tensor *dst = NULL, *src = NULL;
  em_status s;
  if (t->ndim == 0) return luaL_error(L, "ember.setindex: a 0-d tensor cannot be indexed (use :fill_())");
  int64_t i = lember_checkpos(L, 2, t->shape[0], "setindex", "index");
  int vt = lua_type(L, 3);
  if (vt == LUA_TUSERDATA) src = lember_checktensor(L, 3);
  else if (vt != LUA_TNUMBER && vt != LUA_TBOOLEAN)
    return luaL_error(L, "ember.setindex: value must be a number or a tensor, got %s",
                      luaL_typename(L, 3));
  /* a write autograd records goes the table way (_indexing.lua): t[{i}] = v
  ** (a leaf that requires grad stays here, refused naming the view) */
  if (em_grad_enabled() && !(t->requires_grad && !t->grad_fn) && (t->requires_grad || (src && src->requires_grad))) {
    lua_createtable(L, 1, 0);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 1);
    lua_replace(L, 2);
    return call_table_index(L, "__table_newindex", 3), 0;
  }
  double v = vt == LUA_TBOOLEAN ? lua_toboolean(L, 3) : lua_tonumber(L, 3);
  s = em_select(&dst, t, 0, i);
  if (!s) s = src ? em_copy_(dst, src) : em_fill_(dst, v);
  em_release(dst);
  if (s) return lember_error(L, "setindex", s);
  return 0;
}

static int assign_grad(lua_State *L, em_tensor *t) {
  em_tensor *g = NULL;
  if (!lua_isnil(L, 3)) {
    char a[64], b[64];
    g = lember_checktensor(L, 3);
    if (g->ndim != t->ndim || memcmp(g->shape, t->shape, sizeof(int64_t) * t->ndim) != 0 ||
        g->dtype != t->dtype || !em_device_eq(g->device, t->device))
      return luaL_error(L, "ember.grad: a gradient must match the tensor: got %s %s, expected %s %s",
                        em_shape_str(g->ndim, g->shape, a, sizeof a), em_dtype_name(g->dtype),
                        em_shape_str(t->ndim, t->shape, b, sizeof b), em_dtype_name(t->dtype));
  }
  /* No setter in the C API: the grad field is a plain owned reference. */
  em_release(t->grad);
  t->grad = g ? em_retain(g) : NULL;
  return 0;
}

static int t_newindex(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int kt = lua_type(L, 2);
  if (kt == LUA_TNUMBER) return assign_integer(L, t);
  if (kt == LUA_TSTRING) {
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "requires_grad") == 0) {
      luaL_checktype(L, 3, LUA_TBOOLEAN);
      em_status s = em_set_requires_grad(t, lua_toboolean(L, 3));
      if (s) return lember_error(L, "requires_grad", s);
      return 0;
    }
    if (strcmp(k, "grad") == 0) return assign_grad(L, t);
    return luaL_error(L, "ember: cannot set field '%s' of a tensor (settable: requires_grad, grad, t[i])", k);
  }
  if (kt == LUA_TTABLE) return call_table_index(L, "__table_newindex", 3), 0;
  if (lember_istensor(L, 2) && lember_checktensor(L, 2)->dtype == EM_BOOL)
    return call_table_index(L, "__mask_newindex", 3), 0; /* x[mask] = v, Lua side */
  if (lember_istensor(L, 2)) return call_table_index(L, "__index_newindex", 3), 0; /* x[idx] = v, Lua side */
  if (kt == LUA_TBOOLEAN) /* most likely t[t > 0] = v */
    return luaL_error(L, "ember.setindex: cannot assign to a tensor indexed by a boolean (t > 0 is one Lua boolean, "
                         "whether it holds for every element; the elementwise mask is t:gt(0), as in t[t:gt(0)] = v)");
  return luaL_error(L, "ember: cannot assign to a tensor indexed by a %s (t[i] = v, t[{...}] = v, "
                       "t[int64 tensor] = v and t[bool mask] = v can be assigned)", luaL_typename(L, 2));
}

/* #t is the size of the first dim. */
static int t_len(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (t->ndim == 0) return luaL_error(L, "ember.len: a 0-d tensor has no length");
  lua_pushinteger(L, (lua_Integer)t->shape[0]);
  return 1;
}

static int t_tostring(lua_State *L) {
  em_tensor **p = (em_tensor **)lua_touserdata(L, 1);
  if (!p || !lember_istensor(L, 1)) return luaL_typeerror(L, 1, "ember.Tensor");
  if (!*p) {
    lua_pushstring(L, "tensor(<closed>)");
    return 1;
  }
  lember_pushtostring(L, *p);
  return 1;
}

/* ---------------------------------------------------------------- */
/* Simple queries (methods)                                          */
/* ---------------------------------------------------------------- */

static int m_size(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_shape(L, t);
  } else {
    int d = lember_checkdim_n(L, 2, "size", t->ndim);
    lua_pushinteger(L, (lua_Integer)t->shape[d]);
  }
  return 1;
}

static int m_stride(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) {
      lua_pushinteger(L, (lua_Integer)t->stride[i]);
      lua_rawseti(L, -2, i + 1);
    }
  } else {
    int d = lember_checkdim_n(L, 2, "stride", t->ndim);
    lua_pushinteger(L, (lua_Integer)t->stride[d]);
  }
  return 1;
}

static int m_dim(lua_State *L) {
  lember_noextra(L, 1, "dim", NULL);
  lua_pushinteger(L, lember_checktensor(L, 1)->ndim);
  return 1;
}

static int m_numel(lua_State *L) {
  lember_noextra(L, 1, "numel", NULL);
  lua_pushinteger(L, (lua_Integer)em_numel(lember_checktensor(L, 1)));
  return 1;
}

static int m_is_contiguous(lua_State *L) {
  lember_noextra(L, 1, "is_contiguous", NULL);
  lua_pushboolean(L, em_is_contiguous(lember_checktensor(L, 1)));
  return 1;
}

static int m_is_closed(lua_State *L) {
  if (!lember_istensor(L, 1)) return luaL_typeerror(L, 1, "ember.Tensor");
  lua_pushboolean(L, *(em_tensor **)lua_touserdata(L, 1) == NULL);
  return 1;
}

/* core._noextra(op, what, n, x, ...): lember_noextra for ops written in
** Lua, so they word surplus arguments as the C methods do:
**   core._noextra("clamp", "min, max", 3, x, lo, hi, ...) */
static int f_noextra(lua_State *L) {
  char op[64], what[128];
  snprintf(op, sizeof op, "%s", luaL_checkstring(L, 1));
  int has_what = !lua_isnil(L, 2);
  if (has_what) snprintf(what, sizeof what, "%s", luaL_checkstring(L, 2));
  int n = (int)luaL_checkinteger(L, 3);
  lua_rotate(L, 1, -3);
  lua_pop(L, 3);
  lember_noextra(L, n, op, has_what ? what : NULL);
  return 0;
}

/* core._noextra_message(who, besides, nnames, what, got, at, kind): the
** message lember_noextra raises, for Lua's errors.no_extra to raise at the
** user's line. */
static int f_noextra_message(lua_State *L) {
  char msg[320];
  lember_noextra_message(msg, sizeof msg, luaL_checkstring(L, 1), luaL_checkstring(L, 2),
                         (int)luaL_checkinteger(L, 3), luaL_optstring(L, 4, NULL), (int)luaL_checkinteger(L, 5),
                         (int)luaL_checkinteger(L, 6), luaL_checkstring(L, 7));
  lua_pushstring(L, msg);
  return 1;
}

static int f_is_tensor(lua_State *L) {
  lua_pushboolean(L, lember_istensor(L, 1));
  return 1;
}

static const luaL_Reg methods[] = {
  {"size", m_size},
  {"stride", m_stride},
  {"dim", m_dim},
  {"numel", m_numel},
  {"is_contiguous", m_is_contiguous},
  {"close", t_close},
  {"is_closed", m_is_closed},
  {NULL, NULL}
};

void lember_open_tensor(lua_State *L, int module, int methods_idx, int mt) {
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);

  lua_pushcfunction(L, t_gc);
  lua_setfield(L, mt, "__gc");
  lua_pushcfunction(L, t_close);
  lua_setfield(L, mt, "__close");
  lua_pushvalue(L, methods_idx);
  lua_pushcclosure(L, t_index, 1);
  lua_setfield(L, mt, "__index");
  lua_pushcfunction(L, t_newindex);
  lua_setfield(L, mt, "__newindex");
  lua_pushcfunction(L, t_len);
  lua_setfield(L, mt, "__len");
  lua_pushcfunction(L, t_tostring);
  lua_setfield(L, mt, "__tostring");
  /* For the REPL's completion: __index is a function, so it looks here. */
  lua_pushvalue(L, methods_idx);
  lua_setfield(L, mt, "__methods");
  lua_createtable(L, 8, 0);
  for (int i = 0; properties[i]; i++) {
    lua_pushstring(L, properties[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, mt, "__properties");
  lua_pushvalue(L, mt);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &tensor_mt_key);

  lua_pushcfunction(L, f_is_tensor);
  lua_setfield(L, module, "is_tensor");
  lua_pushcfunction(L, f_noextra);
  lua_setfield(L, module, "_noextra");
  lua_pushcfunction(L, f_noextra_message);
  lua_setfield(L, module, "_noextra_message");
  lua_pushcfunction(L, lember_set_printoptions);
  lua_setfield(L, module, "set_printoptions");
  lua_pushvalue(L, methods_idx);
  lua_setfield(L, module, "Tensor");
}
