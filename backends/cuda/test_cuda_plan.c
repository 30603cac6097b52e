/*
** test_cuda_plan.c -- host tests of the CUDA backend's plain-C logic:
** layout coalescing, launch and reduction plans, the attention tile and
** mask rules (the causal tile bounds, and the class of a tile from a mask
** program's block map; including a tiled flash-attention forward and
** backward written with the same helpers as the kernels, against dense
** attention), and the caching allocator with malloc standing in for
** cudaMalloc. Prints "N passed, M failed" and exits non-zero on a failure.
**
** The kernels no longer take a declared block mask (em_attention_args ABI
** 6: the core lowers windows, blocks and global tokens to a mask program
** and its block map), so the declared band rules are not tested here
** any more; test_map_tile checks the same kinds of mask
** through the block map, as the kernels now skip tiles.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_cache.h"
#include "cuda_plan.h"

static int passed, failed;

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (cond) {                                           \
      passed++;                                           \
    } else {                                              \
      failed++;                                           \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);         \
      printf(__VA_ARGS__);                                \
      printf("\n");                                       \
    }                                                     \
  } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static double rndu(void) { return (rnd() & 0xffffff) / 16777216.0; }

/* ------------------------------------------------------------------ */
/* layouts                                                             */
/* ------------------------------------------------------------------ */

/* Offset of flat index i in the original (uncoalesced) view. */
static int64_t naive_offset(int ndim, const int64_t *shape, const int64_t *stride, int64_t i) {
  int64_t off = 0;
  for (int d = ndim - 1; d >= 0; d--) {
    off += (i % shape[d]) * stride[d];
    i /= shape[d];
  }
  return off;
}

static void test_coalesce(void) {
  int bad = 0, cases = 0;
  for (int t = 0; t < 3000; t++) {
    int ndim = (int)(rnd() % (EMC_MAX_DIMS + 1));
    int nops = 1 + (int)(rnd() % EMC_MAX_OPS);
    int64_t shape[EMC_MAX_DIMS], st[EMC_MAX_OPS][EMC_MAX_DIMS];
    const int64_t *sp[EMC_MAX_OPS];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
      shape[d] = 1 + (int64_t)(rnd() % 4);
      if (rnd() % 10 == 0) shape[d] = 1;
      numel *= shape[d];
    }
    for (int op = 0; op < nops; op++) {
      /* contiguous, then perturbed: broadcast dims, a transpose, a step */
      int64_t s = 1;
      for (int d = ndim - 1; d >= 0; d--) {
        st[op][d] = s;
        s *= shape[d];
      }
      int kind = (int)(rnd() % 4);
      if (kind == 1)
        for (int d = 0; d < ndim; d++)
          if (rnd() % 3 == 0) st[op][d] = 0;
      if (kind == 2 && ndim >= 2) {
        int a = (int)(rnd() % ndim), b = (int)(rnd() % ndim);
        int64_t tmp = st[op][a];
        st[op][a] = st[op][b];
        st[op][b] = tmp;
      }
      if (kind == 3 && ndim >= 1) st[op][rnd() % ndim] *= 2;
      sp[op] = st[op];
    }
    emc_layout L;
    int64_t n = emc_coalesce(ndim, shape, nops, sp, &L);
    cases++;
    if (n != numel || L.ndim < 1 || L.ndim > (ndim > 0 ? ndim : 1)) {
      bad++;
      continue;
    }
    for (int64_t i = 0; i < numel && !bad; i++)
      for (int op = 0; op < nops; op++)
        if (emc_layout_offset(&L, op, i) != naive_offset(ndim, shape, st[op], i)) {
          bad++;
          printf("  coalesce case %d: op %d element %lld differs\n", t, op, (long long)i);
          break;
        }
    /* linear means i * stride works */
    if (emc_layout_is_linear(&L))
      for (int64_t i = 0; i < numel; i++)
        for (int op = 0; op < nops; op++)
          if (i * L.stride[op][0] != naive_offset(ndim, shape, st[op], i)) bad++;
  }
  CHECK(bad == 0, "coalesced layouts visit the same offsets (%d of %d cases wrong)", bad, cases);

  /* a contiguous 4-d tensor is one run; a broadcast operand stays 0-strided */
  int64_t shape[4] = {2, 3, 4, 5}, c[4] = {60, 20, 5, 1}, z[4] = {0, 0, 0, 0};
  const int64_t *s1[2] = {c, z};
  emc_layout L;
  CHECK(emc_coalesce(4, shape, 2, s1, &L) == 120 && L.ndim == 1 && L.shape[0] == 120 &&
            L.stride[0][0] == 1 && L.stride[1][0] == 0 && emc_layout_is_linear(&L),
        "contiguous + scalar collapse to one linear run (ndim %d)", L.ndim);
  /* a transposed operand keeps two dims */
  int64_t sh2[2] = {3, 4}, a2[2] = {4, 1}, t2[2] = {1, 3};
  const int64_t *s2[2] = {a2, t2};
  emc_coalesce(2, sh2, 2, s2, &L);
  CHECK(L.ndim == 2 && !emc_layout_is_linear(&L), "a transpose is not linear");
  /* zero elements */
  int64_t sh3[2] = {3, 0};
  const int64_t *s3[1] = {a2};
  CHECK(emc_coalesce(2, sh3, 1, s3, &L) == 0, "an empty shape has 0 elements");
  /* a 0-d tensor is one element */
  CHECK(emc_coalesce(0, shape, 1, s1, &L) == 1 && L.ndim == 1 && L.shape[0] == 1,
        "a scalar is one element");
}

