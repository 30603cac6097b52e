/*
** comm_mpi.c -- MPI itself: set-up on the communication thread (comm.c),
** the dtypes and operations (bfloat16's are ours: MPI has none), and
** running one work item (the point-to-point all-reduces are
** comm_allreduce.c's).
**
** MPI_Init_thread asks for MPI_THREAD_SERIALIZED: besides the worker, the
** Lua thread runs synchronous all-reduces itself while the worker is idle
** (dc_run_here), never both at once. Errors are returned
** (MPI_ERRORS_RETURN on the communicators), never fatal, and become the
** message of the work item.
*/
#include "comm_internal.h"
#include "ember_bf16.h"

#include <dlfcn.h>
#include <limits.h>
#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's extensions: MPIX_Query_cuda_support */
#endif
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Comm comm = MPI_COMM_NULL;
MPI_Comm dc__p2p = MPI_COMM_NULL;
static MPI_Op bf16_ops[3]; /* user ops for bfloat16, which MPI lacks */

/* ---- bfloat16 reductions ---- */

#define BF16_OP(name, expr)                                                    \
  static void name(void *in, void *inout, int *len, MPI_Datatype *dt) {        \
    (void)dt;                                                                  \
    const uint16_t *a = (const uint16_t *)in;                                  \
    uint16_t *b = (uint16_t *)inout;                                           \
    for (int i = 0; i < *len; i++) {                                           \
      float x = em_bf16_to_f32(a[i]), y = em_bf16_to_f32(b[i]);                \
      b[i] = em_f32_to_bf16(expr);                                             \
    }                                                                          \
  }
BF16_OP(bf16_sum, x + y)
BF16_OP(bf16_max, x > y || x != x ? x : y)
BF16_OP(bf16_min, x < y || x != x ? x : y)

/* ---- dtypes and ops ---- */

MPI_Datatype dc__mpi_type(em_dtype dt) {
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
MPI_Op dc__mpi_op(em_dtype dt, dc_op op) {
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
void dc__divide(void *buf, size_t n, em_dtype dt, int size) {
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
    for (size_t i = 0; i < n; i++) {
      const float v = em_bf16_to_f32(x[i]);
      x[i] = em_f32_to_bf16(pow2 ? v * rf : v / df);
    }
  }
}

/* Records MPI's error rc in w; returns 1, run()'s "failed". */
int dc__fail_mpi(dc_work *w, int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  snprintf(w->msg, sizeof w->msg, "%s: MPI error: %s", w->name, s);
  w->failed = 1;
  return 1;
}

/* Records a failure of w's own, "name: " and the message; returns 1,
** run()'s "failed". */
int dc__fail_work(dc_work *w, const char *fmt, ...) {
  char what[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(w->msg, sizeof w->msg, "%s: %s", w->name, what);
  w->failed = 1;
  return 1;
}

void dc__describe(char *buf, size_t n, size_t count, em_dtype dt, dc_kind kind, dc_op op, int mean, int root) {
  static const char *const ops[] = {"sum", "max", "min"};
  const int reduces = kind == DC_ALLREDUCE || kind == DC_REDUCE_SCATTER;
  int at = snprintf(buf, n, "%zu %s elements", count, em_dtype_name(dt));
  if (at < 0 || (size_t)at >= n) return;
  if (reduces) snprintf(buf + at, n - (size_t)at, ", op %s", mean ? "mean" : ops[op]);
  else if (kind == DC_BCAST) snprintf(buf + at, n - (size_t)at, " from root %d", root);
}

/* Broadcast, all-gather and reduce-scatter first gather every rank's
** count, dtype, op and root (one MPI_Allgather of 5 integers each): MPI
** does not compare them, and a difference was a silently wrong result
** (garbage bytes reinterpreted, a tail left unwritten) or an error on some
** ranks only. Every rank sees every rank's, so all of them fail alike
** before the collective (w->agreed: the process can go on). 0, or 1 with
** w->msg. */
static int same_call_on_every_rank(dc_work *w, int size) {
  long long mine[5] = {(long long)w->count, w->dtype, w->op, w->mean, w->root};
  long long *all = malloc(sizeof mine * (size_t)size);
  if (!all) return dc__fail_work(w, "out of memory");
  int rc = MPI_Allgather(mine, 5, MPI_LONG_LONG, all, 5, MPI_LONG_LONG, comm);
  if (rc != MPI_SUCCESS) {
    free(all);
    return dc__fail_mpi(w, rc);
  }
  int rank = 0, other = -1;
  MPI_Comm_rank(comm, &rank);
  for (int r = 0; r < size && other < 0; r++)
    if (memcmp(all + 5 * r, mine, sizeof mine) != 0) other = r;
  if (other < 0) {
    free(all);
    return 0;
  }
  const long long *o = all + 5 * other;
  char a[96], b[96];
  dc__describe(a, sizeof a, w->count, w->dtype, w->kind, w->op, w->mean, w->root);
  dc__describe(b, sizeof b, (size_t)o[0], (em_dtype)o[1], w->kind, (dc_op)o[2], (int)o[3], (int)o[4]);
  free(all);
  w->agreed = 1;
  return dc__fail_work(w, "the tensors differ across ranks: this rank (%d) passes %s, rank %d passes %s "
                          "(every rank must pass the same number of elements of the same dtype, in the same order "
                          "of calls)", rank, a, other, b);
}

/* MPI counts are ints: big buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

int dc__run(dc_work *w, const struct timespec *deadline) {
  size_t es = em_dtype_size(w->dtype);
  MPI_Datatype t = dc__mpi_type(w->dtype);
  int rc = MPI_SUCCESS, size;
  MPI_Comm_size(comm, &size);
  if ((w->kind == DC_BCAST || w->kind == DC_ALLGATHER || w->kind == DC_REDUCE_SCATTER) && size > 1 &&
      same_call_on_every_rank(w, size))
    return 1;
  switch (w->kind) {
  case DC_ALLREDUCE: {
    const p2p_algo algo = dc__allreduce_algo(w, size);
    if (algo != P2P_MPI) {
      int r = dc__p2p_allreduce(w, algo, deadline);
      if (r == 0 && w->mean && algo == P2P_DOUBLING) /* the others dc__divide inside */
        dc__divide(w->recv, w->count, w->dtype, size);
      return r;
    }
    for (size_t at = 0; rc == MPI_SUCCESS && (at < w->count || at == 0); at += PIECE) {
      size_t n = w->count - at < PIECE ? w->count - at : PIECE;
      rc = MPI_Allreduce(MPI_IN_PLACE, (char *)w->recv + at * es, (int)n, t, dc__mpi_op(w->dtype, w->op), comm);
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
      return dc__fail_work(w, "%zu bytes per rank is more than MPI's int count", w->count * es);
    }
    rc = MPI_Allgather(w->send, (int)(w->count * es), MPI_BYTE, w->recv, (int)(w->count * es), MPI_BYTE, comm);
    break;
  case DC_REDUCE_SCATTER:
    if (w->count > INT_MAX) {
      return dc__fail_work(w, "%zu elements per rank is more than MPI's int count", w->count);
    }
    rc = MPI_Reduce_scatter_block(w->send, w->recv, (int)w->count, t, dc__mpi_op(w->dtype, w->op), comm);
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
      return dc__fail_work(w, "out of memory");
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
        return dc__fail_work(w, "out of memory");
      }
      rc = MPI_Allgatherv(w->send, mine, MPI_BYTE, w->gathered, w->counts, displs, MPI_BYTE, comm);
    }
    free(displs);
    break;
  }
  case DC_FINALIZE: /* never reached once a call gave up (broken), so nothing may still write p2p_buf */
    dc__p2p_free();
    for (int i = 0; i < 3; i++) MPI_Op_free(&bf16_ops[i]);
    MPI_Comm_free(&dc__p2p);
    MPI_Comm_free(&comm);
    rc = MPI_Finalize();
    break;
  }
  if (rc != MPI_SUCCESS) return dc__fail_mpi(w, rc);
  if (w->mean) dc__divide(w->recv, w->count, w->dtype, size);
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

