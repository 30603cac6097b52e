/*
** cpu_bgemm_amx.c -- cpu_bgemm's blocks on AMX tiles: TDPBF16PS multiplies
** a 16 x 32 bfloat16 tile of A by a 32 x 16 one of B into a 16 x 16
** float32 tile of C, 16 times the work of one vdpbf16ps.
**
** The layouts are cpu_bgemm.c's: B packed as pairs along k, Bp[(p * npad
** + j) * 2 + t] = op(B)(2p + t, j), is what a B tile wants (its row p holds
** pair p of 16 columns, 64 bytes); A is packed here as rows of pairs,
** zero-padded to whole tiles (16 rows, 16 pairs). C's tiles go through a
** float32 buffer to the caller's alpha, beta and edges.
**
** No machine this project has run on exposes AMX, so the instructions
** themselves have never executed here. The driver is written once
** (cpu_bgemm_amx_tmpl.h) and compiled twice: on the instructions, and on
** a C model of them (bga_emu_*: TDPBF16PS as the SDM's pseudocode spells
** it, bfloat16 denormals read as zero), which EMBER_CPU_BF16_DOT=
** amx_emulated runs on any CPU so that the tests check the packing, the
** tiling, the edges and the epilogue; only the tile instructions and
** their configuration are left to a CPU with AMX.
*/
#include "cpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <immintrin.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#define BGA_HW 1
#define BGA_TARGET __attribute__((target("amx-tile,amx-bf16")))
#else
#define BGA_HW 0
#endif

enum { BGA_MAX_ROWS = 64, BGA_MAX_PAIRS = 128 }; /* cpu_bgemm's BG_MC and BG_KC / 2 */

/* op(A) rows [i0, i0+mc) x k [p0, p0+kc) as rows of bfloat16 pairs,
** Ap[i * khp + p] = (op(A)(i, 2p), op(A)(i, 2p+1)), zero past mc rows and
** past k (the tiles are whole). A float32 A is rounded here. */
static void bga_pack_a(uint32_t *Ap, const void *A, bool bf, bool ta, int64_t lda, int64_t i0,
                       int64_t mc, int64_t p0, int64_t kc, int64_t mp, int64_t khp) {
  memset(Ap, 0, (size_t)(mp * khp) * sizeof *Ap);
  for (int64_t i = 0; i < mc; i++)
    for (int64_t q = 0; q < kc; q++) {
      const int64_t at = ta ? (p0 + q) * lda + i0 + i : (i0 + i) * lda + p0 + q;
      const uint16_t h = bf ? ((const uint16_t *)A)[at] : em_f32_to_bf16(((const float *)A)[at]);
      Ap[i * khp + q / 2] |= (uint32_t)h << (16 * (q % 2));
    }
}

/* ---- the C model of the tile instructions ----
** Eight tiles of 16 rows x 64 bytes, in the caller's frame. */
typedef struct bga_emu {
  uint8_t t[8][16][64];
} bga_emu;

static void bga_emu_zero(bga_emu *e, int t) { memset(e->t[t], 0, sizeof e->t[t]); }

static void bga_emu_load(bga_emu *e, int t, const void *p, int64_t stride) {
  for (int r = 0; r < 16; r++) memcpy(e->t[t][r], (const char *)p + r * stride, 64);
}

static void bga_emu_store(const bga_emu *e, int t, void *p, int64_t stride) {
  for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, e->t[t][r], 64);
}

/* A bfloat16 as TDPBF16PS reads it: denormals as zero. */
static float bga_emu_bf16(uint16_t h) { return (h & 0x7f80) ? em_bf16_to_f32(h) : 0.0f; }

