--- ember.data.TransformDataset: a dataset whose rows go through a
-- transform when read, as torchvision's datasets apply `transform` and
-- `target_transform` in their __getitem__.
--
-- Each row is read from the dataset (a Dataset, TensorDataset, Subset, a
-- plain list, or any table with `#ds` and `ds[i]`/`ds:get(i)`) and then:
-- a tensor row is the image itself; a list row ({img, label}, a
-- TensorDataset's) has its first item transformed (and its second by
-- target_transform); a named row ({x =, y =}, a Dataset's) its field
-- `key` ("x" by default; target_key "y"). It has no gather, so DataLoader
-- reads it row by row and collates: each image gets its own random draws.
-- @classmod data.TransformDataset
local raise = require("ember._errors").raise -- at the user's line
local rows = require "ember.data.dataloader" -- the one rule for a dataset's length and rows

local TransformDataset = {}
TransformDataset.__name = "data.TransformDataset"

local function callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return mt ~= nil and type(mt) == "table" and mt.__call ~= nil
end

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

function TransformDataset.__index(self, k)
  if math.type(k) == "integer" then return self:get(k) end
  return TransformDataset[k]
end
function TransformDataset.__len(self) return self.n end

local OPTIONS = { target_transform = true, key = true, target_key = true }

--- TransformDataset(dataset, transform [, {target_transform =, key =, target_key =}]):
-- dataset's rows with transform applied to the image (nil: left as it
-- is) and target_transform to the label. key / target_key: which item of
-- a row is the image / the label (by default 1 and 2 for a list row, "x"
-- and "y" for a named row).
-- @usage local data = require "ember.data"
-- local T = data.transforms
-- local ds = data.TransformDataset(data.TensorDataset(ember.ones(4, 1, 2, 2), ember.arange(1, 5, {dtype = "int64"})),
--   T.Normalize({0.5}, {0.5}))
-- local x, y = table.unpack(ds[2])
-- print(#ds, x:sum():item(), y:item())   --> 4	4.0	2
function TransformDataset.new(dataset, transform, opts)
  local who = "TransformDataset"
  local n, why = rows._length_of(dataset)
  if n == nil then raise("%s: the dataset must have a length (#ds) and rows ds[i] or ds:get(i); got %s", who, why) end
  if transform ~= nil and not callable(transform) then
    raise("%s: transform must be a transform (a function or a callable object), got %s", who, type(transform))
  end
  if opts ~= nil and type(opts) ~= "table" then raise("%s: options must be a table, got %s", who, type(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if not OPTIONS[k] then raise("%s: unknown option '%s' (options: key, target_key, target_transform)", who, tostring(k)) end
  end
  if opts.target_transform ~= nil and not callable(opts.target_transform) then
    raise("%s: target_transform must be a function or a callable object, got %s", who, type(opts.target_transform))
  end
  return setmetatable({ dataset = dataset, transform = transform, target_transform = opts.target_transform,
    key = opts.key, target_key = opts.target_key, n = n, fetch = rows._fetcher(dataset) }, TransformDataset)
end

--- Row i (1-based, negative from the end), transformed.
function TransformDataset:get(i)
  local n = self.n
  if math.type(i) ~= "integer" then raise("TransformDataset: a row number must be an integer, got %s", tostring(i)) end
  if i < 0 then i = n + 1 + i end
  if i < 1 or i > n then raise("TransformDataset: row %d is out of range for a dataset of %d rows", i, n) end
  local row = self.fetch(i)
  if is_tensor(row) or type(row) ~= "table" then
    if self.transform then row = self.transform(row) end
    return row
  end
  local list = rawget(row, 1) ~= nil
  local key = self.key or (list and 1 or "x")
  local tkey = self.target_key or (list and 2 or "y")
  if self.transform and row[key] == nil then
    raise("TransformDataset: row %d has no item %s to transform (give key =)", i, tostring(key))
  end
  local out = {}
  for k, v in pairs(row) do out[k] = v end
  if self.transform then out[key] = self.transform(row[key]) end
  if self.target_transform then out[tkey] = self.target_transform(row[tkey]) end
  return out
end

function TransformDataset:__tostring()
  local lines = { ("TransformDataset(%d rows of %s)"):format(self.n, tostring(self.dataset):match("^[^\n]*")) }
  if self.transform then lines[#lines + 1] = "  transform: " .. tostring(self.transform):gsub("\n", "\n  ") end
  if self.target_transform then lines[#lines + 1] = "  target_transform: " .. tostring(self.target_transform) end
  return table.concat(lines, "\n")
end

setmetatable(TransformDataset, { __call = function(_, ...) return TransformDataset.new(...) end })

return TransformDataset
