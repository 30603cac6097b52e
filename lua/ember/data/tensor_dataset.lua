--- ember.data.TensorDataset: torch.utils.data.TensorDataset, tensors that
-- share their first dim, each row a tuple (a list of the tensors' rows).
-- It is an `ember.data.Dataset` whose fields are named 1, 2, ..., so
-- `ds:batches(bs)`, `ds:gather(idx)` and `ember.data.DataLoader` batch it
-- the Dataset way (index_select on each tensor: the data stays in C).
-- @classmod data.TensorDataset
local raise = require("ember._errors").raise -- at the user's line
local Dataset = require "ember.data.dataset"

local TensorDataset = setmetatable({}, { __index = Dataset })

-- ds[i] is row i, as Dataset's; any other key is a method (the Dataset's
-- when TensorDataset has none of its own).
function TensorDataset.__index(self, k)
  if math.type(k) == "integer" then return self:row(k) end
  return TensorDataset[k]
end
TensorDataset.__len = Dataset.size
TensorDataset.__name = "data.TensorDataset"

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

--- TensorDataset(t1, t2, ...): tensors with the same size in dim 1.
-- `ds[i]` (1-based, negative from the end) is the list `{t1[i], t2[i], ...}`
-- (torch's tuple: `local x, y = table.unpack(ds[i])`), `#ds` the number of
-- rows, `ds.tensors` the list of tensors.
-- @usage local data = require "ember.data"
-- local ds = data.TensorDataset(ember.arange(6):view(3, 2), ember.tensor({10, 20, 30}))
-- local x, y = table.unpack(ds[2])
-- print(#ds, x:totable()[1], y:item())   --> 3 2.0 20.0
function TensorDataset.new(...)
  local n = select("#", ...)
  if n == 0 then raise("TensorDataset: give at least one tensor (TensorDataset(x, y))") end
  local tensors = { ... }
  for i = 1, n do
    local t = tensors[i]
    if not is_tensor(t) then
      raise("TensorDataset: argument %d is a %s, not a tensor", i, type(t))
    end
    if t:dim() == 0 then raise("TensorDataset: tensor %d is 0-d; each tensor needs a first dim (its rows)", i) end
    if t:size(1) ~= tensors[1]:size(1) then
      raise("TensorDataset: size mismatch between tensors: tensor 1 has %d rows, tensor %d has %d",
        tensors[1]:size(1), i, t:size(1))
    end
  end
  local self = Dataset.new(table.unpack(tensors, 1, n))
  self.tensors = tensors
  return setmetatable(self, TensorDataset)
end

--- A new TensorDataset with the first n rows (or rows idx, a 1-based int64 tensor).
function TensorDataset:subset(n_or_idx)
  return TensorDataset.new(table.unpack(Dataset.subset(self, n_or_idx).fields, 1, #self.names))
end

--- The same dataset with every tensor moved to device (e.g. "cuda").
function TensorDataset:to(device)
  return TensorDataset.new(table.unpack(Dataset.to(self, device).fields, 1, #self.names))
end

function TensorDataset:__tostring()
  local parts = {}
  for i, t in ipairs(self.tensors) do parts[i] = ("[%s] %s"):format(table.concat(t.shape, ", "), t.dtype) end
  return ("TensorDataset(%d rows: %s)"):format(self.n, table.concat(parts, ", "))
end

getmetatable(TensorDataset).__call = function(_, ...) return TensorDataset.new(...) end

return TensorDataset
