/*
** test_grad_hook.c -- the gradient-ready hook of the autograd engine
** (em_set_grad_ready_hook), from C: each leaf is reported once per pass,
** after its last contribution, with its final gradient; the end of the
** pass is reported once; a failing hook stops the backward with its status.
** Then the gradient hook (em_set_grad_hook, t:register_hook's base): a
** node's whole output gradient before its backward, a leaf's summed
** gradient of the pass before .grad, replacements, and a bad replacement.
*/
#include "ember.h"
#include "tap.h"

typedef struct log_t {
  em_tensor *leaves[8];
  double grad_at_call[8];
  int n, ends, fail_at;
} log_t;

static em_status record(em_tensor *leaf, void *ud) {
  log_t *l = ud;
  if (!leaf) {
    l->ends++;
    return EM_OK;
  }
  if (l->n < 8) {
    l->leaves[l->n] = leaf;
    double v = 0;
    if (leaf->grad) em_item(leaf->grad, &v);
    l->grad_at_call[l->n] = v;
  }
  l->n++;
  if (l->fail_at && l->n == l->fail_at) return em_error(EM_ERR_ARG, "hook: stop here");
  return EM_OK;
}

/* The gradient hook: logs each call; doubles the gradient of `target`
** (a node or a leaf); `bad` replaces it with a wrongly shaped one. */
typedef struct ghook_t {
  em_node *target_node;
  em_tensor *target_leaf;
  double seen[8];
  int n, bad;
} ghook_t;

static em_status ghook(em_node *node, em_tensor *leaf, em_tensor **g, void *ud) {
  ghook_t *h = ud;
  if ((node && node != h->target_node) || (leaf && leaf != h->target_leaf)) return EM_OK;
  double v = 0;
  em_item(*g, &v);
  if (h->n < 8) h->seen[h->n] = v;
  h->n++;
  em_tensor *r = NULL;
  em_status s;
  if (h->bad) {
    int64_t two[1] = {2};
    s = em_full(&r, 1, two, 1.0, (*g)->dtype, (*g)->device);
  } else {
    s = em_clone(&r, *g);
    if (s == EM_OK) s = em_mul_scalar_(r, 2.0);
  }
  if (s) return s;
  em_release(*g);
  *g = r;
  return EM_OK;
}

int main(void) {
  em_device cpu;
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  int64_t one[1] = {1};
  em_tensor *a = NULL, *b = NULL, *t1 = NULL, *t2 = NULL, *y = NULL;
  em_full(&a, 1, one, 3.0, EM_F64, cpu);
  em_full(&b, 1, one, 5.0, EM_F64, cpu);
  em_set_requires_grad(a, true);
  em_set_requires_grad(b, true);
  /* y = a*b + a*a: a gets two contributions (b + 2a = 11), b one (a = 3) */
  em_mul(&t1, a, b);
  em_mul(&t2, a, a);
  em_add(&y, t1, t2);
  log_t l = {0};
  em_set_grad_ready_hook(record, &l);
  CHECK_OK(em_backward(y, NULL, true), "backward with a hook");
  CHECK(l.n == 2, "each leaf is reported once");
  CHECK(l.ends == 1, "the end of the pass is reported once");
  int ia = l.leaves[0] == a ? 0 : 1;
  CHECK(l.leaves[0] != l.leaves[1], "both leaves, no repeats");
  CHECK(l.grad_at_call[ia] == 11.0, "a is reported with its whole gradient (both contributions)");
  CHECK(l.grad_at_call[1 - ia] == 3.0, "b is reported with its gradient");

  log_t f = {.fail_at = 1};
  em_set_grad_ready_hook(record, &f);
  CHECK_ERR(em_backward(y, NULL, true), EM_ERR_ARG, "stop here", "a failing hook stops the backward with its status");
  CHECK(f.ends == 0, "no end-of-pass call after a failure");

  log_t leaf_root = {0};
  em_set_grad_ready_hook(record, &leaf_root);
  CHECK_OK(em_backward(a, NULL, false), "backward from a leaf");
  CHECK(leaf_root.n == 1 && leaf_root.leaves[0] == a && leaf_root.ends == 1, "a leaf root is reported, then the end");

  em_set_grad_ready_hook(NULL, NULL);

  /* y = a*b + a*a again: the node of t2 = a*a gets dy/dt2 = 1, doubled to
  ** 2, so a gets b + 2 * 2a = 17; a's own hook sees that sum once */
  ghook_t gn = {.target_node = t2->grad_fn};
  em_set_grad_hook(ghook, &gn);
  em_release(a->grad);
  a->grad = NULL;
  CHECK_OK(em_backward(y, NULL, true), "backward with a node gradient hook");
  double ga = 0;
  em_item(a->grad, &ga);
  CHECK(gn.n == 1 && gn.seen[0] == 1.0, "the node's hook sees its whole output gradient once");
  CHECK(ga == 17.0, "the doubled gradient flows on into the node's backward");
  ghook_t gl = {.target_leaf = a};
  em_set_grad_hook(ghook, &gl);
  em_release(a->grad);
  a->grad = NULL;
  CHECK_OK(em_backward(y, NULL, true), "backward with a leaf gradient hook");
  em_item(a->grad, &ga);
  CHECK(gl.n == 1 && gl.seen[0] == 11.0, "a leaf's hook sees the sum of its two contributions once");
  CHECK(ga == 22.0, "the leaf's replaced gradient is what goes into .grad");
  ghook_t gb = {.target_leaf = a, .bad = 1};
  em_set_grad_hook(ghook, &gb);
  CHECK_ERR(em_backward(y, NULL, true), EM_ERR_AUTOGRAD, "gradient hook returned [2]",
            "a replacement of another shape is an error naming the shapes");
  em_set_grad_hook(NULL, NULL);

  log_t none = {0};
  CHECK_OK(em_backward(y, NULL, false), "backward after the hook is removed");
  CHECK(none.n == 0, "no calls without a hook");
  em_release(a);
  em_release(b);
  em_release(t1);
  em_release(t2);
  em_release(y);
  return tap_done();
}
