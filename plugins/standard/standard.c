/*
** standard.c -- scaled dot-product attention, the reference variant.
**
** It declares nothing: standard attention is what every backend's fused
** kernel computes (flash-style, O(L) memory, causal tiles skipped), and the
** core runs it (ember_attention.h, the fused route). Option `kernel` picks the
** route: "auto" (fused when the backend's kernel covers the call, core ops
** otherwise -- and always when the weights are asked for), "fused" (an
** error when the kernel cannot), "dense" (core ops, materialising the
** [B,H,Lq,Lk] scores: the reference the checker compares against).
*/
#include "ember_attention.h"

#include <string.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "kernel", .type = EM_ATTN_OPT_STRING, .default_str = "auto",
   .choices = "auto|fused|dense",
   .help = "fused backend kernel (auto: when it covers the call), or dense core ops"},
};

static em_status std_declare(const em_attn_options *o, const em_attn_dims *dims, em_attn_decl *d) {
  (void)dims;
  const char *k = em_attn_opt_str(o, "kernel");
  d->route = strcmp(k, "fused") == 0   ? EM_ATTN_ROUTE_FUSED
             : strcmp(k, "dense") == 0 ? EM_ATTN_ROUTE_COMPOSED
                                       : EM_ATTN_ROUTE_AUTO;
  return EM_OK;
}

static const em_attention_variant STANDARD = {
  .abi_version = EM_ATTENTION_ABI_VERSION,
  .struct_size = sizeof(em_attention_variant),
  .name = "standard",
  .version = "2.0",
  .description = "scaled dot-product attention (the backend's fused kernel, or core ops)",
  .caps = EM_ATTN_CAP_ALL,
  .n_options = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
  .options = OPTIONS,
  .declare = std_declare,
};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "standard", "2.0",
  "scaled dot-product attention: causal, key padding, masks, dropout; O(L) memory without weights"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &STANDARD;
}
