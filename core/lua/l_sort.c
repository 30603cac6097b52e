/*
** l_sort.c -- the two index computations behind sort, argsort, topk and
** masked_select (lua/ember/_helpers.lua builds those from them):
**   ember._argsort(x, dim, descending) -> int64 indices, 1-based, x's shape
**   ember._nonzero_flat(mask)          -> int64 1-based positions of the
**                                         true elements of mask, flattened
** Both run on a host copy: they only produce indices, and the values (and
** their gradients) come from gather/index_select, which every backend has.
** The sort is a stable merge sort; NaN sorts above +inf, as in PyTorch.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lember.h"

typedef struct sort_keys {
  const double *f; /* float and bool keys as double, or NULL */
  const int64_t *i; /* int64 keys (exact beyond 2^53), or NULL */
  int64_t stride;   /* between consecutive keys of one slice */
  int descending;
} sort_keys;

/* Does the key at position a come strictly before the key at b? */
static int before(const sort_keys *k, int64_t a, int64_t b) {
  if (k->i) {
    int64_t x = k->i[a * k->stride], y = k->i[b * k->stride];
    return k->descending ? x > y : x < y;
  }
  double x = k->f[a * k->stride], y = k->f[b * k->stride];
  int xn = isnan(x), yn = isnan(y);
  if (xn || yn) return k->descending ? (xn && !yn) : (!xn && yn);
  return k->descending ? x > y : x < y;
}

/* Stable merge sort of idx[0..n) by key, with tmp as scratch. */
static void merge_sort(const sort_keys *k, int64_t *idx, int64_t *tmp, int64_t n) {
  if (n < 2) return;
  int64_t h = n / 2;
  merge_sort(k, idx, tmp, h);
  merge_sort(k, idx + h, tmp, n - h);
  int64_t i = 0, j = h, o = 0;
  while (i < h && j < n) tmp[o++] = before(k, idx[j], idx[i]) ? idx[j++] : idx[i++];
  while (i < h) tmp[o++] = idx[i++];
  while (j < n) tmp[o++] = idx[j++];
  memcpy(idx, tmp, sizeof(int64_t) * (size_t)n);
}

/* A contiguous host copy of x: int64 stays int64, everything else becomes
** float64. Returns a malloc'd buffer or NULL with *s set. */
static void *host_keys(em_tensor *x, int *is_int, em_status *s) {
  em_tensor *conv = NULL, *cpu = NULL;
  em_device host;
  *is_int = x->dtype == EM_I64;
  *s = em_cpu_device(&host);
  if (*s) return NULL;
  *s = *is_int ? EM_OK : em_to_dtype(&conv, x, EM_F64);
  if (*is_int) conv = em_retain(x);
  if (!*s) *s = em_to_device(&cpu, conv, host);
  em_release(conv);
  if (*s) return NULL;
  size_t n = (size_t)em_numel(cpu);
  void *buf = malloc(n ? n * 8 : 1);
  if (!buf) *s = em_error(EM_ERR_OOM, "argsort: out of memory for %zu keys", n);
  if (!*s) *s = em_to_host(cpu, buf);
  em_release(cpu);
  if (*s) {
    free(buf);
    return NULL;
  }
  return buf;
}

static int f_argsort(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  int ndim = x->ndim;
  int dim = ndim == 0 ? 0 : lember_checkdim_n(L, 2, "sort", ndim);
  int descending = lua_toboolean(L, 3);
  int is_int;
  em_status s;
  double *keys = host_keys(x, &is_int, &s);
  if (!keys) return lember_error(L, "sort", s);
  int64_t n = ndim ? x->shape[dim] : 1, inner = 1, outer = 1;
  for (int d = 0; d < ndim; d++) {
    if (d < dim) outer *= x->shape[d];
    if (d > dim) inner *= x->shape[d];
  }
  int64_t total = em_numel(x);
  int64_t *out = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? 2 * n : 1));
  if (!out || !idx) {
    free(keys), free(out), free(idx);
    return luaL_error(L, "ember.sort: out of memory for %I elements", (lua_Integer)total);
  }
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t in = 0; in < inner; in++) {
      int64_t base = o * n * inner + in;
      sort_keys k = {is_int ? NULL : keys + base, is_int ? (int64_t *)(void *)keys + base : NULL, inner,
                     descending};
      for (int64_t j = 0; j < n; j++) idx[j] = j;
      merge_sort(&k, idx, idx + n, n);
      for (int64_t j = 0; j < n; j++) out[base + j * inner] = idx[j] + 1; /* 1-based */
    }
  }
  free(keys), free(idx);
  em_tensor **res = lember_newslot(L);
  s = em_from_host(res, ndim, x->shape, EM_I64, out, x->device);
  free(out);
  if (s) return lember_error(L, "sort", s);
  lember_account(L, *res);
  return 1;
}

static int f_nonzero_flat(lua_State *L) {
  em_tensor *m = lember_checktensor(L, 1);
  if (m->dtype != EM_BOOL)
    return luaL_error(L, "ember.masked_select: mask must be a bool tensor, got %s", em_dtype_name(m->dtype));
  int is_int;
  em_status s;
  double *v = host_keys(m, &is_int, &s);
  if (!v) return lember_error(L, "masked_select", s);
  int64_t total = em_numel(m), count = 0;
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
  if (!pos) {
    free(v);
    return luaL_error(L, "ember.masked_select: out of memory for %I elements", (lua_Integer)total);
  }
  for (int64_t i = 0; i < total; i++)
    if (v[i] != 0) pos[count++] = i + 1;
  free(v);
  em_tensor **res = lember_newslot(L);
  s = em_from_host(res, 1, &count, EM_I64, pos, m->device);
  free(pos);
  if (s) return lember_error(L, "masked_select", s);
  lember_account(L, *res);
  return 1;
}

static const luaL_Reg funcs[] = {
  {"_argsort", f_argsort},
  {"_nonzero_flat", f_nonzero_flat},
  {NULL, NULL}
};

void lember_open_sort(lua_State *L, int module, int methods, int mt) {
  (void)methods;
  (void)mt;
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
