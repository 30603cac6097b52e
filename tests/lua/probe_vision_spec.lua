-- The vision modules as a demanding PyTorch user calls them (issue 27):
-- convolutions (1-d, 2-d, 3-d, transposed) with 'same'/'valid' on even
-- kernels and dilation, every padding_mode, tuples, groups and depthwise
-- convolutions, stride with dilation, no bias, unbatched, non-contiguous
-- and 1x1 inputs; pools with ceil_mode, count_include_pad,
-- divisor_override, return_indices and MaxUnpool; adaptive pools;
-- BatchNorm in training and evaluation, momentum = false (PyTorch's None),
-- track_running_stats = false, affine = false; GroupNorm, InstanceNorm;
-- Flatten, Unflatten, Upsample, PixelShuffle, Fold/Unfold, the padding
-- modules; max pools over ties (the gradient to the first largest); random
-- sizes of transposed convolutions and pools. Each case runs in float64,
-- float32 and bfloat16 under ember.autocast against PyTorch 1.13's float64
-- numbers (tests/gen_probe_vision_fixtures.py writes
-- tests/fixtures/probe_vision.lua): the output, the input's and the
-- parameters' gradients, the buffers after the call, the state dict's
-- names. Then nn.functional with torch's positional arguments, running
-- statistics over train/eval sequences, MaxUnpool after overlapping
-- windows, bad input (each error naming the module or function at the
-- user's line) and float64 gradchecks.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/probe_vision.lua")
local T, check, raises_here = parity.T, parity.check, parity.raises_here

-- torch's view of the leaf (0-based dims and starts) in ember's words
local function view(x, v)
  if not v then return x end
  if v[1] == "permute" then
    local p = {}
    for i, d in ipairs(v[2]) do p[i] = d + 1 end
    return x:permute(table.unpack(p))
  elseif v[1] == "narrow" then
    return x:narrow(v[2] + 1, v[3] + 1, v[4])
  end
  return x:transpose(v[2] + 1, v[3] + 1)
end

-- the case's module in `dtype`, its state loaded, in the case's mode
local function build(c, dtype)
  local args = { table.unpack(c.args) }
  local n = #c.args
  if c.opts then n = n + 1; args[n] = c.opts end
  local m = nn[c.mod](table.unpack(args, 1, n))
  m:to(dtype)
  local sd = {}
  for k, v in pairs(c.state) do
    sd[k] = T(v)
    if sd[k].dtype ~= "int64" then sd[k] = sd[k]:to(dtype) end
  end
  m:load_state_dict(sd)
  m:train(c.train)
  return m
end

-- runs the case: returns the output, the indices, the input leaf and the module
local function run(c, dtype, autocast)
  local m = build(c, dtype)
  local x = T(c.x):to(dtype):requires_grad_()
  local xv = view(x, c.view)
  local call = function()
    if c.mod:match("^MaxUnpool") then return m(xv, T(c.indices) + 1, c.output_size) end
    return m(xv, table.unpack(c.call or {}))
  end
  local out, idx
  if autocast then
    out, idx = ember.autocast("bfloat16", call)
  else
    out, idx = call()
  end
  local R = T(c.R):to(out.dtype)
  ;(out * R):sum():backward()
  return out, idx, x, m
end

local TOL = { float64 = 1e-10, float32 = 2e-5 }

describe("vision modules against PyTorch 1.13", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": float64 output, gradients, buffers and state dict names", function()
      local out, idx, x, m = run(c, "float64")
      check(c.name .. " output", out, T(c.out), TOL.float64)
      if c.indices and not c.mod:match("^MaxUnpool") then
        assert.are.equal("int64", idx.dtype)
        assert(ember.equal(idx, T(c.indices) + 1), c.name .. ": indices differ from PyTorch's (+1)")
      end
      check(c.name .. " grad x", x.grad, T(c.grad_x), TOL.float64)
      local params = m:named_parameters()
      for k, g in pairs(c.grads) do check(c.name .. " grad " .. k, params[k].grad, T(g), TOL.float64) end
      local sd = m:state_dict()
      assert.are.same(parity.sorted_keys(c.state), parity.sorted_keys(sd), c.name .. " state dict names")
      for k, b in pairs(c.buffers) do
        if b.dtype == "int64" then
          assert.are.equal(T(b):item(), sd[k]:item(), c.name .. " " .. k)
        else
          check(c.name .. " buffer " .. k, sd[k], T(b), TOL.float64)
        end
      end
    end)
    it(c.name .. ": float32", function()
      local out, _, x, m = run(c, "float32")
      assert.are.equal("float32", out.dtype)
      check(c.name .. " float32 output", out, T(c.out), TOL.float32)
      check(c.name .. " float32 grad x", x.grad, T(c.grad_x), TOL.float32)
      local params = m:named_parameters()
      for k, g in pairs(c.grads) do check(c.name .. " float32 grad " .. k, params[k].grad, T(g), TOL.float32) end
    end)
    it(c.name .. ": bfloat16 under autocast", function()
      local out, _, x, m = run(c, "float32", true)
      check(c.name .. " bf16 output", out, T(c.out), 3e-2)
      assert.are.equal("float32", x.grad.dtype)
      check(c.name .. " bf16 grad x", x.grad, T(c.grad_x), 5e-2)
      local params = m:named_parameters()
      for k, g in pairs(c.grads) do
        assert.are.equal("float32", params[k].grad.dtype)
        check(c.name .. " bf16 grad " .. k, params[k].grad, T(g), 5e-2)
      end
    end)
  end
end)

-- nn.functional with torch's positional arguments ("@name": that tensor)
describe("nn.functional's vision functions with PyTorch's positional arguments", function()
  local F = nn.functional
  for _, c in ipairs(fixtures.functional) do
    it(c.name .. ": float64 output and gradients", function()
      local ts = {}
      for k, v in pairs(c.tensors) do
        ts[k] = T(v)
        if c.grads[k] then ts[k]:requires_grad_() end
      end
      local args = {}
      for i = 1, c.nargs do
        local a = c.args[i]
        args[i] = type(a) == "string" and a:sub(1, 1) == "@" and ts[a:sub(2)] or a
      end
      local out, idx = F[c.fn](table.unpack(args, 1, c.nargs))
      check(c.name .. " output", out, T(c.out), TOL.float64)
      if c.indices then assert(ember.equal(idx, T(c.indices) + 1), c.name .. ": indices differ from PyTorch's (+1)") end
      ;(out * T(c.R)):sum():backward()
      for k, g in pairs(c.grads) do check(c.name .. " grad " .. k, ts[k].grad, T(g), TOL.float64) end
      for k, v in pairs(c.after) do check(c.name .. " " .. k .. " after the call", ts[k], T(v), TOL.float64) end
    end)
  end
end)

describe("MaxUnpool after overlapping windows (stride < kernel): a position named twice", function()
  it("holds the value once, and each copy's gradient is the output's gradient there (PyTorch's)", function()
    -- one large value is the max of all nine 3x3 windows (stride 1) of a 5x5 plane
    local x = ember.zeros(1, 1, 5, 5, { dtype = "float64" })
    x[1][1][3][3] = 7
    local y, idx = nn.MaxPool2d(3, { stride = 1, return_indices = true })(x)
    assert(ember.equal(idx, ember.full({ 1, 1, 3, 3 }, 13, { dtype = "int64" })))
    local v = y:clone():requires_grad_()
    local u = nn.MaxUnpool2d(3, { stride = 1 })(v, idx)
    assert.are.equal(7, u[1][1][3][3]:item()) -- it was 63: the nine copies summed
    assert.are.equal(7, u:sum():item())
    ;(u * 2):sum():backward()
    assert(ember.equal(v.grad, ember.full({ 1, 1, 3, 3 }, 2, { dtype = "float64" })))
    -- 1-d and 3-d share the rule
    local y1, i1 = nn.MaxPool1d(2, { stride = 1, return_indices = true })(ember.tensor({ { 0, 5, 0 } }))
    assert.are.same({ 0, 5, 0 }, nn.MaxUnpool1d(2, { stride = 1 })(y1, i1):reshape(-1):totable())
    local x3 = ember.zeros(1, 1, 3, 3, 3)
    x3[1][1][2][2][2] = 4
    local y3, i3 = nn.MaxPool3d(2, { stride = 1, return_indices = true })(x3)
    assert.are.equal(4, nn.MaxUnpool3d(2, { stride = 1 })(y3, i3):sum():item())
  end)
end)

describe("bad input: an error naming the module and what was wrong, at the user's line", function()
  local r = ember.randn
  it("the 3-d modules name themselves, not nn.functional (they named nn.functional.conv3d, max_pool3d, ...)", function()
    raises_here(function() nn.Conv3d(2, 4, 3)(r(1, 3, 5, 5, 5)) end,
      "Conv3d.forward: expected 2 input channels (in_channels), got 3 in an input of shape [1, 3, 5, 5, 5]")
    raises_here(function() nn.Conv3d(2, 4, 3)(r(1, 2, 2, 5, 5)) end,
      "Conv3d.forward: the kernel (size 3, dilation 1) is larger than the padded input (2 + 0) along dim 3")
    raises_here(function() nn.Conv3d(2, 4, 3)(r(2, 5, 5)) end,
      "Conv3d.forward: expected an input [N, C, D, H, W] or [C, D, H, W], got shape [2, 5, 5]")
    raises_here(function() nn.Conv3d(2, 4, 3)(r(1, 2, 3, 3, 3):double()) end,
      "Conv3d.forward: the input is float64 but the module's weight is float32")
    raises_here(function() nn.MaxPool3d(3)(r(1, 1, 2, 4, 4)) end,
      "MaxPool3d.forward: the window (kernel 3, dilation 1) is larger than the padded input (2 + 2 * 0) along dim 3")
    raises_here(function() nn.MaxPool3d(2)(r(4, 4, 4)) end, "MaxPool3d.forward: expected an input [N, C, D, H, W]")
    raises_here(function() nn.AvgPool3d(3)(r(1, 1, 4, 2, 4)) end,
      "AvgPool3d.forward: the window (kernel 3, dilation 1) is larger than the padded input (2 + 2 * 0) along dim 4")
    raises_here(function() nn.AdaptiveAvgPool3d(2)(r(4, 4, 4)) end, "AdaptiveAvgPool3d.forward: expected an input")
    raises_here(function() nn.AdaptiveMaxPool3d(2)(r(4, 4)) end, "AdaptiveMaxPool3d.forward: expected an input")
    -- nn.functional keeps its own name
    raises_here(function() nn.functional.conv3d(r(1, 3, 2, 4, 4), r(4, 3, 3, 3, 3)) end,
      "nn.functional.conv3d: the kernel (size 3, dilation 1) is larger")
    raises_here(function() nn.functional.max_pool3d(r(4, 4, 4), 2) end, "nn.functional.max_pool3d: expected an input")
  end)

  it("Conv3d's padding_mode pads no more than the input allows (the error named ember.pad)", function()
    raises_here(function() nn.Conv3d(2, 2, 3, { padding = 3, padding_mode = "reflect" })(r(1, 2, 3, 3, 3)) end,
      "Conv3d.forward: padding_mode=\"reflect\" pads 3 and 3, more than the 3 elements along dim 3 of shape "
      .. "[1, 2, 3, 3, 3] allow (reflect padding must be less than the size)")
    raises_here(function() nn.Conv3d(2, 2, 3, { padding = { 0, 0, 4 }, padding_mode = "circular" })(r(2, 3, 3, 3)) end,
      "Conv3d.forward: padding_mode=\"circular\" pads 4 and 4, more than the 3 elements along dim 4")
    raises_here(function() nn.Conv2d(2, 2, 3, { padding = 3, padding_mode = "reflect" })(r(1, 2, 3, 3)) end,
      "Conv2d.forward: padding_mode=\"reflect\" pads 3 and 3, more than the 3 elements along dim 3")
  end)

  it("adaptive pools refuse an empty dim but the batch's (average gave NaN, max an error from ember.max)", function()
    raises_here(function() nn.AdaptiveAvgPool2d(2)(r(1, 2, 0, 4)) end,
      "AdaptiveAvgPool2d.forward: expected a non-empty size in every dim but the batch's, got shape [1, 2, 0, 4] "
      .. "(dim 3 is empty)")
    raises_here(function() nn.AdaptiveMaxPool2d(2)(r(2, 0, 4)) end,
      "AdaptiveMaxPool2d.forward: expected a non-empty size in every dim but the batch's, got shape [2, 0, 4]")
    raises_here(function() nn.AdaptiveAvgPool1d(2)(r(2, 3, 0)) end, "AdaptiveAvgPool1d.forward: expected a non-empty")
    raises_here(function() nn.AdaptiveMaxPool1d(2)(r(2, 0)) end, "AdaptiveMaxPool1d.forward: expected a non-empty")
    raises_here(function() nn.AdaptiveAvgPool3d(1)(r(1, 2, 3, 0, 4)) end, "AdaptiveAvgPool3d.forward: expected a non-empty")
    raises_here(function() nn.AdaptiveMaxPool3d(1)(r(2, 0, 3, 4)) end, "AdaptiveMaxPool3d.forward: expected a non-empty")
    raises_here(function() nn.functional.adaptive_avg_pool2d(r(1, 0, 3, 3), 1) end,
      "nn.functional.adaptive_avg_pool2d: expected a non-empty")
    -- an empty batch is fine, as PyTorch
    assert.are.same({ 0, 2, 2, 2 }, nn.AdaptiveAvgPool2d(2)(r(0, 2, 5, 5)).shape)
  end)

  it("nn.functional's convolutions: a bias of another dtype than the weight (an error from inside, at _conv.lua)", function()
    local F = nn.functional
    raises_here(function() F.conv2d(r(1, 2, 4, 4), r(3, 2, 3, 3), r(3):double()) end,
      "nn.functional.conv2d: the bias is float64 but the weight is float32 (convert one: bias:to(\"float32\"))")
    raises_here(function() F.conv1d(r(1, 2, 4), r(3, 2, 3), r(3):double()) end,
      "nn.functional.conv1d: the bias is float64 but the weight is float32")
    raises_here(function() F.conv3d(r(1, 2, 4, 4, 4), r(3, 2, 3, 3, 3), r(3):double()) end,
      "nn.functional.conv3d: the bias is float64 but the weight is float32")
    raises_here(function() F.conv_transpose2d(r(1, 2, 4, 4), r(2, 3, 3, 3), r(3):bfloat16()) end,
      "nn.functional.conv_transpose2d: the bias is bfloat16 but the weight is float32")
    -- the function has no module: the weight is named
    raises_here(function() F.conv2d(r(1, 2, 4, 4):bfloat16(), r(3, 2, 3, 3)) end,
      "nn.functional.conv2d: the input is bfloat16 but the weight is float32 (convert one: x:to(\"float32\") or "
      .. "weight:to(\"bfloat16\"))")
    -- under autocast every argument joins the products' dtype, the bias too (as PyTorch)
    local x, w, b = r(1, 2, 4, 4), r(3, 2, 3, 3), r(3):double()
    local y = ember.autocast("bfloat16", function() return F.conv2d(x, w, b) end)
    assert.are.equal("bfloat16", y.dtype)
    check("conv2d under autocast, a float64 bias", y, F.conv2d(x, w, b:float()), 2e-2)
  end)

  it("LayerNorm (ViT's norm) and F.layer_norm: a dtype mismatch names the caller (ember.layer_norm, or from inside)", function()
    raises_here(function() nn.LayerNorm(4)(r(2, 4):double()) end,
      "LayerNorm.forward: the input is float64 but the weight is float32")
    raises_here(function() nn.functional.layer_norm(r(2, 4):bfloat16(), { 4 }, r(4), r(4)) end,
      "nn.functional.layer_norm: the input is bfloat16 but the weight is float32")
    raises_here(function() nn.functional.layer_norm(r(2, 4), { 4 }, nil, r(4):bfloat16()) end,
      "nn.functional.layer_norm: the input is float32 but the bias is bfloat16")
  end)

  it("absurd output sizes are refused at once (interpolate, the adaptive pools and ConvTranspose hung)", function()
    local F = nn.functional
    raises_here(function() F.interpolate(r(1, 1, 2, 2), { size = 1 << 31 }) end,
      "nn.functional.interpolate: the output [1, 1, 2147483648, 2147483648] would hold 4.61e+18 elements, too many "
      .. "to allocate")
    raises_here(function() nn.Upsample({ scale_factor = 1e7 })(r(1, 1, 3, 3)) end,
      "Upsample.forward: the output [1, 1, 30000000, 30000000] would hold 9e+14 elements")
    raises_here(function() F.adaptive_avg_pool2d(r(1, 1, 2, 2), 1 << 31) end, "nn.functional.adaptive_avg_pool2d: the output")
    raises_here(function() nn.AdaptiveMaxPool1d(1 << 41)(r(2, 3, 4)) end,
      "AdaptiveMaxPool1d.forward: the output [2, 3, 2199023255552] would hold")
    raises_here(function() nn.AdaptiveAvgPool3d({ false, 1 << 20, 1 << 20 })(r(1, 2, 3, 4, 4)) end,
      "AdaptiveAvgPool3d.forward: the output [1, 2, 3, 1048576, 1048576]")
    raises_here(function() F.conv_transpose2d(r(1, 2, 2, 2), r(2, 3, 3, 3), nil, { stride = 1 << 20 }) end,
      "nn.functional.conv_transpose2d: the output [1, 3, 1048579, 1048579] would hold")
    raises_here(function() F.conv_transpose1d(r(1, 2, 2), r(2, 3, 3), nil, { stride = 1 << 31 }) end,
      "nn.functional.conv_transpose1d: stride {2147483648} makes 2147483648 output phases, more than the 1048576")
    raises_here(function() nn.ConvTranspose3d(2, 3, 2, { stride = 1 << 14 })(r(2, 2, 2, 2)) end,
      "ConvTranspose3d.forward: the output [3, 16386, 16386, 16386]")
    raises_here(function() F.max_unpool2d(r(1, 1, 2, 2), ember.ones({ 1, 1, 2, 2 }, { dtype = "int64" }), 1 << 30) end,
      "nn.functional.max_unpool2d: the output [1, 1, 2147483648, 2147483648] would hold")
    -- a size the allocator refuses is refused at the user's line (it pointed into _conv.lua)
    raises_here(function() F.conv2d(r(1, 2, 5, 5), r(3, 2, 3, 3), nil, { padding = 1000000 }) end,
      "cannot allocate a tensor of shape [1, 3, 2000003, 2000003] (float32): too large")
  end)

  it("modules built on an nn.functional function name themselves (LPPool1d named nn.functional.avg_pool1d)", function()
    raises_here(function() nn.LPPool1d(2, 2)(r(7)) end,
      "LPPool1d.forward: expected an input [N, C, L] or [C, L], got shape [7]")
    raises_here(function() nn.LPPool2d(2, 3)(r(1, 2, 2, 2)) end,
      "LPPool2d.forward: the window (kernel 3, dilation 1) is larger than the padded input (2 + 2 * 0) along dim 3")
    raises_here(function() nn.LocalResponseNorm(2)(r(3, 4)) end,
      "LocalResponseNorm.forward: expected an input [N, C, *] of at least 3 dims, got shape [3, 4]")
    raises_here(function() nn.ChannelShuffle(2)(r(1, 3, 2, 2)) end,
      "ChannelShuffle.forward: the channels (3, dim 2 of [1, 3, 2, 2]) must be divisible by groups=2")
    raises_here(function() nn.Unfold(5)(r(1, 1, 4, 4)) end,
      "Unfold.forward: the block (kernel 5, dilation 1) is larger than the padded input (4 + 2 * 0)")
    raises_here(function() nn.Fold({ 4, 4 }, 2)(r(1, 7, 9)) end,
      "Fold.forward: dim 2 of the input (7) must be divisible by the kernel's size 2 x 2")
    -- the function itself keeps its name
    raises_here(function() nn.functional.unfold(r(1, 1, 4, 4), 5) end, "nn.functional.unfold: the block (kernel 5")
  end)

  it("wrong channels, kernels larger than the padded input, groups, ranks (held as they are)", function()
    raises_here(function() nn.Conv2d(3, 4, 3)(r(1, 4, 5, 5)) end,
      "Conv2d.forward: expected 3 input channels (in_channels), got 4 in an input of shape [1, 4, 5, 5]")
    raises_here(function() nn.Conv2d(3, 4, 5)(r(1, 3, 3, 3)) end,
      "Conv2d.forward: the kernel (size 5, dilation 1: 5) is larger than the padded input (3 + 0) along dim 3")
    raises_here(function() nn.Conv1d(3, 4, 3, { dilation = 3 })(r(1, 3, 5)) end,
      "Conv1d.forward: the kernel (size 3, dilation 3: 7) is larger than the padded input (5 + 0)")
    raises_here(function() nn.Conv2d(4, 6, 3, { groups = 4 }) end, "Conv2d: out_channels=6 must be divisible by groups=4")
    raises_here(function() nn.Conv1d(3, 6, 3, { groups = 2 }) end, "Conv1d: in_channels=3 must be divisible by groups=2")
    raises_here(function() nn.ConvTranspose2d(3, 4, 3, { groups = 2 }) end,
      "ConvTranspose2d: in_channels=3 must be divisible by groups=2")
    raises_here(function() nn.Conv2d(3, 4, 3)(r(3, 5)) end,
      "Conv2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [3, 5]")
    raises_here(function() nn.Conv1d(3, 4, 3)(r(1, 3, 5, 5)) end, "Conv1d.forward: expected an input [N, C, L] or [C, L]")
    raises_here(function() nn.ConvTranspose2d(3, 4, 3)(r(1, 4, 5, 5)) end,
      "ConvTranspose2d.forward: expected 3 input channels (in_channels), got 4")
    raises_here(function() nn.Conv2d(3, 4, 3, { padding = "same", stride = 2 }) end,
      "Conv2d: padding=\"same\" needs stride 1 (as PyTorch)")
    raises_here(function() nn.functional.conv2d(r(1, 3, 5, 5), r(4, 2, 3, 3)) end,
      "nn.functional.conv2d: expected 2 input channels (the weight [4, 2, 3, 3] times groups=1), got 3")
    raises_here(function() nn.MaxPool2d(4)(r(1, 2, 3, 3)) end,
      "MaxPool2d.forward: the window (kernel 4, dilation 1) is larger than the padded input (3 + 2 * 0)")
    raises_here(function() nn.AvgPool1d(5)(r(1, 2, 3)) end, "AvgPool1d.forward: the window (kernel 5, dilation 1)")
    raises_here(function() nn.MaxPool2d(2, { padding = 2 }) end, "MaxPool2d: padding 2 is more than half the kernel")
    raises_here(function() nn.BatchNorm2d(3)(r(2, 4, 3, 3)) end,
      "BatchNorm2d.forward: expected a 4-d input [N, C, H, W] with C = num_features = 3, got shape [2, 4, 3, 3]")
    raises_here(function() nn.BatchNorm2d(3)(r(2, 3, 3)) end, "BatchNorm2d.forward: expected a 4-d input")
    raises_here(function() nn.BatchNorm1d(3)(r(1, 3)) end,
      "BatchNorm1d.forward: expected more than 1 value per channel when training, got input shape [1, 3]")
    raises_here(function() nn.GroupNorm(3, 4) end, "GroupNorm: num_channels=4 must be divisible by num_groups=3")
    raises_here(function() nn.GroupNorm(2, 4)(r(2, 6, 3)) end,
      "GroupNorm.forward: expected an input [N, C, *] with C = num_channels = 4, got shape [2, 6, 3]")
    raises_here(function() nn.InstanceNorm2d(3)(r(2, 3, 3, 3, 3)) end, "InstanceNorm2d.forward: expected a 3-d or 4-d")
    raises_here(function() nn.PixelShuffle(2)(r(1, 6, 3, 3)) end,
      "PixelShuffle.forward: the channels (6, dim 2 of shape [1, 6, 3, 3]) must be divisible by upscale_factor^2 = 4")
    raises_here(function() nn.Upsample({ scale_factor = 2, mode = "bilinear" })(r(1, 2, 3)) end,
      "Upsample.forward: mode \"bilinear\" needs a 4-d input [N, C, H, W]")
    raises_here(function() nn.MaxUnpool2d(2)(r(1, 1, 2, 2), ember.tensor({ { { { 1, 2 }, { 3, 99 } } } }, { dtype = "int64" })) end,
      "nn.functional.max_unpool2d: indices must lie in 1..16")
    raises_here(function() nn.Unflatten(2, { 4, 4 })(r(2, 6)) end,
      "Unflatten.forward: sizes {4, 4} do not multiply to the size 6 of dim 2 of shape [2, 6]")
  end)
end)

describe("running statistics over several calls from a fresh module (train and eval mixed)", function()
  for _, c in ipairs(fixtures.sequences) do
    it(c.name .. ": each output and the buffers after, float64", function()
      local m = nn[c.mod](table.unpack(c.args), c.opts)
      m:to("float64")
      for i, x in ipairs(c.xs) do
        m:train(c.modes[i])
        check(("%s call %d output"):format(c.name, i), m(T(x)), T(c.outs[i]), TOL.float64)
      end
      local sd = m:state_dict()
      for k, b in pairs(c.buffers) do
        assert(sd[k] ~= nil, c.name .. ": no buffer " .. k)
        if b.dtype == "int64" then
          assert.are.equal(T(b):item(), sd[k]:item(), c.name .. " " .. k)
        else
          check(c.name .. " buffer " .. k, sd[k], T(b), TOL.float64)
        end
      end
    end)
  end
end)

describe("float64 gradchecks", function()
  local gradcheck = require "tests.lua.helpers.gradcheck"
  it("adaptive max pools gathering each bin as a window (2-d and 3-d, bins larger and smaller than the input)", function()
    local x2 = ember.randn(2, 2, 5, 7, { dtype = "float64" })
    gradcheck.check(function(t) return nn.AdaptiveMaxPool2d({ 3, 4 })(t) end, { x2 })
    gradcheck.check(function(t) return nn.AdaptiveMaxPool2d({ 7, false })(t) end, { ember.randn(1, 2, 3, 4, { dtype = "float64" }) })
    gradcheck.check(function(t) return nn.AdaptiveMaxPool3d({ 2, 1, 3 })(t) end,
      { ember.randn(1, 2, 3, 4, 5, { dtype = "float64" }) })
  end)
  it("MaxUnpool of non-overlapping windows, through a permuted view", function()
    local x = ember.randn(1, 2, 4, 6, { dtype = "float64" })
    local _, idx = nn.MaxPool2d(2, { return_indices = true })(x)
    gradcheck.check(function(t) return nn.MaxUnpool2d(2)(t:permute(1, 2, 4, 3), idx) end,
      { ember.randn(1, 2, 3, 2, { dtype = "float64" }) })
  end)
end)

describe("reset_parameters and reset_running_stats, as PyTorch's (they were nil)", function()
  it("convolutions draw the constructor's weight and bias again (the same numbers for a seed)", function()
    for _, make in ipairs {
      function() return nn.Conv2d(2, 3, 3) end, function() return nn.Conv1d(2, 4, 2, { groups = 2 }) end,
      function() return nn.Conv3d(1, 2, 2) end,
    } do
      ember.manual_seed(7)
      local m = make()
      local w, b = m.weight:clone(), m.bias:clone()
      ember.no_grad(function() m.weight:zero_(); m.bias:zero_() end)
      ember.manual_seed(7)
      m:reset_parameters()
      assert(ember.equal(m.weight, w), m.__name .. " weight")
      assert(ember.equal(m.bias, b), m.__name .. " bias")
      assert(m.weight.requires_grad and m.weight.is_leaf)
    end
    -- a lazy convolution, once it has its sizes, is an nn.Conv2d
    local lazy = nn.LazyConv2d(3, 2)
    lazy(ember.randn(1, 2, 4, 4))
    ember.no_grad(function() lazy.weight:fill_(9) end)
    lazy:reset_parameters()
    assert(lazy.weight:abs():max():item() <= 1 / math.sqrt(2 * 4))
    -- transposed: U(+-1/sqrt(fan_in)), fan_in = out/groups * k (the weight [in, out/groups, k...])
    local t = nn.ConvTranspose2d(4, 6, 3, { groups = 2 })
    ember.no_grad(function() t.weight:fill_(9); t.bias:fill_(9) end)
    t:reset_parameters()
    local bound = 1 / math.sqrt(3 * 9)
    assert(t.weight:abs():max():item() <= bound and t.weight:abs():max():item() > bound / 2)
    assert(t.bias:abs():max():item() <= bound)
  end)

  it("norms: running statistics 0 and 1, num_batches_tracked 0, weight 1, bias 0", function()
    local bn = nn.BatchNorm2d(3)
    bn(ember.randn(4, 3, 2, 2) * 3 + 1)
    ember.no_grad(function() bn.weight:fill_(2); bn.bias:fill_(2) end)
    bn:reset_running_stats()
    assert.are.same({ 0, 0, 0 }, bn.running_mean:totable())
    assert.are.same({ 1, 1, 1 }, bn.running_var:totable())
    assert.are.equal(0, bn.num_batches_tracked:item())
    assert.are.same({ 2, 2, 2 }, bn.weight:totable()) -- the affine parameters are left alone
    bn(ember.randn(4, 3, 2, 2))
    bn:reset_parameters()
    assert.are.same({ 1, 1, 1 }, bn.weight:totable())
    assert.are.same({ 0, 0, 0 }, bn.bias:totable())
    assert.are.same({ 0, 0, 0 }, bn.running_mean:totable())
    assert.are.equal(0, bn.num_batches_tracked:item())
    local inorm = nn.InstanceNorm1d(2, { track_running_stats = true, affine = true })
    inorm(ember.randn(2, 2, 5) + 4)
    inorm:reset_parameters()
    assert.are.same({ 0, 0 }, inorm.running_mean:totable())
    nn.InstanceNorm2d(2):reset_running_stats() -- no statistics kept: nothing to reset
    local gn = nn.GroupNorm(1, 2)
    ember.no_grad(function() gn.weight:fill_(3); gn.bias:fill_(3) end)
    gn:reset_parameters()
    assert.are.same({ 1, 1 }, gn.weight:totable())
    assert.are.same({ 0, 0 }, gn.bias:totable())
    local ln = nn.LayerNorm(2)
    ember.no_grad(function() ln.bias:fill_(3) end)
    ln:reset_parameters()
    assert.are.same({ 0, 0 }, ln.bias:totable())
    nn.BatchNorm1d(2, { affine = false, track_running_stats = false }):reset_parameters()
  end)
end)

describe("the modules' PyTorch attributes", function()
  it("MaxPool3d and AvgPool3d have stride, padding, dilation, ceil_mode, ... (they were nil) and forward reads them", function()
    local mp = nn.MaxPool3d(3)
    assert.are.same({ 3, 0, 1, false, false }, { mp.stride, mp.padding, mp.dilation, mp.ceil_mode, mp.return_indices })
    local ap = nn.AvgPool3d({ 2, 3, 2 }, { padding = 1, divisor_override = 2 })
    assert.are.same({ 2, 3, 2 }, ap.stride)
    assert.are.same({ 1, false, true, 2 }, { ap.padding, ap.ceil_mode, ap.count_include_pad, ap.divisor_override })
    -- a PyTorch user changes an attribute after construction; forward follows it
    local x = ember.randn(1, 1, 4, 4, 4)
    mp.stride = 1
    assert.are.same({ 1, 1, 2, 2, 2 }, mp(x).shape)
    assert.are.equal("MaxPool3d(kernel_size=3, stride=1, padding=0, dilation=1, ceil_mode=false)", tostring(mp))
    local mp2 = nn.MaxPool2d(3)
    mp2.stride = { 1, 1 }
    assert.are.same({ 1, 4, 2, 2 }, mp2(x[1]).shape)
  end)
  it("convolutions, norms and resampling keep PyTorch's names", function()
    local c = nn.Conv2d(2, 4, 3, { stride = 2, groups = 2 })
    assert.are.same({ 2, 4, 2, "zeros" }, { c.in_channels, c.out_channels, c.groups, c.padding_mode })
    assert.are.same({ { 3, 3 }, { 2, 2 }, { 0, 0 }, { 1, 1 } }, { c.kernel_size, c.stride, c.padding, c.dilation })
    assert.are.same({ 0, 0 }, nn.ConvTranspose2d(2, 4, 3).output_padding)
    local bn = nn.BatchNorm2d(4, { momentum = 0.2 })
    assert.are.same({ 4, 1e-5, 0.2, true, true }, { bn.num_features, bn.eps, bn.momentum, bn.affine, bn.track_running_stats })
    local gn = nn.GroupNorm(2, 4)
    assert.are.same({ 2, 4, true }, { gn.num_groups, gn.num_channels, gn.affine })
    assert.are.equal(2, nn.PixelShuffle(2).upscale_factor)
    local ln = nn.LayerNorm({ 2, 3 }, { elementwise_affine = false })
    assert.are.same({ { 2, 3 }, 1e-5, false }, { ln.normalized_shape, ln.eps, ln.elementwise_affine })
    assert.is_true(nn.LayerNorm(3).elementwise_affine)
  end)
end)

describe("lazy convolutions and norms", function()
  it("draw nothing until they have their sizes (the probe that checks their options drew from the generator)", function()
    for _, make in ipairs {
      function() return nn.LazyConv2d(3, 2) end, function() return nn.LazyConvTranspose1d(2, 3) end,
      function() return nn.LazyBatchNorm2d() end, function() return nn.LazyConv3d(2, 1, { bias = false }) end,
    } do
      ember.manual_seed(11)
      local want = ember.rand(4)
      ember.manual_seed(11)
      make()
      assert(ember.equal(ember.rand(4), want))
    end
    -- so a seed gives a lazy convolution the weights of the convolution it becomes
    local x = ember.randn(1, 2, 4, 4)
    ember.manual_seed(5)
    local lazy = nn.LazyConv2d(3, 2)
    lazy(x)
    ember.manual_seed(5)
    local conv = nn.Conv2d(2, 3, 2)
    assert(ember.equal(lazy.weight, conv.weight) and ember.equal(lazy.bias, conv.bias))
  end)
  it("a bad groups is named (it was told as in_channels)", function()
    local r = ember.randn
    raises_here(function() nn.LazyConv2d(3, 2, { groups = 0 }) end, "Conv2d: groups must be a positive integer, got 0")
    raises_here(function() nn.LazyConv1d(3, 2, { groups = 1.5 }) end, "Conv1d: groups must be a positive integer, got 1.5")
    raises_here(function() nn.LazyConvTranspose3d(3, 2, { groups = -1 }) end,
      "ConvTranspose3d: groups must be a positive integer, got -1")
    raises_here(function() nn.LazyConv2d(3, 2, { groups = 2 }) end, "Conv2d: out_channels=3 must be divisible by groups=2")
    assert.are.same({ 1, 4, 2, 2 }, nn.LazyConv2d(4, 2, { groups = 2 })(r(1, 6, 3, 3)).shape)
  end)
end)
