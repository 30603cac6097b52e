-- ember.flex_attention and ember.create_block_mask (lua/ember/flex.lua):
-- PyTorch 2.5's FlexAttention API on ember's traced variants. Values and
-- gradients against tests/fixtures/nn_flex.lua (tests/gen_nn_fixtures.py
-- writes each case's functions out in torch, 0-based; here they are
-- 1-based, ember's), float64 gradchecks (q, k, v and a learned bias read
-- as an upvalue), the trace cache (a second call and a closure made again
-- trace nothing; a changed number does), the block mask's map, and bad
-- input named at the user's line.
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local flex = require "ember.flex"

local T, check = parity.T, parity.check
local fixtures = dofile("tests/fixtures/nn_flex.lua")

local function randn(...) return ember.randn({ ... }, { dtype = "float64" }) end

-- The fixtures' functions, 1-based; x holds the case's tensors.
local FNS = {
  bias_causal = function(x)
    local bias = x.bias
    return function(s, b, h, qi, ki) return s + bias[h][qi][ki] end,
      function(b, h, qi, ki) return qi:ge(ki) end
  end,
  gqa_softcap_window = function()
    return function(s) return 2.0 * ember.tanh(s / 2.0) end,
      function(b, h, qi, ki) return ember.abs(qi - ki):le(2) end
  end,
  document_alibi_empty_row = function(x)
    local doc, slope = x.doc, x.slope
    return function(s, b, h, qi, ki) return s - slope[h] * ember.abs(qi - ki) end,
      function(b, h, qi, ki) return doc[b][qi]:eq(doc[b][ki]) & ki:lt(qi) end
  end,
}

describe("ember.flex_attention against PyTorch (written out densely)", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": out, logsumexp and the gradients of q, k, v (and the learned bias)", function()
      local q, k, v = T(c.q):requires_grad_(), T(c.k):requires_grad_(), T(c.v):requires_grad_()
      local x = {}
      for _, n in ipairs { "bias", "doc", "slope" } do
        if c[n] then x[n] = T(c[n]) end
      end
      if x.bias then x.bias:requires_grad_() end
      local score_mod, mask_mod = FNS[c.name](x)
      local B, Hq, Lq = q.shape[1], q.shape[2], q.shape[3]
      local bm = ember.create_block_mask(mask_mod, B, Hq, Lq, k.shape[3])
      local out, lse = ember.flex_attention(q, k, v, { score_mod = score_mod, block_mask = bm, scale = c.scale,
        enable_gqa = k.shape[2] ~= Hq, return_lse = true })
      check("out", out, T(c.out), 1e-12)
      -- -inf where a row sees no key, as the fixture's
      assert.are.same(T(c.lse):isinf():totable(), lse:isinf():totable())
      local fin = T(c.lse):isinf():logical_not()
      check("lse", lse:masked_select(fin), T(c.lse):masked_select(fin), 1e-12)
      ;(out * T(c.R)):sum():backward()
      check("dq", q.grad, T(c.dq), 1e-10)
      check("dk", k.grad, T(c.dk), 1e-10)
      check("dv", v.grad, T(c.dv), 1e-10)
      if c.dbias then check("dbias", x.bias.grad, T(c.dbias), 1e-10) end
    end)
  end

  it("float32 runs the same within float32's rounding", function()
    local c = fixtures.cases[1]
    local bias = T(c.bias):float()
    local bm = ember.create_block_mask(function(b, h, qi, ki) return qi:ge(ki) end, nil, nil, 6, 6)
    local out = ember.flex_attention(T(c.q):float(), T(c.k):float(), T(c.v):float(),
      { score_mod = function(s, b, h, qi, ki) return s + bias[h][qi][ki] end, block_mask = bm })
    assert.are.equal("float32", out.dtype)
    check("out", out, T(c.out), 1e-5)
  end)

  it("without score_mod and block_mask is scaled_dot_product_attention", function()
    local q, k, v = randn(2, 4, 5, 3), randn(2, 2, 6, 3), randn(2, 2, 6, 3)
    local out, lse = ember.flex_attention(q, k, v, { enable_gqa = true, scale = 0.7, return_lse = true })
    check("out", out, ember.scaled_dot_product_attention(q, k, v, { enable_gqa = true, scale = 0.7 }), 1e-12)
    local s = q:matmul(k:repeat_interleave(2, 2):transpose(3, 4)) * 0.7
    check("lse", lse, s:logsumexp(4), 1e-12)
  end)

  it("score_mod or a block mask alone as the fourth argument (PyTorch's positional form)", function()
    local q, k, v = randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 3)
    local sm = function(s, b, h, qi, ki) return s * 2 end
    check("score_mod", ember.flex_attention(q, k, v, sm), ember.flex_attention(q, k, v, { score_mod = sm }), 0)
    local bm = ember.create_block_mask(function(b, h, qi, ki) return qi:ge(ki) end, nil, nil, 4, 4)
    check("block_mask", ember.flex_attention(q, k, v, bm), ember.flex_attention(q, k, v, { block_mask = bm }), 0)
  end)

  it("a scale of 0 or below is used as given (PyTorch's), not read as the default", function()
    local q, k, v = randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 3)
    local sm = function(s, b, h, qi, ki) return s + 0.1 * ki end
    local out = ember.flex_attention(q, k, v, { score_mod = sm, scale = -0.5 })
    local kk = ember.arange(1, 5, { dtype = "float64" }):view(1, 1, 1, 4)
    local ref = ((q:matmul(k:transpose(3, 4)) * -0.5) + 0.1 * kk):softmax(4):matmul(v)
    check("out", out, ref, 1e-12)
  end)
