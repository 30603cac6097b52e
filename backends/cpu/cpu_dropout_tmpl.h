/*
** cpu_dropout_tmpl.h -- dropout for one storage type; included by
** cpu_random.c with T (the element type), A (the type the product is
** taken in), LD(v) (a T as an A), ST(a) (an A rounded to a T) and SUF.
** bfloat16 multiplies in float32 and rounds once, which is what widening
** to float32, a float32 dropout and narrowing gave, without those passes.
*/

#define FN(name) CPU_CAT(name, SUF)

/* Elements [lo, lo + len) of dropout: a vector clone called from the
** parallel loop (CPU_FOR_RANGES says why). */
CPU_VECTOR_CLONES static void FN(dropout_block)(T *out, T *mask, const T *x, int64_t lo,
                                                int64_t len, A scale, uint64_t thr, uint64_t seed,
                                                uint64_t offset) {
  uint8_t keep[DROP_BLOCK];
  cpu_dropout_keep(keep, seed, offset, (uint64_t)lo, len, thr);
  const T kept = ST(scale), zero = ST((A)0);
  if (mask)
    for (int64_t j = 0; j < len; j++) mask[lo + j] = keep[j] ? kept : zero;
  if (out)
    for (int64_t j = 0; j < len; j++) {
      const T y = ST(LD(x[lo + j]) * scale); /* taken first, then selected: the loop vectorises */
      out[lo + j] = keep[j] ? y : zero;
    }
}

/* out = x * mask with mask = keep ? 1/(1-p) : 0. A dropped element is an
** exact 0 even where x is inf or NaN, as PyTorch. */
static void FN(dropout)(T *out, T *mask, const T *x, int64_t n, double p, uint64_t seed,
                        uint64_t offset) {
  const A scale = (A)(1.0 / (1.0 - p));
  const uint64_t thr = em_philox_keep_threshold(p);
  const int64_t nblk = (n + DROP_BLOCK - 1) / DROP_BLOCK;
  CPU_FOR(n > RAND_PAR_MIN, blk, nblk,
    const int64_t lo = blk * DROP_BLOCK;
    FN(dropout_block)(out, mask, x, lo, n - lo < DROP_BLOCK ? n - lo : DROP_BLOCK, scale, thr, seed,
                      offset););
}

#undef FN
