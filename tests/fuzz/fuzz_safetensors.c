/*
** fuzz_safetensors.c -- libFuzzer harness for the safetensors loader: each
** input is written to a scratch file and loaded with em_safetensors_load.
** Any outcome but a crash, a sanitizer report or a leak is fine; a load
** that succeeds must give tensors whose bytes can be read back.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember.h"
#include "ember_safetensors.h"

static char scratch[64];
static int scratch_fd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(scratch, sizeof scratch, "%s/ember-fuzz-st-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  scratch_fd = mkstemp(scratch);
  if (scratch_fd < 0) abort();
  em_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (ftruncate(scratch_fd, 0) != 0 || pwrite(scratch_fd, data, size, 0) != (ssize_t)size) abort();
  em_safetensors *f = NULL;
  if (em_safetensors_load(scratch, &f) == EM_OK) {
    for (int i = 0; i < f->n; i++) {
      em_tensor *t = f->tensors[i];
      size_t nbytes = (size_t)em_numel(t) * em_dtype_size(t->dtype);
      void *buf = malloc(nbytes ? nbytes : 1);
      if (!buf || em_to_host(t, buf) != EM_OK || !f->names[i][0]) abort();
      free(buf);
    }
    em_safetensors_free(f);
  } else if (!em_error_message()[0]) {
    abort(); /* a failure always says why */
  }
  return 0;
}
