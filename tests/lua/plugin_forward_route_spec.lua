-- A C variant with kernels of its own (plugins/README.md, "Route 1: forward
-- + backward"), dropped into a folder as a researcher does: compiled here
-- with the guide's command into a temporary folder on EMBER_PLUGIN_PATH and
-- used by name. A dilated pattern (query p sees keys j with (p - j) %
-- dilation == 0) is held to a dense reference of ember ops (causal, key
-- padding, GQA through MultiHeadAttention, cached decoding, float64
-- gradcheck) and to the checker; a backward that hands back gradients that
-- are not its inputs' is refused naming the plugin, or its extras dropped.
-- Each case runs in its own `ember` process (plugins load once a process).
local build = os.getenv("EMBER_BUILD_DIR") or "build"
local ember_bin = build .. "/bin/ember"

local shell = require "tests.lua.helpers.shell"
local sh, q = shell.run, shell.quote
local write = require("tests.lua.helpers.files").write

local have_cc = shell.have("cc", "pkg-config")

-- Host kernels in double for float32/float64; BAD_GRAD selects a faulty backward.
local SOURCE = [[
#include <ember_attention.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
static const em_attn_option_spec OPTIONS[] = {
  {.name = "dilation", .type = EM_ATTN_OPT_INT, .default_num = 2, .bounded = true, .min = 1, .max = 1e6,
   .help = "a query sees every dilation-th key back from itself"}};
static double ld(const em_tensor *t, int64_t i) {
  return t->dtype == EM_F32 ? ((const float *)em_data(t))[i] : ((const double *)em_data(t))[i];
}
static void st(em_tensor *t, int64_t i, double x) {
  if (t->dtype == EM_F32) ((float *)em_data(t))[i] = (float)x; else ((double *)em_data(t))[i] = x;
}
typedef struct { em_tensor *q, *k, *v; double *P; int64_t BH, Lq, Lk, dk, dv; double scale; } saved;
static em_status fwd(const em_attn_call *c, em_tensor **out, em_tensor **w, void **sv) {
  (void)w;
  int64_t BH = c->B * c->H, Lq = c->Lq, Lk = c->Lk, dk = c->dims.dk, dv = c->dims.dv;
  int64_t dil = em_attn_opt_int(c->options, "dilation"), sh[4] = {c->B, c->H, Lq, dv};
  if (c->q->dtype != EM_F32 && c->q->dtype != EM_F64)
    return em_error(EM_ERR_DTYPE, "dilated kernel: %s is not supported", em_dtype_name(c->q->dtype));
  em_status s = em_empty(out, 4, sh, c->q->dtype, c->q->device);
  if (s != EM_OK) return s;
  double *P = malloc((size_t)(BH * Lq * Lk) * sizeof *P);
  if (!P) return em_error(EM_ERR_OOM, "dilated kernel: out of memory");
  const uint8_t *kp = c->key_padding ? em_data(c->key_padding) : NULL;
  for (int64_t bh = 0; bh < BH; bh++)
    for (int64_t i = 0; i < Lq; i++) {
      int64_t p = i + Lk - Lq;
      double *row = P + (bh * Lq + i) * Lk, mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < Lk; j++) {
        row[j] = -INFINITY;
        if (((p - j) % dil + dil) % dil || (c->causal && j > p) || (kp && kp[bh / c->H * Lk + j])) continue;
        double a = 0;
        for (int64_t t = 0; t < dk; t++) a += ld(c->q, (bh * Lq + i) * dk + t) * ld(c->k, (bh * Lk + j) * dk + t);
        row[j] = a * c->scale, mx = fmax(mx, row[j]);
      }
      for (int64_t j = 0; j < Lk; j++) sum += row[j] = mx == -INFINITY ? 0 : exp(row[j] - mx);
      for (int64_t j = 0; j < Lk; j++) row[j] = sum > 0 ? row[j] / sum : 0;
      for (int64_t t = 0; t < dv; t++) {
        double a = 0;
        for (int64_t j = 0; j < Lk; j++) a += row[j] * ld(c->v, (bh * Lk + j) * dv + t);
        st(*out, (bh * Lq + i) * dv + t, a);
      }
    }
  saved *S = malloc(sizeof *S);
  *S = (saved){em_retain(c->q), em_retain(c->k), em_retain(c->v), P, BH, Lq, Lk, dk, dv, c->scale};
  *sv = S;
  return EM_OK;
}
static em_status bwd(void *sv, em_tensor *dout, const bool *needs, em_tensor **g) {
  saved *S = sv;
  (void)needs;
  em_dtype dt = S->q->dtype;
#ifdef BAD_GRAD
  if (dt == EM_F64) dt = EM_F32; /* the wrong dtype: a float32 gradient for float64 inputs */
#endif
  em_status s = em_zeros(&g[0], S->q->ndim, S->q->shape, dt, S->q->device);
  if (s == EM_OK) s = em_zeros(&g[1], S->k->ndim, S->k->shape, dt, S->q->device);
  if (s == EM_OK) s = em_zeros(&g[2], S->v->ndim, S->v->shape, dt, S->q->device);
#ifdef EXTRA_GRAD
  if (s == EM_OK) s = em_zeros(&g[3], S->v->ndim, S->v->shape, dt, S->q->device); /* a param it has not */
#endif
  for (int64_t bh = 0; s == EM_OK && bh < S->BH; bh++)
    for (int64_t i = 0; i < S->Lq; i++) {
      const double *P = S->P + (bh * S->Lq + i) * S->Lk;
      double dot = 0, dP[64];
      for (int64_t j = 0; j < S->Lk; j++) {
        dP[j] = 0;
        for (int64_t t = 0; t < S->dv; t++) {
          double d = ld(dout, (bh * S->Lq + i) * S->dv + t);
          dP[j] += d * ld(S->v, (bh * S->Lk + j) * S->dv + t);
          st(g[2], (bh * S->Lk + j) * S->dv + t, ld(g[2], (bh * S->Lk + j) * S->dv + t) + P[j] * d);
        }
        dot += P[j] * dP[j];
      }
      for (int64_t j = 0; j < S->Lk; j++) {
        double ds = P[j] * (dP[j] - dot) * S->scale;
        for (int64_t t = 0; t < S->dk; t++) {
          int64_t qi = (bh * S->Lq + i) * S->dk + t, kj = (bh * S->Lk + j) * S->dk + t;
          st(g[0], qi, ld(g[0], qi) + ds * ld(S->k, kj));
          st(g[1], kj, ld(g[1], kj) + ds * ld(S->q, qi));
        }
      }
    }
  return s;
}
static void free_saved(void *sv) {
  saved *S = sv;
  em_release(S->q), em_release(S->k), em_release(S->v);
  free(S->P), free(S);
}
static bool can_fwd(const em_attn_call *c) { return em_attn_on_host(c) && c->Lk <= 64; }
static const em_attention_variant V = {
  .abi_version = EM_ATTENTION_ABI_VERSION, .struct_size = sizeof(em_attention_variant),
  .name = NAME, .version = "1.0", .description = "dilated attention, own kernels",
  .caps = EM_ATTN_CAP_KEY_PADDING | EM_ATTN_CAP_CAUSAL | EM_ATTN_CAP_CROSS, .n_options = 1,
  .options = OPTIONS, .forward = fwd, .backward = bwd, .free_saved = free_saved, .can_forward = can_fwd};
EM_PLUGIN_EXPORT const em_plugin_info ember_plugin_info = {
  EM_ATTENTION_ABI_VERSION, EM_PLUGIN_ATTENTION, NAME, "1.0", "dilated attention, own kernels"};
EM_PLUGIN_EXPORT const void *ember_plugin_init(char *err, size_t errlen) {
  (void)err, (void)errlen;
  return &V;
}
]]

