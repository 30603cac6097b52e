/*
** cpu_conv.c -- 2-d convolution on oneDNN's convolution primitives:
** forward, backward-data and backward-weights (which also gives the bias
** gradient), float32 and bfloat16, any stride, padding, dilation and groups.
** float64 and anything oneDNN has no kernel for are EM_ERR_UNSUPPORTED,
** and nn.Conv2d composes those from core ops (lua/ember/nn/_conv.lua).
**
** ember's tensors are NCHW and its weights OIHW. Given those plain layouts,
** oneDNN 2.6 runs its im2col + gemm reference ("gemm:jit"): on the ResNet
** block of scripts/bench/conv.lua that measured 6x slower than its direct
** kernels, the weight gradient 15x. So each primitive is created on the
** layouts it prefers (format_tag_any: blocked nChw16c, or NHWC for the
** brgemm kernels), and each argument is reordered to and from ember's
** layout around it, as PyTorch's mkldnn path does. The reorders are
** primitives too; all of them are cached per call shape, like the matmuls
** of cpu_dnnl.c, and the backward ones are made on the first backward.
** With few channels (under oneDNN's block of 16 on either side, as a
** ViT patch embedding of 3 colours) the blocked kernels pad the channels
** to 16: backward-data of the ViT stem in scripts/bench/conv.lua took
** 0.79 ms (float32) where oneDNN's gemm on ember's own layouts took 0.12,
** with no reorders. So such a call has two candidates per primitive, on
** the layouts oneDNN picks and on ember's plain ones, and the first call
** times both (with their reorders) and keeps the faster
** (EMBER_CONV_LAYOUT=blocked or plain skips the timing). A bfloat16 weight
** gradient has one more candidate, in float32: its
** reorders widen x and dy and round the gradients once, and the
** accumulation is float32 as inside oneDNN's bfloat16 kernels.
** bfloat16 NCHW <-> nChw16c is ember's own AVX2 transpose (blk16): oneDNN
** 2.6 runs it on its generic reorder at half the speed.
** Reorders of under REORDER_SERIAL_BYTES run on the calling thread: a
** weight's (9K values) took 0.15 ms on the team in a training step,
** waking a sleeping worker, for microseconds of work.
** bfloat16 accumulates in float32 inside oneDNN; the bias and the weight
** and bias gradients are bfloat16, as under PyTorch's autocast.
** The weight gradient reads x again. When the core asks for it
** (conv2d_keep_bytes, conv2d_keep, conv2d_backward_kept: a weight that
** needs a gradient), the forward reorders x into a buffer the autograd
** node holds, and the backward-weights primitive reads it there: one
** activation held per layer for one reorder of x less per step (a step
** then reorders x, y, dy and dx once each; dy once for both backward
** primitives). The buffer names its layout, so a backward whose
** primitive reads x in another one reorders x as before.
** Beside a busy process, oneDNN's convolutions waited for a descheduled
** worker at every barrier inside: fashion_vit's bf16 weight gradients took
** 27.8 ms a call instead of 1.3, and its step 5.7x its idle time. While
** cpu_team says the machine is contended, a call runs on primitives made
** for one thread (an entry of the cache per thread count: oneDNN sizes a
** kernel's split when it is made), on the calling thread alone.
*/
#include "cpu_dnnl.h"

#include <oneapi/dnnl/dnnl_debug.h>

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WHO "cpu conv2d"

/* Shapes kept; past this, a call creates its primitives and destroys them
** (correct, only slower). Entries are never evicted, so none is destroyed
** while another thread runs it. */
#define CONV_CACHE_MAX 128
/* A reorder moving fewer bytes than this runs on the calling thread. */
#define REORDER_SERIAL_BYTES (256u << 10)
/* Channels per group under this (oneDNN's block) on either side: the
** plain layouts are a candidate too. */
#define FEW_CHANNELS 16

/* The tensors of a call, in ember's layout: x, w, y, b. */
enum { UX, UW, UY, UB, NUSER };
/* The three primitives. */
enum { FWD, BWD_DATA, BWD_WEIGHTS, NPRIM };
/* A primitive's candidates: on oneDNN's layouts, on ember's own, and (a
** bfloat16 weight gradient) in float32 on oneDNN's layouts, the reorders
** widening the inputs and rounding the gradients. */
enum { FMT_ANY, FMT_PLAIN, FMT_F32, NFMT };

/* One argument of a primitive: which tensor, its layout in the primitive
** and the reorder between that and ember's (NULL when they are the same). */
typedef struct conv_io {
  int arg;       /* DNNL_ARG_* */
  int user;      /* UX.. */
  bool out;      /* written by the primitive */
  bool serial;   /* a small reorder: on the calling thread */
  bool blk16;    /* bfloat16 NCHW <-> nChw16c: ember's transposer (blk16_run) */
  dnnl_memory_desc_t md;
  dnnl_primitive_t reorder;
} conv_io;

