/*
** l_elementwise.c -- arithmetic metamethods and elementwise methods:
** + - * / ^ unary -, comparisons, logical ops, unary functions, where,
** masked_fill, and the in-place ops optimizers use.
**
** `c = a + b` is the hot path of every script: the functions here keep the
** tensor metatable as upvalue 1, check operands by comparing metatables
** (no registry string lookup) and write the core's result straight into a
** fresh userdata.
*/
#include <math.h>
#include <string.h>

#include "lember.h"

#define MT lua_upvalueindex(1)

/* The tensor at idx, NULL if it is not one (closed tensors raise). */
static inline em_tensor *fast_tensor(lua_State *L, int idx) {
  em_tensor **p = (em_tensor **)lua_touserdata(L, idx);
  if (!p || !lua_getmetatable(L, idx)) return NULL;
  int ok = lua_rawequal(L, -1, MT);
  lua_settop(L, -2);
  if (!ok) return NULL;
  if (!*p) lember_checktensor(L, idx); /* raises "tensor was closed" */
  return *p;
}

static inline em_tensor *fast_check(lua_State *L, int idx) {
  em_tensor *t = fast_tensor(L, idx);
  if (!t) lember_checktensor(L, idx); /* raises, naming the op */
  return t;
}

static inline em_tensor **fast_slot(lua_State *L) {
  em_tensor **p = (em_tensor **)lua_newuserdatauv(L, sizeof(em_tensor *), 0);
  *p = NULL;
  lua_pushvalue(L, MT);
  lua_setmetatable(L, -2);
  return p;
}

static inline int done(lua_State *L, em_tensor **out, em_status s, const char *op) {
  if (s) return lember_error(L, op, s);
  lember_account(L, *out);
  return 1;
}

/* A number or boolean operand. */
static double check_scalar(lua_State *L, int idx, const char *op) {
  int tt = lua_type(L, idx);
  if (tt == LUA_TNUMBER) return lua_tonumber(L, idx);
  if (tt == LUA_TBOOLEAN) return lua_toboolean(L, idx);
  luaL_error(L, "ember.%s: expected a tensor or a number, got %s", op, luaL_typename(L, idx));
  return 0;
}

/* ---------------------------------------------------------------- */
/* Binary ops: tensor op tensor, tensor op number, number op tensor  */
/* ---------------------------------------------------------------- */

/* Is the operand at idx a Lua float (2.0, 0.5) next to an int64 or bool
** tensor t in an arithmetic op? Then the result has the default dtype
** (em_default_dtype), as a Python float makes it in PyTorch (int64 * 2.0 is
** float32 unless ember.set_default_dtype changed it); a Lua integer keeps
** t's dtype (int64 * 2 is int64). */
static bool float_scalar(lua_State *L, int idx, const em_tensor *t, em_binary_op op) {
  if (lua_type(L, idx) != LUA_TNUMBER || lua_isinteger(L, idx) || em_dtype_is_float(t->dtype)) return false;
  return op == EM_ADD || op == EM_SUB || op == EM_MUL || op == EM_DIV || op == EM_MAXIMUM ||
         op == EM_MINIMUM || op == EM_POW || op == EM_FMOD;
}

static int binary(lua_State *L, em_binary_op op, const char *name) {
  lember_noextra(L, 2, name, "other"); /* metamethods pass exactly 2 */
  em_tensor *a = fast_tensor(L, 1);
  em_tensor *b = fast_tensor(L, 2);
  em_tensor **out, *f = NULL;
  em_status s = EM_OK;
  if (a && b) {
    out = fast_slot(L);
    s = em_binary(out, op, a, b);
  } else if ((a && a->dtype == EM_BOOL && lua_type(L, 2) == LUA_TBOOLEAN) ||
             (b && b->dtype == EM_BOOL && lua_type(L, 1) == LUA_TBOOLEAN)) {
    /* a bool tensor and true/false: bool, as torch's Python bool (t + true is
    ** t or true, t - true is refused); 0 or 1 with any other dtype */
    em_tensor *t = a ? a : b;
    s = em_full(&f, 0, NULL, lua_toboolean(L, a ? 2 : 1), EM_BOOL, t->device);
    out = fast_slot(L);
    if (s == EM_OK) s = a ? em_binary(out, op, a, f) : em_binary(out, op, f, b);
  } else if (a) {
    double v = check_scalar(L, 2, name);
    if (float_scalar(L, 2, a, op) && (s = em_to_dtype(&f, a, em_default_dtype())) == EM_OK) a = f;
    out = fast_slot(L);
    if (s == EM_OK) s = em_binary_scalar(out, op, a, v);
  } else if (b) {
    double v = check_scalar(L, 1, name);
    if (float_scalar(L, 1, b, op) && (s = em_to_dtype(&f, b, em_default_dtype())) == EM_OK) b = f;
    out = fast_slot(L);
    if (s == EM_OK) s = em_scalar_binary(out, op, v, b);
  } else {
    return luaL_error(L, "ember.%s: expected a tensor operand, got %s and %s", name,
                      luaL_typename(L, 1), luaL_typename(L, 2));
  }
  em_release(f);
  return done(L, out, s, name);
}

