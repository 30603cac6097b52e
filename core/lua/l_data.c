/*
** l_data.c -- helpers for data pipelines: tensors from byte strings,
** and random permutations from the global generator.
*/
#include "lember.h"

#include <stdlib.h>
#include <string.h>

#include "ember_philox.h"

/* ember.from_bytes(s, shape [, {offset=0, dtype="float32", device=}])
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
  em_dtype dtype = EM_F32;
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
    {"from_bytes", l_from_bytes}, {"randperm", l_randperm}, {NULL, NULL}};
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
