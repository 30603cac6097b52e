/*
** ember.c -- the ember program: Lua 5.4 with ember preloaded.
**
**   ember script.lua args...   runs a script (arg set as lua does)
**   ember -e 'code'            runs a chunk (several -e allowed)
**   ember                      a REPL on a terminal, stdin otherwise
**   ember -                    runs stdin
**
** Options follow lua.c: -e stat, -l mod, -i (REPL after the script),
** -v (version), -- (stop handling options); and --help, --version. The structure is lua.c's, so
** scripts see the same `arg` table and busted runs unchanged.
*/
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "cli.h"
#include "ember.h"
#include "ember_plugin.h"

static const char *progname = EMBER_PROGNAME;

/* ---------------------------------------------------------------- */
/* Messages and calls                                                */
/* ---------------------------------------------------------------- */

static void print_options(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e stat    execute string 'stat'\n"
          "  -i         enter the REPL after executing 'script'\n"
          "  -l mod     require library 'mod' into global 'mod'\n"
          "  -v         show version information\n"
          "  --version  show version information and exit\n"
          "  --help     show this help and exit\n"
          "  --         stop handling options\n"
          "  -          stop handling options and execute stdin\n",
          progname);
}

static void print_usage(const char *badoption) {
  if (badoption[1] == 'e' || badoption[1] == 'l')
    fprintf(stderr, "%s: '%s' needs argument\n", progname, badoption);
  else
    fprintf(stderr, "%s: unrecognized option '%s'\n", progname, badoption);
  print_options(stderr);
}

/* ember --help: what the program does, its options, the environment. */
static void print_help(void) {
  printf("ember %d.%d: Lua 5.4 with the ember deep-learning library preloaded as `ember`.\n\n",
         EM_VERSION_MAJOR, EM_VERSION_MINOR);
  print_options(stdout);
  printf("\nWithout a script or -e, ember opens a REPL on a terminal (readline, history,\n"
         "tab completion, values printed; help(ember.matmul) prints a function's reference)\n"
         "and runs stdin otherwise. Options after the script go to the script (arg table).\n\n"
         "Environment:\n"
         "  EMBER_PLUGIN_PATH       folders searched for plugins first (':'-separated)\n"
         "  EMBER_PLUGIN_PATH_ONLY  1: search only EMBER_PLUGIN_PATH\n"
         "  OMP_NUM_THREADS         CPU threads (or ember.set_num_threads)\n\n"
         "Examples:\n"
         "  %s scripts/langid.lua --help\n"
         "  %s -e 'print(ember.plugins())'\n",
         progname, progname);
}

static void print_message(const char *msg) {
  fprintf(stderr, "%s: %s\n", progname, msg);
  fflush(stderr);
}

int ember_report(lua_State *L, int status) {
  if (status != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    print_message(msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
  }
  return status;
}

/* Adds a traceback to an error message (tostring for non-strings). */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg == NULL) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/* Ctrl-C while Lua runs: a hook raises an error at the next instruction. */
static lua_State *globalL;

static void lstop(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted!");
}

static void laction(int i) {
  int flag = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;
  signal(i, SIG_DFL); /* a second Ctrl-C kills the process */
  lua_sethook(globalL, lstop, flag, 1);
}

int ember_docall(lua_State *L, int nargs, int nres) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  globalL = L;
  void (*old)(int) = signal(SIGINT, laction);
  int status = lua_pcall(L, nargs, nres, base);
  signal(SIGINT, old);
  lua_remove(L, base);
  return status;
}

static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = ember_docall(L, 0, 0);
  return ember_report(L, status);
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l mod: require mod into global mod. */
static int dolibrary(lua_State *L, const char *name) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  int status = ember_docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, name);
  return ember_report(L, status);
}

/* Is name an item of the ", "-separated list? */
static bool name_listed(const char *list, const char *name) {
  const size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return true;
  return false;
}

