/*
** cpu_random_tmpl.h -- draws and dropout for one float type; included by
** cpu_random.c with T (float or double) and SUF set. Values are computed
** in double and cast to T, so float and double see the same stream.
*/

#define FN(name) CPU_CAT(name, SUF)

static void FN(draw_uniform)(T *out, int64_t n, double lo, double span, uint64_t seed,
                             uint64_t offset) {
  CPU_FOR(n > RAND_PAR_MIN, i, n,
    out[i] = (T)(lo + span * em_philox_uniform_at(seed, offset, (uint64_t)i)););
}

static void FN(draw_normal)(T *out, int64_t n, double mean, double std, uint64_t seed,
                            uint64_t offset) {
  CPU_FOR(n > RAND_PAR_MIN, i, n,
    out[i] = (T)(mean + std * em_philox_normal_at(seed, offset, (uint64_t)i)););
}

/* Elements [lo, lo + len) of dropout (a vector clone: CPU_FOR_RANGES). */
CPU_VECTOR_CLONES static void FN(dropout_block)(T *out, T *mask, const T *x, int64_t lo,
                                                int64_t len, T scale, uint64_t thr, uint64_t seed,
                                                uint64_t offset) {
  uint8_t keep[DROP_BLOCK];
  cpu_dropout_keep(keep, seed, offset, (uint64_t)lo, len, thr);
  if (mask)
    for (int64_t j = 0; j < len; j++) mask[lo + j] = keep[j] ? scale : (T)0;
  if (out)
    for (int64_t j = 0; j < len; j++) out[lo + j] = keep[j] ? x[lo + j] * scale : (T)0;
}

/* out = x * mask with mask = keep ? 1/(1-p) : 0. A dropped element is an
** exact 0 even where x is inf or NaN, as PyTorch. */
static void FN(dropout)(T *out, T *mask, const T *x, int64_t n, double p, uint64_t seed,
                        uint64_t offset) {
  const T scale = (T)(1.0 / (1.0 - p));
  const uint64_t thr = em_philox_keep_threshold(p);
  const int64_t nblk = (n + DROP_BLOCK - 1) / DROP_BLOCK;
  CPU_FOR(n > RAND_PAR_MIN, blk, nblk,
    const int64_t lo = blk * DROP_BLOCK;
    FN(dropout_block)(out, mask, x, lo, n - lo < DROP_BLOCK ? n - lo : DROP_BLOCK, scale, thr, seed,
                      offset););
}

#undef FN
