-- The everyday helpers of lua/ember/_helpers.lua (triu/tril, eye, *_like,
-- sort/argsort/topk, std, norm, all/any, isnan/isinf/isfinite, equal/allclose, cumsum,
-- masked_select, flip, roll, mm/dot/outer, square, reciprocal, logsumexp,
-- amax/amin, unbind, tile, uniform_/normal_), ember.einsum (lua/ember/_einsum.lua),
-- ember.Size and Torch7 table indexing:
-- float64 gradchecks on contiguous and non-contiguous inputs, values of the
-- non-differentiable ones, and errors (which must point at this file's
-- line, not into the library). PyTorch parity of the differentiable ones is
-- in ops_parity_spec.lua (tests/fixtures/ops_helpers.lua, ops_compat.lua,
-- ops_einsum.lua).
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"

local D64 = { dtype = "float64" }

local function noncontiguous(shape)
  local rev, perm = {}, {}
  local n = #shape
  for i = 1, n do rev[i] = shape[n + 1 - i]; perm[i] = n + 1 - i end
  return ember.randn(rev, D64):permute(perm):detach()
end

local function contiguous(shape) return ember.randn(shape, D64) end

local function same(t, want)
  assert.are.same(want, t:totable())
end

-- Runs f, which must fail; the message must carry every needle and point at
-- this file (the user's line), not at lua/ember/. The calls are not tail
-- calls (`local _ =`), which would take the caller's frame off the stack.
local function fails_here(f, ...)
  local ok, msg = pcall(f)
  assert.is_false(ok, "expected an error")
  assert(msg:find("helpers_spec.lua:%d+: "), "error not at the user's line: " .. msg)
  for _, needle in ipairs { ... } do
    assert(msg:find(needle, 1, true), ("message %q lacks %q"):format(msg, needle))
  end
  return msg
end

describe("helper gradchecks (float64)", function()
  local cases = {
    { "triu", { 4, 5 }, function(x) return x:triu(1) end },
    { "tril", { 2, 4, 3 }, function(x) return ember.tril(x, -1) end },
    { "sort", { 3, 5 }, function(x) return (x:sort(2, true)) end },
    { "topk", { 4, 6 }, function(x) return (x:topk(3)) end },
    { "std", { 3, 4 }, function(x) return x:std(2) end },
    { "std all", { 3, 4 }, function(x) return x:std() end },
    { "norm 2", { 3, 4 }, function(x) return x:norm() end },
    { "norm 3 dim", { 3, 4 }, function(x) return x:norm(3, 1, true) end },
    { "norm 1", { 3, 4 }, function(x) return x:norm(1, 2) end },
    { "norm inf", { 3, 4 }, function(x) return x:norm(math.huge, 2) end },
    { "cumsum", { 9, 3 }, function(x) return x:cumsum(1) end },
    { "cumsum last", { 2, 3, 5 }, function(x) return ember.cumsum(x, -1) end },
    { "masked_select", { 3, 4 }, function(x) return x:masked_select(ember.tensor { true, false, true, true }) end },
    { "flip", { 3, 4 }, function(x) return x:flip { 1, 2 } end },
    { "roll", { 3, 4 }, function(x) return x:roll({ 1, -1 }, { 1, 2 }) end },
    { "roll flat", { 3, 4 }, function(x) return x:roll(5) end },
    { "table index", { 3, 4 }, function(x) return x[{ { 2, 3 }, -1 }] end },
    { "mm", { 3, 4 }, function(x) return x:mm(x:t()) end },
    { "dot", { 5 }, function(x) return x:dot(x:sin()) end },
    { "outer", { 4 }, function(x) return ember.outer(x, x:narrow(1, 2, 3)) end },
    { "square", { 3, 4 }, function(x) return x:square() end },
    { "reciprocal", { 3, 4 }, function(x) return (x:abs() + 0.5):reciprocal() end },
    { "logsumexp", { 3, 4 }, function(x) return x:logsumexp(2) end },
    { "logsumexp keepdim", { 2, 3, 4 }, function(x) return ember.logsumexp(x * 20, 1, true) end },
    { "amax", { 3, 4 }, function(x) return x:amax(1) end },
    { "amin keepdim", { 3, 4 }, function(x) return x:amin(-1, true) end },
    { "unbind", { 3, 4 }, function(x) local u = x:unbind(2) return u[1] * u[4] + u[2] end },
    { "tile", { 2, 3 }, function(x) return x:tile(2, 1, 2) end },
    { "tile fewer reps", { 2, 1, 3 }, function(x) return x:tile { 3 } end },
  }
  for _, c in ipairs(cases) do
    local name, shape, f = c[1], c[2], c[3]
    it(name, function()
      gradcheck.check(f, { contiguous(shape) }, { name = name })
      gradcheck.check(f, { noncontiguous(shape) }, { name = name .. " (non-contiguous)" })
    end)
  end
end)

describe("helper values", function()
  it("eye and *_like", function()
    same(ember.eye(2), { { 1, 0 }, { 0, 1 } })
    same(ember.eye(2, 3, { dtype = "int64" }), { { 1, 0, 0 }, { 0, 1, 0 } })
    assert.are.equal("int64", ember.eye(2, { dtype = "int64" }).dtype)
    local x = ember.randn(2, 3, D64)
    local z = ember.zeros_like(x)
    assert.are.equal("float64", z.dtype)
    assert.are.equal(ember.Size { 2, 3 }, z.shape)
    same(ember.ones_like(x, { dtype = "int64" }), { { 1, 1, 1 }, { 1, 1, 1 } })
    same(ember.full_like(x, 7):long(), { { 7, 7, 7 }, { 7, 7, 7 } })
    assert.are.equal("float64", ember.rand_like(x).dtype)
    assert.are.equal(ember.Size { 2, 3 }, ember.randn_like(x).shape)
  end)

  it("triu/tril on int64 and bool, causal masks", function()
    same(ember.ones(3, 3, { dtype = "int64" }):triu(1), { { 0, 1, 1 }, { 0, 0, 1 }, { 0, 0, 0 } })
    same(ember.ones(2, 3, { dtype = "bool" }):tril(), { { true, false, false }, { true, true, false } })
  end)

  it("sort is stable, NaN last, indices 1-based", function()
    local v, i = ember.tensor { 3, 1, 2, 1, 0 / 0 }:sort()
    same(i, { 2, 4, 3, 1, 5 })
    assert(v[5]:item() ~= v[5]:item())
    local _, j = ember.tensor { 3, 1, 2, 1 }:sort(true)
    same(j, { 1, 3, 2, 4 })
    same(ember.tensor({ 5, 9, 7 }, { dtype = "int64" }):argsort(), { 1, 3, 2 })
    same(ember.argsort(ember.tensor { { 2, 1 }, { 0, 3 } }, 1), { { 2, 1 }, { 1, 2 } })
    local tv, ti = ember.tensor { 4, 8, 1, 6 }:topk(2)
    same(tv, { 8, 6 }); same(ti, { 2, 4 })
  end)

  it("all, any, isnan, isinf, isfinite", function()
    local x = ember.tensor { { 1, 0 }, { 2, 3 } }
    assert.is_false(x:all():item() == 1)
    same(x:all(2), { false, true })
    same(x:any(1), { true, true })
    same(ember.any(ember.zeros(2), 1, true), { false })
    assert.are.equal("bool", x:all().dtype)
    local y = ember.tensor { 0 / 0, math.huge, -math.huge, 1 }
    same(y:isnan(), { true, false, false, false })
    same(y:isinf(), { false, true, true, false })
    same(y:isfinite(), { false, false, false, true })
    same(ember.isnan(ember.tensor({ 1 }, { dtype = "int64" })), { false })
  end)

  it("equal and allclose, as torch.equal and torch.allclose", function()
    local a = ember.tensor { { 1, 2 }, { 3, 4 } }
    assert.is_true(ember.equal(a, a:clone()))
    assert.is_true(a:equal(ember.tensor { { 1, 2 }, { 3, 4 } }))
    assert.is_false(a:equal(ember.tensor { 1, 2, 3, 4 }))            -- another shape
    assert.is_false(a:equal(a + 1e-6))
    assert.is_false(ember.tensor { 0 / 0 }:equal(ember.tensor { 0 / 0 }))
    assert.is_true(ember.equal(ember.zeros(0), ember.zeros(0)))
    assert.is_true(a:allclose(a + 1e-6, 1e-5))                        -- |d| <= atol + rtol |b|
    assert.is_false(a:allclose(a + 1e-3))
    assert.is_true(ember.allclose(a, a + 1e-3, { atol = 1e-2 }))
    assert.is_true(ember.allclose(a:bfloat16(), a))                   -- dtypes compared in float64
    assert.is_true(ember.allclose(ember.tensor { 1, 1 }, ember.tensor { 1 })) -- broadcast
    local inf = ember.tensor { math.huge, -math.huge, 0 / 0 }
    assert.is_false(inf:allclose(inf))
    assert.is_true(inf:allclose(inf, { equal_nan = true }))
    assert.has_error(function() a:allclose(a, -1) end, "ember.allclose: rtol must be a number >= 0, got -1")
    assert.has_error(function() a:allclose(a, { tol = 1 }) end,
      "ember.allclose: unknown option 'tol' (expected rtol, atol, equal_nan)")
    assert.has_error(function() ember.equal(a, 1) end, "ember.equal: argument 2 must be a tensor, got number")
    local c = ember.tensor({ 1, 2, 0 / 0 }):isclose(ember.tensor { 1, 2.1, 0 / 0 })
    assert.are.equal("bool", c.dtype)
    same(c, { true, false, false })
    same(ember.isclose(ember.tensor { 0 / 0 }, ember.tensor { 0 / 0 }, { equal_nan = true }), { true })
  end)

  it("pad: values by hand, and errors", function()
    local x = ember.tensor { 1, 2, 3 }
    same(ember.pad(x, { 2, 1 }), { 0, 0, 1, 2, 3, 0 })
    same(ember.pad(x, { 1, 1 }, { value = -1 }), { -1, 1, 2, 3, -1 })
    same(ember.pad(x, { -1, 0 }), { 2, 3 })
    same(ember.pad(x, { 2, 2 }, "reflect"), { 3, 2, 1, 2, 3, 2, 1 })
    same(ember.pad(x, { 2, 2 }, "replicate"), { 1, 1, 1, 2, 3, 3, 3 })
    same(ember.pad(x, { 3, 2 }, "circular"), { 1, 2, 3, 1, 2, 3, 1, 2 })
    -- a (0, 0) pair leaves its dim alone, even one of size 1 that reflect could not pad (torch.nn.functional.pad)
    local row = ember.tensor { { 1, 2, 3 } }
    for _, mode in ipairs { "reflect", "circular", "replicate" } do
      same(ember.pad(row, { 1, 1, 0, 0 }, mode):select(1, 1), ember.pad(x, { 1, 1 }, mode):totable())
    end
    assert.has_error(function() ember.pad(x, { 1 }) end,
      "ember.pad: pad must list (left, right) pairs for at most the 1 dims of the input, got 1 numbers")
    assert.has_error(function() ember.pad(x, { 3, 0 }, "reflect") end,
      "ember.pad: reflect padding of (3, 0) needs more elements in dim 1 than its 3")
    assert.has_error(function() ember.pad(x, { 1, 1 }, "edge") end,
      "ember.pad: mode must be \"constant\", \"reflect\", \"replicate\" or \"circular\", got edge")
    assert.has_error(function() ember.pad(x, { -2, -2 }) end, "ember.pad: cropping 4 of dim 1's 3 elements")
  end)

  it("prod, cumprod and repeat_interleave: edge cases and errors", function()
    same(ember.tensor({ true, true }):prod(), 1)
    assert.are.equal("int64", ember.tensor({ true, false }):prod().dtype)
    same(ember.zeros(2, 0):prod(2), { 1, 1 })
    same(ember.zeros(0):prod(), 1)
    same(ember.tensor({ 2, 3, 4 }, { dtype = "int64" }):cumprod(1), { 2, 6, 24 })
    same(ember.tensor({ { 1, 2 }, { 3, 4 } }):repeat_interleave(2), { 1, 1, 2, 2, 3, 3, 4, 4 })
    same(ember.tensor({ 5, 6 }):repeat_interleave(ember.tensor({ 0, 2 }, { dtype = "int64" })), { 6, 6 })
    assert.are.same(ember.Size { 0, 2 }, ember.ones(2, 2):repeat_interleave(0, 1).shape)
    assert.has_error(function() ember.ones(3):repeat_interleave({ 1, 2 }) end,
      "ember.repeat_interleave: repeats has 2 counts for 3 slices along dim 1")
    assert.has_error(function() ember.ones(3):repeat_interleave(-1) end, "ember.repeat_interleave: repeats must be >= 0, got -1")
    assert.has_error(function() ember.ones(3):cumprod() end, "ember.cumprod: dim is required (1-based; -1 is the last)")
    assert.has_error(function() ember.ones(3):prod(2) end,
      "ember.prod: dim 2 is out of range for a tensor with 1 dims (expected 1..1 or -1..-1)")
  end)

  it("cumsum of int64 and bool, flip, roll, masked_select", function()
    same(ember.tensor({ 1, 2, 3 }, { dtype = "int64" }):cumsum(1), { 1, 3, 6 })
    local c = ember.tensor { true, false, true }:cumsum(1)
    assert.are.equal("int64", c.dtype); same(c, { 1, 1, 2 })
    same(ember.arange(1, 5):flip(1):long(), { 4, 3, 2, 1 })
    same(ember.arange(1, 7):view(2, 3):roll(1, 2):long(), { { 3, 1, 2 }, { 6, 4, 5 } })
    same(ember.arange(1, 5):roll(-1):long(), { 2, 3, 4, 1 })
    same(ember.tensor { { 1, 2 }, { 3, 4 } }:masked_select(ember.tensor { { true }, { false } }):long(), { 1, 2 })
    assert.are.equal(ember.Size { 0 }, ember.ones(3):masked_select(ember.zeros(3, { dtype = "bool" })).shape)
  end)

  it("products and conveniences: mm, dot, outer, logsumexp, unbind, tile, ...", function()
    local a = ember.tensor { { 1, 2 }, { 3, 4 } }
    same(a:mm(a):long(), { { 7, 10 }, { 15, 22 } })
    same(a:view(1, 2, 2):bmm(a:view(1, 2, 2)):long(), { { { 7, 10 }, { 15, 22 } } })
    assert.are.equal(32, ember.tensor({ 1, 2, 3 }):dot(ember.tensor { 4, 5, 6 }):item())
    same(ember.tensor({ 1, 2 }):outer(ember.tensor { 1, 2, 3 }):long(), { { 1, 2, 3 }, { 2, 4, 6 } })
    local r = ember.tensor({ 1, 2, 4 }, { dtype = "int64" }):reciprocal()
    assert.are.equal("float32", r.dtype); same(r, { 1, 0.5, 0.25 })
    -- large values do not overflow; a row of -inf stays -inf
    local l = ember.tensor { { 1000, 1000 }, { -math.huge, -math.huge } }:logsumexp(2)
    assert(math.abs(l[1]:item() - (1000 + math.log(2))) < 1e-3, tostring(l))
    assert.are.equal(-math.huge, l[2]:item())
    same(a:amax(), 4); same(a:amax(1):long(), { 3, 4 }); same(a:amin(2, true):long(), { { 1 }, { 3 } })
    local u = a:unbind()
    assert.are.equal(2, #u); same(u[2]:long(), { 3, 4 })
    u[1]:fill_(0) -- views
    same(a:long(), { { 0, 0 }, { 3, 4 } })
    same(ember.tensor({ 1, 2 }):tile(2, 2):long(), { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } })
    assert.are.equal(ember.Size { 0, 3 }, ember.ones(2, 3):tile(0, 1).shape)
    assert.are.equal(ember.Size { 3, 2, 2 }, a:expand_as(ember.zeros(3, 2, 2)).shape)
    assert.are.equal(ember.Size { 4 }, a:view_as(ember.zeros(4)).shape)
    assert.are.equal("float64", a:type_as(ember.zeros(1, D64)).dtype)
    assert.are.equal(4, a:nelement())
  end)

  it("linspace and randint", function()
    same(ember.linspace(0, 1, 5), { 0, 0.25, 0.5, 0.75, 1 })
    same(ember.linspace(2, -2, 3, { dtype = "float64" }), { 2, 0, -2 })
    assert.are.equal(ember.Size { 0 }, ember.linspace(0, 1, 0).shape)
    same(ember.linspace(3, 9, 1), { 3 })
    local x = ember.linspace(-1, 1, 101, { dtype = "float64" })
    assert.are.equal(1, x[101]:item()); assert.are.equal(-1, x[1]:item()); assert.are.equal(0, x[51]:item())
    ember.manual_seed(5)
    local r = ember.randint(-3, 4, { 2000 })
    assert.are.equal("int64", r.dtype)
    assert.are.equal(-3, r:min():item()); assert.are.equal(3, r:max():item())
    assert.are.equal(ember.Size { 2, 3 }, ember.randint(10, { 2, 3 }).shape)
    ember.manual_seed(5)
    same(ember.randint(-3, 4, { 2000 }), r:totable())
    fails_here(function() local _ = ember.linspace(0, 1, -1) end, "ember.linspace", "steps")
    fails_here(function() local _ = ember.randint(5, 5, { 2 }) end, "ember.randint", "greater than low")
    fails_here(function() local _ = ember.randint(5, "x") end, "ember.randint", "shape must be a table")
    fails_here(function() local _ = ember.linspace(0, 1, 3, 64) end, "ember.linspace", "options table")
    fails_here(function() local _ = ember.randint(5, { 2 }, 7) end, "ember.randint", "options table")
  end)

  it("tensor methods are functions of ember too, as torch.exp(x) is", function()
    local x = ember.tensor { { 1, -2 }, { 3, 4 } }
    same(ember.exp(x), x:exp():totable())
    same(ember.sum(x, 2):long(), { -1, 7 })
    local v, i = ember.max(x, 1)
    same(v:long(), { 3, 4 }); same(i, { 2, 2 })
    same(ember.transpose(x, 1, 2):long(), { { 1, 3 }, { -2, 4 } })
    same(ember.relu(x):long(), { { 1, 0 }, { 3, 4 } })
    assert.are.equal(#ember.split(ember.ones(5), 2), 3)
    assert(ember.help(ember.exp):find("Tensor:exp", 1, true), "help shows the method's entry")
    fails_here(function() local _ = ember.sum(x, 5) end, "ember.sum", "dim 5")
  end)

  it("uniform_ and normal_ fill parameters in place", function()
    local w = ember.zeros(1000, D64)
    w.requires_grad = true
    assert.are.equal(w, w:uniform_(-0.5, 0.25))
    assert(w:min():item() >= -0.5 and w:max():item() < 0.25, "out of [-0.5, 0.25)")
    assert(w:std():item() > 0.15, "not spread over the range")
    assert.is_true(w.requires_grad)
    local n = ember.zeros(20000):normal_(3, 2)
    assert(math.abs(n:mean():item() - 3) < 0.1 and math.abs(n:std():item() - 2) < 0.1, "mean/std")
    same(ember.zeros(2):normal_(5, 0), { 5, 5 })
  end)

  it("errors name the helper, say what is allowed, and point at the caller", function()
    fails_here(function() local _ = ember.ones(2, 2):mm(ember.ones(3, 3)) end, "ember.mm", "[2, 2] and [3, 3]")
    fails_here(function() local _ = ember.ones(2, 2, 2):mm(ember.ones(2, 2)) end, "ember.mm", "must have 2 dims")
    fails_here(function() local _ = ember.ones(2):dot(ember.ones(3)) end, "ember.dot", "lengths differ")
    fails_here(function() local _ = ember.ones(2):logsumexp() end, "ember.logsumexp", "dim is required")
    fails_here(function() local _ = ember.ones(2):tile(-1) end, "ember.tile", "integer >= 0")
    fails_here(function() local _ = ember.ones(2, { dtype = "int64" }):uniform_() end, "uniform_", "floating-point")
    fails_here(function() local _ = ember.ones(2):uniform_(1, 0) end, "uniform_", "a <= b")
    fails_here(function() local _ = ember.ones(2):normal_(0, -1) end, "normal_", "std >= 0")
    fails_here(function() local _ = ember.ones(2):expand_as(3) end, "expand_as", "must be a tensor")
    fails_here(function() local _ = ember.ones(3):triu() end, "ember.triu", "at least 2 dims")
    fails_here(function() local _ = ember.ones(2, 2):triu(0.5) end, "ember.triu", "diagonal must be an integer")
    fails_here(function() local _ = ember.ones(2, 3):sort(3) end, "ember.sort", "dim 3", "-2..-1")
    fails_here(function() local _ = ember.ones(2, 3):sort(0) end, "dims are 1-based")
    fails_here(function() local _ = ember.ones(2, 3):topk(4) end, "ember.topk", "0..3")
    fails_here(function() local _ = ember.ones(2, { dtype = "int64" }):norm() end, "ember.norm", "float tensor")
    fails_here(function() local _ = ember.ones(2):norm("nuc") end, "ember.norm", "p must be")
    fails_here(function() local _ = ember.ones(2):cumsum() end, "ember.cumsum", "dim is required")
    fails_here(function() local _ = ember.ones(2):masked_select(ember.ones(2)) end, "ember.masked_select", "bool")
    fails_here(function() local _ = ember.ones(2, 3):masked_select(ember.ones(4, { dtype = "bool" })) end,
      "do not broadcast")
    fails_here(function() local _ = ember.ones(2, 3):flip { 1, 1 } end, "ember.flip", "twice")
    fails_here(function() local _ = ember.ones(2, 3):roll({ 1, 2 }, 1) end, "ember.roll", "same length")
    fails_here(function() local _ = ember.eye(-1) end, "ember.eye", ">= 0")
    fails_here(function() local _ = ember.zeros_like(3) end, "ember.zeros_like", "must be a tensor")
    fails_here(function() local _ = ember.full_like(ember.ones(1), "x") end, "ember.full_like", "number")
  end)
end)

describe("ember.Size", function()
  it("prints, indexes, compares, has a length", function()
    local x = ember.zeros(2, 3)
    assert.are.equal("ember.Size{2, 3}", tostring(x.shape))
    assert.are.equal("ember.Size{2, 3}", tostring(x:size()))
    assert.are.equal("ember.Size{}", tostring(ember.zeros({}).shape))
    assert.are.equal(3, x.shape[2])
    assert.are.equal(2, #x.shape)
    assert.is_true(x.shape == ember.Size { 2, 3 })
    assert.is_true(x:size() == ember.Size(2, 3))
    assert.is_true(x.shape == { 2, 3 })
    assert.is_false(x.shape == ember.Size { 3, 2 })
    assert.is_false(x.shape == ember.Size { 2, 3, 1 })
    assert.are.equal(6, x.shape:numel())
    assert.are.equal(ember.Size, getmetatable(x.shape))
    assert.are.equal(ember.Size { 2, 3 }, ember.ones(x.shape).shape) -- a shape argument
    assert.are.same({ 2, 3 }, { table.unpack(x.shape) })
  end)
end)

describe("Torch7 table indexing", function()
  local x
  before_each(function() x = ember.arange(1, 13):view(3, 4) end)

  it("reads numbers, ranges, single ranges and {}", function()
    assert.are.equal(7, x[{ 2, 3 }]:item())
    assert.are.equal(0, x[{ 2, 3 }]:dim())
    same(x[{ { 1, 2 }, {} }], { { 1, 2, 3, 4 }, { 5, 6, 7, 8 } })
    same(x[{ {}, { 2, 3 } }], { { 2, 3 }, { 6, 7 }, { 10, 11 } })
    same(x[{ { 3 }, -1 }], { 12 })
    same(x[{ -1, { -2, -1 } }], { 11, 12 })
    same(x[{ 2 }], { 5, 6, 7, 8 })
    same(x[{}], x:totable())
    same(x[{ { 2, 1 } }], {}) -- an empty range, as a..a-1
  end)

  it("assigns numbers and tensors into the view", function()
    x[{ 1, { 2, 3 } }] = 0
    x[{ {}, 4 }] = ember.tensor { -1, -2, -3 }
    x[{ 3, 1 }] = 99
    same(x, { { 1, 0, 0, -1 }, { 5, 6, 7, -2 }, { 99, 10, 11, -3 } })
  end)

  it("is an error, at the user's line, never a silent nil", function()
    fails_here(function() local _ = x[{ 4, 1 }] end, "out of range")
    fails_here(function() local _ = x[{ 1, 2, 3 }] end, "3 indices for a tensor with 2 dims")
    fails_here(function() local _ = x[{ { 1, 5 } }] end, "range {1, 5} is out of range")
    fails_here(function() local _ = x[{ { 1, 2, 3 } }] end, "a range is {}, {a} or {a, b}")
    fails_here(function() local _ = x[{ "a" }] end, "must be a number, a range table or an int64 tensor")
    fails_here(function() local _ = x[{ a = 1 }] end, "a table index is a list")
    fails_here(function() x[{ 1, 1 }] = "x" end, "value must be a number or a tensor")
    fails_here(function() local _ = x[true] end, "cannot index a tensor with a boolean")
  end)
end)

describe("listings print readably", function()
  local function readable(v)
    local s = tostring(v)
    assert(not s:find("table: 0x"), "prints an address: " .. s)
    return s
  end

  it("attention_variants, plugin_search_path, split, chunk", function()
    local s = readable(ember.attention_variants())
    assert(s:find("standard", 1, true) and s:find("options: kernel", 1, true), s)
    local one = readable(ember.attention_variants("standard"))
    assert(one:find('name = "standard"', 1, true), one)
    readable(ember.plugin_search_path())
    assert.are.equal("{tensor(shape=[2], dtype=float32, device=cpu), tensor(shape=[1], dtype=float32, device=cpu)}",
      readable(ember.ones(3):split(2)))
    readable(ember.ones(4):chunk(2))
    assert.are.equal("{3, 1}", readable(ember.zeros(2, 3):stride()))
    readable(ember.plugins())
    assert(readable(ember.cpu_info()):find("float32 = ", 1, true))
    assert(readable(ember.attention_routes()):find("fused = ", 1, true))
    assert(readable(ember.memory_stats()):find("in_use = ", 1, true))
    assert.are.equal('{1, "a", {k = 2}}', require("ember._listing").repr { 1, "a", { k = 2 } })
  end)

  it("a wrapped listing keeps errors at the user's line", function()
    fails_here(function() local _ = ember.ones(3):split(0) end, "ember.split")
    fails_here(function() local _ = ember.attention_variants("nope") end, "nope")
  end)
end)

describe("einsum gradchecks (float64)", function()
  local cases = {
    { "attention scores", "bhqd,bhkd->bhqk", { 2, 2, 3, 4 }, { 2, 2, 5, 4 } },
    { "attention values", "bhqk,bhkd->bhqd", { 1, 2, 3, 5 }, { 1, 2, 5, 4 } },
    { "implicit output", "ij,jk", { 3, 4 }, { 4, 2 } },
    { "three operands", "bn,anm,bm->ba", { 2, 3 }, { 4, 3, 2 }, { 2, 2 } },
    { "diagonal", "ii->i", { 4, 4 } },
    { "trace", "ii", { 3, 3 } },
    { "ellipsis broadcast", "...ij,...jk->...ik", { 2, 3, 4 }, { 4, 2 } },
    { "size-1 broadcast", "ij,ij->ij", { 3, 1 }, { 1, 4 } },
    { "size-1 broadcast by a later operand", "ij,jk,ik->ik", { 1, 2 }, { 2, 3 }, { 4, 3 } },
    { "sum and permute", "ijk->kj", { 2, 3, 4 } },
  }
  for _, c in ipairs(cases) do
    local name, eq = c[1], c[2]
    local shapes = { table.unpack(c, 3) }
    it(name .. " " .. eq, function()
      local f = function(...) return ember.einsum(eq, ...) end
      local a, b = {}, {}
      for i, sh in ipairs(shapes) do a[i], b[i] = contiguous(sh), noncontiguous(sh) end
      gradcheck.check(f, a, { name = name })
      gradcheck.check(f, b, { name = name .. " (non-contiguous)" })
    end)
  end
end)

describe("einsum values", function()
  it("is matmul, outer, trace and transpose where it should be", function()
    local a, b = ember.randn(3, 4, D64), ember.randn(4, 2, D64)
    assert.are.equal(0, (ember.einsum("ij,jk->ik", a, b) - a:matmul(b)):abs():max():item())
    assert.are.same({ { 3, 4 }, { 6, 8 } }, ember.einsum("i,j->ij", ember.tensor { 1, 2 }, ember.tensor { 3, 4 }):totable())
    assert.are.equal(6, ember.einsum("ii", ember.eye(3) * 2):item())
    assert.are.same({ 2, 3 }, ember.einsum("ij->ji", ember.zeros(3, 2)).shape)
    assert.are.same({ 4, 3 }, ember.einsum("ba,Ab", ember.zeros(2, 3), ember.zeros(4, 2)).shape) -- 'A' before 'a'
    assert.are.same({ 5, 2, 4 }, ember.einsum("...ij,...jk->...ik", ember.zeros(5, 2, 3), ember.zeros(3, 4)).shape)
    assert.are.same({ 2, 4 }, ember.einsum("ij,jk->ik", { ember.zeros(2, 3), ember.zeros(3, 4) }).shape) -- a list, as torch
    local x = ember.arange(1, 7, D64):view(2, 3)
    assert.are.same({ 5, 7, 9 }, ember.einsum("ij->j", x):totable())
    assert.are.same({ 6, 15 }, ember.einsum("...j->...", x):totable())
  end)
end)

describe("einsum errors", function()
  local function fails_with(needle, f) fails_here(f, needle) end
  local a = ember.zeros(2, 3)
  it("names what is wrong", function()
    fails_with("ember.einsum: subscript 'j' has size 4 in operand 2 but 3 in operand 1",
      function() local _ = ember.einsum("ij,jk->ik", a, ember.zeros(4, 5)) end)
    fails_with("'ij,jk->ik' names 2 operands, but 1 was given", function() local _ = ember.einsum("ij,jk->ik", a) end)
    fails_with("'$' is not a subscript", function() local _ = ember.einsum("i$j", a) end)
    fails_with("the output names 'i' twice", function() local _ = ember.einsum("ij->ii", a) end)
    fails_with("the output's 'k' is in no operand", function() local _ = ember.einsum("ij->k", a) end)
    fails_with("operand 1 has 2 dims (shape [2, 3]), but its subscripts 'ijk' name 3",
      function() local _ = ember.einsum("ijk", a) end)
    fails_with("operand 2 must be a tensor, got number", function() local _ = ember.einsum("ij,j", a, 3) end)
    fails_with("the equation must be a string", function() local _ = ember.einsum(a, a) end)
    fails_with("subscript 'i' is repeated in operand 1 over dims of sizes 2 and 3",
      function() local _ = ember.einsum("ii->i", a) end)
    fails_with("has '...' twice", function() local _ = ember.einsum("......->", a) end)
  end)
end)
