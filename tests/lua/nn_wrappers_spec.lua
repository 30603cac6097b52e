-- The nn modules that are thin layers over nn.functional's rules (or ember.pad), checked
-- against PyTorch 1.13 (tests/gen_nn_wrappers.py writes tests/fixtures/nn_wrappers.lua) and
-- against the function they call, bit for bit:
--   * ConstantPad3d, ReflectionPad3d, ReplicationPad3d, ZeroPad1d, ZeroPad3d: torch's output,
--     input gradient and repr; module(x) == F.pad(x, ...) and the same gradient; each option
--     reaches the function; the keyword form; float64 gradcheck; errors at the caller's line;
--   * MaxPool3d's return_indices and MaxUnpool3d: torch's values, 1-based indices, gradients;
--   * ConvTranspose3d / F.conv_transpose3d: torch's output, gradients, shapes, repr, gradcheck;
--   * MultiLabelMarginLoss / F.multilabel_margin_loss: torch's loss and gradient (repeats, -1 ends);
--   * FractionalMaxPool2d/3d / F.fractional_max_pool2d/3d: torch's values, indices, gradient (its samples);
--   * AdaptiveLogSoftmaxWithLoss: torch's state names, output, loss, gradients, log_prob, predict;
--   * the lazy modules: the target the first input sizes (its init under one seed), a state dict sizes it;
--   * ParameterList and ParameterDict: torch's state dict names and order, a torch state dict
--     loads and gives torch's output and gradients; 1-based indexing; printing; an optimizer
--     sees them; errors;
--   * every module over an nn.functional rule: module(inputs) == the function with the module's
--     options written out, bit for bit, and the same gradients; a changed option changes the
--     result; a misspelt option is refused naming the module at the caller's line.
local ember = require "ember"
local nn = ember.nn
local F = nn.functional
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local T, check, raises_here = parity.T, parity.check, parity.raises_here
local fx = dofile("tests/fixtures/nn_wrappers.lua")

-- the module a fixture's Lua text builds
local function build(ctor) return assert(load("return " .. ctor, ctor, "t", { nn = nn, ember = ember }))() end

-- out and the gradient of sum(out * w) for x, through f
local function run(f, x, w)
  x = x:detach():requires_grad_(true)
  local out = f(x)
  local loss = (out * w):sum()
  loss:backward()
  return out, x.grad
end

local function same_bits(what, a, b)
  assert.are.same(b.shape, a.shape, what .. " shape")
  assert.are.same(parity.values(b), parity.values(a), what)
end

describe("nn padding modules against torch and ember.pad", function()
  local modes = { ConstantPad3d = "constant", ReflectionPad3d = "reflect", ReplicationPad3d = "replicate",
    ZeroPad1d = "constant", ZeroPad3d = "constant" }
  for _, c in ipairs(fx.pads) do
    it(c.name .. ": torch's output, gradient and repr; ember.pad's bits", function()
      local m = build(c.ctor)
      local x, w = T(c.x), T(c.w)
      local out, gx = run(m, x, w)
      check(c.name .. " out", out, T(c.out), 1e-15)
      check(c.name .. " grad", gx, T(c.grad_x), 1e-15)
      assert.are.equal(c.repr, tostring(m))
      local mode = modes[c.name:match("^%w+")]
      local fout, fgx = run(function(t) return F.pad(t, m.padding, mode, m.value) end, x, w)
      same_bits(c.name .. " out vs F.pad", out, fout)
      same_bits(c.name .. " grad vs F.pad", gx, fgx)
    end)
  end

  it("each option reaches ember.pad: the padding's every side and the value", function()
    local x = ember.randn(1, 2, 3, 3, 3, { dtype = "float64" })
    local base = nn.ConstantPad3d({ 1, 0, 0, 0, 0, 0 }, 0.5)(x)
    for side = 1, 6 do
      local p = { 0, 0, 0, 0, 0, 0 }
      p[side] = 2
      local y = nn.ConstantPad3d(p, 0.5)(x)
      local dim = 5 - (side - 1) // 2
      assert.are.equal(5, y.shape[dim], "side " .. side)
      -- the padded slab is the value, on the side named
      local slab = y:narrow(dim, side % 2 == 1 and 1 or 4, 2)
      assert.are.equal(0.5, slab:min():item())
      assert.are.equal(0.5, slab:max():item())
    end
    local slab = nn.ConstantPad3d({ 1, 0, 0, 0, 0, 0 }, -3)(x):narrow(5, 1, 1)
    assert.are.equal(-3, slab:min():item())
    assert.are.equal(-3, slab:max():item())
    assert.are.equal(0.5, base[1][1][1][1][1]:item())
    for _, name in ipairs({ "ReflectionPad3d", "ReplicationPad3d" }) do
      local a = nn[name]({ 1, 0, 0, 0, 0, 0 })(x)
      local b = nn[name]({ 0, 1, 0, 0, 0, 0 })(x)
      assert.are.same({ 1, 2, 3, 3, 4 }, a.shape)
      assert.is_false(ember.equal(a, b), name .. ": left and right padding differ")
      local mode = name == "ReflectionPad3d" and "reflect" or "replicate"
      same_bits(name, a, F.pad(x, { 1, 0, 0, 0, 0, 0 }, mode))
    end
    local z = nn.ZeroPad1d({ 2, 1 })(x:reshape(2, 3, 9))
    assert.are.same({ 2, 3, 12 }, z.shape)
    same_bits("ZeroPad1d", z, F.pad(x:reshape(2, 3, 9), { 2, 1 }))
  end)

  it("the keyword form is the positional one", function()
    local x = ember.randn(2, 2, 3, 3, 3)
    same_bits("ConstantPad3d", nn.ConstantPad3d{ padding = { 1, 2, 0, 1, 1, 0 }, value = 1.5 }(x),
      nn.ConstantPad3d({ 1, 2, 0, 1, 1, 0 }, 1.5)(x))
    same_bits("ReflectionPad3d", nn.ReflectionPad3d{ padding = 1 }(x), nn.ReflectionPad3d(1)(x))
    same_bits("ReplicationPad3d", nn.ReplicationPad3d{ padding = 2 }(x), nn.ReplicationPad3d(2)(x))
    same_bits("ZeroPad3d", nn.ZeroPad3d{ padding = 1 }(x), nn.ConstantPad3d(1, 0)(x))
    same_bits("ZeroPad1d", nn.ZeroPad1d{ padding = 3 }(x[1][1]), nn.ConstantPad1d(3, 0)(x[1][1]))
  end)

  it("float64 gradcheck of each 3-d padding", function()
    local x = ember.randn(1, 2, 3, 3, 2, { dtype = "float64" })
    gradcheck.check(function(t) return nn.ReflectionPad3d({ 1, 1, 2, 0, 1, 2 })(t) end, { x })
    gradcheck.check(function(t) return nn.ReplicationPad3d({ 2, 0, 1, 1, 0, 1 })(t) end, { x })
    gradcheck.check(function(t) return nn.ConstantPad3d({ -1, 1, 1, 0, 1, 1 }, 0.25)(t) end, { x })
  end)

  it("refuses bad options and inputs naming the module at the caller's line", function()
    raises_here(function() nn.ConstantPad3d({ 1, 2 }, 0) end,
      "ConstantPad3d: padding must be an integer or a list of six {left, right, top, bottom, front, back}, got {1, 2}")
    raises_here(function() nn.ConstantPad3d(1, "x") end, "ConstantPad3d: value must be a number, got string")
    raises_here(function() nn.ReflectionPad3d(-1) end, "ReflectionPad3d: padding must be a non-negative integer")
    raises_here(function() nn.ReplicationPad3d({ 1, 1, 1, 1, 1, 1.5 }) end, "ReplicationPad3d: padding must be")
    raises_here(function() nn.ZeroPad1d({ 1, 1, 1, 1 }) end, "ZeroPad1d: padding must be an integer or a list of two")
    raises_here(function() nn.ZeroPad3d{ padding = 1, value = 2 } end, "ZeroPad3d: unknown argument 'value'")
    raises_here(function() nn.ConstantPad3d{ pading = 1 } end, "nn.ConstantPad3d: unknown option 'pading'")
    raises_here(function() nn.ReflectionPad3d(1)(ember.randn(2, 3, 4)) end,
      "ReflectionPad3d.forward: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [2, 3, 4]")
    raises_here(function() nn.ReflectionPad3d({ 0, 0, 0, 0, 2, 0 })(ember.randn(1, 1, 2, 3, 3)) end,
      "ReflectionPad3d.forward: padding (0, 0, 0, 0, 2, 0) is too large for an input of shape [1, 1, 2, 3, 3]")
    raises_here(function() nn.ConstantPad3d(-2, 0)(ember.randn(1, 1, 3, 3, 3)) end,
      "ConstantPad3d.forward: padding (-2, -2, -2, -2, -2, -2) is too large")
    raises_here(function() nn.ZeroPad1d(1)("x") end, "ZeroPad1d.forward: expected an input [N, C, L] or [C, L], got string")
  end)
end)

