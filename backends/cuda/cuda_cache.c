/*
** cuda_cache.c -- size-class caching allocator (see cuda_cache.h).
*/
#include "cuda_cache.h"

#include <stdlib.h>

/* Classes below 1 MiB: 4 per power of two from 2^9; from 2^20: 16. */
#define SMALL_LOG 9
#define LARGE_LOG 20
#define SMALL_STEPS 4
#define LARGE_STEPS 16
#define NSMALL ((LARGE_LOG - SMALL_LOG) * SMALL_STEPS)

static int floor_log2(size_t n) {
  int k = 0;
  while (n >>= 1) k++;
  return k;
}

size_t emc_size_class(size_t n) {
  if (n <= EMC_MIN_BLOCK) return EMC_MIN_BLOCK;
  if (n > ((size_t)1 << 62)) return 0;
  int k = floor_log2(n);
  size_t steps = k < LARGE_LOG ? SMALL_STEPS : LARGE_STEPS;
  size_t step = ((size_t)1 << k) / steps;
  return (n + step - 1) / step * step;
}

int emc_class_index(size_t cls) {
  int k = floor_log2(cls);
  if (k < LARGE_LOG) {
    size_t step = ((size_t)1 << k) / SMALL_STEPS;
    return (k - SMALL_LOG) * SMALL_STEPS + (int)((cls - ((size_t)1 << k)) / step);
  }
  size_t step = ((size_t)1 << k) / LARGE_STEPS;
  int i = NSMALL + (k - LARGE_LOG) * LARGE_STEPS + (int)((cls - ((size_t)1 << k)) / step);
  return i < EMC_NCLASSES ? i : EMC_NCLASSES - 1;
}

/* ---- the live-block hash ------------------------------------------ */

static size_t hash_ptr(const void *p, size_t buckets) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= (uintptr_t)0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return (size_t)x & (buckets - 1);
}

static bool live_grow(emc_cache *c) {
  size_t nb = c->live_buckets ? c->live_buckets * 2 : 256;
  emc_block **t = calloc(nb, sizeof *t);
  if (!t) return false;
  for (size_t i = 0; i < c->live_buckets; i++) {
    emc_block *b = c->live[i];
    while (b) {
      emc_block *next = b->next;
      size_t h = hash_ptr(b->ptr, nb);
      b->next = t[h];
      t[h] = b;
      b = next;
    }
  }
  free(c->live);
  c->live = t;
  c->live_buckets = nb;
  return true;
}

static bool live_insert(emc_cache *c, emc_block *b) {
  if (c->live_count + 1 > c->live_buckets && !live_grow(c)) return false;
  size_t h = hash_ptr(b->ptr, c->live_buckets);
  b->next = c->live[h];
  c->live[h] = b;
  c->live_count++;
  return true;
}

static emc_block *live_remove(emc_cache *c, const void *ptr) {
  if (!c->live_buckets) return NULL;
  emc_block **pp = &c->live[hash_ptr(ptr, c->live_buckets)];
  for (; *pp; pp = &(*pp)->next) {
    if ((*pp)->ptr == ptr) {
      emc_block *b = *pp;
      *pp = b->next;
      b->next = NULL;
      c->live_count--;
      return b;
    }
  }
  return NULL;
}

/* ---- the cache ------------------------------------------------------ */

void emc_cache_init(emc_cache *c, emc_raw_alloc_fn a, emc_raw_free_fn f, void *ud) {
  *c = (emc_cache){0};
  c->raw_alloc = a;
  c->raw_free = f;
  c->ud = ud;
  pthread_mutex_init(&c->lock, NULL);
}

static void release_free_lists(emc_cache *c) {
  for (int i = 0; i < EMC_NCLASSES; i++) {
    emc_block *b = c->free_lists[i];
    while (b) {
      emc_block *next = b->next;
      c->raw_free(c->ud, b->ptr);
      free(b);
      b = next;
    }
    c->free_lists[i] = NULL;
  }
  c->cached = 0;
}

void emc_cache_destroy(emc_cache *c) {
  pthread_mutex_lock(&c->lock);
  release_free_lists(c);
  for (size_t i = 0; i < c->live_buckets; i++) {
    emc_block *b = c->live[i];
    while (b) {
      emc_block *next = b->next;
      c->raw_free(c->ud, b->ptr);
      free(b);
      b = next;
    }
  }
  free(c->live);
  c->live = NULL;
  c->live_buckets = c->live_count = 0;
  c->in_use = 0;
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_destroy(&c->lock);
}

int emc_cache_alloc(emc_cache *c, size_t n, void **ptr) {
  *ptr = NULL;
  size_t cls = emc_size_class(n);
  if (!cls) return -1;
  int idx = emc_class_index(cls);
  pthread_mutex_lock(&c->lock);
  emc_block *b = c->free_lists[idx];
  /* The last index also holds the classes beyond the table: check size. */
  emc_block **pp = &c->free_lists[idx];
  while (b && b->size != cls) {
    pp = &b->next;
    b = b->next;
  }
  if (b) {
    *pp = b->next;
    c->cached -= cls;
  } else {
    b = malloc(sizeof *b);
    if (!b) {
      pthread_mutex_unlock(&c->lock);
      return -2;
    }
    b->size = cls;
    int rc = c->raw_alloc(c->ud, cls, &b->ptr);
    if (rc != 0 && c->cached > 0) {
      /* The driver is out of room: what we hold on the free lists may be
      ** what is missing. Give it back and try once more. */
      release_free_lists(c);
      rc = c->raw_alloc(c->ud, cls, &b->ptr);
    }
    if (rc != 0) {
      free(b);
      pthread_mutex_unlock(&c->lock);
      return rc;
    }
    c->driver_allocs++;
  }
  if (!live_insert(c, b)) {
    /* Keep the block cached rather than lose it. */
    b->next = c->free_lists[idx];
    c->free_lists[idx] = b;
    c->cached += cls;
    pthread_mutex_unlock(&c->lock);
    return -2;
  }
  c->in_use += cls;
  if (c->in_use > c->peak_in_use) c->peak_in_use = c->in_use;
  *ptr = b->ptr;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

bool emc_cache_free(emc_cache *c, void *ptr) {
  if (!ptr) return true;
  pthread_mutex_lock(&c->lock);
  emc_block *b = live_remove(c, ptr);
  if (b) {
    int idx = emc_class_index(b->size);
    b->next = c->free_lists[idx];
    c->free_lists[idx] = b;
    c->in_use -= b->size;
    c->cached += b->size;
  }
  pthread_mutex_unlock(&c->lock);
  return b != NULL;
}

void emc_cache_empty(emc_cache *c) {
  pthread_mutex_lock(&c->lock);
  release_free_lists(c);
  pthread_mutex_unlock(&c->lock);
}

void emc_cache_stats(emc_cache *c, size_t *in_use, size_t *cached) {
  pthread_mutex_lock(&c->lock);
  if (in_use) *in_use = c->in_use;
  if (cached) *cached = c->cached;
  pthread_mutex_unlock(&c->lock);
}
