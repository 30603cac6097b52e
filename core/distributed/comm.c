/*
** comm.c -- the worker thread that owns MPI (see comm.h).
**
** MPI_Init_thread runs on the worker and asks for MPI_THREAD_SERIALIZED:
** besides the worker, the Lua thread runs synchronous all-reduces
** itself while the worker is idle (dc_run_here), never both at once.
** Errors are returned (MPI_ERRORS_RETURN on the communicators), never
** fatal, and become the message of the work item.
*/
#include "comm.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's extensions: MPIX_Query_cuda_support */
#endif
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv;  /* the queue got an item */
static pthread_cond_t done_cv;  /* an item finished */
static dc_work *head, *tail;
static pthread_t worker;
static int started, stopped;
static int busy;              /* an item runs, on the worker or on the caller (dc_run_here) */
static int caller_may_run;    /* MPI gave MPI_THREAD_SERIALIZED or more */
static int world_size;        /* MPI_Comm_size, kept: the caller may not ask MPI while the worker runs */
static int split_pieces;      /* no shared memory: point-to-point messages go in P2P_PIECE pieces */
static char broken[400];
static MPI_Comm comm = MPI_COMM_NULL;
static MPI_Comm p2p = MPI_COMM_NULL; /* the point-to-point all-reduces' messages, apart from collectives */
static MPI_Op bf16_ops[3];      /* user ops for bfloat16, which MPI lacks */

/* start-up handshake */
static int init_done, init_failed;
static char init_msg[400];
static dc_info *init_info;

/* ---- bfloat16 reductions ---- */

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) { /* round to nearest even; NaN stays NaN */
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

#define BF16_OP(name, expr)                                                    \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {        \
    (void)dt;                                                                  \
    const uint16_t *a = (const uint16_t *)in;                                  \
    uint16_t *b = (uint16_t *)inout;                                           \
    for (int i = 0; i < *len; i++) {                                           \
      float x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);                      \
      b[i] = f32_to_bf16(expr);                                                \
    }                                                                          \
  }
BF16_OP(bf16_sum, x + y)
BF16_OP(bf16_max, x > y || x != x ? x : y)
BF16_OP(bf16_min, x < y || x != x ? x : y)

/* ---- dtypes and ops ---- */

static MPI_Datatype mpi_type(em_dtype dt) {
  switch (dt) {
  case EM_F32: return MPI_FLOAT;
  case EM_F64: return MPI_DOUBLE;
  case EM_I64: return MPI_INT64_T;
  case EM_BOOL: return MPI_UINT8_T;
  case EM_BF16: return MPI_UINT16_T;
  default: return MPI_BYTE;
  }
}

/* bool: sum and max are logical or, min is logical and (values are 0/1). */
static MPI_Op mpi_op(em_dtype dt, dc_op op) {
  if (dt == EM_BF16) return bf16_ops[op];
  if (dt == EM_BOOL) return op == DC_MIN ? MPI_MIN : MPI_MAX;
  return op == DC_SUM ? MPI_SUM : op == DC_MAX ? MPI_MAX : MPI_MIN;
}

/* The mean from the sum, where the sum ran (the worker, for an async one,
** so it overlaps too): each value divided by the rank count and rounded
** once to the dtype (floating dtypes only). A float32 quotient is correctly
** rounded, and so is float32 division of the float from a bfloat16; by a
** power of two, multiplying by its exact reciprocal rounds the same real
** number, so gives the same bits again, several times faster than
** division (32 MB: the mean cost 5 ms more than the sum when divided in
** double). */
static void divide(void *buf, size_t n, em_dtype dt, int size) {
  const int pow2 = (size & (size - 1)) == 0;
  const float df = (float)size, rf = 1.0f / df; /* exact: size < 2^24 */
  const double dd = (double)size, rd = 1.0 / dd;
  if (dt == EM_F32) {
    float *x = buf;
    if (pow2) for (size_t i = 0; i < n; i++) x[i] *= rf;
    else for (size_t i = 0; i < n; i++) x[i] /= df;
  } else if (dt == EM_F64) {
    double *x = buf;
    if (pow2) for (size_t i = 0; i < n; i++) x[i] *= rd;
    else for (size_t i = 0; i < n; i++) x[i] /= dd;
  } else if (dt == EM_BF16) {
    uint16_t *x = buf;
    for (size_t i = 0; i < n; i++) x[i] = f32_to_bf16(pow2 ? bf16_to_f32(x[i]) * rf : bf16_to_f32(x[i]) / df);
  }
}

/* Records MPI's error rc in w; returns 1, run()'s "failed". */
static int fail_mpi(dc_work *w, int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  snprintf(w->msg, sizeof w->msg, "%s: MPI error: %s", w->name, s);
  w->failed = 1;
  return 1;
}

