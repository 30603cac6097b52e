-- The nn modules a PyTorch user expects: BatchNorm1d, ReLU6, Hardtanh,
-- Hardswish, Hardsigmoid, Mish, GLU, PReLU, Softsign, Unflatten, KLDivLoss,
-- HuberLoss, CosineSimilarity, PairwiseDistance, the 2-d paddings,
-- Dropout2d, MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, nearest Upsample,
-- PixelShuffle and PixelUnshuffle. Values and gradients (inputs and
-- parameters) are checked against PyTorch 1.13 through the committed
-- fixtures tests/fixtures/nn_more.lua (tests/gen_nn_fixtures.py,
-- more_cases) in float64 (1e-12) and float32, with PyTorch's state dict
-- keys, float64 gradchecks, printing, and errors that name the module at
-- the caller's line.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_more.lua")
local F64 = { dtype = "float64" }
local T, check, max_rel, raises_here = compare.T, compare.check, compare.max_rel, compare.raises_here
local names_of = compare.sorted_keys
local function case(name) return compare.case(fixtures, name) end

local function one(m, i) return m(i.x) end
local function two(m, i) return m(i.x, i.target) end
local function pair(m, i) return m(i.x, i.x2) end

-- name -> { make(dtype) -> module, forward }
local MODULES = {
  BatchNorm1d_2d = { function(dt) return nn.BatchNorm1d(3, { dtype = dt }) end },
  BatchNorm1d_3d = { function(dt) return nn.BatchNorm1d(4, { momentum = 0.3, dtype = dt }) end },
  BatchNorm1d_eval = { function(dt) return nn.BatchNorm1d(3, { eps = 1e-3, dtype = dt }):eval() end },
  BatchNorm1d_bare_eval = { function() return nn.BatchNorm1d(3, { affine = false, track_running_stats = false }):eval() end },
  ReLU6 = { function() return nn.ReLU6() end },
  Hardtanh = { function() return nn.Hardtanh(-2, 1.5) end },
  Hardtanh_default = { function() return nn.Hardtanh() end },
  Hardswish = { function() return nn.Hardswish() end },
  Hardsigmoid = { function() return nn.Hardsigmoid() end },
  Mish = { function() return nn.Mish() end },
  Softsign = { function() return nn.Softsign() end },
  PReLU = { function(dt) return nn.PReLU(1, { dtype = dt }) end },
  PReLU_channels = { function(dt) return nn.PReLU(3, { init = 0.1, dtype = dt }) end },
  GLU_dim2 = { function() return nn.GLU(2) end },
  GLU_last = { function() return nn.GLU() end },
  Unflatten = { function() return nn.Unflatten(2, { 2, 3 }) end },
  KLDivLoss_mean = { function() return nn.KLDivLoss() end, two },
  KLDivLoss_batchmean = { function() return nn.KLDivLoss({ reduction = "batchmean" }) end, two },
  KLDivLoss_sum = { function() return nn.KLDivLoss("sum") end, two },
  KLDivLoss_none = { function() return nn.KLDivLoss({ reduction = "none" }) end, two },
  KLDivLoss_log_target = { function() return nn.KLDivLoss({ reduction = "batchmean", log_target = true }) end, two },
  HuberLoss_mean = { function() return nn.HuberLoss() end, two },
  HuberLoss_delta05_sum = { function() return nn.HuberLoss({ delta = 0.5, reduction = "sum" }) end, two },
  HuberLoss_delta2_none = { function() return nn.HuberLoss({ delta = 2, reduction = "none" }) end, two },
  CosineSimilarity = { function() return nn.CosineSimilarity() end, pair },
  CosineSimilarity_last_broadcast = { function() return nn.CosineSimilarity({ dim = -1, eps = 1e-6 }) end, pair },
  PairwiseDistance = { function() return nn.PairwiseDistance() end, pair },
  PairwiseDistance_p1_keepdim = { function() return nn.PairwiseDistance({ p = 1, keepdim = true }) end, pair },
  PairwiseDistance_p3_eps = { function() return nn.PairwiseDistance({ p = 3, eps = 1e-3 }) end, pair },
  ZeroPad2d = { function() return nn.ZeroPad2d({ 1, 2, 0, 1 }) end },
  ZeroPad2d_int = { function() return nn.ZeroPad2d(2) end },
  ConstantPad2d_crop = { function() return nn.ConstantPad2d({ 1, 0, -1, 2 }, 0.5) end },
  ReflectionPad2d = { function() return nn.ReflectionPad2d({ 2, 1, 1, 3 }) end },
  ReflectionPad2d_unbatched = { function() return nn.ReflectionPad2d(1) end },
  ReplicationPad2d = { function() return nn.ReplicationPad2d({ 1, 2, 3, 0 }) end },
  MaxPool1d_k3s2p1 = { function() return nn.MaxPool1d(3, { stride = 2, padding = 1 }) end },
  MaxPool1d_dilated_unbatched = { function() return nn.MaxPool1d(2, { stride = 1, dilation = 2 }) end },
  AvgPool1d_k3s2p1 = { function() return nn.AvgPool1d(3, { stride = 2, padding = 1 }) end },
  AvgPool1d_exclude_pad = { function() return nn.AvgPool1d(4, { stride = 3, padding = 2, count_include_pad = false }) end },
  AdaptiveAvgPool1d_3 = { function() return nn.AdaptiveAvgPool1d(3) end },
  AdaptiveAvgPool1d_4_unbatched = { function() return nn.AdaptiveAvgPool1d({ 4 }) end },
  Upsample_x2 = { function() return nn.Upsample(2) end },
  ["Upsample_x1.5"] = { function() return nn.Upsample({ scale_factor = 1.5 }) end },
  ["Upsample_x2.6_x3"] = { function() return nn.Upsample({ 2.6, 3 }) end },
  Upsample_size = { function() return nn.Upsample({ size = { 5, 7 } }) end },
  Upsample_size_down = { function() return nn.Upsample({ size = { 2, 3 }, mode = "nearest" }) end },
  PixelShuffle = { function() return nn.PixelShuffle(2) end },
  PixelShuffle_5d = { function() return nn.PixelShuffle(3) end },
  PixelUnshuffle = { function() return nn.PixelUnshuffle(2) end },
  PixelUnshuffle_unbatched = { function() return nn.PixelUnshuffle(3) end },
}

