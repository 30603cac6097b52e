-- helper-96's probe: gaps earlier sessions noted, each as PyTorch 1.13 has it:
-- the ternary ops' errors naming the op (where, addcmul, addcdiv, lerp,
-- clamp with tensor bounds), Module:state_dict's destination/prefix/keep_vars,
-- ReduceLROnPlateau's state_dict with its settings, rsample for Gamma and
-- the distributions drawn from it (the implicit gradient of
-- torch._standard_gamma_grad, from tests/fixtures/helper96.lua:
-- tests/gen_helper96_fixtures.py), ember.full's dtype forms, and an
-- all_reduce of different sizes on 2 ranks (mpirun, skipped without it).
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local D = require "ember.distributions"
local parity = require "tests.lua.helpers.parity"
local tmpdir = require "tests.lua.helpers.tmpdir"
local fx = dofile("tests/fixtures/helper96.lua")
local T = function(spec) return parity.T(spec, "float64") end
local raises_here = parity.raises_here
local f64 = { dtype = "float64" }

describe("the ternary ops name themselves in their errors, at the user's line", function()
  local t = ember.randn(3)
  it("where: a bad condition or operand", function()
    raises_here(function() local _ = ember.where(t:gt(0), "x", ember.randn(3)) end,
      "ember.where: argument 2 (input) must be a tensor or a number, got string")
    raises_here(function() local _ = ember.where(t:gt(0), ember.randn(3), nil) end,
      "ember.where: argument 3 (other) must be a tensor or a number, got nil")
    raises_here(function() local _ = ember.where("x", t, t) end,
      "ember.where: the condition (argument 1) must be a bool tensor, got string")
    raises_here(function() local _ = ember.where(t:gt(0), t, ember.randn(4)) end, "ember.where: shapes [3] and [4]")
    -- numbers and booleans still work
    assert.are.same({ 1, 0 }, ember.where(ember.tensor { true, false }, 1, 0):totable())
  end)
  it("addcmul, addcdiv, lerp, clamp: shapes that do not broadcast name the op, not the op inside", function()
    raises_here(function() local _ = ember.addcmul(t, ember.randn(4), ember.randn(3)) end,
      "ember.addcmul: tensor1 [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = t:addcdiv(ember.randn(3), ember.randn(2, 5)) end,
      "ember.addcdiv: tensor2 [2, 5] does not broadcast to the others (size 5 vs 3)")
    raises_here(function() local _ = ember.lerp(t, ember.randn(4), 0.5) end,
      "ember.lerp: end [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = ember.lerp(t, ember.randn(3), ember.randn(4)) end,
      "ember.lerp: weight [4] does not broadcast to the others (size 4 vs 3)")
    raises_here(function() local _ = t:clamp(ember.randn(3), ember.randn(5)) end,
      "ember.clamp: max [5] does not broadcast to the others (size 5 vs 3)")
    raises_here(function() local _ = ember.tensor({ 1, 2, 3 }, "int64"):clamp(ember.tensor { 1, 2 }) end,
      "ember.clamp: min [2] does not broadcast to the others (size 2 vs 3)")
    raises_here(function() local _ = t:clone():addcmul_(ember.randn(4), ember.randn(3)) end, "ember.addcmul: tensor1 [4]")
    -- broadcasting operands still work
    local w = ember.full({ 2, 1 }, 0.25)
    assert(ember.allclose(ember.lerp(ember.zeros(2, 3), ember.ones(3), w), ember.full({ 2, 3 }, 0.25)))
    assert(ember.addcmul(ember.zeros(3), ember.ones(2, 1), ember.ones(3)).shape == ember.Size { 2, 3 })
  end)
end)

