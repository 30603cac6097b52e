/*
** cuda_plan.h -- the host-side arithmetic of the CUDA backend, in plain C.
**
** Everything here is decided on the host before a launch (how a broadcast
** iteration space collapses, how many blocks, how a reduction is split,
** which attention tiles are skipped) or is a rule that kernels and host
** code must agree on (causal visibility, the online-softmax rescale, the
** dropout draw of an attention probability). Keeping it in C means it is
** compiled into test_cuda_plan and checked on a machine without a GPU; the
** kernels include this header and call the very same functions.
*/
#ifndef EMBER_CUDA_PLAN_H
#define EMBER_CUDA_PLAN_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "ember_expr.h" /* EM_XTILE_* */
#include "ember_philox.h"

/* Functions both the host and the kernels call. */
#if defined(__CUDACC__)
#define EMC_HOSTDEV __host__ __device__ __forceinline__
#else
#define EMC_HOSTDEV static inline
#endif

#define EMC_MAX_DIMS 8 /* == EM_MAX_DIMS */
#define EMC_MAX_OPS 4  /* operands of one elementwise kernel (where: out, cond, a, b) */

/* Threads of a 1-d launch, and the most blocks we launch (kernels loop
** over the rest with a grid stride). */
#define EMC_THREADS 256
/* The largest block of a row kernel (emc_plan_rows: a whole block per
** long row). A launch of that many threads needs at most 64 registers a
** thread (65536 per SM), so row kernels declare __launch_bounds__ of it:
** without, a kernel past 64 registers fails every launch with "too many
** resources requested for launch" -- on a GPU only. */
#define EMC_ROW_MAX_THREADS 1024
#define EMC_MAX_BLOCKS ((int64_t)1 << 20)

/* Attention tiles: queries per block, keys per tile, and the largest head
** dimension of the fused kernels (as FlashAttention). */
#define EMC_ATT_BQ 64
#define EMC_ATT_BK 64
#define EMC_ATT_MAX_D 256

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Broadcast layouts                                                   */
/* ------------------------------------------------------------------ */

/* The iteration space of an elementwise kernel: one shape and, for each
** operand, strides in elements (0 on broadcast dims). */
typedef struct emc_layout {
  int ndim;                               /* >= 1 after coalescing */
  int nops;
  int64_t shape[EMC_MAX_DIMS];
  int64_t stride[EMC_MAX_OPS][EMC_MAX_DIMS];
} emc_layout;

/* Collapses (shape, strides of nops operands) into the fewest dims that
** visit the same elements in the same order: size-1 dims are dropped and
** neighbouring dims merge when every operand steps through them as one.
** Returns the number of elements (0 leaves *out with ndim 1, shape 0). */
int64_t emc_coalesce(int ndim, const int64_t *shape, int nops,
                     const int64_t *const *strides, emc_layout *out);

/* True when every operand of the layout is either contiguous (one dim of
** stride 1) or a single broadcast value (stride 0), so a kernel can index
** with i * stride. */
bool emc_layout_is_linear(const emc_layout *l);

/* Offset in elements of element `i` (row-major over l->shape) for operand op. */
EMC_HOSTDEV int64_t emc_layout_offset(const emc_layout *l, int op, int64_t i) {
  int64_t off = 0;
  for (int d = l->ndim - 1; d >= 0; d--) {
    int64_t s = l->shape[d];
    off += (i % s) * l->stride[op][d];
    i /= s;
  }
  return off;
}

/* ------------------------------------------------------------------ */
/* Launch shapes                                                       */
/* ------------------------------------------------------------------ */

/* Blocks for n elements with `threads` per block (grid-stride beyond
** EMC_MAX_BLOCKS); at least 1. */
int64_t emc_blocks_for(int64_t n, int threads);

/* Row kernels (softmax, layer_norm, cross_entropy): contiguous [rows, n].
** Short rows get one warp each, several rows to a block; long rows get a
** whole block. threads_per_row * rows_per_block is the block size. */
typedef struct emc_rows_plan {
  int threads_per_row;   /* 32 (a warp) or a multiple of 32 up to 1024 */
  int rows_per_block;    /* 1 when threads_per_row > 32 */
  int64_t blocks;        /* grid, rows beyond it are looped over */
} emc_rows_plan;
emc_rows_plan emc_plan_rows(int64_t rows, int64_t n);

/* A reduction of contiguous [outer, n, inner] into [outer, inner].
** A block is bx threads along inner (coalesced reads) by by threads along
** n. When outer*inner is too small to fill the GPU, n is cut into nsplit
** pieces of `chunk` reduced by separate blocks into partial states, and a
** second pass (planned with sm_count 0, so never split) combines them. */
typedef struct emc_reduce_plan {
  int bx, by;            /* bx * by == EMC_THREADS */
  int64_t iblocks;       /* ceil(inner / bx) */
  int64_t nsplit;        /* pieces of n (1: one pass) */
  int64_t chunk;         /* elements of n per piece */
  int64_t items;         /* outer * iblocks * nsplit work items */
  int64_t grid;          /* blocks launched; they loop over the items */
} emc_reduce_plan;
void emc_plan_reduce(int64_t outer, int64_t n, int64_t inner, int sm_count,
                     emc_reduce_plan *p);

