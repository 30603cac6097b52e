/*
** l_plot.c -- PNG charts with cairo, for training curves and attention
** maps. Lua has no PNG library; cairo draws and writes the file.
**
**   ember.plot_lines(path, {title=, xlabel=, ylabel=, width=800, height=500,
**                           ymin=, ymax=, series = {{name=, x={...}, y={...}}, ...}})
**   ember.plot_heatmap(path, {heat = tensor [h, w], image = tensor [3, H, W] in [0, 1]
**                             (optional), scale = 6, alpha = 0.5, title= ("\n" breaks lines)})
**   The heat is scaled to [0, 1] by its min and max and blended over the
**   image (nearest-neighbour upsampling; h and w must divide H and W).
**
** Non-finite points are skipped. Every buffer lives in a Lua userdata, so a
** Lua error in the middle leaks nothing.
*/
#include "lember.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_SERIES 16

typedef struct series {
  const char *name;
  double *x, *y;
  int64_t n;
} series;

/* Reads list field `key` of the table at idx into a new userdata buffer of
** doubles (left on the stack). Returns its length. */
static int64_t get_numbers(lua_State *L, int idx, const char *key, double **out) {
  if (lua_getfield(L, idx, key) != LUA_TTABLE)
    luaL_error(L, "ember.plot_lines: series field '%s' must be a list of numbers, got %s", key,
               luaL_typename(L, -1));
  int64_t n = (int64_t)luaL_len(L, -1);
  double *buf = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(double), 0);
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, -2, i + 1);
    int ok;
    buf[i] = lua_tonumberx(L, -1, &ok);
    if (!ok)
      luaL_error(L, "ember.plot_lines: series field '%s' item %d is a %s, not a number", key, (int)(i + 1),
                 luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  lua_remove(L, -2); /* the list; the buffer stays */
  *out = buf;
  return n;
}

static const char *opt_string(lua_State *L, int idx, const char *key) {
  lua_getfield(L, idx, key);
  const char *s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  lua_pop(L, 1); /* the string stays alive: the spec table holds it */
  return s;
}

static double opt_number(lua_State *L, int idx, const char *key, double def) {
  lua_getfield(L, idx, key);
  double v = lua_isnil(L, -1) ? def : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) for a span. */
static double nice_step(double span, int want) {
  double raw = span / (want > 0 ? want : 1);
  double p = pow(10, floor(log10(raw)));
  double f = raw / p;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void tick_label(char *buf, size_t n, double v, double step) {
  if (fabs(v) < step * 1e-9) v = 0;
  if (fabs(v) >= 1e5 || (fabs(v) < 1e-3 && v != 0)) snprintf(buf, n, "%.2g", v);
  else if (step >= 1) snprintf(buf, n, "%.0f", v);
  else snprintf(buf, n, "%.*f", (int)ceil(-log10(step)), v);
}

static const double PALETTE[][3] = {
  {0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17}, {0.84, 0.15, 0.16},
  {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}};

static void text_at(cairo_t *cr, double x, double y, const char *s, double align, double size) {
  cairo_text_extents_t e;
  cairo_set_font_size(cr, size);
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - e.width * align - e.x_bearing, y);
  cairo_show_text(cr, s);
}

static int write_png(lua_State *L, cairo_surface_t *surf, const char *path, const char *op) {
  cairo_status_t cs = cairo_surface_write_to_png(surf, path);
  cairo_surface_destroy(surf);
  if (cs != CAIRO_STATUS_SUCCESS)
    return luaL_error(L, "ember.%s: cannot write %s: %s", op, path, cairo_status_to_string(cs));
  return 0;
}

/* Draws the axes, ticks and grid for the data box [x0,x1]x[y0,y1]. */
static void draw_axes(cairo_t *cr, double L_, double T, double W, double H, double x0, double x1,
                      double y0, double y1) {
  char buf[32];
  cairo_set_line_width(cr, 1);
  double xs = nice_step(x1 - x0, 6), ys = nice_step(y1 - y0, 5);
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
    double px = L_ + (v - x0) / (x1 - x0) * W;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, px, T);
    cairo_line_to(cr, px, T + H);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    tick_label(buf, sizeof buf, v, xs);
    text_at(cr, px, T + H + 16, buf, 0.5, 11);
  }
  for (double v = ceil(y0 / ys) * ys; v <= y1 + ys * 1e-9; v += ys) {
    double py = T + H - (v - y0) / (y1 - y0) * H;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, L_, py);
    cairo_line_to(cr, L_ + W, py);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    tick_label(buf, sizeof buf, v, ys);
    text_at(cr, L_ - 6, py + 4, buf, 1.0, 11);
  }
  cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
  cairo_rectangle(cr, L_, T, W, H);
  cairo_stroke(cr);
}

