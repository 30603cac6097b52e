/*
** cuda_plan.c -- launch and layout arithmetic of the CUDA backend (plain C,
** no CUDA): see cuda_plan.h. Tested by test_cuda_plan.c.
*/
#include "cuda_plan.h"

#include <string.h>

int64_t emc_coalesce(int ndim, const int64_t *shape, int nops,
                     const int64_t *const *strides, emc_layout *out) {
  memset(out, 0, sizeof *out);
  out->nops = nops;
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) numel *= shape[d];
  if (numel == 0) {
    out->ndim = 1;
    out->shape[0] = 0;
    return 0;
  }
  /* Walk from the innermost dim outwards. The current merged dim is
  ** (shape[k], stride[.][k]); dim d joins it when, for every operand, one
  ** step along d equals a full sweep of the merged dim. */
  int k = -1;
  int64_t sh[EMC_MAX_DIMS];
  int64_t st[EMC_MAX_OPS][EMC_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    if (shape[d] == 1) continue; /* visits one element: no stride matters */
    bool merge = k >= 0;
    for (int op = 0; merge && op < nops; op++)
      if (strides[op][d] != st[op][k] * sh[k]) merge = false;
    if (merge) {
      sh[k] *= shape[d];
    } else {
      k++;
      sh[k] = shape[d];
      for (int op = 0; op < nops; op++) st[op][k] = strides[op][d];
    }
  }
  if (k < 0) { /* every dim was 1: one element */
    out->ndim = 1;
    out->shape[0] = 1;
    return 1;
  }
  /* sh/st hold innermost first; the layout is outermost first. */
  out->ndim = k + 1;
  for (int i = 0; i <= k; i++) {
    out->shape[i] = sh[k - i];
    for (int op = 0; op < nops; op++) out->stride[op][i] = st[op][k - i];
  }
  return numel;
}

bool emc_layout_is_linear(const emc_layout *l) {
  if (l->ndim != 1) return false;
  for (int op = 0; op < l->nops; op++)
    if (l->stride[op][0] != 1 && l->stride[op][0] != 0) return false;
  return true;
}

int64_t emc_blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return b > EMC_MAX_BLOCKS ? EMC_MAX_BLOCKS : b;
}

emc_rows_plan emc_plan_rows(int64_t rows, int64_t n) {
  emc_rows_plan p;
  if (n <= 1024) {
    /* A warp per row: each lane holds at most 32 elements' worth of work
    ** and the reductions are shuffles only. */
    p.threads_per_row = 32;
    p.rows_per_block = EMC_THREADS / 32;
  } else {
    p.threads_per_row = n >= 8192 ? EMC_ROW_MAX_THREADS : 256;
    p.rows_per_block = 1;
  }
  int64_t b = (rows + p.rows_per_block - 1) / p.rows_per_block;
  if (b < 1) b = 1;
  p.blocks = b > EMC_MAX_BLOCKS ? EMC_MAX_BLOCKS : b;
  return p;
}

void emc_plan_reduce(int64_t outer, int64_t n, int64_t inner, int sm_count,
                     emc_reduce_plan *p) {
  /* bx: enough threads along inner for coalesced reads, at most a warp. */
  int bx = 1;
  while (bx < 32 && bx < inner) bx *= 2;
  p->bx = bx;
  p->by = EMC_THREADS / bx;
  p->iblocks = (inner + bx - 1) / bx;
  if (p->iblocks < 1) p->iblocks = 1;
  int64_t base = outer * p->iblocks;
  if (base < 1) base = 1;
  /* Split n only when the unsplit grid would leave SMs idle and each piece
  ** still gives every thread along n a few elements. */
  int64_t nsplit = 1;
  int64_t want = 4 * (int64_t)sm_count;
  int64_t min_chunk = (int64_t)p->by * 8;
  if (sm_count > 0 && base < want && n > 2 * min_chunk) {
    nsplit = (want + base - 1) / base;
    int64_t most = n / min_chunk;
    if (nsplit > most) nsplit = most;
    if (nsplit < 1) nsplit = 1;
  }
  p->chunk = n > 0 ? (n + nsplit - 1) / nsplit : 0;
  p->nsplit = p->chunk > 0 ? (n + p->chunk - 1) / p->chunk : 1; /* no empty piece */
  p->items = base * p->nsplit;
  p->grid = p->items > EMC_MAX_BLOCKS ? EMC_MAX_BLOCKS : p->items;
}

int64_t emc_attn_tiles(int64_t L, int64_t tile) { return (L + tile - 1) / tile; }
