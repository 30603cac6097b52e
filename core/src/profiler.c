/*
** profiler.c -- spans of every backend call, autograd node backward and
** user range, for ember.profile (lua/ember/profiler.lua) and C users.
**
** Every op reaches its kernels through em__be (tensor.c). While recording,
** em__be hands out a copy of the backend's vtable whose kernels are
** wrappers (profiler_wrap_tmpl.h) that time the real call and note its
** bytes, FLOPs and what computed it; when not recording it hands out the
** backend itself, so an op pays one branch on em__prof_on. Hooking the
** vtable rather than each op keeps the hooks in one place and sees
** everything, plugin ops and Lua-defined functions' kernels included. The
** engine (autograd.c) opens a span around each node's backward, so the
** kernels of a backward sit inside "<op> backward" and self time works
** as in torch.profiler.
*/
#include "internal.h"

#include <pthread.h>
#include <time.h>

#define EM_PROF_MAX_EVENTS ((int64_t)1 << 21) /* 2M spans, about 150 MB */
#define EM__PROF_SLOTS 4                      /* backends wrapped; more run unprofiled */
#define EM__PROF_DEPTH 256                    /* open spans per thread; deeper ones are dropped */
#define EM__PROF_KIND_DEPTH 4096              /* ... whose kind (backward or not) is kept */

_Atomic bool em__prof_on;

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static em_prof_event *prof_ev;
static int64_t prof_n, prof_cap, prof_dropped;
static unsigned prof_gen; /* bumped by each start: stale thread stacks reset */
static int prof_threads;

/* Interned names (kernel names built from enums, op names, user ranges):
** open addressing on the text, freed at the next start. */
static char **prof_names;
static size_t prof_names_cap, prof_names_n;

/* What computed each dtype on each wrapped backend, from kernel_info:
** gemm products, the fused attention kernel, and our own loops. */
enum { IMPL_GEMM, IMPL_GEMV, IMPL_ATTN, IMPL_CONV, IMPL_KERN, IMPL_N };
static char prof_impl[EM__PROF_SLOTS][EM_NDTYPES][IMPL_N][256];

static const em_backend *prof_real[EM__PROF_SLOTS];
static em_backend prof_vt[EM__PROF_SLOTS];
static bool prof_wrapped[EM__PROF_SLOTS];

/* This thread's open spans: indices into prof_ev (-1 for one dropped,
** still closed in order), and, one bit each, whether each is a backward:
** kept deeper, so that a backward opened past EM__PROF_DEPTH still ends
** its phase when it closes (`backward` counts the open ones below
** EM__PROF_KIND_DEPTH). A span nested past EM__PROF_DEPTH is dropped, as
** one past the buffer's limit: its time stays in the innermost kept span's
** self time (kept, it could only hang from that span, beside the spans it
** sits inside, whose times self time would subtract twice). */
static _Thread_local struct {
  unsigned gen;
  int tid, depth, backward;
  int64_t open[EM__PROF_DEPTH];
  uint64_t open_bw[EM__PROF_KIND_DEPTH / 64];
} prof_self;

/* prof_begin's answer when it opened nothing (not recording): prof_end
** then does nothing. */
#define PROF_NONE ((int64_t)-2)

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

/* The profiler's copy of s (under prof_lock); s itself when out of memory. */
static const char *intern(const char *s) {
  if (2 * (prof_names_n + 1) > prof_names_cap) {
    size_t cap = prof_names_cap ? 2 * prof_names_cap : 256;
    char **v = calloc(cap, sizeof *v);
    if (!v) return s;
    for (size_t i = 0; i < prof_names_cap; i++)
      if (prof_names[i])
        for (size_t j = hash_str(prof_names[i]) & (cap - 1);; j = (j + 1) & (cap - 1))
          if (!v[j]) {
            v[j] = prof_names[i];
            break;
          }
    free(prof_names);
    prof_names = v;
    prof_names_cap = cap;
  }
  size_t j = hash_str(s) & (prof_names_cap - 1);
  for (; prof_names[j]; j = (j + 1) & (prof_names_cap - 1))
    if (strcmp(prof_names[j], s) == 0) return prof_names[j];
  char *c = strdup(s);
  if (!c) return s;
  prof_names[j] = c;
  prof_names_n++;
  return c;
}

