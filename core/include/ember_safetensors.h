/*
** ember_safetensors.h -- reading and writing the safetensors format.
**
** The format (https://github.com/huggingface/safetensors):
**   8 bytes    N, the header length, unsigned little-endian
**   N bytes    a JSON object, padded with spaces:
**                {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
**                 ..., "__metadata__": {"key": "value", ...}}
**   the data   little-endian, row-major; data_offsets are [begin, end)
**              relative to the first byte after the header.
** Supported dtypes: F32, F64, I64, BOOL, BF16 (ember's dtypes).
**
** Saving is atomic: the file is written under a temporary name in the same
** folder (`<path>.tmp-XXXXXX`, flock'ed while written), synced, renamed over
** `path`, and the folder is synced, so a crash never leaves a half written
** checkpoint under the real name and the new name survives a power loss. A
** save also removes the temporaries of the same path that killed saves left
** behind (those no live writer holds).
**
** Loading checks everything before trusting it -- header length against the
** file size, the JSON, every dtype and shape, that each byte range matches
** its shape and lies inside the data, and that the ranges neither overlap
** nor leave gaps, and that no key is empty or holds a NUL (raw, or a \u0000
** escape; a \u escape must have 4 hex digits) -- and fails with EM_ERR_IO and a message naming the file
** and the problem. Tensors are loaded onto the CPU.
*/
#ifndef EMBER_SAFETENSORS_H
#define EMBER_SAFETENSORS_H

#include "ember.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of a file. */
typedef struct em_named_tensor {
  const char *name;
  em_tensor *tensor;
} em_named_tensor;

/* Writes `n` tensors (any device, any strides) in the given order, and
** `n_meta` metadata pairs: meta[2*i] is a key, meta[2*i+1] its value.
** Names must be unique, non-empty and not "__metadata__". */
EM_API em_status em_safetensors_save(const char *path, int n, const em_named_tensor *tensors,
                                     int n_meta, const char *const *meta);

/* A loaded file: entries in file order (by data offset). Owns its names,
** tensors and strings; free with em_safetensors_free. */
typedef struct em_safetensors {
  int n;
  char **names;
  em_tensor **tensors;   /* CPU tensors, new references owned here */
  int n_meta;
  char **meta;           /* 2 * n_meta strings: key, value, ... */
} em_safetensors;

/* Reads and validates a file into a new *out (CPU tensors). */
EM_API em_status em_safetensors_load(const char *path, em_safetensors **out);
EM_API void em_safetensors_free(em_safetensors *f); /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
