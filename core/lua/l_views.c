/*
** l_views.c -- views and copies: view, reshape, transpose, permute,
** narrow, select, slice, expand, squeeze, unsqueeze, flatten, contiguous,
** clone, detach, and dtype/device conversions (to, float, cuda, ...).
** Dims and positions arrive 1-based and leave here 0-based.
*/
#include <string.h>

#include "lember.h"

/* Pushes a slot, lets `s` be computed into it, finishes. */
#define RESULT(L, op, call)                            \
  do {                                                 \
    em_tensor **out = lember_newslot(L);               \
    em_status s_ = (call);                             \
    if (s_) return lember_error(L, op, s_);            \
    lember_account(L, *out);                           \
    return 1;                                          \
  } while (0)

static int m_view(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int64_t shape[EM_MAX_DIMS];
  int next;
  int n = lember_checkshape(L, 2, "view", shape, 1, &next);
  lember_noextra_after(L, next, "view", "the shape");
  RESULT(L, "view", em_view(out, t, n, shape));
}

static int m_reshape(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int64_t shape[EM_MAX_DIMS];
  int next;
  int n = lember_checkshape(L, 2, "reshape", shape, 1, &next);
  lember_noextra_after(L, next, "reshape", "the shape");
  RESULT(L, "reshape", em_reshape(out, t, n, shape));
}

static int m_expand(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int64_t shape[EM_MAX_DIMS];
  int next;
  int n = lember_checkshape(L, 2, "expand", shape, 1, &next);
  lember_noextra_after(L, next, "expand", "the shape");
  RESULT(L, "expand", em_expand(out, t, n, shape));
}

static int m_transpose(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (t->ndim == 0) { /* torch: a 0-d tensor's dim 0 (ours 1 or -1), swapped with itself */
    lember_checkdim_scalar(L, 2, "transpose");
    lember_checkdim_scalar(L, 3, "transpose");
    lember_noextra(L, 3, "transpose", "dim0, dim1");
    RESULT(L, "transpose", em_view(out, t, 0, t->shape));
  }
  int d0 = lember_checkdim_n(L, 2, "transpose", t->ndim);
  int d1 = lember_checkdim_n(L, 3, "transpose", t->ndim);
  lember_noextra(L, 3, "transpose", "dim0, dim1");
  RESULT(L, "transpose", em_transpose(out, t, d0, d1));
}

/* t(): a matrix's transpose, as in Torch7 and PyTorch; a 0-d or 1-d
** tensor as it is (a view). */
static int m_t(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  lember_noextra(L, 1, "t", NULL);
  if (t->ndim > 2) return luaL_error(L, "ember.t: expects a tensor of at most 2 dims, got %d (use transpose)", t->ndim);
  if (t->ndim == 2) RESULT(L, "t", em_transpose(out, t, 0, 1));
  RESULT(L, "t", em_view(out, t, t->ndim, t->shape));
}

static int m_permute(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int dims[EM_MAX_DIMS];
  int next;
  int n = lember_checkdims(L, 2, "permute", dims, &next);
  lember_noextra_after(L, next, "permute", "the dims");
  for (int i = 0; i < n; i++) /* C takes negative dims too, but be exact */
    if (dims[i] < 0) dims[i] += t->ndim;
  RESULT(L, "permute", em_permute(out, t, n, dims));
}

/* narrow(dim, start, length): start 1-based (negative from the end). */
static int m_narrow(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "narrow", t->ndim);
  int64_t start;
  int64_t size = t->shape[d];
  int64_t i = lember_checkint(L, 3, "narrow", "start");
  int64_t len = lember_checkint(L, 4, "narrow", "length");
  lember_noextra(L, 4, "narrow", "dim, start, length");
  if (i >= 1 && i <= size + 1) start = i - 1; /* size+1 with length 0 is empty, as torch */
  else if (i < 0 && i >= -size) start = size + i; /* not -i: math.mininteger */
  else
    return luaL_error(L, "ember.narrow: start %I is out of range for dim %d of size %I (1-based)",
                      (lua_Integer)i, d + 1, (lua_Integer)size);
  if (len < 0 || len > size - start) /* not start + len: it may overflow */
    return luaL_error(L, "ember.narrow: length %I from start %I does not fit dim %d of size %I",
                      (lua_Integer)len, (lua_Integer)i, d + 1, (lua_Integer)size);
  RESULT(L, "narrow", em_narrow(out, t, d, start, len));
}