local start_buffers = compare.start_buffers

-- Brings the module to the fixture's starting point (BatchNorm1d_cumulative's first batch).
local function prime(name, m, c, dtype)
  if c.first_batch then ember.no_grad(function() m(T(c.first_batch):to(dtype)) end) end
end

-- PyTorch's hardsigmoid_backward multiplies by 1/6 rounded to float32 (also in float64)
local TOL = { Hardsigmoid = 1e-7 }

local function float64_parity(name, make, forward)
  local c = case(name)
  local m = make("float64")
  prime(name, m, c, "float64")
  assert.are.same(c.keys, names_of(m:state_dict()), name .. ": state dict keys are PyTorch's")
  compare.module(m, c, { forward = forward or one, extra = start_buffers(m, c, "float64"), tol = TOL[name] })
  for k, v in pairs(c.buffers or {}) do check(name .. " buffer " .. k, m[k], T(v), 1e-12) end
end

-- float32: the module in float32 on the fixture's inputs rounded to float32,
-- against PyTorch's float64 numbers.
local function float32_parity(name, make, forward, tol)
  local c = case(name)
  local m = make("float32")
  prime(name, m, c, "float32")
  compare.module_float32(m, c, { forward = forward or one, extra = start_buffers(m, c, "float32"), tol = tol })
end

