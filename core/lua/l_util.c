/*
** l_util.c -- argument checking shared by the binding: errors, 1-based
** dims and positions, shapes, dtypes, devices and option tables.
*/
#include <stdio.h>
#include <string.h>

#include "ember_plugin.h"
#include "lember.h"

static int raise_message(lua_State *L, const char *op, const char *msg, em_status s) {
  size_t n = strlen(op);
  /* The core's messages already start with "op: "; do not say it twice. */
  if (strncmp(msg, op, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  /* Nor the core op a method runs under its own name: an in-place one (zero_
  ** and t[i] = v fill_, "ember.zero_: fill_: ..."), a name ending in '_',
  ** a variant of op's own ("ember.max: max_all: ...") or the op an in-place
  ** one runs ("ember.add_: add: ..."). */
  size_t k = strspn(msg, "abcdefghijklmnopqrstuvwxyz_");
  if (k > 1 && msg[k] == ':' && msg[k + 1] == ' ' &&
      (msg[k - 1] == '_' || (k > n && strncmp(msg, op, n) == 0 && msg[n] == '_') ||
       (k < n && strncmp(msg, op, k) == 0 && op[k] == '_')))
    msg += k + 2;
  if (*msg == '\0') msg = em_status_name(s);
  return luaL_error(L, "ember.%s: %s", op, msg);
}

int lember_error(lua_State *L, const char *op, em_status s) {
  return raise_message(L, op, em_error_message(), s);
}

void lember_noextra_message(char *buf, size_t n, const char *who, const char *besides, int nnames,
                            const char *what, int got, int at, const char *kind) {
  if (!what || nnames == 0)
    snprintf(buf, n, "%s: takes no arguments%s, got %d more (argument %d is a %s)", who, besides, got, at, kind);
  else
    snprintf(buf, n, "%s: takes at most %d argument%s%s (%s), got %d (argument %d is a %s)", who, nnames,
             nnames == 1 ? "" : "s", besides, what, got, at, kind);
}

void lember_noextra(lua_State *L, int n, const char *op, const char *what) {
  int top = lua_gettop(L);
  while (top > n && lua_isnil(L, top)) top--;
  if (top <= n) return;
  char who[80], msg[320];
  snprintf(who, sizeof who, "ember.%s", op);
  /* without `what` the count is of the extra arguments, else of all past the tensor */
  lember_noextra_message(msg, sizeof msg, who, " besides the tensor", what ? n - 1 : 0, what,
                         what ? top - 1 : top - n, n + 1, luaL_typename(L, n + 1));
  luaL_error(L, "%s", msg);
}

void lember_noextra_after(lua_State *L, int next, const char *op, const char *what) {
  int top = lua_gettop(L), i = next;
  while (i <= top && lua_isnil(L, i)) i++;
  if (i > top) return;
  luaL_error(L, "ember.%s: expected %s as numbers or one table, got a %s after it (argument %d)", op, what,
             luaL_typename(L, i), i);
}

int64_t lember_checkint(lua_State *L, int idx, const char *op, const char *what) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (isnum && lua_type(L, idx) == LUA_TNUMBER) return (int64_t)v;
  if (lua_type(L, idx) == LUA_TNUMBER)
    luaL_error(L, "ember.%s: %s must be an integer, got %f", op, what, lua_tonumber(L, idx));
  luaL_error(L, "ember.%s: %s must be an integer, got %s", op, what, luaL_typename(L, idx));
  return 0;
}

int lember_checkdim(lua_State *L, int idx, const char *op) {
  int64_t d = lember_checkint(L, idx, op, "dim");
  if (d == 0)
    luaL_error(L, "ember.%s: dim 0 is not a dim: dims are 1-based (1 is the first, -1 the last)", op);
  if (d > EM_MAX_DIMS || d < -EM_MAX_DIMS - 1)
    luaL_error(L, "ember.%s: dim %I is out of range (at most %d dims)", op, (lua_Integer)d,
               EM_MAX_DIMS);
  return d > 0 ? (int)(d - 1) : (int)d;
}

int lember_checkdim_n(lua_State *L, int idx, const char *op, int ndim) {
  int64_t d = lember_checkint(L, idx, op, "dim");
  if (d >= 1 && d <= ndim) return (int)(d - 1);
  if (d < 0 && d >= -ndim) return (int)(ndim + d); /* not -d: it overflows for math.mininteger */
  if (ndim == 0)
    luaL_error(L, "ember.%s: dim %I is out of range for a 0-d tensor (it has no dims)", op,
               (lua_Integer)d);
  luaL_error(L, "ember.%s: dim %I is out of range for a %d-d tensor (dims are 1-based: 1..%d or -%d..-1)",
             op, (lua_Integer)d, ndim, ndim, ndim);
  return 0;
}

/* The position of a new dim (unsqueeze, stack): ndim + 1 places, as
** PyTorch's range [-ndim-1, ndim] in 1-based terms; the message names the
** tensor's own dim count, not ndim + 1. */
int lember_checkdim_new(lua_State *L, int idx, const char *op, int ndim) {
  int64_t d = lember_checkint(L, idx, op, "dim");
  int n = ndim + 1;
  if (d >= 1 && d <= n) return (int)(d - 1);
  if (d < 0 && d >= -n) return (int)(n + d);
  luaL_error(L, "ember.%s: dim %I is out of range for a %d-d tensor (dims are 1-based: a new dim goes at "
             "1..%d or -%d..-1)", op, (lua_Integer)d, ndim, n, n);
  return 0;
}

void lember_checkdim_scalar(lua_State *L, int idx, const char *op) {
  int64_t d = lember_checkint(L, idx, op, "dim");
  if (d != 1 && d != -1)
    luaL_error(L, "ember.%s: dim %I is out of range for a 0-d tensor (dims 1 or -1)", op, (lua_Integer)d);
}

int lember_optdim(lua_State *L, int idx, const char *op, int def) {
  return lua_isnoneornil(L, idx) ? def : lember_checkdim(L, idx, op);
}

int64_t lember_checkpos(lua_State *L, int idx, int64_t size, const char *op, const char *what) {
  int64_t i = lember_checkint(L, idx, op, what);
  if (i >= 1 && i <= size) return i - 1;
  if (i < 0 && i >= -size) return size + i; /* not -i: it overflows for math.mininteger */
  luaL_error(L, "ember.%s: %s %I is out of range for a dim of size %I (1-based: 1..%I or -%I..-1)",
             op, what, (lua_Integer)i, (lua_Integer)size, (lua_Integer)size, (lua_Integer)size);
  return 0;
}

/* One shape entry: a non-negative integer (or -1 when allowed). */
static int64_t shape_entry(lua_State *L, int idx, const char *op, int allow_neg1, int k) {
  int isnum;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "ember.%s: shape must be numbers or a table of numbers, got %s at position %d",
               op, luaL_typename(L, idx), k);
  if (!isnum)
    luaL_error(L, "ember.%s: shape entries must be integers, got %f at position %d", op,
               lua_tonumber(L, idx), k);
  if (v < 0 && !(allow_neg1 && v == -1))
    luaL_error(L, "ember.%s: shape entries must be >= 0%s, got %I at position %d", op,
               allow_neg1 ? " (or -1)" : "", v, k);
  return (int64_t)v;
}