/* Records a failure of w's own, "name: " and the message; returns 1,
** run()'s "failed". */
__attribute__((format(printf, 2, 3))) static int fail_work(dc_work *w, const char *fmt, ...) {
  char what[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(w->msg, sizeof w->msg, "%s: %s", w->name, what);
  w->failed = 1;
  return 1;
}

/* MPI counts are ints: big buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

static void timeout_message(dc_work *w, double timeout) {
  snprintf(w->msg, sizeof w->msg,
           "%s timed out after %g s: another rank failed, was killed, or is not calling the same "
           "collectives in the same order", w->name, timeout);
}

static int past(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* ---- all-reduces over point-to-point messages ----
**
** An all-reduce is made of MPI_Isend/MPI_Irecv, which the caller can poll
** against its deadline on its own thread (dc_run_here), so that a
** synchronous one needs no hand-off to the worker (two thread wake-ups,
** 10-20 us) and still times out. Three algorithms, alike on every rank, so
** ranks never mix them (allreduce_algo says which):
** - recursive doubling: log2(p) exchanges of the whole buffer (ranks
**   beyond a power of two first fold into a neighbour); the fewest steps,
**   but every rank reduces the whole buffer at every step;
** - Rabenseifner's halving and doubling: a reduce-scatter by halving and
**   an all-gather by doubling, 2 log2(p) steps that move and reduce what
**   the ring does;
** - ring: 2(p-1) steps of n/p, and each rank reduces (p-1)/p of the buffer.
** What decides is what a step costs. Over shared memory, on its own core,
** a step is a microsecond or two; over TCP, or where ranks share cores and
** a step waits for the peer's time slice, tens of microseconds. Measured
** against MPI_Allreduce in the same process (2 cores, Open MPI 4.1; the
** numbers are in core/distributed/README.md): doubling wins up to 32 KiB
** (2 ranks over shared memory: 14 us against the ring's 15; at 64 KiB 24
** against 22, at 256 KiB 73 against 59), and at 2 ranks
** over TCP up to 1 MiB, where it moves what the others move in one step
** instead of two (1 MiB: 313 us, halving 375). Above, halving, until a
** ring step carries 1 MiB and its extra steps' latency is lost in the
** transfer (4 ranks over TCP, 16 MiB: ring 18.3 ms, halving 25.5); with
** ranks beyond a power of two, whose fold costs two whole-buffer moves,
** the ring at once (3 ranks, 1 MiB over shared memory: ring 396 us,
** halving 567). EMBER_DIST_ALLREDUCE (doubling, ring, halving or mpi, the
** same on every rank) overrides the choice: tests use it to run each
** algorithm at any size. */
#define P2P_TAG 7001
#define P2P_PIECE ((size_t)32 << 10)
#define P2P_MAX_PIECES 4 /* messages of up to 128 KiB go in pieces over TCP */
#define DOUBLING_MAX ((size_t)32 << 10)
#define DOUBLING_MAX_TCP_2 ((size_t)1 << 20) /* 2 ranks over TCP */
#define RING_MIN_CHUNK ((size_t)1 << 20)

typedef enum p2p_algo { P2P_AUTO, P2P_DOUBLING, P2P_RING, P2P_HALVING, P2P_MPI, P2P_NALGOS } p2p_algo;
static const char *const p2p_algo_names[P2P_NALGOS] = {"auto", "doubling", "ring", "halving", "mpi"};
static p2p_algo forced_algo; /* EMBER_DIST_ALLREDUCE, read at init */

static int pof2_upto(int size) {
  int p = 1;
  while (p * 2 <= size) p *= 2;
  return p;
}

/* How an all-reduce of w among size ranks runs (see above): P2P_MPI is
** MPI_Allreduce on the worker, also for what the others cannot do: more
** than MPI's int counts, or device memory (which only CUDA-aware MPI
** itself can reduce). */
static p2p_algo allreduce_algo(const dc_work *w, int size) {
  const size_t bytes = w->count * em_dtype_size(w->dtype);
  if (w->kind != DC_ALLREDUCE || w->count == 0 || size == 1 || bytes > (size_t)INT_MAX || w->device) return P2P_MPI;
  if (forced_algo != P2P_AUTO) return forced_algo;
  if (bytes <= (split_pieces && size == 2 ? DOUBLING_MAX_TCP_2 : DOUBLING_MAX)) return P2P_DOUBLING;
  if (size == pof2_upto(size) && bytes / (size_t)size < RING_MIN_CHUNK) return P2P_HALVING;
  return P2P_RING;
}

/* Polls q[0..k) until done (0), an MPI error (1) or the deadline (2; NULL:
** none). Each poll drives MPI's progress. */
static int p2p_poll(dc_work *w, MPI_Request *q, int k, const struct timespec *deadline) {
  for (unsigned spin = 1;; spin++) {
    int done = 0, rc = MPI_Testall(k, q, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return fail_mpi(w, rc);
    if (done) return 0;
    if (deadline && spin % 256 == 0 && past(deadline)) return 2;
  }
}

/* How many elements of a message of n go in one MPI message. Over shared
** memory, wholes of at most 8000 bytes go in pieces of 4000: Open MPI's
** shared-memory transport sends up to 4096 bytes, header included,
** eagerly, and a 4 KiB message in one piece takes its rendezvous protocol,
** 2.3x slower; it copies a large message once (CMA), which pieces only slow
** down. Over TCP, messages of 32-128 KiB go in 32 KiB pieces, each under
** TCP's 64 KiB eager limit (64 KiB in one piece took 1.3x MPI_Allreduce's
** time, in two 0.9x); less goes in one (4 KiB at 4 ranks: 65% of MPI's
** speed in two pieces, 84% in one), and so does more, where the
** rendezvous' round trip is small beside the transfer and eight eager
** copies are not (2 ranks, 256 KiB: 90 us whole, 118 in pieces; 4 ranks,
** 1 MiB, whose halving sends 256 KiB: 872 us against 972). */
static size_t p2p_piece(size_t n, size_t es) {
  const size_t bytes = n * es;
  if (split_pieces) return bytes > P2P_PIECE && bytes <= P2P_PIECE * P2P_MAX_PIECES ? P2P_PIECE / es : n;
  return bytes <= 8000 ? 4000 / es : n;
}

/* Sends ns elements of x to rank `to` and receives nr into y from rank
** `from` (-1: that direction is left out), in p2p_piece pieces. */
static int p2p_move(dc_work *w, const void *x, size_t ns, int to, void *y, size_t nr, int from,
                    const struct timespec *deadline) {
  const size_t es = em_dtype_size(w->dtype), sp = p2p_piece(ns, es), rp = p2p_piece(nr, es);
  MPI_Datatype t = mpi_type(w->dtype);
  MPI_Request q[2 * P2P_MAX_PIECES];
  int k = 0, rc = MPI_SUCCESS;
  for (size_t at = 0; from >= 0 && at < nr && rc == MPI_SUCCESS; at += rp)
    rc = MPI_Irecv((char *)y + at * es, (int)(nr - at < rp ? nr - at : rp), t, from, P2P_TAG, p2p, &q[k++]);
  for (size_t at = 0; to >= 0 && at < ns && rc == MPI_SUCCESS; at += sp)
    rc = MPI_Isend((const char *)x + at * es, (int)(ns - at < sp ? ns - at : sp), t, to, P2P_TAG, p2p, &q[k++]);
  if (rc != MPI_SUCCESS) return fail_mpi(w, rc);
  return p2p_poll(w, q, k, deadline);
}

/* x[0..n) = (lower rank's part) op (higher rank's part); y holds the
** other part and is clobbered. A sum gives the same bits either way round
** (IEEE addition commutes, and so does its rounding to bfloat16), so it
** skips the copy; max and min need not (signed zeros, NaN payloads). */
static void p2p_reduce(dc_work *w, void *x, void *y, size_t n, int x_is_lower) {
  MPI_Datatype t = mpi_type(w->dtype);
  MPI_Op op = mpi_op(w->dtype, w->op);
  if (x_is_lower && w->op != DC_SUM) { /* MPI_Reduce_local(in, inout): inout = in op inout */
    MPI_Reduce_local(x, y, (int)n, t, op);
    memcpy(x, y, n * em_dtype_size(w->dtype));
  } else {
    MPI_Reduce_local(y, x, (int)n, t, op);
  }
}

/* The partner's receive buffer, kept across calls (one runner at a time:
** busy) and never freed once a call gave up, since MPI may still write it. */
static void *p2p_buf;
static size_t p2p_cap;

/* ---- the algorithms: w->recv reduced over ranks in place; 0, 1 (failed)
** or 2 (timed out) ---- */

/* Doubling and halving work among pof2 ranks: the first 2 rem (= size -
** pof2) fold in pairs, the even one handing its part to the odd one, which
** takes part as number rank / 2; the rest are rank - rem. Returns this
** rank's number among pof2, -1 for a folded-out rank. */
static int fold_in(dc_work *w, int rank, int rem, const struct timespec *deadline, int *rc) {
  const size_t n = w->count;
  if (rank >= 2 * rem) return rank - rem;
  if (rank % 2 == 0) *rc = p2p_move(w, w->recv, n, rank + 1, NULL, 0, -1, deadline);
  else if ((*rc = p2p_move(w, NULL, 0, -1, p2p_buf, n, rank - 1, deadline)) == 0)
    p2p_reduce(w, w->recv, p2p_buf, n, 0);
  return rank % 2 ? rank / 2 : -1;
}

/* The rank that takes part as number v among pof2. */
static int folded_rank(int v, int rem) { return v < rem ? 2 * v + 1 : v + rem; }

/* The result back to the folded-out ranks. */
static int fold_out(dc_work *w, int rank, int rem, const struct timespec *deadline) {
  if (rank >= 2 * rem) return 0;
  return rank % 2 ? p2p_move(w, w->recv, w->count, rank - 1, NULL, 0, -1, deadline)
                  : p2p_move(w, NULL, 0, -1, w->recv, w->count, rank + 1, deadline);
}

/* Recursive doubling. */
static int p2p_doubling(dc_work *w, int rank, int size, const struct timespec *deadline) {
  const size_t n = w->count;
  const int pof2 = pof2_upto(size), rem = size - pof2;
  int rc = 0;
  const int me = fold_in(w, rank, rem, deadline, &rc);
  for (int mask = 1; rc == 0 && me >= 0 && mask < pof2; mask <<= 1) {
    const int other = me ^ mask, peer = folded_rank(other, rem);
    rc = p2p_move(w, w->recv, n, peer, p2p_buf, n, peer, deadline);
    if (rc == 0) p2p_reduce(w, w->recv, p2p_buf, n, me < other);
  }
  return rc == 0 ? fold_out(w, rank, rem, deadline) : rc;
}

/* The first element of chunk c of n elements in `parts` chunks. */
static size_t ring_at(size_t n, int parts, int c) {
  const size_t q = n / (size_t)parts, r = n % (size_t)parts, k = (size_t)c;
  return q * k + (k < r ? k : r);
}

/* Ring: a reduce-scatter, then an all-gather, each size - 1 steps of one
** chunk (n / size) to the right neighbour and one from the left. Every
** rank sends and receives 2 (size - 1) / size of the buffer, as in
** recursive doubling at 2 ranks, but reduces only (size - 1) / size of it
** (half, at 2 ranks): at 2 ranks, 1 MiB, 93 us where doubling took 99
** and MPI_Allreduce (its own ring) 92-106. Chunk c is reduced along one
** path of ranks and then copied to the others, so every rank ends with
** the same bits. */
static int p2p_ring(dc_work *w, int rank, int size, const struct timespec *deadline) {
  const size_t n = w->count, es = em_dtype_size(w->dtype);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  char *x = w->recv;
  int rc = 0;
  /* step s: this rank passes on chunk rank - s, and adds its part to chunk rank - s - 1 */
  for (int s = 0; rc == 0 && s < size - 1; s++) {
    const int cs = (rank - s + size) % size, cr = (rank - s - 1 + size) % size;
    const size_t s0 = ring_at(n, size, cs), r0 = ring_at(n, size, cr), nr = ring_at(n, size, cr + 1) - r0;
    rc = p2p_move(w, x + s0 * es, ring_at(n, size, cs + 1) - s0, right, p2p_buf, nr, left, deadline);
    if (rc == 0) p2p_reduce(w, x + r0 * es, p2p_buf, nr, 0);
  }
  /* chunk rank + 1 is complete here; a mean is divided here, 1/size of the buffer on each rank */
  const int own = (rank + 1) % size;
  const size_t o0 = ring_at(n, size, own);
  if (rc == 0 && w->mean) divide(x + o0 * es, ring_at(n, size, own + 1) - o0, w->dtype, size);
  /* pass the complete chunks round */
  for (int s = 0; rc == 0 && s < size - 1; s++) {
    const int cs = (rank + 1 - s + size) % size, cr = (rank - s + size) % size;
    const size_t s0 = ring_at(n, size, cs), r0 = ring_at(n, size, cr);
    rc = p2p_move(w, x + s0 * es, ring_at(n, size, cs + 1) - s0, right, x + r0 * es,
                  ring_at(n, size, cr + 1) - r0, left, deadline);
  }
  return rc;
}

/* Rabenseifner's: ranks beyond a power of two fold in as in doubling;
** then a reduce-scatter by recursive halving and an all-gather by
** recursive doubling over pof2 chunks: log2(pof2) steps each way. */
static int p2p_halving(dc_work *w, int rank, int size, const struct timespec *deadline) {
  const size_t n = w->count, es = em_dtype_size(w->dtype);
  const int pof2 = pof2_upto(size), rem = size - pof2;
  char *x = w->recv;
  int rc = 0;
  const int me = fold_in(w, rank, rem, deadline, &rc);
  /* halving: before the step of mask m this rank holds chunks [base, base + 2m) */
  for (int m = pof2 / 2; rc == 0 && me >= 0 && m >= 1; m /= 2) {
    const int other = me ^ m, peer = folded_rank(other, rem);
    const int base = me & ~(2 * m - 1), keep = me & m ? base + m : base, give = me & m ? base : base + m;
    const size_t k0 = ring_at(n, pof2, keep), nk = ring_at(n, pof2, keep + m) - k0;
    const size_t g0 = ring_at(n, pof2, give);
    rc = p2p_move(w, x + g0 * es, ring_at(n, pof2, give + m) - g0, peer, p2p_buf, nk, peer, deadline);
    if (rc == 0) p2p_reduce(w, x + k0 * es, p2p_buf, nk, me < other);
  }
  if (rc == 0 && me >= 0 && w->mean) { /* this rank's complete chunk, me: a mean is divided here */
    const size_t m0 = ring_at(n, pof2, me);
    divide(x + m0 * es, ring_at(n, pof2, me + 1) - m0, w->dtype, size);
  }
  /* doubling: before the step of mask m this rank holds the complete chunks [me & ~(m - 1), + m) */
  for (int m = 1; rc == 0 && me >= 0 && m < pof2; m *= 2) {
    const int other = me ^ m, peer = folded_rank(other, rem);
    const int mine = me & ~(m - 1), theirs = other & ~(m - 1);
    const size_t s0 = ring_at(n, pof2, mine), r0 = ring_at(n, pof2, theirs);
    rc = p2p_move(w, x + s0 * es, ring_at(n, pof2, mine + m) - s0, peer, x + r0 * es,
                  ring_at(n, pof2, theirs + m) - r0, peer, deadline);
  }
  return rc == 0 ? fold_out(w, rank, rem, deadline) : rc;
}

/* w->recv reduced over ranks in place by algo; 0, 1 (failed) or 2 (timed
** out). The receive buffer holds what one step receives at most. */
static int p2p_allreduce(dc_work *w, p2p_algo algo, const struct timespec *deadline) {
  int rank, size;
  MPI_Comm_rank(p2p, &rank);
  MPI_Comm_size(p2p, &size);
  const size_t n = w->count;
  const int whole = algo == P2P_DOUBLING || (algo == P2P_HALVING && size > pof2_upto(size)); /* folds in */
  const size_t bytes = (whole ? n : algo == P2P_RING ? n / (size_t)size + 1 : n / 2 + 1) * em_dtype_size(w->dtype);
  if (bytes > p2p_cap) {
    void *b = realloc(p2p_buf, bytes);
    if (!b) return fail_work(w, "out of memory for %zu bytes", bytes);
    p2p_buf = b;
    p2p_cap = bytes;
  }
  return algo == P2P_RING      ? p2p_ring(w, rank, size, deadline)
         : algo == P2P_HALVING ? p2p_halving(w, rank, size, deadline)
                               : p2p_doubling(w, rank, size, deadline);
}

/* Runs w; deadline (NULL: none) only for point-to-point all-reduces. 0 when
** done, 1 failed, 2 timed out. */
static int run(dc_work *w, const struct timespec *deadline) {
  size_t es = em_dtype_size(w->dtype);
  MPI_Datatype t = mpi_type(w->dtype);
  int rc = MPI_SUCCESS, size;
  MPI_Comm_size(comm, &size);
  switch (w->kind) {
  case DC_ALLREDUCE: {
    const p2p_algo algo = allreduce_algo(w, size);
    if (algo != P2P_MPI) {
      int r = p2p_allreduce(w, algo, deadline);
      if (r == 0 && w->mean && algo == P2P_DOUBLING) /* the others divide inside */
        divide(w->recv, w->count, w->dtype, size);
      return r;
    }
    for (size_t at = 0; rc == MPI_SUCCESS && (at < w->count || at == 0); at += PIECE) {
      size_t n = w->count - at < PIECE ? w->count - at : PIECE;
      rc = MPI_Allreduce(MPI_IN_PLACE, (char *)w->recv + at * es, (int)n, t, mpi_op(w->dtype, w->op), comm);
      if (w->count == 0) break;
    }
    break;
  }
  case DC_BCAST:
    for (size_t at = 0; rc == MPI_SUCCESS && (at < w->count || at == 0); at += PIECE) {
      size_t n = w->count - at < PIECE ? w->count - at : PIECE;
      rc = MPI_Bcast((char *)w->recv + at * es, (int)(n * es), MPI_BYTE, w->root, comm);
      if (w->count == 0) break;
    }
    break;
  case DC_ALLGATHER:
    if (w->count * es > INT_MAX) {
      return fail_work(w, "%zu bytes per rank is more than MPI's int count", w->count * es);
    }
    rc = MPI_Allgather(w->send, (int)(w->count * es), MPI_BYTE, w->recv, (int)(w->count * es), MPI_BYTE, comm);
    break;
  case DC_REDUCE_SCATTER:
    if (w->count > INT_MAX) {
      return fail_work(w, "%zu elements per rank is more than MPI's int count", w->count);
    }
    rc = MPI_Reduce_scatter_block(w->send, w->recv, (int)w->count, t, mpi_op(w->dtype, w->op), comm);
    break;
  case DC_BARRIER:
    rc = MPI_Barrier(comm);
    break;
  case DC_GATHER_BYTES: {
    int mine = (int)w->count;
    w->counts = calloc((size_t)size, sizeof(int));
    int *displs = calloc((size_t)size, sizeof(int));
    if (!w->counts || !displs) {
      free(displs);
      return fail_work(w, "out of memory");
    }
    rc = MPI_Allgather(&mine, 1, MPI_INT, w->counts, 1, MPI_INT, comm);
    size_t total = 0;
    for (int r = 0; r < size; r++) {
      displs[r] = (int)total;
      total += (size_t)w->counts[r];
    }
    if (rc == MPI_SUCCESS) {
      w->gathered = malloc(total + 1);
      if (!w->gathered) {
        free(displs);
        return fail_work(w, "out of memory");
      }
      rc = MPI_Allgatherv(w->send, mine, MPI_BYTE, w->gathered, w->counts, displs, MPI_BYTE, comm);
    }
    free(displs);
    break;
  }
  case DC_FINALIZE: /* never reached once a call gave up (broken), so nothing may still write p2p_buf */
    free(p2p_buf);
    p2p_buf = NULL;
    p2p_cap = 0;
    for (int i = 0; i < 3; i++) MPI_Op_free(&bf16_ops[i]);
    MPI_Comm_free(&p2p);
    MPI_Comm_free(&comm);
    rc = MPI_Finalize();
    break;
  }
  if (rc != MPI_SUCCESS) return fail_mpi(w, rc);
  if (w->mean) divide(w->recv, w->count, w->dtype, size);
  return 0;
}

/* Can Open MPI's shared-memory transport (vader, or sm) carry messages
** between these ranks? All on one node, and the btl parameter (read
** through MPI_T, so the environment, files and mpirun --mca all count)
** unset, excluding neither ("^tcp"), or naming one. */
static int shared_memory_links(int all_local) {
  if (!all_local) return 0;
  int provided, idx, count, shared = 1;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 1;
  MPI_T_cvar_handle h;
  if (MPI_T_cvar_get_index("btl", &idx) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS) {
    char *v = calloc((size_t)count + 1, 1);
    if (v && MPI_T_cvar_read(h, v) == MPI_SUCCESS && v[0]) {
      const int named = strstr(v, "vader") != NULL || strstr(v, "sm") != NULL;
      shared = v[0] == '^' ? !named : named;
    }
    free(v);
    MPI_T_cvar_handle_free(&h);
  }
  MPI_T_finalize();
  return shared;
}

static int init_mpi(dc_info *info, char *msg, size_t n) {
  /* Lua opens C modules with RTLD_LOCAL, so libmpi's symbols are not
  ** global, and Open MPI's own components (dlopen'ed by MPI_Init) need
  ** them: promote the already loaded library to global. */
  void *self = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (!self) self = dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  /* The communication thread shares its rank's core (mpirun binds a rank
  ** to one core by default) with the compute threads: an MPI call that
  ** waits yields the core instead of spinning on it, unless the user chose. */
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  const char *algo = getenv("EMBER_DIST_ALLREDUCE");
  forced_algo = P2P_AUTO;
  if (algo && algo[0]) {
    int i = 0;
    while (i < P2P_NALGOS && strcmp(algo, p2p_algo_names[i]) != 0) i++;
    if (i == P2P_NALGOS) {
      snprintf(msg, n, "EMBER_DIST_ALLREDUCE is '%.40s'; expected auto, doubling, ring, halving or mpi", algo);
      return -1;
    }
    forced_algo = (p2p_algo)i;
  }
  int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    snprintf(msg, n, "MPI_Init_thread failed (error %d)", rc);
    return -1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm)) != MPI_SUCCESS) {
    snprintf(msg, n, "MPI_Comm_dup failed (error %d)", rc);
    return -1;
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  if ((rc = MPI_Comm_dup(comm, &p2p)) != MPI_SUCCESS) {
    snprintf(msg, n, "MPI_Comm_dup failed (error %d)", rc);
    return -1;
  }
  MPI_Comm_set_errhandler(p2p, MPI_ERRORS_RETURN);
  caller_may_run = provided >= MPI_THREAD_SERIALIZED;
  MPI_Comm_rank(comm, &info->rank);
  MPI_Comm_size(comm, &info->size);
  world_size = info->size;
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info->rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &info->local_rank);
  MPI_Comm_size(local, &info->local_size);
  MPI_Comm_free(&local);
  info->shared_memory = shared_memory_links(info->local_size == info->size);
  split_pieces = !info->shared_memory;
  info->thread_level = provided;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(lib, &len);
  lib[strcspn(lib, "\n,")] = 0;
  snprintf(info->library, sizeof info->library, "%s", lib);
  info->cuda_aware = 0;
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
  info->cuda_aware = MPIX_Query_cuda_support() == 1; /* built with CUDA and running with it */
