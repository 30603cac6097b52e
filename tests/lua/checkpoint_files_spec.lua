-- Checkpoints and saved files as a PyTorch user writes and resumes them:
-- checkpoint's rng part, a checkpoint.save file given to load_state_dict,
-- optimizers with string options saved and resumed, checkpoint.load's
-- strict = false, metadata numbers written short and exact, metrics and
-- progress on a resumed run; ember.save / ember.load of plain values,
-- torch.save's legacy format, and safetensors files with small integer
-- tensors.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local checkpoint = require "ember.checkpoint"
local metrics = require "ember.metrics"
local progress = require "ember.progress"
local parity = require "tests.lua.helpers.parity"
local raises_here = parity.raises_here
local files = require "tests.lua.helpers.files"

local dir = require("tests.lua.helpers.tmpdir")()

describe("checkpoint's rng part", function()
  it("saves generators or their states and loads them into generators", function()
    local p = dir .. "/rng.safetensors"
    local g = ember.Generator():manual_seed(5)
    ember.manual_seed(9)
    ember.rand(3)
    local st = g:get_state()
    ember.rand(4, {generator = g})
    checkpoint.save(p, {model = nn.Linear(2, 2), rng = {global = ember.default_generator, loader = st},
      metadata = {step = 3}})
    local a, b = ember.rand(5), ember.rand(4, {generator = ember.Generator():set_state(st)})
    ember.manual_seed(0)
    local g2 = ember.Generator()
    local meta = checkpoint.load(p, {rng = {global = ember.default_generator, loader = g2}})
    assert.is_true(ember.rand(5):equal(a))
    assert.is_true(ember.rand(4, {generator = g2}):equal(b))
    assert.are.same({step = "3"}, meta) -- the states are not the user's metadata
    local ok, err = pcall(function() checkpoint.load(p, {rng = {other = g2}}) end)
    assert.is_false(ok)
    assert.matches("checkpoint_files_spec.lua:%d+: checkpoint '.-': has no rng state 'other'", err)
    ok, err = pcall(function() checkpoint.load(p, {rng = {loader = st}}) end)
    assert.matches("rng.loader must be an ember.Generator %(its state is loaded into it%), got a table", err)
    ok, err = pcall(function() checkpoint.save(p, {rng = g2}) end)
    assert.matches("rng must be a table {name = generator or state}, got a generator", err)
    ok, err = pcall(function() checkpoint.save(p, {metadata = {["rng.x"] = "3"}}) end)
    assert.matches("metadata key 'rng.x' is reserved", err)
  end)
end)

describe("a checkpoint.save file given to load_state_dict", function()
  it("says the extra names are the optimizer's and how to load the model's part", function()
    local p = dir .. "/ck2.safetensors"
    local m = nn.Linear(2, 2)
    local opt = optim.Adam(m:parameters())
    m(ember.ones(1, 2)):sum():backward()
    opt:step()
    checkpoint.save(p, {model = m, optimizer = opt})
    local m2 = nn.Linear(2, 2)
    local ok, err = pcall(function() m2:load_state_dict(ember.load(p)) end)
    assert.is_false(ok)
    assert.matches("checkpoint_files_spec.lua:%d+: .*unexpected optimizer%.state%.1%.exp_avg.*an optimizer's state "
      .. "%(a checkpoint.save file%): checkpoint.load%(path, {model = m}%) loads the model's part", err)
    checkpoint.load(p, {model = m2})
    assert.is_true(m2.weight:equal(m.weight))
  end)
end)

