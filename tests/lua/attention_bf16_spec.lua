-- The fused CPU attention kernel in bfloat16 (backends/cpu/cpu_attention.c,
-- cpu_bgemm.c): every declared variant and mask kind against the float32
-- kernel on the same bfloat16-rounded inputs and tables, forward and every
-- gradient; the fused route taken (never silently composed), also under
-- ember.autocast; the product path named by ember.cpu_info(). ctest runs
-- this file again with oneDNN capped (ONEDNN_MAX_CPU_ISA=AVX512_CORE and
-- AVX2), which sends the products to the plain path, and with
-- EMBER_CPU_BF16_DOT=amx_emulated: the AMX driver (packing, tiles, edges)
-- on cpu_bgemm_amx.c's C model of the tile instructions.
--
-- Tolerances. Inputs are rounded to bfloat16 once, for both kernels, so
-- the scores (exact products of bfloat16 values, float32 sums) agree to
-- float32 rounding. What differs: the probabilities are rounded to
-- bfloat16 before P V (each within 2^-9 relative), and so is Shaw's P
-- summed by table row before its rel_v product, and the output is rounded
-- once (2^-9). Since out_i = sum_j p_ij v_j with sum_j p_ij <= 1:
--   |out_bf16 - out_f32| <= 2^-9 (max|v| + max|rel_v|) + 2^-9 max|out|
--                        <= 2^-8 (max|v| + max|rel_v|)             (OUT_TOL)
-- Gradients go through two or three such roundings (the P and dS operands
-- of the products, D = rowsum(dO * O) from the rounded output, the final
-- rounding), each a sum over up to L terms whose rounding errors have
-- random signs: their error is ~2^-9 sqrt(L) times a typical term, the
-- gradient itself ~sqrt(L) times a term, so relative to its largest
-- magnitude a gradient stays within a few 2^-9; measured up to 2^-7 on
-- these cases; GRAD_TOL = 2^-5 leaves 4x room.
local ember = require "ember"

local OUT_TOL, GRAD_TOL = 2 ^ -8, 2 ^ -5

local VARIANTS = {
  {attention = "standard"},
  {attention = "local", window_left = 20, window_right = 9},
  {attention = "local", mode = "block", block_size = 16, local_blocks = 1, global_tokens = 5},
  {attention = "relpos", mode = "shaw", max_relative_position = 8},
  {attention = "relpos", mode = "t5", num_buckets = 16, max_distance = 40},
  {attention = "relpos", mode = "alibi"},
}

local label = require "tests.lua.helpers.attention_label"

local bf16_pair = require "tests.lua.helpers.bf16_pair"
local bfround = bf16_pair.round

-- a float32 and a bfloat16 instance with the same (bfloat16-representable) tables
local function make_pair(spec, H, dk, dv)
  local o = {heads = H, head_dim = dk, v_head_dim = dv}
  for k, v in pairs(spec) do o[k] = v end
  return bf16_pair.make(o)
end

local function absmax(t) return t:to("float32"):abs():max():item() end
local function err(got, want) return (got:to("float32") - want):abs():max():item() end

-- out and the gradients of q, k, v and the tables for one module and dtype
local function run(a, p, opts, dtype)
  local q = p.q:to(dtype):detach():requires_grad_()
  local k = p.k:to(dtype):detach():requires_grad_()
  local v = p.v:to(dtype):detach():requires_grad_()
  a:zero_grad()
  local before = ember.attention_routes()
  ember.manual_seed(11) -- the same dropout draws in both dtypes
  local out = a:forward(q, k, v, opts)
  ;(out * p.w:to(dtype)):sum():backward()
  local after = ember.attention_routes()
  local r = {out = out:detach(), q = q.grad, k = k.grad, v = v.grad,
             fused = after.fused - before.fused, composed = after.composed - before.composed}
  for i, t in ipairs(a:parameters()) do r["table" .. i] = t.grad end
  return r
end

local function mask_sets(B, Lq, Lk)
  local pad = ember.zeros({B, Lk}, {dtype = "int64"})
  ember.no_grad(function() pad:narrow(2, Lk - 20, 21):narrow(1, 1, 1):fill_(1) end)
  local add = bfround(ember.randn({1, 1, Lq, Lk}))
  return {
    {name = "none"},
    {name = "causal", causal = true},
    {name = "key padding", key_padding_mask = pad:eq(1)},
    {name = "bool mask + causal", attn_mask = ember.rand({Lq, Lk}):gt(0.2), causal = true},
    {name = "float mask", attn_mask = add, bf16_mask = true},
    {name = "float32 mask on bfloat16", attn_mask = add},
    {name = "dropout", dropout = 0.25, training = true},
  }