end)

describe("ember.flex_attention's gradients (float64 gradcheck)", function()
  it("q, k, v and a learned bias captured as an upvalue, with a causal block mask", function()
    local bias = randn(2, 4, 5):requires_grad_()
    local bm = ember.create_block_mask(function(b, h, qi, ki) return qi:ge(ki - 1) end, nil, nil, 4, 5)
    gradcheck.check(function(q, k, v, bb)
      assert(bb == bias)
      return ember.flex_attention(q, k, v, { block_mask = bm,
        score_mod = function(s, b, h, qi, ki) return ember.tanh(s + bias[h][qi][ki]) * 3 end })
    end, { randn(2, 2, 4, 3), randn(2, 2, 5, 3), randn(2, 2, 5, 2), bias }, { name = "flex" })
  end)

  it("grouped heads (enable_gqa) and the logsumexp", function()
    local slope = randn(4):requires_grad_()
    gradcheck.check(function(q, k, v, sl)
      assert(sl == slope)
      local out, lse = ember.flex_attention(q, k, v, { enable_gqa = true, return_lse = true,
        score_mod = function(s, b, h, qi, ki) return s - slope[h] * ember.abs(qi - ki) end })
      return { out, lse }
    end, { randn(1, 4, 3, 2), randn(1, 2, 4, 2), randn(1, 2, 4, 3), slope }, { name = "flex gqa" })
  end)
end)

describe("ember.flex_attention's trace cache", function()
  local q, k, v = randn(1, 2, 6, 4), randn(1, 2, 6, 4), randn(1, 2, 6, 4)

  it("a second call with the same functions traces nothing", function()
    local bias = randn(2, 6, 6)
    local sm = function(s, b, h, qi, ki) return s + bias[h][qi][ki] end
    local bm = ember.create_block_mask(function(b, h, qi, ki) return qi:ge(ki) end, nil, nil, 6, 6)
    local first = ember.flex_attention(q, k, v, { score_mod = sm, block_mask = bm })
    local n = flex.stats.traces
    local again = ember.flex_attention(q, k, v, { score_mod = sm, block_mask = bm })
    assert.are.equal(n, flex.stats.traces)
    check("same", again, first, 0)
  end)

  it("a closure made again each step from the same code hits the cache, and reads the tensor's new values", function()
    local bias = randn(2, 6, 6)
    local function step(cap)
      return ember.flex_attention(q, k, v, {
        score_mod = function(s, b, h, qi, ki) return cap * ember.tanh((s + bias[h][qi][ki]) / cap) end })
    end
    step(5)
    local n = flex.stats.traces
    local a = step(5)
    bias:mul_(2) -- in place: the same tensor, new values
    local b = step(5)
    assert.are.equal(n, flex.stats.traces)
    assert(parity.max_rel(a, b) > 1e-3, "the new values of the captured tensor were not read")
    local s = q:matmul(k:transpose(3, 4)) / 2 + bias:view(1, 2, 6, 6)
    check("new values", b, (5 * ember.tanh(s / 5)):softmax(4):matmul(v), 1e-12)
    -- another number upvalue is another constant: traced again, and used
    local c = step(7)
    assert.are.equal(n + 1, flex.stats.traces)
    check("new constant", c, (7 * ember.tanh(s / 7)):softmax(4):matmul(v), 1e-12)
  end)

  it("a tensor upvalue that starts requiring grad gets its gradient (traced again, as a learned table)", function()
    local bias = randn(2, 6, 6)
    local function sm(s, b, h, qi, ki) return s + bias[h][qi][ki] end
    ember.flex_attention(q, k, v, { score_mod = sm })
    bias:requires_grad_()
    ember.flex_attention(q, k, v, { score_mod = sm }):sum():backward()
    assert(bias.grad ~= nil, "no gradient for the captured tensor")
  end)
end)