/* a:add(b, {alpha =}), a:sub(b, alpha), a:div(b, {rounding_mode =}): PyTorch's
** keyword arguments are Lua's (lua/ember/_functional_more.lua), which
** stores the handler in the metatable as __<op>_options(a, b, opts); the
** plain call, and the metamethods, stay here. */
static int binary_options(lua_State *L, em_binary_op op, const char *name, const char *handler, const char *what) {
  /* nothing past the options: Torch7's x:sub(1, 2, 2, 3) (a slice there) is
  ** not x - 2 * 1 with the rest dropped */
  lember_noextra(L, 3, name, what);
  if (lua_isnoneornil(L, 3)) return binary(L, op, name);
  lua_settop(L, 3);
  if (lua_getfield(L, MT, handler) != LUA_TFUNCTION)
    return luaL_error(L, "ember.%s: options need ember's Lua side (require \"ember\")", name);
  lua_insert(L, 1);
  lua_call(L, 3, 1);
  return 1;
}

static int m_add(lua_State *L) { return binary_options(L, EM_ADD, "add", "__add_options", "other, alpha"); }
static int m_sub(lua_State *L) { return binary_options(L, EM_SUB, "sub", "__sub_options", "other, alpha"); }
static int m_mul(lua_State *L) { return binary(L, EM_MUL, "mul"); }
static int m_div(lua_State *L) { return binary_options(L, EM_DIV, "div", "__div_options", "other, rounding_mode"); }
static int mm_add(lua_State *L) { return binary(L, EM_ADD, "add"); }
static int mm_sub(lua_State *L) { return binary(L, EM_SUB, "sub"); }
static int mm_div(lua_State *L) { return binary(L, EM_DIV, "div"); }
static int m_maximum(lua_State *L) { return binary(L, EM_MAXIMUM, "maximum"); }
static int m_minimum(lua_State *L) { return binary(L, EM_MINIMUM, "minimum"); }
static int m_eq(lua_State *L) { return binary(L, EM_EQ, "eq"); }
static int m_ne(lua_State *L) { return binary(L, EM_NE, "ne"); }
static int m_lt(lua_State *L) { return binary(L, EM_LT, "lt"); }
static int m_le(lua_State *L) { return binary(L, EM_LE, "le"); }
static int m_gt(lua_State *L) { return binary(L, EM_GT, "gt"); }
static int m_ge(lua_State *L) { return binary(L, EM_GE, "ge"); }
static int m_logical_and(lua_State *L) { return binary(L, EM_AND, "logical_and"); }
static int m_logical_or(lua_State *L) { return binary(L, EM_OR, "logical_or"); }
static int m_logical_xor(lua_State *L) { return binary(L, EM_XOR, "logical_xor"); }
/* ember._fmod(a, b): the C op under ember.fmod, remainder and floor_divide
** (lua/ember/_functional_more.lua, which promotes and names the errors). */
static int f_fmod(lua_State *L) { return binary(L, EM_FMOD, "fmod"); }
/* ember._floor_divide_int(a, b): two int64 tensors, floor(a / b) in int64. */
static int f_floor_divide_int(lua_State *L) {
  em_tensor *a = fast_check(L, 1), *b = fast_check(L, 2);
  em_tensor **out = fast_slot(L);
  return done(L, out, em_floor_divide_int(out, a, b), "floor_divide");
}

