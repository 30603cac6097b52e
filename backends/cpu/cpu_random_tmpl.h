/*
** cpu_random_tmpl.h -- uniform and normal draws for one float type;
** included by cpu_random.c with T (float or double) and SUF set. Values
** are computed in double and cast to T, so float and double see the same
** stream. Dropout is cpu_dropout_tmpl.h.
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

#undef FN
