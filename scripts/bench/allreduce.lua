-- allreduce.lua: ember.distributed.all_reduce over the sizes of
-- allreduce_peer.c, timed the same way (best of 3 repetitions of `iters`
-- synchronous calls after a barrier; the slowest rank counts). Prints
-- "size_bytes seconds_per_call" on rank 0. Run by allreduce.sh.
require("ember.cli").help_from_header(arg) -- --help prints the comment above
local ember = require "ember"
local dist = require "ember.distributed"
dist.init()
local max_bytes = tonumber(arg[1]) or 64 * 2 ^ 20
local bytes = 4096
while bytes <= max_bytes do
  local t = ember.zeros(bytes // 4)
  local iters = bytes <= 2 ^ 16 and 2000 or bytes <= 2 ^ 20 and 200 or bytes <= 16 * 2 ^ 20 and 20 or 8
  for _ = 1, 3 do dist.all_reduce(t) end
  local best = math.huge
  for _ = 1, 3 do
    dist.barrier()
    local t0 = ember.clock()
    for _ = 1, iters do dist.all_reduce(t) end
    local slowest = ember.tensor({(ember.clock() - t0) / iters}, {dtype = "float64"})
    dist.all_reduce(slowest, "max")
    best = math.min(best, slowest[1]:item())
  end
  if dist.rank() == 0 then print(("%d %.9g"):format(bytes, best)) end
  bytes = bytes * 4
end
