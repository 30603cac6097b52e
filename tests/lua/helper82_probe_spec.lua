-- helper82's probes of torch's tensor ops: masked_scatter, nanmedian,
-- quantile / nanquantile, mode, histc, scatter_reduce and index_reduce
-- against PyTorch 1.13 (tests/gen_helper82_fixtures.py writes
-- tests/fixtures/ops_helper82.lua), float64 gradchecks, and the errors.
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"
local error_of = require("tests.lua.helpers.parity").error_of
local fx = dofile("tests/fixtures/ops_helper82.lua")

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

describe("helper82: PyTorch 1.13 values (tests/fixtures/ops_helper82.lua)", function()
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

describe("helper82: float64 gradcheck", function()
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

describe("helper82: edge cases", function()
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

describe("helper82: errors name the op at the caller's line", function()
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
      assert.matches("helper82_probe_spec.lua:%d+:", msg)
    end)
  end
end)
