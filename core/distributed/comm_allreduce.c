/*
** comm_allreduce.c -- the all-reduces made of point-to-point messages,
** which the Lua thread can run itself against a deadline (dc_run_here),
** and the rule that picks one (see comm_internal.h).
*/
#include "comm_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Is the monotonic clock at or after t? */
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
** ranks never mix them (dc__allreduce_algo says which):
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

static const char *const p2p_algo_names[P2P_NALGOS] = {"auto", "doubling", "ring", "halving", "mpi"};
static p2p_algo forced_algo; /* EMBER_DIST_ALLREDUCE, read at init */
int dc__split_pieces;

static int pof2_upto(int size) {
  int p = 1;
  while (p * 2 <= size) p *= 2;
  return p;
}

/* How an all-reduce of w among size ranks runs (see above): P2P_MPI is
** MPI_Allreduce on the worker, also for what the others cannot do: more
** than MPI's int counts, or device memory (which only CUDA-aware MPI
** itself can reduce). */
p2p_algo dc__allreduce_algo(const dc_work *w, int size) {
  const size_t bytes = w->count * em_dtype_size(w->dtype);
  if (w->kind != DC_ALLREDUCE || w->count == 0 || size == 1 || bytes > (size_t)INT_MAX || w->device) return P2P_MPI;
  if (forced_algo != P2P_AUTO) return forced_algo;
  if (bytes <= (dc__split_pieces && size == 2 ? DOUBLING_MAX_TCP_2 : DOUBLING_MAX)) return P2P_DOUBLING;
  if (size == pof2_upto(size) && bytes / (size_t)size < RING_MIN_CHUNK) return P2P_HALVING;
  return P2P_RING;
}

/* A message whose size is not the one this rank expects: the ranks passed
** tensors of different sizes (a larger one arrives truncated, MPI_ERR_TRUNCATE;
** a smaller one leaves the end of the buffer unreduced, which MPI does not
** report: the count is checked). An error, not a silently wrong result. */
static int p2p_size_mismatch(dc_work *w, int from, const char *got) {
  return dc__fail_work(w, "the tensors differ in size across ranks: this rank's has %zu elements and rank %d sent %s "
                          "(every rank must pass a tensor of the same number of elements, in the same order of calls)",
                       w->count, from, got);
}

/* Each message's tag says the sender's dtype, op and mean, and receives
** take any tag and compare it with this rank's: ranks that passed
** different dtypes (4 float32 and 2 float64 elements are the same bytes)
** or ops got an error naming both, not a silently wrong result. It costs
** no message. */
static int p2p_tag(const dc_work *w) { return P2P_TAG + 8 * (int)w->dtype + 2 * (int)w->op + (w->mean != 0); }

static int p2p_call_mismatch(dc_work *w, int from, int tag) {
  const int v = tag - P2P_TAG;
  char a[96], b[96];
  dc__describe(a, sizeof a, w->count, w->dtype, DC_ALLREDUCE, w->op, w->mean, 0);
  dc__describe(b, sizeof b, w->count, (em_dtype)(v / 8), DC_ALLREDUCE, (dc_op)(v % 8 / 2), v % 2, 0);
  return dc__fail_work(w, "the tensors differ across ranks: this rank passes %s; rank %d sent %s (every rank must "
                          "pass the same dtype and op, in the same order of calls)", a, from, b + strcspn(b, " ") + 1);
}

/* Polls q[0..k) until done (0), an MPI error (1) or the deadline (2; NULL:
** none). Each poll drives MPI's progress. want[i] is the element count that
** receive i must bring (-1: a send), checked when all are done; from[i] its
** source. */
static int p2p_poll(dc_work *w, MPI_Request *q, int k, const int *want, const int *from,
                    const struct timespec *deadline) {
  MPI_Status st[2 * P2P_MAX_PIECES];
  for (unsigned spin = 1;; spin++) {
    int done = 0, rc = MPI_Testall(k, q, &done, st), rc_class = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &rc_class);
    if (rc_class == MPI_ERR_IN_STATUS)
      for (int i = 0; i < k; i++) {
        int cls = MPI_SUCCESS;
        if (want[i] >= 0 && st[i].MPI_ERROR != MPI_SUCCESS) MPI_Error_class(st[i].MPI_ERROR, &cls);
        if (cls == MPI_ERR_TRUNCATE && st[i].MPI_TAG != p2p_tag(w)) return p2p_call_mismatch(w, from[i], st[i].MPI_TAG);
        if (cls == MPI_ERR_TRUNCATE) return p2p_size_mismatch(w, from[i], "more than that");
      }
    if (rc != MPI_SUCCESS) return dc__fail_mpi(w, rc);
    if (!done) {
      if (deadline && spin % 256 == 0 && past(deadline)) return 2;
      continue;
    }
    for (int i = 0; i < k; i++) {
      int n = 0;
      if (want[i] < 0) continue;
      if (st[i].MPI_TAG != p2p_tag(w)) return p2p_call_mismatch(w, from[i], st[i].MPI_TAG);
      MPI_Get_count(&st[i], dc__mpi_type(w->dtype), &n);
      if (n != want[i]) {
        char got[64];
        snprintf(got, sizeof got, "a message of %d elements where %d were due", n, want[i]);
        return p2p_size_mismatch(w, from[i], got);
      }
    }
    return 0;
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
  if (dc__split_pieces) return bytes > P2P_PIECE && bytes <= P2P_PIECE * P2P_MAX_PIECES ? P2P_PIECE / es : n;
  return bytes <= 8000 ? 4000 / es : n;
}

