/*
** cpu_backend.c -- the CPU backend's vtable, its memory and the plugin
** exports. The kernels live in the other cpu_*.c files, one per concept.
**
** Memory is plain host memory aligned to 64 bytes (a cache line, and
** enough for any vector unit). Freed blocks are cached: tiny ones per
** thread, large ones (64 KiB and up) in size classes, so that a training
** loop neither calls posix_memalign per op nor page-faults fresh mmap'd
** buffers every step. memory_stats reports bytes in use and cached.
*/
#include "cpu_internal.h"
#include "cpu_bf16_avx512.h"
#include "ember_plugin.h"

#include <sched.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* From OpenBLAS (declared here so any cblas.h will do). */
void openblas_set_num_threads(int num_threads);

#define CPU_ALIGN 64
#define CPU_MAX_ALLOC ((size_t)1 << 46) /* 64 TiB */

static size_t bytes_in_use; /* updated with __atomic builtins */

static int cpu_device_count(void) { return 1; }

static em_status check_device(const char *what, int device) {
  if (device != 0)
    return em_error(EM_ERR_DEVICE,
                    "cpu %s: device %d does not exist (the CPU backend has one device, 0)", what,
                    device);
  return EM_OK;
}

/* "model name" from /proc/cpuinfo when there is one. */
static em_status cpu_device_name(int device, char *buf, size_t n) {
  em_status s = check_device("device_name", device);
  if (s) return s;
  if (n == 0) return EM_OK;
  snprintf(buf, n, "cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return EM_OK;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    char *v = strchr(line, ':');
    if (!v) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    size_t len = strcspn(v, "\n");
    snprintf(buf, n, "%.*s", (int)len, v);
    break;
  }
  fclose(f);
  return EM_OK;
}

/* Large blocks: size classes base*{1, 1.25, 1.5, 1.75} for powers of two
** from 64 KiB (at most 25% slack), a free list per class, at most
** CPU_BIG_CACHE_MAX bytes cached; glibc would otherwise return each one
** to the kernel on free and fault it in again on the next step. */
#define CPU_BIG_MIN_SHIFT 16
#define CPU_BIG_CLASSES 64
#define CPU_BIG_CACHE_MAX ((size_t)1 << 30)
typedef struct big_block { struct big_block *next; } big_block;
static pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static big_block *big_free[CPU_BIG_CLASSES];
static size_t big_cached;

/* The class of n bytes and its size, or -1 when n is not cached. */
static int big_class(size_t n, size_t *bytes) {
  if (n < ((size_t)1 << CPU_BIG_MIN_SHIFT)) return -1;
  int k = 63 - __builtin_clzll((unsigned long long)n);
  size_t base = (size_t)1 << k, step = base / 4;
  size_t idx = (n - base + step - 1) / step;
  if (idx == 4) {
    k++;
    idx = 0;
    base <<= 1;
  }
  int cls = (k - CPU_BIG_MIN_SHIFT) * 4 + (int)idx;
  if (cls >= CPU_BIG_CLASSES) return -1;
  *bytes = base + idx * (base / 4);
  return cls;
}

static void *big_take(int cls, size_t bytes) {
  void *p = NULL;
  pthread_mutex_lock(&big_lock);
  if (big_free[cls]) {
    p = big_free[cls];
    big_free[cls] = big_free[cls]->next;
    big_cached -= bytes;
  }
  pthread_mutex_unlock(&big_lock);
  return p;
}

static bool big_give(void *p, int cls, size_t bytes) {
  bool kept = false;
  pthread_mutex_lock(&big_lock);
  if (big_cached + bytes <= CPU_BIG_CACHE_MAX) {
    big_block *b = p;
    b->next = big_free[cls];
    big_free[cls] = b;
    big_cached += bytes;
    kept = true;
  }
  pthread_mutex_unlock(&big_lock);
  return kept;
}

static void big_empty(void) {
  pthread_mutex_lock(&big_lock);
  for (int c = 0; c < CPU_BIG_CLASSES; c++)
    while (big_free[c]) {
      big_block *b = big_free[c];
      big_free[c] = b->next;
      free(b);
    }
  big_cached = 0;
  pthread_mutex_unlock(&big_lock);
}