describe("nn.MaxPool3d with return_indices and nn.MaxUnpool3d against torch", function()
  for _, c in ipairs(fx.pools3d) do
    it(c.name .. ": torch's values, 1-based indices and gradients; the functions' bits", function()
      local pool = build(c.ctor)
      local x = T(c.x)
      local xl = x:detach():requires_grad_(true)
      local y, idx = pool(xl)
      check("out", y, T(c.out), 0)
      assert.are.same(parity.values(T(c.indices)), parity.values(idx))
      assert.are.equal("int64", idx.dtype)
      local loss = (y * T(c.w)):sum()
      loss:backward()
      check("grad x", xl.grad, T(c.grad_x), 1e-15)
      -- the function with the module's options
      local fy, fidx = F.max_pool3d_with_indices(x, pool.kernel_size, pool.opts.stride, pool.opts.padding or 0,
        pool.opts.dilation or 1)
      same_bits("max_pool3d_with_indices", fy, y)
      same_bits("indices", fidx, idx)
      same_bits("without indices", F.max_pool3d(x, pool.kernel_size, { stride = pool.opts.stride,
        padding = pool.opts.padding, dilation = pool.opts.dilation }), y)
      if c.unpool then
        local un = build(c.unpool)
        local yl = y:detach():requires_grad_(true)
        local u = un(yl, idx, { x.shape[x.ndim - 2], x.shape[x.ndim - 1], x.shape[x.ndim] })
        check("unpooled", u, T(c.unpooled), 0)
        local uloss = (u * T(c.wu)):sum()
        uloss:backward()
        check("grad y", yl.grad, T(c.grad_y), 0)
        same_bits("max_unpool3d", F.max_unpool3d(y, idx, un.kernel_size, { stride = un.stride, padding = un.padding,
          output_size = x.shape }), u)
      end
    end)
  end

  it("float64 gradcheck of the pool's values and of the unpool; refusals name the module or function", function()
    local x = ember.randn(1, 2, 4, 3, 4, { dtype = "float64" })
    gradcheck.check(function(t) return (nn.MaxPool3d({ 2, 2, 3 }, { stride = 1, padding = 1, return_indices = true })(t)) end, { x })
    local _, idx = F.max_pool3d(x, 2, { return_indices = true })
    gradcheck.check(function(t) return nn.MaxUnpool3d(2)(t, idx, { 4, 3, 4 }) end, { ember.randn(1, 2, 2, 1, 2, { dtype = "float64" }) })
    raises_here(function() nn.MaxUnpool3d({ 2, 2 }) end, "MaxUnpool3d: kernel_size must be a positive integer or a table of three, got {2, 2}")
    raises_here(function() nn.MaxUnpool3d(2, { strid = 2 }) end, "nn.MaxUnpool3d: unknown option 'strid'")
    raises_here(function() nn.MaxUnpool3d(2)(ember.randn(2, 2, 2), idx) end,
      "nn.functional.max_unpool3d: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [2, 2, 2]")
    raises_here(function() nn.MaxUnpool3d(2)(ember.randn(1, 2, 2, 1, 2), idx:float()) end, "indices must be int64")
    raises_here(function() nn.MaxPool3d(2, { return_indices = 1 }) (x) end, "MaxPool3d.forward: return_indices must be true or false, got 1")
    raises_here(function() F.max_pool3d_with_indices(x, 2, { return_indices = false }) end, "return_indices is always true here")
    raises_here(function() F.avg_pool3d(x, 2, { return_indices = true }) end, "nn.functional.avg_pool3d: unknown option 'return_indices'")
  end)
end)

describe("nn.ConvTranspose3d and nn.functional.conv_transpose3d against torch", function()
  for _, c in ipairs(fx.convt3d) do
    it(c.name .. ": torch's output, gradients, parameter shapes and repr; F.conv_transpose3d's bits", function()
      local m = build(c.ctor):to("float64")
      assert.are.equal((c.repr:gsub("False", "false")), tostring(m)) -- ember prints Lua's booleans
      local sd = { weight = T(c.weight), bias = c.bias and T(c.bias) or nil }
      for n, t in pairs(m:state_dict()) do assert.are.same(sd[n].shape, t.shape, n) end
      m:load_state_dict(sd)
      local x = T(c.x):requires_grad_(true)
      local out = m(x, c.output_size)
      check("out", out, T(c.out), 1e-13)
      local loss = (out * T(c.w)):sum()
      loss:backward()
      check("grad x", x.grad, T(c.grad_x), 1e-13)
      check("grad weight", m.weight.grad, T(c.grad_weight), 1e-13)
      if c.bias then check("grad bias", m.bias.grad, T(c.grad_bias), 1e-13) end
      if not c.output_size then
        same_bits("F.conv_transpose3d", F.conv_transpose3d(T(c.x), m.weight, m.bias, { stride = m.stride,
          padding = m.padding, output_padding = m.output_padding, groups = m.groups, dilation = m.dilation }), out)
      end
    end)
  end

  it("float64 gradcheck; float32 as float64; refusals name the module or function at the caller's line", function()
    local m = nn.ConvTranspose3d(2, 2, { 2, 3, 2 }, { stride = { 2, 1, 2 }, padding = { 0, 1, 1 }, output_padding = { 1, 0, 0 },
      dtype = "float64" })
    gradcheck.check(function(x, w, b) return F.conv_transpose3d(x, w, b, { stride = { 2, 1, 2 }, padding = { 0, 1, 1 },
      output_padding = { 1, 0, 0 } }) end, { ember.randn(1, 2, 2, 2, 2, { dtype = "float64" }), m.weight:detach(), m.bias:detach() })
    local m32 = nn.ConvTranspose3d(3, 4, 2, { stride = 2 })
    local x = ember.randn(1, 3, 2, 2, 3)
    check("float32", m32(x), m32:to("float64")(x:double()), 1e-6)
    raises_here(function() nn.ConvTranspose3d(3, 4, { 2, 2 }) end, "ConvTranspose3d: kernel_size must be a positive integer or a table of three")
    raises_here(function() nn.ConvTranspose3d(3, 4, 2, { output_padding = 2 }) end,
      "ConvTranspose3d: output_padding must be smaller than either stride or dilation")
    raises_here(function() nn.ConvTranspose3d(3, 4, 2, { strides = 2 }) end, "nn.ConvTranspose3d: unknown option 'strides'")
    raises_here(function() nn.ConvTranspose3d(3, 4, 2)(ember.randn(3, 4, 4)) end,
      "ConvTranspose3d.forward: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [3, 4, 4]")
    raises_here(function() nn.ConvTranspose3d(3, 4, 2)(ember.randn(1, 2, 4, 4, 4)) end,
      "ConvTranspose3d.forward: expected 3 input channels (in_channels), got 2")
    raises_here(function() nn.ConvTranspose3d(3, 4, 2, { stride = 2 })(ember.randn(1, 3, 2, 2, 2), { 4, 4, 9 }) end,
      "ConvTranspose3d.forward: output_size {4, 4, 9} is not reachable")
    raises_here(function() F.conv_transpose3d(ember.randn(1, 3, 2, 2, 2), ember.randn(3, 2, 2, 2)) end,
      "nn.functional.conv_transpose3d: weight must be 5-d")
  end)
end)

