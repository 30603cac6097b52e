/*
** test_core.c -- the core's own machinery: plugin loading, tensors and
** views, host transfer, error messages, and the autograd engine.
*/
#include "ember.h"
#include "ember_attention.h"
#include "ember_backend.h"
#include "ember_plugin.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static em_device cpu;

static em_tensor *from(int ndim, const int64_t *shape, const double *v) {
  em_tensor *t = NULL;
  if (em_from_host(&t, ndim, shape, EM_F64, v, cpu) != EM_OK) {
    printf("# from_host: %s\n", em_error_message());
    exit(2);
  }
  return t;
}

static double at(const em_tensor *t, int64_t i) {
  double buf[64];
  if (em_numel(t) > 64 || em_to_host(t, buf) != EM_OK) return NAN;
  return buf[i];
}

static void test_plugins(void) {
  const em_plugin_record *cpu_rec = em_plugin_find(EM_PLUGIN_BACKEND, "cpu");
  CHECK(cpu_rec && cpu_rec->loaded, "the cpu backend plugin is loaded");
  CHECK(em_plugin_count() >= 1, "the loader lists at least one plugin");
  int slot;
  CHECK_ERR(em_backend_find("nosuch", &slot), EM_ERR_DEVICE, "searched", "unknown backend names the search path");
  const em_plugin_record *rec;
  CHECK_ERR(em_plugin_load("/nonexistent/ember_x.so", &rec), EM_ERR_PLUGIN, "No such file",
            "explicit load of a missing file fails with the system's reason");
  CHECK(rec && !rec->loaded && strstr(rec->reason, "cannot open"), "the failure is recorded with its reason");
}

/* The loader's check of an attention vtable says what is wrong with an
** option table (it said "declares a bad option table" for all of these). */
static em_status no_decl(const em_attn_options *o, const em_attn_dims *d, em_attn_decl *decl) {
  (void)o, (void)d, (void)decl;
  return EM_OK;
}
static void test_variant_check(void) {
  static const em_attn_option_spec noname[] = {{.name = "", .type = EM_ATTN_OPT_INT}};
  static const em_attn_option_spec badtype[] = {{.name = "w", .type = (em_attn_opt_type)9}};
  em_attention_variant v = {.abi_version = EM_ATTENTION_ABI_VERSION, .struct_size = sizeof v, .name = "probe",
                            .caps = EM_ATTN_CAP_ALL, .declare = no_decl};
  char err[256];
  CHECK(em_attention_variant_check(&v, err, sizeof err), "a declaring vtable without options passes");
  v.n_options = 99;
  CHECK(!em_attention_variant_check(&v, err, sizeof err) && strstr(err, "n_options = 99 (0..32)"),
        "n_options past EM_ATTN_MAX_OPTIONS is named with the range");
  v.n_options = 1;
  CHECK(!em_attention_variant_check(&v, err, sizeof err) && strstr(err, "n_options = 1 but options is NULL"),
        "options NULL with n_options set is said so");
  v.options = noname;
  CHECK(!em_attention_variant_check(&v, err, sizeof err) && strstr(err, "option 1 has no name"),
        "an option with an empty name is named by its number");
  v.options = badtype;
  CHECK(!em_attention_variant_check(&v, err, sizeof err) && strstr(err, "option 'w' has type 9"),
        "an option of an unknown type is named with the type");
}

/* A record pointer handed out stays valid while later registrations grow
** the registry (it once lived in a realloc'd array: a held pointer then
** pointed into freed memory). Runs last: it leaves 300 rejected records. */
static void test_plugin_records_stay(void) {
  const em_plugin_record *cpu_rec = em_plugin_find(EM_PLUGIN_BACKEND, "cpu");
  const em_plugin_record *first = em_plugin_get(0);
  int before = em_plugin_count();
  em_status s = EM_OK;
  for (int i = 0; i < 300 && s == EM_OK; i++) {
    char path[64];
    snprintf(path, sizeof path, "(test %d)", i);
    s = em_plugin_register(EM_PLUGIN_ATTENTION, path, "held", NULL, NULL, NULL, "a test record");
  }
  CHECK(s == EM_OK && em_plugin_count() == before + 300, "300 more records");
  CHECK(cpu_rec && cpu_rec == em_plugin_find(EM_PLUGIN_BACKEND, "cpu") && cpu_rec->loaded &&
            cpu_rec->kind == EM_PLUGIN_BACKEND,
        "a held record is where it was after the registry grew");
  CHECK(first && first == em_plugin_get(0), "em_plugin_get(0) is the same record");
}

