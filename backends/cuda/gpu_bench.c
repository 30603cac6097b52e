/*
** gpu_bench.c -- the numbers scripts/gpu_check.sh prints (GPU only).
**
**   gpu_bench [PLUGIN.so]
**
** matmul: the plugin's gemm (row-major, through its stream and cuBLAS
**   handle) against the same cuBLAS call made directly, square sizes,
**   float32 and bfloat16, in TFLOP/s;
** attention: the fused forward and backward kernels at B=1, H=16, d=64,
**   L = 1K, 4K, 16K, non-causal, float32 and bfloat16, in milliseconds.
** variant: the same kernels with each kind of declared term at L = 1K,
**   4K: Shaw with key and value tables clipped at 16 (em_attention_args
**   rel_k, rel_v and their gradients), and the terms the core lowers to
**   ember_expr.h programs (em_attention_args ABI 6), built here as such
**   programs: a 256 + 256 window and blocks of 64 with one neighbour and
**   64 global tokens as mask programs with their block maps (16-position
**   cells), ALiBi and a T5 table of 32 buckets as score programs (the
**   table a learned capture, its gradient included). And two traced
**   variants (as the Lua variants plugins/flex/softcap.lua and
**   document.lua lower to): softcap (cap 50, with its score gradient
**   program) and a document mask of 8 equal documents with its block map
**   (tiles across documents skipped).
** Output lines are "matmul DTYPE N EMBER_TFLOPS CUBLAS_TFLOPS",
** "attention DTYPE L FWD_MS BWD_MS" and "variant DTYPE L NAME FWD_MS
** BWD_MS", for the script to tabulate. Exit 77 when the plugin refuses to
** load (no device).
*/
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember_attention.h"
#include "ember_backend.h"
#include "ember_expr.h"
#include "ember_plugin.h"

static const em_backend *be;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *dev_random(em_dtype dt, int64_t n) {
  void *p = NULL;
  if (be->alloc(0, (size_t)n * em_dtype_size(dt), &p)) return NULL;
  em_kview v;
  memset(&v, 0, sizeof v);
  v.data = p;
  v.dtype = dt;
  v.ndim = 1;
  v.shape[0] = n;
  v.stride[0] = 1;
  if (be->random(0, EM_RAND_UNIFORM, &v, -1, 1, 7, (uint64_t)n)) return NULL;
  return p;
}

static int bench_matmul(em_dtype dt, int64_t n) {
  size_t bytes = (size_t)(n * n) * em_dtype_size(dt);
  void *a = dev_random(dt, n * n), *b = dev_random(dt, n * n), *c = dev_random(dt, n * n);
  if (!a || !b || !c) {
    printf("# matmul %s %lld: %s\n", em_dtype_name(dt), (long long)n, em_error_message());
    return 1;
  }
  int iters = n <= 2048 ? 50 : 10;
  double flop = 2.0 * (double)n * (double)n * (double)n * iters;
  /* ember: warm up, then time whole batches of calls */
  for (int i = 0; i < 2; i++) be->gemm(0, dt, false, false, n, n, n, 1, a, n, 0, b, n, 0, 0, c, n, 0, 1);
  be->synchronize(0);
  double t0 = now();
  em_status s = EM_OK;
  for (int i = 0; i < iters && !s; i++)
    s = be->gemm(0, dt, false, false, n, n, n, 1, a, n, 0, b, n, 0, 0, c, n, 0, 1);
  s = s ? s : be->synchronize(0);
  double ember = flop / (now() - t0) / 1e12;
  /* cuBLAS itself, the same column-major call the plugin makes */
  cublasHandle_t h;
  cublasCreate(&h);
  float one = 1, zero = 0;
  double ref = 0;
  for (int rep = 0; rep < 2; rep++) {
    if (rep) t0 = now();
    for (int i = 0; i < (rep ? iters : 2); i++) {
      if (dt == EM_F32)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, b, (int)n, a,
                    (int)n, &zero, c, (int)n);
      else
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n, &one, b, CUDA_R_16BF,
                     (int)n, a, CUDA_R_16BF, (int)n, &zero, c, CUDA_R_16BF, (int)n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    cudaDeviceSynchronize();
  }
  ref = flop / (now() - t0) / 1e12;
  cublasDestroy(h);
  be->free(0, a, bytes), be->free(0, b, bytes), be->free(0, c, bytes);
  if (s) {
    printf("# matmul %s %lld failed: %s\n", em_dtype_name(dt), (long long)n, em_error_message());
    return 1;
  }
  printf("matmul %s %lld %.2f %.2f\n", em_dtype_name(dt), (long long)n, ember, ref);
  fflush(stdout);
  return 0;
}

