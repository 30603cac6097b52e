/*
** cpu_dnnl.h -- what the two oneDNN files of the CPU backend share: the
** engine and stream (one of each per process) and the execution of a
** primitive. Included by cpu_dnnl.c (matmul) and cpu_conv.c (convolution)
** only, so the rest of the backend never sees oneDNN's types.
*/
#ifndef EMBER_CPU_DNNL_H
#define EMBER_CPU_DNNL_H

#include "cpu_internal.h"

#include <oneapi/dnnl/dnnl.h>

/* A oneDNN failure as a status: dnnl_unimplemented (no kernel for this
** dtype or size on this ISA, e.g. bfloat16 under ONEDNN_MAX_CPU_ISA=AVX2)
** is EM_ERR_UNSUPPORTED, so that the caller takes its own path; anything
** else is EM_ERR_BACKEND. `who` names the kernel ("cpu gemm"). */
em_status cpu_dnnl_fail(const char *who, const char *what, dnnl_status_t st);
/* The engine, created on first use (thread-safe). */
em_status cpu_dnnl_engine(const char *who, dnnl_engine_t *eng);
/* Runs a primitive on the shared stream and waits for it. Executions are
** serialised: the stream is one, and each primitive already spreads over
** the whole OpenMP team. */
em_status cpu_dnnl_execute(const char *who, dnnl_primitive_t p, int nargs,
                           const dnnl_exec_arg_t *args);

#endif
