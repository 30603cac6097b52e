--- ember.data.Dataset: named tensors that share their first dim, and batch
-- iterators over them with seeded shuffling.
--
--   local ds = Dataset.new({x = ids, y = labels}, {pad = {x = tok.vocab.pad_id}})
--   for b, i in ds:batches(128, {shuffle = true}) do
--     -- b.x [B, L'] cut to the batch's longest item, b.x_mask bool [B, L']
--     -- (true = padding), b.y [B]; i is the batch number
--   end
--
-- Shuffling draws ember.randperm from the global generator, so after
-- ember.manual_seed(s) the order of every epoch is reproducible. Rows are
-- gathered with index_select: the data stays in C.
-- @classmod data.Dataset
local error = require("ember._errors").error -- raises at the user's line
local padding = require "ember.data.padding"

local Dataset = {}
Dataset.__index = Dataset

--- fields: name -> tensor, all with the same first dim.
-- opts.pad: name -> pad id, for right-padded id fields to trim per batch
-- (the batch gets <name>_mask too).
function Dataset.new(fields, opts)
  local self = setmetatable({fields = {}, names = {}, pad = (opts and opts.pad) or {}}, Dataset)
  local n
  for name, t in pairs(fields) do
    self.names[#self.names + 1] = name
    self.fields[name] = t
    local rows = t:size(1)
    if n and rows ~= n then
      error(("Dataset.new: field '%s' has %d rows, another field has %d"):format(name, rows, n), 2)
    end
    n = rows
  end
  if not n then error("Dataset.new: no fields given", 2) end
  table.sort(self.names)
  self.n = n
  for name in pairs(self.pad) do
    if not self.fields[name] then error(("Dataset.new: pad names unknown field '%s'"):format(name), 2) end
  end
  return self
end

--- The number of rows.
function Dataset:size() return self.n end
Dataset.__len = Dataset.size

--- Number of batches of size bs (the last one partial unless drop_last).
function Dataset:num_batches(bs, drop_last)
  if drop_last then return self.n // bs end
  return (self.n + bs - 1) // bs
end

--- The rows in the 1-based int64 index tensor idx, as a batch table.
function Dataset:gather(idx)
  local b = {}
  for _, name in ipairs(self.names) do
    local t = self.fields[name]:index_select(1, idx)
    local pad = self.pad[name]
    if pad then
      t, b[name .. "_mask"] = padding.trim(t, pad)
    end
    b[name] = t
  end
  return b
end

--- A new Dataset with the first n rows (or rows idx when given a tensor).
function Dataset:subset(n_or_idx)
  local ember = require "ember"
  local idx = n_or_idx
  if type(n_or_idx) == "number" then
    idx = ember.arange(1, math.min(n_or_idx, self.n) + 1, {dtype = "int64"})
  end
  local f = {}
  for _, name in ipairs(self.names) do f[name] = self.fields[name]:index_select(1, idx) end
  return Dataset.new(f, {pad = self.pad})
end

--- The same dataset with every field moved to device (e.g. "cuda"), so
-- that batches are gathered there.
function Dataset:to(device)
  local f = {}
  for _, name in ipairs(self.names) do f[name] = self.fields[name]:to(device) end
  return Dataset.new(f, {pad = self.pad})
end

--- Iterator over batches: for batch, i in ds:batches(bs, opts).
-- opts.shuffle (false), opts.drop_last (false).
function Dataset:batches(bs, opts)
  local ember = require "ember"
  opts = opts or {}
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error(("Dataset:batches: batch size must be a positive integer, got %s"):format(tostring(bs)), 2)
  end
  local order
  if opts.shuffle then
    order = ember.randperm(self.n)
  else
    order = ember.arange(1, self.n + 1, {dtype = "int64"})
  end
  local device = self.fields[self.names[1]].device
  if device ~= "cpu" then order = order:to(device) end
  local nb = self:num_batches(bs, opts.drop_last)
  local i = 0
  return function()
    i = i + 1
    if i > nb then return nil end
    local start = (i - 1) * bs + 1
    local len = math.min(bs, self.n - start + 1)
    return self:gather(order:narrow(1, start, len)), i
  end
end

function Dataset:__tostring()
  local parts = {}
  for _, name in ipairs(self.names) do
    local t = self.fields[name]
    parts[#parts + 1] = ("%s=%s %s"):format(name, table.concat(t.shape, "x"), t.dtype)
  end
  return ("Dataset(%d rows: %s)"):format(self.n, table.concat(parts, ", "))
end

return Dataset
