-- ember.autograd (lua/ember/autograd.lua): torch.autograd's namespace as a
-- PyTorch user reaches for it. grad/Function are ember's own values;
-- backward over several outputs; gradcheck (float64 finite differences
-- against the analytical Jacobian, 1-based messages, the same rule as
-- tests/lua/helpers/gradcheck.lua); functional.jacobian and vjp against
-- PyTorch 1.13's (tests/fixtures/nn_autograd.lua, made by
-- tests/gen_nn_fixtures.py autograd_cases()); anomaly detection (the C
-- engine's check after each node's backward, core/src/autograd.c).
local ember = require "ember"
local parity = require "tests.lua.helpers.parity"
local helper = require "tests.lua.helpers.gradcheck"
local fx = dofile("tests/fixtures/nn_autograd.lua")

local autograd = ember.autograd
local F64 = { dtype = "float64" }
local T = function(spec) return parity.T(spec, "float64") end
local L = function(list) return ember.tensor(list, F64) end

local function close(got, want, tol)
  parity.check("", got, want, tol or 1e-12)
end

-- v - v:detach() is zero in value but carries v's gradient: a correct
-- forward with a backward wrong in a known way.
local function ghost(v) return v - v:detach() end

describe("ember.autograd, the namespace", function()
  it("is torch.autograd's: grad and Function are ember's own values", function()
    assert.are.equal(ember.grad, autograd.grad)
    assert.are.equal(ember.Function, autograd.Function)
    assert.are.equal(ember.no_grad, autograd.no_grad)
    assert.are.equal(require "ember.autograd", autograd)
    assert.is_function(autograd.functional.jacobian)
    assert.is_function(autograd.functional.vjp)
  end)

  it("has a reference entry for each of its own functions (help(\"autograd.gradcheck\"))", function()
    local doc = require "ember._doc"
    for _, name in ipairs { "backward", "gradcheck", "gradgradcheck", "set_detect_anomaly", "detect_anomaly",
      "is_anomaly_enabled", "functional.jacobian", "functional.vjp" } do
      local text = doc.lookup("autograd." .. name)
      assert(text and text:match("%S"), "no reference entry for autograd." .. name)
    end
  end)

  it("refuses what needs double backward, saying so", function()
    local x = ember.randn({ 2 }, F64)
    for _, name in ipairs { "hessian", "jvp", "hvp", "vhp" } do
      parity.raises_here(function() autograd.functional[name](function(a) return a:sum() end, x) end,
        "ember.autograd.functional." .. name .. ": needs the derivative of a gradient (double backward)")
    end
    parity.raises_here(function() autograd.gradgradcheck(function(a) return a end, { x }) end, "gradgradcheck")
    parity.raises_here(function() autograd.grad(x:requires_grad_():sum(), x, { create_graph = true }) end,
      "create_graph is not supported")
  end)
end)

describe("autograd.backward", function()
  it("sums several outputs' gradients in one pass, weighted by grad_tensors", function()
    local w = ember.tensor({ 1, 2, 3 }, F64):requires_grad_()
    local a, b = w * w, w:sum()
    autograd.backward({ a, b }, { ember.tensor({ 1, 0, 2 }, F64) })
    close(w.grad, L { 3, 1, 13 }) -- 2 w * g + 1
    local w2 = ember.tensor({ 1, 2 }, F64):requires_grad_()
    autograd.backward((w2 * 3):sum())
    close(w2.grad, L { 3, 3 })
  end)

  it("retain_graph keeps the graph; inputs= accumulates into those tensors' .grad only", function()
    local u = ember.tensor({ 1, 2 }, F64):requires_grad_()
    local v = ember.tensor({ 3, 4 }, F64):requires_grad_()
    local y = (u * v):sum()
    autograd.backward(y, { retain_graph = true })
    autograd.backward({ y }, { retain_graph = false })
    close(v.grad, L { 2, 4 })
    u.grad, v.grad = nil, nil
    autograd.backward((u * v):sum(), { inputs = { v } })
    close(v.grad, L { 1, 2 })
    assert.is_nil(u.grad)
    -- a non-leaf input gets its gradient in .grad, as PyTorch's
    local h = u * 2
    autograd.backward((h * v):sum(), { inputs = h })
    close(h.grad, L { 3, 4 })
    assert.is_nil(u.grad)
    close(v.grad, L { 1, 2 })
    parity.raises_here(function() autograd.backward((u * v):sum(), { inputs = { ember.ones(2) } }) end,
      "inputs[1] does not require grad")
    parity.raises_here(function() (u * v):sum():backward { inputs = { 3 } } end,
      "ember.backward: inputs[1] is a number, not a tensor")
  end)

  it("refuses a non-scalar without grad_tensors, create_graph and unknown options", function()
    local w = ember.tensor({ 1, 2 }, F64):requires_grad_()
    parity.raises_here(function() autograd.backward(w * 2) end, "grad can be implicitly created only for one-element tensors")
    parity.raises_here(function() autograd.backward(w:sum(), { create_graph = true }) end, "create_graph is not supported")
    parity.raises_here(function() autograd.backward(w:sum(), { retain = true }) end, "unknown option 'retain'")
    parity.raises_here(function() autograd.backward({ w:sum(), 3 }) end, "tensors[2] is a number")
  end)
end)

