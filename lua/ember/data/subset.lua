--- ember.data.Subset: torch.utils.data.Subset, some rows of a dataset seen
-- as a dataset of their own, and `random_split`, which cuts a dataset into
-- such subsets (a train/validation split).
--
-- `s[i]` is `dataset[indices[i]]` (1-based), `#s` the number of rows,
-- `s.dataset` and `s.indices` (an int64 tensor) what it was made of. A
-- subset of an `ember.data.Dataset` or `TensorDataset` keeps their batching
-- by index_select, so a DataLoader over it gathers whole batches in C.
-- @classmod data.Subset
local raise = require("ember._errors").raise -- at the user's line
local rows = require "ember.data.dataloader" -- the one rule for a dataset's length and rows

local Subset = {}
Subset.__name = "data.Subset"

local function ember() return require "ember" end

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

function Subset.__index(self, k)
  if math.type(k) == "integer" then return self:get(k) end
  return Subset[k]
end
function Subset.__len(self) return self.indices:numel() end

--- Subset(dataset, indices): the rows indices (1-based: a list or an
-- int64 tensor, in that order, repeats allowed) of dataset (a Dataset,
-- TensorDataset, tensor, or any table with `#ds` and `ds[i]`/`ds:get(i)`).
-- @usage local data = require "ember.data"
-- local ds = data.TensorDataset(ember.arange(10, 15):view(5, 1))
-- local s = data.Subset(ds, {5, 1})
-- print(#s, s[1][1]:item(), s[2][1]:item())   --> 2	14.0	10.0
function Subset.new(dataset, indices)
  local who = "Subset"
  local n, why = rows._length_of(dataset)
  if n == nil then raise("%s: the dataset must have a length (#ds) and rows ds[i]; got %s", who, why) end
  local idx
  if is_tensor(indices) then
    if indices:dim() ~= 1 or (indices.dtype ~= "int64" and indices.dtype ~= "int32") then
      raise("%s: indices must be a 1-d integer tensor or a list of row numbers, got a %s tensor of shape [%s]",
        who, indices.dtype, table.concat(indices.shape, ", "))
    end
    idx = indices:long()
  elseif type(indices) == "table" then
    for k, v in ipairs(indices) do
      if math.type(v) ~= "integer" then raise("%s: index %d is %s, not a row number", who, k, tostring(v)) end
    end
    idx = ember().tensor(indices, { dtype = "int64" })
  else
    raise("%s: indices must be a list of row numbers or an int64 tensor, got %s", who, type(indices))
  end
  if idx:numel() > 0 and (idx:min():item() < 1 or idx:max():item() > n) then
    raise("%s: indices must lie in 1..%d (the dataset's rows), got %d..%d", who, n, idx:min():item(),
      idx:max():item())
  end
  local self = setmetatable({ dataset = dataset, indices = idx }, Subset)
  -- a gathering dataset's fields and names, for DataLoader's path by index_select
  if type(dataset) == "table" and type(rawget(dataset, "fields")) == "table" and type(dataset.gather) == "function" then
    rawset(self, "fields", dataset.fields)
    rawset(self, "names", dataset.names)
  end
  return self
end

--- Row i of the subset (1-based, negative from the end): the dataset's row indices[i].
function Subset:get(i)
  local n = self.indices:numel()
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then raise("Subset: row %d is out of range for a subset of %d rows", i, n) end
  return rows._fetcher(self.dataset)(self.indices[i]:item())
end

--- The rows idx of the subset (a 1-based int64 tensor) as one batch, when
-- the dataset gathers (a Dataset or TensorDataset): DataLoader's path.
function Subset:gather(idx)
  if rawget(self, "fields") == nil then
    raise("Subset:gather: the dataset (%s) has no gather; a DataLoader collates its rows instead",
      tostring(self.dataset):match("^[^\n]*"))
  end
  return self.dataset:gather(self.indices:index_select(1, idx))
end

function Subset:__tostring()
  return ("Subset(%d of the rows of %s)"):format(self.indices:numel(), tostring(self.dataset):match("^[^\n]*"))
end

setmetatable(Subset, { __call = function(_, ...) return Subset.new(...) end })

--- random_split(dataset, lengths [, generator]): the dataset's rows in a
-- random order, cut into Subsets of the given lengths, as torch's
-- torch.utils.data.random_split. lengths are row counts that add up to
-- #dataset, or fractions that add up to 1 (each gets floor(fraction * n)
-- rows, and the rows left over go one each to the first subsets, as
-- torch). generator: an ember.Generator (or `{generator = g}`); by default
-- ember's global one, reproducible after ember.manual_seed.
-- @usage local data = require "ember.data"
-- local ds = data.TensorDataset(ember.randn(10, 3), ember.arange(1, 11, "int64"))
-- local train, val = table.unpack(data.random_split(ds, {0.8, 0.2}, ember.Generator():manual_seed(42)))
-- print(#train, #val)   --> 8	2
function Subset.random_split(dataset, lengths, generator)
  local who = "random_split"
  local n, why = rows._length_of(dataset)
  if n == nil then raise("%s: the dataset must have a length (#ds) and rows ds[i]; got %s", who, why) end
  if type(generator) == "table" and getmetatable(generator) == nil then generator = generator.generator end
  if generator ~= nil and not require("ember._generator").is_generator(generator) then
    raise("%s: generator must be an ember.Generator (ember.Generator()), got %s", who, type(generator))
  end
  if type(lengths) ~= "table" or #lengths == 0 then
    raise("%s: lengths must be a non-empty list of row counts or of fractions, got %s", who, type(lengths))
  end
  local sizes, total = {}, 0
  for k, v in ipairs(lengths) do
    if type(v) ~= "number" or v < 0 or v ~= v then raise("%s: length %d is %s; lengths are >= 0", who, k, tostring(v)) end
    total = total + v
  end
  if math.abs(total - 1) < 1e-9 and total <= 1 then -- fractions, by torch's test
    local given = 0
    for k, f in ipairs(lengths) do
      sizes[k] = math.floor(n * f)
      given = given + sizes[k]
    end
    for i = 0, n - given - 1 do -- the remainder, round-robin from the first
      local k = i % #sizes + 1
      sizes[k] = sizes[k] + 1
    end
  else
    for k, v in ipairs(lengths) do
      if math.type(v) ~= "integer" then
        raise("%s: lengths must all be row counts (integers) adding up to %d, or fractions adding up to 1; "
          .. "length %d is %s", who, n, k, tostring(v))
      end
      sizes[k] = v
    end
    if total ~= n then
      raise("%s: the lengths add up to %s, but the dataset has %d rows (give counts that add up to %d, "
        .. "or fractions that add up to 1)", who, tostring(total), n, n)
    end
  end
  local perm = ember().randperm(n, generator and { generator = generator } or nil)
  local out, at = {}, 1
  for k, m in ipairs(sizes) do
    out[k] = Subset.new(dataset, m > 0 and perm:narrow(1, at, m) or ember().zeros(0, { dtype = "int64" }))
    at = at + m
  end
  return out
end

return Subset
