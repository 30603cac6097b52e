/*
** l_library.c -- library state from Lua: threads, devices, memory, a
** monotonic clock for benchmarks and progress bars, and the profiler's
** primitives.
*/
#include <limits.h>
#include <string.h>
#include <time.h>

#include "ember_backend.h"
#include "lember.h"

static int f_set_num_threads(lua_State *L) {
  int64_t n = lember_checkint(L, 1, "set_num_threads", "n");
  if (n < 1) return luaL_error(L, "ember.set_num_threads: n must be >= 1, got %I", (lua_Integer)n);
  /* A bound well past any machine's hardware threads: 1e9 was taken, and
  ** the next parallel op had OpenMP start that many threads, which
  ** crashed inside libgomp under an address-space limit (ulimit -v); 2^32
  ** + 2 had been taken as 2 (a C int). */
  enum { MAX_THREADS = 4096 };
  if (n > MAX_THREADS)
    return luaL_error(L, "ember.set_num_threads: n must be at most %d, got %I", MAX_THREADS, (lua_Integer)n);
  em_set_num_threads((int)n);
  return 0;
}

static int f_get_num_threads(lua_State *L) {
  lua_pushinteger(L, em_get_num_threads());
  return 1;
}

/* The backend of a device argument (default "cpu"). */
static const em_backend *device_backend(lua_State *L, int idx, const char *op, em_device *dev) {
  *dev = lua_isnoneornil(L, idx) ? lember_cpu(L) : lember_checkdevice(L, idx, op);
  const em_backend *be = em_backend_get(dev->backend);
  if (!be) luaL_error(L, "ember.%s: no backend in slot %d", op, dev->backend);
  return be;
}

/* device_count("cuda"): 0 when no such backend is loaded. A device's name
** ("cuda:1") is refused: it read as a type no backend has, so 0. */
static int f_device_count(lua_State *L) {
  const char *type = luaL_optstring(L, 1, "cpu");
  if (strchr(type, ':'))
    return luaL_error(L, "ember.device_count: expects a device type such as \"cuda\", got the device \"%s\"", type);
  int slot;
  if (em_backend_find(type, &slot) != EM_OK) {
    lua_pushinteger(L, 0);
    return 1;
  }
  const em_backend *be = em_backend_get(slot);
  lua_pushinteger(L, be ? be->device_count() : 0);
  return 1;
}

static int f_synchronize(lua_State *L) {
  em_device dev;
  device_backend(L, 1, "synchronize", &dev);
  em_status s = em_device_synchronize(dev);
  if (s) return lember_error(L, "synchronize", s);
  return 0;
}

static int f_memory_stats(lua_State *L) {
  em_device dev;
  const em_backend *be = device_backend(L, 1, "memory_stats", &dev);
  size_t in_use = em_live_bytes(), cached = 0;
  if (be->memory_stats) {
    em_status s = be->memory_stats(dev.index, &in_use, &cached);
    if (s) return lember_error(L, "memory_stats", s);
  }
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, (lua_Integer)in_use);
  lua_setfield(L, -2, "in_use");
  lua_pushinteger(L, (lua_Integer)cached);
  lua_setfield(L, -2, "cached");
  return 1;
}

static int f_empty_cache(lua_State *L) {
  em_device dev;
  const em_backend *be = device_backend(L, 1, "empty_cache", &dev);
  if (be->empty_cache) {
    em_status s = be->empty_cache(dev.index);
    if (s) return lember_error(L, "empty_cache", s);
  }
  return 0;
}

/* ember.device_name([device]): the backend's name of a device (a GPU's
** "NVIDIA H100 80GB HBM3", the CPU's model), nil where the backend gives
** none; ember.cuda.get_device_name is built on it. */
static int f_device_name(lua_State *L) {
  em_device dev;
  const em_backend *be = device_backend(L, 1, "device_name", &dev);
  if (!be->device_name) {
    lua_pushnil(L);
    return 1;
  }
  char buf[256];
  em_status s = be->device_name(dev.index, buf, sizeof buf);
  if (s) return lember_error(L, "device_name", s);
  lua_pushstring(L, buf);
  return 1;
}

static int f_live_bytes(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)em_live_bytes());
  return 1;
}

/* ember.max_memory_allocated() and ember.reset_peak_memory_stats():
** torch.cuda's names for the peak of the tensor bytes (all devices, as
** live_bytes) since the last reset; a device argument is taken and not
** needed, but it must name a device ("nonsense" was taken silently). */
static void opt_device(lua_State *L, const char *op) {
  if (!lua_isnoneornil(L, 1)) (void)lember_checkdevice(L, 1, op);
}

