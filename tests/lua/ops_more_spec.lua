-- The tensor functions of lua/ember/_functional_more.lua and the
-- activations and losses added to lua/ember/_functional.lua (hardtanh,
-- relu6, hardswish, hardsigmoid, mish, glu, kl_div, huber_loss) against
-- PyTorch 1.13 through the committed fixture tests/fixtures/ops_more.lua
-- (tests/gen_op_fixtures.py, more()): values and the gradients of
-- sum(out * w) in float64 (rtol 1e-12), float32 (1e-4) and bfloat16, with
-- contiguous and non-contiguous inputs, as functions and as methods; the
-- non-differentiable ones (nonzero, unique, bincount, searchsorted, ...)
-- value for value. Then edge cases written by hand (the torch result in a
-- comment) and one error per function, raised at the caller's line.
local ember = require "ember"
local raises_here = require("tests.lua.helpers.parity").raises_here

local CASES = dofile("tests/fixtures/ops_more.lua")
-- and the special functions (tests/gen_op_fixtures.py, special()): atan,
-- asin, acos, erfinv, lgamma, digamma, atan2, logcumsumexp
for name, c in pairs(dofile("tests/fixtures/ops_special.lua")) do
  assert(CASES[name] == nil, name)
  CASES[name] = c
end
local F64 = { dtype = "float64" }

-- EMBER_TEST_DEVICE (default "cpu") runs the fixture cases on another
-- device, e.g. "cuda" (a GPU or the emulated backend, build/backends/cuda/emu).
local DEVICE = os.getenv("EMBER_TEST_DEVICE") or "cpu"

-- Relative tolerance per dtype, of the tensor's scale (max |expected|):
-- an element small next to its neighbours is judged at the tensor's scale.
local RTOL = { float64 = 1e-12, float32 = 1e-4, bfloat16 = 4e-2 }
local TINY = { float64 = 1e-14, float32 = 1e-7, bfloat16 = 1e-3 }

