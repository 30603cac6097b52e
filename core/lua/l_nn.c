/*
** l_nn.c -- the network-building ops: matmul, bmm, softmax, layer_norm,
** embedding, index_select, gather, scatter_add, cat, stack, split, chunk,
** dropout and the losses, the convolution kernel. Index tensors arrive
** 1-based.
*/
#include <string.h>

#include "lember.h"

static int finish(lua_State *L, em_tensor **out, em_status s, const char *op) {
  if (s) return lember_error(L, op, s);
  lember_account(L, *out);
  return 1;
}

/* Torch7's result-first res:mm(a, b) is a @ b here, not res's: a third
** argument is an error, not dropped (x:matmul(a, b) was x @ a). */
static int f_matmul(lua_State *L) {
  lember_noextra(L, 2, "matmul", "other");
  em_tensor *a = lember_checktensor(L, 1), *b = lember_checktensor(L, 2);
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_matmul(out, a, b), "matmul");
}

/* linear(x, w [, b]): x @ w^T + b as torch.nn.functional.linear, the bias
** added in the product's pass (em_linear). */
static int f_linear(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1), *w = lember_checktensor(L, 2);
  em_tensor *b = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_linear(out, x, w, b), "linear");
}

static int f_bmm(lua_State *L) {
  lember_noextra(L, 2, "bmm", "mat2");
  em_tensor *a = lember_checktensor(L, 1), *b = lember_checktensor(L, 2);
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_bmm(out, a, b), "bmm");
}

static int softmax_like(lua_State *L, int log) {
  const char *op = log ? "log_softmax" : "softmax";
  em_tensor *x = lember_checktensor(L, 1);
  if (lua_isnoneornil(L, 2)) return luaL_error(L, "ember.%s: a dim is required, e.g. %s(-1)", op, op);
  em_tensor **out = lember_newslot(L);
  if (x->ndim == 0) { /* dim 1 or -1 (torch's 0): x as [1], the result as [] again */
    lember_checkdim_scalar(L, 2, op);
    int64_t one = 1;
    em_tensor *v = NULL, *y = NULL;
    em_status s = em_reshape(&v, x, 1, &one);
    if (!s) s = log ? em_log_softmax(&y, v, 0) : em_softmax(&y, v, 0);
    if (!s) s = em_reshape(out, y, 0, NULL);
    em_release(v), em_release(y);
    return finish(L, out, s, op);
  }
  int d = lember_checkdim_n(L, 2, op, x->ndim);
  return finish(L, out, log ? em_log_softmax(out, x, d) : em_softmax(out, x, d), op);
}

static int f_softmax(lua_State *L) { return softmax_like(L, 0); }
static int f_log_softmax(lua_State *L) { return softmax_like(L, 1); }

/* layer_norm(x, nnorm_or_shape, weight, bias [, eps]) */
static int f_layer_norm(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  int nnorm;
  if (lua_type(L, 2) == LUA_TTABLE) {
    int64_t shape[EM_MAX_DIMS];
    int next;
    char a[128], b[128];
    nnorm = lember_checkshape(L, 2, "layer_norm", shape, 0, &next);
    if (nnorm == 0 || nnorm > x->ndim ||
        memcmp(shape, x->shape + x->ndim - nnorm, sizeof(int64_t) * nnorm) != 0)
      return luaL_error(L, "ember.layer_norm: normalized shape %s does not match the last dims of input %s",
                        em_shape_str(nnorm, shape, a, sizeof a),
                        em_shape_str(x->ndim, x->shape, b, sizeof b));
  } else {
    nnorm = (int)lember_checkint(L, 2, "layer_norm", "normalized_ndims");
  }
  em_tensor *w = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  em_tensor *bias = lua_isnoneornil(L, 4) ? NULL : lember_checktensor(L, 4);
  double eps = luaL_optnumber(L, 5, 1e-5);
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_layer_norm(out, x, nnorm, w, bias, eps), "layer_norm");
}

