/*
** comm.c -- the work queue of comm.h: the worker thread that owns MPI runs
** what is submitted, in order; the Lua thread submits, waits with a
** deadline, or runs a synchronous all-reduce itself once the queue is
** empty (dc_run_here). MPI itself is comm_mpi.c's, the point-to-point
** all-reduces comm_allreduce.c's.
*/
#include "comm_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
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
static char broken[400];

/* start-up handshake */
static int init_done, init_failed;
static char init_msg[400];
static dc_info *init_info;

static void timeout_message(dc_work *w, double timeout) {
  snprintf(w->msg, sizeof w->msg,
           "%s timed out after %g s: another rank failed, was killed, or is not calling the same "
           "collectives in the same order", w->name, timeout);
}

static void *worker_main(void *arg) {
  (void)arg;
  char msg[400] = "";
  int ok = dc__init_mpi(init_info, &caller_may_run, msg, sizeof msg) == 0;
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
    dc__run(w, NULL);
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
  world_size = info->size;
  started = 1;
  return 0;
}

const char *dc_allreduce_algorithm(em_dtype dt, size_t count, int device) {
  const dc_work w = {.kind = DC_ALLREDUCE, .dtype = dt, .count = count, .device = device};
  return dc__allreduce_algo_name(dc__allreduce_algo(&w, world_size));
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
  if (dc__allreduce_algo(w, world_size) == P2P_MPI) return -2;
  struct timespec until;
  deadline_after(&until, timeout);
  w->next = NULL;
  if (!claim_for_caller(w, &until, timeout)) { /* never reached MPI: freeable */
    w->done = w->failed = 1;
    return -1;
  }
  const int r = dc__run(w, &until);
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
  const int failed = dc__mpi_allreduce_iters(w, iters);
  release_from_caller(w, 0);
  if (!failed) return 0;
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
    if (!w->agreed) dc_mark_broken(w->msg);
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
