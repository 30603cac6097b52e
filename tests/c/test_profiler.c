/*
** test_profiler.c -- the profiler from C (em_profiler_*): a known program
** gives the expected spans, kernels of a backward sit in their node's
** span inside the pass's, bytes and FLOPs of a product, ranges nest,
** nothing is recorded when off, a second start is refused, and a span
** still open at stop is closed. Runs under valgrind in .ci (label
** "valgrind"), which checks the profiler's buffers.
*/
#include "ember.h"
#include "tap.h"

/* Spans named `name` (in the backward pass or not; -1: either). */
static int count(const char *name, int backward) {
  int n = 0;
  for (int64_t i = 0; i < em_profiler_count(); i++) {
    const em_prof_event *e = em_profiler_event(i);
    if (strcmp(e->name, name) == 0 && (backward < 0 || e->backward == (backward == 1))) n++;
  }
  return n;
}

static const em_prof_event *find(const char *name, int backward) {
  for (int64_t i = 0; i < em_profiler_count(); i++) {
    const em_prof_event *e = em_profiler_event(i);
    if (strcmp(e->name, name) == 0 && e->backward == (backward == 1)) return e;
  }
  return NULL;
}

int main(void) {
  em_device cpu;
  if (em_cpu_device(&cpu) != EM_OK) {
    printf("not ok 1 - cpu backend: %s\n0 passed, 1 failed\n", em_error_message());
    return 1;
  }
  int64_t sa[2] = {4, 3}, sw[2] = {3, 2};
  em_tensor *x = NULL, *w = NULL, *y = NULL, *r = NULL, *s = NULL;
  em_full(&x, 2, sa, 0.5, EM_F32, cpu);
  em_full(&w, 2, sw, 0.25, EM_F32, cpu);
  em_set_requires_grad(w, true);

  CHECK(!em_profiler_enabled(), "off at first");
  CHECK_OK(em_profiler_start(), "start");
  CHECK(em_profiler_enabled(), "on after start");
  CHECK_ERR(em_profiler_start(), EM_ERR_ARG, "already running", "a second start is refused");
  CHECK_OK(em_matmul(&y, x, w), "matmul");
  CHECK_OK(em_unary(&r, EM_RELU, y, 0, 0), "relu");
  CHECK_OK(em_sum(&s, r, 0, NULL, false), "sum");
  CHECK_OK(em_backward(s, NULL, false), "backward");
  em_profiler_stop();
  CHECK(!em_profiler_enabled(), "off after stop");

  CHECK(count("gemm", 0) == 1, "one product forward");
  CHECK(count("gemm", 1) == 1, "one product backward (only w wants a gradient)");
  CHECK(count("relu", 0) == 1 && count("relu_grad", 1) == 1, "relu and its derivative");
  CHECK(count("backward", 1) == 1, "one span for the pass");
  CHECK(count("matmul backward", 1) == 1, "one span for matmul's node");
  const em_prof_event *g = find("gemm", 1);
  CHECK(g && g->parent >= 0 && strcmp(em_profiler_event(g->parent)->name, "matmul backward") == 0,
        "the backward product sits in matmul's node span");
  const em_prof_event *node = g ? em_profiler_event(g->parent) : NULL;
  CHECK(node && node->parent >= 0 && strcmp(em_profiler_event(node->parent)->name, "backward") == 0,
        "the node span sits in the pass's span");
  CHECK(node && node->dur_ns >= g->dur_ns && g->dur_ns >= 0, "a parent lasts at least as long as its child");
  const em_prof_event *f = find("gemm", 0);
  CHECK(f && f->flops == 2.0 * 4 * 2 * 3, "the product's FLOPs are 2mnk");
  CHECK(f && f->bytes == (4 * 3 + 3 * 2 + 4 * 2) * 4, "the product's bytes: A, B and C once each");
  CHECK(f && f->impl && f->impl[0] && f->device && strcmp(f->device, "cpu") == 0,
        "the product names what computed it and the device");
  CHECK(em_profiler_dropped() == 0, "nothing dropped");

  /* nothing is recorded when off */
  const int64_t n = em_profiler_count();
  em_tensor *z = NULL;
  CHECK_OK(em_unary(&z, EM_EXP, x, 0, 0), "an op with the profiler off");
  CHECK(em_profiler_count() == n, "no span recorded when off");
  em_release(z);

  /* ranges nest around kernels; one left open ends at stop */
  CHECK_OK(em_profiler_start(), "start again");
  CHECK(em_profiler_count() == 0, "a new run starts empty");
  CHECK_OK(em_profiler_push("outer"), "push");
  CHECK_OK(em_unary(&z, EM_NEG, x, 0, 0), "neg inside the range");
  em_profiler_pop();
  CHECK_OK(em_profiler_push("left open"), "push without pop");
  em_profiler_stop();
  const em_prof_event *neg = find("neg", 0);
  CHECK(neg && neg->parent >= 0 && strcmp(em_profiler_event(neg->parent)->name, "outer") == 0 &&
            em_profiler_event(neg->parent)->kind == EM_PROF_RANGE,
        "a kernel sits in the range around it");
  const em_prof_event *open = find("left open", 0);
  CHECK(open && open->dur_ns >= 0, "a range still open at stop ends there");
  em_profiler_pop(); /* after stop: does nothing */
  CHECK_OK(em_profiler_push("ignored"), "push while off is a no-op");
  CHECK(count("ignored", -1) == 0, "nothing recorded by it");

  em_release(z);
  em_release(x);
  em_release(w);
  em_release(y);
  em_release(r);
  em_release(s);
  return tap_done();
}