static void test_views(void) {
  double v[6] = {1, 2, 3, 4, 5, 6};
  em_tensor *a = from(2, (int64_t[]){2, 3}, v), *t = NULL, *c = NULL, *s = NULL;
  CHECK_OK(em_transpose(&t, a, 0, 1), "transpose");
  CHECK(t && t->shape[0] == 3 && t->shape[1] == 2 && !em_is_contiguous(t), "transpose is a strided view");
  CHECK(t && t->storage == a->storage, "a view shares storage");
  CHECK(t && at(t, 1) == 4 && at(t, 2) == 2, "transposed values read in the new order");
  CHECK_ERR(em_view(&c, t, 1, (int64_t[]){6}), EM_ERR_SHAPE, "reshape", "view of a non-contiguous tensor suggests reshape");
  CHECK_OK(em_reshape(&c, t, 1, (int64_t[]){-1}), "reshape copies when it must");
  CHECK(c && c->shape[0] == 6 && at(c, 1) == 4, "reshape result");
  em_release(c);
  c = NULL;
  CHECK_OK(em_narrow(&s, a, 1, 1, 2), "narrow");
  CHECK(s && s->shape[1] == 2 && at(s, 0) == 2 && at(s, 3) == 6, "narrow values");
  em_release(s);
  s = NULL;
  CHECK_ERR(em_narrow(&s, a, 1, 2, 2), EM_ERR_INDEX, "out of bounds", "narrow past the end");
  CHECK_OK(em_select(&s, a, 0, -1), "select with a negative index");
  CHECK(s && s->ndim == 1 && at(s, 0) == 4, "select drops the dim");
  em_release(s);
  s = NULL;
  CHECK_ERR(em_select(&s, a, 0, 2), EM_ERR_INDEX, "index 3 is out of range", "select out of range names the 1-based index");
  CHECK_ERR(em_select(&s, a, 5, 0), EM_ERR_INDEX, "dim 6 out of range", "bad dim names the 1-based dim");
  em_tensor *e = NULL, *u = NULL, *q = NULL, *sl = NULL;
  CHECK_OK(em_unsqueeze(&u, a, 0), "unsqueeze");
  CHECK(u && u->ndim == 3 && u->shape[0] == 1, "unsqueeze adds a dim");
  CHECK_OK(em_expand(&e, u, 3, (int64_t[]){4, -1, -1}), "expand");
  CHECK(e && e->stride[0] == 0 && at(e, 6 + 5) == 6, "expand repeats with stride 0");
  CHECK_ERR(em_expand(&q, a, 2, (int64_t[]){4, 3}), EM_ERR_SHAPE, "cannot expand", "expand of a non-1 dim");
  CHECK_OK(em_squeeze(&q, u, EM_ALL_DIMS), "squeeze");
  CHECK(q && q->ndim == 2, "squeeze removes size-1 dims");
  CHECK_OK(em_slice(&sl, a, 1, 0, 3, 2), "slice with a step");
  CHECK(sl && sl->shape[1] == 2 && at(sl, 1) == 3 && at(sl, 3) == 6, "slice values");
  em_release(sl);
  em_release(q);
  em_release(e);
  em_release(u);
  em_release(t);
  em_release(a);
}

