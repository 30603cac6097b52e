/*
** fuzz_tensor_table.c -- libFuzzer harness for tensor creation from Lua
** values: the input bytes are a little program that builds a nested Lua
** value (numbers, integers, booleans, strings, NaN and infinities, tables
** ragged or with holes and odd keys), which is given to ember.tensor with
** a dtype chosen by the input, then printed and turned back into a table.
** Bad values must raise Lua errors; nothing may crash or leak. The Lua
** binding (core/lua/ sources) is compiled in, so its code is instrumented too.
*/
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int luaopen_ember_core(lua_State *L);

typedef struct reader {
  const uint8_t *p;
  size_t n;
  int nodes; /* values made so far: bounds the work per input */
} reader;

static int next_byte(reader *r) {
  if (r->n == 0) return -1;
  r->n--;
  return *r->p++;
}

/* Pushes one value built from the input (nil once it runs out). */
static void push_value(lua_State *L, reader *r, int depth) {
  luaL_checkstack(L, 4, "fuzz_tensor_table");
  int op = next_byte(r);
  if (op < 0 || ++r->nodes > 4096) {
    lua_pushnil(L);
    return;
  }
  switch (op % 8) {
    case 0: { /* a double from 8 bytes */
      uint64_t bits = 0;
      for (int i = 0; i < 8; i++) bits = bits << 8 | (uint64_t)(next_byte(r) & 0xff);
      double d;
      memcpy(&d, &bits, sizeof d);
      lua_pushnumber(L, d);
      break;
    }
    case 1: lua_pushinteger(L, (int8_t)next_byte(r)); break;
    case 2: lua_pushboolean(L, next_byte(r) & 1); break;
    case 3:
    case 6: { /* a list of up to 7 values; op 6 adds an odd key */
      int len = depth > 9 ? 0 : (next_byte(r) & 0xff) % 8;
      lua_createtable(L, len, 0);
      for (int i = 1; i <= len; i++) {
        push_value(L, r, depth + 1);
        lua_rawseti(L, -2, i);
      }
      if (op % 8 == 6) {
        int k = next_byte(r) & 3;
        if (k == 0) lua_pushliteral(L, "dtype");
        else if (k == 1) lua_pushinteger(L, 0);
        else if (k == 2) lua_pushinteger(L, len + 2); /* a hole */
        else lua_pushnumber(L, 1.5);
        push_value(L, r, depth + 1);
        if (lua_isnil(L, -1)) lua_pop(L, 2);
        else lua_rawset(L, -3);
      }
      break;
    }
    case 4: { /* special numbers */
      static const double special[] = {0.0 / 0.0, 1.0 / 0.0, -1.0 / 0.0, -0.0, 9007199254740993.0,
                                       1e308, 4.9e-324, 0.5};
      int k = next_byte(r) & 15;
      if (k < 8) lua_pushnumber(L, special[k]);
      else if (k == 8) lua_pushinteger(L, LUA_MININTEGER);
      else if (k == 9) lua_pushinteger(L, LUA_MAXINTEGER);
      else lua_pushinteger(L, (lua_Integer)1 << (k + 20));
      break;
    }
    case 5: { /* a short string */
      char s[8];
      int len = (next_byte(r) & 0xff) % 8;
      for (int i = 0; i < len; i++) s[i] = (char)next_byte(r);
      lua_pushlstring(L, s, (size_t)len);
      break;
    }
    default: lua_pushnil(L); break;
  }
}

static lua_State *L;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "ember.core", luaopen_ember_core, 0);
  lua_setglobal(L, "core");
  /* The checks run in Lua, where they read like the user's code. */
  if (luaL_dostring(L,
        "check = function(v, opts)\n"
        "  local ok, t = pcall(core.tensor, v, opts)\n"
        "  if not ok then\n"
        "    assert(type(t) == 'string' and t:find('ember.tensor', 1, true), tostring(t))\n"
        "    return\n"
        "  end\n"
        "  assert(core.is_tensor(t))\n"
        "  local s = tostring(t)\n"
        "  local ok2, tt = pcall(t.totable, t)\n"
        "  assert(ok2, tt)\n"
        "  if t:numel() > 0 and t:dim() > 0 then local _ = t[1] end\n"
        "end") != LUA_OK)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const dtypes[] = {NULL, "float32", "float64", "int64", "bool", "bfloat16", "float16"};
  reader r = {data, size, 0};
  int top = lua_gettop(L);
  int o = next_byte(&r);
  lua_getglobal(L, "check");
  push_value(L, &r, 0);
  if (o < 0 || o % 8 == 0) {
    lua_pushnil(L);
  } else if (o % 8 == 7) {
    lua_createtable(L, 0, 1);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "requires_grad");
  } else {
    lua_createtable(L, 0, 1);
    lua_pushstring(L, dtypes[o % 8]);
    lua_setfield(L, -2, "dtype");
  }
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    fprintf(stderr, "check failed: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT, 0); /* tensors are freed now, so a leak shows */
  return 0;
}
