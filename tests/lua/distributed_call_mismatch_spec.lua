-- Before init, rank() and world_size() say so at the user's line.
-- all_reduce calls that differ across 2 ranks (mpirun, skipped without it)
-- in dtype or op, not in bytes: 4 float32 elements on one rank and 2
-- float64 on the other, or "sum" on one and "max" on the other, were
-- reduced silently into garbage. Each point-to-point message's tag now
-- says the sender's dtype and op, and both ranks raise an error naming
-- both, at the user's line, for the doubling and the halving all-reduce.
-- (broadcast, all_gather and reduce_scatter: tests/distributed/collectives.lua.)
local tmpdir = require "tests.lua.helpers.tmpdir"
local mpi = require "tests.lua.helpers.mpi"
local dist = require "ember.distributed"

describe("ember.distributed before init (one process)", function()
  it("names the call and the user's line, also from a tail call", function()
    if dist.is_initialized() then return end
    -- rank() from `return dist.rank()` (a tail call) had no position at all
    local function rank() return dist.rank() end
    local function world() return dist.world_size() end
    for _, c in ipairs { { rank, "rank" }, { world, "world_size" } } do
      local ok, err = pcall(c[1])
      assert.is_false(ok)
      assert.matches("^[^\n]*distributed_call_mismatch_spec%.lua:%d+: ember%.distributed%." .. c[2]
        .. ": call ember%.distributed%.init%(%) first", err)
    end
  end)
end)

describe("all_reduce calls that differ across ranks in dtype or op (mpirun -np 2)", function()
  local mpi_ready, run = mpi.ready, mpi.run -- run(script, ...): its output on 2 ranks

  it("is an error on both ranks naming both dtypes or ops", function()
    if not mpi_ready() then
      pending("no mpirun or no MPI module")
      return
    end
    local script = tmpdir() .. "/differ.lua"
    local f = assert(io.open(script, "w"))
    f:write([[
local dist = require "ember.distributed"
dist.init()
local r = dist.rank()
local what, n = arg[1], tonumber(arg[2])
local t, op = ember.ones(n), "sum"
if what == "dtype" and r == 1 then t = ember.ones(n // 2, {dtype = "float64"}) end
if what == "op" and r == 1 then op = "max" end
local ok, err = pcall(function() dist.all_reduce(t, op) end)
print(("RESULT rank=%d ok=%s %s"):format(r, tostring(ok), tostring(err)))
]])
    f:close()
    for _, n in ipairs { 4, 100000 } do -- doubling, halving
      local out = run(script, "dtype", n)
      assert(out:find("RESULT rank=0 ok=false [^\n]*differ%.lua:8: [^\n]*all_reduce: the tensors differ across ranks: "
        .. "this rank passes " .. n .. " float32 elements, op sum; rank 1 sent float64 elements, op sum"), out)
      assert(out:find("RESULT rank=1 ok=false [^\n]*differ%.lua:8: [^\n]*all_reduce: the tensors differ across ranks: "
        .. "this rank passes " .. (n // 2) .. " float64 elements, op sum; rank 0 sent float32 elements, op sum"), out)
      out = run(script, "op", n)
      assert(out:find("RESULT rank=0 ok=false [^\n]*this rank passes " .. n .. " float32 elements, op sum; "
        .. "rank 1 sent float32 elements, op max"), out)
      assert(out:find("RESULT rank=1 ok=false [^\n]*this rank passes " .. n .. " float32 elements, op max; "
        .. "rank 0 sent float32 elements, op sum"), out)
    end
  end)
end)