int dc__init_mpi(dc_info *info, int *caller_may_run, char *msg, size_t n) {
  /* Lua opens C modules with RTLD_LOCAL, so libmpi's symbols are not
  ** global, and Open MPI's own components (dlopen'ed by MPI_Init) need
  ** them: promote the already loaded library to global. */
  void *self = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  if (!self) self = dlopen("libmpi.so", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  /* The communication thread shares its rank's core (mpirun binds a rank
  ** to one core by default) with the compute threads: an MPI call that
  ** waits yields the core instead of spinning on it, unless the user chose. */
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  if (dc__allreduce_env(msg, n) != 0) return -1;
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
  if ((rc = MPI_Comm_dup(comm, &dc__p2p)) != MPI_SUCCESS) {
    snprintf(msg, n, "MPI_Comm_dup failed (error %d)", rc);
    return -1;
  }
  MPI_Comm_set_errhandler(dc__p2p, MPI_ERRORS_RETURN);
  *caller_may_run = provided >= MPI_THREAD_SERIALIZED;
  MPI_Comm_rank(comm, &info->rank);
  MPI_Comm_size(comm, &info->size);
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info->rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &info->local_rank);
  MPI_Comm_size(local, &info->local_size);
  MPI_Comm_free(&local);
  info->shared_memory = shared_memory_links(info->local_size == info->size);
  dc__split_pieces = !info->shared_memory;
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

int dc__mpi_allreduce_iters(dc_work *w, int iters) {
  int rc = MPI_SUCCESS;
  for (int i = 0; i < iters && rc == MPI_SUCCESS; i++)
    rc = MPI_Allreduce(MPI_IN_PLACE, w->recv, (int)w->count, dc__mpi_type(w->dtype), dc__mpi_op(w->dtype, w->op), comm);
  return rc == MPI_SUCCESS ? 0 : dc__fail_mpi(w, rc);
}
