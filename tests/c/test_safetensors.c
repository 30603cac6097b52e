/*
** test_safetensors.c -- the C safetensors reader/writer (core/src/
** safetensors.c): round trips of every dtype and of strided views, and the
** error paths of corrupt files, which run under valgrind and ASan so that a
** leak or a bad read on any of them fails the suite.
*/
#include <stdlib.h>
#include <unistd.h>

#include "ember.h"
#include "ember_safetensors.h"
#include "tap.h"

static em_device cpu;
static char dir[64];

static const char *path_of(const char *name) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static void write_file(const char *name, const void *bytes, size_t n) {
  FILE *f = fopen(path_of(name), "wb");
  if (f) {
    fwrite(bytes, 1, n, f);
    fclose(f);
  }
}

/* A file with a given header and `data_len` zero data bytes. */
static void write_raw(const char *name, const char *header, size_t data_len) {
  size_t hl = strlen(header);
  unsigned char *b = calloc(1, 8 + hl + data_len);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(b + 8, header, hl);
  write_file(name, b, 8 + hl + data_len);
  free(b);
}

static bool same_bytes(em_tensor *a, em_tensor *b) {
  size_t n = (size_t)em_numel(a) * em_dtype_size(a->dtype);
  if (a->dtype != b->dtype || a->ndim != b->ndim || em_numel(a) != em_numel(b)) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  unsigned char *x = malloc(n + 1), *y = malloc(n + 1);
  bool ok = em_to_host(a, x) == EM_OK && em_to_host(b, y) == EM_OK && memcmp(x, y, n) == 0;
  free(x);
  free(y);
  return ok;
}

static void test_round_trip(void) {
  int64_t s23[2] = {2, 3}, s0[2] = {0, 4};
  double d[6] = {1.5, -0.0, 1e308, 4.9406564584124654e-324, -3, 1.0 / 3};
  int64_t l[6] = {INT64_MAX, INT64_MIN, 0, -1, 7, 42};
  uint8_t bo[6] = {1, 0, 0, 1, 1, 0};
  em_tensor *f64 = NULL, *i64 = NULL, *bl = NULL, *f32 = NULL, *empty = NULL, *tr = NULL;
  em_from_host(&f64, 2, s23, EM_F64, d, cpu);
  em_from_host(&i64, 2, s23, EM_I64, l, cpu);
  em_from_host(&bl, 2, s23, EM_BOOL, bo, cpu);
  em_to_dtype(&f32, f64, EM_F32);
  em_zeros(&empty, 2, s0, EM_F32, cpu);
  em_transpose(&tr, f64, 0, 1); /* a strided view is written in its logical order */
  em_named_tensor ts[6] = {{"f64", f64}, {"i64", i64}, {"bool", bl}, {"f32", f32}, {"empty", empty}, {"t", tr}};
  const char *meta[4] = {"k1", "v1", "k2", ""};
  CHECK_OK(em_safetensors_save(path_of("a.st"), 6, ts, 2, meta), "save six tensors");
  em_safetensors *f = NULL;
  CHECK_OK(em_safetensors_load(path_of("a.st"), &f), "load them");
  if (f) {
    CHECK(f->n == 6 && f->n_meta == 2, "counts");
    bool all = true;
    for (int i = 0; i < f->n; i++) {
      em_tensor *want = NULL;
      for (int j = 0; j < 6; j++)
        if (strcmp(ts[j].name, f->names[i]) == 0) want = ts[j].tensor;
      all = all && want && same_bytes(want, f->tensors[i]);
    }
    CHECK(all, "every tensor is read back bit-exactly");
    CHECK(strcmp(f->meta[0], "k1") == 0 && strcmp(f->meta[1], "v1") == 0 && f->meta[3][0] == 0,
          "metadata");
  }
  em_safetensors_free(f);
  CHECK_ERR(em_safetensors_save(path_of("b.st"), 2, (em_named_tensor[]){{"x", f64}, {"x", i64}}, 0, NULL),
            EM_ERR_ARG, "the name 'x' appears twice", "duplicate names refused");
  CHECK(access(path_of("b.st"), F_OK) != 0, "and nothing written");
  CHECK_ERR(em_safetensors_save(path_of("no/dir/c.st"), 1, ts, 0, NULL), EM_ERR_IO,
            "cannot create a temporary file", "missing folder");
  em_release(f64), em_release(i64), em_release(bl), em_release(f32), em_release(empty), em_release(tr);
}

static void test_corrupt(void) {
  em_safetensors *f = (em_safetensors *)1;
  CHECK_ERR(em_safetensors_load(path_of("missing.st"), &f), EM_ERR_IO, "No such file", "missing file");
  CHECK(f == NULL, "out is NULL on failure");
  write_file("short.st", "abc", 3);
  CHECK_ERR(em_safetensors_load(path_of("short.st"), &f), EM_ERR_IO, "too short", "3-byte file");
  write_raw("json.st", "{\"a\": [1, ", 0);
  CHECK_ERR(em_safetensors_load(path_of("json.st"), &f), EM_ERR_IO, "not valid JSON", "bad JSON");
  write_raw("dtype.st", "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
  CHECK_ERR(em_safetensors_load(path_of("dtype.st"), &f), EM_ERR_IO, "dtype 'F8_E4M3'", "unknown dtype");
  write_raw("size.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
  CHECK_ERR(em_safetensors_load(path_of("size.st"), &f), EM_ERR_IO, "needs 16 bytes", "size mismatch");
  write_raw("trunc.st", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 9);
  CHECK_ERR(em_safetensors_load(path_of("trunc.st"), &f), EM_ERR_IO, "outside the 9 data bytes",
            "truncated data");
  write_raw("meta.st", "{\"__metadata__\":{\"a\":\"b\"},\"__metadata__\":{}}", 0);
  CHECK_ERR(em_safetensors_load(path_of("meta.st"), &f), EM_ERR_IO, "__metadata__ appears twice",
            "two metadata blocks");
  write_raw("overlap.st",
            "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
            "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
  CHECK_ERR(em_safetensors_load(path_of("overlap.st"), &f), EM_ERR_IO, "overlaps", "overlapping ranges");
}

int main(void) {
  if (em_cpu_device(&cpu)) {
    printf("not ok 1 - cpu device: %s\n", em_error_message());
    return 1;
  }
  snprintf(dir, sizeof dir, "/tmp/ember_st_XXXXXX");
  if (!mkdtemp(dir)) {
    printf("not ok 1 - mkdtemp\n");
    return 1;
  }
  test_round_trip();
  test_corrupt();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("# could not remove %s\n", dir);
  return tap_done();
}
