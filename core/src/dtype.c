/*
** dtype.c -- element types and devices: names, sizes, parsing.
*/
#include "internal.h"

#include <strings.h>

static const struct {
  const char *name;
  size_t size;
} em__dtypes[EM_NDTYPES] = {
#define EM_X_(e, name, size) [e] = {name, size},
  EM_DTYPE_LIST(EM_X_)
#undef EM_X_
};

size_t em_dtype_size(em_dtype dt) { return (unsigned)dt < EM_NDTYPES ? em__dtypes[dt].size : 0; }

const char *em_dtype_name(em_dtype dt) {
  return (unsigned)dt < EM_NDTYPES ? em__dtypes[dt].name : "invalid";
}

bool em_dtype_is_float(em_dtype dt) { return dt == EM_F32 || dt == EM_F64 || dt == EM_BF16; }

/* PyTorch's categories (bool < integer < float) and, within floats, width. */
static int dtype_category(em_dtype d) { return d == EM_BOOL ? 0 : em_dtype_is_float(d) ? 2 : 1; }
static int float_width(em_dtype d) { return d == EM_BF16 ? 0 : d == EM_F32 ? 1 : 2; }

em_dtype em_promote_types(em_dtype a, em_dtype b) {
  int ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) return float_width(a) >= float_width(b) ? a : b;
  return a;
}

bool em_can_cast(em_dtype from, em_dtype to) { return dtype_category(from) <= dtype_category(to); }

/* One value for the process (torch's is global too); atomic, as data
** loader threads create tensors while the main thread may set it. */
static _Atomic int em__default_dtype = EM_F32;

em_dtype em_default_dtype(void) { return (em_dtype)em__default_dtype; }

em_status em_set_default_dtype(em_dtype dt) {
  if ((unsigned)dt >= EM_NDTYPES || !em_dtype_is_float(dt))
    return em_error(EM_ERR_DTYPE, "set_default_dtype: only floating-point types are supported as the default "
                    "type (float32, float64 or bfloat16), got %s", em_dtype_name(dt));
  em__default_dtype = (int)dt;
  return EM_OK;
}

em_status em_dtype_parse(const char *s, em_dtype *out) {
  static const struct { const char *alias; em_dtype dt; } names[] = {
    {"float32", EM_F32}, {"float", EM_F32},  {"f32", EM_F32},     {"float64", EM_F64},
    {"double", EM_F64},  {"f64", EM_F64},    {"int64", EM_I64},   {"long", EM_I64},
    {"i64", EM_I64},     {"bool", EM_BOOL},  {"bfloat16", EM_BF16}, {"bf16", EM_BF16},
    /* Torch7's tensor type names (x:type("torch.DoubleTensor")) */
    {"torch.FloatTensor", EM_F32}, {"torch.DoubleTensor", EM_F64}, {"torch.LongTensor", EM_I64},
    {"torch.BoolTensor", EM_BOOL}, {"torch.BFloat16Tensor", EM_BF16},
  };
  if (!s) return em_error(EM_ERR_DTYPE, "unknown dtype (NULL)");
  /* PyTorch's spelling: "torch.float64" is "float64" */
  if (strncmp(s, "torch.", 6) == 0 && strchr(s + 6, '.') == NULL && !strstr(s, "Tensor")) s += 6;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].alias) == 0) {
      *out = names[i].dt;
      return EM_OK;
    }
  return em_error(EM_ERR_DTYPE,
                  "unknown dtype '%s' (expected float32, float64, int64, bool or bfloat16)", s);
}

bool em_device_eq(em_device a, em_device b) { return a.backend == b.backend && a.index == b.index; }

const char *em_device_str(em_device d, char *buf, size_t n) {
  const em_backend *be = em_backend_get(d.backend);
  const char *name = be ? be->name : "?";
  if (be && be->host_memory && d.index == 0)
    snprintf(buf, n, "%s", name);
  else
    snprintf(buf, n, "%s:%d", name, d.index + 1); /* 1-based for users */
  return buf;
}

em_status em_device_synchronize(em_device d) {
  const em_backend *be = em_backend_get(d.backend);
  if (!be) return em_error(EM_ERR_DEVICE, "synchronize: no backend in slot %d", d.backend);
  return be->synchronize(d.index);
}

em_status em_cpu_device(em_device *out) {
  int slot;
  EM_TRY(em_backend_find("cpu", &slot));
  out->backend = (int16_t)slot;
  out->index = 0;
  return EM_OK;
}

/* "cpu", "cuda", "cuda:2" (1-based device number, as in the Lua API). */
em_status em_device_parse(const char *s, em_device *out) {
  char type[64];
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  long index = 1;
  if (len == 0 || len >= sizeof type)
    return em_error(EM_ERR_DEVICE, "bad device '%s' (expected \"cpu\", \"cuda\" or \"cuda:N\")", s);
  memcpy(type, s, len);
  type[len] = '\0';
  if (colon) {
    char *end;
    index = strtol(colon + 1, &end, 10);
    if (*end != '\0' || end == colon + 1 || index < 1)
      return em_error(EM_ERR_DEVICE, "bad device '%s': device numbers start at 1 (\"%s:1\")", s, type);
  }
  int slot;
  EM_TRY(em_backend_find(type, &slot));
  const em_backend *be = em_backend_get(slot);
  int count = be->device_count();
  if (index > count)
    return em_error(EM_ERR_DEVICE, "device '%s': backend '%s' has %d device%s", s, type, count,
                    count == 1 ? "" : "s");
  out->backend = (int16_t)slot;
  out->index = (int16_t)(index - 1);
  return EM_OK;
}