static int bench_attention(em_dtype dt, int64_t L) {
  const int64_t B = 1, H = 16, d = 64, n = B * H * L * d;
  size_t bytes = (size_t)n * em_dtype_size(dt);
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = dt;
  a.B = B, a.H = H, a.Lq = L, a.Lk = L, a.dk = d, a.dv = d;
  a.q = dev_random(dt, n), a.k = dev_random(dt, n), a.v = dev_random(dt, n);
  a.dout = dev_random(dt, n);
  a.out = dev_random(dt, n), a.dq = dev_random(dt, n), a.dk_ = dev_random(dt, n), a.dv_ = dev_random(dt, n);
  void *lse = NULL;
  be->alloc(0, (size_t)(B * H * L) * sizeof(float), &lse);
  a.lse = lse;
  a.scale = 0.125;
  if (!a.q || !a.k || !a.v || !a.dout || !a.out || !a.dq || !a.dk_ || !a.dv_ || !lse) {
    printf("# attention %s %lld: %s\n", em_dtype_name(dt), (long long)L, em_error_message());
    return 1;
  }
  int iters = L <= 4096 ? 10 : 3;
  em_status s = be->attention_forward(0, &a);
  s = s ? s : be->attention_backward(0, &a);
  s = s ? s : be->synchronize(0);
  double t0 = now();
  for (int i = 0; i < iters && !s; i++) s = be->attention_forward(0, &a);
  s = s ? s : be->synchronize(0);
  double t1 = now();
  for (int i = 0; i < iters && !s; i++) s = be->attention_backward(0, &a);
  s = s ? s : be->synchronize(0);
  double t2 = now();
  be->free(0, (void *)a.q, bytes), be->free(0, (void *)a.k, bytes), be->free(0, (void *)a.v, bytes);
  be->free(0, (void *)a.dout, bytes), be->free(0, a.out, bytes), be->free(0, a.dq, bytes);
  be->free(0, a.dk_, bytes), be->free(0, a.dv_, bytes);
  be->free(0, lse, (size_t)(B * H * L) * sizeof(float));
  if (s) {
    printf("# attention %s %lld failed: %s\n", em_dtype_name(dt), (long long)L, em_error_message());
    return 1;
  }
  printf("attention %s %lld %.3f %.3f\n", em_dtype_name(dt), (long long)L,
         1e3 * (t1 - t0) / iters, 1e3 * (t2 - t1) / iters);
  fflush(stdout);
  return 0;
}

/* A host array on the device (NULL on failure). */
static void *dev_copy(const void *host, size_t bytes) {
  void *p = NULL;
  if (be->alloc(0, bytes, &p)) return NULL;
  if (be->copy_h2d(0, p, host, bytes)) {
    be->free(0, p, bytes);
    return NULL;
  }
  return p;
}

/* The variants: Shaw's terms as em_attention_args fields, expanded from an
** em_attn_decl with the core's functions; the others as programs. */
enum { V_STANDARD, V_WINDOW, V_BLOCKS, V_ALIBI, V_T5, V_SHAW, V_SOFTCAP, V_DOCUMENT, V_COUNT };
static const char *const VARIANT_NAME[V_COUNT] = {"standard", "window", "blocks", "alibi", "t5", "shaw",
                                                  "softcap", "document"};

