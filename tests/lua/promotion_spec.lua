-- Type promotion in binary ops and where, as PyTorch's torch.result_type:
-- the higher category wins (bool < int64 < float), then the wider float; a
-- 0-d tensor or a Lua number decides only when its category is higher. The
-- expected dtypes below were printed by PyTorch 1.13 for the same pairs
-- (ones(2) or ones(()) of each dtype, multiplied). Also: unknown dtype and
-- device names list the valid ones, and a dtype name can stand for the
-- options table.
local ember = require "ember"

local function make(dt, zero)
  return zero and ember.ones({}, { dtype = dt }) or ember.ones(2, { dtype = dt })
end

-- { a dtype, a is 0-d, b dtype, b is 0-d, result }
local TABLE = {
  { "float32", false, "float64", false, "float64" },
  { "float64", false, "float32", false, "float64" },
  { "float32", false, "int64", false, "float32" },
  { "int64", false, "float32", false, "float32" },
  { "int64", false, "float64", false, "float64" },
  { "bool", false, "float32", false, "float32" },
  { "bool", false, "int64", false, "int64" },
  { "int64", false, "bool", false, "int64" },
  { "float64", false, "bool", false, "float64" },
  { "float32", false, "float64", true, "float32" }, -- a 0-d of the same category does not widen
  { "float64", false, "float32", true, "float64" },
  { "int64", false, "float64", true, "float64" },   -- a 0-d of a higher category decides
  { "int64", false, "float32", true, "float32" },
  { "bool", false, "float64", true, "float64" },
  { "bool", false, "int64", true, "int64" },
  { "float32", false, "int64", true, "float32" },
  { "float64", true, "int64", false, "float64" },
  { "float64", true, "float32", false, "float32" },
  { "float32", true, "float64", true, "float64" },  -- two 0-d tensors promote as dimensioned ones
  { "int64", true, "float32", true, "float32" },
}

