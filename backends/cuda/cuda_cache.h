/*
** cuda_cache.h -- the caching device allocator's bookkeeping, in plain C.
**
** A training loop allocates and frees the same sizes every step; asking
** the driver each time (cudaMalloc/cudaFree synchronise the device) would
** dominate small ops. So freed blocks are kept on free lists, one per size
** class, and the next request of that class reuses one.
**
** Size classes: at least 512 bytes; below 1 MiB four classes per power of
** two (waste under 25%), from 1 MiB sixteen (under 6.25%). A request takes
** the smallest class that holds it, and a block keeps its class for life,
** so a free list never needs splitting or merging.
**
** Blocks are reused in stream order: the backend runs all work of a device
** on one stream, so a kernel queued after a free cannot overtake the work
** that used the block before.
**
** The driver is reached only through the two callbacks, so this file is
** tested on the host with malloc standing in for cudaMalloc.
*/
#ifndef EMBER_CUDA_CACHE_H
#define EMBER_CUDA_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMC_MIN_BLOCK ((size_t)512)
#define EMC_NCLASSES 768

/* Allocate n bytes into *ptr; 0 on success, else a driver error code that
** the cache hands back unchanged. */
typedef int (*emc_raw_alloc_fn)(void *ud, size_t n, void **ptr);
typedef void (*emc_raw_free_fn)(void *ud, void *ptr);

typedef struct emc_block {
  void *ptr;
  size_t size;             /* the size class, what raw_alloc was given */
  struct emc_block *next;
} emc_block;

typedef struct emc_cache {
  emc_raw_alloc_fn raw_alloc;
  emc_raw_free_fn raw_free;
  void *ud;
  pthread_mutex_t lock;
  emc_block *free_lists[EMC_NCLASSES];
  emc_block **live;        /* hash of blocks handed out, chained by next */
  size_t live_buckets;     /* a power of two */
  size_t live_count;
  size_t in_use;           /* bytes (size classes) of live blocks */
  size_t cached;           /* bytes on the free lists */
  size_t peak_in_use;
  uint64_t driver_allocs;  /* raw_alloc calls that succeeded */
} emc_cache;

/* The size class of an n-byte request; 0 when n is too large to round. */
size_t emc_size_class(size_t n);
/* Index of a size class in free_lists (0 .. EMC_NCLASSES-1). */
int emc_class_index(size_t cls);

void emc_cache_init(emc_cache *c, emc_raw_alloc_fn a, emc_raw_free_fn f, void *ud);
/* Gives every block (cached and live) back to the driver. */
void emc_cache_destroy(emc_cache *c);

/* A block of at least n bytes (n == 0 gets the smallest class, so the
** pointer is unique). On a driver failure the cached blocks are released
** and the allocation is tried once more. Returns 0 or the driver's code;
** -1 when n is too large for any class, -2 when the host is out of memory
** for the bookkeeping. */
int emc_cache_alloc(emc_cache *c, size_t n, void **ptr);
/* Returns a live block to its free list; false if ptr is not live here
** (then nothing changes). NULL is ignored and returns true. */
bool emc_cache_free(emc_cache *c, void *ptr);
/* Releases the cached (free) blocks to the driver. */
void emc_cache_empty(emc_cache *c);
void emc_cache_stats(emc_cache *c, size_t *in_use, size_t *cached);

#ifdef __cplusplus
}
#endif
#endif