int lember_checkshape(lua_State *L, int idx, const char *op, int64_t *shape, int allow_neg1,
                      int *next) {
  int n = 0;
  int t = lua_type(L, idx);
  if (t == LUA_TTABLE) {
    lua_Integer len = luaL_len(L, idx);
    if (len == 0) { /* {} is a 0-d shape, but {dtype=...} is an options table */
      lua_pushnil(L);
      if (lua_next(L, idx)) {
        lua_pop(L, 2);
        *next = idx;
        return 0;
      }
    }
    if (len > EM_MAX_DIMS)
      luaL_error(L, "ember.%s: a shape has at most %d dims, got %I", op, EM_MAX_DIMS, len);
    for (n = 0; n < (int)len; n++) {
      lua_geti(L, idx, n + 1);
      shape[n] = shape_entry(L, -1, op, allow_neg1, n + 1);
      lua_pop(L, 1);
    }
    *next = idx + 1;
    return n;
  }
  if (t == LUA_TNONE || t == LUA_TNIL) {
    *next = idx;
    return 0;
  }
  if (t != LUA_TNUMBER)
    luaL_error(L, "ember.%s: shape must be numbers or a table of numbers, got %s", op,
               luaL_typename(L, idx));
  while (lua_type(L, idx + n) == LUA_TNUMBER) {
    if (n == EM_MAX_DIMS)
      luaL_error(L, "ember.%s: a shape has at most %d dims", op, EM_MAX_DIMS);
    shape[n] = shape_entry(L, idx + n, op, allow_neg1, n + 1);
    n++;
  }
  *next = idx + n;
  return n;
}

int lember_checkdims(lua_State *L, int idx, const char *op, int *dims, int *next) {
  int n = 0;
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_Integer len = luaL_len(L, idx);
    if (len > EM_MAX_DIMS)
      luaL_error(L, "ember.%s: at most %d dims, got %I", op, EM_MAX_DIMS, len);
    for (n = 0; n < (int)len; n++) {
      lua_geti(L, idx, n + 1);
      dims[n] = lember_checkdim(L, -1, op);
      lua_pop(L, 1);
    }
    *next = idx + 1;
    return n;
  }
  while (lua_type(L, idx + n) == LUA_TNUMBER) {
    if (n == EM_MAX_DIMS) luaL_error(L, "ember.%s: at most %d dims", op, EM_MAX_DIMS);
    dims[n] = lember_checkdim(L, idx + n, op);
    n++;
  }
  if (n == 0 && !lua_isnoneornil(L, idx))
    luaL_error(L, "ember.%s: dims must be numbers or a table of numbers, got %s", op,
               luaL_typename(L, idx));
  *next = idx + n;
  return n;
}

