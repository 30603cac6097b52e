/*
** cuda_plugin.c -- the CUDA backend's plugin exports and vtable.
**
** ember_plugin_init refuses to load (NULL and a reason) on a machine with
** no usable GPU, so the loader lists the plugin as rejected and everything
** CPU goes on working. Devices themselves are set up lazily, on first use
** (cuda_device.c), so loading costs no GPU memory.
*/
#include <stdio.h>

#include "cuda_internal.h"
#include "ember_plugin.h"

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_BACKEND_ABI_VERSION, EM_PLUGIN_BACKEND, "cuda", "0.1.0",
  "NVIDIA GPUs: CUDA kernels, cuBLAS matmul, fused flash attention",
};

static const em_backend cuda_backend = {
  .abi_version = EM_BACKEND_ABI_VERSION,
  .struct_size = sizeof(em_backend),
  .name = "cuda",
  .host_memory = false,
  .device_count = emc_device_count,
  .device_name = emc_device_name,
  .alloc = emc_alloc,
  .free = emc_free,
  .copy_h2d = emc_copy_h2d,
  .copy_d2h = emc_copy_d2h,
  .copy_d2d = emc_copy_d2d,
  .synchronize = emc_synchronize,
  .memory_stats = emc_memory_stats,
  .empty_cache = emc_empty_cache,
  .set_num_threads = NULL,
  .get_num_threads = NULL,
  .copy = emc_copy,
  .fill = emc_fill,
  .unary = emc_unary,
  .unary_backward = emc_unary_backward,
  .binary = emc_binary,
  .where = emc_where,
  .reduce = emc_reduce,
  .gemm = emc_gemm,
  .softmax = emc_softmax,
  .softmax_backward = emc_softmax_backward,
  .layer_norm = emc_layer_norm,
  .layer_norm_backward = emc_layer_norm_backward,
  .index_select = emc_index_select,
  .index_add = emc_index_add,
  .gather = emc_gather,
  .scatter_add = emc_scatter_add,
  .cross_entropy = emc_cross_entropy,
  .cross_entropy_backward = emc_cross_entropy_backward,
  .random = emc_random,
  .dropout = emc_dropout,
  .adam_step = emc_adam_step,
  .sgd_step = emc_sgd_step,
  .attention_forward = emc_attention_forward,
  .attention_backward = emc_attention_backward,
  .attention_grouped_kv = true,
  .binary_fmod = true,
};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    if (e != cudaSuccess) (void)cudaGetLastError();
    if (err && errlen)
      snprintf(err, errlen, "no CUDA device (cudaGetDeviceCount: %s)",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return NULL;
  }
  return &cuda_backend;
}

EM_PLUGIN_EXPORT void ember_plugin_fini(void) { emc_devices_shutdown(); }