describe("checkpoint.save of an optimizer with a string option", function()
  local checkpoint = require "ember.checkpoint"

  -- checkpoint.save refused every string but the optimizer's type:
  -- Adafactor (eps = {"auto", 1e-3} by default), Muon (adjust_lr_fn =
  -- "original") and LBFGS with line_search_fn = "strong_wolfe" could not be
  -- saved at all ("cannot save 'optimizer.param_groups.1.eps.1', a string").
  it("saves and resumes Adafactor, Muon and LBFGS(strong_wolfe) as if never stopped", function()
    local path = os.tmpname()
    local makers = {
      function(ps) return optim.Adafactor(ps, { lr = 0.05 }) end,
      function(ps) return optim.Muon(ps, { lr = 0.05 }) end,
      function(ps) return optim.LBFGS(ps, { lr = 1, line_search_fn = "strong_wolfe", max_iter = 4 }) end,
    }
    local t = ember.tensor({ { 0.1, -0.2, 0.3 }, { 0.4, 0.5, -0.6 } }, { dtype = "float64" })
    for _, make in ipairs(makers) do
      local function fresh() return ember.tensor({ { 0.5, -1.2, 2 }, { 0.3, -0.7, 1.1 } }, { dtype = "float64" }):requires_grad_() end
      local function run(w, opt, n)
        for _ = 1, n do
          opt:step(function()
            opt:zero_grad()
            local loss = (w * w * w * w / 4 - w * t):sum()
            loss:backward()
            return loss
          end)
        end
      end
      local w1 = fresh()
      local o1 = make({ w1 })
      run(w1, o1, 4)
      local w2 = fresh()
      local o2 = make({ w2 })
      run(w2, o2, 2)
      checkpoint.save(path, { optimizer = o2 })
      local w3 = w2:detach():clone():requires_grad_()
      local o3 = make({ w3 })
      checkpoint.load(path, { optimizer = o3 })
      run(w3, o3, 2)
      assert.are.same(w1:totable(), w3:totable())
    end
    os.remove(path)
  end)

  it("reads the strings back as strings", function()
    local path = os.tmpname()
    local opt = optim.Muon({ ember.zeros(2, 2):requires_grad_() }, { adjust_lr_fn = "match_rms_adamw" })
    checkpoint.save(path, { optimizer = opt })
    local o2 = optim.Muon({ ember.zeros(2, 2):requires_grad_() })
    checkpoint.load(path, { optimizer = o2 })
    assert.are.equal("match_rms_adamw", o2.param_groups[1].adjust_lr_fn)
    assert.are.equal("bfloat16", o2.param_groups[1].ns_dtype)
    os.remove(path)
  end)
end)

describe("checkpoint.load with strict = false", function()
  local checkpoint = require "ember.checkpoint"

  -- Module:load_state_dict(sd, false) returns the missing and unexpected
  -- names (PyTorch's load_state_dict(strict=False) result); checkpoint.load
  -- dropped them, so a resumed model with a new head could not tell what
  -- was left at its initial values.
  it("returns the model's missing and unexpected names", function()
    local path = os.tmpname()
    checkpoint.save(path, { model = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2)), metadata = { epoch = "4" } })
    local grown = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2), nn.Linear(2, 2))
    local meta, _, missing, unexpected = checkpoint.load(path, { model = grown, strict = false })
    assert.are.equal("4", meta.epoch)
    assert.are.same({ "3.bias", "3.weight" }, missing)
    assert.are.same({}, unexpected)
    local _, _, m2, u2 = checkpoint.load(path, { model = nn.Sequential(nn.Linear(3, 2)), strict = false })
    assert.are.same({}, m2)
    assert.are.same({ "2.bias", "2.weight" }, u2)
    os.remove(path)
  end)
end)

describe("checkpoint metadata", function()
  it("checkpoint metadata numbers are written as short as reads back exactly", function()
    local path = os.tmpname()
    local model = nn.Linear(2, 2)
    local opt = optim.AdamW(model:parameters(), { lr = 0.003 })
    checkpoint.save(path, { model = model, optimizer = opt,
      metadata = { acc = 0.8, third = 1 / 3, sum = 0.1 + 0.2, epoch = 3, big = 2 ^ 60 + 0.0 } })
    local meta, raw = checkpoint.load(path, { model = nn.Linear(2, 2) })
    os.remove(path)
    assert.are.equal("0.8", meta.acc)
    assert.are.equal("3", meta.epoch)
    assert.are.equal("0.003", raw["optimizer.param_groups.1.lr"])
    for _, k in ipairs({ "acc", "third", "sum", "big" }) do
      local want = ({ acc = 0.8, third = 1 / 3, sum = 0.1 + 0.2, big = 2 ^ 60 + 0.0 })[k]
      assert.are.equal(want, tonumber(meta[k]))
    end
    assert.are.equal("0.30000000000000004", meta.sum) -- 0.3 would not read back
  end)
end)