/* This thread's state, reset when it belongs to an earlier run. */
static void self_sync(void) {
  if (prof_self.gen != prof_gen) {
    prof_self.gen = prof_gen;
    prof_self.tid = 0;
    prof_self.depth = 0;
    prof_self.backward = 0;
  }
}

/* Opens a span (under prof_lock): its index, or -1 past the limit. */
static int64_t begin_locked(const char *name, em_prof_kind kind, const char *device, bool own) {
  self_sync();
  if (!prof_self.tid) prof_self.tid = ++prof_threads;
  int64_t i = -1;
  const bool deep = prof_self.depth >= EM__PROF_DEPTH;
  if (!deep && prof_n == prof_cap && prof_n < EM_PROF_MAX_EVENTS) {
    int64_t cap = prof_cap ? 2 * prof_cap : 4096;
    em_prof_event *v = realloc(prof_ev, (size_t)cap * sizeof *v);
    if (v) prof_ev = v, prof_cap = cap;
  }
  if (!deep && prof_n < prof_cap) {
    i = prof_n++;
    em_prof_event *e = &prof_ev[i];
    memset(e, 0, sizeof *e);
    e->name = own ? intern(name) : name;
    e->device = device;
    e->kind = kind;
    e->tid = prof_self.tid;
    e->backward = prof_self.backward > 0 || kind == EM_PROF_BACKWARD;
    e->parent = -1;
    for (int d = prof_self.depth - 1; d >= 0 && e->parent < 0; d--) e->parent = prof_self.open[d];
    e->dur_ns = -1;
  } else {
    prof_dropped++;
  }
  const int d = prof_self.depth++;
  if (d < EM__PROF_DEPTH) prof_self.open[d] = i;
  if (d < EM__PROF_KIND_DEPTH) {
    const uint64_t bit = (uint64_t)1 << (d % 64);
    if (kind == EM_PROF_BACKWARD) {
      prof_self.open_bw[d / 64] |= bit;
      prof_self.backward++;
    } else {
      prof_self.open_bw[d / 64] &= ~bit;
    }
  }
  if (i >= 0) prof_ev[i].start_ns = now_ns();
  return i;
}

/* Opens a span; `own` interns the name (otherwise it must be static). */
static int64_t prof_begin(const char *name, em_prof_kind kind, const char *device, bool own) {
  pthread_mutex_lock(&prof_lock);
  int64_t i = atomic_load_explicit(&em__prof_on, memory_order_relaxed)
                  ? begin_locked(name, kind, device, own)
                  : PROF_NONE;
  pthread_mutex_unlock(&prof_lock);
  return i;
}

/* Closes this thread's innermost span (i, from prof_begin), noting what
** it moved and computed. A span of an earlier run is forgotten. */
static void prof_end(int64_t i, int64_t bytes, double flops, const char *impl) {
  if (i == PROF_NONE) return;
  const int64_t t = now_ns();
  pthread_mutex_lock(&prof_lock);
  const unsigned gen = prof_self.gen;
  self_sync();
  if (gen == prof_gen && prof_self.depth > 0) {
    const int d = --prof_self.depth;
    if (d < EM__PROF_KIND_DEPTH && (prof_self.open_bw[d / 64] >> (d % 64) & 1) && prof_self.backward > 0)
      prof_self.backward--;
    if (i >= 0 && i < prof_n && prof_ev[i].dur_ns < 0) {
      em_prof_event *e = &prof_ev[i];
      e->dur_ns = t - e->start_ns;
      e->bytes = bytes;
      e->flops = flops;
      e->impl = impl && *impl ? impl : NULL;
    }
  }
  pthread_mutex_unlock(&prof_lock);
}

/* Closes this thread's innermost span, whatever it is (ranges, backward). */
static void prof_pop(void) {
  pthread_mutex_lock(&prof_lock);
  self_sync();
  const int d = prof_self.depth - 1;
  const int64_t i = d < 0 ? PROF_NONE : d < EM__PROF_DEPTH ? prof_self.open[d] : -1;
  pthread_mutex_unlock(&prof_lock);
  prof_end(i, 0, 0, NULL);
}

/* ------------------------------------------------------------------ */
/* What computed it                                                    */
/* ------------------------------------------------------------------ */