/* ------------------------------------------------------------------ */
/* launch plans                                                        */
/* ------------------------------------------------------------------ */

static void test_launch(void) {
  CHECK(emc_blocks_for(0, 256) == 1, "at least one block");
  CHECK(emc_blocks_for(257, 256) == 2, "257 elements need 2 blocks");
  CHECK(emc_blocks_for((int64_t)1 << 40, 256) == EMC_MAX_BLOCKS, "blocks are capped");
  int bad = 0;
  for (int t = 0; t < 2000; t++) {
    int64_t rows = rnd() % 5000, n = 1 + rnd() % 20000;
    emc_rows_plan p = emc_plan_rows(rows, n);
    int threads = p.threads_per_row * p.rows_per_block;
    if (threads > 1024 || threads % 32 || p.threads_per_row % 32) bad++;
    if (p.threads_per_row > 32 && p.rows_per_block != 1) bad++;
    if (p.blocks < 1 || (p.blocks < EMC_MAX_BLOCKS && p.blocks * p.rows_per_block < rows)) bad++;
    if (p.threads_per_row > 32 && p.threads_per_row > 1024) bad++;
  }
  CHECK(bad == 0, "row plans are whole warps and cover every row (%d bad)", bad);
}

/* Every element of [outer, n, inner] is read by exactly one thread, and
** every split piece writes its own partial slot. */
static void test_reduce_plan(void) {
  int bad = 0, split_cases = 0;
  for (int t = 0; t < 400; t++) {
    int64_t outer = 1 + rnd() % 6, n = rnd() % 3000, inner = 1 + rnd() % 70;
    if (t % 7 == 0) n = 20000 + rnd() % 5000; /* long rows, to get splits */
    int sm = (int)(rnd() % 3) * 66;
    emc_reduce_plan p;
    emc_plan_reduce(outer, n, inner, sm, &p);
    if (p.bx * p.by != EMC_THREADS || (p.by & (p.by - 1)) || p.nsplit < 1 || p.grid < 1) {
      bad++;
      continue;
    }
    if (sm == 0 && p.nsplit != 1) bad++;
    if (p.nsplit > 1) split_cases++;
    unsigned char *seen = calloc((size_t)(outer * n * inner) + 1, 1);
    unsigned char *slot = calloc((size_t)(outer * p.nsplit * inner), 1);
    for (int64_t w = 0; w < p.items; w++) {
      int64_t o, ib, s;
      emc_reduce_item(&p, w, &o, &ib, &s);
      if (o >= outer || s >= p.nsplit) bad++;
      for (int tx = 0; tx < p.bx; tx++) {
        int64_t i = ib * p.bx + tx;
        if (i >= inner) continue;
        slot[(o * p.nsplit + s) * inner + i]++;
        int64_t j0 = s * p.chunk, j1 = j0 + p.chunk < n ? j0 + p.chunk : n;
        for (int ty = 0; ty < p.by; ty++)
          for (int64_t j = j0 + ty; j < j1; j += p.by) seen[(o * n + j) * inner + i]++;
      }
    }
    for (int64_t e = 0; e < outer * n * inner; e++) bad += seen[e] != 1;
    for (int64_t e = 0; e < outer * p.nsplit * inner; e++) bad += slot[e] != 1;
    free(seen);
    free(slot);
  }
  CHECK(bad == 0, "reduce plans cover each element once (%d bad)", bad);
  CHECK(split_cases > 0, "some plans split long rows (%d)", split_cases);
  emc_reduce_plan p;
  emc_plan_reduce(1, 1 << 24, 1, 132, &p);
  CHECK(p.nsplit > 1 && p.items >= 132, "a full sum of 16M elements is split (%lld pieces)",
        (long long)p.nsplit);
  emc_plan_reduce(4096, 512, 1, 132, &p);
  CHECK(p.nsplit == 1, "4096 rows fill the GPU without a split");
}

