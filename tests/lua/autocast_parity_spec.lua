-- ember.autocast("bfloat16") against torch.autocast("cpu", dtype=torch.bfloat16)
-- (PyTorch 1.13) where the two differed in what a user sees:
--  * the batch, instance and group norms and the average pools returned
--    float32 for a bfloat16 input (a bf16 conv's output), where torch keeps
--    bfloat16 (its norms compute their statistics in float32: the mixed-dtype
--    batch_norm);
--  * ember.linalg refused bfloat16 under autocast (and lstsq refused its own
--    product's bfloat16 for float32 inputs; matrix_exp returned bfloat16),
--    where torch's CPU fp32 list runs inv, solve, cholesky, qr, svd, eigh,
--    lstsq, ... in float32.
-- Values against tests/fixtures/autocast_parity.lua (tests/gen_autocast_parity_fixtures.py);
-- the inputs are exact in bfloat16, so both sides start from the same numbers.
-- A bfloat16 output may differ from torch's by its rounding: 1 unit (2^-8
-- relative to the largest value) and the statistics' float32 summation order.
--
-- And the errors and forms a torch.autocast user meets: a product given a
-- float64 or int64 operand names the dtypes the user gave (not the cast's
-- bfloat16); ember.autocast takes a module as ember.profile does, and names
-- float16 in any of torch's spellings as unsupported.
local ember = require "ember"
local nn = require "ember.nn"
local F = nn.functional
local parity = require "tests.lua.helpers.parity"
local T, check = parity.T, parity.check
local fx = dofile("tests/fixtures/autocast_parity.lua")
local raises_here = parity.raises_here

local function ac(fn, ...) return ember.autocast("bfloat16", fn, ...) end
local function want(o) return T(o.value) end

describe("ember.autocast: norms and pools keep a bfloat16 input's dtype, as torch's CPU autocast", function()
  local x = T(fx.x):float()

  it("nn.BatchNorm2d in training: torch's output, running statistics and gradients; float32 parameter gradients", function()
    local bn = nn.BatchNorm2d(3)
    ember.no_grad(function()
      bn.weight:copy_(T(fx.weight))
      bn.bias:copy_(T(fx.bias))
    end)
    local xb = x:bfloat16():requires_grad_()
    local y = ac(bn, xb)
    local c = fx.batch_norm_train
    assert.are.equal(c.out.dtype, y.dtype)
    check("BatchNorm2d out", y, want(c.out), 2 ^ -7)
    check("running_mean", bn.running_mean, T(c.running_mean), 1e-6)
    check("running_var", bn.running_var, T(c.running_var), 1e-6)
    assert.are.equal("float32", bn.running_mean.dtype)
    ;(y:float() * T(fx.R):float()):sum():backward()
    assert.are.equal(c.grad_x.dtype, xb.grad.dtype)
    assert.are.equal(c.grad_weight.dtype, bn.weight.grad.dtype)
    assert.are.equal(c.grad_bias.dtype, bn.bias.grad.dtype)
    check("grad x", xb.grad, want(c.grad_x), 2 ^ -6)
    check("grad weight", bn.weight.grad, want(c.grad_weight), 2 ^ -7)
    check("grad bias", bn.bias.grad, want(c.grad_bias), 1e-6)
    -- evaluation: the running statistics, bfloat16 out
    bn:eval()
    local ye = ac(bn, x:bfloat16())
    assert.are.equal(fx.batch_norm_eval.out.dtype, ye.dtype)
    check("BatchNorm2d eval out", ye, want(fx.batch_norm_eval.out), 2 ^ -7)
  end)

  it("instance and group norm, average pools: torch's values in bfloat16", function()
    local inorm = nn.InstanceNorm2d(3, { affine = true })
    ember.no_grad(function()
      inorm.weight:copy_(T(fx.weight))
      inorm.bias:copy_(T(fx.bias))
    end)
    local cases = {
      { "InstanceNorm2d", function(t) return inorm(t) end, fx.instance_norm },
      { "F.group_norm", function(t) return F.group_norm(t, 3) end, fx.group_norm },
      { "F.adaptive_avg_pool2d", function(t) return F.adaptive_avg_pool2d(t, 2) end, fx.adaptive_avg_pool2d },
      { "F.avg_pool2d", function(t) return F.avg_pool2d(t, 2) end, fx.avg_pool2d },
    }
    for _, c in ipairs(cases) do
      local y = ac(c[2], x:bfloat16())
      assert.are.equal(c[3].out.dtype, y.dtype, c[1])
      check(c[1], y, want(c[3].out), 2 ^ -7)
    end
  end)

  it("every form: bfloat16 in, bfloat16 out; float32 in, float32 out (the float32 path as before)", function()
    ember.manual_seed(104)
    local x4, x3, x2 = ember.randn(2, 3, 6, 6), ember.randn(2, 3, 8), ember.randn(4, 3)
    local forms = {
      { "BatchNorm1d [N, C]", nn.BatchNorm1d(3), x2 },
      { "BatchNorm1d [N, C, L]", nn.BatchNorm1d(3), x3 },
      { "BatchNorm2d", nn.BatchNorm2d(3), x4 },
      { "BatchNorm2d eval", nn.BatchNorm2d(3):eval(), x4 },
      { "BatchNorm2d affine=false", nn.BatchNorm2d(3, { affine = false }), x4 },
      { "BatchNorm2d track_running_stats=false", nn.BatchNorm2d(3, { track_running_stats = false }), x4 },
      { "BatchNorm3d", nn.BatchNorm3d(3), x4:unsqueeze(3) },
      { "F.batch_norm", function(t) return F.batch_norm(t, ember.zeros(3), ember.ones(3), ember.ones(3), ember.zeros(3), true) end, x4 },
      { "InstanceNorm1d", nn.InstanceNorm1d(3), x3 },
      { "InstanceNorm2d", nn.InstanceNorm2d(3), x4 },
      { "GroupNorm", nn.GroupNorm(1, 3), x4 },
      { "AvgPool1d", nn.AvgPool1d(2), x3 },
      { "AvgPool2d", nn.AvgPool2d(2), x4 },
      { "AvgPool2d padding, ceil_mode", nn.AvgPool2d(3, 2, 1, true, false), x4 },
      { "AdaptiveAvgPool1d", nn.AdaptiveAvgPool1d(3), x3 },
      { "AdaptiveAvgPool2d(1)", nn.AdaptiveAvgPool2d(1), x4 },
      { "AdaptiveAvgPool2d(4)", nn.AdaptiveAvgPool2d(4), x4 },
      { "interpolate area", function(t) return F.interpolate(t, { size = { 4, 4 }, mode = "area" }) end, x4 },
      { "MaxPool2d", nn.MaxPool2d(2), x4 },
    }
    for _, f in ipairs(forms) do
      local name, m, t = f[1], f[2], f[3]
      local yb = ac(m, t:bfloat16())
      assert.are.equal("bfloat16", yb.dtype, name .. " bfloat16")
      local y32 = ac(m, t)
      assert.are.equal("float32", y32.dtype, name .. " float32")
      -- the bfloat16 result is the float32 one rounded (the inputs are rounded too: 2^-8 each)
      local scale = math.max(y32:abs():max():item(), 1)
      assert((yb:float() - ac(m, t:bfloat16():float())):abs():max():item() <= 2 ^ -7 * scale, name .. " values")
    end
  end)

  it("a conv -> BatchNorm -> ReLU -> pool stack stays bfloat16, parameters get float32 gradients", function()
    ember.manual_seed(4)
    local model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
      nn.Linear(4, 2))
    local x = ember.randn(2, 3, 6, 6)
    local h = ac(function()
      local a = model[1](x)
      local b = model[2](a)
      local c = model[4](model[3](b))
      assert.are.same({ "bfloat16", "bfloat16", "bfloat16" }, { a.dtype, b.dtype, c.dtype })
      return model(x)
    end)
    assert.are.equal("bfloat16", h.dtype)
    h:float():sum():backward()
    for name, p in pairs(model:named_parameters()) do
      assert.are.equal("float32", p.grad.dtype, name)
      assert(p.grad:abs():sum():item() > 0, name .. " has a gradient")
    end
  end)

  it("outside autocast a bfloat16 input beside float32 parameters gives bfloat16 too (torch's mixed batch_norm)", function()
    local y = nn.BatchNorm2d(3)(ember.randn(2, 3, 4, 4):bfloat16())
    assert.are.equal("bfloat16", y.dtype)
    assert.are.equal("float32", nn.BatchNorm2d(3)(ember.randn(2, 3, 4, 4)).dtype)
  end)
end)