describe("Module:state_dict(destination, prefix, keep_vars), as torch's", function()
  local m = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3))
  local function keys(sd)
    local out = {}
    for k in pairs(sd) do out[#out + 1] = k end
    return out
  end
  it("puts the prefix in front of every name, in registration order", function()
    assert.are.same({ "enc.1.weight", "enc.1.bias", "enc.2.weight", "enc.2.bias" }, keys(m:state_dict(nil, "enc.")))
    assert.are.same({ "x.1.weight", "x.1.bias", "x.2.weight", "x.2.bias" }, keys(m:state_dict { prefix = "x." }))
    assert.is_false(m:state_dict(nil, "enc.")["enc.1.weight"].requires_grad)
  end)
  it("fills and returns the destination; keep_vars keeps the parameters themselves", function()
    local dest = { ["other.w"] = ember.zeros(1) }
    local r = m:state_dict(dest, "a.", true)
    assert.are.equal(dest, r)
    assert.are.same({ "other.w", "a.1.weight", "a.1.bias", "a.2.weight", "a.2.bias" }, keys(r))
    assert.are.equal(m:parameters()[1], r["a.1.weight"])
    assert.is_true(r["a.1.weight"].requires_grad)
  end)
  it("checks its arguments", function()
    raises_here(function() m:state_dict(nil, 3) end, "Sequential.state_dict: prefix must be a string, got number")
    raises_here(function() m:state_dict(nil, "", "yes") end, "Sequential.state_dict: keep_vars must be a boolean")
    raises_here(function() m:state_dict(5) end, "Sequential.state_dict: destination must be a table or nil, got number")
  end)
  it("a prefixed state dict loads into the prefixed model; strict reports missing and unexpected names", function()
    local outer = nn.Sequential(nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3)))
    outer:load_state_dict(m:state_dict(nil, "1."))
    assert(ember.equal(outer[1][1].weight, m[1].weight))
    local l = nn.Linear(2, 3)
    local sd = l:state_dict()
    sd.foo, sd.bias = ember.zeros(1), nil
    raises_here(function() l:load_state_dict(sd) end,
      "Linear.load_state_dict: names do not match the module: missing bias; unexpected foo")
    local _, missing, unexpected = l:load_state_dict(sd, false)
    assert.are.same({ "bias" }, missing)
    assert.are.same({ "foo" }, unexpected)
  end)
end)

describe("ReduceLROnPlateau's state_dict holds its settings, as torch's", function()
  local P = fx.plateau
  local OPTS = { mode = "max", factor = 0.5, patience = 1, threshold = 0.1, threshold_mode = "abs", cooldown = 1,
    min_lr = 0.01, eps = 1e-12 }
  local function make(opts)
    local opt = optim.SGD(nn.Linear(2, 2), { lr = 0.1 })
    return opt, optim.ReduceLROnPlateau(opt, opts)
  end
  it("follows torch's lrs", function()
    local opt, s = make(OPTS)
    for i, m in ipairs(P.metrics) do
      s:step(m)
      assert(math.abs(opt.param_groups[1].lr - P.lrs[i]) < 1e-15, "step " .. i)
    end
  end)
  it("saves every field of torch's (mode_worse follows from mode)", function()
    local _, s = make(OPTS)
    s:step(1.0)
    local sd = s:state_dict()
    for _, k in ipairs(P.state_keys) do
      if k ~= "mode_worse" then assert(sd[k] ~= nil, "state_dict lacks " .. k) end
    end
    assert.are.equal("max", sd.mode)
    assert.are.equal("abs", sd.threshold_mode)
    assert.are.same({ 0.01 }, sd.min_lrs)
  end)
  it("a scheduler made with the defaults and loaded behaves as the saved one, through a file too", function()
    local opt1, s1 = make(OPTS)
    for i = 1, 4 do s1:step(P.metrics[i]) end
    local path = tmpdir() .. "/plateau.bin"
    ember.save(s1:state_dict(), path)
    local opt2, s2 = make()
    s2:load_state_dict(ember.load(path))
    assert.are.equal("max", s2.mode)
    assert.are.equal(0.5, s2.factor)
    for i = 5, #P.metrics do
      s1:step(P.metrics[i])
      s2:step(P.metrics[i])
      assert.are.equal(opt1.param_groups[1].lr, opt2.param_groups[1].lr)
      assert(math.abs(opt2.param_groups[1].lr - P.lrs[i]) < 1e-15, "step " .. i)
    end
  end)
  it("loading checks the settings", function()
    local _, s = make()
    local sd = s:state_dict()
    sd.mode = "maximum"
    raises_here(function() s:load_state_dict(sd) end, "mode must be \"min\" or \"max\", got maximum")
  end)
end)