describe("ember.flex_attention in a module: tensors and numbers read in a table (self.bias, self.cap)", function()
  local function layer(cap)
    local self = { bias = randn(2, 5, 5):requires_grad_(), cap = cap, opts = { slope = randn(2) } }
    function self.forward(q, k, v)
      local function score_mod(s, b, h, qi, ki)
        return self.cap * ember.tanh((s + self.bias[h][qi][ki] - self.opts.slope[h] * ki) / self.cap)
      end
      return ember.flex_attention(q, k, v, { score_mod = score_mod })
    end
    return self
  end
  local function reference(self, q, k, v)
    local kk = ember.arange(1, 6, { dtype = "float64" }):view(1, 1, 1, 5)
    local s = q:matmul(k:transpose(3, 4)) / math.sqrt(3) + self.bias:view(1, 2, 5, 5) - self.opts.slope:view(1, 2, 1, 1) * kk
    return (self.cap * ember.tanh(s / self.cap)):softmax(4):matmul(v)
  end
  local q, k, v = randn(1, 2, 5, 3), randn(1, 2, 5, 3), randn(1, 2, 5, 3)

  it("the learned field gets its gradient; the values match", function()
    local m = layer(4)
    local out = m.forward(q, k, v)
    check("out", out, reference(m, q, k, v), 1e-12)
    out:sum():backward()
    local b2 = m.bias:detach():requires_grad_()
    reference({ bias = b2, cap = 4, opts = m.opts }, q, k, v):sum():backward()
    check("dbias", m.bias.grad, b2.grad, 1e-10)
  end)

  it("each module's trace is kept; a changed field traces again, a new tensor in the field is read", function()
    local m1, m2 = layer(3), layer(5)
    m1.forward(q, k, v); m2.forward(q, k, v)
    local n = flex.stats.traces
    check("m1", m1.forward(q, k, v), reference(m1, q, k, v), 1e-12)
    check("m2", m2.forward(q, k, v), reference(m2, q, k, v), 1e-12)
    m1.opts.slope = randn(2) -- another tensor in the field: read, no trace
    check("new tensor", m1.forward(q, k, v), reference(m1, q, k, v), 1e-12)
    assert.are.equal(n, flex.stats.traces)
    m1.cap = 7 -- a number read while tracing: traced again, not stale
    check("new cap", m1.forward(q, k, v), reference(m1, q, k, v), 1e-12)
    assert.are.equal(n + 1, flex.stats.traces)
    m1.bias = randn(2, 5, 6) -- a learned field becomes a constant of another shape: traced again
    local ok = pcall(m1.forward, q, k, v)
    assert.are.equal(n + 2, flex.stats.traces)
    assert.is_true(ok)
  end)

  it("an nn.Module's parameter read as self.rel trains, traced once", function()
    local nn = require "ember.nn"
    local RelBias = nn.Module:extend("FlexSpecRelBias")
    function RelBias:__init(H, L)
      self.rel = nn.Parameter(ember.zeros(H, 2 * L - 1, { dtype = "float64" }))
      self.L = L
    end
    function RelBias:forward(qq, kk, vv)
      return ember.flex_attention(qq, kk, vv,
        { score_mod = function(s, b, h, qi, ki) return s + self.rel[h][qi - ki + self.L] end })
    end
    local m = RelBias(2, 5)
    local opt = require("ember.optim").SGD(m:parameters(), { lr = 0.1 })
    local losses, n = {}, nil
    for step = 1, 3 do
      opt:zero_grad()
      local loss = (m(q, k, v) * v:sum(3, true)):sum()
      loss:backward()
      opt:step()
      losses[step] = loss:item()
      if step == 1 then n = flex.stats.traces end
    end
    assert.are.equal(n, flex.stats.traces)
    assert(losses[3] < losses[1], "the bias did not train")
  end)

  it("a global tensor (a field of _ENV)", function()
    flex_spec_global_bias = randn(2, 5, 5)
    local out = ember.flex_attention(q, k, v,
      { score_mod = function(s, b, h, qi, ki) return s + flex_spec_global_bias[h][qi][ki] end })
    local s = q:matmul(k:transpose(3, 4)) / math.sqrt(3) + flex_spec_global_bias:view(1, 2, 5, 5)
    check("out", out, s:softmax(4):matmul(v), 1e-12)
    flex_spec_global_bias = nil
  end)
end)