/* ember._gated("silu" | "gelu", gate, up): act(gate) * up, one pass each
** way where the backend has the kernel (em_gated; nn.FeedForward's and
** Llama's gated FFNs call it). */
static int f_gated(lua_State *L) {
  static const char *const acts[] = {"silu", "gelu", NULL};
  const int act = luaL_checkoption(L, 1, NULL, acts);
  em_tensor *gate = fast_check(L, 2), *up = fast_check(L, 3);
  em_tensor **out = fast_slot(L);
  return done(L, out, em_gated(out, act == 0 ? EM_SILU : EM_GELU, gate, up), act == 0 ? "swiglu" : "geglu");
}

/* Is the operand at idx an int64/bool tensor or a Lua integer? */
static bool integral(lua_State *L, int idx) {
  em_tensor *t = fast_tensor(L, idx);
  if (t) return t->dtype == EM_I64 || t->dtype == EM_BOOL;
  return lua_type(L, idx) == LUA_TNUMBER && lua_isinteger(L, idx);
}

/* An integer base to an integer tensor exponent, as PyTorch's: int64, and
** a negative exponent gives the truncated power (2 ^ -1 is 0, (-1) ^ -3 is
** -1, 0 ^ -1 is 0) where the backend refuses it; computed in float64 (exact
** below 2^53, as the scalar power). Pushes the result and returns true, or
** returns false when the operands are not both integral. */
static bool int_pow(lua_State *L) {
  em_tensor *a = fast_tensor(L, 1), *b = fast_tensor(L, 2);
  if (!(a || b) || !integral(L, 1) || !integral(L, 2)) return false;
  em_tensor *fa = NULL, *fb = NULL, *p = NULL, *q = NULL, *abs = NULL, *inf = NULL, *r = NULL;
  em_status s = EM_OK;
  if (a) s = em_to_dtype(&fa, a, EM_F64);
  if (!s && b) s = em_to_dtype(&fb, b, EM_F64);
  if (!s) {
    if (fa && fb) s = em_binary(&p, EM_POW, fa, fb);
    else if (fa) s = em_binary_scalar(&p, EM_POW, fa, (double)lua_tointeger(L, 2));
    else s = em_scalar_binary(&p, EM_POW, (double)lua_tointeger(L, 1), fb);
  }
  if (!s) s = em_unary(&q, EM_TRUNC, p, 0, 0);
  if (!s) s = em_unary(&abs, EM_ABS, q, 0, 0);
  if (!s) s = em_binary_scalar(&inf, EM_EQ, abs, INFINITY);
  if (!s) s = em_masked_fill(&r, q, inf, 0.0);
  em_tensor **out = fast_slot(L);
  if (!s) s = em_to_dtype(out, r, EM_I64);
  em_release(fa), em_release(fb), em_release(p), em_release(q), em_release(abs), em_release(inf), em_release(r);
  if (s) lember_error(L, "pow", s);
  lember_account(L, *out);
  return true;
}

/* t ^ number is the scalar power (its own backward); otherwise binary.
** An int64 or bool tensor to a Lua integer power >= 0 stays int64 (as
** PyTorch's; computed in float64, exact below 2^53); to a Lua float power,
** the default dtype (float32 unless set). */
static int m_pow(lua_State *L) {
  em_tensor *a = fast_tensor(L, 1);
  if (a && lua_type(L, 2) == LUA_TNUMBER) {
    double e = lua_tonumber(L, 2);
    if (!em_dtype_is_float(a->dtype)) {
      bool whole = lua_isinteger(L, 2);
      if (whole && e < 0)
        return luaL_error(L, "ember.pow: integers to negative integer powers are not allowed (%s ^ %d): "
                             "convert the tensor first, e.g. x:double() ^ %d", em_dtype_name(a->dtype),
                          (int)e, (int)e);
      em_tensor *f = NULL, *p = NULL;
      em_tensor **out = fast_slot(L);
      em_status s = em_to_dtype(&f, a, whole ? EM_F64 : em_default_dtype());
      if (s == EM_OK) s = em_unary(whole ? &p : out, EM_POW_SCALAR, f, e, 0);
      if (s == EM_OK && whole) s = em_to_dtype(out, p, EM_I64);
      em_release(f);
      em_release(p);
      return done(L, out, s, "pow");
    }
    em_tensor **out = fast_slot(L);
    return done(L, out, em_unary(out, EM_POW_SCALAR, a, e, 0), "pow");
  }
  return int_pow(L) ? 1 : binary(L, EM_POW, "pow");
}

/* ---------------------------------------------------------------- */
/* Unary ops                                                         */
/* ---------------------------------------------------------------- */