-- P(a, x), the regularized lower incomplete gamma function, by its series
-- x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n)) (float64)
local function lgamma(a) return ember.tensor(a, f64):lgamma():item() end
local function gammainc(a, x)
  local term, sum = 1, 1
  for n = 1, 2000 do
    term = term * x / (a + n)
    sum = sum + term
    if term < sum * 1e-17 then break end
  end
  return math.exp(a * math.log(x) - x - lgamma(a + 1)) * sum
end

describe("rsample of Gamma and the distributions drawn from it", function()
  local G = fx.gamma_grad
  it("the implicit gradient dx/da matches torch._standard_gamma_grad on every branch", function()
    local got = D.Gamma._standard_grad(T(G.x), T(G.alpha))
    parity.check("standard_gamma_grad", got, T(G.grad), 1e-10)
  end)
  it("and is -(dP/da) / (dP/dx) by finite differences of the CDF (torch's approximations' error)", function()
    for _, ax in ipairs { { 0.5, 0.3 }, { 2.0, 1.5 }, { 3.0, 4.0 }, { 12.0, 11.0 }, { 20.0, 40.0 }, { 5.0, 0.5 } } do
      local a, x, h = ax[1], ax[2], 1e-5
      local pdf = math.exp((a - 1) * math.log(x) - x - lgamma(a))
      local want = -(gammainc(a + h, x) - gammainc(a - h, x)) / (2 * h) / pdf
      local got = D.Gamma._standard_grad(ember.tensor(x, f64), ember.tensor(a, f64)):item()
      assert(math.abs(got - want) < 2e-3 * math.abs(want), ("a=%g x=%g: %g vs %g"):format(a, x, got, want))
    end
  end)
  it("a draw's gradient is the implicit one at that draw, over the rate; the rate's is -x / rate", function()
    local a = ember.tensor({ 0.4, 2.0, 9.0 }, f64):requires_grad_()
    local r = ember.tensor({ 1.0, 3.0, 0.5 }, f64):requires_grad_()
    ember.manual_seed(7)
    local d = D.Gamma(a, r)
    assert.is_true(d.has_rsample)
    local x = d:rsample()
    x:sum():backward()
    local z = x:detach() * r:detach()
    parity.check("d x / d a", a.grad, D.Gamma._standard_grad(z, a:detach()) / r:detach(), 1e-12)
    parity.check("d x / d rate", r.grad, -x:detach() / r:detach(), 1e-12)
    -- sample() is still the plain draw: its values, no gradient
    assert.is_false(d:sample({ 2 }).requires_grad)
  end)
  it("the gradients of the means match their closed forms (Gamma, Chi2, Beta, Dirichlet, StudentT, F)", function()
    local N = 40000
    local function grad_of(param, fn)
      ember.manual_seed(11)
      fn():backward()
      return param.grad
    end
    local function near(what, got, want, tol)
      assert(math.abs(got - want) < tol, ("%s: %g, expected %g"):format(what, got, want))
    end
    local a = ember.tensor(2.0, f64):requires_grad_()
    near("Gamma d mean / d a", grad_of(a, function() return D.Gamma(a, 3.0):rsample({ N }):mean() end):item(), 1 / 3, 0.01)
    local k = ember.tensor(3.0, f64):requires_grad_()
    near("Chi2 d mean / d df", grad_of(k, function() return D.Chi2(k):rsample({ N }):mean() end):item(), 1, 0.02)
    local b1, b0 = ember.tensor(2.0, f64):requires_grad_(), ember.tensor(3.0, f64):requires_grad_()
    ember.manual_seed(11)
    D.Beta(b1, b0):rsample({ N }):mean():backward()
    near("Beta d mean / d a", b1.grad:item(), 3 / 25, 0.005)
    near("Beta d mean / d b", b0.grad:item(), -2 / 25, 0.005)
    local c = ember.tensor({ 1.0, 2.0, 3.0 }, f64):requires_grad_()
    ember.manual_seed(11)
    local x = D.Dirichlet(c):rsample({ N })
    assert(ember.allclose(x:sum(-1), ember.ones(N, f64)))
    x:mean(1)[1]:backward()
    near("Dirichlet d mean1 / d c1", c.grad[1]:item(), 5 / 36, 0.005)
    near("Dirichlet d mean1 / d c2", c.grad[2]:item(), -1 / 36, 0.005)
    local df = ember.tensor(5.0, f64):requires_grad_()
    ember.manual_seed(11)
    local s = D.StudentT(df, 0.0, 1.0):rsample({ N })
    ;(s * s):mean():backward() -- E[s^2] = df / (df - 2)
    near("StudentT d var / d df", df.grad:item(), -2 / 9, 0.03)
    local d1, d2 = ember.tensor(4.0, f64):requires_grad_(), ember.tensor(8.0, f64):requires_grad_()
    ember.manual_seed(11)
    D.FisherSnedecor(d1, d2):rsample({ N }):mean():backward() -- mean d2 / (d2 - 2)
    near("F d mean / d df1", d1.grad:item(), 0, 0.01)
    near("F d mean / d df2", d2.grad:item(), -2 / 36, 0.01)
  end)
  it("float32 draws keep their dtype and shape", function()
    local a = ember.tensor({ 2.0, 0.5 }):requires_grad_()
    local x = D.Beta(a, 1.0):rsample({ 3 })
    assert.are.equal("float32", x.dtype)
    assert(x.shape == ember.Size { 3, 2 })
    x:sum():backward()
    assert.are.equal("float32", a.grad.dtype)
  end)
end)

