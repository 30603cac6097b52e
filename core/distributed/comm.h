/*
** comm.h -- the MPI side of ember.distributed: one worker thread per
** process owns MPI (it calls MPI_Init_thread and MPI_Finalize), and runs
** the collectives it is given in submission order. The order is what
** keeps ranks matched: every rank submits the same collectives in the same
** order, so the worker's queue is MPI's order too. A synchronous
** all-reduce may instead run on the Lua thread once the queue is empty
** (dc_run_here), which saves the hand-off. The Lua thread submits and waits with a deadline, so a
** collective whose peer is gone becomes an error after `timeout` seconds
** instead of a hang; the worker may then stay blocked inside MPI, and the
** process is marked broken (every later call fails at once, and
** MPI_Finalize, which would wait for the lost peer, is skipped).
**
** Nothing here knows Lua; buffers are plain host memory.
*/
#ifndef EMBER_DIST_COMM_H
#define EMBER_DIST_COMM_H

#include <stddef.h>

#include "ember.h"

typedef enum dc_kind {
  DC_ALLREDUCE,      /* recv (in place) reduced over ranks, count elements */
  DC_BCAST,          /* recv: root's count elements on every rank */
  DC_ALLGATHER,      /* send: count elements; recv: size * count, rank order */
  DC_REDUCE_SCATTER, /* send: size * count elements; recv: this rank's count, reduced */
  DC_BARRIER,
  DC_GATHER_BYTES,   /* send: count bytes (counts may differ); result in gathered */
  DC_FINALIZE        /* the worker calls MPI_Finalize and ends */
} dc_kind;

typedef enum dc_op { DC_SUM, DC_MAX, DC_MIN } dc_op;

typedef struct dc_work {
  /* what to do (set by the submitter) */
  dc_kind kind;
  em_dtype dtype;
  dc_op op;
  int root;          /* 0-based */
  int mean;          /* DC_ALLREDUCE, DC_REDUCE_SCATTER: divide the sum by the world size */
  void *send, *recv;
  int device;        /* send/recv are device memory (CUDA-aware MPI): only MPI's collectives touch them */
  size_t count;      /* elements (bytes for DC_GATHER_BYTES) */
  const char *name;  /* "all_reduce", for messages */
  /* results (written by the worker; read after dc_wait returned) */
  int done;          /* under the queue lock */
  int abandoned;     /* dc_run_here timed out on it: never done, MPI may still hold its buffers */
  int failed;
  int agreed;        /* failed alike on every rank before any data moved: the process is not broken */
  char msg[400];
  int *counts;       /* DC_GATHER_BYTES: bytes from each rank (malloc'd) */
  char *gathered;    /* DC_GATHER_BYTES: all ranks' bytes in rank order (malloc'd) */
  struct dc_work *next;
} dc_work;

typedef struct dc_info {
  int rank, size, local_rank, local_size;
  int thread_level;  /* what MPI_Init_thread gave */
  int shared_memory; /* the ranks reach each other through Open MPI's shared-memory transport */
  int cuda_aware;    /* MPI reads and writes CUDA device memory itself (MPIX_Query_cuda_support,
                     ** or EMBER_DIST_CUDA_AWARE=0/1 to override what the library says) */
  char library[256]; /* MPI_Get_library_version, first line */
} dc_info;

/* Starts the worker and MPI. 0 on success, else -1 with a message in err. */
int dc_start(dc_info *info, char *err, size_t n);
/* Queues w. -1 (message in err) when the process is broken or not started. */
int dc_submit(dc_work *w, char *err, size_t n);
/* Runs w on the calling thread, once what was submitted before has run,
** when that is allowed (MPI_THREAD_SERIALIZED) and w is an all-reduce made
** of point-to-point messages (comm_allreduce.c says which). -2: not run, submit it. Otherwise as dc_wait, with
** the deadline over the wait for the queue and the collective together. */
int dc_run_here(dc_work *w, double timeout);
/* For scripts/bench/allreduce.lua, the peer ember's all-reduce is measured
** against: iters plain MPI_Allreduce(MPI_IN_PLACE) calls of w (an
** all-reduce of host memory, no mean) on the calling thread, as a C
** program of its own makes them, once what was submitted before has run.
** The wait for the queue times out; MPI_Allreduce itself cannot. 0 on
** success, -1 (w->msg) failed, -2 not allowed (as dc_run_here). */
int dc_mpi_allreduce_here(dc_work *w, int iters, double timeout);
/* How an all-reduce of count elements of dt runs, alike on every rank:
** "doubling", "ring" or "halving" (point-to-point, on the caller when
** synchronous; comm_allreduce.c says when each), or "mpi" (MPI_Allreduce on the
** worker; always for device memory). */
const char *dc_allreduce_algorithm(em_dtype dt, size_t count, int device);
/* Waits up to timeout seconds for w. 0: done and succeeded. -1: failed
** (w->msg says why) or timed out; a timeout marks the process broken, and
** w stays owned by the worker (do not free it or its buffers). */
int dc_wait(dc_work *w, double timeout);
/* Is w finished (so its buffers may be freed)? */
int dc_done(dc_work *w);
void dc_work_free(dc_work *w); /* frees counts/gathered and w */
/* Why the process can no longer communicate, or NULL. */
const char *dc_broken(void);
void dc_mark_broken(const char *why);
/* Runs MPI_Finalize on the worker and joins it, waiting up to timeout
** seconds. 0 on success; -1 when skipped (broken) or it did not finish. */
int dc_finalize(double timeout, char *err, size_t n);
int dc_started(void);

#endif
