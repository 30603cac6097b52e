/*
** tap.h -- the smallest test harness: "ok N - name" lines and a closing
** "N passed, M failed". Shared by the C test programs.
*/
#ifndef EMBER_TAP_H
#define EMBER_TAP_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int tap_passed, tap_failed;

#define CHECK(cond, name)                                                    \
  do {                                                                       \
    if (cond) {                                                              \
      tap_passed++;                                                          \
      printf("ok %d - %s\n", tap_passed + tap_failed, name);                 \
    } else {                                                                 \
      tap_failed++;                                                          \
      printf("not ok %d - %s (%s:%d: %s)\n", tap_passed + tap_failed, name,  \
             __FILE__, __LINE__, #cond);                                     \
    }                                                                        \
  } while (0)

/* The call fails with `code` and its message contains `needle`. */
#define CHECK_ERR(call, code, needle, name)                                   \
  do {                                                                        \
    em_status tap_s = (call);                                                 \
    bool tap_ok = tap_s == (code) && strstr(em_error_message(), needle);      \
    if (!tap_ok) printf("#   got status %d, message: %s\n", (int)tap_s, em_error_message()); \
    CHECK(tap_ok, name);                                                      \
  } while (0)

#define CHECK_OK(call, name)                                                  \
  do {                                                                        \
    em_status tap_s = (call);                                                 \
    if (tap_s != EM_OK) printf("#   error: %s\n", em_error_message());        \
    CHECK(tap_s == EM_OK, name);                                              \
  } while (0)

static int tap_done(void) {
  printf("%d passed, %d failed\n", tap_passed, tap_failed);
  return tap_failed ? 1 : 0;
}

#endif