/* _rms_norm(x, nnorm, weight|nil, eps): the backend's RMS norm kernel
** (em_rms_norm), for nn.RMSNorm. Returns nil and the reason when the
** backend has none (EM_ERR_UNSUPPORTED): the caller composes it then. */
static int f_rms_norm(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  int nnorm = (int)lember_checkint(L, 2, "rms_norm", "normalized_ndims");
  em_tensor *w = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  double eps = luaL_checknumber(L, 4);
  em_tensor **out = lember_newslot(L);
  em_status s = em_rms_norm(out, x, nnorm, w, eps);
  if (s == EM_ERR_UNSUPPORTED) {
    lua_pushnil(L);
    lua_pushstring(L, em_error_message());
    return 2;
  }
  return finish(L, out, s, "rms_norm");
}

/* _rope(x, cos, sin): the backend's rotary kernel (em_rope), for
** nn.MultiHeadAttention. Returns nil and the reason when the backend has
** none (EM_ERR_UNSUPPORTED): the caller composes it then. */
static int f_rope(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1), *c = lember_checktensor(L, 2);
  em_tensor *sn = lember_checktensor(L, 3);
  em_tensor **out = lember_newslot(L);
  em_status s = em_rope(out, x, c, sn);
  if (s == EM_ERR_UNSUPPORTED) {
    lua_pushnil(L);
    lua_pushstring(L, em_error_message());
    return 2;
  }
  return finish(L, out, s, "rope");
}

/* _conv2d(x, w, b|nil, sh, sw, pad_top, pad_bottom, pad_left, pad_right,
** dh, dw, groups): the backend's convolution kernel (em_conv2d), for
** nn/_conv.lua. Returns nil and the reason when the backend declines the
** call (EM_ERR_UNSUPPORTED): the caller composes it then. */
static int f_conv2d(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1), *w = lember_checktensor(L, 2);
  em_tensor *b = lua_isnoneornil(L, 3) ? NULL : lember_checktensor(L, 3);
  int64_t v[9];
  for (int i = 0; i < 9; i++) v[i] = lember_checkint(L, 4 + i, "conv2d", "size");
  const int64_t stride[2] = {v[0], v[1]}, pad[4] = {v[2], v[3], v[4], v[5]};
  const int64_t dil[2] = {v[6], v[7]};
  em_tensor **out = lember_newslot(L);
  em_status s = em_conv2d(out, x, w, b, stride, pad, dil, v[8]);
  if (s == EM_ERR_UNSUPPORTED) {
    lua_pushnil(L);
    lua_pushstring(L, em_error_message());
    return 2;
  }
  return finish(L, out, s, "conv2d");
}

/* conv_routes() -> {kernel=, composed=}: convolutions run so far on the
** backend's kernel and composed from core ops (em_conv_route_counts). */
static int f_conv_routes(lua_State *L) {
  uint64_t k, c;
  em_conv_route_counts(&k, &c);
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)k), lua_setfield(L, -2, "kernel");
  lua_pushinteger(L, (lua_Integer)c), lua_setfield(L, -2, "composed");
  return 1;
}

static int f_conv_count_composed(lua_State *L) {
  (void)L;
  em_conv_count_composed();
  return 0;
}

/* embedding(weight, ids): ids 1-based int64 */
static int f_embedding(lua_State *L) {
  em_tensor *w = lember_checktensor(L, 1), *ids = lember_checktensor(L, 2);
  em_tensor *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&c, ids);
  if (!s) s = em_embedding(out, w, c);
  em_release(c);
  if (s) return lember_index_error(L, "embedding", s, ids, w->ndim ? w->shape[0] : 0, "id", INT64_MIN);
  return finish(L, out, s, "embedding");
}

static int m_index_select(lua_State *L) {
  lember_noextra(L, 3, "index_select", "dim, index");
  em_tensor *x = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "index_select", x->ndim);
  em_tensor *idx = lember_checktensor(L, 3), *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&c, idx);
  if (!s) s = em_index_select(out, x, d, c);
  em_release(c);
  if (s) return lember_index_error(L, "index_select", s, idx, x->shape[d], "index", INT64_MIN);
  return finish(L, out, s, "index_select");
}

static int m_gather(lua_State *L) {
  lember_noextra(L, 3, "gather", "dim, index");
  em_tensor *x = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "gather", x->ndim);
  em_tensor *idx = lember_checktensor(L, 3), *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&c, idx);
  if (!s) s = em_gather(out, x, d, c);
  em_release(c);
  if (s) return lember_index_error(L, "gather", s, idx, x->shape[d], "index", INT64_MIN);
  return finish(L, out, s, "gather");
}

