/*
** cpu_expr_jit.c -- a traced variant's programs (ember_expr.h) compiled to
** C, for the fused attention kernel's score and mask tiles.
**
** The interpreter (cpu_attention_expr_tmpl.h) pays, per instruction and
** tile row, a dispatch and a pass over a register in memory; a compiled
** program keeps a row's values in vector registers and fuses the score,
** its gradient, the NaN check and the write-back into one loop. Chosen by
** measurement (scripts/bench/variants.lua, the table in scripts/README.md):
** where a compiler is present the compiled tile runs, the interpreter
** stays for everything else -- no compiler, a failed compile, the sinks,
** the learned tables' scatter, and a row that must report an error (the
** compiled tile stops at such a row and the interpreter runs it, so the
** messages are the interpreter's).
**
** What is generated: for a call's programs (score, its gradient, mask)
** one source of one function each, for the compute type and the capture
** dtypes; a function runs the rows of a tile, the row's scalar registers
** before the key loop and the rest inside it, each op's text
** taken from cpu_expr_ops.h (CPU_XOPS), so both evaluators apply one
** rule. It is compiled with the system compiler ($EMBER_CC, else cc)
** for this CPU's vector ISA, into a cache folder ($EMBER_JIT_CACHE, else
** $XDG_CACHE_HOME/ember/jit, else ~/.cache/ember/jit) as <hash>.so. The
** hash covers the generated source and the compile command, so a stale
** entry is never found; a file that does not load (truncated, foreign)
** is compiled again once. Writes are atomic (a unique temporary file,
** then rename), so processes sharing the cache never see half a file.
** EMBER_JIT=0 turns compiling off; EMBER_JIT_KEEP=1 keeps each generated
** source beside its .so. The folder keeps the EMBER_JIT_CACHE_MAX (512)
** entries used last: a load touches its file, and a compile removes the
** oldest beyond that (and temporary files a crashed compile left).
*/
#include "cpu_internal.h"
#include "cpu_expr_ops.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef EM_JIT_INCLUDE_DIRS
#define EM_JIT_INCLUDE_DIRS ""
#endif
#ifndef EM_JIT_HEADERS
#define EM_JIT_HEADERS "unknown"
#endif

/* The ops' text, stringified from the one list. */
static const char *const XOP_TEXT[EM_XOP_COUNT] = {
#define XJ_TEXT(OP, AR, EXPR) [EM_XOP_##OP] = #EXPR,
  CPU_XOPS(XJ_TEXT)
#undef XJ_TEXT
};

/* ---- source text in a growing buffer ---- */

typedef struct xbuf { char *p; size_t n, cap; bool oom; } xbuf;

static void xb_printf(xbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = true; return; }
    if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->n + (size_t)k + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = true; return; }
    b->p = p, b->cap = cap;
  }
}

/* A constant as C source that reads back exactly. */
static void xb_const(xbuf *b, double k) {
  if (k != k) xb_printf(b, "(T)NAN");
  else if (k == INFINITY) xb_printf(b, "(T)INFINITY");
  else if (k == -INFINITY) xb_printf(b, "(T)-INFINITY");
  else xb_printf(b, "(T)%a", k);
}

static const char *cap_ctype(em_dtype dt) {
  return dt == EM_F32 ? "float" : dt == EM_F64 ? "double" : "int64_t";
}

/* Whether a load's offset is kept in T: while T holds it exactly and
** int32 reads it, GCC vectorises the loop (a gather), not with int64
** offsets. */
static bool offset_in_t(const em_xcap *cp, bool f64) {
  int64_t numel = 1;
  for (int d = 0; d < cp->ndim; d++) numel *= cp->shape[d];
  return numel < (f64 ? ((int64_t)1 << 31) : ((int64_t)1 << 24));
}