/* ------------------------------------------------------------------ */
/* attention rules                                                     */
/* ------------------------------------------------------------------ */

/* The mask program's block map as the kernels read it (emc_attn_map_tile,
** cuda_attention.cuh att_xtile): masks of the kinds the core lowers to
** programs (a window, local blocks, global tokens; written out here as
** element rules of the query's key-axis position p = i + Lk - Lq and the
** key j), a map of their cells made by brute force at a grain g, and every
** 64 x 64 tile classified from it. A tile called empty must hold no
** visible element (the kernels skip it), one called full no hidden element
** (the kernels skip the mask there); with g dividing 64 the cells tile the
** tile exactly, so the class must be the tile's own. */
typedef struct band {
  int kind;                    /* 1 window [p - left, p + right], 2 blocks within +-local */
  int64_t left, right, block, local, global;
} band;

static bool band_allows(const band *m, int64_t p, int64_t j) {
  if (m->global > 0 && (p < m->global || j < m->global)) return true;
  if (m->kind == 1) return j >= p - m->left && j <= p + m->right;
  const int64_t d = j / m->block - p / m->block;
  return d >= -m->local && d <= m->local;
}

/* The class of queries [q0, q1] x keys [k0, k1] from the element rule. */
static int band_class(const band *m, int64_t shift, int64_t q0, int64_t q1, int64_t k0, int64_t k1) {
  bool any = false, all = true;
  for (int64_t i = q0; i <= q1; i++)
    for (int64_t j = k0; j <= k1; j++) {
      const bool ok = band_allows(m, i + shift, j);
      any = any || ok, all = all && ok;
    }
  return !any ? EM_XTILE_EMPTY : all ? EM_XTILE_FULL : EM_XTILE_PARTIAL;
}