describe("a dropped-in variant with its own forward and backward kernels", function()
  if not have_cc then
    pending("no C compiler or pkg-config")
    return
  end
  local dir = require("tests.lua.helpers.tmpdir")()
  assert(os.execute("mkdir -p " .. q(dir .. "/good") .. " " .. q(dir .. "/bad")))
  write(dir .. "/dilated.c", SOURCE)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  -- the guide's compile command, against this build tree
  local function compile(out, defs)
    local log, rc = sh(("cc -std=c11 -shared -fPIC -Wall -Wextra -Werror %s -o %s %s "
      .. "$(PKG_CONFIG_PATH=%s pkg-config --cflags --libs ember) -lm"):format(defs, q(out),
      q(dir .. "/dilated.c"), q(build)))
    assert(rc == 0, "cc failed: " .. log)
  end
  local function run(folder, chunk)
    local path = folder .. ":" .. build .. "/plugins"
    return sh(("EMBER_PLUGIN_PATH=%s EMBER_PLUGIN_PATH_ONLY=1 %s -e %s"):format(q(path), q(ember_bin), q(chunk)))
  end
  compile(dir .. "/good/ember_attn_dilated.so", [[-DNAME='"dilated"']])
  compile(dir .. "/bad/ember_attn_badgrad.so", [[-DNAME='"badgrad"' -DBAD_GRAD]])
  compile(dir .. "/bad/ember_attn_extragrad.so", [[-DNAME='"extragrad"' -DEXTRA_GRAD]])

  it("equals a dense reference of ember ops: causal, key padding, GQA, cached decoding, float64 gradcheck", function()
    local out, rc = run(dir .. "/good", [[
      local D, f64 = 3, {dtype = "float64"}
      local function ref(q, k, v, causal, kpm)
        local B, H, Lq, d = table.unpack(q.shape)
        local Hkv, Lk = k.shape[2], k.shape[3]
        k, v = k:repeat_interleave(H // Hkv, 2), v:repeat_interleave(H // Hkv, 2)
        local allow = {}
        for i = 1, Lq do
          allow[i] = {}
          for j = 1, Lk do local p = i + Lk - Lq allow[i][j] = (p - j) % D == 0 and not (causal and j > p) end
        end
        local a = ember.tensor(allow):reshape(1, 1, Lq, Lk)
        if kpm then a = ember.logical_and(a, kpm:logical_not():reshape(B, 1, 1, Lk)) end
        local s = ember.matmul(q, k:transpose(3, 4)) / math.sqrt(d)
        return ember.matmul(ember.softmax(s:masked_fill(a:logical_not(), -math.huge), -1), v)
      end
      ember.manual_seed(3)
      local att = ember.Attention{attention = "dilated", heads = 2, head_dim = 4, dilation = D, dtype = "float64"}
      local q, k, v = ember.randn(2, 2, 7, 4, f64), ember.randn(2, 2, 7, 4, f64), ember.randn(2, 2, 7, 4, f64)
      local kpm = ember.tensor{{false, false, false, false, false, true, true}, {false, false, false, false, false, false, false}}
      for _, causal in ipairs{false, true} do
        assert((att(q, k, v, {causal = causal}) - ref(q, k, v, causal)):abs():max():item() < 1e-12)
        assert(ember.autograd.gradcheck(function(a, b, c) return att(a, b, c, {causal = causal}) end,
          {q:requires_grad_(), k:requires_grad_(), v:requires_grad_()}))
      end
      assert((att(q, k, v, {key_padding_mask = kpm}) - ref(q, k, v, false, kpm)):abs():max():item() < 1e-12)
      local mha = ember.nn.MultiHeadAttention{d_model = 16, heads = 4, kv_heads = 2, attention = "dilated",
                                              dilation = D, dtype = "float64", bias = false}
      local x = ember.randn(2, 9, 16, f64)
      local y = mha(x, {causal = true})
      local function heads(t, n) return t:reshape(2, 9, n, 4):transpose(2, 3) end
      local r = ref(heads(mha.q_proj(x), 4), heads(mha.k_proj(x), 2), heads(mha.v_proj(x), 2), true)
      assert((y - mha.out_proj(r:transpose(2, 3):reshape(2, 9, 16))):abs():max():item() < 1e-12)
      local cache = {}
      local outs = {mha:forward_cached(x:narrow(2, 1, 5), cache)}
      for t = 6, 9 do outs[#outs + 1] = mha:forward_cached(x:narrow(2, t, 1), cache) end
      assert((ember.cat(outs, 2) - y):abs():max():item() < 1e-12)
      assert(ember.attention_routes().forward > 0)
      print("matches")]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("matches", 1, true), out)
  end)

  it("the checker passes it once its <name>_check.lua says hides_keys (causal then checks only for leaks)", function()
    local cmd = ("EMBER_PLUGIN_PATH=%s EMBER_PLUGIN_PATH_ONLY=1 %s scripts/check_plugin.lua dilated --quick"):format(
      q(dir .. "/good:" .. build .. "/plugins"), q(ember_bin))
    local out, rc = sh(cmd)
    assert.are.equal(1, rc, out) -- its pattern hides keys causal would show: said as a failure
    assert.truthy(out:find("not ok %d+ %- causal is bottom%-right aligned.-should reach"), out)
    write(dir .. "/good/dilated_check.lua", "return {hides_keys = true}\n")
    out, rc = sh(cmd)
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("%d+ passed, 0 failed"), out)
  end)

  it("a backward whose gradient is not its input's dtype is refused naming the plugin; extras are dropped", function()
    local out, rc = run(dir .. "/bad", [[
      local f64 = {dtype = "float64"}
      local att = ember.Attention{attention = "badgrad", heads = 2, head_dim = 4, dtype = "float64"}
      local q, k, v = ember.randn(1, 2, 5, 4, f64):requires_grad_(), ember.randn(1, 2, 5, 4, f64):requires_grad_(),
        ember.randn(1, 2, 5, 4, f64):requires_grad_()
      local ok, err = pcall(function() att(q, k, v):sum():backward() end)
      print("refused", ok, err)
      print("grad", q.grad and q.grad.dtype, k.grad and k.grad.dtype)
      -- a gradient for a parameter the call does not have: dropped, not kept alive
      local extra = ember.Attention{attention = "extragrad", heads = 2, head_dim = 4, dtype = "float64"}
      local function step() extra(q, k, v):sum():backward() q.grad, k.grad, v.grad = nil, nil, nil end
      step() collectgarbage() collectgarbage()
      local before = ember.live_bytes()
      for _ = 1, 10 do step() end
      collectgarbage() collectgarbage()
      print("leaked", ember.live_bytes() - before)]])
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("refused\tfalse\t[^\n]*attention 'badgrad' backward: gradient 1 is %[1, 2, 5, 4%] float32 cpu, "
      .. "input is %[1, 2, 5, 4%] float64"), out)
    assert.truthy(out:find("grad\tnil\tnil", 1, true), out)
    assert.truthy(out:find("leaked\t0\n", 1, true), out)
  end)
end)