static void test_creation_errors(void) {
  em_tensor *t = NULL;
  CHECK_ERR(em_zeros(&t, 2, (int64_t[]){1000000, 1000000}, EM_F32, cpu), EM_ERR_OOM, "[1000000, 1000000]",
            "a 10^12-element tensor is an out-of-memory error naming the shape");
  CHECK(t == NULL, "and returns no tensor");
  CHECK_ERR(em_zeros(&t, 1, (int64_t[]){-2}, EM_F32, cpu), EM_ERR_SHAPE, "negative size", "negative size");
  CHECK_ERR(em_zeros(&t, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, EM_F32, cpu), EM_ERR_SHAPE, "at most 8",
            "too many dims");
  em_dtype dt;
  CHECK_ERR(em_dtype_parse("float16", &dt), EM_ERR_DTYPE, "unknown dtype 'float16'", "unknown dtype");
  em_device d;
  CHECK_ERR(em_device_parse("cpu:0", &d), EM_ERR_DEVICE, "start at 1", "device numbers are 1-based");
  CHECK_OK(em_device_parse("cpu", &d), "parse cpu");
  CHECK_OK(em_full(&t, 2, (int64_t[]){8, 4}, 2.5, EM_F32, cpu), "full in 8 dims-capable core");
  double x;
  CHECK_ERR(em_item(t, &x), EM_ERR_SHAPE, "one element", "item of a non-scalar");
  em_release(t);
  t = NULL;
  int64_t shape8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  CHECK_OK(em_ones(&t, 8, shape8, EM_I64, cpu), "an 8-d int64 tensor");
  CHECK(t && em_numel(t) == 16, "numel of 8-d tensor");
  em_release(t);
}

/* The default dtype (em_default_dtype): settable to the floats only; the
** promotions that make a float from integers follow it. The promotion
** table and can_cast as torch's. */
static void test_default_dtype(void) {
  CHECK(em_default_dtype() == EM_F32, "the default dtype starts as float32");
  CHECK_ERR(em_set_default_dtype(EM_I64), EM_ERR_DTYPE, "only floating-point types", "int64 refused");
  CHECK_ERR(em_set_default_dtype(EM_BOOL), EM_ERR_DTYPE, "got bool", "bool refused");
  CHECK(em_default_dtype() == EM_F32, "a refused dtype leaves the default");
  em_tensor *i = NULL, *y = NULL, *q = NULL;
  CHECK_OK(em_ones(&i, 1, (int64_t[]){2}, EM_I64, cpu), "an int64 tensor");
  CHECK_OK(em_set_default_dtype(EM_F64), "float64 accepted");
  CHECK_OK(em_binary_scalar(&y, EM_MUL, i, 0.5), "int64 * 0.5");
  CHECK(y && y->dtype == EM_F64, "int64 * 0.5 has the default dtype");
  CHECK_OK(em_binary(&q, EM_DIV, i, i), "int64 / int64");
  CHECK(q && q->dtype == EM_F64, "int64 / int64 has the default dtype");
  em_release(y), em_release(q);
  y = q = NULL;
  CHECK_OK(em_set_default_dtype(EM_F32), "float32 again");
  CHECK_OK(em_binary_scalar(&y, EM_MUL, i, 0.5), "int64 * 0.5");
  CHECK(y && y->dtype == EM_F32, "float32 again");
  em_release(y), em_release(i);
  CHECK(em_promote_types(EM_I64, EM_BF16) == EM_BF16 && em_promote_types(EM_BF16, EM_F32) == EM_F32 &&
            em_promote_types(EM_BOOL, EM_I64) == EM_I64 && em_promote_types(EM_F64, EM_F32) == EM_F64,
        "promote_types as torch's");
  CHECK(!em_can_cast(EM_F32, EM_I64) && !em_can_cast(EM_I64, EM_BOOL) && em_can_cast(EM_BOOL, EM_F32) &&
            em_can_cast(EM_F64, EM_BF16),
        "can_cast as torch's");
}