/* Register i's definition: `const T r<i> = ...;` (a load also checks its
** indices: a row with one out of range is the interpreter's to report). */
static void gen_ins(xbuf *b, const em_expr *p, const em_xcap *caps, int i, bool in_loop, bool f64, bool small) {
  const em_xins *x = &p->ins[i];
  switch (x->op) {
  case EM_XOP_CONST: xb_printf(b, "    const T r%d = ", i), xb_const(b, x->k), xb_printf(b, ";\n"); return;
  case EM_XOP_S: xb_printf(b, "      const T r%d = s_[jj];\n", i); return;
  case EM_XOP_B: xb_printf(b, "    const T r%d = (T)b;\n", i); return;
  case EM_XOP_H: xb_printf(b, "    const T r%d = (T)h;\n", i); return;
  case EM_XOP_Q: xb_printf(b, "    const T r%d = (T)q;\n", i); return;
  case EM_XOP_K: xb_printf(b, "      const T r%d = (T)(k0 + jj);\n", i); return;
  case EM_XOP_LOAD: {
    const em_xcap *cp = &caps[x->cap];
    const char *ind = in_loop ? "      " : "    ";
    const bool in_t = offset_in_t(cp, f64);
    const char *ot = in_t ? "T" : "int64_t";
    xb_printf(b, "%s%s o%d = 0;\n", ind, ot, i);
    for (int d = 0; d < cp->ndim; d++) {
      /* the index, kept in range so the read is safe; bad says if it was not;
      ** truncated as the interpreter's (int64_t) conversion does */
      xb_printf(b, "%s{ const T ix = r%d; const %s n = (%s)shape[%d]; const int ok = ix >= 1 && ix <= (T)n;\n"
                   "%s  bad |= !ok; o%d = o%d * n + (ok ? (%s)trunc(ix) - 1 : 0); }\n",
                ind, x->arg[d], ot, ot, x->cap * EM_EXPR_MAX_DIMS + d, ind, i, i, ot);
    }
    xb_printf(b, "%sconst T r%d = (T)((const %s *)cap[%d])[(%s)o%d];\n", ind, i, cap_ctype(cp->dtype), x->cap,
              in_t ? "int32_t" : "int64_t", i);
    return;
  }
  default: {
    const int ar = em_xop_arity(x->op);
    const char *ind = in_loop ? "      " : "    ";
    if (ar < 1 || ar > 3 || !XOP_TEXT[x->op]) {
      xb_printf(b, "%sconst T r%d = (T)NAN;\n", ind, i);
      return;
    }
    if (small && x->op == EM_XOP_TANH) { /* see gen_key_loops */
      xb_printf(b, "%sconst T r%d = ({ const T a_ = r%d; big |= !cpu_tanh_small_ok(a_); cpu_tanh_small_f32(a_); });\n",
                ind, i, x->arg[0]);
      return;
    }
    xb_printf(b, "%sconst T r%d = ({ const T a_ = r%d, b_ = r%d, c_ = r%d; (void)b_, (void)c_; (T)(%s); });\n",
              ind, i, x->arg[0], x->arg[ar > 1 ? 1 : 0], x->arg[ar > 2 ? 2 : 0], XOP_TEXT[x->op]);
  }
  }
}

/* Whether plan hp hoists anything (the function then reads Hb). */
static bool hoisted(const cpu_xhoist *hp) { return hp && (hp->n_roots || hp->n_gd); }

/* The key loop's registers: a hoisted root is read from the row's place
** in Hb, the other registers on the diagonals are not needed. */
static void gen_key_loop(xbuf *b, const em_expr *p, const em_xcap *caps, const cpu_xhoist *hp, bool f64,
                         bool small) {
  for (int i = 0; i < p->n; i++) {
    if (!p->kvar[i]) continue;
    if (hoisted(hp) && p->dvar[i]) {
      if (hp->slot[i] >= 0) xb_printf(b, "      const T r%d = hrow[%d * hs + jj];\n", i, hp->slot[i]);
      continue;
    }
    gen_ins(b, p, caps, i, true, f64, small);
  }
}