/* TDPBF16PS c, a, b: for each row m and pair k, column n takes
** a[m][2k] b[k][2n], then a[m][2k+1] b[k][2n+1] (each product exact in
** float32, each sum rounded). */
static void bga_emu_dp(bga_emu *e, int c, int a, int b) {
  for (int m = 0; m < 16; m++) {
    float tmp[16];
    memcpy(tmp, e->t[c][m], sizeof tmp);
    const uint16_t *ar = (const uint16_t *)e->t[a][m];
    for (int k = 0; k < 16; k++) {
      const uint16_t *br = (const uint16_t *)e->t[b][k];
      for (int n = 0; n < 16; n++) {
        tmp[n] += bga_emu_bf16(ar[2 * k]) * bga_emu_bf16(br[2 * n]);
        tmp[n] += bga_emu_bf16(ar[2 * k + 1]) * bga_emu_bf16(br[2 * n + 1]);
      }
    }
    memcpy(e->t[c][m], tmp, sizeof tmp);
  }
}

/* The driver on the model. */
#define BGA_FN bga_block_emu
#define BGA_ATTR
#define BGA_STATE bga_emu emu_state; bga_emu *const E = &emu_state;
#define BGA_CONFIG() ((void)0)
#define BGA_RELEASE() ((void)0)
#define BGA_ZERO(t) bga_emu_zero(E, t)
#define BGA_LOAD(t, p, s) bga_emu_load(E, t, p, s)
#define BGA_DP(c, a, b) bga_emu_dp(E, c, a, b)
#define BGA_STORE(t, p, s) bga_emu_store(E, t, p, s)
#include "cpu_bgemm_amx_tmpl.h"

#if BGA_HW
/* LDTILECFG's 64 bytes: palette 1, and each tile's rows and bytes a row. */
typedef struct bga_config {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} bga_config;

/* All eight tiles whole: 16 rows of 64 bytes. */
static void bga_config_fill(bga_config *c) {
  memset(c, 0, sizeof *c);
  c->palette = 1;
  for (int t = 0; t < 8; t++) c->colsb[t] = 64, c->rows[t] = 16;
}

/* The driver on the instructions (tile numbers are immediates). */
#define BGA_FN bga_block_hw
#define BGA_ATTR BGA_TARGET
#define BGA_STATE bga_config cfg;
/* the barrier: LDTILECFG's asm tells the compiler of 8 of its 64 bytes */
#define BGA_CONFIG()                      \
  do {                                    \
    bga_config_fill(&cfg);                \
    __asm__ volatile("" ::: "memory");    \
    _tile_loadconfig(&cfg);               \
  } while (0)
#define BGA_RELEASE() _tile_release()
#define BGA_ZERO(t) _tile_zero(t)
#define BGA_LOAD(t, p, s) _tile_loadd(t, p, s)
#define BGA_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define BGA_STORE(t, p, s) _tile_stored(t, p, s)
#include "cpu_bgemm_amx_tmpl.h"

/* Linux hands a process the tile registers' state only when asked. */
#define BGA_ARCH_REQ_XCOMP_PERM 0x1023
#define BGA_XFEATURE_XTILEDATA 18
#endif

#if BGA_HW
/* The self-check's escape from a fault in the tile instructions (a tile
** configuration this CPU refuses): only the checking thread jumps; a fault
** anywhere else gets the default action, as without the handler. */
static _Thread_local sigjmp_buf *bga_escape;

static void bga_fault(int sig) {
  if (bga_escape) siglongjmp(*bga_escape, sig);
  signal(sig, SIG_DFL);
}