/* y = sum((a * b) + a); dy/da = b + 1, dy/db = a. */
static void test_autograd(void) {
  double va[3] = {1, 2, 3}, vb[3] = {4, 5, 6};
  em_tensor *a = from(1, (int64_t[]){3}, va), *b = from(1, (int64_t[]){3}, vb);
  em_set_requires_grad(a, true);
  em_set_requires_grad(b, true);
  em_tensor *ab = NULL, *s = NULL, *y = NULL;
  CHECK_OK(em_mul(&ab, a, b), "mul records");
  CHECK_OK(em_add(&s, ab, a), "add records");
  CHECK_OK(em_sum(&y, s, 0, NULL, false), "sum records");
  CHECK(y && y->grad_fn && y->requires_grad, "the result has a grad_fn");
  CHECK_OK(em_backward(y, NULL, true), "backward from a scalar");
  CHECK(a->grad && at(a->grad, 0) == 5 && at(a->grad, 2) == 7, "grad of a is b + 1");
  CHECK(b->grad && at(b->grad, 1) == 2, "grad of b is a");
  CHECK_OK(em_backward(y, NULL, false), "a second backward with the retained graph");
  CHECK(a->grad && at(a->grad, 0) == 10, "gradients accumulate");
  CHECK_ERR(em_backward(y, NULL, false), EM_ERR_AUTOGRAD, "already freed", "a third backward on a freed graph");
  CHECK_ERR(em_backward(s, NULL, false), EM_ERR_AUTOGRAD, "only for scalar outputs",
            "backward through a non-scalar without a gradient");
  CHECK_ERR(em_set_requires_grad(s, false), EM_ERR_AUTOGRAD, "leaf", "requires_grad on a non-leaf");

  bool prev = em_set_grad_enabled(false);
  em_tensor *z = NULL;
  CHECK_OK(em_mul(&z, a, b), "mul under no_grad");
  CHECK(z && !z->grad_fn && !z->requires_grad, "no graph is recorded under no_grad");
  em_set_grad_enabled(prev);
  em_tensor *d = NULL;
  CHECK_OK(em_detach(&d, a), "detach");
  CHECK(d && !d->requires_grad && d->storage == a->storage, "detach shares storage without grad");
  em_release(d);
  em_release(z);
  em_release(y);
  em_release(s);
  em_release(ab);

  /* A long chain is released without recursion. */
  em_tensor *x = em_retain(a);
  bool ok = true;
  for (int i = 0; i < 100000 && ok; i++) {
    em_tensor *nx = NULL;
    ok = em_binary_scalar(&nx, EM_MUL, x, 1.0) == EM_OK;
    em_release(x);
    x = nx;
  }
  CHECK(ok, "a 100,000-op chain builds");
  em_tensor *sx = NULL;
  CHECK_OK(em_sum(&sx, x, 0, NULL, false), "sum of the chain");
  em_tensor *old = a->grad;
  a->grad = NULL;
  em_release(old);
  CHECK_OK(em_backward(sx, NULL, false), "backward through 100,000 nodes");
  CHECK(a->grad && at(a->grad, 1) == 1, "its gradient is right");
  em_release(sx);
  em_release(x);
  em_release(a);
  em_release(b);
}

static void test_views_grad(void) {
  double v[6] = {1, 2, 3, 4, 5, 6};
  em_tensor *a = from(2, (int64_t[]){2, 3}, v);
  em_set_requires_grad(a, true);
  em_tensor *t = NULL, *n = NULL, *e = NULL, *y = NULL, *w = NULL, *p = NULL;
  em_transpose(&t, a, 0, 1);           /* [3,2] */
  em_narrow(&n, t, 0, 1, 2);           /* rows 2..3 of t: a[:,1:3]^T */
  em_unsqueeze(&e, n, 0);              /* [1,2,2] */
  double wv[4] = {1, 10, 100, 1000};
  w = from(2, (int64_t[]){2, 2}, wv);
  em_mul(&p, e, w);
  em_sum(&y, p, 0, NULL, false);
  CHECK_OK(em_backward(y, NULL, false), "backward through transpose, narrow, unsqueeze");
  /* d y / d a[i][j] = w[j-1][i] for j >= 1, else 0. */
  CHECK(a->grad && at(a->grad, 0) == 0 && at(a->grad, 1) == 1 && at(a->grad, 2) == 100 &&
        at(a->grad, 3) == 0 && at(a->grad, 4) == 10 && at(a->grad, 5) == 1000,
        "view gradients land in the right places");
  em_release(y); em_release(p); em_release(w); em_release(e); em_release(n); em_release(t);
  em_release(a);
}

int main(void) {
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  test_plugins();
  test_views();
  test_creation_errors();
  test_default_dtype();
  test_autograd();
  test_views_grad();
  test_variant_check();
  test_plugin_records_stay();
  return tap_done();
}