/* Whether program p has a float tanh in its key loop (see gen_key_loops). */
static bool has_key_tanh(const em_expr *p, const cpu_xhoist *hp, bool f64) {
  if (f64) return false;
  for (int i = 0; i < p->n; i++)
    if (p->kvar[i] && !(hoisted(hp) && p->dvar[i]) && p->ins[i].op == EM_XOP_TANH) return true;
  return false;
}

/* The key loop writing out0 (and out1 for the gradient role). With a
** float tanh in it, the loop runs first with cpu_vmath.h's polynomial
** tanh alone, which is the rule's own result for arguments inside
** (-1, 1), and runs again with the whole rule only when some argument of
** the row lies outside: a softcap's scores below its cap skip the rule's
** division and selects. */
static void gen_key_loops(xbuf *b, const em_expr *p, const em_xcap *caps, const cpu_xhoist *hp, int role, bool f64) {
  const bool small = has_key_tanh(p, hp, f64);
  for (int pass = small ? 0 : 1; pass < 2; pass++) {
    if (pass == 1 && small) xb_printf(b, "    if (big) {\n    bad = 0;\n");
    xb_printf(b, "    for (int64_t jj = 0; jj < bc; jj++) {\n");
    gen_key_loop(b, p, caps, hp, f64, pass == 0);
    xb_printf(b, "      out0[jj] = r%d;\n", p->out[0]);
    if (role == CPU_XJIT_GRAD) xb_printf(b, "      out1[jj] = r%d;\n", p->out[1]);
    xb_printf(b, "    }\n");
    if (pass == 1 && small) xb_printf(b, "    }\n");
  }
}

/* The tile function of program p in role `role` for compute type T.
** Returns -1 when every row from i_begin was done, else the first row it
** left alone (a bad index or a NaN score): the caller's interpreter runs
** that row, reports it, and calls again from the next. */
static void gen_function(xbuf *b, const em_expr *p, int role, bool f64, const em_xcap *caps, const cpu_xhoist *hp) {
  xb_printf(b, "int64_t em_xjit_tile%d(const void *const *cap, const int64_t *shape, int64_t b, int64_t h,\n"
               "                     int64_t q0, int64_t k0, int64_t i_begin, int64_t br, int64_t bc,\n"
               "                     int64_t ld, T *S, T *D, const T *Hb, int64_t hs) {\n"
               "  (void)cap, (void)shape, (void)D, (void)Hb, (void)hs;\n", role);
  xb_printf(b, ""
               "  for (int64_t ii = i_begin; ii < br; ii++) {\n"
               "    const int64_t q = q0 + ii;\n    (void)q;\n"
               "    T *restrict s_ = S + ii * ld;\n    int bad = 0;\n"
               "    const T *restrict hrow = Hb ? Hb + (br - 1 - ii) : 0;\n    (void)hrow;\n"
               "    T out0[MAXC], out1[MAXC];\n    (void)out1;\n    int big = 0;\n    (void)big;\n");
  for (int i = 0; i < p->n; i++)
    if (!p->kvar[i]) gen_ins(b, p, caps, i, false, f64, false);
  gen_key_loops(b, p, caps, hp, role, f64);
  xb_printf(b, "    if (bad) return ii;\n");
  if (role == CPU_XJIT_MASK) {
    xb_printf(b, "    for (int64_t jj = 0; jj < bc; jj++) s_[jj] = out0[jj] != 0 ? s_[jj] : -INFINITY;\n");
  } else {
    xb_printf(b, "    int nan = 0;\n    for (int64_t jj = 0; jj < bc; jj++) nan |= !(out0[jj] < (T)INFINITY);\n"
                 "    if (nan) return ii;\n    for (int64_t jj = 0; jj < bc; jj++) s_[jj] = out0[jj];\n");
    if (role == CPU_XJIT_GRAD)
      xb_printf(b, "    if (D) for (int64_t jj = 0; jj < bc; jj++) D[ii * ld + jj] = out1[jj];\n");
  }
  xb_printf(b, "  }\n  return -1;\n}\n");
}