#endif
  const char *force = getenv("EMBER_DIST_CUDA_AWARE"); /* a library that claims too much, or tests */
  if (force && (strcmp(force, "0") == 0 || strcmp(force, "1") == 0)) info->cuda_aware = force[0] == '1';
  MPI_Op_create(bf16_sum, 1, &bf16_ops[DC_SUM]);
  MPI_Op_create(bf16_max, 1, &bf16_ops[DC_MAX]);
  MPI_Op_create(bf16_min, 1, &bf16_ops[DC_MIN]);
  (void)self; /* stays loaded: it is libmpi itself */
  return 0;
}

static void *worker_main(void *arg) {
  (void)arg;
  char msg[400] = "";
  int ok = init_mpi(init_info, msg, sizeof msg) == 0;
  pthread_mutex_lock(&lock);
  init_done = 1;
  init_failed = !ok;
  snprintf(init_msg, sizeof init_msg, "%s", msg);
  pthread_cond_broadcast(&done_cv);
  pthread_mutex_unlock(&lock);
  if (!ok) return NULL;
  for (;;) {
    pthread_mutex_lock(&lock);
    while (!head || busy) pthread_cond_wait(&work_cv, &lock);
    dc_work *w = head;
    head = w->next;
    if (!head) tail = NULL;
    busy = 1;
    pthread_mutex_unlock(&lock);
    run(w, NULL);
    int last = w->kind == DC_FINALIZE;
    pthread_mutex_lock(&lock);
    busy = 0;
    w->done = 1;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&lock);
    if (last) return NULL;
  }
}

