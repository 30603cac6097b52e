/*
** l_checkpoint.c -- Lua binding of safetensors files, used by
** lua/ember/checkpoint.lua:
**
**   core.safetensors_save(path, names, tensors [, metadata])
**       names: list of strings; tensors: list of tensors, same length;
**       metadata: table of string -> string.
**   core.safetensors_load(path) -> names (list, file order), tensors (name ->
**       CPU tensor), metadata (key -> string)
**
** The JSON header is written and parsed inside libember (safetensors.c,
** with cJSON); this file only moves values between Lua and the core.
*/
#include <stdlib.h>

#include "ember_safetensors.h"
#include "lember.h"

/* ---------------------------------------------------------------- */
/* safetensors                                                       */
/* ---------------------------------------------------------------- */

static int l_safetensors_save(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  int has_meta = !lua_isnoneornil(L, 4);
  if (has_meta) luaL_checktype(L, 4, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 2);
  if (luaL_len(L, 3) != n)
    return luaL_error(L, "ember.safetensors_save: %I names but %I tensors", n, luaL_len(L, 3));
  if (n > 1000000) return luaL_error(L, "ember.safetensors_save: too many tensors (%I)", n);
  /* Arrays in GC-owned memory, so an error below leaks nothing. Names and
  ** tensors stay alive: they are referenced by the argument tables. */
  em_named_tensor *ts = lua_newuserdatauv(L, sizeof *ts * (size_t)(n ? n : 1), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_geti(L, 2, i) != LUA_TSTRING)
      return luaL_error(L, "ember.safetensors_save: name %I is a %s, expected a string", i,
                        luaL_typename(L, -1));
    ts[i - 1].name = lua_tostring(L, -1);
    lua_pop(L, 1);
    lua_geti(L, 3, i);
    ts[i - 1].tensor = lember_testtensor(L, -1);
    if (!ts[i - 1].tensor)
      return luaL_error(L, "ember.safetensors_save: value for '%s' is a %s, expected a tensor",
                        ts[i - 1].name, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  int n_meta = 0;
  const char **meta = NULL;
  if (has_meta) {
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      n_meta++;
      lua_pop(L, 1);
    }
    meta = lua_newuserdatauv(L, sizeof *meta * (size_t)(2 * n_meta + 1), 0);
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "ember.safetensors_save: metadata must map strings to strings, got "
                             "%s -> %s", luaL_typename(L, -2), luaL_typename(L, -1));
      meta[k++] = lua_tostring(L, -2);
      meta[k++] = lua_tostring(L, -1); /* a string in the table: stays alive */
      lua_pop(L, 1);
    }
  }
  em_status s = em_safetensors_save(path, (int)n, ts, n_meta, meta);
  if (s) return lember_error(L, "safetensors_save", s);
  return 0;
}

/* A loaded file in a userdata with __gc, so that a memory error while
** building the result tables cannot leak it. */
static const char file_mt_key = 'F';

static int file_gc(lua_State *L) {
  em_safetensors **p = lua_touserdata(L, 1);
  em_safetensors_free(*p);
  *p = NULL;
  return 0;
}

static int l_safetensors_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  em_safetensors **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &file_mt_key) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, file_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &file_mt_key);
  }
  lua_setmetatable(L, -2);
  em_status s = em_safetensors_load(path, box);
  if (s) return lember_error(L, "safetensors_load", s);
  em_safetensors *f = *box;
  lua_createtable(L, f->n, 0); /* names */
  lua_createtable(L, 0, f->n); /* tensors */
  lua_createtable(L, 0, f->n_meta); /* metadata */
  for (int i = 0; i < f->n; i++) {
    lua_pushstring(L, f->names[i]);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -5, i + 1);
    em_tensor **slot = lember_newslot(L);
    *slot = f->tensors[i];
    f->tensors[i] = NULL; /* the userdata owns it from here */
    lember_account(L, *slot);
    lua_rawset(L, -4);
  }
  for (int i = 0; i < f->n_meta; i++) {
    lua_pushstring(L, f->meta[2 * i]);
    lua_pushstring(L, f->meta[2 * i + 1]);
    lua_rawset(L, -3);
  }
  return 3;
}

void lember_open_checkpoint(lua_State *L, int module) {
  static const luaL_Reg fns[] = {
    {"safetensors_save", l_safetensors_save},
    {"safetensors_load", l_safetensors_load},
    {NULL, NULL},
  };
  lua_pushvalue(L, module);
  luaL_setfuncs(L, fns, 0);
  lua_pop(L, 1);
}
