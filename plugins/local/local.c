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
** The variant only declares this block mask (ember_attention.h): the
** backend's fused kernel skips the (query tile, key tile) pairs it hides,
** in forward and backward, so time is O(L * w) and memory O(L); where the
** kernel does not reach, the core composes core ops with a dense [Lq, Lk]
** pattern mask (O(L^2)).
*/
#include "ember_attention.h"

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

/* The options of the other mode, set by the user, would be ignored: refused. */
static em_status local_check(const em_attn_options *o, const em_attn_dims *dims) {
  (void)dims;
  static const char *const SLIDING[] = {"window_left", "window_right", NULL};
  static const char *const BLOCK[] = {"block_size", "local_blocks", "global_blocks", "global_tokens", NULL};
  if (strcmp(em_attn_opt_str(o, "mode"), "block") == 0)
    return em_attn_unused_options(o, SLIDING, "with mode=\"block\" (it is for mode=\"sliding\")");
  return em_attn_unused_options(o, BLOCK, "with mode=\"sliding\", the default (it is for mode=\"block\")");
}

static em_status local_declare(const em_attn_options *o, const em_attn_dims *dims, em_attn_decl *d) {
  (void)dims;
  em_attn_block_mask *m = &d->mask;
  if (strcmp(em_attn_opt_str(o, "mode"), "block") == 0) {
    m->kind = EM_ATTN_MASK_BLOCKS;
    m->block = em_attn_opt_int(o, "block_size");
    m->local = em_attn_opt_int(o, "local_blocks");
    int64_t gb = em_attn_opt_int(o, "global_blocks"), gt = em_attn_opt_int(o, "global_tokens");
    /* global_blocks * block_size may pass int64 for absurd options: anything past 2^40 is "all" */
    int64_t gpos = gb > 0 && m->block > (INT64_C(1) << 40) / gb ? (INT64_C(1) << 40) : gb * m->block;
    m->global = gpos > gt ? gpos : gt;
  } else {
    m->kind = EM_ATTN_MASK_WINDOW;
    m->left = em_attn_opt_int(o, "window_left");
    m->right = em_attn_opt_int(o, "window_right");
  }
  return EM_OK;
}

static const em_attention_variant LOCAL = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "local",
  .version = "2.0",
  .description = "sliding-window and block-sparse (global tokens/blocks) attention, O(L*w)",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .check = local_check,
  .declare = local_declare,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "local", "2.0",
  "local attention: sliding window (left/right) or block-sparse with global tokens/blocks"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &LOCAL;
}