static void deadline_after(struct timespec *ts, double seconds) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  if (seconds > 1e8) seconds = 1e8;
  time_t whole = (time_t)seconds;
  long nsec = ts->tv_nsec + (long)((seconds - (double)whole) * 1e9);
  ts->tv_sec += whole + nsec / 1000000000L;
  ts->tv_nsec = nsec % 1000000000L;
}

int dc_start(dc_info *info, char *err, size_t n) {
  if (started) {
    snprintf(err, n, "already started");
    return -1;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&work_cv, &ca);
  pthread_cond_init(&done_cv, &ca);
  pthread_condattr_destroy(&ca);
  init_info = info;
  if (pthread_create(&worker, NULL, worker_main, NULL) != 0) {
    snprintf(err, n, "cannot start the communication thread: %s", strerror(errno));
    return -1;
  }
  pthread_mutex_lock(&lock);
  while (!init_done) pthread_cond_wait(&done_cv, &lock);
  pthread_mutex_unlock(&lock);
  if (init_failed) {
    pthread_join(worker, NULL);
    snprintf(err, n, "%s", init_msg);
    return -1;
  }
  started = 1;
  return 0;
}

const char *dc_allreduce_algorithm(em_dtype dt, size_t count, int device) {
  const dc_work w = {.kind = DC_ALLREDUCE, .dtype = dt, .count = count, .device = device};
  return p2p_algo_names[allreduce_algo(&w, world_size)];
}

