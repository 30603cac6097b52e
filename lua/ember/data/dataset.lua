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

-- ds[i] is row i (1-based, negative from the end) as a table of tensors,
-- as PyTorch's dataset[i]; any other key is a method.
function Dataset.__index(self, k)
  if math.type(k) == "integer" then return self:row(k) end
  return Dataset[k]
end

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

--- fields: name -> tensor, all with the same first dim; or the tensors
-- themselves, as torch's TensorDataset(x, y): `Dataset.new(x, y)` names
-- them 1, 2, ... (batches are {x_rows, y_rows}). `data.Dataset{...}`
-- calls new too.
-- opts.pad: name -> pad id, for right-padded id fields to trim per batch
-- (the batch gets <name>_mask too).
-- @usage local data = require "ember.data"
-- local ds = data.Dataset(ember.randn(10, 3), ember.arange(1, 11, "int64"))
-- for b in ds:batches(4) do local x, y = b[1], b[2] end
-- print(#ds, ds[2][2])   --> 10	tensor(2, shape=[], dtype=int64, device=cpu)
function Dataset.new(fields, opts, ...)
  if is_tensor(fields) then
    fields, opts = { fields, opts, ... }, nil
    for i, t in pairs(fields) do
      if not is_tensor(t) then
        error(("Dataset.new: argument %d is a %s; give tensors (Dataset.new(x, y)) or one table of "
          .. "name -> tensor"):format(i, type(t)), 2)
      end
    end
  elseif type(fields) ~= "table" then
    error(("Dataset.new: expected a table of name -> tensor or tensors, got %s"):format(type(fields)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("Dataset.new: options must be a table {pad = ...}, got %s"):format(type(opts)), 2)
  end
  local self = setmetatable({fields = {}, names = {}, pad = (opts and opts.pad) or {}}, Dataset)
  local n
  for name, t in pairs(fields) do
    if not is_tensor(t) then
      error(("Dataset.new: field '%s' is a %s, not a tensor"):format(tostring(name), type(t)), 2)
    end
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

--- Row i (1-based; negative counts from the end) as a table name -> tensor
-- (the row of each field); `ds[i]` is the same.
-- @tparam integer i
function Dataset:row(i)
  if math.type(i) ~= "integer" or i == 0 or i > self.n or i < -self.n then
    error(("Dataset: row %s is out of range (1..%d or -%d..-1)"):format(tostring(i), self.n, self.n), 2)
  end
  if i < 0 then i = self.n + 1 + i end
  local r = {}
  for _, name in ipairs(self.names) do r[name] = self.fields[name][i] end
  return r
end

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

Dataset.__name = "data.Dataset"
setmetatable(Dataset, { __call = function(_, ...) return Dataset.new(...) end })

function Dataset:__tostring()
  local parts = {}
  for _, name in ipairs(self.names) do
    local t = self.fields[name]
    parts[#parts + 1] = ("%s=%s %s"):format(name, table.concat(t.shape, "x"), t.dtype)
  end
  return ("Dataset(%d rows: %s)"):format(self.n, table.concat(parts, ", "))
end

return Dataset