describe("autograd.grad leaves every other .grad alone (torch.autograd.grad)", function()
  it("a gradient penalty's grad of D(x) with respect to x adds nothing into D's weights", function()
    local D = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Tanh(), ember.nn.Linear(4, 1)):double()
    local x = ember.randn(5, 3, F64):requires_grad_()
    local gx = autograd.grad(D(x):sum(), { x })[1]
    for _, p in ipairs(D:parameters()) do assert.is_nil(p.grad) end
    assert.is_nil(x.grad)
    -- the same gradient as a plain backward gives x
    D(x):sum():backward()
    close(gx, x.grad)
    -- weights that already had a gradient keep it exactly
    local before = D[1].weight.grad:clone()
    autograd.grad(D(x):sum(), x)
    assert.is_true(ember.equal(before, D[1].weight.grad))
  end)

  it("through nn.checkpoint, whose recompute runs a backward of its own inside the pass", function()
    local lin = ember.nn.Linear(3, 3):double()
    local x = ember.randn(2, 3, F64):requires_grad_()
    local plain = autograd.grad(lin(x):tanh():sum(), { x })[1]
    local ck = autograd.grad(ember.nn.checkpoint(function(t) return lin(t):tanh() end, x):sum(), { x })[1]
    close(ck, plain)
    assert.is_nil(lin.weight.grad)
  end)
end)

describe("autograd.grad with an input given twice (torch.autograd.grad)", function()
  it("returns its gradient at both places and leaves its .grad as it was", function()
    local x = ember.tensor({ 1, -2, 3 }, F64):requires_grad_()
    x.grad = ember.full({ 3 }, 7, F64)
    local g = autograd.grad((x * x):sum(), { x, x })
    assert.are.same({ 2, -4, 6 }, g[1]:totable())
    assert.are.same({ 2, -4, 6 }, g[2]:totable())
    assert.are.same({ 7, 7, 7 }, x.grad:totable())
    local h = x * 3 -- a non-leaf too
    local gh = autograd.grad((h * h):sum(), { h, x, h })
    assert.are.same({ 6, -12, 18 }, gh[1]:totable())
    assert.are.same({ 18, -36, 54 }, gh[2]:totable())
    assert.are.same({ 6, -12, 18 }, gh[3]:totable())
  end)
end)

