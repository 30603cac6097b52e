-- ember.checkpoint and the safetensors reader/writer (core/src/safetensors.c):
-- bit-exact round trips, a reader written with Python's standard library
-- (tests/read_safetensors.py), atomic writes, every kind of corrupt file,
-- and model / optimizer / scheduler checkpoints with name and shape checks.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local checkpoint = require "ember.checkpoint"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
local function path(name) return dir .. "/" .. name end

local function slurp(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function spit(p, s)
  local f = assert(io.open(p, "wb"))
  f:write(s)
  f:close()
end

local function listdir()
  local names, h = {}, io.popen("ls -A '" .. dir .. "'")
  for l in h:lines() do names[#names + 1] = l end
  h:close()
  table.sort(names)
  return names
end

-- A hand-made file: header JSON and raw data.
local function raw_file(name, header, data)
  spit(path(name), string.pack("<I8", #header) .. header .. (data or ""))
  return path(name)
end

local function load_error(p)
  local ok, err = pcall(checkpoint.load_tensors, p)
  assert.is_false(ok, "loading " .. p .. " should fail")
  return err
end

local function sample_tensors()
  local special = ember.tensor({ 1 / 0, -1 / 0, -0.0, 4.9406564584124654e-324, 1e308, math.pi }, { dtype = "float64" })
  return {
    f32 = ember.randn(3, 4),
    f64 = special,
    i64 = ember.tensor({ { math.maxinteger, math.mininteger }, { -1, 0 } }, { dtype = "int64" }),
    bool = ember.tensor({ true, false, true }),
    scalar = ember.tensor(2.5, { dtype = "float64" }),
    empty = ember.zeros(0, 3),
    transposed = ember.arange(0, 6, { dtype = "float64" }):view(2, 3):transpose(1, 2),
  }
end

describe("safetensors files", function()
  after_each(function()
    -- no temporary file is ever left behind
    for _, n in ipairs(listdir()) do assert.is_nil(n:find(".tmp-", 1, true), n) end
  end)

  it("read back bit-exactly, with metadata", function()
    local ts = sample_tensors()
    checkpoint.save_tensors(path("a.safetensors"), ts, { note = "hello", epoch = 3 })
    local back, meta, names = checkpoint.load_tensors(path("a.safetensors"))
    assert.are.equal("hello", meta.note)
    assert.are.equal("3", meta.epoch)
    assert.are.equal(7, #names)
    for k, t in pairs(ts) do
      assert.are.equal(t.dtype, back[k].dtype, k)
      assert.are.same(t.shape, back[k].shape, k)
      assert.is_true(back[k] == t, k)
      assert.are.equal("cpu", back[k].device)
    end
    -- -0.0 keeps its sign, the denormal its value
    assert.are.equal(-math.huge, 1 / back.f64:totable()[3])
    assert.are.equal(4.9406564584124654e-324, back.f64:totable()[4])
    -- writing what was read gives the same bytes
    checkpoint.save_tensors(path("b.safetensors"), back, { note = "hello", epoch = "3" })
    assert.are.equal(slurp(path("a.safetensors")), slurp(path("b.safetensors")))
  end)

  it("are read by Python's standard library (json + struct, no torch)", function()
    local ts = sample_tensors()
    checkpoint.save_tensors(path("py.safetensors"), ts, { framework = "ember" })
    local h = io.popen("python3 tests/read_safetensors.py '" .. path("py.safetensors") .. "' 2>&1")
    local out = h:read("a")
    local ok = h:close()
    assert.is_true(ok, out)
    local seen = {}
    for line in out:gmatch("[^\n]+") do
      local kind, rest = line:match("^(%S+) (.*)$")
      if kind == "meta" then
        assert.are.equal("framework ember", rest)
      else
        local name, dt, shape, vals = rest:match("^(%S+) (%S+) (%S+) ?(.*)$")
        local t = ts[name]
        seen[name] = true
        assert.are.equal(({ float32 = "F32", float64 = "F64", int64 = "I64", bool = "BOOL" })[t.dtype], dt)
        assert.are.equal(#t.shape == 0 and "scalar" or table.concat(t.shape, ","), shape)
        local want = {}
        local flat = t:reshape(-1)
        for i = 1, flat:numel() do
          local v = flat[i]:item()
          if t.dtype == "bool" then want[i] = v and "1" or "0"
          elseif t.dtype == "int64" then want[i] = ("%d"):format(v)
          elseif v == math.huge then want[i] = "inf"
          elseif v == -math.huge then want[i] = "-inf"
          else want[i] = ("%.17g"):format(v) end
        end
        local got = {}
        for v in vals:gmatch("%S+") do
          if dt == "F32" or dt == "F64" then
            local n = tonumber(v) or (v == "inf" and math.huge or -math.huge)
            got[#got + 1] = math.abs(n) == math.huge and v or ("%.17g"):format(n)
          else
            got[#got + 1] = v
          end
        end
        assert.are.same(want, got, name)
      end
    end
    for k in pairs(ts) do assert.is_true(seen[k], k) end
  end)

  it("are written atomically: a failed save leaves the old file and no temporary", function()
    local p = path("atomic.safetensors")
    checkpoint.save_tensors(p, { x = ember.ones(2) })
    local before = slurp(p)
    -- rename onto a directory fails after the temporary file was written
    assert(os.execute("mkdir -p '" .. path("isdir") .. "'"))
    local ok, err = pcall(checkpoint.save_tensors, path("isdir"), { x = ember.ones(2) })
    assert.is_false(ok)
    assert.truthy(err:find("cannot rename", 1, true), err)
    ok, err = pcall(checkpoint.save_tensors, path("no/such/dir/x.safetensors"), { x = ember.ones(2) })
    assert.is_false(ok)
    assert.truthy(err:find("cannot create a temporary file", 1, true), err)
    -- saving over an existing file replaces it whole
    checkpoint.save_tensors(p, { y = ember.zeros(3) })
    assert.are_not.equal(before, slurp(p))
    local back = checkpoint.load_tensors(p)
    assert.is_nil(back.x)
    assert.are.same({ 3 }, back.y.shape)
  end)

  it("reject bad names and values when saving", function()
    assert.has_error(function() checkpoint.save_tensors(path("bad"), { x = 3 }) end)
    local ok, err = pcall(checkpoint.save_tensors, path("bad"), { __metadata__ = ember.ones(1) })
    assert.truthy(err:find("'__metadata__' is reserved", 1, true), err)
    ok, err = pcall(checkpoint.save_tensors, path("bad"), { [""] = ember.ones(1) })
    assert.truthy(err:find("empty name", 1, true), err)
    assert.is_false(ok)
  end)

  describe("corrupt or truncated files give clear errors", function()
    local good
    setup(function()
      checkpoint.save_tensors(path("good.safetensors"), { w = ember.randn(4, 5), b = ember.randn(5) })
      good = slurp(path("good.safetensors"))
    end)

    it("missing file", function()
      assert.truthy(load_error(path("nope.safetensors")):find("No such file", 1, true))
    end)

    it("empty and short files", function()
      spit(path("empty"), "")
      assert.truthy(load_error(path("empty")):find("too short for the 8-byte header length", 1, true))
      spit(path("short"), "abc")
      assert.truthy(load_error(path("short")):find("too short", 1, true))
    end)

    it("every truncation of a good file", function()
      for cut = 0, #good - 1, 7 do
        spit(path("cut"), good:sub(1, cut))
        local err = load_error(path("cut"))
        assert.truthy(err:find("ember.safetensors_load: ", 1, true), err)
      end
    end)

    it("header length beyond the file, and absurd", function()
      spit(path("long"), string.pack("<I8", 100) .. "{}")
      assert.truthy(load_error(path("long")):find("header length 100 does not fit the file of 10 bytes", 1, true))
      spit(path("huge"), string.pack("<I8", 1 << 60) .. "{}")
      assert.truthy(load_error(path("huge")):find("does not fit the file", 1, true))
    end)

    it("invalid JSON, non-object header, junk after the JSON", function()
      assert.truthy(load_error(raw_file("j1", '{"a": {')):find("not valid JSON", 1, true))
      assert.truthy(load_error(raw_file("j2", "[1, 2]")):find("not a JSON object", 1, true))
      assert.truthy(load_error(raw_file("j3", "{} x")):find("unexpected bytes after", 1, true))
    end)

    it("bad entries: dtype, shape, offsets, sizes", function()
      local d8 = string.rep("\0", 8)
      assert.truthy(load_error(raw_file("e1", '{"a":{"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,8]}}', d8))
        :find("tensor 'a' has dtype 'F8_E5M2', expected one of F32, F64, I64, BOOL, BF16", 1, true))
      assert.truthy(load_error(raw_file("e2", '{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', d8))
        :find("not a non-negative integer", 1, true))
      assert.truthy(load_error(raw_file("e3", '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', d8))
        :find("tensor 'a' (F32, shape [3]) needs 12 bytes, its data_offsets span 8", 1, true))
      assert.truthy(load_error(raw_file("e4", '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', d8))
        :find("outside the 8 data bytes (file truncated?)", 1, true))
      assert.truthy(load_error(raw_file("e5", '{"a":{"dtype":"F32","shape":[2]}}', d8))
        :find("entry 'a' needs", 1, true))
      assert.truthy(load_error(raw_file("e6", '{"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}}', d8))
        :find("9 dims", 1, true))
      assert.truthy(load_error(raw_file("e7", '{"a":{"dtype":"F32","shape":[1e30,1e30],"data_offsets":[0,4]}}', d8))
        :find("not a non-negative integer", 1, true))
      assert.truthy(load_error(raw_file("e8", '{"a":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}}', "\0\1\2\0\0\0\0\0"))
        :find("holds the byte 2", 1, true))
      assert.truthy(load_error(raw_file("e9", '{"__metadata__":{"k":3}}'))
        :find("metadata value of 'k' is not a string", 1, true))
    end)

    it("overlapping, gapped, duplicated and uncovered ranges", function()
      local d8 = string.rep("\0", 8)
      assert.truthy(load_error(raw_file("o1", '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        .. '"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', d8)):find("overlaps", 1, true))
      assert.truthy(load_error(raw_file("o2", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', d8))
        :find("4 unused bytes before tensor 'a'", 1, true))
      assert.truthy(load_error(raw_file("o3", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', d8))
        :find("the tensors cover 4 data bytes but the file has 8", 1, true))
      assert.truthy(load_error(raw_file("o4", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        .. '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', d8)):find("the name 'a' appears twice", 1, true))
    end)

    it("random byte damage never crashes", function()
      for i = 1, 200 do
        local bytes = { good:byte(1, -1) }
        local k = 1 + (i * 7919) % #bytes
        bytes[k] = (bytes[k] + 1 + i) % 256
        spit(path("damaged"), string.char(table.unpack(bytes)))
        local ok, err = pcall(checkpoint.load_tensors, path("damaged"))
        assert.is_true(ok or type(err) == "string")
      end
    end)
  end)
end)

describe("model checkpoints", function()
  local function model()
    return nn.Sequential(nn.Embedding(10, 8), nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 }),
      nn.Linear(8, 3))
  end

  local function train_steps(m, opt, sched, n)
    ember.manual_seed(5)
    for _ = 1, n do
      local ids = (ember.rand(4, 6) * 10):long() + 1
      local loss = nn.CrossEntropyLoss()(m(ids):reshape(-1, 3), (ember.rand(24) * 3):long() + 1)
      opt:zero_grad()
      loss:backward()
      opt:step()
      sched:step()
    end
  end

  it("save and load model, optimizer and scheduler; training resumes identically", function()
    ember.manual_seed(1)
    local m = model()
    local opt = optim.AdamW(m, { lr = 1e-2 })
    local sched = optim.WarmupCosine(opt, { warmup_steps = 2, total_steps = 20 })
    train_steps(m, opt, sched, 3)
    checkpoint.save(path("model.safetensors"), { model = m, optimizer = opt, scheduler = sched,
      metadata = { epoch = 3, task = "test" } })
    -- the file holds the weights under their module names
    local raw = checkpoint.load_tensors(path("model.safetensors"))
    assert.is_not_nil(raw["2.self_attn.q_proj.weight"])
    assert.is_not_nil(raw["optimizer.state.1.exp_avg"])

    ember.manual_seed(99)
    local m2 = model()
    local opt2 = optim.AdamW(m2, { lr = 1 })
    local sched2 = optim.WarmupCosine(opt2, { warmup_steps = 2, total_steps = 20 })
    local meta = checkpoint.load(path("model.safetensors"), { model = m2, optimizer = opt2, scheduler = sched2 })
    assert.are.same({ epoch = "3", task = "test" }, meta)
    for n, p in pairs(m:named_parameters()) do assert.is_true(p == m2:named_parameters()[n], n) end
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
    assert.are.equal(3, opt2.state[1].step)
    assert.are.equal(math.type(3), math.type(opt2.state[1].step))
    assert.are.equal(false, opt2.param_groups[1].amsgrad) -- a false option comes back false, not "false"

    train_steps(m, opt, sched, 2)
    train_steps(m2, opt2, sched2, 2)
    for n, p in pairs(m:named_parameters()) do assert.is_true(p == m2:named_parameters()[n], n) end
  end)

  it("name and shape mismatches with the model are clear errors and change nothing", function()
    local m = model()
    checkpoint.save(path("m.safetensors"), { model = m })
    local other = nn.Sequential(nn.Embedding(10, 8), nn.Linear(8, 3))
    local before = other[2].weight:clone()
    local ok, err = pcall(checkpoint.load, path("m.safetensors"), { model = other })
    assert.is_false(ok)
    assert.truthy(err:find("m.safetensors': ", 1, true), err)
    assert.truthy(err:find("missing 2.bias, 2.weight; unexpected 2.ff.linear1.bias", 1, true), err)
    assert.is_true(other[2].weight == before)
    local wider = nn.Sequential(nn.Embedding(10, 8), nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 32 }),
      nn.Linear(8, 3))
    ok, err = pcall(checkpoint.load, path("m.safetensors"), { model = wider })
    assert.truthy(err:find("Sequential.load_state_dict: '2.ff.linear[12].%a+' has shape %[[0-9, ]+%] in the state dict, "
      .. "the module expects %[[0-9, ]+%]"), err)
    -- asking for optimizer state a file does not have
    ok, err = pcall(checkpoint.load, path("m.safetensors"), { optimizer = optim.SGD(m, { lr = 1 }) })
    assert.truthy(err:find("has no optimizer state", 1, true), err)
    checkpoint.save(path("o.safetensors"), { model = m, optimizer = optim.Adam(m) })
    ok, err = pcall(checkpoint.load, path("o.safetensors"), { optimizer = optim.SGD(m, { lr = 1 }) })
    assert.truthy(err:find("holds Adam state, the optimizer is SGD", 1, true), err)
  end)
end)

describe("ember.save / ember.load (torch.save / torch.load)", function()
  it("round-trip a tensor, a state dict and a module's state dict, in either argument order", function()
    local t = ember.randn(3, 4):bfloat16()
    ember.save(t, path("t.safetensors"))
    local back = ember.load(path("t.safetensors"))
    assert.is_true(ember.is_tensor(back))
    assert.are.equal("bfloat16", back.dtype)
    assert.is_true(ember.equal(back, t))
    ember.save(path("t2.safetensors"), t:double()) -- Torch7's order
    assert.is_true(ember.equal(ember.load(path("t2.safetensors")), t:double()))

    ember.manual_seed(1)
    local m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    ember.save(m, path("m.safetensors"))
    local sd = ember.load(path("m.safetensors"))
    assert.are.same({ "1.bias", "1.weight", "3.bias", "3.weight" }, (function()
      local k = {}
      for n in pairs(sd) do k[#k + 1] = n end
      table.sort(k)
      return k
    end)())
    ember.manual_seed(2)
    local m2 = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    m2:load_state_dict(sd)
    local x = ember.randn(2, 4)
    assert.is_true(ember.equal(m(x), m2(x)))
    ember.save(m:state_dict(), path("sd.safetensors"))
    assert.is_true(ember.equal(ember.load(path("sd.safetensors"))["3.weight"], m:state_dict()["3.weight"]))
  end)

  it("save PyTorch's usual checkpoint, {model = sd, optimizer = sd, ...} of a nested model, and resume exactly", function()
    local function build()
      ember.manual_seed(0)
      local m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.1), nn.Linear(8, 3))
      local opt = optim.AdamW(m:parameters(), { lr = 1e-2 })
      return m, opt, optim.CosineAnnealingLR(opt, { T_max = 6 })
    end
    ember.manual_seed(1)
    local x, y = ember.randn(16, 4), (ember.rand(16) * 3):long() + 1
    local function step(m, opt, sched)
      local loss = ember.cross_entropy(m(x), y)
      opt:zero_grad(); loss:backward(); opt:step(); sched:step()
      return loss:item()
    end
    local m, opt, sched = build()
    ember.manual_seed(5)
    local straight = {}
    for i = 1, 6 do straight[i] = step(m, opt, sched) end
    local m2, opt2, sched2 = build()
    ember.manual_seed(5)
    for _ = 1, 3 do step(m2, opt2, sched2) end
    -- state dict keys hold dots ("1.weight"); odd keys round-trip too
    ember.save({ model = m2:state_dict(), optimizer = opt2:state_dict(), scheduler = sched2:state_dict(),
      rng = ember.get_rng_state(), epoch = 3, ["#a.b%2E"] = "odd", [7] = true }, path("ck.safetensors"))
    local ck = ember.load(path("ck.safetensors"))
    assert.are.equal(3, ck.epoch)
    assert.are.equal("odd", ck["#a.b%2E"])
    assert.are.equal(true, ck[7])
    assert.is_true(ember.equal(ck.model["4.weight"], m2:state_dict()["4.weight"]))
    local m3, opt3, sched3 = build()
    m3:load_state_dict(ck.model); opt3:load_state_dict(ck.optimizer); sched3:load_state_dict(ck.scheduler)
    ember.set_rng_state(ck.rng)
    for i = 4, 6 do assert.are.equal(straight[i], step(m3, opt3, sched3), "step " .. i) end
  end)

  it("read a nest written before keys were escaped as it was written", function()
    checkpoint.save_tensors(path("old.safetensors"), { ["a.x%2Ey"] = ember.ones(2) },
      { ["ember.object"] = "tree", ["tree.a.n"] = "n:4" })
    local back = ember.load(path("old.safetensors"))
    assert.are.equal(4, back.a.n)
    assert.is_true(ember.equal(back.a["x%2Ey"], ember.ones(2)))
  end)

  it("refuse what they cannot save or read, at the caller's line", function()
    local function raises(f, msg)
      local line = debug.getinfo(2, "l").currentline
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.truthy(err:find(msg, 1, true), err)
      assert.truthy(err:find("checkpoint_spec.lua:" .. line .. ":", 1, true), "at the caller's line: " .. err)
    end
    raises(function() ember.save({ a = print }, path("x.safetensors")) end,
      "ember.save: cannot save 'a', a function")
    raises(function() ember.save(function() end, path("x.safetensors")) end,
      "ember.save: can save a tensor, a table or a module, got a function")
    raises(function() ember.save(ember.zeros(1)) end, "ember.save: expected (object, path), got a nil as the path")
    raises(function() ember.save({ a = { [""] = 1 } }, path("x.safetensors")) end,
      "ember.save: cannot save the key '' under 'a' (keys are integers or non-empty strings)")
    raises(function() ember.save({ [1.5] = 1 }, path("x.safetensors")) end,
      "ember.save: cannot save the key of type number under '(top)'")
    raises(function() ember.load(path("missing.safetensors")) end, "missing.safetensors")
  end)
end)