static void test_map_tile(void) {
  static const int64_t grains[] = {1, 7, 16, 32, 64, 100};
  int bad = 0, inexact = 0, tiles = 0, empty = 0, full = 0;
  for (int t = 0; t < 300; t++) {
    const band m = {1 + (int)(rnd() % 2), (int64_t)(rnd() % 40), (int64_t)(rnd() % 40), 1 + (int64_t)(rnd() % 24),
                    (int64_t)(rnd() % 3), (int64_t)(rnd() % 3 == 0 ? rnd() % 20 : 0)};
    const int64_t Lq = 1 + rnd() % 260, Lk = 1 + rnd() % 260, shift = Lk - Lq;
    const int64_t g = grains[rnd() % (sizeof grains / sizeof grains[0])];
    const int64_t nq = (Lq + g - 1) / g, nk = (Lk + g - 1) / g;
    uint8_t *map = malloc((size_t)(nq * nk));
    for (int64_t iq = 0; iq < nq; iq++)
      for (int64_t jk = 0; jk < nk; jk++) {
        const int64_t i1 = (iq + 1) * g < Lq ? (iq + 1) * g : Lq, j1 = (jk + 1) * g < Lk ? (jk + 1) * g : Lk;
        map[iq * nk + jk] = (uint8_t)band_class(&m, shift, iq * g, i1 - 1, jk * g, j1 - 1);
      }
    for (int64_t q0 = 0; q0 < Lq; q0 += EMC_ATT_BQ)
      for (int64_t k0 = 0; k0 < Lk; k0 += EMC_ATT_BK) {
        const int64_t q1 = (q0 + EMC_ATT_BQ < Lq ? q0 + EMC_ATT_BQ : Lq) - 1;
        const int64_t k1 = (k0 + EMC_ATT_BK < Lk ? k0 + EMC_ATT_BK : Lk) - 1;
        const int c = emc_attn_map_tile(map, nk, g, q0, q1, k0, k1), want = band_class(&m, shift, q0, q1, k0, k1);
        if ((c == EM_XTILE_EMPTY || c == EM_XTILE_FULL) && c != want) bad++;
        if (EMC_ATT_BQ % g == 0 && c != want) inexact++;
        tiles++, empty += c == EM_XTILE_EMPTY, full += c == EM_XTILE_FULL;
      }
    free(map);
  }
  CHECK(bad == 0 && inexact == 0 && empty > 0 && full > 0 && empty + full < tiles,
        "block map tiles: empty and full only when every element is so, exact for grains dividing 64 "
        "(%d wrong, %d inexact; %d empty and %d full of %d tiles)",
        bad, inexact, empty, full, tiles);
  /* a hand-made map: 2 x 2 cells of 40 positions, the tile [0, 63] x [0, 63] touches all four */
  const uint8_t e = EM_XTILE_EMPTY, f = EM_XTILE_FULL, p = EM_XTILE_PARTIAL;
  const uint8_t all_e[4] = {e, e, e, e}, all_f[4] = {f, f, f, f}, mixed[4] = {e, e, e, f}, part[4] = {f, p, f, f};
  CHECK(emc_attn_map_tile(all_e, 2, 40, 0, 63, 0, 63) == e && emc_attn_map_tile(all_f, 2, 40, 0, 63, 0, 63) == f &&
            emc_attn_map_tile(mixed, 2, 40, 0, 63, 0, 63) == p && emc_attn_map_tile(part, 2, 40, 0, 63, 0, 63) == p &&
            emc_attn_map_tile(mixed, 2, 40, 0, 39, 0, 63) == e && emc_attn_map_tile(mixed, 2, 40, 40, 63, 40, 63) == f,
        "block map tiles: a tile is empty or full only when every cell it touches is");
}

static void test_causal(void) {
  int bad = 0;
  for (int t = 0; t < 300; t++) {
    int64_t Lq = 1 + rnd() % 200, Lk = 1 + rnd() % 200;
    for (int64_t q0 = 0; q0 < Lq; q0 += EMC_ATT_BQ) {
      int64_t want = 0;
      for (int64_t i = q0; i < q0 + EMC_ATT_BQ && i < Lq; i++)
        for (int64_t j = 0; j < Lk; j++)
          if (emc_causal_visible(i, j, Lq, Lk) && j + 1 > want) want = j + 1;
      if (emc_causal_key_end(q0, EMC_ATT_BQ, Lq, Lk) != want) bad++;
    }
    for (int64_t k0 = 0; k0 < Lk; k0 += EMC_ATT_BK) {
      int64_t want = Lq;
      for (int64_t i = Lq - 1; i >= 0; i--)
        if (emc_causal_visible(i, k0, Lq, Lk)) want = i;
      if (emc_causal_query_begin(k0, Lq, Lk) != want) bad++;
      /* no query before the begin sees any key of the tile */
      int64_t qb = emc_causal_query_begin(k0, Lq, Lk) / EMC_ATT_BQ * EMC_ATT_BQ;
      for (int64_t i = 0; i < qb; i++)
        for (int64_t j = k0; j < k0 + EMC_ATT_BK && j < Lk; j++)
          if (emc_causal_visible(i, j, Lq, Lk)) bad++;
    }
  }
  CHECK(bad == 0, "causal tile bounds match the visibility rule (%d bad)", bad);
  CHECK(emc_causal_visible(0, 0, 1, 1) && !emc_causal_visible(0, 1, 2, 2) &&
            emc_causal_visible(0, 3, 1, 4) && !emc_causal_visible(0, 3, 2, 4),
        "bottom-right alignment: the last query sees every key");
  CHECK(emc_online_rescale(-INFINITY, -INFINITY) == 1.0f && emc_online_base(-INFINITY) == 0.0f,
        "an all-masked row rescales by 1, not NaN");
  CHECK(isinf(emc_attn_lse(-INFINITY, 0.0f)) && emc_attn_lse(-INFINITY, 0.0f) > 0,
        "a fully masked row saves lse = +inf");
  uint64_t seed = 42, off = 7;
  bool same = true;
  for (int64_t i = 0; i < 5; i++)
    for (int64_t j = 0; j < 6; j++) {
      int64_t bh = 2, Lq = 5, Lk = 6;
      bool k = emc_attn_keep(seed, off, bh, i, j, Lq, Lk, 0.3);
      bool w = em_philox_keep(seed, off, (uint64_t)((bh * Lq + i) * Lk + j), em_philox_keep_threshold(0.3));
      same = same && k == w;
    }
  CHECK(same, "attention dropout draws element ((bh*Lq)+i)*Lk+j of the stream");
}