/* Sends ns elements of x to rank `to` and receives nr into y from rank
** `from` (-1: that direction is left out), in p2p_piece pieces. */
static int p2p_move(dc_work *w, const void *x, size_t ns, int to, void *y, size_t nr, int from,
                    const struct timespec *deadline) {
  const size_t es = em_dtype_size(w->dtype), sp = p2p_piece(ns, es), rp = p2p_piece(nr, es);
  MPI_Datatype t = dc__mpi_type(w->dtype);
  MPI_Request q[2 * P2P_MAX_PIECES];
  int want[2 * P2P_MAX_PIECES], src[2 * P2P_MAX_PIECES];
  int k = 0, rc = MPI_SUCCESS;
  for (size_t at = 0; from >= 0 && at < nr && rc == MPI_SUCCESS; at += rp) {
    want[k] = (int)(nr - at < rp ? nr - at : rp), src[k] = from;
    rc = MPI_Irecv((char *)y + at * es, want[k], t, from, MPI_ANY_TAG, dc__p2p, &q[k]);
    k++;
  }
  for (size_t at = 0; to >= 0 && at < ns && rc == MPI_SUCCESS; at += sp) {
    want[k] = -1, src[k] = to;
    rc = MPI_Isend((const char *)x + at * es, (int)(ns - at < sp ? ns - at : sp), t, to, p2p_tag(w), dc__p2p, &q[k]);
    k++;
  }
  if (rc != MPI_SUCCESS) return dc__fail_mpi(w, rc);
  return p2p_poll(w, q, k, want, src, deadline);
}

/* x[0..n) = (lower rank's part) op (higher rank's part); y holds the
** other part and is clobbered. A sum gives the same bits either way round
** (IEEE addition commutes, and so does its rounding to bfloat16), so it
** skips the copy; max and min need not (signed zeros, NaN payloads). */
static void p2p_reduce(dc_work *w, void *x, void *y, size_t n, int x_is_lower) {
  MPI_Datatype t = dc__mpi_type(w->dtype);
  MPI_Op op = dc__mpi_op(w->dtype, w->op);
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
  if (rc == 0 && w->mean) dc__divide(x + o0 * es, ring_at(n, size, own + 1) - o0, w->dtype, size);
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
    dc__divide(x + m0 * es, ring_at(n, pof2, me + 1) - m0, w->dtype, size);
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
int dc__p2p_allreduce(dc_work *w, p2p_algo algo, const struct timespec *deadline) {
  int rank, size;
  MPI_Comm_rank(dc__p2p, &rank);
  MPI_Comm_size(dc__p2p, &size);
  const size_t n = w->count;
  const int whole = algo == P2P_DOUBLING || (algo == P2P_HALVING && size > pof2_upto(size)); /* folds in */
  const size_t bytes = (whole ? n : algo == P2P_RING ? n / (size_t)size + 1 : n / 2 + 1) * em_dtype_size(w->dtype);
  if (bytes > p2p_cap) {
    void *b = realloc(p2p_buf, bytes);
    if (!b) return dc__fail_work(w, "out of memory for %zu bytes", bytes);
    p2p_buf = b;
    p2p_cap = bytes;
  }
  return algo == P2P_RING      ? p2p_ring(w, rank, size, deadline)
         : algo == P2P_HALVING ? p2p_halving(w, rank, size, deadline)
                               : p2p_doubling(w, rank, size, deadline);
}

const char *dc__allreduce_algo_name(p2p_algo algo) { return p2p_algo_names[algo]; }

int dc__allreduce_env(char *msg, size_t n) {
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
  return 0;
}

void dc__p2p_free(void) {
  free(p2p_buf);
  p2p_buf = NULL;
  p2p_cap = 0;
}