static int f_max_memory_allocated(lua_State *L) {
  opt_device(L, "max_memory_allocated");
  lua_pushinteger(L, (lua_Integer)em_peak_bytes());
  return 1;
}

static int f_reset_peak_memory_stats(lua_State *L) {
  opt_device(L, "reset_peak_memory_stats");
  em_reset_peak_bytes();
  return 0;
}

/* ember.clock(): seconds from a monotonic clock, as a float. */
static int f_clock(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* ember.cpu_info(): what computes each dtype on the CPU backend (library
** and instruction set), the thread count and the processor's name; `blas`
** repeats the BLAS part of the float64 line ("; blas: " to the end: the
** library, the core it runs and why), the line every CPU backend gives;
** `tile_gemm` is the first word of the float32 line's "attention: " part,
** the path of the fused attention's float32 tiles ("avx512", "avx2",
** "plain" or "blas"); `team` is the float32 line's "; team: " part, how
** the thread team is used ("adaptive, now parallel (...)": see
** backends/cpu/cpu_team.c). */
static int f_cpu_info(lua_State *L) {
  int slot;
  em_status s = em_backend_find("cpu", &slot);
  if (s) return lember_error(L, "cpu_info", s);
  const em_backend *be = em_backend_get(slot);
  char buf[1024];
  lua_createtable(L, 0, 8);
  if (be->kernel_info) {
    const em_dtype dts[] = {EM_F32, EM_BF16, EM_F64};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
      if ((s = be->kernel_info(0, dts[i], buf, sizeof buf))) return lember_error(L, "cpu_info", s);
      lua_pushstring(L, buf);
      lua_setfield(L, -2, em_dtype_name(dts[i]));
      const char *blas = dts[i] == EM_F64 ? strstr(buf, "; blas: ") : NULL;
      if (blas) {
        lua_pushstring(L, blas + 8);
        lua_setfield(L, -2, "blas");
      }
      const char *team = dts[i] == EM_F32 ? strstr(buf, "; team: ") : NULL;
      if (team) {
        team += 8;
        lua_pushlstring(L, team, strcspn(team, ";"));
        lua_setfield(L, -2, "team");
      }
      const char *tile = dts[i] == EM_F32 ? strstr(buf, "; attention: ") : NULL;
      if (tile) {
        tile += 13;
        lua_pushlstring(L, tile, strcspn(tile, " ;"));
        lua_setfield(L, -2, "tile_gemm");
      }
    }
  }
  lua_pushinteger(L, be->get_num_threads ? be->get_num_threads() : 1);
  lua_setfield(L, -2, "threads");
  if (be->device_name && be->device_name(0, buf, sizeof buf) == EM_OK) {
    lua_pushstring(L, buf);
    lua_setfield(L, -2, "name");
  }
  return 1;
}

/* ember.set_autocast(enabled [, dtype]) -> previous enabled, previous dtype
** name. The scope objects of ember.autocast (lua/ember/autocast.lua) are
** built on it. */
static int f_set_autocast(lua_State *L) {
  bool on = lua_toboolean(L, 1);
  em_dtype dt = EM_BF16, was_dt;
  bool was;
  if (!lua_isnoneornil(L, 2)) {
    em_status s = em_dtype_parse(luaL_checkstring(L, 2), &dt);
    if (s) return lember_error(L, "set_autocast", s);
  }
  em_status s = em_autocast_set(on, dt, &was, &was_dt);
  if (s) return lember_error(L, "set_autocast", s);
  lua_pushboolean(L, was);
  lua_pushstring(L, em_dtype_name(was_dt));
  return 2;
}

/* core._autocast_state() -> enabled, dtype name: the state without setting
** it (setting it, even to itself, would end a region's cast cache). */
static int f_autocast_state(lua_State *L) {
  em_dtype dt;
  lua_pushboolean(L, em_autocast_enabled(&dt));
  lua_pushstring(L, em_dtype_name(dt));
  return 2;
}

/* core._autocast_pause(on) -> whether it was on: autocast on or off
** without ending its region, so its cast cache stays (em_autocast_pause);
** set_autocast(false) would end it. autocast.lua's M._outside is built on it. */
static int f_autocast_pause(lua_State *L) {
  lua_pushboolean(L, em_autocast_pause(lua_toboolean(L, 1)));
  return 1;
}

