-- ember._gated(act, gate, up) = act(gate) * up in one pass each way
-- (core/src/ops_gated.c, the CPU's kernels in backends/cpu/cpu_unary.c),
-- which nn.FeedForward's gated FFNs, nn.MoE's experts and Llama's MLP run.
-- It must give what the composition it replaces gives: silu (or exact
-- gelu) then a product, to the bit in float32 and float64 (the same float
-- operations in the same order), within a rounding in bfloat16 (one
-- rounding instead of two), gradients included. PyTorch's values come
-- through nn_modern_spec's FeedForward fixtures, which now run this op;
-- the float64 gradchecks are here and there.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local raises_here = require("tests.lua.helpers.parity").raises_here

local function max_diff(a, b) return (a:double() - b:double()):abs():max():item() end

-- y, dgate, dup of act(gate) * up, fused or composed, for one gradient dy
local function run(fused, act, g0, u0, dy)
  local g, u = g0:detach():requires_grad_(), u0:detach():requires_grad_()
  local y
  if fused then
    y = ember._gated(act, g, u)
  else
    y = (act == "silu" and g:silu() or g:gelu()) * u
  end
  y:backward(dy)
  return y, g.grad, u.grad
end

describe("ember._gated", function()
  for _, dtype in ipairs { "float32", "float64" } do
    for _, act in ipairs { "silu", "gelu" } do
      it(("%s %s: the composition's values and gradients, bit for bit"):format(act, dtype), function()
        ember.manual_seed(3)
        -- more than one parallel range (4096 elements) and a ragged tail; wide values for the tails
        local g, u = ember.randn(37, 301, { dtype = dtype }) * 4, ember.randn(37, 301, { dtype = dtype })
        local dy = ember.randn(37, 301, { dtype = dtype })
        local y, dg, du = run(true, act, g, u, dy)
        local ry, rdg, rdu = run(false, act, g, u, dy)
        assert.are.equal(0, max_diff(y, ry), "output")
        assert.are.equal(0, max_diff(dg, rdg), "gate's gradient")
        assert.are.equal(0, max_diff(du, rdu), "up's gradient")
      end)
    end
  end

  for _, act in ipairs { "silu", "gelu" } do
    it(act .. " bfloat16: within a rounding of the float32 result, gradients too", function()
      ember.manual_seed(4)
      local g, u = ember.randn(64, 200) * 3, ember.randn(64, 200)
      local dy = ember.randn(64, 200)
      local y, dg, du = run(true, act, g:bfloat16(), u:bfloat16(), dy:bfloat16())
      assert.are.equal("bfloat16", y.dtype)
      -- the reference: float32 on the same (bfloat16) inputs, rounded once
      local ry, rdg, rdu = run(false, act, g:bfloat16():float(), u:bfloat16():float(), dy:bfloat16():float())
      for _, pair in ipairs { { y, ry, "output" }, { dg, rdg, "gate's gradient" }, { du, rdu, "up's gradient" } } do
        local got, want = pair[1]:float(), pair[2]
        -- one rounding to bfloat16 (8 significant bits): at most 2^-8 relative
        local rel = ((got - want):abs() / (want:abs() + 1e-30)):max():item()
        assert(rel <= 2 ^ -8 + 1e-7, ("%s: %.3g relative (more than one rounding)"):format(pair[3], rel))
      end
    end)
  end

  it("computes only the gradients that are asked for", function()
    local g = ember.randn(8, 16):requires_grad_()
    local u = ember.randn(8, 16) -- no gradient
    local y = ember._gated("silu", g, u)
    y:sum():backward()
    assert.is_nil(u.grad)
    local ref = g:detach():requires_grad_()
    ;(ref:silu() * u):sum():backward()
    assert.are.equal(0, max_diff(g.grad, ref.grad))
    local g2, u2 = ember.randn(8, 16), ember.randn(8, 16):requires_grad_()
    ember._gated("gelu", g2, u2):sum():backward()
    assert.are.equal(0, max_diff(u2.grad, g2:gelu()))
  end)

  it("takes views, broadcasts and mixed dtypes (those through the composition)", function()
    local base = ember.randn(16, 8)
    local g = base:t() -- not contiguous
    local u = ember.randn(8, 16)
    assert.are.equal(0, max_diff(ember._gated("silu", g, u), g:silu() * u))
    local row = ember.randn(16)
    local shape = ember._gated("silu", u, row).shape
    assert.are.same({ 8, 16 }, { shape[1], shape[2] })
    assert.are.equal(0, max_diff(ember._gated("silu", u, row), u:silu() * row))
    local y = ember._gated("gelu", u:double(), u)
    assert.are.equal("float64", y.dtype)
    -- under autocast the products are bfloat16; a float32 gate with them promotes
    ember.autocast("bfloat16", function()
      local lin = nn.Linear(8, 8)
      local h = lin(ember.randn(4, 8))
      assert.are.equal("bfloat16", ember._gated("silu", h, h).dtype)
    end)
  end)

  it("is in the profile as one span each way", function()
    local g, u = ember.randn(64, 64):requires_grad_(), ember.randn(64, 64):requires_grad_()
    local prof = ember.profile(function() ember._gated("silu", g, u):sum():backward() end)
    local names = {}
    for _, r in ipairs(prof:stats()) do names[r.name] = (names[r.name] or 0) + r.calls end
    assert.are.equal(1, names.swiglu)
    assert.are.equal(1, names.swiglu_grad)
    assert.is_nil(names.silu, "silu ran apart from the product")
  end)

  it("float64 gradcheck, both activations", function()
    for _, act in ipairs { "silu", "gelu" } do
      ember.manual_seed(7)
      gradcheck.check(function(g, u) return ember._gated(act, g, u) end,
        { ember.randn({ 3, 5 }, { dtype = "float64" }) * 2, ember.randn({ 3, 5 }, { dtype = "float64" }) },
        { name = "gated " .. act })
    end
  end)

  it("names itself and what was wrong, at the caller's line", function()
    local t = ember.randn(2, 3)
    raises_here(function() ember._gated("swish", t, t) end, "invalid option 'swish'")
    raises_here(function() ember._gated("silu", t, "up") end, "ember.Tensor expected, got string")
    raises_here(function() ember._gated("silu", t, ember.randn(3, 2)) end, "mul")
  end)
end)

describe("the gated FFNs run it", function()
  it("nn.FeedForward swiglu and geglu, not the tanh GELU, not past a forward hook", function()
    local function spans(m, x)
      local prof = ember.profile(function() m(x):sum():backward() end)
      local names = {}
      for _, r in ipairs(prof:stats()) do names[r.name] = true end
      return names
    end
    local x = ember.randn(4, 8)
    assert.is_true(spans(nn.FeedForward(8, 16, { activation = "swiglu" }), x).swiglu)
    assert.is_true(spans(nn.FeedForward(8, 16, { activation = "geglu" }), x).geglu)
    local m = nn.FeedForward(8, 16, { activation = "geglu" })
    m.activation = nn.GELU("tanh")
    local tanh_spans = spans(m, x)
    assert.is_nil(tanh_spans.geglu, "the tanh GELU is not the exact one")
    -- a hook on the activation sees its call
    local m2 = nn.FeedForward(8, 16, { activation = "swiglu" })
    local seen = 0
    m2.activation:register_forward_hook(function() seen = seen + 1 end)
    local y2 = m2(x)
    assert.are.equal(1, seen)
    -- and the hooked path gives the same values as the fused one
    local m3 = nn.FeedForward(8, 16, { activation = "swiglu" })
    m3:load_state_dict(m2:state_dict())
    assert.are.equal(0, max_diff(m3(x), y2))
  end)

  it("Llama's MLP", function()
    local cfg = { vocab_size = 11, hidden_size = 8, intermediate_size = 12, num_hidden_layers = 1,
      num_attention_heads = 2, num_key_value_heads = 1 }
    local model = ember.models.Llama(cfg)
    local prof = ember.profile(function() model(ember.tensor({ { 1, 2, 3 } }, { dtype = "int64" })):sum():backward() end)
    local names = {}
    for _, r in ipairs(prof:stats()) do names[r.name] = true end
    assert.is_true(names.swiglu and names.swiglu_grad, "Llama's MLP did not run the fused gate")
  end)
end)
