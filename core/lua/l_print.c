/*
** l_print.c -- tostring(t), PyTorch style:
**
**   tensor([[ 0.1000, -2.0000],
**           [ 3.0000,  4.5000]], shape=[2, 2], dtype=float32, device=cpu)
**
** Floats get 4 decimals, or scientific notation when the magnitudes call
** for it (as PyTorch decides). Tensors of more than 1000 elements show the
** first and last 3 entries of each long dim with "..." between.
** ember.set_printoptions{precision=, threshold=, edgeitems=, linewidth=,
** sci_mode=, profile=} changes those, as torch.set_printoptions.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lember.h"

/* torch.set_printoptions' settings; the "default" profile. */
typedef struct print_options {
  int precision;     /* decimals of floats */
  int64_t threshold; /* more elements than this are summarized */
  int edgeitems;     /* shown at each end of a summarized dim */
  int linewidth;     /* characters a line of elements may take */
  int sci_mode;      /* -1: as PyTorch decides, 0: never, 1: always */
} print_options;
static const print_options profiles[3] = {{4, 1000, 3, 80, -1}, {2, 1000, 2, 80, -1}, {4, INT64_MAX, 3, 80, -1}};
static print_options opts = {4, 1000, 3, 80, -1};
#define SUMMARIZE_ABOVE opts.threshold
#define EDGE opts.edgeitems
#define LINE_WIDTH opts.linewidth
#define PREFIX "tensor("
#define PREFIX_LEN 7
/* Room for one element: "%.30f" of -DBL_MAX is 1 + 309 + 1 + 30 characters
** (sci_mode = false with precision = 30 prints all of them). */
#define ELEMENT_CHARS 352

typedef struct printer {
  luaL_Buffer *b;
  int ndim;
  int64_t shape[EM_MAX_DIMS]; /* of the (summarized) host data */
  int64_t stride[EM_MAX_DIMS];
  int cut[EM_MAX_DIMS];       /* dim was summarized: "..." after EDGE entries */
  em_dtype dt;                /* F64, I64 or BOOL on the host */
  const void *data;
  int sci;                    /* floats in %.4e */
  int width;                  /* of every element */
} printer;

/* ---------------------------------------------------------------- */
/* Summarizing: first and last EDGE entries of each long dim          */
/* ---------------------------------------------------------------- */

/* A new reference to the tensor to print, with long dims cut down. */
static em_status summarize(em_tensor **out, em_tensor *t, int *cut) {
  em_tensor *cur = NULL;
  em_status s = em_detach(&cur, t);
  int summarize = em_numel(t) > SUMMARIZE_ABOVE;
  for (int d = 0; d < t->ndim && !s; d++) {
    cut[d] = summarize && t->shape[d] > 2 * EDGE;
    if (!cut[d]) continue;
    em_tensor *parts[2] = {NULL, NULL}, *next = NULL;
    s = em_narrow(&parts[0], cur, d, 0, EDGE);
    if (!s) s = em_narrow(&parts[1], cur, d, t->shape[d] - EDGE, EDGE);
    if (!s) s = em_cat(&next, 2, parts, d);
    em_release(parts[0]);
    em_release(parts[1]);
    em_release(cur);
    cur = next;
  }
  if (s) {
    em_release(cur);
    cur = NULL;
  }
  *out = cur;
  return s;
}

/* ---------------------------------------------------------------- */
/* Formatting elements                                               */
/* ---------------------------------------------------------------- */

static int fmt_element(const printer *p, int64_t i, char *buf, size_t n) {
  switch (p->dt) {
    case EM_I64: return snprintf(buf, n, "%lld", (long long)((const int64_t *)p->data)[i]);
    case EM_BOOL: return snprintf(buf, n, "%s", ((const uint8_t *)p->data)[i] ? "true" : "false");
    default: {
      double v = ((const double *)p->data)[i];
      if (isnan(v)) return snprintf(buf, n, "nan");
      if (isinf(v)) return snprintf(buf, n, v > 0 ? "inf" : "-inf");
      return snprintf(buf, n, p->sci ? "%.*e" : "%.*f", opts.precision, v);
    }
  }
}