static int unary(lua_State *L, em_unary_op op, const char *name, double alpha, double beta) {
  em_tensor *x = fast_check(L, 1);
  em_tensor **out = fast_slot(L);
  return done(L, out, em_unary(out, op, x, alpha, beta), name);
}

/* A unary op without parameters: t:neg(), t:floor() ... */
static int unary0(lua_State *L, em_unary_op op, const char *name) {
  lember_noextra(L, 1, name, NULL);
  return unary(L, op, name, 0, 0);
}

/* The float functions of PyTorch's that take an int64 or bool tensor and
** compute in the default dtype (torch.exp(torch.arange(3)) is float32 unless
** set_default_dtype changed it), as
** _functional_more.lua's exp2, log2 ... do. */
static int unary_float(lua_State *L, em_unary_op op, const char *name) {
  em_tensor *x = fast_check(L, 1);
  lember_noextra(L, 1, name, NULL);
  if (x->dtype != EM_I64 && x->dtype != EM_BOOL) return unary(L, op, name, 0, 0);
  em_tensor *f = NULL;
  em_tensor **out = fast_slot(L);
  em_status s = em_to_dtype(&f, x, em_default_dtype());
  if (s == EM_OK) s = em_unary(out, op, f, 0, 0);
  em_release(f);
  return done(L, out, s, name);
}

static int m_neg(lua_State *L) { return unary0(L, EM_NEG, "neg"); }
static int m_exp(lua_State *L) { return unary_float(L, EM_EXP, "exp"); }
static int m_log(lua_State *L) { return unary_float(L, EM_LOG, "log"); }
static int m_sqrt(lua_State *L) { return unary_float(L, EM_SQRT, "sqrt"); }
static int m_rsqrt(lua_State *L) { return unary_float(L, EM_RSQRT, "rsqrt"); }
static int m_abs(lua_State *L) { return unary0(L, EM_ABS, "abs"); }
static int m_tanh(lua_State *L) { return unary_float(L, EM_TANH, "tanh"); }
static int m_sigmoid(lua_State *L) { return unary_float(L, EM_SIGMOID, "sigmoid"); }
static int m_relu(lua_State *L) { return unary0(L, EM_RELU, "relu"); }
static int m_silu(lua_State *L) { return unary0(L, EM_SILU, "silu"); }
static int m_sin(lua_State *L) { return unary_float(L, EM_SIN, "sin"); }
static int m_log1p(lua_State *L) { return unary_float(L, EM_LOG1P, "log1p"); }
static int m_expm1(lua_State *L) { return unary_float(L, EM_EXPM1, "expm1"); }
static int m_erf(lua_State *L) { return unary_float(L, EM_ERF, "erf"); }
static int m_atan(lua_State *L) { return unary_float(L, EM_ATAN, "atan"); }
static int m_asin(lua_State *L) { return unary_float(L, EM_ASIN, "asin"); }
static int m_acos(lua_State *L) { return unary_float(L, EM_ACOS, "acos"); }
static int m_erfinv(lua_State *L) { return unary_float(L, EM_ERFINV, "erfinv"); }
static int m_lgamma(lua_State *L) { return unary_float(L, EM_LGAMMA, "lgamma"); }
static int m_digamma(lua_State *L) { return unary_float(L, EM_DIGAMMA, "digamma"); }
static int m_cos(lua_State *L) { return unary_float(L, EM_COS, "cos"); }
static int m_logical_not(lua_State *L) { return unary0(L, EM_NOT, "logical_not"); }
static int m_floor(lua_State *L) { return unary0(L, EM_FLOOR, "floor"); }
static int m_ceil(lua_State *L) { return unary0(L, EM_CEIL, "ceil"); }
static int m_round(lua_State *L) { return unary0(L, EM_ROUND, "round"); }
static int m_trunc(lua_State *L) { return unary0(L, EM_TRUNC, "trunc"); }
static int m_sign(lua_State *L) { return unary0(L, EM_SIGN, "sign"); }

/* __unm gets the operand twice; only the first counts. */
static int t_unm(lua_State *L) {
  lua_settop(L, 1);
  return m_neg(L);
}

/* Argument 2 of gelu/elu: the value itself, or an options table holding
** it under `name` (F.gelu(x, approximate='tanh'), F.elu(x, alpha=0.5));
** left on the stack's top (nil when absent). Nothing may follow. */
static void one_option(lua_State *L, const char *op, const char *name) {
  lember_noextra(L, 2, op, name);
  lua_settop(L, 2);
  if (lua_type(L, 2) == LUA_TTABLE) {
    const char *const names[] = {name, NULL};
    lember_checkoptions(L, 2, op, names);
    lua_getfield(L, 2, name);
  } else {
    lua_pushvalue(L, 2);
  }
}