static int m_scatter_add(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  int d = lember_checkdim_n(L, 2, "scatter_add", x->ndim);
  em_tensor *idx = lember_checktensor(L, 3), *src = lember_checktensor(L, 4), *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&c, idx);
  if (!s) s = em_scatter_add(out, x, d, c, src);
  em_release(c);
  if (s) return lember_index_error(L, "scatter_add", s, idx, x->shape[d], "index", INT64_MIN);
  return finish(L, out, s, "scatter_add");
}

/* The tensors of the list at idx, in a buffer the GC owns. */
static em_tensor **tensor_list(lua_State *L, int idx, const char *op, int *n) {
  if (!lua_istable(L, idx))
    luaL_error(L, "ember.%s: expected a list of tensors, got %s", op, luaL_typename(L, idx));
  lua_Integer len = luaL_len(L, idx);
  if (len < 1) luaL_error(L, "ember.%s: expected a non-empty list of tensors", op);
  if (len > 1 << 24) luaL_error(L, "ember.%s: too many tensors (%I)", op, len);
  em_tensor **xs = (em_tensor **)lua_newuserdatauv(L, sizeof(em_tensor *) * (size_t)len, 0);
  for (lua_Integer i = 1; i <= len; i++) {
    lua_geti(L, idx, i);
    xs[i - 1] = lember_testtensor(L, -1);
    if (!xs[i - 1])
      luaL_error(L, "ember.%s: element %I of the list is a %s, expected a tensor", op, i,
                 luaL_typename(L, -1));
    lua_pop(L, 1); /* the list keeps the tensor alive */
  }
  *n = (int)len;
  return xs;
}

static int join(lua_State *L, int stack) {
  const char *op = stack ? "stack" : "cat";
  int n;
  if (lember_testtensor(L, 1)) /* Torch7's cat(a, b [, dim]) */
    return luaL_error(L, "ember.%s: expected one list of tensors, got a tensor as argument 1 (ember.%s({a, b, ...} [, dim]))",
                      op, op);
  int top = lua_gettop(L); /* nothing after the dim (trailing nils aside) */
  while (top > 2 && lua_isnil(L, top)) top--;
  if (top > 2)
    return luaL_error(L, "ember.%s: takes a list of tensors and a dim, got %d arguments (argument 3 is a %s)", op, top,
                      luaL_typename(L, 3));
  lua_settop(L, 2); /* tensor_list pushes its buffer above the arguments */
  em_tensor **xs = tensor_list(L, 1, op, &n);
  int d = lua_isnoneornil(L, 2) ? 0 : (stack ? lember_checkdim_new(L, 2, op, xs[0]->ndim) : lember_checkdim_n(L, 2, op, xs[0]->ndim));
  em_tensor **out = lember_newslot(L);
  return finish(L, out, stack ? em_stack(out, n, xs, d) : em_cat(out, n, xs, d), op);
}

static int f_cat(lua_State *L) { return join(L, 0); }
static int f_stack(lua_State *L) { return join(L, 1); }

/* Pushes a list table from a core list, taking the references. */
static void push_list(lua_State *L, em_tensor **list, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lember_pushtensor(L, list[i]);
    list[i] = NULL;
    lua_rawseti(L, -2, i + 1);
  }
  em_free_list(list, n);
}

static int split_like(lua_State *L, int chunk) {
  const char *op = chunk ? "chunk" : "split";
  lember_noextra(L, 3, op, chunk ? "chunks, dim" : "split_size, dim");
  em_tensor *x = lember_checktensor(L, 1);
  int64_t k = lember_checkint(L, 2, op, chunk ? "chunks" : "size");
  int d = lua_isnoneornil(L, 3) ? 0 : lember_checkdim_n(L, 3, op, x->ndim);
  em_tensor **list = NULL;
  int n = 0;
  em_status s = chunk ? em_chunk(&list, &n, x, k, d) : em_split(&list, &n, x, k, d);
  if (s) return lember_error(L, op, s);
  push_list(L, list, n);
  return 1;
}

