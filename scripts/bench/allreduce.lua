-- allreduce.lua: ember.distributed.all_reduce (float32, sum, in place,
-- synchronous) against plain MPI_Allreduce calls made in the same process
-- on the same tensor, in alternating rounds: the two sides share the
-- moment, the buffer and the process, so a busy stretch of a shared
-- machine lands on both. Each round times `iters` calls of one side after
-- a barrier (the slowest rank counts); the order of the sides alternates
-- from round to round. Prints, on rank 0, one line per size and round:
--   size_bytes mpi_seconds_per_call ember_seconds_per_call
-- Run by allreduce.sh.   ember allreduce.lua [max_bytes [rounds]]
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"
local dist = require "ember.distributed"
local C = require "ember.distributed_mpi" -- bench_mpi_allreduce, the peer
dist.init()
local max_bytes = tonumber(arg[1]) or 64 * 2 ^ 20
local rounds = math.tointeger(tonumber(arg[2])) or 5

local function slowest_rank(seconds)
  local s = ember.tensor({seconds}, {dtype = "float64"})
  dist.all_reduce(s, "max")
  return s[1]:item()
end

local sides = {
  mpi = function(t, iters) C.bench_mpi_allreduce(t, iters) end,
  ember = function(t, iters) for _ = 1, iters do dist.all_reduce(t) end end,
}

local function time_side(side, t, iters)
  dist.barrier()
  local t0 = ember.clock()
  sides[side](t, iters)
  return slowest_rank((ember.clock() - t0) / iters)
end

local bytes = 4096
while bytes <= max_bytes do
  local t = ember.zeros(bytes // 4)
  local iters = bytes <= 2 ^ 16 and 2000 or bytes <= 2 ^ 20 and 200 or bytes <= 16 * 2 ^ 20 and 20 or 8
  sides.mpi(t, 3)
  sides.ember(t, 3)
  for r = 1, rounds do
    local first, second = "mpi", "ember"
    if r % 2 == 0 then first, second = second, first end
    local time = {[first] = time_side(first, t, iters)}
    time[second] = time_side(second, t, iters)
    if dist.rank() == 0 then print(("%d %.9g %.9g"):format(bytes, time.mpi, time.ember)) end
  end
  bytes = bytes * 4
end
