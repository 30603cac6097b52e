/*
** l_convert.c -- tensors from Lua values and back: ember.tensor(data),
** t:item(), t:totable().
**
** Host buffers live in temporary userdata, so an error raised half way
** through a conversion leaks nothing.
*/
#include <math.h>
#include <string.h>

#include "ember_bf16.h"
#include "lember.h"

/* ---------------------------------------------------------------- */
/* Host element access                                               */
/* ---------------------------------------------------------------- */

/* Pushes element i of a contiguous host buffer of dtype dt. */
static void push_element(lua_State *L, const void *buf, em_dtype dt, int64_t i) {
  switch (dt) {
    case EM_F32: lua_pushnumber(L, ((const float *)buf)[i]); break;
    case EM_F64: lua_pushnumber(L, ((const double *)buf)[i]); break;
    case EM_I64: lua_pushinteger(L, (lua_Integer)((const int64_t *)buf)[i]); break;
    case EM_BOOL: lua_pushboolean(L, ((const uint8_t *)buf)[i] != 0); break;
    case EM_BF16: lua_pushnumber(L, em_bf16_to_f32(((const uint16_t *)buf)[i])); break;
    default: lua_pushnil(L); break;
  }
}

/* Copies t to a new host buffer (a userdata left on the stack). */
static void *to_host(lua_State *L, em_tensor *t, const char *op) {
  size_t n = (size_t)em_numel(t) * em_dtype_size(t->dtype);
  void *buf = lua_newuserdatauv(L, n ? n : 1, 0);
  em_status s = em_to_host(t, buf);
  if (s) lember_error(L, op, s);
  return buf;
}

/* ---------------------------------------------------------------- */
/* item and totable                                                  */
/* ---------------------------------------------------------------- */

static int m_item(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  lember_noextra(L, 1, "item", NULL);
  if (em_numel(t) != 1) {
    char b[128];
    return luaL_error(L, "ember.item: only a one-element tensor has an item, got shape %s",
                      em_shape_str(t->ndim, t->shape, b, sizeof b));
  }
  void *buf = to_host(L, t, "item");
  push_element(L, buf, t->dtype, 0);
  return 1;
}