/* Sizes are rounded up to whole cache lines: vector loops may then read
** whole lines at the tail, and a block's size class follows from it. */
static size_t align_up(size_t nbytes) { return (nbytes + CPU_ALIGN - 1) / CPU_ALIGN * CPU_ALIGN; }

/* Kernel scratch from the same cache of large blocks (64-byte aligned;
** not counted as tensor memory, and no injected faults). */
void *cpu_scratch_alloc(size_t nbytes) {
  size_t rounded = align_up(nbytes), big_bytes = 0;
  if (rounded == 0) rounded = CPU_ALIGN;
  const int bcls = big_class(rounded, &big_bytes);
  if (bcls >= 0) {
    void *p = big_take(bcls, big_bytes);
    if (p) return p;
    rounded = big_bytes;
  }
  void *p = NULL;
  return posix_memalign(&p, CPU_ALIGN, rounded) == 0 ? p : NULL;
}

void cpu_scratch_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t rounded = align_up(nbytes), big_bytes = 0;
  const int bcls = big_class(rounded, &big_bytes);
  if (bcls >= 0 && big_give(p, bcls, big_bytes)) return;
  free(p);
}

/* Tiny tensors (scalars, biases, a Lua loop's 16-element temporaries)
** come and go at a high rate; a per-thread cache of freed small blocks,
** one list per 64-byte size class, keeps posix_memalign off that path. */
#define CPU_SMALL_CLASSES 4 /* 64, 128, 192, 256 bytes */
#define CPU_SMALL_CACHE 128 /* blocks kept per class */
typedef struct small_block { struct small_block *next; } small_block;
static _Thread_local small_block *small_free[CPU_SMALL_CLASSES];
static _Thread_local int small_count[CPU_SMALL_CLASSES];

static int small_class(size_t rounded) {
  size_t c = rounded / CPU_ALIGN;
  return c >= 1 && c <= CPU_SMALL_CLASSES ? (int)c - 1 : -1;
}

bool cpu_fault_alloc_hit(void); /* cpu_fault.c: tests make the N-th allocation fail */

static em_status cpu_alloc(int device, size_t nbytes, void **ptr) {
  em_status s = check_device("alloc", device);
  if (s) return s;
  *ptr = NULL;
  if (nbytes == 0) return EM_OK;
  if (cpu_fault_alloc_hit())
    return em_error(EM_ERR_OOM, "cpu alloc: out of memory allocating %zu bytes (injected fault)", nbytes);
  /* Refuse absurd sizes (an overflowed computation upstream) outright,
  ** rather than asking the allocator for them. */
  if (nbytes > CPU_MAX_ALLOC)
    return em_error(EM_ERR_OOM, "cpu alloc: %zu bytes is more than any host can give (limit %zu)",
                    nbytes, (size_t)CPU_MAX_ALLOC);
  size_t rounded = align_up(nbytes);
  void *p = NULL;
  int cls = small_class(rounded);
  size_t big_bytes = 0;
  int bcls = cls < 0 ? big_class(rounded, &big_bytes) : -1;
  if (bcls >= 0) {
    rounded = big_bytes;
    p = big_take(bcls, big_bytes);
  }
  if (p) {
    /* reused a cached large block */
  } else if (cls >= 0 && small_free[cls]) {
    p = small_free[cls];
    small_free[cls] = small_free[cls]->next;
    small_count[cls]--;
  } else if (posix_memalign(&p, CPU_ALIGN, rounded) != 0 || !p) {
    return em_error(EM_ERR_OOM, "cpu alloc: out of memory allocating %zu bytes (%.1f MiB)",
                    nbytes, (double)nbytes / (1024.0 * 1024.0));
  }
  __atomic_add_fetch(&bytes_in_use, nbytes, __ATOMIC_RELAXED);
  *ptr = p;
  return EM_OK;
}

static void cpu_free(int device, void *ptr, size_t nbytes) {
  (void)device;
  if (!ptr) return;
  __atomic_sub_fetch(&bytes_in_use, nbytes, __ATOMIC_RELAXED);
  size_t rounded = align_up(nbytes), big_bytes = 0;
  int bcls = big_class(rounded, &big_bytes);
  if (bcls >= 0 && big_give(ptr, bcls, big_bytes)) return;
  int cls = small_class(rounded);
  if (cls >= 0 && small_count[cls] < CPU_SMALL_CACHE) {
    small_block *b = ptr;
    b->next = small_free[cls];
    small_free[cls] = b;
    small_count[cls]++;
    return;
  }
  free(ptr);
}

