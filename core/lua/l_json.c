/*
** l_json.c -- JSON text to Lua values, with cJSON (the library the core's
** safetensors reader already parses its headers with), for the small
** files of a model folder (lua/ember/models: config.json, the index of a
** sharded checkpoint):
**
**   core._json_decode(text) -> value
**   core._json_encode(value [, indent=2]) -> text
**
** Objects become tables, arrays lists, null nil (a missing key: Lua has no
** null), true/false booleans; a number with an integral value within
** +-2^53 becomes a Lua integer (16 and 16.0 alike, so sizes pass
** math.type checks), any other a float. Malformed text raises
** "bad JSON at byte N: near '...'" (N 1-based), text after the value too.
** Encoding: a table with keys 1..n, or an empty one, is an array, any
** other an object with its keys sorted (json.dumps(sort_keys=True)'s
** order, so a file's text does not depend on the table's); nested values
** on lines of their own, indented by `indent` spaces. NaN, infinities,
** functions and the like are errors naming what was met and where.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lember.h"

/* A cJSON tree is freed by the __gc of the userdata that holds it, so an
** error while the Lua values are built (out of memory) leaks nothing. */
static int tree_gc(lua_State *L) {
  cJSON **p = lua_touserdata(L, 1);
  cJSON_Delete(*p);
  *p = NULL;
  return 0;
}

/* Pushes a holder of one cJSON tree (NULL at first), freed by its __gc. */
static cJSON **new_box(lua_State *L) {
  static const char key = 'J';
  cJSON **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, tree_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &key);
  }
  lua_setmetatable(L, -2);
  return box;
}

static void push_value(lua_State *L, const cJSON *v);

static void push_number(lua_State *L, double d) {
  if (d == floor(d) && fabs(d) <= 9007199254740992.0) lua_pushinteger(L, (lua_Integer)d);
  else lua_pushnumber(L, d);
}

static void push_value(lua_State *L, const cJSON *v) {
  luaL_checkstack(L, 4, "json_decode: nested too deeply");
  if (cJSON_IsObject(v)) {
    lua_createtable(L, 0, cJSON_GetArraySize(v));
    for (const cJSON *e = v->child; e; e = e->next) {
      if (cJSON_IsNull(e)) continue; /* a missing key */
      push_value(L, e);
      lua_setfield(L, -2, e->string);
    }
  } else if (cJSON_IsArray(v)) {
    lua_createtable(L, cJSON_GetArraySize(v), 0);
    lua_Integer i = 0;
    for (const cJSON *e = v->child; e; e = e->next) {
      i++;
      if (cJSON_IsNull(e)) continue; /* a hole, as a nil */
      push_value(L, e);
      lua_rawseti(L, -2, i);
    }
  } else if (cJSON_IsString(v)) lua_pushstring(L, v->valuestring);
  else if (cJSON_IsNumber(v)) push_number(L, v->valuedouble);
  else if (cJSON_IsBool(v)) lua_pushboolean(L, cJSON_IsTrue(v));
  else lua_pushnil(L);
}

/* "bad JSON at byte N: near '...'" for the text from `at`. */
static int bad_json(lua_State *L, const char *text, size_t len, const char *at, const char *what) {
  size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
  if (off >= len) return luaL_error(L, "bad JSON at byte %d: %s", (int)off + 1, what);
  return luaL_error(L, "bad JSON at byte %d: %s near '%s'", (int)off + 1, what,
                    lua_pushlstring(L, text + off, len - off < 12 ? len - off : 12));
}

static int l_json_decode(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  cJSON **box = new_box(L);
  const char *end = NULL;
  *box = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!*box) return bad_json(L, text, len, end ? end : cJSON_GetErrorPtr(), "malformed");
  const char *rest = end ? end : text + len;
  while (rest < text + len && strchr(" \t\r\n", *rest) && *rest) rest++;
  if (rest < text + len) return bad_json(L, text, len, rest, "text after the value");
  push_value(L, *box);
  return 1;
}


/* ---- encoding ---- */

enum { JSON_MAX_DEPTH = 200 };

static int key_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The value at stack index idx as a new cJSON item, owned by the caller.
** `where` names it for messages ("value", "value.b[2]"). A table's item is
** held by a box on the stack while it is filled, so an error inside frees
** what was built. */
static cJSON *to_json(lua_State *L, int idx, int depth, const char *where);

/* Adds child e to container c (under key, for an object); frees e if that fails. */
static void add_item(lua_State *L, cJSON *c, const char *key, cJSON *e) {
  if (key ? cJSON_AddItemToObject(c, key, e) : cJSON_AddItemToArray(c, e)) return;
  cJSON_Delete(e);
  luaL_error(L, "json_encode: out of memory");
}

