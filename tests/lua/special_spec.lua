-- The special functions a PyTorch user reaches for: atan, asin, acos,
-- erfinv, lgamma, digamma (core unary ops, core/include/ember_unary_rules.h)
-- and atan2, logcumsumexp (lua/ember/_special.lua). Their values and
-- gradients against PyTorch 1.13 are in ops_more_spec (the fixture
-- tests/fixtures/ops_special.lua); here: float64 gradchecks, the domain
-- edges (the torch 1.13 result in a comment), dtypes, and bad input.
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"
local raises_here = require("tests.lua.helpers.parity").raises_here

local F64 = { dtype = "float64" }

local function vals(t)
  local out = {}
  local flat = t:double():contiguous():view(-1)
  for i = 1, flat:numel() do out[i] = flat[i]:item() end
  return out
end

local function same(got, want, tol)
  assert.equals(#want, #got)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if w ~= w then assert(g ~= g, ("element %d is %s, expected nan"):format(i, tostring(g)))
    elseif w == math.huge or w == -math.huge then assert.equals(w, g)
    else assert(math.abs(g - w) <= (tol or 1e-12) * math.max(1, math.abs(w)),
      ("element %d is %.17g, expected %.17g"):format(i, g, w)) end
  end
end

local nan, inf = 0 / 0, math.huge

describe("special functions: gradients (float64 gradcheck)", function()
  it("atan, asin, acos, erfinv on (-1, 1)", function()
    local x = ember.tensor({ { -0.9, -0.4, 0.05 }, { 0.3, 0.7, 0.93 } }, F64)
    for _, f in ipairs { "atan", "asin", "acos", "erfinv" } do
      gradcheck.check(function(a) return a[f](a) end, { x:clone() })
    end
    gradcheck.check(function(a) return a:atan() end, { ember.tensor({ -30, -2, 4, 50 }, F64) })
  end)

  it("lgamma and digamma on both sides of 0, strided", function()
    local base = ember.tensor({ { -2.6, -1.3, -0.4 }, { 0.2, 1.7, 12.5 } }, F64)
    for _, f in ipairs { "lgamma", "digamma" } do
      gradcheck.check(function(a) return a[f](a) end, { base:t():detach() })
      gradcheck.check(function(a) return ember[f](a) end, { ember.tensor({ 30.5, 3.25, 0.6 }, F64) })
    end
  end)

  it("atan2 in every quadrant and broadcast", function()
    local y = ember.tensor({ { 1.5, -0.7, 0.3 }, { -2, 0.4, -0.05 } }, F64)
    local x = ember.tensor({ { 0.8, -1.2, -0.9 }, { -0.3, 2.5, 0.6 } }, F64)
    gradcheck.check(function(a, b) return ember.atan2(a, b) end, { y, x })
    gradcheck.check(function(a, b) return a:atan2(b) end, { ember.tensor({ { 1 }, { -2 } }, F64), ember.tensor({ -0.5, 3, 0.25 }, F64) })
  end)

  it("logcumsumexp along each dim, with a spread of 100", function()
    local x = ember.tensor({ { -100, 0.5, 1, -2, 3 }, { 2, -1, 0, 4, -0.5 } }, F64)
    gradcheck.check(function(a) return a:logcumsumexp(2) end, { x:clone() })
    gradcheck.check(function(a) return ember.logcumsumexp(a, 1) end, { x:clone() })
    gradcheck.check(function(a) return a:logcumsumexp(-1) end, { x:t():detach() })
  end)
end)

describe("special functions: domain edges as torch 1.13", function()
  it("asin, acos outside [-1, 1] are NaN; erfinv is +-inf at +-1", function()
    local x = ember.tensor({ -2, -1, 1, 2 }, F64)
    same(vals(x:asin()), { nan, -math.pi / 2, math.pi / 2, nan }) -- torch.asin: [nan, -1.5708, 1.5708, nan]
    same(vals(x:acos()), { nan, math.pi, 0, nan })
    same(vals(x:erfinv()), { nan, -inf, inf, nan }) -- torch.erfinv: [nan, -inf, inf, nan]
    same(vals(ember.tensor({ 1e-300, -0.5, 0.999999999 }, F64):erfinv()),
      { 8.86226925452758e-301, -0.4769362762044699, 4.320005388105362 }, 1e-15)
    -- (mpmath's; torch's last one is 4.320005383710253, 1e-9 off: Newton on erf, rounded near 1)
  end)

  it("lgamma and digamma at their poles", function()
    local x = ember.tensor({ 0, -0.0, -1, -2, 1, 2 }, F64)
    same(vals(x:lgamma()), { inf, inf, inf, inf, 0, 0 }) -- torch.lgamma: [inf, inf, inf, inf, 0, 0]
    -- torch.digamma: [-inf, inf, nan, nan, -0.5772156649015329, 0.42278433509846713]
    same(vals(x:digamma()), { -inf, inf, nan, nan, -0.5772156649015329, 0.42278433509846713 })
    same(vals(ember.tensor({ -0.5, 1e6 }, F64):digamma()), { 0.03648997397857639, 13.81551005796419 }) -- torch.digamma's
  end)

  it("atan2 keeps the signs of zeros and is exact on the axes", function()
    local y = ember.tensor({ 0, -0.0, 0, -0.0, 1, -1, 0, 5 }, F64)
    local x = ember.tensor({ -1, -1, 0, -0.0, 0, 0, 3, -5 }, F64)
    -- torch.atan2: [pi, -pi, 0, -pi, pi/2, -pi/2, 0, 3pi/4]
    same(vals(ember.atan2(y, x)), { math.pi, -math.pi, 0, -math.pi, math.pi / 2, -math.pi / 2, 0, 3 * math.pi / 4 })
    same(vals(ember.atan2(ember.tensor({ 1, -1 }, F64), -2)), { math.atan(1, -2), math.atan(-1, -2) })
  end)

  it("logcumsumexp is exact far from the maximum, and of -inf", function()
    -- torch.logcumsumexp([-800, 0, -inf], 0) = [-800, 0, 0] in float64
    same(vals(ember.tensor({ -800, 0, -inf }, F64):logcumsumexp(1)), { -800, 0, 0 })
    same(vals(ember.tensor({ -200, 0 }):logcumsumexp(1)), { -200, 0 }, 1e-6) -- float32 too
    same(vals(ember.tensor({ 1000, 1000 }):logcumsumexp(1)), { 1000, 1000 + math.log(2) }, 1e-6)
    local s = ember.tensor(2.5, F64):logcumsumexp(1)
    assert.equals(0, s:dim())
    assert.equals(2.5, s:item())
  end)
end)

describe("special functions: dtypes", function()
  it("float32, float64 and bfloat16 keep their dtype; int64 and bool compute in float32 as torch", function()
    for _, f in ipairs { "atan", "asin", "acos", "erfinv", "lgamma", "digamma" } do
      for _, dt in ipairs { "float32", "float64", "bfloat16" } do
        assert.equals(dt, ember.tensor({ 0.25, 0.5 }, { dtype = dt })[f](ember.tensor({ 0.25, 0.5 }, { dtype = dt })).dtype)
      end
      local i = ember.tensor({ 0, 1 }, { dtype = "int64" })
      local y = i[f](i)
      assert.equals("float32", y.dtype)
      same(vals(y), vals(ember.tensor({ 0, 1 })[f](ember.tensor({ 0, 1 }))))
      assert.equals("float32", ember[f](ember.tensor({ true, false }, { dtype = "bool" })).dtype)
    end
    -- the older float functions too: torch.exp(torch.arange(3)) is float32
    assert.equals("float32", ember.tensor({ 0, 1, 2 }, { dtype = "int64" }):exp().dtype)
    local y = ember.atan2(ember.tensor({ 1, -1 }, { dtype = "int64" }), ember.tensor({ 0, 1 }, { dtype = "int64" }))
    assert.equals("float32", y.dtype)
    same(vals(y), { math.pi / 2, -math.pi / 4 }, 1e-6)
  end)

  it("NumPy's names are the same functions", function()
    local x = ember.tensor({ -0.5, 0.25 }, F64)
    for alias, name in pairs { arctan = "atan", arcsin = "asin", arccos = "acos" } do
      assert.equals(x[name](x), x[alias](x))
      assert.equals(ember[name](x), ember[alias](x))
    end
    assert.equals(ember.atan2(x, x:flip(1)), x:arctan2(x:flip(1)))
    local y = x:clone()
    y:atan2_(ember.tensor({ -1, 1 }, F64))
    same(vals(y), { math.atan(-0.5, -1), math.atan(0.25, 1) })
  end)

  it("the in-place twins write back", function()
    local x = ember.tensor({ 0.5, -0.25 }, F64)
    assert.equals(x, x:atan_())
    same(vals(x), { math.atan(0.5), math.atan(-0.25) })
    local y = ember.tensor({ 3, 4.5 }, F64)
    y:lgamma_()
    same(vals(y), { math.log(2), math.log(11.631728396567448) })
  end)
end)

describe("special functions: bad input, at the caller's line", function()
  local x = ember.tensor({ 0.1, 0.2 }, F64)
  it("refuses what torch refuses", function()
    raises_here(function() local _ = ember.tensor({ 1, 2 }, { dtype = "int64" }):logcumsumexp(1) end,
      "ember.logcumsumexp: expected a float tensor, got int64")
    raises_here(function() local _ = x:logcumsumexp() end, "ember.logcumsumexp: missing dim")
    raises_here(function() local _ = x:logcumsumexp(2) end, "ember.logcumsumexp: dim 2 is out of range")
    raises_here(function() local _ = x:logcumsumexp(0) end, "ember.logcumsumexp: dim 0 is not a dim")
    raises_here(function() local _ = ember.atan2(x, "1") end, "ember.atan2: other must be a tensor, got string")
    raises_here(function() local _ = ember.atan2(2, x) end, "ember.atan2: input must be a tensor, got number")
    raises_here(function() local _ = ember.atan2(x, ember.zeros(3)) end, "ember.atan2: shapes [2] and [3] cannot be broadcast")
  end)

  it("a surplus argument to a unary op is an error, not ignored (torch: 'exp() takes no arguments (1 given)')", function()
    for _, f in ipairs { "atan", "asin", "acos", "erfinv", "lgamma", "digamma", "exp", "neg", "floor", "sign", "abs",
                         "sigmoid", "relu" } do
      raises_here(function() local _ = x[f](x, 2) end,
        ("ember.%s: takes no arguments besides the tensor, got 1 more (argument 2 is a number)"):format(f))
    end
    raises_here(function() local _ = ember.exp(x, x, 1) end, "ember.exp: takes no arguments besides the tensor, got 2 more (argument 2 is a userdata)")
    raises_here(function() local _ = x:atan(nil, 1) end, "ember.atan: takes no arguments besides the tensor, got 2 more")
    assert.equals("float64", x:atan(nil).dtype) -- trailing nils (forwarded optional arguments) do not count
  end)
end)