describe("nn.MultiLabelMarginLoss and nn.functional.multilabel_margin_loss against torch", function()
  for _, c in ipairs(fx.mlml) do
    it(c.name .. ": torch's loss and gradient; the module is the function", function()
      local x, t = T(c.x):requires_grad_(true), T(c.target)
      local m = nn.MultiLabelMarginLoss{ reduction = c.reduction }
      local out = m(x, t)
      check("loss", out, T(c.out), 1e-14)
      local loss = (out * T(c.w)):sum()
      loss:backward()
      check("grad", x.grad, T(c.grad_x), 1e-14)
      same_bits("F", F.multilabel_margin_loss(x, t, { reduction = c.reduction }), out)
      assert.are.equal("MultiLabelMarginLoss(reduction=" .. c.reduction .. ")", tostring(m))
    end)
  end

  it("gradcheck; a changed reduction changes the result; refusals", function()
    local t = ember.tensor({ { 2, 4, 0, 1 }, { 3, 0, 0, 0 } }, "int64")
    gradcheck.check(function(x) return F.multilabel_margin_loss(x, t, { reduction = "none" }) end,
      { ember.randn(2, 4, { dtype = "float64" }) })
    local x = ember.randn(2, 4, { dtype = "float64" })
    assert.is_false(ember.equal(nn.MultiLabelMarginLoss{ reduction = "sum" }(x, t), nn.MultiLabelMarginLoss()(x, t)))
    raises_here(function() nn.MultiLabelMarginLoss{ reduction = "avg" } end, "MultiLabelMarginLoss: reduction must be")
    raises_here(function() nn.MultiLabelMarginLoss{ margin = 1 } end, "nn.MultiLabelMarginLoss: unknown option 'margin'")
    raises_here(function() nn.MultiLabelMarginLoss()(x, t:double()) end,
      "nn.functional.multilabel_margin_loss: target must be int64 class ids")
    raises_here(function() nn.MultiLabelMarginLoss()(x, t[1]) end,
      "nn.functional.multilabel_margin_loss: expected input [N, C] or [C] and a target of its shape, got [2, 4] and [4]")
    raises_here(function() nn.MultiLabelMarginLoss()(x, t - 1) end,
      "nn.functional.multilabel_margin_loss: target ids must lie in 1..4 (1-based; 0 ends a sample's list), got -1..3")
  end)
end)

describe("nn.FractionalMaxPool2d/3d and nn.functional.fractional_max_pool2d/3d against torch", function()
  for _, c in ipairs(fx.fractional) do
    it(c.name .. ": torch's values, indices and gradient with its samples", function()
      local s = T(c.samples)
      local m = assert(load("return " .. c.ctor, c.ctor, "t", { nn = nn, s = s }))()
      local x = T(c.x):requires_grad_(true)
      local y, idx = m(x)
      check("out", y, T(c.out), 0)
      assert.are.same(parity.values(T(c.indices)), parity.values(idx))
      local loss = (y * T(c.w)):sum()
      loss:backward()
      check("grad", x.grad, T(c.grad_x), 1e-15) -- overlapping windows add in another order
      same_bits("F", (F["fractional_max_pool" .. m._nd .. "d"](x, m.kernel_size, m.output_size, m.output_ratio, false, s)), y)
    end)
  end

  it("draws fresh samples per call; gradcheck; refusals", function()
    local x = ember.randn(2, 3, 12, 12, { dtype = "float64" })
    local pool = nn.FractionalMaxPool2d(2, { output_size = 5 })
    ember.manual_seed(3)
    local a = pool(x)
    assert.is_false(ember.equal(a, pool(x)), "a second call draws other windows")
    ember.manual_seed(3)
    same_bits("seeded", pool(x), a)
    local s = ember.rand(1, 2, 2, { dtype = "float64" })
    gradcheck.check(function(t) return F.fractional_max_pool2d(t, 2, { output_size = { 3, 2 }, _random_samples = s }) end,
      { ember.randn(1, 2, 6, 5, { dtype = "float64" }) })
    raises_here(function() nn.FractionalMaxPool2d(2) end, "FractionalMaxPool2d: give output_size or output_ratio (one of them)")
    raises_here(function() nn.FractionalMaxPool2d(2, { output_size = 3, output_ratio = 0.5 }) end, "give output_size or output_ratio")
    raises_here(function() nn.FractionalMaxPool2d{ kernel_size = 2 } end, "FractionalMaxPool2d: give output_size or output_ratio")
    raises_here(function() nn.FractionalMaxPool2d(2, { output_sise = 3 }) end, "nn.FractionalMaxPool2d: unknown option 'output_sise'")
    raises_here(function() nn.FractionalMaxPool2d(2, { output_ratio = 1.5 })(x) end,
      "nn.functional.fractional_max_pool2d: output_ratio must be a number or a pair of them in (0, 1), got 1.5")
    raises_here(function() nn.FractionalMaxPool2d(4, { output_size = 10 })(x) end,
      "nn.functional.fractional_max_pool2d: output_size {10, 10} and kernel_size {4, 4} do not fit an input of 12 x 12")
    raises_here(function() nn.FractionalMaxPool2d(2, { output_size = 3, _random_samples = s })(x) end,
      "nn.functional.fractional_max_pool2d: _random_samples must be [2, 3, 2] (N, C, 2), got [1, 2, 2]")
    raises_here(function() nn.FractionalMaxPool3d({ 2, 2 }, { output_size = 3 }) end,
      "FractionalMaxPool3d: kernel_size must be a positive integer or a table of three, got {2, 2}")
    raises_here(function() nn.FractionalMaxPool3d(2, { output_size = 3 })(x[1][1]) end,
      "nn.functional.fractional_max_pool3d: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [12, 12]")
    gradcheck.check(function(t) return F.fractional_max_pool3d(t, 2, { output_size = { 2, 3, 2 },
      _random_samples = ember.tensor({ { { 0.3, 0.6, 0.9 } } }, "float64") }) end, { ember.randn(1, 1, 4, 5, 4, { dtype = "float64" }) })
  end)
end)

describe("nn.AdaptiveLogSoftmaxWithLoss against torch", function()
  local c = fx.asm
  local function loaded()
    local m = nn.AdaptiveLogSoftmaxWithLoss(6, 12, { 3, 7 }, { div_value = 2, head_bias = true, dtype = "float64" })
    local sd = {}
    for i, n in ipairs(c.names) do sd[n] = T(c.state[i]) end
    m:load_state_dict(sd)
    return m
  end

  it("torch's parameter names, output, loss, gradients, log_prob and predict (1-based ids)", function()
    local m = loaded()
    assert.are.same(c.names, { table.unpack(m:parameter_names()) })
    local x = T(c.x):requires_grad_(true)
    local r = m(x, T(c.target))
    check("output", r.output, T(c.output), 1e-14)
    check("loss", r.loss, T(c.loss), 1e-14)
    assert.are.equal(r.output, r[1])
    assert.are.equal(r.loss, r[2])
    local total = (r.output * T(c.w)):sum() + r.loss
    total:backward()
    check("grad x", x.grad, T(c.grad_x), 1e-13)
    local params = m:named_parameters()
    for i, n in ipairs(c.names) do check("grad " .. n, params[n].grad, T(c.grads[i]), 1e-13) end
    check("log_prob", m:log_prob(T(c.x)), T(c.log_prob), 1e-14)
    assert.are.same(parity.values(T(c.predict)), parity.values(m:predict(T(c.x))))
    local r1 = m(T(c.x1), ember.tensor(c.target1, "int64"))
    check("unbatched output", r1.output, T(c.output1), 1e-14)
    check("unbatched loss", r1.loss, T(c.loss1), 1e-14)
    assert.are.same({}, r1.output.shape)
  end)

  it("refuses bad sizes, cutoffs, targets and inputs naming itself at the caller's line", function()
    raises_here(function() nn.AdaptiveLogSoftmaxWithLoss(6, 12, { 7, 3 }) end,
      "AdaptiveLogSoftmaxWithLoss: cutoffs must be a list of unique, positive integers in increasing order, each "
      .. "between 1 and n_classes - 1 (11), got {7, 3}")
    raises_here(function() nn.AdaptiveLogSoftmaxWithLoss(6, 12, { 3, 12 }) end, "cutoffs must be a list")
    raises_here(function() nn.AdaptiveLogSoftmaxWithLoss(6, 12, { 3 }, { div = 2 }) end,
      "nn.AdaptiveLogSoftmaxWithLoss: unknown option 'div'")
    raises_here(function() nn.AdaptiveLogSoftmaxWithLoss(6, 12, { 3, 7 }, { div_value = 8 }) end,
      "AdaptiveLogSoftmaxWithLoss: cluster 1's projection would have 0 features")
    local m = loaded()
    raises_here(function() m(T(c.x), ember.tensor({ 1, 2, 3, 4, 5, 6, 13 }, "int64")) end,
      "AdaptiveLogSoftmaxWithLoss.forward: target ids must lie in 1..12 (1-based), got 13")
    raises_here(function() m(T(c.x), ember.tensor({ 1, 2 }, "int64")) end,
      "AdaptiveLogSoftmaxWithLoss.forward: expected an int64 target [7] of 1-based class ids, got int64 [2]")
    raises_here(function() m(ember.randn(7, 5, { dtype = "float64" }), T(c.target)) end,
      "AdaptiveLogSoftmaxWithLoss.forward: expected an input [N, 6] or [6] (in_features), got [7, 5]")
  end)
end)

