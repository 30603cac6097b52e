-- nn.utils.parametrize, nn.utils.parametrizations (weight_norm, spectral_norm) and the
-- hook-based nn.utils.weight_norm / spectral_norm, against PyTorch 1.13
-- (tests/gen_parametrize.py writes tests/fixtures/parametrize.lua): for Linear and Conv2d in
-- float64, torch's state dict loads under torch's names, then 3 SGD steps in training mode give
-- torch's outputs, the gradients of the originals and the state after (spectral norm's u and v
-- iterated as torch's), eval mode torch's output and weight, and the state dict once the
-- reparametrization is removed; the custom symmetric
-- parametrization too. Then: float64 gradchecks through each parametrization, right_inverse and
-- assignment, chaining, buffers, unsafe, cached(), removal, the class swap and printing, and the
-- errors at the caller's line.
local ember = require "ember"
local nn = ember.nn
local optim = ember.optim
local parity = require "tests.lua.helpers.parity"
local gradcheck = require "tests.lua.helpers.gradcheck"
local T, check, raises_here = parity.T, parity.check, parity.raises_here
local fx = dofile("tests/fixtures/parametrize.lua")
local P, PZ = nn.utils.parametrize, nn.utils.parametrizations

local Symmetric = nn.Module:extend("Symmetric")
function Symmetric:forward(X) return X:triu() + X:triu(1):t() end

local function fresh(kind)
  if kind == "linear" then return nn.Linear(4, 3):double() end
  if kind == "linear3" then return nn.Linear(3, 3):double() end
  return nn.Conv2d(2, 3, 3):double()
end

local dims = { dim1 = 1, none = false, dim2 = 2 }

-- the ember module of a fixture case, reparametrized as torch's was
local function build(c)
  local m = fresh(c.kind)
  local o = c.opts
  if c.name:match("^weight_norm") then
    nn.utils.weight_norm(m, "weight", dims[o.dim])
  elseif c.name:match("^pweight_norm") then
    PZ.weight_norm(m, { dim = dims[o.dim] })
  elseif c.name:match("^spectral_norm") then
    PZ.spectral_norm(m, { n_power_iterations = o.n_power_iterations, dim = o.dim })
  elseif c.name:match("^hspectral_norm") then
    nn.utils.spectral_norm(m, { n_power_iterations = o.n_power_iterations, dim = o.dim })
  elseif c.name == "symmetric" then
    P.register_parametrization(m, "weight", Symmetric())
  end
  return m
end

