-- nn.Conv1d and nn.Conv2d, composed from core ops (nn/_conv.lua): values and
-- gradients (input, weight, bias) in float64 against PyTorch 1.13
-- (tests/fixtures/nn_conv.lua, made by tests/gen_conv_fixtures.py), float64
-- gradchecks, PyTorch's initialisation bounds and state-dict names,
-- float32 and bfloat16 under autocast, printing, and errors at the caller's line.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_conv.lua")
local F64 = { dtype = "float64" }
local T, check, raises_here = compare.T, compare.check, compare.raises_here

-- The module of a fixture's config.
local function make(cfg, opts)
  opts = opts or {}
  local cls = cfg.nd == 2 and nn.Conv2d or nn.Conv1d
  return cls(cfg.in_channels, cfg.out_channels, cfg.kernel_size, { stride = cfg.stride, padding = cfg.padding,
    dilation = cfg.dilation, groups = cfg.groups, bias = cfg.bias, dtype = opts.dtype or "float64" })
end

describe("nn.Conv2d and nn.Conv1d", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": output and gradients (x, weight, bias) match PyTorch in float64", function()
      local m = make(c.config)
      local sd = {}
      for k, v in pairs(c.state) do sd[k] = T(v) end
      m:load_state_dict(sd)
      local x = T(c.x):requires_grad_(true)
      local out = m(x)
      check(c.name .. " output", out, T(c.out), 1e-12)
      ;(out * T(c.R)):sum():backward()
      check(c.name .. " grad x", x.grad, T(c.grad_x), 1e-12)
      local params, n, count = m:named_parameters(), 0, 0
      for k, g in pairs(c.grads) do
        n = n + 1
        check(c.name .. " grad " .. k, params[k].grad, T(g), 1e-12)
      end
      for _ in pairs(params) do count = count + 1 end
      assert.are.equal(n, count, c.name .. ": parameter count")
    end)
  end

  it("float64 gradchecks: strided, dilated, grouped, \"same\", 1-d, a non-contiguous input", function()
    local mods = {
      nn.Conv2d(2, 3, 3, { stride = 2, padding = 1, dtype = "float64" }),
      nn.Conv2d(4, 4, { 2, 3 }, { dilation = { 2, 1 }, groups = 2, padding = "same", dtype = "float64" }),
      nn.Conv2d(4, 4, 3, { groups = 4, padding = 1, bias = false, dtype = "float64" }),
      nn.Conv2d(2, 3, 2, { stride = 2, dtype = "float64" }), -- the patch-embedding path
      nn.Conv1d(2, 4, 3, { padding = 2, dilation = 2, groups = 2, dtype = "float64" }),
    }
    for i, m in ipairs(mods) do
      ember.manual_seed(30 + i)
      local nd = m.weight.ndim - 2
      local shape = nd == 2 and { 2, m.in_channels, 4, 4 } or { 2, m.in_channels, 5 }
      local inputs = { ember.randn(shape, F64), ember.randn(m.weight.shape, F64) }
      if m.bias then inputs[3] = ember.randn({ m.out_channels }, F64) end
      gradcheck.check(function(x, w, b)
        m.weight, m.bias = w, b
        return m(x)
      end, inputs, { name = tostring(m) })
    end
    local m = nn.Conv2d(2, 3, 3, { padding = 1, dtype = "float64" })
    local nc = ember.randn({ 4, 5, 2, 2 }, F64):permute(3, 4, 1, 2):detach()
    assert.is_false(nc:is_contiguous())
    gradcheck.check(function(x) return m(x) end, { nc }, { name = "non-contiguous input" })
  end)

  it("state dict names and shapes are PyTorch's; the init is U(+-1/sqrt(fan_in))", function()
    ember.manual_seed(5)
    local m = nn.Conv2d(8, 16, { 3, 2 }, { groups = 2 })
    local names = {}
    for k, v in pairs(m:state_dict()) do names[#names + 1] = ("%s:%s:[%s]"):format(k, v.dtype, table.concat(v.shape, ",")) end
    table.sort(names)
    assert.are.same({ "bias:float32:[16]", "weight:float32:[16,4,3,2]" }, names)
    assert.are.same({ "weight", "bias" }, { table.unpack(m:parameter_names()) })
    local bound = 1 / math.sqrt(4 * 3 * 2)
    for _, p in ipairs { m.weight, m.bias } do
      local a = p:abs():max():item()
      assert(a <= bound and a > 0.8 * bound, ("max |p| %g, bound %g"):format(a, bound))
    end
    assert.is_nil(nn.Conv1d(2, 3, 3, { bias = false }).bias)
    assert.are.same({ 3, 2, 3 }, { table.unpack(nn.Conv1d(2, 3, 3).weight.shape) })
  end)

  it("float32 matches float64, and runs in bfloat16 under autocast", function()
    ember.manual_seed(9)
    local m64 = nn.Conv2d(4, 6, 3, { padding = 1, stride = 2, groups = 2, dtype = "float64" })
    local m32 = nn.Conv2d(4, 6, 3, { padding = 1, stride = 2, groups = 2 })
    m32:load_state_dict({ weight = m64.weight:float(), bias = m64.bias:float() })
    local x = ember.randn({ 2, 4, 7, 7 }, F64)
    local want = m64(x)
    local y = m32(x:float())
    assert.are.equal("float32", y.dtype)
    check("float32", y, want, 1e-5)
    local xb = x:float():requires_grad_()
    local yb = ember.autocast("bfloat16", function() return m32(xb) end)
    assert.are.equal("bfloat16", yb.dtype)
    check("bfloat16", yb, want, 3e-2)
    yb:float():sum():backward()
    assert.are.equal("float32", m32.weight.grad.dtype)
    assert.are.equal("float32", xb.grad.dtype)
  end)

  it("prints as PyTorch", function()
    assert.are.equal("Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))",
      tostring(nn.Conv2d(3, 64, 3, { padding = 1 })))
    assert.are.equal("Conv2d(4, 8, kernel_size=(2, 3), stride=(2, 1), dilation=(2, 2), groups=2, bias=false)",
      tostring(nn.Conv2d(4, 8, { 2, 3 }, { stride = { 2, 1 }, dilation = 2, groups = 2, bias = false })))
    assert.are.equal("Conv1d(16, 32, kernel_size=(5,), stride=(1,), padding=same)",
      tostring(nn.Conv1d(16, 32, 5, { padding = "same" })))
    assert.are.equal("Conv1d(2, 2, kernel_size=(3,), stride=(2,))", tostring(nn.Conv1d(2, 2, 3, { stride = 2, padding = "valid" })))
  end)

  it("errors name the module at the caller's line", function()
    raises_here(function() local _ = nn.Conv2d(3, 8, 3)(ember.randn(2, 4, 5, 5)) end,
      "Conv2d.forward: expected 3 input channels (in_channels), got 4 in an input of shape [2, 4, 5, 5]")
    raises_here(function() local _ = nn.Conv1d(3, 8, 3)(ember.randn(2, 5, 7)) end,
      "Conv1d.forward: expected 3 input channels (in_channels), got 5")
    raises_here(function() local _ = nn.Conv2d(3, 8, 5)(ember.randn(1, 3, 3, 8)) end,
      "Conv2d.forward: the kernel (size 5, dilation 1: 5) is larger than the padded input (3 + 0) along dim 3 of shape [1, 3, 3, 8]")
    raises_here(function() local _ = nn.Conv1d(2, 2, 3, { dilation = 3 })(ember.randn(2, 6)) end,
      "Conv1d.forward: the kernel (size 3, dilation 3: 7) is larger than the padded input (6 + 0)")
    raises_here(function() local _ = nn.Conv2d(3, 8, 3)(ember.randn(2, 3, 5, 5, 5)) end,
      "Conv2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [2, 3, 5, 5, 5]")
    raises_here(function() local _ = nn.Conv1d(3, 8, 3)(ember.randn(3)) end,
      "Conv1d.forward: expected an input [N, C, L] or [C, L], got shape [3]")
    raises_here(function() local _ = nn.Conv2d(6, 8, 3, { groups = 4 }) end,
      "Conv2d: in_channels=6 must be divisible by groups=4")
    raises_here(function() local _ = nn.Conv2d(4, 6, 3, { groups = 4 }) end,
      "Conv2d: out_channels=6 must be divisible by groups=4")
    raises_here(function() local _ = nn.Conv2d(3, 8, 0) end,
      "Conv2d: kernel_size must be a positive integer or a pair of them, got 0")
    raises_here(function() local _ = nn.Conv2d(3, 8, 3, { stride = 2, padding = "same" }) end,
      "Conv2d: padding=\"same\" needs stride 1")
    raises_here(function() local _ = nn.Conv2d(3, 8, 3, { padding = "full" }) end,
      "Conv2d: padding must be a non-negative integer, a pair of them, \"same\" or \"valid\", got \"full\"")
    raises_here(function() local _ = nn.Conv2d(3, 8, 3, { padding_mode = "mirror" }) end,
      "Conv2d: padding_mode must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got \"mirror\"")
    raises_here(function() local _ = nn.Conv1d(0, 8, 3) end, "Conv1d: in_channels must be a positive integer, got 0")
    raises_here(function() local _ = nn.Conv2d(3, 8, 3, { strides = 2 }) end, "Conv2d: unknown option 'strides'")
  end)
end)