static int m_gelu(lua_State *L) {
  em_unary_op op = EM_GELU;
  one_option(L, "gelu", "approximate");
  if (!lua_isnil(L, 3)) {
    const char *a = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : "";
    if (strcmp(a, "tanh") == 0) op = EM_GELU_TANH;
    else if (lua_type(L, 3) != LUA_TSTRING)
      return luaL_error(L, "ember.gelu: approximate must be \"none\" or \"tanh\", got %s", luaL_typename(L, 3));
    else if (strcmp(a, "none") != 0)
      return luaL_error(L, "ember.gelu: approximate must be \"none\" or \"tanh\", got \"%s\"", a);
  }
  lua_settop(L, 1);
  return unary(L, op, "gelu", 0, 0);
}

static int m_elu(lua_State *L) {
  one_option(L, "elu", "alpha");
  if (!lua_isnil(L, 3) && lua_type(L, 3) != LUA_TNUMBER)
    return luaL_error(L, "ember.elu: alpha must be a number, got %s", luaL_typename(L, 3));
  double alpha = lua_isnil(L, 3) ? 1.0 : lua_tonumber(L, 3);
  lua_settop(L, 1);
  return unary(L, EM_ELU, "elu", alpha, 0);
}

static int m_clamp(lua_State *L) {
  double lo = lua_isnoneornil(L, 2) ? -INFINITY : luaL_checknumber(L, 2);
  double hi = lua_isnoneornil(L, 3) ? INFINITY : luaL_checknumber(L, 3);
  return unary(L, EM_CLAMP, "clamp", lo, hi);
}

/* ---------------------------------------------------------------- */
/* where, masked_fill                                                */
/* ---------------------------------------------------------------- */

static int f_where(lua_State *L) {
  /* checked here, naming where: the Lua wrapper (variant.lua) hides the op from lember_checktensor */
  em_tensor *cond = fast_tensor(L, 1);
  if (!cond) luaL_error(L, "ember.where: the condition (argument 1) must be a bool tensor, got %s", luaL_typename(L, 1));
  em_tensor *a = fast_tensor(L, 2), *b = fast_tensor(L, 3);
  for (int i = 2; i <= 3; i++)
    if (!(i == 2 ? a : b) && lua_type(L, i) != LUA_TNUMBER && lua_type(L, i) != LUA_TBOOLEAN)
      luaL_error(L, "ember.where: argument %d (%s) must be a tensor or a number, got %s", i, i == 2 ? "input" : "other",
                 luaL_typename(L, i));
  /* two Lua integers: int64, as torch.where(c, 1, 0); two booleans: bool */
  em_dtype like = a ? a->dtype : b ? b->dtype
                : lua_isinteger(L, 2) && lua_isinteger(L, 3) ? EM_I64
                : lua_isboolean(L, 2) && lua_isboolean(L, 3) ? EM_BOOL : em_default_dtype();
  /* a Lua float (0.5, 0.0) next to an int64/bool tensor: the default dtype, as a Python float in PyTorch */
  for (int i = 2; i <= 3; i++)
    if (lua_type(L, i) == LUA_TNUMBER && !em_dtype_is_float(like) && !lua_isinteger(L, i))
      like = em_default_dtype();
  if (!a) a = lember_totensor(L, 2, like, cond->device);
  if (!b) b = lember_totensor(L, 3, like, cond->device);
  em_tensor **out = fast_slot(L);
  return done(L, out, em_where(out, cond, a, b), "where");
}