/* core._autocast_cast(t) -> t as autocast's products take it (em_autocast_cast). */
static int f_autocast_cast(lua_State *L) {
  em_tensor *x = lember_checktensor(L, 1);
  em_tensor **out = lember_newslot(L);
  em_status s = em_autocast_cast(out, x);
  if (s) return lember_error(L, "autocast.cast", s);
  lember_account(L, *out);
  return 1;
}

/* ember.dtype_info(name) -> {name=, size=, floating=} for any name the core
** accepts ("double" -> float64), or nil and the reason. Lua code asks this
** instead of keeping its own list of dtype names. */
static int f_dtype_info(lua_State *L) {
  em_dtype dt;
  if (em_dtype_parse(luaL_checkstring(L, 1), &dt) != EM_OK) {
    lua_pushnil(L);
    lua_pushstring(L, em_error_message());
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_pushstring(L, em_dtype_name(dt));
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, (lua_Integer)em_dtype_size(dt));
  lua_setfield(L, -2, "size");
  lua_pushboolean(L, em_dtype_is_float(dt));
  lua_setfield(L, -2, "floating");
  return 1;
}

/* ember.get_default_dtype() -> "float32": the dtype of floating tensors
** made without one (em_default_dtype). */
static int f_get_default_dtype(lua_State *L) {
  lua_pushstring(L, em_dtype_name(em_default_dtype()));
  return 1;
}

/* ember.set_default_dtype(dtype): float32, float64 or bfloat16 (any name
** the core accepts: "double", "torch.float64"); others are refused, as
** torch refuses them. */
static int f_set_default_dtype(lua_State *L) {
  em_dtype dt = lember_checkdtype(L, 1, "set_default_dtype");
  lember_noextra(L, 1, "set_default_dtype", NULL);
  em_status s = em_set_default_dtype(dt);
  if (s) return lember_error(L, "set_default_dtype", s);
  return 0;
}

/* ember.promote_types(a, b) -> dtype: torch.promote_types (em_promote_types). */
static int f_promote_types(lua_State *L) {
  em_dtype a = lember_checkdtype(L, 1, "promote_types"), b = lember_checkdtype(L, 2, "promote_types");
  lember_noextra(L, 2, "promote_types", NULL);
  lua_pushstring(L, em_dtype_name(em_promote_types(a, b)));
  return 1;
}

/* ember.can_cast(from, to) -> boolean: torch.can_cast (em_can_cast). */
static int f_can_cast(lua_State *L) {
  em_dtype a = lember_checkdtype(L, 1, "can_cast"), b = lember_checkdtype(L, 2, "can_cast");
  lember_noextra(L, 2, "can_cast", NULL);
  lua_pushboolean(L, em_can_cast(a, b));
  return 1;
}

/* An operand of result_type: its dtype and its priority (2 a dimensioned
** tensor, 1 a 0-d one, 0 a number: true/false is bool, a Lua integer int64,
** a Lua float the default dtype, as a Python number in torch). */
static em_dtype operand_dtype(lua_State *L, int idx, int *level) {
  em_tensor *t = lember_testtensor(L, idx);
  if (t) {
    *level = t->ndim > 0 ? 2 : 1;
    return t->dtype;
  }
  *level = 0;
  if (lua_type(L, idx) == LUA_TBOOLEAN) return EM_BOOL;
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_isinteger(L, idx) ? EM_I64 : em_default_dtype();
  luaL_error(L, "ember.result_type: argument %d must be a tensor or a number, got %s", idx, luaL_typename(L, idx));
  return EM_F32;
}

/* ember.result_type(a, b) -> dtype: what a op b gives (torch.result_type):
** two tensors as em_result_type; a number, like a 0-d tensor, decides only
** when its category is higher. */
static int f_result_type(lua_State *L) {
  int la, lb;
  em_dtype a = operand_dtype(L, 1, &la), b = operand_dtype(L, 2, &lb);
  lember_noextra(L, 2, "result_type", NULL);
  em_dtype r;
  if (la > 0 && lb > 0) r = em_result_type(lember_testtensor(L, 1), lember_testtensor(L, 2)); /* the ops' rule */
  else if (la == lb) r = em_promote_types(a, b); /* two numbers */
  else if (la > lb) r = em_can_cast(b, a) ? a : b;
  else r = em_can_cast(a, b) ? b : a;
  lua_pushstring(L, em_dtype_name(r));
  return 1;
}