describe("functions the mods call, and ember.flex.and_masks / or_masks", function()
  it("a helper's tensor upvalue is captured (and a learned one trained); a helper made again hits the cache", function()
    local q, k, v = randn(1, 2, 5, 3), randn(1, 2, 5, 3), randn(1, 2, 5, 3)
    local bias = randn(2, 5):requires_grad_()
    local function run()
      local function rel(h, d) return bias[h][ember.abs(d) + 1] end
      local function half(h, d) return 0.5 * rel(h, d) end -- rel met twice: keyed by its place, not its identity
      return ember.flex_attention(q, k, v,
        { score_mod = function(s, b, h, qi, ki) return s + half(h, qi - ki) + 0.5 * rel(h, qi - ki) end })
    end
    local out = run()
    local n = flex.stats.traces
    run()
    assert.are.equal(n, flex.stats.traces)
    local d = (ember.arange(1, 6):view(5, 1) - ember.arange(1, 6):view(1, 5)):abs():long() -- [5, 5], 0-based columns
    local b2 = bias:detach():requires_grad_()
    local table_ = b2:index_select(2, (d + 1):reshape(-1)):view(1, 2, 5, 5)
    local ref = (q:matmul(k:transpose(3, 4)) / math.sqrt(3) + table_):softmax(4):matmul(v)
    check("out", out, ref, 1e-12)
    out:sum():backward(); ref:sum():backward()
    check("dbias", bias.grad, b2.grad, 1e-10)
  end)

  it("and_masks and or_masks combine masks with their captured tensors, as PyTorch's", function()
    local doc = ember.tensor({ 1, 1, 2, 2, 2, 3 }, { dtype = "int64" })
    local causal = function(b, h, qi, ki) return qi:ge(ki) end
    local same_doc = function(b, h, qi, ki) return doc[qi]:eq(doc[ki]) end
    local first = function(b, h, qi, ki) return ki:eq(1) end
    local m = flex.or_masks(flex.and_masks(causal, same_doc), first)
    local q, k, v = randn(1, 1, 6, 2), randn(1, 1, 6, 2), randn(1, 1, 6, 2)
    local out = ember.flex_attention(q, k, v, { block_mask = ember.create_block_mask(m, nil, nil, 6, 6) })
    local i, j = ember.arange(1, 7):view(6, 1), ember.arange(1, 7):view(1, 6)
    local allowed = i:ge(j):logical_and(doc:view(6, 1):eq(doc:view(1, 6))):logical_or(j:eq(1))
    local s = (q:matmul(k:transpose(3, 4)) / math.sqrt(2)):masked_fill(allowed:logical_not():view(1, 1, 6, 6), -math.huge)
    check("out", out, s:softmax(4):matmul(v), 1e-12)
    parity.raises_here(function() flex.and_masks(causal, 3) end,
      "ember.flex.and_masks: argument 2 must be a mask_mod function(b, h, q_idx, kv_idx), got number")
  end)
end)