static int m_masked_fill(lua_State *L) {
  lember_noextra(L, 3, "masked_fill", "mask, value");
  em_tensor *x = fast_check(L, 1);
  em_tensor *mask = fast_check(L, 2);
  em_tensor *vt = fast_tensor(L, 3);
  if (vt) { /* a 0-d (one-element) tensor value, as torch's: where(mask, value, x), differentiable in both */
    if (vt->ndim != 0 && em_numel(vt) != 1)
      return luaL_error(L, "ember.masked_fill: the value must be a number or a one-element tensor, got %d elements",
                        (int)em_numel(vt));
    em_tensor *c = NULL, *r = NULL;
    em_status s = em_to_dtype(&c, vt, x->dtype);
    if (!s && vt->ndim != 0) {
      em_tensor *c0 = NULL;
      s = em_reshape(&c0, c, 0, NULL);
      em_release(c);
      c = c0;
    }
    em_tensor **out = fast_slot(L);
    if (!s) s = em_where(&r, mask, c, x);
    em_release(c);
    *out = r;
    return done(L, out, s, "masked_fill");
  }
  double v = check_scalar(L, 3, "masked_fill");
  em_tensor **out = fast_slot(L);
  return done(L, out, em_masked_fill(out, x, mask, v), "masked_fill");
}

/* ---------------------------------------------------------------- */
/* Comparison metamethods: Lua wants one boolean                     */
/* ---------------------------------------------------------------- */

/* Are all elements of the bool tensor true? Releases m. */
static int all_true(lua_State *L, em_tensor *m, const char *op) {
  int64_t n = em_numel(m);
  uint8_t *buf = (uint8_t *)lua_newuserdatauv(L, (size_t)(n ? n : 1), 0);
  em_status s = em_to_host(m, buf);
  em_release(m);
  if (s) return lember_error(L, op, s);
  for (int64_t i = 0; i < n; i++)
    if (!buf[i]) return 0;
  return 1;
}

/* a == b: same shape and equal elements (torch.equal). */
static int t_eq(lua_State *L) {
  em_tensor *a = fast_tensor(L, 1), *b = fast_tensor(L, 2);
  em_tensor *ca = NULL, *cb = NULL, *m = NULL;
  em_status s = EM_OK;
  if (!a || !b || a->ndim != b->ndim ||
      memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim) != 0) {
    lua_pushboolean(L, 0);
    return 1;
  }
  bool prev = em_set_grad_enabled(false);
  if (a->dtype != b->dtype) { /* compare as float64 */
    s = em_to_dtype(&ca, a, EM_F64);
    if (!s) s = em_to_dtype(&cb, b, EM_F64);
  } else {
    ca = em_retain(a);
    cb = em_retain(b);
  }
  if (!s && !em_device_eq(ca->device, cb->device)) {
    em_tensor *t = NULL;
    s = em_to_device(&t, cb, ca->device);
    em_release(cb);
    cb = t;
  }
  if (!s) s = em_binary(&m, EM_EQ, ca, cb);
  em_set_grad_enabled(prev);
  em_release(ca);
  em_release(cb);
  if (s) return lember_error(L, "eq", s);
  lua_pushboolean(L, all_true(L, m, "eq"));
  return 1;
}

/* a < b and a <= b: true when it holds for every element. */
static int compare_all(lua_State *L, em_binary_op op, const char *name) {
  em_tensor *a = fast_tensor(L, 1), *b = fast_tensor(L, 2);
  em_tensor *m = NULL;
  em_status s;
  if (a && b) s = em_binary(&m, op, a, b);
  else if (a) s = em_binary_scalar(&m, op, a, check_scalar(L, 2, name));
  else s = em_scalar_binary(&m, op, check_scalar(L, 1, name), b);
  if (s) return lember_error(L, name, s);
  lua_pushboolean(L, all_true(L, m, name));
  return 1;
}

static int t_lt(lua_State *L) { return compare_all(L, EM_LT, "lt"); }
static int t_le(lua_State *L) { return compare_all(L, EM_LE, "le"); }

/* ---------------------------------------------------------------- */
/* In place (no autograd; optimizers run them under no_grad)         */
/* ---------------------------------------------------------------- */

/* An in-place write refused because other tensors share the destination's
** memory (the core records one only where none does) may be sharing it
** with tensors Lua no longer reaches but has not collected yet (a view's
** dropped base): collect them and try once more, so that whether the write
** is recorded does not depend on when the collector last ran. */
static bool shared_retry(lua_State *L, em_status s) {
  if (s != EM_ERR_AUTOGRAD || !strstr(em_error_message(), "share")) return false;
  lua_gc(L, LUA_GCCOLLECT);
  return true;
}

