/*
** cpu_blas.c -- which OpenBLAS core computes our products, and putting it
** right when OpenBLAS guessed a core older than this CPU.
**
** Debian's OpenBLAS is built with DYNAMIC_ARCH: its constructor picks a
** kernel set ("core") from cpuid, by a table of the processors it knew
** when it was released. 0.3.21 calls a newer Xeon it does not know
** "Prescott" (SSE3 kernels): sgemm 1024^3 ran at 35 GFLOP/s there, against
** 214-230 with the SkylakeX core set by hand (issue 25), and the fused
** attention kernel's tiles are sgemm calls. That choice is made before
** any code of ours runs (the library is a dependency of this plugin), so
** the backend checks it when it loads: when the core's instruction set is
** older than the best one this CPU has, and the user did not choose the
** core (OPENBLAS_CORETYPE), OpenBLAS is asked to choose again with
** OPENBLAS_CORETYPE set from cpuid -- its own documented override --
** through its exported gotoblas_dynamic_quit/init pair, which is what its
** constructor runs. Nothing has called OpenBLAS yet at that point.
** A user's OPENBLAS_CORETYPE is never overridden; an older core chosen
** that way is only reported. cpu_blas_info says what runs and why.
*/
#include <cpuid.h>
#include "cpu_internal.h"

#include <ctype.h>
#include <dlfcn.h> /* dladdr: _GNU_SOURCE, set for the whole build */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

/* From OpenBLAS (declared here so any cblas.h will do). */
char *openblas_get_corename(void);
char *openblas_get_config(void);

/* Instruction-set level of an OpenBLAS core: what its kernels need. Names
** as openblas_get_corename() spells them (case ignored); a core not listed
** is never judged. */
enum { ISA_NONE, ISA_SSE, ISA_AVX, ISA_AVX2, ISA_AVX512, ISA_AVX512_BF16, ISA_AMX };

static const struct { const char *name; int isa; } cores[] = {
  {"Katmai", ISA_SSE},       {"Coppermine", ISA_SSE},  {"Northwood", ISA_SSE},
  {"Prescott", ISA_SSE},     {"Banias", ISA_SSE},      {"Atom", ISA_SSE},
  {"Core2", ISA_SSE},        {"Penryn", ISA_SSE},      {"Dunnington", ISA_SSE},
  {"Nehalem", ISA_SSE},      {"Athlon", ISA_SSE},      {"Opteron", ISA_SSE},
  {"Opteron_SSE3", ISA_SSE}, {"Barcelona", ISA_SSE},   {"Nano", ISA_SSE},
  {"Bobcat", ISA_SSE},       {"Sandybridge", ISA_AVX}, {"Bulldozer", ISA_AVX},
  {"Piledriver", ISA_AVX},   {"Steamroller", ISA_AVX}, {"Haswell", ISA_AVX2},
  {"Zen", ISA_AVX2},         {"Excavator", ISA_AVX2},  {"SkylakeX", ISA_AVX512},
  {"Cooperlake", ISA_AVX512_BF16}, {"SapphireRapids", ISA_AMX},
};

static const char *isa_names[] = {"unknown", "sse", "avx", "avx2", "avx512", "avx512_bf16",
                                  "amx"};

static int core_isa(const char *name) {
  for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
    if (strcasecmp(name, cores[i].name) == 0) return cores[i].isa;
  return ISA_NONE;
}

/* AMX tiles (cpuid leaf 7, EDX bit 24), read directly: clang 14's
** __builtin_cpu_supports does not know "amx-tile" (the fuzz build uses it). */
static bool cpu_has_amx_tile(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (d >> 24) & 1u;
}

/* The best level this CPU runs, from cpuid. */
static int cpu_isa(void) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16"))
    return cpu_has_amx_tile() ? ISA_AMX : ISA_AVX512_BF16;
  if (avx512) return ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ISA_AVX2;
  if (__builtin_cpu_supports("avx")) return ISA_AVX;
  return ISA_SSE;
}

/* The core for each level, best first; a library that lacks one (0.3.21
** has no SapphireRapids) is asked for the next. */
static const char *const level_core[] = {NULL, NULL, "Sandybridge", "Haswell", "SkylakeX",
                                         "Cooperlake", "SapphireRapids"};

static char blas_why[384]; /* set once, by cpu_blas_configure */

/* The core a test makes this library guess on its own
** (EMBER_TEST_OPENBLAS_GUESS), or NULL. */
static const char *sim_guess;

