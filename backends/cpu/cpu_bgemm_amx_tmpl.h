/*
** cpu_bgemm_amx_tmpl.h -- the AMX driver of cpu_bgemm_amx.c, included once
** per way of running the tile instructions: BGA_FN is the function's name,
** BGA_ATTR its attributes, BGA_STATE what it declares first, and
** BGA_CONFIG, BGA_RELEASE, BGA_ZERO, BGA_LOAD, BGA_DP, BGA_STORE the
** instructions (tile numbers are literals: the real ones take immediates).
**
** Tiles: 0-3 hold C (16 rows x 16 columns each: the block's 64 columns),
** 4 the A tile (16 rows x 16 pairs), 5-7 B tiles (16 pairs x 16 columns),
** all configured whole; the packings' zeros fill the edges.
*/

/* C = alpha * A B + beta * C for rows < mc and columns < nc, with A
** packed by bga_pack_a (mp x khp pairs) and B by cpu_bgemm.c's bg_pack_b
** (khp pair rows of npad columns, zero past its k). */
BGA_ATTR static void BGA_FN(const uint32_t *Ap, int64_t mp, int64_t khp, const uint16_t *Bp,
                            int64_t nc, float alpha, float beta, float *C, int64_t ldc, int64_t mc) {
  BGA_STATE
  const int64_t npad = (nc + 15) / 16 * 16, nb = npad / 16;
  const int64_t as = khp * 4, bs = npad * 4; /* bytes from one tile row to the next */
  float ct[16][64] __attribute__((aligned(64)));
  __asm__ volatile("" ::: "memory"); /* the packings are in memory before the tiles read them */
  BGA_CONFIG();
  for (int64_t ib = 0; ib < mp / 16; ib++) {
    BGA_ZERO(0);
    BGA_ZERO(1);
    BGA_ZERO(2);
    BGA_ZERO(3);
    for (int64_t kb = 0; kb < khp / 16; kb++) {
      const uint16_t *b = Bp + kb * 16 * npad * 2;
      BGA_LOAD(4, Ap + ib * 16 * khp + kb * 16, as);
      BGA_LOAD(5, b, bs);
      BGA_DP(0, 4, 5);
      if (nb > 1) {
        BGA_LOAD(6, b + 32, bs);
        BGA_DP(1, 4, 6);
      }
      if (nb > 2) {
        BGA_LOAD(7, b + 64, bs);
        BGA_DP(2, 4, 7);
      }
      if (nb > 3) {
        BGA_LOAD(5, b + 96, bs);
        BGA_DP(3, 4, 5);
      }
    }
    BGA_STORE(0, &ct[0][0], (int64_t)sizeof ct[0]);
    if (nb > 1) BGA_STORE(1, &ct[0][16], (int64_t)sizeof ct[0]);
    if (nb > 2) BGA_STORE(2, &ct[0][32], (int64_t)sizeof ct[0]);
    if (nb > 3) BGA_STORE(3, &ct[0][48], (int64_t)sizeof ct[0]);
    __asm__ volatile("" ::: "memory");
    const int64_t rows = mc - ib * 16 < 16 ? mc - ib * 16 : 16;
    for (int64_t r = 0; r < rows; r++) {
      float *c = C + (ib * 16 + r) * ldc;
      for (int64_t j = 0; j < nc; j++) c[j] = beta != 0 ? alpha * ct[r][j] + beta * c[j] : alpha * ct[r][j];
    }
  }
  BGA_RELEASE();
}

#undef BGA_FN
#undef BGA_ATTR
#undef BGA_STATE
#undef BGA_CONFIG
#undef BGA_RELEASE
#undef BGA_ZERO
#undef BGA_LOAD
#undef BGA_DP
#undef BGA_STORE