static int l_plot_lines(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *title = opt_string(L, 2, "title");
  const char *xlabel = opt_string(L, 2, "xlabel");
  const char *ylabel = opt_string(L, 2, "ylabel");
  int width = (int)opt_number(L, 2, "width", 800), height = (int)opt_number(L, 2, "height", 500);
  if (width < 200 || height < 150 || width > 8000 || height > 8000)
    return luaL_error(L, "ember.plot_lines: width and height must be in [200, 8000] and [150, 8000], got %d x %d",
                      width, height);
  if (lua_getfield(L, 2, "series") != LUA_TTABLE)
    return luaL_error(L, "ember.plot_lines: spec.series must be a list of {name=, x=, y=}, got %s",
                      luaL_typename(L, -1));
  int sidx = lua_gettop(L);
  int ns = (int)luaL_len(L, sidx);
  if (ns < 1 || ns > MAX_SERIES)
    return luaL_error(L, "ember.plot_lines: need 1 to %d series, got %d", MAX_SERIES, ns);
  series s[MAX_SERIES];
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (int i = 0; i < ns; i++) {
    luaL_checkstack(L, 6, "ember.plot_lines: too many series");
    if (lua_geti(L, sidx, i + 1) != LUA_TTABLE)
      return luaL_error(L, "ember.plot_lines: series %d must be a table, got %s", i + 1, luaL_typename(L, -1));
    int t = lua_gettop(L);
    lua_getfield(L, t, "name");
    s[i].name = lua_isnil(L, -1) ? "" : luaL_checkstring(L, -1); /* kept on the stack */
    int64_t nx = get_numbers(L, t, "x", &s[i].x);
    int64_t ny = get_numbers(L, t, "y", &s[i].y);
    if (nx != ny)
      return luaL_error(L, "ember.plot_lines: series %d has %d x values and %d y values", i + 1, (int)nx, (int)ny);
    s[i].n = nx;
    for (int64_t k = 0; k < nx; k++) {
      if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k])) continue;
      x0 = fmin(x0, s[i].x[k]), x1 = fmax(x1, s[i].x[k]);
      y0 = fmin(y0, s[i].y[k]), y1 = fmax(y1, s[i].y[k]);
    }
  }
  if (!(x0 <= x1)) return luaL_error(L, "ember.plot_lines: no finite points to plot");
  y0 = opt_number(L, 2, "ymin", y0);
  y1 = opt_number(L, 2, "ymax", y1);
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
  double pad = (y1 - y0) * 0.04;
  y0 -= pad, y1 += pad;

  cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t *cr = cairo_create(surf);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  double left = 70, top = title ? 40 : 20, W = width - left - 20, H = height - top - 50;
  draw_axes(cr, left, top, W, H, x0, x1, y0, y1);
  if (title) text_at(cr, width / 2.0, 26, title, 0.5, 15);
  if (xlabel) text_at(cr, left + W / 2, height - 10, xlabel, 0.5, 12);
  if (ylabel) {
    cairo_save(cr);
    cairo_translate(cr, 16, top + H / 2);
    cairo_rotate(cr, -M_PI / 2);
    text_at(cr, 0, 0, ylabel, 0.5, 12);
    cairo_restore(cr);
  }
  cairo_rectangle(cr, left, top, W, H);
  cairo_clip(cr);
  cairo_set_line_width(cr, 2);
  for (int i = 0; i < ns; i++) {
    const double *c = PALETTE[i % 8];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    int pen = 0;
    for (int64_t k = 0; k < s[i].n; k++) {
      if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k])) { pen = 0; continue; }
      double px = left + (s[i].x[k] - x0) / (x1 - x0) * W, py = top + H - (s[i].y[k] - y0) / (y1 - y0) * H;
      if (pen) cairo_line_to(cr, px, py); else cairo_move_to(cr, px, py);
      pen = 1;
    }
    cairo_stroke(cr);
  }
  cairo_reset_clip(cr);
  for (int i = 0; i < ns; i++) { /* dots on sparse series (one point per epoch, say) */
    if (s[i].n > 30) continue;
    const double *c = PALETTE[i % 8];
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    for (int64_t k = 0; k < s[i].n; k++) {
      if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k])) continue;
      double px = left + (s[i].x[k] - x0) / (x1 - x0) * W, py = top + H - (s[i].y[k] - y0) / (y1 - y0) * H;
      if (py < top - 3 || py > top + H + 3) continue; /* outside a given ymin/ymax */
      cairo_new_sub_path(cr);
      cairo_arc(cr, px, py, 3.5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
  }
  for (int i = 0; i < ns; i++) { /* legend, top right */
    const double *c = PALETTE[i % 8];
    double ly = top + 16 + 16 * i, lx = left + W - 150;
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_rectangle(cr, lx, ly - 8, 18, 4);
    cairo_fill(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    text_at(cr, lx + 24, ly - 2, s[i].name, 0, 11);
  }
  cairo_destroy(cr);
  return write_png(L, surf, path, "plot_lines");
}

