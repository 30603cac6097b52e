/*
** completion.c -- tab completion for the REPL.
**
**   ember.zer<Tab>   fields of a table (after '.')
**   t:su<Tab>        methods (after ':'), including tensor methods
**   pri<Tab>         globals and keywords
**
** The word before the cursor is a chain of names (a.b.c:d); '.' and ':'
** are not word breaks, so readline hands us the whole chain. We walk it
** from the globals and list the keys of the last value: its own keys if
** it is a table, then those of its metatable's __index table, or of
** __methods / __properties when __index is a function (tensors, C
** objects). The walk runs under lua_pcall: a field access may run an
** __index function that fails.
*/
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "cli.h"

static lua_State *cL;

/* The candidates of the current completion (full words). */
static char **cands;
static int ncands, capcands;

static void clear_cands(void) {
  for (int i = 0; i < ncands; i++) free(cands[i]);
  ncands = 0;
}

static void add_cand(const char *prefix, size_t plen, const char *key) {
  size_t klen = strlen(key);
  if (ncands == capcands) {
    int cap = capcands ? capcands * 2 : 64;
    char **c = (char **)realloc(cands, sizeof(char *) * (size_t)cap);
    if (!c) return;
    cands = c;
    capcands = cap;
  }
  char *s = (char *)malloc(plen + klen + 1);
  if (!s) return;
  memcpy(s, prefix, plen);
  memcpy(s + plen, key, klen + 1);
  cands[ncands++] = s;
}

static int is_identifier(const char *s, size_t n) {
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
  return 1;
}

typedef struct want {
  const char *prefix; /* the chain up to and including the separator */
  size_t plen;
  const char *partial; /* what follows the separator */
  size_t partlen;
  int methods_only;
} want;

static int matches(const want *w, const char *key, size_t klen) {
  if (!is_identifier(key, klen) || klen < w->partlen) return 0;
  if (strncmp(key, w->partial, w->partlen) != 0) return 0;
  /* metamethods and private names only when asked for */
  return !(key[0] == '_' && key[1] == '_' && !(w->partlen >= 2));
}

static void add_table_keys(lua_State *L, int t, const want *w) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      size_t klen;
      const char *key = lua_tolstring(L, -2, &klen);
      if (matches(w, key, klen) && (!w->methods_only || lua_type(L, -1) == LUA_TFUNCTION))
        add_cand(w->prefix, w->plen, key);
    }
    lua_pop(L, 1);
  }
}

/* __properties: a list of names reachable with '.' (tensor.shape, ...). */
static void add_list(lua_State *L, int t, const want *w) {
  lua_Integer n = (lua_Integer)lua_rawlen(L, t);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, t, i) == LUA_TSTRING) {
      size_t klen;
      const char *key = lua_tolstring(L, -1, &klen);
      if (matches(w, key, klen)) add_cand(w->prefix, w->plen, key);
    }
    lua_pop(L, 1);
  }
}

static void add_keys(lua_State *L, int v, const want *w, int depth) {
  v = lua_absindex(L, v);
  if (depth > 4) return;
  luaL_checkstack(L, 6, "completion");
  if (lua_type(L, v) == LUA_TTABLE) add_table_keys(L, v, w);
  if (!lua_getmetatable(L, v)) return;
  int mt = lua_gettop(L);
  lua_pushliteral(L, "__index");
  if (lua_rawget(L, mt) == LUA_TTABLE) add_keys(L, -1, w, depth + 1);
  lua_pop(L, 1);
  lua_pushliteral(L, "__methods");
  if (lua_rawget(L, mt) == LUA_TTABLE) add_table_keys(L, lua_gettop(L), w);
  lua_pop(L, 1);
  if (!w->methods_only) {
    lua_pushliteral(L, "__properties");
    if (lua_rawget(L, mt) == LUA_TTABLE) add_list(L, lua_gettop(L), w);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static const char *const keywords[] = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
  NULL
};

/* Protected: collects the candidates for the word at argument 1. */
static int collect(lua_State *L) {
  const char *text = lua_tostring(L, 1);
  const char *sep = NULL;
  want w;
  for (const char *p = text; *p; p++)
    if (*p == '.' || *p == ':') sep = p;
  lua_pushglobaltable(L);
  if (!sep) {
    w.prefix = "";
    w.plen = 0;
    w.partial = text;
    w.partlen = strlen(text);
    w.methods_only = 0;
    add_keys(L, -1, &w, 0);
    for (int i = 0; keywords[i]; i++)
      if (strncmp(keywords[i], text, w.partlen) == 0) add_cand("", 0, keywords[i]);
    return 0;
  }
  /* walk the names before the separator; a ':' may only be the last */
  const char *p = text;
  while (p < sep) {
    const char *e = p;
    while (e < sep && *e != '.' && *e != ':') e++;
    if (!is_identifier(p, (size_t)(e - p)) || (*e == ':' && e != sep)) return 0;
    lua_pushlstring(L, p, (size_t)(e - p));
    lua_gettable(L, -2); /* may run __index */
    lua_remove(L, -2);
    if (lua_isnil(L, -1)) return 0;
    p = e + 1;
  }
  w.prefix = text;
  w.plen = (size_t)(sep - text) + 1;
  w.partial = sep + 1;
  w.partlen = strlen(sep + 1);
  w.methods_only = *sep == ':';
  add_keys(L, -1, &w, 0);
  return 0;
}

static int gen_next;

static char *generator(const char *text, int state) {
  (void)text;
  if (state == 0) gen_next = 0;
  if (gen_next < ncands) return strdup(cands[gen_next++]); /* readline frees it */
  return NULL;
}

static char **attempt(const char *text, int start, int end) {
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  rl_completion_append_character = '\0';
  clear_cands();
  int top = lua_gettop(cL);
  lua_pushcfunction(cL, collect);
  lua_pushstring(cL, text);
  lua_pcall(cL, 1, 0, 0); /* a failed walk just means no candidates */
  lua_settop(cL, top);
  if (ncands == 0) return NULL;
  return rl_completion_matches(text, generator);
}

void ember_completion_init(lua_State *L) {
  cL = L;
  rl_attempted_completion_function = attempt;
  /* no '.' or ':': the whole chain a.b:c is one word */
  static char breaks[] = " \t\n\"\\'`@$><=;|&{(+-*/%^~#[]),";
  rl_basic_word_break_characters = breaks;
  rl_completer_word_break_characters = breaks;
}