/* OpenBLAS's own entry points for choosing a core, looked up in the
** library that holds openblas_get_corename: only DYNAMIC_ARCH builds have
** them. */
typedef struct {
  void *lib;
  void (*quit)(void);
  void (*init)(void);
} blas_dyn;

static bool blas_dyn_open(blas_dyn *d) {
  Dl_info info;
  memset(d, 0, sizeof *d);
  if (!dladdr((void *)(uintptr_t)openblas_get_corename, &info) || !info.dli_fname) return false;
  d->lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!d->lib) return false;
  d->quit = (void (*)(void))(uintptr_t)dlsym(d->lib, "gotoblas_dynamic_quit");
  d->init = (void (*)(void))(uintptr_t)dlsym(d->lib, "gotoblas_dynamic_init");
  return d->quit && d->init;
}

/* Does this library hold the kernels of core `name` (its gotoblas_NAME)?
** Asking for one it lacks makes OpenBLAS warn (at OPENBLAS_VERBOSE=2)
** and choose from cpuid, or Prescott, again. */
static bool blas_has_core(const blas_dyn *d, const char *name) {
  char sym[64] = "gotoblas_";
  size_t k = strlen(sym);
  for (const char *p = name; *p && k + 1 < sizeof sym; p++) sym[k++] = (char)toupper(*p);
  sym[k] = '\0';
  return dlsym(d->lib, sym) != NULL;
}

/* OpenBLAS chooses again, as if OPENBLAS_CORETYPE had been `name` when it
** loaded. */
static void blas_choose(const blas_dyn *d, const char *name) {
  setenv("OPENBLAS_CORETYPE", name, 1);
  d->quit();
  d->init();
}

/* Has OpenBLAS run core `name`? It may not take it: a name its
** force_coretype does not know (0.3.21 knows neither Cooperlake nor
** SapphireRapids by name, though it has their kernels) makes it choose
** from cpuid again. The environment is left as it was. Under
** EMBER_TEST_OPENBLAS_GUESS that choice from cpuid is the simulated
** guess, and a name is taken only where the real library shows it took
** it: its own choice (a name it cannot know) differs from `name`. */
static bool blas_take(const blas_dyn *d, const char *name) {
  const char *was = getenv("OPENBLAS_CORETYPE");
  char *saved = was ? strdup(was) : NULL; /* setenv below frees was */
  blas_choose(d, name);
  bool took = strcasecmp(openblas_get_corename(), name) == 0;
  if (sim_guess && took) {
    blas_choose(d, "ember-no-such-core");
    took = strcasecmp(openblas_get_corename(), name) != 0;
    if (took) blas_choose(d, name);
  }
  if (sim_guess && !took) blas_choose(d, sim_guess);
  if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  free(saved);
  return took;
}

/* The newest core above level `have`, up to `want`, that this library has
** and takes by name, now running; NULL when none (the library runs
** `guessed` again). */
static const char *blas_upgrade(const blas_dyn *d, int want, int have, const char *guessed) {
  for (int l = want; l > have; l--)
    if (level_core[l] && blas_has_core(d, level_core[l]) && blas_take(d, level_core[l]))
      return level_core[l];
  if (strcasecmp(openblas_get_corename(), guessed) != 0) blas_take(d, guessed);
  return NULL;
}

/* Makes sure core `name`, just chosen, is the one running. OpenBLAS's
** pthread build starts a worker at load for each thread past the first
** (OMP_NUM_THREADS=2: one), and a worker that first runs while one of our
** choices has unset the core runs a choice of its own, with the
** environment of that moment: about one start in 25 of blas_core_spec's
** simulated guess ended on cpuid's core (which a "no such core" probe
** leaves) instead of the one chosen. So: wait a little, look, and choose
** again while it differs. */
static void blas_settle(const blas_dyn *d, const char *name) {
  for (int tries = 0; tries < 5; tries++) {
    nanosleep(&(struct timespec){0, 2000000}, NULL); /* 2 ms: a stray choice in flight ends */
    if (strcasecmp(openblas_get_corename(), name) == 0) return;
    const char *was = getenv("OPENBLAS_CORETYPE");
    char *saved = was ? strdup(was) : NULL;
    blas_choose(d, name);
    if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    free(saved);
  }
}