/* The banner names what did not load ("cuda not loaded"), so that a
** machine without a GPU reads as that and not as a broken install. */
void ember_print_banner(lua_State *L, int repl) {
  int loaded = 0, n;
  char missing[160] = "";
  size_t at = 0;
  (void)L;
  em_init();
  n = em_plugin_count();
  for (int i = 0; i < n; i++) {
    const em_plugin_record *r = em_plugin_get(i);
    if (r && r->loaded) loaded++;
    /* a file shadowed by one of its name is a duplicate, not a failure;
    ** a name is said once */
    else if (r && at < sizeof missing && strncmp(r->reason, "shadowed by", 11) != 0 &&
             !name_listed(missing, r->name)) {
      const int w = snprintf(missing + at, sizeof missing - at, "%s%s", at ? ", " : "", r->name);
      at = w < 0 ? sizeof missing : at + (size_t)w;
    }
  }
  if (at >= sizeof missing) strcpy(missing + sizeof missing - 5, "...");
  printf("ember %d.%d (%s) -- %d plugin%s loaded%s%s%s\n", EM_VERSION_MAJOR, EM_VERSION_MINOR, LUA_RELEASE,
         loaded, loaded == 1 ? "" : "s", *missing ? ", not loaded: " : "", missing,
         repl ? (*missing ? "; plugins() lists them and says why, Ctrl-D quits" : "; plugins() lists them, Ctrl-D quits")
              : "");
  fflush(stdout);
}

/* ---------------------------------------------------------------- */
/* Finding the Lua modules                                           */
/* ---------------------------------------------------------------- */

/* Prepends `dirs` (a ;-separated template list) to package[field]. */
static void prepend_path(lua_State *L, const char *field, const char *dirs) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, field);
  lua_pushfstring(L, "%s;%s", dirs, lua_tostring(L, -1));
  lua_setfield(L, -3, field);
  lua_pop(L, 2);
}

/* The build tree when the executable sits in one (<exe>/../lua/ember/
** core.so exists); else the install folders seen from the executable's
** own (EMBER_REL_BIN_TO_LUA*: an install made with --prefix, or moved, is
** whole), else the configured ones. LUA_PATH/LUA_CPATH, already in
** package.path, stay after ours. */
static void setup_paths(lua_State *L) {
  char exe[PATH_MAX], probe[PATH_MAX + 64], luadir[PATH_MAX], luacdir[PATH_MAX];
  const char *ldir = EMBER_INSTALL_LUA_DIR, *cdir = EMBER_INSTALL_LUA_CDIR;
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash;
  if (n > 0 && (exe[n] = '\0', slash = strrchr(exe, '/')) != NULL) {
    *slash = '\0'; /* the executable's folder */
    snprintf(probe, sizeof probe, "%s/../lua/ember/core.so", exe);
    if (access(probe, R_OK) == 0) {
      snprintf(probe, sizeof probe, "%s/../lua", exe);
      if (realpath(probe, luadir)) ldir = cdir = luadir;
    } else {
      snprintf(probe, sizeof probe, "%s/%s", exe, EMBER_REL_BIN_TO_LUA);
      if (realpath(probe, luadir)) ldir = luadir;
      snprintf(probe, sizeof probe, "%s/%s", exe, EMBER_REL_BIN_TO_LUA_C);
      if (realpath(probe, luacdir)) cdir = luacdir;
    }
  }
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua", ldir, ldir);
  prepend_path(L, "path", lua_tostring(L, -1));
  lua_pop(L, 1);
  lua_pushfstring(L, "%s/?.so", cdir);
  prepend_path(L, "cpath", lua_tostring(L, -1));
  lua_pop(L, 1);
}

/* Loads ember into the global `ember`. */
static int load_ember(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "ember");
  int status = ember_docall(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, "ember");
  return ember_report(L, status);
}

/* ---------------------------------------------------------------- */
/* Arguments (as lua.c)                                              */
/* ---------------------------------------------------------------- */

#define has_error 1
#define has_i 2
#define has_v 4
#define has_e 8
#define has_help 16    /* --help: print the help, exit 0 */
#define has_version 32 /* --version: print the version, exit 0 */