/* Dense reference: scores, masks, softmax, dropout, in double. */
typedef struct att_case {
  int64_t Lq, Lk, d;
  bool causal;
  const uint8_t *pad;  /* [Lk] */
  const float *bias;   /* [Lq, Lk] or NULL */
  double p;            /* dropout */
  float scale;
} att_case;

static bool masked(const att_case *c, int64_t i, int64_t j) {
  if (c->pad && c->pad[j]) return true;
  return c->causal && !emc_causal_visible(i, j, c->Lq, c->Lk);
}

static float zfac(const att_case *c, int64_t i, int64_t j) {
  if (c->p <= 0) return 1.0f;
  return emc_attn_keep(5, 11, 0, i, j, c->Lq, c->Lk, c->p) ? (float)(1.0 / (1.0 - c->p)) : 0.0f;
}

static void dense_probs(const att_case *c, const float *q, const float *k, double *P) {
  for (int64_t i = 0; i < c->Lq; i++) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < c->Lk; j++) {
      double s = -INFINITY;
      if (!masked(c, i, j)) {
        s = 0;
        for (int64_t t = 0; t < c->d; t++) s += (double)q[i * c->d + t] * k[j * c->d + t];
        s = s * c->scale + (c->bias ? c->bias[i * c->Lk + j] : 0);
      }
      P[i * c->Lk + j] = s;
      if (s > mx) mx = s;
    }
    double sum = 0;
    for (int64_t j = 0; j < c->Lk; j++) {
      double e = mx == -INFINITY ? 0 : exp(P[i * c->Lk + j] - mx);
      P[i * c->Lk + j] = e;
      sum += e;
    }
    for (int64_t j = 0; j < c->Lk; j++) P[i * c->Lk + j] = sum > 0 ? P[i * c->Lk + j] / sum : 0;
  }
}

/* The kernels' forward, tile by tile, with the plan helpers. */
static void tiled_forward(const att_case *c, const float *q, const float *k, const float *v,
                          float *out, float *lse) {
  for (int64_t q0 = 0; q0 < c->Lq; q0 += EMC_ATT_BQ)
    for (int64_t i = q0; i < q0 + EMC_ATT_BQ && i < c->Lq; i++) {
      float m = -INFINITY, l = 0, o[64] = {0};
      int64_t kend = c->causal ? emc_causal_key_end(q0, EMC_ATT_BQ, c->Lq, c->Lk) : c->Lk;
      for (int64_t k0 = 0; k0 < kend; k0 += EMC_ATT_BK) {
        float s[EMC_ATT_BK], tm = -INFINITY;
        for (int64_t jj = 0; jj < EMC_ATT_BK; jj++) {
          int64_t j = k0 + jj;
          s[jj] = -INFINITY;
          if (j < c->Lk && !masked(c, i, j)) {
            float dot = 0;
            for (int64_t t = 0; t < c->d; t++) dot += q[i * c->d + t] * k[j * c->d + t];
            s[jj] = dot * c->scale + (c->bias ? c->bias[i * c->Lk + j] : 0.0f);
          }
          tm = fmaxf(tm, s[jj]);
        }
        float mn = fmaxf(m, tm), r = emc_online_rescale(m, mn), base = emc_online_base(mn);
        float row = 0;
        for (int64_t t = 0; t < c->d; t++) o[t] *= r;
        for (int64_t jj = 0; jj < EMC_ATT_BK && k0 + jj < c->Lk; jj++) {
          float pr = expf(s[jj] - base);
          row += pr;
          float pd = pr * zfac(c, i, k0 + jj);
          for (int64_t t = 0; t < c->d; t++) o[t] += pd * v[(k0 + jj) * c->d + t];
        }
        l = l * r + row;
        m = mn;
      }
      for (int64_t t = 0; t < c->d; t++) out[i * c->d + t] = l > 0 ? o[t] / l : 0.0f;
      lse[i] = emc_attn_lse(m, l);
    }
}

