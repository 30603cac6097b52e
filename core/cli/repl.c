/*
** repl.c -- the interactive loop of the ember program.
**
** Lines are read with GNU readline through its callback interface, so that
** Ctrl-C at the prompt drops the current input (select() is interrupted and
** we clean up) instead of killing the process. A line is first tried as an
** expression ("return <line>") so values print by themselves; otherwise as
** a statement, and while Lua says the chunk ends too early ("<eof>") more
** lines are read. Errors print with a traceback and the loop goes on.
** History lives in ~/.ember_history.
*/
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

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

static volatile sig_atomic_t got_sigint;
static char *line_read;
static int line_done;

static void on_sigint(int sig) {
  (void)sig;
  got_sigint = 1;
}

static void on_line(char *line) {
  line_read = line;
  line_done = 1;
  rl_callback_handler_remove();
}

/* Reads one line (malloc'd, without the newline). Returns NULL at end of
** input, or with *interrupted set after Ctrl-C. */
static char *read_line(const char *prompt, int *interrupted) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint; /* no SA_RESTART: select() must wake up */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  got_sigint = 0;
  line_done = 0;
  line_read = NULL;
  *interrupted = 0;
  rl_callback_handler_install(prompt, on_line);
  while (!line_done) {
    int fd = fileno(rl_instream);
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(fd, &fds);
    int r = select(fd + 1, &fds, NULL, NULL, NULL);
    if (got_sigint) {
      rl_free_line_state();
      rl_callback_sigcleanup();
      rl_callback_handler_remove();
      fputs("^C\n", rl_outstream);
      fflush(rl_outstream);
      *interrupted = 1;
      break;
    }
    if (r > 0) {
      rl_callback_read_char();
    } else if (r < 0 && errno != EINTR) {
      rl_callback_handler_remove();
      break;
    }
  }
  sigaction(SIGINT, &old, NULL);
  return line_read;
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

/* Reads and compiles a chunk. Returns the load status with the function
** (or the message) on top, or READ_EOF / READ_INTERRUPT with nothing. */
static int load_chunk(lua_State *L) {
  int interrupted;
  char *line = read_line(PROMPT, &interrupted);
  if (!line) return interrupted ? READ_INTERRUPT : READ_EOF;
  lua_pushstring(L, line);
  free(line);
  int code = lua_gettop(L);
  /* an expression? */
  const char *ret = lua_pushfstring(L, "return %s;", lua_tostring(L, code));
  int status = luaL_loadbuffer(L, ret, strlen(ret), "=stdin");
  if (status == LUA_OK) {
    history_add(lua_tostring(L, code));
    lua_replace(L, code); /* the function takes the code's slot */
    lua_settop(L, code);
    return LUA_OK;
  }
  lua_settop(L, code);
  /* a statement, maybe over several lines */
  for (;;) {
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
  lua_replace(L, code);
  lua_settop(L, code);
  return status;
}

/* Prints the values above base with the global print (tensors format
** themselves through __tostring). */
static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base;
  if (n <= 0) return;
  luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
  lua_getglobal(L, "print");
  lua_insert(L, base + 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    fprintf(stderr, "%s: error calling 'print' (%s)\n", EMBER_PROGNAME, lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

static const char plugins_fn[] =
  "function plugins() print(ember.plugins()) end";

void ember_repl(lua_State *L) {
  int base = lua_gettop(L);
  rl_readline_name = "ember";
  rl_catch_signals = 0; /* read_line handles Ctrl-C */
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
