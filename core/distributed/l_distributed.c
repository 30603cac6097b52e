/*
** l_distributed.c -- the C module ember.distributed_mpi (build/lua/ember/
** distributed_mpi.so), which lua/ember/distributed/init.lua wraps. Only
** this module links MPI; libember and ember/core.so do not.
**
** Every collective is started the same way: the tensor's memory goes to
** MPI directly when it is a contiguous CPU tensor, otherwise through a
** contiguous host copy (non-contiguous views; CUDA and other device
** tensors: host staging) that wait() copies back. A collective returns a
** handle; the Lua side waits at once unless async = true.
**
** A tensor is ember/core.so's full userdata holding one em_tensor pointer,
** recognised by its metatable's __name (this module cannot link the
** binding's hidden helpers).
*/
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "ember.h"
#include "ember_backend.h"

#define HANDLE_MT "ember.distributed.Work"

static dc_info info;
static double timeout_s = 300;
static char sigterm_msg[256];

/* ---- tensors from ember/core.so ---- */

static em_tensor *check_tensor(lua_State *L, int idx, const char *op) {
  em_tensor **p = lua_touserdata(L, idx);
  int ok = p && lua_getmetatable(L, idx);
  if (ok) {
    lua_getfield(L, -1, "__name");
    ok = lua_isstring(L, -1) && strcmp(lua_tostring(L, -1), "ember.Tensor") == 0;
    lua_pop(L, 2);
  }
  if (!ok) luaL_error(L, "ember.distributed.%s: argument %d must be a tensor, got %s", op, idx, luaL_typename(L, idx));
  if (!*p) luaL_error(L, "ember.distributed.%s: the tensor was closed", op);
  return *p;
}

/* ---- work handles ---- */

typedef struct handle {
  dc_work *w;
  em_tensor *target; /* the tensor results land in */
  em_tensor *stage;  /* its contiguous host copy, or NULL when MPI writes target itself */
  em_tensor *src;    /* the send side (all_gather, reduce_scatter), kept alive */
  int waited;
  const char *name;  /* a string literal: the work item keeps pointing at it after the handle is gone */
} handle;

/* Items whose handle was collected before the worker finished: freed once
** done (main thread only, since libember's references are not atomic). */
typedef struct orphan { dc_work *w; em_tensor *t[3]; struct orphan *next; } orphan;
static orphan *orphans;

static void sweep_orphans(int all) {
  for (orphan **o = &orphans; *o;) {
    if (all || dc_done((*o)->w)) {
      orphan *d = *o;
      *o = d->next;
      dc_work_free(d->w);
      for (int i = 0; i < 3; i++) em_release(d->t[i]);
      free(d);
    } else {
      o = &(*o)->next;
    }
  }
}

static void handle_drop(handle *h) {
  if (h->w && !dc_done(h->w)) {
    /* still in MPI (or stuck there after a timeout): keep its memory */
    orphan *o = calloc(1, sizeof *o);
    if (o) {
      *o = (orphan){h->w, {h->target, h->stage, h->src}, orphans};
      orphans = o;
    } /* no memory for the note: leak rather than free buffers MPI may write */
  } else {
    dc_work_free(h->w);
    em_release(h->target);
    em_release(h->stage);
    em_release(h->src);
  }
  h->w = NULL;
  h->target = h->stage = h->src = NULL;
}

static int handle_gc(lua_State *L) {
  handle_drop(luaL_checkudata(L, 1, HANDLE_MT));
  return 0;
}

static handle *new_handle(lua_State *L, const char *name) {
  handle *h = lua_newuserdatauv(L, sizeof *h, 1);
  memset(h, 0, sizeof *h);
  h->name = name;
  luaL_setmetatable(L, HANDLE_MT);
  h->w = calloc(1, sizeof *h->w);
  if (!h->w) luaL_error(L, "ember.distributed.%s: out of memory", name);
  h->w->name = h->name;
  return h;
}

