/*
** fuzz_plugin_check.c -- libFuzzer harness for the checks the plugin loader
** makes before it trusts a file (core/src/plugin_check.c, compiled in):
** the ELF header and segment bounds on arbitrary bytes, and the plugin
** info struct (kind, ABI version, name) built from the same bytes.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember_attention.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char reason[512] = "";
  /* The file as the loader sees it, in an exact-size copy so ASan catches
  ** any read past its end. */
  unsigned char *file = malloc(size ? size : 1);
  if (!file) return 0;
  memcpy(file, data, size);
  if (!em__elf_check(file, size, reason, sizeof reason) && !reason[0]) abort();
  free(file);

  /* The same bytes as an info struct: kind, ABI, then strings. */
  em_plugin_info info = {0};
  if (size >= 8) {
    memcpy(&info.abi_version, data, 4);
    memcpy(&info.kind, data + 4, 4);
    /* Small values reach the interesting branches more often. */
    if (info.kind > 8) info.kind %= 4;
    if (data[0] & 1) info.abi_version = info.kind == EM_PLUGIN_BACKEND ? EM_BACKEND_ABI_VERSION : EM_ATTENTION_ABI_VERSION;
  }
  char *name = NULL;
  if (size > 8) {
    name = malloc(size - 8 + 1);
    if (!name) return 0;
    memcpy(name, data + 8, size - 8);
    name[size - 8] = '\0';
    info.name = name;
  }
  reason[0] = '\0';
  bool ok = em__plugin_info_check(&info, reason, sizeof reason);
  if (!ok && !reason[0]) abort();
  if (ok && (!info.name || strlen(info.name) > 63)) abort(); /* the record holds 64 bytes */
  free(name);
  return 0;
}
