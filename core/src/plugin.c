/*
** plugin.c -- the plugin loader shared by compute backends and attention
** variants, and the registry of loaded backends.
**
** A plugin's ABI version is read from a data symbol before any of its
** code runs; a file that fails at any step is recorded with the reason
** and skipped, never fatal. See ember_plugin.h for the search order.
*/
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember_attention.h"

#define EM__MAX_BACKENDS 16

/* One allocation a record, never moved: em_plugin_get/find/load hand out
** pointers to records that callers hold while later plugins (a Lua
** variant, a rescan) grow the list. */
static em_plugin_record **em__records;
static int em__nrecords, em__caprecords;
static const em_backend *em__backends[EM__MAX_BACKENDS];
static int em__nbackends;
static pthread_once_t em__once = PTHREAD_ONCE_INIT;

static const char *em__kind_name(int kind) {
  return kind == EM_PLUGIN_BACKEND ? "backend" : kind == EM_PLUGIN_ATTENTION ? "attention" : "unknown";
}

static em_plugin_record *em__new_record(const char *path) {
  if (em__nrecords == em__caprecords) {
    int cap = em__caprecords ? 2 * em__caprecords : 16;
    em_plugin_record **r = realloc(em__records, (size_t)cap * sizeof *r);
    if (!r) return NULL;
    em__records = r;
    em__caprecords = cap;
  }
  em_plugin_record *rec = calloc(1, sizeof *rec);
  if (!rec) return NULL;
  em__records[em__nrecords++] = rec;
  snprintf(rec->path, sizeof rec->path, "%s", path);
  const char *base = strrchr(path, '/');
  snprintf(rec->name, sizeof rec->name, "%s", base ? base + 1 : path);
  return rec;
}

/* A file that has just loaded (rec) supersedes what was said of it before:
** the rows that rejected the same path (a variant file that failed, then
** was fixed and loaded; one shadowed, then loaded by its path) are dropped,
** so ember.plugins() does not list the file as loaded and rejected. */
static void em__forget_rejections(const em_plugin_record *rec) {
  int k = 0;
  for (int i = 0; i < em__nrecords; i++) {
    em_plugin_record *r = em__records[i];
    if (r != rec && !r->loaded && strcmp(r->path, rec->path) == 0) free(r);
    else em__records[k++] = r;
  }
  em__nrecords = k;
}

static bool em__reject(em_plugin_record *rec, void *handle, const char *fmt, ...) EM_PRINTF(3, 4);

static bool em__reject(em_plugin_record *rec, void *handle, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rec->reason, sizeof rec->reason, fmt, ap);
  va_end(ap);
  if (handle) dlclose(handle);
  return false;
}

/* Checks a backend's vtable: same ABI, and every required kernel set. */
static bool em__check_backend(em_plugin_record *rec, const em_backend *be) {
  if (be->abi_version != EM_BACKEND_ABI_VERSION)
    return snprintf(rec->reason, sizeof rec->reason,
                    "vtable ABI version %u, this ember expects %u", be->abi_version,
                    EM_BACKEND_ABI_VERSION), false;
  if (be->struct_size < sizeof(em_backend))
    return snprintf(rec->reason, sizeof rec->reason, "vtable is %u bytes, expected %zu",
                    be->struct_size, sizeof(em_backend)), false;
#define REQ(f) if (!be->f) return snprintf(rec->reason, sizeof rec->reason, "required field '" #f "' is NULL"), false
  REQ(name); REQ(device_count); REQ(alloc); REQ(free); REQ(copy_h2d); REQ(copy_d2h);
  REQ(copy_d2d); REQ(synchronize); REQ(copy); REQ(fill); REQ(unary); REQ(unary_backward);
  REQ(binary); REQ(where); REQ(reduce); REQ(gemm); REQ(softmax); REQ(softmax_backward);
  REQ(layer_norm); REQ(layer_norm_backward); REQ(index_select); REQ(index_add); REQ(gather);
  REQ(scatter_add); REQ(cross_entropy); REQ(cross_entropy_backward); REQ(random); REQ(dropout);
#undef REQ
  if (em__nbackends == EM__MAX_BACKENDS)
    return snprintf(rec->reason, sizeof rec->reason, "too many backends (max %d)", EM__MAX_BACKENDS), false;
  return true;
}

