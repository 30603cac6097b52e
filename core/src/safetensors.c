/*
** safetensors.c -- save and load tensors in the safetensors format (see
** ember_safetensors.h for the layout). The JSON header is written and
** parsed with cJSON; everything read from a file is validated before use,
** because a checkpoint is untrusted input: a corrupt or truncated file must
** give an error, never a crash or a huge allocation.
*/
#include "ember_safetensors.h"
#include "ember_bf16.h"
#include "internal.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is refused (the reference implementation uses
** the same bound): no allocation of gigabytes on a corrupt length. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* Integers in JSON are doubles: exact up to 2^53. */
#define ST_MAX_INT 9007199254740992.0

static const struct {
  const char *name;
  em_dtype dtype;
} st_dtypes[] = {
  {"F32", EM_F32}, {"F64", EM_F64}, {"I64", EM_I64}, {"BOOL", EM_BOOL}, {"BF16", EM_BF16},
};
#define ST_NDTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

/* Dtypes ember has no tensor type for, read into a wider one on load
** (never written): float16 -- the dtype of most half-precision PyTorch and
** Hugging Face checkpoints -- as float32 (exact: every float16 value is a
** float32 value), int32, int16, int8, uint8, uint16 and uint32 as int64
** (exact), so that one such buffer (a uint8 mask, say) does not keep a
** whole PyTorch file from loading. */
enum { ST_SAME = 0, ST_F16, ST_I32, ST_I16, ST_I8, ST_U8, ST_U16, ST_U32 };
static const struct {
  const char *name;
  em_dtype dtype;
  int widen;
  size_t file_elsize;
} st_widened[] = {
  {"F16", EM_F32, ST_F16, 2}, {"I32", EM_I64, ST_I32, 4}, {"I16", EM_I64, ST_I16, 2},
  {"I8", EM_I64, ST_I8, 1},   {"U8", EM_I64, ST_U8, 1},   {"U16", EM_I64, ST_U16, 2},
  {"U32", EM_I64, ST_U32, 4},
};
#define ST_NWIDENED (sizeof st_widened / sizeof st_widened[0])

static const char *st_dtype_name(em_dtype dt) {
  for (size_t i = 0; i < ST_NDTYPES; i++)
    if (st_dtypes[i].dtype == dt) return st_dtypes[i].name;
  return NULL;
}

static int st_dtype_parse(const char *s, em_dtype *out) {
  for (size_t i = 0; i < ST_NDTYPES; i++)
    if (strcmp(st_dtypes[i].name, s) == 0) return *out = st_dtypes[i].dtype, 1;
  return 0;
}

static int host_is_big_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 0;
}

/* Swaps each `elsize`-byte element of buf in place (file data is
** little-endian; this only runs on big-endian hosts). */
static void swap_elements(void *buf, size_t nbytes, size_t elsize) {
  uint8_t *p = buf;
  if (elsize < 2) return;
  for (size_t off = 0; off + elsize <= nbytes; off += elsize)
    for (size_t i = 0; i < elsize / 2; i++) {
      uint8_t t = p[off + i];
      p[off + i] = p[off + elsize - 1 - i];
      p[off + elsize - 1 - i] = t;
    }
}

/* ---------------------------------------------------------------- */
/* Saving                                                            */
/* ---------------------------------------------------------------- */