static int m_fill_(lua_State *L) {
  em_tensor *t = fast_check(L, 1);
  em_tensor *v = fast_tensor(L, 2);
  if (v) { /* a one-element tensor, as torch's fill_(0-d tensor) */
    if (em_numel(v) != 1)
      return luaL_error(L, "ember.fill_: the value must be a number or a one-element tensor, got %d elements",
                        (int)em_numel(v));
    double x = 0;
    em_tensor *d = NULL;
    em_status s = em_to_dtype(&d, v, EM_F64);
    if (!s) s = em_to_host(d, &x);
    em_release(d);
    if (s) return lember_error(L, "fill_", s);
    lua_pushnumber(L, x);
    lua_replace(L, 2);
  }
  const double fill_value = check_scalar(L, 2, "fill_");
  em_status s = em_fill_(t, fill_value);
  if (shared_retry(L, s)) s = em_fill_(t, fill_value);
  if (s) return lember_error(L, "fill_", s);
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) {
  em_tensor *t = fast_check(L, 1);
  em_status s = em_fill_(t, 0.0);
  if (shared_retry(L, s)) s = em_fill_(t, 0.0);
  if (s) return lember_error(L, "zero_", s);
  lua_settop(L, 1);
  return 1;
}

static int m_copy_(lua_State *L) {
  em_tensor *t = fast_check(L, 1);
  em_tensor *src = lember_totensor(L, 2, t->dtype, t->device);
  em_status s = em_copy_(t, src);
  if (shared_retry(L, s)) s = em_copy_(t, src);
  if (s) return lember_error(L, "copy_", s);
  lua_settop(L, 1);
  return 1;
}

/* t:add_(x [, alpha]): t += alpha * x */
/* An in-place op on an integer or bool tensor given a number that is not
** an integer: torch refuses it ("result type Float can't be cast to the
** desired output type Long"); converted to t's dtype it was truncated. */
static void check_inplace_number(lua_State *L, int idx, const em_tensor *t, const char *op, const char *what) {
  if (em_dtype_is_float(t->dtype) || lua_type(L, idx) != LUA_TNUMBER || lua_isinteger(L, idx)) return;
  const double v = lua_tonumber(L, idx);
  if (v != floor(v) || !isfinite(v))
    luaL_error(L, "ember.%s: result type float can't be cast to the desired output type %s (%s %f is not an integer)",
               op, em_dtype_name(t->dtype), what, (lua_Number)v);
}

static int m_add_(lua_State *L) {
  em_tensor *t = fast_check(L, 1);
  if (lua_type(L, 3) == LUA_TTABLE) { /* t:add_(x, {alpha =}), PyTorch's keyword */
    static const char *const names[] = {"alpha", NULL};
    lember_checkoptions(L, 3, "add_", names);
    lua_getfield(L, 3, "alpha");
    lua_replace(L, 3);
  }
  if (!lua_isnoneornil(L, 3) && lua_type(L, 3) != LUA_TNUMBER)
    return luaL_error(L, "ember.add_: alpha must be a number, got %s", luaL_typename(L, 3));
  double alpha = luaL_optnumber(L, 3, 1.0);
  if (t->dtype == EM_BOOL && lua_type(L, 2) == LUA_TNUMBER) /* torch: bool.add_(1) is int64 */
    return luaL_error(L, "ember.add_: result type %s can't be cast to the desired output type bool",
                      lua_isinteger(L, 2) ? "int64" : em_dtype_name(em_default_dtype()));
  check_inplace_number(L, 2, t, "add_", "the value");
  check_inplace_number(L, 3, t, "add_", "alpha");
  em_tensor *x = lember_totensor(L, 2, t->dtype, t->device), *cast = NULL;
  if (x->dtype != t->dtype) { /* torch: the result type must cast to t's (can_cast) */
    if (!em_can_cast(x->dtype, t->dtype))
      return luaL_error(L, "ember.add_: result type %s can't be cast to the desired output type %s",
                        em_dtype_name(x->dtype), em_dtype_name(t->dtype));
    em_status cs = em_to_dtype(&cast, x, t->dtype);
    if (cs) return lember_error(L, "add_", cs);
  }
  em_status s = em_add_(t, cast ? cast : x, alpha);
  if (shared_retry(L, s)) s = em_add_(t, cast ? cast : x, alpha);
  em_release(cast);
  if (s) return lember_error(L, "add_", s);
  lua_settop(L, 1);
  return 1;
}