describe("ember.autocast: ember.linalg runs in float32, as torch's CPU autocast's fp32 list", function()
  local L = ember.linalg
  local c = fx.linalg
  local A, S, B = T(c.A):float(), T(c.S):float(), T(c.B):float()

  it("bfloat16 inputs: torch's float32 results (inv, solve, cholesky, eigvalsh, lstsq)", function()
    local got = ac(function()
      return {
        inv = L.inv(A:bfloat16()),
        solve = L.solve(A:bfloat16(), B:bfloat16()),
        cholesky = L.cholesky(S:bfloat16()),
        eigvalsh = L.eigvalsh(S:bfloat16()),
        lstsq_bf16 = (L.lstsq(T(c.Atall):bfloat16(), T(c.Btall):bfloat16())),
        lstsq = (L.lstsq(T(c.Atall):float(), T(c.Btall):float())),
      }
    end)
    for k, v in pairs(got) do
      assert.are.equal(c[k].dtype, v.dtype, k)
      check(k, v, want(c[k]), 1e-5)
    end
  end)

  it("every factorization and what is built on it: float32 out for bfloat16 or float32 in, gradients to float32 leaves", function()
    local calls = {
      inv = function(a) return L.inv(a) end,
      inv_ex = function(a) return (L.inv_ex(a)) end,
      det = function(a) return L.det(a) end,
      slogdet = function(a) return select(2, L.slogdet(a)) end,
      solve = function(a) return L.solve(a, B:to(a.dtype)) end,
      solve_ex = function(a) return (L.solve_ex(a, B:to(a.dtype))) end,
      solve_triangular = function(a) return L.solve_triangular(a:tril(), B:to(a.dtype), { upper = false }) end,
      cholesky = function(_, s) return L.cholesky(s) end,
      cholesky_ex = function(_, s) return (L.cholesky_ex(s)) end,
      lu = function(a) return select(2, L.lu(a)) end,
      lu_factor = function(a) return (L.lu_factor(a)) end,
      lu_factor_ex = function(a) return (L.lu_factor_ex(a)) end,
      lu_solve = function(a) local LU, piv = L.lu_factor(a); return L.lu_solve(LU, piv, B:to(a.dtype)) end,
      qr = function(a) return (L.qr(a)) end,
      eigh = function(_, s) return (L.eigh(s)) end,
      svd = function(a) return (L.svd(a)) end,
      svdvals = function(a) return L.svdvals(a) end,
      pinv = function(a) return L.pinv(a) end,
      matrix_exp = function(a) return L.matrix_exp(a / 4) end,
      cond = function(a) return L.cond(a) end,
      ["ember.inverse"] = function(a) return ember.inverse(a) end,
      ["ember.det"] = function(a) return ember.det(a) end,
      ["ember.logdet"] = function(a) return ember.logdet(a) end,
      ["A:det()"] = function(a) return a:det() end,
      ["ember.cholesky_solve"] = function(_, s) return ember.cholesky_solve(B:to(s.dtype), L.cholesky(s)) end,
      ["ember.cholesky_inverse"] = function(_, s) return ember.cholesky_inverse(L.cholesky(s)) end,
      ["ember.pinverse"] = function(a) return ember.pinverse(a) end,
    }
    for name, f in pairs(calls) do
      for _, dt in ipairs { "bfloat16", "float32" } do
        local a, s = A:to(dt):detach():requires_grad_(), S:to(dt):detach():requires_grad_() -- leaves (A:to("float32") is A)
        local y = ac(f, a, s)
        assert.are.equal("float32", y.dtype, name .. " " .. dt)
        -- the values: as outside autocast on the float32 copy (the inputs are exact in bfloat16)
        local ref = f(A, S)
        local e = (y:detach() - ref:detach()):abs():max():item() / math.max(ref:abs():max():item(), 1e-30)
        assert(e < 1e-5, ("%s %s: relative error %.3g"):format(name, dt, e))
        if y.requires_grad then
          y:sum():backward()
          local g = a.grad or s.grad
          assert(g ~= nil, name .. " " .. dt .. " has a gradient")
          assert.are.equal(dt, g.dtype, name .. " " .. dt .. " gradient dtype")
        end
      end
    end
  end)

  it("products stay products: matrix_power and multi_dot run in bfloat16, as torch's matmul", function()
    ac(function()
      assert.are.equal("bfloat16", L.matrix_power(A, 2).dtype)
      assert.are.equal("bfloat16", L.multi_dot({ A, A, A }).dtype)
      assert.are.equal("bfloat16", A:matmul(A).dtype) -- and autocast is on again after a linalg call
      L.inv(A)
      assert.are.equal("bfloat16", A:matmul(A).dtype)
    end)
  end)

  it("keeps autocast's cast cache across a linalg call or a pool (it pauses autocast, not ends its region)", function()
    local function casts(fn) -- the "cast" kernels fn runs
      local n = 0
      for _, r in ipairs(ember.profile(fn):stats()) do
        if r.name == "cast" then n = n + r.calls end
      end
      return n
    end
    local lin, x = nn.Linear(4, 4), ember.randn(2, 4)
    ember.no_grad(function()
      ac(function()
        lin(x) -- the weight and the bias cast and cached
        L.inv(A)
        F.avg_pool2d(ember.randn(1, 1, 4, 4):bfloat16(), 2)
        assert.are.equal(1, casts(function() lin(x) end)) -- only the input
        assert.is_true((ember.autocast.enabled()))
      end)
    end)
  end)

  it("an error inside leaves autocast on in its region and off after it", function()
    ac(function()
      assert.is_false(pcall(L.cholesky, -S:bfloat16()))
      assert.is_true((ember.autocast.enabled()))
    end)
    assert.is_false((ember.autocast.enabled()))
  end)
end)

