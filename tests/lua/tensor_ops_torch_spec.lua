-- Tensor ops as a PyTorch 1.13 user calls them. masked_scatter, nanmedian,
-- quantile / nanquantile, mode, histc, scatter_reduce and index_reduce
-- against PyTorch 1.13 (tests/gen_tensor_ops_torch_fixtures.py writes
-- tests/fixtures/tensor_ops_torch.lua), float64 gradchecks, edge cases and the
-- errors; everyday creation (options, randperm's dtype, logspace's base,
-- ember.tensor from Lua booleans), scatter's reduce, roll of a 0-d tensor,
-- median with NaN; addmm and baddbmm under autocast and with beta = 0.
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"
local parity = require "tests.lua.helpers.parity"
local error_of, raises_here = parity.error_of, parity.raises_here
local fx = dofile("tests/fixtures/tensor_ops_torch.lua")

local F64 = { dtype = "float64" }

local function T(spec)
  local n = 1
  for _, s in ipairs(spec.shape) do n = n * s end
  local dtype = spec.dtype or "float64"
  if n == 0 then return ember.zeros(spec.shape, { dtype = dtype }) end
  if #spec.shape == 0 then return ember.tensor(spec.data[1], dtype) end
  return ember.tensor(spec.data, dtype):view(spec.shape)
end

-- "" when got matches want (shape, dtype, values to 1e-12, NaN positions), else why not.
local function differ(got, want)
  if not ember.is_tensor(got) then return "not a tensor: " .. tostring(got) end
  local ws = want.shape
  if got:dim() ~= #ws then return ("dims %d, want %d"):format(got:dim(), #ws) end
  for i = 1, #ws do
    if got:size(i) ~= ws[i] then return ("size %d of dim %d, want %d"):format(got:size(i), i, ws[i]) end
  end
  if got.dtype ~= (want.dtype or "float64") then return ("dtype %s, want %s"):format(got.dtype, want.dtype or "float64") end
  local v = got:dim() == 0 and { got:item() } or got:reshape(-1):totable()
  for i, w in ipairs(want.data) do
    local g = v[i]
    if type(w) == "boolean" then
      if g ~= w then return ("element %d: %s, want %s"):format(i, tostring(g), tostring(w)) end
    elseif g == w then -- infinities included
    elseif w ~= w then
      if g == g then return ("element %d: %s, want nan"):format(i, tostring(g)) end
    elseif not (math.abs(g - w) <= 1e-12 + 1e-12 * math.abs(w)) then
      return ("element %d: %.17g, want %.17g"):format(i, g, w)
    end
  end
  return ""
end