static int m_select(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "select", t->ndim);
  int64_t i = lember_checkpos(L, 3, t->shape[d], "select", "index");
  lember_noextra(L, 3, "select", "dim, index");
  RESULT(L, "select", em_select(out, t, d, i));
}

/* slice(dim, start, stop [, step]): 1-based, stop inclusive, negative
** counts from the end (-1 is the last), like Lua's string.sub. */
static int m_slice(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "slice", t->ndim);
  int64_t size = t->shape[d];
  int64_t start = lua_isnoneornil(L, 3) ? 1 : lember_checkint(L, 3, "slice", "start");
  int64_t stop = lua_isnoneornil(L, 4) ? -1 : lember_checkint(L, 4, "slice", "stop");
  int64_t step = lua_isnoneornil(L, 5) ? 1 : lember_checkint(L, 5, "slice", "step");
  if (step <= 0) return luaL_error(L, "ember.slice: step must be positive, got %I", (lua_Integer)step);
  int64_t b = start > 0 ? start - 1 : size + start;      /* 0-based first */
  int64_t e = stop > 0 ? stop : size + stop + 1;         /* 0-based end, exclusive */
  if (b < 0) b = 0;
  if (e > size) e = size;
  if (e < b) e = b;
  RESULT(L, "slice", em_slice(out, t, d, b, e, step));
}

static int m_squeeze(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  /* a 0-d tensor takes torch's dim 0 (ours 1 or -1) and stays as it is */
  if (t->ndim == 0 && !lua_isnoneornil(L, 2)) lember_checkdim_scalar(L, 2, "squeeze");
  int d = lua_isnoneornil(L, 2) || t->ndim == 0 ? EM_ALL_DIMS : lember_checkdim_n(L, 2, "squeeze", t->ndim);
  RESULT(L, "squeeze", em_squeeze(out, t, d));
}

static int m_unsqueeze(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int d = lember_checkdim_new(L, 2, "unsqueeze", t->ndim);
  lember_noextra(L, 2, "unsqueeze", "dim");
  RESULT(L, "unsqueeze", em_unsqueeze(out, t, d));
}

static int m_flatten(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (t->ndim == 0) RESULT(L, "flatten", em_reshape(out, t, 1, (const int64_t[]){1}));
  int s = lua_isnoneornil(L, 2) ? 0 : lember_checkdim_n(L, 2, "flatten", t->ndim);
  int e = lua_isnoneornil(L, 3) ? t->ndim - 1 : lember_checkdim_n(L, 3, "flatten", t->ndim);
  RESULT(L, "flatten", em_flatten(out, t, s, e));
}

static int m_contiguous(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  lember_noextra(L, 1, "contiguous", NULL);
  if (em_is_contiguous(t)) { /* the same tensor, as torch */
    lua_settop(L, 1);
    return 1;
  }
  RESULT(L, "contiguous", em_contiguous(out, t));
}

static int m_clone(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  lember_noextra(L, 1, "clone", NULL);
  RESULT(L, "clone", em_clone(out, t));
}

static int m_detach(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  lember_noextra(L, 1, "detach", NULL);
  RESULT(L, "detach", em_detach(out, t));
}

/* t:_assign(src): this userdata now wraps src's tensor (its data, shape,
** dtype, device and requires_grad), for leaves only. Module:to converts a
** parameter through it, so that the parameter keeps its Lua identity and an
** optimizer made before the conversion still updates the model (PyTorch's
** module.to() changes param.data under the same Parameter). Returns t. */
static int m__assign(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1), *src = lember_checktensor(L, 2);
  if (t->grad_fn || src->grad_fn)
    return luaL_error(L, "ember._assign: only leaf tensors (this is how Module:to keeps a parameter)");
  em_tensor **slot = (em_tensor **)lua_touserdata(L, 1);
  if (t != src) {
    lember_rekey_hooks(L, 1, t, src); /* hooks on t follow it to its new tensor */
    *slot = em_retain(src);
    em_release(t);
  }
  lua_settop(L, 1);
  return 1;
}