-- The error of fn, which must fail.
local err_of = parity.must_fail

describe("ember.autocast: a product given a float64 or int64 operand", function()
  -- autocast casts the float32 operand to bfloat16 and leaves the other:
  -- the error named the cast's bfloat16, a dtype the user never had
  local function under_autocast(fn)
    return err_of(function() ember.autocast("bfloat16", fn) end)
  end

  it("names the dtypes the user gave (matmul, bmm, linear, conv2d)", function()
    local cases = {
      {"ember.matmul: dtype mismatch: float64 [2, 4] vs float32 [4, 3]",
       function() return ember.randn(2, 4):double():matmul(ember.randn(4, 3)) end},
      {"ember.matmul: dtype mismatch: int64 [2, 4] vs float32 [4, 3]",
       function() return ember.ones(2, 4, "int64"):matmul(ember.randn(4, 3)) end},
      {"ember.bmm: dtype mismatch: float32 [1, 2, 4] vs float64 [1, 4, 3]",
       function() return ember.bmm(ember.randn(1, 2, 4), ember.randn(1, 4, 3):double()) end},
      {"ember.linear: dtype mismatch: float64 [2, 4] vs float32 [3, 4]",
       function() return nn.functional.linear(ember.randn(2, 4):double(), ember.randn(3, 4)) end},
      {"ember.conv2d: dtype mismatch: float64 [1, 2, 5, 5] vs float32 [3, 2, 3, 3]",
       function() return nn.functional.conv2d(ember.randn(1, 2, 5, 5):double(), ember.randn(3, 2, 3, 3)) end},
    }
    for _, c in ipairs(cases) do
      local err = under_autocast(c[2])
      assert.truthy(err:find(c[1], 1, true), err)
      assert.truthy(err:find("leaves float64 and integer tensors as they are", 1, true), err)
      assert.falsy(err:find("bfloat16 [", 1, true), err)
      assert.truthy(err:find("autocast_parity_spec.lua:%d+:"), err) -- at the user's line
    end
  end)

  it("nn.Linear says the input is float64 and the weight float32, as outside autocast", function()
    local l = nn.Linear(4, 3)
    local x = ember.randn(2, 4):double()
    local outside = err_of(function() local y = l(x); return y end)
    local inside = under_autocast(function() local y = l(x); return y end)
    assert.truthy(inside:find("Linear.forward: the input is float64 but the weight is float32", 1, true), inside)
    assert.are.equal(outside:gsub("^[^:]*:%d+: ", ""), (inside:gsub("^[^:]*:%d+: ", "")))
    assert.truthy(inside:find("autocast_parity_spec.lua:%d+: Linear"), inside)
    -- float32 and bfloat16 still mix there, in bfloat16
    local y = ember.autocast("bfloat16", function() return l(ember.randn(2, 4):to("bfloat16")) end)
    assert.are.equal("bfloat16", y.dtype)
  end)

  it("still runs what autocast casts: a float32 product in bfloat16, a float64 one in float64", function()
    ember.autocast("bfloat16", function()
      assert.are.equal("bfloat16", ember.randn(2, 4):matmul(ember.randn(4, 3)).dtype)
      assert.are.equal("float64", ember.randn(2, 4):double():matmul(ember.randn(4, 3):double()).dtype)
      assert.are.equal("int64", ember.ones(2, 4, "int64"):matmul(ember.ones(4, 3, "int64")).dtype)
    end)
  end)
end)

