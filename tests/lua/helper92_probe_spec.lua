-- helper92: a researcher's training loop end to end -- resuming a run from
-- a checkpoint in a fresh process, bit for bit; schedules' state across a
-- checkpoint; clip_grad_norm's norm_type = "inf"; nn.init's torch names;
-- metrics' append on resume; progress' initial count.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local checkpoint = require "ember.checkpoint"
local metrics = require "ember.metrics"
local progress = require "ember.progress"

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))

-- A training run: MLP or Transformer layer with dropout, AdamW with two
-- param groups (no decay on biases), WarmupCosine, grad clipping, a
-- shuffled DataLoader with its own generator. `mode`: full (N steps),
-- first (stop mid-epoch at HALF and save everything), resume (load, go on
-- to N). Prints each step's loss and lr and writes the final weights.
local RUN = [==[
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"
local checkpoint = require "ember.checkpoint"
local mode, dir, kind = arg[1], arg[2], arg[3]
local N, HALF = 14, 7
ember.manual_seed(1234)
local X, Y = ember.randn(24, 4, 8), ember.randint(1, 6, {24})
local model
if kind == "mlp" then
  X = X:reshape(24, 32)
  model = nn.Sequential(nn.Linear(32, 16), nn.GELU(), nn.Dropout(0.3), nn.Linear(16, 5))
else
  model = nn.Sequential(nn.TransformerEncoderLayer(8, 2, 16, 0.2, {batch_first = true}), nn.Flatten(), nn.Linear(32, 5))
end
local decay, no_decay = {}, {}
for name, p in pairs(model:named_parameters()) do
  if name:match("bias$") or name:match("norm") then no_decay[#no_decay + 1] = p else decay[#decay + 1] = p end
end
local opt = optim.AdamW({{params = decay}, {params = no_decay, weight_decay = 0}}, {lr = 1e-2, weight_decay = 0.1})
local sched = optim.WarmupCosine(opt, {warmup_steps = 3, total_steps = N, min_lr_ratio = 0.1})
local g = ember.Generator():manual_seed(7)
local loader = data.DataLoader(data.TensorDataset(X, Y), {batch_size = 5, shuffle = true, generator = g})
local step, skip, stop = 0, 0, mode == "first" and HALF or N
if mode == "resume" then
  local meta
  if kind == "mlp" then -- the random states in a file of their own (ember.save), as torch users do
    meta = checkpoint.load(dir .. "/ck.safetensors", {model = model, optimizer = opt, scheduler = sched})
    local extra = ember.load(dir .. "/extra.safetensors")
    ember.set_rng_state(extra.rng)
    g:set_state(extra.epoch_gen)
  else -- in the checkpoint (its rng part)
    meta = checkpoint.load(dir .. "/ck.safetensors", {model = model, optimizer = opt, scheduler = sched,
      rng = {global = ember.default_generator, loader = g}})
  end
  step, skip = tonumber(meta.step), tonumber(meta.batch)
end
model:train()
while step < stop do
  local epoch_gen = g:get_state() -- the loader's order of this epoch comes from here
  for batch, i in loader do
    if i > skip then
      opt:zero_grad()
      local loss = ember.cross_entropy(model(batch[1]), batch[2])
      loss:backward()
      optim.clip_grad_norm(model:parameters(), 0.5)
      opt:step(); sched:step()
      step = step + 1
      print(("%d %.17g %.17g"):format(step, loss:item(), sched:get_last_lr()[1]))
      if step == stop then
        if mode == "first" and kind == "mlp" then
          checkpoint.save(dir .. "/ck.safetensors", {model = model, optimizer = opt, scheduler = sched,
            metadata = {step = step, batch = i}})
          ember.save({rng = ember.get_rng_state(), epoch_gen = epoch_gen}, dir .. "/extra.safetensors")
        elseif mode == "first" then
          checkpoint.save(dir .. "/ck.safetensors", {model = model, optimizer = opt, scheduler = sched,
            metadata = {step = step, batch = i}, rng = {global = ember.default_generator, loader = epoch_gen}})
        end
        break
      end
    end
  end
  skip = 0
end
local sd, names = model:state_dict(), {}
for n in pairs(sd) do names[#names + 1] = n end
table.sort(names)
for _, n in ipairs(names) do
  local t = sd[n]:double():reshape(-1)
  for j = 1, t:size(1) do print(("w %s %d %.17g"):format(n, j, t[j]:item())) end
end
]==]

local function run_script(mode, kind)
  local script = dir .. "/run.lua"
  local f = assert(io.open(script, "w"))
  f:write(RUN)
  f:close()
  local bin = (os.getenv("EMBER_BUILD_DIR") or "build") .. "/bin/ember"
  local h = io.popen(("OMP_NUM_THREADS=1 '%s' '%s' %s '%s' %s 2>&1"):format(bin, script, mode, dir, kind))
  local out = h:read("a")
  local ok = h:close()
  assert(ok, out)
  return out
end

describe("helper92: resuming a training run", function()
  for _, kind in ipairs { "mlp", "transformer" } do
    it(kind .. ": a run saved mid-epoch and resumed in a fresh process equals the uninterrupted one bit for bit", function()
      local full = run_script("full", kind)
      local first = run_script("first", kind)
      local resumed = run_script("resume", kind)
      local steps_full = select(2, full:gsub("\n%d+ ", ""))
      assert.are.equal(13, steps_full) -- 14 lines, the first has no newline before it
      -- the first part's steps, then the resumed ones: losses, lrs and final weights
      local first_steps = first:match("^(.-)\nw ") .. "\n"
      assert.are.equal(full, first_steps .. resumed)
    end)
  end
end)

describe("helper92: checkpoint's rng part", function()
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
    assert.matches("helper92_probe_spec.lua:%d+: checkpoint '.-': has no rng state 'other'", err)
    ok, err = pcall(function() checkpoint.load(p, {rng = {loader = st}}) end)
    assert.matches("rng.loader must be an ember.Generator %(its state is loaded into it%), got a table", err)
    ok, err = pcall(function() checkpoint.save(p, {rng = g2}) end)
    assert.matches("rng must be a table {name = generator or state}, got a generator", err)
    ok, err = pcall(function() checkpoint.save(p, {metadata = {["rng.x"] = "3"}}) end)
    assert.matches("metadata key 'rng.x' is reserved", err)
  end)
end)

describe("helper92: a checkpoint.save file given to load_state_dict", function()
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
    assert.matches("helper92_probe_spec.lua:%d+: .*unexpected optimizer%.state%.1%.exp_avg.*an optimizer's state "
      .. "%(a checkpoint.save file%): checkpoint.load%(path, {model = m}%) loads the model's part", err)
    checkpoint.load(p, {model = m2})
    assert.is_true(m2.weight:equal(m.weight))
  end)
end)