describe("metrics and progress on a resumed run", function()
  it("metrics.new(path, columns, {append = true, drop_after = {step = k}}) keeps the earlier rows", function()
    local p = dir .. "/m.csv"
    local log = metrics.new(p, {"step", "loss", "note"}, {append = true}) -- no file yet: a new one
    for s = 1, 5 do log:log{step = s, loss = 1 / s, note = s == 2 and "a,b" or nil} end
    log:close()
    local log2 = metrics.new(p, {"step", "loss", "note"}, {append = true, drop_after = {step = 3}})
    assert.are.equal(3, #log2.rows)
    log2:log{step = 4, loss = 0.25}
    log2:close()
    local f = assert(io.open(p))
    assert.are.equal('step,loss,note\n1,1,\n2,0.5,"a,b"\n3,0.333333333,\n4,0.25,\n', f:read("a"))
    f:close()
    local xs = log2:series("step", "loss")
    assert.are.same({1, 2, 3, 4}, xs)
    assert.are.equal(0, #metrics.new(p, {"step", "loss", "note"}).rows) -- without append: replaced
    local ok, err = pcall(function() local l = metrics.new(p, {"step", "acc"}, {append = true}); return l end)
    assert.is_false(ok)
    assert.matches("checkpoint_files_spec.lua:%d+: metrics.new: cannot append to .*its columns are step, loss, note", err)
    ok, err = pcall(metrics.new, p, {"step"}, {apend = true})
    assert.is_false(ok)
    assert.matches("unknown option 'apend'", err)
  end)

  it("metrics' log takes a one-element tensor as its number", function()
    local p = dir .. "/t.csv"
    local log = metrics.new(p, {"step", "loss"})
    log:log{step = 1, loss = ember.tensor(0.5)}
    log:log{step = 2, loss = ember.tensor({0.25}, {dtype = "float64"})}
    local ok, err = pcall(function() log:log{step = 3, loss = ember.zeros(2)} end)
    log:close()
    assert.is_false(ok)
    assert.matches("checkpoint_files_spec.lua:%d+: metrics: column 'loss' is given a tensor of 2 elements", err)
    local f = assert(io.open(p))
    assert.are.equal("step,loss\n1,0.5\n2,0.25\n", f:read("a"))
    f:close()
    assert.are.same({0.5, 0.25}, select(2, log:series("step", "loss")))
  end)

  it("progress.new{initial = k}: the rate counts only this run's items", function()
    local bar = progress.new{total = 100, initial = 50}
    bar.silent = true
    bar.start = progress.now() - 10
    bar:update(60)
    assert.matches(" 60/100 ", (bar:line()))
    assert.matches(" 1 it/s", (bar:line())) -- 10 items in 10 s, not 60
    bar:update(61, {loss = ember.tensor(0.125)}) -- a one-element tensor shows its number
    assert.matches(" 61/100  loss 0.125 ", (bar:line()))
    local ok, err = pcall(function() local b = progress.new({}); return b end)
    assert.is_false(ok)
    assert.matches("checkpoint_files_spec.lua:%d+: progress.new: total is required", err)
  end)
end)

describe("ember.save / ember.load of plain values", function()
  -- was: -0.0 came back as 0.0 ("f:-0" read as the integer 0)
  it("keeps the sign of -0.0", function()
    local p = os.tmpname()
    ember.save({ a = -0.0, b = 0.0, c = -1.5 }, p)
    local r = ember.load(p)
    os.remove(p)
    assert.are.equal(-math.huge, 1 / r.a)
    assert.are.equal(math.huge, 1 / r.b)
    assert.are.equal(-1.5, r.c)
  end)
end)

describe("ember.load of torch.save's legacy format (_use_new_zipfile_serialization=False)", function()
  local FIX = "tests/fixtures/"
  -- was: refused ('a torch.save file in the legacy format ..., which ember does not read')
  it("reads the same object as the zip archive of it: every dtype, views, 0-d, empty, Parameter, nests", function()
    local z, l = ember.load(FIX .. "checkpoint_files_zip.pt"), ember.load(FIX .. "checkpoint_files_legacy.pt")
    local n = 0
    for _, k in ipairs(parity.sorted_keys(z)) do
      if ember.is_tensor(z[k]) then
        n = n + 1
        assert.are.equal(z[k].dtype, l[k].dtype, k)
        assert.are.same({ table.unpack(z[k].shape) }, { table.unpack(l[k].shape) }, k)
        assert.is_true(ember.equal(z[k], l[k]), k)
      end
    end
    assert.are.equal(16, n)
    assert.is_true(ember.equal(l.view, ember.arange(3, 9)))
    assert.is_true(ember.equal(l.strided, ember.arange(20):view(4, 5)[{ {}, { 2, 5 } }]:index_select(2,
      ember.tensor({ 1, 3 }, { dtype = "int64" }))))
    assert.is_true(ember.equal(l.t, ember.arange(20):view(4, 5):t()))
    assert.is_true(ember.equal(l.expanded, ember.tensor({ { 1.5, 1.5, 1.5 }, { -2, -2, -2 } })))
    assert.are.equal(-(1 << 40), l.i64[1]:item())
    assert.are.same({ -300, 2 }, { l.i16[1]:item(), l.i16[2]:item() })
    assert.are.equal(255, l.u8[3]:item())
    assert.are.equal(0, l.scalar.ndim)
    assert.is_true(l.param.requires_grad and l.param.is_leaf)
    assert.are.same({ 3, "s" }, { l.nested.a[2][2], l.nested.a[2][3] })
    assert.are.same({ [1] = 2.5, t = true }, l.nested.b)
    assert.is_true(ember.equal(l.nested.a[2][1], ember.zeros(1)))
  end)

  it("a cut legacy file is refused naming it", function()
    files.each_cut(FIX .. "checkpoint_files_legacy.pt", function(n) return { n - 10, n // 2, 40, 10 } end, function(cut)
      raises_here(function() ember.load(cut) end, "ember.load: '" .. cut .. "'")
    end)
  end)
end)

describe("a PyTorch safetensors file with small integer tensors", function()
  local checkpoint = require "ember.checkpoint"

  -- A file as safetensors.torch.save_file writes it (an 8-byte header
  -- length, the JSON header, the data), with one tensor per dtype.
  local function file(entries)
    local header, data = {}, {}
    local off = 0
    for _, e in ipairs(entries) do
      header[#header + 1] = ('"%s":{"dtype":"%s","shape":[%d],"data_offsets":[%d,%d]}'):format(e[1], e[2], #e[4],
        off, off + #e[3])
      data[#data + 1] = e[3]
      off = off + #e[3]
    end
    local json = "{" .. table.concat(header, ",") .. ',"__metadata__":{"format":"pt"}}'
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(string.pack("<I8", #json), json, table.concat(data))
    f:close()
    return path
  end

  -- torch.uint8 (a mask buffer), int8, int16: "tensor 'mask' has dtype
  -- 'U8', expected one of ..." -- one such tensor kept the whole file,
  -- the float weights too, from loading.
  it("loads them as int64, exactly, with the rest of the file", function()
    local path = file {
      { "mask", "U8", string.pack("BBB", 0, 1, 255), { 0, 1, 255 } },
      { "q8", "I8", string.pack("bbb", -128, 0, 127), { -128, 0, 127 } },
      { "q16", "I16", string.pack("<i2<i2", -32768, 32767), { -32768, 32767 } },
      { "u16", "U16", string.pack("<I2", 65535), { 65535 } },
      { "u32", "U32", string.pack("<I4<I4", 4294967295, 7), { 4294967295, 7 } },
      { "w", "F32", string.pack("<f<f", 1.5, -2), { 1.5, -2 } },
    }
    local t = checkpoint.load_tensors(path)
    for _, name in ipairs { "mask", "q8", "q16", "u16", "u32" } do assert.are.equal("int64", t[name].dtype) end
    assert.are.same({ 0, 1, 255 }, t.mask:totable())
    assert.are.same({ -128, 0, 127 }, t.q8:totable())
    assert.are.same({ -32768, 32767 }, t.q16:totable())
    assert.are.same({ 65535 }, t.u16:totable())
    assert.are.same({ 4294967295, 7 }, t.u32:totable())
    assert.are.same({ 1.5, -2 }, ember.load(path).w:totable())
    os.remove(path)
  end)
end)