/* The kernels' backward (key tiles outer, query tiles from the causal
** begin), with P recomputed from lse and D = rowsum(dO * O). */
static void tiled_backward(const att_case *c, const float *q, const float *k, const float *v,
                           const float *out, const float *lse, const float *dout, float *dq,
                           float *dk, float *dv) {
  int64_t d = c->d;
  memset(dq, 0, sizeof(float) * c->Lq * d);
  for (int64_t k0 = 0; k0 < c->Lk; k0 += EMC_ATT_BK) {
    int64_t qb = c->causal ? emc_causal_query_begin(k0, c->Lq, c->Lk) / EMC_ATT_BQ * EMC_ATT_BQ : 0;
    for (int64_t j = k0; j < k0 + EMC_ATT_BK && j < c->Lk; j++) {
      for (int64_t t = 0; t < d; t++) dk[j * d + t] = dv[j * d + t] = 0;
      for (int64_t i = qb; i < c->Lq; i++) {
        if (masked(c, i, j)) continue;
        float dot = 0, dp = 0, D = 0;
        for (int64_t t = 0; t < d; t++) {
          dot += q[i * d + t] * k[j * d + t];
          dp += dout[i * d + t] * v[j * d + t];
          D += dout[i * d + t] * out[i * d + t];
        }
        float s = dot * c->scale + (c->bias ? c->bias[i * c->Lk + j] : 0.0f);
        float pr = expf(s - lse[i]), z = zfac(c, i, j);
        float ds = pr * (dp * z - D);
        for (int64_t t = 0; t < d; t++) {
          dv[j * d + t] += pr * z * dout[i * d + t];
          dk[j * d + t] += c->scale * ds * q[i * d + t];
          dq[i * d + t] += c->scale * ds * k[j * d + t];
        }
      }
    }
  }
}

static double max_rel(const float *a, const double *b, int64_t n) {
  double worst = 0;
  for (int64_t e = 0; e < n; e++) {
    double err = fabs((double)a[e] - b[e]) / (1e-3 + fabs(b[e]));
    if (!(err <= worst)) worst = err; /* NaN wins */
  }
  return worst;
}