typedef struct conv_prim {
  bool tried;    /* creation was attempted; p == NULL then means unsupported */
  dnnl_primitive_t p;
  int nio;
  conv_io io[4];
} conv_prim;

typedef struct conv_entry {
  em_conv_args key;
  bool bias;
  int nthr;                     /* the threads its primitives were made for */
  dnnl_memory_desc_t user[NUSER];
  dnnl_primitive_desc_t fwd_pd; /* the backward primitives' hint */
  conv_prim prim[NPRIM][NFMT];
  _Atomic int pick[NPRIM];      /* the candidate run; -1 until timed */
} conv_entry;

static pthread_mutex_t conv_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_entry conv_cache[CONV_CACHE_MAX];
static int conv_cached;

#define BLK_T __attribute__((target("avx2")))

/* 8x8 transpose of 32-bit lanes. */
BLK_T static inline void tr8(__m256 r[8]) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* One block of 16 channels of 2-byte values: 16 rows of hw values (row
** stride hw) -> blk [hw][16], or back (to_blocked false). A pair of
** channels is one 32-bit lane: 8 pairs by 8 positions make one 8x8
** transpose of those. */
BLK_T static void blk16(uint16_t *b, uint16_t *r, int64_t hw, bool to_blocked) {
  int64_t j = 0;
  const __m256i odd_even = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                            0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (; j + 8 <= hw; j += 8) {
    __m256 v[8];
    if (to_blocked) {
      for (int p = 0; p < 8; p++) { /* channel pair p as 32-bit lanes */
        const __m128i a = _mm_loadu_si128((const __m128i *)(r + (2 * p) * hw + j));
        const __m128i c = _mm_loadu_si128((const __m128i *)(r + (2 * p + 1) * hw + j));
        v[p] = _mm256_castsi256_ps(_mm256_set_m128i(_mm_unpackhi_epi16(a, c), _mm_unpacklo_epi16(a, c)));
      }
      tr8(v);
      for (int q = 0; q < 8; q++) _mm256_storeu_ps((float *)(b + (j + q) * 16), v[q]);
    } else {
      for (int q = 0; q < 8; q++) v[q] = _mm256_loadu_ps((const float *)(b + (j + q) * 16));
      tr8(v); /* v[p]: pair p at positions j..j+7 */
      for (int p = 0; p < 8; p++) {
        /* evens (channel 2p) to the low 64 bits of each lane, odds high */
        __m256i x = _mm256_shuffle_epi8(_mm256_castps_si256(v[p]), odd_even);
        x = _mm256_permute4x64_epi64(x, 0xD8); /* [lo evens, hi evens, lo odds, hi odds] */
        _mm_storeu_si128((__m128i *)(r + (2 * p) * hw + j), _mm256_castsi256_si128(x));
        _mm_storeu_si128((__m128i *)(r + (2 * p + 1) * hw + j), _mm256_extracti128_si256(x, 1));
      }
    }
  }
  for (; j < hw; j++)
    for (int c = 0; c < 16; c++)
      if (to_blocked) b[j * 16 + c] = r[c * hw + j];
      else r[c * hw + j] = b[j * 16 + c];
}

/* Whether io's reorder is bfloat16 NCHW <-> nChw16c over whole blocks:
** oneDNN 2.6 runs that on its generic jit:uni reorder, 0.24 ms each way
** on the ResNet block of scripts/bench/conv.lua ([32, 64, 32, 32]), where
** blk16 takes 0.10 to and 0.16 from (its float32 jit:blk, 0.08 and 0.23,
** stays). */
static bool blk16_fits(const conv_io *io, const dnnl_memory_desc_t *user) {
  const dnnl_memory_desc_t *m = &io->md;
  dnnl_memory_desc_t t;
  return m->data_type == dnnl_bf16 && m->ndims == 4 && m->dims[1] % 16 == 0 &&
         user->ndims == 4 && __builtin_cpu_supports("avx2") &&
         dnnl_memory_desc_init_by_tag(&t, 4, m->dims, dnnl_bf16, dnnl_aBcd16b) == dnnl_success &&
         dnnl_memory_desc_equal(&t, m) &&
         dnnl_memory_desc_init_by_tag(&t, 4, m->dims, dnnl_bf16, dnnl_nchw) == dnnl_success &&
         dnnl_memory_desc_equal(&t, user);
}

/* io's reorder by blk16, over the team: nchw is ember's tensor, blk the primitive's. */
static void blk16_run(const conv_io *io, void *nchw, void *blk) {
  const int64_t N = io->md.dims[0], C = io->md.dims[1], hw = io->md.dims[2] * io->md.dims[3];
  const int64_t CB = C / 16;
  uint16_t *u = nchw, *b = blk;
  const bool to = !io->out;
  CPU_FOR_W(!io->serial, (double)(N * C * hw), i, N * CB,
            blk16(b + i * hw * 16, u + ((i / CB) * C + (i % CB) * 16) * hw, hw, to););
}