local ORDER = {}
for _, c in ipairs(fixtures.cases) do if MODULES[c.name] then ORDER[#ORDER + 1] = c.name end end

describe("nn modules match PyTorch 1.13 (float64, 1e-12): outputs, input and parameter gradients, state dict keys", function()
  it("covers every fixture case", function()
    local missing = {}
    for _, c in ipairs(fixtures.cases) do
      if not MODULES[c.name] and c.name ~= "BatchNorm1d_cumulative" and c.name ~= "KLDivLoss_zero_target" then
        missing[#missing + 1] = c.name
      end
    end
    assert.are.same({}, missing)
  end)
  for _, name in ipairs(ORDER) do
    it(name, function() float64_parity(name, MODULES[name][1], MODULES[name][2]) end)
  end

  it("BatchNorm1d_cumulative: momentum = false is PyTorch's momentum=None", function()
    float64_parity("BatchNorm1d_cumulative", function(dt) return nn.BatchNorm1d(2, { momentum = false, dtype = dt }) end)
  end)

  it("KLDivLoss_zero_target: the loss is 0 where the target is (xlogy); the target's gradient NaN there, as PyTorch's", function()
    local c = case("KLDivLoss_zero_target")
    local x = T(c.inputs.x):requires_grad_(true)
    local out = nn.KLDivLoss("sum")(x, T(c.target64))
    check("out", out, T(c.out), 1e-12)
    ;(out * T(c.R)):sum():backward()
    check("grad x", x.grad, T(c.grad_inputs.x), 1e-12)
    local t = T(c.target64):requires_grad_(true)
    nn.KLDivLoss("sum")(T(c.inputs.x), t):backward()
    local zero = T(c.target64):eq(0)
    assert.is_true(zero:any():item())
    assert.is_true(t.grad:isnan():eq(zero):all():item()) -- NaN exactly where the target is 0
  end)
end)

describe("nn modules match PyTorch 1.13 in float32", function()
  for _, name in ipairs(ORDER) do
    it(name, function() float32_parity(name, MODULES[name][1], MODULES[name][2], 2e-5) end)
  end
end)

describe("float64 gradchecks", function()
  local function gc(name, f, inputs)
    ember.manual_seed(99)
    gradcheck.check(f, inputs, { name = name })
  end
  local function r(...) return ember.randn({ ... }, F64) end

  it("BatchNorm1d in training: input, weight and bias, [N, C] and [N, C, L]", function()
    local m = nn.BatchNorm1d(3, F64)
    gc("BatchNorm1d 3d", function(x, w, b) m.weight, m.bias = w, b; return m(x) end, { r(2, 3, 3), r(3), r(3) })
    gc("BatchNorm1d 2d", function(x, w, b) m.weight, m.bias = w, b; return m(x) end, { r(5, 3), r(3), r(3) })
  end)

  it("the activations (inputs away from the kinks)", function()
    for _, m in ipairs { nn.ReLU6(), nn.Hardtanh(-2, 1.5), nn.Hardswish(), nn.Hardsigmoid(), nn.Mish(), nn.Softsign(),
      nn.GLU(2), nn.Unflatten(-1, { 2, 2 }) } do
      gc(tostring(m), function(x) return m(x) end, { r(3, 4, 4) * 3 })
    end
  end)

  it("PReLU: input and the per-channel weight", function()
    local m = nn.PReLU(4, F64)
    gc("PReLU", function(x, w) m.weight = w; return m(x) end, { r(2, 4, 3), r(4) })
  end)

  it("the losses and distances: both arguments", function()
    local kl = nn.KLDivLoss("batchmean")
    gc("KLDivLoss", function(x, t) return kl(x, t) end, { r(3, 4):log_softmax(2):detach(), r(3, 4):softmax(2):detach() })
    local klt = nn.KLDivLoss({ reduction = "sum", log_target = true })
    gc("KLDivLoss log_target", function(x, t) return klt(x, t) end, { r(3, 4), r(3, 4) })
    local hub = nn.HuberLoss({ delta = 0.7, reduction = "none" })
    gc("HuberLoss", function(x, t) return hub(x, t) end, { r(3, 4), r(3, 4) })
    local cos = nn.CosineSimilarity()
    gc("CosineSimilarity", function(a, b) return cos(a, b) end, { r(3, 4, 2), r(3, 4, 2) })
    local pd = nn.PairwiseDistance({ p = 3 })
    gc("PairwiseDistance", function(a, b) return pd(a, b) end, { r(3, 5), r(3, 5) })
  end)

  it("padding, pooling, upsampling and pixel shuffles", function()
    for _, m in ipairs { nn.ConstantPad2d({ 1, -1, 2, 0 }, 3), nn.ReflectionPad2d({ 2, 1, 0, 2 }), nn.ReplicationPad2d(2),
      nn.Upsample({ scale_factor = 1.5 }), nn.PixelShuffle(2), nn.PixelUnshuffle(2) } do
      gc(tostring(m), function(x) return m(x) end, { r(1, 4, 4, 4) })
    end
    for _, m in ipairs { nn.MaxPool1d(3, { stride = 2, padding = 1 }), nn.AdaptiveAvgPool1d(3),
      nn.AvgPool1d(3, { stride = 2, padding = 1, count_include_pad = false }) } do
      gc(tostring(m), function(x) return m(x) end, { r(2, 3, 7) })
    end
  end)
end)

describe("nn.BatchNorm1d", function()
  it("shares nn.BatchNorm2d's state dict (names, dtypes) and prints as it", function()
    local m = nn.BatchNorm1d(4)
    local names = {}
    for k, v in pairs(m:state_dict()) do names[#names + 1] = k .. ":" .. v.dtype end
    table.sort(names)
    assert.are.same({ "bias:float32", "num_batches_tracked:int64", "running_mean:float32", "running_var:float32",
      "weight:float32" }, names)
    assert.are.equal("BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)", tostring(m))
    assert.are.same({}, nn.BatchNorm1d(4, { affine = false, track_running_stats = false }):state_dict())
    m(ember.randn(3, 4))
    m(ember.randn(3, 4, 2))
    assert.are.equal(2, m.num_batches_tracked:item())
  end)

  it("errors name BatchNorm1d at the caller's line", function()
    raises_here(function() local _ = nn.BatchNorm1d(0) end, "BatchNorm1d: num_features must be a positive integer, got 0")
    raises_here(function() local _ = nn.BatchNorm1d(3, { momentum = -1 }) end, "BatchNorm1d: momentum must be a number in [0, 1]")
    assert.are.equal(0.1, nn.BatchNorm1d(3, 0.1).eps) -- PyTorch's positional eps
    raises_here(function() local _ = nn.BatchNorm1d(3, 0.1, 0.1, true, true, 1) end,
      "BatchNorm1d: takes at most 5 arguments before the options table")
    raises_here(function() local _ = nn.BatchNorm1d(3)(ember.randn(2, 4)) end,
      "BatchNorm1d.forward: expected a 2-d or 3-d input [N, C] or [N, C, L] with C = num_features = 3, got shape [2, 4]")
    raises_here(function() local _ = nn.BatchNorm1d(3)(ember.randn(2, 3, 4, 4)) end, "got shape [2, 3, 4, 4]")
    raises_here(function() local _ = nn.BatchNorm1d(3)(ember.randn(1, 3)) end,
      "BatchNorm1d.forward: expected more than 1 value per channel when training")
    raises_here(function() local _ = nn.BatchNorm2d(3)(ember.randn(1, 3, 1, 1)) end,
      "BatchNorm2d.forward: expected more than 1 value per channel when training")
  end)
end)

describe("nn.Dropout2d", function()
  it("zeroes whole channels, scales the rest by 1/(1-p), and is the identity in eval mode", function()
    ember.manual_seed(5)
    local m = nn.Dropout2d(0.25)
    local x = ember.randn(8, 16, 3, 3, F64):requires_grad_()
    local y = m(x)
    local ratio = (y / x):detach() -- per element: 0 or 1/(1-p)
    local flat = ratio:reshape({ 8, 16, 9 })
    local per_channel = flat:amax(3)
    assert.is_true((flat:amin(3) - per_channel):abs():max():item() < 1e-12, "one factor per channel")
    local zeros = per_channel:eq(0):sum():item()
    local kept = per_channel:eq(1 / 0.75):sum():item()
    assert.are.equal(8 * 16, zeros + kept)
    assert.is_true(zeros > 10 and zeros < 60, "about a quarter of the 128 channels dropped: " .. zeros)
    y:sum():backward()
    assert.is_true((x.grad - ratio):abs():max():item() < 1e-12, "the gradient is the mask")
    local u = nn.Dropout2d(0.5)(ember.ones(4, 2, 2)):reshape({ 4, 4 }) -- unbatched [C, H, W]
    assert.is_true((u:amax(2) - u:amin(2)):abs():max():item() == 0)
    m:eval()
    assert.are.equal(x, m(x))
    assert.are.equal("Dropout2d(p=0.25)", tostring(m))
  end)

  it("p = 1 drops every channel, as PyTorch's (and nn.Dropout's): zeros and zero gradients", function()
    -- the channel dropouts refused p = 1 ("[0, 1)"), which torch.nn.Dropout2d(1.0) and F.dropout2d(x, 1) take
    local x = ember.randn(2, 3, 4, 4, F64):requires_grad_()
    local y = nn.Dropout2d(1.0)(x)
    assert.are.equal(0, y:abs():sum():item())
    y:sum():backward()
    assert.are.equal(0, x.grad:abs():sum():item())
    assert.are.equal(0, nn.Dropout1d(1)(ember.randn(2, 3, 5)):abs():sum():item())
    assert.are.equal(0, nn.Dropout3d(1)(ember.randn(2, 3, 2, 2, 2)):abs():sum():item())
    local F = nn.functional
    assert.are.equal(0, F.dropout2d(ember.randn(2, 3, 4, 4), 1):abs():sum():item())
    assert.are.equal(0, F.dropout1d(ember.randn(2, 3, 4), { p = 1 }):abs():sum():item())
    local z = ember.randn(2, 3, 4, 4)
    assert.are.equal(z, nn.Dropout2d(1):eval()(z))
  end)

  it("errors name Dropout2d at the caller's line", function()
    raises_here(function() local _ = nn.Dropout2d(1.5) end, "Dropout2d: p must be a number in [0, 1], got 1.5")
    raises_here(function() local _ = nn.Dropout1d(-1) end, "Dropout1d: p must be a number in [0, 1], got -1")
    raises_here(function() local _ = nn.Dropout2d()(ember.randn(2, 3)) end,
      "Dropout2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [2, 3]")
  end)
end)

describe("the new modules print as PyTorch's (ember's dims and booleans)", function()
  it("extra_repr", function()
    local want = {
      { nn.ReLU6(), "ReLU6()" }, { nn.Hardtanh(), "Hardtanh(min_val=-1, max_val=1)" },
      { nn.Hardswish(), "Hardswish()" }, { nn.Hardsigmoid(), "Hardsigmoid()" }, { nn.Mish(), "Mish()" },
      { nn.Softsign(), "Softsign()" }, { nn.GLU(), "GLU(dim=-1)" }, { nn.PReLU(3), "PReLU(num_parameters=3)" },
      { nn.Unflatten(2, { 2, -1 }), "Unflatten(dim=2, unflattened_size=(2, -1))" },
      { nn.KLDivLoss("batchmean"), "KLDivLoss(reduction=batchmean, log_target=false)" },
      { nn.HuberLoss({ delta = 0.5 }), "HuberLoss(delta=0.5, reduction=mean)" },
      { nn.CosineSimilarity(), "CosineSimilarity(dim=2, eps=1e-08)" },
      { nn.PairwiseDistance(), "PairwiseDistance(p=2, eps=1e-06, keepdim=false)" },
      { nn.ZeroPad2d(1), "ZeroPad2d((1, 1, 1, 1))" },
      { nn.ConstantPad2d({ 1, 2, 3, 4 }, 0.5), "ConstantPad2d(padding=(1, 2, 3, 4), value=0.5)" },
      { nn.ReflectionPad2d(2), "ReflectionPad2d((2, 2, 2, 2))" },
      { nn.ReplicationPad2d({ 0, 1, 2, 3 }), "ReplicationPad2d((0, 1, 2, 3))" },
      { nn.MaxPool1d(3), "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1)" },
      { nn.AvgPool1d(2, { padding = 1 }), "AvgPool1d(kernel_size=2, stride=2, padding=1, count_include_pad=true)" },
      { nn.AdaptiveAvgPool1d(5), "AdaptiveAvgPool1d(output_size=5)" },
      { nn.Upsample(2), "Upsample(scale_factor=2, mode=nearest)" },
      { nn.Upsample({ size = { 4, 6 } }), "Upsample(size=(4, 6), mode=nearest)" },
      { nn.PixelShuffle(2), "PixelShuffle(upscale_factor=2)" },
      { nn.PixelUnshuffle(3), "PixelUnshuffle(downscale_factor=3)" },
    }
    for _, w in ipairs(want) do assert.are.equal(w[2], tostring(w[1])) end
  end)
end)

describe("the new modules: shapes and rules beyond the fixtures", function()
  it("PReLU's weight is PyTorch's 'weight' and learns; one slope takes any shape, a 0-d input too", function()
    local m = nn.PReLU()
    assert.are.same({ "weight" }, { table.unpack(m:parameter_names()) })
    assert.are.same(ember.Size { 2, 3, 4, 5 }, m(ember.randn(2, 3, 4, 5)).shape)
    assert.are.same(ember.Size {}, m(ember.tensor(-2.0)).shape)
    assert.is_true(math.abs(m(ember.tensor(-2.0)):item() + 0.5) < 1e-7)
    assert.is_true((nn.PReLU(2, 0.1).weight - 0.1):abs():max():item() < 1e-8)
    assert.are.same(ember.Size { 2 }, nn.PReLU(2, { init = 0.1 }).weight.shape)
  end)

  it("PixelUnshuffle undoes PixelShuffle; Unflatten undoes Flatten", function()
    local x = ember.randn(2, 3, 4, 6)
    assert.is_true(nn.PixelShuffle(2)(nn.PixelUnshuffle(2)(x)):equal(x))
    assert.is_true(nn.Unflatten(2, { 3, 4 })(nn.Flatten(2, 3)(x)):equal(x))
  end)

  it("Hardtanh's and ReLU6's gradients are 0 at the clip values, as PyTorch's", function()
    local x = ember.tensor({ -1, 0, 1, 6 }, F64):requires_grad_()
    local function list(t) local l = {}; for i = 1, t:numel() do l[i] = t[i]:item() end; return l end
    nn.Hardtanh()(x):sum():backward()
    assert.are.same({ 0, 1, 0, 0 }, list(x.grad))
    x.grad = nil
    nn.ReLU6()(x):sum():backward()
    assert.are.same({ 0, 0, 1, 0 }, list(x.grad))
  end)
end)

describe("errors name the module at the caller's line", function()
  it("activations", function()
    raises_here(function() local _ = nn.Hardtanh(1, -1) end,
      "Hardtanh: min_val and max_val must be numbers with min_val < max_val, got 1 and -1")
    raises_here(function() local _ = nn.ReLU6()("x") end, "ReLU6.forward: expected a tensor, got string")
    raises_here(function() local _ = nn.Hardtanh()({}) end, "Hardtanh.forward: expected a tensor, got table")
    raises_here(function() local _ = nn.Hardswish()(3) end, "Hardswish.forward: expected a tensor, got number")
    raises_here(function() local _ = nn.Hardsigmoid()(3) end, "Hardsigmoid.forward: expected a tensor, got number")
    raises_here(function() local _ = nn.Mish()(nil) end, "Mish.forward: expected a tensor, got nil")
    raises_here(function() local _ = nn.Softsign()(true) end, "Softsign.forward: expected a tensor, got boolean")
    raises_here(function() local _ = nn.GLU(0) end, "GLU: dim must be a nonzero integer")
    raises_here(function() local _ = nn.GLU(2)(ember.randn(2, 5)) end,
      "GLU.forward: the halved dim must have an even size, but dim 2 of shape [2, 5] has 5")
    raises_here(function() local _ = nn.GLU(3)(ember.randn(2, 4)) end, "GLU.forward: dim=3 is out of range for a 2-d input")
    raises_here(function() local _ = nn.PReLU(0) end, "PReLU: num_parameters must be a positive integer, got 0")
    raises_here(function() local _ = nn.PReLU(2, { init = "a" }) end, "PReLU: init must be a number, got string")
    raises_here(function() local _ = nn.PReLU(3)(ember.randn(2, 4, 5)) end,
      "PReLU.forward: expected an input [N, C, *] with C = num_parameters = 3, got shape [2, 4, 5]")
    raises_here(function() local _ = nn.PReLU(3)(ember.randn(3)) end, "got shape [3]")
    raises_here(function() local _ = nn.Unflatten(2, { 2, -1, -1 }) end,
      "Unflatten: sizes must be a list of positive integers (one may be -1), got {2, -1, -1}")
    raises_here(function() local _ = nn.Unflatten(0, { 2 }) end, "Unflatten: dim must be a nonzero integer")
    raises_here(function() local _ = nn.Unflatten(2, { 4, 2 })(ember.randn(3, 10)) end,
      "Unflatten.forward: sizes {4, 2} do not multiply to the size 10 of dim 2 of shape [3, 10]")
    raises_here(function() local _ = nn.Unflatten(2, { 3, -1 })(ember.randn(3, 10)) end,
      "Unflatten.forward: sizes {3, -1} do not multiply to the size 10")
  end)

  it("losses and distances", function()
    raises_here(function() local _ = nn.KLDivLoss({ reduction = "avg" }) end,
      'KLDivLoss: reduction must be "mean", "batchmean", "sum" or "none", got avg')
    raises_here(function() local _ = nn.KLDivLoss({ log_target = 1 }) end, "KLDivLoss: log_target must be a boolean, got number")
    raises_here(function() local _ = nn.KLDivLoss()(ember.randn(2, 3), ember.randn(3, 2)) end,
      "KLDivLoss.forward: target shape [3, 2] must equal input shape [2, 3]")
    raises_here(function() local _ = nn.KLDivLoss()(ember.randn(2, 3), 1) end,
      "KLDivLoss.forward: expected two tensors (input, target), got a tensor and number")
    raises_here(function() local _ = nn.HuberLoss({ delta = 0 }) end, "HuberLoss: delta must be a number > 0, got 0")
    raises_here(function() local _ = nn.HuberLoss({ reduction = "max" }) end, 'HuberLoss: reduction must be "mean", "sum" or "none"')
    raises_here(function() local _ = nn.HuberLoss()(ember.randn(4), ember.randn(5)) end,
      "HuberLoss.forward: target shape [5] must equal input shape [4]")
    raises_here(function() local _ = nn.CosineSimilarity({ eps = -1 }) end, "CosineSimilarity: eps must be a number >= 0, got -1")
    raises_here(function() local _ = nn.CosineSimilarity({ dim = 0 }) end, "CosineSimilarity: dim must be a nonzero integer")
    raises_here(function() local _ = nn.CosineSimilarity()(ember.randn(2, 3), "b") end,
      "CosineSimilarity.forward: expected two tensors, got a tensor and string")
    raises_here(function() local _ = nn.PairwiseDistance({ p = 0 }) end, "PairwiseDistance: p must be a number > 0, got 0")
    raises_here(function() local _ = nn.PairwiseDistance({ keepdim = 1 }) end, "PairwiseDistance: keepdim must be a boolean")
    raises_here(function() local _ = nn.PairwiseDistance()(nil, ember.randn(2)) end,
      "PairwiseDistance.forward: expected two tensors, got nil and a tensor")
  end)

  it("padding", function()
    raises_here(function() local _ = nn.ZeroPad2d({ 1, 2 }) end,
      "ZeroPad2d: padding must be an integer or a list of four {left, right, top, bottom}, got {1, 2}")
    raises_here(function() local _ = nn.ConstantPad2d(1) end, "ConstantPad2d: value must be a number, got nil")
    raises_here(function() local _ = nn.ReflectionPad2d(-1) end,
      "ReflectionPad2d: padding must be a non-negative integer or a list of four")
    raises_here(function() local _ = nn.ReplicationPad2d(1.5) end, "ReplicationPad2d: padding must be a non-negative integer")
    raises_here(function() local _ = nn.ReflectionPad2d({ 3, 0, 0, 0 })(ember.randn(1, 2, 4, 3)) end,
      "ReflectionPad2d.forward: padding (3, 0, 0, 0) is too large for an input of shape [1, 2, 4, 3]")
    raises_here(function() local _ = nn.ZeroPad2d(1)(ember.randn(4, 4)) end,
      "ZeroPad2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [4, 4]")
    raises_here(function() local _ = nn.ReplicationPad2d(1)(ember.randn(1, 2, 3, 4, 5)) end,
      "ReplicationPad2d.forward: expected an input [N, C, H, W] or [C, H, W], got shape [1, 2, 3, 4, 5]")
    raises_here(function() local _ = nn.ConstantPad2d({ -2, -2, 0, 0 }, 0)(ember.randn(1, 2, 3, 3)) end,
      "ConstantPad2d.forward: padding (-2, -2, 0, 0) is too large for an input of shape [1, 2, 3, 3]")
  end)

  it("pooling, upsampling, pixel shuffles", function()
    raises_here(function() local _ = nn.MaxPool1d(0) end, "MaxPool1d: kernel_size must be a positive integer, got 0")
    raises_here(function() local _ = nn.MaxPool1d(2, { stride = 0 }) end, "MaxPool1d: stride must be a positive integer, got 0")
    raises_here(function() local _ = nn.MaxPool1d(2, { padding = 2 }) end,
      "MaxPool1d: padding 2 is more than half the kernel (2)")
    raises_here(function() local _ = nn.MaxPool1d(2, { return_indices = "yes" }) end, "MaxPool1d: return_indices must be a boolean, got yes")
    raises_here(function() local _ = nn.MaxPool1d(2)(ember.randn(2, 3, 4, 5)) end,
      "MaxPool1d.forward: expected an input [N, C, L] or [C, L], got shape [2, 3, 4, 5]")
    raises_here(function() local _ = nn.MaxPool1d(5)(ember.randn(2, 3, 4)) end,
      "MaxPool1d.forward: the window (kernel 5, dilation 1) is larger than the padded input (4 + 2 * 0) of shape [2, 3, 4]")
    raises_here(function() local _ = nn.AvgPool1d(2, { dilation = 2 }) end, "AvgPool1d: there is no dilation option")
    raises_here(function() local _ = nn.AvgPool1d(2, { padding = -1 }) end, "AvgPool1d: padding must be a non-negative integer, got -1")
    raises_here(function() local _ = nn.AvgPool1d(3)(ember.randn(5)) end, "AvgPool1d.forward: expected an input [N, C, L] or [C, L], got shape [5]")
    raises_here(function() local _ = nn.AdaptiveAvgPool1d({ 2, 2 }) end, "AdaptiveAvgPool1d: output_size must be a positive integer")
    raises_here(function() local _ = nn.AdaptiveAvgPool1d(2)(ember.randn(1, 2, 3, 4)) end,
      "AdaptiveAvgPool1d.forward: expected an input [N, C, L] or [C, L], got shape [1, 2, 3, 4]")
    raises_here(function() local _ = nn.Upsample() end, "Upsample: give either size or scale_factor (one of them)")
    raises_here(function() local _ = nn.Upsample({ size = 2, scale_factor = 2 }) end, "Upsample: give either size or scale_factor")
    raises_here(function() local _ = nn.Upsample(2, { mode = "cubic" }) end, 'Upsample: mode must be one of "area", "bicubic"')
    raises_here(function() local _ = nn.Upsample(2, { mode = "bilinear" })(ember.randn(1, 2, 3)) end,
      'Upsample.forward: mode "bilinear" needs a 4-d input [N, C, H, W], got shape [1, 2, 3] (3-d)')
    raises_here(function() local _ = nn.Upsample({ size = { 2, 0 } }) end, "Upsample: size must be a positive integer or a list of them (one per spatial dim), got {2, 0}")
    raises_here(function() local _ = nn.Upsample(2)(ember.randn(2, 3)) end,
      "Upsample.forward: expected an input [N, C, *spatial] with 1 to 3 spatial dims (3-d to 5-d), got shape [2, 3]")
    raises_here(function() local _ = nn.PixelShuffle(0) end, "PixelShuffle: upscale_factor must be a positive integer, got 0")
    raises_here(function() local _ = nn.PixelShuffle(2)(ember.randn(1, 6, 2, 2)) end,
      "PixelShuffle.forward: the channels (6, dim 2 of shape [1, 6, 2, 2]) must be divisible by upscale_factor^2 = 4")
    raises_here(function() local _ = nn.PixelShuffle(2)(ember.randn(4, 2)) end,
      "PixelShuffle.forward: expected an input [*, C, H, W], got shape [4, 2]")
    raises_here(function() local _ = nn.PixelUnshuffle(2)(ember.randn(1, 1, 3, 4)) end,
      "PixelUnshuffle.forward: the height and width (3, 4 of shape [1, 1, 3, 4]) must be divisible by downscale_factor = 2")
  end)
end)