/* Builds nested tables for dims d.. of the contiguous buffer at *pos. */
static void push_nested(lua_State *L, const em_tensor *t, const void *buf, int d, int64_t *pos) {
  int64_t n = t->shape[d];
  luaL_checkstack(L, 3, "totable");
  lua_createtable(L, n > INT32_MAX ? INT32_MAX : (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    if (d == t->ndim - 1)
      push_element(L, buf, t->dtype, (*pos)++);
    else
      push_nested(L, t, buf, d + 1, pos);
    lua_rawseti(L, -2, (lua_Integer)(i + 1));
  }
}

static int m_totable(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  void *buf = to_host(L, t, "totable");
  if (t->ndim == 0) {
    push_element(L, buf, t->dtype, 0);
    return 1;
  }
  int64_t pos = 0;
  push_nested(L, t, buf, 0, &pos);
  return 1;
}

/* ---------------------------------------------------------------- */
/* ember.tensor(data [, opts])                                       */
/* ---------------------------------------------------------------- */

typedef struct fill_state {
  int ndim;
  int64_t shape[EM_MAX_DIMS];
  int64_t at[EM_MAX_DIMS]; /* 1-based position, for messages */
  em_dtype dt;             /* host buffer dtype */
  void *buf;
  int64_t n;               /* elements written */
  int leaf_type;           /* LUA_TNUMBER or LUA_TBOOLEAN */
  int leaf_tensor;         /* the first leaf is a one-element tensor ... */
  em_dtype leaf_dtype;     /* ... of this dtype (the default dtype, as torch.tensor's) */
} fill_state;

static const char *where(lua_State *L, const fill_state *f, int depth) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  for (int i = 0; i < depth; i++) {
    if (i) luaL_addstring(&b, ", ");
    lua_pushinteger(L, (lua_Integer)f->at[i]);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* Finds the shape by following the first element at each depth. */
static void infer_shape(lua_State *L, int idx, fill_state *f) {
  lua_pushvalue(L, idx);
  f->ndim = 0;
  while (lua_type(L, -1) == LUA_TTABLE) {
    if (f->ndim == EM_MAX_DIMS)
      luaL_error(L, "ember.tensor: nested tables are deeper than %d dims", EM_MAX_DIMS);
    f->shape[f->ndim++] = (int64_t)luaL_len(L, -1);
    if (luaL_len(L, -1) == 0) {
      /* {a = 1} is not an empty list */
      lua_pushnil(L);
      if (lua_next(L, -2)) {
        lua_pop(L, 1);
        luaL_error(L, "ember.tensor: expected a list (a nested table of numbers), got a table with the key %s",
                   luaL_tolstring(L, -1, NULL));
      }
      break;
    }
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  f->leaf_type = lua_type(L, -1);
  if (f->leaf_type == LUA_TUSERDATA && lember_istensor(L, -1)) {
    f->leaf_tensor = 1;
    f->leaf_dtype = lember_checktensor(L, -1)->dtype;
    f->leaf_type = f->leaf_dtype == EM_BOOL ? LUA_TBOOLEAN : LUA_TNUMBER;
  }
  lua_pop(L, 1);
}

/* A one-element tensor at idx stands for its number (or boolean), as in
** torch.tensor([t1, t2]): replaced in place by it. */
static void tensor_leaf(lua_State *L, fill_state *f, int idx, int depth) {
  em_tensor *t = lember_checktensor(L, idx);
  if (em_numel(t) != 1) {
    char b[128];
    luaL_error(L, "ember.tensor: only one-element tensors can stand for numbers, got shape %s at %s",
               em_shape_str(t->ndim, t->shape, b, sizeof b), where(L, f, depth));
  }
  void *buf = to_host(L, t, "tensor");
  push_element(L, buf, t->dtype, 0);
  lua_replace(L, idx);
  lua_pop(L, 1); /* the host buffer */
}

static void put(lua_State *L, fill_state *f, int idx, int depth) {
  idx = lua_absindex(L, idx); /* where() pushes its string */
  if (lua_type(L, idx) == LUA_TUSERDATA && lember_istensor(L, idx)) tensor_leaf(L, f, idx, depth);
  int tt = lua_type(L, idx);
  if (tt != LUA_TNUMBER && tt != LUA_TBOOLEAN) {
    const char *got = luaL_typename(L, idx);
    luaL_error(L, "ember.tensor: expected a number or a boolean at %s, got %s", where(L, f, depth), got);
  }
  if (tt != f->leaf_type && f->leaf_type != LUA_TNONE) {
    const char *got = luaL_typename(L, idx);
    luaL_error(L, "ember.tensor: mixed numbers and booleans (a %s at %s)", got, where(L, f, depth));
  }
  int64_t i = f->n++;
  /* a boolean is 1 or 0 in a number dtype (lua_tonumber would give 0 for true) */
  double num = tt == LUA_TBOOLEAN ? (double)lua_toboolean(L, idx) : lua_tonumber(L, idx);
  switch (f->dt) {
    case EM_F32: ((float *)f->buf)[i] = (float)num; break;
    case EM_F64: ((double *)f->buf)[i] = num; break;
    case EM_BOOL: ((uint8_t *)f->buf)[i] = num != 0;
      break;
    case EM_I64:
      if (lua_isinteger(L, idx)) {
        ((int64_t *)f->buf)[i] = (int64_t)lua_tointeger(L, idx);
      } else {
        double v = num;
        if (v != v) /* "%f" would say "-nan" for 0/0 */
          luaL_error(L, "ember.tensor: nan at %s does not fit int64", where(L, f, depth));
        if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) /* [-2^63, 2^63) */
          luaL_error(L, "ember.tensor: %f at %s does not fit int64", v, where(L, f, depth));
        ((int64_t *)f->buf)[i] = (int64_t)v; /* truncates, as torch does */
      }
      break;
    default: break;
  }
}

static void fill(lua_State *L, fill_state *f, int depth) {
  /* the table for this depth is on top of the stack */
  int64_t n = (int64_t)luaL_len(L, -1);
  if (n != f->shape[depth])
    luaL_error(L, "ember.tensor: ragged nested table: %s has %I elements, expected %I",
               where(L, f, depth), (lua_Integer)n, (lua_Integer)f->shape[depth]);
  luaL_checkstack(L, 4, "tensor");
  for (int64_t i = 1; i <= n; i++) {
    f->at[depth] = i;
    lua_geti(L, -1, (lua_Integer)i);
    if (depth + 1 < f->ndim) {
      if (lua_type(L, -1) != LUA_TTABLE)
        luaL_error(L, "ember.tensor: ragged nested table: expected a table at %s, got %s",
                   where(L, f, depth + 1), luaL_typename(L, -1));
      fill(L, f, depth + 1);
    } else {
      put(L, f, -1, depth + 1);
    }
    lua_pop(L, 1);
  }
}

/* A copy of a tensor with the options applied (ember.tensor(t)). */
static int tensor_from_tensor(lua_State *L, em_tensor *x, const lember_opts *o) {
  em_tensor *d = NULL, *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = em_detach(&d, x);
  if (!s) s = o->has_dtype && o->dtype != x->dtype ? em_to_dtype(&c, d, o->dtype) : em_clone(&c, d);
  if (!s) s = em_to_device(out, c, o->device);
  em_release(d);
  em_release(c);
  if (!s && o->requires_grad) s = em_set_requires_grad(*out, true);
  if (s) return lember_error(L, "tensor", s);
  lember_account(L, *out);
  return 1;
}

static int f_tensor(lua_State *L) {
  lember_opts o;
  fill_state f;
  em_status s;
  int tt = lua_type(L, 1);
  lember_checkopts(L, 2, "tensor", &o);
  if (tt == LUA_TUSERDATA) return tensor_from_tensor(L, lember_checktensor(L, 1), &o);
  memset(&f, 0, sizeof f);
  if (tt == LUA_TNUMBER || tt == LUA_TBOOLEAN) {
    f.ndim = 0;
    f.leaf_type = tt;
  } else if (tt == LUA_TTABLE) {
    infer_shape(L, 1, &f);
  } else {
    return luaL_error(L, "ember.tensor: data must be a number, a boolean, a nested table or a tensor, got %s",
                      luaL_typename(L, 1));
  }
  if (!o.has_dtype && f.leaf_tensor) o.dtype = f.leaf_dtype;
  else if (!o.has_dtype && f.leaf_type == LUA_TBOOLEAN) o.dtype = EM_BOOL;
  int64_t numel = 1;
  for (int i = 0; i < f.ndim; i++) numel *= f.shape[i];
  f.dt = o.dtype == EM_BF16 ? EM_F32 : o.dtype; /* bf16 is converted by the core */
  f.buf = lua_newuserdatauv(L, (size_t)(numel ? numel : 1) * em_dtype_size(f.dt), 0);
  if (tt == LUA_TTABLE) {
    lua_pushvalue(L, 1);
    if (numel > 0) fill(L, &f, 0);
    lua_pop(L, 1);
  } else {
    put(L, &f, 1, 0);
  }
  em_tensor **out = lember_newslot(L);
  s = em_from_host(out, f.ndim, f.shape, f.dt, f.buf, o.device);
  if (!s && f.dt != o.dtype) {
    em_tensor *c = NULL;
    s = em_to_dtype(&c, *out, o.dtype);
    em_release(*out);
    *out = c;
  }
  if (!s && o.requires_grad) s = em_set_requires_grad(*out, true);
  if (s) return lember_error(L, "tensor", s);
  lember_account(L, *out);
  return 1;
}

static const luaL_Reg methods[] = {
  {"item", m_item},
  {"totable", m_totable},
  {NULL, NULL}
};

void lember_open_convert(lua_State *L, int module, int methods_idx, int mt) {
  (void)mt;
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, f_tensor);
  lua_setfield(L, module, "tensor");
}
