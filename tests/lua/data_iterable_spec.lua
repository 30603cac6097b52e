-- DataLoader over a stream (data.IterableDataset, torch's IterableDataset:
-- there was none, and a stream given to DataLoader was refused or, a table
-- without rows, gave 0 batches) and a collate_fn that returns nil (the loop
-- ended at once: the epoch's batches were dropped without a word).
local ember = require "ember"
local data = require "ember.data"
local raises_here = require("tests.lua.helpers.parity").raises_here

-- a stream of n samples {x = [2] filled with i, y = i}
local function counting(n)
  return function()
    return coroutine.wrap(function()
      for i = 1, n do coroutine.yield({ x = ember.full({ 2 }, i), y = i }) end
    end)
  end
end

local function ys(loader)
  local out = {}
  for b in loader do out[#out + 1] = table.concat(b.y:totable(), ",") end
  return out
end

describe("DataLoader over a data.IterableDataset", function()
  it("batches the stream in order, the last batch smaller unless drop_last, each loop a new epoch", function()
    local ds = data.IterableDataset(counting(7))
    local loader = data.DataLoader(ds, { batch_size = 3 })
    assert.are.same({ "1,2,3", "4,5,6", "7" }, ys(loader))
    assert.are.same({ "1,2,3", "4,5,6", "7" }, ys(loader))
    assert.are.same({ "1,2,3", "4,5,6" }, ys(data.DataLoader(ds, { batch_size = 3, drop_last = true })))
    for b in data.DataLoader(ds, 2) do assert.are.same({ b.y:numel(), 2 }, b.x.shape) end
    assert.are.same({}, ys(data.DataLoader(data.IterableDataset(counting(0)), 2)))
  end)

  it("#loader needs the number of samples, as torch's len() of a stream", function()
    assert.are.equal(3, #data.DataLoader(data.IterableDataset(counting(7), 7), { batch_size = 3 }))
    assert.are.equal(2, #data.DataLoader(data.IterableDataset(counting(7), 7), { batch_size = 3, drop_last = true }))
    local loader = data.DataLoader(data.IterableDataset(counting(7)), 3)
    raises_here(function() return #loader end, "DataLoader: #loader over an IterableDataset needs its number of samples")
    assert.matches("? batches", tostring(loader), 1, true)
  end)

  it("a subclass defines iter(); a sample of several values is a list, as torch's tuple", function()
    local Lines = setmetatable({}, { __index = data.IterableDataset })
    Lines.__index = Lines
    function Lines:iter()
      local i = 0
      return function()
        i = i + 1
        if i <= self.n then return "line" .. i, i end
      end
    end
    local got = {}
    for names, ids in data.DataLoader(setmetatable({ n = 5 }, Lines), 2):iter() do
      got[#got + 1] = table.concat(names, ",") .. "=" .. table.concat(ids:totable(), ",")
    end
    assert.are.same({ "line1,line2=1,2", "line3,line4=3,4", "line5=5" }, got)
    Lines.__len = function(self) return self.n end
    assert.are.equal(3, #data.DataLoader(setmetatable({ n = 5 }, Lines), 2))
  end)

  it("refuses shuffle, sampler and batch_sampler, and what is no stream, at the user's line", function()
    local ds = data.IterableDataset(counting(3))
    raises_here(function() data.DataLoader(ds, { shuffle = true }) end, "DataLoader: shuffle is not for an IterableDataset")
    raises_here(function() data.DataLoader(ds, { sampler = { 1 } }) end, "DataLoader: sampler is not for an IterableDataset")
    raises_here(function() data.DataLoader(ds, { batch_sampler = data.BatchSampler({ 1 }, 1) }) end,
      "DataLoader: batch_sampler is not for an IterableDataset")
    raises_here(function() data.IterableDataset(5) end, "IterableDataset: expected a function")
    local Bad = setmetatable({}, { __index = data.IterableDataset })
    Bad.__index = Bad
    raises_here(function() for _ in data.DataLoader(setmetatable({}, Bad)) do end end,
      "IterableDataset:iter: a subclass defines its own iter()")
    function Bad:iter() return { 1, 2 } end
    raises_here(function() for _ in data.DataLoader(setmetatable({}, Bad)) do end end,
      "DataLoader: the IterableDataset's iter() gave table, not an iterator")
    raises_here(function() data.DataLoader(counting(3)) end, "or a data.IterableDataset (a stream of samples); got a function")
  end)
end)

describe("DataLoader's collate_fn", function()
  it("a collate_fn that returns nil is an error, not an epoch of no batches", function()
    local forgot = function(samples) local _ = #samples end
    raises_here(function() for _ in data.DataLoader({ 1, 2, 3 }, { batch_size = 2, collate_fn = forgot }) do end end,
      "DataLoader: collate_fn returned nil for a batch of 2 rows")
    raises_here(function()
      for _ in data.DataLoader(data.IterableDataset(counting(3)), { batch_size = 2, collate_fn = forgot }) do end
    end, "DataLoader: collate_fn returned nil for a batch of 2 rows")
    local sums = {}
    for b in data.DataLoader({ 1, 2, 3 }, { batch_size = 2, collate_fn = function(s) return s[1] + (s[2] or 0) end }) do
      sums[#sums + 1] = b
    end
    assert.are.same({ 3, 3 }, sums)
  end)
end)