/* What em_attention_variant_check leaves to the loader: the vtable names
** the variant the plugin info announced, its caps are known bits, and its
** option table makes sense (names distinct, bounds ordered, each default
** accepted by the same check a user's value gets, em_attn_options_new, and
** by the variant's own `check`). A plugin that fails is rejected at load,
** naming what is wrong, rather than misbehaving at its first call. */
static bool em__check_attention(em_plugin_record *rec, const em_attention_variant *v) {
  char *r = rec->reason;
  size_t n = sizeof rec->reason;
  if (strcmp(v->name, rec->name) != 0)
    return snprintf(r, n, "the vtable's name '%.80s' differs from the plugin info's name '%s' (ember_plugin_info "
                    "and the em_attention_variant must name the same variant)", v->name, rec->name), false;
  if (v->caps & ~(uint32_t)EM_ATTN_CAP_ALL)
    return snprintf(r, n, "variant '%s' declares unknown capability bits 0x%x (known: EM_ATTN_CAP_* = 0x%x)",
                    v->name, v->caps & ~(uint32_t)EM_ATTN_CAP_ALL, (unsigned)EM_ATTN_CAP_ALL), false;
  const char *names[EM_ATTN_MAX_OPTIONS];
  em_attn_value values[EM_ATTN_MAX_OPTIONS];
  for (int i = 0; i < v->n_options; i++) {
    const em_attn_option_spec *o = &v->options[i];
    for (int j = 0; j < i; j++)
      if (strcmp(v->options[j].name, o->name) == 0)
        return snprintf(r, n, "variant '%s' declares option '%.80s' twice", v->name, o->name), false;
    if (o->bounded && !(o->min <= o->max))
      return snprintf(r, n, "variant '%s': option '%.80s' has min %g > max %g", v->name, o->name, o->min,
                      o->max), false;
    names[i] = o->name;
    values[i] = (em_attn_value){.type = o->type, .num = o->default_num,
                                .str = o->default_str ? o->default_str : ""};
  }
  em_attn_options *opts = NULL;
  if (em_attn_options_new(&opts, v, v->n_options, names, values, NULL) != EM_OK)
    return snprintf(r, n, "variant '%s' refuses its own option defaults: %s", v->name, em_error_message()), false;
  em_attn_options_free(opts);
  return true;
}

/* em__elf_check on the file at path (mapped read-only, never executed). */
static bool em__elf_check_file(const char *path, char *reason, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return snprintf(reason, n, "cannot open: %s", strerror(errno)), false;
  struct stat st;
  bool ok = false;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(reason, n, "not a regular file");
  } else if (st.st_size == 0) {
    snprintf(reason, n, "empty file (truncated?)");
  } else {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      snprintf(reason, n, "cannot map the file: %s", strerror(errno));
    } else {
      ok = em__elf_check(p, (size_t)st.st_size, reason, n);
      munmap(p, (size_t)st.st_size);
    }
  }
  close(fd);
  return ok;
}

