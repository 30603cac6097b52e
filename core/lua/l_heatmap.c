/*
** l_heatmap.c -- attention weights as heatmap PNGs, one per head, with the
** tokens on the axes (cairo draws and writes the PNG).
**
**   ember.attention_heatmap(weights, path [, {tokens_q=, tokens_k=, head=,
**                           batch=1, title=, cell=}]) -> list of paths
**
** weights: [B,H,Lq,Lk], [H,Lq,Lk] or [Lq,Lk] (any float dtype or device).
** One file per head: "%d" in path becomes the 1-based head number, else
** "_head<h>" goes before the extension (a single head keeps path as is).
** head= draws only that head (1-based). Queries are rows (tokens_q on the
** left), keys are columns (tokens_k on top). Colours: a viridis ramp from
** 0 to the largest weight of the head, with a colour bar.
*/
#include <cairo.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lember.h"

#define HM_MAX_TOKENS 4096

/* Viridis, 9 stops. */
static const double VIRIDIS[9][3] = {
  {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530}, {0.207, 0.372, 0.553},
  {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551}, {0.135, 0.659, 0.518}, {0.267, 0.749, 0.441},
  {0.993, 0.906, 0.144}};

static void ramp(double t, double rgb[3]) {
  if (!(t >= 0)) t = 0;
  if (t > 1) t = 1;
  double x = t * 8;
  int i = (int)x;
  if (i >= 8) i = 7;
  double f = x - i;
  for (int c = 0; c < 3; c++) rgb[c] = VIRIDIS[i][c] * (1 - f) + VIRIDIS[i + 1][c] * f;
}

/* Reads a list of strings (or nil) at field key of table idx: count, or -1. */
static int read_tokens(lua_State *L, int idx, const char *key, const char **out, int want) {
  if (!idx || lua_getfield(L, idx, key) == LUA_TNIL) {
    if (idx) lua_pop(L, 1);
    return -1;
  }
  if (!lua_istable(L, -1)) luaL_error(L, "ember.attention_heatmap: %s must be a list of strings", key);
  int n = (int)luaL_len(L, -1);
  if (n != want)
    luaL_error(L, "ember.attention_heatmap: %s has %d tokens, the weights have %d %s", key, n, want,
               key[7] == 'q' ? "queries (rows)" : "keys (columns)");
  for (int i = 0; i < n; i++) {
    lua_geti(L, -1, i + 1);
    if (!lua_isstring(L, -1)) luaL_error(L, "ember.attention_heatmap: %s[%d] is not a string", key, i + 1);
    out[i] = lua_tostring(L, -1); /* kept alive by the list */
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* the options table still holds the list */
  return n;
}

static double text_width(cairo_t *cr, const char *s) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  return e.x_advance;
}