static em_device cpu_for(lua_State *L, const char *op) {
  em_device d;
  em_status s = em_cpu_device(&d);
  if (s) lember_error(L, op, s);
  return d;
}

em_device lember_cpu(lua_State *L) { return cpu_for(L, "cpu"); }

/* Pushes "cpu, cuda": the device types of the loaded backends. */
static void push_loaded_devices(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  int first = 1;
  for (int i = 0; i < em_plugin_count(); i++) {
    const em_plugin_record *r = em_plugin_get(i);
    if (r->kind != EM_PLUGIN_BACKEND || !r->loaded) continue;
    if (!first) luaL_addstring(&b, ", ");
    luaL_addstring(&b, r->name);
    first = 0;
  }
  if (first) luaL_addstring(&b, "none");
  luaL_pushresult(&b);
}

/* Pushes "float32, float64, int64, bool, bfloat16": ember's dtypes, from EM_DTYPE_LIST. */
static const char *push_dtypes(lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; i < EM_NDTYPES; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, em_dtype_name((em_dtype)i));
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

/* Is s the name of a dtype of another library ("float16", "half", "int32",
** "uint8", "complex64", "float8_e4m3fn", ...) that ember does not have? */
static int foreign_dtype(const char *s) {
  static const char *const prefixes[] = {"float", "int", "uint", "complex", "bfloat", "qint", "quint", NULL};
  static const char *const words[] = {"half", "short", "int", "byte", "char", "cfloat", "cdouble", NULL};
  if (strncmp(s, "torch.", 6) == 0 && !strchr(s + 6, '.')) { /* torch.float16, Torch7's torch.IntTensor */
    s += 6;
    size_t n = strlen(s);
    if (n > 6 && strcmp(s + n - 6, "Tensor") == 0) return 1;
  }
  for (int i = 0; words[i]; i++)
    if (strcmp(s, words[i]) == 0) return 1;
  for (int i = 0; prefixes[i]; i++) {
    size_t n = strlen(prefixes[i]);
    if (strncmp(s, prefixes[i], n) == 0 && s[n] >= '0' && s[n] <= '9') return 1;
  }
  return 0;
}

/* Raises "ember.<op>: <what> '<str>' ...: <core reason>; dtypes are ...,
** loaded devices are ...". A dtype ember lacks (float16, int32) is said to
** be one, with ember's dtypes, and no device search is reported. */
int lember_device_error(lua_State *L, const char *op, const char *str, int with_dtypes) {
  if (with_dtypes && foreign_dtype(str))
    return luaL_error(L, "ember.%s: dtype '%s' is not supported (ember's dtypes: %s)", op, str, push_dtypes(L));
  const char *reason = lua_pushstring(L, em_error_message());
  push_loaded_devices(L);
  const char *devices = lua_tostring(L, -1);
  const char *dtypes = with_dtypes ? lua_pushfstring(L, "; dtypes: %s", push_dtypes(L)) : "";
  return luaL_error(L, "ember.%s: unknown %s '%s' (%s%s; loaded devices: %s, written \"cpu\", \"cuda\" or \"cuda:1\")",
                    op, with_dtypes ? "dtype or device" : "device", str, reason, dtypes, devices);
}

em_device lember_checkdevice(lua_State *L, int idx, const char *op) {
  em_device d;
  const char *str;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "ember.%s: device must be a string such as \"cpu\" or \"cuda:1\", got %s", op,
               luaL_typename(L, idx));
  str = lua_tostring(L, idx);
  em_status s = em_device_parse(str, &d);
  if (s) lember_device_error(L, op, str, 0);
  return d;
}

em_dtype lember_checkdtype(lua_State *L, int idx, const char *op) {
  em_dtype dt;
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "ember.%s: dtype must be a string such as \"float32\", got %s", op,
               luaL_typename(L, idx));
  if (em_dtype_parse(lua_tostring(L, idx), &dt)) {
    const char *name = lua_tostring(L, idx);
    luaL_error(L, "ember.%s: unknown dtype '%s' (%sember's dtypes: %s)", op, name,
               foreign_dtype(name) ? "not supported; " : "", push_dtypes(L));
  }
  return dt;
}