/* Loads one file into a new record. Returns whether it loaded. */
static bool em__load_file(const char *path, em_plugin_record **out) {
  em_plugin_record *rec = em__new_record(path);
  if (out) *out = rec;
  if (!rec) return false;
  /* A truncated file would crash inside dlopen: check its bytes first. */
  if (!em__elf_check_file(path, rec->reason, sizeof rec->reason)) return false;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return em__reject(rec, NULL, "dlopen failed: %s", dlerror());
  const em_plugin_info *info = dlsym(h, EM_PLUGIN_INFO_SYMBOL);
  if (!info)
    return em__reject(rec, h, "missing symbol '%s' (not an ember plugin?)", EM_PLUGIN_INFO_SYMBOL);
  if (info->kind == EM_PLUGIN_BACKEND || info->kind == EM_PLUGIN_ATTENTION) rec->kind = (int)info->kind;
  char why[sizeof rec->reason];
  if (!em__plugin_info_check(info, why, sizeof why)) return em__reject(rec, h, "%s", why);
  snprintf(rec->name, sizeof rec->name, "%s", info->name);
  snprintf(rec->version, sizeof rec->version, "%s", info->version ? info->version : "");
  snprintf(rec->description, sizeof rec->description, "%s", info->description ? info->description : "");
  const em_plugin_record *prev = em_plugin_find(rec->kind, rec->name);
  if (prev) return em__reject(rec, h, "shadowed by %s", prev->path);
  em_plugin_init_fn init = (em_plugin_init_fn)(uintptr_t)dlsym(h, EM_PLUGIN_INIT_SYMBOL);
  if (!init) return em__reject(rec, h, "missing symbol '%s'", EM_PLUGIN_INIT_SYMBOL);
  char err[400] = "";
  const void *vt = init(err, sizeof err);
  if (!vt) return em__reject(rec, h, "init failed: %s", err[0] ? err : "(no reason given)");
  if (rec->kind == EM_PLUGIN_BACKEND) {
    if (!em__check_backend(rec, vt)) {
      em_plugin_fini_fn fini = (em_plugin_fini_fn)(uintptr_t)dlsym(h, EM_PLUGIN_FINI_SYMBOL);
      if (fini) fini();
      dlclose(h);
      return false;
    }
    em__backends[em__nbackends++] = vt;
  } else if (!em_attention_variant_check(vt, rec->reason, sizeof rec->reason) || !em__check_attention(rec, vt)) {
    em_plugin_fini_fn fini = (em_plugin_fini_fn)(uintptr_t)dlsym(h, EM_PLUGIN_FINI_SYMBOL);
    if (fini) fini();
    dlclose(h);
    return false;
  }
  rec->vtable = vt;
  rec->loaded = true;
  em__forget_rejections(rec); /* a rebuilt file given to em_plugin_load */
  /* The handle stays open for the life of the process. */
  return true;
}

static bool em__seen(const char *path) {
  for (int i = 0; i < em__nrecords; i++)
    if (strcmp(em__records[i]->path, path) == 0) return true;
  return false;
}

static int em__cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

em_status em_plugin_list_dir(const char *dir, const char *suffix,
                             void (*fn)(const char *name, void *ud), void *ud) {
  DIR *d = opendir(dir);
  if (!d) return em_error(EM_ERR_IO, "list_dir: cannot open folder '%s': %s", dir, strerror(errno));
  size_t ns = strlen(suffix), n = 0, cap = 0;
  char **names = NULL;
  em_status s = EM_OK;
  struct dirent *e;
  while (s == EM_OK && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    /* hidden files (and "." and "..") are not listed, as ls does not */
    if (e->d_name[0] == '.' || len <= ns || strcmp(e->d_name + len - ns, suffix) != 0) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **grown = realloc(names, cap * sizeof *names);
      if (!grown) { s = em_error(EM_ERR_OOM, "list_dir: out of memory"); break; }
      names = grown;
    }
    if (!(names[n] = strdup(e->d_name))) s = em_error(EM_ERR_OOM, "list_dir: out of memory");
    else n++;
  }
  closedir(d);
  if (s == EM_OK && n > 1) qsort(names, n, sizeof names[0], em__cmp_str); /* names is NULL when n == 0 */
  for (size_t i = 0; i < n; i++) {
    if (s == EM_OK) fn(names[i], ud);
    free(names[i]);
  }
  free(names);
  return s;
}

static void em__load_named(const char *name, void *dir) {
  char path[1024];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", (const char *)dir, name) < sizeof path && !em__seen(path))
    em__load_file(path, NULL);
}