describe("tensor ops against PyTorch 1.13 (tests/fixtures/tensor_ops_torch.lua)", function()
  it("every case agrees, gradients included", function()
    local bad = {}
    for _, c in ipairs(fx.cases) do
      local env = { e = ember }
      local names = {}
      for k, spec in pairs(c.inputs) do
        env[k] = T(spec)
        if c.grad and c.grad[k] then env[k]:requires_grad_() end
        names[#names + 1] = k
      end
      local f = assert(load("return " .. c.expr, c.name, "t", env))
      local out = table.pack(pcall(f))
      if not out[1] then
        bad[#bad + 1] = c.name .. ": " .. tostring(out[2])
      else
        for i, want in ipairs(c.out) do
          local why = differ(out[i + 1], want)
          if why ~= "" then bad[#bad + 1] = ("%s: output %d: %s"):format(c.name, i, why) end
        end
        if c.grad then
          (out[2] * T(c.w)):sum():backward()
          for k, want in pairs(c.grad) do
            local why = differ(env[k].grad, want)
            if why ~= "" then bad[#bad + 1] = ("%s: grad of %s: %s"):format(c.name, k, why) end
          end
        end
      end
    end
    assert.are.same({}, bad)
    assert.is_true(#fx.cases >= 50)
  end)
end)

describe("tensor ops: float64 gradcheck", function()
  local r = function(...) return ember.randn({ ... }, { dtype = "float64" }) end
  it("masked_scatter in x and source", function()
    local m = ember.tensor({ { true, false, true }, { false, true, true } })
    gradcheck.check(function(x, s) return x:masked_scatter(m, s) end, { r(2, 3), r(5) })
  end)
  it("nanmedian with and without dim", function()
    local x = ember.tensor({ { 3, 0 / 0, 1, 2 }, { 0.5, 4, -1, 0 / 0 } }, "float64")
    gradcheck.check(function(a) return a:nanmedian(2) end, { x:clone() })
    gradcheck.check(function(a) return a:nanmedian() end, { x:clone() })
  end)
  it("quantile and nanquantile, each interpolation", function()
    local q = ember.tensor({ 0.1, 0.45, 0.9 }, "float64")
    for _, mode in ipairs { "linear", "lower", "higher", "midpoint", "nearest" } do
      gradcheck.check(function(a) return a:quantile(q, 2, false, { interpolation = mode }) end, { r(3, 6) }, { name = mode })
      gradcheck.check(function(a) return a:nanquantile(q, 1, true, { interpolation = mode }) end, { r(5, 2) }, { name = mode })
    end
  end)
  it("the inverse hyperbolics, sinc, copysign, fmax, cov, corrcoef, vander, trapezoid", function()
    gradcheck.check(function(a) return a:asinh() end, { r(7) * 3 })
    gradcheck.check(function(a) return a:acosh() end, { r(7):abs() + 1.05 })
    gradcheck.check(function(a) return a:atanh() end, { ember.rand({ 7 }, { dtype = "float64" }) * 1.8 - 0.9 })
    gradcheck.check(function(a) return a:sinc() end, { ember.tensor({ 0, 0.3, -1.7, 2.5 }, "float64") })
    gradcheck.check(function(a, b) return ember.fmax(a, b) + ember.fmin(a, b) * 2 end, { r(6), r(6) })
    gradcheck.check(function(a) return a:cov() end, { r(3, 5) })
    gradcheck.check(function(a) return a:corrcoef() end, { r(3, 5) })
    gradcheck.check(function(a) return ember.vander(a, 4) end, { r(3) })
    gradcheck.check(function(a, b) return ember.trapezoid(a, b) end, { r(2, 5), r(5) })
    gradcheck.check(function(a, b) return ember.logaddexp2(a, b) end, { r(4), r(4) })
    gradcheck.check(function(a) return a:erfc() end, { ember.tensor({ -3, -0.5, 0.2, 2.4, 2.6, 4 }, "float64") })
    gradcheck.check(function(a, b) return ember.cumulative_trapezoid(a, b, { dim = 1 }) end, { r(4, 2), r(4, 2) })
  end)
  it("scatter_reduce and index_reduce, each reduce, src larger than index", function()
    local idx = ember.tensor({ { 1, 3, 2 }, { 1, 1, 2 } }, "int64")
    for _, red in ipairs { "sum", "prod", "mean", "amax", "amin" } do
      for _, inc in ipairs { true, false } do
        gradcheck.check(function(x, s) return x:scatter_reduce(1, idx, s, red, { include_self = inc }) end,
          { r(3, 4), r(3, 3) }, { name = red })
        gradcheck.check(function(x, s) return x:index_reduce(2, ember.tensor({ 2, 1, 2 }, "int64"), s,
          red == "sum" and "mean" or red, { include_self = inc }) end, { r(2, 3), r(2, 3) }, { name = red })
      end
    end
  end)
end)

describe("tensor ops: edge cases", function()
  it("0-d, empty and non-contiguous inputs", function()
    local s = ember.tensor(2.5, "float64")
    assert.equals(2.5, s:quantile(0.3):item())
    assert.equals(2.5, s:quantile(0.3, 1):item())
    local v, i = s:nanmedian(1)
    assert.same({ 2.5, 1 }, { v:item(), i:item() })
    assert.equals(9.0, s:scatter_reduce(1, ember.tensor(1, "int64"), ember.tensor(9.0, "float64"), "amax"):item())
    local e = ember.zeros({ 0, 3 })
    assert.equals(0, (e:mode(2)):numel())
    assert.same({ 0, 0, 0 }, e:histc(3):totable())
    local x = ember.arange(12, { dtype = "float64" }):view(3, 4):t() -- non-contiguous
    assert.same(x:contiguous():quantile(0.5, 1):totable(), x:quantile(0.5, 1):totable())
    assert.same(x:contiguous():nanmedian(2):totable(), x:nanmedian(2):totable())
  end)
  it("searchsorted / bucketize by one merge: independent count, and 1e6 values x 1000 bins in little memory", function()
    local v, b = ember.randn(1000, { dtype = "float64" }), ember.randn(100, { dtype = "float64" }):sort()
    local want = b:unsqueeze(1):lt(v:unsqueeze(2)):sum(2) + 1 -- left: 1 + the boundaries below
    assert.same(want:totable(), ember.bucketize(v, b):totable())
    want = b:unsqueeze(1):le(v:unsqueeze(2)):sum(2) + 1
    assert.same(want:totable(), ember.searchsorted(b, v, { right = true }):totable())
    -- the [m, n] comparison this replaced took 10 GB here
    local big = ember.bucketize(ember.randn(1000000), ember.linspace(-3, 3, 1000))
    assert.same({ 1000000 }, big.shape)
  end)
  it("inverse hyperbolics of integers are float32, as torch's default dtype", function()
    local y = ember.tensor({ -2, 0, 5 }, "int64"):asinh()
    assert.equals("float32", y.dtype)
    local want = ember.tensor({ -2, 0, 5 }, "float64"):asinh()
    assert.is_true((y:to("float64") - want):abs():max():item() < 1e-6)
  end)
  it("histc leaves NaN out (torch 1.13 counts it in the first bin)", function()
    assert.same({ 0, 2, 1, 0 }, ember.tensor({ 1, 2, 1, 0 / 0 }):histc(4, 0, 3):totable())
  end)
end)

describe("tensor ops' errors name the op at the caller's line", function()
  local x = ember.randn(3, 4)
  local cases = {
    { "masked_scatter", function() local _ = x:masked_scatter(x:gt(10):logical_not(), ember.zeros(3)) end, "only 3" },
    { "masked_scatter", function() local _ = x:masked_scatter(ember.ones(3, 4), ember.zeros(12)) end, "bool" },
    { "quantile", function() local _ = x:quantile(1.5) end, "q must be in %[0, 1%]" },
    { "quantile", function() local _ = x:quantile(0.5, 2, false, { interpolation = "cubic" }) end, "interpolation" },
    { "quantile", function() local _ = x:quantile(0.5, 3) end, "dim 3 is out of range" },
    { "quantile", function() local _ = ember.tensor({ 1, 2 }, "int64"):quantile(0.5) end, "float32 or float64" },
    { "nanquantile", function() local _ = x:nanquantile(ember.tensor({ 0.5 }, "float64")) end, "dtype" },
    { "mode", function() local _ = x:mode(0) end, "dim 0" },
    { "histc", function() local _ = x:histc(0) end, "bins" },
    { "histc", function() local _ = x:histc(3, 2, 1) end, "max must be larger" },
    { "histc", function() local _ = ember.tensor({ 1, 0 / 0 }):histc(3) end, "not finite" },
    { "scatter_reduce", function() local _ = x:scatter_reduce(1, ember.ones({ 1, 4 }, "int64"), x, "max") end, "reduce must be" },
    { "scatter_reduce", function() local _ = x:scatter_reduce(1, ember.ones({ 1, 4 }, "int64") * 4, x, "sum") end, "1..3" },
    { "scatter_reduce", function() local _ = x:scatter_reduce(1, ember.ones({ 1, 4 }, "int64"), x, "sum", { inc = 1 }) end, "unknown option" },
    { "hsplit", function() local _ = x:hsplit(3) end, "cannot be split into 3" },
    { "vsplit", function() local _ = ember.ones(3):vsplit(1) end, "at least 2 dims" },
    { "gcd", function() local _ = x:gcd(x) end, "int64" },
    { "heaviside", function() local _ = x:heaviside(ember.ones(1, "float64")) end, "dtype" },
    { "cov", function() local _ = ember.ones(2, 2, 2):cov() end, "at most 2 dims" },
    { "put", function() local _ = x:put(ember.tensor({ 13 }, "int64"), ember.ones(1)) end, "1..12" },
    { "block_diag", function() local _ = ember.block_diag(ember.ones(1, 1, 1)) end, "at most 2 dims" },
    { "searchsorted", function() local _ = ember.searchsorted(ember.ones(3), ember.ones(2), { sorter = ember.ones(2, "int64") }) end, "sorter" },
    { "isin", function() local _ = ember.isin(1, 2) end, "must be a tensor" },
    { "std", function() local _ = ember.ones({ 3 }, "int64"):std() end, "float tensor" }, -- was named ember.var
    { "amax", function() local _ = ember.zeros(0):amax() end, "empty" }, -- was named ember.max
    { "aminmax", function() local _ = ember.aminmax(ember.zeros(0)) end, "empty" }, -- was named ember.min
    { "is_nonzero", function() local _ = x:is_nonzero() end, "exactly one element" },
    { "sum_to_size", function() local _ = x:sum_to_size(2, 4) end, "cannot be summed" },
    { "renorm", function() local _ = ember.ones(3):renorm(2, 1, 1) end, "at least 2 dims" },
    { "histogram", function() local _ = ember.histogram(x, ember.tensor({ 1, 0 })) end, "increasing" },
    { "histogram", function() local _ = ember.histogram(x, 3, { range = { 2, 1 } }) end, "above its hi" },
    { "histogram", function() local _ = ember.histogram(x, 3, { weight = ember.ones(3) }) end, "weight must have" },
    { "logaddexp2", function() local _ = ember.logaddexp2(x, "a") end, "other" }, -- was 'attempt to mul a string'
    -- the C ops' type errors said "bad argument #2 to '?'" (no op name)
    { "matmul", function() local _ = x:matmul("a") end, "bad argument #2 %(ember.Tensor expected, got string%)" },
    { "gather", function() local _ = x:gather(2, "a") end, "ember.Tensor expected, got string" },
    { "masked_fill", function() local _ = x:masked_fill("a", 1) end, "ember.Tensor expected, got string" },
    { "where", function() local _ = x:where("a", x) end, "the condition %(argument 1%) must be a bool tensor, got string" },
    { "index_select", function() local _ = x:index_select(1, {}) end, "ember.Tensor expected, got table" },
    { "add_", function() local _ = x:clone():add_("a") end, "expected a tensor or a number, got string" },
    { "index_reduce", function() local _ = x:index_reduce(1, ember.tensor({ 1 }, "int64"), ember.ones(2, 4), "amax") end, "source must be" },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": " .. c[3], function()
      local msg = error_of(c[2]) -- c[2] makes no tail call: the error is at its line
      assert.matches("ember%." .. c[1] .. ": ", msg)
      assert.matches(c[3], msg)
      assert.matches("tensor_ops_torch_spec.lua:%d+:", msg)
    end)
  end
end)

describe("creation options", function()
  it("a misspelt option is refused by the Lua creators, as by the C ones", function()
    local x = ember.ones(2)
    local calls = {
      zeros_like = function(o) return ember.zeros_like(x, o) end,
      ones_like = function(o) return ember.ones_like(x, o) end,
      full_like = function(o) return ember.full_like(x, 1, o) end,
      rand_like = function(o) return ember.rand_like(x, o) end,
      randn_like = function(o) return ember.randn_like(x, o) end,
      linspace = function(o) return ember.linspace(0, 1, 3, o) end,
      logspace = function(o) return ember.logspace(0, 1, 3, o) end,
      eye = function(o) return ember.eye(3, o) end,
      randint = function(o) return ember.randint(0, 3, { 3 }, o) end,
      randperm = function(o) return ember.randperm(3, o) end,
    }
    for name, call in pairs(calls) do
      local ok, err = pcall(call, { dtpe = "float64" })
      assert.is_false(ok, name)
      assert.matches("ember%." .. name .. ": unknown option 'dtpe'", err)
      assert.equals("float64", call({ dtype = "float64" }).dtype, name)
    end
  end)

  it("randperm takes dtype and requires_grad, as torch.randperm", function()
    local r = ember.randperm(5, { dtype = "float64" })
    assert.equals("float64", r.dtype)
    assert.same({ 1, 2, 3, 4, 5 }, r:sort():totable())
    assert.equals("int64", ember.randperm(3).dtype)
  end)

  it("logspace takes torch's base keyword", function()
    -- torch.logspace(0, 2, 3, base=2) = [1, 2, 4]
    assert.same({ 1, 2, 4 }, ember.logspace(0, 2, 3, { base = 2, dtype = "float64" }):totable())
    assert.same({ 1, 2, 4 }, ember.logspace(0, 2, 3, 2, { dtype = "float64" }):totable())
    assert.has_error(function() ember.logspace(0, 2, 3, 2, { base = 2 }) end)
  end)
end)

describe("scatter's reduce option", function()
  local I = function(t) return ember.tensor(t, { dtype = "int64" }) end
  it("adds with {reduce = 'add'}, as torch's scatter(..., reduce='add')", function()
    -- torch.ones(3).scatter(0, [0,0,1], [2.,3,4], reduce='add') = [6, 5, 1]; a value 2.5 gives [6, 3.5, 1]
    assert.same({ 6, 5, 1 }, ember.ones(3):scatter(1, I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 }), { reduce = "add" }):totable())
    assert.same({ 6, 3.5, 1 }, ember.ones(3):scatter(1, I { 1, 1, 2 }, 2.5, { reduce = "add" }):totable())
    local y = ember.ones(3)
    y:scatter_(1, I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 }), { reduce = "add" })
    assert.same({ 6, 5, 1 }, y:totable())
  end)
  it("refuses what it does not do instead of ignoring it", function()
    local x, i, s = ember.ones(3), I { 1, 1, 2 }, ember.tensor({ 2, 3, 4 })
    local ok, err = pcall(x.scatter, x, 1, i, s, { reduce = "multiply" })
    assert.is_false(ok); assert.matches("ember.scatter: reduce must be", err)
    ok, err = pcall(x.scatter, x, 1, i, s, { reduc = "add" })
    assert.is_false(ok); assert.matches("ember.scatter: unknown option 'reduc'", err)
  end)
end)

describe("roll of a 0-d tensor", function()
  it("rolls along its dim 1 as the other 0-d ops do, instead of failing inside ember.size", function()
    local s = ember.tensor(3.5)
    local r = s:roll(2, 1)
    assert.equals(0, r:dim())
    assert.equals(3.5, r:item())
    assert.equals(3.5, s:roll({ 1 }, { -1 }):item())
    local ok, err = pcall(s.roll, s, 1, 2)
    assert.is_false(ok); assert.matches("ember.roll", err)
  end)
end)

describe("median with NaN", function()
  local n = 0 / 0
  local function isnan(v) return v ~= v end
  it("propagates NaN as torch.median: all elements and along a dim", function()
    -- torch: tensor([3,nan,1,nan,2]).median() = nan, its grad [0, .5, 0, .5, 0];
    -- median(1) of [[3,nan,1,nan,2],[1,2,3,4,5]] = ([nan, 3], [1, 2]) 0-based, grad one-hot there
    local y = ember.tensor({ 3, n, 1, n, 2 }, { dtype = "float64" }):requires_grad_()
    local m = y:median()
    assert.is_true(isnan(m:item()))
    m:backward()
    assert.same({ 0, 0.5, 0, 0.5, 0 }, y.grad:totable())
    local x = ember.tensor({ { 3, n, 1, n, 2 }, { 1, 2, 3, 4, 5 } }, { dtype = "float64" }):requires_grad_()
    local v, i = x:median(2)
    assert.is_true(isnan(v:totable()[1])); assert.equals(3, v:totable()[2])
    assert.same({ 2, 3 }, i:totable())
    v:sum():backward()
    assert.same({ { 0, 1, 0, 0, 0 }, { 0, 0, 1, 0, 0 } }, x.grad:totable())
    local vk, ik = ember.tensor({ { 3, n }, { 1, 2 } }):median(2, true)
    assert.same({ 2, 1 }, { ik:size(1), ik:size(2) }); assert.same({ { 2 }, { 1 } }, ik:totable())
    assert.equals(2, ember.tensor({ 4, 1, 3, 2 }):median():item())
  end)
end)

describe("ember.tensor from Lua values", function()
  it("takes a boolean as 1 or 0 in a number dtype", function()
    -- they all became 0: lua_tonumber(true) is 0
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "float32"):tolist())
    assert.are.same({ { 1 }, { 0 } }, ember.tensor({ { true }, { false } }, "float64"):tolist())
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "bfloat16"):tolist())
    assert.are.same({ 1, 0 }, ember.tensor({ true, false }, "int64"):tolist())
    assert.are.equal(1, ember.tensor(true, "float32"):item())
    assert.are.same({ true, false }, ember.tensor({ true, false }):tolist())
  end)

  it("says nan (not -nan) when a NaN does not fit int64", function()
    local ok, err = pcall(ember.tensor, { 1, 0 / 0 }, "int64")
    assert.is_false(ok)
    assert.truthy(err:find("ember.tensor: nan at {2} does not fit int64", 1, true), err)
  end)