describe("autograd.gradcheck", function()
  local square = ember.Function {
    name = "autograd_spec_square",
    forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
    backward = function(ctx, g) return g * ctx.saved[1] * 2 end,
  }
  local wrong_square = ember.Function {
    name = "autograd_spec_wrong_square",
    forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
    backward = function(ctx, g) return g * ctx.saved[1] * 2.01 end,
  }

  it("passes correct gradients: ops, several inputs and outputs, an ember.Function, int64 inputs passed through", function()
    local a = ember.randn({ 2, 3 }, F64):requires_grad_()
    local b = ember.randn({ 3, 2 }, F64):requires_grad_()
    assert.is_true(autograd.gradcheck(function(x, y) return x:matmul(y):tanh() end, { a, b }))
    assert.is_true(autograd.gradcheck(function(x) return { x:sum(), x:exp(), square(x) } end, { a }))
    assert.is_true(autograd.gradcheck(function(x) return square(x) end, a)) -- a tensor alone, as torch
    local idx = ember.tensor({ 3, 1 }, { dtype = "int64" })
    assert.is_true(autograd.gradcheck(function(x, i) return x:select(1, 1):gather(1, i) end, { a, idx }))
    -- its .grad is left alone (torch.autograd.grad, not backward)
    assert.is_nil(a.grad)
  end)

  it("checks every value a function returns (`return a, b`, as an ember.Function of two outputs gives them)", function()
    local two = ember.Function {
      name = "autograd_spec_two_outputs",
      forward = function(ctx, a) return a * 2, a * 3 end,
      backward = function(ctx, g1, g2) return g1 * 2 + g2 * 3.5 end, -- the 2nd output's gradient is wrong
    }
    local x = ember.randn({ 3 }, F64):requires_grad_()
    local ok, msg = autograd.gradcheck(function(a) return two(a) end, { x }, { raise_exception = false })
    assert.is_false(ok)
    assert.matches("Jacobian mismatch for output 2 with respect to input 1", msg, 1, true)
    local J = autograd.functional.jacobian(function(a) return a * a, a:sum() end, ember.tensor({ 1, 2 }, F64))
    assert.are.same({ { 2, 0 }, { 0, 4 } }, J[1]:totable())
    assert.are.same({ 1, 1 }, J[2]:totable())
  end)

  it("fails a wrong ember.Function backward: false and the message, or an error at the caller's line", function()
    local x = ember.randn({ 2, 3 }, F64):requires_grad_()
    local ok, msg = autograd.gradcheck(function(a) return wrong_square(a) end, { x }, { raise_exception = false })
    assert.is_false(ok)
    assert.matches("Jacobian mismatch for output 1 with respect to input 1", msg, 1, true)
    parity.raises_here(function() autograd.gradcheck(function(a) return wrong_square(a) end, { x }) end,
      "ember.autograd.gradcheck: Jacobian mismatch for output 1 with respect to input 1")
  end)

  it("names the output, the input and the worst element, 1-based", function()
    -- the gradient of output 2 with respect to input 2 is wrong at element [2, 3] only
    local mask = ember.zeros({ 2, 3 }, F64)
    mask[2][3] = 1
    local function f(a, b) return { a * b, (a + b) + ghost(b * mask) * 0.5 } end
    local ok, msg = autograd.gradcheck(f, { ember.randn({ 2, 3 }, F64):requires_grad_(),
      ember.randn({ 2, 3 }, F64):requires_grad_() }, { raise_exception = false })
    assert.is_false(ok)
    assert.matches("Jacobian mismatch for output 2 with respect to input 2, worst at row 6, column 6 "
      .. "(output element [2, 3], input element [2, 3]): numerical ", msg, 1, true)
    -- 1 up to the finite difference's rounding (0.9999999999... or 1.0000000000... by the inputs drawn)
    assert.is_true(math.abs(tonumber(msg:match("numerical ([%d%.e+-]+)")) - 1) < 1e-8, msg)
    assert.matches("analytical 1.5", msg, 1, true)
  end)

  it("fails a missing gradient and a gradient for the wrong element", function()
    local ok = autograd.gradcheck(function(a, b) return a:detach() * b end,
      { ember.randn({ 3 }, F64):requires_grad_(), ember.randn({ 3 }, F64):requires_grad_() }, { raise_exception = false })
    assert.is_false(ok)
    local function flipped(a) -- gradient of element (i, j) from (j, i)
      return a:exp():detach() + ghost(a:transpose(1, 2)) * a:exp():transpose(1, 2):detach()
    end
    local ok2, msg = autograd.gradcheck(flipped, { ember.randn({ 2, 2 }, F64):requires_grad_() }, { raise_exception = false })
    assert.is_false(ok2)
    assert.matches("Jacobian mismatch", msg)
  end)

  it("refuses inputs that are not float64 and a call with nothing to check (PyTorch's warning, as an error)", function()
    parity.raises_here(function() autograd.gradcheck(function(a) return a * 2 end, { ember.randn(3):requires_grad_() }) end,
      "input 1 requires gradient and is not a double precision floating point tensor (it is float32)")
    parity.raises_here(function() autograd.gradcheck(function(a) return a * 2 end, { ember.randn({ 3 }, F64) }) end,
      "expects at least one input tensor to require gradient")
    parity.raises_here(function() autograd.gradcheck(function(a) return a:float() end, { ember.randn({ 3 }, F64):requires_grad_() }) end,
      "output 1 is float32")
    parity.raises_here(function()
      autograd.gradcheck(function(a) return a * 2 end, { ember.randn({ 3 }, F64):requires_grad_() }, { epsilon = 1e-6 })
    end, "unknown option 'epsilon'")
    parity.raises_here(function()
      autograd.gradcheck(function(a) return a * 2 end, { ember.randn({ 3 }, F64):requires_grad_() }, { check_batched_grad = true })
    end, "check_batched_grad is not supported")
    local e = ember.randn({ 1 }, F64):expand(3):detach():requires_grad_()
    parity.raises_here(function() autograd.gradcheck(function(a) return a * 2 end, { e }) end, "stride 0")
  end)

  it("fails a backward that is not reentrant, and one that maps zero gradients to nonzero (check_undefined_grad)", function()
    local calls = 0
    local noisy = ember.Function { name = "autograd_spec_noisy",
      forward = function(ctx, a) return a * 3 end,
      backward = function(ctx, g) calls = calls + 1; return g * (3 + calls * 1e-9) end }
    local ok, msg = autograd.gradcheck(function(a) return noisy(a) end, { ember.randn({ 2 }, F64):requires_grad_() },
      { raise_exception = false })
    assert.is_false(ok)
    assert.matches("backward is not reentrant", msg)
    assert.is_true(autograd.gradcheck(function(a) return noisy(a) end, { ember.randn({ 2 }, F64):requires_grad_() },
      { nondet_tol = 1e-6 }))
    local leaky = ember.Function { name = "autograd_spec_leaky",
      forward = function(ctx, a) return a * 3 end,
      backward = function(ctx, g) return g * 3 + (g:abs():sum():item() == 0 and 1 or 0) end }
    local x = ember.randn({ 2 }, F64):requires_grad_()
    local ok2, msg2 = autograd.gradcheck(function(a) return leaky(a) end, { x }, { raise_exception = false })
    assert.is_false(ok2)
    assert.matches("backward with zero output gradients gave a nonzero gradient for input 1", msg2, 1, true)
    assert.is_true(autograd.gradcheck(function(a) return leaky(a) end, { x }, { check_undefined_grad = false }))
  end)

  it("fails an output that does not require grad but depends on the input", function()
    local ok, msg = autograd.gradcheck(function(a) return a:detach() * 2 end, { ember.randn({ 2 }, F64):requires_grad_() },
      { raise_exception = false })
    assert.is_false(ok)
    assert.matches("does not require grad, but its numerical gradient is not zero", msg)
  end)

  it("fast_mode: one combination of the outputs, still per input element", function()
    local x = ember.randn({ 2, 3 }, F64):requires_grad_()
    assert.is_true(autograd.gradcheck(function(a) return square(a):sin() end, x, { fast_mode = true }))
    local ok, msg = autograd.gradcheck(function(a) return wrong_square(a) end, x, { fast_mode = true, raise_exception = false })
    assert.is_false(ok)
    assert.matches("gradient mismatch for input 1 element [", msg, 1, true)
  end)

  it("checks a Lua attention variant (flex_attention's score_mod) as a user writes one", function()
    local q, k, v = ember.randn({ 1, 1, 3, 2 }, F64), ember.randn({ 1, 1, 3, 2 }, F64), ember.randn({ 1, 1, 3, 2 }, F64)
    for _, t in ipairs { q, k, v } do t:requires_grad_() end
    local function softcap(s) return ember.tanh(s / 5) * 5 end
    assert.is_true(autograd.gradcheck(function(a, b, c)
      return ember.flex_attention(a, b, c, { score_mod = softcap })
    end, { q, k, v }))
  end)

  it("is the rule the test helper runs (tests/lua/helpers/gradcheck.lua)", function()
    local x = ember.randn({ 3 }, F64)
    local ok, report = helper.run(function(a) return wrong_square(a) end, { x })
    assert.is_false(ok)
    assert.matches("gradient mismatch for input 1 element", report, 1, true)
    assert.is_true((helper.run(function(a) return square(a) end, { x })))
    assert.are.same({ 3 }, x.grad.shape) -- the helper leaves W^T J in .grad (its weights W)
  end)
end)