describe("nn's lazy modules: LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*", function()
  it("becomes the nn.Linear the first input's size makes, with Linear's init; prints as torch", function()
    local lazy = nn.LazyLinear(3, { dtype = "float64" })
    assert.are.equal("LazyLinear(in_features=0, out_features=3, bias=true)", tostring(lazy))
    assert.are.equal(0, #lazy:parameters())
    local x = ember.randn(4, 5, { dtype = "float64" })
    ember.manual_seed(21)
    local y = lazy(x)
    ember.manual_seed(21)
    local ref = nn.Linear(5, 3, { dtype = "float64" })
    same_bits("weight", lazy.weight, ref.weight)
    same_bits("bias", lazy.bias, ref.bias)
    same_bits("out", y, F.linear(x, ref.weight, ref.bias))
    assert.are.equal(5, lazy.in_features)
    assert.are.equal("Linear(in_features=5, out_features=3, bias=true)", tostring(lazy))
    assert.are.same({ "weight", "bias" }, { table.unpack(lazy:parameter_names()) })
    assert.is_true(lazy:isinstance(nn.Linear))
    -- a state dict sizes it too; options reach Linear
    local l2 = nn.LazyLinear(3, { bias = false })
    assert.are.equal("LazyLinear(in_features=0, out_features=3, bias=false)", tostring(l2))
    local w = ember.randn(3, 7)
    l2:load_state_dict({ weight = w })
    same_bits("loaded", l2.weight, w)
    assert.is_nil(l2.bias)
    -- in a Sequential, each sized by the one before
    local net = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
    assert.are.same({ 6, 2 }, net(ember.randn(6, 4)).shape)
    assert.are.same({ 8, 4 }, net[1].weight.shape)
    assert.are.same({ 2, 8 }, net[3].weight.shape)
  end)

  it("LazyConv1d/2d/3d and LazyBatchNorm1d/2d/3d become their targets, sized by the input or a state dict", function()
    for nd = 1, 3 do
      local shape = { 2, 4 }
      for i = 1, nd do shape[2 + i] = 5 end
      local x = ember.randn(shape, { dtype = "float64" })
      local lazy = nn["LazyConv" .. nd .. "d"](6, 3, { groups = 2, padding = 1, dtype = "float64" })
      -- PyTorch's text: str(torch.nn.LazyConv2d(6, 3, groups=2, padding=1)) is "LazyConv2d(0, 6, kernel_size=(3, 3), ..."
      assert.are.equal(0, #lazy:parameters())
      assert.is_truthy(tostring(lazy):find("^LazyConv" .. nd .. "d%(0, 6, kernel_size="))
      ember.manual_seed(5)
      local y = lazy(x)
      ember.manual_seed(5)
      local ref = nn["Conv" .. nd .. "d"](4, 6, 3, { groups = 2, padding = 1, dtype = "float64" })
      same_bits("LazyConv" .. nd .. "d weight", lazy.weight, ref.weight)
      same_bits("LazyConv" .. nd .. "d out", y, ref(x))
      assert.is_true(lazy:isinstance(nn["Conv" .. nd .. "d"]))
      local fresh = nn["LazyConv" .. nd .. "d"](6, 3, { groups = 2 })
      fresh:load_state_dict(ref:float():state_dict())
      assert.are.equal(4, fresh.in_channels)
      local bn = nn["LazyBatchNorm" .. nd .. "d"]{ momentum = 0.3, dtype = "float64" }
      assert.are.equal("LazyBatchNorm" .. nd .. "d(0, eps=1e-05, momentum=0.3, affine=true, track_running_stats=true)",
        tostring(bn))
      local rb = nn["BatchNorm" .. nd .. "d"](4, { momentum = 0.3, dtype = "float64" })
      same_bits("LazyBatchNorm" .. nd .. "d out", bn(x), rb(x))
      same_bits("LazyBatchNorm" .. nd .. "d running_mean", bn.running_mean, rb.running_mean)
      local b2 = nn["LazyBatchNorm" .. nd .. "d"]()
      b2:load_state_dict(nn["BatchNorm" .. nd .. "d"](7):state_dict())
      assert.are.equal(7, b2.num_features)
    end
    assert.are.same({ 3, 7 }, nn.LazyBatchNorm1d()(ember.randn(3, 7)).shape)
  end)

  it("LazyConvTranspose1d/2d/3d and LazyInstanceNorm1d/2d/3d (PyTorch 1.13's defaults: affine, running stats)", function()
    for nd = 1, 3 do
      local shape = { 2, 4 }
      for i = 1, nd do shape[2 + i] = 3 end
      local x = ember.randn(shape, { dtype = "float64" })
      local up = nn["LazyConvTranspose" .. nd .. "d"](6, 2, { stride = 2, groups = 2, dtype = "float64" })
      assert.is_truthy(tostring(up):find("^LazyConvTranspose" .. nd .. "d%(0, 6, kernel_size="))
      ember.manual_seed(8)
      local y = up(x)
      ember.manual_seed(8)
      local ref = nn["ConvTranspose" .. nd .. "d"](4, 6, 2, { stride = 2, groups = 2, dtype = "float64" })
      same_bits("LazyConvTranspose" .. nd .. "d", y, ref(x))
      local fresh = nn["LazyConvTranspose" .. nd .. "d"](6, 2, { stride = 2, groups = 2 })
      fresh:load_state_dict(ref:float():state_dict())
      assert.are.equal(4, fresh.in_channels)
      -- str(torch.nn.LazyInstanceNorm2d()) in 1.13: "LazyInstanceNorm2d(0, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
      local norm = nn["LazyInstanceNorm" .. nd .. "d"]{ dtype = "float64" }
      assert.are.equal("LazyInstanceNorm" .. nd .. "d(0, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)",
        tostring(norm))
      local rn = nn["InstanceNorm" .. nd .. "d"](4, { affine = true, track_running_stats = true, dtype = "float64" })
      same_bits("LazyInstanceNorm" .. nd .. "d", norm(x[1]), rn(x[1])) -- unbatched: channels in dim 1
      assert.are.same({ "weight", "bias" }, { table.unpack(norm:parameter_names()) })
      local plain = nn["LazyInstanceNorm" .. nd .. "d"]{ affine = false }
      plain(x:float())
      assert.are.equal(0, #plain:parameters()) -- a given option wins over the lazy default
    end
  end)

  it("refuses bad sizes and options naming itself", function()
    raises_here(function() nn.LazyConv2d(8, { 3, 3, 3 }) end, "Conv2d: kernel_size must be a positive integer or a pair of them")
    raises_here(function() nn.LazyConv3d(8, 3)(ember.randn(4, 5, 5)) end,
      "LazyConv3d.forward: expected an input with 4 or 5 dims ([N, C, ...] or [C, ...]), got [4, 5, 5]")
    raises_here(function() nn.LazyBatchNorm2d{ momentun = 0.1 } end, "unknown option 'momentun'")
    raises_here(function() nn.LazyLinear(0) end, "Linear: out_features must be a positive integer, got 0")
    raises_here(function() nn.LazyLinear(3, { in_features = 4 }) end, "nn.Linear: unknown option 'in_features'")
    raises_here(function() nn.LazyLinear(3)(ember.tensor({ 1, 2 }, "int64")) end,
      "LazyLinear.forward: expected a floating-point input, got int64")
    raises_here(function() nn.LazyLinear(3):load_state_dict({ weight = ember.randn(4, 2) }) end,
      "LazyLinear.load_state_dict: weight has 4 rows, out_features is 3")
  end)
end)

describe("nn.ParameterList and nn.ParameterDict", function()
  local c = fx.containers

  -- torch's Holder: x times each gain, then x @ heads.image + (x * x) @ heads.text
  local Holder = nn.Module:extend("Holder")
  function Holder:__init()
    self.gains = nn.ParameterList()
    for _ = 1, 3 do self.gains:append(ember.randn(4, { dtype = "float64" })) end
    self.heads = nn.ParameterDict{ text = ember.randn(4, 2, { dtype = "float64" }),
      image = ember.randn(4, 2, { dtype = "float64" }) }
  end
  function Holder:forward(x)
    for _, g in ipairs(self.gains) do x = x * g end
    return x:matmul(self.heads.image) + (x * x):matmul(self.heads.text)
  end

  it("torch's state dict names in torch's order; torch's state loads and gives its output and gradients", function()
    local m = Holder()
    assert.are.same(c.names, { table.unpack(m:parameter_names()) })
    local sd = {}
    for i, n in ipairs(c.names) do sd[n] = T(c.state[i]) end
    for n, t in pairs(m:state_dict()) do assert.are.same(sd[n].shape, t.shape, n) end
    m:load_state_dict(sd)
    local out = m(T(c.x))
    check("out", out, T(c.out), 1e-14)
    out:sum():backward()
    local params = m:named_parameters()
    for i, n in ipairs(c.names) do check("grad " .. n, params[n].grad, T(c.grads[i]), 1e-14) end
  end)

  it("an optimizer steps every parameter of both", function()
    local m = Holder()
    assert.are.equal(5, #m:parameters())
    local before = {}
    for i, p in ipairs(m:parameters()) do before[i] = p:clone() end
    local opt = ember.optim.SGD(m:parameters(), { lr = 0.1 })
    m(ember.randn(3, 4, { dtype = "float64" })):sum():backward()
    opt:step()
    for i, p in ipairs(m:parameters()) do assert.is_false(ember.equal(p, before[i]), "parameter " .. i) end
  end)

  it("ParameterList: 1-based indexing, PyTorch's names and printing, tensors made parameters", function()
    local t = ember.ones(3)
    local list = nn.ParameterList({ t, ember.zeros(2, 5) })
    assert.are.equal(2, #list)
    assert.is_true(list[1].requires_grad)
    assert.is_nil(list[3])
    assert.are.same({ 2, 5 }, list[-1].shape)
    list[1]:detach():add_(1) -- the parameter shares t's storage, as torch.nn.Parameter(t)
    assert.are.equal(2, t[1]:item())
    local p = nn.Parameter(ember.randn(4))
    list:append(p)
    assert.is_true(rawequal(p, list[3]), "a parameter is kept, the same tensor")
    list[2] = ember.randn(7)
    assert.are.same({ 7 }, list[2].shape)
    local keys = {}
    for k, v in pairs(list:state_dict()) do keys[#keys + 1] = k .. ":" .. #v.shape end
    table.sort(keys)
    assert.are.same({ "0:1", "1:1", "2:1" }, keys)
    local seen = {}
    for i, q in ipairs(list) do seen[i] = q.shape[1] end
    assert.are.same({ 3, 7, 4 }, seen)
    assert.are.equal("ParameterList(\n    (0): Parameter containing: [float32 of size 3]\n"
      .. "    (1): Parameter containing: [float32 of size 7]\n    (2): Parameter containing: [float32 of size 4]\n)",
      tostring(list))
    assert.are.equal("ParameterList()", tostring(nn.ParameterList()))
    list:extend({ ember.randn(2, 2) })
    assert.are.equal(4, #list:parameters())
  end)

  it("ParameterDict: order, sorted plain tables, keys/values/items/get/pop/update, printing", function()
    local d = nn.ParameterDict{ { "b", ember.randn(3) }, { "a", ember.randn(2, 2) } }
    assert.are.same({ "b", "a" }, { table.unpack(d:keys()) })
    assert.are.same({ "a", "b" }, { table.unpack(nn.ParameterDict{ b = ember.randn(1), a = ember.randn(1) }:keys()) })
    assert.is_true(d.a.requires_grad)
    assert.are.equal(d.a, d["a"])
    assert.are.equal(d.a, d:get("a"))
    assert.are.equal("none", d:get("zzz", "none"))
    d.c = ember.randn(5)
    assert.are.equal(3, #d)
    assert.are.same({ 5 }, d:values()[3].shape)
    assert.are.equal("c", d:items()[3][1])
    assert.are.same({ 5 }, d:pop("c").shape)
    assert.is_false(d:contains("c"))
    d:update({ { "a", ember.randn(6) } }) -- replaces
    assert.are.same({ 6 }, d.a.shape)
    assert.are.equal("ParameterDict(\n    (b): Parameter containing: [float32 of size 3]\n"
      .. "    (a): Parameter containing: [float32 of size 6]\n)", tostring(d))
    local names = {}
    for n in pairs(d) do names[#names + 1] = n end
    assert.are.same({ "b", "a" }, names)
    d.b = nil
    assert.are.equal(1, #d:parameters())
  end)

  it("refuse what torch refuses, and Lua's pitfalls, naming the container at the caller's line", function()
    local list = nn.ParameterList({ ember.randn(2) })
    raises_here(function() return list[0] end, "ParameterList: index 0: indices are 1-based")
    raises_here(function() list[5] = ember.randn(2) end, "ParameterList: index 5 is out of range for a list of 1 parameters")
    raises_here(function() list:append("x") end, "ParameterList.append: the value must be a tensor, got string")
    raises_here(function() list:append(ember.tensor({ 1, 2 }, "int64")) end,
      "ParameterList.append: the value must be a floating-point tensor (a parameter requires grad), got int64")
    raises_here(function() nn.ParameterList(ember.randn(2)) end, "ParameterList: expected a table of tensors, got a tensor")
    raises_here(function() nn.ParameterList({ ember.randn(2), 3 }) end, "ParameterList: entry 2 must be a tensor, got number")
    raises_here(function() list(ember.randn(2)) end, "ParameterList.forward: a ParameterList is not callable")
    local d = nn.ParameterDict()
    raises_here(function() d.keys = ember.randn(2) end, "ParameterDict: the key 'keys' would hide ParameterDict's own")
    raises_here(function() d["a.b"] = ember.randn(2) end, "ParameterDict: a key must be a non-empty string without '.'")
    raises_here(function() d.w = 3 end, "ParameterDict: 'w' must be a tensor, got number")
    raises_here(function() d:pop("nope") end, "ParameterDict.pop: no parameter named 'nope'")
    raises_here(function() d:update({ { "x" } }) end, "ParameterDict.update: entry 1 must be a {name, tensor} pair")
    raises_here(function() nn.ParameterDict{ w = ember.tensor({ 1 }, "int64") } end,
      "ParameterDict.update: 'w' must be a floating-point tensor")
  end)
end)

-- Each module against the nn.functional call its options stand for, bit for bit (output and
-- the gradients of sum(out * w) for every float input): `ctor` builds it, `ref(F, ...)` is the
-- call written out by hand, `variant` changes one option (so the output must change: the option
-- reaches the function), `bad` an option the module must refuse naming itself.
describe("nn modules over nn.functional: module == function", function()
  local function f64(...) return ember.randn({ ... }, { dtype = "float64" }) end
  local function sign(n) return ember.where(ember.rand(n):lt(0.5), -1.0, 1.0):double() end
  local labels = ember.tensor({ { 1, 0, 1 }, { 0, 0, 1 } }, "float64")
  local cases = {
    { "CosineEmbeddingLoss", "nn.CosineEmbeddingLoss{margin = 0.1}", "nn.CosineEmbeddingLoss{margin = -0.5}",
      function(F, a, b, y) return F.cosine_embedding_loss(a, b, y, { margin = 0.1, reduction = "mean" }) end,
      function() return { f64(40, 3), f64(40, 3), sign(40) } end, "nn.CosineEmbeddingLoss{margn = 1}" },
    { "HingeEmbeddingLoss", "nn.HingeEmbeddingLoss{margin = 2}", "nn.HingeEmbeddingLoss{margin = 0.5}",
      function(F, x, y) return F.hinge_embedding_loss(x, y, { margin = 2, reduction = "mean" }) end,
      function() return { f64(6), ember.tensor({ 1, -1, 1, -1, -1, 1 }, "float64") } end, "nn.HingeEmbeddingLoss{reduce = true}" },
    { "SoftMarginLoss", "nn.SoftMarginLoss{reduction = 'sum'}", "nn.SoftMarginLoss()",
      function(F, x, y) return F.soft_margin_loss(x, y, { reduction = "sum" }) end,
      function() return { f64(6), sign(6) } end, "nn.SoftMarginLoss{reduction = 'avg'}" },
    { "MultiLabelSoftMarginLoss", "nn.MultiLabelSoftMarginLoss{weight = ember.tensor({1, 2, 0.5}, 'float64')}",
      "nn.MultiLabelSoftMarginLoss()",
      function(F, x, y) return F.multilabel_soft_margin_loss(x, y, { weight = ember.tensor({ 1, 2, 0.5 }, "float64") }) end,
      function() return { f64(2, 3), labels } end, "nn.MultiLabelSoftMarginLoss{pos_weight = 1}" },
    { "MultiMarginLoss", "nn.MultiMarginLoss{p = 2, margin = 0.5, weight = ember.tensor({1, 3, 2}, 'float64')}",
      "nn.MultiMarginLoss{p = 2, margin = 1.5, weight = ember.tensor({1, 3, 2}, 'float64')}",
      function(F, x, t) return F.multi_margin_loss(x, t, { p = 2, margin = 0.5, weight = ember.tensor({ 1, 3, 2 }, "float64") }) end,
      function() return { f64(4, 3), ember.tensor({ 1, 3, 2, 2 }, "int64") } end, "nn.MultiMarginLoss{p = 2, marign = 1}" },
    { "PoissonNLLLoss", "nn.PoissonNLLLoss{log_input = false, full = true, eps = 1e-3}", "nn.PoissonNLLLoss{log_input = false, eps = 1e-3}",
      function(F, x, y) return F.poisson_nll_loss(x, y, { log_input = false, full = true, eps = 1e-3, reduction = "mean" }) end,
      function() return { ember.rand(5, { dtype = "float64" }) + 0.1, ember.tensor({ 0, 2, 1, 3, 5 }, "float64") } end,
      "nn.PoissonNLLLoss{logits = true}" },
    { "GaussianNLLLoss", "nn.GaussianNLLLoss{full = true, eps = 0.5}", "nn.GaussianNLLLoss{eps = 0.5}",
      function(F, x, y, v) return F.gaussian_nll_loss(x, y, v, { full = true, eps = 0.5, reduction = "mean" }) end,
      function() return { f64(4, 2), f64(4, 2), ember.rand(4, 2, { dtype = "float64" }) + 0.2 } end, "nn.GaussianNLLLoss{var = 1}" },
    { "TripletMarginWithDistanceLoss", "nn.TripletMarginWithDistanceLoss{margin = 0.5, swap = true}",
      "nn.TripletMarginWithDistanceLoss{margin = 0.5}",
      function(F, a, p, n) return F.triplet_margin_with_distance_loss(a, p, n, { margin = 0.5, swap = true, reduction = "mean" }) end,
      function() -- negatives near the positives, far from the anchors: swap then changes the distance used
        local a = f64(5, 3)
        local p = a + f64(5, 3)
        return { a, p, p + f64(5, 3) * 0.1 }
      end, "nn.TripletMarginWithDistanceLoss{distance = 1}" },
    { "Unfold", "nn.Unfold(2, {padding = 1, stride = 2})", "nn.Unfold(2, {padding = 1, stride = 1})",
      function(F, x) return F.unfold(x, 2, { dilation = 1, padding = 1, stride = 2 }) end,
      function() return { f64(2, 3, 4, 5) } end, "nn.Unfold(2, {pad = 1})" },
    { "Fold", "nn.Fold({4, 5}, 2, {stride = 1})", "nn.Fold({5, 4}, 2, {stride = 1})",
      function(F, x) return F.fold(x, { 4, 5 }, 2, { dilation = 1, padding = 0, stride = 1 }) end,
      function() return { f64(2, 12, 12) } end, "nn.Fold({4, 5}, 2, {strides = 1})" },
    { "ChannelShuffle", "nn.ChannelShuffle(2)", "nn.ChannelShuffle(3)",
      function(F, x) return F.channel_shuffle(x, 2) end, function() return { f64(2, 6, 3) } end, "nn.ChannelShuffle(0)" },
    { "LocalResponseNorm", "nn.LocalResponseNorm(3, {alpha = 0.1, beta = 0.5, k = 2})", "nn.LocalResponseNorm(3, {alpha = 0.1, beta = 0.9, k = 2})",
      function(F, x) return F.local_response_norm(x, 3, { alpha = 0.1, beta = 0.5, k = 2 }) end,
      function() return { f64(2, 5, 3, 3) } end, "nn.LocalResponseNorm(3, {kappa = 2})" },
    { "LPPool1d", "nn.LPPool1d(2, 3, {stride = 2})", "nn.LPPool1d(3, 3, {stride = 2})",
      function(F, x) return F.lp_pool1d(x, 2, 3, { stride = 2, ceil_mode = false }) end,
      function() return { f64(2, 3, 9) } end, "nn.LPPool1d(2, 3, {padding = 1})" },
    { "LPPool2d", "nn.LPPool2d(1.5, 2, {ceil_mode = true})", "nn.LPPool2d(1.5, 2)",
      function(F, x) return F.lp_pool2d(x, 1.5, 2, { ceil_mode = true }) end,
      function() return { ember.rand(1, 2, 5, 5, { dtype = "float64" }) + 0.1 } end, "nn.LPPool2d(2, 2, {dilation = 2})" },
    { "Softmax2d", "nn.Softmax2d()", nil, function(F, x) return F.softmax(x, -3) end, function() return { f64(2, 3, 2, 2) } end },
    { "CELU", "nn.CELU(0.5)", "nn.CELU(2)", function(F, x) return F.celu(x, 0.5) end, function() return { f64(40) } end,
      "nn.CELU{alpah = 1}" },
    { "SELU", "nn.SELU()", nil, function(F, x) return F.selu(x) end, function() return { f64(10) } end },
    { "LogSigmoid", "nn.LogSigmoid()", nil, function(F, x) return F.logsigmoid(x) end, function() return { f64(10) } end },
    { "Softmin", "nn.Softmin(1)", "nn.Softmin(2)", function(F, x) return F.softmin(x, 1) end, function() return { f64(3, 4) } end,
      "nn.Softmin{axis = 1}" },
    { "Softshrink", "nn.Softshrink(0.3)", "nn.Softshrink(0.8)", function(F, x) return F.softshrink(x, 0.3) end,
      function() return { f64(20) } end, "nn.Softshrink(-1)" },
    { "Hardshrink", "nn.Hardshrink(0.3)", "nn.Hardshrink(0.8)", function(F, x) return F.hardshrink(x, 0.3) end,
      function() return { f64(20) } end, "nn.Hardshrink{lambda = 1}" },
    { "Tanhshrink", "nn.Tanhshrink()", nil, function(F, x) return F.tanhshrink(x) end, function() return { f64(10) } end },
    { "Threshold", "nn.Threshold(0.1, 20)", "nn.Threshold(0.1, -20)", function(F, x) return F.threshold(x, 0.1, 20) end,
      function() return { f64(20) } end, "nn.Threshold{threshold = 0.1, val = 2}" },
    { "MaxPool3d", "nn.MaxPool3d(2, {stride = 1, padding = 1})", "nn.MaxPool3d(2, {stride = 1})",
      function(F, x) return F.max_pool3d(x, 2, { stride = 1, padding = 1 }) end, function() return { f64(1, 2, 3, 4, 3) } end,
      "nn.MaxPool3d(2, {return_indices = true, strid = 1})" },
    { "AvgPool3d", "nn.AvgPool3d(2, {stride = 1, padding = 1, count_include_pad = false})",
      "nn.AvgPool3d(2, {stride = 1, padding = 1})",
      function(F, x) return F.avg_pool3d(x, 2, { stride = 1, padding = 1, count_include_pad = false }) end,
      function() return { f64(1, 2, 3, 4, 3) } end, "nn.AvgPool3d(2, {divisor = 2})" },
    { "AdaptiveAvgPool3d", "nn.AdaptiveAvgPool3d({2, 1, 3})", "nn.AdaptiveAvgPool3d(2)",
      function(F, x) return F.adaptive_avg_pool3d(x, { 2, 1, 3 }) end, function() return { f64(2, 2, 3, 4, 5) } end },
    { "AdaptiveMaxPool3d", "nn.AdaptiveMaxPool3d({2, 1, 3})", "nn.AdaptiveMaxPool3d(2)",
      function(F, x) return F.adaptive_max_pool3d(x, { 2, 1, 3 }) end, function() return { f64(2, 2, 3, 4, 5) } end },
    { "UpsamplingNearest2d", "nn.UpsamplingNearest2d{scale_factor = 2}", "nn.UpsamplingNearest2d{scale_factor = 3}",
      function(F, x) return F.interpolate(x, { scale_factor = 2, mode = "nearest" }) end,
      function() return { f64(1, 2, 3, 4) } end, "nn.UpsamplingNearest2d{scale = 2}" },
    { "UpsamplingBilinear2d", "nn.UpsamplingBilinear2d{size = {5, 7}}", "nn.UpsamplingBilinear2d{size = {5, 6}}",
      function(F, x) return F.interpolate(x, { size = { 5, 7 }, mode = "bilinear", align_corners = true }) end,
      function() return { f64(1, 2, 3, 4) } end, "nn.UpsamplingBilinear2d{size = {5, 7}, mode = 'nearest'}" },
  }

  -- out and the gradients of sum(out * w) for the float inputs, through f
  local function run_all(f, inputs, w)
    local xs = {}
    for i, x in ipairs(inputs) do
      xs[i] = x:is_floating_point() and x:detach():requires_grad_(true) or x
    end
    local out = f(table.unpack(xs, 1, #inputs))
    w = w or ember.randn(out.shape, { dtype = "float64" })
    local loss = (out * w):sum()
    loss:backward()
    local grads = {}
    for i, x in ipairs(xs) do grads[i] = x.requires_grad and x.grad or false end
    return out, grads, w
  end

  for _, c in ipairs(cases) do
    local name, ctor, variant, ref, make, bad = table.unpack(c, 1, 6)
    it(name .. ": the module is its function, bit for bit, gradients too; its options reach it", function()
      local m = build(ctor)
      local inputs = make()
      local out, grads, w = run_all(m, inputs)
      local fout, fgrads = run_all(function(...) return ref(F, ...) end, inputs, w)
      same_bits(name .. " out", out, fout)
      for i, g in ipairs(grads) do
        if g then same_bits(("%s grad %d"):format(name, i), g, fgrads[i]) end
      end
      if variant then
        local vout = build(variant)(table.unpack(inputs, 1, #inputs))
        assert.is_false(vout.shape == out.shape and ember.equal(vout, out), name .. ": the changed option changed nothing")
      end
      if bad then raises_here(function() build(bad) end, name) end
    end)
  end
end)

-- The modules with parameters, running statistics or randomness, against their function
-- given the same tensors (or the same seed).
describe("nn modules with state over nn.functional: module == function", function()
  local function f64(...) return ember.randn({ ... }, { dtype = "float64" }) end
  local function leaf(t) return t:detach():requires_grad_(true) end
  local function backward(out, w)
    local loss = (out * w):sum()
    loss:backward()
  end

  it("Conv3d: F.conv3d with its weight and bias (and each option), torch's parameter names and shapes", function()
    local m = nn.Conv3d(2, 4, 3, { stride = 2, padding = 1, groups = 2, dtype = "float64" })
    local sd = m:state_dict()
    assert.are.same({ 4, 1, 3, 3, 3 }, sd.weight.shape)
    assert.are.same({ 4 }, sd.bias.shape)
    assert.are.same({ "weight", "bias" }, { table.unpack(m:parameter_names()) })
    local x = leaf(f64(2, 2, 5, 4, 5))
    local out = m(x)
    local w = ember.randn(out.shape, { dtype = "float64" })
    backward(out, w)
    local x2, wt, b = leaf(x), leaf(m.weight), leaf(m.bias)
    local ref = F.conv3d(x2, wt, b, { stride = 2, padding = 1, dilation = 1, groups = 2 })
    backward(ref, w)
    same_bits("out", out, ref)
    same_bits("grad x", x.grad, x2.grad)
    same_bits("grad weight", m.weight.grad, wt.grad)
    same_bits("grad bias", m.bias.grad, b.grad)
    -- padding_mode pads first, as torch's
    local r = nn.Conv3d(2, 4, 3, { padding = 1, padding_mode = "reflect", groups = 2, dtype = "float64" })
    same_bits("reflect", r(x), F.conv3d(F.pad(x, { 1, 1, 1, 1, 1, 1 }, "reflect"), r.weight, r.bias, { groups = 2 }))
    local nb = nn.Conv3d(2, 4, 3, { bias = false, dilation = 2, dtype = "float64" })
    assert.is_nil(nb.bias)
    local xd = f64(1, 2, 5, 6, 5)
    same_bits("dilation, no bias", nb(xd), F.conv3d(xd, nb.weight, nil, { dilation = 2 }))
    raises_here(function() nn.Conv3d(2, 4, 3, { strides = 2 }) end, "Conv3d")
  end)

  it("BatchNorm3d and InstanceNorm3d: F.batch_norm / F.instance_norm with their statistics and affine", function()
    local m = nn.BatchNorm3d(3, { momentum = 0.3, eps = 1e-3, dtype = "float64" })
    assert.are.same({ "weight", "bias", "running_mean", "running_var", "num_batches_tracked" },
      (function()
        local names = {}
        m:_each_tensor(function(n) names[#names + 1] = n end)
        return names
      end)())
    ember.no_grad(function()
      m.weight:copy_(f64(3))
      m.bias:copy_(f64(3))
    end)
    local rm, rv = m.running_mean:clone(), m.running_var:clone()
    local x = f64(2, 3, 2, 3, 2) * 2 + 1
    local out = m(x)
    local ref = F.batch_norm(x, rm, rv, m.weight, m.bias, true, 0.3, 1e-3)
    check("train out", out, ref, 1e-14)
    same_bits("running_mean", m.running_mean, rm)
    same_bits("running_var", m.running_var, rv)
    m:eval()
    check("eval out", m(x), F.batch_norm(x, rm, rv, m.weight, m.bias, false, 0.3, 1e-3), 1e-14)
    local other = nn.BatchNorm3d(3, { momentum = 0.9, eps = 1e-3, dtype = "float64" })
    other(x)
    assert.is_false(ember.equal(other.running_mean, m.running_mean), "momentum reaches the running statistics")
    local inorm = nn.InstanceNorm3d(3, { affine = true, eps = 1e-2, dtype = "float64" })
    assert.are.same({ "weight", "bias" }, { table.unpack(inorm:parameter_names()) })
    check("instance", inorm(x), F.instance_norm(x, nil, nil, inorm.weight, inorm.bias, true, 0.1, 1e-2), 1e-14)
    raises_here(function() nn.BatchNorm3d(3, { momentun = 0.1 }) end, "BatchNorm3d")
    raises_here(function() nn.InstanceNorm3d(3, { afine = true }) end, "InstanceNorm3d")
  end)

  it("the dropouts and RReLU: the function's draw under the same seed while training, x (or the mean slope) in eval", function()
    local x = f64(2, 4, 3, 2, 2)
    local pairs_ = {
      { nn.Dropout1d(0.3), function() return F.dropout1d(x[1][1], 0.3, true) end, x[1][1] },
      { nn.Dropout3d(0.3), function() return F.dropout3d(x, 0.3, true) end, x },
      { nn.AlphaDropout(0.3), function() return F.alpha_dropout(x, 0.3, true) end, x },
      { nn.FeatureAlphaDropout(0.3), function() return F.feature_alpha_dropout(x, 0.3, true) end, x },
      { nn.RReLU(0.1, 0.4), function() return F.rrelu(x, 0.1, 0.4, true) end, x },
    }
    for _, p in ipairs(pairs_) do
      local m, ref, input = p[1], p[2], p[3]
      ember.manual_seed(11)
      local got = m(input)
      ember.manual_seed(11)
      same_bits(tostring(m) .. " training", got, ref())
      m:eval()
      if m.__name == "RReLU" then
        same_bits("RReLU eval", m(input), ember.leaky_relu(input, 0.25))
      else
        same_bits(tostring(m) .. " eval", m(input), input)
      end
    end
    ember.manual_seed(11)
    local a = nn.AlphaDropout(0.3)(x)
    ember.manual_seed(11)
    assert.is_false(ember.equal(a, nn.AlphaDropout(0.6)(x)), "p reaches alpha_dropout")
  end)

  it("MaxUnpool1d/2d: F.max_unpool with the pool's indices; CTCLoss: F.ctc_loss with its options", function()
    local x = f64(2, 3, 4, 6)
    local y, idx = F.max_pool2d(x, 2, { return_indices = true })
    same_bits("MaxUnpool2d", nn.MaxUnpool2d(2)(y, idx), F.max_unpool2d(y, idx, 2, { stride = 2, padding = 0 }))
    local y1, idx1 = F.max_pool1d(f64(3, 4, 5), 3, { stride = 2, padding = 1, return_indices = true })
    same_bits("MaxUnpool1d", nn.MaxUnpool1d(3, { stride = 2, padding = 1 })(y1, idx1),
      F.max_unpool1d(y1, idx1, 3, { stride = 2, padding = 1 }))
    local lp = leaf(f64(6, 2, 4):log_softmax(3))
    local targets = ember.tensor({ { 1, 3 }, { 4, 4 } }, "int64")
    local m = nn.CTCLoss{ blank = 2, reduction = "sum", zero_infinity = true }
    local out = m(lp, targets, { 6, 5 }, { 2, 2 })
    out:backward()
    local lp2 = leaf(lp)
    local ref = F.ctc_loss(lp2, targets, { 6, 5 }, { 2, 2 }, { blank = 2, reduction = "sum", zero_infinity = true })
    ref:backward()
    same_bits("CTCLoss", out, ref)
    same_bits("CTCLoss grad", lp.grad, lp2.grad)
    assert.is_false(ember.equal(out, nn.CTCLoss{ blank = 2 }(lp, targets, { 6, 5 }, { 2, 2 })), "reduction reaches ctc_loss")
    raises_here(function() nn.CTCLoss{ blank = 2, zero_inf = true } end, "CTCLoss")
  end)

  it("sizes are checked when the module is built, naming it; PyTorch's keyword form is told the sizes come by position", function()
    -- PyTorch's keyword form is a table of names (nn/_module_args.lua)
    assert.are.equal(tostring(nn.MaxPool3d(2, { stride = 1 })), tostring(nn.MaxPool3d{ kernel_size = 2, stride = 1 }))
    raises_here(function() nn.MaxPool3d{ stride = 1 } end,
      "MaxPool3d: kernel_size must be a positive integer or a table of three, got {} (a table of names must name the "
      .. "sizes, nn.MaxPool3d{kernel_size = 2, stride = 1}, or give them first by position, nn.MaxPool3d(2, {stride = 1}))")
    raises_here(function() nn.MaxPool3d(2, { dilation = 0 }) end, "MaxPool3d: dilation must be a positive integer or a table of three, got 0")
    raises_here(function() nn.AvgPool3d({ 2, 2 }) end, "AvgPool3d: kernel_size must be a positive integer or a table of three, got {2, 2}")
    raises_here(function() nn.AvgPool3d(2, { padding = -1 }) end, "AvgPool3d: padding must be a non-negative integer")
    assert.are.equal("AdaptiveAvgPool3d(output_size=2)", tostring(nn.AdaptiveAvgPool3d{ output_size = 2 }))
    raises_here(function() nn.AdaptiveAvgPool3d{ outputsize = 2 } end, "AdaptiveAvgPool3d: output_size must be a positive integer")
    raises_here(function() nn.AdaptiveAvgPool3d(2, { return_indices = true }) end,
      "AdaptiveAvgPool3d: unknown option 'return_indices' (it takes none)")
    raises_here(function() nn.AdaptiveMaxPool3d({ 2, 3 }) end, "AdaptiveMaxPool3d: output_size must be a positive integer or a table of three")
    assert.are.equal(tostring(nn.Unfold(3, { padding = 1 })), tostring(nn.Unfold{ kernel_size = 3, padding = 1 }))
    raises_here(function() nn.Unfold{ padding = 1 } end, "Unfold: kernel_size must be a positive integer or a pair of them, got {}")
    raises_here(function() nn.Unfold(3, { stride = 0 }) end, "Unfold: stride must be a positive integer or a pair of them, got 0")
    raises_here(function() nn.Fold({ 4, 5 }, { 2, 2, 2 }) end, "Fold: kernel_size must be a positive integer or a pair of them, got {2, 2, 2}")
    raises_here(function() nn.MaxUnpool2d{ stride = 2 } end, "MaxUnpool2d: kernel_size must be a positive integer or a pair of them")
    raises_here(function() nn.MaxUnpool1d(2, { stride = { 2, 2 } }) end, "MaxUnpool1d: stride must be a positive integer or a table of one")
    -- what they take still works
    local x = ember.randn(1, 2, 4, 4, 4)
    assert.are.same({ 1, 2, 2, 4, 2 }, nn.AdaptiveMaxPool3d({ 2, false, 2 })(x).shape)
    assert.are.same({ 1, 2, 3, 4, 3 }, nn.MaxPool3d({ 2, 1, 2 }, { stride = 1, padding = { 0, 0, 0 }, dilation = 1 })(x).shape)
    local y, idx = F.max_pool1d(ember.randn(1, 2, 4), 2, { return_indices = true })
    assert.are.same({ 1, 2, 4 }, nn.MaxUnpool1d({ 2 }, { stride = { 2 } })(y, idx).shape)
  end)

  it("NLLLoss2d is NLLLoss under torch's old name", function()
    local logp = ember.randn(2, 3, 4, 4, { dtype = "float64" }):log_softmax(2)
    local target = ember.randint(1, 4, { 2, 4, 4 })
    local w = ember.tensor({ 1, 2, 0.5 }, "float64")
    same_bits("NLLLoss2d", nn.NLLLoss2d{ weight = w, reduction = "sum" }(logp, target),
      F.nll_loss(logp, target, { weight = w, reduction = "sum" }))
    assert.are.equal("NLLLoss2d(reduction=mean)", tostring(nn.NLLLoss2d()))
    raises_here(function() nn.NLLLoss2d{ weights = w } end, "nn.NLLLoss2d: unknown option 'weights'")
  end)

  it("print as torch 1.13 prints them (True/False as Lua's true/false)", function()
    -- str() of torch.nn.ZeroPad2d(1), MaxPool3d(2), MaxPool3d(2, stride=1, padding=1, dilation=2, ceil_mode=True),
    -- AvgPool3d(2), AvgPool3d(3, 1, 1)
    assert.are.equal("ZeroPad2d((1, 1, 1, 1))", tostring(nn.ZeroPad2d(1)))
    assert.are.equal("MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=false)", tostring(nn.MaxPool3d(2)))
    assert.are.equal("MaxPool3d(kernel_size=2, stride=1, padding=1, dilation=2, ceil_mode=true)",
      tostring(nn.MaxPool3d(2, { stride = 1, padding = 1, dilation = 2, ceil_mode = true })))
    assert.are.equal("AvgPool3d(kernel_size=2, stride=2, padding=0)", tostring(nn.AvgPool3d(2)))
    assert.are.equal("AvgPool3d(kernel_size=3, stride=1, padding=1)", tostring(nn.AvgPool3d(3, { stride = 1, padding = 1 })))
  end)

  it("a loss given PyTorch's positional options takes them in torch's order, not run with the defaults", function()
    -- torch.nn.PoissonNLLLoss(False) is log_input=False: a false went unseen and log_input stayed true
    assert.is_false(nn.PoissonNLLLoss(false).log_input)
    assert.is_true(nn.GaussianNLLLoss(true).full)
    assert.are.equal(0.5, nn.CosineEmbeddingLoss(0.5).margin)
    raises_here(function() nn.CosineEmbeddingLoss(0.5, nil, nil, "sum", 1) end, "CosineEmbeddingLoss: takes at most 4 arguments")
  end)
end)
