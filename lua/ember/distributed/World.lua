-- World: what a training script needs to run the same under `mpirun -np N`
-- and alone. cli.parse makes one (opts.world); scripts use it as below
-- (the outputs shown are those of `mpirun -np 2`; alone, 8 rows and 3 10)
--
--   local world = require("ember.distributed.World").from_env()   -- a script: opts.world
--   local net = world:wrap(nn.Linear(4, 2))       -- DDP when there are several ranks
--   local train = require("ember.data.dataset").new({x = ember.randn(32, 4), y = ember.randn(32, 2)})
--   local rows = 0
--   for b in world:batches(train, 8, {shuffle = true, epoch = 1}) do   -- global batch 8
--     rows = rows + b.x:size(1)                   -- forward and backward of net here
--   end
--   print(rows)                                   --> 16
--   local correct, n = world:sum(3, 10)           -- test metrics over every rank's shard
--   print(correct, n)                             --> 6.0 20.0
--   if world.main then print(tostring(world)) end -- rank 0 writes files
--
-- Alone (not launched by mpirun) it is a world of one: wrap returns the
-- model, batches is ds:batches, sum returns its arguments, so a script's
-- single-process results do not change. Under mpirun, the global batch
-- opts.batch is split over the ranks (per-rank batch opts.batch / world size)
-- by a DistributedSampler, so N ranks take the same steps as one process.
local error = require("ember._errors").error -- raises at the user's line
local dist = require "ember.distributed"

local World = {}
World.__index = World

-- from_env([opts]): inits MPI when launched by mpirun (opts go to dist.init).
function World.from_env(opts)
  local self = setmetatable({rank = 0, size = 1, main = true, distributed = false}, World)
  if dist.is_launched() and dist.is_available() then
    dist.init(opts)
    self.rank, self.size, self.distributed = dist.rank(), dist.world_size(), dist.world_size() > 1
    self.main = self.rank == 0
  elseif dist.is_launched() then
    io.stderr:write("note: started by mpirun, but this ember has no MPI module: every rank trains alone\n")
  end
  return self
end

-- The per-rank batch for a global batch (at least 1).
function World:local_batch(global)
  if self.size == 1 then return global end
  if global % self.size ~= 0 then
    error(("the global batch %d does not split evenly over %d ranks; pick a multiple of %d")
          :format(global, self.size, self.size), 2)
  end
  return global // self.size
end

function World:wrap(model, opts)
  if not self.distributed then return model end
  self.ddp = dist.DistributedDataParallel(model, opts)
  return self.ddp
end

-- Training batches of this rank: opts.shuffle, opts.epoch (reshuffles each
-- epoch), opts.seed, opts.drop_last (drops the last short global batch).
function World:batches(ds, global, opts)
  opts = opts or {}
  if not self.distributed then return ds:batches(global, {shuffle = opts.shuffle, drop_last = opts.drop_last}) end
  local s = dist.DistributedSampler(ds:size(), {shuffle = opts.shuffle, seed = opts.seed or 0,
                                                drop_last = true})
  s:set_epoch(opts.epoch or 0)
  return s:batches(ds, self:local_batch(global), {drop_last = opts.drop_last})
end

-- Evaluation batches: every row on exactly one rank (shards differ by at most one row).
function World:eval_batches(ds, bs)
  if not self.distributed then return ds:batches(bs) end
  local s = dist.DistributedSampler(ds:size(), {shuffle = false, pad = false})
  return s:batches(ds, bs)
end

-- This rank's contiguous block of rows 1..n for evaluation: first, count
-- (the blocks cover every row once and differ in size by at most one).
function World:shard_range(n)
  if not self.distributed then return 1, n end
  local base, extra = n // self.size, n % self.size
  local first = self.rank * base + math.min(self.rank, extra) + 1
  return first, base + (self.rank < extra and 1 or 0)
end

-- The number of training steps one epoch takes (the same on every rank).
function World:num_batches(ds, global, drop_last)
  if not self.distributed then return ds:num_batches(global, drop_last) end
  local per = (ds:size() // self.size)
  local b = self:local_batch(global)
  return drop_last and per // b or (per + b - 1) // b
end

-- Sums numbers over the ranks: world:sum(a, b, ...) -> a', b', ...
function World:sum(...) return dist.sum_numbers(...) end

-- Every rank waits here.
function World:barrier() if self.distributed then dist.barrier() end end

function World:__tostring()
  if not self.distributed then return "a single process" end
  return ("%d ranks (MPI: %s)"):format(self.size, dist.library())
end

return World
