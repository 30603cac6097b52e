/*
** comm_internal.h -- what the three files behind comm.h share:
**   comm.c           the work queue and the worker thread (comm.h's API);
**   comm_mpi.c       MPI set-up, dtypes and operations, running one item;
**   comm_allreduce.c the all-reduces made of point-to-point messages.
** dc__ names are internal to core/distributed, as em__ names to core.
*/
#ifndef EMBER_DIST_COMM_INTERNAL_H
#define EMBER_DIST_COMM_INTERNAL_H

#include <mpi.h>
#include <time.h>

#include "comm.h"

/* ---- comm_mpi.c ---- */

/* On the worker: MPI_Init_thread, the communicators and bfloat16's ops;
** fills info. *caller_may_run: MPI allows the Lua thread to run items
** while the worker is idle (MPI_THREAD_SERIALIZED). 0, or -1 with msg. */
int dc__init_mpi(dc_info *info, int *caller_may_run, char *msg, size_t n);
/* Runs w; deadline (NULL: none) only for point-to-point all-reduces. 0 when
** done, 1 failed, 2 timed out. */
int dc__run(dc_work *w, const struct timespec *deadline);
/* dc_mpi_allreduce_here's loop of iters MPI_Allreduce calls: 0, or 1 with
** w->msg. */
int dc__mpi_allreduce_iters(dc_work *w, int iters);
MPI_Datatype dc__mpi_type(em_dtype dt);
MPI_Op dc__mpi_op(em_dtype dt, dc_op op);
/* A mean from a sum: n values of buf divided by size (floating dtypes). */
void dc__divide(void *buf, size_t n, em_dtype dt, int size);
/* Record a failure in w (MPI's error rc; a message of w's own); return 1,
** dc__run's "failed". */
int dc__fail_mpi(dc_work *w, int rc);
__attribute__((format(printf, 2, 3))) int dc__fail_work(dc_work *w, const char *fmt, ...);
/* What one rank's call of a collective is, for the messages that compare
** ranks' calls: "3 float32 elements", with " sum"/" mean"/" max"/" min"
** for reductions and " from root r" for a broadcast. */
void dc__describe(char *buf, size_t n, size_t count, em_dtype dt, dc_kind kind, dc_op op, int mean, int root);
/* The communicator of the point-to-point all-reduces' messages, apart
** from the collectives'. */
extern MPI_Comm dc__p2p;

/* ---- comm_allreduce.c ---- */

typedef enum p2p_algo { P2P_AUTO, P2P_DOUBLING, P2P_RING, P2P_HALVING, P2P_MPI, P2P_NALGOS } p2p_algo;
/* No shared memory between the ranks: messages go in pieces (set by
** dc__init_mpi). */
extern int dc__split_pieces;
/* Reads EMBER_DIST_ALLREDUCE (before MPI starts): 0, or -1 with msg. */
int dc__allreduce_env(char *msg, size_t n);
/* How an all-reduce of w among size ranks runs, alike on every rank;
** P2P_MPI: MPI_Allreduce on the worker. */
p2p_algo dc__allreduce_algo(const dc_work *w, int size);
const char *dc__allreduce_algo_name(p2p_algo algo);
/* w->recv reduced over ranks in place by algo; 0, 1 (failed) or 2 (timed
** out). */
int dc__p2p_allreduce(dc_work *w, p2p_algo algo, const struct timespec *deadline);
/* Frees the receive buffer (at MPI_Finalize: never after a call gave up,
** when MPI may still write it). */
void dc__p2p_free(void);

#endif