static void test_tiled_attention(void) {
  const int64_t d = 8;
  struct { int64_t Lq, Lk; bool causal, pad, bias; double p; } cases[] = {
    {70, 70, false, false, false, 0}, {70, 150, true, false, false, 0},
    {150, 70, true, true, false, 0},  {65, 129, false, true, true, 0},
    {130, 130, true, false, true, 0.25}, {3, 200, true, true, false, 0.5},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    att_case c = {cases[ci].Lq, cases[ci].Lk, d, cases[ci].causal, NULL, NULL, cases[ci].p,
                  (float)(1 / sqrt((double)d))};
    int64_t Lq = c.Lq, Lk = c.Lk;
    float *q = malloc(sizeof(float) * Lq * d), *k = malloc(sizeof(float) * Lk * d);
    float *v = malloc(sizeof(float) * Lk * d), *dout = malloc(sizeof(float) * Lq * d);
    float *out = malloc(sizeof(float) * Lq * d), *lse = malloc(sizeof(float) * Lq);
    float *dq = malloc(sizeof(float) * Lq * d), *dk = malloc(sizeof(float) * Lk * d);
    float *dv = malloc(sizeof(float) * Lk * d), *bias = malloc(sizeof(float) * Lq * Lk);
    uint8_t *pad = calloc((size_t)Lk, 1);
    double *P = malloc(sizeof(double) * Lq * Lk);
    double *ro = calloc((size_t)(Lq * d), sizeof(double)), *rq = calloc((size_t)(Lq * d), sizeof(double));
    double *rk = calloc((size_t)(Lk * d), sizeof(double)), *rv = calloc((size_t)(Lk * d), sizeof(double));
    for (int64_t e = 0; e < Lq * d; e++) q[e] = (float)(rndu() * 2 - 1), dout[e] = (float)(rndu() * 2 - 1);
    for (int64_t e = 0; e < Lk * d; e++) k[e] = (float)(rndu() * 2 - 1), v[e] = (float)(rndu() * 2 - 1);
    for (int64_t e = 0; e < Lq * Lk; e++) bias[e] = (float)(rndu() - 0.5);
    if (cases[ci].pad) {
      for (int64_t j = 0; j < Lk; j++) pad[j] = rnd() % 3 == 0;
      pad[Lk - 1] = 1; /* with causal and Lq > Lk, early rows see nothing */
      c.pad = pad;
    }
    if (cases[ci].bias) c.bias = bias;
    /* dense forward and backward in double */
    dense_probs(&c, q, k, P);
    for (int64_t i = 0; i < Lq; i++)
      for (int64_t j = 0; j < Lk; j++) {
        double pz = P[i * Lk + j] * zfac(&c, i, j);
        for (int64_t t = 0; t < d; t++) ro[i * d + t] += pz * v[j * d + t];
      }
    for (int64_t i = 0; i < Lq; i++) {
      double D = 0;
      for (int64_t t = 0; t < d; t++) D += (double)dout[i * d + t] * ro[i * d + t];
      for (int64_t j = 0; j < Lk; j++) {
        double pr = P[i * Lk + j], z = zfac(&c, i, j), dp = 0;
        for (int64_t t = 0; t < d; t++) dp += (double)dout[i * d + t] * v[j * d + t];
        double ds = pr * (dp * z - D);
        for (int64_t t = 0; t < d; t++) {
          rv[j * d + t] += pr * z * dout[i * d + t];
          rk[j * d + t] += c.scale * ds * q[i * d + t];
          rq[i * d + t] += c.scale * ds * k[j * d + t];
        }
      }
    }
    tiled_forward(&c, q, k, v, out, lse);
    tiled_backward(&c, q, k, v, out, lse, dout, dq, dk, dv);
    double eo = max_rel(out, ro, Lq * d), eq = max_rel(dq, rq, Lq * d);
    double ek = max_rel(dk, rk, Lk * d), ev = max_rel(dv, rv, Lk * d);
    int nan = 0;
    for (int64_t e = 0; e < Lq * d; e++) nan += isnan(out[e]) || isnan(dq[e]);
    CHECK(eo < 1e-4 && eq < 1e-3 && ek < 1e-3 && ev < 1e-3 && !nan,
          "tiled attention case %zu (Lq %lld Lk %lld causal %d pad %d bias %d p %.2f): rel err "
          "out %.2g dq %.2g dk %.2g dv %.2g, %d NaN",
          ci, (long long)Lq, (long long)Lk, c.causal, c.pad != NULL, c.bias != NULL, c.p, eo, eq,
          ek, ev, nan);
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    free(bias), free(pad), free(P), free(ro), free(rq), free(rk), free(rv);
  }
}

/* ------------------------------------------------------------------ */
/* the caching allocator                                               */
/* ------------------------------------------------------------------ */

typedef struct fake_gpu {
  size_t limit, used;
  int allocs, frees;
} fake_gpu;

static int fake_alloc(void *ud, size_t n, void **ptr) {
  fake_gpu *g = ud;
  if (g->used + n > g->limit) return 2; /* "cudaErrorMemoryAllocation" */
  size_t *b = malloc(n + sizeof(size_t));
  if (!b) return 2;
  b[0] = n;
  g->used += n;
  g->allocs++;
  *ptr = b + 1;
  return 0;
}

static void fake_free(void *ud, void *ptr) {
  fake_gpu *g = ud;
  size_t *b = (size_t *)ptr - 1;
  g->used -= b[0];
  g->frees++;
  free(b);
}

static void test_size_classes(void) {
  int bad = 0;
  size_t prev = 0;
  int prev_idx = -1;
  for (size_t n = 1; n < ((size_t)1 << 34); n = n * 9 / 8 + 1) {
    size_t c = emc_size_class(n);
    int idx = emc_class_index(c);
    if (c < n || c < EMC_MIN_BLOCK) bad++;
    if (n > 4096 && (double)(c - n) > 0.25 * (double)n) bad++;
    if (n >= ((size_t)1 << 21) && (double)(c - n) > 0.0625 * (double)n) bad++;
    if (c < prev || idx < prev_idx || idx < 0 || idx >= EMC_NCLASSES) bad++;
    if (emc_size_class(c) != c) bad++; /* a class is its own class */
    if (c != prev && idx == prev_idx) bad++; /* distinct classes, distinct lists */
    prev = c;
    prev_idx = idx;
  }
  CHECK(bad == 0, "size classes are monotone, tight and distinct (%d bad)", bad);
  CHECK(emc_size_class(0) == EMC_MIN_BLOCK && emc_size_class(513) == 640 &&
            emc_size_class((size_t)1 << 20) == ((size_t)1 << 20),
        "class examples: 0 -> 512, 513 -> 640 (got %zu), 1 MiB -> 1 MiB", emc_size_class(513));
  CHECK(emc_size_class(((size_t)1 << 62) + 1) == 0, "absurd sizes have no class");
}

