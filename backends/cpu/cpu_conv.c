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
** bfloat16 accumulates in float32 inside oneDNN; the bias and the weight
** and bias gradients are bfloat16, as under PyTorch's autocast.
*/
#include "cpu_dnnl.h"

#include <pthread.h>

#define WHO "cpu conv2d"

/* Shapes kept; past this, a call creates its primitives and destroys them
** (correct, only slower). Entries are never evicted, so none is destroyed
** while another thread runs it. */
#define CONV_CACHE_MAX 128

/* The tensors of a call, in ember's layout: x, w, y, b. */
enum { UX, UW, UY, UB, NUSER };
/* The three primitives. */
enum { FWD, BWD_DATA, BWD_WEIGHTS, NPRIM };

/* One argument of a primitive: which tensor, its layout in the primitive
** and the reorder between that and ember's (NULL when they are the same). */
typedef struct conv_io {
  int arg;       /* DNNL_ARG_* */
  int user;      /* UX.. */
  bool out;      /* written by the primitive */
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
  dnnl_memory_desc_t user[NUSER];
  dnnl_primitive_desc_t fwd_pd; /* the backward primitives' hint */
  conv_prim prim[NPRIM];
} conv_entry;

static pthread_mutex_t conv_lock = PTHREAD_MUTEX_INITIALIZER;
static conv_entry conv_cache[CONV_CACHE_MAX];
static int conv_cached;

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

/* The convolution descriptor of primitive k, on the layouts oneDNN picks. */
static dnnl_status_t conv_desc(const conv_entry *e, int k, dnnl_convolution_desc_t *d) {
  const em_conv_args *a = &e->key;
  dnnl_memory_desc_t x, w, y;
  dnnl_status_t st;
  const dnnl_data_type_t t = a->dtype == EM_BF16 ? dnnl_bf16 : dnnl_f32;
  if ((st = dnnl_memory_desc_init_by_tag(&x, 4, e->user[UX].dims, t, dnnl_format_tag_any)) ||
      (st = dnnl_memory_desc_init_by_tag(&y, 4, e->user[UY].dims, t, dnnl_format_tag_any)) ||
      (st = dnnl_memory_desc_init_by_tag(&w, e->user[UW].ndims, e->user[UW].dims, t,
                                         dnnl_format_tag_any)))
    return st;
  /* oneDNN's dilation counts the gaps: 0 is a dense kernel */
  dnnl_dims_t s = {a->stride[0], a->stride[1]}, dl = {a->dilation[0] - 1, a->dilation[1] - 1};
  dnnl_dims_t pl = {a->pad[0], a->pad[2]}, pr = {a->pad[1], a->pad[3]};
  const dnnl_memory_desc_t *b = e->bias ? &e->user[UB] : NULL;
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

/* Primitive k of e and its reorders; p stays NULL when oneDNN has no
** kernel for it (remembered by `tried`). Under conv_lock. */
static em_status prim_create(conv_entry *e, int k, dnnl_engine_t eng) {
  conv_prim *cp = &e->prim[k];
  cp->tried = true;
  dnnl_convolution_desc_t d;
  dnnl_status_t st = conv_desc(e, k, &d);
  if (st) return cpu_dnnl_fail(WHO, "convolution_desc_init", st);
  dnnl_primitive_desc_t pd = NULL;
  st = dnnl_primitive_desc_create(&pd, &d, NULL, eng, k == FWD ? NULL : e->fwd_pd);
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
    dnnl_primitive_desc_t rpd = NULL;
    if ((st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, NULL)) ||
        (st = dnnl_primitive_create(&io->reorder, rpd)))
      s = cpu_dnnl_fail(WHO, "reorder", st);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
  }
  if (!s && (st = dnnl_primitive_create(&cp->p, pd))) s = cpu_dnnl_fail(WHO, "primitive_create", st);
  if (k == FWD && !s) e->fwd_pd = pd;
  else dnnl_primitive_desc_destroy(pd);
  return s;
}

static void entry_destroy(conv_entry *e) {
  for (int k = 0; k < NPRIM; k++) {
    conv_prim *cp = &e->prim[k];
    for (int i = 0; i < cp->nio; i++)
      if (cp->io[i].reorder) dnnl_primitive_destroy(cp->io[i].reorder);
    if (cp->p) dnnl_primitive_destroy(cp->p);
  }
  if (e->fwd_pd) dnnl_primitive_desc_destroy(e->fwd_pd);
  memset(e, 0, sizeof *e);
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
  for (int i = 0; i < conv_cached && !e; i++)
    if (key_eq(&conv_cache[i].key, conv_cache[i].bias, a, bias)) e = &conv_cache[i];
  if (!e) {
    e = conv_cached < CONV_CACHE_MAX ? &conv_cache[conv_cached++] : tmp;
    memset(e, 0, sizeof *e);
    e->key = *a;
    e->bias = bias;
    dnnl_status_t st = user_mds(e);
    if (st) s = cpu_dnnl_fail(WHO, "memory_desc_init", st);
  }
  want |= 1u << FWD;
  bool have = true;
  for (int k = 0; k < NPRIM && !s; k++) {
    if (!(want >> k & 1)) continue;
    if (!e->prim[k].tried && (k == FWD || e->prim[FWD].p)) s = prim_create(e, k, eng);
    have = have && e->prim[k].p;
  }
  pthread_mutex_unlock(&conv_lock);
  if (s) return s;
  if (!have)
    return em_error(EM_ERR_UNSUPPORTED, WHO " (oneDNN): no kernel for %s with these sizes on this CPU",
                    cpu_dtype_name(a->dtype));
  *out = e;
  return EM_OK;
}

