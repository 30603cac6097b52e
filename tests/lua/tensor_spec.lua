-- Tensors from Lua: creation, conversions, views, 1-based indexing,
-- printing, dtypes and <close>.
local ember = require "ember"

local function i64(t) return ember.tensor(t, { dtype = "int64" }) end

-- Compares t:totable() with a nested table of numbers, within tol.
local function assert_values(t, expected, tol)
  tol = tol or 1e-6
  local function walk(a, b, path)
    if type(b) == "table" then
      assert.are.equal(#b, #a, "length at " .. path)
      for i = 1, #b do walk(a[i], b[i], path .. "[" .. i .. "]") end
    elseif type(b) == "number" then
      assert(math.abs(a - b) <= tol, ("value at %s: got %s, expected %s"):format(path, a, b))
    else
      assert.are.equal(b, a, "value at " .. path)
    end
  end
  walk(t:totable(), expected, "")
end

describe("creation", function()
  it("makes float32 tensors from nested tables", function()
    local t = ember.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.are.same({ 2, 3 }, t.shape)
    assert.are.equal("float32", t.dtype)
    assert.are.equal("cpu", t.device)
    assert.are.equal(2, t.ndim)
    assert.are.equal(6, t:numel())
    assert_values(t, { { 1, 2, 3 }, { 4, 5, 6 } })
  end)

  it("makes bool tensors from booleans and honours dtype", function()
    assert.are.equal("bool", ember.tensor({ true, false }).dtype)
    assert.are.same({ true, false }, ember.tensor({ true, false }):totable())
    assert.are.equal("int64", i64 { 1, 2 }.dtype)
    assert.are.equal("float64", ember.tensor({ 1 }, { dtype = "float64" }).dtype)
  end)

  it("makes 0-d tensors from numbers and empty tensors from {}", function()
    local s = ember.tensor(2.5)
    assert.are.equal(0, s.ndim)
    assert.are.same({}, s.shape)
    assert.are.equal(2.5, s:item())
    assert.are.same({ 0 }, ember.tensor({}).shape)
  end)

  it("copies a tensor given to ember.tensor", function()
    local a = ember.tensor { 1, 2 }
    local b = ember.tensor(a, { dtype = "float64" })
    a:fill_(0)
    assert.are.equal("float64", b.dtype)
    assert_values(b, { 1, 2 })
  end)

  it("has zeros, ones, full, empty, arange with shapes as numbers or tables", function()
    assert.are.same({ 2, 3 }, ember.zeros(2, 3).shape)
    assert.are.same({ 2, 3 }, ember.ones({ 2, 3 }).shape)
    assert_values(ember.ones(2), { 1, 1 })
    assert_values(ember.full({ 2 }, 7), { 7, 7 })
    assert.are.same({ 4 }, ember.empty(4).shape)
    assert.are.equal("int64", ember.zeros(2, { dtype = "int64" }).dtype)
    assert_values(ember.arange(5), { 0, 1, 2, 3, 4 })
    assert_values(ember.arange(1, 3, 0.5), { 1, 1.5, 2, 2.5 })
    assert.are.equal("int64", ember.arange(3, { dtype = "int64" }).dtype)
    local r = ember.zeros(2, { requires_grad = true })
    assert.is_true(r.requires_grad)
  end)

  it("draws the same random numbers for the same seed", function()
    ember.manual_seed(42)
    local a = ember.rand(5)
    local n = ember.randn(3)
    ember.manual_seed(42)
    assert.is_true(a == ember.rand(5))
    assert.is_true(n == ember.randn(3))
    assert.are.equal(42, ember.initial_seed())
    local u = ember.uniform({ 100 }, 2, 3)
    assert.is_true(u:min():item() >= 2 and u:max():item() < 3)
    assert.are.same({ 4, 2 }, ember.normal({ 4, 2 }, 0, 1).shape)
  end)

  it("makes 1-based one_hot vectors", function()
    assert_values(ember.one_hot(i64 { 1, 3 }, 3), { { 1, 0, 0 }, { 0, 0, 1 } })
  end)
end)

describe("conversion back to Lua", function()
  it("round-trips nested tables through totable", function()
    local data = { { { 1.5, -2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8.25 } } }
    assert.are.same(data, ember.tensor(data):totable())
  end)

  it("keeps int64 values exact and gives Lua integers", function()
    local big = 2 ^ 53 + 1
    big = math.tointeger(2 ^ 53) + 1
    local t = i64 { big, -3 }
    assert.are.equal(big, t:totable()[1])
    assert.are.equal(math.type(t[2]:item()), "integer")
    assert.are.equal(-3, t[2]:item())
  end)

  it("gives numbers for 0-d tensors and booleans for bool tensors", function()
    assert.are.equal(3, ember.tensor(3):totable())
    assert.are.equal(true, ember.tensor(true):item())
  end)
end)

describe("views", function()
  local t
  before_each(function() t = ember.tensor { { 1, 2, 3 }, { 4, 5, 6 } } end)

  it("view and reshape, with -1 and tables", function()
    assert_values(t:view(3, 2), { { 1, 2 }, { 3, 4 }, { 5, 6 } })
    assert.are.same({ 6 }, t:view { 6 }.shape)
    assert.are.same({ 6 }, t:reshape(-1).shape)
    assert.are.same({ 3, 2 }, t:transpose(1, 2):reshape(3, 2).shape)
  end)

  it("a view shares memory with its base", function()
    local v = t:view(6)
    v:fill_(0)
    assert_values(t, { { 0, 0, 0 }, { 0, 0, 0 } })
  end)

  it("transpose and permute", function()
    assert_values(t:transpose(1, 2), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    assert_values(t:transpose(-1, -2), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    assert_values(t:permute(2, 1), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    assert.are.same({ 3, 1, 2 }, ember.zeros(1, 2, 3):permute { 3, 1, 2 }.shape)
    assert.is_false(t:transpose(1, 2):is_contiguous())
    assert.is_true(t:transpose(1, 2):contiguous():is_contiguous())
  end)

  it("t() transposes a matrix and keeps a vector, as views", function()
    assert_values(t:t(), { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    local v = ember.tensor({ 1, 2, 3 })
    assert.are.same({ 3 }, v:t().shape)
    v:t():fill_(7)
    assert_values(v, { 7, 7, 7 })
    assert.are.same({}, ember.tensor(5):t().shape)
    local ok, err = pcall(function() return ember.zeros(2, 3, 4):t() end)
    assert.is_false(ok)
    assert.matches("ember%.t: expects a tensor of at most 2 dims, got 3", err)
  end)

  it("narrow, select and slice take 1-based positions", function()
    assert_values(t:narrow(2, 2, 2), { { 2, 3 }, { 5, 6 } })
    assert_values(t:narrow(2, -1, 1), { { 3 }, { 6 } })
    assert_values(t:select(1, 2), { 4, 5, 6 })
    assert_values(t:select(2, -1), { 3, 6 })
    assert_values(t:slice(2, 1, 3, 2), { { 1, 3 }, { 4, 6 } })
    assert_values(t:slice(2, 2, -1), { { 2, 3 }, { 5, 6 } })
    assert_values(t:slice(2, -2, -2), { { 2 }, { 5 } })
  end)

  it("expand, squeeze, unsqueeze, flatten", function()
    assert.are.same({ 4, 2, 3 }, t:expand(4, 2, 3).shape)
    assert.are.same({ 2, 3 }, t:expand(-1, 3).shape)
    assert.are.same({ 3 }, ember.zeros(1, 3, 1):squeeze().shape)
    assert.are.same({ 3, 1 }, ember.zeros(1, 3, 1):squeeze(1).shape)
    assert.are.same({ 1, 2, 3 }, t:unsqueeze(1).shape)
    assert.are.same({ 2, 3, 1 }, t:unsqueeze(-1).shape)
    assert.are.same({ 6 }, t:flatten().shape)
    assert.are.same({ 2, 12 }, ember.zeros(2, 3, 4):flatten(2).shape)
    assert.are.same({ 6, 4 }, ember.zeros(2, 3, 4):flatten(1, 2).shape)
  end)

  it("clone copies, detach shares", function()
    local c = t:clone()
    c:fill_(9)
    assert.are.equal(1, t[1][1]:item())
    local d = t:detach()
    d:fill_(9)
    assert.are.equal(9, t[1][1]:item())
  end)

  it("split and chunk return lists", function()
    local parts = t:split(1)
    assert.are.equal(2, #parts)
    assert_values(parts[2], { { 4, 5, 6 } })
    local cols = t:chunk(3, 2)
    assert.are.equal(3, #cols)
    assert_values(cols[3], { { 3 }, { 6 } })
  end)

  it("cat and stack along 1-based dims", function()
    assert.are.same({ 4, 3 }, ember.cat { t, t }.shape)
    assert.are.same({ 2, 6 }, ember.cat({ t, t }, 2).shape)
    assert.are.same({ 2, 2, 3 }, ember.stack { t, t }.shape)
    assert.are.same({ 2, 3, 2 }, ember.stack({ t, t }, -1).shape)
  end)
end)

describe("1-based indexing", function()
  local t
  before_each(function() t = ember.tensor { { 1, 2, 3 }, { 4, 5, 6 } } end)

  it("t[i] selects along the first dim, negative from the end", function()
    assert_values(t[1], { 1, 2, 3 })
    assert_values(t[-1], { 4, 5, 6 })
    assert.are.equal(6, t[2][3]:item())
    assert.are.equal(2, #t)
  end)

  it("t[i] = number or tensor writes the slice", function()
    t[1] = 0
    t[2] = ember.tensor { 7, 8, 9 }
    assert_values(t, { { 0, 0, 0 }, { 7, 8, 9 } })
  end)

  it("rejects index 0 and dim 0", function()
    assert.has_error(function() return t[0] end)
    local ok, msg = pcall(t.sum, t, 0)
    assert.is_false(ok)
    assert.truthy(msg:find("1-based", 1, true))
  end)

  it("dims are 1-based in size, sum, softmax", function()
    assert.are.equal(2, t:size(1))
    assert.are.equal(3, t:size(-1))
    assert_values(t:sum(1), { 5, 7, 9 })
    assert_values(t:sum(2), { 6, 15 })
    assert_values(t:sum(-1, true), { { 6 }, { 15 } })
    assert_values(t:sum { 1, 2 }, 21)
    local s = t:softmax(2):sum(2)
    assert_values(s, { 1, 1 }, 1e-5)
  end)

  it("returns 1-based indices from max, min, argmax, argmin", function()
    local v, i = t:max(2)
    assert_values(v, { 3, 6 })
    assert.are.same({ 3, 3 }, i:totable())
    local _, j = t:min(1)
    assert.are.same({ 1, 1, 1 }, j:totable())
    assert.are.equal(6, t:argmax():item())
    assert.are.same({ 2, 2, 2 }, t:argmax(1):totable())
    assert.are.same({ 1, 1 }, t:argmin(2):totable())
    assert.are.equal(6, t:max():item())
  end)

  it("takes 1-based index tensors in index_select, gather, scatter_add, embedding", function()
    assert_values(t:index_select(2, i64 { 3, 1 }), { { 3, 1 }, { 6, 4 } })
    assert_values(t:gather(2, i64 { { 1 }, { 3 } }), { { 1 }, { 6 } })
    local z = ember.zeros(2, 3):scatter_add(2, i64 { { 1, 1, 2 }, { 3, 3, 3 } }, ember.ones(2, 3))
    assert_values(z, { { 2, 1, 0 }, { 0, 0, 3 } })
    local w = ember.tensor { { 10, 11 }, { 20, 21 }, { 30, 31 } }
    assert_values(ember.embedding(w, i64 { 3, 1 }), { { 30, 31 }, { 10, 11 } })
  end)

  it("takes 1-based targets in cross_entropy", function()
    local logits = ember.tensor { { 1, 2, 3 } }
    local lsm = logits:log_softmax(2)
    for k = 1, 3 do
      local loss = ember.cross_entropy(logits, i64 { k })
      assert(math.abs(loss:item() + lsm[1][k]:item()) < 1e-5, "target " .. k)
    end
    local ignored = ember.cross_entropy(ember.tensor { { 1, 2, 3 }, { 3, 2, 1 } }, i64 { 3, 1 },
      { ignore_index = 1, reduction = "sum" })
    assert(math.abs(ignored:item() + lsm[1][3]:item()) < 1e-5)
  end)
end)

describe("arithmetic", function()
  local a, b
  before_each(function()
    a = ember.tensor { 1, 2, 3 }
    b = ember.tensor { { 10 }, { 20 } }
  end)

  it("works with tensors and numbers on either side, broadcasting", function()
    assert_values(a + b, { { 11, 12, 13 }, { 21, 22, 23 } })
    assert_values(a + 1, { 2, 3, 4 })
    assert_values(2 - a, { 1, 0, -1 })
    assert_values(a * 2, { 2, 4, 6 })
    assert_values(6 / a, { 6, 3, 2 })
    assert_values(a / 2, { 0.5, 1, 1.5 })
    assert_values(a ^ 2, { 1, 4, 9 })
    assert_values(2 ^ a, { 2, 4, 8 })
    assert_values(-a, { -1, -2, -3 })
    assert_values(a:add(a):sub(1):mul(2):div(2), { 1, 3, 5 })
  end)

  it("compares with methods (bool tensors) and metamethods (all elements)", function()
    assert.are.same({ false, true, true }, a:gt(1):totable())
    assert.are.same({ true, false, false }, a:le(1):totable())
    assert.is_true(a == ember.tensor { 1, 2, 3 })
    assert.is_false(a == ember.tensor { 1, 2, 4 })
    assert.is_false(a == ember.tensor { 1, 2 })
    assert.is_true(a < a + 1)
    assert.is_true(a <= a)
    assert.is_false(a < 3)
    assert.is_true(0 < a)
  end)

  it("has where, masked_fill, clamp, maximum", function()
    assert_values(ember.where(a:gt(1), a, 0), { 0, 2, 3 })
    assert_values(a:masked_fill(a:eq(2), -1), { 1, -1, 3 })
    assert_values(a:clamp(2, nil), { 2, 2, 3 })
    assert_values(a:clamp(nil, 2), { 1, 2, 2 })
    assert_values(a:maximum(2), { 2, 2, 3 })
  end)

  it("rounds as PyTorch: floor, ceil, trunc, round (halves to even), sign; int64 too", function()
    local x = ember.tensor { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.7, 1.2 }
    assert_values(x:floor(), { -3, -2, -1, 0, 1, 2, -2, 1 })
    assert_values(x:ceil(), { -2, -1, 0, 1, 2, 3, -1, 2 })
    assert_values(x:trunc(), { -2, -1, 0, 0, 1, 2, -1, 1 })
    assert_values(x:round(), { -2, -2, 0, 0, 2, 2, -2, 1 })
    assert_values(x:sign(), { -1, -1, -1, 1, 1, 1, -1, 1 })
    assert.are.equal(-math.huge, 1 / x:round()[3]:item()) -- -0.5 rounds to -0
    local odd = ember.tensor({ -0.0, 0 / 0, math.huge }, { dtype = "float64" })
    assert.are.equal(math.huge, 1 / odd:sign()[1]:item()) -- sign(-0) is +0, as torch.sign
    assert.are.equal(0, odd:sign()[2]:item()) -- and sign(NaN) is 0
    assert.are.equal(math.huge, odd:floor()[3]:item())
    local i = ember.tensor({ -3, 0, 5 }, { dtype = "int64" })
    assert.are.same({ -3, 0, 5 }, ember.floor(i):totable())
    assert.are.same({ -3, 0, 5 }, i:round():totable())
    assert.are.same({ -1, 0, 1 }, ember.sign(i):totable())
    assert.are.equal("int64", i:ceil().dtype)
    assert.are.equal("bfloat16", ember.tensor({ 2.5 }, { dtype = "bfloat16" }):round().dtype)
    local ok, err = pcall(function() return ember.tensor({ true }):floor() end)
    assert.is_false(ok)
    assert.matches("floor: expected a float tensor or int64, got bool", err)
  end)

  it("updates in place and returns self", function()
    local t = ember.zeros(3)
    assert.are.equal(t, t:fill_(1))
    t:add_(a, 2):mul_(0.5)
    assert_values(t, { 1.5, 2.5, 3.5 })
    t:zero_()
    t:copy_(a)
    assert_values(t, { 1, 2, 3 })
  end)
end)

describe("dtypes", function()
  it("converts between dtypes", function()
    local t = ember.tensor { 1.7, -2.2 }
    assert.are.same({ 1, -2 }, t:long():totable())
    assert.are.equal("float64", t:double().dtype)
    assert.are.equal("float64", t:to("float64").dtype)
    assert.are.same({ true, true }, t:bool():totable())
    assert.are.equal("float32", t:long():float().dtype)
    assert.are.equal(t, t:float()) -- no change: the same tensor
  end)

  it("moves to the cpu (a no-op here)", function()
    local t = ember.ones(2)
    assert.are.equal("cpu", t:cpu().device)
    assert.are.equal("cpu", t:to("cpu").device)
  end)
end)

describe("printing", function()
  it("shows values, shape, dtype and device", function()
    local s = tostring(ember.tensor { { 1, 2.5 }, { -3, 4 } })
    assert.truthy(s:find("tensor(", 1, true))
    assert.truthy(s:find("2.5000", 1, true))
    assert.truthy(s:find("-3.0000", 1, true))
    assert.truthy(s:find("shape=[2, 2]", 1, true))
    assert.truthy(s:find("dtype=float32", 1, true))
    assert.truthy(s:find("device=cpu", 1, true))
    assert.falsy(s:find("...", 1, true))
  end)

  it("abbreviates large tensors", function()
    local s = tostring(ember.arange(100 * 100):view(100, 100))
    assert.truthy(s:find("...", 1, true))
    assert.truthy(s:find("shape=[100, 100]", 1, true))
    local lines = select(2, s:gsub("\n", "\n")) + 1
    assert(lines <= 20, "too many lines: " .. lines) -- 6 rows of 2 lines and "..."
    assert(#s < 1200, "too long: " .. #s)
    assert.truthy(s:find("9.9990e+03", 1, true)) -- the last element
  end)

  it("uses scientific notation when magnitudes call for it", function()
    assert.truthy(tostring(ember.tensor { 1e-8, 1 }):find("1.0000e-08", 1, true))
    assert.truthy(tostring(ember.tensor { 0.5, 1 }):find("0.5000", 1, true))
  end)

  it("prints integers, booleans, 0-d tensors and grad_fn", function()
    assert.truthy(tostring(i64 { 7, -8 }):find("[ 7, -8]", 1, true))
    assert.truthy(tostring(ember.tensor { true, false }):find("true, false", 1, true))
    assert.truthy(tostring(ember.tensor(3)):find("tensor(3.0000", 1, true))
    local x = ember.ones(2, { requires_grad = true })
    assert.truthy(tostring(x):find("requires_grad=true", 1, true))
    assert.truthy(tostring(x * x):find("grad_fn=<", 1, true))
  end)
end)

describe("lifetime", function()
  it("releases a <close> tensor at the end of its scope", function()
    collectgarbage()
    collectgarbage()
    local before = ember.live_bytes()
    local kept
    do
      local t <close> = ember.zeros(1000, 1000)
      assert.is_true(ember.live_bytes() >= before + 4e6)
      kept = t
    end
    assert.is_true(ember.live_bytes() < before + 4e6)
    assert.is_true(kept:is_closed())
    local ok, msg = pcall(function() return kept + 1 end)
    assert.is_false(ok)
    assert.truthy(msg:find("tensor was closed", 1, true))
    assert.are.equal("tensor(<closed>)", tostring(kept))
  end)

  it("is_tensor tells tensors apart", function()
    assert.is_true(ember.is_tensor(ember.ones(1)))
    assert.is_false(ember.is_tensor({}))
    assert.is_false(ember.is_tensor(1))
  end)
end)

describe("library", function()
  it("lists plugins with their status and prints them as a table", function()
    local list = ember.plugins()
    local cpu
    for _, p in ipairs(list) do
      assert.are.equal("string", type(p.name))
      assert.truthy(p.kind == "backend" or p.kind == "attention" or p.kind == "unknown")
      assert.are.equal("boolean", type(p.loaded))
      if p.name == "cpu" and p.kind == "backend" and p.loaded then cpu = p end
    end
    assert.truthy(cpu, "the CPU backend is loaded")
    assert.truthy(cpu.path:find("ember_backend_cpu", 1, true))
    local s = tostring(list)
    assert.truthy(s:match("^name%s+kind%s+version%s+status%s+path\n"))
    assert.truthy(s:match("\ncpu%s+backend%s+%S+%s+loaded%s+/"))
  end)

  it("load_plugin fails with the loader's reason", function()
    local ok, msg = pcall(ember.load_plugin, "/nonexistent/ember_attn_none.so")
    assert.is_false(ok)
    assert.truthy(msg:find("ember.load_plugin", 1, true))
    assert.truthy(msg:find("/nonexistent/ember_attn_none.so", 1, true))
    assert.are.equal("table", type(ember.plugin_search_path()))
  end)

  it("sets threads and reports memory", function()
    local n = ember.get_num_threads()
    ember.set_num_threads(1)
    assert.are.equal(1, ember.get_num_threads())
    ember.set_num_threads(n)
    assert.is_true(ember.device_count("cpu") >= 1)
    assert.are.equal(0, ember.device_count("no-such-backend"))
    local t = ember.zeros(1000)
    local stats = ember.memory_stats()
    assert.is_true(stats.in_use >= 4000)
    assert.is_true(ember.live_bytes() >= 4000)
    ember.synchronize()
    ember.empty_cache()
    assert.are.equal("number", type(ember.clock()))
    assert.are.equal(1000, t:numel())
  end)
end)

describe("t.T and t.mT", function()
  it("are views with PyTorch's meaning, and carry gradients", function()
    local x = ember.arange(0, 6):view(2, 3):double():requires_grad_()
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, x.T:totable())
    assert.are.same({ 4, 3, 2 }, ember.zeros(2, 3, 4).T.shape)
    assert.are.same({ 2, 4, 3 }, ember.zeros(2, 3, 4).mT.shape)
    assert.are.same({ 3 }, ember.zeros(3).T.shape)
    ;(x.T * ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, { dtype = "float64" })):sum():backward()
    assert.are.same({ { 1, 3, 5 }, { 2, 4, 6 } }, x.grad:totable())
    local ok, err = pcall(function() return ember.zeros(3).mT end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.mT: needs a tensor of 2 or more dims, got 1", 1, true), err)
  end)
end)


describe("in-place twins (masked_fill_, clamp_, relu_, ...)", function()
  it("write the out-of-place result back and return the tensor; refuse graph tensors, naming themselves", function()
    local b = ember.tensor({ -1, 2, -3 })
    assert.are.equal(b, b:relu_())
    assert.are.same({ 0, 2, 0 }, b:totable())
    local c = ember.zeros(3)
    c:masked_fill_(ember.tensor({ true, false, true }), 5):clamp_(0, 4)
    assert.are.same({ 4, 0, 4 }, c:totable())
    local a = ember.tensor({ -1, 2 }, { requires_grad = true })
    local ok, err = pcall(function() a:clamp_(0, 1) end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.clamp_: a leaf tensor that requires grad", 1, true), err)
    local y = a * 2
    local view = y:view(2) -- a graph tensor another shares: not recorded (alone it is, as PyTorch)
    ok, err = pcall(function() y:relu_() end)
    assert.truthy(err:find("ember.relu_: the tensor", 1, true) and err:find("use the out-of-place op", 1, true), err)
    assert.are.same({ -2, 4 }, view:detach():totable())
    ember.no_grad(function() a:clamp_(0, 1) end)
    assert.are.same({ 0, 1 }, a:detach():totable())
  end)

  it("refuse a float result into an integer tensor, as torch (it was truncated)", function()
    local x = ember.tensor({ 1, 2, 3 }, { dtype = "int64" })
    for _, case in ipairs {
      { function() x:mul_(2.5) end, "ember.mul_: result type float can't be cast to the desired output type int64" },
      { function() x:add_(1.5) end, "ember.add_: result type float can't be cast to the desired output type int64" },
      { function() x:add_(1, 0.5) end, "(alpha 0.5 is not an integer)" },
      { function() x:clamp_(2.5, 6) end, "ember.clamp_: result type float32 can't be cast to the desired output type int64" },
    } do
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      assert.truthy(err:find(case[2], 1, true), err)
    end
    assert.are.same({ 1, 2, 3 }, x:totable()) -- untouched
    x:mul_(2):add_(1):clamp_(4, 6)             -- integral values stay allowed
    assert.are.same({ 4, 5, 6 }, x:totable())
    local f = ember.tensor({ 1.5, 2 })
    f:clamp_(1, 1.75):mul_(2)                  -- floats as before
    assert.are.same({ 3, 3.5 }, f:totable())
  end)
end)

describe("boolean masks as indices", function()
  it("x[mask] selects (differentiably), x[mask] = v writes in place, as PyTorch", function()
    local x = ember.tensor({ { 1, -2, 3 }, { -4, 5, -6 } })
    assert.are.same({ 1, 3, 5 }, x[x:gt(0)]:totable())
    assert.are.same({ { 1, -2, 3 } }, x[ember.tensor({ true, false })]:totable())
    local y = x:clone()
    y[y:lt(0)] = 0
    assert.are.same({ { 1, 0, 3 }, { 0, 5, 0 } }, y:totable())
    local z = x:clone()
    z[z:lt(0)] = ember.tensor({ 10, 20, 30 })
    assert.are.same({ { 1, 10, 3 }, { 20, 5, 30 } }, z:totable())
    local w = x:clone()
    w[ember.tensor({ false, true })] = ember.tensor({ 7, 8, 9 })
    assert.are.same({ { 1, -2, 3 }, { 7, 8, 9 } }, w:totable())
    local a = ember.tensor({ 1, -2, 3 }, { requires_grad = true })
    a[a:gt(0)]:sum():backward()
    assert.are.same({ 1, 0, 1 }, a.grad:totable())
    local ok, err = pcall(function() return x[ember.tensor({ true, false, true })] end)
    assert.is_false(ok)
    assert.truthy(err:find("ember.index: a bool mask must have the tensor's leading dims", 1, true), err)
    ok, err = pcall(function() x[ember.tensor({ 1.5 })] = 1 end)
    assert.truthy(err:find("ember.setindex: an index tensor must be int64", 1, true), err)
  end)
end)
