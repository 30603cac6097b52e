/*
** test_cuda_load.c -- the CUDA plugin through ember's own loader.
**
**   test_cuda_load PLUGIN.so [expect]
**
** expect "reject" (this machine has no GPU, or the emulator is told to
** have none): the loader must list the plugin as rejected with a reason
** that says "no CUDA device (cudaGetDeviceCount: ...)", and the CPU
** backend must keep working.
** expect "load": the plugin must load, name itself "cuda" and report a
** device. expect "any" (the default): either of the two, consistently.
** A missing file (the toolkit was absent, so nothing was built) skips
** with exit code 77. Prints "N passed, M failed".
*/
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "ember_backend.h"
#include "ember_plugin.h"

static int passed, failed;

static void check(bool ok, const char *what, const char *detail) {
  printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", what, detail ? ": " : "", detail ? detail : "");
  if (ok) passed++;
  else failed++;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [reject|load|any]\n", argv[0]);
    return 2;
  }
  const char *path = argv[1], *expect = argc > 2 ? argv[2] : "any";
  if (access(path, R_OK) != 0) {
    printf("SKIP: %s does not exist (built without the CUDA toolkit?)\n", path);
    return 77;
  }
  const em_plugin_record *rec = NULL;
  em_status s = em_plugin_load(path, &rec);
  bool loaded = s == EM_OK && rec && rec->loaded;
  if (!loaded) {
    const char *reason = rec ? rec->reason : em_error_message();
    check(strcmp(expect, "load") != 0, "the plugin is rejected", reason);
    check(strstr(reason, "no CUDA device (cudaGetDeviceCount: ") != NULL,
          "the reason says there is no CUDA device, and CUDA's own words", reason);
  } else {
    check(strcmp(expect, "reject") != 0, "the plugin loads", rec->path);
    const em_backend *be = rec->vtable;
    check(be && strcmp(be->name, "cuda") == 0 && be->device_count() > 0,
          "it is the cuda backend with a device", be ? be->name : "NULL vtable");
    int slot;
    check(em_backend_find("cuda", &slot) == EM_OK, "em_backend_find finds it", em_error_message());
  }
  /* Whatever happened to CUDA, the CPU goes on working. */
  em_device cpu;
  em_tensor *a = NULL, *b = NULL;
  double v = 0;
  s = em_cpu_device(&cpu);
  if (!s) s = em_full(&a, 0, NULL, 2.5, EM_F32, cpu);
  if (!s) s = em_add(&b, a, a);
  if (!s) s = em_item(b, &v);
  check(s == EM_OK && v == 5.0, "the CPU backend still computes 2.5 + 2.5",
        s ? em_error_message() : NULL);
  em_release(a);
  em_release(b);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