int dc_started(void) { return started && !stopped; }

const char *dc_broken(void) { return broken[0] ? broken : NULL; }

void dc_mark_broken(const char *why) {
  pthread_mutex_lock(&lock);
  if (!broken[0]) snprintf(broken, sizeof broken, "%s", why);
  pthread_mutex_unlock(&lock);
}

int dc_submit(dc_work *w, char *err, size_t n) {
  if (!started || stopped) {
    snprintf(err, n, "%s: not initialised (call ember.distributed.init() first)", w->name);
    return -1;
  }
  if (broken[0]) {
    snprintf(err, n, "%s: this process can no longer communicate: %s", w->name, broken);
    return -1;
  }
  w->next = NULL;
  w->done = 0;
  pthread_mutex_lock(&lock);
  if (tail) tail->next = w; else head = w;
  tail = w;
  pthread_cond_signal(&work_cv);
  pthread_mutex_unlock(&lock);
  return 0;
}

int dc_done(dc_work *w) {
  pthread_mutex_lock(&lock);
  int d = w->done;
  pthread_mutex_unlock(&lock);
  return d;
}

/* Waits until nothing is queued or running on the worker, up to `until`,
** then marks MPI busy for the calling thread: what was submitted before
** runs first, which is MPI's order. 1: claimed; 0: timed out (w holds the
** message, and the process is marked broken). */
static int claim_for_caller(dc_work *w, const struct timespec *until, double timeout) {
  int rc = 0;
  pthread_mutex_lock(&lock);
  while ((head || busy) && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&done_cv, &lock, until);
  const int idle = !head && !busy;
  if (idle) busy = 1;
  pthread_mutex_unlock(&lock);
  if (idle) return 1;
  timeout_message(w, timeout);
  dc_mark_broken(w->msg);
  return 0;
}