describe("ember.create_block_mask", function()
  it("a causal mask's map: empty above the diagonal, partial on it, full below; sparsity and print", function()
    local bm = ember.create_block_mask(function(b, h, qi, ki) return qi:ge(ki) end, nil, nil, 256, 256,
      { BLOCK_SIZE = 64 })
    assert.are.same({ 1, 1, 256, 256 }, bm.shape)
    assert.are.same({ { { { 1, 0, 0, 0 }, { 2, 1, 0, 0 }, { 2, 2, 1, 0 }, { 2, 2, 2, 1 } } } }, bm.kinds:totable())
    assert.are.equal(37.5, bm:sparsity())
    assert.are.same({ 1, 1, 4, 4 }, bm:to_dense().shape)
    local s = tostring(bm)
    assert.truthy(s:find("BlockMask(shape=(1, 1, 256, 256), block_size=64, sparsity=37.50%", 1, true), s)
    assert.truthy(s:find("██████░░", 1, true), s)
  end)

  it("B and H given: the function sees each b and h (a mask per head); nil broadcasts with b = h = 1", function()
    local per_head = function(b, h, qi, ki) return ki:le(h * 64) end -- head h sees the first h blocks
    local bm = ember.create_block_mask(per_head, 2, 3, 64, 256, { BLOCK_SIZE = 64 })
    assert.are.same({ 2, 3, 1, 4 }, bm.kinds.shape)
    assert.are.same({ { 2, 0, 0, 0 }, { 2, 2, 0, 0 }, { 2, 2, 2, 0 } }, bm.kinds[2]:view(3, 4):totable())
    local one = ember.create_block_mask(per_head, nil, nil, 64, 256, { BLOCK_SIZE = 64 })
    assert.are.same({ { { { 2, 0, 0, 0 } } } }, one.kinds:totable())
    -- the kernel uses the same rule: per head with H given, head 1's for all with H = nil
    local q, k, v = randn(2, 3, 64, 2), randn(2, 3, 256, 2), randn(2, 3, 256, 2)
    local s = q:matmul(k:transpose(3, 4)) / math.sqrt(2)
    local kk = ember.arange(1, 257):view(1, 1, 1, 256)
    local hh = ember.arange(1, 4):view(1, 3, 1, 1)
    check("per head", ember.flex_attention(q, k, v, { block_mask = bm }),
      s:masked_fill(kk:gt(hh * 64):expand(2, 3, 64, 256), -math.huge):softmax(4):matmul(v), 1e-12)
    check("broadcast", ember.flex_attention(q, k, v, { block_mask = one }),
      s:masked_fill(kk:gt(64):expand(2, 3, 64, 256), -math.huge):softmax(4):matmul(v), 1e-12)
  end)

  it("lengths that are not whole blocks; a mask reading a captured tensor (documents)", function()
    local doc = ember.tensor({ 1, 1, 1, 2, 2, 3, 3, 3, 3, 3 }, { dtype = "int64" })
    local bm = ember.create_block_mask(function(b, h, qi, ki) return doc[qi]:eq(doc[ki]) end, nil, nil, 10, 10,
      { BLOCK_SIZE = 4 })
    assert.are.same({ { { { 1, 1, 0 }, { 1, 1, 1 }, { 0, 1, 2 } } } }, bm.kinds:totable())
  end)
end)