describe("autograd.functional against PyTorch 1.13 (tests/fixtures/nn_autograd.lua)", function()
  local J = autograd.functional.jacobian

  it("jacobian of one tensor: [out..., in...]", function()
    local x = T(fx.single.x)
    local got = J(function(a) return a:exp() * a:sum() end, x)
    assert.are.same({ 2, 3, 2, 3 }, got.shape)
    close(got, T(fx.single.jac))
    assert.is_false(x.requires_grad) -- the caller's tensor is left alone
  end)

  it("jacobian of two tensors and two outputs (a 0-d one, an input it does not use): result[k][i]", function()
    local got = J(function(a, b) return { a:matmul(b):tanh(), (a * a):sum() } end, { T(fx.pair.a), T(fx.pair.b) })
    for k = 1, 2 do
      for i = 1, 2 do close(got[k][i], T(fx.pair.jac[k][i])) end
    end
    assert.are.same({ 3, 2 }, got[2][2].shape)
    assert.are.equal(0, got[2][2]:abs():sum():item())
    parity.raises_here(function()
      J(function(a, b) return { a:matmul(b):tanh(), (a * a):sum() } end, { T(fx.pair.a), T(fx.pair.b) }, { strict = true })
    end, "output 2 of the user-provided function is independent of input 2")
  end)

  it("jacobian of a small attention with respect to q, k and v", function()
    local c = fx.attention
    local got = J(function(q, k, v)
      return ember.softmax(q:matmul(k:transpose(1, 2)) / math.sqrt(2), -1):matmul(v)
    end, { T(c.q), T(c.k), T(c.v) })
    for i = 1, 3 do close(got[i], T(c.jac[i]), 1e-11) end
  end)

  it("vjp: the output and v^T J", function()
    local c = fx.vjp
    local out, g = autograd.functional.vjp(function(x) return ember.log_softmax(x, -1) end, T(c.x), T(c.v))
    close(out, T(c.out))
    close(g, T(c.vjp))
    assert.is_false(out.requires_grad)
  end)

  it("refuses forward mode, create_graph and a v of the wrong shape", function()
    local x = ember.randn({ 2 }, F64)
    parity.raises_here(function() J(function(a) return a end, x, { strategy = "forward-mode" }) end,
      "strategy 'forward-mode' is not supported")
    parity.raises_here(function() J(function(a) return a end, x, { create_graph = true }) end, "create_graph is not supported")
    parity.raises_here(function() autograd.functional.vjp(function(a) return a * 2 end, x) end,
      "v can be left out only when the output has one element")
    parity.raises_here(function() autograd.functional.vjp(function(a) return a * 2 end, x, ember.ones({ 3 }, F64)) end,
      "v[1] is [3], but output 1 is [2]")
  end)
end)

