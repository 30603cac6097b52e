-- ddp_overlap.lua: what DistributedDataParallel's overlap buys. Run on R
-- ranks (ddp_overlap.sh does, at 2 and 4): each rank trains the same model
-- on its own batch, and the median step time is measured four ways:
--   compute   no communication at all (each rank alone, same per-rank batch)
--   ddp       DistributedDataParallel, buckets all-reduced during backward
--   serial    DistributedDataParallel(overlap = false): every bucket after backward
--   comm      the all-reduce of the same buckets alone, no compute
-- hidden share = (serial - ddp) / (serial - compute): how much of the
-- communication the overlap took off the step.
--   ember scripts/bench/ddp_overlap.lua MODEL [steps]   MODEL: langid | mlp
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local dist = require "ember.distributed"
dist.init()
local which, steps = arg[1] or "langid", tonumber(arg[2]) or 20
local R, me = dist.world_size(), dist.rank()

local function build()
  ember.manual_seed(0)
  if which == "mlp" then -- 8.4M parameters: gradients of 34 MB, enough to see the network
    local layers = {}
    for i = 1, 8 do
      layers[#layers + 1] = nn.Linear(1024, 1024)
      if i < 8 then layers[#layers + 1] = nn.ReLU() end
    end
    local m = nn.Sequential(table.unpack(layers))
    local x = ember.randn(64, 1024)
    return m, function(net) return net(x):pow(2):mean() end
  end
  -- langid's attention classifier (d 64, 2 pre-LN layers, ffn 256) without the demo's hashed n-gram
  -- table (114,181 parameters; scripts/langid.lua has 2.2 M, mostly that table), 32 words per rank
  local Classifier = nn.Module:extend("Classifier")
  function Classifier:__init()
    self:add_module("embed", nn.Embedding(60, 64))
    self:add_module("pos", nn.LearnedPositionalEncoding(22, 64))
    for i = 1, 2 do
      self:add_module("layer" .. i, nn.TransformerEncoderLayer(64, 4, {dim_feedforward = 256, norm_first = true}))
    end
    self:add_module("head", nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 5)))
  end
  function Classifier:forward(ids)
    local h = self.pos(self.embed(ids))
    for i = 1, 2 do h = self["layer" .. i](h) end
    return self.head(h:mean(2))
  end
  local m = Classifier()
  local ids = (ember.rand(32, 12) * 59):long() + 1
  local y = (ember.rand(32) * 5):long() + 1
  return m, function(net) return ember.cross_entropy(net(ids), y) end
end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

local function time_steps(net, params, loss_fn)
  local opt = optim.SGD(params, {lr = 1e-4})
  local ts = {}
  for i = 1, steps + 3 do
    dist.barrier()
    local t0 = ember.clock()
    local loss = loss_fn(net)
    opt:zero_grad()
    loss:backward()
    opt:step()
    local t = ember.tensor({ember.clock() - t0}, {dtype = "float64"})
    dist.all_reduce(t, "max") -- the step takes as long as its slowest rank
    if i > 3 then ts[#ts + 1] = t[1]:item() end
  end
  return median(ts)
end

local m, loss_fn = build()
local n_params = m:num_parameters()
local compute = time_steps(m, m:parameters(), loss_fn)
local ddp = dist.DistributedDataParallel(m)
local t_ddp = time_steps(ddp, ddp:parameters(), loss_fn)
ddp:remove_hooks()
local serial = dist.DistributedDataParallel(m, {overlap = false})
local t_serial = time_steps(serial, serial:parameters(), loss_fn)
serial:remove_hooks()
-- the buckets' all-reduces alone
local flats = {}
for _, n in ipairs(ddp:bucket_sizes()) do flats[#flats + 1] = ember.zeros(n) end
local cs = {}
for i = 1, steps + 3 do
  dist.barrier()
  local t0 = ember.clock()
  local ws = {}
  for k, f in ipairs(flats) do ws[k] = dist.all_reduce(f, "mean", {async = true}) end
  for _, w in ipairs(ws) do w:wait() end
  local t = ember.tensor({ember.clock() - t0}, {dtype = "float64"})
  dist.all_reduce(t, "max")
  if i > 3 then cs[#cs + 1] = t[1]:item() end
end
local t_comm = median(cs)
if me == 0 then
  local hidden = t_serial > compute and (t_serial - t_ddp) / (t_serial - compute) or 0
  print(("RESULT model=%s ranks=%d params=%d grad_MB=%.2f buckets=%d compute_ms=%.2f ddp_ms=%.2f serial_ms=%.2f "
         .. "comm_ms=%.2f hidden=%.0f%% ddp_over_compute=%.2f"):format(which, R, n_params, n_params * 4 / 2 ^ 20,
         #flats, compute * 1e3, t_ddp * 1e3, t_serial * 1e3, t_comm * 1e3, 100 * hidden, t_ddp / compute))
end
