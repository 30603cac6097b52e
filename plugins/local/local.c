/*
** local.c -- local attention: a sliding window, or block-sparse patterns
** with global tokens (Longformer) and global blocks (BigBird, without its
** random blocks).
**
** Positions. Query i sits at key position p = i + Lk - Lq (bottom-right,
** as causal), so p = i in self-attention.
**
** mode = "sliding": query p sees keys j with p - window_left <= j <=
**   p + window_right. The query's own position is ALWAYS included (a window
**   of 0/0 is "attend to self only"). With causal=true the right side is
**   cut at p, whatever window_right says.
** mode = "block": keys and queries are cut into blocks of block_size
**   positions. Query block b sees key blocks b - local_blocks .. b +
**   local_blocks; the first global_blocks blocks and the first
**   global_tokens positions are global: every query sees them, and global
**   queries see every key.
**
** On host memory this runs the row-range kernel (plugins/common): exact
** softmax over each query's key ranges, O(L * w) time and O(L) memory
** besides the [B,H,Lq,Lk] weights when they are asked for. Elsewhere it
** composes core ops with a dense [Lq,Lk] pattern mask (O(L^2)).
*/
#include "attn_common.h"

#include <stdlib.h>
#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "mode", .type = EM_ATTN_OPT_STRING, .default_str = "sliding", .choices = "sliding|block",
   .help = "sliding window, or block-sparse with global tokens/blocks"},
  {.name = "window_left", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 0,
   .max = 1e12, .help = "sliding: keys this many positions before the query (self always included)"},
  {.name = "window_right", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 0,
   .max = 1e12, .help = "sliding: keys this many positions after the query (cut at the query when causal)"},
  {.name = "block_size", .type = EM_ATTN_OPT_INT, .default_num = 64, .bounded = true, .min = 1,
   .max = 1e12, .help = "block: positions per block"},
  {.name = "local_blocks", .type = EM_ATTN_OPT_INT, .default_num = 1, .bounded = true, .min = 0,
   .max = 1e12, .help = "block: neighbouring key blocks seen on each side of the query's block"},
  {.name = "global_blocks", .type = EM_ATTN_OPT_INT, .default_num = 0, .bounded = true, .min = 0,
   .max = 1e12, .help = "block: leading blocks that see and are seen by everything (BigBird)"},
  {.name = "global_tokens", .type = EM_ATTN_OPT_INT, .default_num = 0, .bounded = true, .min = 0,
   .max = 1e12, .help = "block: leading positions that see and are seen by everything (Longformer)"},
};

/* Everything the range function needs (copied into the saved state). */
typedef struct pattern {
  bool block;
  int64_t left, right, bs, local, global; /* global: positions [0, global) */
} pattern;

static pattern pattern_of(const em_attn_options *o) {
  pattern p;
  p.block = strcmp(em_attn_opt_str(o, "mode"), "block") == 0;
  p.left = em_attn_opt_int(o, "window_left");
  p.right = em_attn_opt_int(o, "window_right");
  p.bs = em_attn_opt_int(o, "block_size");
  p.local = em_attn_opt_int(o, "local_blocks");
  int64_t gb = em_attn_opt_int(o, "global_blocks") * p.bs, gt = em_attn_opt_int(o, "global_tokens");
  p.global = gb > gt ? gb : gt;
  return p;
}

static int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

static int ranges(const void *ud, const em_attn_call *c, int64_t i, int64_t *lo, int64_t *hi) {
  const pattern *p = ud;
  int64_t pos = ac_qpos(c, i), Lk = c->Lk, a, b;
  if (!p->block) {
    a = clamp64(pos - p->left, 0, Lk);
    b = clamp64(pos + p->right + 1, 0, Lk);
    if (a >= b) return 0;
    lo[0] = a, hi[0] = b;
    return 1;
  }
  if (pos < p->global) { /* a global query sees everything */
    lo[0] = 0, hi[0] = Lk;
    return 1;
  }
  int64_t blk = pos / p->bs;
  int64_t first = blk - p->local, last = blk + p->local; /* may overflow for huge local: clamp */
  if (p->local > Lk) first = 0, last = Lk;
  a = clamp64(first < 0 ? 0 : first * p->bs, 0, Lk);
  b = clamp64(last >= Lk ? Lk : (last + 1) * p->bs, 0, Lk);
  int64_t g = clamp64(p->global, 0, Lk);
  int n = 0;
  if (g > 0 && g >= a) { /* the global prefix touches the local range: merge */
    lo[0] = 0, hi[0] = b > g ? b : g;
    return 1;
  }
  if (g > 0) lo[n] = 0, hi[n++] = g;
  if (a < b) lo[n] = a, hi[n++] = b;
  return n;
}

static bool local_can_forward(const em_attn_call *c) { return ac_host(c); }

static em_status local_forward(const em_attn_call *c, em_tensor **out, em_tensor **weights, void **saved) {
  pattern p = pattern_of(c->options);
  return ra_run_forward(c, ranges, &p, sizeof p, out, weights, saved);
}

/* Non-host: the pattern as a dense bool [Lq, Lk] mask, then core ops. */
static em_status local_compose(const em_attn_call *c, em_tensor **out, em_tensor **weights) {
  pattern p = pattern_of(c->options);
  uint8_t *m = calloc((size_t)(c->Lq * c->Lk), 1);
  if (!m) return em_error(EM_ERR_OOM, "out of memory for a [%lld, %lld] pattern", (long long)c->Lq, (long long)c->Lk);
  int64_t lo[RA_MAX_RANGES], hi[RA_MAX_RANGES];
  for (int64_t i = 0; i < c->Lq; i++) {
    int n = ranges(&p, c, i, lo, hi);
    for (int r = 0; r < n; r++) memset(m + i * c->Lk + lo[r], 1, (size_t)(hi[r] - lo[r]));
  }
  int64_t shape[2] = {c->Lq, c->Lk};
  em_tensor *allowed = NULL;
  em_status s = em_from_host(&allowed, 2, shape, EM_BOOL, m, c->q->device);
  free(m);
  if (s == EM_OK) s = ac_dense(c, NULL, allowed, out, weights);
  em_release(allowed);
  return s;
}

static const em_attention_variant LOCAL = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "local",
  .version = "1.0",
  .description = "sliding-window and block-sparse (global tokens/blocks) attention, O(L*w)",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .forward = local_forward,
  .backward = ra_run_backward,
  .free_saved = ra_free_saved,
  .compose = local_compose,
  .can_forward = local_can_forward,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "local", "1.0",
  "local attention: sliding window (left/right) or block-sparse with global tokens/blocks"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &LOCAL;
}