/* The backward's scatter for one row: the gradient program run on the
** row's raw scores, and ds * d score/d(load g) added into the per-head
** sums G[cap] at each learned load's element (the interpreter's
** xscore_scatter_row), or for a load on the diagonals (hp's gslot) into
** its per-diagonal sums in acc. A row with a bad index adds nothing: its
** scores were -inf and its error is already recorded. */
static void gen_scatter(xbuf *b, const em_expr *p, bool f64, const em_xcap *caps, const cpu_xhoist *hp) {
  const bool hz = hoisted(hp);
  xb_printf(b, "void em_xjit_tile%d(const void *const *cap, const int64_t *shape, int64_t b, int64_t h,\n"
               "                   int64_t q, int64_t k0, int64_t bc, const T *raw, const T *ds, T *const *G,\n"
               "                   const T *Hb, int64_t hs, int64_t hoff, T *acc, int64_t as) {\n"
               "  (void)cap, (void)shape, (void)hs, (void)acc, (void)as;\n  const T *restrict s_ = raw;\n  int bad = 0;\n"
               "  const T *restrict hrow = Hb ? Hb + hoff : 0;\n  (void)hrow;\n",
            CPU_XJIT_SCATTER);
  for (int g = 0; g < p->n_grad; g++) xb_printf(b, "  int64_t off%d[MAXC];\n  T val%d[MAXC];\n  (void)off%d;\n", g, g, g);
  for (int i = 0; i < p->n; i++)
    if (!p->kvar[i]) gen_ins(b, p, caps, i, false, f64, false);
  xb_printf(b, "    for (int64_t jj = 0; jj < bc; jj++) {\n");
  gen_key_loop(b, p, caps, hp, f64, false);
  for (int g = 0; g < p->n_grad; g++) {
    if (!(hz && hp->gslot[g] >= 0)) xb_printf(b, "      off%d[jj] = (int64_t)o%d;\n", g, p->grad_load[g]);
    xb_printf(b, "      val%d[jj] = r%d * ds[jj];\n", g, p->out[2 + g]);
  }
  xb_printf(b, "    }\n  if (bad) return;\n");
  for (int g = 0; g < p->n_grad; g++) {
    const int cap = p->ins[p->grad_load[g]].cap;
    if (hz && hp->gslot[g] >= 0)
      xb_printf(b, "  if (G[%d]) { T *restrict A = acc + %d * as + hoff; for (int64_t jj = 0; jj < bc; jj++) A[jj] += val%d[jj]; }\n",
                cap, hp->gslot[g], g);
    else
      xb_printf(b, "  if (G[%d]) for (int64_t jj = 0; jj < bc; jj++) G[%d][off%d[jj]] += val%d[jj];\n", cap, cap, g, g);
  }
  xb_printf(b, "}\n");
}

/* One source for the call's programs (score, its gradient, mask: NULL
** where absent), compiled at once: one compiler run per variant and
** dtype, not three. */
static void gen_source(xbuf *b, const em_expr *const *progs, const cpu_xhoist *plans, bool f64,
                       const em_xcap *caps) {
  /* the headers' version first: a cache entry built against other rules is another file */
  xb_printf(b, "/* ember traced programs, headers %s */\n", EM_JIT_HEADERS);
  xb_printf(b, "#include <stdint.h>\n#include <tgmath.h>\n#include \"cpu_expr_ops.h\"\n"
               "#define T %s\n#define MAXC %d\n", f64 ? "double" : "float", CPU_XJIT_MAX_COLS);
  for (int r = 0; r < CPU_XJIT_SCATTER; r++)
    if (progs[r]) gen_function(b, progs[r], r, f64, caps, &plans[r]);
  if (progs[CPU_XJIT_SCATTER]) gen_scatter(b, progs[CPU_XJIT_SCATTER], f64, caps, &plans[CPU_XJIT_SCATTER]);
}