/* EMBER_CONV_LAYOUT, read when an entry's primitives are made: unset or
** "timed" (-1), "blocked" (FMT_ANY), "plain" (FMT_PLAIN), "float32"
** (FMT_F32 where that is a candidate, else oneDNN's choice; for tests). */
static const char *const forced_name[NFMT] = {"blocked", "plain", "float32"};
static int forced_layout(void) {
  const char *e = getenv("EMBER_CONV_LAYOUT");
  for (int f = 0; e && f < NFMT; f++)
    if (strcmp(e, forced_name[f]) == 0) return f;
  return -1;
}

static bool key_eq(const em_conv_args *a, bool abias, const em_conv_args *b, bool bbias) {
  return a->dtype == b->dtype && abias == bbias && a->N == b->N && a->C == b->C && a->H == b->H &&
         a->W == b->W && a->O == b->O && a->kh == b->kh && a->kw == b->kw && a->Ho == b->Ho &&
         a->Wo == b->Wo && a->stride[0] == b->stride[0] && a->stride[1] == b->stride[1] &&
         a->dilation[0] == b->dilation[0] && a->dilation[1] == b->dilation[1] &&
         a->pad[0] == b->pad[0] && a->pad[1] == b->pad[1] && a->pad[2] == b->pad[2] &&
         a->pad[3] == b->pad[3] && a->groups == b->groups;
}

/* ember's layouts: x and y NCHW, w OIHW (GOIHW with groups), b plain. */
static dnnl_status_t user_mds(conv_entry *e) {
  const em_conv_args *a = &e->key;
  const dnnl_data_type_t t = a->dtype == EM_BF16 ? dnnl_bf16 : dnnl_f32;
  dnnl_dims_t x = {a->N, a->C, a->H, a->W}, y = {a->N, a->O, a->Ho, a->Wo}, b = {a->O};
  dnnl_dims_t w = {a->O, a->C, a->kh, a->kw};
  dnnl_dims_t gw = {a->groups, a->O / a->groups, a->C / a->groups, a->kh, a->kw};
  dnnl_status_t st;
  if ((st = dnnl_memory_desc_init_by_tag(&e->user[UX], 4, x, t, dnnl_nchw)) ||
      (st = dnnl_memory_desc_init_by_tag(&e->user[UY], 4, y, t, dnnl_nchw)) ||
      (st = dnnl_memory_desc_init_by_tag(&e->user[UB], 1, b, t, dnnl_x)))
    return st;
  if (a->groups > 1) return dnnl_memory_desc_init_by_tag(&e->user[UW], 5, gw, t, dnnl_goihw);
  return dnnl_memory_desc_init_by_tag(&e->user[UW], 4, w, t, dnnl_oihw);
}

/* The convolution descriptor of primitive k, on the layouts oneDNN picks
** (FMT_ANY), on ember's (FMT_PLAIN), or in float32 on oneDNN's (FMT_F32). */
static dnnl_status_t conv_desc(const conv_entry *e, int k, int fmt, dnnl_convolution_desc_t *d) {
  const em_conv_args *a = &e->key;
  dnnl_memory_desc_t x = e->user[UX], w = e->user[UW], y = e->user[UY];
  dnnl_status_t st;
  const dnnl_data_type_t t = a->dtype == EM_BF16 && fmt != FMT_F32 ? dnnl_bf16 : dnnl_f32;
  dnnl_memory_desc_t bf = e->user[UB];
  if (fmt == FMT_F32 && (st = dnnl_memory_desc_init_by_tag(&bf, 1, e->user[UB].dims, t, dnnl_x)))
    return st;
  if (fmt != FMT_PLAIN &&
      ((st = dnnl_memory_desc_init_by_tag(&x, 4, e->user[UX].dims, t, dnnl_format_tag_any)) ||
       (st = dnnl_memory_desc_init_by_tag(&y, 4, e->user[UY].dims, t, dnnl_format_tag_any)) ||
       (st = dnnl_memory_desc_init_by_tag(&w, e->user[UW].ndims, e->user[UW].dims, t,
                                          dnnl_format_tag_any))))
    return st;
  /* oneDNN's dilation counts the gaps: 0 is a dense kernel */
  dnnl_dims_t s = {a->stride[0], a->stride[1]}, dl = {a->dilation[0] - 1, a->dilation[1] - 1};
  dnnl_dims_t pl = {a->pad[0], a->pad[2]}, pr = {a->pad[1], a->pad[3]};
  const dnnl_memory_desc_t *b = e->bias ? &bf : NULL;
  switch (k) {
    case FWD:
      return dnnl_dilated_convolution_forward_desc_init(d, dnnl_forward_training,
                                                        dnnl_convolution_direct, &x, &w, b, &y,
                                                        s, dl, pl, pr);
    case BWD_DATA:
      return dnnl_dilated_convolution_backward_data_desc_init(d, dnnl_convolution_direct, &x, &w,
                                                              &y, s, dl, pl, pr);
    default:
      return dnnl_dilated_convolution_backward_weights_desc_init(d, dnnl_convolution_direct, &x,
                                                                 &w, b, &y, s, dl, pl, pr);
  }
}

