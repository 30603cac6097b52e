/*
** l_data.c -- helpers for data pipelines: tensors from byte strings,
** and random permutations from the global generator.
*/
#include "lember.h"

#include <stdlib.h>
#include <string.h>

#include "ember_bf16.h"
#include "ember_philox.h"

/* ember.from_bytes(s, shape [, {offset=0, dtype=ember.get_default_dtype(), device=}])
** Each byte of s (from offset, 0-based into the string) becomes one
** element, read as an unsigned value: idx image files, raw pixels. */
static int l_from_bytes(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  int64_t shape[EM_MAX_DIMS];
  int next;
  int ndim = lember_checkshape(L, 2, "from_bytes", shape, 0, &next);
  int opts = lua_istable(L, next) ? next : 0;
  int64_t offset = 0;
  em_dtype dtype = em_default_dtype();
  em_device dev = lember_cpu(L);
  if (opts) {
    static const char *const names[] = {"offset", "dtype", "device", NULL};
    lember_checkoptions(L, opts, "from_bytes", names);
    if (lua_getfield(L, opts, "offset") != LUA_TNIL) offset = lember_checkint(L, -1, "from_bytes", "offset");
    if (lua_getfield(L, opts, "dtype") != LUA_TNIL) dtype = lember_checkdtype(L, -1, "from_bytes");
    if (lua_getfield(L, opts, "device") != LUA_TNIL) dev = lember_checkdevice(L, -1, "from_bytes");
    lua_pop(L, 3);
  }
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (__builtin_mul_overflow(n, shape[i], &n)) n = INT64_MAX; /* more than any string has */
  if (offset < 0 || (uint64_t)offset > len || (uint64_t)n > len - (size_t)offset)
    return luaL_error(L, "ember.from_bytes: shape needs %I bytes from offset %I, the string has %I",
                      (lua_Integer)n, (lua_Integer)offset, (lua_Integer)len);
  double *host = malloc((size_t)(n ? n : 1) * sizeof *host);
  if (!host) return luaL_error(L, "ember.from_bytes: out of memory for %I elements", (lua_Integer)n);
  const unsigned char *p = (const unsigned char *)s + offset;
  for (int64_t i = 0; i < n; i++) host[i] = p[i];
  em_tensor *f64 = NULL, *t = NULL;
  em_status st = em_from_host(&f64, ndim, shape, EM_F64, host, lember_cpu(L));
  free(host);
  if (st == EM_OK) st = em_to_dtype(&t, f64, dtype);
  if (st == EM_OK && !em_device_eq(dev, t->device)) {
    em_tensor *moved = NULL;
    st = em_to_device(&moved, t, dev);
    em_release(t);
    t = moved;
  }
  em_release(f64);
  if (st != EM_OK) {
    em_release(t);
    return lember_error(L, "from_bytes", st);
  }
  lember_pushtensor(L, t);
  return 1;
}

/* What frombuffer reads: a file's element type, its size in bytes, and the
** ember dtype it becomes (float16 widens to float32, the integers to int64,
** exactly, as safetensors loading does). */
typedef struct { const char *name; int size; em_dtype dtype; } buf_kind;
static const buf_kind BUF_KINDS[] = {
  {"float32", 4, EM_F32}, {"float64", 8, EM_F64}, {"bfloat16", 2, EM_BF16}, {"int64", 8, EM_I64},
  {"bool", 1, EM_BOOL},   {"float16", 2, EM_F32}, {"int32", 4, EM_I64},     {"int16", 2, EM_I64},
  {"int8", 1, EM_I64},    {"uint8", 1, EM_I64},   {NULL, 0, EM_F32}};

/* n elements of kind k from p (little-endian, unaligned) into out, in k's dtype. */
static void buf_read(const buf_kind *k, const unsigned char *p, int64_t n, void *out) {
  const char *name = k->name;
  if (k->dtype != EM_I64 || strcmp(name, "int64") == 0) {
    if (strcmp(name, "float16") == 0) {
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        ((float *)out)[i] = em_f16_to_f32(h);
      }
    } else if (k->dtype == EM_BOOL) {
      for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i] = p[i] != 0;
    } else {
      memcpy(out, p, (size_t)n * (size_t)k->size); /* x86-64 and every ember target are little-endian */
    }
    return;
  }
  int64_t *o = out;
  for (int64_t i = 0; i < n; i++) {
    if (k->size == 4) { int32_t v; memcpy(&v, p + 4 * i, 4); o[i] = v; }
    else if (k->size == 2) { int16_t v; memcpy(&v, p + 2 * i, 2); o[i] = v; }
    else o[i] = strcmp(name, "int8") == 0 ? (int64_t)(int8_t)p[i] : (int64_t)p[i];
  }
}

