/*
** repl.c -- the interactive loop of the ember program.
**
** Lines are read with GNU readline; Ctrl-C at the prompt drops the current
** input instead of killing the process. A line is first tried as an
** expression so values print by themselves (also one over several lines) --
** handed to a function as its arguments, not returned: a returned call is a tail call, which takes the
** chunk's frame off the stack, and an error raised inside ember's Lua code
** then had no "stdin:1:" frame to name (it named the library's own line);
** otherwise as a statement ("=expr" is expr, as in lua's REPL), and while Lua says the chunk ends too early ("<eof>") more
** lines are read. Errors print with a traceback and the loop goes on.
** History lives in ~/.ember_history.
*/
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include <lauxlib.h>
#include <lua.h>

#include "cli.h"

#define PROMPT "> "
#define PROMPT2 ">> "
#define HISTORY_FILE ".ember_history"
#define HISTORY_MAX 1000

#define READ_EOF (-1)       /* end of input */
#define READ_INTERRUPT (-2) /* Ctrl-C: start over */

/* ---------------------------------------------------------------- */
/* Reading a line                                                    */
/* ---------------------------------------------------------------- */

/* Ctrl-C at the prompt: the handler only sets a flag. Its signal
** interrupts the read() in read_key (no SA_RESTART), which then, outside
** the handler, empties the line and hands readline an Enter; read_line
** reports the interruption so a half-typed chunk is dropped. */
static volatile sig_atomic_t got_sigint;
static int line_interrupted;

static void on_sigint(int sig) {
  (void)sig;
  got_sigint = 1;
}

static int read_key(FILE *in) {
  for (;;) {
    unsigned char c;
    if (got_sigint) {
      got_sigint = 0;
      line_interrupted = 1;
      rl_replace_line("^C", 0); /* shown as the line is accepted, then dropped */
      rl_point = rl_end;
      rl_redisplay(); /* safe here: this is readline's input call, not the handler */
      return '\n';
    }
    ssize_t r = read(fileno(in), &c, 1);
    if (r == 1) return c;
    if (r == 0 || errno != EINTR) return EOF;
  }
}

/* Reads one line (malloc'd, without the newline). Returns NULL at end of
** input, or with *interrupted set after Ctrl-C. */
static char *read_line(const char *prompt, int *interrupted) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint; /* no SA_RESTART: read() must return EINTR */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  got_sigint = 0;
  line_interrupted = 0;
  char *line = readline(prompt);
  sigaction(SIGINT, &old, NULL);
  *interrupted = line_interrupted;
  if (line_interrupted) {
    free(line);
    line = NULL;
  }
  return line;
}

/* ---------------------------------------------------------------- */
/* History                                                           */
/* ---------------------------------------------------------------- */

static char *history_path;

static void history_open(void) {
  const char *home = getenv("HOME");
  if (!home || !*home) return;
  size_t n = strlen(home) + sizeof(HISTORY_FILE) + 2;
  history_path = (char *)malloc(n);
  if (!history_path) return;
  snprintf(history_path, n, "%s/%s", home, HISTORY_FILE);
  using_history();
  stifle_history(HISTORY_MAX);
  /* timestamp lines delimit entries, so multi-line chunks come back whole */
  history_comment_char = '#'; /* timestamps are "#<seconds>" lines */
  history_write_timestamps = 1;
  history_multiline_entries = 1;
  if (read_history(history_path) != 0) write_history(history_path); /* create it */
}

static void history_add(const char *chunk) {
  if (!*chunk) return;
  add_history(chunk);
  if (history_path) append_history(1, history_path); /* errors ignored */
}

static void history_close(void) {
  if (!history_path) return;
  history_truncate_file(history_path, HISTORY_MAX);
  free(history_path);
  history_path = NULL;
}

/* ---------------------------------------------------------------- */
/* Reading a chunk                                                   */
/* ---------------------------------------------------------------- */

/* A syntax error at "<eof>" means the chunk is not finished yet. */
static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= 5 && strcmp(msg + lmsg - 5, "<eof>") == 0) return 1;
  }
  return 0;
}

/* Compiles the text at index code as an expression whose values, all of
** them, are the arguments of a call (not returned: see the header). The
** closing parenthesis goes on the text's last line, where Lua emits a
** trailing index's code (`t[5]`: its error then names that line); after a
** newline only when a trailing -- comment would swallow it. Returns the
** status with the function on top, or with nothing pushed. */
static int load_expression(lua_State *L, int code) {
  int status = LUA_ERRSYNTAX;
  for (int nl = 0; nl < 2 && status != LUA_OK; nl++) {
    const char *ret =
        lua_pushfstring(L, "return (function(...) return ... end)(%s%s)", lua_tostring(L, code), nl ? "\n" : "");
    status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
    lua_settop(L, code + (status == LUA_OK ? 2 : 0)); /* the text and the function, or the text */
    if (status == LUA_OK) lua_remove(L, code + 1);
  }
  return status;
}

