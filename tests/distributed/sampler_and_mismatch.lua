-- DistributedSampler shards (disjoint, covering, seeded per epoch, the
-- same permutation on every rank; drop_last, padding, pad = false for
-- uneven shards) checked across the real ranks, and DistributedDataParallel's
-- check that the model is the same everywhere: the first difference is an
-- error on every rank, not a hang, and the process goes on.
local ember = require "ember"
local nn = require "ember.nn"
local dist = require "ember.distributed"
local H = dofile((os.getenv("EMBER_SOURCE_DIR") or ".") .. "/tests/distributed/harness.lua")

dist.init{timeout = 60}
local R, me = dist.world_size(), dist.rank()

local function gather_lists(list)
  local all = dist.all_gather_string(table.concat(list, ","))
  local out = {}
  for r, s in ipairs(all) do
    out[r] = {}
    for v in s:gmatch("[^,]+") do out[r][#out[r] + 1] = tonumber(v) end
  end
  return out
end

for _, n in ipairs({10, 11, 2 * R, 1, 0}) do
  for _, mode in ipairs({"pad", "drop_last", "no pad"}) do
    H.test(("sampler n=%d %s over %d ranks"):format(n, mode, R), function()
      local s = dist.DistributedSampler(n, {shuffle = true, seed = 3, drop_last = mode == "drop_last",
                                            pad = mode ~= "no pad"})
      s:set_epoch(2)
      local all = gather_lists(s:list())
      local seen, total = {}, 0
      for r = 1, R do
        for _, i in ipairs(all[r]) do
          assert(i >= 1 and i <= n, "index out of range " .. i)
          seen[i] = (seen[i] or 0) + 1
          total = total + 1
        end
      end
      local distinct = 0
      for _ in pairs(seen) do distinct = distinct + 1 end
      if mode == "drop_last" then
        for r = 1, R do assert(#all[r] == n // R, "shard size") end
        assert(distinct == total, "shards overlap")
      elseif mode == "pad" then
        for r = 1, R do assert(#all[r] == (n + R - 1) // R, "shard size") end
        assert(n == 0 or distinct == n, "not every row is covered")
      else
        assert(total == n and distinct == n, "every row exactly once")
        for r = 1, R do assert(math.abs(#all[r] - n / R) < 1, "uneven by more than one") end
      end
      assert(#s == #all[me + 1], "#sampler")
    end)
  end
end

H.test("set_epoch changes the permutation, the same one on every rank", function()
  local s = dist.DistributedSampler(50, {seed = 1})
  s:set_epoch(1)
  local a = table.concat(s:list(), ",")
  s:set_epoch(2)
  local b = table.concat(s:list(), ",")
  assert(a ~= b, "epochs 1 and 2 gave the same shard")
  local r0 = dist.DistributedSampler(50, {seed = 1, rank = 0})
  r0:set_epoch(2)
  local from0 = dist.all_gather_string(table.concat(r0:list(), ","))
  for r = 2, R do assert(from0[r] == from0[1], "rank " .. (r - 1) .. " draws another permutation") end
  local other = dist.DistributedSampler(50, {seed = 2})
  other:set_epoch(2)
  assert(table.concat(other:list(), ",") ~= b, "the seed does not matter")
end)

H.test("sampler:batches splits each global batch among the ranks", function()
  local n, B = 6 * R, 2 * R
  local ds = {gather = function(_, idx) return {i = idx} end}
  local s = dist.DistributedSampler(n, {seed = 5})
  local one = dist.DistributedSampler(n, {seed = 5, num_replicas = 1, rank = 0})
  local mine = {}
  for b in s:batches(ds, B // R) do mine[#mine + 1] = b.i:totable() end
  local k = 0
  for b in one:batches(ds, B) do
    k = k + 1
    local global = b.i:totable()
    for j, v in ipairs(mine[k]) do assert(global[me + 1 + R * (j - 1)] == v, "batch " .. k) end
  end
  assert(k == #mine and k == 3)
end)

H.test("sampler of a dataset: its size", function()
  local ds = ember.data.Dataset.new({x = ember.zeros(10, 2)})
  local a, b = dist.DistributedSampler(ds, {seed = 3}), dist.DistributedSampler(10, {seed = 3})
  assert(a.n == 10 and table.concat(a:list(), ",") == table.concat(b:list(), ","))
end)
-- errors name the user's line (here), not the sampler's or its __call's
H.raises("sampler: not a size or a dataset", "^[^\n]*sampler_and_mismatch%.lua:%d+: DistributedSampler: the dataset size must be a non%-negative integer",
  function() dist.DistributedSampler({rows = 3}) end)
H.raises("sampler: bad rank", "^[^\n]*sampler_and_mismatch%.lua:%d+: DistributedSampler: rank 5 is not in",
  function() dist.DistributedSampler(4, {num_replicas = 2, rank = 5}) end)

local function model(out)
  ember.manual_seed(0)
  return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, out))
end

local last = R - 1
H.raises("a shape that differs on one rank is an error on every rank", "differs across ranks: tensor %d+ is '.*%[.*' on rank 0 but .* on rank " .. last,
         function() dist.DistributedDataParallel(model(me == last and 5 or 4)) end)
H.raises("a missing parameter is an error on every rank", "rank 0 has 4 parameter/buffer tensors, rank " .. last .. " has 6",
         function()
           local m = me == last and nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Linear(8, 4)) or model(4)
           dist.DistributedDataParallel(m)
         end)
H.raises("a dtype that differs is an error on every rank", "float64",
         function() dist.DistributedDataParallel(me == last and model(4):double() or model(4)) end)
H.raises("a parameter frozen on one rank only is an error on every rank", "'param 1%.bias %[8%] float32' on rank 0 but "
         .. "'param 1%.bias %[8%] float32 frozen' on rank " .. last,
         function()
           local m = model(4)
           if me == last then m[1].bias:requires_grad_(false) end
           dist.DistributedDataParallel(m)
         end)
H.raises("DDP: an unknown option, at the user's line", "^[^\n]*sampler_and_mismatch%.lua:%d+: DistributedDataParallel: unknown option 'bucket_mb'",
         function() dist.DistributedDataParallel(model(4), {bucket_mb = 1}) end)
H.test("after those errors the ranks still work together", function()
  local m = model(4)
  if me ~= 0 then for _, p in ipairs(m:parameters()) do ember.no_grad(function() p:fill_(me) end) end end
  local ddp = dist.DistributedDataParallel(m)
  local ref = model(4) -- rank 0's values, broadcast by the constructor
  for n, p in pairs(m:named_parameters()) do assert(H.same(p, ref:named_parameters()[n]), n) end
  ddp:remove_hooks()
end)
H.done()