static int fail(lua_State *L, const char *op, em_status s) {
  (void)s;
  return luaL_error(L, "ember.distributed.%s: %s", op, em_error_message());
}

static int on_cpu(const em_tensor *t) {
  em_device cpu;
  return em_cpu_device(&cpu) == EM_OK && em_device_eq(t->device, cpu);
}

/* Does MPI take t's device memory as it is? A contiguous device tensor
** when MPI is CUDA-aware. Only MPI's own collectives may then touch it.
** The backend says whether its pointers are device memory (host_memory);
** CUDA's plugin is the only backend whose are, so device memory is CUDA
** memory here. A second device backend would need the vtable to say whose
** memory its pointers are. */
static int mpi_takes_device_memory(em_tensor *t) {
  const em_backend *be = em_backend_of(t);
  return info.cuda_aware && em_is_contiguous(t) && be && !be->host_memory;
}

/* Can MPI take t's memory as it is? A contiguous CPU tensor always; device
** memory when mpi_takes_device_memory, once the device has finished what it
** queued (MPI's own copies do not wait for our stream). */
static em_status direct_buffer(em_tensor *t, void **ptr) {
  *ptr = NULL;
  em_tensor_written(t); /* MPI may write it (a spurious count for a send only drops a cached cast) */
  if (on_cpu(t)) { /* the common case, first */
    if (em_is_contiguous(t)) *ptr = em_data(t);
    return EM_OK;
  }
  if (!mpi_takes_device_memory(t)) return EM_OK;
  em_status s = em_device_synchronize(t->device);
  if (s == EM_OK) *ptr = em_data(t);
  return s;
}

/* A buffer MPI can use for t: t's own memory when direct_buffer allows;
** otherwise a contiguous host copy (copy_in: with t's values) in *stage
** (the CUDA backend's copies go through its pinned staging buffers). */
static em_status host_buffer(em_tensor *t, int copy_in, em_tensor **stage, void **ptr) {
  em_device cpu;
  *stage = NULL;
  em_status s = em_cpu_device(&cpu);
  if (s == EM_OK) s = direct_buffer(t, ptr);
  if (s || *ptr) return s;
  if (!copy_in) s = em_empty(stage, t->ndim, t->shape, t->dtype, cpu);
  else if (em_device_eq(t->device, cpu)) s = em_clone(stage, t);
  else s = em_to_device(stage, t, cpu);
  if (s == EM_OK && !em_is_contiguous(*stage)) { /* to_device keeps a layout it can */
    em_tensor *c;
    s = em_contiguous(&c, *stage);
    em_release(*stage);
    *stage = s == EM_OK ? c : NULL;
  }
  if (s == EM_OK) *ptr = em_data(*stage);
  return s;
}

static void submit(lua_State *L, handle *h) {
  char err[400];
  sweep_orphans(0);
  if (dc_submit(h->w, err, sizeof err) != 0) {
    h->w->done = 1; /* never queued: freeable */
    luaL_error(L, "ember.distributed.%s", err);
  }
}

static dc_op check_op(lua_State *L, int idx, em_dtype dt, const char *name, int *mean) {
  static const char *const ops[] = {"sum", "mean", "max", "min", NULL};
  const char *given = luaL_optstring(L, idx, "sum");
  int op = 0;
  while (ops[op] && strcmp(ops[op], given) != 0) op++;
  if (!ops[op]) luaL_error(L, "ember.distributed.%s: unknown op '%s' (expected sum, mean, max or min)", name, given);
  *mean = op == 1;
  if (op == 1) {
    if (!em_dtype_is_float(dt))
      luaL_error(L, "ember.distributed.%s: op 'mean' needs a floating-point tensor, got %s", name, em_dtype_name(dt));
    return DC_SUM;
  }
  return op == 0 ? DC_SUM : op == 2 ? DC_MAX : DC_MIN;
}