/* The arguments of primitive k: {DNNL_ARG_*, tensor, written, md query, index}. */
static int io_specs(int k, bool bias, int spec[4][5]) {
  static const int fwd[4][5] = {{DNNL_ARG_SRC, UX, 0, dnnl_query_src_md, 0},
                                {DNNL_ARG_WEIGHTS, UW, 0, dnnl_query_weights_md, 0},
                                {DNNL_ARG_DST, UY, 1, dnnl_query_dst_md, 0},
                                {DNNL_ARG_BIAS, UB, 0, dnnl_query_weights_md, 1}};
  static const int bwd_data[3][5] = {{DNNL_ARG_DIFF_DST, UY, 0, dnnl_query_diff_dst_md, 0},
                                     {DNNL_ARG_WEIGHTS, UW, 0, dnnl_query_weights_md, 0},
                                     {DNNL_ARG_DIFF_SRC, UX, 1, dnnl_query_diff_src_md, 0}};
  static const int bwd_w[4][5] = {{DNNL_ARG_DIFF_DST, UY, 0, dnnl_query_diff_dst_md, 0},
                                  {DNNL_ARG_SRC, UX, 0, dnnl_query_src_md, 0},
                                  {DNNL_ARG_DIFF_WEIGHTS, UW, 1, dnnl_query_diff_weights_md, 0},
                                  {DNNL_ARG_DIFF_BIAS, UB, 1, dnnl_query_diff_weights_md, 1}};
  const int(*src)[5] = k == FWD ? fwd : k == BWD_DATA ? bwd_data : bwd_w;
  int n = k == BWD_DATA ? 3 : bias ? 4 : 3;
  memcpy(spec, src, sizeof(int[5]) * (size_t)n);
  return n;
}

/* Candidate fmt of primitive k of e and its reorders; p stays NULL when
** oneDNN has no kernel for it (remembered by `tried`). Under conv_lock. */
static em_status prim_create(conv_entry *e, int k, int fmt, dnnl_engine_t eng) {
  conv_prim *cp = &e->prim[k][fmt];
  cp->tried = true;
  dnnl_convolution_desc_t d;
  dnnl_status_t st = conv_desc(e, k, fmt, &d);
  if (st) return cpu_dnnl_fail(WHO, "convolution_desc_init", st);
  dnnl_primitive_desc_t pd = NULL;
  /* the forward's hint is for its own dtype: none for the float32 candidate */
  st = dnnl_primitive_desc_create(&pd, &d, NULL, eng, k == FWD || fmt == FMT_F32 ? NULL : e->fwd_pd);
  if (st == dnnl_unimplemented && fmt != FMT_ANY) return EM_OK; /* one candidate less */
  if (st) return cpu_dnnl_fail(WHO, "primitive_desc_create", st);
  int spec[4][5];
  cp->nio = io_specs(k, e->bias, spec);
  em_status s = EM_OK;
  for (int i = 0; i < cp->nio && !s; i++) {
    conv_io *io = &cp->io[i];
    io->arg = spec[i][0], io->user = spec[i][1], io->out = spec[i][2];
    io->md = *dnnl_primitive_desc_query_md(pd, (dnnl_query_t)spec[i][3], spec[i][4]);
    if (dnnl_memory_desc_equal(&io->md, &e->user[io->user])) continue;
    const dnnl_memory_desc_t *from = io->out ? &io->md : &e->user[io->user];
    const dnnl_memory_desc_t *to = io->out ? &e->user[io->user] : &io->md;
    io->serial = dnnl_memory_desc_get_size(from) + dnnl_memory_desc_get_size(to) < REORDER_SERIAL_BYTES;
    io->blk16 = blk16_fits(io, &e->user[io->user]);
    dnnl_primitive_desc_t rpd = NULL;
    if ((st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL)) ||
        (st = dnnl_primitive_create(&io->reorder, rpd)))
      s = cpu_dnnl_fail(WHO, "reorder", st);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
  }
  if (!s && (st = dnnl_primitive_create(&cp->p, pd))) s = cpu_dnnl_fail(WHO, "primitive_create", st);
  if (k == FWD && fmt == FMT_ANY && !s) e->fwd_pd = pd;
  else dnnl_primitive_desc_destroy(pd);
  return s;
}

static void entry_destroy(conv_entry *e) {
  for (int k = 0; k < NPRIM; k++)
    for (int f = 0; f < NFMT; f++) {
      conv_prim *cp = &e->prim[k][f];
      for (int i = 0; i < cp->nio; i++)
        if (cp->io[i].reorder) dnnl_primitive_destroy(cp->io[i].reorder);
      if (cp->p) dnnl_primitive_destroy(cp->p);
    }
  if (e->fwd_pd) dnnl_primitive_desc_destroy(e->fwd_pd);
  memset(e, 0, sizeof *e);
}