/* A 40 x 48 x 70 product (ragged in every dim: partial tiles, a k tail) on
** the tiles and on their C model; true when they agree to float32
** rounding and nothing faulted. The instructions have never run on a
** machine of this project's, so the first process to meet them checks
** them before the attention trusts them. */
static bool bga_selftest(char *why, size_t n) {
  enum { M = 40, N = 48, K = 70, KHP = 48, NPAD = 48 };
  static uint16_t A[M * K], Bp[KHP * NPAD * 2];
  static float hw[M * N], emu[M * N];
  uint32_t r = 12345;
  for (int i = 0; i < M * K; i++) r = r * 1103515245u + 12345u, A[i] = em_f32_to_bf16((float)(r >> 16) / 65536.0f - 0.5f);
  memset(Bp, 0, sizeof Bp);
  for (int p = 0; p < (K + 1) / 2; p++)
    for (int j = 0; j < N; j++)
      for (int t = 0; t < 2 && 2 * p + t < K; t++)
        r = r * 1103515245u + 12345u, Bp[(p * NPAD + j) * 2 + t] = em_f32_to_bf16((float)(r >> 16) / 65536.0f - 0.5f);
  struct sigaction act, old_ill, old_segv, old_bus;
  memset(&act, 0, sizeof act);
  act.sa_handler = bga_fault;
  sigemptyset(&act.sa_mask);
  sigaction(SIGILL, &act, &old_ill), sigaction(SIGSEGV, &act, &old_segv), sigaction(SIGBUS, &act, &old_bus);
  sigjmp_buf escape;
  volatile int sig = sigsetjmp(escape, 1);
  if (!sig) {
    bga_escape = &escape;
    cpu_bgemm_amx_block(false, A, true, false, K, 0, M, 0, K, Bp, N, 1.0f, 0.0f, hw, N);
  }
  bga_escape = NULL;
  sigaction(SIGILL, &old_ill, NULL), sigaction(SIGSEGV, &old_segv, NULL), sigaction(SIGBUS, &old_bus, NULL);
  if (sig) {
    snprintf(why, n, "its self-check faulted (signal %d)", (int)sig);
    return false;
  }
  cpu_bgemm_amx_block(true, A, true, false, K, 0, M, 0, K, Bp, N, 1.0f, 0.0f, emu, N);
  for (int i = 0; i < M * N; i++) {
    const float d = hw[i] - emu[i], tol = 1e-5f * (1.0f + (emu[i] < 0 ? -emu[i] : emu[i]));
    if (!(d <= tol && -d <= tol)) {
      snprintf(why, n, "its self-check gave %g where the model gives %g", (double)hw[i], (double)emu[i]);
      return false;
    }
  }
  return true;
}
#endif

bool cpu_bgemm_amx_usable(char *why, size_t n) {
#if BGA_HW
  /* the tests' way to the self-check where there is no AMX: its
  ** instructions fault, and the check must say so and fall back */
  const char *t = getenv("EMBER_TEST_AMX_SELFTEST");
  if (t && *t == '1') return bga_selftest(why, n);
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  const bool tile = d >> 24 & 1, bf16 = d >> 22 & 1; /* CPUID.(7,0):EDX AMX-TILE, AMX-BF16 */
  if (!tile || !bf16) {
    snprintf(why, n, "no AMX-BF16 on this CPU");
    return false;
  }
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  unsigned lo = 0, hi = 0;
  if (c >> 27 & 1) __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0)); /* OSXSAVE */
  if ((lo >> 17 & 3) != 3) {
    snprintf(why, n, "the OS does not enable the tile state (XCR0)");
    return false;
  }
  if (syscall(SYS_arch_prctl, BGA_ARCH_REQ_XCOMP_PERM, BGA_XFEATURE_XTILEDATA) != 0) {
    snprintf(why, n, "Linux refused the tile state (arch_prctl)");
    return false;
  }
  return bga_selftest(why, n);
#else
  snprintf(why, n, "not an x86-64 Linux build");
  return false;
#endif
}

void cpu_bgemm_amx_block(bool emulated, const void *A, bool a_bf16, bool ta, int64_t lda,
                         int64_t i0, int64_t mc, int64_t p0, int64_t kc, const uint16_t *Bp,
                         int64_t nc, float alpha, float beta, float *C, int64_t ldc) {
  const int64_t mp = (mc + 15) / 16 * 16, khp = ((kc + 1) / 2 + 15) / 16 * 16;
  uint32_t Ap[BGA_MAX_ROWS * BGA_MAX_PAIRS] __attribute__((aligned(64)));
  bga_pack_a(Ap, A, a_bf16, ta, lda, i0, mc, p0, kc, mp, khp);
#if BGA_HW
  if (!emulated) {
    bga_block_hw(Ap, mp, khp, Bp, nc, alpha, beta, C, ldc, mc);
    return;
  }
#endif
  (void)emulated;
  bga_block_emu(Ap, mp, khp, Bp, nc, alpha, beta, C, ldc, mc);
}