/* Builds the header JSON (metadata first, then tensors in order). */
static em_status build_header(const char *path, int n, const em_named_tensor *ts, int n_meta,
                              const char *const *meta, char **out) {
  cJSON *root = cJSON_CreateObject();
  uint64_t offset = 0;
  if (!root) goto oom;
  if (n_meta > 0) {
    cJSON *m = cJSON_CreateObject();
    if (!m || !cJSON_AddItemToObject(root, "__metadata__", m)) {
      cJSON_Delete(m);
      goto oom;
    }
    for (int i = 0; i < n_meta; i++) {
      if (!meta[2 * i] || !meta[2 * i + 1]) {
        cJSON_Delete(root);
        return em_error(EM_ERR_ARG, "safetensors_save: '%s': metadata entry %d has a NULL key or value",
                        path, i + 1);
      }
      if (!cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1])) goto oom;
    }
  }
  for (int i = 0; i < n; i++) {
    const em_tensor *t = ts[i].tensor;
    size_t nbytes = (size_t)em_numel(t) * em_dtype_size(t->dtype);
    cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
    if (!e || !shape || !offs || !cJSON_AddItemToObject(root, ts[i].name, e)) {
      cJSON_Delete(e);
      cJSON_Delete(shape);
      cJSON_Delete(offs);
      goto oom;
    }
    /* From here e owns shape and offs once added. */
    if (!cJSON_AddItemToObject(e, "shape", shape)) {
      cJSON_Delete(shape);
      cJSON_Delete(offs);
      goto oom;
    }
    if (!cJSON_AddItemToObject(e, "data_offsets", offs)) {
      cJSON_Delete(offs);
      goto oom;
    }
    if (!cJSON_AddStringToObject(e, "dtype", st_dtype_name(t->dtype))) goto oom;
    for (int d = 0; d < t->ndim; d++)
      if (!cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]))) goto oom;
    if (!cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset)) ||
        !cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + nbytes))))
      goto oom;
    offset += nbytes;
  }
  *out = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!*out) return em_error(EM_ERR_OOM, "safetensors_save: '%s': out of memory printing the header", path);
  return EM_OK;
oom:
  cJSON_Delete(root);
  return em_error(EM_ERR_OOM, "safetensors_save: '%s': out of memory building the header", path);
}

static em_status check_save_args(const char *path, int n, const em_named_tensor *ts,
                                 int n_meta) {
  if (!path || !*path) return em_error(EM_ERR_ARG, "safetensors_save: empty path");
  if (n < 0 || n_meta < 0 || (n > 0 && !ts))
    return em_error(EM_ERR_ARG, "safetensors_save: '%s': bad tensor or metadata count", path);
  for (int i = 0; i < n; i++) {
    const char *name = ts[i].name;
    if (!name || !*name)
      return em_error(EM_ERR_ARG, "safetensors_save: '%s': tensor %d has an empty name", path, i + 1);
    if (strcmp(name, "__metadata__") == 0)
      return em_error(EM_ERR_ARG, "safetensors_save: '%s': '__metadata__' is reserved, not a tensor name",
                      path);
    if (!ts[i].tensor)
      return em_error(EM_ERR_ARG, "safetensors_save: '%s': tensor '%s' is NULL", path, name);
    if (!st_dtype_name(ts[i].tensor->dtype))
      return em_error(EM_ERR_DTYPE, "safetensors_save: '%s': tensor '%s' has dtype %s, not storable",
                      path, name, em_dtype_name(ts[i].tensor->dtype));
    for (int j = 0; j < i; j++)
      if (strcmp(ts[j].name, name) == 0)
        return em_error(EM_ERR_ARG, "safetensors_save: '%s': the name '%s' appears twice", path, name);
  }
  return EM_OK;
}

/* Writes the tensors' bytes to f in order. */
static em_status write_data(FILE *f, const char *path, int n, const em_named_tensor *ts) {
  for (int i = 0; i < n; i++) {
    const em_tensor *t = ts[i].tensor;
    size_t elsize = em_dtype_size(t->dtype), nbytes = (size_t)em_numel(t) * elsize;
    if (nbytes == 0) continue;
    void *buf = malloc(nbytes);
    if (!buf)
      return em_error(EM_ERR_OOM, "safetensors_save: '%s': out of memory (%zu bytes) for '%s'", path,
                      nbytes, ts[i].name);
    em_status s = em_to_host(t, buf);
    if (s) {
      free(buf);
      return s;
    }
    if (host_is_big_endian()) swap_elements(buf, nbytes, elsize);
    size_t w = fwrite(buf, 1, nbytes, f);
    free(buf);
    if (w != nbytes)
      return em_error(EM_ERR_IO, "safetensors_save: '%s': write failed for '%s': %s", path,
                      ts[i].name, strerror(errno));
  }
  return EM_OK;
}

/* The folder of path ("." when it has none) into buf; returns the base name. */
static const char *split_path(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(buf, n, ".");
    return path;
  }
  size_t len = (size_t)(slash - path);
  snprintf(buf, n, "%.*s", (int)(len ? len : 1), path); /* "/x" lives in "/" */
  return slash + 1;
}