static void fill_table(lua_State *L, int idx, int depth, const char *where, cJSON **box) {
  if (depth > JSON_MAX_DEPTH) {
    char head[64];
    snprintf(head, sizeof head, "%s", where);
    luaL_error(L, "json_encode: %s... is nested more than %d deep (a table that holds itself?)", head,
               JSON_MAX_DEPTH);
  }
  luaL_checkstack(L, 6, "json_encode: nested too deeply");
  const lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  lua_Integer count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) count++, lua_pop(L, 1);
  if (n > 0 && count != n)
    luaL_error(L, "json_encode: %s mixes a list of %I with other keys; JSON has either", where, n);
  if (n > 0 || count == 0) {
    if (!(*box = cJSON_CreateArray())) luaL_error(L, "json_encode: out of memory");
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, idx, i);
      const char *w = lua_pushfstring(L, "%s[%I]", where, i);
      cJSON *e = to_json(L, lua_gettop(L) - 1, depth + 1, w);
      lua_pop(L, 2);
      add_item(L, *box, NULL, e);
    }
    return;
  }
  /* an object: its string keys, sorted */
  size_t nk = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "json_encode: %s has a %s key; an object's keys are strings", where, luaL_typename(L, -2));
    nk++;
    lua_pop(L, 1);
  }
  const char **keys = lua_newuserdatauv(L, nk * sizeof *keys, 0); /* GC-owned: no leak on an error */
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    keys[k++] = lua_tostring(L, -2); /* kept alive by the table */
    lua_pop(L, 1);
  }
  qsort(keys, nk, sizeof *keys, key_cmp);
  if (!(*box = cJSON_CreateObject())) luaL_error(L, "json_encode: out of memory");
  for (k = 0; k < nk; k++) {
    lua_getfield(L, idx, keys[k]);
    const char *w = lua_pushfstring(L, "%s.%s", where, keys[k]);
    cJSON *e = to_json(L, lua_gettop(L) - 1, depth + 1, w);
    lua_pop(L, 2);
    add_item(L, *box, keys[k], e);
  }
  lua_pop(L, 1); /* keys */
}

static cJSON *to_json(lua_State *L, int idx, int depth, const char *where) {
  cJSON *v = NULL;
  switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: v = cJSON_CreateBool(lua_toboolean(L, idx)); break;
    case LUA_TSTRING: v = cJSON_CreateString(lua_tostring(L, idx)); break;
    case LUA_TNUMBER: {
      const double d = lua_tonumber(L, idx);
      if (!isfinite(d))
        luaL_error(L, "json_encode: %s is %s; JSON has no NaN or infinity", where,
                   d != d ? "NaN" : d > 0 ? "inf" : "-inf");
      v = cJSON_CreateNumber(d);
      break;
    }
    case LUA_TTABLE: {
      idx = lua_absindex(L, idx);
      cJSON **box = new_box(L);
      fill_table(L, idx, depth, where, box);
      v = *box;
      *box = NULL; /* the caller owns it now */
      lua_pop(L, 1);
      return v;
    }
    default:
      luaL_error(L, "json_encode: %s is a %s, which JSON cannot hold", where, luaL_typename(L, idx));
  }
  if (!v) luaL_error(L, "json_encode: out of memory");
  return v;
}

static int l_json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  const lua_Integer indent = luaL_optinteger(L, 2, 2);
  luaL_argcheck(L, indent >= 0 && indent <= 16, 2, "indent must be 0 to 16 spaces");
  lua_settop(L, 1);
  cJSON **box = new_box(L);
  *box = to_json(L, 1, 0, "value");
  char *text = cJSON_Print(*box); /* formatted with tabs, which strings never hold unescaped */
  if (!text) return luaL_error(L, "json_encode: out of memory");
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (const char *c = text; *c; c++) {
    if (*c != '\t') luaL_addchar(&b, *c);
    else if (c > text && c[-1] == ':') luaL_addchar(&b, ' '); /* "key": value */
    else for (lua_Integer i = 0; i < indent; i++) luaL_addchar(&b, ' ');
  }
  free(text);
  luaL_pushresult(&b);
  return 1;
}

void lember_open_json(lua_State *L, int module) {
  lua_pushcfunction(L, l_json_decode);
  lua_setfield(L, module, "_json_decode");
  lua_pushcfunction(L, l_json_encode);
  lua_setfield(L, module, "_json_encode");
}