/* Loads every *.so in dir not seen before, in name order; a folder that
** cannot be read holds no plugins. */
static void em__scan_dir(const char *dir) {
  (void)em_plugin_list_dir(dir, ".so", em__load_named, (void *)dir);
}

/* Is this libember the one in the build tree's lib folder? */
static bool em__running_from_build_tree(void) {
  Dl_info info;
  if (!dladdr((void *)(uintptr_t)em_plugin_count, &info) || !info.dli_fname) return false;
  size_t n = strlen(EMBER_LIB_BUILD_DIR);
  return strncmp(info.dli_fname, EMBER_LIB_BUILD_DIR, n) == 0 && info.dli_fname[n] == '/';
}

/* The installed plugins' folder: found from where libember itself lies
** (EMBER_PLUGIN_INSTALL_REL from its folder), so that an install made with
** `cmake --install --prefix P`, or moved, finds its own plugins; the
** configured EMBER_PLUGIN_INSTALL_DIR only when dladdr cannot say. */
static void em__install_dir(char *buf, size_t n) {
  Dl_info info;
  const char *slash = NULL;
  if (dladdr((void *)(uintptr_t)em_plugin_count, &info) && info.dli_fname)
    slash = strrchr(info.dli_fname, '/');
  if (slash)
    snprintf(buf, n, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, EMBER_PLUGIN_INSTALL_REL);
  else
    snprintf(buf, n, "%s", EMBER_PLUGIN_INSTALL_DIR);
}

/* Calls fn on each search folder, in order, once each: a folder is named
** by its real path, so `EMBER_PLUGIN_PATH=build/plugins` and the build
** folder itself (or a folder given twice, or through a symlink) are one
** folder, and its plugins are not listed again as shadowed by themselves. A
** folder that does not resolve (it does not exist) keeps the name given. */
struct em__dirs { char (*seen)[PATH_MAX]; int n, cap; void (*fn)(const char *, void *); void *ud; };

static void em__one_dir(struct em__dirs *ds, const char *dir) {
  char real[PATH_MAX];
  const char *d = realpath(dir, real) ? real : dir;
  for (int i = 0; i < ds->n; i++)
    if (strcmp(ds->seen[i], d) == 0) return;
  if (ds->n < ds->cap) snprintf(ds->seen[ds->n++], PATH_MAX, "%s", d);
  ds->fn(d, ds->ud);
}

static void em__each_dir(void (*fn)(const char *dir, void *ud), void *ud) {
  /* the folders seen so far (PATH_MAX each: off the stack); without
  ** memory, no de-duplication */
  struct em__dirs dirs = {malloc(32 * sizeof *dirs.seen), 0, 32, fn, ud}, *ds = &dirs;
  if (!ds->seen) ds->cap = 0;
  const char *env = getenv("EMBER_PLUGIN_PATH");
  if (env) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", env);
    char *save = NULL;
    for (char *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save))
      if (*p) em__one_dir(ds, p);
  }
  const char *only = getenv("EMBER_PLUGIN_PATH_ONLY");
  if (!(only && strcmp(only, "1") == 0)) {
    /* A libember running from its build tree skips the install folder, so
    ** an older installed ember can never shadow the plugins built with it;
    ** an installed one reads only its own folder. */
    if (em__running_from_build_tree()) {
      em__one_dir(ds, EMBER_PLUGIN_BUILD_DIR);
    } else { /* nor the build tree an installed one came from */
      char dir[PATH_MAX];
      em__install_dir(dir, sizeof dir);
      em__one_dir(ds, dir);
    }
  }
  free(ds->seen);
}

static void em__scan_cb(const char *dir, void *ud) {
  (void)ud;
  em__scan_dir(dir);
}