/* Whether candidate cp reorders anything. */
static bool reorders(const conv_prim *cp) {
  for (int i = 0; i < cp->nio; i++)
    if (cp->io[i].reorder) return true;
  return false;
}

/* The candidates of primitive k: both layouts when the channels are few
** and oneDNN's choice reorders, and a bfloat16 weight gradient in float32
** as well; pick set when one remains. Under conv_lock. */
static em_status prim_candidates(conv_entry *e, int k, dnnl_engine_t eng) {
  const em_conv_args *a = &e->key;
  const int forced = forced_layout();
  em_status s = EM_OK;
  /* the forward of oneDNN's choice is the backward's hint: made always */
  if (!e->prim[k][FMT_ANY].tried && (k == FWD || e->prim[FWD][FMT_ANY].p))
    s = prim_create(e, k, FMT_ANY, eng);
  const conv_prim *any = &e->prim[k][FMT_ANY];
  const bool few = a->C / a->groups < FEW_CHANNELS || a->O / a->groups < FEW_CHANNELS;
  if (!s && !e->prim[k][FMT_PLAIN].tried && (forced == FMT_PLAIN || (forced < 0 && few)) &&
      (!any->p || reorders(any)))
    s = prim_create(e, k, FMT_PLAIN, eng);
  /* oneDNN 2.6's bfloat16 weight gradient can be the slow one: for a
  ** few-channel shape such as a CoordConv stem's 5 inputs it has no direct
  ** kernel and runs im2col + gemm, 8.3 ms a call on
  ** scripts/sort_of_clevr.lua's first layer where float32's direct kernel
  ** with the widening reorders takes 3-4 ms; on fashion_vit's 32 -> 64
  ** stem layer (B128, 14x14, 2 threads) its direct kernel took 4.05 ms
  ** against float32's 1.29. Timed like the layouts, so each CPU and shape
  ** keeps what is faster there. */
  if (!s && k == BWD_WEIGHTS && a->dtype == EM_BF16 && (forced < 0 || forced == FMT_F32) && any->p &&
      !e->prim[k][FMT_F32].tried)
    s = prim_create(e, k, FMT_F32, eng);
  if (s) return s;
  int n = 0, only = FMT_ANY; /* neither: none runs (entry_get says so) */
  for (int f = 0; f < NFMT; f++)
    if (e->prim[k][f].p) n++, only = f;
  const int pick = n == 1 ? only : n == 0 ? FMT_ANY : forced >= 0 && e->prim[k][forced].p ? forced : -1;
  atomic_store(&e->pick[k], pick);
  return EM_OK;
}

/* The entry of a call, with the primitives in the bit set `want` (1 << FWD,
** ...) created, and the forward, the hint of the backward ones. When the
** cache is full the entry is *tmp, which the caller destroys after the call. */
static em_status entry_get(const em_conv_args *a, bool bias, unsigned want, conv_entry **out,
                           conv_entry *tmp) {
  dnnl_engine_t eng;
  em_status s = cpu_dnnl_engine(WHO, &eng);
  if (s) return s;
  pthread_mutex_lock(&conv_lock);
  conv_entry *e = NULL;
  const int nthr = omp_get_max_threads();
  for (int i = 0; i < conv_cached && !e; i++)
    if (conv_cache[i].nthr == nthr && key_eq(&conv_cache[i].key, conv_cache[i].bias, a, bias)) e = &conv_cache[i];
  if (!e) {
    e = conv_cached < CONV_CACHE_MAX ? &conv_cache[conv_cached++] : tmp;
    memset(e, 0, sizeof *e);
    e->key = *a;
    e->bias = bias;
    e->nthr = nthr;
    for (int k = 0; k < NPRIM; k++) atomic_store(&e->pick[k], -1);
    dnnl_status_t st = user_mds(e);
    if (st) s = cpu_dnnl_fail(WHO, "memory_desc_init", st);
  }
  want |= 1u << FWD;
  bool have = true;
  for (int k = 0; k < NPRIM && !s; k++) {
    if (!(want >> k & 1)) continue;
    if (!e->prim[k][FMT_ANY].tried) s = prim_candidates(e, k, eng);
    have = have && (e->prim[k][FMT_ANY].p || e->prim[k][FMT_PLAIN].p);
    /* an entry made for one call is not worth timing: oneDNN's choice */
    if (e == tmp && atomic_load(&e->pick[k]) < 0) atomic_store(&e->pick[k], FMT_ANY);
  }
  pthread_mutex_unlock(&conv_lock);
  if (s) return s;
  if (!have)
    return em_error(EM_ERR_UNSUPPORTED, WHO " (oneDNN): no kernel for %s with these sizes on this CPU",
                    cpu_dtype_name(a->dtype));
  *out = e;
  return EM_OK;
}

