-- nn.MultiHeadAttention projects q, k and v of self-attention in one product
-- (k and v in one when they are one tensor), as torch's in_proj: the same
-- results and gradients as three nn.Linear calls, and the separate calls
-- whenever a projection is not a plain nn.Linear (a subclass, a forward
-- hook), so that nothing a user put on q_proj is skipped.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"

local function maxdiff(a, b) return (a - b):abs():max():item() end

-- The number of gemm spans (products) one call of fn makes.
local function products(fn)
  local prof = ember.profile(fn)
  local n = 0
  for _, e in ipairs(prof.events) do
    if e.name == "gemm" then n = n + 1 end
  end
  return n
end

-- Output, input gradient and parameter gradients of m(args...) under the
-- weights w of the output (a float64 module).
local function run(m, w, ...)
  m:zero_grad()
  local args = { ... }
  for i, a in ipairs(args) do args[i] = a:detach():requires_grad_() end
  local y = m(table.unpack(args))
  ;(y * w):sum():backward()
  local g = {}
  for name, p in pairs(m:named_parameters()) do g[name] = p.grad:clone() end
  return y, args[1].grad, g
end

-- A second module with the same parameters whose q_proj carries a hook
-- that changes nothing: it must run the three separate products.
local function separate_twin(m, opts)
  local t = nn.MultiHeadAttention(opts)
  t:load_state_dict(m:state_dict())
  local calls = 0
  t.q_proj:register_forward_hook(function() calls = calls + 1 end)
  return t, function() return calls end
end

describe("nn.MultiHeadAttention joined q/k/v projection", function()
  for _, c in ipairs({
    { name = "self-attention", opts = { d_model = 8, heads = 2, dtype = "float64", causal = true } },
    { name = "grouped kv heads", opts = { d_model = 8, heads = 4, kv_heads = 2, dtype = "float64" } },
    { name = "no bias", opts = { d_model = 8, heads = 2, bias = false, dtype = "float64" } },
    { name = "rope", opts = { d_model = 8, heads = 2, rope = true, dtype = "float64" } },
  }) do
    it(c.name .. ": the results and gradients of three products, in two products", function()
      ember.manual_seed(1)
      local m = nn.MultiHeadAttention(c.opts)
      local t, hook_calls = separate_twin(m, c.opts)
      local x = ember.randn({ 2, 5, 8 }, { dtype = "float64" })
      local w = ember.randn({ 2, 5, 8 }, { dtype = "float64" })
      assert.are.equal(2, products(function() m(x) end))      -- q/k/v, out_proj
      assert.are.equal(4, products(function() t(x) end))      -- q, k, v, out_proj
      local y1, gx1, g1 = run(m, w, x)
      local y2, gx2, g2 = run(t, w, x)
      assert.is_true(hook_calls() > 0)
      assert.is_true(maxdiff(y1, y2) < 1e-12)
      assert.is_true(maxdiff(gx1, gx2) < 1e-12)
      for name, g in pairs(g2) do
        assert.is_not_nil(g1[name], name)
        assert.is_true(maxdiff(g1[name], g) < 1e-12, name)
      end
    end)
  end

  it("passes a float64 gradcheck through the joined product", function()
    ember.manual_seed(2)
    local m = nn.MultiHeadAttention{ d_model = 4, heads = 2, dtype = "float64", causal = true }
    local x = ember.randn({ 1, 3, 4 }, { dtype = "float64" })
    gradcheck.check(function(a, wq, bv) return m(a) end, { x, m.q_proj.weight, m.v_proj.bias })
  end)

  it("joins k and v of cross-attention when they are one tensor", function()
    ember.manual_seed(3)
    local opts = { d_model = 8, heads = 2, dtype = "float64" }
    local m = nn.MultiHeadAttention(opts)
    local t = separate_twin(m, opts)
    local q = ember.randn({ 2, 3, 8 }, { dtype = "float64" })
    local mem = ember.randn({ 2, 6, 8 }, { dtype = "float64" })
    assert.are.equal(3, products(function() m(q, mem) end))
    assert.are.equal(4, products(function() m(q, mem, mem:clone()) end))
    assert.is_true(maxdiff(m(q, mem), t(q, mem)) < 1e-12)
  end)

  it("runs a subclass of nn.Linear as itself", function()
    ember.manual_seed(4)
    local m = nn.MultiHeadAttention{ d_model = 8, heads = 2 }
    local Scaled = nn.Linear:extend("ScaledLinear")
    local called = 0
    function Scaled:forward(x)
      called = called + 1
      return nn.Linear.forward(self, x) * 2
    end
    local s = Scaled(8, 8)
    s.weight, s.bias = m.q_proj.weight, m.q_proj.bias
    local x = ember.randn(2, 5, 8)
    local before = m(x)
    m.q_proj = s
    assert.are.equal(4, products(function() m(x) end))
    assert.is_true(called > 0)
    assert.is_true(maxdiff(before, m(x)) > 1e-3) -- the doubled q changed the scores
  end)

  it("under autocast: bfloat16 output, float32 gradients, close to float32", function()
    ember.manual_seed(5)
    local m = nn.MultiHeadAttention{ d_model = 16, heads = 2, causal = true }
    local x = ember.randn(2, 8, 16)
    local y
    ember.autocast("bfloat16", function() y = m(x) end)
    assert.are.equal("bfloat16", y.dtype)
    y:float():sum():backward()
    assert.are.equal("float32", m.k_proj.weight.grad.dtype)
    assert.is_true(maxdiff(y:float(), m(x)) < 0.05)
  end)

  it("leaves Linear's errors to the separate path: a wrong input size names Linear", function()
    local m = nn.MultiHeadAttention{ d_model = 8, heads = 2, dtype = "float64" }
    local ok, msg = pcall(function() return m(ember.randn(2, 5, 8)) end) -- float32 into float64 weights
    assert.is_false(ok)
    assert.is_truthy(tostring(msg):find("Linear.forward", 1, true) or tostring(msg):find("MultiHeadAttention", 1, true))
  end)
end)
