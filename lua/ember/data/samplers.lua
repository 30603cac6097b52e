--- ember.data.samplers: torch.utils.data's samplers, which say which rows
-- of a dataset an epoch visits and in which order.
--
-- Each is what `DataLoader{sampler =}` and `Dataset:batches{sampler =}`
-- take: `s:indices()` gives one epoch's 1-based rows as an int64 tensor
-- (a new draw each call, for the random ones), `#s` their number, and
-- `for i in s:iter() do` (or `for i in s do`, torch's `for i in sampler`)
-- walks them as Lua integers. `BatchSampler` groups
-- another sampler's rows into batches, for `DataLoader{batch_sampler =}`.
-- The random ones draw from ember's global generator (reproducible after
-- ember.manual_seed) or from `generator` (an ember.Generator). The rows
-- differ from torch's for the same seed: the generators are not torch's.
-- @module data.samplers
local raise = require("ember._errors").raise -- at the user's line
local gen = require "ember._generator"

local M = {}

local function ember() return require "ember" end

local function is_tensor(v)
  local mt = getmetatable(v)
  return mt ~= nil and mt.__name == "ember.Tensor"
end

-- The number of rows of data_source: a number itself, or #data_source.
local function size_of(who, src)
  if math.type(src) == "integer" and src >= 0 then return src end
  if is_tensor(src) then return src:dim() > 0 and src:size(1) or 0 end
  local ok, n = pcall(function() return #src end)
  if not ok or math.type(n) ~= "integer" or n < 0 then
    raise("%s: data_source must be a dataset with a length (#ds) or a number of rows, got %s", who, type(src))
  end
  return n
end

local function check_opts(who, opts, allowed)
  -- torch's positional generator (SubsetRandomSampler(indices, g), ...)
  if allowed.generator and gen.is_generator(opts) then return { generator = opts } end
  opts = require("ember.data.vocab").check_opts(who, opts, allowed) -- ember.data's options rule
  if opts.generator ~= nil and not gen.is_generator(opts.generator) then
    raise("%s: generator must be an ember.Generator (ember.Generator()), got %s", who, type(opts.generator))
  end
  return opts
end

-- The random functions' options: the sampler's generator, if it has one.
local function draw_opts(self, o)
  o = o or {}
  o.generator = self.generator
  return o
end

-- `for i in s do` (BatchSampler: `for rows in bs do`), as torch's `for i in
-- sampler`: a loop's first call (no previous value) starts an epoch of
-- s:iter(), the later ones go on with it.
local function call_iter(self, _, prev)
  if prev == nil then
    rawset(self, "_it", self:iter())
  elseif rawget(self, "_it") == nil or not rawequal(prev, rawget(self, "_last")) then
    raise("%s: `for i in s do` runs one loop at a time over a sampler; nest loops with `for i in s:iter() do`",
      self.__name)
  end
  local v = self._it()
  rawset(self, "_last", v)
  if v == nil then rawset(self, "_it", nil) end
  return v
end

-- The methods every sampler shares.
local Sampler = {}
Sampler.__index = Sampler

-- A sampler class: called, it makes one (c.new), as torch's classes are.
local function class(name)
  local c = setmetatable({}, { __index = Sampler, __call = function(cls, ...) return cls.new(...) end })
  c.__index = c
  c.__name = "data." .. name
  c.__len = function(self) return self:size() end
  c.__call = call_iter
  c.__tostring = function(self) return ("%s(%d rows)"):format(name, self:size()) end
  return c
end

--- The rows of one epoch as Lua integers: `for i in s:iter() do`.
function Sampler:iter()
  local rows = self:indices():totable()
  local k = 0
  return function()
    k = k + 1
    return rows[k]
  end
end

-- ---- SequentialSampler ----------------------------------------------------

local Sequential = class("SequentialSampler")

--- SequentialSampler(data_source): rows 1, 2, ..., #data_source in order
-- (data_source: a dataset, or its number of rows).
-- @usage local data = require "ember.data"
-- local s = data.SequentialSampler(data.TensorDataset(ember.zeros(4, 2)))
-- print(#s, table.concat(s:indices():totable(), " "))   --> 4	1 2 3 4
function Sequential.new(data_source)
  return setmetatable({ n = size_of("SequentialSampler", data_source) }, Sequential)
end
--- The number of rows an epoch visits (`#s`).
function Sequential:size() return self.n end
--- One epoch's rows: a 1-based int64 tensor.
function Sequential:indices() return ember().arange(1, self.n + 1, { dtype = "int64" }) end

-- ---- RandomSampler --------------------------------------------------------

local Random = class("RandomSampler")

--- RandomSampler(data_source [, opts]): the rows in a random order.
-- opts: `replacement` (false: a permutation; true: num_samples draws,
-- uniform and independent), `num_samples` (default #data_source; without
-- replacement more than that many is whole permutations one after
-- another, as torch), `generator`; or torch's positional order,
-- `RandomSampler(ds, replacement [, num_samples [, generator]])`.
-- @usage local data = require "ember.data"
-- local s = data.RandomSampler(ember.zeros(5, 1), {generator = ember.Generator():manual_seed(0)})
-- local rows = s:indices()
-- print(#s, rows:sort():equal(ember.arange(1, 6, "int64")))   --> 5	true
function Random.new(data_source, opts, num_samples, generator)
  local who = "RandomSampler"
  local n = size_of(who, data_source)
  if type(opts) == "boolean" then
    opts = { replacement = opts, num_samples = num_samples, generator = generator }
  elseif num_samples ~= nil or generator ~= nil then
    raise("%s: give the options as one table {replacement =, num_samples =, generator =} or by position "
      .. "(replacement, num_samples, generator), not both", who)
  end
  opts = check_opts(who, opts, { replacement = true, num_samples = true, generator = true })
  if opts.replacement ~= nil and type(opts.replacement) ~= "boolean" then
    raise("%s: replacement must be a boolean, got %s", who, type(opts.replacement))
  end
  local m = opts.num_samples
  if m == nil then m = n end
  if math.type(m) ~= "integer" or m < 1 then
    raise("%s: num_samples must be a positive integer, got %s", who, tostring(opts.num_samples))
  end
  if n == 0 then raise("%s: the data source has no rows", who) end
  return setmetatable({ n = n, num_samples = m, replacement = opts.replacement == true, generator = opts.generator },
    Random)
end
--- The number of rows an epoch draws (`#s`): num_samples.
function Random:size() return self.num_samples end
--- One epoch's rows, a new draw each call: a 1-based int64 tensor.
function Random:indices()
  local e, n, m = ember(), self.n, self.num_samples
  if self.replacement then return e.randint(1, n + 1, { m }, draw_opts(self)) end
  local parts = {}
  for _ = 1, m // n do parts[#parts + 1] = e.randperm(n, draw_opts(self)) end
  if m % n > 0 then parts[#parts + 1] = e.randperm(n, draw_opts(self)):narrow(1, 1, m % n) end
  return #parts == 1 and parts[1] or e.cat(parts, 1)
end

-- ---- SubsetRandomSampler --------------------------------------------------

local SubsetRandom = class("SubsetRandomSampler")

-- A list or 1-d tensor of 1-based rows as an int64 tensor.
local function rows_of(who, indices)
  if is_tensor(indices) then
    if indices:dim() ~= 1 or indices.dtype ~= "int64" then
      raise("%s: indices must be a 1-d int64 tensor or a list of row numbers, got a %s tensor of shape [%s]", who,
        indices.dtype, table.concat(indices.shape, ", "))
    end
    return indices
  end
  if type(indices) ~= "table" then raise("%s: indices must be a list of row numbers, got %s", who, type(indices)) end
  for k, v in ipairs(indices) do
    if math.type(v) ~= "integer" or v < 1 then
      raise("%s: index %d is %s; rows are numbered from 1", who, k, tostring(v))
    end
  end
  return ember().tensor(indices, { dtype = "int64" })
end

--- SubsetRandomSampler(indices [, opts]): the given rows (1-based: a list
-- or an int64 tensor) in a random order each epoch; opts `generator`.
-- @usage local data = require "ember.data"
-- local s = data.SubsetRandomSampler({2, 4, 6})
-- print(#s, s:indices():sort():equal(ember.tensor({2, 4, 6}, {dtype = "int64"})))   --> 3	true
function SubsetRandom.new(indices, opts)
  local who = "SubsetRandomSampler"
  opts = check_opts(who, opts, { generator = true })
  return setmetatable({ rows = rows_of(who, indices), generator = opts.generator }, SubsetRandom)
end
--- The number of rows (`#s`).
function SubsetRandom:size() return self.rows:numel() end
--- The rows in a new random order: a 1-based int64 tensor.
function SubsetRandom:indices()
  local n = self.rows:numel()
  if n == 0 then return self.rows:clone() end
  return self.rows:index_select(1, ember().randperm(n, draw_opts(self)))
end

-- ---- WeightedRandomSampler ------------------------------------------------

local Weighted = class("WeightedRandomSampler")

--- WeightedRandomSampler(weights, num_samples [, replacement [, opts]]):
-- num_samples rows drawn with probability proportional to weights (one
-- non-negative weight per row, a list or a 1-d tensor), with replacement
-- by default, as torch (its usual use: oversampling rare classes). opts:
-- `generator` (also as the third argument: `{replacement =, generator =}`),
-- or the generator itself as torch's fourth positional argument.
-- @usage local data = require "ember.data"
-- local s = data.WeightedRandomSampler({0, 1, 0, 3}, 8)
-- local rows = s:indices()
-- print(#s, rows:eq(1):any():item() or rows:eq(3):any():item())   --> 8	false
function Weighted.new(weights, num_samples, replacement, opts)
  local who = "WeightedRandomSampler"
  if type(replacement) == "table" then replacement, opts = replacement.replacement, replacement end
  opts = check_opts(who, opts, { replacement = true, generator = true })
  if replacement == nil then replacement = true end
  if type(replacement) ~= "boolean" then raise("%s: replacement must be a boolean, got %s", who, type(replacement)) end
  local w
  if is_tensor(weights) then
    w = weights:double()
  elseif type(weights) == "table" then
    for k, v in ipairs(weights) do
      if type(v) ~= "number" then raise("%s: weight %d is a %s, not a number", who, k, type(v)) end
    end
    w = ember().tensor(weights, { dtype = "float64" })
  else
    raise("%s: weights must be a list or a 1-d tensor of numbers, got %s", who, type(weights))
  end
  if w:dim() ~= 1 or w:numel() == 0 then
    raise("%s: weights must be 1-d with one weight per row, got shape [%s]", who, table.concat(w.shape, ", "))
  end
  if math.type(num_samples) ~= "integer" or num_samples < 1 then
    raise("%s: num_samples must be a positive integer, got %s", who, tostring(num_samples))
  end
  if w:lt(0):any():item() or w:isnan():any():item() or w:isinf():any():item() then
    raise("%s: weights must be finite and >= 0", who)
  end
  if w:sum():item() == 0 then raise("%s: at least one weight must be positive", who) end
  local positive = w:gt(0):sum():item()
  if not replacement and num_samples > positive then
    raise("%s: cannot draw %d rows without replacement: only %d weights are positive", who, num_samples, positive)
  end
  return setmetatable({ weights = w, num_samples = num_samples, replacement = replacement,
    generator = opts.generator }, Weighted)
end
--- The number of draws an epoch makes (`#s`).
function Weighted:size() return self.num_samples end
--- One epoch's draws: a 1-based int64 tensor.
function Weighted:indices()
  return ember().multinomial(self.weights, self.num_samples, draw_opts(self, { replacement = self.replacement }))
end

-- ---- BatchSampler ---------------------------------------------------------

local Batch = class("BatchSampler")

--- BatchSampler(sampler, batch_size, drop_last): another sampler's rows in
-- batches of batch_size (the last one smaller unless drop_last), for
-- `DataLoader{batch_sampler =}`. `bs:batches()` gives one epoch's batches
-- as a list of int64 tensors; `for rows in bs:iter() do` walks them as Lua
-- lists, as torch's `for batch in BatchSampler(...)`. A plain list of rows
-- works as the sampler too. torch's keywords go in a table, as ember's
-- options do: `BatchSampler(sampler, {batch_size = 2, drop_last = true})`.
-- @usage local data = require "ember.data"
-- local bs = data.BatchSampler(data.SequentialSampler(5), 2, false)
-- local sizes = {}
-- for rows in bs:iter() do sizes[#sizes + 1] = #rows end
-- print(#bs, table.concat(sizes, " "))   --> 3	2 2 1
function Batch.new(sampler, batch_size, drop_last)
  local who = "BatchSampler"
  if type(sampler) == "table" and getmetatable(sampler) == nil and type(sampler.indices) ~= "function" then
    sampler = { rows = rows_of(who, sampler), indices = function(s) return s.rows end,
      size = function(s) return s.rows:numel() end }
  elseif type(sampler) ~= "table" or type(sampler.indices) ~= "function" then
    raise("%s: sampler must be a sampler (with indices()) or a list of rows, got %s", who, type(sampler))
  end
  if type(batch_size) == "table" and getmetatable(batch_size) == nil then -- torch's keywords
    if drop_last ~= nil then raise("%s: give drop_last in the options table or after batch_size, not both", who) end
    local o = check_opts(who, batch_size, { batch_size = true, drop_last = true })
    batch_size, drop_last = o.batch_size, o.drop_last
  end
  if math.type(batch_size) ~= "integer" or batch_size < 1 then
    raise("%s: batch_size must be a positive integer, got %s", who, tostring(batch_size))
  end
  if drop_last == nil then drop_last = false end
  if type(drop_last) ~= "boolean" then raise("%s: drop_last must be a boolean, got %s", who, type(drop_last)) end
  return setmetatable({ sampler = sampler, batch_size = batch_size, drop_last = drop_last }, Batch)
end

-- The wrapped sampler's number of rows.
local function rows_in(s)
  if type(s.size) == "function" then return s:size() end
  local ok, n = pcall(function() return #s end)
  if ok and math.type(n) == "integer" then return n end
  return s:indices():numel()
end

--- The number of batches of an epoch (`#bs`).
function Batch:size()
  local n, bs = rows_in(self.sampler), self.batch_size
  return self.drop_last and n // bs or (n + bs - 1) // bs
end

--- One epoch's batches: a list of 1-based int64 tensors.
function Batch:batches()
  local rows = self.sampler:indices()
  local m, bs, out = rows:numel(), self.batch_size, {}
  local nb = self.drop_last and m // bs or (m + bs - 1) // bs
  for i = 1, nb do
    local start = (i - 1) * bs + 1
    out[i] = rows:narrow(1, start, math.min(bs, m - start + 1))
  end
  return out
end

--- The wrapped sampler's rows for one epoch, unbatched.
function Batch:indices() return self.sampler:indices() end

--- One epoch's batches as Lua lists of row numbers: `for rows in bs:iter() do`.
function Batch:iter()
  local batches = self:batches()
  local k = 0
  return function()
    k = k + 1
    return batches[k] and batches[k]:totable() or nil
  end
end

M.SequentialSampler, M.RandomSampler, M.SubsetRandomSampler = Sequential, Random, SubsetRandom
M.WeightedRandomSampler, M.BatchSampler = Weighted, Batch

return M
