-- torch.utils.data's everyday pieces beside DataLoader (each was nil):
-- random_split, Subset, ConcatDataset and the samplers (Sequential,
-- Random, SubsetRandom, WeightedRandom, Batch), with DataLoader's
-- batch_sampler option, and torch's positional multinomial(p, n, true).
-- random_split's sizes for fractions are torch 1.13's (printed by
-- torch.utils.data.random_split(range(n), fractions) when this was written);
-- the rows themselves come from ember's generator, not torch's.
local ember = require "ember"
local data = require "ember.data"
local raises_here = require("tests.lua.helpers.parity").raises_here

local function ids(n) -- a dataset whose second field is its row number
  return data.TensorDataset(ember.randn(n, 3), ember.arange(1, n + 1, "int64"))
end

local function sizes(parts)
  local out = {}
  for i, p in ipairs(parts) do out[i] = #p end
  return out
end

describe("data.random_split", function()
  it("cuts the rows into disjoint subsets that cover the dataset", function()
    ember.manual_seed(3)
    local parts = data.random_split(ids(10), { 6, 4 })
    assert.are.same({ 6, 4 }, sizes(parts))
    local seen = {}
    for _, s in ipairs(parts) do
      for i = 1, #s do
        local y = s[i][2]:item()
        assert.is_nil(seen[y], "row " .. y .. " twice")
        seen[y] = true
      end
    end
    for y = 1, 10 do assert.is_true(seen[y], "row " .. y .. " missing") end
  end)

  it("takes fractions and gives the leftover rows to the first subsets, as torch", function()
    local cases = { { 10, { 0.33, 0.33, 0.34 }, { 4, 3, 3 } }, { 11, { 0.5, 0.5 }, { 6, 5 } },
      { 7, { 0.2, 0.3, 0.5 }, { 2, 2, 3 } }, { 5, { 0.1, 0.9 }, { 1, 4 } } }
    for _, c in ipairs(cases) do
      assert.are.same(c[3], sizes(data.random_split(ids(c[1]), c[2])), c[1] .. " rows")
    end
  end)

  it("is reproducible from a generator, and differs between seeds", function()
    local function first(seed)
      return data.random_split(ids(20), { 5, 15 }, ember.Generator():manual_seed(seed))[1].indices
    end
    assert.is_true(first(7):equal(first(7)))
    assert.is_false(first(7):equal(first(8)))
    local g = ember.Generator():manual_seed(7)
    assert.is_true(data.random_split(ids(20), { 5, 15 }, { generator = g })[1].indices:equal(first(7)))
  end)

  it("a DataLoader over a split gathers whole batches of the right rows", function()
    local ds = ids(9)
    local train = data.random_split(ds, { 6, 3 }, ember.Generator():manual_seed(1))[1]
    local got = {}
    for x, y in data.DataLoader(train, { batch_size = 4 }):iter() do
      for k, r in ipairs(y:totable()) do
        assert.is_true(x[k]:equal(ds.tensors[1][r]), "features of row " .. r)
        got[#got + 1] = r
      end
    end
    assert.are.same(train.indices:totable(), got)
  end)

  it("refuses lengths that do not add up, at the user's line", function()
    raises_here(function() data.random_split(ids(10), { 3, 3 }) end, "random_split: the lengths add up to 6, but the dataset has 10 rows")
    raises_here(function() data.random_split(ids(10), { 0.5, 0.4 }) end, "random_split: lengths must all be row counts")
    raises_here(function() data.random_split(ids(10), { -1, 11 }) end, "random_split: length 1 is -1")
    raises_here(function() data.random_split(ids(10), {}) end, "random_split: lengths must be a non-empty list")
  end)
end)

describe("data.Subset", function()
  it("row i is the dataset's row indices[i]; negative from the end; #s", function()
    local ds = ids(6)
    local s = data.Subset(ds, { 5, 2, 5 })
    assert.are.equal(3, #s)
    assert.are.equal(5, s[1][2]:item())
    assert.are.equal(2, s[2][2]:item())
    assert.are.equal(5, s[-1][2]:item())
    assert.is_true(s.indices:equal(ember.tensor({ 5, 2, 5 }, { dtype = "int64" })))
    assert.are.equal(ds, s.dataset)
  end)

  it("works over a tensor, a plain list and another Subset", function()
    assert.are.equal(3, data.Subset(ember.arange(10, 15), { 4 })[1]:item() - 10)
    assert.are.equal("c", data.Subset({ "a", "b", "c" }, { 3, 1 })[1])
    local inner = data.Subset(ids(8), { 8, 7, 6 })
    local outer = data.Subset(inner, { 3 })
    assert.are.equal(6, outer[1][2]:item())
    local _, y = data.DataLoader(outer, { batch_size = 2 }):iter()()
    assert.are.same({ 6 }, y:totable())
  end)

  it("refuses rows outside the dataset", function()
    raises_here(function() data.Subset(ids(4), { 0, 2 }) end, "Subset: indices must lie in 1..4")
    raises_here(function() data.Subset(ids(4), { 1.5 }) end, "Subset: index 1 is 1.5")
    raises_here(function() return data.Subset(ids(4), { 1 })[3] end, "Subset: row 3 is out of range")
  end)
end)

describe("data.ConcatDataset", function()
  it("rows run through each dataset in turn; cumulative_sizes", function()
    local a = data.TensorDataset(ember.zeros(3, 2))
    local b = data.TensorDataset(ember.ones(2, 2))
    local c = data.TensorDataset(ember.full({ 4, 2 }, 2))
    local all = data.ConcatDataset({ a, b, c })
    assert.are.equal(9, #all)
    assert.are.same({ 3, 5, 9 }, all.cumulative_sizes)
    local want = { 0, 0, 0, 1, 1, 2, 2, 2, 2 }
    for i = 1, 9 do assert.are.equal(want[i], all[i][1][1]:item(), "row " .. i) end
    assert.are.equal(2, all[-1][1][1]:item())
  end)

  it("a DataLoader batches across the seams", function()
    local all = data.ConcatDataset({ ids(3), data.Subset(ids(5), { 5, 4 }) })
    local ys = {}
    for _, y in data.DataLoader(all, { batch_size = 2 }):iter() do
      for _, v in ipairs(y:totable()) do ys[#ys + 1] = v end
    end
    assert.are.same({ 1, 2, 3, 5, 4 }, ys)
  end)

  it("refuses what is not a list of datasets", function()
    raises_here(function() data.ConcatDataset(ids(3)) end, "ConcatDataset: expected a non-empty list of datasets")
    raises_here(function() data.ConcatDataset({ ids(3), 7 }) end, "ConcatDataset: dataset 2 has no length")
    raises_here(function() return data.ConcatDataset({ ids(2) })[3] end, "ConcatDataset: row 3 is out of range")
  end)
end)

describe("data samplers", function()
  it("SequentialSampler: 1..n", function()
    local s = data.SequentialSampler(ids(4))
    assert.are.equal(4, #s)
    assert.are.same({ 1, 2, 3, 4 }, s:indices():totable())
    local got = {}
    for i in s:iter() do got[#got + 1] = i end
    assert.are.same({ 1, 2, 3, 4 }, got)
  end)

  it("RandomSampler: a permutation per epoch; num_samples past n is whole permutations; with replacement", function()
    local s = data.RandomSampler(ids(6), { generator = ember.Generator():manual_seed(2) })
    local a, b = s:indices(), s:indices()
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, (a:sort()):totable())
    assert.is_false(a:equal(b), "two epochs in the same order")
    local long = data.RandomSampler(4, { num_samples = 10 }):indices()
    assert.are.equal(10, long:numel())
    for k = 0, 1 do assert.are.same({ 1, 2, 3, 4 }, (long:narrow(1, 4 * k + 1, 4):sort()):totable()) end
    local r = data.RandomSampler(3, { replacement = true, num_samples = 3000 }):indices()
    for v = 1, 3 do
      local f = r:eq(v):sum():item() / 3000
      assert.is_true(math.abs(f - 1 / 3) < 0.05, "row " .. v .. " drawn " .. f)
    end
  end)

  it("SubsetRandomSampler: its rows, shuffled", function()
    local s = data.SubsetRandomSampler({ 9, 3, 5 })
    assert.are.equal(3, #s)
    assert.are.same({ 3, 5, 9 }, (s:indices():sort()):totable())
  end)

  it("WeightedRandomSampler: proportional draws; a zero weight never drawn", function()
    ember.manual_seed(11)
    local s = data.WeightedRandomSampler({ 1, 0, 3 }, 4000)
    local r = s:indices()
    assert.are.equal(4000, #s)
    assert.are.equal(0, r:eq(2):sum():item())
    local f3 = r:eq(3):sum():item() / 4000
    assert.is_true(math.abs(f3 - 0.75) < 0.03, "weight 3 of 4 drawn " .. f3)
    local once = data.WeightedRandomSampler({ 1, 1, 0, 1 }, 3, false):indices()
    assert.are.same({ 1, 2, 4 }, (once:sort()):totable())
    raises_here(function() data.WeightedRandomSampler({ 1, -1 }, 2) end, "WeightedRandomSampler: weights must be finite and >= 0")
    raises_here(function() data.WeightedRandomSampler({ 1, 1 }, 0) end, "WeightedRandomSampler: num_samples must be a positive integer")
  end)

  it("a sampler orders a DataLoader's rows", function()
    local ds = ids(5)
    local ys = {}
    for _, y in data.DataLoader(ds, { sampler = data.SubsetRandomSampler({ 2, 4 }), batch_size = 8 }):iter() do
      ys = y:totable()
    end
    table.sort(ys)
    assert.are.same({ 2, 4 }, ys)
  end)

  it("BatchSampler: batches of another sampler's rows; drop_last; DataLoader's batch_sampler", function()
    local bs = data.BatchSampler(data.SequentialSampler(7), 3, false)
    assert.are.equal(3, #bs)
    local got = {}
    for rows in bs:iter() do got[#got + 1] = rows end
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7 } }, got)
    assert.are.equal(2, #data.BatchSampler({ 1, 2, 3, 4, 5 }, 2, true))
    local ds = ids(7)
    local loader = data.DataLoader(ds, { batch_sampler = bs })
    assert.are.equal(3, #loader)
    local ys = {}
    for x, y in loader:iter() do ys[#ys + 1] = y:totable(); assert.are.equal(x:size(1), y:size(1)) end
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7 } }, ys)
    raises_here(function() data.DataLoader(ds, { batch_sampler = bs, shuffle = true }) end,
      "DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
    raises_here(function() data.BatchSampler(data.SequentialSampler(3), 0) end, "BatchSampler: batch_size must be a positive integer")
  end)
end)

describe("ember.multinomial's positional replacement (torch.multinomial(p, n, True))", function()
  it("draws with replacement more samples than classes, and keeps the generator option", function()
    local g = ember.Generator():manual_seed(4)
    local r = ember.multinomial(ember.tensor({ 1, 2, 3 }), 10, true, { generator = g })
    assert.are.equal(10, r:numel())
    local g2 = ember.Generator():manual_seed(4)
    assert.is_true(r:equal(ember.multinomial(ember.tensor({ 1, 2, 3 }), 10, { replacement = true, generator = g2 })))
    raises_here(function() ember.multinomial(ember.tensor({ 1, 2, 3 }), 10, false) end,
      "cannot draw 10 samples without replacement")
  end)
end)