/* ---- compiling, the cache folder, and what ran ---- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
#define XJ_SLOTS 64
static struct { uint64_t key; bool ok; cpu_xjit_fn fn[CPU_XJIT_ROLES]; } g_slots[XJ_SLOTS];
static int g_nslots;
static char g_state[2600] = "none run yet";
static uint64_t g_compiled_calls, g_interpreted_calls;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* fnv's rule a word at a time, for the per-call key (eight times fewer
** dependent multiplies over a program's instructions). */
static uint64_t fnv_words(uint64_t h, const void *p, size_t n) {
  const unsigned char *c = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, c + i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 32;
  }
  return fnv(h, c + i, n - i);
}

static const char *isa_flags(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return "-mavx512f -mavx512dq -mavx512bw -mavx512vl -mavx2 -mfma -mprefer-vector-width=512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "-mavx2 -mfma";
#endif
  return "";
}

/* The cache folder, made if missing; false when there is none. */
static bool cache_dir(char *dir, size_t n) {
  const char *e = getenv("EMBER_JIT_CACHE"), *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (e && *e) snprintf(dir, n, "%s", e);
  else if (x && *x) snprintf(dir, n, "%s/ember/jit", x);
  else if (home && *home) snprintf(dir, n, "%s/.cache/ember/jit", home);
  else return false;
  char tmp[1024];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *s = tmp + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(tmp, 0755);
      *s = '/';
    }
  return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

static bool write_file(const char *path, const char *text, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(text, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

/* The compile flags before the ISA's. -ffp-contract=off: gnu11 lets GCC
** fuse a product and a sum of separate statements into one FMA (one
** rounding fewer), which the interpreter (built as ISO C11, where GCC does
** not contract) never does -- softcap's d/ds = 1 - t*t differed by an ulp.
** Part of the cache key: entries compiled otherwise are not found. */
#define JIT_CFLAGS "-O3 -std=gnu11 -ffp-contract=off -fPIC -shared -fno-trapping-math -fno-math-errno"

/* The first line of the compiler's log, for the report. */
static void first_line(const char *log, char *buf, size_t n) {
  buf[0] = 0;
  FILE *f = fopen(log, "r");
  if (!f) return;
  if (fgets(buf, (int)n, f)) buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}

/* Runs the compiler; its output goes to log. When it fails, why (n bytes)
** says how: the compiler's first line of output, else that it could not
** be started, its exit status or signal, or that it wrote no `out`. */
static bool run_cc(const char *cc, const char *src, const char *out, const char *log, char *why, size_t nwhy) {
  char *argv[64];
  int n = 0;
  char flags[512];
  snprintf(flags, sizeof flags, JIT_CFLAGS " %s", isa_flags());
  argv[n++] = (char *)cc;
  for (char *t = strtok(flags, " "); t && n < 40; t = strtok(NULL, " ")) argv[n++] = t;
  char incs[8][1024];
  int ni = 0;
  const char *dirs[2] = {getenv("EMBER_JIT_INCLUDE"), EM_JIT_INCLUDE_DIRS};
  for (int d = 0; d < 2; d++) {
    if (!dirs[d] || !*dirs[d]) continue;
    char list[4096];
    snprintf(list, sizeof list, "%s", dirs[d]);
    char *save = NULL;
    for (char *t = strtok_r(list, ":", &save); t && ni < 8; t = strtok_r(NULL, ":", &save))
      snprintf(incs[ni], sizeof incs[ni], "-I%s", t), argv[n++] = incs[ni++];
  }
  argv[n++] = (char *)src, argv[n++] = "-o", argv[n++] = (char *)out, argv[n++] = "-lm", argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(why, nwhy, "cannot start it: %s", strerror(rc));
    return false;
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    if (access(out, R_OK) == 0) return true;
    snprintf(why, nwhy, "it exited with status 0 but wrote no shared object");
    return false;
  }
  first_line(log, why, nwhy);
  if (why[0]) return false;
  /* a child that exec could not start exits with 127 (posix_spawnp's
  ** failure may be reported so, after the fork) */
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) snprintf(why, nwhy, "cannot start it (exit status 127)");
  else if (WIFEXITED(st)) snprintf(why, nwhy, "it exited with status %d and printed nothing", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(why, nwhy, "it was killed by signal %d", WTERMSIG(st));
  else snprintf(why, nwhy, "it did not finish");
  return false;
}

/* The tile functions of a compiled source; false when it does not load
** or lacks one that progs needs. */
static bool load_so(const char *path, const em_expr *const *progs, cpu_xjit_fn *fns) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) {
    char name[32];
    snprintf(name, sizeof name, "em_xjit_tile%d", r);
    void *sym = progs[r] ? dlsym(h, name) : NULL;
    memcpy(&fns[r], &sym, sizeof fns[r]);
    if (progs[r] && !sym) {
      dlclose(h);
      return false;
    }
  }
  return true;
}

