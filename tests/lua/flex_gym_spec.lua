-- The attention-gym catalogue (github.com/pytorch-labs/attention-gym) written
-- in Lua as a researcher writes it, through ember.flex_attention and
-- ember.create_block_mask: causal, sliding window, prefix LM, documents
-- (ids per call), dilated window, ALiBi, a learned relative bias, tanh
-- soft-capping, T5 buckets, Gemma's softcap + window + scale, a 2-d
-- neighbourhood on an image grid (NATTEN), block-sparse maps, and_masks /
-- or_masks with key padding, grouped heads, a learned per-head slope.
-- Each against PyTorch's float64 dense reference (tests/gen_flex_gym.py
-- writes tests/fixtures/flex_gym.lua; the functions are the same rules
-- 0-based there), out, the logsumexp (return_lse) and the gradients of q,
-- k, v and the learned tensor,
-- in float64 and float32, odd lengths, Lq ~= Lk, B > 1; longer rows (several
-- kernel tiles) against the same rules evaluated densely; bfloat16 under
-- autocast near float32; nn.MultiHeadAttention with a drop-in variant file
-- (EMBER_PLUGIN_PATH) trained three AdamW steps against PyTorch; and the
-- mistakes a user makes, named at their line.
local ember = require "ember"
local nn = require "ember.nn"
local flex = require "ember.flex"
local parity = require "tests.lua.helpers.parity"
local tmpdir = require "tests.lua.helpers.tmpdir"
local shell_quote = require("tests.lua.helpers.shell").quote
local write = require("tests.lua.helpers.files").write

local T, check = parity.T, parity.check
local fx = dofile("tests/fixtures/flex_gym.lua")
local I = { dtype = "int64" }