describe("helper92: schedules across a checkpoint", function()
  local function make()
    local m = nn.Linear(3, 2)
    local opt = optim.SGD({{params = {m.weight}}, {params = {m.bias}, lr = 0.01}}, {lr = 0.1, momentum = 0.9})
    local s = optim.SequentialLR(opt, {optim.LinearLR(opt, {start_factor = 0.1, total_iters = 3}),
      optim.CosineAnnealingLR(opt, {T_max = 7})}, {milestones = {3}}) -- torch's keyword as a table
    return m, opt, s
  end
  local function steps(m, opt, s, n)
    local out = {}
    for _ = 1, n do
      opt:zero_grad(); m(ember.ones(1, 3)):sum():backward(); opt:step(); s:step()
      local l = s:get_last_lr()
      out[#out + 1] = ("%.12g,%.12g"):format(l[1], opt.param_groups[2].lr)
      assert.are.equal(l[1], opt.param_groups[1].lr) -- get_last_lr is the lr in use
    end
    return table.concat(out, " ")
  end

  it("SequentialLR: get_last_lr goes on after load_state_dict (it stayed at the loaded lrs)", function()
    local m, opt, s = make()
    local full = steps(m, opt, s, 10)
    -- torch 1.13's values for the same schedule
    assert.are.equal("0.04,0.004 0.07,0.007 0.1,0.01 0.0950484433951,0.00950484433951", full:match("^(%S+ %S+ %S+ %S+)"))
    m, opt, s = make()
    local a = steps(m, opt, s, 5)
    local p = dir .. "/seq.safetensors"
    checkpoint.save(p, {model = m, optimizer = opt, scheduler = s})
    local m2, opt2, s2 = make()
    checkpoint.load(p, {model = m2, optimizer = opt2, scheduler = s2})
    assert.are.equal(full, a .. " " .. steps(m2, opt2, s2, 5))
  end)

  it("SequentialLR's options table is checked", function()
    local opt = optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1})
    local ok, err = pcall(optim.SequentialLR, opt, {optim.ConstantLR(opt), optim.ConstantLR(opt)}, {milestone = {3}})
    assert.is_false(ok)
    assert.matches("helper92_probe_spec.lua:%d+: SequentialLR: unknown option 'milestone'", err)
    ok, err = pcall(optim.SequentialLR, opt, {optim.ConstantLR(opt), optim.ConstantLR(opt)}, 2)
    assert.is_false(ok)
    assert.matches("SequentialLR: milestones must be a list of steps %({2}%), got the number 2", err)
  end)
