-- The repros of issue 11 (robust against what users and files throw at
-- ember), one `describe` each. Every case failed or misbehaved before its
-- fix. Truncated plugins are in plugin_truncated_spec.lua, format strings
-- in format_strings_spec.lua.
local ember = require "ember"

-- f must fail with a message holding every needle (plain text); ember
-- still works afterwards.
local function fails_with(f, ...)
  local ok, msg = pcall(f)
  assert.is_false(ok, "expected an error")
  assert.are.equal("string", type(msg))
  for _, needle in ipairs { ... } do
    assert(msg:find(needle, 1, true), ("message %q lacks %q"):format(msg, needle))
  end
  assert.are.equal(6, ember.ones(2, 3):sum():item())
  return msg
end

describe("sizes that overflow int64 (repro 2)", function()
  it("expand past 2^40 elements is refused, naming the op and the shape", function()
    fails_with(function() return ember.zeros(1, 1):expand(2 ^ 32, 2 ^ 32) end,
      "ember.expand", "[4294967296, 4294967296]")
    fails_with(function() return ember.zeros(1, 1):expand(2 ^ 32 + 1, 2 ^ 32 - 1) end,
      "ember.expand", "[4294967297, 4294967295]")
    fails_with(function() return ember.zeros(1):expand(2 ^ 62, 2 ^ 62, 4) end, "ember.expand")
  end)

  it("a big but countable expand still works", function()
    local e = ember.ones(1, 1):expand(2 ^ 20, 2 ^ 10)
    assert.are.equal(2 ^ 30, e:numel())
    assert.are.same({ 0, 0 }, e:stride())
  end)

  it("view and reshape with sizes whose product overflows", function()
    fails_with(function() return ember.zeros(2, 2):view(2 ^ 62, 4) end, "ember.view", "[4611686018427387904, 4]")
    fails_with(function() return ember.zeros(2, 2):view(-1, 2 ^ 62, 4) end, "ember.view")
    fails_with(function() return ember.zeros(2, 2):reshape(2 ^ 32, 2 ^ 32, 2 ^ 32) end, "ember.reshape")
    fails_with(function() return ember.zeros(0):view(0, 2 ^ 62, 2 ^ 62) end, "ember.view")
  end)

  it("creation with an empty dim and huge others is refused (strides would overflow)", function()
    fails_with(function() return ember.zeros(0, 2 ^ 40, 2 ^ 40) end, "ember.zeros", "[0, 1099511627776, 1099511627776]")
    fails_with(function() return ember.empty(2 ^ 62, 4) end, "ember.empty", "too large")
    fails_with(function() return ember.from_bytes("abc", { 2 ^ 40, 2 ^ 40 }) end, "ember.from_bytes")
  end)

  it("split and chunk with sizes far past the length", function()
    local x = ember.arange(1, 6)
    assert.are.equal(1, #x:split(math.maxinteger))
    assert.are.equal(5, #x:chunk(math.maxinteger))
    assert.are.same({ 1, 2, 3, 4, 5 }, x:split(math.maxinteger)[1]:totable())
  end)

  it("slice with a step far past the size", function()
    local s = ember.arange(1, 4):slice(1, 1, 3, math.maxinteger)
    assert.are.same({ 1 }, s:size())
    assert.are.equal(1, s:item())
  end)
end)

describe("math.mininteger as an index (repro 3)", function()
  local mi = math.mininteger
  it("select, narrow, t[i], size, t[i] = v report the index", function()
    fails_with(function() return ember.zeros(3):select(1, mi) end, "ember.select", tostring(mi), "out of range")
    fails_with(function() return ember.zeros(3):narrow(1, mi, 1) end, "ember.narrow", tostring(mi))
    fails_with(function() return ember.zeros(3)[mi] end, "ember.index", tostring(mi))
    fails_with(function() local t = ember.zeros(3); t[mi] = 1 end, "ember.setindex", tostring(mi))
    fails_with(function() return ember.zeros(3):size(mi) end, "ember.size", tostring(mi))
    fails_with(function() return ember.zeros(3):sum(mi) end, "ember.sum")
    fails_with(function() return ember.zeros(3):transpose(1, mi) end, "ember.transpose", tostring(mi))
  end)

  it("narrow with a length that overflows start + length", function()
    fails_with(function() return ember.zeros(3):narrow(1, 2, math.maxinteger) end,
      "ember.narrow", tostring(math.maxinteger))
  end)
end)

describe("empty tensors (repro 7)", function()
  it("are contiguous, as in PyTorch", function()
    assert.is_true(ember.zeros(2, 0):is_contiguous())
    assert.is_true(ember.zeros(0, 3):is_contiguous())
    assert.is_true(ember.zeros(0):is_contiguous())
    assert.is_true(ember.zeros(2, 0, 3):transpose(1, 3):is_contiguous())
  end)

  it("go through ops", function()
    local z = ember.zeros(2, 0)
    assert.are.same({ 2, 0 }, z:contiguous():size())
    assert.are.same({ 0, 2 }, z:transpose(1, 2):contiguous():size())
    assert.are.same({ 2, 0 }, (z + 1):size())
    assert.are.same({ 0 }, z:view(-1):size())
    assert.are.same({ 2 }, z:sum(2):size())
    assert.are.equal(0, z:sum():item())
    assert.are.same({ 2, 0 }, z:clone():size())
  end)
end)

describe("ember.Function backward checks (repro 5)", function()
  local function fn(name, backward)
    return ember.Function { name = name, forward = function(ctx, a) return a * 2 end, backward = backward }
  end

  it("a gradient of the wrong dtype is refused, naming the function", function()
    local w = ember.ones(3, { requires_grad = true })
    fails_with(function() fn("todouble", function(ctx, g) return g:double() end)(w):sum():backward() end,
      "todouble", "dtype float64", "dtype float32")
    fails_with(function() fn("tolong", function(ctx, g) return g:long() end)(w):sum():backward() end,
      "tolong", "dtype int64")
    assert.is_nil(w.grad)
  end)

  it("more gradients than forward arguments are refused", function()
    local w = ember.ones(3, { requires_grad = true })
    fails_with(function() fn("three", function(ctx, g) return g, g, g end)(w):sum():backward() end,
      "three", "3 values", "1 arguments")
    -- trailing nils are fine, and so is a correct backward afterwards
    fn("nils", function(ctx, g) return g * 2, nil, nil end)(w):sum():backward()
    assert.are.same({ 2, 2, 2 }, w.grad:totable())
  end)

  it("a gradient for the second argument is checked against that argument", function()
    local Mul = ember.Function {
      name = "mul2",
      forward = function(ctx, a, k, b) return a * b end,
      backward = function(ctx, g) return g, nil, g:double() end,
    }
    local a = ember.ones(2, { requires_grad = true })
    local b = ember.ones(2, { requires_grad = true })
    fails_with(function() Mul(a, 3, b):sum():backward() end, "mul2", "argument 3", "dtype float64")
  end)
end)

describe("safetensors keys the saver refuses (repro 6)", function()
  local checkpoint = require "ember.checkpoint"
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function raw(name, header)
    local p = dir .. "/" .. name
    local f = assert(io.open(p, "wb"))
    f:write(string.pack("<I8", #header) .. header .. string.rep("\0", 4))
    f:close()
    return p
  end
  local entry = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'

  it("an empty key, a \\u0000 key and a raw NUL are refused with the offset", function()
    fails_with(function() return checkpoint.load_tensors(raw("e", '{"":' .. entry .. '}')) end,
      "safetensors_load", "empty name", "file offset 9")
    fails_with(function() return checkpoint.load_tensors(raw("u", '{"\\u0000x":' .. entry .. '}')) end,
      "safetensors_load", "\\u0000", "file offset 10")
    fails_with(function() return checkpoint.load_tensors(raw("n", '{"\0x":' .. entry .. '}')) end,
      "safetensors_load", "NUL byte", "file offset 10")
    fails_with(function() return checkpoint.load_tensors(raw("m", '{"a\0b":' .. entry .. '}')) end,
      "safetensors_load", "NUL byte", "file offset 11")
  end)

  it("a \\u escape without 4 hex digits is refused (cJSON loaded it as an empty name)", function()
    -- found by tests/fuzz/fuzz_safetensors
    fails_with(function() return checkpoint.load_tensors(raw("x", '{"\\u0/00x":' .. entry .. '}')) end,
      "safetensors_load", "4 hex digits", "file offset 10")
    fails_with(function() return checkpoint.load_tensors(raw("y", '{"a":' .. entry .. ', "\\u12":1}')) end,
      "safetensors_load", "4 hex digits")
  end)

  it("escaped backslashes and empty values are not mistaken for them", function()
    local p = raw("ok", '{"a\\\\u0000":' .. entry .. ', "__metadata__": {"k": ""}}')
    local ts, meta = checkpoint.load_tensors(p)
    assert.are.same({ 1 }, ts["a\\u0000"]:size())
    assert.are.equal("", meta.k)
  end)
end)

describe("interrupted saves (repro 8)", function()
  local checkpoint = require "ember.checkpoint"
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)
  local function exists(p)
    local f = io.open(p, "rb")
    if f then f:close() end
    return f ~= nil
  end
  local function touch(p) local f = assert(io.open(p, "wb")); f:write(string.rep("x", 1000)); f:close() end

  it("the next save of the same path removes stale temporaries, and nothing else", function()
    local target = dir .. "/model.safetensors"
    touch(target .. ".tmp-aB3xZ9")   -- left by a killed save
    touch(target .. ".tmp-000000")
    touch(target .. ".tmp-keepme!")  -- not mkstemp's pattern
    touch(dir .. "/other.safetensors.tmp-aB3xZ9") -- another target's
    checkpoint.save_tensors(target, { w = ember.ones(2) })
    assert.is_false(exists(target .. ".tmp-aB3xZ9"))
    assert.is_false(exists(target .. ".tmp-000000"))
    assert.is_true(exists(target .. ".tmp-keepme!"))
    assert.is_true(exists(dir .. "/other.safetensors.tmp-aB3xZ9"))
    assert.are.same({ 1, 1 }, checkpoint.load_tensors(target).w:totable())
  end)

  it("syncs the file, renames it, then syncs the folder (seen through strace)", function()
    local bin = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember"
    local log, target = dir .. "/strace.log", dir .. "/synced.safetensors"
    -- LeakSanitizer cannot ptrace a process strace already traces: no leak check in there
    local ok = os.execute(("ASAN_OPTIONS=detect_leaks=0:intercept_tls_get_addr=0 strace -f -qq -y -e trace=fsync,fdatasync,rename,renameat,renameat2 -o '%s' "
      .. "'%s' -e \"require'ember.checkpoint'.save_tensors('%s', {w = ember.ones(2)})\" 2>/dev/null")
      :format(log, bin, target))
    local f = io.open(log)
    local text = f and f:read("a") or ""
    if f then f:close() end
    if not ok or not text:find("rename", 1, true) then
      pending("strace is not installed or cannot trace here")
      return
    end
    local esc = function(p) return (p:gsub("%p", "%%%0")) end
    local file_sync = text:find("fsync%(%d+<" .. esc(target) .. "%.tmp%-%w+>%)")
    local rename = text:find("rename%w*%(.-" .. esc(target) .. "\"")
    local dir_sync = text:find("fsync%(%d+<" .. esc(dir) .. ">%)")
    assert(file_sync and rename and dir_sync, text)
    assert(file_sync < rename and rename < dir_sync, "order: fsync(file), rename, fsync(folder)\n" .. text)
  end)

  it("a temporary held by a live writer (flock) is left alone", function()
    local target = dir .. "/live.safetensors"
    local tmp = target .. ".tmp-LiVe01"
    touch(tmp)
    -- flock(1) holds the lock while the save runs in this process
    local h = assert(io.popen(("flock -x '%s' -c 'echo locked; sleep 3'"):format(tmp)))
    assert.are.equal("locked", h:read("l"))
    checkpoint.save_tensors(target, { w = ember.ones(2) })
    assert.is_true(exists(tmp))
    h:close()
    checkpoint.save_tensors(target, { w = ember.ones(2) })
    assert.is_false(exists(tmp))
  end)
end)

describe("silent or unclear results (repro 9)", function()
  local nn = require "ember.nn"
  local optim = require "ember.optim"
  local i64 = function(t) return ember.tensor(t, { dtype = "int64" }) end

  it("t[int64 tensor] selects rows as index_select(1, idx)", function()
    local x = ember.arange(0, 6):view(2, 3)
    assert.are.same({ { 0, 1, 2 } }, x[i64 { 1 }]:totable())
    assert.are.same({ { 3, 4, 5 }, { 0, 1, 2 }, { 3, 4, 5 } }, x[i64 { 2, 1, -1 + 3 }]:totable())
    assert.are.same({ 2, 2, 3 }, x[i64 { { 2, 1 }, { 1, 1 } }]:size())
    assert.are.same({ 0, 3 }, x[i64 {}]:size())
    fails_with(function() return x[i64 { 3 }] end, "ember.index", "3", "1..2")
    fails_with(function() return x[ember.tensor { 1 }] end, "ember.index", "int64", "float32")
    fails_with(function() return x[true] end, "ember.index", "boolean")
    fails_with(function() return ember.tensor(1)[i64 { 1 }] end, "ember.index", "0-d")
    -- gradients flow back as index_select's
    local w = ember.ones(3, { requires_grad = true })
    w[i64 { 1, 1, 3 }]:sum():backward()
    assert.are.same({ 2, 0, 1 }, w.grad:totable())
  end)

  it("nn.Linear on a 0-d tensor or a number says what it expected", function()
    fails_with(function() return nn.Linear(4, 3):forward(ember.tensor(1)) end, "Linear.forward", "[..., 4]", "0-d")
    fails_with(function() return nn.Linear(4, 3):forward(3) end, "Linear.forward", "number")
  end)

  it("optimizers refuse NaN (and infinite) lr, betas, eps, weight_decay, momentum", function()
    local p = { ember.ones(2, { requires_grad = true }) }
    local nan = 0 / 0
    fails_with(function() return optim.AdamW(p, { lr = nan }) end, "AdamW", "lr")
    fails_with(function() return optim.AdamW(p, { lr = 1 / 0 }) end, "AdamW", "lr")
    fails_with(function() return optim.AdamW(p, { betas = { nan, 0.999 } }) end, "AdamW", "betas")
    fails_with(function() return optim.AdamW(p, { betas = { 0.9, nan } }) end, "AdamW", "betas")
    fails_with(function() return optim.Adam(p, { eps = nan }) end, "Adam", "eps")
    fails_with(function() return optim.Adam(p, { weight_decay = nan }) end, "Adam", "weight_decay")
    fails_with(function() return optim.SGD(p, { lr = nan }) end, "SGD", "lr")
    fails_with(function() return optim.SGD(p, { lr = 0.1, momentum = nan }) end, "SGD", "momentum")
    fails_with(function() return optim.clip_grad_norm(p, nan) end, "clip_grad_norm", "max_norm")
    -- groups are checked the same way
    fails_with(function() return optim.AdamW({ { params = p, lr = nan } }) end, "AdamW", "lr")
    -- sane values still work
    local opt = optim.AdamW(p, { lr = 1e-3, betas = { 0, 0.5 }, eps = 0 })
    assert.are.equal(1e-3, opt.param_groups[1].lr)
  end)
end)