describe("ember.autocast's function form", function()
  -- ember.profile(model, x) runs a module; ember.autocast("bfloat16", model, x)
  -- refused it ("expected a function or enabled (a boolean) ..., got table").
  it("takes a module (a callable table) as ember.profile does", function()
    local lin = ember.nn.Linear(4, 3)
    local x = ember.randn(2, 4)
    assert.are.equal("bfloat16", ember.autocast("bfloat16", lin, x).dtype)
    assert.are.equal("float32", ember.autocast("bfloat16", false, lin, x).dtype)
    assert.is_false((ember.autocast.enabled()))
    raises_here(function() ember.autocast("bfloat16", { enabled = false }) end,
      'ember.autocast: expected a function or enabled (a boolean) after "bfloat16", got table')
  end)
end)

describe("ember.autocast's dtype", function()
  -- "float16" said "not supported", but torch's spellings of the same dtype
  -- (torch.float16, torch.half, fp16) said "unknown dtype"
  it("names float16 in any of torch's spellings as unsupported", function()
    for _, d in ipairs { "float16", "half", "torch.float16", "torch.half", "fp16" } do
      raises_here(function() ember.autocast(d, function() end) end,
        "ember.autocast: dtype float16 is not supported: autocast runs products in bfloat16")
    end
    assert.is_false((ember.autocast.enabled()))
  end)
end)