/* ember.frombuffer(s [, {dtype = "float32", offset = 0, count = -1}]), as
** torch.frombuffer: the bytes of the string s from offset (0-based) read as
** count little-endian elements of dtype (-1: as many as fit, which must be
** all the bytes left), a new 1-d tensor (a copy: Lua strings are
** immutable). dtype is one of ember's (float32, float64, bfloat16, int64,
** bool) or a file's float16 (becomes float32), int32, int16, int8 or uint8
** (become int64), each exactly. Raw model files, torch.save's storages. */
static int l_frombuffer(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  int64_t offset = 0, count = -1;
  const buf_kind *k = &BUF_KINDS[0];
  if (!lua_isnoneornil(L, 2)) {
    static const char *const names[] = {"dtype", "offset", "count", NULL};
    luaL_checktype(L, 2, LUA_TTABLE);
    lember_checkoptions(L, 2, "frombuffer", names);
    if (lua_getfield(L, 2, "dtype") != LUA_TNIL) {
      const char *d = lua_tostring(L, -1);
      for (k = BUF_KINDS; k->name && !(d && strcmp(d, k->name) == 0); k++) {}
      if (!k->name)
        return luaL_error(L, "ember.frombuffer: dtype must be float32, float64, bfloat16, int64, bool, float16, "
                             "int32, int16, int8 or uint8, got %s", d ? d : luaL_typename(L, -1));
    }
    if (lua_getfield(L, 2, "offset") != LUA_TNIL) offset = lember_checkint(L, -1, "frombuffer", "offset");
    if (lua_getfield(L, 2, "count") != LUA_TNIL) count = lember_checkint(L, -1, "frombuffer", "count");
    lua_pop(L, 3);
  }
  if (offset < 0 || (uint64_t)offset > len)
    return luaL_error(L, "ember.frombuffer: offset %I is outside the %I bytes", (lua_Integer)offset, (lua_Integer)len);
  const size_t left = len - (size_t)offset;
  if (count == -1) {
    if (left % (size_t)k->size != 0)
      return luaL_error(L, "ember.frombuffer: %I bytes from offset %I are not a whole number of %s elements "
                           "(%d bytes each); give count", (lua_Integer)left, (lua_Integer)offset, k->name, k->size);
    count = (int64_t)(left / (size_t)k->size);
  }
  if (count < 0 || (uint64_t)count > left / (size_t)k->size)
    return luaL_error(L, "ember.frombuffer: %I %s elements need %I bytes from offset %I, the string has %I",
                      (lua_Integer)count, k->name, (lua_Integer)count * k->size, (lua_Integer)offset,
                      (lua_Integer)left);
  void *host = malloc((size_t)(count ? count : 1) * em_dtype_size(k->dtype));
  if (!host) return luaL_error(L, "ember.frombuffer: out of memory for %I elements", (lua_Integer)count);
  buf_read(k, (const unsigned char *)s + offset, count, host);
  em_tensor *t = NULL;
  em_status st = em_from_host(&t, 1, &count, k->dtype, host, lember_cpu(L));
  free(host);
  if (st != EM_OK) return lember_error(L, "frombuffer", st);
  lember_pushtensor(L, t);
  return 1;
}

/* ember.randperm(n) -> int64 [n], a 1-based permutation drawn from the
** global seeded generator (Fisher-Yates over Philox draws). */
static int l_randperm(lua_State *L) {
  int64_t n = lember_checkint(L, 1, "randperm", "n");
  if (n < 0 || n > ((int64_t)1 << 31))
    return luaL_error(L, "ember.randperm: n must be in [0, 2^31], got %I", (lua_Integer)n);
  int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  if (!v) return luaL_error(L, "ember.randperm: out of memory");
  uint64_t seed = em_initial_seed(), off = em_rng_advance((uint64_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = i + 1;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)(em_philox_uniform_at(seed, off, (uint64_t)i) * (double)(i + 1));
    if (j > i) j = i;
    int64_t tmp = v[i];
    v[i] = v[j];
    v[j] = tmp;
  }
  em_tensor *t = NULL;
  em_status st = em_from_host(&t, 1, &n, EM_I64, v, lember_cpu(L));
  free(v);
  if (st != EM_OK) return lember_error(L, "randperm", st);
  lember_pushtensor(L, t);
  return 1;
}

void lember_open_data(lua_State *L, int module) {
  static const luaL_Reg fns[] = {
    {"from_bytes", l_from_bytes}, {"frombuffer", l_frombuffer}, {"randperm", l_randperm}, {NULL, NULL}};
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