/* A tensor's values as float64 host memory in a new userdata (left on the
** stack). Takes and releases core references only around core calls. */
static double *tensor_values(lua_State *L, em_tensor *t) {
  int64_t n = em_numel(t);
  double *buf = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(double), 0);
  em_tensor *d = NULL;
  em_status st = em_to_dtype(&d, t, EM_F64);
  if (st == EM_OK) st = em_to_host(d, buf);
  em_release(d);
  if (st != EM_OK) lember_error(L, "plot_heatmap", st);
  return buf;
}

/* A white-yellow-red-black ramp for v in [0, 1]. */
static void heat_colour(double v, double *r, double *g, double *b) {
  v = fmin(fmax(v, 0), 1);
  *r = v < 0.75 ? 1 : 1 - (v - 0.75) * 2.4;
  *g = v < 0.5 ? 1 - v * 0.4 : 0.8 - (v - 0.5) * 1.6;
  *b = v < 0.25 ? 0.6 - v * 2.4 : 0;
}

static int l_plot_heatmap(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  const char *title = opt_string(L, 2, "title");
  double scale = opt_number(L, 2, "scale", 6), alpha = opt_number(L, 2, "alpha", 0.5);
  if (scale < 1 || scale > 64) return luaL_error(L, "ember.plot_heatmap: scale must be in [1, 64], got %f", scale);
  lua_getfield(L, 2, "heat");
  em_tensor *heat = lember_checktensor(L, -1);
  if (heat->ndim != 2)
    return luaL_error(L, "ember.plot_heatmap: heat must be 2-D [h, w], got %d dims", heat->ndim);
  lua_getfield(L, 2, "image");
  em_tensor *image = lua_isnil(L, -1) ? NULL : lember_checktensor(L, -1);
  int64_t h = heat->shape[0], w = heat->shape[1], H = h, W = w;
  if (image) {
    if (image->ndim != 3 || image->shape[0] != 3)
      return luaL_error(L, "ember.plot_heatmap: image must be [3, H, W], got %d dims", image->ndim);
    H = image->shape[1], W = image->shape[2];
    if (H % h || W % w)
      return luaL_error(L, "ember.plot_heatmap: heat [%d, %d] must divide the image [%d, %d]", (int)h, (int)w,
                        (int)H, (int)W);
  }
  if (H * scale > 8000 || W * scale > 8000) return luaL_error(L, "ember.plot_heatmap: picture too large");
  const double *hv = tensor_values(L, heat);
  const double *iv = image ? tensor_values(L, image) : NULL;
  /* min-max scaled, so that a nearly uniform map still shows its peaks */
  double hmin = INFINITY, hmax = -INFINITY;
  for (int64_t i = 0; i < h * w; i++)
    if (isfinite(hv[i])) hmin = fmin(hmin, hv[i]), hmax = fmax(hmax, hv[i]);
  if (!(hmax > hmin)) hmin = 0, hmax = isfinite(hmax) && hmax > 0 ? hmax : 1;
  int lines = 0;
  for (const char *c = title; c && *c; c++) lines += *c == '\n';
  if (title) lines++;
  int top = lines ? 6 + 18 * lines : 0;
  int pw = (int)(W * scale), ph = (int)(H * scale);
  cairo_surface_t *surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, pw < 300 ? 300 : pw, ph + top);
  cairo_t *cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  for (int64_t y = 0; y < H; y++)
    for (int64_t x = 0; x < W; x++) {
      double r = 1, g = 1, b = 1;
      if (iv) r = iv[y * W + x], g = iv[H * W + y * W + x], b = iv[2 * H * W + y * W + x];
      double v = (hv[(y / (H / h)) * w + x / (W / w)] - hmin) / (hmax - hmin), hr, hg, hb;
      heat_colour(v, &hr, &hg, &hb);
      double a = alpha * (isfinite(v) ? fmin(fmax(v, 0), 1) : 0);
      cairo_set_source_rgb(cr, r * (1 - a) + hr * a, g * (1 - a) + hg * a, b * (1 - a) + hb * a);
      cairo_rectangle(cr, x * scale, top + y * scale, scale, scale);
      cairo_fill(cr);
    }
  if (title) {
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    char line[256];
    const char *p = title;
    for (int i = 0; i < lines; i++) { /* one line per '\n'-separated part */
      size_t n = strcspn(p, "\n");
      snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line - 1 ? n : sizeof line - 1), p);
      text_at(cr, 6, 18 + 18 * i, line, 0, 13);
      p += n + (p[n] == '\n');
    }
  }
  cairo_destroy(cr);
  return write_png(L, surf, path, "plot_heatmap");
}

void lember_open_plot(lua_State *L, int module) {
  static const luaL_Reg fns[] = {{"plot_lines", l_plot_lines}, {"plot_heatmap", l_plot_heatmap}, {NULL, NULL}};
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
