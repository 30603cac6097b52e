-- nn.init (lua/ember/nn/weight_init.lua), torch.nn.init's initialisers.
--
-- Formulas: calculate_gain and the fans of several shapes are compared with
-- PyTorch's own helpers, and each initialiser's bound or std with PyTorch's
-- formula for those fans (tests/fixtures/nn_modern.lua, init section). The
-- check is exact: with the same seed, xavier_uniform_(t) must equal
-- t:uniform_(-b, b) for PyTorch's b, element for element.
--
-- Distributions: n = 200000 float64 draws. Tolerances come from the sample
-- size: the sample mean has standard error sigma / sqrt(n); the sample std
-- has standard error sigma * sqrt((kurtosis - 1) / (4 n)) (kurtosis 1.8 for
-- a uniform, 3 for a normal, the fixture's value for each truncated normal); each
-- check allows 6 standard errors (a false failure about once in 10^9 runs).
-- Uniform draws must lie in [-b, b] and reach past b (1 - 20/n) (missing
-- that has probability e^-20).
local ember = require "ember"
local nn = require "ember.nn"
local compare = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_modern.lua").init
local raises_here = compare.raises_here
local init = nn.init
local N = 200000
local F64 = { dtype = "float64" }

local function close(a, b, tol, what)
  assert(math.abs(a - b) <= tol, ("%s: %.10g vs %.10g (tolerance %.3g)"):format(what, a, b, tol))
end

-- mean and std (n - 1) of a tensor, in float64
local function moments(t)
  local d = t:double()
  return d:mean():item(), d:std():item()
end

local function check_uniform(t, b, what)
  local n = t:numel()
  assert(t:abs():max():item() <= b, what .. ": a value is outside [-b, b]")
  assert(t:abs():max():item() >= b * (1 - 20 / n), what .. ": no value near the bound")
  local sigma = b / math.sqrt(3)
  local m, s = moments(t)
  close(m, 0, 6 * sigma / math.sqrt(n), what .. " mean")
  close(s, sigma, 6 * sigma * math.sqrt(0.8 / (4 * n)), what .. " std")
end

local function check_normal(t, mean, sigma, what)
  local n = t:numel()
  local m, s = moments(t)
  close(m, mean, 6 * sigma / math.sqrt(n), what .. " mean")
  close(s, sigma, 6 * sigma * math.sqrt(2 / (4 * n)), what .. " std")
end

describe("nn.init", function()
  it("is reachable as require('ember.nn').init, and is not the package's own init.lua", function()
    assert.are.equal("function", type(require("ember.nn").init.xavier_uniform_))
    assert.are.equal(require "ember.nn.weight_init", nn.init)
    for _, name in ipairs { "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
      "trunc_normal_", "zeros_", "ones_", "constant_", "normal_", "uniform_", "calculate_gain", "calculate_fans" } do
      assert.are.equal("function", type(init[name]), name)
    end
    assert.is_nil(init.Linear) -- a table of functions, not the module package
  end)

  it("calculate_gain is PyTorch's", function()
    for _, g in ipairs(fixtures.gains) do
      local got = init.calculate_gain(g.nonlinearity, g.param or nil)
      close(got, g.gain, 1e-15, g.nonlinearity .. " " .. tostring(g.param))
    end
  end)

  it("calculate_fans is PyTorch's _calculate_fan_in_and_fan_out", function()
    for _, s in ipairs(fixtures.shapes) do
      local fi, fo = init.calculate_fans(ember.empty(s.shape))
      assert.are.same({ s.fan_in, s.fan_out }, { fi, fo }, table.concat(s.shape, "x"))
    end
  end)

  it("each initialiser draws with PyTorch's bound or std (same seed, same draws)", function()
    local function same(a, b, what)
      local e = (a - b):abs():max():item() / b:abs():max():item()
      assert(e <= 1e-13, ("%s: relative difference %.3g"):format(what, e))
    end
    for _, s in ipairs(fixtures.shapes) do
      local sh = table.concat(s.shape, "x")
      local a, b = ember.empty(s.shape, F64), ember.empty(s.shape, F64)
      ember.manual_seed(11); init.xavier_uniform_(a)
      ember.manual_seed(11); b:uniform_(-s.xavier_uniform_bound, s.xavier_uniform_bound)
      same(a, b, "xavier_uniform_ " .. sh)
      ember.manual_seed(12); init.xavier_normal_(a)
      ember.manual_seed(12); b:normal_(0, s.xavier_normal_std)
      same(a, b, "xavier_normal_ " .. sh)
      local bound = s["kaiming_uniform_a0.1_fan_in_bound"]
      ember.manual_seed(13); init.kaiming_uniform_(a, 0.1)
      ember.manual_seed(13); b:uniform_(-bound, bound)
      same(a, b, "kaiming_uniform_ " .. sh)
      ember.manual_seed(13); init.kaiming_uniform_(a, { a = 0.1, mode = "fan_in" })
      same(a, b, "kaiming_uniform_ (table options) " .. sh)
      local std = s.kaiming_normal_relu_fan_out_std
      ember.manual_seed(14); init.kaiming_normal_(a, 0, "fan_out", "relu")
      ember.manual_seed(14); b:normal_(0, std)
      same(a, b, "kaiming_normal_ " .. sh)
      ember.manual_seed(14); init.kaiming_normal_(a, { mode = "fan_out", nonlinearity = "relu" })
      same(a, b, "kaiming_normal_ (table options) " .. sh)
    end
  end)

  it("uniform initialisers: inside the bound, reaching it, mean 0 and std b/sqrt(3)", function()
    local t = ember.empty({ 400, 500 }, F64)
    ember.manual_seed(21)
    init.xavier_uniform_(t, 1.5)
    check_uniform(t, 1.5 * math.sqrt(6 / 900), "xavier_uniform_(gain 1.5)")
    init.kaiming_uniform_(t) -- a = 0, leaky_relu: gain sqrt(2 / (1 + 0)), fan_in = 500
    check_uniform(t, math.sqrt(2) * math.sqrt(3 / 500), "kaiming_uniform_")
    init.kaiming_uniform_(t, 0, "fan_out", "tanh")
    check_uniform(t, 5 / 3 * math.sqrt(3 / 400), "kaiming_uniform_ fan_out tanh")
    init.uniform_(t, -0.3, 0.3)
    check_uniform(t, 0.3, "uniform_")
    init.uniform_(t)
    assert(t:min():item() >= 0 and t:max():item() < 1)
    close(t:mean():item(), 0.5, 6 * math.sqrt(1 / 12 / N), "uniform_() mean")
  end)

  it("normal initialisers: mean and std", function()
    local t = ember.empty({ 400, 500 }, F64)
    ember.manual_seed(22)
    init.xavier_normal_(t)
    check_normal(t, 0, math.sqrt(2 / 900), "xavier_normal_")
    init.kaiming_normal_(t, 0.2, "fan_in", "leaky_relu")
    check_normal(t, 0, math.sqrt(2 / (1 + 0.04)) / math.sqrt(500), "kaiming_normal_")
    init.normal_(t, 0.7, 0.05)
    check_normal(t, 0.7, 0.05, "normal_")
  end)

  it("trunc_normal_: inside [a, b], with the truncated normal's mean and std", function()
    local t = ember.empty({ 400, 500 }, F64)
    ember.manual_seed(23)
    for _, c in ipairs(fixtures.trunc_normal) do
      local what = ("trunc_normal_(%g, %g, %g, %g)"):format(c.mean, c.std, c.a, c.b)
      init.trunc_normal_(t, c.mean, c.std, c.a, c.b)
      assert(t:min():item() >= c.a and t:max():item() <= c.b, what .. ": a value outside [a, b]")
      local m, s = moments(t)
      close(m, c.t_mean, 6 * c.t_std / math.sqrt(N), what .. " mean")
      close(s, c.t_std, 6 * c.t_std * math.sqrt((c.t_kurtosis - 1) / (4 * N)), what .. " std")
    end
    -- defaults: N(0, 1) in [-2, 2]
    init.trunc_normal_(t)
    assert(t:min():item() >= -2 and t:max():item() <= 2)
    close(select(2, moments(t)), fixtures.trunc_normal[1].t_std, 0.01, "trunc_normal_() std")
    -- float32 and bfloat16 tensors stay inside too
    for _, dt in ipairs { "float32", "bfloat16" } do
      local u = init.trunc_normal_(ember.empty({ 1000 }, { dtype = dt }), 0, 1, -1, 1)
      assert(u:float():abs():max():item() <= 1, dt)
    end
  end)

  it("draws from the seeded generator: the same seed gives the same weights", function()
    for _, name in ipairs { "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
      "trunc_normal_", "normal_", "uniform_" } do
      local a, b = ember.empty(8, 6), ember.empty(8, 6)
      ember.manual_seed(5); init[name](a)
      ember.manual_seed(5); init[name](b)
      assert.are.equal(0, (a - b):abs():max():item(), name)
      ember.manual_seed(6); init[name](b)
      assert.is_true((a - b):abs():max():item() > 0, name .. " with another seed")
    end
  end)

  it("fills parameters in place without recording a graph; constants", function()
    local lin = nn.Linear(4, 3)
    local w = lin.weight
    assert.are.equal(w, init.xavier_uniform_(lin.weight))
    assert.are.equal(w, lin.weight)
    assert.is_true(lin.weight.requires_grad)
    assert.is_nil(lin.weight.grad_fn)
    init.zeros_(lin.bias)
    assert.are.equal(0, lin.bias:abs():max():item())
    init.ones_(lin.bias)
    assert.are.same({ 1, 1, 1 }, lin.bias:totable())
    init.constant_(lin.bias, 0.25)
    assert.are.same({ 0.25, 0.25, 0.25 }, lin.bias:totable())
    -- the layer still trains
    lin(ember.randn(2, 4)):sum():backward()
    assert.is_not_nil(lin.weight.grad)
    -- bfloat16 weights
    local h = init.kaiming_normal_(ember.empty({ 16, 8 }, { dtype = "bfloat16" }))
    assert.are.equal("bfloat16", h.dtype)
  end)

  it("errors name the function at the caller's line", function()
    raises_here(function() init.xavier_uniform_(ember.empty(5)) end,
      "nn.init.xavier_uniform_: fan in and fan out need a tensor of at least 2 dims, got shape [5]")
    raises_here(function() init.kaiming_normal_(ember.empty(3, 4), 0, "fan_sum") end,
      'nn.init.kaiming_normal_: mode must be "fan_in" or "fan_out", got fan_sum')
    raises_here(function() init.kaiming_uniform_(ember.empty(3, 4), { nonlinearity = "swish" }) end,
      "nn.init.kaiming_uniform_: unsupported nonlinearity swish")
    raises_here(function() init.kaiming_uniform_(ember.empty(3, 4), { mdoe = "fan_out" }) end,
      "nn.init.kaiming_uniform_: unknown option 'mdoe'")
    raises_here(function() init.calculate_gain("swish") end, "nn.init.calculate_gain: unsupported nonlinearity swish")
    raises_here(function() init.calculate_gain("leaky_relu", "x") end, "nn.init.calculate_gain: negative_slope x")
    raises_here(function() init.normal_(ember.empty({ 3 }, { dtype = "int64" })) end,
      "nn.init.normal_: needs a floating-point tensor, got int64")
    raises_here(function() init.uniform_(ember.empty(3), 1, 0) end, "nn.init.uniform_: a must be <= b")
    raises_here(function() init.trunc_normal_(ember.empty(3), 0, 1, 2, 1) end, "nn.init.trunc_normal_: a must be < b")
    raises_here(function() init.trunc_normal_(ember.empty(3), 0, 1, 30, 31) end,
      "nn.init.trunc_normal_: [a, b] = [30, 31] holds too little")
    raises_here(function() init.constant_(ember.empty(3), "x") end, "nn.init.constant_: val must be a number")
    raises_here(function() init.zeros_("w") end, "nn.init.zeros_: expected a tensor, got string")
  end)
end)