-- ---------------------------------------------------------------------
-- The catalogue, 1-based (the generator's functions are 0-based)
-- ---------------------------------------------------------------------

local function causal(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end

local function sliding_window(W)
  return function(b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) & (q_idx - kv_idx):le(W) end
end

local function prefix_lm(P)
  return function(b, h, q_idx, kv_idx) return kv_idx:le(P) | q_idx:ge(kv_idx) end
end

local function dilated_sliding_window(W, D)
  return function(b, h, q_idx, kv_idx)
    local d = q_idx - kv_idx
    return ember.abs(d):le(W) & (d % D):eq(0)
  end
end

local function alibi_slopes(H, dtype)
  local s = {}
  for i = 1, H do s[i] = 2 ^ (-8 * i / H) end
  return ember.tensor(s, { dtype = dtype })
end

-- transformers' _relative_position_bucket, bidirectional, of rel = k - q
local function t5_bucket(rel, num_buckets, max_distance)
  local nb = num_buckets // 2
  local ret = ember.where(rel:gt(0), nb, 0)
  local n = ember.abs(rel)
  local max_exact = nb // 2
  local large = max_exact + ember.floor(ember.log(ember.maximum(n, 1) / max_exact)
    / math.log(max_distance / max_exact) * (nb - max_exact))
  return ret + ember.where(n:lt(max_exact), n, ember.minimum(large, nb - 1))
end

local GH, GW, KH, KW = 6, 7, 3, 5 -- NATTEN: a 6 x 7 image, a 3 x 5 kernel whose centre stays inside
local function natten(b, h, q_idx, kv_idx)
  local qx, qy = (q_idx - 1) // GW, (q_idx - 1) % GW
  local kx, ky = (kv_idx - 1) // GW, (kv_idx - 1) % GW
  local cx = ember.clamp(qx, KH // 2, GH - 1 - KH // 2)
  local cy = ember.clamp(qy, KW // 2, GW - 1 - KW // 2)
  return ember.abs(cx - kx):le(KH // 2) & ember.abs(cy - ky):le(KW // 2)
end

-- name -> function(c, x, H, Lq, Lk, dtype) -> opts for flex_attention (the
-- case's tensors in dtype; x.learned: the tensor whose gradient is checked)
local VARIANTS = {
  causal = function() return { mask = causal } end,
  sliding_window = function() return { mask = sliding_window(6) } end,
  prefix_lm = function() return { mask = prefix_lm(9) } end,
  dilated_sliding_window = function() return { mask = dilated_sliding_window(8, 2) } end,
  alibi = function(c, x, H, Lq, Lk, dtype)
    local slopes = alibi_slopes(H, dtype)
    return { score = function(score, b, h, q_idx, kv_idx) return score + slopes[h] * (kv_idx - q_idx) end }
  end,
  alibi_causal = function(c, x, H, Lq, Lk, dtype)
    local slopes = alibi_slopes(H, dtype)
    return { mask = causal,
      score = function(score, b, h, q_idx, kv_idx) return score + slopes[h] * (kv_idx - q_idx) end }
  end,
  relative_bias = function(c, x, H, Lq, Lk)
    local rel = x.rel
    return { score = function(score, b, h, q_idx, kv_idx) return score + rel[h][q_idx - kv_idx + Lk] end }
  end,
  tanh_softcap = function()
    return { score = function(score) return 1.5 * ember.tanh(score / 1.5) end }
  end,
  t5_bias = function(c, x)
    local t5 = x.t5
    return { score = function(score, b, h, q_idx, kv_idx) return score + t5[t5_bucket(kv_idx - q_idx, 8, 20) + 1][h] end }
  end,
  gemma_softcap_window = function()
    return { scale = 0.9, mask = sliding_window(8),
      score = function(score) return 2.0 * ember.tanh(score / 2.0) end }
  end,
  learned_head_slope = function(c, x)
    local w = x.w
    return { mask = causal,
      score = function(score, b, h, q_idx, kv_idx) return score - ember.exp(w[h]) * ember.abs(q_idx - kv_idx) end }
  end,
  document = function(c, x)
    local doc = x.doc
    return { B = true, mask = function(b, h, q_idx, kv_idx) return doc[b][q_idx]:eq(doc[b][kv_idx]) end }
  end,
  causal_and_padding = function(c, x)
    local lens = x.lens
    local padding = function(b, h, q_idx, kv_idx) return kv_idx:le(lens[b]) end
    return { B = true, mask = flex.and_masks(causal, padding) }
  end,
  causal_and_padding_or_global = function(c, x)
    local lens = x.lens
    local padding = function(b, h, q_idx, kv_idx) return kv_idx:le(lens[b]) end
    local global_k = function(b, h, q_idx, kv_idx) return kv_idx:le(2) end
    local global_q = function(b, h, q_idx, kv_idx) return q_idx:le(2) end
    return { B = true, mask = flex.or_masks(flex.and_masks(causal, padding), global_k, global_q) }
  end,
  causal_padded_rows = function(c, x)
    local lens = x.lens
    return { B = true, mask = function(b, h, q_idx, kv_idx)
      return q_idx:ge(kv_idx) & kv_idx:le(lens[b]) & q_idx:le(lens[b])
    end }
  end,
  block_sparse = function(c, x)
    local blocks = x.blocks -- bool [query blocks, key blocks] of 8
    return { mask = function(b, h, q_idx, kv_idx)
      return blocks[(q_idx - 1) // 8 + 1][(kv_idx - 1) // 8 + 1] & q_idx:ge(kv_idx)
    end }
  end,
  natten_2d = function() return { mask = natten } end,
}
VARIANTS.document_1, VARIANTS.document_2 = VARIANTS.document, VARIANTS.document

local LEARNED = { rel = true, t5 = true, w = true }
local EXTRA = { doc = true, lens = true, blocks = true }

-- out and the gradients (q, k, v, the learned tensor) of one case in dtype,
-- the block mask made with BLOCK_SIZE bs
local function run_case(c, dtype, bs)
  local inp = fx.inputs[c.shape]
  local q, k, v = T(inp.q):to(dtype):requires_grad_(), T(inp.k):to(dtype):requires_grad_(),
    T(inp.v):to(dtype):requires_grad_()
  local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
  local x, learned = {}, nil
  for n in pairs(LEARNED) do
    if c[n] then
      x[n] = T(c[n]):to(dtype):requires_grad_()
      learned = n
    end
  end
  for n in pairs(EXTRA) do if c[n] then x[n] = T(c[n]) end end
  local v_ = VARIANTS[c.name](c, x, H, Lq, Lk, dtype)
  local bm = v_.mask and ember.create_block_mask(v_.mask, v_.B and B or nil, nil, Lq, Lk, { BLOCK_SIZE = bs }) or nil
  local out, lse = ember.flex_attention(q, k, v, { score_mod = v_.score, block_mask = bm, scale = v_.scale,
    enable_gqa = k.shape[2] ~= H, return_lse = true })
  ;(out * T(inp.R):to(dtype)):sum():backward()
  return { out = out, lse = lse, dq = q.grad, dk = k.grad, dv = v.grad, learned = learned and x[learned].grad,
    name = learned }
end

-- the logsumexp: -inf where the fixture's is (rows that see no key), the rest within tol
local function check_lse(lse, want, tol)
  assert.are.same(want:isinf():totable(), lse:isinf():totable())
  local fin = want:isinf():logical_not()
  check("lse", lse:masked_select(fin), want:masked_select(fin), tol)
end

describe("the attention-gym catalogue through ember.flex_attention, against PyTorch (float64, dense)", function()
  for _, c in ipairs(fx.cases) do
    it(("%s (%s): out and the gradients of q, k, v%s"):format(c.name, c.shape,
      (c.rel or c.t5 or c.w) and " and the learned tensor" or ""), function()
      for _, bs in ipairs { 128, 8 } do
        local r = run_case(c, "float64", bs)
        check("out", r.out, T(c.out), 1e-10)
        check_lse(r.lse, T(c.lse), 1e-10)
        check("dq", r.dq, T(c.dq), 1e-10)
        check("dk", r.dk, T(c.dk), 1e-10)
        check("dv", r.dv, T(c.dv), 1e-10)
        if r.name then check("d" .. r.name, r.learned, T(c["d" .. r.name]), 1e-10) end
      end
    end)
  end
end)

describe("the catalogue in float32, against the same float64 numbers", function()
  for _, c in ipairs(fx.cases) do
    it(("%s (%s)"):format(c.name, c.shape), function()
      local r = run_case(c, "float32", 16)
      assert.are.equal("float32", r.out.dtype)
      check("out", r.out, T(c.out), 2e-5)
      check_lse(r.lse, T(c.lse), 2e-5)
      check("dq", r.dq, T(c.dq), 1e-4)
      check("dk", r.dk, T(c.dk), 1e-4)
      check("dv", r.dv, T(c.dv), 1e-4)
      if r.name then check("d" .. r.name, r.learned, T(c["d" .. r.name]), 1e-4) end
    end)
  end
end)

describe("the catalogue in bfloat16 (its programs in float32 on the rounded inputs), near the float64 numbers", function()
  -- bfloat16 keeps 8 bits: out within 2^-6 of its largest value, the gradients 2^-4
  for _, c in ipairs(fx.cases) do
    it(("%s (%s)"):format(c.name, c.shape), function()
      local r = run_case(c, "bfloat16", 16)
      assert.are.equal("bfloat16", r.out.dtype)
      check("out", r.out, T(c.out), 2 ^ -6)
      check_lse(r.lse:double(), T(c.lse), 2 ^ -6)
      check("dq", r.dq, T(c.dq), 2 ^ -4)
      check("dk", r.dk, T(c.dk), 2 ^ -4)
      check("dv", r.dv, T(c.dv), 2 ^ -4)
      if r.name then check("d" .. r.name, r.learned, T(c["d" .. r.name]), 2 ^ -4) end
    end)
  end
end)

-- the same rules evaluated densely on [B, H, Lq, Lk] grids (1-based), for
-- rows longer than a kernel tile and the bool-tensor cases below
local function dense_reference(q, k, v, allowed, bias, scale)
  local H = q.shape[2]
  if k.shape[2] ~= H then k, v = k:repeat_interleave(H // k.shape[2], 2), v:repeat_interleave(H // v.shape[2], 2) end
  local s = q:matmul(k:transpose(3, 4)) * (scale or 1 / math.sqrt(q.shape[4]))
  if bias then s = s + bias end
  if allowed then s = s:masked_fill(allowed:logical_not(), -math.huge) end
  local p = s:softmax(4)
  return ember.where(p:isnan(), ember.zeros_like(p), p):matmul(v)
end

describe("ember.flex.create_mask and noop_mask, as PyTorch's", function()
  it("each catalogue mask as a dense attn_mask for scaled_dot_product_attention gives PyTorch's out", function()
    for _, c in ipairs(fx.cases) do
      local inp = fx.inputs[c.shape]
      local q, k, v = T(inp.q), T(inp.k), T(inp.v)
      local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
      local x = {}
      for n in pairs(LEARNED) do if c[n] then x[n] = T(c[n]) end end
      for n in pairs(EXTRA) do if c[n] then x[n] = T(c[n]) end end
      local v_ = VARIANTS[c.name](c, x, H, Lq, Lk, "float64")
      if v_.mask and not v_.score and c.name ~= "causal_padded_rows" then
        local m = flex.create_mask(v_.mask, v_.B and B or nil, nil, Lq, Lk)
        assert.are.same({ v_.B and B or 1, 1, Lq, Lk }, m.shape)
        assert.are.equal("bool", m.dtype)
        check(c.name, ember.scaled_dot_product_attention(q, k, v, { attn_mask = m, enable_gqa = H ~= k.shape[2] }),
          T(c.out), 1e-10)
      end
    end
  end)

  it("a score_mod's mask is where its score is not -inf; noop_mask hides nothing; bad mod_fn named", function()
    local sm = function(score, b, h, q_idx, kv_idx) return ember.where(q_idx:ge(kv_idx), score, -math.huge) end
    assert.are.same(flex.create_mask(causal, 2, 3, 4, 6):totable(), flex.create_mask(sm, 2, 3, 4, 6):totable())
    assert.is_true(flex.create_mask(flex.noop_mask, nil, nil, 5, 7):all():item())
    assert.are.equal(0, ember.create_block_mask(flex.noop_mask, nil, nil, 5, 7):sparsity())
    local raises_here = parity.raises_here
    raises_here(function() flex.create_mask(function(q_idx, kv_idx) return q_idx:ge(kv_idx) end, nil, nil, 4, 4) end,
      "ember.flex.create_mask: mod_fn must take (b, h, q_idx, kv_idx) (a mask_mod) or (score, b, h, q_idx, kv_idx) " ..
      "(a score_mod), as PyTorch's; this one takes 2 parameters")
    raises_here(function() flex.create_mask(causal, nil, nil, 4, 4, "cpu", 16) end,
      "ember.flex.create_mask: takes (mod_fn, B, H, Q_LEN, KV_LEN, device); got device and 1 more argument")
    local ids = ember.tensor({ 1, 2 }, I)
    raises_here(function() flex.create_mask(function(b, h, q_idx, kv_idx) return ids[q_idx]:eq(ids[kv_idx]) end, nil, nil, 4, 4) end,
      "ember.flex.create_mask: mask_mod: index 4 out of range for dim 1 of 'ids' (size 2; the indices run 1..4)")
  end)
end)

describe("bool tensors read by a mask are booleans (& | ~ work on them, as on PyTorch's)", function()
  local D = { dtype = "float64" }
  ember.manual_seed(11)
  local q, k, v = ember.randn({ 1, 2, 20, 4 }, D), ember.randn({ 1, 2, 20, 4 }, D), ember.randn({ 1, 2, 20, 4 }, D)
  local keep = ember.rand({ 20, 20 }):gt(0.3)
  local i, j = ember.arange(1, 21):view(20, 1), ember.arange(1, 21):view(1, 20)
  local want = keep:logical_and(i:ge(j)):logical_or(j:eq(1))

  it("a captured bool map in a mask_mod, with & and |", function()
    local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx)
      return (keep[q_idx][kv_idx] & q_idx:ge(kv_idx)) | kv_idx:eq(1)
    end, nil, nil, 20, 20, { BLOCK_SIZE = 4 })
    check("out", ember.flex_attention(q, k, v, { block_mask = bm }), dense_reference(q, k, v, want:view(1, 1, 20, 20)), 1e-12)
  end)

  it("a variant's bool buffer table and its bool per-call input", function()
    ember.attention_variant { name = "flex_gym_bool_map",
      inputs = { allow = { ndim = 2, dtype = "bool" } },
      params = function() return { { name = "keep", tensor = keep, learned = false } } end,
      mask = function(b, h, q_, k_, ctx) return (ctx.keep[q_][k_] & q_:ge(k_)) | ctx.allow[q_][k_] end }
    local att = ember.Attention { attention = "flex_gym_bool_map", heads = 2, head_dim = 4, dtype = "float64" }
    local first = j:eq(1):expand(20, 20):contiguous()
    check("out", att(q, k, v, { variant_inputs = { allow = first } }), dense_reference(q, k, v, want:view(1, 1, 20, 20)), 1e-12)
  end)
end)

describe("a researcher's mistakes, named at their line (never a crash, never a silent wrong answer)", function()
  local D = { dtype = "float64" }
  local q, k, v = ember.randn({ 1, 2, 9, 4 }, D), ember.randn({ 1, 2, 9, 4 }, D), ember.randn({ 1, 2, 9, 4 }, D)
  local raises_here = parity.raises_here

  it("a mask_mod that returns a number, not a boolean", function()
    raises_here(function() ember.create_block_mask(function(b, h, q_idx, kv_idx) return q_idx - kv_idx end, nil, nil, 9, 9) end,
      "ember.create_block_mask: mask_mod returned an int value, not a boolean")
    raises_here(function() ember.create_block_mask(function(b, h, q_idx, kv_idx) return 1 end, nil, nil, 9, 9) end,
      "ember.create_block_mask: mask_mod returned the number 1, not a boolean")
    raises_here(function()
      ember.create_block_mask(function(b, h, q_idx, kv_idx) return ember.where(q_idx:ge(kv_idx), 1.0, 0.5) end, nil, nil, 9, 9)
    end, "ember.create_block_mask: mask_mod returned a float value, not a boolean")
    -- a number-valued tensor read by the mask is not a boolean either; the bool one is
    local ids = ember.ones({ 9, 9 }, { dtype = "int64" })
    raises_here(function() ember.create_block_mask(function(b, h, q_idx, kv_idx) return ids[q_idx][kv_idx] end, nil, nil, 9, 9) end,
      "mask_mod returned an int value, not a boolean")
    local ok = ember.create_block_mask(function(b, h, q_idx, kv_idx) return ids[q_idx][kv_idx]:eq(1) end, nil, nil, 9, 9)
    assert.are.equal(0, ok:sparsity())
  end)

  it("a Lua table indexed with a traced value (`slopes[h] or 0` read 0 everywhere, silently)", function()
    local slopes = { 0.5, 0.25 }   -- ALiBi slopes kept in a Lua table, as in Python
    local cfg = { bias = { 1, 2, 3 } }
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx)
        return score + (slopes[h] or 0) * (kv_idx - q_idx) end })
    end, "the Lua table 'slopes' was indexed with a traced value")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx)
        return score + (cfg.bias[kv_idx] or 0) end })
    end, "the Lua table 'cfg.bias' was indexed with a traced value")
    -- a table read with a number stays a constant of the trace
    local ref = ember.flex_attention(q, k, v, { scale = 0.25 })
    check("numbers", ember.flex_attention(q, k, v, { score_mod = function(score) return score * slopes[1] end }), ref, 1e-12)
  end)

  it("a score_mod or mask_mod with the wrong number of parameters", function()
    -- a mask_mod given as score_mod would read score as b, b as h, ...
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(b, h, q_idx, kv_idx) return q_idx - kv_idx end })
    end, "ember.flex_attention: score_mod must take (score, b, h, q_idx, kv_idx), as PyTorch's; this one takes 4 " ..
      "parameters (b, h, q_idx, kv_idx)")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, q_idx, kv_idx) return score + (q_idx - kv_idx) end })
    end, "this one takes 3 parameters (score, q_idx, kv_idx)")
    raises_here(function()
      ember.create_block_mask(function(score, b, h, q_idx, kv_idx) return q_idx:ge(kv_idx) end, nil, nil, 9, 9)
    end, "ember.create_block_mask: mask_mod must take (b, h, q_idx, kv_idx), as PyTorch's; this one takes 5 " ..
      "parameters (score, b, h, q_idx, kv_idx)")
    raises_here(function() flex.and_masks(causal, function(q_idx, kv_idx) return q_idx:ge(kv_idx) end) end,
      "ember.flex.and_masks: argument 2 must take (b, h, q_idx, kv_idx), as PyTorch's; this one takes 2 parameters")
    -- the right number in the wrong order: q_idx and kv_idx swapped would transpose the rule
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, kv_idx, q_idx) return score + (q_idx - kv_idx) end })
    end, "ember.flex_attention: score_mod takes (score, b, h, q_idx, kv_idx), as PyTorch's; its parameter 4 is named " ..
      "'kv_idx', but Lua passes q there ('k' is parameter 5)")
    raises_here(function() ember.create_block_mask(function(h, b, q_idx, kv_idx) return q_idx:ge(kv_idx) end, 1, 2, 9, 9) end,
      "ember.create_block_mask: mask_mod takes (b, h, q_idx, kv_idx), as PyTorch's; its parameter 1 is named 'h'")
    -- the score alone, and varargs, are Lua's way and taken
    local out = ember.flex_attention(q, k, v, { score_mod = function(score) return score * 0.5 end })
    check("score alone", out, ember.flex_attention(q, k, v, { scale = 0.25 }), 1e-12)
    ember.flex_attention(q, k, v, { score_mod = function(score, ...) return score end })
  end)

  it("an empty captured tensor (no ids yet, a table of no rows) is out of range, not a crash", function()
    -- the compiled tile read element 1 of it (a bad index is clamped there, then reported by the interpreter)
    local empty = ember.zeros({ 0 }, D)
    local rows = ember.zeros({ 2, 0 }, D):requires_grad_()
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx) return score + empty[kv_idx] end })
    end, "ember.flex_attention: index 1 out of range for dim 1 of captured tensor 'empty' (size 0)")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx) return score + rows[h][kv_idx] end })
    end, "index 1 out of range for dim 2 of captured tensor 'rows' (size 0)")
  end)

  it("a variant's score or mask whose parameters are named for other places (Lua would pass them silently)", function()
    raises_here(function()
      ember.attention_variant { name = "flex_gym_bad_score", score = function(s, q, k) return s + 0.1 * (q - k) end }
    end, "attention_variant 'flex_gym_bad_score': score's parameters are (s, b, h, q, k, ctx); its parameter 2 is " ..
      "named 'q', but Lua passes b there ('q' is parameter 4): give them all in order, function(s, b, h, q, k, ctx)")
    raises_here(function()
      ember.attention_variant { name = "flex_gym_bad_mask", mask = function(q, k) return k:le(q) end }
    end, "mask's parameters are (b, h, q, k, ctx); its parameter 1 is named 'q', but Lua passes b there")
    raises_here(function() -- flex_attention's signature given to a variant (no ctx: it is q's place)
      ember.attention_variant { name = "flex_gym_bad_score2", score = function(b, h, q_idx, kv_idx) return q_idx - kv_idx end }
    end, "its parameter 1 is named 'b', but Lua passes s there ('b' is parameter 2)")
    assert.is_false(pcall(ember.attention_variants, "flex_gym_bad_score")) -- not defined
    -- names it does not know are not judged; the usual ones pass
    ember.attention_variant { name = "flex_gym_ok_names", score = function(x, _, head, qi, ki) return x + 0 * head end,
      mask = function(b, h, q_idx, kv_idx, ctx) return kv_idx:le(q_idx) end }
  end)

  it("heads of size 0 are refused by flex_attention's name, at the user's line", function()
    raises_here(function() ember.flex_attention(ember.randn({ 1, 2, 3, 0 }), ember.randn({ 1, 2, 3, 0 }), ember.randn({ 1, 2, 3, 4 }),
        { score_mod = function(score) return score end })
    end, "ember.flex_attention: the head sizes of query/key (E) and value (Ev) must be at least 1, got [1, 2, 3, 0] and [1, 2, 3, 4]")
  end)

  it("PyTorch's positional arguments are PyTorch's; anything past them is refused, not dropped", function()
    local sm = function(score) return score * 2 end
    local bm = ember.create_block_mask(causal, nil, nil, 9, 9)
    local want = ember.flex_attention(q, k, v, { score_mod = sm, block_mask = bm })
    -- flex_attention(query, key, value, score_mod, block_mask, scale, enable_gqa, return_lse)
    check("score_mod, block_mask", ember.flex_attention(q, k, v, sm, bm), want, 0)
    check("nil, block_mask", ember.flex_attention(q, k, v, nil, bm), ember.flex_attention(q, k, v, { block_mask = bm }), 0)
    check("scale", ember.flex_attention(q, k, v, nil, bm, 0.3), ember.flex_attention(q, k, v, { block_mask = bm, scale = 0.3 }), 0)
    local out, lse = ember.flex_attention(q, k, v, sm, nil, nil, false, true)
    check("return_lse", lse, select(2, ember.flex_attention(q, k, v, { score_mod = sm, return_lse = true })), 0)
    assert.are.same({ 1, 2, 9, 4 }, out.shape)
    -- trailing nils are Lua's way of leaving an argument out
    check("trailing nil", ember.flex_attention(q, k, v, { block_mask = bm }, nil), ember.flex_attention(q, k, v, bm), 0)
    raises_here(function() ember.flex_attention(q, k, v, { score_mod = sm }, bm) end,
      "ember.flex_attention: takes (query, key, value, opts) or PyTorch's positional (query, key, value, score_mod, " ..
      "block_mask, scale, enable_gqa, return_lse); got an options table and 1 more argument (argument 5 is a BlockMask)")
    raises_here(function() ember.flex_attention(q, k, v, sm, bm, 0.3, false, false, {}) end,
      "got 6 arguments after value (argument 9 is a table)")
    raises_here(function() ember.flex_attention(q, k, v, bm, sm) end,
      "ember.flex_attention: argument 4 is a block mask, so argument 5 cannot follow it (PyTorch's order: score_mod, block_mask, ...)")
    raises_here(function() ember.flex_attention(q, k, v, sm, causal) end,
      "ember.flex_attention: block_mask must be made by ember.create_block_mask, got function")
    -- create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device, BLOCK_SIZE)
    assert.are.equal(4, ember.create_block_mask(causal, nil, nil, 9, 9, "cpu", 4).BLOCK_SIZE)
    assert.are.equal(128, ember.create_block_mask(causal, nil, nil, 9, 9, "cpu").BLOCK_SIZE)
    raises_here(function() ember.create_block_mask(causal, nil, nil, 9, 9, {}, 64) end,
      "ember.create_block_mask: takes (mask_mod, B, H, Q_LEN, KV_LEN, opts) or PyTorch's positional (..., device, " ..
      "BLOCK_SIZE); got an options table and 1 more argument (argument 7 is a number)")
  end)

  it("an index out of range in a captured tensor names the tensor, the index and where", function()
    local doc = ember.tensor({ 1, 1, 2, 2, 2, 3, 3 }, I) -- 7 ids for 9 tokens
    -- made densely by create_block_mask: its own name first, no other function's
    local ok, msg = pcall(function()
      ember.create_block_mask(function(b, h, q_idx, kv_idx) return doc[q_idx]:eq(doc[kv_idx]) end, nil, nil, 9, 9)
    end)
    assert.is_false(ok)
    assert.truthy(msg:find("^[^\n]*flex_gym_spec%.lua:%d+: ember%.create_block_mask: mask_mod: index 9 out of range " ..
      "for dim 1 of 'doc' %(size 7; the indices run 1%.%.9%)$"), msg)
    raises_here(function()
      local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx) return doc[q_idx]:ge(0) end, nil, nil, 7, 7)
      ember.flex_attention(q, k, v, { block_mask = bm }) -- 9 rows: the mask is for 7
    end, "ember.flex_attention: block_mask was made for Q_LEN=7, KV_LEN=7, got query length 9 and key length 9")
    local rel = ember.randn({ 2, 9 }, D)
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx) return score + rel[h][q_idx - kv_idx + 1] end })
    end, "ember.flex_attention: index 0 out of range for dim 2 of captured tensor 'rel' (size 9) at b=1 h=1 q=1 k=2")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(score, b, h, q_idx, kv_idx) return score + rel[h + 1][kv_idx] end })
    end, "index 3 out of range for dim 1 of captured tensor 'rel' (size 2)")
  end)