/* Gives MPI back to the worker; w is done, or abandoned when it timed out
** (r == 2: MPI may still hold its buffers). */
static void release_from_caller(dc_work *w, int r) {
  pthread_mutex_lock(&lock);
  busy = 0;
  if (r == 2) w->abandoned = 1;
  else w->done = 1;
  if (head) pthread_cond_signal(&work_cv); /* submitted meanwhile (not by this thread, so rare) */
  pthread_mutex_unlock(&lock);
}

int dc_run_here(dc_work *w, double timeout) {
  if (!started || stopped || broken[0] || !caller_may_run) return -2;
  if (allreduce_algo(w, world_size) == P2P_MPI) return -2;
  struct timespec until;
  deadline_after(&until, timeout);
  w->next = NULL;
  if (!claim_for_caller(w, &until, timeout)) { /* never reached MPI: freeable */
    w->done = w->failed = 1;
    return -1;
  }
  const int r = run(w, &until);
  release_from_caller(w, r);
  if (r == 0) return 0;
  if (r == 2) timeout_message(w, timeout);
  dc_mark_broken(w->msg);
  return -1;
}

int dc_mpi_allreduce_here(dc_work *w, int iters, double timeout) {
  if (!started || stopped || broken[0] || !caller_may_run || w->count > (size_t)INT_MAX) return -2;
  struct timespec until;
  deadline_after(&until, timeout);
  if (!claim_for_caller(w, &until, timeout)) {
    w->done = w->failed = 1;
    return -1;
  }
  int rc = MPI_SUCCESS;
  for (int i = 0; i < iters && rc == MPI_SUCCESS; i++)
    rc = MPI_Allreduce(MPI_IN_PLACE, w->recv, (int)w->count, mpi_type(w->dtype), mpi_op(w->dtype, w->op), comm);
  release_from_caller(w, 0);
  if (rc == MPI_SUCCESS) return 0;
  fail_mpi(w, rc);
  dc_mark_broken(w->msg);
  return -1;
}