/* A save killed mid-write leaves "<path>.tmp-XXXXXX" (mkstemp's six
** characters) behind, possibly hundreds of MB. Each later save of the same
** path removes those no process holds: a live writer keeps an exclusive
** flock on its temporary until it is renamed, and a dead one's lock is
** gone. Other files are never touched. */
static void remove_stale_temporaries(const char *path) {
  char dir[4096];
  const char *base = split_path(path, dir, sizeof dir);
  size_t blen = strlen(base);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *name = e->d_name;
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp-", 5) != 0 ||
        strlen(name + blen + 5) != 6)
      continue;
    bool ok = true;
    for (int i = 0; i < 6; i++) {
      char c = name[blen + 5 + i];
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    }
    if (!ok) continue;
    int fd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
      (void)unlinkat(dirfd(d), name, 0);
    close(fd);
  }
  closedir(d);
}

static em_status sync_parent_dir(const char *path) {
  char dir[4096];
  split_path(path, dir, sizeof dir);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return EM_OK; /* e.g. a folder we may write but not read: the data is synced */
  int r = fsync(fd), err = errno;
  close(fd);
  /* Some filesystems cannot sync a folder (EINVAL); that is not a failed save. */
  if (r != 0 && err != EINVAL && err != EROFS)
    return em_error(EM_ERR_IO, "safetensors_save: '%s': syncing the folder %s failed: %s", path, dir,
                    strerror(err));
  return EM_OK;
}

em_status em_safetensors_save(const char *path, int n, const em_named_tensor *ts, int n_meta,
                              const char *const *meta) {
  EM_TRY(check_save_args(path, n, ts, n_meta));
  char *json = NULL;
  EM_TRY(build_header(path, n, ts, n_meta, meta, &json));

  /* Pad the header with spaces to a multiple of 8 so the data is aligned. */
  size_t jlen = strlen(json), hlen = (jlen + 7) & ~(size_t)7;
  uint8_t lenbytes[8];
  for (int i = 0; i < 8; i++) lenbytes[i] = (uint8_t)((uint64_t)hlen >> (8 * i));

  size_t plen = strlen(path);
  char *tmp = malloc(plen + 16);
  if (!tmp) {
    cJSON_free(json);
    return em_error(EM_ERR_OOM, "safetensors_save: '%s': out of memory", path);
  }
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp-XXXXXX", 12);
  remove_stale_temporaries(path);
  int fd = mkstemp(tmp);
  if (fd >= 0) (void)flock(fd, LOCK_EX); /* ours while we write; see remove_stale_temporaries */
  if (fd < 0) {
    em_status s = em_error(EM_ERR_IO, "safetensors_save: '%s': cannot create a temporary file %s: %s",
                           path, tmp, strerror(errno));
    cJSON_free(json);
    free(tmp);
    return s;
  }
  (void)fchmod(fd, 0644); /* mkstemp makes 0600; a checkpoint is an ordinary file */
  FILE *f = fdopen(fd, "wb");
  em_status s = EM_OK;
  if (!f) {
    s = em_error(EM_ERR_IO, "safetensors_save: '%s': %s", path, strerror(errno));
    close(fd);
  } else {
    if (fwrite(lenbytes, 1, 8, f) != 8 || fwrite(json, 1, jlen, f) != jlen)
      s = em_error(EM_ERR_IO, "safetensors_save: '%s': write failed: %s", path, strerror(errno));
    for (size_t i = jlen; s == EM_OK && i < hlen; i++)
      if (fputc(' ', f) == EOF)
        s = em_error(EM_ERR_IO, "safetensors_save: '%s': write failed: %s", path, strerror(errno));
    if (s == EM_OK) s = write_data(f, path, n, ts);
    if (s == EM_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
      s = em_error(EM_ERR_IO, "safetensors_save: '%s': flush failed: %s", path, strerror(errno));
    /* Renamed while still open (and locked), so no other save can take it
    ** for a stale temporary in between. */
    if (s == EM_OK && rename(tmp, path) != 0)
      s = em_error(EM_ERR_IO, "safetensors_save: '%s': cannot rename %s over it: %s", path, tmp,
                   strerror(errno));
    if (s != EM_OK) unlink(tmp);
    if (fclose(f) != 0 && s == EM_OK)
      s = em_error(EM_ERR_IO, "safetensors_save: '%s': close failed: %s", path, strerror(errno));
    /* The new name is only durable once the folder itself is synced. */
    if (s == EM_OK) s = sync_parent_dir(path);
  }
  if (!f) unlink(tmp);
  cJSON_free(json);
  free(tmp);
  return s;
}

/* ---------------------------------------------------------------- */
/* Loading                                                           */
/* ---------------------------------------------------------------- */

typedef struct st_entry {
  const char *name;     /* borrowed from the cJSON tree */
  em_dtype dtype;       /* the tensor's */
  int widen;            /* ST_SAME, or how the file's elements become dtype's */
  size_t file_elsize;   /* bytes per element in the file */
  int ndim;
  int64_t shape[EM_MAX_DIMS];
  uint64_t begin, end;
} st_entry;

#define BAD(...) em_error(EM_ERR_IO, __VA_ARGS__)

/* A JSON number that is a whole number in [0, 2^53]. */
static int json_uint(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= ST_MAX_INT) || d != floor(d)) return 0;
  *out = (uint64_t)d;
  return 1;
}