/* A program being built: append instructions, each returns its register
** (unused operands -1). */
typedef struct prog {
  em_xins ins[32];
  int n;
} prog;
static int pi(prog *p, int op, int cap, int a0, int a1, double k) {
  em_xins x = {op, cap, {a0, a1, -1, -1}, k};
  p->ins[p->n] = x;
  return p->n++;
}
#define OP0(p, o) pi(p, EM_XOP_##o, 0, -1, -1, 0)
#define OP1(p, o, a) pi(p, EM_XOP_##o, 0, a, -1, 0)
#define OP2(p, o, a, b) pi(p, EM_XOP_##o, 0, a, b, 0)
#define CST(p, k) pi(p, EM_XOP_CONST, 0, -1, -1, k)

/* The programs of a variant (NULL where it has none):
**   softcap: 50 * tanh(s / 50), its gradient program out[1] = 1 - tanh^2;
**   alibi: s - slope[h] |k - q| (capture 0: the slopes, float [H]);
**   t5: s + table[rows[k - q + L] + 1, h] (capture 0: the rows, int64
**     [2L - 1], 0-based; capture 1: the learned table, float [n, H]),
**     gradient program out[1] = d/ds = 1, out[2] = d/d table = 1;
**   window: q - 256 <= k <= q + 256; blocks: |(k-1)//64 - (q-1)//64| <= 1
**     or q or k <= 64;
**   document: doc[b][q] == doc[b][k] (capture 0, int64 [B, L]). */
static em_status programs(int kind, int64_t L, em_expr **score, em_expr **grad, em_expr **mask) {
  *score = *grad = *mask = NULL;
  prog p = {.n = 0};
  if (kind == V_SOFTCAP) {
    const int s = OP0(&p, S), t = OP1(&p, TANH, OP2(&p, MUL, s, CST(&p, 1.0 / 50)));
    const int out = OP2(&p, MUL, CST(&p, 50), t);
    const int d = OP2(&p, SUB, CST(&p, 1), OP2(&p, MUL, t, t));
    const int32_t outs[2] = {out, d};
    em_status st = em_expr_new(score, out + 1, p.ins, 1, outs, 0, NULL, 0, NULL);
    return st ? st : em_expr_new(grad, p.n, p.ins, 2, outs, 0, NULL, 0, NULL);
  }
  if (kind == V_ALIBI || kind == V_T5) {
    const int s = OP0(&p, S), h = OP0(&p, H), q = OP0(&p, Q), k = OP0(&p, K), r = OP2(&p, SUB, k, q);
    int out, tab = -1;
    if (kind == V_ALIBI) {
      out = OP2(&p, SUB, s, OP2(&p, MUL, pi(&p, EM_XOP_LOAD, 0, h, -1, 0), OP1(&p, ABS, r)));
    } else {
      const int row = pi(&p, EM_XOP_LOAD, 0, OP2(&p, ADD, r, CST(&p, (double)L)), -1, 0);
      tab = pi(&p, EM_XOP_LOAD, 1, OP2(&p, ADD, row, CST(&p, 1)), h, 0);
      out = OP2(&p, ADD, s, tab);
    }
    const int one = CST(&p, 1);
    const int32_t outs[3] = {out, one, one}, grad_load[1] = {tab};
    const int n_caps = kind == V_ALIBI ? 1 : 2, cap_ndim[2] = {1, 2}, n_grad = kind == V_T5;
    em_status st = em_expr_new(score, out + 1, p.ins, 1, outs, 0, NULL, n_caps, cap_ndim);
    return st ? st : em_expr_new(grad, p.n, p.ins, 2 + n_grad, outs, n_grad, grad_load, n_caps, cap_ndim);
  }
  if (kind == V_WINDOW || kind == V_BLOCKS) {
    const int q = OP0(&p, Q), k = OP0(&p, K);
    int out;
    if (kind == V_WINDOW) {
      out = OP2(&p, AND, OP2(&p, LE, OP2(&p, SUB, q, k), CST(&p, 256)), OP2(&p, LE, OP2(&p, SUB, k, q), CST(&p, 256)));
    } else {
      const int one = CST(&p, 1), b = CST(&p, 64), g = CST(&p, 64);
      const int bq = OP2(&p, IDIV, OP2(&p, SUB, q, one), b), bk = OP2(&p, IDIV, OP2(&p, SUB, k, one), b);
      out = OP2(&p, LE, OP1(&p, ABS, OP2(&p, SUB, bk, bq)), one);
      out = OP2(&p, OR, out, OP2(&p, OR, OP2(&p, LE, q, g), OP2(&p, LE, k, g)));
    }
    const int32_t outs[1] = {out};
    return em_expr_new(mask, p.n, p.ins, 1, outs, 0, NULL, 0, NULL);
  }
  /* document */
  const int b = OP0(&p, B), dq = pi(&p, EM_XOP_LOAD, 0, b, OP0(&p, Q), 0), dk = pi(&p, EM_XOP_LOAD, 0, b, OP0(&p, K), 0);
  const int32_t outs[1] = {OP2(&p, EQ, dq, dk)};
  const int ndim[1] = {2};
  return em_expr_new(mask, p.n, p.ins, 1, outs, 0, NULL, 1, ndim);
}

