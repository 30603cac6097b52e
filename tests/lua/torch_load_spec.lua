-- ember.load reads what torch.save wrote (ember/_torch_load.lua), as
-- torch.load(path, map_location="cpu", weights_only=True): the files and
-- what each holds come from tests/gen_torch_load_fixtures.py (PyTorch 1.13);
-- and ember.frombuffer, which reads the storages.
local ember = require "ember"
local nn = require "ember.nn"
local parity = require "tests.lua.helpers.parity"
local raises_here, T = parity.raises_here, parity.T
local files = require "tests.lua.helpers.files"

local FIX = "tests/fixtures/"
local fx = dofile(FIX .. "torch_load.lua")

-- t holds what want says: ember's dtype, the shape, every value exactly
local function holds(name, t, want)
  assert.is_true(ember.is_tensor(t), name .. " is not a tensor")
  assert.are.equal(want.dtype, t.dtype, name .. "'s dtype")
  assert.are.same(want.value.shape, { table.unpack(t.shape) }, name .. "'s shape")
  local got = t:double():reshape(-1):totable()
  for i, v in ipairs(want.value.data) do
    assert.is_true(got[i] == v or (v ~= v and got[i] ~= got[i]), ("%s[%d]: %s, torch %s"):format(name, i, got[i], v))
  end
  assert.are.equal(want.requires_grad, t.requires_grad, name .. "'s requires_grad")
end