describe("anomaly detection", function()
  local here = debug.getinfo(1, "S").short_src

  it("is off by default: a NaN gradient goes through silently", function()
    assert.is_false(autograd.is_anomaly_enabled())
    local x = ember.tensor({ 0, 1 }, F64):requires_grad_()
    ;(x:sqrt() * 0):sum():backward()
    assert.is_true(x.grad[1]:item() ~= x.grad[1]:item()) -- NaN
  end)

  it("names the op whose backward produced NaN, which output, and the forward's line", function()
    local scope <close> = autograd.set_detect_anomaly(true)
    assert.is_true(autograd.is_anomaly_enabled())
    local x = ember.tensor({ 0, 1, 4 }, F64):requires_grad_()
    local line = debug.getinfo(1, "l").currentline + 1
    local y = (x:sqrt() * 0):sum()
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("ember.backward: function 'sqrt backward' returned nan values in its 1st output "
      .. "(1 of 3 elements of the gradient [3]; the first at [1])", err, 1, true)
    assert.matches(here .. ":" .. line .. ":", err, 1, true)
    assert.is_nil(x.grad) -- nothing reached the leaf
  end)

  it("leaves ember's own Lua frames out of the forward's lines: the first is the user's call", function()
    -- a chunk named as a file of ember's Lua folder stands for a library function
    local dir = debug.getinfo(autograd.set_detect_anomaly, "S").source:match("^(@.*[/\\])")
    local lib_sqrt = load("local x = ...\nreturn x:sqrt()", dir .. "autograd_spec_fake_library.lua")
    local scope <close> = autograd.set_detect_anomaly(true)
    local x = ember.tensor({ 0 }, F64):requires_grad_()
    local line = debug.getinfo(1, "l").currentline + 1
    local y = (lib_sqrt(x) * 0):sum()
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("the forward call that made it:\n\t" .. here .. ":" .. line .. ":", err, 1, true)
    assert.is_nil(err:find("fake_library", 1, true))
  end)

  it("names inf, the 2nd input of div, and an ember.Function by its name", function()
    local scope <close> = autograd.set_detect_anomaly(true)
    local x = ember.tensor({ 1, 0 }, F64):requires_grad_()
    local y = (ember.ones({ 2 }, F64) / x):sum()
    local ok, err = pcall(y.backward, y)
    assert.is_false(ok)
    assert.matches("function 'div backward' returned inf values in its 2nd output", err, 1, true)
    local bad = ember.Function { name = "autograd_spec_bad", forward = function(ctx, a) return a * 1 end,
      backward = function(ctx, g) return g / 0 * 0 end }
    local z = ember.tensor({ 1 }, F64):requires_grad_()
    ok, err = pcall(function() bad(z):sum():backward() end)
    assert.is_false(ok)
    assert.matches("function 'autograd_spec_bad backward' returned nan values in its 1st output", err, 1, true)
    -- through ember.grad too
    local w = ember.tensor({ 0 }, F64):requires_grad_()
    ok, err = pcall(ember.grad, (w:sqrt() * 0):sum(), w)
    assert.is_false(ok)
    assert.matches("'sqrt backward' returned nan", err, 1, true)
  end)

  it("turned on only for backward: the op is named, the forward's line cannot be", function()
    local x = ember.tensor({ 0 }, F64):requires_grad_()
    local y = (x:sqrt() * 0):sum()
    local ok, err = pcall(autograd.detect_anomaly, function() y:backward() end)
    assert.is_false(ok)
    assert.matches("'sqrt backward' returned nan", err, 1, true)
    assert.matches("turn anomaly detection on before the forward", err, 1, true)
    assert.is_false(autograd.is_anomaly_enabled()) -- the function form restores the mode after an error
  end)

  it("a finite backward passes; scopes nest and restore the previous mode", function()
    local x = ember.tensor({ 1, 2 }, F64):requires_grad_()
    assert.are.equal(5, autograd.detect_anomaly(function(a, b) (x * x):sum():backward(); return a + b end, 2, 3))
    close(x.grad, L { 2, 4 })
    do
      local outer <close> = autograd.detect_anomaly()
      do
        local inner <close> = autograd.set_detect_anomaly(false)
        assert.is_false(autograd.is_anomaly_enabled())
      end
      assert.is_true(autograd.is_anomaly_enabled())
    end
    assert.is_false(autograd.is_anomaly_enabled())
    parity.raises_here(function() autograd.set_detect_anomaly("yes") end, "mode must be a boolean")
    parity.raises_here(function() autograd.detect_anomaly(3) end, "expected a function")
  end)

  it("leaves the graph usable after the error (retain_graph) and trains on", function()
    local scope <close> = autograd.set_detect_anomaly(true)
    local x = ember.tensor({ 0, 1 }, F64):requires_grad_()
    local y = (x:sqrt() * 0):sum()
    assert.is_false((pcall(y.backward, y, nil, true)))
    autograd.set_detect_anomaly(false)
    y:backward() -- the same graph, checks off: NaN goes through
    assert.is_true(x.grad[1]:item() ~= x.grad[1]:item())
  end)
end)