local function names(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

local function load_fixture_state(sd)
  local out = {}
  for k, v in pairs(sd) do out[k] = T(v) end
  return out
end

-- a case run as the generator ran it
local function replay(c, m)
  m:load_state_dict(load_fixture_state(c.state0))
  local x, R = T(c.x), T(c.R)
  local opt = optim.SGD(m:parameters(), { lr = 0.1 })
  for i, step in ipairs(c.steps) do
    opt:zero_grad()
    local out = m(x)
    check(c.name .. " step " .. i .. " out", out, T(step.out), 1e-12)
    ;(out * R):sum():backward()
    local params = m:named_parameters()
    assert.are.same(names(step.grads), names(params), c.name .. " parameter names")
    for k, g in pairs(step.grads) do check(c.name .. " step " .. i .. " grad " .. k, params[k].grad, T(g), 1e-12) end
    opt:step()
  end
  local sd = m:state_dict()
  assert.are.same(names(c.state), names(sd), c.name .. " state dict names")
  for k, v in pairs(c.state) do check(c.name .. " state " .. k, sd[k], T(v), 1e-12) end
  m:eval()
  check(c.name .. " eval out", m(x), T(c.eval_out), 1e-12)
  check(c.name .. " eval weight", m.weight, T(c.eval_weight), 1e-12)
  if P.is_parametrized(m) then
    P.remove_parametrizations(m, "weight")
  elseif m._reg.weight_g then
    nn.utils.remove_weight_norm(m)
  else
    nn.utils.remove_spectral_norm(m)
  end
  sd = m:state_dict()
  assert.are.same(names(c.removed), names(sd), c.name .. " names after removal")
  for k, v in pairs(c.removed) do check(c.name .. " removed " .. k, sd[k], T(v), 1e-12) end
end

describe("nn.utils reparametrizations against torch 1.13", function()
  for _, c in ipairs(fx.cases) do
    it(c.name .. ": state dict names, 3 SGD steps, eval, removal", function()
      local m = build(c)
      assert.are.same(names(c.state0), names(m:state_dict()), c.name .. " names before loading")
      replay(c, m)
    end)
  end

  it("a hook-based weight_norm checkpoint (weight_g, weight_v) loads into parametrizations.weight_norm", function()
    local c = parity.case(fx, "weight_norm_conv_dim1")
    local m = PZ.weight_norm(fresh("conv"))
    m:load_state_dict(load_fixture_state(c.state0))
    check("out", m(T(c.x)), T(c.steps[1].out), 1e-12)
  end)

  it("torch_state_dict keeps torch's names, and a parametrized module inside a Sequential", function()
    local net = nn.Sequential(PZ.spectral_norm(nn.Linear(4, 3)), nn.ReLU())
    assert.are.same({ "0.bias", "0.parametrizations.weight.0._u", "0.parametrizations.weight.0._v",
      "0.parametrizations.weight.original" }, names(net:torch_state_dict()))
    local net2 = nn.Sequential(PZ.spectral_norm(nn.Linear(4, 3)), nn.ReLU())
    net2:load_state_dict(net:torch_state_dict())
    net:eval(); net2:eval()
    local x = ember.randn(2, 4)
    assert.is_true(ember.equal(net(x), net2(x)))
  end)
end)

describe("nn.utils.parametrize", function()
  it("gradchecks through each parametrization in float64", function()
    local x = ember.randn(5, 4, { dtype = "float64" })
    local xc = ember.randn(2, 2, 5, 5, { dtype = "float64" })
    local function through(m, names_, input)
      local ps = {}
      for i, n in ipairs(names_) do ps[i] = m:named_parameters()[n] end
      -- the module's own originals are the inputs (gradcheck perturbs them in place)
      gradcheck.check(function() return m(input) end, ps, { name = m.__name })
    end
    local a = PZ.weight_norm(nn.Linear(4, 3):double())
    through(a, { "parametrizations.weight.original0", "parametrizations.weight.original1", "bias" }, x)
    local b = PZ.weight_norm(nn.Conv2d(2, 3, 3):double(), { dim = false })
    through(b, { "parametrizations.weight.original0", "parametrizations.weight.original1" }, xc)
    local s = PZ.spectral_norm(nn.Linear(4, 3):double()):eval() -- eval: u, v fixed, W / sigma(W) smooth
    through(s, { "parametrizations.weight.original" }, x)
    local sc = PZ.spectral_norm(nn.Conv2d(2, 3, 3):double(), { dim = 2 }):eval()
    through(sc, { "parametrizations.weight.original" }, xc)
    local y = P.register_parametrization(nn.Linear(3, 3):double(), "weight", Symmetric())
    through(y, { "parametrizations.weight.original" }, ember.randn(4, 3, { dtype = "float64" }))
    local h = nn.utils.weight_norm(nn.Linear(4, 3):double())
    through(h, { "weight_g", "weight_v" }, x)
    local hs = nn.utils.spectral_norm(nn.Linear(4, 3):double()):eval()
    through(hs, { "weight_orig" }, x)
  end)

  it("gives gradients to the original only, recomputing the weight on each read", function()
    local m = P.register_parametrization(nn.Linear(3, 3):double(), "weight", Symmetric())
    local orig = m.parametrizations.weight.original
    assert.is_true(ember.equal(m.weight, orig:triu() + orig:triu(1):t()))
    assert.is_nil(m:named_parameters().weight)
    assert.is_false(rawequal(m.weight, m.weight))
    m(ember.randn(2, 3, { dtype = "float64" })):sum():backward()
    assert.is_not_nil(orig.grad)
    assert.are.equal(0, orig.grad:tril(-1):abs():sum():item()) -- the lower triangle is not read
  end)

  it("right_inverse: at registration, and when the weight is assigned", function()
    local Pos = nn.Module:extend("Pos")
    function Pos:forward(X) return X:exp() end
    function Pos:right_inverse(Y) return Y:log() end
    local m = nn.Linear(2, 2):double()
    local w = m.weight
    ember.no_grad(function() w:fill_(2) end)
    P.register_parametrization(m, "weight", Pos())
    assert.is_true(rawequal(w, m.parametrizations.weight.original)) -- the same tensor object
    check("original", w, ember.full({ 2, 2 }, math.log(2), { dtype = "float64" }), 1e-15)
    m.weight = ember.full({ 2, 2 }, 3, { dtype = "float64" })
    check("assigned", m.weight, ember.full({ 2, 2 }, 3, { dtype = "float64" }), 1e-15)
    check("original after", w, ember.full({ 2, 2 }, math.log(3), { dtype = "float64" }), 1e-15)
    -- Symmetric has no right_inverse: registration keeps X, assignment is refused
    local s = P.register_parametrization(nn.Linear(2, 2), "weight", Symmetric())
    raises_here(function() s.weight = ember.zeros(2, 2) end, "Symmetric has no right_inverse")
  end)

  it("chains several parametrizations on one tensor", function()
    local Double = nn.Module:extend("Double")
    function Double:forward(X) return X * 2 end
    function Double:right_inverse(Y) return Y / 2 end
    local m = nn.Linear(3, 3):double()
    P.register_parametrization(m, "weight", Symmetric())
    P.register_parametrization(m, "weight", Double())
    local o = m.parametrizations.weight.original
    check("chain", m.weight, (o:triu() + o:triu(1):t()) * 2, 1e-15)
    assert.are.equal(2, #m.parametrizations.weight)
    assert.is_truthy(tostring(m):find("(1): Double()", 1, true))
  end)

  it("a frozen parameter stays frozen, through registration and removal", function()
    local m = nn.Linear(3, 3)
    m.weight:requires_grad_(false)
    P.register_parametrization(m, "weight", Symmetric())
    assert.is_false(m.parametrizations.weight.original.requires_grad)
    assert.is_nil(m:named_buffers()["parametrizations.weight.original"]) -- still a parameter
    P.remove_parametrizations(m, "weight")
    assert.is_false(m.weight.requires_grad)
    assert.are.same({ "bias", "weight" }, m:parameter_names())
  end)

  it("parametrizes a buffer as a buffer", function()
    local m = nn.BatchNorm1d(3):double()
    local Sq = nn.Module:extend("Sq")
    function Sq:forward(X) return X * X end
    P.register_parametrization(m, "running_var", Sq())
    assert.is_not_nil(m:named_buffers()["parametrizations.running_var.original"])
    assert.is_nil(m:named_parameters()["parametrizations.running_var.original"])
    P.remove_parametrizations(m, "running_var")
    assert.is_not_nil(m:named_buffers().running_var)
  end)

  it("unsafe lets the shape change; otherwise it is refused", function()
    local Flat = nn.Module:extend("Flat")
    function Flat:forward(X) return X:reshape(-1) end
    raises_here(function() P.register_parametrization(nn.Linear(2, 3), "weight", Flat()) end,
      "nn.utils.parametrize.register_parametrization: the parametrized tensor has shape [6], the tensor [3, 2]")
    local m = P.register_parametrization(nn.Linear(2, 3), "weight", Flat(), { unsafe = true })
    assert.are.same({ 6 }, m.weight.shape)
  end)

  it("cached(): one weight per scope, as a function or a <close> scope", function()
    local m = PZ.weight_norm(nn.Linear(3, 3))
    local a, b = P.cached(function() return m.weight, m.weight end)
    assert.is_true(rawequal(a, b))
    do
      local scope <close> = P.cached()
      assert.is_true(rawequal(m.weight, m.weight))
      P.cached(function() assert.is_true(rawequal(m.weight, m.weight)) end) -- nested
      assert.is_true(rawequal(m.weight, m.weight)) -- still open
    end
    assert.is_false(rawequal(m.weight, m.weight))
    assert.has_error(function() P.cached(function() error("inner", 0) end) end, "inner")
    assert.is_false(rawequal(m.weight, m.weight)) -- closed after an error too
  end)

  it("remove_parametrizations: leave_parametrized, the class back, the tensor object kept", function()
    local m = nn.Linear(3, 3):double()
    P.register_parametrization(m, "weight", Symmetric())
    local o = m.parametrizations.weight.original
    assert.are.equal("ParametrizedLinear", m.__name)
    assert.is_true(m:isinstance(nn.Linear))
    local want = m.weight:detach():clone()
    P.remove_parametrizations(m, "weight")
    assert.are.equal("Linear", m.__name)
    assert.is_true(rawequal(o, m.weight))
    assert.is_true(ember.equal(m.weight, want))
    assert.is_nil(m._reg.parametrizations)
    assert.are.same({ "bias", "weight" }, names(m:state_dict()))
    local n = P.register_parametrization(nn.Linear(3, 3), "weight", Symmetric())
    local raw = n.parametrizations.weight.original:detach():clone()
    P.remove_parametrizations(n, "weight", { leave_parametrized = false })
    assert.is_true(ember.equal(n.weight, raw))
    local wn = PZ.weight_norm(nn.Linear(3, 2))
    raises_here(function() P.remove_parametrizations(wn, "weight", { leave_parametrized = false }) end,
      "nn.utils.parametrize.remove_parametrizations: a tensor parametrized by several originals")
    local w = wn.weight:detach():clone()
    P.remove_parametrizations(wn, "weight")
    assert.is_true(ember.equal(wn.weight, w))
    assert.is_true(wn.weight.requires_grad)
  end)

  it("two tensors of one module, and to()", function()
    local m = nn.Linear(3, 3)
    P.register_parametrization(m, "weight", Symmetric())
    local Neg = nn.Module:extend("Neg")
    function Neg:forward(X) return -X end
    P.register_parametrization(m, "bias", Neg())
    assert.is_true(P.is_parametrized(m, "bias"))
    m:double()
    assert.are.equal("float64", m.weight.dtype)
    check("bias", m.bias, -m.parametrizations.bias.original, 0)
    P.remove_parametrizations(m, "weight")
    assert.are.equal("ParametrizedLinear", m.__name)
    P.remove_parametrizations(m, "bias")
    assert.are.equal("Linear", m.__name)
    assert.is_false(P.is_parametrized(m))
  end)

  it("spectral_norm: u and v move in training mode only", function()
    local m = PZ.spectral_norm(nn.Linear(4, 3):double())
    local sn = m.parametrizations.weight[1]
    local u = sn._u:clone()
    local _ = m.weight
    assert.is_false(ember.equal(u, sn._u))
    m:eval()
    u = sn._u:clone()
    local w1 = m.weight
    assert.is_true(ember.equal(u, sn._u))
    assert.is_true(ember.equal(w1, m.weight))
  end)

  it("the hook-based ones: weight is a plain field recomputed before each forward; removal", function()
    local m = nn.utils.weight_norm(nn.Linear(4, 3):double(), "weight", false)
    assert.are.same({ "bias", "weight_g", "weight_v" }, names(m:state_dict()))
    assert.are.same({}, m.weight_g.shape)
    ember.no_grad(function() m.weight_g:fill_(2) end)
    m(ember.randn(1, 4, { dtype = "float64" }))
    check("norm", m.weight:norm(), ember.tensor(2, { dtype = "float64" }), 1e-14)
    nn.utils.remove_weight_norm(m)
    assert.are.same({ "bias", "weight" }, names(m:state_dict()))
    check("norm after", m.weight:norm(), ember.tensor(2, { dtype = "float64" }), 1e-14)
    local s = nn.utils.spectral_norm(nn.Conv2d(2, 3, 3))
    assert.are.same({ "bias", "weight_orig", "weight_u", "weight_v" }, names(s:state_dict()))
    nn.utils.remove_spectral_norm(s)
    assert.are.same({ "bias", "weight" }, names(s:state_dict()))
  end)
end)

describe("nn.utils reparametrizations in help()", function()
  it("finds each function's entry under its nn.utils name", function()
    local doc = require "ember._doc"
    for name, f in pairs { ["nn.utils.weight_norm"] = nn.utils.weight_norm,
      ["nn.utils.remove_spectral_norm"] = nn.utils.remove_spectral_norm,
      ["nn.utils.parametrize.register_parametrization"] = P.register_parametrization,
      ["nn.utils.parametrize.cached"] = P.cached,
      ["nn.utils.parametrizations.spectral_norm"] = PZ.spectral_norm } do
      local text, found = doc.lookup(f)
      assert.are.equal(name, found)
      assert.is_truthy(text and text:find("torch.nn.utils", 1, true), name)
    end
  end)
end)

describe("nn.utils reparametrizations: errors at the caller's line", function()
  it("names the function and what was wrong", function()
    raises_here(function() P.register_parametrization(nn.Linear(2, 2), "wieght", Symmetric()) end,
      "nn.utils.parametrize.register_parametrization: Linear has no parameter, buffer or parametrized tensor "
        .. "'wieght' (it is nothing)")
    local seq = nn.Sequential(nn.Linear(2, 2))
    raises_here(function() P.register_parametrization(seq, "1", Symmetric()) end, "'1' (it is a child module)")
    raises_here(function() P.register_parametrization(nn.Linear(2, 2), "weight", function() end) end,
      "register_parametrization: the parametrization must be an nn.Module")
    raises_here(function() P.register_parametrization(nn.Linear(2, 2), "weight", Symmetric(), { unsafe = 1, x = 2 }) end,
      "register_parametrization: unknown option 'x'")
    raises_here(function() P.remove_parametrizations(nn.Linear(2, 2), "weight") end,
      "nn.utils.parametrize.remove_parametrizations: Linear has no parametrization on 'weight'")
    raises_here(function() PZ.weight_norm(nn.Linear(2, 2), { name = "scale" }) end,
      "nn.utils.parametrizations.weight_norm: Linear has no tensor 'scale'")
    raises_here(function() PZ.weight_norm(nn.Linear(2, 2), { dim = 3 }) end,
      "nn.utils.parametrizations.weight_norm: dim must be an integer in [-2, 2]")
    raises_here(function() PZ.spectral_norm(nn.Linear(2, 2), { n_power_iterations = 0 }) end,
      "nn.utils.parametrizations.spectral_norm: n_power_iterations must be positive")
    raises_here(function() nn.utils.weight_norm(nn.Linear(2, 2), "bais") end,
      "nn.utils.weight_norm: Linear has no parameter 'bais'")
    local h = nn.utils.weight_norm(nn.Linear(2, 2))
    raises_here(function() nn.utils.weight_norm(h) end, "nn.utils.weight_norm: Linear's 'weight' has a weight_norm hook")
    raises_here(function() nn.utils.remove_weight_norm(nn.Linear(2, 2)) end,
      "nn.utils.remove_weight_norm: Linear has no weight_norm on 'weight'")
    raises_here(function() nn.utils.remove_spectral_norm(nn.Linear(2, 2)) end,
      "nn.utils.remove_spectral_norm: Linear has no spectral_norm on 'weight'")
    local m = P.register_parametrization(nn.Linear(2, 2), "weight", Symmetric())
    raises_here(function() m.weight = 3 end, "ParametrizedLinear: 'weight' is parametrized; assign a tensor")
    raises_here(function() P.cached(3) end, "nn.utils.parametrize.cached: expected a function or nothing")
  end)
end)