static em_status cpu_copy_bytes(const char *what, void *dst, const void *src, size_t nbytes) {
  if (nbytes && (!dst || !src))
    return em_error(EM_ERR_ARG, "cpu %s: NULL pointer for a copy of %zu bytes", what, nbytes);
  if (nbytes && dst != src) memmove(dst, src, nbytes);
  return EM_OK;
}

static em_status cpu_copy_h2d(int device, void *dst, const void *host_src, size_t nbytes) {
  em_status s = check_device("copy_h2d", device);
  return s ? s : cpu_copy_bytes("copy_h2d", dst, host_src, nbytes);
}

static em_status cpu_copy_d2h(int device, void *host_dst, const void *src, size_t nbytes) {
  em_status s = check_device("copy_d2h", device);
  return s ? s : cpu_copy_bytes("copy_d2h", host_dst, src, nbytes);
}

static em_status cpu_copy_d2d(int dst_device, void *dst, int src_device, const void *src,
                              size_t nbytes) {
  em_status s = check_device("copy_d2d", dst_device);
  if (!s) s = check_device("copy_d2d", src_device);
  return s ? s : cpu_copy_bytes("copy_d2d", dst, src, nbytes);
}

/* Kernels run synchronously on the calling thread (and its OpenMP team). */
static em_status cpu_synchronize(int device) { return check_device("synchronize", device); }

static em_status cpu_memory_stats(int device, size_t *in_use, size_t *cached) {
  em_status s = check_device("memory_stats", device);
  if (s) return s;
  if (in_use) *in_use = __atomic_load_n(&bytes_in_use, __ATOMIC_RELAXED);
  if (cached) {
    pthread_mutex_lock(&big_lock);
    *cached = big_cached;
    pthread_mutex_unlock(&big_lock);
  }
  return EM_OK;
}

static em_status cpu_empty_cache(int device) {
  em_status s = check_device("empty_cache", device);
  if (s == EM_OK) big_empty();
#ifdef __GLIBC__
  /* and the heap's free pages: oneDNN allocates a buffer per matmul call
  ** (about 200 KB for a 64 -> 192 Linear), which fragments glibc's heap; a
  ** small float32 training loop's RSS stayed 18 MB above its live tensors
  ** after 3000 steps, and this gave them back */
  if (s == EM_OK) malloc_trim(0);
#endif
  return s;
}

/* One thread pool: our OpenMP team, which also splits the products
** (cpu_gemm.c); OpenBLAS itself stays at one thread. */
static void cpu_set_num_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
}

static int cpu_get_num_threads(void) { return omp_get_max_threads(); }

/* The instruction set our own loops run here, by group: the loops marked
** CPU_VECTOR_CLONES_512 pick their AVX-512 build on a CPU with AVX-512F,
** those marked CPU_VECTOR_CLONES their AVX2 one, built for x86-64-v3
** (AVX2 with FMA; GCC's ifunc resolver picks each clone by cpuid, as
** __builtin_cpu_supports does). Keep the groups in step with those
** markers. */
static const char *cpu_own_isa(char *buf, size_t n) {
  const char *v256 = CPU_HAS_X86_64_V3() ? "avx2" : "x86-64";
  const char *v512 = __builtin_cpu_supports("avx512f") ? "avx512f" : v256;
  if (v512 == v256)
    snprintf(buf, n, "%s", v256);
  else
    snprintf(buf, n, "%s (softmax, layer norm, cross entropy, binary ops, sums, unary ops and their "
             "derivatives, attention rows, optimizers), %s (casts, dropout)",
             v512, v256);
  return buf;
}