describe("ember.full's dtype: float32 by design (Torch7's), int64 by name", function()
  it("infers float32 from numbers, bool from booleans, and takes the dtype by name or in options", function()
    assert.are.equal("float32", ember.full({ 2 }, 3).dtype)
    assert.are.equal("bool", ember.full({ 2 }, true).dtype)
    assert.are.equal("int64", ember.full({ 2 }, 3, "int64").dtype)
    assert.are.same({ 3, 3 }, ember.full({ 2 }, 3, { dtype = "int64" }):totable())
    assert.are.equal("float64", ember.full({ 2 }, 3, { dtype = "float64" }).dtype)
  end)
  it("an argument after the options is an error, not a dtype silently dropped", function()
    raises_here(function() local _ = ember.full({ 2 }, 3, nil, { dtype = "int64" }) end,
      "ember.full: takes (shape, value [, opts]), got a table as argument 4")
  end)
end)

describe("all_reduce of tensors that differ in size across ranks (mpirun -np 2)", function()
  local BUILD = os.getenv("EMBER_BUILD_DIR") or "build"
  local function mpi_ready()
    local f = io.open(BUILD .. "/lua/ember/distributed_mpi.so", "r")
    if f then f:close() end
    return f ~= nil and os.execute("command -v mpirun >/dev/null 2>&1") == true
  end
  it("is an error on both ranks naming the sizes, for doubling and halving", function()
    if not mpi_ready() then
      pending("no mpirun or no MPI module")
      return
    end
    local dir = tmpdir()
    local script = dir .. "/mismatch.lua"
    local f = assert(io.open(script, "w"))
    f:write([[
local dist = require "ember.distributed"
dist.init()
local r = dist.rank()
local n = tonumber(arg[1])
local t = ember.ones(r == 0 and n or n + 2)
local ok, err = pcall(dist.all_reduce, t)
print(("RESULT rank=%d ok=%s %s"):format(r, tostring(ok), tostring(err)))
]])
    f:close()
    for _, n in ipairs { 4, 100000 } do
      local p = assert(io.popen(("EMBER_DIST_TIMEOUT=60 bash tests/distributed/run_mpi.sh %s/bin/ember 2 %s %d 2>&1")
        :format(BUILD, script, n)))
      local out = p:read("a")
      p:close()
      assert(out:find("RESULT rank=0 ok=false [^\n]*all_reduce: the tensors differ in size across ranks: this rank's has "
        .. n .. " elements and rank 1 sent more than that"), out)
      assert(out:find("RESULT rank=1 ok=false [^\n]*all_reduce: the tensors differ in size across ranks: this rank's has "
        .. (n + 2) .. " elements and rank 0 sent a message of"), out)
    end
  end)
end)