/* Reads and compiles a chunk: an expression, whose values print, or a
** statement; while neither is complete (Lua's error at "<eof>") more lines
** are read, so an expression over several lines prints too. Returns the
** load status with the function (or the message) on top, or READ_EOF /
** READ_INTERRUPT with nothing. */
static int load_chunk(lua_State *L) {
  int interrupted;
  char *line = read_line(PROMPT, &interrupted);
  if (!line) return interrupted ? READ_INTERRUPT : READ_EOF;
  /* "=expr" prints expr, as lua's REPL (kept there for compatibility with 5.2) */
  lua_pushstring(L, line[0] == '=' ? line + 1 : line);
  free(line);
  int code = lua_gettop(L), status;
  for (;;) {
    status = load_expression(L, code);
    if (status == LUA_OK) break;
    size_t len;
    const char *s = lua_tolstring(L, code, &len);
    status = luaL_loadbuffer(L, s, len, "=stdin");
    if (!incomplete(L, status)) break;
    lua_pop(L, 1);
    line = read_line(PROMPT2, &interrupted);
    if (!line) {
      history_add(lua_tostring(L, code));
      lua_settop(L, code - 1);
      return interrupted ? READ_INTERRUPT : READ_EOF;
    }
    lua_pushfstring(L, "%s\n%s", lua_tostring(L, code), line);
    free(line);
    lua_replace(L, code);
  }
  history_add(lua_tostring(L, code));
  lua_replace(L, code); /* the function or the message takes the text's slot */
  lua_settop(L, code);
  return status;
}

/* Replaces each table above base that has no __tostring with its
** readable form from ember._listing.repr ({1, 2}, {name = "x"}), so that
** `x.shape`-like results never print as "table: 0x...", and each function
** too (one of ember's prints as <function ember.zeros>). */
static void repr_tables(lua_State *L, int base) {
  int top = lua_gettop(L);
  for (int i = base + 1; i <= top; i++) {
    int type = lua_type(L, i);
    if (type != LUA_TFUNCTION && type != LUA_TTABLE) continue;
    if (type == LUA_TTABLE && luaL_getmetafield(L, i, "__tostring") != LUA_TNIL) {
      lua_pop(L, 1); /* the metafield: the table prints itself */
      continue;
    }
    lua_getglobal(L, "require");
    lua_pushliteral(L, "ember._listing");
    if (lua_pcall(L, 1, 1, 0) != LUA_OK || lua_getfield(L, -1, "repr") != LUA_TFUNCTION) {
      lua_settop(L, top); /* no ember on the path: plain print */
      return;
    }
    lua_pushvalue(L, i);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK) lua_replace(L, i);
    lua_settop(L, top);
  }
}

/* Prints the values above base with the global print (tensors format
** themselves through __tostring, other tables through repr_tables). */
static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n <= 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  repr_tables(L, base);
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    fprintf(stderr, "%s: error calling 'print' (%s)\n", EMBER_PROGNAME, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* REPL globals: plugins() lists the plugins, help(x) prints the reference
** entry of x (ember.help, read from the doc comments by ember._doc), and
** nn and optim are ember.nn and ember.optim, as the docs' examples use them
** (help(nn.MultiHeadAttention), nn.Linear(4, 2) typed as it reads). */
static const char plugins_fn[] =
  "function plugins() print(ember.plugins()) end\n"
  "function help(...) ember.help(...) end\n" /* it prints; the returned text would print again */
  "nn, optim = ember.nn, ember.optim";

void ember_repl(lua_State *L) {
  int base = lua_gettop(L);
  rl_readline_name = "ember";
  rl_catch_signals = 0; /* read_line handles Ctrl-C */
  rl_getc_function = read_key;
  history_open();
  ember_completion_init(L);
  if (luaL_dostring(L, plugins_fn) != LUA_OK) ember_report(L, LUA_ERRRUN);
  for (;;) {
    int status = load_chunk(L);
    if (status == READ_EOF) {
      fputs("\n", stdout);
      break;
    }
    if (status == READ_INTERRUPT) continue;
    if (status == LUA_OK) status = ember_docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK)
      print_results(L, base);
    else
      ember_report(L, status);
    lua_settop(L, base);
  }
  lua_settop(L, base);
  history_close();
  fflush(stdout);
}