/* libgomp (the CPU backend's OpenMP, which oneDNN and our gemm split
** share) keeps idle workers spinning for GOMP_SPINCOUNT iterations after a
** parallel region (300000 by default, about a millisecond) before they
** sleep. Beside another busy process those spins take the core it needs,
** and a training step ran 2-4x slower; sleeping at once (passive) makes
** every small kernel pay a wake-up. A short bounded spin keeps
** back-to-back kernels on awake workers and yields within microseconds
** (scripts/bench/contention.lua). 3000, not 1000: a Lua call between two
** kernels outlasted 1000 spins, and a 1 x 256 x 256 bf16 oneDNN matmul
** then paid a 55 us wake-up (6 us at 3000). libgomp reads its environment once, when
** a plugin pulls it in, so this happens before any is loaded, and never
** overrides the user's OMP_WAIT_POLICY or GOMP_SPINCOUNT. */
static void em__load_all(void) {
  if (!getenv("OMP_WAIT_POLICY")) setenv("GOMP_SPINCOUNT", "3000", 0);
  em__each_dir(em__scan_cb, NULL);
}

void em__plugins_ensure_loaded(void) { pthread_once(&em__once, em__load_all); }

void em_plugin_rescan(void) {
  em__plugins_ensure_loaded();
  em__load_all();
}

em_status em_plugin_load(const char *path, const em_plugin_record **out) {
  em__plugins_ensure_loaded();
  em_plugin_record *rec = NULL;
  if (out) *out = NULL;
  for (int i = 0; i < em__nrecords; i++)
    if (strcmp(em__records[i]->path, path) == 0 && em__records[i]->loaded) {
      if (out) *out = em__records[i];
      return EM_OK;
    }
  bool ok = em__load_file(path, &rec);
  if (out) *out = rec;
  if (!rec) return em_error(EM_ERR_OOM, "load_plugin: out of memory");
  if (!ok) return em_error(EM_ERR_PLUGIN, "load_plugin: %s: %s", path, rec->reason);
  return EM_OK;
}

em_status em_plugin_register(int kind, const char *path, const char *name, const char *version,
                             const char *description, const void *vtable, const char *reason) {
  em__plugins_ensure_loaded();
  em_plugin_record *rec = NULL;
  for (int i = 0; i < em__nrecords && !reason; i++)
    if (em__records[i]->kind == kind && em__records[i]->loaded && strcmp(em__records[i]->name, name) == 0) {
      if (em__records[i]->path[0] != '(' && strstr(em__records[i]->path, ".so"))
        return em_error(EM_ERR_PLUGIN, "%s %s plugin named '%s' is already loaded from %s",
                        kind == EM_PLUGIN_ATTENTION ? "an" : "a", em__kind_name(kind), name, em__records[i]->path);
      rec = em__records[i];
    }
  for (int i = 0; i < em__nrecords && reason && !rec; i++)
    if (!em__records[i]->loaded && strcmp(em__records[i]->path, path) == 0) rec = em__records[i];
  if (!rec && !(rec = em__new_record(path))) return em_error(EM_ERR_OOM, "plugin: out of memory");
  snprintf(rec->path, sizeof rec->path, "%s", path);
  snprintf(rec->name, sizeof rec->name, "%s", name);
  rec->kind = kind;
  rec->loaded = reason == NULL;
  snprintf(rec->reason, sizeof rec->reason, "%s", reason ? reason : "");
  snprintf(rec->version, sizeof rec->version, "%s", version ? version : "");
  snprintf(rec->description, sizeof rec->description, "%s", description ? description : "");
  rec->vtable = reason ? NULL : vtable;
  if (!reason) em__forget_rejections(rec);
  return EM_OK;
}

int em_plugin_count(void) {
  em__plugins_ensure_loaded();
  return em__nrecords;
}

const em_plugin_record *em_plugin_get(int i) {
  em__plugins_ensure_loaded();
  return i >= 0 && i < em__nrecords ? em__records[i] : NULL;
}

const em_plugin_record *em_plugin_find(int kind, const char *name) {
  for (int i = 0; i < em__nrecords; i++)
    if (em__records[i]->loaded && em__records[i]->kind == kind && strcmp(em__records[i]->name, name) == 0)
      return em__records[i];
  return NULL;
}

struct em__pathbuf { char *buf; size_t n, k; };

