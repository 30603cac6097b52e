--- ember.data.DataLoader: torch.utils.data.DataLoader over a map-style
-- dataset or a stream, in the main process.
--
-- The dataset may be an `ember.data.Dataset` or `TensorDataset` (batches
-- are gathered with index_select, as `ds:batches` does), a tensor (its
-- rows), or any table with a length (`#ds`, `__len`) and rows `ds[i]` or
-- `ds:get(i)` (1-based), a plain Lua list included; their rows go through
-- `collate_fn` (by default `data.default_collate`). A get(i) that returns
-- several values (`return img, label`, as torch's tuple) gives the row
-- {img, label}. A `data.IterableDataset` (a stream of samples) is read in
-- order, batch_size samples at a time (no shuffle, sampler or batch_sampler).
--
-- Two ways to loop, as Lua allows:
--
--   for batch, i in loader do ... end        -- batch as collate_fn makes it ({x, y} for a
--                                            -- TensorDataset), i its 1-based number
--   for x, y in loader:iter() do ... end     -- torch's `for x, y in loader:`: a list batch unpacked
--
-- Each loop is an epoch: with shuffle it draws a new order from ember's
-- global generator (reproducible after ember.manual_seed) or from
-- `generator` (an ember.Generator) when given. `#loader` is the number of
-- batches.
-- @classmod data.DataLoader
local raise = require("ember._errors").raise -- at the user's line
local Dataset = require "ember.data.dataset"
local IterableDataset = require "ember.data.iterable_dataset"

local DataLoader = {}
DataLoader.__index = DataLoader
DataLoader.__name = "data.DataLoader"

local function ember() return require "ember" end

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

local function shape_str(t) return "[" .. table.concat(t.shape, ", ") .. "]" end

-- ---- default_collate ----------------------------------------------------

local function collate(samples)
  local e = ember()
  local first = samples[1]
  local kind = type(first)
  for i, s in ipairs(samples) do
    if type(s) ~= kind or is_tensor(s) ~= is_tensor(first) then
      raise("default_collate: item %d of the batch is a %s, item 1 a %s", i,
        is_tensor(s) and "tensor" or type(s), is_tensor(first) and "tensor" or kind)
    end
  end
  if is_tensor(first) then
    for i, s in ipairs(samples) do
      if s.dtype ~= first.dtype or #s.shape ~= #first.shape or shape_str(s) ~= shape_str(first) then
        raise("default_collate: item %d is %s %s, item 1 is %s %s: stacking needs equal shapes and dtypes "
          .. "(pad first, e.g. nn.utils.rnn.pad_sequence, or give collate_fn)", i, shape_str(s), s.dtype,
          shape_str(first), first.dtype)
      end
    end
    return e.stack(samples, 1)
  elseif kind == "number" then
    -- torch: a float first gives float64; ints give int64 (the default dtype if some are floats)
    local dtype = "int64"
    for _, s in ipairs(samples) do if math.type(s) == "float" then dtype = e.get_default_dtype() end end
    if math.type(first) == "float" then dtype = "float64" end
    return e.tensor(samples, { dtype = dtype })
  elseif kind == "boolean" then
    return e.tensor(samples, { dtype = "bool" })
  elseif kind == "string" then
    return { table.unpack(samples) }
  elseif kind == "table" then
    local n = #first
    if n > 0 then -- a list: collated position by position
      local out = {}
      for i, s in ipairs(samples) do
        if #s ~= n then raise("default_collate: each element in list of batch should be of equal size "
          .. "(item 1 has %d, item %d has %d)", n, i, #s) end
      end
      for j = 1, n do
        local col = {}
        for i, s in ipairs(samples) do col[i] = s[j] end
        out[j] = collate(col)
      end
      return out
    end
    local out = {}
    for k in pairs(first) do
      local col = {}
      for i, s in ipairs(samples) do
        if s[k] == nil then raise("default_collate: item %d has no key '%s' (item 1 has)", i, tostring(k)) end
        col[i] = s[k]
      end
      out[k] = collate(col)
    end
    return out
  end
  raise("default_collate: a batch holds tensors, numbers, booleans, strings or tables of them; found %s", kind)
end

--- torch.utils.data.default_collate: a list of samples as one batch.
-- Tensors are stacked in a new dim 1; numbers become a tensor (int64 for
-- integers, float64 when the first is a float, as torch); booleans a bool
-- tensor; strings stay a list; lists are collated position by position
-- and tables with keys key by key (recursively).
-- @tparam table samples a list of rows as the dataset gives them
-- @usage local data = require "ember.data"
-- local b = data.default_collate({ {ember.zeros(2), 1}, {ember.ones(2), 2} })
-- print(b[1].shape, b[2]:totable()[2], b[2].dtype)   --> ember.Size{2, 2} 2 int64
function DataLoader.default_collate(samples)
  if type(samples) ~= "table" or is_tensor(samples) then
    raise("default_collate: expected a list of samples, got %s", is_tensor(samples) and "a tensor" or type(samples))
  end
  if #samples == 0 then raise("default_collate: the batch is empty") end
  return collate(samples)
end

-- ---- the loader ---------------------------------------------------------------

local OPTIONS = { batch_size = true, shuffle = true, sampler = true, batch_sampler = true, drop_last = true,
  collate_fn = true, generator = true, seed = true, num_workers = true, pin_memory = true,
  -- torch's worker options: there are no workers (as torch's num_workers = 0, which calls no worker_init_fn)
  persistent_workers = true, prefetch_factor = true, worker_init_fn = true, timeout = true }