end)

describe("nn.MultiHeadAttention with a drop-in variant file, trained with AdamW", function()
  local build = os.getenv("EMBER_BUILD_DIR") or "build"
  -- what a researcher saves in a folder on EMBER_PLUGIN_PATH: a learned
  -- relative bias clipped at max_distance (attention-gym's relative positional bias)
  local VARIANT = [[
local ember = require "ember"
return {
  name = "gym_relpos",
  description = "learned per-head bias of the relative position, clipped at max_distance",
  options = { { name = "max_distance", type = "int", default = 6, min = 1, max = 4096 } },
  params = function(o, dims)
    return { { name = "rel", tensor = ember.zeros(dims.heads, 2 * o.max_distance + 1), learned = true } }
  end,
  score = function(s, b, h, q, k, ctx)
    local K = ctx.options.max_distance
    return s + ctx.rel[h][ember.clamp(q - k, -K, K) + K + 1]
  end,
}
]]
  -- three AdamW steps from the fixture's weights, in float64 and float32:
  -- prints the largest relative error of the losses and of the final weights
  local TRAIN = [[
local ember, nn = require "ember", require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local m = dofile("tests/fixtures/flex_gym.lua").mha
for _, dtype in ipairs { "float64", "float32" } do
  local mha = nn.MultiHeadAttention(m.d_model, m.heads, { attention = "gym_relpos", max_distance = m.K,
    causal = true, dtype = dtype })
  local sd = {}
  for n, t in pairs(m.state) do sd[n] = parity.T(t):to(dtype) end
  mha:load_state_dict(sd)
  local opt = ember.optim.AdamW(mha:parameters(), { lr = 0.01, weight_decay = 0.05 })
  local x, R = parity.T(m.x):to(dtype), parity.T(m.R):to(dtype)
  local loss_err = 0
  for step = 1, 3 do
    opt:zero_grad()
    local loss = (mha(x) * R):sum()
    loss:backward()
    opt:step()
    loss_err = math.max(loss_err, math.abs(loss:item() - m.losses[step]) / math.abs(m.losses[step]))
  end
  -- k_proj.bias is left out: its gradient is 0 in exact arithmetic (it adds
  -- q.b to a whole row of scores), so AdamW steps on rounding noise, ember's and PyTorch's
  local w_err = 0
  local now = mha:state_dict()
  for n, t in pairs(m.final) do
    if n ~= "k_proj.bias" then w_err = math.max(w_err, parity.max_rel(now[n], parity.T(t))) end
  end
  print(("%s loss %.3e weights %.3e"):format(dtype, loss_err, w_err))
end
]]

  it("is found by name on EMBER_PLUGIN_PATH (no compiler, no definition in the script) and trains as PyTorch's", function()
    local dir = tmpdir()
    write(dir .. "/gym_relpos.lua", VARIANT)
    write(dir .. "/train.lua", TRAIN)
    local p = assert(io.popen(("EMBER_PLUGIN_PATH=%s:%s/plugins EMBER_PLUGIN_PATH_ONLY=1 %s %s 2>&1"):format(
      shell_quote(dir), shell_quote(build), shell_quote(build .. "/bin/ember"), shell_quote(dir .. "/train.lua"))))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. shell_quote(dir))
    local l64, w64 = out:match("float64 loss (%S+) weights (%S+)")
    local l32, w32 = out:match("float32 loss (%S+) weights (%S+)")
    assert(l64 and l32, out)
    assert(tonumber(l64) < 1e-10 and tonumber(w64) < 1e-10, out)
    assert(tonumber(l32) < 1e-4 and tonumber(w32) < 1e-4, out)
  end)
end)