/* Picks fixed or scientific notation as PyTorch does. */
static void choose_float_mode(printer *p, int64_t n) {
  double maxa = 0, mina = INFINITY;
  const double *d = (const double *)p->data;
  for (int64_t i = 0; i < n; i++) {
    double a = fabs(d[i]);
    if (!isfinite(a) || a == 0) continue;
    if (a > maxa) maxa = a;
    if (a < mina) mina = a;
  }
  p->sci = opts.sci_mode >= 0 ? opts.sci_mode : maxa > 0 && (maxa >= 1e8 || mina < 1e-4 || maxa / mina > 1e3);
}

/* ember.set_printoptions{precision =, threshold =, edgeitems =, linewidth =,
** sci_mode =, profile =}: torch.set_printoptions' keywords (profile first:
** "default", "short" or "full"; sci_mode nil is PyTorch's choice again). */
int lember_set_printoptions(lua_State *L) {
  static const char *const names[] = {"precision", "threshold", "edgeitems", "linewidth", "sci_mode", "profile", NULL};
  static const char *const op = "set_printoptions";
  luaL_checktype(L, 1, LUA_TTABLE);
  lember_checkoptions(L, 1, op, names);
  lember_noextra(L, 1, op, "options");
  print_options o = opts;
  if (lua_getfield(L, 1, "profile") != LUA_TNIL) {
    const char *p = lua_tostring(L, -1);
    int k = !p ? -1 : strcmp(p, "default") == 0 ? 0 : strcmp(p, "short") == 0 ? 1 : strcmp(p, "full") == 0 ? 2 : -1;
    if (k < 0 || lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "ember.%s: profile must be \"default\", \"short\" or \"full\", got %s%s%s", op,
                        p ? "\"" : "", p ? p : luaL_typename(L, -1), p ? "\"" : "");
    o = profiles[k];
  }
  static const struct { const char *name; int64_t lo, hi; } ints[4] = {
    {"precision", 0, 30}, {"threshold", 0, INT64_MAX}, {"edgeitems", 1, 1000000}, {"linewidth", 1, 1000000}};
  for (int i = 0; i < 4; i++) {
    if (lua_getfield(L, 1, ints[i].name) == LUA_TNIL) continue;
    int64_t v = lember_checkint(L, -1, op, ints[i].name);
    if (v < ints[i].lo || v > ints[i].hi) {
      if (ints[i].hi == INT64_MAX)
        return luaL_error(L, "ember.%s: %s must be an integer >= %I, got %I", op, ints[i].name, (lua_Integer)ints[i].lo, (lua_Integer)v);
      return luaL_error(L, "ember.%s: %s must be an integer in %I..%I, got %I", op, ints[i].name,
                        (lua_Integer)ints[i].lo, (lua_Integer)ints[i].hi, (lua_Integer)v);
    }
    if (i == 0) o.precision = (int)v;
    if (i == 1) o.threshold = v;
    if (i == 2) o.edgeitems = (int)v;
    if (i == 3) o.linewidth = (int)v;
  }
  int t = lua_getfield(L, 1, "sci_mode");
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    return luaL_error(L, "ember.%s: sci_mode must be a boolean or nil, got %s", op, luaL_typename(L, -1));
  if (t == LUA_TBOOLEAN) o.sci_mode = lua_toboolean(L, -1);
  opts = o;
  return 0;
}

static void add_spaces(luaL_Buffer *b, int n) {
  for (int i = 0; i < n; i++) luaL_addchar(b, ' ');
}

static void add_element(printer *p, int64_t i) {
  char buf[ELEMENT_CHARS];
  int n = fmt_element(p, i, buf, sizeof buf);
  if (n >= (int)sizeof buf) n = (int)sizeof buf - 1; /* never past buf (snprintf counts what did not fit) */
  add_spaces(p->b, p->width - n);
  luaL_addlstring(p->b, buf, (size_t)n);
}

/* The last dim: elements wrapped at LINE_WIDTH. */
static void add_row(printer *p, int64_t off, int indent) {
  int64_t n = p->shape[p->ndim - 1], st = p->stride[p->ndim - 1];
  int cut = p->cut[p->ndim - 1];
  int per_line = (LINE_WIDTH - indent) / (p->width + 2);
  int on_line = 0;
  if (per_line < 1) per_line = 1;
  luaL_addchar(p->b, '[');
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      luaL_addchar(p->b, ',');
      if (on_line == per_line) {
        luaL_addchar(p->b, '\n');
        add_spaces(p->b, indent);
        on_line = 0;
      } else {
        luaL_addchar(p->b, ' ');
      }
    }
    if (cut && i == EDGE) luaL_addstring(p->b, " ..., "); /* not counted, as PyTorch */
    add_element(p, off + i * st);
    on_line++;
  }
  luaL_addchar(p->b, ']');
}