/* Runs primitive k of e on ember-layout buffers ptr[UX..UB], reordering each
** argument whose layout differs into scratch memory (inputs before,
** outputs after); an input whose pre[] is set is already in the
** primitive's layout there. */
static em_status prim_run(const conv_entry *e, int k, void *const ptr[NUSER],
                          void *const pre[NUSER]) {
  const conv_prim *cp = &e->prim[k];
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
    if (io->reorder && !io->out && data == tmp[i]) {
      dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, umem[i]}, {DNNL_ARG_TO, mem[i]}};
      s = cpu_dnnl_execute(WHO, io->reorder, 2, r);
    }
  }
  if (st) s = cpu_dnnl_fail(WHO, "memory_create", st);
  if (!s) s = cpu_dnnl_execute(WHO, cp->p, cp->nio, args);
  for (int i = 0; i < cp->nio && !s; i++) {
    if (!cp->io[i].reorder || !cp->io[i].out) continue;
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, mem[i]}, {DNNL_ARG_TO, umem[i]}};
    s = cpu_dnnl_execute(WHO, cp->io[i].reorder, 2, r);
  }
  for (int i = 0; i < 4; i++) {
    if (mem[i]) dnnl_memory_destroy(mem[i]);
    if (umem[i]) dnnl_memory_destroy(umem[i]);
    if (tmp[i]) cpu_scratch_free(tmp[i], tmp_n[i]);
  }
  return s;
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
  else {
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    s = cpu_dnnl_execute(WHO, io->reorder, 2, r);
  }
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

em_status cpu_conv2d(int device, const em_conv_args *a, void *y, const void *x, const void *w,
                     const void *b) {
  em_status s = conv_check(device, a);
  if (s) return s;
  conv_entry tmp = {0}, *e = NULL;
  s = entry_get(a, b != NULL, 1u << FWD, &e, &tmp);
  void *ptr[NUSER] = {(void *)x, (void *)w, y, (void *)b};
  if (!s) s = prim_run(e, FWD, ptr, NULL);
  entry_destroy(&tmp);
  return s;
}

/* The io of primitive k that reads tensor u, or NULL. */
static const conv_io *io_of(const conv_entry *e, int k, int u) {
  for (int i = 0; i < e->prim[k].nio; i++)
    if (e->prim[k].io[i].user == u && !e->prim[k].io[i].out) return &e->prim[k].io[i];
  return NULL;
}

em_status cpu_conv2d_backward(int device, const em_conv_args *a, void *dx, void *dw, void *db,
                              const void *dy, const void *x, const void *w) {
  em_status s = conv_check(device, a);
  if (s) return s;
  const bool data = dx != NULL, weights = dw || db;
  if (!data && !weights) return EM_OK;
  conv_entry tmp = {0}, *e = NULL;
  s = entry_get(a, db != NULL, (data ? 1u << BWD_DATA : 0) | (weights ? 1u << BWD_WEIGHTS : 0), &e,
                &tmp);
  if (s) {
    entry_destroy(&tmp);
    return s;
  }
  /* both read dy: reordered once when they want the same layout */
  void *pre[NUSER] = {0}, *sw = NULL;
  size_t npre = 0, nw = 0;
  const conv_io *dyd = data ? io_of(e, BWD_DATA, UY) : NULL;
  const conv_io *dyw = weights ? io_of(e, BWD_WEIGHTS, UY) : NULL;
  if (dyd && dyw && dyd->reorder && dnnl_memory_desc_equal(&dyd->md, &dyw->md)) {
    npre = dnnl_memory_desc_get_size(&dyd->md);
    if ((pre[UY] = cpu_scratch_alloc(npre))) s = reorder_into(e, dyd, dy, pre[UY]);
  }
  if (!s && data) {
    void *ptr[NUSER] = {dx, (void *)w, (void *)dy, NULL};
    s = prim_run(e, BWD_DATA, ptr, pre);
  }
  if (!s && weights) {
    /* one primitive writes both: the one not wanted goes to scratch */
    nw = (size_t)(a->O * (a->C / a->groups) * a->kh * a->kw) * cpu_dtype_size(a->dtype);
    if (!dw && !(sw = cpu_scratch_alloc(nw)))
      s = em_error(EM_ERR_OOM, WHO ": out of memory for a %zu-byte weight gradient", nw);
    void *ptr[NUSER] = {(void *)x, dw ? dw : sw, (void *)dy, db};
    if (!s) s = prim_run(e, BWD_WEIGHTS, ptr, pre);
  }
  if (sw) cpu_scratch_free(sw, nw);
  if (pre[UY]) cpu_scratch_free(pre[UY], npre);
  entry_destroy(&tmp);
  return s;
}