-- ds[k], or nil where reading it fails (an __index that takes only row numbers).
local function field(ds, k)
  if type(ds) ~= "table" then return nil end
  local ok, v = pcall(function() return ds[k] end)
  return ok and v or nil
end

-- The rows of a map-style dataset that has no gather(idx): a function i -> row.
-- A get(i) that returns several values (`return img, label`, torch's tuple)
-- gives the row {img, label}: keeping only the first dropped the labels.
local function row_of(...)
  if select("#", ...) <= 1 then return (...) end
  return { ... }
end
local function fetcher(ds)
  if type(field(ds, "get")) == "function" then return function(i) return row_of(ds:get(i)) end end
  return function(i) return ds[i] end
end

-- The number of rows of ds, or nil with what is missing.
local function length_of(ds)
  if is_tensor(ds) then return ds:dim() > 0 and ds:size(1) or nil, "a 0-d tensor has no rows" end
  if type(ds) ~= "table" and type(ds) ~= "userdata" then return nil, "a " .. type(ds) end
  local ok, n = pcall(function() return #ds end)
  if not ok or math.type(n) ~= "integer" or n < 0 then
    return nil, "no length (#ds gives " .. (ok and tostring(n) or "an error") .. ")"
  end
  return n
end

-- The two rules Subset and ConcatDataset share with the loader.
DataLoader._length_of, DataLoader._fetcher = length_of, fetcher

--- DataLoader(dataset [, opts]) (also `DataLoader(dataset, batch_size [, opts])`).
-- opts: `batch_size` (1), `shuffle` (false), `drop_last` (false: the
-- last batch may be smaller), `collate_fn(samples)` (rows to batch;
-- default: `data.default_collate`, and for a Dataset the gathered batch),
-- `sampler` (instead of shuffle: anything whose indices() gives the 1-based
-- int64 rows in order, such as the data.samplers (RandomSampler,
-- WeightedRandomSampler, ...) or ember.distributed.DistributedSampler, or a
-- Lua list of rows), `batch_sampler` (a data.BatchSampler, or anything
-- whose batches() gives a list of int64 row tensors: the batches
-- themselves, instead of batch_size, shuffle, sampler and drop_last),
-- `generator` (an ember.Generator for the shuffle) or
-- `seed` (ember's shortcut: a generator of its own seeded so), and
-- `num_workers` / `pin_memory` (and the workers' `persistent_workers`,
-- `prefetch_factor`, `worker_init_fn`, `timeout`), accepted for torch's code
-- and unused (ember loads in the main process, as torch's num_workers = 0).
-- Unknown options are refused.
-- @usage local data = require "ember.data"
-- local ds = data.TensorDataset(ember.randn(10, 3), ember.arange(1, 11, "int64"))
-- local loader = data.DataLoader(ds, {batch_size = 4, shuffle = true})
-- for x, y in loader:iter() do assert(x:size(2) == 3 and y:dim() == 1) end
-- local sizes = {}
-- for batch, i in loader do sizes[i] = batch[1]:size(1) end
-- print(table.concat(sizes, " "), #loader)   --> 4 4 2 3
function DataLoader.new(dataset, opts, more)
  if math.type(opts) == "integer" then
    local o = {}
    if more ~= nil and type(more) ~= "table" then raise("DataLoader: options must be a table, got %s", type(more)) end
    for k, v in pairs(more or {}) do o[k] = v end
    o.batch_size = opts
    opts = o
  end
  opts = opts or {}
  if type(opts) ~= "table" then raise("DataLoader: options must be a table {batch_size =, shuffle =, ...}, got %s", type(opts)) end
  for k in pairs(opts) do
    if not OPTIONS[k] then
      raise("DataLoader: unknown option '%s' (options are batch_size, shuffle, sampler, batch_sampler, drop_last, "
        .. "collate_fn, generator, seed, num_workers, pin_memory, persistent_workers, prefetch_factor, worker_init_fn, "
        .. "timeout)", tostring(k))
    end
  end
  local gathers = type(field(dataset, "gather")) == "function" and field(dataset, "fields") ~= nil
  local stream = field(dataset, "is_iterable_dataset") == true
  if stream then
    -- torch's ValueErrors: a stream has no rows to shuffle or sample
    for _, k in ipairs { "shuffle", "sampler", "batch_sampler" } do
      if opts[k] ~= nil and opts[k] ~= false then
        raise("DataLoader: %s is not for an IterableDataset (a stream has no rows to order; shuffle its source "
          .. "instead)", k)
      end
    end
  end
  local n, why = length_of(dataset)
  if n == nil and not stream then
    raise("DataLoader: the dataset must be an ember.data.Dataset, a TensorDataset, a tensor, a table with a "
      .. "length (#ds) and rows ds[i] or ds:get(i), or a data.IterableDataset (a stream of samples); got %s", why)
  end
  local bs = opts.batch_size
  if bs == nil then bs = 1 end
  if type(bs) ~= "number" or bs % 1 ~= 0 or bs < 1 then
    raise("DataLoader: batch_size must be a positive integer, got %s", tostring(bs))
  end
  for _, k in ipairs { "shuffle", "drop_last", "pin_memory", "persistent_workers" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      raise("DataLoader: %s must be a boolean, got %s", k, type(opts[k]))
    end
  end
  if opts.collate_fn ~= nil and type(opts.collate_fn) ~= "function" then
    raise("DataLoader: collate_fn must be a function, got %s", type(opts.collate_fn))
  end
  if opts.num_workers ~= nil and (math.type(opts.num_workers) ~= "integer" or opts.num_workers < 0) then
    raise("DataLoader: num_workers must be an integer >= 0, got %s", tostring(opts.num_workers))
  end
  if opts.prefetch_factor ~= nil and (math.type(opts.prefetch_factor) ~= "integer" or opts.prefetch_factor < 1) then
    raise("DataLoader: prefetch_factor must be a positive integer, got %s", tostring(opts.prefetch_factor))
  end
  if opts.worker_init_fn ~= nil and type(opts.worker_init_fn) ~= "function" then
    raise("DataLoader: worker_init_fn must be a function, got %s", type(opts.worker_init_fn))
  end
  if opts.timeout ~= nil and (type(opts.timeout) ~= "number" or opts.timeout < 0) then
    raise("DataLoader: timeout must be a number >= 0, got %s", tostring(opts.timeout))
  end
  local sampler = opts.sampler
  if sampler ~= nil then
    if opts.shuffle then raise("DataLoader: sampler option is mutually exclusive with shuffle (the sampler orders the rows)") end
    local list = type(sampler) == "table" and getmetatable(sampler) == nil and type(sampler.indices) ~= "function"
    if not (list or (type(sampler) == "table" and type(sampler.indices) == "function")) then
      raise("DataLoader: sampler must have an indices() method or be a list of rows, got %s", type(sampler))
    end
  end
  local batch_sampler = opts.batch_sampler
  if batch_sampler ~= nil then
    if type(batch_sampler) ~= "table" or type(batch_sampler.batches) ~= "function" then
      raise("DataLoader: batch_sampler must be a data.BatchSampler (or have a batches() method), got %s",
        type(batch_sampler))
    end
    if (opts.batch_size or 1) ~= 1 or opts.shuffle or sampler ~= nil or opts.drop_last then
      raise("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
    end
  end
  local g = opts.generator
  if g ~= nil and opts.seed ~= nil then raise("DataLoader: give generator or seed, not both") end
  local gen = require "ember._generator"
  if g ~= nil and not gen.is_generator(g) then
    raise("DataLoader: generator must be an ember.Generator (ember.Generator()), got %s", type(g))
  end
  if opts.seed ~= nil then
    if math.type(opts.seed) ~= "integer" then raise("DataLoader: seed must be an integer, got %s", tostring(opts.seed)) end
    g = ember().Generator():manual_seed(opts.seed)
  end
  return setmetatable({
    dataset = dataset, batch_size = math.tointeger(bs), shuffle = opts.shuffle == true,
    drop_last = opts.drop_last == true, collate_fn = opts.collate_fn, sampler = sampler,
    batch_sampler = batch_sampler, generator = g,
    num_workers = opts.num_workers or 0, pin_memory = opts.pin_memory == true,
    _gathers = gathers and opts.collate_fn == nil and not stream, _stream = stream,
    _running = setmetatable({}, { __mode = "k" }),
  }, DataLoader)
end

-- A sampler's rows (or a batch_sampler's batch) checked against the
-- dataset's n rows: an error that names the sampler, not index_select's
-- inside the library.
local function check_rows(rows, n, who)
  if not is_tensor(rows) or rows:dim() ~= 1 or rows.dtype ~= "int64" then
    raise("DataLoader: the %s must give 1-d int64 tensors of rows, got %s", who,
      is_tensor(rows) and ("a %s tensor of shape %s"):format(rows.dtype, shape_str(rows)) or type(rows))
  end
  if rows:numel() > 0 then
    local lo, hi = rows:min():item(), rows:max():item()
    if lo < 1 or hi > n then
      raise("DataLoader: the %s gave row %d, but the dataset has rows 1..%d", who, lo < 1 and lo or hi, n)
    end
  end
  return rows
end

-- The rows of one epoch, in order: a 1-based int64 tensor.
function DataLoader:_order()
  local e = ember()
  local s = self.sampler
  if s ~= nil then
    local n = assert(length_of(self.dataset))
    if type(s.indices) == "function" then return check_rows(s:indices(), n, "sampler") end
    for k, v in ipairs(s) do
      if math.type(v) ~= "integer" then raise("DataLoader: sampler row %d is %s, not a row number", k, tostring(v)) end
    end
    return check_rows(e.tensor(s, { dtype = "int64" }), n, "sampler")
  end
  local n = assert(length_of(self.dataset))
  if self.shuffle then
    if self.generator then return e.randperm(n, { generator = self.generator }) end
    return e.randperm(n)
  end
  return e.arange(1, n + 1, { dtype = "int64" })
end

-- An epoch's iterator of (batch, i) over an IterableDataset: batch_size
-- samples of ds:iter() at a time through collate_fn.
function DataLoader:_stream_batches()
  local it = self.dataset:iter()
  if type(it) ~= "function" then
    raise("DataLoader: the IterableDataset's iter() gave %s, not an iterator (a function that returns the next "
      .. "sample, e.g. coroutine.wrap(...))", type(it))
  end
  local collate_fn, bs, i, done = self.collate_fn or DataLoader.default_collate, self.batch_size, 0, false
  return function()
    if done then return nil end
    local samples = {}
    while #samples < bs do
      local row = row_of(it())
      if row == nil then done = true break end
      samples[#samples + 1] = row
    end
    if #samples == 0 or (done and self.drop_last and #samples < bs) then return nil end
    i = i + 1
    local batch = collate_fn(samples)
    if batch == nil then
      raise("DataLoader: collate_fn returned nil for a batch of %d rows (does it end with `return batch`?)", #samples)
    end
    return batch, i
  end
end

-- An epoch's iterator of (batch, i), through Dataset.batches_in_order.
function DataLoader:_batches()
  if self._stream then return self:_stream_batches() end
  local ds = self.dataset
  local source = ds
  if not self._gathers then
    local collate_fn = self.collate_fn or DataLoader.default_collate
    local gather
    if is_tensor(ds) and self.collate_fn == nil then
      gather = function(_, idx) return ds:index_select(1, idx) end
    else
      local fetch = fetcher(ds)
      gather = function(_, idx)
        local samples = {}
        for k, i in ipairs(idx:totable()) do
          local row = fetch(i)
          if row == nil then
            raise("DataLoader: row %d of the dataset is nil (a map-style dataset gives rows 1..#ds as ds[i] "
              .. "or ds:get(i))", i)
          end
          samples[k] = row
        end
        local batch = collate_fn(samples)
        if batch == nil then -- it ended the loop: the epoch's batches were dropped without a word
          raise("DataLoader: collate_fn returned nil for a batch of %d rows (does it end with `return batch`?)", #samples)
        end
        return batch
      end
    end
    source = { gather = gather }
  end
  if self.batch_sampler then
    local batches, i, n = self.batch_sampler:batches(), 0, assert(length_of(ds))
    return function()
      i = i + 1
      if batches[i] == nil then return nil end
      return source:gather(check_rows(batches[i], n, "batch_sampler")), i
    end
  end
  return Dataset.batches_in_order(source, self:_order(), self.batch_size, self.drop_last)
end

--- The number of batches of an epoch (torch's len(loader)); `#loader` too.
function DataLoader:size()
  if self._stream then
    local n = IterableDataset._length_of(self.dataset)
    if n == nil then
      raise("DataLoader: #loader over an IterableDataset needs its number of samples (IterableDataset(fn, n), or "
        .. "a __len): a stream's batches are known only by reading it")
    end
    local bs = self.batch_size
    return self.drop_last and n // bs or (n + bs - 1) // bs
  end
  if self.batch_sampler then
    local b = self.batch_sampler
    return type(b.size) == "function" and b:size() or #b:batches()
  end
  local n
  local s = self.sampler
  if s ~= nil then
    if type(s.indices) ~= "function" then n = #s
    else
      local ok, m = pcall(function() return #s end)
      n = ok and math.type(m) == "integer" and m or s:indices():numel()
    end
  else
    n = assert(length_of(self.dataset))
  end
  local bs = self.batch_size
  if self.drop_last then return n // bs end
  return (n + bs - 1) // bs
end
DataLoader.__len = DataLoader.size

local function unpacked(b, ...)
  if type(b) == "table" and not is_tensor(b) and getmetatable(b) == nil and rawlen(b) > 0 then
    return table.unpack(b, 1, rawlen(b))
  end
  return b, ...
end

--- An epoch's iterator whose values are the batch unpacked when it is a
-- list: `for x, y in loader:iter() do`, torch's `for x, y in loader:`
-- (a batch that is not a list, such as a named Dataset's table or a
-- tensor, comes as it is). Each call is a new epoch (a new shuffle);
-- `local it = loader:iter(); local x, y = it()` is torch's next(iter(loader)).
-- @usage local data = require "ember.data"
-- local loader = data.DataLoader(data.TensorDataset(ember.randn(5, 2), ember.zeros(5)), {batch_size = 2})
-- local n = 0
-- for x, y in loader:iter() do n = n + x:size(1) * 10 + y:size(1) end
-- print(n)   --> 55
function DataLoader:iter()
  local it = self:_batches()
  return function() return unpacked(it()) end
end

-- `for batch, i in loader do`: a new epoch when the loop starts (the
-- control value is nil), else the epoch that gave the previous batch.
function DataLoader:__call(_, prev)
  local it
  if prev == nil then
    it = self:_batches()
  else
    it = self._running[prev]
    self._running[prev] = nil
    if it == nil then
      raise("DataLoader: loop over it as `for batch, i in loader do` or `for x, y in loader:iter() do`")
    end
  end
  local b, i = it()
  if b ~= nil then self._running[b] = it end
  return b, i
end

function DataLoader:__tostring()
  local ok, nb = pcall(self.size, self) -- a stream of unknown length has no number of batches
  return ("DataLoader(%s, batch_size=%d, shuffle=%s, drop_last=%s: %s batches)"):format(
    tostring(self.dataset):match("^[^\n]*"), self.batch_size, tostring(self.shuffle), tostring(self.drop_last),
    ok and tostring(nb) or "?")
end

setmetatable(DataLoader, { __call = function(_, ...) return DataLoader.new(...) end })

return DataLoader