describe("rows longer than a kernel tile (several tiles, a partial last one), against the rules evaluated densely", function()
  local D = { dtype = "float64" }
  ember.manual_seed(5)
  local B, H, Hk, Lq, Lk, E = 2, 4, 2, 150, 203, 8
  local qi = ember.arange(1, Lq + 1, I):view(1, 1, Lq, 1)
  local ki = ember.arange(1, Lk + 1, I):view(1, 1, 1, Lk)
  local slopes = alibi_slopes(H, "float64")
  local doc = ember.randint(1, 5, { B, Lk }, I):sort(2) -- one id per key, in order
  local rel = ember.randn({ H, Lq + Lk }, D)
  local cases = {
    { "sliding_window + alibi", { mask = sliding_window(40),
        score = function(score, b, h, q_idx, kv_idx) return score + slopes[h] * (kv_idx - q_idx) end },
      function() return qi:ge(ki):logical_and((qi - ki):le(40)) end,
      function() return slopes:view(1, H, 1, 1) * (ki - qi):double() end },
    { "document (ids of the last Lq keys for the queries)", { B = true,
        mask = function(b, h, q_idx, kv_idx) return doc[b][q_idx + (Lk - Lq)]:eq(doc[b][kv_idx]) end },
      function() return doc:narrow(2, Lk - Lq + 1, Lq):view(B, 1, Lq, 1):eq(doc:view(B, 1, 1, Lk)) end },
    { "dilated + relative bias", { mask = dilated_sliding_window(64, 3),
        score = function(score, b, h, q_idx, kv_idx) return score + rel[h][q_idx - kv_idx + Lk] end },
      function() local d = qi - ki; return d:abs():le(64):logical_and((d % 3):eq(0)) end,
      function() return rel:index_select(2, (qi - ki + Lk):reshape(-1)):view(1, H, Lq, Lk) end },
  }
  for _, c in ipairs(cases) do
    for _, dtype in ipairs { "float64", "float32" } do
      it(c[1] .. ", " .. dtype .. ", grouped heads", function()
        local q, k, v = ember.randn({ B, H, Lq, E }, D), ember.randn({ B, Hk, Lk, E }, D), ember.randn({ B, Hk, Lk, E }, D)
        local R = ember.randn({ B, H, Lq, E }, D)
        local qq, kk, vv = q:to(dtype):requires_grad_(), k:to(dtype):requires_grad_(), v:to(dtype):requires_grad_()
        local bm = ember.create_block_mask(c[2].mask, c[2].B and B or nil, nil, Lq, Lk, { BLOCK_SIZE = 32 })
        local out = ember.flex_attention(qq, kk, vv, { score_mod = c[2].score, block_mask = bm, enable_gqa = true })
        ;(out:double() * R):sum():backward()
        local q2, k2, v2 = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
        local ref = dense_reference(q2, k2, v2, c[3]():expand(B, H, Lq, Lk), c[4] and c[4]())
        ;(ref * R):sum():backward()
        local tol = dtype == "float64" and 1e-10 or 1e-4
        check("out", out, ref, dtype == "float64" and 1e-12 or 2e-5)
        check("dq", qq.grad, q2.grad, tol)
        check("dk", kk.grad, k2.grad, tol)
        check("dv", vv.grad, v2.grad, tol)
      end)
    end
  end
end)

