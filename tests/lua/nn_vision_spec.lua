-- nn.BatchNorm2d, nn.GroupNorm, nn.MaxPool2d, nn.AvgPool2d and
-- nn.AdaptiveAvgPool2d, composed from core ops: values and gradients in
-- float64 against PyTorch 1.13 (tests/fixtures/nn_modern.lua, made by
-- tests/gen_nn_fixtures.py), BatchNorm's running statistics and state dict,
-- float64 gradchecks, printing, and errors at the caller's line.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_modern.lua")
local F64 = { dtype = "float64" }
local T, check, raises_here = compare.T, compare.check, compare.raises_here
local function case(name) return compare.case(fixtures, name) end

-- Loads the fixture's parameters (and `extra` state), runs m(x),
-- backpropagates sum(out * R), compares the output and every gradient.
local function parity(m, c, extra, tol)
  compare.module(m, c, { extra = extra, tol = tol })
end

-- ember options from a fixture's pool config
local function pool_opts(cfg)
  return { stride = cfg.stride, padding = cfg.padding, dilation = cfg.dilation,
    count_include_pad = cfg.count_include_pad, divisor_override = cfg.divisor_override }
end

describe("nn.BatchNorm2d", function()
  it("training: batch statistics and the running ones after the step match PyTorch", function()
    local c = case("BatchNorm2d_train")
    local m = nn.BatchNorm2d(3, F64)
    parity(m, c, { running_mean = m.running_mean:clone(), running_var = m.running_var:clone(),
      num_batches_tracked = m.num_batches_tracked:clone() })
    for k, v in pairs(c.buffers) do check("buffer " .. k, m[k], T(v), 1e-12) end
    assert.are.equal(1, m.num_batches_tracked:item())
  end)

  it("evaluation: the running statistics are used and left alone", function()
    local c = case("BatchNorm2d_eval")
    local m = nn.BatchNorm2d(3, { eps = 1e-3, dtype = "float64" })
    m:eval()
    local bufs = {}
    for k, v in pairs(c.buffers_in) do bufs[k] = T(v) end
    parity(m, c, bufs)
    for k, v in pairs(c.buffers) do check("buffer " .. k, m[k], T(v), 0) end
    assert.are.equal(7, m.num_batches_tracked:item())
  end)

  it("momentum = false is PyTorch's momentum=None (a cumulative average)", function()
    local c = case("BatchNorm2d_cumulative")
    local m = nn.BatchNorm2d(2, { momentum = false, dtype = "float64" })
    local first = T(c.first_batch)
    ember.no_grad(function() m(first) end)
    parity(m, c, { running_mean = m.running_mean:clone(), running_var = m.running_var:clone(),
      num_batches_tracked = m.num_batches_tracked:clone() })
    for k, v in pairs(c.buffers) do check("buffer " .. k, m[k], T(v), 1e-12) end
  end)

  it("state dict names and dtypes are PyTorch's; prints", function()
    local m = nn.BatchNorm2d(4)
    local names = {}
    for k, v in pairs(m:state_dict()) do names[#names + 1] = k .. ":" .. v.dtype end
    table.sort(names)
    assert.are.same({ "bias:float32", "num_batches_tracked:int64", "running_mean:float32", "running_var:float32",
      "weight:float32" }, names)
    assert.are.same({ "weight", "bias" }, { table.unpack(m:parameter_names()) })
    assert.are.equal("BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)", tostring(m))
    local bare = nn.BatchNorm2d(4, { affine = false, track_running_stats = false })
    assert.are.same({}, bare:state_dict())
    -- without running statistics it uses the batch's in eval mode too
    bare:eval()
    local y = bare(ember.randn(3, 4, 2, 2) * 5 + 3)
    assert.is_true(y:mean():abs():item() < 1e-5)
  end)

  it("float64 gradcheck (training mode: through the batch statistics)", function()
    local m = nn.BatchNorm2d(3, F64)
    ember.manual_seed(2)
    gradcheck.check(function(x, w, b)
      m.weight, m.bias = w, b
      return m(x)
    end, { ember.randn({ 2, 3, 2, 3 }, F64), ember.randn({ 3 }, F64), ember.randn({ 3 }, F64) })
  end)

  it("float64 gradcheck of the batch-statistics node on every shape it takes: [N, C], [N, C, L], 5-d, no affine, a large mean", function()
    ember.manual_seed(5)
    local cases = {
      { nn.BatchNorm1d(4, F64), { 5, 4 } },
      { nn.BatchNorm1d(4, { affine = false, dtype = "float64" }), { 3, 4, 6 } },
      { nn.BatchNorm3d(2, F64), { 2, 2, 3, 2, 2 } },
    }
    for _, c in ipairs(cases) do
      gradcheck.check(function(x) return c[1](x) end, { ember.randn(c[2], F64) * 3 + 40 })
    end
    -- bfloat16 activations beside float32 parameters (a Conv2d under autocast): bfloat16 out, as PyTorch's
    -- mixed-dtype batch_norm (statistics in float32), each gradient in its input's dtype
    local m = nn.BatchNorm2d(3)
    local x = ember.randn(4, 3, 5, 5):to("bfloat16"):requires_grad_()
    local y = m(x)
    assert.are.equal("bfloat16", y.dtype)
    y:sum():backward()
    assert.are.equal("bfloat16", x.grad.dtype)
    assert.are.equal("float32", m.weight.grad.dtype)
  end)

  it("errors name BatchNorm2d at the caller's line", function()
    raises_here(function() local _ = nn.BatchNorm2d(0) end, "BatchNorm2d: num_features must be a positive integer, got 0")
    raises_here(function() local _ = nn.BatchNorm2d(3, { momentum = 2 }) end, "BatchNorm2d: momentum must be a number in [0, 1]")
    raises_here(function() local _ = nn.BatchNorm2d(3)(ember.randn(2, 4, 5, 5)) end,
      "BatchNorm2d.forward: expected a 4-d input [N, C, H, W] with C = num_features = 3, got shape [2, 4, 5, 5]")
    raises_here(function() local _ = nn.BatchNorm2d(3)(ember.randn(2, 3, 5)) end, "got shape [2, 3, 5]")
    raises_here(function() local _ = nn.BatchNorm2d(3)(ember.randn(1, 3, 1, 1)) end,
      "BatchNorm2d.forward: expected more than 1 value per channel when training")
  end)

  it("a float64 input to float32 norms is an error naming the tensor, as PyTorch's; bfloat16 beside float32 is mixed precision", function()
    -- BatchNorm2d gave float32 for it in training and float64 in eval; GroupNorm and InstanceNorm took it silently
    local x = ember.randn(2, 3, 4, 4, F64)
    local bn = nn.BatchNorm2d(3)
    raises_here(function() local _ = bn(x) end,
      'BatchNorm2d.forward: the input is float64 but the weight is float32 (convert one: x:to("float32") or the weight\'s dtype)')
    bn:eval()
    raises_here(function() local _ = bn(x) end, "BatchNorm2d.forward: the input is float64 but the weight is float32")
    raises_here(function() local _ = nn.BatchNorm2d(3, { affine = false })(x) end,
      "BatchNorm2d.forward: the input is float64 but the running_mean is float32")
    raises_here(function() local _ = nn.GroupNorm(3, 3)(x) end, "GroupNorm.forward: the input is float64 but the weight is float32")
    raises_here(function() local _ = nn.functional.group_norm(x, 3, ember.ones(3)) end,
      "nn.functional.group_norm: the input is float64 but the weight is float32")
    raises_here(function() local _ = nn.InstanceNorm2d(3, { affine = true })(x) end,
      "InstanceNorm2d.forward: the input is float64 but the weight is float32")
    raises_here(function() local _ = nn.BatchNorm2d(3):bfloat16()(x:float()) end,
      "BatchNorm2d.forward: the input is float32 but the weight is bfloat16")
    assert.are.equal("bfloat16", nn.BatchNorm2d(3)(x:bfloat16()).dtype)
    assert.are.equal("bfloat16", nn.GroupNorm(3, 3)(x:bfloat16()).dtype)
    assert.are.equal("float64", nn.BatchNorm2d(3, { affine = false, track_running_stats = false })(x).dtype)
    assert.are.equal("float64", nn.BatchNorm2d(3):double()(x).dtype)
  end)
end)

describe("nn.GroupNorm", function()
  it("matches PyTorch: groups of channels, and one channel per group on a 3-d input", function()
    parity(nn.GroupNorm(2, 6, F64), case("GroupNorm"))
    parity(nn.GroupNorm(3, 3, F64), case("GroupNorm_instance_3d"))
  end)

  it("float64 gradcheck, and prints", function()
    local m = nn.GroupNorm(2, 4, F64)
    ember.manual_seed(3)
    gradcheck.check(function(x, w, b)
      m.weight, m.bias = w, b
      return m(x)
    end, { ember.randn({ 2, 4, 3 }, F64), ember.randn({ 4 }, F64), ember.randn({ 4 }, F64) })
    assert.are.equal("GroupNorm(2, 4, eps=1e-05, affine=true)", tostring(m))
  end)

  it("errors name GroupNorm at the caller's line", function()
    raises_here(function() local _ = nn.GroupNorm(4, 6) end, "GroupNorm: num_channels=6 must be divisible by num_groups=4")
    raises_here(function() local _ = nn.GroupNorm(0, 6) end, "GroupNorm: num_groups must be a positive integer, got 0")
    raises_here(function() local _ = nn.GroupNorm(2, 6)(ember.randn(2, 4, 3)) end,
      "GroupNorm.forward: expected an input [N, C, *] with C = num_channels = 6, got shape [2, 4, 3]")
  end)
end)

describe("2-d pooling", function()
  local POOLS = {
    { "MaxPool2d_k3s2p1", nn.MaxPool2d }, { "MaxPool2d_rect_dilated", nn.MaxPool2d },
    { "MaxPool2d_unbatched", nn.MaxPool2d }, { "AvgPool2d_k3s2p1", nn.AvgPool2d },
    { "AvgPool2d_k3s2p1_exclude_pad", nn.AvgPool2d }, { "AvgPool2d_rect_divisor", nn.AvgPool2d },
  }
  for _, p in ipairs(POOLS) do
    it(p[1] .. " matches PyTorch", function()
      local c = case(p[1])
      parity(p[2](c.config.kernel_size, pool_opts(c.config)), c)
    end)
  end
  for _, name in ipairs { "AdaptiveAvgPool2d_3x2", "AdaptiveAvgPool2d_1", "AdaptiveAvgPool2d_4_unbatched" } do
    it(name .. " matches PyTorch", function()
      local c = case(name)
      parity(nn.AdaptiveAvgPool2d(c.config.output_size), c)
    end)
  end

  it("float64 gradchecks (contiguous and not)", function()
    local mods = {
      nn.MaxPool2d(3, { stride = 2, padding = 1 }), nn.MaxPool2d({ 2, 2 }, { dilation = 2 }),
      nn.AvgPool2d(3, { stride = 2, padding = 1, count_include_pad = false }), nn.AdaptiveAvgPool2d({ 2, 3 }),
    }
    for i, m in ipairs(mods) do
      ember.manual_seed(10 + i)
      gradcheck.check(function(x) return m(x) end, { ember.randn({ 2, 2, 5, 5 }, F64) }, { name = tostring(m) })
      local nc = ember.randn({ 5, 5, 2, 2 }, F64):permute(3, 4, 1, 2):detach()
      assert.is_false(nc:is_contiguous())
      gradcheck.check(function(x) return m(x) end, { nc }, { name = tostring(m) .. " (non-contiguous)" })
    end
  end)

  it("prints its sizes", function()
    assert.are.equal("MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1)",
      tostring(nn.MaxPool2d(3, { stride = 2, padding = 1 })))
    assert.are.equal("AvgPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, count_include_pad=true)",
      tostring(nn.AvgPool2d({ 2, 3 })))
    assert.are.equal("AdaptiveAvgPool2d(output_size=(3, 2))", tostring(nn.AdaptiveAvgPool2d({ 3, 2 })))
  end)

  it("errors name the module at the caller's line", function()
    raises_here(function() local _ = nn.MaxPool2d(0) end, "MaxPool2d: kernel_size must be a positive integer or a pair")
    raises_here(function() local _ = nn.MaxPool2d(2, { stride = 0 }) end, "MaxPool2d: stride must be a positive integer")
    raises_here(function() local _ = nn.MaxPool2d(2, { padding = 2 }) end, "MaxPool2d: padding 2 is more than half the kernel (2)")
    raises_here(function() local _ = nn.MaxPool2d(2, { return_indices = 1 }) end, "MaxPool2d: return_indices must be a boolean, got 1")
    raises_here(function() local _ = nn.MaxPool2d(2)(ember.randn(2, 3)) end,
      "MaxPool2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [2, 3]")
    raises_here(function() local _ = nn.MaxPool2d(5)(ember.randn(1, 1, 4, 8)) end,
      "MaxPool2d.forward: the window (kernel 5, dilation 1) is larger than the padded input (4 + 2 * 0) along dim 3")
    raises_here(function() local _ = nn.AvgPool2d({ 2, 9 })(ember.randn(1, 4, 8)) end,
      "AvgPool2d.forward: the window (kernel 9, dilation 1) is larger than the padded input (8 + 2 * 0) along dim 3")
    raises_here(function() local _ = nn.AvgPool2d(2, { dilation = 2 }) end, "AvgPool2d: there is no dilation option")
    raises_here(function() local _ = nn.AvgPool2d(2, { divisor_override = 0 }) end, "AvgPool2d: divisor_override must be")
    raises_here(function() local _ = nn.AdaptiveAvgPool2d({ 2 }) end, "AdaptiveAvgPool2d: output_size must be")
    raises_here(function() local _ = nn.AdaptiveAvgPool2d(2)(ember.randn(4)) end,
      "AdaptiveAvgPool2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [4]")
  end)
end)