int dc_wait(dc_work *w, double timeout) {
  struct timespec until;
  deadline_after(&until, timeout);
  int rc = 0;
  pthread_mutex_lock(&lock);
  while (!w->done && !w->abandoned && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&done_cv, &lock, &until);
  int done = w->done, abandoned = w->abandoned;
  pthread_mutex_unlock(&lock);
  if (abandoned) return -1; /* dc_run_here gave up on it: w->msg says why */
  if (!done) {
    timeout_message(w, timeout);
    dc_mark_broken(w->msg);
    return -1;
  }
  if (w->failed) {
    dc_mark_broken(w->msg);
    return -1;
  }
  return 0;
}

void dc_work_free(dc_work *w) {
  if (!w) return;
  free(w->counts);
  free(w->gathered);
  free(w);
}

int dc_finalize(double timeout, char *err, size_t n) {
  if (!started || stopped) return 0;
  if (broken[0]) {
    snprintf(err, n, "MPI_Finalize skipped: %s", broken);
    stopped = 1;
    return -1;
  }
  dc_work *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  w->kind = DC_FINALIZE;
  w->name = "finalize";
  if (dc_submit(w, err, n) != 0) {
    free(w);
    return -1;
  }
  stopped = 1;
  if (dc_wait(w, timeout) != 0) { /* the worker is stuck; leave it */
    snprintf(err, n, "%s", w->msg);
    return -1;
  }
  pthread_join(worker, NULL);
  int failed = w->failed;
  if (failed) snprintf(err, n, "%s", w->msg);
  free(w);
  return failed ? -1 : 0;
}