static int m_split(lua_State *L) { return split_like(L, 0); }
static int m_chunk(lua_State *L) { return split_like(L, 1); }

/* dropout(x, p [, training=true]) */
static int f_dropout(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  double p = luaL_checknumber(L, 2);
  int train = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_dropout(out, x, p, train), "dropout");
}

static em_reduction check_reduction(lua_State *L, int idx, const char *op) {
  const char *r = luaL_checkstring(L, idx);
  if (strcmp(r, "mean") == 0) return EM_REDUCE_MEAN;
  if (strcmp(r, "sum") == 0) return EM_REDUCE_SUM;
  if (strcmp(r, "none") == 0) return EM_REDUCE_NONE;
  luaL_error(L, "ember.%s: reduction must be \"mean\", \"sum\" or \"none\", got \"%s\"", op, r);
  return EM_REDUCE_MEAN;
}

/* cross_entropy(logits, target [, {ignore_index=, label_smoothing=, reduction=}]) */
static int f_cross_entropy(lua_State *L) {
  static const char *const names[] = {"ignore_index", "label_smoothing", "reduction", NULL};
  em_tensor *logits = lember_checktensor(L, 1), *target = lember_checktensor(L, 2);
  /* PyTorch's default ignore_index, -100 (Hugging Face's label padding): no
  ** 1-based class id is negative, so ignoring it takes nothing from anyone */
  int64_t ignore = -100 - 1; /* 0-based here; ember.nll_loss has the same default */
  double smoothing = 0;
  em_reduction red = EM_REDUCE_MEAN;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lember_checkoptions(L, 3, "cross_entropy", names);
    if (lua_getfield(L, 3, "ignore_index") != LUA_TNIL)
      ignore = lember_checkint(L, -1, "cross_entropy", "ignore_index") - 1; /* 1-based */
    if (lua_getfield(L, 3, "label_smoothing") != LUA_TNIL) smoothing = luaL_checknumber(L, -1);
    if (lua_getfield(L, 3, "reduction") != LUA_TNIL) red = check_reduction(L, -1, "cross_entropy");
    lua_pop(L, 3);
  }
  em_tensor *c = NULL;
  em_tensor **out = lember_newslot(L);
  em_status s = lember_index_to_c(&c, target);
  if (!s) s = em_cross_entropy(out, logits, c, ignore, smoothing, red);
  em_release(c);
  if (s)
    return lember_index_error(L, "cross_entropy", s, target,
                              logits->ndim ? logits->shape[logits->ndim - 1] : 0, "target",
                              ignore + 1);
  return finish(L, out, s, "cross_entropy");
}

static int f_mse_loss(lua_State *L) {
  em_tensor *a = lember_checktensor(L, 1), *b = lember_checktensor(L, 2);
  em_reduction red = lua_isnoneornil(L, 3) ? EM_REDUCE_MEAN : check_reduction(L, 3, "mse_loss");
  em_tensor **out = lember_newslot(L);
  return finish(L, out, em_mse_loss(out, a, b, red), "mse_loss");
}

static const luaL_Reg methods[] = {
  {"matmul", f_matmul}, {"softmax", f_softmax}, {"log_softmax", f_log_softmax},
  {"index_select", m_index_select}, {"gather", m_gather}, {"scatter_add", m_scatter_add},
  {"split", m_split}, {"chunk", m_chunk},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"matmul", f_matmul}, {"bmm", f_bmm}, {"linear", f_linear}, {"softmax", f_softmax}, {"log_softmax", f_log_softmax},
  {"layer_norm", f_layer_norm}, {"embedding", f_embedding}, {"cat", f_cat},
  {"stack", f_stack}, {"dropout", f_dropout}, {"cross_entropy", f_cross_entropy},
  {"mse_loss", f_mse_loss}, {"_conv2d", f_conv2d}, {"_rms_norm", f_rms_norm}, {"_rope", f_rope}, {"conv_routes", f_conv_routes},
  {"_conv_count_composed", f_conv_count_composed},
  {NULL, NULL}
};

void lember_open_nn(lua_State *L, int module, int methods_idx, int mt) {
  (void)mt;
  lua_pushvalue(L, methods_idx);
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 1);
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
}
