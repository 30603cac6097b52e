-- Training runs end to end. A researcher's run resumed from a checkpoint in
-- a fresh process equals the uninterrupted one bit for bit (the model, the
-- optimizer, the schedule, the random states, the loader's order mid-epoch);
-- a new user's encoder classifier built from the README's parts learns.
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"

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

describe("resuming a training run", function()
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

describe("a new user's encoder classifier", function()
  it("an encoder classifier with the README's parts learns a token-order task", function()
    -- label 2 when token 3 comes before token 4 in the row, else 1: needs positions and attention
    ember.manual_seed(0)
    local n, L, V = 512, 6, 8
    local X = ember.randint(5, V + 1, { n, L }, { dtype = "int64" })
    local Y = ember.zeros(n, "int64")
    local g = ember.Generator():manual_seed(1)
    for i = 1, n do
      local p = ember.randperm(L, { generator = g })
      local a, b = p[1]:item(), p[2]:item() -- randperm gives 1-based positions
      X[{ i, a }], X[{ i, b }] = 3, 4
      Y[i] = a < b and 2 or 1
    end
    local Net = nn.Module:extend("Net")
    function Net:__init()
      self.emb, self.pos = nn.Embedding(V, 32), nn.Embedding(L, 32)
      self.enc = nn.TransformerEncoderLayer(32, 4, { dim_feedforward = 64, dropout = 0, norm_first = true })
      self.head = nn.Linear(32, 2)
    end
    function Net:forward(x)
      return self.head(self.enc(self.emb(x) + self.pos(ember.arange(1, L + 1, "int64"))):mean(2))
    end
    local model = Net()
    local loader = data.DataLoader(data.TensorDataset(X, Y), { batch_size = 64, shuffle = true })
    local opt = optim.AdamW(model:parameters(), { lr = 3e-3 })
    local sched = optim.WarmupCosine(opt, { warmup_steps = 10, total_steps = 15 * #loader })
    local first, last
    for _ = 1, 15 do
      for x, y in loader:iter() do
        local loss = nn.functional.cross_entropy(model(x), y)
        opt:zero_grad(); loss:backward(); optim.clip_grad_norm(model, 1.0); opt:step(); sched:step()
        first, last = first or loss:item(), loss:item()
      end
    end
    model:eval()
    local acc = ember.no_grad(function() return model(X):argmax(-1):eq(Y):float():mean():item() end)
    assert.is_true(last < first / 3, ("loss %.3f -> %.3f"):format(first, last))
    assert.is_true(acc > 0.9, "accuracy " .. acc)
  end)
end)