describe("decoding one token at a time (Lk - Lq changes every step)", function()
  it("traces once, not once per step, and equals the full causal pass", function()
    local D = { dtype = "float64" }
    ember.manual_seed(4)
    local L = 24
    local Q, K, V = ember.randn({ 1, 2, L, 8 }, D), ember.randn({ 1, 2, L, 8 }, D), ember.randn({ 1, 2, L, 8 }, D)
    local rel = ember.randn({ 2, 2 * L }, D)
    local function score_mod(pos) -- pos: the query's position (gym's offset + q_idx), as a number or a 0-d tensor
      return function(score, b, h, q_idx, kv_idx) return score + rel[h][q_idx + pos - kv_idx + L] end
    end
    local full = ember.flex_attention(Q, K, V, { score_mod = score_mod(0),
      block_mask = ember.create_block_mask(causal, nil, nil, L, L) })
    local offset = ember.tensor(0, I) -- attention-gym's way: a tensor offset, updated in place
    local n = flex.stats.traces
    for t = 1, L do
      offset:fill_(t - 1)
      local out = ember.flex_attention(Q:narrow(3, t, 1), K:narrow(3, 1, t), V:narrow(3, 1, t),
        { score_mod = score_mod(offset) })
      check("step " .. t, out, full:narrow(3, t, 1), 1e-12)
    end
    assert(flex.stats.traces - n <= 2, ("%d traces for %d steps"):format(flex.stats.traces - n, L))
    -- a block mask made for each step's lengths: the same
    n = flex.stats.traces
    for t = 2, L do
      offset:fill_(t - 1)
      local bm = ember.create_block_mask(function(b, h, q_idx, kv_idx) return kv_idx:le(q_idx + offset) end, nil, nil, 1, t)
      check("masked step " .. t, ember.flex_attention(Q:narrow(3, t, 1), K:narrow(3, 1, t), V:narrow(3, 1, t), bm),
        ember.flex_attention(Q:narrow(3, t, 1), K:narrow(3, 1, t), V:narrow(3, 1, t)), 1e-12)
    end
    assert(flex.stats.traces - n <= 4, ("%d traces for %d steps"):format(flex.stats.traces - n, L - 1))
  end)
