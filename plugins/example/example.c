/*
** example.c -- a whole attention variant: a learned per-head penalty on the
** distance |i - j|, clipped at max_distance. It only DECLARES that bias; the
** core and the backend's fused kernel do the rest (forward, backward, the
** table's gradient, masks, dropout, KV caches). See plugins/README.md.
**   cc -std=c11 -shared -fPIC $(pkg-config --cflags ember) example.c \
**      -o ember_attn_example.so $(pkg-config --libs ember)
*/
#include <ember_attention.h>

static const em_attn_option_spec OPTIONS[] = {
  {.name = "max_distance", .type = EM_ATTN_OPT_INT, .default_num = 32, .bounded = true, .min = 0,
   .max = 1e6, .help = "distances from here on share one penalty"}};

/* One learned table [max_distance + 1, heads], zero at first (= standard). */
static em_status init_params(const em_attn_options *o, const em_attn_dims *d, em_dtype dt,
                             em_device dev, int *n, em_attn_param *p) {
  int64_t shape[2] = {em_attn_opt_int(o, "max_distance") + 1, d->heads};
  p[0] = (em_attn_param){.name = "distance_bias", .learned = true};
  *n = 1;
  return em_zeros(&p[0].tensor, 2, shape, dt, dev);
}

/* scores[h, i, j] += distance_bias[min(|j - i|, max_distance), h] */
static em_status declare(const em_attn_options *o, const em_attn_dims *d, em_attn_decl *decl) {
  (void)d;
  decl->bias = EM_ATTN_BIAS_TABLE, decl->rel = EM_ATTN_REL_ABS_CLIP, decl->table_param = 0;
  decl->max_distance = em_attn_opt_int(o, "max_distance");
  return EM_OK;
}

static const em_attention_variant EXAMPLE = {
  .abi_version = EM_ATTENTION_ABI_VERSION, .struct_size = sizeof(em_attention_variant),
  .name = "example", .version = "2.0", .description = "learned per-head distance penalty",
  .caps = EM_ATTN_CAP_ALL, .n_options = 1, .options = OPTIONS,
  .init_params = init_params, .declare = declare};

EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, "example", "2.0", "learned per-head distance penalty"};

EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &EXAMPLE;
}