/* Work item w of a reduce plan: which outer row, which block of inner and
** which piece of n. */
EMC_HOSTDEV void emc_reduce_item(const emc_reduce_plan *p, int64_t w, int64_t *o,
                                 int64_t *ib, int64_t *s) {
  *s = w % p->nsplit;
  w /= p->nsplit;
  *ib = w % p->iblocks;
  *o = w / p->iblocks;
}

/* ------------------------------------------------------------------ */
/* Attention: masking rules and tile ranges                            */
/* ------------------------------------------------------------------ */

/* Causal, bottom-right aligned (KV-cached decoding): key j is visible to
** query i iff j <= i + (Lk - Lq). */
EMC_HOSTDEV bool emc_causal_visible(int64_t i, int64_t j, int64_t Lq, int64_t Lk) {
  return j <= i + (Lk - Lq);
}

/* Keys [0, end) hold every key visible to some query of [q0, q0 + bq):
** the forward stops its key loop there (tiles past it are fully masked). */
EMC_HOSTDEV int64_t emc_causal_key_end(int64_t q0, int64_t bq, int64_t Lq, int64_t Lk) {
  int64_t qlast = (q0 + bq < Lq ? q0 + bq : Lq) - 1;
  int64_t end = qlast + (Lk - Lq) + 1;
  return end < 0 ? 0 : (end > Lk ? Lk : end);
}

/* The first query that sees key k0 (Lq when none does): the backward,
** which walks query tiles for a fixed key tile, starts there. */
EMC_HOSTDEV int64_t emc_causal_query_begin(int64_t k0, int64_t Lq, int64_t Lk) {
  int64_t q = k0 - (Lk - Lq);
  return q < 0 ? 0 : (q > Lq ? Lq : q);
}

/* Online softmax. With running max m_old and the max m_new after a new
** tile, old sums and outputs are multiplied by this factor. A row that has
** seen only masked scores keeps m == -inf; its accumulators are zero, and
** the factor must not be exp(-inf - -inf) = NaN. */
EMC_HOSTDEV float emc_online_rescale(float m_old, float m_new) {
  return m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
}
/* What is subtracted from a score before exp: the running max, or 0 for a
** row with nothing visible yet (every exp is then exp(-inf) = 0). */
EMC_HOSTDEV float emc_online_base(float m) { return m == -INFINITY ? 0.0f : m; }

/* The logsumexp saved for the backward. A fully masked row (l == 0) gets
** output 0 rather than 0/0, and lse = +inf, so that exp(s - lse) is 0 for
** every score in the backward (as the CPU backend's kernel does). */
EMC_HOSTDEV float emc_attn_lse(float m, float l) {
  return l > 0.0f ? m + logf(l) : INFINITY;
}

/* Attention dropout: probability (b*H + h, i, j) of [B,H,Lq,Lk] is element
** ((bh * Lq) + i) * Lk + j of the Philox stream (seed, offset), kept by the
** dropout rule of ember_philox.h (em_philox_keep). */
EMC_HOSTDEV bool emc_attn_keep(uint64_t seed, uint64_t offset, int64_t bh, int64_t i,
                               int64_t j, int64_t Lq, int64_t Lk, double p) {
  uint64_t e = ((uint64_t)bh * (uint64_t)Lq + (uint64_t)i) * (uint64_t)Lk + (uint64_t)j;
  return em_philox_keep(seed, offset, e, em_philox_keep_threshold(p));
}

/* The class (EM_XTILE_*) of the attention tile of queries [q0, q1] and
** keys [k0, k1] (inclusive) under a mask program's block map m of one
** (batch, head): cell (iq, jk), at m[iq * nk + jk], covers queries
** [iq*g, iq*g + g) and keys [jk*g, jk*g + g) (em_attention_args block_map,
** map_grain, map_nk). The tile is empty when every cell it touches is,
** full when every one is, else partial: any grain works, since a cell
** that is empty or full is so for the part of it inside the tile. */
EMC_HOSTDEV int emc_attn_map_tile(const uint8_t *m, int64_t nk, int64_t g, int64_t q0, int64_t q1,
                                  int64_t k0, int64_t k1) {
  bool empty = true, full = true;
  for (int64_t iq = q0 / g; iq <= q1 / g; iq++)
    for (int64_t jk = k0 / g; jk <= k1 / g; jk++) {
      const uint8_t v = m[iq * nk + jk];
      empty = empty && v == EM_XTILE_EMPTY, full = full && v == EM_XTILE_FULL;
      if (!empty && !full) return EM_XTILE_PARTIAL;
    }
  return empty ? EM_XTILE_EMPTY : full ? EM_XTILE_FULL : EM_XTILE_PARTIAL;
}

/* Blocks of the fused attention: one per (b*H + h, query tile) forward,
** one per (b*H + h, key tile) backward. */
int64_t emc_attn_tiles(int64_t L, int64_t tile);

#ifdef __cplusplus
}
#endif
#endif