/* ---- the cache folder's size ---- */

typedef struct cache_entry { struct timespec mtime; char name[64]; } cache_entry;

static int by_mtime(const void *a, const void *b) {
  const struct timespec x = ((const cache_entry *)a)->mtime, y = ((const cache_entry *)b)->mtime;
  return x.tv_sec != y.tv_sec ? (x.tv_sec < y.tv_sec ? -1 : 1) : (x.tv_nsec > y.tv_nsec) - (x.tv_nsec < y.tv_nsec);
}

/* EMBER_JIT_CACHE_MAX, a count >= 1; unset or anything else is 512 (junk
** was read by strtol as 0 and kept one entry), which cpu_xjit_info says. */
static long cache_max(bool *junk) {
  const char *e = getenv("EMBER_JIT_CACHE_MAX");
  char *end = NULL;
  errno = 0;
  const long n = e && *e ? strtol(e, &end, 10) : 512;
  const bool bad = e && *e && (errno || end == e || *end || n < 1);
  if (junk) *junk = bad;
  return bad ? 512 : n;
}

/* Removes the entries of dir used longest ago beyond cache_max() (their
** kept sources too; never `fresh`, the one just made), and temporary files
** older than an hour. Another process that is about to load a removed
** entry finds it missing and compiles it again. */
static void cache_prune(const char *dir, const char *fresh) {
  DIR *d = opendir(dir);
  if (!d) return;
  cache_entry *e = NULL;
  size_t n = 0, cap = 0;
  const time_t now = time(NULL);
  char path[1200];
  for (struct dirent *de; (de = readdir(d));) {
    const size_t len = strlen(de->d_name);
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (len >= sizeof e->name || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (strncmp(de->d_name, "tmp-", 4) == 0) {
      if (now - st.st_mtime > 3600) unlink(path);
      continue;
    }
    if (len < 4 || strcmp(de->d_name + len - 3, ".so") != 0 || strcmp(de->d_name, fresh) == 0) continue;
    if (n == cap) {
      cache_entry *g = realloc(e, (cap = cap ? 2 * cap : 64) * sizeof *e);
      if (!g) break;
      e = g;
    }
    e[n].mtime = st.st_mtim;
    memcpy(e[n].name, de->d_name, len + 1);
    n++;
  }
  closedir(d);
  const size_t keep = (size_t)cache_max(NULL) - 1; /* and fresh */
  if (n > keep) {
    qsort(e, n, sizeof *e, by_mtime);
    for (size_t i = 0; i < n - keep; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, e[i].name);
      unlink(path);
      path[strlen(path) - 3] = 0;
      strcat(path, ".c"); /* EMBER_JIT_KEEP's source, if any */
      unlink(path);
    }
  }
  free(e);
}