/* all_reduce(t [, op [, sync]]) -> handle; t is reduced in place. sync:
** the caller waits at once, so it may run on this thread (dc_run_here). */
static int f_all_reduce(lua_State *L) {
  em_tensor *t = check_tensor(L, 1, "all_reduce");
  int mean;
  dc_op op = check_op(L, 2, t->dtype, "all_reduce", &mean);
  handle *h = new_handle(L, "all_reduce");
  void *p;
  em_status s = host_buffer(t, 1, &h->stage, &p);
  if (s) return fail(L, "all_reduce", s);
  h->target = em_retain(t);
  *h->w = (dc_work){.kind = DC_ALLREDUCE, .dtype = t->dtype, .op = op, .mean = mean, .recv = p,
                    .device = mpi_takes_device_memory(t), .count = (size_t)em_numel(t), .name = h->name};
  /* run here or not, wait() then reports the outcome and copies back */
  if (!lua_toboolean(L, 3) || dc_run_here(h->w, timeout_s) == -2) submit(L, h);
  return 1;
}

/* all_reduce_now(t [, op]) -> true when done: the synchronous all-reduce of
** a contiguous CPU tensor, run on this thread (dc_run_here) without a
** handle, which the per-step loss average every script makes then pays
** nothing for. false: not this way (MPI_Allreduce, a staged tensor, a busy
** worker), so the caller goes through all_reduce. */
static int f_all_reduce_now(lua_State *L) {
  em_tensor *t = check_tensor(L, 1, "all_reduce");
  int mean;
  dc_op op = check_op(L, 2, t->dtype, "all_reduce", &mean);
  if (!on_cpu(t) || !em_is_contiguous(t)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  dc_work w = {.kind = DC_ALLREDUCE, .dtype = t->dtype, .op = op, .mean = mean, .recv = em_data(t),
               .count = (size_t)em_numel(t), .name = "all_reduce"};
  const int r = dc_run_here(&w, timeout_s);
  if (r == -2) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (r != 0) {
    if (w.abandoned) em_retain(t); /* MPI may still write its memory: never freed */
    lua_pushfstring(L, "ember.distributed: rank %d (of %d ranks): %s", info.rank, info.size, w.msg);
    return lua_error(L);
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* bench_mpi_allreduce(t, iters): iters plain MPI_Allreduce sums of t in
** place, on this thread (dc_mpi_allreduce_here): the peer that
** scripts/bench/allreduce.lua times ember's all_reduce against, in the same
** process. Not part of ember.distributed's API. */
static int f_bench_mpi_allreduce(lua_State *L) {
  em_tensor *t = check_tensor(L, 1, "bench_mpi_allreduce");
  const lua_Integer iters = luaL_checkinteger(L, 2);
  luaL_argcheck(L, iters >= 1 && iters <= INT_MAX, 2, "iterations out of range");
  if (!on_cpu(t) || !em_is_contiguous(t))
    return luaL_error(L, "ember.distributed.bench_mpi_allreduce: needs a contiguous CPU tensor");
  if (em_numel(t) > INT_MAX)
    return luaL_error(L, "ember.distributed.bench_mpi_allreduce: %I elements is more than MPI's int count",
                      (lua_Integer)em_numel(t));
  dc_work w = {.kind = DC_ALLREDUCE, .dtype = t->dtype, .op = DC_SUM, .recv = em_data(t),
               .count = (size_t)em_numel(t), .name = "bench_mpi_allreduce"};
  const int r = dc_mpi_allreduce_here(&w, (int)iters, timeout_s);
  if (r == -2) return luaL_error(L, "ember.distributed.bench_mpi_allreduce: MPI is not available to this thread");
  if (r != 0) return luaL_error(L, "ember.distributed: rank %d (of %d ranks): %s", info.rank, info.size, w.msg);
  return 0;
}

/* all_reduce_algorithm(t) -> the name of the way all_reduce(t) runs. */
static int f_all_reduce_algorithm(lua_State *L) {
  em_tensor *t = check_tensor(L, 1, "all_reduce_algorithm");
  lua_pushstring(L, dc_allreduce_algorithm(t->dtype, (size_t)em_numel(t), mpi_takes_device_memory(t)));
  return 1;
}

/* broadcast(t, root) -> handle; root is 0-based here (the Lua side converts). */
static int f_broadcast(lua_State *L) {
  em_tensor *t = check_tensor(L, 1, "broadcast");
  lua_Integer root = luaL_checkinteger(L, 2);
  if (root < 0 || root >= info.size)
    return luaL_error(L, "ember.distributed.broadcast: root rank %d is not in 0..%d", (int)root, info.size - 1);
  handle *h = new_handle(L, "broadcast");
  void *p;
  em_status s = host_buffer(t, info.rank == root, &h->stage, &p);
  if (s) return fail(L, "broadcast", s);
  h->target = em_retain(t);
  *h->w = (dc_work){.kind = DC_BCAST, .dtype = t->dtype, .root = (int)root, .recv = p,
                    .count = (size_t)em_numel(t), .name = h->name};
  submit(L, h);
  return 1;
}

static void check_pair(lua_State *L, const char *op, em_tensor *out, em_tensor *in, int64_t out_numel) {
  char a[40], b[40];
  if (out->dtype != in->dtype)
    luaL_error(L, "ember.distributed.%s: output is %s but input is %s", op, em_dtype_name(out->dtype), em_dtype_name(in->dtype));
  if (!em_device_eq(out->device, in->device))
    luaL_error(L, "ember.distributed.%s: output is on %s but input on %s", op, em_device_str(out->device, a, sizeof a),
               em_device_str(in->device, b, sizeof b));
  if (em_numel(out) != out_numel)
    luaL_error(L, "ember.distributed.%s: output has %I elements, expected %I", op, (lua_Integer)em_numel(out),
               (lua_Integer)out_numel);
}

/* all_gather(out, t) -> handle; out holds world_size * numel(t) elements, rank order. */
static int f_all_gather(lua_State *L) {
  em_tensor *out = check_tensor(L, 1, "all_gather"), *t = check_tensor(L, 2, "all_gather");
  check_pair(L, "all_gather", out, t, em_numel(t) * info.size);
  handle *h = new_handle(L, "all_gather");
  void *po, *pi;
  em_status s = host_buffer(out, 0, &h->stage, &po);
  h->target = em_retain(out);
  if (s == EM_OK) s = host_buffer(t, 1, &h->src, &pi);
  if (s) return fail(L, "all_gather", s);
  if (!h->src) h->src = em_retain(t);
  *h->w = (dc_work){.kind = DC_ALLGATHER, .dtype = t->dtype, .send = pi, .recv = po,
                    .count = (size_t)em_numel(t), .name = h->name};
  submit(L, h);
  return 1;
}

/* reduce_scatter(out, t [, op]) -> handle; t holds world_size * numel(out) elements. */
static int f_reduce_scatter(lua_State *L) {
  em_tensor *out = check_tensor(L, 1, "reduce_scatter"), *t = check_tensor(L, 2, "reduce_scatter");
  int mean;
  dc_op op = check_op(L, 3, t->dtype, "reduce_scatter", &mean);
  check_pair(L, "reduce_scatter", t, out, em_numel(out) * info.size);
  handle *h = new_handle(L, "reduce_scatter");
  void *po, *pi;
  em_status s = host_buffer(out, 0, &h->stage, &po);
  h->target = em_retain(out);
  if (s == EM_OK) s = host_buffer(t, 1, &h->src, &pi);
  if (s) return fail(L, "reduce_scatter", s);
  if (!h->src) h->src = em_retain(t);
  *h->w = (dc_work){.kind = DC_REDUCE_SCATTER, .dtype = t->dtype, .op = op, .mean = mean, .send = pi, .recv = po,
                    .count = (size_t)em_numel(out), .name = h->name};
  submit(L, h);
  return 1;
}

static int f_barrier(lua_State *L) {
  handle *h = new_handle(L, "barrier");
  *h->w = (dc_work){.kind = DC_BARRIER, .name = h->name};
  submit(L, h);
  return 1;
}

/* all_gather_string(s) -> handle whose wait() returns the list of every rank's string. */
static int f_all_gather_string(lua_State *L) {
  size_t n;
  luaL_checklstring(L, 1, &n);
  handle *h = new_handle(L, "all_gather_string");
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1); /* keeps the bytes alive */
  *h->w = (dc_work){.kind = DC_GATHER_BYTES, .dtype = EM_BOOL, .send = (void *)lua_tostring(L, 1),
                    .count = n, .name = h->name};
  submit(L, h);
  return 1;
}

/* handle:wait() -> true (all_gather_string: the list of strings). Raises
** the collective's error, or a timeout after the module's timeout. */
static int m_wait(lua_State *L) {
  handle *h = luaL_checkudata(L, 1, HANDLE_MT);
  if (!h->w) return luaL_error(L, "ember.distributed.%s: this work was already released", h->name);
  if (!h->waited) {
    if (dc_wait(h->w, timeout_s) != 0) {
      lua_pushfstring(L, "ember.distributed: rank %d (of %d ranks): %s", info.rank, info.size, h->w->msg);
      return lua_error(L);
    }
    h->waited = 1;
    bool prev = em_set_grad_enabled(false); /* results are written in place, like torch.distributed */
    em_status s = EM_OK;
    if (h->stage) s = em_copy_(h->target, h->stage);
    em_set_grad_enabled(prev);
    if (s) return fail(L, h->name, s);
  }
  if (h->w->kind == DC_GATHER_BYTES) {
    lua_createtable(L, info.size, 0);
    size_t at = 0;
    for (int r = 0; r < info.size; r++) {
      lua_pushlstring(L, h->w->gathered + at, (size_t)h->w->counts[r]);
      lua_rawseti(L, -2, r + 1);
      at += (size_t)h->w->counts[r];
    }
    return 1;
  }
  lua_pushboolean(L, 1);
  return 1;
}

static int m_is_completed(lua_State *L) {
  handle *h = luaL_checkudata(L, 1, HANDLE_MT);
  lua_pushboolean(L, !h->w || dc_done(h->w));
  return 1;
}

static int m_tostring(lua_State *L) {
  handle *h = luaL_checkudata(L, 1, HANDLE_MT);
  lua_pushfstring(L, "ember.distributed work (%s, %s)", h->name,
                  !h->w || dc_done(h->w) ? "completed" : "in flight");
  return 1;
}

/* ---- the process ---- */

/* mpirun stops every rank with SIGTERM when one fails or dies: say so
** before going (write and _exit are async-signal-safe). */
static void on_sigterm(int sig) {
  (void)sig;
  ssize_t r = write(STDERR_FILENO, sigterm_msg, strlen(sigterm_msg));
  (void)r;
  _exit(143);
}

/* init(timeout) -> {rank=, size=, local_rank=, local_size=, library=, thread_level=, cuda_aware=, shared_memory=} (0-based ranks) */
static int f_init(lua_State *L) {
  timeout_s = luaL_optnumber(L, 1, timeout_s);
  if (!dc_started()) {
    char err[400];
    if (dc_start(&info, err, sizeof err) != 0) return luaL_error(L, "ember.distributed.init: %s", err);
    snprintf(sigterm_msg, sizeof sigterm_msg,
             "ember.distributed: rank %d (of %d ranks) stopped by SIGTERM: mpirun ends every rank when one "
             "fails or dies (see that rank's message)\n", info.rank, info.size);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, NULL);
  }
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, info.rank);
  lua_setfield(L, -2, "rank");
  lua_pushinteger(L, info.size);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, info.local_rank);
  lua_setfield(L, -2, "local_rank");
  lua_pushinteger(L, info.local_size);
  lua_setfield(L, -2, "local_size");
  lua_pushstring(L, info.library);
  lua_setfield(L, -2, "library");
  lua_pushinteger(L, info.thread_level);
  lua_setfield(L, -2, "thread_level");
  lua_pushboolean(L, info.cuda_aware);
  lua_setfield(L, -2, "cuda_aware");
  lua_pushboolean(L, info.shared_memory);
  lua_setfield(L, -2, "shared_memory");
  return 1;
}