static void add_block(printer *p, int d, int64_t off) {
  int indent = PREFIX_LEN + d + 1; /* column after this block's '[' */
  if (d == p->ndim - 1) {
    add_row(p, off, indent);
    return;
  }
  luaL_addchar(p->b, '[');
  for (int64_t i = 0; i < p->shape[d]; i++) {
    if (i > 0) { /* a newline per remaining dim, then the indent */
      luaL_addchar(p->b, ',');
      for (int k = 0; k < p->ndim - d - 1; k++) luaL_addchar(p->b, '\n');
      add_spaces(p->b, indent);
    }
    if (p->cut[d] && i == EDGE) {
      luaL_addstring(p->b, "...,");
      for (int k = 0; k < p->ndim - d - 1; k++) luaL_addchar(p->b, '\n');
      add_spaces(p->b, indent);
    }
    add_block(p, d + 1, off + i * p->stride[d]);
  }
  luaL_addchar(p->b, ']');
}

/* ---------------------------------------------------------------- */
/* Entry point                                                       */
/* ---------------------------------------------------------------- */

static void add_suffix(luaL_Buffer *b, const em_tensor *t) {
  char buf[256];
  luaL_addstring(b, ", shape=");
  luaL_addstring(b, em_shape_str(t->ndim, t->shape, buf, sizeof buf));
  luaL_addstring(b, ", dtype=");
  luaL_addstring(b, em_dtype_name(t->dtype));
  luaL_addstring(b, ", device=");
  luaL_addstring(b, em_device_str(t->device, buf, sizeof buf));
  if (t->grad_fn) {
    luaL_addstring(b, ", grad_fn=<");
    luaL_addstring(b, t->grad_fn->op->name);
    luaL_addchar(b, '>');
  } else if (t->requires_grad) {
    luaL_addstring(b, ", requires_grad=true");
  }
  luaL_addchar(b, ')');
}

void lember_pushtostring(lua_State *L, em_tensor *t) {
  printer p;
  em_tensor *small = NULL, *host = NULL;
  memset(&p, 0, sizeof p);
  int64_t numel = em_numel(t);
  if (numel == 0) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, PREFIX "[]");
    add_suffix(&b, t);
    luaL_pushresult(&b);
    return;
  }
  bool prev = em_set_grad_enabled(false);
  em_status s = summarize(&small, t, p.cut);
  p.dt = t->dtype == EM_I64 || t->dtype == EM_BOOL ? t->dtype : EM_F64;
  if (!s && small->dtype == p.dt) host = em_retain(small); /* em_to_host takes any strides */
  else if (!s) s = em_to_dtype(&host, small, p.dt);
  em_set_grad_enabled(prev);
  em_release(small);
  if (s) {
    lember_error(L, "tostring", s);
    return;
  }
  int64_t n = em_numel(host);
  void *data = lua_newuserdatauv(L, (size_t)n * em_dtype_size(p.dt), 0);
  s = em_to_host(host, data);
  p.ndim = host->ndim;
  int64_t st = 1;
  for (int d = host->ndim - 1; d >= 0; d--) {
    p.shape[d] = host->shape[d];
    p.stride[d] = st;
    st *= host->shape[d];
  }
  em_release(host);
  if (s) {
    lember_error(L, "tostring", s);
    return;
  }
  p.data = data;
  if (p.dt == EM_F64) choose_float_mode(&p, n);
  for (int64_t i = 0; i < n; i++) {
    char buf[ELEMENT_CHARS];
    int w = fmt_element(&p, i, buf, sizeof buf);
    if (w > p.width) p.width = w;
  }
  luaL_Buffer b;
  p.b = &b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, PREFIX);
  if (p.ndim == 0)
    add_element(&p, 0);
  else
    add_block(&p, 0, 0);
  add_suffix(&b, t);
  luaL_pushresult(&b);
  lua_remove(L, -2); /* the host data */
}
