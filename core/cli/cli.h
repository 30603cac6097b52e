/*
** cli.h -- pieces of the ember program shared between its files.
*/
#ifndef EMBER_CLI_H
#define EMBER_CLI_H

#include <lua.h>

#define EMBER_PROGNAME "ember"

/* ember.c: runs the function on top of the stack with nargs arguments
** under a traceback handler and Ctrl-C interruption; returns the status
** (the error message, with its traceback, is left on the stack). */
int ember_docall(lua_State *L, int nargs, int nres);
/* Prints the message on top of the stack (if any) to stderr, pops it. */
int ember_report(lua_State *L, int status);
/* "ember 0.1 (Lua 5.4.4) -- N plugins loaded", with the REPL's hints. */
void ember_print_banner(lua_State *L, int repl);

/* repl.c: the interactive loop (returns at end of input). */
void ember_repl(lua_State *L);

/* completion.c: installs tab completion of globals, fields and methods. */
void ember_completion_init(lua_State *L);

#endif