void lember_checkoptions(lua_State *L, int idx, const char *op, const char *const *names) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int ok = 0;
    if (lua_type(L, -2) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -2);
      for (int i = 0; names[i] && !ok; i++) ok = strcmp(k, names[i]) == 0;
    }
    if (!ok) {
      luaL_Buffer b;
      luaL_buffinit(L, &b);
      for (int i = 0; names[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, names[i]);
      }
      luaL_pushresult(&b);
      if (lua_type(L, -3) == LUA_TSTRING)
        luaL_error(L, "ember.%s: unknown option '%s' (options are: %s)", op, lua_tostring(L, -3),
                   lua_tostring(L, -1));
      luaL_error(L, "ember.%s: options must have string keys, got a %s key (options are: %s)", op,
                 luaL_typename(L, -3), lua_tostring(L, -1));
    }
    lua_pop(L, 1);
  }
}

static const char *const creation_options[] = {"dtype", "device", "requires_grad", NULL};

void lember_checkopts(lua_State *L, int idx, const char *op, lember_opts *o) {
  o->dtype = em_default_dtype(); /* torch.get_default_dtype: float32 unless set */
  o->requires_grad = 0;
  o->has_dtype = 0;
  if (lua_isnoneornil(L, idx)) {
    o->device = cpu_for(L, op);
    return;
  }
  if (lua_type(L, idx) == LUA_TSTRING) { /* ember.zeros(2, "int64"): the dtype alone */
    o->dtype = lember_checkdtype(L, idx, op);
    o->has_dtype = 1;
    o->device = cpu_for(L, op);
    return;
  }
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "ember.%s: expected a dtype name or an options table {dtype=, device=, requires_grad=}, got %s",
               op, luaL_typename(L, idx));
  lember_checkoptions(L, idx, op, creation_options);
  if (lua_getfield(L, idx, "dtype") != LUA_TNIL) {
    o->dtype = lember_checkdtype(L, -1, op);
    o->has_dtype = 1;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "device") != LUA_TNIL)
    o->device = lember_checkdevice(L, -1, op);
  else
    o->device = cpu_for(L, op);
  lua_pop(L, 1);
  if (lua_getfield(L, idx, "requires_grad") != LUA_TNIL) {
    if (!lua_isboolean(L, -1))
      luaL_error(L, "ember.%s: requires_grad must be a boolean, got %s", op,
                 luaL_typename(L, -1));
    o->requires_grad = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
}

em_status lember_index_to_c(em_tensor **out, em_tensor *idx) {
  if (idx->dtype != EM_I64) { /* the core names the wrong dtype */
    *out = em_retain(idx);
    return EM_OK;
  }
  bool prev = em_set_grad_enabled(false);
  em_status s = em_binary_scalar(out, EM_SUB, idx, 1.0);
  em_set_grad_enabled(prev);
  return s;
}

em_status lember_index_to_lua(em_tensor **t) {
  em_tensor *r = NULL;
  bool prev = em_set_grad_enabled(false);
  em_status s = em_binary_scalar(&r, EM_ADD, *t, 1.0);
  em_set_grad_enabled(prev);
  em_release(*t);
  *t = r;
  return s;
}

/* Formats the position of flat element i of a tensor of `shape` as {a, b}. */
static void push_position(lua_State *L, int ndim, const int64_t *shape, int64_t i) {
  int64_t at[EM_MAX_DIMS];
  luaL_Buffer b;
  for (int d = ndim - 1; d >= 0; d--) {
    at[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  luaL_buffinit(L, &b);
  luaL_addchar(&b, '{');
  for (int d = 0; d < ndim; d++) {
    if (d) luaL_addstring(&b, ", ");
    lua_pushinteger(L, (lua_Integer)(at[d] + 1));
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
}

int lember_index_error(lua_State *L, const char *op, em_status s, em_tensor *idx, int64_t size,
                       const char *what, int64_t ignore) {
  if (s != EM_ERR_INDEX || idx->dtype != EM_I64) return lember_error(L, op, s);
  int64_t n = em_numel(idx);
  lua_pushstring(L, em_error_message()); /* em_to_host may overwrite it */
  int64_t *v = (int64_t *)lua_newuserdatauv(L, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
  if (em_to_host(idx, v) == EM_OK) {
    for (int64_t i = 0; i < n; i++) {
      if ((v[i] >= 1 && v[i] <= size) || v[i] == ignore) continue;
      push_position(L, idx->ndim, idx->shape, i);
      return luaL_error(L, "ember.%s: %s %I at %s is out of range 1..%I (1-based)", op, what,
                        (lua_Integer)v[i], lua_tostring(L, -1), (lua_Integer)size);
    }
  }
  /* nothing out of range here: the core's own message (kept above) */
  return raise_message(L, op, lua_tostring(L, -2), s);
}