static int f_set_timeout(lua_State *L) {
  double t = luaL_checknumber(L, 1);
  if (!(t > 0)) return luaL_error(L, "ember.distributed.set_timeout: the timeout must be > 0 seconds, got %f", t);
  timeout_s = t;
  return 0;
}

static int f_timeout(lua_State *L) {
  lua_pushnumber(L, timeout_s);
  return 1;
}

static int f_broken(lua_State *L) {
  const char *b = dc_broken();
  if (b) lua_pushstring(L, b); else lua_pushnil(L);
  return 1;
}

/* Marks the process unable to communicate (the Lua side does, when a
** rank's collective failed and it gives up). */
static int f_mark_broken(lua_State *L) {
  dc_mark_broken(luaL_checkstring(L, 1));
  return 0;
}

/* finalize([timeout]) -> true, or false and why. MPI_Finalize waits for
** every rank, so it is skipped when this rank failed (the `ember` program
** sets registry["ember.failed"] before closing the state) or can no longer
** communicate; the process then exits without it and mpirun ends the job. */
static int f_finalize(lua_State *L) {
  double t = luaL_optnumber(L, 1, timeout_s);
  char err[400] = "";
  int failed = lua_getfield(L, LUA_REGISTRYINDEX, "ember.failed") == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!dc_started()) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (failed) dc_mark_broken("this rank failed");
  int rc = dc_finalize(t, err, sizeof err);
  if (rc == 0) sweep_orphans(1);
  lua_pushboolean(L, rc == 0);
  lua_pushstring(L, err);
  return 2;
}