-- bfloat16 is left out where its input rounding (2^-9 relative) moves a
-- value across a step: the remainders' quotients are kept only 0.1 away
-- from an integer, and sinh_small's inputs of 1e-3 round too coarsely for
-- their own gradient check (cosh - 1 ~ 1e-6 at bf16's 8 bits).
local NO_BF16 = { remainder = true, fmod = true, remainder_number = true, fmod_number = true }

-- PyTorch's float64 hardsigmoid backward multiplies by float32's 1/6
-- (1.0f / 6.0f), 3e-8 away from ember's exact 1/6.
local GRAD_RTOL = { hardsigmoid = { float64 = 1e-7 } }

local parity = require "tests.lua.helpers.parity"
local shape_of, flatten, flat = parity.nested_shape, parity.nested_values, parity.values

local function sstr(s) return "[" .. table.concat(s, ", ") .. "]" end

-- got (a tensor) against want (nested tables) at the tolerance of dtype (or rtol).
local function compare(what, got, want, dtype, rtol)
  assert(got ~= nil, what .. " is nil")
  assert(sstr(got.shape) == sstr(shape_of(want)),
    ("%s: shape %s, expected %s"):format(what, sstr(got.shape), sstr(shape_of(want))))
  assert(got.dtype == dtype, ("%s: dtype %s, expected %s"):format(what, got.dtype, dtype))
  assert(got.device:match("^%a+") == DEVICE:match("^%a+"), ("%s: on %s, expected %s"):format(what, got.device, DEVICE))
  local g, w = flat(got:double()), flatten(want)
  local scale = 0
  for i = 1, #w do
    if w[i] == w[i] and math.abs(w[i]) ~= math.huge then scale = math.max(scale, math.abs(w[i])) end
  end
  rtol = rtol or RTOL[dtype]
  local atol = rtol * scale + TINY[dtype]
  for i = 1, #w do
    local ok
    if w[i] ~= w[i] then ok = g[i] ~= g[i]
    elseif math.abs(w[i]) == math.huge then ok = g[i] == w[i]
    else ok = math.abs(g[i] - w[i]) <= rtol * math.abs(w[i]) + atol end
    if not ok then
      error(("%s: element %d is %.17g, expected %.17g (scale %.3g, rtol %g)"):format(what, i, g[i], w[i], scale, rtol), 0)
    end
  end
end

-- The same values in a non-contiguous layout (dims reversed in memory, or
-- every other element of a longer buffer).
local function noncontiguous(t)
  if t:dim() == 0 or t:numel() < 2 then return t end
  if t:dim() >= 2 then
    local rev = {}
    for i = 1, t:dim() do rev[i] = t:dim() + 1 - i end
    local p = t:permute(rev):contiguous():permute(rev):detach()
    if not p:is_contiguous() then return p end
  end
  local p = ember.stack({ t, t }, -1):select(-1, 1):detach()
  assert(not p:is_contiguous())
  return p
end

-- args.call with "@k" replaced by input k, also inside nested tables.
local function resolve(v, I)
  if type(v) == "string" and v:sub(1, 1) == "@" then return assert(I[v:sub(2)], "no input " .. v) end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, e in pairs(v) do out[k] = resolve(e, I) end
  return out
end

local function invoke(A, I, as_method)
  local args = resolve(A.call, I)
  if as_method then
    local self = table.remove(args, 1)
    return self[A.fn](self, table.unpack(args, 1, #A.call - 1))
  end
  return ember[A.fn](table.unpack(args, 1, #A.call))
end

local function run_case(c, dtype, layout, as_method, name)
  local I = {}
  for k, v in pairs(c.inputs) do
    local t = ember.tensor(v, F64)
    if dtype ~= "float64" then t = t:to(dtype) end
    t = t:to(DEVICE)
    if layout == "non-contiguous" then t = noncontiguous(t) end
    I[k] = t:requires_grad_(true)
  end
  local out = invoke(c.args, I, as_method)
  local outs, wants, ws
  if ember.is_tensor(out) then outs, wants, ws = { out }, { c.out }, { c.w } else outs, wants, ws = out, c.out, c.w end
  assert(#outs == #wants, ("%d outputs, expected %d"):format(#outs, #wants))
  for k = 1, #outs do compare("output " .. k, outs[k], wants[k], dtype) end
  local loss
  for k = 1, #outs do
    local s = (outs[k] * ember.tensor(ws[k], F64):to(dtype):to(DEVICE)):sum()
    loss = loss and loss + s or s
  end
  loss:backward()
  for k, want in pairs(c.grads) do
    local g = I[k].grad
    if g == nil then
      for _, v in ipairs(flatten(want)) do assert(v == 0, "no gradient for input " .. k .. ", expected a non-zero one") end
    else
      compare("grad " .. k, g, want, dtype, name and GRAD_RTOL[name] and GRAD_RTOL[name][dtype])
    end
  end
end

-- {shape =, dtype =, data =} (no dtype: float64) as a tensor
local function from_flat(v)
  local o = { dtype = v.dtype or "float64", device = DEVICE }
  if #v.shape == 0 then return ember.tensor(v.data[1], o) end
  if #v.data == 0 then return ember.zeros(v.shape, o) end
  return ember.tensor(v.data, o):view(v.shape)
end

local function run_value_case(c, as_method)
  local I = {}
  for k, v in pairs(c.inputs) do I[k] = from_flat(v) end
  local outs = table.pack(invoke(c.args, I, as_method))
  if outs.n == 1 and type(outs[1]) == "table" and not ember.is_tensor(outs[1]) then outs = outs[1] end -- as_tuple
  assert(#outs == #c.outs, ("%d results, expected %d"):format(#outs, #c.outs))
  for k, want in ipairs(c.outs) do
    local got = outs[k]
    local dt = want.dtype or "float64"
    assert(sstr(got.shape) == sstr(want.shape), ("result %d: shape %s, expected %s"):format(k, sstr(got.shape), sstr(want.shape)))
    assert(got.dtype == dt, ("result %d: dtype %s, expected %s"):format(k, got.dtype, dt))
    assert(got.device:match("^%a+") == DEVICE:match("^%a+"), ("result %d: on %s"):format(k, got.device))
    local g = got:numel() > 0 and flat(got) or {}
    for i, w in ipairs(want.data) do
      local ok = g[i] == w or (dt == "float64" and math.abs(g[i] - w) <= 1e-12 * math.abs(w))
      assert(ok, ("result %d: element %d is %s, expected %s"):format(k, i, tostring(g[i]), tostring(w)))
    end
  end
end

describe("ops_more against PyTorch (tests/fixtures/ops_more.lua)", function()
  local names = {}
  for name in pairs(CASES) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local c = CASES[name]
    if c.value then
      it(name, function() run_value_case(c) end)
      if ember.Tensor[c.args.fn] then it(name .. " as a method", function() run_value_case(c, true) end) end
    else
      for _, dtype in ipairs { "float64", "float32" } do
        it(name .. " " .. dtype, function() run_case(c, dtype, nil, nil, name) end)
        it(name .. " " .. dtype .. " non-contiguous", function() run_case(c, dtype, "non-contiguous", nil, name) end)
      end
      if not NO_BF16[name] then it(name .. " bfloat16", function() run_case(c, "bfloat16", nil, nil, name) end) end
      if c.args.method then it(name .. " as a method", function() run_case(c, "float64", nil, true, name) end) end
    end
  end

  it("the comparison can fail: a perturbed value, gradient or input is rejected", function()
    local function copy(v)
      if type(v) ~= "table" then return v end
      local t = {}
      for k, e in pairs(v) do t[k] = copy(e) end
      return t
    end
    local c = CASES.lerp_tensor
    run_case(c, "float64")
    local bad = copy(c)
    bad.out[2][3] = bad.out[2][3] * (1 + 1e-11)
    local ok, err = pcall(run_case, bad, "float64")
    assert.is_false(ok)
    assert.matches("^output 1: element 7 is .* %(scale .*, rtol 1e%-12%)$", err)
    bad = copy(c)
    bad.grads.w[1][1] = bad.grads.w[1][1] + 1e-9
    assert.is_false(pcall(run_case, bad, "float64"))
    bad = copy(CASES.unique_inverse_counts)
    bad.outs[2].data[1] = bad.outs[2].data[1] % 3 + 1
    assert.is_false(pcall(run_value_case, bad))
  end)

  it("covers every function it lists", function()
    local seen = {}
    for _, c in pairs(CASES) do seen[c.args.fn] = true end
    for _, fn in ipairs { "clamp", "clamp_min", "clamp_max", "hardtanh", "relu6", "hardswish", "hardsigmoid", "mish",
                          "glu", "logit", "lerp", "addcmul", "addcdiv", "exp2", "log2", "log10", "sinh", "cosh", "tan",
                          "xlogy", "remainder", "fmod", "floor_divide", "nan_to_num", "kl_div", "huber_loss", "diag",
                          "trace", "diff", "mv", "movedim", "moveaxis", "swapaxes", "swapdims", "broadcast_to",
                          "hstack", "vstack", "dstack", "tensor_split", "count_nonzero", "nonzero", "argwhere",
                          "unique", "bincount", "searchsorted", "bucketize", "atan", "asin", "acos", "erfinv",
                          "lgamma", "digamma", "atan2", "logcumsumexp" } do
      assert(seen[fn], "no fixture case for " .. fn)
      assert(type(ember[fn]) == "function", "no ember." .. fn)
    end
  end)
end)

local function values(t) return t:numel() == 0 and {} or flat(t) end
local function dims(t)
  local d = {}
  for i = 1, t:dim() do d[i] = t:size(i) end
  return d
end

describe("ops_more edge cases (the PyTorch 1.13 result in a comment)", function()
  it("hardtanh and relu6 pass no gradient at their bounds, hardswish PyTorch's", function()
    local x = ember.tensor({ -1, 0, 1, 6 }, F64):requires_grad_(true)
    ember.hardtanh(x):sum():backward()
    assert.same({ 0, 1, 0, 0 }, values(x.grad)) -- F.hardtanh: [0, 1, 0, 0]
  end)

  it("relu6, hardsigmoid and hardswish at the kinks", function()
    local x = ember.tensor({ -3, 0, 3, 6 }, F64):requires_grad_(true)
    ember.relu6(x):sum():backward()
    assert.same({ 0, 0, 1, 0 }, values(x.grad)) -- F.relu6: [0, 0, 1, 0]
    x.grad = nil
    ember.hardsigmoid(x):sum():backward()
    assert.same({ 0, 1 / 6, 0, 0 }, values(x.grad)) -- F.hardsigmoid: [0, 0.1667, 0, 0]
    x.grad = nil
    ember.hardswish(x):sum():backward()
    -- F.hardswish on a tensor of 64 or more elements (its vectorised loop): -0.5, 0.5, 1, 1;
    -- on these 4 elements PyTorch's scalar loop gives 1.5 at 3: ember takes the former
    assert.same({ -0.5, 0.5, 1, 1 }, values(x.grad))
  end)

  it("sinh and cosh stay finite up to where PyTorch's do", function()
    local x = ember.tensor({ 710 }, F64)
    -- torch.sinh / torch.cosh (float64) at 710: 1.1170e+308
    assert.near(1.1169973830808557e308, ember.sinh(x):item(), 1e-12 * 1.117e308)
    assert.near(1.1169973830808557e308, ember.cosh(x):item(), 1e-12 * 1.117e308)
    assert.equal(-math.huge, ember.sinh(ember.tensor({ -711 }, F64)):item())
    assert.equal(0, ember.sinh(ember.tensor({ 0 }, F64)):item())
  end)

  it("integer tensors give float32 from the float functions", function()
    local i = ember.tensor({ 1, 2 }, { dtype = "int64" })
    for _, fn in ipairs { "exp2", "log2", "log10", "sinh", "cosh", "tan", "logit" } do
      assert.equal("float32", ember[fn](i).dtype, fn)
    end
    assert.same({ 2, 4 }, values(ember.exp2(i))) -- torch.exp2(tensor([1, 2])): [2., 4.] float32
    assert.equal("float32", ember.xlogy(i, i).dtype) -- torch.xlogy of int64s: float32
  end)

  it("xlogy: 0 where x = 0, NaN where y is NaN, and PyTorch's gradients at x = 0", function()
    local x = ember.tensor({ 0, 1, 0, 0 }, F64):requires_grad_(true)
    local y = ember.tensor({ 0, 0, 2, 0 / 0 }, F64):requires_grad_(true)
    local r = values(ember.xlogy(x, y))
    -- torch.xlogy: [0, -inf, 0, nan]
    assert.same({ 0, -math.huge, 0 }, { r[1], r[2], r[3] })
    assert.is_true(r[4] ~= r[4])
    ember.xlogy(x:narrow(1, 1, 3), y:narrow(1, 1, 3)):sum():backward()
    -- torch: x.grad [0, -inf, 0.6931], y.grad [nan, inf, 0]
    local gx, gy = values(x.grad), values(y.grad)
    assert.same({ 0, -math.huge }, { gx[1], gx[2] })
    assert.near(math.log(2), gx[3], 1e-15)
    assert.is_true(gy[1] ~= gy[1])
    assert.same({ math.huge, 0 }, { gy[2], gy[3] })
    -- y = inf at x = 0: torch.xlogy(0., inf) is 0
    assert.equal(0, ember.xlogy(ember.tensor({ 0 }, F64), ember.tensor({ math.huge }, F64)):item())
    -- a number either side: torch.xlogy(2, tensor([1., 2.])) is [0, 1.3863]
    assert.near(2 * math.log(2), ember.xlogy(2, ember.tensor({ 1, 2 }, F64)):totable()[2], 1e-15)
  end)

  it("remainder, fmod and floor_divide at infinities, zeros and signs", function()
    local a = ember.tensor({ 5, -5, 7, -7 }, F64)
    local b = ember.tensor({ math.huge, math.huge, -2, 2 }, F64)
    assert.same({ 5, math.huge, -1, 1 }, values(ember.remainder(a, b))) -- torch: [5, inf, -1, 1]
    assert.same({ 5, -5, 1, -1 }, values(ember.fmod(a, b))) -- torch: [5, -5, 1, -1]
    assert.same({ 0, -1, -4, -4 }, values(ember.floor_divide(a, b))) -- torch: [0, -1, -4, -4]
    local z = values(ember.fmod(ember.tensor({ 1 }, F64), 0))
    assert.is_true(z[1] ~= z[1]) -- torch.fmod(1., 0): nan
    assert.same({ math.huge, -math.huge }, values(ember.floor_divide(ember.tensor({ 1, -1 }, F64), 0))) -- [inf, -inf]
    -- a number first: torch.remainder(7, tensor([3., -3.])) is [1, -2]
    assert.same({ 1, -2 }, values(ember.remainder(7, ember.tensor({ 3, -3 }, F64))))
    -- int64 stays int64: torch.remainder(tensor([7, -7]), 3) is [1, 2]
    local r = ember.remainder(ember.tensor({ 7, -7 }, { dtype = "int64" }), 3)
    assert.equal("int64", r.dtype)
    assert.same({ 1, 2 }, values(r))
    -- floor_divide has no gradient, as PyTorch's
    local x = ember.tensor({ 7.5 }, F64):requires_grad_(true)
    assert.is_false(ember.floor_divide(x, 2).requires_grad)
  end)

  it("fmod, remainder and floor_divide of int64 stay exact past 2^53 (the C op, no float64 round trip)", function()
    local I64 = { dtype = "int64" }
    local big = ember.tensor({ 9007199254740993, -9007199254740993, math.maxinteger, math.mininteger }, I64)
    -- torch.remainder(tensor([2**53+1, -(2**53+1), 2**63-1, -2**63]), 2): [1, 1, 1, 0]
    assert.same({ 1, 1, 1, 0 }, big:remainder(2):totable())
    assert.same({ 1, -1, 1, 0 }, ember.fmod(big, 2):totable()) -- torch.fmod: [1, -1, 1, 0]
    -- torch.floor_divide(..., 2): [4503599627370496, -4503599627370497, 4611686018427387903, -4611686018427387904]
    assert.same({ 4503599627370496, -4503599627370497, 4611686018427387903, -4611686018427387904 },
      big:floor_divide(2):totable())
    -- a tensor divisor, negative and past 2^53: torch.remainder(tensor([2**53+1, 2**53+1]), tensor([-(2**53), -3]))
    -- is [-(2**53-1), 0], floor_divide [-2, -3002399751580331]
    local d = ember.tensor({ -9007199254740992, -3 }, I64)
    assert.same({ -9007199254740991, 0 }, ember.remainder(big:narrow(1, 1, 2):abs(), d):totable())
    assert.same({ -2, -3002399751580331 }, ember.floor_divide(big:narrow(1, 1, 2):abs(), d):totable())
    -- INT64_MIN % -1 is 0 (C's % traps there); div with rounding_mode trunc stays int64 and exact
    assert.same({ 0 }, ember.fmod(ember.tensor({ math.mininteger }, I64), -1):totable())
    local t = big:div(-2, "trunc")
    assert.equal("int64", t.dtype)
    assert.same({ -4503599627370496, 4503599627370496, -4611686018427387903, 4611686018427387904 }, t:totable())
    -- a number first: torch.remainder(2**53+1, tensor([2, -2])) is [1, -1]
    assert.same({ 1, -1 }, ember.remainder(9007199254740993, ember.tensor({ 2, -2 }, I64)):totable())
  end)

  it("fmod and remainder pass a float64 gradcheck (broadcast, numbers either side)", function()
    local gradcheck = require "tests.lua.helpers.gradcheck"
    -- quotients kept away from integers, where fmod jumps
    local a = ember.tensor({ { 5.3, -7.7, 2.45 }, { -0.35, 9.9, -4.1 } }, F64)
    local b = ember.tensor({ 1.3, 2.1, -0.7 }, F64)
    gradcheck.check(function(x, y) return ember.fmod(x, y) end, { a, b })
    gradcheck.check(function(x, y) return x:remainder(y) end, { a, b })
    gradcheck.check(function(x) return x:fmod(-1.3) end, { a })
    gradcheck.check(function(y) return ember.remainder(7.9, y) end, { b })
  end)

  it("nan_to_num's defaults are the dtype's extremes", function()
    local x = ember.tensor({ 0 / 0, math.huge, -math.huge, 1.5 }, F64)
    assert.same({ 0, 1.7976931348623157e308, -1.7976931348623157e308, 1.5 }, values(x:nan_to_num()))
    -- torch.nan_to_num(float32): [0, 3.4028234663852886e+38, -3.4028234663852886e+38, 1.5]
    assert.same({ 0, 3.4028234663852886e38, -3.4028234663852886e38, 1.5 }, values(x:float():nan_to_num()))
    -- bfloat16: [0, 3.3895e+38, -3.3895e+38, 1.5]
    assert.same({ 0, 3.3895313892515355e38, -3.3895313892515355e38, 1.5 }, values(x:bfloat16():nan_to_num()))
    assert.same({ 9, 1, 2, 1.5 }, values(ember.nan_to_num(x, 9, 1, 2)))
    assert.same({ 3, 1 }, values(ember.tensor({ 3, 1 }, { dtype = "int64" }):nan_to_num()))
  end)

  it("clamp with tensor bounds broadcasts; number bounds stay the C op", function()
    local x = ember.tensor({ 1, 5, 9 })
    -- torch.clamp(tensor([1., 5., 9.]), tensor([2., 2., 2.]), tensor(6.)): [2, 5, 6]
    assert.same({ 2, 5, 6 }, values(x:clamp(ember.full({ 3 }, 2), ember.tensor(6))))
    assert.same({ 2, 5, 9 }, values(x:clamp_min(2)))
    assert.same({ 1, 5, 6 }, values(ember.clamp_max(x, ember.tensor({ 6, 6, 6 }))))
    assert.same({ 1, 5, 5 }, values(x:clamp(nil, 5)))
    -- x:clamp(nil, nil) raises as torch.clamp does (probe_tensor_more_spec.lua)
  end)

  -- ember.clamp refused int64 ("expected a float tensor"); torch 1.13's dtypes in the comments
  it("clamp takes int64 and bool, with PyTorch's result dtypes", function()
    local x = ember.tensor({ 1, 5, 9 }, { dtype = "int64" })
    local function is(want, dtype, y)
      assert.are.equal(dtype, y.dtype)
      assert.same(want, values(y))
    end
    is({ 2, 5, 6 }, "int64", ember.clamp(x, 2, 6))        -- torch.clamp(x, 2, 6): tensor([2, 5, 6])
    is({ 2.5, 5, 6 }, "float32", ember.clamp(x, 2.5, 6))  -- tensor([2.5, 5., 6.])
    is({ 1, 5, 6 }, "float32", x:clamp(nil, 6.0))         -- torch.clamp(x, max=6.0): float
    is({ 3, 5, 9 }, "int64", x:clamp_min(3))
    is({ 1, 3.5, 3.5 }, "float32", x:clamp_max(3.5))
    is({ 2, 2, 2 }, "int64", x:clamp(6, 2))               -- min > max: all max, as torch
    is({ 2, 5, 6 }, "int64", x:clamp(ember.tensor({ 2, 2, 2 }, { dtype = "int64" }), ember.tensor({ 6, 6, 6 }, { dtype = "int64" })))
    is({ 1, 0 }, "int64", ember.clamp(ember.tensor({ true, false }), 0, 1)) -- torch: tensor([1, 0])
  end)

  it("kl_div: batchmean of a 0-d input is the sum; mean divides by every element", function()
    local i = ember.tensor({ { -1, -2 }, { -0.5, -3 } }, F64)
    local t = ember.tensor({ { 0.5, 0 }, { 0.25, 0.75 } }, F64)
    local s = ember.kl_div(i, t, { reduction = "sum" }):item()
    assert.near(s / 2, ember.kl_div(i, t, { reduction = "batchmean" }):item(), 1e-15)
    assert.near(s / 4, ember.kl_div(i, t):item(), 1e-15)
    -- F.kl_div(tensor(-1.), tensor(0.5), reduction="batchmean"): 0.5 * (log 0.5 + 1) = 0.1534
    assert.near(0.5 * (math.log(0.5) + 1), ember.kl_div(ember.tensor(-1, F64), ember.tensor(0.5, F64),
      { reduction = "batchmean" }):item(), 1e-15)
  end)

  it("diag and trace of empty and off-diagonal cases", function()
    assert.equal(0, ember.diag(ember.zeros(2, 3), 3):numel()) -- torch.diag(zeros(2, 3), 3): shape [0]
    -- torch.diag(zeros(2, 3), -2): shape [0]
    assert.equal(0, ember.diag(ember.zeros(2, 3), -2):numel())
    -- torch.diag(tensor([])): shape [0, 0]
    local e = ember.diag(ember.zeros(0))
    assert.same({ 0, 0 }, { e:size(1), e:size(2) })
    -- torch.diag(tensor([1., 2.]), -1): [[0, 0, 0], [1, 0, 0], [0, 2, 0]]
    assert.same({ 0, 0, 0, 1, 0, 0, 0, 2, 0 }, values(ember.diag(ember.tensor({ 1, 2 }), -1)))
    assert.equal(5, ember.trace(ember.tensor({ { 1, 2 }, { 3, 4 } })):item())
  end)

  it("diff of bool is xor; n = 0 and n past the length", function()
    -- torch.diff(tensor([True, False, False])): [True, False]
    assert.same({ true, false }, values(ember.diff(ember.tensor({ true, false, false }))))
    local x = ember.tensor({ 1, 4, 9 })
    assert.same({ 1, 4, 9 }, values(ember.diff(x, 0)))
    -- torch.diff(tensor([1., 4., 9.]), n=3): shape [0]
    assert.equal(0, ember.diff(x, 3):numel())
    assert.same({ 2 }, values(x:diff(2)))
    assert.same({ 1, 3, 5 }, values(ember.diff(x, { prepend = ember.tensor({ 0 }) })))
  end)

  it("movedim keeps the other dims in order; swapaxes is transpose", function()
    local x = ember.zeros(2, 3, 4, 5)
    -- torch.movedim(zeros(2, 3, 4, 5), (0, 3), (2, 1)).shape: [3, 5, 2, 4]
    assert.same({ 3, 5, 2, 4 }, dims(ember.movedim(x, { 1, 4 }, { 3, 2 })))
    assert.same({ 5, 3, 4, 2 }, dims(x:swapdims(1, -1)))
    assert.is_false(x:swapaxes(1, 2):is_contiguous()) -- a view
  end)

  it("hstack, vstack and dstack of 0-d and 1-d tensors", function()
    local a, b = ember.tensor(1), ember.tensor(2)
    assert.same({ 1, 2 }, values(ember.hstack({ a, b }))) -- torch.hstack of 0-d: [1, 2]
    local v = ember.vstack({ a, b }) -- torch.vstack of 0-d: [[1], [2]]
    assert.same({ 2, 1 }, { v:size(1), v:size(2) })
    local d = ember.dstack({ a, b }) -- torch.dstack of 0-d: shape [1, 1, 2]
    assert.same({ 1, 1, 2 }, { d:size(1), d:size(2), d:size(3) })
  end)

  it("tensor_split: more sections than elements, and starts out of order or past the end", function()
    local x = ember.arange(0, 3, F64)
    -- torch.tensor_split(arange(3), 5): [0], [1], [2], [], []
    local p = ember.tensor_split(x, 5)
    assert.equal(5, #p)
    assert.same({ 1, 1, 1, 0, 0 }, { p[1]:numel(), p[2]:numel(), p[3]:numel(), p[4]:numel(), p[5]:numel() })
    -- torch.tensor_split(arange(3), [2, 1, 7]): [0, 1], [], [2], []
    p = x:tensor_split({ 3, 2, 8 })
    assert.same({ 2, 0, 1, 0 }, { p[1]:numel(), p[2]:numel(), p[3]:numel(), p[4]:numel() })
    assert.same({ 2 }, values(p[3]))
    p = ember.tensor_split(x, ember.tensor({ 2 }, { dtype = "int64" }))
    assert.same({ 0 }, values(p[1]))
  end)

  it("nonzero of 0-d, empty and all-zero tensors", function()
    -- torch.nonzero(tensor(5.)): shape [1, 0]; torch.nonzero(zeros(2, 3)): shape [0, 2]
    local n = ember.nonzero(ember.tensor(5))
    assert.same({ 1, 0 }, { n:size(1), n:size(2) })
    n = ember.zeros(2, 3):nonzero()
    assert.same({ 0, 2 }, { n:size(1), n:size(2) })
    assert.equal("int64", n.dtype)
    local t = ember.nonzero(ember.tensor(5), { as_tuple = true })
    assert.same({ 1 }, values(t[1])) -- torch: (tensor([0]),)
  end)

  it("unique of an empty tensor and of bools; bincount of an empty tensor", function()
    local u, inv, cnt = ember.unique(ember.zeros(0), { return_inverse = true, return_counts = true })
    assert.same({ 0, 0, 0 }, { u:numel(), inv:numel(), cnt:numel() })
    -- torch.unique(tensor([True, False, True])): [False, True]
    assert.same({ false, true }, values(ember.tensor({ true, false, true }):unique()))
    local b = ember.bincount(ember.zeros({ 0 }, { dtype = "int64" }))
    assert.same({ 0, "int64" }, { b:numel(), b.dtype }) -- torch.bincount(empty): tensor([], dtype=int64)
    -- torch.bincount(tensor([1, 3]), minlength=2): [0, 1, 0, 1]
    assert.same({ 0, 1, 0, 1 }, values(ember.tensor({ 1, 3 }, { dtype = "int64" }):bincount({ minlength = 2 })))
  end)

  it("searchsorted: a NaN value goes last, a number gives a 0-d tensor", function()
    local s = ember.tensor({ 1, 2, 3 }, F64)
    -- torch.searchsorted(tensor([1., 2., 3.]), tensor([nan, 2., -inf])): [3, 1, 0] (0-based)
    assert.same({ 4, 2, 1 }, values(ember.searchsorted(s, ember.tensor({ 0 / 0, 2, -math.huge }, F64))))
    assert.same({ 4, 3 }, values(ember.searchsorted(s, ember.tensor({ 0 / 0, 2 }, F64), { right = true }))) -- [3, 2]
    local r = ember.searchsorted(s, 2.5)
    assert.same({ 0, 3 }, { r:dim(), r:item() }) -- torch.searchsorted(s, 2.5): tensor(2)
  end)
end)

describe("ops_more errors name the function and what was wrong, at the caller's line", function()
  local x = ember.tensor({ { 0.1, 0.2, 0.3 }, { 0.4, 0.5, 0.6 } }, F64)
  local v = ember.tensor({ 1, 2, 3 }, F64)
  local ERRORS = {
    { function() local _ = ember.clamp(x, "0") end, "ember.clamp: min must be a number, a tensor or nil, got string" },
    { function() local _ = x:clamp_min() end, "ember.clamp_min: min is required" },
    { function() local _ = ember.clamp_max(x, {}) end, "ember.clamp_max: max must be a number, a tensor or nil, got table" },
    { function() local _ = ember.hardtanh(x, 1, -1) end, "ember.hardtanh: min_val (1) must not be above max_val (-1)" },
    { function() local _ = ember.hardtanh(x, { min = 0 }) end, "ember.hardtanh: unknown option 'min' (expected max_val, min_val)" },
    { function() local _ = ember.relu6({ 1 }) end, "ember.relu6: argument 1 must be a tensor, got table" },
    { function() local _ = ember.hardswish(3) end, "ember.hardswish: argument 1 must be a tensor, got number" },
    { function() local _ = ember.hardsigmoid(nil) end, "ember.hardsigmoid: argument 1 must be a tensor, got nil" },
    { function() local _ = ember.mish("x") end, "ember.mish: argument 1 must be a tensor, got string" },
    { function() local _ = ember.glu(x, 2) end, "ember.glu: dim 2 must have an even size to be halved, got 3" },
    { function() local _ = ember.glu(x, 0) end, "ember.glu: dim 0 is not a dim: dims are 1-based" },
    { function() local _ = x:logit(0.7) end, "ember.logit: eps must be a number in [0, 0.5] or nil, got 0.7" },
    { function() local _ = x:lerp(x, "half") end, "ember.lerp: weight must be a number or a tensor, got string" },
    { function() local _ = x:addcmul(x, 2) end, "ember.addcmul: tensor2 must be a tensor, got number" },
    { function() local _ = x:addcdiv(x, x, { scale = 2 }) end, "ember.addcdiv: unknown option 'scale' (expected value)" },
    { function() local _ = ember.exp2(2) end, "ember.exp2: argument 1 must be a tensor, got number" },
    { function() local _ = ember.log2() end, "ember.log2: argument 1 must be a tensor, got nil" },
    { function() local _ = ember.log10(true) end, "ember.log10: argument 1 must be a tensor, got boolean" },
    { function() local _ = ember.sinh({}) end, "ember.sinh: argument 1 must be a tensor, got table" },
    { function() local _ = ember.cosh("1") end, "ember.cosh: argument 1 must be a tensor, got string" },
    { function() local _ = ember.tan(0.5) end, "ember.tan: argument 1 must be a tensor, got number" },
    { function() local _ = ember.xlogy(1, 2) end, "ember.xlogy: one of the arguments must be a tensor, got two numbers" },
    { function() local _ = x:remainder("2") end, "ember.remainder: argument 2 must be a tensor or a number, got string" },
    { function() local _ = ember.remainder(ember.tensor({ 3 }, { dtype = "int64" }), 0) end,
      "ember.remainder: integer division by zero" },
    { function() local _ = ember.fmod(ember.tensor({ 3 }, { dtype = "int64" }), ember.tensor({ 0 }, { dtype = "int64" })) end,
      "ember.fmod: integer division by zero" },
    { function() local _ = ember.floor_divide({}, x) end, "ember.floor_divide: argument 1 must be a tensor or a number, got table" },
    { function() local _ = x:nan_to_num({ inf = 1 }) end, "ember.nan_to_num: unknown option 'inf' (expected nan, neginf, posinf)" },
    { function() local _ = ember.nan_to_num(x, "0") end, "ember.nan_to_num: nan must be a number, got string" },
    { function() local _ = ember.kl_div(x, x, { reduction = "avg" }) end,
      "ember.kl_div: reduction must be \"mean\", \"batchmean\", \"sum\" or \"none\", got avg" },
    { function() local _ = ember.kl_div(x, v) end, "ember.kl_div: target shape [3] must equal input shape [2, 3]" },
    { function() local _ = ember.huber_loss(x, x, { delta = 0 }) end, "ember.huber_loss: delta must be a number > 0, got 0" },
    { function() local _ = ember.diag(ember.zeros(2, 2, 2)) end, "ember.diag: expected a 1-d or 2-d tensor, got shape [2, 2, 2]" },
    { function() local _ = v:diag(1.5) end, "ember.diag: offset must be an integer, got 1.5" },
    { function() local _ = v:trace() end, "ember.trace: expected a 2-d tensor, got shape [3]" },
    { function() local _ = x:diff(-1) end, "ember.diff: n must be an integer >= 0, got -1" },
    { function() local _ = x:diff(1, 3) end, "ember.diff: dim 3 is out of range for a tensor with 2 dims" },
    { function() local _ = x:diff({ prepend = v }) end, "ember.diff: prepend must have the 2 dims of the input, got shape [3]" },
    { function() local _ = x:mv(x) end, "ember.mv: expected a matrix [n, m] and a vector [m], got [2, 3] and [2, 3]" },
    { function() local _ = x:movedim(1, { 1, 2 }) end, "ember.movedim: source and destination must name as many dims, got 1 and 2" },
    { function() local _ = x:movedim({ 1, 1 }, { 1, 2 }) end, "ember.movedim: dim 1 appears twice in source" },
    { function() local _ = x:moveaxis(3, 1) end, "ember.moveaxis: dim 3 is out of range" },
    { function() local _ = x:swapaxes(1) end, "ember.swapaxes: two dims are required, got 1 and nil" },
    { function() local _ = x:swapdims(0, 1) end, "ember.swapdims: dim 0 is not a dim" },
    { function() local _ = x:broadcast_to({ 3 }) end, "ember.broadcast_to: cannot broadcast [2, 3] to 1 dims" },
    { function() local _ = x:broadcast_to({ 4, 3 }) end, "ember.expand: cannot expand [2, 3] to [4, 3]" },
    { function() local _ = ember.hstack(x) end, "ember.hstack: expected a non-empty list of tensors, got a tensor" },
    { function() local _ = ember.vstack({}) end, "ember.vstack: expected a non-empty list of tensors, got table" },
    { function() local _ = ember.dstack({ x, 1 }) end, "ember.dstack: element 2 must be a tensor, got number" },
    { function() local _ = x:tensor_split(0) end, "ember.tensor_split: sections must be an integer >= 1, got 0" },
    { function() local _ = x:tensor_split({ 0 }) end, "ember.tensor_split: start positions are 1-based (1 is the first element), got 0" },
    { function() local _ = x:count_nonzero(5) end, "ember.count_nonzero: dim 5 is out of range" },
    { function() local _ = x:nonzero(true) end, "ember.nonzero: options must be a table, got boolean" },
    { function() local _ = ember.argwhere(1) end, "ember.argwhere: argument 1 must be a tensor, got number" },
    { function() local _ = x:unique({ axis = 1 }) end,
      "ember.unique: unknown option 'axis' (expected dim, return_counts, return_inverse, sorted)" },
    { function() local _ = v:bincount() end, "ember.bincount: expected a 1-d int64 tensor, got a 1-d float64 tensor" },
    { function() local _ = ember.tensor({ 1, -2 }, { dtype = "int64" }):bincount() end, "ember.bincount: values must be >= 0, got -2" },
    { function() local _ = ember.searchsorted(x, v) end,
      "ember.searchsorted: values [3] must have the leading dims of the sorted sequence [2, 3]" },
    { function() local _ = ember.searchsorted(v, v, { side = "middle" }) end,
      "ember.searchsorted: side must be \"left\" or \"right\", got middle" },
    { function() local _ = ember.bucketize(v, x) end, "ember.bucketize: boundaries must be 1-d, got shape [2, 3]" },
    { function() local _ = x:atan(1) end, "ember.atan: takes no arguments besides the tensor, got 1 more" },
    { function() local _ = ember.asin(x, 2) end, "ember.asin: takes no arguments besides the tensor, got 1 more" },
    { function() local _ = x:acos(x) end, "ember.acos: takes no arguments besides the tensor, got 1 more" },
    { function() local _ = x:erfinv(true) end, "ember.erfinv: takes no arguments besides the tensor, got 1 more" },
    { function() local _ = x:lgamma(1, 2) end, "ember.lgamma: takes no arguments besides the tensor, got 2 more" },
    { function() local _ = x:digamma(0) end, "ember.digamma: takes no arguments besides the tensor, got 1 more" },
    { function() local _ = ember.atan2(x, v:narrow(1, 1, 2)) end, "ember.atan2: shapes [2, 3] and [2] cannot be broadcast" },
    { function() local _ = ember.tensor({ 1 }, { dtype = "int64" }):logcumsumexp(1) end,
      "ember.logcumsumexp: expected a float tensor, got int64" },
  }
  for i, e in ipairs(ERRORS) do
    it(e[2]:match("^ember%.[%w_]+") .. " (" .. i .. ")", function() raises_here(e[1], e[2]) end)
  end

  it("every new function has an error test above", function()
    local named = {}
    for _, e in ipairs(ERRORS) do named[e[2]:match("^ember%.([%w_]+)")] = true end
    named.expand = nil
    for _, c in pairs(CASES) do assert(named[c.args.fn], "no error test for ember." .. c.args.fn) end
  end)
end)

describe("ops_more documentation", function()
  it("the reference has an entry for each function and each method", function()
    local idx = require("ember._doc").index()
    local as_method = {}
    for _, c in pairs(CASES) do
      assert(idx["ember." .. c.args.fn], "no reference entry for ember." .. c.args.fn)
      if ember.Tensor[c.args.fn] then
        assert(idx["Tensor:" .. c.args.fn], "no reference entry for Tensor:" .. c.args.fn)
        as_method[c.args.fn] = as_method[c.args.fn] or c.args.method or c.value or false
      end
    end
    for fn, called in pairs(as_method) do assert(called, "no fixture case calls " .. fn .. " as a method") end
  end)
end)
