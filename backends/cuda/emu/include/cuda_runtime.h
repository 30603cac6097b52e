/* emu/include/cuda_runtime.h -- see cuda_runtime_api.h. */
#include "cuda_runtime_api.h"