/* How traced variants' programs ran (cpu_expr_jit.c) and how the thread
** team is used (cpu_team.c), put before the line's "; blas: " part (which
** stays last). */
static em_status append_programs(char *buf, size_t n) {
  char jit[600], team[160], blas[1024] = "";
  cpu_xjit_info(jit, sizeof jit);
  cpu_team_describe(team, sizeof team);
  const char *te = getenv("EMBER_CPU_TEAM"); /* cpu_team.c takes "always" only */
  if (te && *te && strcmp(te, "always") != 0) {
    size_t k = strlen(team);
    snprintf(team + k, sizeof team - k, ", EMBER_CPU_TEAM=%.16s is not always", te);
  }
  char *at = strstr(buf, "; blas: ");
  if (at) snprintf(blas, sizeof blas, "%s", at), *at = 0;
  size_t used = strlen(buf);
  if (used + 1 < n) snprintf(buf + used, n - used, "; traced programs: %s; team: %s%s", jit, team, blas);
  return EM_OK;
}

/* The fused attention's few-row path (cpu_attention.c, cpu_tile_rows.c),
** after its tiles' path in the "attention: " part: ", rows path up to N
** query rows" or ", no rows path", and the variable when it chose so. */
EM_PLUGIN_EXPORT int64_t ember_cpu_attention_rows(int64_t max_rows);
bool cpu_attention_rows_env(int64_t *rows); /* cpu_attention.c */
static const char *attention_rows(char *buf, size_t n) {
  const long long rows = (long long)ember_cpu_attention_rows(-1);
  const char *e = getenv("EMBER_CPU_ATTENTION_ROWS");
  int k = rows > 0 ? snprintf(buf, n, ", rows path up to %lld query rows", rows) : snprintf(buf, n, ", no rows path");
  if (e && *e && k > 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, " (EMBER_CPU_ATTENTION_ROWS=%.16s%s)", e,
             cpu_attention_rows_env(NULL) ? "" : " is not a number of rows >= 0");
  return buf;
}

/* What multiplies dtype dt (and what our own loops run); the lines with
** OpenBLAS products end with "; blas: " and cpu_blas_info. */
static em_status cpu_kernel_info(int device, em_dtype dt, char *buf, size_t n) {
  em_status s = check_device("kernel_info", device);
  if (s) return s;
  char own[256];
  cpu_own_isa(own, sizeof own);
  char impl[96] = "", blas[512], conv[192], round[160], rows[96];
  attention_rows(rows, sizeof rows);
  cpu_blas_info(blas, sizeof blas);
  cpu_bf16_path(round, sizeof round);
  cpu_conv_describe(conv, sizeof conv);
  /* products with one row or one column (cpu_gemm.c's gemv_batch) */
  const char *v512 = __builtin_cpu_supports("avx512f") ? "avx512f"
                     : __builtin_cpu_supports("avx2") ? "avx2" : "x86-64";
  switch (dt) {
    case EM_BF16:
    case EM_F32:
      if ((s = cpu_dnnl_impl(dt, impl, sizeof impl))) return s;
      if (dt == EM_BF16 && strncmp(impl, "none", 4) == 0)
        snprintf(buf, n, "gemm: widened to float32 (oneDNN has no bfloat16 kernel for this "
                 "CPU); gemv: ember's bfloat16 rows, %s; attention: %s%s; conv: %s; kernels: %s, computing in "
                 "float32; rounding to bfloat16: %s; blas: %s", v512, cpu_bgemm_path(), rows, conv, own, round, blas);
      else if (dt == EM_BF16)
        snprintf(buf, n, "gemm: onednn %s; gemv: ember's bfloat16 rows, %s; attention: %s%s; conv: %s; "
                 "kernels: %s, computing in float32; rounding to bfloat16: %s", impl, v512, cpu_bgemm_path(), rows,
                 conv, own, round);
      else {
        char gemm[320];
        snprintf(buf, n, "%s; attention: %s%s; conv: %s; kernels: %s; blas: %s",
                 cpu_gemm_f32_parts(impl, gemm, sizeof gemm), cpu_tile_gemm_path(), rows, conv, own, blas);
      }
      return append_programs(buf, n);
    case EM_F64:
      snprintf(buf, n, "gemm: openblas; gemv: openblas dgemv; kernels: %s; blas: %s", own, blas);
      return append_programs(buf, n);
    default: snprintf(buf, n, "kernels: %s; no products", own); return EM_OK;
  }
}