end

describe("bfloat16 fused attention against the float32 kernel", function()
  for _, spec in ipairs(VARIANTS) do
    for _, shape in ipairs({{Lq = 200, Lk = 200, dk = 16, dv = 24}, {Lq = 70, Lk = 260, dk = 13, dv = 7}}) do
      it(string.format("%s Lq=%d Lk=%d dk=%d dv=%d: values and every gradient, every mask", label(spec),
                       shape.Lq, shape.Lk, shape.dk, shape.dv), function()
        ember.manual_seed(1)
        local B, H = 2, 3
        local a32, abf = make_pair(spec, H, shape.dk, shape.dv)
        local p = {q = bfround(ember.randn(B, H, shape.Lq, shape.dk)), k = bfround(ember.randn(B, H, shape.Lk, shape.dk)),
                   v = bfround(ember.randn(B, H, shape.Lk, shape.dv)), w = bfround(ember.randn(B, H, shape.Lq, shape.dv))}
        local vscale = absmax(p.v)
        for _, t in ipairs(a32:parameters()) do if t.shape[2] == shape.dv then vscale = vscale + absmax(t) end end
        for _, m in ipairs(mask_sets(B, shape.Lq, shape.Lk)) do
          local o32 = {causal = m.causal, key_padding_mask = m.key_padding_mask, attn_mask = m.attn_mask, dropout = m.dropout}
          local obf = {causal = m.causal, key_padding_mask = m.key_padding_mask, dropout = m.dropout,
                       attn_mask = m.bf16_mask and m.attn_mask:to("bfloat16") or m.attn_mask}
          a32:train(m.training == true); abf:train(m.training == true)
          local want, got = run(a32, p, o32, "float32"), run(abf, p, obf, "bfloat16")
          local where = label(spec) .. ", " .. m.name
          assert(got.fused == 1 and got.composed == 0,
                 string.format("%s: bfloat16 ran fused %d, composed %d times", where, got.fused, got.composed))
          assert.are.equal("bfloat16", got.out.dtype)
          local e = err(got.out, want.out)
          assert(e <= OUT_TOL * vscale, string.format("%s: out off by %.3g > %.3g", where, e, OUT_TOL * vscale))
          for key, ref in pairs(want) do
            if key ~= "out" and key ~= "fused" and key ~= "composed" then
              assert(got[key], where .. ": no gradient " .. key)
              assert.are.equal("bfloat16", got[key].dtype)
              local ge, gs = err(got[key], ref), math.max(absmax(ref), 1e-3)
              assert(ge <= GRAD_TOL * gs, string.format("%s: d%s off by %.3g (scale %.3g)", where, key, ge, gs))
            end
          end
        end
      end)
    end
  end

  it("a query row that sees no key gets zeros, as in float32", function()
    local a = ember.Attention({heads = 1, head_dim = 8, dtype = "bfloat16"})
    local q, k, v = ember.randn(1, 1, 5, 8):to("bfloat16"), ember.randn(1, 1, 5, 8):to("bfloat16"), ember.randn(1, 1, 5, 8):to("bfloat16")
    local out = a(q, k, v, {key_padding_mask = ember.ones({1, 5}, {dtype = "bool"})})
    assert.are.equal(0, out:to("float32"):abs():max():item())
  end)

  it("a float32 attn_mask beside bfloat16 q: the weights too (the composed route casts it)", function()
    local a = ember.Attention({heads = 2, head_dim = 8, dtype = "bfloat16"})
    ember.manual_seed(4)
    local q, k, v = ember.randn(2, 2, 5, 8):bfloat16(), ember.randn(2, 2, 5, 8):bfloat16(), ember.randn(2, 2, 5, 8):bfloat16()
    local mask = ember.randn(5, 5)
    local fused = a(q, k, v, {attn_mask = mask})
    local out, w = a(q, k, v, {attn_mask = mask, need_weights = true})
    assert.are.equal("bfloat16", out.dtype)
    assert.are.same({2, 2, 5, 5}, w.shape)
    assert.is_true((out:float() - fused:float()):abs():max():item() < 0.05)
    assert.is_true((w:float():sum(-1) - 1):abs():max():item() < 0.02)
  end)
end)

