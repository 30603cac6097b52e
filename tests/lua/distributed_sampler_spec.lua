-- ember.distributed as a PyTorch user meets it. DistributedSampler: a plain
-- Lua list of rows (a dataset DataLoader takes) was refused as "not a size";
-- seed/shuffle/drop_last/pad of the wrong type were taken silently (shuffle
-- = "no" shuffled); it had no size()/iter() as data.samplers have. Without
-- mpirun it is a world of one. And an all_reduce of tensors that differ in
-- size across 2 ranks (mpirun, skipped without it) is an error on both.
local ember = require "ember"
local data = require "ember.data"
local dist = require "ember.distributed"
local raises_here = require("tests.lua.helpers.parity").raises_here
local tmpdir = require "tests.lua.helpers.tmpdir"
local mpi = require "tests.lua.helpers.mpi"

describe("DistributedSampler in one process", function()
  it("takes a plain Lua list as the dataset, as DataLoader does", function()
    local rows = { "a", "b", "c", "d", "e" }
    local s = dist.DistributedSampler(rows, { num_replicas = 2, rank = 1, shuffle = false })
    assert.are.same({ 2, 4, 1 }, s:list()) -- padded with the first row, as torch
    assert.are.equal(3, #s)
    assert.are.equal(3, s:size())
    local loader = data.DataLoader(rows, { sampler = s, batch_size = 2 })
    local got = {}
    for b in loader do for _, v in ipairs(b) do got[#got + 1] = v end end
    assert.are.same({ "b", "d", "a" }, got)
    assert.are.equal(0, #dist.DistributedSampler({}, { num_replicas = 2, rank = 0 })) -- an empty list: no rows
    raises_here(function() dist.DistributedSampler({ rows = 3 }) end, "the dataset size must be a non-negative integer")
  end)
  it("its options are checked", function()
    raises_here(function() dist.DistributedSampler(5, { shuffle = "no" }) end, "DistributedSampler: shuffle must be a boolean, got string")
    raises_here(function() dist.DistributedSampler(5, { drop_last = 1 }) end, "drop_last must be a boolean")
    raises_here(function() dist.DistributedSampler(5, { pad = "yes" }) end, "pad must be a boolean")
    raises_here(function() dist.DistributedSampler(5, { seed = 1.5 }) end, "DistributedSampler: seed must be an integer, got 1.5")
  end)
  it("iter() walks this rank's rows; alone it is a world of one", function()
    local s = dist.DistributedSampler(4, { seed = 2 })
    assert.are.equal(1, s.num_replicas)
    assert.are.equal(0, s.rank)
    local got = {}
    for i in s:iter() do got[#got + 1] = i end
    assert.are.same(s:list(), got)
    table.sort(got)
    assert.are.same({ 1, 2, 3, 4 }, got)
    assert.are.equal(0, dist.rank_or_0())
    assert.are.equal(1, dist.size_or_1())
  end)
  it("drop_last and padding follow torch's sizes for 7 rows over 3 ranks", function()
    local seen = {}
    for r = 0, 2 do
      local pad = dist.DistributedSampler(7, { num_replicas = 3, rank = r, seed = 4 })
      local drop = dist.DistributedSampler(7, { num_replicas = 3, rank = r, seed = 4, drop_last = true })
      assert.are.equal(3, #pad)
      assert.are.equal(2, #drop)
      for _, i in ipairs(pad:list()) do seen[i] = (seen[i] or 0) + 1 end
    end
    local total = 0
    for i = 1, 7 do total = total + assert(seen[i]) end
    assert.are.equal(9, total)
  end)
end)

describe("all_reduce of tensors that differ in size across ranks (mpirun -np 2)", function()
  it("is an error on both ranks naming the sizes, for doubling and halving", function()
    if not mpi.ready() then
      pending("no mpirun or no MPI module")
      return
    end
    local dir = tmpdir()
    local script = dir .. "/mismatch.lua"
    local f = assert(io.open(script, "w"))
    f:write([[
local dist = require "ember.distributed"
dist.init()
local r = dist.rank()
local n = tonumber(arg[1])
local t = ember.ones(r == 0 and n or n + 2)
local ok, err = pcall(dist.all_reduce, t)
print(("RESULT rank=%d ok=%s %s"):format(r, tostring(ok), tostring(err)))
]])
    f:close()
    for _, n in ipairs { 4, 100000 } do
      local out = mpi.run(script, n)
      assert(out:find("RESULT rank=0 ok=false [^\n]*all_reduce: the tensors differ in size across ranks: this rank's has "
        .. n .. " elements and rank 1 sent more than that"), out)
      assert(out:find("RESULT rank=1 ok=false [^\n]*all_reduce: the tensors differ in size across ranks: this rank's has "
        .. (n + 2) .. " elements and rank 0 sent a message of"), out)
    end
  end)
end)