void cpu_blas_configure(void) {
  const char *user = getenv("OPENBLAS_CORETYPE");
  const int want = cpu_isa();
  /* What a core must reach not to be older for our products: the float32
  ** and float64 kernels stop at AVX-512 (Cooperlake and SapphireRapids add
  ** bfloat16 and AMX products, which oneDNN computes here; SkylakeX's
  ** sgemm was the fastest on this Zen 4). A core is replaced, or reported,
  ** only below this; a replacement is still the newest the library takes. */
  const int need = want < ISA_AVX512 ? want : ISA_AVX512;
  blas_dyn d;
  const bool dyn = blas_dyn_open(&d);
  /* A user's OPENBLAS_CORETYPE that OpenBLAS did not take (a name it does
  ** not know, "" included) left the choice to OpenBLAS: it is judged as
  ** OpenBLAS's own. */
  const bool user_set = user && *user;
  const bool named = user_set && strcasecmp(openblas_get_corename(), user) == 0;
  /* An older core's name that OpenBLAS takes and runs as another core of
  ** the same level (0.3.21 runs Katmai, Coppermine, Northwood, Banias and
  ** Athlon as Prescott) is the user's choice too: replacing it would
  ** override the user's OPENBLAS_CORETYPE. */
  const int user_isa = user_set ? core_isa(user) : ISA_NONE;
  const int ran_isa = core_isa(openblas_get_corename());
  const bool alias = user_set && !named && user_isa != ISA_NONE && user_isa < need &&
                     ran_isa != ISA_NONE && ran_isa <= user_isa;
  const bool taken = named || alias;
  char ran_as[64] = "";
  if (alias) snprintf(ran_as, sizeof ran_as, ", which this OpenBLAS runs as %.24s", openblas_get_corename());
  char not_taken[96] = "";
  if (user_set && !taken)
    snprintf(not_taken, sizeof not_taken, "OPENBLAS_CORETYPE=%.24s is not a core this OpenBLAS takes; ",
             user);
  /* Tests stand in for a library that misjudges this CPU: as if OpenBLAS
  ** had picked this core on its own. */
  const char *sim = getenv("EMBER_TEST_OPENBLAS_GUESS");
  if (sim && *sim && !taken && dyn && blas_has_core(&d, sim) && blas_take(&d, sim)) sim_guess = sim;

  char guessed[32];
  snprintf(guessed, sizeof guessed, "%s", openblas_get_corename());
  const int have = core_isa(guessed);
  if (taken) {
    if (have != ISA_NONE && have < need)
      snprintf(blas_why, sizeof blas_why,
               "set by the user (OPENBLAS_CORETYPE=%.24s%s); older than this CPU's %s, kept as asked: "
               "unset it for ember's choice",
               user, ran_as, isa_names[want]);
    else
      snprintf(blas_why, sizeof blas_why, "set by the user (OPENBLAS_CORETYPE=%.24s%s)", user, ran_as);
  } else if (have == ISA_NONE || have >= need) {
    snprintf(blas_why, sizeof blas_why, "%schosen by OpenBLAS from cpuid", not_taken);
  } else if (!dyn) {
    snprintf(blas_why, sizeof blas_why,
             "%schosen by OpenBLAS; older than this CPU's %s, and this OpenBLAS cannot choose "
             "again (not a DYNAMIC_ARCH build): set OPENBLAS_CORETYPE",
             not_taken, isa_names[want]);
  } else {
    const char *pick = blas_upgrade(&d, want, have, guessed);
    if (pick) blas_settle(&d, pick);
    if (pick)
      snprintf(blas_why, sizeof blas_why,
               "%sset by ember from cpuid (%s): OpenBLAS chose %s", not_taken, isa_names[want], guessed);
    else
      snprintf(blas_why, sizeof blas_why,
               "%schosen by OpenBLAS; older than this CPU's %s, and this OpenBLAS takes no newer "
               "core for it by name",
               not_taken, isa_names[want]);
  }
  sim_guess = NULL;
  if (d.lib) dlclose(d.lib); /* the NOLOAD reference only */
}

/* "openblas 0.3.21, core SkylakeX (why)" */
const char *cpu_blas_info(char *buf, size_t n) {
  const char *cfg = openblas_get_config(); /* "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." */
  const char *ver = cfg && strncmp(cfg, "OpenBLAS ", 9) == 0 ? cfg + 9 : "";
  int k = snprintf(buf, n, "openblas %.*s, core %s (%s)", (int)strcspn(ver, " "), ver,
                   openblas_get_corename(), blas_why[0] ? blas_why : "not checked");
  /* the backend keeps OpenBLAS at one thread a call (cpu_set_num_threads) */
  const char *env = getenv("OPENBLAS_NUM_THREADS") ? "OPENBLAS_NUM_THREADS"
                    : getenv("GOTO_NUM_THREADS")   ? "GOTO_NUM_THREADS"
                                                   : NULL;
  if (env && k > 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, ", %s=%.8s not used: ember's team splits products (ember.set_num_threads)",
             env, getenv(env));
  return buf;
}
