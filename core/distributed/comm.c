/*
** comm.c -- the worker thread that owns MPI (see comm.h).
**
** MPI_Init_thread runs on the worker, so MPI_THREAD_FUNNELED is enough:
** only the thread that initialised MPI ever calls it. Errors are returned
** (MPI_ERRORS_RETURN on the communicator), never fatal, and become the
** message of the work item.
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
static char broken[400];
static MPI_Comm comm = MPI_COMM_NULL;
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

/* The mean from the sum, on the worker so it overlaps too: each value is
** divided in double and rounded once to the dtype (floating dtypes only). */
static void divide(void *buf, size_t n, em_dtype dt, int size) {
  double d = (double)size;
  if (dt == EM_F32) {
    float *x = buf;
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)x[i] / d);
  } else if (dt == EM_F64) {
    double *x = buf;
    for (size_t i = 0; i < n; i++) x[i] /= d;
  } else if (dt == EM_BF16) {
    uint16_t *x = buf;
    for (size_t i = 0; i < n; i++) x[i] = f32_to_bf16((float)((double)bf16_to_f32(x[i]) / d));
  }
}

static int fail_mpi(dc_work *w, int rc) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, s, &n);
  snprintf(w->msg, sizeof w->msg, "%s: MPI error: %s", w->name, s);
  w->failed = 1;
  return rc;
}

/* MPI counts are ints: big buffers go in pieces of at most 2^30 elements. */
#define PIECE ((size_t)1 << 30)

static void run(dc_work *w) {
  size_t es = em_dtype_size(w->dtype);
  MPI_Datatype t = mpi_type(w->dtype);
  int rc = MPI_SUCCESS, size;
  MPI_Comm_size(comm, &size);
  switch (w->kind) {
  case DC_ALLREDUCE:
    for (size_t at = 0; rc == MPI_SUCCESS && (at < w->count || at == 0); at += PIECE) {
      size_t n = w->count - at < PIECE ? w->count - at : PIECE;
      rc = MPI_Allreduce(MPI_IN_PLACE, (char *)w->recv + at * es, (int)n, t, mpi_op(w->dtype, w->op), comm);
      if (w->count == 0) break;
    }
    break;
  case DC_BCAST:
    for (size_t at = 0; rc == MPI_SUCCESS && (at < w->count || at == 0); at += PIECE) {
      size_t n = w->count - at < PIECE ? w->count - at : PIECE;
      rc = MPI_Bcast((char *)w->recv + at * es, (int)(n * es), MPI_BYTE, w->root, comm);
      if (w->count == 0) break;
    }
    break;
  case DC_ALLGATHER:
    if (w->count * es > INT_MAX) {
      snprintf(w->msg, sizeof w->msg, "%s: %zu bytes per rank is more than MPI's int count", w->name, w->count * es);
      w->failed = 1;
      return;
    }
    rc = MPI_Allgather(w->send, (int)(w->count * es), MPI_BYTE, w->recv, (int)(w->count * es), MPI_BYTE, comm);
    break;
  case DC_REDUCE_SCATTER:
    if (w->count > INT_MAX) {
      snprintf(w->msg, sizeof w->msg, "%s: %zu elements per rank is more than MPI's int count", w->name, w->count);
      w->failed = 1;
      return;
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
      snprintf(w->msg, sizeof w->msg, "%s: out of memory", w->name);
      w->failed = 1;
      return;
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
        snprintf(w->msg, sizeof w->msg, "%s: out of memory", w->name);
        w->failed = 1;
        return;
      }
      rc = MPI_Allgatherv(w->send, mine, MPI_BYTE, w->gathered, w->counts, displs, MPI_BYTE, comm);
    }
    free(displs);
    break;
  }
  case DC_FINALIZE:
    for (int i = 0; i < 3; i++) MPI_Op_free(&bf16_ops[i]);
    MPI_Comm_free(&comm);
    rc = MPI_Finalize();
    break;
  }
  if (rc != MPI_SUCCESS) {
    fail_mpi(w, rc);
  } else if (w->mean) {
    divide(w->recv, w->count, w->dtype, size);
  }
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
  int provided = 0, rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
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
  MPI_Comm_rank(comm, &info->rank);
  MPI_Comm_size(comm, &info->size);
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, info->rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &info->local_rank);
  MPI_Comm_size(local, &info->local_size);
  MPI_Comm_free(&local);
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
    while (!head) pthread_cond_wait(&work_cv, &lock);
    dc_work *w = head;
    head = w->next;
    if (!head) tail = NULL;
    pthread_mutex_unlock(&lock);
    run(w);
    int last = w->kind == DC_FINALIZE;
    pthread_mutex_lock(&lock);
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

int dc_wait(dc_work *w, double timeout) {
  struct timespec until;
  deadline_after(&until, timeout);
  int rc = 0;
  pthread_mutex_lock(&lock);
  while (!w->done && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&done_cv, &lock, &until);
  int done = w->done;
  pthread_mutex_unlock(&lock);
  if (!done) {
    snprintf(w->msg, sizeof w->msg,
             "%s timed out after %g s: another rank failed, was killed, or is not calling the same "
             "collectives in the same order", w->name, timeout);
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