/* Returns the flags; *first is the index of the script (argc if none). */
static int collectargs(char **argv, int *first) {
  int args = 0;
  int i;
  if (argv[0] != NULL) {
    if (argv[0][0]) progname = argv[0];
  } else {
    *first = -1;
    return 0;
  }
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args; /* the script */
    switch (argv[i][1]) {
      case '-':
        if (strcmp(argv[i], "--help") == 0) return has_help;
        if (strcmp(argv[i], "--version") == 0) return has_version;
        if (argv[i][2] != '\0') return has_error;
        *first = i + 1;
        return args;
      case '\0': return args; /* "-": stdin is the script */
      case 'i':
        if (argv[i][2] != '\0') return has_error;
        args |= has_i | has_v;
        break;
      case 'v':
        if (argv[i][2] != '\0') return has_error;
        args |= has_v;
        break;
      case 'e':
        args |= has_e; /* FALLTHROUGH */
      case 'l':
        if (argv[i][2] == '\0') {
          i++;
          if (argv[i] == NULL || argv[i][0] == '-') return has_error;
        }
        break;
      default: return has_error;
    }
  }
  *first = i;
  return args;
}

/* Runs -e and -l in order. */
static int runargs(lua_State *L, char **argv, int n) {
  for (int i = 1; i < n; i++) {
    int option = argv[i][1];
    if (option == 'e' || option == 'l') {
      const char *extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      int status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
      if (status != LUA_OK) return 0;
    }
  }
  return 1;
}

/* arg[0] is the script, negative indices the interpreter and options. */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  if (script == argc) script = 0;
  int narg = argc - (script + 1);
  lua_createtable(L, narg, script + 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

static int pushargs(lua_State *L) {
  if (lua_getglobal(L, "arg") != LUA_TTABLE) luaL_error(L, "'arg' is not a table");
  int n = (int)luaL_len(L, -1);
  luaL_checkstack(L, n + 3, "too many arguments to script");
  int i;
  for (i = 1; i <= n; i++) lua_rawgeti(L, -i, i);
  lua_remove(L, -i);
  return n;
}

/* luaL_loadfile skips a first "#!" line, so `ember /usr/bin/busted` works. */
static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL; /* stdin */
  int status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    int n = pushargs(L);
    status = ember_docall(L, n, LUA_MULTRET);
  }
  return ember_report(L, status);
}

static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script = 0;
  int args = collectargs(argv, &script);
  luaL_checkversion(L);
  if (args == has_error) {
    print_usage(argv[script]);
    return 0;
  }
  if (args & has_help) {
    print_help();
    lua_pushboolean(L, 1);
    return 1;
  }
  if (args & has_version) {
    printf("ember %d.%d (%s)\n", EM_VERSION_MAJOR, EM_VERSION_MINOR, LUA_RELEASE);
    lua_pushboolean(L, 1);
    return 1;
  }
  luaL_openlibs(L);
  setup_paths(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART); /* ember paces tensor memory through it (luaopen_ember_core's mode) */
  if (args & has_v) {
    ember_print_banner(L, (args & has_i) != 0);
    if (!(args & (has_i | has_e)) && script == argc) {
      lua_pushboolean(L, 1);
      return 1;
    }
  }
  if (load_ember(L) != LUA_OK) return 0;
  if (!runargs(L, argv, script)) return 0;
  if (script < argc && handle_script(L, argv + script) != LUA_OK) return 0;
  if (args & has_i) {
    ember_repl(L);
  } else if (script == argc && !(args & (has_e | has_v))) {
    if (isatty(STDIN_FILENO)) {
      ember_print_banner(L, 1);
      ember_repl(L);
    } else if (dochunk(L, luaL_loadfile(L, NULL)) != LUA_OK) {
      return 0;
    }
  }
  lua_pushboolean(L, 1);
  return 1;
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    print_message("cannot create state: not enough memory");
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP); /* no GC while building the state */
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = lua_pcall(L, 2, 1, 0);
  int result = lua_toboolean(L, -1);
  ember_report(L, status);
  /* Finalizers may want to know how the run ended: ember.distributed skips
  ** MPI_Finalize, which waits for every rank, when this one failed. */
  lua_pushboolean(L, !(result && status == LUA_OK));
  lua_setfield(L, LUA_REGISTRYINDEX, "ember.failed");
  lua_close(L);
  return (result && status == LUA_OK) ? EXIT_SUCCESS : EXIT_FAILURE;
}