/* The block map of a mask program of positions alone (no capture) over
** L x L at cells of g: each cell from the program at its elements, as the
** core makes it. NULL when out of memory. */
static uint8_t *position_map(const em_expr *m, int64_t L, int64_t g) {
  const int64_t nc = (L + g - 1) / g;
  uint8_t *map = malloc((size_t)(nc * nc));
  double regs[32];
  for (int64_t iq = 0; map && iq < nc; iq++)
    for (int64_t jk = 0; jk < nc; jk++) {
      bool any = false, all = true;
      for (int64_t i = iq * g; i < (iq + 1) * g && i < L && (all || !any); i++)
        for (int64_t j = jk * g; j < (jk + 1) * g && j < L; j++) {
          const bool ok = em_expr_eval(m, NULL, 0, 1, 1, (double)(i + 1), (double)(j + 1), 0, regs) != 0;
          any = any || ok, all = all && ok;
        }
      map[iq * nc + jk] = !any ? EM_XTILE_EMPTY : all ? EM_XTILE_FULL : EM_XTILE_PARTIAL;
    }
  return map;
}

static int bench_variant(em_dtype dt, int64_t L, int kind) {
  const int64_t B = 1, H = 16, d = 64, n = B * H * L * d, nr = 2 * L - 1;
  const size_t bytes = (size_t)n * em_dtype_size(dt), es = em_dtype_size(dt);
  em_attn_decl dc;
  em_attn_decl_init(&dc);
  if (kind == V_T5)
    dc.bias = EM_ATTN_BIAS_TABLE, dc.rel = EM_ATTN_REL_T5, dc.num_buckets = 32, dc.max_distance = 128,
    dc.bidirectional = true, dc.table_param = 0;
  if (kind == V_SHAW)
    dc.bias = EM_ATTN_BIAS_SHAW, dc.rel = EM_ATTN_REL_CLIP, dc.max_distance = 16, dc.rel_k_param = 0,
    dc.rel_v_param = 1;
  const int64_t nrel = kind == V_T5 || kind == V_SHAW ? em_attn_decl_rows(&dc) : 0;
  em_attention_args a;
  memset(&a, 0, sizeof a);
  a.dtype = dt;
  a.B = B, a.H = H, a.Lq = L, a.Lk = L, a.dk = d, a.dv = d;
  a.scale = 0.125;
  void *buf[16] = {NULL};
  size_t len[16] = {0};
  int nb = 0, bad = 0;
#define KEEP(p, sz) (len[nb] = (sz), buf[nb++] = (p), bad |= (p) == NULL, (p))
  a.q = KEEP(dev_random(dt, n), bytes), a.k = KEEP(dev_random(dt, n), bytes);
  a.v = KEEP(dev_random(dt, n), bytes), a.dout = KEEP(dev_random(dt, n), bytes);
  a.out = KEEP(dev_random(dt, n), bytes), a.dq = KEEP(dev_random(dt, n), bytes);
  a.dk_ = KEEP(dev_random(dt, n), bytes), a.dv_ = KEEP(dev_random(dt, n), bytes);
  a.lse = KEEP(dev_random(EM_F32, B * H * L), (size_t)(B * H * L) * sizeof(float));
  /* the table rows of r = j - i at r + L - 1 (Shaw's rel_row, t5's capture) */
  void *rows_dev = NULL;
  if (nrel > 0) {
    int64_t *rows = malloc((size_t)nr * sizeof *rows);
    for (int64_t i = 0; rows && i < nr; i++) rows[i] = em_attn_rel_row(&dc, i - (L - 1));
    rows_dev = rows ? KEEP(dev_copy(rows, (size_t)nr * sizeof *rows), (size_t)nr * sizeof *rows) : NULL;
    bad |= rows == NULL;
    free(rows);
  }
  if (kind == V_SHAW) {
    a.rel_row = rows_dev, a.n_rel = nrel;
    a.rel_k = KEEP(dev_random(dt, nrel * d), (size_t)(nrel * d) * es);
    a.rel_v = KEEP(dev_random(dt, nrel * d), (size_t)(nrel * d) * es);
    a.d_rel_k = KEEP(dev_random(dt, nrel * d), (size_t)(nrel * d) * es);
    a.d_rel_v = KEEP(dev_random(dt, nrel * d), (size_t)(nrel * d) * es);
  }
  /* the programs, their captures (float ones in float32, the compute
  ** dtype) and the masks' block maps (16-position cells; for the document
  ** mask, documents of L/8 positions are whole cells, so a cell is full
  ** inside a document and empty across two) */
  em_expr *xs = NULL, *xg = NULL, *xm = NULL;
  em_xcap xcap[2];
  memset(xcap, 0, sizeof xcap);
  void *d_caps[2] = {NULL, NULL};
  const bool traced = kind != V_STANDARD && kind != V_SHAW;
  em_status ps = traced ? programs(kind, L, &xs, &xg, &xm) : EM_OK;
  bad |= ps != EM_OK;
  a.score_mod = xs, a.score_grad = xg, a.mask_mod = xm;
  const int64_t g = 16, nc = (L + g - 1) / g;
  uint8_t *map = NULL;
  if (kind == V_ALIBI) {
    float sl[16];
    for (int64_t h = 0; h < H; h++) sl[h] = (float)em_attn_alibi_slope(h, H);
    xcap[0] = (em_xcap){KEEP(dev_copy(sl, sizeof sl), sizeof sl), EM_F32, 1, {H}, "slopes"};
    a.n_caps = 1;
  }
  if (kind == V_T5) {
    xcap[0] = (em_xcap){rows_dev, EM_I64, 1, {nr}, "rows"};
    xcap[1] = (em_xcap){KEEP(dev_random(EM_F32, nrel * H), (size_t)(nrel * H) * sizeof(float)), EM_F32, 2,
                        {nrel, H}, "table"};
    d_caps[1] = KEEP(dev_random(EM_F32, nrel * H), (size_t)(nrel * H) * sizeof(float));
    a.n_caps = 2, a.d_caps = d_caps;
  }
  if ((kind == V_WINDOW || kind == V_BLOCKS) && !ps) {
    map = position_map(xm, L, g);
    bad |= map == NULL;
  }
  if (kind == V_DOCUMENT && !ps) {
    int64_t *ids = malloc((size_t)L * sizeof *ids);
    map = malloc((size_t)(nc * nc));
    for (int64_t p = 0; ids && p < L; p++) ids[p] = p * 8 / L + 1;
    for (int64_t iq = 0; ids && map && iq < nc; iq++)
      for (int64_t jk = 0; jk < nc; jk++)
        map[iq * nc + jk] = ids[iq * g] == ids[jk * g] ? EM_XTILE_FULL : EM_XTILE_EMPTY;
    xcap[0].data = ids ? KEEP(dev_copy(ids, (size_t)L * sizeof *ids), (size_t)L * sizeof *ids) : NULL;
    xcap[0].dtype = EM_I64, xcap[0].ndim = 2, xcap[0].shape[0] = 1, xcap[0].shape[1] = L, xcap[0].name = "doc";
    a.n_caps = 1;
    bad |= !ids || !map;
    free(ids);
  }
  a.caps = a.n_caps ? xcap : NULL;
  if (map) {
    a.block_map = KEEP(dev_copy(map, (size_t)(nc * nc)), (size_t)(nc * nc));
    a.map_grain = g, a.map_nq = nc, a.map_nk = nc, a.map_sb = 0, a.map_sh = 0;
    free(map);
  }
#undef KEEP
  em_status s = bad ? (ps ? ps : EM_ERR_OOM) : EM_OK;
  const int iters = L <= 1024 ? 10 : 5;
  double t0 = 0, t1 = 0, t2 = 0;
  if (!s) {
    s = be->attention_forward(0, &a);
    s = s ? s : be->attention_backward(0, &a);
    s = s ? s : be->synchronize(0);
    t0 = now();
    for (int i = 0; i < iters && !s; i++) s = be->attention_forward(0, &a);
    s = s ? s : be->synchronize(0);
    t1 = now();
    for (int i = 0; i < iters && !s; i++) s = be->attention_backward(0, &a);
    s = s ? s : be->synchronize(0);
    t2 = now();
  }
  for (int i = 0; i < nb; i++)
    if (buf[i]) be->free(0, buf[i], len[i]);
  em_expr_free(xs), em_expr_free(xg), em_expr_free(xm);
  if (s) {
    printf("# variant %s %lld %s failed: %s\n", em_dtype_name(dt), (long long)L, VARIANT_NAME[kind],
           em_error_message());
    return 1;
  }
  printf("variant %s %lld %s %.3f %.3f\n", em_dtype_name(dt), (long long)L, VARIANT_NAME[kind],
         1e3 * (t1 - t0) / iters, 1e3 * (t2 - t1) / iters);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : EMBER_PLUGIN_BUILD_DIR "/ember_backend_cuda.so";
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  em_plugin_init_fn init = dl ? (em_plugin_init_fn)dlsym(dl, EM_PLUGIN_INIT_SYMBOL) : NULL;
  char why[512] = "";
  be = init ? init(why, sizeof why) : NULL;
  if (!be) {
    printf("SKIP: %s did not load: %s\n", path, dl ? why : dlerror());
    return 77;
  }
  int bad = 0;
  const int64_t sizes[3] = {1024, 4096, 8192}, lens[3] = {1024, 4096, 16384};
  for (int i = 0; i < 3; i++) bad += bench_matmul(EM_F32, sizes[i]);
  for (int i = 0; i < 3; i++) bad += bench_matmul(EM_BF16, sizes[i]);
  for (int i = 0; i < 3; i++) bad += bench_attention(EM_F32, lens[i]);
  for (int i = 0; i < 3; i++) bad += bench_attention(EM_BF16, lens[i]);
  const em_dtype vdt[2] = {EM_F32, EM_BF16};
  const int64_t vlen[2] = {1024, 4096};
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < V_COUNT; k++) bad += bench_variant(vdt[t], vlen[i], k);
  be->empty_cache(0);
  return bad ? 1 : 0;
}