describe("ember.flex_attention refuses bad input at the user's line", function()
  local q, k, v = randn(1, 2, 4, 3), randn(1, 2, 4, 3), randn(1, 2, 4, 3)
  local raises_here = parity.raises_here

  it("shapes, heads, dtypes and options", function()
    raises_here(function() ember.flex_attention(randn(2, 4, 3), k, v) end,
      "ember.flex_attention: query, key and value must be 4-d [B, H, L, E], got [2, 4, 3]")
    raises_here(function() ember.flex_attention(randn(1, 4, 4, 3), k, v) end,
      "ember.flex_attention: query has 4 heads and key/value 2: grouped-query attention needs {enable_gqa = true}")
    raises_here(function() ember.flex_attention(randn(1, 3, 4, 3), k, v, { enable_gqa = true }) end,
      "query's 3 heads must be a multiple of key/value's 2 heads")
    raises_here(function() ember.flex_attention(q, randn(1, 2, 4, 5), v) end,
      "ember.flex_attention: query and key must have the same head size E")
    raises_here(function() ember.flex_attention(q, k, randn(1, 2, 5, 3)) end,
      "ember.flex_attention: key [1, 2, 4, 3] and value [1, 2, 5, 3] must have the same heads and length")
    raises_here(function() ember.flex_attention(q, k, v:float()) end,
      "ember.flex_attention: query, key and value must share a float32, float64 or bfloat16 dtype")
    raises_here(function() ember.flex_attention(q, k, v, { mask_mod = function() end }) end,
      "ember.flex_attention: unknown option 'mask_mod' (expected block_mask, enable_gqa, return_lse, scale, score_mod)")
    raises_here(function() ember.flex_attention(q, k, v, { score_mod = 3 }) end,
      "ember.flex_attention: score_mod must be a Lua function(score, b, h, q_idx, kv_idx), got number")
    raises_here(function() ember.flex_attention(q, k, "v") end, "ember.flex_attention: value must be a tensor, got string")
    raises_here(function() ember.flex_attention(q, k, v, 2) end,
      "ember.flex_attention: options must be a table {score_mod =, block_mask =, ...}, got number")
  end)

  it("a block mask of the wrong size or kind", function()
    local causal = function(b, h, qi, ki) return qi:ge(ki) end
    raises_here(function() ember.flex_attention(q, k, v, { block_mask = ember.create_block_mask(causal, nil, nil, 4, 8) }) end,
      "ember.flex_attention: block_mask was made for Q_LEN=4, KV_LEN=8, got query length 4 and key length 4")
    raises_here(function() ember.flex_attention(q, k, v, { block_mask = ember.create_block_mask(causal, 1, 3, 4, 4) }) end,
      "ember.flex_attention: block_mask was made for B=1, H=3, got B=1 and 2 query heads")
    raises_here(function() ember.flex_attention(q, k, v, { block_mask = ember.ones(4, 4):bool() }) end,
      "ember.flex_attention: block_mask must be made by ember.create_block_mask, got a tensor")
    raises_here(function() ember.create_block_mask(causal, nil, nil, 0, 4) end,
      "ember.create_block_mask: Q_LEN must be positive, got 0")
    raises_here(function() ember.create_block_mask(causal, nil, nil, 4) end,
      "ember.create_block_mask: KV_LEN must be a positive integer, got nil")
    raises_here(function() ember.create_block_mask("causal", nil, nil, 4, 4) end,
      "ember.create_block_mask: mask_mod must be a Lua function(b, h, q_idx, kv_idx), got string")
    raises_here(function() ember.create_block_mask(causal, nil, nil, 4, 4, { block_size = 2 }) end,
      "ember.create_block_mask: unknown option 'block_size' (expected BLOCK_SIZE, device)")
  end)

  it("functions that do not trace: their result, a comparison, a captured tensor misused", function()
    raises_here(function() ember.flex_attention(q, k, v, { score_mod = function(s) return "x" end }) end,
      "ember.flex_attention: score_mod returned a string, not a traced value or a number")
    raises_here(function() ember.flex_attention(q, k, v, { score_mod = function(s) return s:gt(0) end }) end,
      "ember.flex_attention: score_mod returned a boolean (a mask belongs in mask)")
    raises_here(function()
      ember.create_block_mask(function(b, h, qi, ki) return qi >= ki end, nil, nil, 4, 4)
    end, "ember.create_block_mask: '<=' (or '>=') cannot be traced: Lua turns a comparison into a boolean. Write ki:le(qi) for ki <= qi, or qi:ge(ki) for qi >= ki")
    raises_here(function()
      ember.create_block_mask(function(b, h, qi, ki) return true end, nil, nil, 4, 4)
    end, "mask_mod returned a plain Lua boolean (true), not a traced value")
    local bias = randn(2, 4)
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(s, b, h, qi, ki) return s + bias[h][qi][ki] end })
    end, "ember.flex_attention: captured tensor 'bias' is 2-d: too many indices (more than 2)")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(s, b, h, qi, ki) return s + bias[h][qi + 10] end })
    end, "ember.flex_attention: index 11 out of range for dim 2 of captured tensor 'bias' (size 4)")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(s) return s + ember.ones(1) end })
    end, "ember.flex_attention: cannot trace '+' on a tensor: only numbers and traced values (score_mod and mask_mod capture")
    local cfg = {}
    function cfg.get() return bias end -- a function read from a table is not searched: its result is the tensor
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(s, b, h, qi, ki) return s + cfg.get()[h][qi] end })
    end, "score_mod and mask_mod capture the tensors they and the functions they call read as upvalues")
    raises_here(function()
      ember.flex_attention(q, k, v, { score_mod = function(s, b, h, qi, ki) return s + bias[h] end })
    end, "captured tensor 'bias' is 2-d but was used with 1 index(es)")
  end)
end)
