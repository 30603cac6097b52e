/*
** l_plugins.c -- the plugin loader from Lua: ember.plugins(),
** ember.load_plugin(path), ember.plugin_search_path().
**
** ember.plugins() returns a list of records; tostring() of the list is an
** aligned table (name, kind, version, status, path).
** ember.rescan_plugins() loads what was dropped into the folders since.
*/
#include <string.h>

#include "ember_plugin.h"
#include "lember.h"

static const char list_mt_key = 'P';

static const char *kind_name(int kind) {
  switch (kind) {
    case EM_PLUGIN_BACKEND: return "backend";
    case EM_PLUGIN_ATTENTION: return "attention";
    default: return "unknown";
  }
}

static void push_record(lua_State *L, const em_plugin_record *r) {
  lua_createtable(L, 0, 7);
  lua_pushstring(L, r->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, kind_name(r->kind));
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, r->path);
  lua_setfield(L, -2, "path");
  lua_pushboolean(L, r->loaded);
  lua_setfield(L, -2, "loaded");
  lua_pushstring(L, r->reason);
  lua_setfield(L, -2, "reason");
  lua_pushstring(L, r->version);
  lua_setfield(L, -2, "version");
  lua_pushstring(L, r->description);
  lua_setfield(L, -2, "description");
}

static int f_plugins(lua_State *L) {
  em_init();
  int n = em_plugin_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    const em_plugin_record *r = em_plugin_get(i);
    if (!r) continue;
    push_record(L, r);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  }
  lua_rawgetp(L, LUA_REGISTRYINDEX, &list_mt_key);
  lua_setmetatable(L, -2);
  return 1;
}

/* ---------------------------------------------------------------- */
/* tostring of the list                                              */
/* ---------------------------------------------------------------- */

#define NCOLS 5
static const char *const headers[NCOLS] = {"name", "kind", "version", "status", "path"};
#define STATUS_MAX 60 /* longer reasons run into the path column */

/* Pushes the cell text of row i (1-based), column c. */
static void push_cell(lua_State *L, int list, lua_Integer i, int c) {
  lua_geti(L, list, i);
  switch (c) {
    case 0: lua_getfield(L, -1, "name"); break;
    case 1: lua_getfield(L, -1, "kind"); break;
    case 2: lua_getfield(L, -1, "version"); break;
    case 3:
      if (lua_getfield(L, -1, "loaded") == LUA_TBOOLEAN && lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "loaded");
      } else {
        lua_pop(L, 1);
        lua_getfield(L, -1, "reason");
        lua_pushfstring(L, "rejected: %s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
        lua_remove(L, -2);
      }
      break;
    default: lua_getfield(L, -1, "path"); break;
  }
  if (!lua_isstring(L, -1)) {
    lua_pop(L, 1);
    lua_pushliteral(L, "");
  } else {
    lua_pushstring(L, lua_tostring(L, -1)); /* numbers become strings */
    lua_remove(L, -2);
  }
  lua_remove(L, -2); /* the record */
}

static int list_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  size_t w[NCOLS];
  for (int c = 0; c < NCOLS; c++) w[c] = strlen(headers[c]);
  for (lua_Integer i = 1; i <= n; i++)
    for (int c = 0; c < NCOLS - 1; c++) {
      size_t len;
      push_cell(L, 1, i, c);
      lua_tolstring(L, -1, &len);
      if (c == 3 && len > STATUS_MAX) len = STATUS_MAX;
      if (len > w[c]) w[c] = len;
      lua_pop(L, 1);
    }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (n == 0) {
    luaL_addstring(&b, "(no plugins found)");
    luaL_pushresult(&b);
    return 1;
  }
  for (lua_Integer i = 0; i <= n; i++) {
    for (int c = 0; c < NCOLS; c++) {
      size_t len;
      if (i == 0)
        lua_pushstring(L, headers[c]);
      else
        push_cell(L, 1, i, c);
      lua_tolstring(L, -1, &len);
      luaL_addvalue(&b); /* pops it: the buffer's stack use stays balanced */
      if (c < NCOLS - 1) {
        size_t pad = len < w[c] ? w[c] - len + 2 : 2;
        for (size_t k = 0; k < pad; k++) luaL_addchar(&b, ' ');
      }
    }
    if (i < n) luaL_addchar(&b, '\n');
  }
  luaL_pushresult(&b);
  return 1;
}

