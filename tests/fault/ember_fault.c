/*
** ember_fault.c -- a Lua module for tests only (build/tests/ember_fault.so):
** reaches the CPU backend's fault-injection hook (backends/cpu/cpu_fault.c).
**   local fault = package.loadlib(path, "luaopen_ember_fault")()
**   fault.open(cpu_plugin_path)  -- the loaded backend (from ember.plugins())
**   fault.fail_alloc(n)          -- the n-th allocation from now fails; 0 disarms;
**                                -- returns the allocations since the last call
*/
#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>

static long long (*fail_alloc)(long long);

static int l_open(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* only the copy already loaded */
  if (!h) return luaL_error(L, "fault.open: %s is not loaded: %s", path, dlerror());
  *(void **)&fail_alloc = dlsym(h, "ember_cpu_fail_alloc");
  dlclose(h); /* the backend stays loaded: ember holds it */
  if (!fail_alloc) return luaL_error(L, "fault.open: %s has no ember_cpu_fail_alloc", path);
  return 0;
}

static int l_fail_alloc(lua_State *L) {
  if (!fail_alloc) return luaL_error(L, "fault.fail_alloc: call fault.open first");
  lua_pushinteger(L, (lua_Integer)fail_alloc((long long)luaL_checkinteger(L, 1)));
  return 1;
}

__attribute__((visibility("default"))) int luaopen_ember_fault(lua_State *L);

int luaopen_ember_fault(lua_State *L) {
  static const luaL_Reg fns[] = {{"open", l_open}, {"fail_alloc", l_fail_alloc}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