describe("type promotion", function()
  it("follows PyTorch's table for tensor op tensor", function()
    for _, row in ipairs(TABLE) do
      local a, b = make(row[1], row[2]), make(row[3], row[4])
      local what = ("%s%s * %s%s"):format(row[1], row[2] and "[]" or "[2]", row[3], row[4] and "[]" or "[2]")
      assert.are.equal(row[5], (a * b).dtype, what)
      assert.are.equal(row[5], (a + b).dtype, what)
      if row[1] == "bool" or row[3] == "bool" then -- PyTorch refuses a bool operand in subtraction
        assert.has_error(function() return b - a end)
      else
        assert.are.equal(row[5], (b - a).dtype, what)
      end
      assert.are.equal(row[5], ember.where(ember.tensor { true, false }, a, b).dtype, "where " .. what)
      assert.are.equal("bool", a:lt(b).dtype)
    end
  end)

  it("promotes values, not just dtypes", function()
    local x = ember.tensor({ 1, 2 }, "int64") + ember.tensor { 0.25, 0.5 }
    assert.are.same({ 1.25, 2.5 }, x:totable())
    local y = ember.tensor({ 0.1 }, "float64") + ember.tensor { 0.1 }
    assert.are.equal(0.1 + ember.tensor { 0.1 }:double():item(), y:item()) -- the float32 0.1, widened
  end)

  it("a Lua float is a Python float: int64 * 2.0 is float32, int64 * 2 stays int64 (PyTorch 1.13)", function()
    local i = ember.tensor({ 1, 2, 3 }, "int64")
    for _, case in ipairs {
      { i * 2.0, "float32", { 2, 4, 6 } }, { 2.0 * i, "float32", { 2, 4, 6 } }, { i + 0.0, "float32", { 1, 2, 3 } },
      { i - 1.0, "float32", { 0, 1, 2 } }, { 1.0 - i, "float32", { 0, -1, -2 } }, { i * 2, "int64", { 2, 4, 6 } },
      { i:maximum(2.0), "float32", { 2, 2, 3 } }, { i ^ 2, "int64", { 1, 4, 9 } }, { i ^ 2.0, "float32", { 1, 4, 9 } },
      { ember.tensor { true, false } * 1.0, "float32", { 1, 0 } }, { ember.tensor { true, false } + 1, "int64", { 2, 1 } },
      { ember.where(ember.tensor { true, false }, i:narrow(1, 1, 2), 0.0), "float32", { 1, 0 } },
      { ember.where(ember.tensor { true, false }, i:narrow(1, 1, 2), 0), "int64", { 1, 0 } },
    } do
      assert.are.equal(case[2], case[1].dtype)
      assert.are.same(case[3], case[1]:totable())
    end
    assert.are.same({ 1, 2, 3 }, (i ^ 0.5 * i ^ 0.5):round():totable()) -- float32 square roots
    local ok, err = pcall(function() return i ^ -1 end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.pow: integers to negative integer powers are not allowed", 1, true), err)
  end)

  it("Lua numbers promote int64 and bool but never change a float dtype", function()
    assert.are.equal("float32", (ember.ones(2) + 2.5).dtype)
    assert.are.equal("float32", (ember.ones(2) * 3).dtype)
    assert.are.equal("float64", (2 - ember.ones(2, "float64")).dtype)
    assert.are.equal("int64", (ember.ones(2, "int64") + 2).dtype)
    local f = ember.ones(2, "int64") + 0.5
    assert.are.equal("float32", f.dtype)
    assert.are.same({ 1.5, 1.5 }, f:totable())
    local d = ember.tensor({ 7, -3 }, "int64") / 2
    assert.are.equal("float32", d.dtype)
    assert.are.same({ 3.5, -1.5 }, d:totable())
    assert.are.equal("float32", (ember.tensor({ 7 }, "int64") / ember.tensor({ 2 }, "int64")).dtype)
    local b = ember.tensor { true, false } + 1
    assert.are.equal("int64", b.dtype)
    assert.are.same({ 2, 1 }, b:totable())
    assert.are.equal("float32", (ember.tensor { true, false } * 1.5).dtype)
    assert.are.same({ false, false }, ember.tensor { true, false }:eq(2):totable())
    assert.are.same({ true, true }, ember.tensor({ 1, 1 }, "int64"):lt(1.5):totable())
    local w = ember.where(ember.tensor { true, false }, ember.ones(2, "int64"), 0.5)
    assert.are.equal("float32", w.dtype)
    assert.are.same({ 1, 0.5 }, w:totable())
  end)

  it("gradients flow back through a promotion in each input's dtype", function()
    local a = ember.randn(3, { dtype = "float64", requires_grad = true })
    local b = ember.randn(3, { requires_grad = true })
    local y = (a * b):sum()
    assert.are.equal("float64", y.dtype)
    y:backward()
    assert.are.equal("float64", a.grad.dtype)
    assert.are.equal("float32", b.grad.dtype)
    assert(math.abs(b.grad[1]:item() - a[1]:item()) < 1e-6)
  end)

  it("two bool tensors add to a bool (or), as PyTorch 1.13; subtracting them fails, saying what works", function()
    local s = ember.tensor { true, false } + ember.tensor { false, false }
    assert.are.equal("bool", s.dtype)
    assert.are.same({ true, false }, s:tolist())
    local ok, msg = pcall(function() return ember.tensor { true } - ember.tensor { false } end)
    assert.is_false(ok)
    assert(msg:find("logical_xor()", 1, true), msg)
  end)
end)

describe("dtype and device names", function()
  it("t:to() with an unknown name lists the dtypes and the loaded devices", function()
    local ok, msg = pcall(function() return ember.ones(2):to("flaot32") end)
    assert.is_false(ok)
    for _, needle in ipairs { "ember.to", "unknown dtype or device 'flaot32'", "float32, float64, int64, bool, bfloat16",
                               "loaded devices: cpu" } do
      assert(msg:find(needle, 1, true), ("%q lacks %q"):format(msg, needle))
    end
  end)

  it("t:to() with a dtype ember lacks says so and lists ember's dtypes, not the plugin search", function()
    for _, name in ipairs { "float16", "int32", "half", "uint8", "complex64" } do
      local ok, msg = pcall(function() return ember.ones(2):to(name) end)
      assert.is_false(ok)
      local want = ("ember.to: dtype '%s' is not supported (ember's dtypes: float32, float64, int64, bool, bfloat16)")
        :format(name)
      assert(msg:find(want, 1, true), ("%q lacks %q"):format(msg, want))
      assert(not msg:find("backend", 1, true) and not msg:find("rejected", 1, true), msg)
    end
  end)

  it("an unknown device in the options lists the loaded ones", function()
    local ok, msg = pcall(function() return ember.zeros(2, { device = "tpu" }) end)
    assert.is_false(ok)
    assert(msg:find("unknown device 'tpu'", 1, true) and msg:find("loaded devices: cpu", 1, true), msg)
    ok, msg = pcall(function() return ember.zeros(2, "float16") end)
    assert.is_false(ok)
    assert(msg:find("unknown dtype 'float16' (not supported; ember's dtypes: float32, float64, int64, bool, bfloat16)", 1, true), msg)
    ok, msg = pcall(function() return ember.zeros(2, "flaot") end)
    assert(msg:find("unknown dtype 'flaot' (ember's dtypes: float32, float64, int64, bool, bfloat16)", 1, true), msg)
  end)

  it("a dtype name stands for {dtype = name}", function()
    assert.are.equal("int64", ember.tensor({ 1, 2 }, "int64").dtype)
    assert.are.equal("float64", ember.tensor(ember.ones(2), "float64").dtype)
    assert.are.equal("bool", ember.zeros(2, 3, "bool").dtype)
    assert.are.equal("int64", ember.ones({ 2 }, "int64").dtype)
  end)

  it("int64:mean() names no C function", function()
    local ok, msg = pcall(function() return ember.ones(2, "int64"):mean() end)
    assert.is_false(ok)
    assert(not msg:find("to_dtype", 1, true), msg)
    assert(msg:find("x:double()", 1, true), msg)
  end)
end)