/* t:detach_(): t itself cut from the graph (torch's detach_, e.g. an RNN's
** hidden state between truncated-BPTT chunks); a leaf stops requiring
** grad. Returns t. */
static int m_detach_(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  if (t->grad_fn) {
    em_node_release(t->grad_fn);
    t->grad_fn = NULL;
  }
  t->requires_grad = false;
  lua_settop(L, 1);
  return 1;
}

/* Conversions return the tensor itself when nothing changes (as torch). */
static int to_dtype(lua_State *L, em_tensor *t, em_dtype dt, const char *op) {
  if (t->dtype == dt) {
    lua_settop(L, 1);
    return 1;
  }
  RESULT(L, op, em_to_dtype(out, t, dt));
}

static int to_device(lua_State *L, em_tensor *t, em_device dev, const char *op) {
  if (em_device_eq(t->device, dev)) {
    lua_settop(L, 1);
    return 1;
  }
  RESULT(L, op, em_to_device(out, t, dev));
}

/* One name of t:to(...): a dtype or a device, each at most once. */
static void to_name(lua_State *L, int idx, em_dtype *dt, bool *has_dt, em_device *dev, bool *has_dev) {
  if (lua_type(L, idx) != LUA_TSTRING)
    luaL_error(L, "ember.to: expected a dtype or device name, a tensor or {dtype=, device=}, got %s",
               luaL_typename(L, idx));
  const char *what = lua_tostring(L, idx);
  em_dtype d;
  em_device v;
  if (em_dtype_parse(what, &d) == EM_OK) {
    if (*has_dt) luaL_error(L, "ember.to: two dtypes given (%s and %s)", em_dtype_name(*dt), what);
    *dt = d;
    *has_dt = true;
  } else if (em_device_parse(what, &v) == EM_OK) {
    if (*has_dev) luaL_error(L, "ember.to: two devices given (the second is %s)", what);
    *dev = v;
    *has_dev = true;
  } else {
    lember_device_error(L, "to", what, 1);
  }
}

/* t:to("float64"), t:to("cuda:1"), t:to("cuda", "bfloat16") (either
** order), t:to(other) (other's dtype and device, as torch's x.to(y)) or
** t:to{dtype=, device=}; t itself when nothing changes. */
static int m_to(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  int n = lua_gettop(L);
  em_dtype dt = t->dtype;
  em_device dev = t->device;
  bool has_dt = false, has_dev = false;
  while (n > 1 && lua_isnil(L, n)) n--; /* trailing nils do not count */
  em_tensor *other = n == 2 ? lember_testtensor(L, 2) : NULL;
  if (n < 2 || n > 3) {
    return luaL_error(L, "ember.to: expected a dtype or device name (or both), a tensor or {dtype=, device=}, "
                         "got %d arguments", n - 1);
  } else if (other) {
    dt = other->dtype;
    dev = other->device;
    has_dt = has_dev = true;
  } else if (n == 2 && lua_type(L, 2) == LUA_TTABLE) {
    static const char *const names[] = {"dtype", "device", NULL};
    lember_checkoptions(L, 2, "to", names);
    for (int k = 0; k < 2; k++) {
      if (lua_getfield(L, 2, names[k]) != LUA_TNIL) to_name(L, lua_gettop(L), &dt, &has_dt, &dev, &has_dev);
      lua_pop(L, 1);
    }
  } else {
    for (int i = 2; i <= n; i++) to_name(L, i, &dt, &has_dt, &dev, &has_dev);
  }
  bool same_dt = t->dtype == dt, same_dev = em_device_eq(t->device, dev);
  if (same_dt && same_dev) {
    lua_settop(L, 1);
    return 1;
  }
  if (same_dev) RESULT(L, "to", em_to_dtype(out, t, dt));
  if (same_dt) RESULT(L, "to", em_to_device(out, t, dev));
  em_tensor *mid = NULL;
  em_status s = em_to_dtype(&mid, t, dt);
  if (s) return lember_error(L, "to", s);
  em_tensor **out = lember_newslot(L);
  s = em_to_device(out, mid, dev);
  em_release(mid);
  if (s) return lember_error(L, "to", s);
  lember_account(L, *out);
  return 1;
}