/* The state's sentinel: finalizes when the Lua state closes. */
static int sentinel_gc(lua_State *L) {
  lua_pushcfunction(L, f_finalize);
  lua_call(L, 0, 2);
  if (!lua_toboolean(L, -2) && dc_broken() == NULL) {
    fprintf(stderr, "ember.distributed: rank %d (of %d ranks): %s\n", info.rank, info.size, lua_tostring(L, -1));
  }
  return 0;
}

static const luaL_Reg funcs[] = {
  {"init", f_init},
  {"all_reduce", f_all_reduce},
  {"all_reduce_now", f_all_reduce_now},
  {"all_reduce_algorithm", f_all_reduce_algorithm},
  {"bench_mpi_allreduce", f_bench_mpi_allreduce},
  {"broadcast", f_broadcast},
  {"all_gather", f_all_gather},
  {"reduce_scatter", f_reduce_scatter},
  {"barrier", f_barrier},
  {"all_gather_string", f_all_gather_string},
  {"set_timeout", f_set_timeout},
  {"timeout", f_timeout},
  {"broken", f_broken},
  {"mark_broken", f_mark_broken},
  {"finalize", f_finalize},
  {NULL, NULL}
};

static const luaL_Reg handle_methods[] = {
  {"wait", m_wait},
  {"is_completed", m_is_completed},
  {NULL, NULL}
};

int luaopen_ember_distributed_mpi(lua_State *L) __attribute__((visibility("default")));
int luaopen_ember_distributed_mpi(lua_State *L) {
  if (luaL_newmetatable(L, HANDLE_MT)) {
    luaL_newlib(L, handle_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, handle_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, m_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  lua_newuserdatauv(L, 1, 0);
  lua_newtable(L);
  lua_pushcfunction(L, sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "_sentinel");
  return 1;
}