static void test_cache(void) {
  fake_gpu g = {1 << 20, 0, 0, 0};
  emc_cache c;
  emc_cache_init(&c, fake_alloc, fake_free, &g);
  void *a, *b, *z1, *z2;
  CHECK(emc_cache_alloc(&c, 1000, &a) == 0 && a, "alloc 1000 bytes");
  size_t in_use, cached;
  emc_cache_stats(&c, &in_use, &cached);
  CHECK(in_use == emc_size_class(1000) && cached == 0, "in use is the class size (%zu)", in_use);
  CHECK(emc_cache_free(&c, a), "free a live block");
  emc_cache_stats(&c, &in_use, &cached);
  CHECK(in_use == 0 && cached == emc_size_class(1000), "a freed block is cached (%zu)", cached);
  CHECK(emc_cache_alloc(&c, 1010, &b) == 0 && b == a && g.allocs == 1,
        "the same class reuses the block without the driver (allocs %d)", g.allocs);
  CHECK(!emc_cache_free(&c, (char *)b + 8), "an unknown pointer is refused");
  CHECK(emc_cache_free(&c, NULL), "NULL is ignored");
  CHECK(emc_cache_alloc(&c, 0, &z1) == 0 && emc_cache_alloc(&c, 0, &z2) == 0 && z1 && z2 &&
            z1 != z2,
        "0-byte allocations get unique pointers");
  emc_cache_free(&c, z1);
  emc_cache_free(&c, z2);
  emc_cache_free(&c, b);
  /* many blocks: the live hash grows and every pointer comes back */
  enum { N = 3000 };
  void **ps = malloc(sizeof(void *) * N);
  g.limit = (size_t)1 << 30;
  int bad = 0;
  for (int i = 0; i < N; i++) bad += emc_cache_alloc(&c, 512 + (size_t)(i % 50) * 100, &ps[i]) != 0;
  for (int i = 0; i < N; i++) bad += !emc_cache_free(&c, ps[i]);
  emc_cache_stats(&c, &in_use, &cached);
  CHECK(bad == 0 && in_use == 0 && c.live_count == 0, "3000 blocks allocated and freed (%d bad)",
        bad);
  int allocs = g.allocs;
  for (int i = 0; i < N; i++) bad += emc_cache_alloc(&c, 512 + (size_t)(i % 50) * 100, &ps[i]) != 0;
  CHECK(bad == 0 && g.allocs == allocs, "a second identical step needs no driver call (%d new)",
        g.allocs - allocs);
  for (int i = 0; i < N; i++) emc_cache_free(&c, ps[i]);
  free(ps);
  emc_cache_empty(&c);
  emc_cache_stats(&c, &in_use, &cached);
  CHECK(cached == 0 && g.used == 0 && g.frees == g.allocs, "empty_cache gives everything back");
  /* out of memory: cached blocks are released and the request retried */
  g.limit = 4096;
  void *x, *y;
  CHECK(emc_cache_alloc(&c, 3000, &x) == 0, "fill the fake device");
  emc_cache_free(&c, x);
  CHECK(emc_cache_alloc(&c, 3500, &y) == 0 && g.used <= g.limit,
        "an allocation that fits only without the cache succeeds after flushing it");
  CHECK(emc_cache_alloc(&c, 8192, &x) == 2 && x == NULL, "a real OOM returns the driver's code");
  CHECK(emc_cache_alloc(&c, ((size_t)1 << 62) + 5, &x) == -1, "absurd sizes fail with -1");
  emc_cache_free(&c, y);
  emc_cache_destroy(&c);
  CHECK(g.used == 0, "destroy frees every block (%zu bytes left)", g.used);
}

int main(void) {
  test_coalesce();
  test_launch();
  test_reduce_plan();
  test_causal();
  test_map_tile();
  test_tiled_attention();
  test_size_classes();
  test_cache();
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