/* x:float(), x:double(), ...: to_dtype with no further arguments */
#define CAST_METHOD(NAME, DT)                                                 \
  static int m_##NAME(lua_State *L) {                                         \
    em_tensor *t = lember_checktensor(L, 1);                                  \
    lember_noextra(L, 1, #NAME, NULL);                                        \
    return to_dtype(L, t, DT, #NAME);                                         \
  }
CAST_METHOD(float, EM_F32)
CAST_METHOD(double, EM_F64)
CAST_METHOD(long, EM_I64)
CAST_METHOD(bool, EM_BOOL)
CAST_METHOD(bfloat16, EM_BF16)
#undef CAST_METHOD

/* t:half(), t:int(), t:short(), t:char(), t:byte(): PyTorch's and Torch7's
** casts to dtypes ember has not; each is an error saying what to use. */
static const struct {
  const char *method, *dtype, *instead;
} missing_casts[] = {
  {"half", "float16", "its 16-bit float is bfloat16 (t:bfloat16(), or ember.autocast(\"bfloat16\") for mixed precision)"},
  {"int", "int32", "its integer dtype is int64 (t:long())"},
  {"short", "int16", "its integer dtype is int64 (t:long())"},
  {"char", "int8", "its integer dtype is int64 (t:long())"},
  {"byte", "uint8", "its integer dtype is int64 (t:long()), and a mask is bool (t:bool())"},
};

static int m_missing_cast(lua_State *L) {
  size_t i = (size_t)lua_tointeger(L, lua_upvalueindex(1));
  return luaL_error(L, "ember.%s: ember has no %s dtype; %s", missing_casts[i].method, missing_casts[i].dtype,
                    missing_casts[i].instead);
}

static int m_cpu(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  return to_device(L, t, lember_cpu(L), "cpu");
}

/* t:cuda([index]) with index 1-based, default the first GPU. */
static int m_cuda(lua_State *L) {
  em_tensor *t = lember_checktensor(L, 1);
  em_device dev;
  if (lua_isnoneornil(L, 2)) {
    lua_pushliteral(L, "cuda");
  } else {
    int64_t i = lember_checkint(L, 2, "cuda", "device index");
    lua_pushfstring(L, "cuda:%I", (lua_Integer)i);
  }
  dev = lember_checkdevice(L, -1, "cuda");
  lua_pop(L, 1);
  return to_device(L, t, dev, "cuda");
}

static const luaL_Reg methods[] = {
  {"view", m_view}, {"reshape", m_reshape}, {"expand", m_expand},
  {"transpose", m_transpose}, {"t", m_t}, {"permute", m_permute}, {"narrow", m_narrow},
  {"select", m_select}, {"slice", m_slice}, {"squeeze", m_squeeze},
  {"unsqueeze", m_unsqueeze}, {"flatten", m_flatten}, {"contiguous", m_contiguous},
  {"clone", m_clone}, {"detach", m_detach}, {"detach_", m_detach_}, {"_assign", m__assign}, {"to", m_to}, {"float", m_float},
  {"double", m_double}, {"long", m_long}, {"bool", m_bool}, {"bfloat16", m_bfloat16},
  {"cpu", m_cpu}, {"cuda", m_cuda},
  {NULL, NULL}
};

void lember_open_views(lua_State *L, int module, int methods_idx, int mt) {
  (void)module;
  (void)mt;
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  for (size_t i = 0; i < sizeof missing_casts / sizeof missing_casts[0]; i++) {
    lua_pushinteger(L, (lua_Integer)i);
    lua_pushcclosure(L, m_missing_cast, 1);
    lua_setfield(L, -2, missing_casts[i].method);
  }
  lua_pop(L, 1);
}
