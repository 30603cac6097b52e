/*
** conv_peer.c -- the peer of conv.lua's ember rows: oneDNN's own
** convolution primitives, forward + backward-data + backward-weights (with
** the bias gradient), each created once on the layouts oneDNN prefers
** (format_tag_any, so no reorders are timed) and then executed. This is
** the ceiling of any framework that calls them: ember's kernel route adds
** the reorders from and to NCHW and its autograd around them.
** usage: ember_conv_peer B CIN COUT K STRIDE PADDING H fp32|bf16 REPEATS THREADS
**   -> one line "onednn <best ms of a step> <fwd impl>/<bwd-data impl>/<bwd-weights impl>"
*/
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                  \
  do {                                                            \
    dnnl_status_t st_ = (x);                                      \
    if (st_ != dnnl_success) {                                    \
      fprintf(stderr, "oneDNN call failed (%d): %s\n", st_, #x);  \
      exit(1);                                                    \
    }                                                             \
  } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A buffer of the layout primitive pd wants for query q, filled with a small value. */
static dnnl_memory_t mem(dnnl_primitive_desc_t pd, dnnl_query_t q, int i) {
  dnnl_memory_t m;
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, i);
  CHECK(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  void *p;
  CHECK(dnnl_memory_get_data_handle(m, &p));
  memset(p, 0x3c, dnnl_memory_desc_get_size(md)); /* ~0.01 as float32 and bfloat16 */
  return m;
}

static const char *impl(dnnl_primitive_desc_t pd) {
  const char *s = "?";
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 11) {
    fprintf(stderr, "usage: ember_conv_peer B CIN COUT K STRIDE PADDING H fp32|bf16 REPEATS THREADS\n");
    return 2;
  }
  const long B = atol(argv[1]), C = atol(argv[2]), O = atol(argv[3]), K = atol(argv[4]);
  const long S = atol(argv[5]), P = atol(argv[6]), H = atol(argv[7]);
  const dnnl_data_type_t t = strcmp(argv[8], "bf16") == 0 ? dnnl_bf16 : dnnl_f32;
  const int reps = atoi(argv[9]);
  omp_set_num_threads(atoi(argv[10]));
  const long Ho = (H + 2 * P - K) / S + 1;
  CHECK(dnnl_engine_create(&eng, dnnl_cpu, 0));
  CHECK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
  dnnl_dims_t xd = {B, C, H, H}, wd = {O, C, K, K}, yd = {B, O, Ho, Ho}, bd = {O};
  dnnl_dims_t st = {S, S}, dl = {0, 0}, pad = {P, P};
  dnnl_memory_desc_t x, w, y, b;
  CHECK(dnnl_memory_desc_init_by_tag(&x, 4, xd, t, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&w, 4, wd, t, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&y, 4, yd, t, dnnl_format_tag_any));
  CHECK(dnnl_memory_desc_init_by_tag(&b, 1, bd, t, dnnl_x));
  dnnl_convolution_desc_t fd, dd, wdsc;
  dnnl_primitive_desc_t fpd, dpd, wpd;
  CHECK(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct,
                                                   &x, &w, &b, &y, st, dl, pad, pad));
  CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL));
  CHECK(dnnl_dilated_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &w, &y,
                                                         st, dl, pad, pad));
  CHECK(dnnl_primitive_desc_create(&dpd, &dd, NULL, eng, fpd));
  CHECK(dnnl_dilated_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &x, &w,
                                                            &b, &y, st, dl, pad, pad));
  CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, eng, fpd));
  dnnl_primitive_t fp, dp, wp;
  CHECK(dnnl_primitive_create(&fp, fpd));
  CHECK(dnnl_primitive_create(&dp, dpd));
  CHECK(dnnl_primitive_create(&wp, wpd));
  dnnl_exec_arg_t fa[4] = {{DNNL_ARG_SRC, mem(fpd, dnnl_query_src_md, 0)},
                           {DNNL_ARG_WEIGHTS, mem(fpd, dnnl_query_weights_md, 0)},
                           {DNNL_ARG_BIAS, mem(fpd, dnnl_query_weights_md, 1)},
                           {DNNL_ARG_DST, mem(fpd, dnnl_query_dst_md, 0)}};
  dnnl_exec_arg_t da[3] = {{DNNL_ARG_DIFF_DST, mem(dpd, dnnl_query_diff_dst_md, 0)},
                           {DNNL_ARG_WEIGHTS, mem(dpd, dnnl_query_weights_md, 0)},
                           {DNNL_ARG_DIFF_SRC, mem(dpd, dnnl_query_diff_src_md, 0)}};
  dnnl_exec_arg_t wa[4] = {{DNNL_ARG_DIFF_DST, mem(wpd, dnnl_query_diff_dst_md, 0)},
                           {DNNL_ARG_SRC, mem(wpd, dnnl_query_src_md, 0)},
                           {DNNL_ARG_DIFF_WEIGHTS, mem(wpd, dnnl_query_diff_weights_md, 0)},
                           {DNNL_ARG_DIFF_BIAS, mem(wpd, dnnl_query_diff_weights_md, 1)}};
  double best = 1e30;
  const double warm0 = now();
  /* warm-up steps (at least two and 0.3 s, as conv.lua), then reps timed */
  for (int r = 0, timed = 0; timed < reps; r++) {
    const bool warm = r < 2 || now() - warm0 < 0.3;
    const double t0 = now();
    CHECK(dnnl_primitive_execute(fp, strm, 4, fa));
    CHECK(dnnl_primitive_execute(dp, strm, 3, da));
    CHECK(dnnl_primitive_execute(wp, strm, 4, wa));
    CHECK(dnnl_stream_wait(strm));
    if (!warm) {
      timed++;
      if (now() - t0 < best) best = now() - t0;
    }
  }
  printf("onednn %.3f %s/%s/%s\n", best * 1e3, impl(fpd), impl(dpd), impl(wpd));
  return 0;
}