/* Draws one head's [Lq, Lk] map and writes it. Returns the cairo status. */
static cairo_status_t draw_head(const double *w, int64_t Lq, int64_t Lk, const char **tq, const char **tk,
                                const char *title, double cell, const char *path) {
  char num[32];
  double font = cell * 0.55 < 7 ? 7 : cell * 0.55 > 14 ? 14 : cell * 0.55;
  /* Measure labels on a scratch surface. */
  cairo_surface_t *probe = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
  cairo_t *pc = cairo_create(probe);
  cairo_set_font_size(pc, font);
  double lw = 0, tw = 0;
  for (int64_t i = 0; i < Lq; i++) {
    snprintf(num, sizeof num, "%lld", (long long)(i + 1));
    double x = text_width(pc, tq ? tq[i] : num);
    if (x > lw) lw = x;
  }
  for (int64_t j = 0; j < Lk; j++) {
    snprintf(num, sizeof num, "%lld", (long long)(j + 1));
    double x = text_width(pc, tk ? tk[j] : num);
    if (x > tw) tw = x;
  }
  cairo_destroy(pc);
  cairo_surface_destroy(probe);

  double wmax = 0;
  for (int64_t n = 0; n < Lq * Lk; n++)
    if (w[n] > wmax) wmax = w[n];
  if (wmax <= 0) wmax = 1;
  double left = lw + 14, top = tw + 14 + 22, bar = 60;
  int W = (int)(left + cell * (double)Lk + bar + 40), H = (int)(top + cell * (double)Lq + 20);
  cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font);

  for (int64_t i = 0; i < Lq; i++)
    for (int64_t j = 0; j < Lk; j++) {
      double rgb[3];
      ramp(w[i * Lk + j] / wmax, rgb);
      cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
      cairo_rectangle(cr, left + cell * (double)j, top + cell * (double)i, cell, cell);
      cairo_fill(cr);
    }
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (int64_t i = 0; i < Lq; i++) { /* query labels, right-aligned on the left */
    snprintf(num, sizeof num, "%lld", (long long)(i + 1));
    const char *s = tq ? tq[i] : num;
    cairo_move_to(cr, left - 6 - text_width(cr, s), top + cell * ((double)i + 0.5) + font * 0.35);
    cairo_show_text(cr, s);
  }
  for (int64_t j = 0; j < Lk; j++) { /* key labels, rotated, on top */
    snprintf(num, sizeof num, "%lld", (long long)(j + 1));
    const char *s = tk ? tk[j] : num;
    cairo_save(cr);
    cairo_move_to(cr, left + cell * ((double)j + 0.5) + font * 0.35, top - 6);
    cairo_rotate(cr, -M_PI / 2);
    cairo_show_text(cr, s);
    cairo_restore(cr);
  }
  if (title) {
    cairo_set_font_size(cr, 13);
    cairo_move_to(cr, 6, 16);
    cairo_show_text(cr, title);
    cairo_set_font_size(cr, font);
  }
  /* colour bar from 0 to wmax */
  double bx = left + cell * (double)Lk + 16, bh = cell * (double)Lq;
  for (int k = 0; k < 100; k++) {
    double rgb[3];
    ramp(1 - k / 99.0, rgb);
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_rectangle(cr, bx, top + bh * k / 100.0, 12, bh / 100.0 + 0.5);
    cairo_fill(cr);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  snprintf(num, sizeof num, "%.3g", wmax);
  cairo_move_to(cr, bx + 15, top + font);
  cairo_show_text(cr, num);
  cairo_move_to(cr, bx + 15, top + bh);
  cairo_show_text(cr, "0");
  cairo_destroy(cr);
  cairo_status_t st = cairo_surface_status(surf);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_write_to_png(surf, path);
  cairo_surface_destroy(surf);
  return st;
}

/* The file name of head h (1-based) into buf. */
static void head_path(char *buf, size_t n, const char *path, int h, int many) {
  const char *pct = strstr(path, "%d");
  if (pct) {
    snprintf(buf, n, "%.*s%d%s", (int)(pct - path), path, h, pct + 2);
  } else if (!many) {
    snprintf(buf, n, "%s", path);
  } else {
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash)) snprintf(buf, n, "%.*s_head%d%s", (int)(dot - path), path, h, dot);
    else snprintf(buf, n, "%s_head%d.png", path, h);
  }
}