end)

describe("bfloat16 under ember.autocast, near float32 on the same rounded inputs", function()
  -- the bounds of tests/lua/attention_bf16_spec.lua: out within 2^-8 max|v|, gradients within 2^-5
  ember.manual_seed(9)
  local function rounded(...) return ember.randn({ ... }):bfloat16():float() end
  local q, k, v, R = rounded(2, 4, 70, 16), rounded(2, 4, 70, 16), rounded(2, 4, 70, 16), rounded(2, 4, 70, 16)
  local slopes = alibi_slopes(4, "float32")
  local variants = {
    alibi_causal = { mask = causal, score = function(s, b, h, q_idx, kv_idx) return s + slopes[h] * (kv_idx - q_idx) end },
    softcap_window = { mask = sliding_window(20), score = function(s) return 2 * ember.tanh(s / 2) end },
    natten_like = { mask = dilated_sliding_window(16, 2) },
  }
  for name, vr in pairs(variants) do
    it(name, function()
      local bm = ember.create_block_mask(vr.mask, nil, nil, 70, 70, { BLOCK_SIZE = 16 })
      local function run(autocast)
        local qq, kk, vv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
        local out
        local function f() out = ember.flex_attention(qq, kk, vv, { score_mod = vr.score, block_mask = bm }) end
        if autocast then ember.autocast("bfloat16", f) else f() end
        ;(out:float() * R):sum():backward()
        return out, qq.grad, kk.grad, vv.grad
      end
      local o32, dq32, dk32, dv32 = run(false)
      local o16, dq16, dk16, dv16 = run(true)
      assert.are.equal("bfloat16", o16.dtype)
      assert.are.equal("float32", dq16.dtype) -- the leaves' gradients in their own dtype
      local vmax = v:abs():max():item()
      assert((o16:float() - o32):abs():max():item() <= 2 ^ -8 * vmax, "out")
      check("dq", dq16, dq32, 2 ^ -5)
      check("dk", dk16, dk32, 2 ^ -5)
      check("dv", dv16, dv32, 2 ^ -5)
    end)
  end
end)