/* A reorder; a small one on the calling thread (a worker's wake-up would
** cost more than the copy). */
static em_status reorder_exec(const conv_io *io, dnnl_memory_t from, dnnl_memory_t to,
                              void *user, void *prim) {
  if (io->blk16) {
    blk16_run(io, user, prim);
    return EM_OK;
  }
  dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  if (!io->serial) return cpu_dnnl_execute(WHO, io->reorder, 2, r);
  const int n = omp_get_max_threads();
  omp_set_num_threads(1);
  em_status s = cpu_dnnl_execute(WHO, io->reorder, 2, r);
  omp_set_num_threads(n);
  return s;
}

/* Runs candidate cp of e on ember-layout buffers ptr[UX..UB], reordering
** each argument whose layout differs into scratch memory (inputs before,
** outputs after); an input whose pre[] is set is already in the
** primitive's layout there. */
static em_status prim_run(const conv_entry *e, const conv_prim *cp, void *const ptr[NUSER],
                          void *const pre[NUSER]) {
  dnnl_engine_t eng;
  em_status s = cpu_dnnl_engine(WHO, &eng);
  if (s) return s;
  dnnl_memory_t mem[4] = {0}, umem[4] = {0};
  void *tmp[4] = {0};
  size_t tmp_n[4] = {0};
  dnnl_exec_arg_t args[4];
  dnnl_status_t st = dnnl_success;
  for (int i = 0; i < cp->nio && !s; i++) {
    const conv_io *io = &cp->io[i];
    void *data = ptr[io->user];
    if (io->reorder && !io->out && pre && pre[io->user]) {
      data = pre[io->user];
    } else if (io->reorder) {
      tmp_n[i] = dnnl_memory_desc_get_size(&io->md);
      if (!(tmp[i] = cpu_scratch_alloc(tmp_n[i]))) {
        s = em_error(EM_ERR_OOM, WHO ": out of memory for a %zu-byte reordered argument", tmp_n[i]);
        break;
      }
      if ((st = dnnl_memory_create(&umem[i], &e->user[io->user], eng, ptr[io->user]))) break;
      data = tmp[i];
    }
    if ((st = dnnl_memory_create(&mem[i], &io->md, eng, data))) break;
    args[i] = (dnnl_exec_arg_t){io->arg, mem[i]};
    if (io->reorder && !io->out && data == tmp[i])
      s = reorder_exec(io, umem[i], mem[i], ptr[io->user], tmp[i]);
  }
  if (st) s = cpu_dnnl_fail(WHO, "memory_create", st);
  if (!s) s = cpu_dnnl_execute(WHO, cp->p, cp->nio, args);
  for (int i = 0; i < cp->nio && !s; i++)
    if (cp->io[i].reorder && cp->io[i].out)
      s = reorder_exec(&cp->io[i], mem[i], umem[i], ptr[cp->io[i].user], tmp[i]);
  for (int i = 0; i < 4; i++) {
    if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (umem[i]) dnnl_memory_destroy(umem[i]);
    if (tmp[i]) cpu_scratch_free(tmp[i], tmp_n[i]);
  }
  return s;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The candidate of primitive k to run: on the first call with several,
** each runs on this call's buffers (an output is written again by the
** caller's run), in turn, and the fastest by its best two of three is
** kept. */
static em_status prim_pick(conv_entry *e, int k, void *const ptr[NUSER], int *fmt) {
  int f = atomic_load(&e->pick[k]);
  if (f >= 0) {
    *fmt = f;
    return EM_OK;
  }
  double best[NFMT];
  for (f = 0; f < NFMT; f++) best[f] = 1e30;
  for (int r = 0; r < 3; r++)
    for (f = 0; f < NFMT; f++) {
      if (!e->prim[k][f].p) continue;
      const double t0 = now_s();
      em_status s = prim_run(e, &e->prim[k][f], ptr, NULL);
      if (s) return s;
      const double t = now_s() - t0;
      if (r > 0 && t < best[f]) best[f] = t; /* the first runs warm up */
    }
  f = best[FMT_PLAIN] < best[FMT_ANY] ? FMT_PLAIN : FMT_ANY;
  /* float32 only where it is clearly faster: it gives other bits than the
  ** bfloat16 kernels, and a close call could go the other way in another
  ** process (a resumed run); where it won it won by 2.4x or more */
  if (best[FMT_F32] < 0.75 * best[f]) f = FMT_F32;
  int unset = -1;
  atomic_compare_exchange_strong(&e->pick[k], &unset, f);
  *fmt = atomic_load(&e->pick[k]);
  return EM_OK;
}

/* An input reordered from ember's layout into dst (the primitive's). */
static em_status reorder_into(const conv_entry *e, const conv_io *io, const void *src, void *dst) {
  dnnl_engine_t eng;
  em_status s = cpu_dnnl_engine(WHO, &eng);
  if (s) return s;
  dnnl_memory_t from = NULL, to = NULL;
  dnnl_status_t st;
  if ((st = dnnl_memory_create(&from, &e->user[io->user], eng, (void *)src)) ||
      (st = dnnl_memory_create(&to, &io->md, eng, dst)))
    s = cpu_dnnl_fail(WHO, "memory_create", st);
  else
    s = reorder_exec(io, from, to, (void *)src, dst);
  if (from) dnnl_memory_destroy(from);
  if (to) dnnl_memory_destroy(to);
  return s;
}

/* float32 and bfloat16 only: oneDNN has no float64 convolution. */
static em_status conv_check(int device, const em_conv_args *a) {
  if (device != 0) return em_error(EM_ERR_DEVICE, WHO ": no cpu device %d", device);
  if (a->dtype != EM_F32 && a->dtype != EM_BF16)
    return em_error(EM_ERR_UNSUPPORTED, WHO ": no kernel for %s (float32 and bfloat16 only)",
                    cpu_dtype_name(a->dtype));
  return EM_OK;
}

void cpu_conv_describe(char *buf, size_t n) {
  const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
  if (strncmp(isa, "cpu_isa_", 8) == 0) isa += 8;
  const char *e = getenv("EMBER_CONV_LAYOUT");
  const int f = forced_layout();
  if (f == FMT_F32)
    snprintf(buf, n, "onednn convolution up to %s, float32 weight gradients of bfloat16 "
             "(EMBER_CONV_LAYOUT=float32)", isa);
  else if (f >= 0)
    snprintf(buf, n, "onednn convolution up to %s, %s layouts (EMBER_CONV_LAYOUT=%s)", isa, e, e);
  else if (e && *e)
    snprintf(buf, n, "onednn convolution up to %s, EMBER_CONV_LAYOUT=%.16s is not blocked, plain or float32",
             isa, e);
  else
    snprintf(buf, n, "onednn convolution up to %s", isa);
}

/* The threads of a call (*saved: the team's, to restore by conv_leave):
** one while cpu_team says another process holds the CPUs (see the header),
** else the team. A call on one thread keeps no x (conv2d_keep), so
** keep_bytes and keep agree whichever state each saw: a buffer sized by
** the first holds a header saying "nothing" when the second keeps none. */
static int conv_enter(int *saved) {
  *saved = omp_get_max_threads();
  if (cpu_team_contended()) {
    cpu_team_count_serial_conv(); /* counted with one thread too: it runs serially either way */
    if (*saved > 1) {
      omp_set_num_threads(1);
      return 1;
    }
  }
  return *saved;
}

static void conv_leave(int saved, int n) {
  if (n != saved) omp_set_num_threads(saved);
}

em_status cpu_conv2d(int device, const em_conv_args *a, void *y, const void *x, const void *w,
                     const void *b) {
  return cpu_conv2d_keep(device, a, y, NULL, x, w, b);
}

/* The io of candidate cp that reads tensor u, or NULL. */
static const conv_io *io_of(const conv_prim *cp, int u) {
  for (int i = 0; i < cp->nio; i++)
    if (cp->io[i].user == u && !cp->io[i].out) return &cp->io[i];
  return NULL;
}

/* A kept x (conv2d_keep): this header, naming the layout, then the values
** from byte KEPT_OFF. A zero md (format_kind undef) keeps nothing. */
typedef struct kept_head {
  dnnl_memory_desc_t md;
} kept_head;
#define KEPT_OFF ((sizeof(kept_head) + 63) & ~(size_t)63)

/* The forward's x reorder of cached entry e when keeping x pays: both the
** forward and the weight gradient run oneDNN's layouts (decided: a
** few-channel shape keeps nothing until its first calls have timed the
** candidates) and read x in the same reordered layout. NULL otherwise. */
static const conv_io *kept_io(const conv_entry *e) {
  if (atomic_load(&e->pick[FWD]) != FMT_ANY || atomic_load(&e->pick[BWD_WEIGHTS]) != FMT_ANY)
    return NULL;
  const conv_io *f = io_of(&e->prim[FWD][FMT_ANY], UX);
  const conv_io *g = io_of(&e->prim[BWD_WEIGHTS][FMT_ANY], UX);
  if (!f || !g || !f->reorder || !g->reorder || !dnnl_memory_desc_equal(&f->md, &g->md)) return NULL;
  return f;
}

em_status cpu_conv2d_keep_bytes(int device, const em_conv_args *a, bool bias, size_t *bytes) {
  *bytes = 0;
  em_status s = conv_check(device, a);
  if (s) return s;
  conv_entry tmp = {0}, *e = NULL;
  int team;
  const int n = conv_enter(&team);
  s = entry_get(a, bias, 1u << FWD | 1u << BWD_WEIGHTS, &e, &tmp);
  /* an uncached shape keeps nothing, nor a call on one thread (conv_enter) */
  const conv_io *io = !s && e != &tmp && n == team ? kept_io(e) : NULL;
  if (io) *bytes = KEPT_OFF + ((dnnl_memory_desc_get_size(&io->md) + 63) & ~(size_t)63);
  entry_destroy(&tmp);
  conv_leave(team, n);
  return s;
}

/* The forward; with xk (sized by cpu_conv2d_keep_bytes), x is reordered
** into it, where the forward reads it, and left there for the backward. */
em_status cpu_conv2d_keep(int device, const em_conv_args *a, void *y, void *xk, const void *x,
                          const void *w, const void *b) {
  em_status s = conv_check(device, a);
  if (s) return s;
  conv_entry tmp = {0}, *e = NULL;
  int team;
  const int n = conv_enter(&team);
  s = entry_get(a, b != NULL, 1u << FWD, &e, &tmp);
  void *ptr[NUSER] = {(void *)x, (void *)w, y, (void *)b};
  void *pre[NUSER] = {0};
  int f = FMT_ANY;
  if (!s) s = prim_pick(e, FWD, ptr, &f);
  if (!s && xk) {
    const conv_io *io = e != &tmp && f == FMT_ANY && n == team ? kept_io(e) : NULL;
    kept_head *h = xk;
    memset(h, 0, sizeof *h);
    if (io) {
      h->md = io->md;
      pre[UX] = (char *)xk + KEPT_OFF;
      s = reorder_into(e, io, x, pre[UX]);
    }
  }
  if (!s) s = prim_run(e, &e->prim[FWD][f], ptr, pre);
  entry_destroy(&tmp);
  conv_leave(team, n);
  return s;
}

em_status cpu_conv2d_backward(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                              const void *dy, const void *x, const void *w) {
  return cpu_conv2d_backward_kept(device, a, dx, dw, db, dy, x, NULL, w);
}

/* The backward; the weight gradient reads x from xk (conv2d_keep's) when
** that holds it in the layout the primitive reads, else reorders x. */
em_status cpu_conv2d_backward_kept(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                                   const void *dy, const void *x, const void *xk, const void *w) {
  em_status s = conv_check(device, a);
  if (s) return s;
  const bool data = dx != NULL, weights = dw || db;
  if (!data && !weights) return EM_OK;
  conv_entry tmp = {0}, *e = NULL;
  int team;
  const int n = conv_enter(&team);
  s = entry_get(a, db != NULL, (data ? 1u << BWD_DATA : 0) | (weights ? 1u << BWD_WEIGHTS : 0), &e,
                &tmp);
  if (s) {
    entry_destroy(&tmp);
    conv_leave(team, n);
    return s;
  }
  /* one primitive writes both gradients: the one not wanted goes to scratch */
  void *sw = NULL;
  const size_t nw = (size_t)(a->O * (a->C / a->groups) * a->kh * a->kw) * cpu_dtype_size(a->dtype);
  if (weights && !dw && !(sw = cpu_scratch_alloc(nw)))
    s = em_error(EM_ERR_OOM, WHO ": out of memory for a %zu-byte weight gradient", nw);
  void *pd[NUSER] = {dx, (void *)w, (void *)dy, NULL};
  void *pw[NUSER] = {(void *)x, dw ? dw : sw, (void *)dy, db};
  int fd = FMT_ANY, fw = FMT_ANY;
  if (!s && data) s = prim_pick(e, BWD_DATA, pd, &fd);
  if (!s && weights) s = prim_pick(e, BWD_WEIGHTS, pw, &fw);
  void *pre[NUSER] = {0};
  /* x as the forward left it, when that is the layout read here */
  const conv_io *xw = !s && weights ? io_of(&e->prim[BWD_WEIGHTS][fw], UX) : NULL;
  if (xw && xw->reorder && xk && dnnl_memory_desc_equal(&xw->md, &((const kept_head *)xk)->md))
    pre[UX] = (char *)xk + KEPT_OFF;
  /* both read dy: reordered once when they want the same layout */
  size_t npre = 0;
  const conv_io *dyd = !s && data ? io_of(&e->prim[BWD_DATA][fd], UY) : NULL;
  const conv_io *dyw = !s && weights ? io_of(&e->prim[BWD_WEIGHTS][fw], UY) : NULL;
  if (dyd && dyw && dyd->reorder && dnnl_memory_desc_equal(&dyd->md, &dyw->md)) {
    npre = dnnl_memory_desc_get_size(&dyd->md);
    if ((pre[UY] = cpu_scratch_alloc(npre))) s = reorder_into(e, dyd, dy, pre[UY]);
  }
  if (!s && data) s = prim_run(e, &e->prim[BWD_DATA][fd], pd, pre);
  if (!s && weights) s = prim_run(e, &e->prim[BWD_WEIGHTS][fw], pw, pre);
  if (sw) cpu_scratch_free(sw, nw);
  if (pre[UY]) cpu_scratch_free(pre[UY], npre);
  entry_destroy(&tmp);
  conv_leave(team, n);
  return s;
}