end)

describe("addmm and baddbmm as torch's", function()
  -- torch.autocast's CPU policy lists addmm and baddbmm with the products
  -- (lower precision): the bias joins the bfloat16 product. ember's came
  -- back float32 (the bfloat16 product plus a float32 input promoted).
  it("run in bfloat16 under ember.autocast, float32 gradients for a float32 input", function()
    local input = ember.randn(3):requires_grad_()
    local m1, m2 = ember.randn(2, 4), ember.randn(4, 3)
    local out = ember.autocast("bfloat16", function() return ember.addmm(input, m1, m2) end)
    assert.are.equal("bfloat16", out.dtype)
    out:float():sum():backward()
    assert.are.equal("float32", input.grad.dtype)
    assert.are.same({ 2, 2, 2 }, input.grad:totable())
    local b = ember.autocast("bfloat16", function()
      return ember.baddbmm(ember.randn(1, 3), ember.randn(2, 2, 4), ember.randn(2, 4, 3))
    end)
    assert.are.equal("bfloat16", b.dtype)
    -- outside autocast nothing changes
    assert.are.equal("float32", ember.addmm(ember.randn(3), m1, m2).dtype)
  end)

  -- torch: "if beta is 0, input is ignored, and nan and inf in it are not
  -- propagated". ember computed input * 0, so a NaN input made the result NaN.
  it("ignore input when beta = 0 (its NaN and inf do not propagate; its gradient is zeros)", function()
    local input = ember.tensor({ { 0 / 0, math.huge }, { -math.huge, 1 } }, F64):requires_grad_()
    local a, b = ember.randn(2, 3, F64), ember.randn(3, 2, F64)
    local out = ember.addmm(input, a, b, { beta = 0 })
    assert.is_true((out - a:matmul(b)):abs():max():item() < 1e-12)
    out:sum():backward()
    assert.are.same({ { 0, 0 }, { 0, 0 } }, input.grad:totable())
    local bb = ember.baddbmm(ember.full({ 2, 2 }, 0 / 0, F64), ember.randn(3, 2, 4, F64), ember.randn(3, 4, 2, F64),
      { beta = 0, alpha = 2 })
    assert.is_false(bb:isnan():any():item())
  end)

  -- torch refuses an input larger than the product ([3, 2, 2] for a
  -- [2, 2] product); ember broadcast it silently to [3, 2, 2].
  it("refuse an input that does not broadcast to the product's shape, at the user's line", function()
    raises_here(function() local _ = ember.addmm(ember.randn(3, 2, 2), ember.randn(2, 3), ember.randn(3, 2)) end,
      "ember.addmm: input [3, 2, 2] does not broadcast to the product's shape [2, 2]")
    raises_here(function() local _ = ember.addmm(ember.randn(3), ember.randn(2, 3), ember.randn(3, 2)) end,
      "ember.addmm: input [3] does not broadcast")
    raises_here(function() local _ = ember.addmm(ember.randn(2), ember.randn(2, 3), 5) end, "mat2")
    assert.are.same({ 2, 2 }, ember.addmm(ember.randn(2, 1), ember.randn(2, 3), ember.randn(3, 2)).shape)
  end)
end)