/* Compiles src into dir/<key>.so (or loads it when there); NULL and a
** reason in g_state when it cannot. */
static bool build(const char *src, size_t n, uint64_t key, const em_expr *const *progs, cpu_xjit_fn *fns) {
  const char *cc = getenv("EMBER_CC");
  if (!cc || !*cc) cc = "cc";
  char dir[900], so[1024], tmp_c[1100], tmp_so[1100], log[1100];
  if (!cache_dir(dir, sizeof dir)) {
    snprintf(g_state, sizeof g_state, "interpreted (no cache folder: set EMBER_JIT_CACHE or HOME)");
    return false;
  }
  snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)key);
  if (access(so, R_OK) == 0) {
    if (load_so(so, progs, fns)) {
      utimensat(AT_FDCWD, so, NULL, 0); /* used now: the last that cache_prune removes */
      return true;
    }
    unlink(so); /* truncated or foreign: made again below */
  }
  snprintf(tmp_c, sizeof tmp_c, "%s/tmp-%016llx-%ld.c", dir, (unsigned long long)key, (long)getpid());
  snprintf(tmp_so, sizeof tmp_so, "%s/tmp-%016llx-%ld.so", dir, (unsigned long long)key, (long)getpid());
  snprintf(log, sizeof log, "%s/tmp-%016llx-%ld.log", dir, (unsigned long long)key, (long)getpid());
  if (!write_file(tmp_c, src, n)) {
    snprintf(g_state, sizeof g_state, "interpreted (cannot write %s)", tmp_c);
    return false;
  }
  char why[160] = "";
  if (!run_cc(cc, tmp_c, tmp_so, log, why, sizeof why)) {
    snprintf(g_state, sizeof g_state, "interpreted (compiling with %s failed: %s)", cc, why);
    unlink(tmp_c), unlink(tmp_so), unlink(log);
    return false;
  }
  if (getenv("EMBER_JIT_KEEP")) { /* the generated source beside its .so, to read */
    char keep[1100];
    snprintf(keep, sizeof keep, "%s/%016llx.c", dir, (unsigned long long)key);
    if (rename(tmp_c, keep) != 0) unlink(tmp_c);
  } else {
    unlink(tmp_c);
  }
  unlink(log);
  if (rename(tmp_so, so) != 0) { /* atomic: another process may be renaming the same file */
    unlink(tmp_so);
    snprintf(g_state, sizeof g_state, "interpreted (cannot write %s)", so);
    return false;
  }
  cache_prune(dir, strrchr(so, '/') + 1);
  if (load_so(so, progs, fns)) return true;
  snprintf(g_state, sizeof g_state, "interpreted (%s does not load)", so);
  return false;
}

static bool jit_enabled(void) {
  const char *e = getenv("EMBER_JIT");
  return !(e && strcmp(e, "0") == 0);
}

/* What the generated source depends on, hashed without generating it:
** the programs (the plans follow from them), the captures' dtypes and
** offset kind, the compute type, the compiler and its flags. A call finds
** its compiled functions in this process by this key; generating and
** hashing the source every call cost a decoding step more than its
** attention. */
static uint64_t program_key(const em_expr *const *progs, bool f64, const em_xcap *caps, const char *cc) {
  uint64_t h = fnv_words(1469598103934665603ull, &f64, sizeof f64);
  int max_cap = -1;
  for (int r = 0; r < CPU_XJIT_ROLES; r++) {
    const em_expr *p = progs[r];
    const int n = p ? p->n : -1;
    h = fnv_words(h, &n, sizeof n);
    if (!p) continue;
    h = fnv_words(h, p->ins, (size_t)p->n * sizeof *p->ins);
    h = fnv_words(h, &p->n_out, sizeof p->n_out), h = fnv_words(h, p->out, (size_t)p->n_out * sizeof *p->out);
    h = fnv_words(h, &p->n_grad, sizeof p->n_grad), h = fnv_words(h, p->grad_load, (size_t)p->n_grad * sizeof *p->grad_load);
    for (int i = 0; i < p->n; i++)
      if (p->ins[i].op == EM_XOP_LOAD && p->ins[i].cap > max_cap) max_cap = p->ins[i].cap;
  }
  for (int c = 0; c <= max_cap; c++) {
    const int kind[3] = {caps[c].dtype, caps[c].ndim, offset_in_t(&caps[c], f64)};
    h = fnv_words(h, kind, sizeof kind);
  }
  h = fnv_words(h, cc, strlen(cc));
  h = fnv_words(h, JIT_CFLAGS, strlen(JIT_CFLAGS));
  return fnv_words(h, isa_flags(), strlen(isa_flags()));
}