describe("the catalogue as drop-in variant files in nn.MultiHeadAttention, trained with AdamW against PyTorch", function()
  local build = os.getenv("EMBER_BUILD_DIR") or "build"
  -- one file per variant, as a researcher saves them in a folder on EMBER_PLUGIN_PATH
  local FILES = {
    gym_sliding_window = [[
local ember = require "ember"
return { name = "gym_sliding_window", options = { { name = "window", type = "int", default = 6, min = 0 } },
  mask = function(b, h, q, k, ctx) return k:le(q) & (q - k):le(ctx.options.window) end }]],
    gym_prefix_lm = [[
return { name = "gym_prefix_lm", inputs = { prefix = 1 },
  mask = function(b, h, q, k, ctx) return k:le(ctx.prefix[b]) | k:le(q) end }]],
    gym_document = [[
return { name = "gym_document", inputs = { doc = 2 },
  mask = function(b, h, q, k, ctx) return ctx.doc[b][q]:eq(ctx.doc[b][k]) end }]],
    gym_dilated = [[
local ember = require "ember"
return { name = "gym_dilated",
  options = { { name = "window", type = "int", default = 8, min = 0 }, { name = "dilation", type = "int", default = 2, min = 1 } },
  mask = function(b, h, q, k, ctx)
    local d = q - k
    return ember.abs(d):le(ctx.options.window) & (d % ctx.options.dilation):eq(0)
  end }]],
    gym_alibi = [[
return { name = "gym_alibi",
  score = function(s, b, h, q, k, ctx) return s + 2 ^ (-8 * h / ctx.heads) * (k - q) end }]],
    gym_softcap = [[
local ember = require "ember"
return { name = "gym_softcap", options = { { name = "cap", type = "float", default = 1.5, min = 1e-6 } },
  score = function(s, b, h, q, k, ctx) return ctx.options.cap * ember.tanh(s / ctx.options.cap) end }]],
    gym_t5 = [[
local ember = require "ember"
local function bucket(rel, num_buckets, max_distance) -- transformers' bidirectional T5 buckets of k - q
  local nb = num_buckets // 2
  local n = ember.abs(rel)
  local max_exact = nb // 2
  local large = max_exact + ember.floor(ember.log(ember.maximum(n, 1) / max_exact)
    / math.log(max_distance / max_exact) * (nb - max_exact))
  return ember.where(rel:gt(0), nb, 0) + ember.where(n:lt(max_exact), n, ember.minimum(large, nb - 1))
end
return { name = "gym_t5",
  params = function(o, dims) return { { name = "t5", tensor = ember.zeros(8, dims.heads), learned = true } } end,
  score = function(s, b, h, q, k, ctx) return s + ctx.t5[bucket(k - q, 8, 20) + 1][h] end }]],
    gym_head_slope = [[
local ember = require "ember"
return { name = "gym_head_slope",
  params = function(o, dims) return { { name = "w", tensor = ember.zeros(dims.heads), learned = true } } end,
  score = function(s, b, h, q, k, ctx) return s - ember.exp(ctx.w[h]) * ember.abs(q - k) end }]],
    gym_padding = [[
return { name = "gym_padding", inputs = { lens = 1 },
  mask = function(b, h, q, k, ctx) return k:le(ctx.lens[b]) end }]],
    gym_block_sparse = [[
local ember = require "ember"
return { name = "gym_block_sparse",
  params = function() return { { name = "blocks", learned = false,
    tensor = ember.tensor({ { true, false, false }, { true, true, false }, { false, true, true } }) } } end,
  mask = function(b, h, q, k, ctx) return ctx.blocks[(q - 1) // 8 + 1][(k - 1) // 8 + 1] end }]],
    gym_natten = [[
local ember = require "ember"
return { name = "gym_natten", -- a 4 x 5 image, 3 x 3 neighbourhoods whose centres stay inside
  mask = function(b, h, q, k, ctx)
    local qx, qy, kx, ky = (q - 1) // 5, (q - 1) % 5, (k - 1) // 5, (k - 1) % 5
    return ember.abs(ember.clamp(qx, 1, 2) - kx):le(1) & ember.abs(ember.clamp(qy, 1, 3) - ky):le(1)
  end }]],
  }
  local TRAIN = [[
local ember, nn = require "ember", require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local m = dofile("tests/fixtures/flex_gym.lua").mha_catalogue
for _, c in ipairs(m.cases) do
  for _, dtype in ipairs { "float64", "float32" } do
    local mha = nn.MultiHeadAttention(m.d_model, m.heads, { attention = c.name, causal = c.causal, dtype = dtype })
    local sd = mha:state_dict()
    for n, t in pairs(m.state) do sd[n] = parity.T(t):to(dtype) end
    for n, t in pairs(c.learned or {}) do sd[n] = parity.T(t):to(dtype) end
    mha:load_state_dict(sd)
    local vi = {}
    for _, n in ipairs(c.inputs) do vi[n] = parity.T(m[n]) end
    local opt = ember.optim.AdamW(mha:parameters(), { lr = 0.01, weight_decay = 0.05 })
    local x, R = parity.T(m.x):to(dtype), parity.T(m.R):to(dtype)
    local loss_err = 0
    for step = 1, 3 do
      opt:zero_grad()
      local loss = (mha(x, { variant_inputs = vi }) * R):sum()
      loss:backward()
      opt:step()
      loss_err = math.max(loss_err, math.abs(loss:item() - c.losses[step]) / math.abs(c.losses[step]))
    end
    local w_err, now = 0, mha:state_dict()
    for n, t in pairs(c.final) do w_err = math.max(w_err, parity.max_rel(now[n], parity.T(t))) end
    print(("%s %s loss %.3e weights %.3e"):format(c.name, dtype, loss_err, w_err))
  end
end
local routes = ember.attention_routes()
print(("routes fused %d composed %d"):format(routes.fused, routes.composed))
]]

  it("each file is found by name, runs on the fused kernel and trains as PyTorch's (float64; float32 to 1e-4)", function()
    local dir = tmpdir()
    for name, src in pairs(FILES) do write(dir .. "/" .. name .. ".lua", src) end
    write(dir .. "/train.lua", TRAIN)
    local p = assert(io.popen(("EMBER_PLUGIN_PATH=%s:%s/plugins EMBER_PLUGIN_PATH_ONLY=1 %s %s/train.lua 2>&1"):format(
      shell_quote(dir), shell_quote(build), shell_quote(build .. "/bin/ember"), shell_quote(dir))))
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. shell_quote(dir))
    local fused, composed = out:match("routes fused (%d+) composed (%d+)")
    assert(fused and tonumber(fused) > 0 and tonumber(composed) == 0, "not all on the fused kernel:\n" .. out)
    local fixture = dofile("tests/fixtures/flex_gym.lua").mha_catalogue
    for _, c in ipairs(fixture.cases) do
      for dtype, tol in pairs { float64 = 1e-10, float32 = 1e-4 } do
        local l, w = out:match(c.name .. " " .. dtype .. " loss (%S+) weights (%S+)")
        assert(l, c.name .. " " .. dtype .. " did not run:\n" .. out)
        assert(tonumber(l) < tol and tonumber(w) < tol, c.name .. " " .. dtype .. ": " .. out)
      end
    end
  end)
end)
