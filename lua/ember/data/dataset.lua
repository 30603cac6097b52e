--- ember.data.Dataset: named tensors that share their first dim, and batch
-- iterators over them with seeded shuffling.
--
--   local Dataset = require "ember.data.dataset"
--   local ids = ember.tensor({{5, 6, 1, 1}, {7, 1, 1, 1}, {8, 9, 10, 1}}, {dtype = "int64"})  -- 1 = padding
--   local labels = ember.tensor({1, 2, 1}, {dtype = "int64"})
--   local ds = Dataset.new({x = ids, y = labels}, {pad = {x = 1}})   -- tok.vocab.pad_id, say
--   for b, i in ds:batches(2, {shuffle = true}) do
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

local BATCH_OPTIONS = {shuffle = true, drop_last = true, sampler = true}

--- Iterator over batches: for batch, i in ds:batches(bs, opts).
-- opts.shuffle (false), opts.drop_last (false), opts.sampler: which rows
-- and in which order, as torch's DataLoader(sampler=): anything whose
-- indices() gives 1-based int64 rows, such as
-- ember.distributed.DistributedSampler (this rank's shard).
function Dataset:batches(bs, opts)
  local ember = require "ember"
  opts = opts or {}
  if type(opts) ~= "table" then error(("Dataset:batches: options must be a table, got %s"):format(type(opts)), 2) end
  for k in pairs(opts) do
    if not BATCH_OPTIONS[k] then error(("Dataset:batches: unknown option '%s'"):format(tostring(k)), 2) end
  end
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error(("Dataset:batches: batch size must be a positive integer, got %s"):format(tostring(bs)), 2)
  end
  local order
  if opts.sampler ~= nil then
    if opts.shuffle then error("Dataset:batches: shuffle and sampler exclude each other (the sampler orders the rows)", 2) end
    if type(opts.sampler) ~= "table" or type(opts.sampler.indices) ~= "function" then
      error(("Dataset:batches: sampler must have an indices() method, got %s"):format(type(opts.sampler)), 2)
    end
    order = opts.sampler:indices()
  elseif opts.shuffle then
    order = ember.randperm(self.n)
  else
    order = ember.arange(1, self.n + 1, {dtype = "int64"})
  end
  return Dataset.batches_in_order(self, order, math.tointeger(bs), opts.drop_last)
end

--- Iterator over the batches of ds (anything with gather(idx)) that take
-- the 1-based int64 rows `order` bs at a time, on ds's device: for batch, i
-- in Dataset.batches_in_order(ds, order, bs, drop_last).
function Dataset.batches_in_order(ds, order, bs, drop_last)
  local device = ds.fields and ds.fields[ds.names[1]].device
  if device and device ~= "cpu" then order = order:to(device) end
  local m = order:numel()
  local nb = drop_last and m // bs or (m + bs - 1) // bs
  local i = 0
  return function()
    i = i + 1
    if i > nb then return nil end
    local start = (i - 1) * bs + 1
    return ds:gather(order:narrow(1, start, math.min(bs, m - start + 1))), i
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