/* ---- the profiler (core/src/profiler.c); lua/ember/profiler.lua builds
** ember.profile and the report on these ---- */

static int f_profiler_start(lua_State *L) {
  em_status s = em_profiler_start();
  if (s) return lember_error(L, "profiler.start", s);
  return 0;
}

static int f_profiler_stop(lua_State *L) {
  (void)L;
  em_profiler_stop();
  return 0;
}

static int f_profiler_enabled(lua_State *L) {
  lua_pushboolean(L, em_profiler_enabled());
  return 1;
}

static int f_profiler_push(lua_State *L) {
  em_status s = em_profiler_push(luaL_checkstring(L, 1));
  if (s) return lember_error(L, "profiler.range", s);
  return 0;
}

static int f_profiler_pop(lua_State *L) {
  (void)L;
  em_profiler_pop();
  return 0;
}

/* The last run's spans as a list of {name, kind, device, impl, ts, dur (both
** microseconds from the first span), bytes, flops, parent (1-based, 0 at
** the top), tid, backward}, and the count of spans dropped. */
static int f_profiler_events(lua_State *L) {
  static const char *const kinds[] = {"kernel", "backward", "range"};
  const int64_t n = em_profiler_count();
  const em_prof_event *first = em_profiler_event(0);
  const int64_t t0 = first ? first->start_ns : 0;
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    const em_prof_event *e = em_profiler_event(i);
    lua_createtable(L, 0, 11);
    lua_pushstring(L, e->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, (unsigned)e->kind < 3 ? kinds[e->kind] : "kernel");
    lua_setfield(L, -2, "kind");
    if (e->device) {
      lua_pushstring(L, e->device);
      lua_setfield(L, -2, "device");
    }
    if (e->impl) {
      lua_pushstring(L, e->impl);
      lua_setfield(L, -2, "impl");
    }
    lua_pushnumber(L, (lua_Number)(e->start_ns - t0) * 1e-3);
    lua_setfield(L, -2, "ts");
    lua_pushnumber(L, (lua_Number)e->dur_ns * 1e-3);
    lua_setfield(L, -2, "dur");
    lua_pushinteger(L, (lua_Integer)e->bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushnumber(L, e->flops);
    lua_setfield(L, -2, "flops");
    lua_pushinteger(L, (lua_Integer)(e->parent + 1));
    lua_setfield(L, -2, "parent");
    lua_pushinteger(L, e->tid);
    lua_setfield(L, -2, "tid");
    lua_pushboolean(L, e->backward);
    lua_setfield(L, -2, "backward");
    lua_rawseti(L, -2, (lua_Integer)(i + 1));
  }
  lua_pushinteger(L, (lua_Integer)em_profiler_dropped());
  return 2;
}

static const luaL_Reg funcs[] = {
  {"_profiler_start", f_profiler_start},
  {"_profiler_stop", f_profiler_stop},
  {"_profiler_enabled", f_profiler_enabled},
  {"_profiler_push", f_profiler_push},
  {"_profiler_pop", f_profiler_pop},
  {"_profiler_events", f_profiler_events},
  {"cpu_info", f_cpu_info},
  {"dtype_info", f_dtype_info},
  {"get_default_dtype", f_get_default_dtype},
  {"set_default_dtype", f_set_default_dtype},
  {"promote_types", f_promote_types},
  {"can_cast", f_can_cast},
  {"result_type", f_result_type},
  {"set_autocast", f_set_autocast},
  {"_autocast_state", f_autocast_state},
  {"_autocast_cast", f_autocast_cast},
  {"_autocast_pause", f_autocast_pause},
  {"set_num_threads", f_set_num_threads},
  {"get_num_threads", f_get_num_threads},
  {"device_count", f_device_count},
  {"device_name", f_device_name},
  {"synchronize", f_synchronize},
  {"memory_stats", f_memory_stats},
  {"empty_cache", f_empty_cache},
  {"live_bytes", f_live_bytes},
  {"max_memory_allocated", f_max_memory_allocated},
  {"reset_peak_memory_stats", f_reset_peak_memory_stats},
  {"clock", f_clock},
  {NULL, NULL}
};

void lember_open_library(lua_State *L, int module, int methods, int mt) {
  (void)methods;
  (void)mt;
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
  lua_pushfstring(L, "%d.%d", EM_VERSION_MAJOR, EM_VERSION_MINOR);
  lua_setfield(L, module, "version");
}