/* ---------------------------------------------------------------- */

/* Raises "ember.load_plugin: <msg>" at the user's line. ember.load_plugin is
** reached through a Lua wrapper (ember/variant.lua: a .lua path is a
** variant file), and Lua 5.4 keeps the caller's frame for a tail call to a C
** function, so luaL_error's position named the wrapper's line: the message
** goes through ember._errors.error, which skips ember's own frames. */
static int load_error(lua_State *L, const char *msg) {
  if (strncmp(msg, "load_plugin: ", 13) == 0) msg += 13;
  lua_pushfstring(L, "ember.load_plugin: %s", msg);
  int m = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ember._errors");
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1) && lua_getfield(L, -1, "error") == LUA_TFUNCTION) {
    lua_pushvalue(L, m);
    lua_call(L, 1, 0); /* raises */
  }
  lua_settop(L, m); /* ember's Lua side is not on the path: here, then */
  luaL_where(L, 1);
  lua_insert(L, m);
  lua_concat(L, 2);
  return lua_error(L);
}

static int f_load_plugin(lua_State *L) {
  if (lua_type(L, 1) != LUA_TSTRING)
    return load_error(L, lua_pushfstring(L, "expected the path of a plugin (a .so file or a .lua variant), got %s",
                                         luaL_typename(L, 1)));
  const char *path = lua_tostring(L, 1);
  const em_plugin_record *r = NULL;
  em_status s = em_plugin_load(path, &r);
  if (s) {
    const char *msg = em_error_message();
    return load_error(L, *msg ? msg : em_status_name(s));
  }
  if (r) push_record(L, r);
  else lua_pushnil(L);
  return 1;
}

static int f_plugin_search_path(lua_State *L) {
  char buf[8192];
  const char *p = em_plugin_search_path(buf, sizeof buf);
  lua_newtable(L);
  lua_Integer i = 0;
  while (p && *p) {
    const char *e = strchr(p, ':');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len > 0) {
      lua_pushlstring(L, p, len);
      lua_rawseti(L, -2, ++i);
    }
    p = e ? e + 1 : NULL;
  }
  return 1;
}

static void push_name(const char *name, void *ud) {
  lua_State *L = ud;
  lua_pushstring(L, name);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

/* _list_dir(dir, suffix) -> the names in dir ending in suffix, sorted, or
** nil and the reason: the loader's own folder scan, for variant files
** (lua/ember/variant.lua), so no shell ever sees a folder name. */
static int f_list_dir(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1), *suffix = luaL_checkstring(L, 2);
  lua_newtable(L);
  em_status s = em_plugin_list_dir(dir, suffix, push_name, L);
  if (s == EM_OK) return 1;
  lua_pushnil(L);
  lua_pushstring(L, em_error_message());
  return 2;
}

/* rescan_plugins() -> ember.plugins(): the files added to the search
** folders since they were scanned -- *.so by the loader (em_plugin_rescan),
** *.lua variants by ember.variant's load_path -- so that a variant dropped
** in while ember runs (a REPL session) can be used by name. A file tried
** before is not tried again: load it with ember.load_plugin(path). */
static int f_rescan_plugins(lua_State *L) {
  em_init();
  em_plugin_rescan();
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ember.variant");
  lua_call(L, 1, 1);
  if (lua_getfield(L, -1, "load_path") == LUA_TFUNCTION) lua_call(L, 0, 0);
  else lua_pop(L, 1);
  lua_pop(L, 1);
  return f_plugins(L);
}

static const luaL_Reg funcs[] = {
  {"rescan_plugins", f_rescan_plugins},
  {"_list_dir", f_list_dir},
  {"plugins", f_plugins},
  {"load_plugin", f_load_plugin},
  {"plugin_search_path", f_plugin_search_path},
  {NULL, NULL}
};

void lember_open_plugins(lua_State *L, int module, int methods, int mt) {
  (void)methods;
  (void)mt;
  lua_pushvalue(L, module);
  luaL_setfuncs(L, funcs, 0);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, list_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &list_mt_key);
}
