/*
** ember_blockmask.h -- the declared block mask (a sliding window, local
** blocks, global tokens) and its element rules: which keys a query
** position sees, and how a tile of positions x keys is classified. One
** definition for the core's composition (attention_compose.c), the CPU
** kernel (cpu_attention.c) and the CUDA kernel (cuda_attention.cuh, built
** by nvcc too: EM_HOSTDEV). ember_attention.h includes it.
*/
#ifndef EMBER_BLOCKMASK_H
#define EMBER_BLOCKMASK_H

#include <stdbool.h>
#include <stdint.h>

#include "ember_expr.h"
#include "ember_hostdev.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which keys a query may see, on top of causal and the masks:
**   WINDOW: p - left <= j <= p + right;
**   BLOCKS: key block j/block within +-local of query block p/block;
** and with global > 0, positions [0, global) see and are seen by all.
** Kernels classify each (query tile, key tile) as empty (skipped in forward
** and backward), full, or partial (the element rule applied). */
typedef enum em_attn_mask_kind {
  EM_ATTN_MASK_NONE = 0,
  EM_ATTN_MASK_WINDOW,
  EM_ATTN_MASK_BLOCKS
} em_attn_mask_kind;

typedef struct em_attn_block_mask {
  em_attn_mask_kind kind;
  int64_t left, right;   /* WINDOW, >= 0 */
  int64_t block, local;  /* BLOCKS: block > 0, local >= 0 */
  int64_t global;        /* >= 0 */
} em_attn_block_mask;

/* Keys [lo, hi] (inclusive) of the window/block band of position p (C's
** division, as everywhere the rule is applied). Both ends grow with p,
** which is what lets a tile be judged by its corner rows. */
EM_HOSTDEV void em_attn_band(const em_attn_block_mask *m, int64_t p, int64_t *lo, int64_t *hi) {
  if (m->kind == EM_ATTN_MASK_WINDOW) {
    *lo = p - m->left, *hi = p + m->right;
  } else {
    const int64_t b = p / m->block;
    *lo = (b - m->local) * m->block, *hi = (b + m->local + 1) * m->block - 1;
  }
}

/* Does the mask let the query at key-axis position p see key j? */
EM_HOSTDEV bool em_attn_band_allows(const em_attn_block_mask *m, int64_t p, int64_t j) {
  if (m->kind == EM_ATTN_MASK_NONE) return true;
  if (m->global > 0 && (p < m->global || j < m->global)) return true;
  int64_t lo, hi;
  em_attn_band(m, p, &lo, &hi);
  return j >= lo && j <= hi;
}

/* How the mask treats positions [p0, p1] x keys [j0, j1]: EM_XTILE_EMPTY
** (no key visible: the kernels skip the tile in forward and backward),
** EM_XTILE_FULL (every key) or EM_XTILE_PARTIAL (the element rule). */
EM_HOSTDEV int em_attn_band_tile(const em_attn_block_mask *m, int64_t p0, int64_t p1, int64_t j0, int64_t j1) {
  if (m->kind == EM_ATTN_MASK_NONE) return EM_XTILE_FULL;
  bool some_global = false;
  if (m->global > 0) {
    if (p1 < m->global || j1 < m->global) return EM_XTILE_FULL;
    some_global = p0 < m->global || j0 < m->global;
  }
  int64_t lo0, hi0, lo1, hi1;
  em_attn_band(m, p0, &lo0, &hi0);
  em_attn_band(m, p1, &lo1, &hi1);
  if (j1 < lo0 || j0 > hi1) return some_global ? EM_XTILE_PARTIAL : EM_XTILE_EMPTY;
  if (j0 >= lo1 && j1 <= hi0) return EM_XTILE_FULL;
  return EM_XTILE_PARTIAL;
}

#ifdef __cplusplus
}
#endif
#endif