static int l_attention_heatmap(lua_State *L) {
  const char *op = "attention_heatmap";
  em_tensor *w = lember_checktensor(L, 1);
  const char *path = luaL_checkstring(L, 2);
  int opts = lua_istable(L, 3) ? 3 : 0;
  if (!lua_isnoneornil(L, 3) && !opts) return luaL_error(L, "ember.%s: options must be a table", op);
  if (w->ndim < 2 || w->ndim > 4)
    return luaL_error(L, "ember.%s: weights must be [B,H,Lq,Lk], [H,Lq,Lk] or [Lq,Lk], got %d dims", op, w->ndim);
  if (!em_dtype_is_float(w->dtype)) return luaL_error(L, "ember.%s: weights must be floating point, got %s", op, em_dtype_name(w->dtype));
  int64_t Lq = w->shape[w->ndim - 2], Lk = w->shape[w->ndim - 1];
  int64_t H = w->ndim >= 3 ? w->shape[w->ndim - 3] : 1, B = w->ndim == 4 ? w->shape[0] : 1;
  if (Lq > HM_MAX_TOKENS || Lk > HM_MAX_TOKENS || Lq == 0 || Lk == 0)
    return luaL_error(L, "ember.%s: %I x %I is not a size to draw (1..%d per side)", op, (lua_Integer)Lq,
                      (lua_Integer)Lk, HM_MAX_TOKENS);
  int64_t batch = 1, head = 0;
  double cell = 0;
  const char *title = NULL;
  const char **tq = NULL, **tk = NULL;
  if (opts) {
    lember_checkoptions(L, opts, op, (const char *const[]){"tokens_q", "tokens_k", "head", "batch", "title", "cell", NULL});
    if (lua_getfield(L, opts, "batch") != LUA_TNIL) batch = lember_checkint(L, -1, op, "batch");
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "head") != LUA_TNIL) head = lember_checkint(L, -1, op, "head");
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "cell") != LUA_TNIL) cell = luaL_checknumber(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "title") != LUA_TNIL) title = luaL_checkstring(L, -1);
    lua_pop(L, 1); /* the table keeps the string */
    tq = lua_newuserdatauv(L, (size_t)Lq * sizeof *tq, 0);
    if (read_tokens(L, opts, "tokens_q", tq, (int)Lq) < 0) tq = NULL;
    tk = lua_newuserdatauv(L, (size_t)Lk * sizeof *tk, 0);
    if (read_tokens(L, opts, "tokens_k", tk, (int)Lk) < 0) tk = NULL;
  }
  if (batch < 1 || batch > B) return luaL_error(L, "ember.%s: batch %I is out of range 1..%I", op, (lua_Integer)batch, (lua_Integer)B);
  if (head < 0 || head > H) return luaL_error(L, "ember.%s: head %I is out of range 1..%I", op, (lua_Integer)head, (lua_Integer)H);
  if (cell <= 0) cell = Lq > Lk ? 640.0 / (double)Lq : 640.0 / (double)Lk;
  if (cell > 40) cell = 40;
  if (cell < 2) cell = 2;

  /* The batch's [H, Lq, Lk] as host doubles, in a userdata (no leak on error). */
  double *host = lua_newuserdatauv(L, (size_t)(H * Lq * Lk) * sizeof(double), 0);
  em_tensor *sel = NULL, *d64 = NULL, *cpu_t = NULL;
  em_device cpu;
  em_status s = em_cpu_device(&cpu);
  if (s == EM_OK) s = w->ndim == 4 ? em_select(&sel, w, 0, batch - 1) : em_detach(&sel, w);
  if (s == EM_OK) s = em_to_device(&cpu_t, sel, cpu);
  if (s == EM_OK) s = em_to_dtype(&d64, cpu_t, EM_F64);
  if (s == EM_OK) s = em_to_host(d64, host);
  em_release(sel), em_release(cpu_t), em_release(d64);
  if (s != EM_OK) return lember_error(L, op, s);

  lua_newtable(L);
  int first = head ? (int)head : 1, last = head ? (int)head : (int)H;
  for (int h = first; h <= last; h++) {
    char file[4096], ttl[256];
    head_path(file, sizeof file, path, h, H > 1 && !head);
    if (H > 1) snprintf(ttl, sizeof ttl, "%s%shead %d", title ? title : "", title ? " - " : "", h);
    else snprintf(ttl, sizeof ttl, "%s", title ? title : "");
    cairo_status_t st = draw_head(host + (int64_t)(h - 1) * Lq * Lk, Lq, Lk, tq, tk,
                                  (title || H > 1) ? ttl : NULL, cell, file);
    if (st != CAIRO_STATUS_SUCCESS)
      return luaL_error(L, "ember.%s: could not write %s: %s", op, file, cairo_status_to_string(st));
    lua_pushstring(L, file);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  return 1;
}

/* Called by lember_open_attention (l_attention.c). */
void lember_open_heatmap(lua_State *L, int module) {
  /* cairo and fontconfig keep caches for the life of the process. Pin them
  ** (already loaded with this module) so they stay mapped when Lua unloads
  ** the module at exit: then leak reports name them and the suppressions
  ** in tests/lsan.supp apply, instead of "<unknown module>". */
  static const char *const libs[] = {"libcairo.so.2", "libfontconfig.so.1", "libpixman-1.so.0",
                                     "libfreetype.so.6"};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
    (void)dlopen(libs[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  lua_pushcfunction(L, l_attention_heatmap);
  lua_setfield(L, module, "attention_heatmap");
}
