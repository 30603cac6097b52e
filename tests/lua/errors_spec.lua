-- Bad input raises a clear Lua error (the message names the op and what was
-- wrong) and the process goes on: after each error the test does more work.
local ember = require "ember"

local function i64(t) return ember.tensor(t, { dtype = "int64" }) end

-- Runs f, which must fail; checks that every `needle` is in the message
-- (plain text) and that ember still works afterwards.
local function fails_with(f, ...)
  local ok, msg = pcall(f)
  assert.is_false(ok, "expected an error")
  assert.are.equal("string", type(msg))
  for _, needle in ipairs { ... } do
    assert(msg:find(needle, 1, true), ("message %q lacks %q"):format(msg, needle))
  end
  assert.are.equal(6, (ember.ones(2, 3)):sum():item()) -- still alive
  return msg
end

describe("errors", function()
  -- x:int() and x:byte() were "attempt to call a nil value (method 'int')", and
  -- x:type("torch.IntTensor") looked for a device of that name
  it("a cast to a dtype ember lacks says so and what to use instead", function()
    local x = ember.ones(2)
    fails_with(function() return x:int() end, "ember.int: ember has no int32 dtype", "t:long()")
    fails_with(function() return x:short() end, "ember.short: ember has no int16 dtype", "t:long()")
    fails_with(function() return x:char() end, "ember.char: ember has no int8 dtype", "t:long()")
    fails_with(function() return x:byte() end, "ember.byte: ember has no uint8 dtype", "t:bool()")
    fails_with(function() return x:half() end, "ember.half: ember has no float16 dtype", "t:bfloat16()")
    for _, name in ipairs { "torch.IntTensor", "torch.ByteTensor", "torch.HalfTensor", "torch.float16", "torch.int32" } do
      local msg = fails_with(function() return x:type(name) end, "dtype '" .. name .. "' is not supported",
        "float32, float64, int64, bool, bfloat16")
      assert(not msg:find("backend", 1, true), msg)
    end
    assert.are.equal("int64", x:type("torch.LongTensor").dtype)
  end)

  it("matmul shape mismatch", function()
    fails_with(function() return ember.matmul(ember.ones(2, 3), ember.ones(4, 5)) end,
      "ember.matmul", "[2, 3]", "[4, 5]")
    fails_with(function() return ember.ones(2, 3):matmul(ember.ones(2, 3)) end, "ember.matmul")
  end)

  it("dtype mismatch", function()
    fails_with(function() return ember.matmul(ember.ones(2, 2), ember.ones(2, 2, { dtype = "float64" })) end,
      "ember.matmul", "float32", "float64")
    fails_with(function() return ember.ones(2, 3):index_select(2, ember.tensor { 1 }) end,
      "ember.index_select", "int64", "float32")
  end)

  it("index out of range in select and t[i]", function()
    fails_with(function() return ember.ones(3):select(1, 4) end, "ember.select", "4", "out of range")
    fails_with(function() return ember.ones(3)[-4] end, "out of range")
    fails_with(function() return ember.ones(3)[0] end, "out of range")
    fails_with(function() return ember.ones(2, 3):narrow(2, 3, 2) end, "ember.narrow")
  end)

  it("index out of range in embedding, gather, one_hot, cross_entropy (1-based values)", function()
    local w = ember.ones(5, 2)
    fails_with(function() return ember.embedding(w, i64 { 1, 6 }) end,
      "ember.embedding", "6", "out of range 1..5")
    fails_with(function() return ember.embedding(w, i64 { 0 }) end, "ember.embedding", "id 0")
    fails_with(function() return ember.ones(2, 3):gather(2, i64 { { 1 }, { 4 } }) end,
      "ember.gather", "index 4", "{2, 1}")
    fails_with(function() return ember.one_hot(i64 { 3 }, 2) end, "ember.one_hot", "label 3")
    fails_with(function() return ember.cross_entropy(ember.ones(2, 3), i64 { 1, 4 }) end,
      "ember.cross_entropy", "target 4")
  end)

  it("dims out of range, 0 included", function()
    fails_with(function() return ember.ones(2, 3):sum(3) end, "ember.sum", "dim 3", "1-based")
    fails_with(function() return ember.ones(2, 3):softmax(0) end, "ember.softmax", "dim 0")
    fails_with(function() return ember.ones(2, 3):transpose(1, -3) end, "ember.transpose")
  end)

  it("shape given as a string", function()
    fails_with(function() return ember.zeros("2,3") end, "ember.zeros", "shape must be", "got string")
    fails_with(function() return ember.ones({ 2, "3" }) end, "ember.ones", "got string")
    fails_with(function() return ember.ones(2):view("x") end, "ember.view", "got string")
    fails_with(function() return ember.zeros(2.5) end, "ember.zeros", "integers")
    fails_with(function() return ember.zeros(-1) end, "ember.zeros", ">= 0")
  end)

  it("a 10^12-element tensor fails with out of memory naming the size", function()
    -- ASan aborts on a 4 TB request unless told to return NULL like malloc
    local maps = io.open("/proc/self/maps")
    local asan = maps and maps:read("a"):find("libasan", 1, true)
    if maps then maps:close() end
    if asan and not (os.getenv("ASAN_OPTIONS") or ""):find("allocator_may_return_null=1", 1, true) then
      error("under AddressSanitizer this test needs ASAN_OPTIONS=allocator_may_return_null=1")
    end
    fails_with(function() return ember.zeros(1e6, 1e6) end,
      "ember.zeros", "[1000000, 1000000]", "out of memory")
    fails_with(function() return ember.ones(1e6, 1e6) end, "ember.ones", "[1000000, 1000000]")
  end)

  it("backward through a non-scalar without a gradient", function()
    local x = ember.ones(3, { requires_grad = true })
    fails_with(function() (x * 2):backward() end, "ember.backward", "scalar", "[3]")
  end)

  it("wrong device string", function()
    fails_with(function() return ember.zeros(2, { device = "gpu" }) end, "ember.zeros", "gpu")
    fails_with(function() return ember.zeros(2, { device = 3 }) end, "ember.zeros", "device must be a string")
    fails_with(function() return ember.ones(2):to("tpu") end, "ember.to", "tpu")
  end)

  it("bad option names and values", function()
    fails_with(function() return ember.zeros(2, { dtyp = "float32" }) end,
      "ember.zeros", "unknown option 'dtyp'", "dtype, device, requires_grad")
    fails_with(function() return ember.zeros(2, { dtype = "float16" }) end, "unknown dtype 'float16'")
    fails_with(function() return ember.zeros(2, { requires_grad = "yes" }) end, "requires_grad must be a boolean")
    fails_with(function()
      return ember.cross_entropy(ember.ones(2, 3), i64 { 1, 2 }, { reduce = "sum" })
    end, "ember.cross_entropy", "unknown option 'reduce'")
    fails_with(function() return ember.ones(2, 3):var(1, { keep = true }) end, "ember.var", "unknown option 'keep'")
    fails_with(function() return ember.mse_loss(ember.ones(2), ember.ones(2), "avg") end, "reduction must be")
  end)

  it("ragged or non-numeric tables", function()
    fails_with(function() return ember.tensor { { 1, 2 }, { 3 } } end, "ember.tensor", "ragged")
    fails_with(function() return ember.tensor { 1, "a" } end, "ember.tensor", "got string")
    fails_with(function() return ember.tensor { 1, true } end, "ember.tensor", "mixed")
  end)

  it("wrong operand types", function()
    fails_with(function() return ember.ones(2) + "x" end, "ember.add", "got string")
    fails_with(function() return ember.ones(2) + {} end, "ember.add")
    fails_with(function() return ember.ones(2):item() end, "ember.item", "one-element")
    fails_with(function() return ember.ones(2).foo.bar end)
    fails_with(function() local t = ember.ones(2); t.foo = 1 end, "cannot set field 'foo'")
  end)

  it("a closed tensor", function()
    local t = ember.ones(2)
    t:close()
    fails_with(function() return t:sum() end, "tensor was closed")
  end)

  it("leaks nothing when ops fail", function()
    collectgarbage()
    collectgarbage()
    local before = ember.live_bytes()
    local a, b = ember.ones(4, 3), ember.ones(5, 6)
    for _ = 1, 100 do
      pcall(ember.matmul, a, b)
      pcall(ember.embedding, a, i64 { 7 })
      pcall(function() return a:index_select(1, i64 { 9 }) end)
    end
    a, b = nil, nil
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, ember.live_bytes())
  end)
end)
