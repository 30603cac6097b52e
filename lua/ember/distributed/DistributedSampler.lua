-- DistributedSampler(n [, opts]): which of a dataset's n rows this rank
-- reads each epoch (torch.utils.data.DistributedSampler). n may be the
-- dataset itself (its size() or #).
--
--   local dist = require "ember.distributed"     -- under `mpirun -np 2 build/bin/ember x.lua`
--   dist.init()
--   local ds = require("ember.data.dataset").new({x = ember.arange(1, 11):view(10, 1)})
--   local s = dist.DistributedSampler(ds, {shuffle = true, seed = 0})   -- or ds:size()
--   s:set_epoch(1)
--   local mine = 0
--   for b in ds:batches(2, {sampler = s}) do mine = mine + b.x:size(1) end   -- or s:batches(ds, bs), s:indices()
--   print(mine, #s)                        --> 5 5
--   print(dist.sum_numbers(#s))            --> 10.0
--
-- Every rank draws the same permutation of 1..n from (seed, epoch) with a
-- generator of its own (not ember's global one), then takes every
-- world_size-th entry starting at its rank, so the shards are disjoint and
-- together cover the data. With drop_last the tail that does not divide
-- evenly is dropped; otherwise (pad, the default) the shards are evened up
-- by repeating the first indices, as PyTorch does; pad = false gives every
-- row to exactly one rank and shards that differ by at most one (for
-- evaluation, where a repeated row would count twice).
--
-- Batch b of rank r holds positions r+1, r+1+R, ... of global batch b of
-- the same permutation, so R ranks at batch B/R see exactly the rows one
-- process sees at batch B.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember"
local dist = require "ember.distributed"
local Rng = require "ember.data.rng"
local Dataset = require "ember.data.dataset"

local Sampler = {}
Sampler.__index = Sampler
Sampler.__name = "DistributedSampler"

local OPTIONS = {num_replicas = true, rank = true, shuffle = true, seed = true, drop_last = true, pad = true}

function Sampler.new(n, opts)
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then error(("DistributedSampler: unknown option '%s'"):format(tostring(k)), 3) end
  end
  -- a dataset (as torch's DistributedSampler(dataset) takes) stands for its
  -- size: size(), else #ds (a plain Lua list of rows included, as DataLoader takes)
  local mt = (type(n) == "table" or type(n) == "userdata") and getmetatable(n)
  if type(n) == "table" and type(n.size) == "function" then n = n:size()
  elseif (mt and mt.__len) or (type(n) == "table" and not mt and (#n > 0 or next(n) == nil)) then n = #n end
  if math.type(n) ~= "integer" or n < 0 then
    error(("DistributedSampler: the dataset size must be a non-negative integer, got %s"):format(tostring(n)), 3)
  end
  for _, k in ipairs({"shuffle", "drop_last", "pad"}) do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      error(("DistributedSampler: %s must be a boolean, got %s"):format(k, type(opts[k])), 3)
    end
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    error(("DistributedSampler: seed must be an integer, got %s"):format(tostring(opts.seed)), 3)
  end
  local R = opts.num_replicas or dist.size_or_1()
  local r = opts.rank or dist.rank_or_0()
  if math.type(R) ~= "integer" or R < 1 then error("DistributedSampler: num_replicas must be a positive integer", 3) end
  if math.type(r) ~= "integer" or r < 0 or r >= R then
    error(("DistributedSampler: rank %s is not in 0..%d"):format(tostring(r), R - 1), 3)
  end
  local self = setmetatable({n = n, num_replicas = R, rank = r, shuffle = opts.shuffle ~= false,
                             seed = opts.seed or 0, drop_last = opts.drop_last == true,
                             pad = opts.pad ~= false, epoch = 0}, Sampler)
  if self.drop_last then
    self.num_samples = n // R
  elseif self.pad then
    self.num_samples = (n + R - 1) // R
  else
    self.num_samples = n // R + ((r < n % R) and 1 or 0)
  end
  return self
end

-- A different permutation each epoch (the same on every rank).
function Sampler:set_epoch(e)
  if math.type(e) ~= "integer" then error("DistributedSampler:set_epoch: the epoch must be an integer", 2) end
  self.epoch = e
end

function Sampler:__len() return self.num_samples end
-- The number of rows of this rank (`#s`), as data.samplers' size().
function Sampler:size() return self.num_samples end

-- This rank's rows as Lua integers: `for i in s:iter() do` (torch's `for i in sampler`).
function Sampler:iter()
  local rows, k = self:list(), 0
  return function()
    k = k + 1
    return rows[k]
  end
end

-- The 1-based rows of this rank for the current epoch, as a Lua list.
function Sampler:list()
  local n, R = self.n, self.num_replicas
  local order = {}
  for i = 1, n do order[i] = i end
  if self.shuffle then
    local rng = Rng.new(self.seed * 1000003 + self.epoch)
    for i = n, 2, -1 do
      local j = rng:int(1, i)
      order[i], order[j] = order[j], order[i]
    end
  end
  local total
  if self.drop_last then
    total = self.num_samples * R
  elseif self.pad then
    total = self.num_samples * R
    for i = n + 1, total do order[i] = order[(i - n - 1) % math.max(n, 1) + 1] end
  else
    total = n
  end
  local mine = {}
  for i = self.rank + 1, total, R do mine[#mine + 1] = order[i] end
  return mine
end

-- The same as an int64 tensor (for Dataset:gather and index_select).
function Sampler:indices()
  return ember.tensor(self:list(), {dtype = "int64"})
end

-- Iterator over this rank's batches of ds (an ember.data.Dataset or
-- anything with gather(idx)): for batch, i in sampler:batches(ds, bs), the
-- same as ds:batches(bs, {sampler = sampler}). opts.drop_last drops a last
-- short batch.
function Sampler:batches(ds, bs, opts)
  if math.type(bs) ~= "integer" or bs < 1 then
    error(("DistributedSampler:batches: batch size must be a positive integer, got %s"):format(tostring(bs)), 2)
  end
  return Dataset.batches_in_order(ds, self:indices(), bs, opts and opts.drop_last)
end

return setmetatable(Sampler, {__call = function(_, n, opts) return Sampler.new(n, opts) end})