describe("bfloat16 attention under ember.autocast", function()
  for _, spec in ipairs(VARIANTS) do
    it(label(spec) .. " in MultiHeadAttention: fused in bfloat16, float32 gradients close to float32's", function()
      local function module()
        ember.manual_seed(5)
        local o = {d_model = 32, heads = 4}
        for k, v in pairs(spec) do o[k] = v end
        return ember.MultiHeadAttention(o)
      end
      local m32, mbf = module(), module()
      local x = ember.randn(2, 90, 32)
      local y32 = m32(x, {causal = true})
      ;(y32 * y32):sum():backward()
      local before = ember.attention_routes()
      local ybf = ember.autocast("bfloat16", function() return mbf(x, {causal = true}) end)
      local after = ember.attention_routes()
      assert(after.fused == before.fused + 1 and after.composed == before.composed,
             label(spec) .. ": under autocast the attention was not the fused kernel")
      local yf = ybf:to("float32")
      ;(yf * yf):sum():backward()
      local e = err(yf, y32) / absmax(y32)
      assert(e < 2 ^ -5, string.format("%s: output off by %.3g relative", label(spec), e))
      local p32, pbf = m32:parameters(), mbf:parameters()
      -- the key projection's bias has a zero gradient in exact arithmetic
      -- (softmax ignores a shift of a row): scales floor at 1/16 of the largest
      local gmax = 0
      for i = 1, #p32 do gmax = math.max(gmax, absmax(p32[i].grad)) end
      for i = 1, #p32 do
        assert.are.equal("float32", pbf[i].dtype)
        assert.are.equal("float32", pbf[i].grad.dtype)
        local ge = err(pbf[i].grad, p32[i].grad) / math.max(absmax(p32[i].grad), gmax / 16)
        assert(ge < 2 ^ -4, string.format("%s: parameter %d gradient off by %.3g relative", label(spec), i, ge))
      end
    end)
  end

  it("the attention call itself returns bfloat16 from float32 inputs", function()
    local a = ember.Attention({heads = 2, head_dim = 8})
    local q = ember.randn(1, 2, 10, 8)
    local before = ember.attention_routes()
    local out = ember.autocast("bfloat16", function() return a(q, q, q) end)
    assert.are.equal("bfloat16", out.dtype)
    assert.are.equal(before.fused + 1, ember.attention_routes().fused)
  end)

  it("a variant with its own kernels (linear) runs in float32 under autocast", function()
    local ok = pcall(ember.attention_variants, "linear")
    if not ok then return pending("the linear variant is not loaded") end
    local a = ember.Attention({attention = "linear", heads = 2, head_dim = 8})
    local q = ember.randn(1, 2, 10, 8):to("bfloat16")
    local out = ember.autocast("bfloat16", function() return a(q, q, q) end)
    assert.are.equal("float32", out.dtype)
    assert.has_error(function() a(q, q, q) end) -- and bfloat16 outside autocast is refused
  end)
end)

describe("the bfloat16 product path", function()
  it("ember.cpu_info names it: amx where the CPU has AMX-BF16, avx512_bf16 where it has that (oneDNN not capped below, EMBER_CPU_BF16_DOT not plain), else plain; amx emulated when asked", function()
    local line = ember.cpu_info().bfloat16
    local f = io.open("/proc/cpuinfo")
    local flags = f and f:read("a") or ""
    if f then f:close() end
    local cap = os.getenv("ONEDNN_MAX_CPU_ISA")
    local force = os.getenv("EMBER_CPU_BF16_DOT")
    local has = flags:find("avx512_bf16", 1, true) ~= nil and (cap == nil or cap == "" or cap:find("BF16") or cap:find("AMX"))
      and force ~= "plain"
    local amx = has and flags:find("amx_bf16", 1, true) ~= nil and (cap == nil or cap == "" or cap:find("AMX"))
      and force ~= "avx512_bf16"
    local want = force == "amx_emulated" and "attention: amx emulated (" or amx and "attention: amx (tdpbf16ps"
      or has and "attention: avx512_bf16" or "attention: plain"
    assert.truthy(line:find(want, 1, true), line .. " (expected " .. want .. ")")
    if has and not amx and force ~= "amx_emulated" then -- and why not AMX
      assert.truthy(line:find("no amx: ", 1, true), line)
    end
  end)
end)