describe("ember.load of a torch.save file", function()
  it("tensors of every storage type, and views saved with their storage (transposed, offset, stride 0, tied)", function()
    local sd = ember.load(FIX .. "torch_load_tensors.pt")
    local n = 0
    for name, want in pairs(fx.tensors) do
      holds(name, sd[name], want)
      n = n + 1
    end
    assert.are.equal(17, n)
    for k in pairs(sd) do assert.is_not_nil(fx.tensors[k], "an extra key " .. k) end
    assert.is_true(sd.tied:equal(sd.f32))
    assert.are.equal(0, sd.scalar:dim())
  end)

  it("a training checkpoint: the model's state dict loads into the ember model and gives torch's output", function()
    local ck = ember.load(FIX .. "torch_load_checkpoint.pt")
    local c = fx.checkpoint
    local keys = {}
    for k in pairs(ck.model) do keys[#keys + 1] = k end
    table.sort(keys)
    local want = { table.unpack(c.model_keys) }
    table.sort(want)
    assert.are.same(want, keys)
    for name, w in pairs(c.model) do holds("model." .. name, ck.model[name], w) end
    local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m:load_state_dict(ck.model)
    parity.check("checkpoint model", m(T(c.x):float()), T(c.out):float(), 1e-6)
  end)

  it("the optimizer's state keeps Python's integer keys, and the numbers, strings and lists come as Lua values", function()
    local ck = ember.load(FIX .. "torch_load_checkpoint.pt")
    local c = fx.checkpoint
    for _, s in ipairs(c.optimizer_state) do
      local got = ck.optimizer.state[s.key]
      assert.is_not_nil(got, "optimizer state " .. s.key)
      assert.are.equal(s.step, got.step:item())
      holds("exp_avg " .. s.key, got.exp_avg, s.exp_avg)
    end
    local g = ck.optimizer.param_groups[1]
    assert.are.same(c.param_groups_params, g.params)
    assert.are.equal(c.lr, g.lr)
    assert.are.equal(7, ck.epoch)
    assert.are.equal("integer", math.type(ck.epoch))
    assert.are.equal(0.91, ck.best)
    assert.are.equal("run-1", ck.name)
    assert.are.same({ "a", "b" }, ck.tags)
    assert.are.same({ 1, "x" }, ck.pair)
    assert.are.equal(ember.Size{ 2, 3 }, ck.size)
    assert.are.equal(2 ^ 40, ck.big)
    assert.are.equal(-5, ck.neg)
    assert.is_true(ck.flag)
    assert.is_nil(ck.none)
    assert.are.equal(0.5, ck.np)
    holds("param", ck.param, c.param)
    holds("needs_grad", ck.needs_grad, c.needs_grad)
  end)

  it("interop_mlp.pt (a state dict saved by torch.save) loads as the safetensors copy does", function()
    local pt = ember.load(FIX .. "interop_mlp.pt")
    local n = 0
    for name, t in pairs(pt) do
      assert.are.equal("float32", t.dtype, name)
      n = n + 1
    end
    assert.is_true(n > 0)
  end)

  it("a pickled class is refused by name and never run; the legacy format is read; a cut file is named", function()
    raises_here(function() ember.load(FIX .. "torch_load_module.pt") end,
      "the pickle calls torch.nn.modules.linear.Linear, which ember does not run")
    assert.is_true(ember.equal(ember.load(FIX .. "torch_load_legacy.pt").w, ember.ones(2)))
    files.each_cut(FIX .. "torch_load_tensors.pt", function(n) return { n // 2, n - 30, 100 } end, function(cut)
      raises_here(function() ember.load(cut) end, "ember.load: '" .. cut .. "'")
    end)
    assert.are.equal(6, ember.ones(2, 3):sum():item()) -- and ember goes on
  end)
end)

describe("ember.load tells its own safetensors from torch.save's files by more than two bytes", function()
  it("an ember.save file whose header length starts 80 02 (as a pickle does) loads as ember's", function()
    local p = os.tmpname()
    local found
    for n = 400, 700 do -- the header grows with the string's length: find one of 0x280 bytes
      ember.save({ x = ember.ones(1), s = string.rep("a", n) }, p)
      local f = assert(io.open(p, "rb"))
      local head = f:read(2)
      f:close()
      if head == "\x80\x02" then found = n; break end
    end
    assert.is_not_nil(found, "no string length gave a header of 0x2XX80 bytes")
    local back = ember.load(p)
    assert.are.equal(found, #back.s)
    assert.are.equal(1, back.x:item())
    os.remove(p)
  end)
end)

describe("Llama.from_pretrained of a folder with pytorch_model.bin (Hugging Face's older checkpoints)", function()
  it("one file and two shards with their index give the logits of the same weights as safetensors", function()
    local dir = FIX .. "torch_load_llama/"
    local ids = ember.tensor({ { 3, 17, 5, 28, 1 } }, { dtype = "int64" })
    local want = ember.models.Llama.from_pretrained(dir .. "safetensors")(ids)
    for _, sub in ipairs { "bin", "sharded" } do
      local got = ember.models.Llama.from_pretrained(dir .. sub)(ids)
      assert.is_true(got:equal(want), sub .. ": logits differ")
    end
  end)
end)

describe("ember.frombuffer (torch.frombuffer)", function()
  it("reads little-endian elements of each type, from an offset, count of them", function()
    local s = string.pack("<ffd", 1.5, -2, 3.25)
    assert.are.same({ 1.5, -2 }, ember.frombuffer(s, { count = 2 }):totable())
    assert.are.same({ 3.25 }, ember.frombuffer(s, { dtype = "float64", offset = 8 }):totable())
    local ints = ember.frombuffer(string.pack("<i4i4", -7, 2147483647), { dtype = "int32" })
    assert.are.equal("int64", ints.dtype)
    assert.are.same({ -7, 2147483647 }, ints:totable())
    assert.are.same({ -128, 255 }, { ember.frombuffer("\128", { dtype = "int8" }):item(),
      ember.frombuffer("\255", { dtype = "uint8" }):item() })
    local h = ember.frombuffer("\0\60\0\188\1\0", { dtype = "float16" })
    assert.are.equal("float32", h.dtype)
    assert.are.same({ 1, -1, 2 ^ -24 }, h:double():totable())
    assert.are.same({ true, false }, ember.frombuffer("\1\0", { dtype = "bool" }):totable())
    local b = ember.frombuffer(string.pack("<I2", 0x3fc0), { dtype = "bfloat16" })
    assert.are.equal(1.5, b:item())
    assert.are.equal(0, ember.frombuffer("", {}):numel())
  end)

  it("refuses a count past the bytes, a ragged tail, a bad offset and an unknown dtype", function()
    raises_here(function() ember.frombuffer("abc") end, "ember.frombuffer: 3 bytes from offset 0 are not a whole number of float32")
    raises_here(function() ember.frombuffer("abcd", { count = 2 }) end, "ember.frombuffer: 2 float32 elements need 8 bytes")
    raises_here(function() ember.frombuffer("abcd", { offset = 5 }) end, "ember.frombuffer: offset 5 is outside the 4 bytes")
    raises_here(function() ember.frombuffer("abcd", { dtype = "complex64" }) end, "ember.frombuffer: dtype must be")
  end)
end)