static int m_mul_(lua_State *L) {
  em_tensor *t = fast_check(L, 1);
  em_tensor *x = fast_tensor(L, 2);
  if (x) { /* t *= x, x broadcast to t (torch's mul_(other)) */
    em_tensor *y = NULL;
    em_status s = em_binary(&y, EM_MUL, t, x);
    if (!s && !em_can_cast(y->dtype, t->dtype)) {
      const char *have = em_dtype_name(y->dtype);
      em_release(y);
      return luaL_error(L, "ember.mul_: result type %s can't be cast to the desired output type %s", have,
                        em_dtype_name(t->dtype));
    }
    if (!s) s = em_copy_(t, y);
    if (shared_retry(L, s)) s = em_copy_(t, y);
    em_release(y);
    if (s) { /* the message names mul_, not the mul and copy_ it is made of */
      const char *m = em_error_message();
      if (strncmp(m, "copy_: ", 7) == 0) m += 7;
      else if (strncmp(m, "mul: ", 5) == 0) m += 5;
      return luaL_error(L, "ember.mul_: %s", *m ? m : em_status_name(s));
    }
    lua_settop(L, 1);
    return 1;
  }
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "ember.mul_: the factor must be a number or a tensor, got %s", luaL_typename(L, 2));
  if (t->dtype == EM_BOOL) /* torch: bool.mul_(2) is int64 */
    return luaL_error(L, "ember.mul_: result type %s can't be cast to the desired output type bool",
                      lua_isinteger(L, 2) ? "int64" : em_dtype_name(em_default_dtype()));
  check_inplace_number(L, 2, t, "mul_", "the factor");
  const double factor = luaL_checknumber(L, 2);
  em_status s = em_mul_scalar_(t, factor);
  if (shared_retry(L, s)) s = em_mul_scalar_(t, factor);
  if (s) return lember_error(L, "mul_", s);
  lua_settop(L, 1);
  return 1;
}

static const luaL_Reg methods[] = {
  {"add", m_add}, {"sub", m_sub}, {"mul", m_mul}, {"div", m_div}, {"pow", m_pow},
  {"maximum", m_maximum}, {"minimum", m_minimum},
  {"eq", m_eq}, {"ne", m_ne}, {"lt", m_lt}, {"le", m_le}, {"gt", m_gt}, {"ge", m_ge},
  {"logical_and", m_logical_and}, {"logical_or", m_logical_or},
  {"logical_xor", m_logical_xor}, {"logical_not", m_logical_not},
  {"neg", m_neg}, {"exp", m_exp}, {"log", m_log}, {"sqrt", m_sqrt}, {"rsqrt", m_rsqrt},
  {"abs", m_abs}, {"tanh", m_tanh}, {"sigmoid", m_sigmoid}, {"relu", m_relu},
  {"silu", m_silu}, {"sin", m_sin}, {"cos", m_cos}, {"log1p", m_log1p}, {"expm1", m_expm1}, {"erf", m_erf},
  {"atan", m_atan}, {"asin", m_asin}, {"acos", m_acos}, {"erfinv", m_erfinv}, {"lgamma", m_lgamma},
  {"digamma", m_digamma}, {"gelu", m_gelu}, {"elu", m_elu},
  {"clamp", m_clamp}, {"floor", m_floor}, {"ceil", m_ceil}, {"round", m_round},
  {"trunc", m_trunc}, {"sign", m_sign}, {"masked_fill", m_masked_fill},
  {"fill_", m_fill_}, {"zero_", m_zero_}, {"copy_", m_copy_}, {"add_", m_add_},
  {"mul_", m_mul_},
  {NULL, NULL}
};

static const luaL_Reg metamethods[] = {
  {"__add", mm_add}, {"__sub", mm_sub}, {"__mul", m_mul}, {"__div", mm_div},
  {"__pow", m_pow}, {"__unm", t_unm},
  {"__eq", t_eq}, {"__lt", t_lt}, {"__le", t_le},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"where", f_where}, {"_fmod", f_fmod}, {"_floor_divide_int", f_floor_divide_int},
  {"_gated", f_gated},
  {NULL, NULL}
};

void lember_open_elementwise(lua_State *L, int module, int methods_idx, int mt) {
  lua_pushvalue(L, methods_idx);
  lua_pushvalue(L, mt);
  luaL_setfuncs(L, methods, 1);
  lua_pop(L, 1);
  lua_pushvalue(L, mt);
  lua_pushvalue(L, mt);
  luaL_setfuncs(L, metamethods, 1);
  lua_pop(L, 1);
  lua_pushvalue(L, module);
  lua_pushvalue(L, mt);
  luaL_setfuncs(L, funcs, 1);
  lua_pop(L, 1);
}
