--- ember.data.ConcatDataset: torch.utils.data.ConcatDataset, datasets one
-- after another seen as one: rows 1..#d1 are d1's, then d2's, and so on.
-- `ds.datasets` is the list, `ds.cumulative_sizes` the running totals.
-- A DataLoader collates its rows (each may come from a different kind of
-- dataset).
-- @classmod data.ConcatDataset
local raise = require("ember._errors").raise -- at the user's line
local rows = require "ember.data.dataloader" -- the one rule for a dataset's length and rows

local ConcatDataset = {}
ConcatDataset.__name = "data.ConcatDataset"

function ConcatDataset.__index(self, k)
  if math.type(k) == "integer" then return self:get(k) end
  return ConcatDataset[k]
end
function ConcatDataset.__len(self) return self.cumulative_sizes[#self.cumulative_sizes] or 0 end

--- ConcatDataset(datasets): a list of datasets (each a Dataset,
-- TensorDataset, Subset, tensor or table with `#ds` and rows).
-- @usage local data = require "ember.data"
-- local a = data.TensorDataset(ember.zeros(3, 2))
-- local b = data.TensorDataset(ember.ones(2, 2))
-- local both = data.ConcatDataset({a, b})
-- print(#both, both[4][1]:sum():item(), table.concat(both.cumulative_sizes, " "))   --> 5	2.0	3 5
function ConcatDataset.new(datasets)
  local who = "ConcatDataset"
  if type(datasets) ~= "table" or getmetatable(datasets) ~= nil or #datasets == 0 then
    raise("%s: expected a non-empty list of datasets ({ds1, ds2}), got %s", who,
      type(datasets) == "table" and (getmetatable(datasets) and "a dataset (put it in a list)" or "an empty list")
        or type(datasets))
  end
  local sizes, total = {}, 0
  for k, d in ipairs(datasets) do
    local n, why = rows._length_of(d)
    if n == nil then raise("%s: dataset %d has no length (#ds) and rows: %s", who, k, why) end
    total = total + n
    sizes[k] = total
  end
  return setmetatable({ datasets = { table.unpack(datasets) }, cumulative_sizes = sizes }, ConcatDataset)
end

--- Row i (1-based, negative from the end): row i - (the rows before) of
-- the dataset it falls in.
function ConcatDataset:get(i)
  local sizes = self.cumulative_sizes
  local n = sizes[#sizes]
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then raise("ConcatDataset: row %d is out of range for %d rows", i, n) end
  local lo, hi = 1, #sizes -- the first dataset whose running total reaches i
  while lo < hi do
    local mid = (lo + hi) // 2
    if sizes[mid] >= i then hi = mid else lo = mid + 1 end
  end
  local before = lo > 1 and sizes[lo - 1] or 0
  return rows._fetcher(self.datasets[lo])(i - before)
end

function ConcatDataset:__tostring()
  return ("ConcatDataset(%d datasets, %d rows)"):format(#self.datasets, #self)
end

setmetatable(ConcatDataset, { __call = function(_, ...) return ConcatDataset.new(...) end })

return ConcatDataset