static const em_backend cpu_backend = {
  .abi_version = EM_BACKEND_ABI_VERSION,
  .struct_size = sizeof(em_backend),
  .name = "cpu",
  .host_memory = true,
  .device_count = cpu_device_count,
  .device_name = cpu_device_name,
  .alloc = cpu_alloc,
  .free = cpu_free,
  .copy_h2d = cpu_copy_h2d,
  .copy_d2h = cpu_copy_d2h,
  .copy_d2d = cpu_copy_d2d,
  .synchronize = cpu_synchronize,
  .memory_stats = cpu_memory_stats,
  .empty_cache = cpu_empty_cache,
  .set_num_threads = cpu_set_num_threads,
  .get_num_threads = cpu_get_num_threads,
  .copy = cpu_copy,
  .fill = cpu_fill,
  .unary = cpu_unary,
  .unary_backward = cpu_unary_backward,
  .gated = cpu_gated,
  .gated_backward = cpu_gated_backward,
  .gemm_route = cpu_gemm_route,
  .binary = cpu_binary,
  .where = cpu_where,
  .reduce = cpu_reduce,
  .gemm = cpu_gemm,
  .softmax = cpu_softmax,
  .softmax_backward = cpu_softmax_backward,
  .layer_norm = cpu_layer_norm,
  .layer_norm_backward = cpu_layer_norm_backward,
  .index_select = cpu_index_select,
  .index_add = cpu_index_add,
  .gather = cpu_gather,
  .scatter_add = cpu_scatter_add,
  .cross_entropy = cpu_cross_entropy,
  .cross_entropy_backward = cpu_cross_entropy_backward,
  .random = cpu_random,
  .dropout = cpu_dropout,
  .adam_step = cpu_adam_step,
  .sgd_step = cpu_sgd_step,
  .attention_forward = cpu_attention_forward,
  .attention_backward = cpu_attention_backward,
  .kernel_info = cpu_kernel_info,
  .conv2d = cpu_conv2d,
  .conv2d_backward = cpu_conv2d_backward,
  .attention_grouped_kv = true,
  .rms_norm = cpu_rms_norm,
  .rms_norm_backward = cpu_rms_norm_backward,
  .rope = cpu_rope,
  .gemm_bias = cpu_gemm_bias,
  .sum_squares = cpu_sum_squares,
  .attention_strided_heads = true,
  .binary_mixed_bf16 = true,
  .binary_fmod = true,
  .conv2d_keep_bytes = cpu_conv2d_keep_bytes,
  .conv2d_keep = cpu_conv2d_keep,
  .conv2d_backward_kept = cpu_conv2d_backward_kept,
  .linalg = cpu_linalg,
};

/* ---- plugin exports (see ember_plugin.h) ---- */

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_BACKEND_ABI_VERSION, EM_PLUGIN_BACKEND, "cpu", "0.1.0",
  "host CPU backend: OpenMP kernels, OpenBLAS gemm, flash-style attention",
};

/* The cgroup's CPU quota in whole CPUs (rounded up), 0 when unlimited or
** unknown: cgroup v2's cpu.max ("max 100000" or "200000 100000"), else v1's
** cfs_quota_us / cfs_period_us. A container given 2 CPUs of a 64-core host
** sees 64 in its affinity mask; 64 threads there would time-slice. */
static int cgroup_cpus(void) {
  long long quota = -1, period = 0;
  FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
  if (f) {
    char q[32];
    if (fscanf(f, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0) quota = atoll(q);
    fclose(f);
  } else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r"))) {
    if (fscanf(f, "%lld", &quota) != 1) quota = -1;
    fclose(f);
    if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r"))) {
      if (fscanf(f, "%lld", &period) != 1) period = 0;
      fclose(f);
    }
  }
  if (quota <= 0 || period <= 0) return 0;
  return (int)((quota + period - 1) / period);
}

/* The default team size when OMP_NUM_THREADS is not set: the CPUs this
** process may run on (its affinity mask, which libgomp also counts),
** capped by the cgroup's quota, which libgomp ignores. */
static int default_threads(void) {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) n = omp_get_num_procs();
  int quota = cgroup_cpus();
  if (quota > 0 && quota < n) n = quota;
  return n < 1 ? 1 : n;
}

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err;
  (void)errlen;
  const char *env = getenv("OMP_NUM_THREADS");
  if (!env || !*env) omp_set_num_threads(default_threads());
  cpu_blas_configure(); /* before any product: may have OpenBLAS choose its core again */
  openblas_set_num_threads(1); /* see cpu_set_num_threads */
  return &cpu_backend;
}