static em_status parse_entry(const char *path, const cJSON *j, uint64_t data_size, st_entry *e) {
  const char *name = j->string;
  if (!name || !name[0]) /* check_header_text catches the ways we know; this is the backstop */
    return BAD("safetensors_load: '%s': a tensor with an empty name", path);
  if (!cJSON_IsObject(j))
    return BAD("safetensors_load: '%s': entry '%s' is not a JSON object", path, name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
  if (!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
    return BAD("safetensors_load: '%s': entry '%s' needs \"dtype\" (string), \"shape\" (array) and "
               "\"data_offsets\" (array)", path, name);
  e->widen = ST_SAME;
  if (st_dtype_parse(dt->valuestring, &e->dtype)) {
    e->file_elsize = em_dtype_size(e->dtype);
  } else {
    size_t w = 0;
    while (w < ST_NWIDENED && strcmp(st_widened[w].name, dt->valuestring) != 0) w++;
    if (w == ST_NWIDENED)
      return BAD("safetensors_load: '%s': tensor '%s' has dtype '%s', expected one of F32, F64, I64, "
                 "BOOL, BF16 (or F16, read as float32, and I32, I16, I8, U8, U16, U32, read as int64)", path, name,
                 dt->valuestring);
    e->dtype = st_widened[w].dtype;
    e->widen = st_widened[w].widen;
    e->file_elsize = st_widened[w].file_elsize;
  }
  int nd = cJSON_GetArraySize(shape);
  if (nd > EM_MAX_DIMS)
    return BAD("safetensors_load: '%s': tensor '%s' has %d dims, at most %d are supported", path,
               name, nd, EM_MAX_DIMS);
  e->ndim = nd;
  for (int d = 0; d < nd; d++) {
    uint64_t v;
    if (!json_uint(cJSON_GetArrayItem(shape, d), &v))
      return BAD("safetensors_load: '%s': tensor '%s' has a shape entry that is not a "
                 "non-negative integer (dim %d)", path, name, d + 1);
    e->shape[d] = (int64_t)v;
  }
  int64_t numel = em__numel_of(nd, e->shape);
  if (numel < 0)
    return BAD("safetensors_load: '%s': tensor '%s' has an impossibly large shape", path, name);
  if (cJSON_GetArraySize(offs) != 2 || !json_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
      !json_uint(cJSON_GetArrayItem(offs, 1), &e->end))
    return BAD("safetensors_load: '%s': tensor '%s' has data_offsets that are not two "
               "non-negative integers", path, name);
  if (e->begin > e->end || e->end > data_size)
    return BAD("safetensors_load: '%s': tensor '%s' has data_offsets [%llu, %llu] outside the "
               "%llu data bytes (file truncated?)", path, name, (unsigned long long)e->begin,
               (unsigned long long)e->end, (unsigned long long)data_size);
  uint64_t want = (uint64_t)numel * e->file_elsize;
  if (e->end - e->begin != want) {
    char sh[160];
    return BAD("safetensors_load: '%s': tensor '%s' (%s, shape %s) needs %llu bytes, its "
               "data_offsets span %llu", path, name, dt->valuestring,
               em_shape_str(nd, e->shape, sh, sizeof sh), (unsigned long long)want,
               (unsigned long long)(e->end - e->begin));
  }
  e->name = name;
  return EM_OK;
}

static int by_begin(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every range must follow the previous one exactly: no overlap, no gap,
** and the last ends at the end of the file. Also rejects duplicate names. */
static em_status check_layout(const char *path, st_entry *es, int n, uint64_t data_size) {
  qsort(es, (size_t)n, sizeof *es, by_begin);
  uint64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (es[i].begin < at)
      return BAD("safetensors_load: '%s': tensor '%s' overlaps '%s' (bytes %llu..%llu)", path,
                 es[i].name, es[i - 1].name, (unsigned long long)es[i].begin,
                 (unsigned long long)at);
    if (es[i].begin > at)
      return BAD("safetensors_load: '%s': %llu unused bytes before tensor '%s'", path,
                 (unsigned long long)(es[i].begin - at), es[i].name);
    at = es[i].end;
  }
  if (at != data_size)
    return BAD("safetensors_load: '%s': the tensors cover %llu data bytes but the file has %llu",
               path, (unsigned long long)at, (unsigned long long)data_size);
  const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
  if (!names) return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  for (int i = 0; i < n; i++) names[i] = es[i].name;
  qsort(names, (size_t)n, sizeof *names, by_name);
  for (int i = 1; i < n; i++)
    if (strcmp(names[i], names[i - 1]) == 0) {
      em_status s = BAD("safetensors_load: '%s': the name '%s' appears twice", path, names[i]);
      free(names);
      return s;
    }
  free(names);
  return EM_OK;
}

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void em_safetensors_free(em_safetensors *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) {
    free(f->names ? f->names[i] : NULL);
    em_release(f->tensors ? f->tensors[i] : NULL);
  }
  for (int i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
  free(f->names);
  free(f->tensors);
  free(f->meta);
  free(f);
}

static em_status read_metadata(const char *path, const cJSON *m, em_safetensors *f) {
  if (!cJSON_IsObject(m))
    return BAD("safetensors_load: '%s': __metadata__ is not a JSON object", path);
  if (f->meta) return BAD("safetensors_load: '%s': __metadata__ appears twice", path);
  int n = cJSON_GetArraySize(m);
  f->meta = calloc((size_t)(2 * n + 1), sizeof *f->meta);
  if (!f->meta) return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  for (const cJSON *kv = m->child; kv; kv = kv->next) {
    if (!cJSON_IsString(kv))
      return BAD("safetensors_load: '%s': metadata value of '%s' is not a string", path, kv->string);
    f->meta[2 * f->n_meta] = dupstr(kv->string);
    f->meta[2 * f->n_meta + 1] = dupstr(kv->valuestring);
    f->n_meta++;
    if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
      return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  }
  return EM_OK;
}

/* A widened entry's file elements (little-endian already) as dtype's, in a new buffer. */
static void *widen_elements(const st_entry *e, const void *buf, size_t numel) {
  void *out = malloc(numel ? numel * em_dtype_size(e->dtype) : 1);
  if (!out) return NULL;
  for (size_t i = 0; i < numel; i++) {
    if (e->widen == ST_F16) {
      uint16_t h;
      memcpy(&h, (const uint8_t *)buf + 2 * i, 2);
      ((float *)out)[i] = em_f16_to_f32(h);
    } else {
      const uint8_t *at = (const uint8_t *)buf + e->file_elsize * i;
      int64_t v = 0;
      int32_t i32;
      int16_t i16;
      int8_t i8;
      uint16_t u16;
      uint32_t u32;
      switch (e->widen) {
      case ST_I32: memcpy(&i32, at, 4), v = i32; break;
      case ST_I16: memcpy(&i16, at, 2), v = i16; break;
      case ST_I8: memcpy(&i8, at, 1), v = i8; break;
      case ST_U8: v = at[0]; break;
      case ST_U16: memcpy(&u16, at, 2), v = u16; break;
      default: memcpy(&u32, at, 4), v = u32; break; /* ST_U32 */
      }
      ((int64_t *)out)[i] = v;
    }
  }
  return out;
}

/* Reads the data of each entry (sorted by offset) into CPU tensors. */
static em_status read_tensors(const char *path, FILE *fp, uint64_t data_start, st_entry *es,
                              int n, em_safetensors *f) {
  em_device cpu;
  EM_TRY(em_cpu_device(&cpu));
  f->names = calloc((size_t)(n ? n : 1), sizeof *f->names);
  f->tensors = calloc((size_t)(n ? n : 1), sizeof *f->tensors);
  if (!f->names || !f->tensors) return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  f->n = n;
  for (int i = 0; i < n; i++) {
    size_t nbytes = (size_t)(es[i].end - es[i].begin);
    void *buf = malloc(nbytes ? nbytes : 1);
    f->names[i] = dupstr(es[i].name);
    if (!buf || !f->names[i]) {
      free(buf);
      return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory (%zu bytes) for '%s'",
                      path, nbytes, es[i].name);
    }
    if (nbytes && (fseeko(fp, (off_t)(data_start + es[i].begin), SEEK_SET) != 0 ||
                   fread(buf, 1, nbytes, fp) != nbytes)) {
      free(buf);
      return BAD("safetensors_load: '%s': cannot read the %zu bytes of '%s' (file truncated?)",
                 path, nbytes, es[i].name);
    }
    if (host_is_big_endian()) swap_elements(buf, nbytes, es[i].file_elsize);
    if (es[i].widen != ST_SAME) {
      void *wide = widen_elements(&es[i], buf, nbytes / es[i].file_elsize);
      free(buf);
      if (!wide)
        return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory widening '%s'", path, es[i].name);
      buf = wide;
    }
    if (es[i].dtype == EM_BOOL)
      for (size_t k = 0; k < nbytes; k++)
        if (((uint8_t *)buf)[k] > 1) {
          unsigned byte = ((uint8_t *)buf)[k];
          free(buf);
          return BAD("safetensors_load: '%s': bool tensor '%s' holds the byte %u at element %zu "
                     "(expected 0 or 1)", path, es[i].name, byte, k + 1);
        }
    em_status s = em_from_host(&f->tensors[i], es[i].ndim, es[i].shape, es[i].dtype, buf, cpu);
    free(buf);
    if (s) return s;
  }
  return EM_OK;
}

/* cJSON turns "\u0000" into a NUL that silently cuts a string short, and
** keeps a raw NUL byte the same way; an empty key would load as a tensor
** without a name (the saver refuses all three). So the header text is
** scanned first: no NUL byte anywhere, no \u0000 escape in any string,
** no "" key. `base` is the file offset of the header's first byte. */
static em_status check_header_text(const char *path, const char *h, size_t n, uint64_t base) {
  bool in_str = false;
  size_t str_start = 0;
  for (size_t i = 0; i < n; i++) {
    char c = h[i];
    if (c == '\0')
      return BAD("safetensors_load: '%s': a NUL byte in the header at file offset %llu", path,
                 (unsigned long long)(base + i));
    if (!in_str) {
      if (c == '"') in_str = true, str_start = i;
      continue;
    }
    if (c == '\\') {
      if (i + 1 < n && h[i + 1] == 'u') { /* cJSON lets bad hex through as garbage, so check it */
        bool hex = i + 5 < n, zero = hex;
        for (size_t k = i + 2; hex && k <= i + 5; k++) {
          hex = (h[k] >= '0' && h[k] <= '9') || (h[k] >= 'a' && h[k] <= 'f') || (h[k] >= 'A' && h[k] <= 'F');
          zero = zero && h[k] == '0';
        }
        if (!hex)
          return BAD("safetensors_load: '%s': a \\u escape without 4 hex digits in a header string "
                     "at file offset %llu", path, (unsigned long long)(base + i));
        if (zero)
          return BAD("safetensors_load: '%s': a \\u0000 (NUL) escape in a header string at file "
                     "offset %llu", path, (unsigned long long)(base + i));
      }
      i++; /* the escaped character cannot end the string */
      continue;
    }
    if (c != '"') continue;
    in_str = false;
    if (i == str_start + 1) { /* "" -- is it a key? */
      size_t j = i + 1;
      while (j < n && (h[j] == ' ' || h[j] == '\t' || h[j] == '\n' || h[j] == '\r')) j++;
      if (j < n && h[j] == ':')
        return BAD("safetensors_load: '%s': an empty name in the header at file offset %llu", path,
                   (unsigned long long)(base + str_start));
    }
  }
  return EM_OK;
}

/* Parses and validates the header, then reads the data. */
static em_status load_from(const char *path, FILE *fp, uint64_t file_size, em_safetensors *f) {
  uint8_t lb[8];
  if (file_size < 8 || fread(lb, 1, 8, fp) != 8)
    return BAD("safetensors_load: '%s': the file is %llu bytes, too short for the 8-byte header "
               "length (truncated?)", path, (unsigned long long)file_size);
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)lb[i] << (8 * i);
  /* torch.save writes a zip archive (PyTorch >= 1.6) or a bare pickle, whose
  ** first bytes read as an impossible length: say what the file is, and how
  ** to convert it */
  bool zip = lb[0] == 'P' && lb[1] == 'K' && lb[2] == 3 && lb[3] == 4;
  bool pickle = lb[0] == 0x80 && lb[1] >= 2 && lb[1] <= 5;
  if ((zip || pickle) && (hlen > file_size - 8 || hlen > ST_MAX_HEADER))
    return BAD("safetensors_load: '%s' is a PyTorch torch.save file (%s), not safetensors: "
               "ember.load(path) reads it (a state dict as a table of tensors), or in Python "
               "safetensors.torch.save_file(torch.load(path), \"model.safetensors\") converts it", path,
               zip ? "a zip archive" : "a pickle");
  if (hlen == 0 || hlen > file_size - 8)
    return BAD("safetensors_load: '%s': header length %llu does not fit the file of %llu bytes "
               "(truncated or not a safetensors file?)", path, (unsigned long long)hlen,
               (unsigned long long)file_size);
  if (hlen > ST_MAX_HEADER)
    return BAD("safetensors_load: '%s': header length %llu is larger than the %llu allowed", path,
               (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
  char *hdr = malloc((size_t)hlen + 1);
  if (!hdr) return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory for the header", path);
  if (fread(hdr, 1, (size_t)hlen, fp) != hlen) {
    free(hdr);
    return BAD("safetensors_load: '%s': cannot read the %llu-byte header", path,
               (unsigned long long)hlen);
  }
  hdr[hlen] = 0;
  em_status s = check_header_text(path, hdr, (size_t)hlen, 8);
  if (s != EM_OK) {
    free(hdr);
    return s;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
  if (!root) {
    size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
    s = BAD("safetensors_load: '%s': the header is not valid JSON (error near byte %zu of %llu)",
            path, at, (unsigned long long)hlen);
  } else {
    for (const char *p = end; s == EM_OK && p < hdr + hlen; p++)
      if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        s = BAD("safetensors_load: '%s': unexpected bytes after the header's JSON at byte %zu",
                path, (size_t)(p - hdr));
    if (s == EM_OK && !cJSON_IsObject(root))
      s = BAD("safetensors_load: '%s': the header is not a JSON object", path);
  }
  st_entry *es = NULL;
  int n = 0;
  uint64_t data_size = file_size - 8 - hlen;
  if (s == EM_OK) {
    es = malloc(sizeof *es * (size_t)(cJSON_GetArraySize(root) + 1));
    if (!es) s = em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  }
  for (const cJSON *j = s == EM_OK ? root->child : NULL; j && s == EM_OK; j = j->next) {
    if (strcmp(j->string, "__metadata__") == 0) s = read_metadata(path, j, f);
    else s = parse_entry(path, j, data_size, &es[n++]);
  }
  if (s == EM_OK) s = check_layout(path, es, n, data_size);
  if (s == EM_OK) s = read_tensors(path, fp, 8 + hlen, es, n, f);
  free(es);
  cJSON_Delete(root); /* entry names were copied by read_tensors */
  free(hdr);
  return s;
}

em_status em_safetensors_load(const char *path, em_safetensors **out) {
  *out = NULL;
  if (!path || !*path) return em_error(EM_ERR_ARG, "safetensors_load: empty path");
  FILE *fp = fopen(path, "rb");
  if (!fp) return em_error(EM_ERR_IO, "safetensors_load: '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
    fclose(fp);
    return em_error(EM_ERR_IO, "safetensors_load: '%s': not a regular file", path);
  }
  em_safetensors *f = calloc(1, sizeof *f);
  if (!f) {
    fclose(fp);
    return em_error(EM_ERR_OOM, "safetensors_load: '%s': out of memory", path);
  }
  em_status s = load_from(path, fp, (uint64_t)st.st_size, f);
  fclose(fp);
  if (s != EM_OK) {
    em_safetensors_free(f);
    return s;
  }
  *out = f;
  return EM_OK;
}