static void em__path_cb(const char *dir, void *ud) {
  struct em__pathbuf *p = ud;
  if (p->k < p->n) p->k += (size_t)snprintf(p->buf + p->k, p->n - p->k, "%s%s", p->k ? ":" : "", dir);
}

const char *em_plugin_search_path(char *buf, size_t n) {
  struct em__pathbuf p = {buf, n, 0};
  if (n) buf[0] = '\0';
  em__each_dir(em__path_cb, &p);
  return buf;
}

/* A search folder that cannot be read (a typo in EMBER_PLUGIN_PATH, a
** folder not made yet, no permission): said in the report of a miss. */
static void em__unreadable_cb(const char *dir, void *ud) {
  struct em__pathbuf *p = ud;
  DIR *d = opendir(dir);
  if (d) {
    closedir(d);
    return;
  }
  int e = errno;
  if (p->k < p->n)
    p->k += (size_t)snprintf(p->buf + p->k, p->n - p->k, "; folder %s: %s", dir,
                             e == ENOTDIR ? "a file, not a folder (EMBER_PLUGIN_PATH lists folders; "
                                            "ember.load_plugin(path) loads one file)" : strerror(e));
}

/* Does record r concern the plugin `name`: named so, or its file is
** ember_attn_<name>.so / <name>.lua (a file rejected before its name was read)? */
static bool em__about(const em_plugin_record *r, const char *name) {
  if (strcmp(r->name, name) == 0) return true;
  const char *base = strrchr(r->path, '/');
  base = base ? base + 1 : r->path;
  char want[160];
  snprintf(want, sizeof want, "ember_attn_%s.so", name);
  if (strcmp(base, want) == 0) return true;
  snprintf(want, sizeof want, "%s.lua", name);
  return strcmp(base, want) == 0;
}

const char *em_plugin_report(int kind, const char *name, char *buf, size_t n) {
  char path[2048];
  size_t k = (size_t)snprintf(buf, n, "searched %s", em_plugin_search_path(path, sizeof path));
  if (k < n) {
    struct em__pathbuf p = {buf, n, k};
    em__each_dir(em__unreadable_cb, &p);
    k = p.k;
  }
  /* the folders are read once, at the first use of a plugin */
  if (kind == EM_PLUGIN_ATTENTION && k < n)
    k += (size_t)snprintf(buf + k, n - k, "; files dropped in since are loaded by ember.rescan_plugins()");
  int shown = 0;
  /* the candidates of this name first, then the other rejected files; a
  ** file shadowed by another of its own name is no news for another name */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < em__nrecords && k < n; i++) {
      const em_plugin_record *r = em__records[i];
      if (r->loaded || (r->kind && r->kind != kind) || em__about(r, name) != (pass == 0)) continue;
      if (pass == 1 && strncmp(r->reason, "shadowed by ", 12) == 0) continue;
      k += (size_t)snprintf(buf + k, n - k, "%s %s: %s", shown++ ? ";" : "; rejected:", r->path, r->reason);
    }
  if (!shown && k < n) snprintf(buf + k, n - k, "; no candidate %s plugin named '%s' was found", em__kind_name(kind), name);
  return buf;
}

/* ------------------------------------------------------------------ */
/* Backends                                                            */
/* ------------------------------------------------------------------ */

int em_backend_count(void) {
  em__plugins_ensure_loaded();
  return em__nbackends;
}

const em_backend *em_backend_get(int slot) {
  return slot >= 0 && slot < em__nbackends ? em__backends[slot] : NULL;
}

em_status em_backend_find(const char *name, int *slot) {
  em__plugins_ensure_loaded();
  for (int i = 0; i < em__nbackends; i++)
    if (strcmp(em__backends[i]->name, name) == 0) {
      *slot = i;
      return EM_OK;
    }
  char report[1500];
  return em_error(EM_ERR_DEVICE, "no '%s' backend is loaded (%s)", name,
                  em_plugin_report(EM_PLUGIN_BACKEND, name, report, sizeof report));
}