end)

describe("helper92: clip_grad_norm_", function()
  it("takes torch's norm_type 'inf' (the max abs value)", function()
    local a = ember.tensor({{3, -4}}):requires_grad_()
    a.grad = ember.tensor({{3, -4}})
    local n = nn.utils.clip_grad_norm_(a, 1.0, "inf")
    assert.are.equal(4, n)
    assert.is_true(math.abs(a.grad[1][2]:item() + 1) < 1e-5)
    a.grad = ember.tensor({{3, -4}})
    assert.are.equal(4, optim.clip_grad_norm({a}, 10, {norm_type = "inf"}))
    local ok, err = pcall(optim.clip_grad_norm, {a}, 1.0, "infinity")
    assert.is_false(ok)
    assert.matches("helper92_probe_spec.lua:%d+: clip_grad_norm: norm_type must be", err)
  end)
end)

describe("helper92: optimizer groups and clipping's arguments", function()
  it("a group's params may be one tensor, as torch's ({params = w})", function()
    local m = nn.Linear(3, 2)
    local opt = optim.AdamW({{params = m.weight, weight_decay = 0.1}}, {lr = 1e-2})
    opt:add_param_group({params = m.bias, weight_decay = 0})
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(m.weight, opt.param_groups[1].params[1])
    assert.are.equal(m.bias, opt.param_groups[2].params[1])
    assert.are.equal(0, opt.param_groups[2].weight_decay)
  end)

  it("clip_grad_norm / clip_grad_value name a params entry that is not a tensor", function()
    local ok, err = pcall(function() optim.clip_grad_norm({1, 2}, 1) end)
    assert.is_false(ok)
    assert.matches("helper92_probe_spec.lua:%d+: clip_grad_norm: params%[1%] is a number, not a tensor", err)
    ok, err = pcall(function() optim.clip_grad_value({ember.zeros(1), "w"}, 1) end)
    assert.is_false(ok)
    assert.matches("helper92_probe_spec.lua:%d+: clip_grad_value: params%[2%] is a string, not a tensor", err)
  end)
end)

describe("helper92: nn.init", function()
  it("has torch's _calculate_fan_in_and_fan_out", function()
    local fi, fo = nn.init._calculate_fan_in_and_fan_out(ember.empty(64, 32, 3, 3))
    assert.are.equal(288, fi)
    assert.are.equal(576, fo)
    local ok, err = pcall(nn.init._calculate_fan_in_and_fan_out, ember.empty(5))
    assert.is_false(ok)
    assert.matches("helper92_probe_spec.lua:%d+: nn.init._calculate_fan_in_and_fan_out: fan in and fan out need", err)
  end)
end)

describe("helper92: metrics and progress on a resumed run", function()
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
    assert.matches("helper92_probe_spec.lua:%d+: metrics.new: cannot append to .*its columns are step, loss, note", err)
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
    assert.matches("helper92_probe_spec.lua:%d+: metrics: column 'loss' is given a tensor of 2 elements", err)
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
    assert.matches("helper92_probe_spec.lua:%d+: progress.new: total is required", err)
  end)
end)