/* The text after `key` in line up to the next "; ", into out. */
static void field(const char *line, const char *key, char *out, size_t n) {
  const char *p = strstr(line, key);
  out[0] = '\0';
  if (!p) return;
  p += strlen(key);
  const char *e = strstr(p, "; ");
  snprintf(out, n, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
}

/* "avx512f (softmax, ...), avx2 (casts, ...), x86-64 (...)[, more]" ->
** "avx512f, avx2, x86-64 by kernel[, more]": the groups' instruction sets
** without their lists, which the backend alone knows (ember.cpu_info()
** prints them); a line without groups ("avx2") stays as it is. */
static void kernels_isas(char *s, size_t size) {
  if (!strchr(s, '(')) return;
  char isas[120] = "", rest[120] = "";
  int n = 0, depth = 0;
  const char *tok = s;
  for (const char *p = s;; p++) {
    if (*p == '(' && depth++ == 0) { /* tok .. p is a group's ISA */
      while (*tok == ' ' || *tok == ',') tok++;
      const char *e = p;
      while (e > tok && e[-1] == ' ') e--;
      size_t k = strlen(isas);
      snprintf(isas + k, sizeof isas - k, "%s%.*s", n++ ? ", " : "", (int)(e - tok), tok);
    } else if (*p == ')' && depth > 0) {
      depth--;
    } else if (depth == 0 && (*p == ',' || !*p)) {
      while (*tok == ' ' || *tok == ',') tok++;
      if (p > tok && tok[0] != '(' && !strchr(tok, '(')) snprintf(rest, sizeof rest, ", %.*s", (int)(p - tok), tok);
      tok = p + 1;
    }
    if (!*p) break;
  }
  snprintf(s, size, "%s by kernel%s", isas, rest);
}

/* kernel_info's line for each dtype, split into what the wrappers name:
** gemm ("gemm: ...", the rule's parenthesis when it has one, and the BLAS
** core when OpenBLAS takes part), gemv ("gemv: ...", products with one
** row or column, the same core named), attention ("attention: ...", bfloat16's
** tiles; the BLAS line for the others, whose tiles are sgemm/dgemm
** calls), convolution ("conv: ...") and our own loops ("kernels: ..."). Filled once per backend: the
** answers do not change within a process, and asking oneDNN costs a
** primitive per dtype. */
static void impl_fill(int slot, const em_backend *be) {
  for (int dt = 0; dt < EM_NDTYPES; dt++) {
    char line[1024] = "", gemm[400], blas[160], own[400];
    char(*impl)[256] = prof_impl[slot][dt];
    for (int k = 0; k < IMPL_N; k++) impl[k][0] = '\0';
    if (!be->kernel_info || be->kernel_info(0, (em_dtype)dt, line, sizeof line) != EM_OK) continue;
    field(line, "gemm: ", gemm, sizeof gemm);
    field(line, "blas: ", blas, sizeof blas);
    const char *core = strstr(blas, ", core ");
    char cname[40] = "";
    if (core) snprintf(cname, sizeof cname, "%.*s", (int)strcspn(core + 7, " "), core + 7);
    const char *lp = strchr(gemm, '('), *rp = lp ? strrchr(gemm, ')') : NULL;
    if (lp && rp > lp) memmove(gemm, lp + 1, (size_t)(rp - lp - 1)), gemm[rp - lp - 1] = '\0';
    if (core && strstr(gemm, "openblas"))
      snprintf(impl[IMPL_GEMM], sizeof impl[IMPL_GEMM], "%.200s; openblas core %.39s", gemm, cname);
    else
      snprintf(impl[IMPL_GEMM], sizeof impl[IMPL_GEMM], "%.250s", gemm);
    field(line, "gemv: ", gemm, sizeof gemm);
    if (core && strstr(gemm, "openblas"))
      snprintf(impl[IMPL_GEMV], sizeof impl[IMPL_GEMV], "%.200s; openblas core %.39s", gemm, cname);
    else
      snprintf(impl[IMPL_GEMV], sizeof impl[IMPL_GEMV], "%.250s", gemm[0] ? gemm : impl[IMPL_GEMM]);
    field(line, "attention: ", impl[IMPL_ATTN], sizeof impl[IMPL_ATTN]);
    if (!impl[IMPL_ATTN][0] && core)
      snprintf(impl[IMPL_ATTN], sizeof impl[IMPL_ATTN], "tiles on openblas core %.39s", cname);
    field(line, "conv: ", impl[IMPL_CONV], sizeof impl[IMPL_CONV]);
    field(line, "kernels: ", own, sizeof own);
    kernels_isas(own, sizeof own);
    if (own[0]) snprintf(impl[IMPL_KERN], sizeof impl[IMPL_KERN], "kernels: %.240s", own);
  }
}

static const char *impl_of(int slot, em_dtype dt, int what) {
  return (unsigned)dt < EM_NDTYPES ? prof_impl[slot][dt][what] : NULL;
}

/* A product's: the backend's gemm_route names the library that takes it;
** without one, kernel_info's gemm part (one row or one column: its gemv
** part). */
static const char *gemm_impl(int slot, int device, em_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                             int64_t batch) {
  const em_backend *be = prof_real[slot];
  const char *r = be && be->gemm_route ? be->gemm_route(device, dt, ta, tb, m, n, k, batch) : NULL;
  return r ? r : impl_of(slot, dt, m == 1 || n == 1 ? IMPL_GEMV : IMPL_GEMM);
}

/* ------------------------------------------------------------------ */
/* The wrappers, one set per backend slot                              */
/* ------------------------------------------------------------------ */

static int64_t kv_bytes(const em_kview *v) {
  if (!v) return 0;
  int64_t n = 1;
  for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
  return n * (int64_t)em_kernel_dtype_size(v->dtype);
}

static int64_t dsz(em_dtype dt) { return (int64_t)em_kernel_dtype_size(dt); }

/* A name made of an op's name and a suffix, interned by prof_begin. */
static const char *joined(char *buf, size_t n, const char *a, const char *b) {
  snprintf(buf, n, "%s%s", a, b);
  return buf;
}

/* "<op>_grad" in a per-thread buffer: the span interns it (own = true). */
static const char *grad_name(const char *op) {
  static _Thread_local char buf[64];
  return joined(buf, sizeof buf, op, "_grad");
}

static const char *reduce_name(em_reduce_op op) {
  static const char *const names[] = {"sum", "mean", "max", "min", "var"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "reduce";
}

/* Query-key pairs the fused kernel computes: all of them, or those a
** causal mask keeps (bottom-right aligned: query i sees i + 1 + Lk - Lq keys,
** none for the first Lq - Lk queries when there are fewer keys). */
static double attn_pairs(const em_attention_args *a) {
  const double lq = (double)a->Lq, lk = (double)a->Lk;
  double pairs = lq * lk;
  if (a->causal) pairs = lq <= lk ? lq * (lk - lq) + lq * (lq + 1) / 2 : lk * (lk + 1) / 2;
  return pairs * (double)a->B * (double)a->H;
}

/* Forward: S = QK^T and PV; backward: S again, dV = P^T dO, dP = dO V^T,
** dQ = dS K, dK = dS^T Q. */
static double attn_flops(const em_attention_args *a, bool bwd) {
  const double dk = (double)a->dk, dv = (double)a->dv;
  return 2 * attn_pairs(a) * (bwd ? 3 * dk + 2 * dv : dk + dv);
}

static int64_t attn_bytes(const em_attention_args *a, bool bwd) {
  const int64_t bh = a->B * a->H;
  const int64_t qkvo = bh * (a->Lq * a->dk + a->Lk * a->dk + a->Lk * a->dv + a->Lq * a->dv);
  return (bwd ? 2 : 1) * qkvo * dsz(a->dtype);
}

/* A convolution's multiply-adds: every output element sums C/groups x
** kh x kw products; the backward computes dx and dw, twice as many. */
static double conv_flops(const em_conv_args *a, bool bwd) {
  const double macs = (double)a->N * a->O * a->Ho * a->Wo * (double)(a->C / a->groups) * a->kh * a->kw;
  return (bwd ? 4 : 2) * macs;
}

static int64_t conv_bytes(const em_conv_args *a, bool bwd) {
  const int64_t x = a->N * a->C * a->H * a->W, w = a->O * (a->C / a->groups) * a->kh * a->kw;
  const int64_t y = a->N * a->O * a->Ho * a->Wo;
  return (bwd ? 2 * (x + w) + y : x + w + y) * dsz(a->dtype);
}

/* A linalg kernel's span: its op ("cholesky", "svd", ...). */
static const char *linalg_name(em_linalg_op op) {
  static const char *const names[] = {"cholesky", "lu", "solve", "solve_triangular", "qr", "eigh", "svd"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : "linalg";
}

#define PROF_CAT2(a, b) a##b
#define PROF_CAT(a, b) PROF_CAT2(a, b)

#define PROF_SLOT 0
#include "profiler_wrap_tmpl.h"
#undef PROF_SLOT
#define PROF_SLOT 1
#include "profiler_wrap_tmpl.h"
#undef PROF_SLOT
#define PROF_SLOT 2
#include "profiler_wrap_tmpl.h"
#undef PROF_SLOT
#define PROF_SLOT 3
#include "profiler_wrap_tmpl.h"
#undef PROF_SLOT

static void (*const prof_wrap[EM__PROF_SLOTS])(em_backend *) = {prof_wrap_0, prof_wrap_1,
                                                                 prof_wrap_2, prof_wrap_3};

const em_backend *em__prof_backend(int slot) {
  if (slot >= 0 && slot < EM__PROF_SLOTS && prof_wrapped[slot]) return &prof_vt[slot];
  return em_backend_get(slot);
}

/* ------------------------------------------------------------------ */
/* The API                                                             */
/* ------------------------------------------------------------------ */

em_status em_profiler_start(void) {
  em__plugins_ensure_loaded();
  pthread_mutex_lock(&prof_lock);
  if (atomic_load_explicit(&em__prof_on, memory_order_relaxed)) {
    pthread_mutex_unlock(&prof_lock);
    return em_error(EM_ERR_ARG, "profiler: a profile is already running (stop it first)");
  }
  prof_n = 0;
  prof_dropped = 0;
  prof_gen++;
  prof_threads = 0;
  for (size_t i = 0; i < prof_names_cap; i++) free(prof_names[i]);
  free(prof_names);
  prof_names = NULL;
  prof_names_cap = prof_names_n = 0;
  pthread_mutex_unlock(&prof_lock);
  /* The vtables are rebuilt outside the lock (kernel_info may run a
  ** kernel); no wrapper is in use while the flag is off. Wrappers a
  ** saved pointer still reaches (an autograd node's) check the flag. */
  const int nb = em_backend_count();
  for (int slot = 0; slot < EM__PROF_SLOTS; slot++) {
    const em_backend *be = slot < nb ? em_backend_get(slot) : NULL;
    if (!be) continue;
    if (!prof_wrapped[slot]) {
      impl_fill(slot, be);
      prof_real[slot] = be;
      prof_vt[slot] = *be;
      prof_wrap[slot](&prof_vt[slot]);
      prof_wrapped[slot] = true;
    }
  }
  atomic_store(&em__prof_on, true);
  return EM_OK;
}

void em_profiler_stop(void) {
  pthread_mutex_lock(&prof_lock);
  atomic_store(&em__prof_on, false);
  const int64_t t = now_ns();
  for (int64_t i = 0; i < prof_n; i++)
    if (prof_ev[i].dur_ns < 0) prof_ev[i].dur_ns = t - prof_ev[i].start_ns;
  pthread_mutex_unlock(&prof_lock);
}

bool em_profiler_enabled(void) { return atomic_load_explicit(&em__prof_on, memory_order_relaxed); }

em_status em_profiler_push(const char *name) {
  prof_begin(name ? name : "(range)", EM_PROF_RANGE, NULL, true);
  return EM_OK;
}

void em_profiler_pop(void) {
  if (em__prof_is_on()) prof_pop();
}

void em__prof_backward_begin(const char *op) {
  char buf[160];
  prof_begin(op ? joined(buf, sizeof buf, op, " backward") : "backward", EM_PROF_BACKWARD, NULL,
             op != NULL);
}

void em__prof_backward_end(void) { prof_pop(); }

int64_t em_profiler_count(void) { return prof_n; }

const em_prof_event *em_profiler_event(int64_t i) {
  return i >= 0 && i < prof_n ? &prof_ev[i] : NULL;
}

int64_t em_profiler_dropped(void) { return prof_dropped; }