bool cpu_xjit_get(const em_expr *const *progs, const cpu_xhoist *plans, bool f64, const em_xcap *caps,
                  cpu_xjit_fn *fns) {
  for (int r = 0; r < CPU_XJIT_ROLES; r++) fns[r] = NULL;
  if (!jit_enabled()) {
    pthread_mutex_lock(&g_lock);
    snprintf(g_state, sizeof g_state, "interpreted (EMBER_JIT=0)");
    pthread_mutex_unlock(&g_lock);
    return false;
  }
  const char *cc = getenv("EMBER_CC");
  if (!cc || !*cc) cc = "cc";
  const uint64_t pkey = program_key(progs, f64, caps, cc);
  pthread_mutex_lock(&g_lock);
  int i = 0;
  while (i < g_nslots && g_slots[i].key != pkey) i++;
  bool ok;
  if (i < g_nslots) {
    ok = g_slots[i].ok;
    for (int r = 0; r < CPU_XJIT_ROLES; r++) fns[r] = g_slots[i].fn[r];
    pthread_mutex_unlock(&g_lock);
    return ok;
  }
  pthread_mutex_unlock(&g_lock);
  xbuf b = {0};
  gen_source(&b, progs, plans, f64, caps);
  if (b.oom) {
    free(b.p);
    return false;
  }
  /* the cache file is named by the source itself, so a stale one is never found */
  uint64_t key = fnv(1469598103934665603ull, b.p, b.n);
  key = fnv(key, cc, strlen(cc));
  key = fnv(key, JIT_CFLAGS, strlen(JIT_CFLAGS));
  key = fnv(key, isa_flags(), strlen(isa_flags()));
  pthread_mutex_lock(&g_lock);
  i = 0;
  while (i < g_nslots && g_slots[i].key != pkey) i++; /* another thread may have built it meanwhile */
  if (i < g_nslots) {
    ok = g_slots[i].ok;
    for (int r = 0; r < CPU_XJIT_ROLES; r++) fns[r] = g_slots[i].fn[r];
  } else {
    ok = build(b.p, b.n, key, progs, fns);
    if (ok) {
      const char *isa = isa_flags();
      snprintf(g_state, sizeof g_state, "compiled (%s%s)", cc,
               !isa[0] ? "" : strstr(isa, "512") ? ", avx512" : ", avx2");
    }
    if (g_nslots < XJ_SLOTS) { /* failures too: not tried again in this process */
      g_slots[g_nslots].key = pkey, g_slots[g_nslots].ok = ok;
      for (int r = 0; r < CPU_XJIT_ROLES; r++) g_slots[g_nslots].fn[r] = fns[r];
      g_nslots++;
    }
  }
  pthread_mutex_unlock(&g_lock);
  free(b.p);
  return ok;
}

void cpu_xjit_count(bool compiled) {
  __atomic_add_fetch(compiled ? &g_compiled_calls : &g_interpreted_calls, 1, __ATOMIC_RELAXED);
}

void cpu_xjit_info(char *buf, size_t n) {
  pthread_mutex_lock(&g_lock);
  bool junk;
  cache_max(&junk);
  snprintf(buf, n, "%s; %llu calls compiled, %llu interpreted%s%.16s%s", g_state,
           (unsigned long long)__atomic_load_n(&g_compiled_calls, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&g_interpreted_calls, __ATOMIC_RELAXED),
           junk ? "; EMBER_JIT_CACHE_MAX=" : "", junk ? getenv("EMBER_JIT_CACHE_MAX") : "",
           junk ? " is not a number of entries >= 1, 512 kept" : "");
  pthread_mutex_unlock(&g_lock);
}
