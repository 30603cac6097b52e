/*
** fuzz_attn_options.c -- libFuzzer harness for the attention variants'
** option parser (em_attn_options_new) and each variant's own check():
** the input picks a loaded variant (or a built-in one declaring every kind
** of option), then option names (real ones, near misses, empty, long) with
** values of any type, including NaN, infinities and huge integers, and
** head dims. Errors must come with a message; successes must print.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "ember_attention.h"

static const em_attn_option_spec fake_specs[] = {
  {"count", EM_ATTN_OPT_INT, 4, NULL, true, 1, 64, NULL, "a bounded int"},
  {"free_int", EM_ATTN_OPT_INT, 0, NULL, false, 0, 0, NULL, "an unbounded int"},
  {"scale", EM_ATTN_OPT_FLOAT, 0.5, NULL, true, 0, 1, NULL, "a bounded float"},
  {"flag", EM_ATTN_OPT_BOOL, 0, NULL, false, 0, 0, NULL, "a bool"},
  {"mode", EM_ATTN_OPT_STRING, 0, "a", false, 0, 0, "a|bb|ccc", "a choice"},
  {"label", EM_ATTN_OPT_STRING, 0, NULL, false, 0, 0, NULL, "any string"},
};
static em_attention_variant fake;

static const em_attention_variant *variants[16];
static int nvariants;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  em_init();
  fake.abi_version = EM_ATTENTION_ABI_VERSION;
  fake.struct_size = sizeof fake;
  fake.name = "fuzzfake";
  fake.n_options = (int)(sizeof fake_specs / sizeof fake_specs[0]);
  fake.options = fake_specs;
  variants[nvariants++] = &fake;
  static const char *const names[] = {"standard", "local", "linear", "relpos", "example"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const em_attention_variant *v;
    if (em_attention_find(names[i], &v) == EM_OK) variants[nvariants++] = v;
  }
  return 0;
}

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;

static int byte(reader *r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  const em_attention_variant *v = variants[byte(&r) % nvariants];
  int n = byte(&r) % 9;
  const char *names[8];
  em_attn_value values[8];
  char strs[8][2][24]; /* per option: a made-up name and a string value */
  for (int i = 0; i < n; i++) {
    int k = byte(&r);
    const em_attn_option_spec *spec = NULL;
    if (v->n_options > 0 && k % 4 != 0) {
      spec = &v->options[(k / 4) % v->n_options];
      names[i] = spec->name;
    } else { /* a made-up name: empty, a near miss, bytes */
      int len = byte(&r) % 23;
      for (int j = 0; j < len; j++) strs[i][0][j] = (char)(byte(&r) % 2 ? 'a' + byte(&r) % 26 : byte(&r));
      strs[i][0][len] = '\0';
      names[i] = strs[i][0];
    }
    int t = byte(&r);
    values[i].type = (em_attn_opt_type)(t % 4 + 1);
    if (spec && t % 8 >= 2) values[i].type = spec->type; /* mostly the right type: reach check() */
    int kind = byte(&r) % 6;
    uint64_t bits = 0;
    for (int j = 0; j < 8; j++) bits = bits << 8 | (uint64_t)byte(&r);
    double d;
    memcpy(&d, &bits, sizeof d);
    static const double special[] = {NAN, INFINITY, -INFINITY, 9.3e18, -9.3e18, 1e300};
    values[i].num = kind == 0 ? d : kind == 1 ? special[byte(&r) % 6] : (double)(int8_t)byte(&r);
    int len = byte(&r) % 23;
    for (int j = 0; j < len; j++) strs[i][1][j] = (char)byte(&r);
    strs[i][1][len] = '\0';
    values[i].str = byte(&r) % 8 ? strs[i][1] : NULL;
    if (spec && spec->choices && kind >= 3) { /* one of the choices, often */
      const char *c = spec->choices;
      for (int skip = byte(&r) % 4; skip > 0 && strchr(c, '|'); skip--) c = strchr(c, '|') + 1;
      size_t len2 = strcspn(c, "|");
      if (len2 > 22) len2 = 22;
      memcpy(strs[i][1], c, len2);
      strs[i][1][len2] = '\0';
      values[i].str = strs[i][1];
    }
    if (values[i].type == EM_ATTN_OPT_STRING && !values[i].str) values[i].str = "";
  }
  em_attn_dims dims = {byte(&r) % 17, byte(&r) % 130, byte(&r) % 130};
  em_attn_options *o = NULL;
  em_status s = em_attn_options_new(&o, v, n, names, values, byte(&r) % 4 ? &dims : NULL);
  if (s == EM_OK) {
    char buf[2048];
    em_attn_options_str(o, buf, sizeof buf);
    for (int j = 0; j < v->n_options; j++) {
      (void)em_attn_opt_num(o, v->options[j].name);
      if (v->options[j].type == EM_ATTN_OPT_STRING && !em_attn_opt_str(o, v->options[j].name)) abort();
    }
    em_attn_options_free(o);
  } else if (!em_error_message()[0]) {
    abort();
  }
  return 0;
}
