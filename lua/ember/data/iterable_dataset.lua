--- ember.data.IterableDataset: torch.utils.data.IterableDataset, a stream
-- of samples (lines of a file, records made on the fly) read in order,
-- with no rows to index.
--
-- `ds:iter()` gives one epoch's iterator: a function that returns the next
-- sample, or nil at the end (a coroutine.wrap works; a sample of several
-- values, `return x, y`, is the list {x, y}). `data.DataLoader` batches
-- it: batch_size samples at a time through collate_fn, the last batch
-- smaller unless drop_last; shuffle, sampler and batch_sampler are refused,
-- as torch's (a stream has no rows to order). `#ds` and `#loader` need the
-- number of samples, when it is known: `IterableDataset(fn, n)`, or a
-- subclass's __len.
--
-- Two ways to make one: `data.IterableDataset(fn [, n])`, fn() giving a
-- new iterator each call; or a subclass that defines iter, as torch's
-- __iter__:
--
--   local data = require "ember.data"
--   local Lines = setmetatable({}, {__index = data.IterableDataset})
--   Lines.__index = Lines
--   function Lines:iter() return io.lines(self.path) end
--   local ds = setmetatable({path = "train.txt"}, Lines)
-- @classmod data.IterableDataset
local raise = require("ember._errors").raise -- at the user's line

local IterableDataset = {}
IterableDataset.__index = IterableDataset
IterableDataset.__name = "data.IterableDataset"
-- DataLoader's mark of a stream (subclasses find it through __index)
IterableDataset.is_iterable_dataset = true

--- IterableDataset(fn [, n]): the samples of the iterator that fn() gives,
-- a new one each epoch; n (optional) the number of samples, for `#ds`
-- and `#loader`.
-- @usage local data = require "ember.data"
-- local ds = data.IterableDataset(function()
--   return coroutine.wrap(function() for i = 1, 5 do coroutine.yield(ember.full({2}, i), i) end end)
-- end)
-- local sizes = {}
-- for x, y in data.DataLoader(ds, {batch_size = 2}):iter() do sizes[#sizes + 1] = y:numel() end
-- print(table.concat(sizes, " "))   --> 2 2 1
function IterableDataset.new(fn, n)
  if type(fn) ~= "function" then
    raise("IterableDataset: expected a function that gives a new iterator of samples each call, got %s", type(fn))
  end
  if n ~= nil and (math.type(n) ~= "integer" or n < 0) then
    raise("IterableDataset: the number of samples must be an integer >= 0, got %s", tostring(n))
  end
  return setmetatable({ fn = fn, n = n }, IterableDataset)
end

--- One epoch's iterator: a function that gives the next sample, nil at the end.
function IterableDataset:iter()
  if rawget(self, "fn") == nil then
    raise("IterableDataset:iter: a subclass defines its own iter() (torch's __iter__), giving the next sample "
      .. "each call")
  end
  return self.fn() -- DataLoader checks that it is a function
end

--- The number of samples (`#ds`), when given; else an error (torch's len() of a stream without __len__).
function IterableDataset:size()
  local n = rawget(self, "n")
  if n == nil then
    raise("IterableDataset: the number of samples is unknown (give it: IterableDataset(fn, n), or define __len)")
  end
  return n
end
IterableDataset.__len = IterableDataset.size

-- The number of samples of a stream, or nil when it is unknown: n as
-- given, or a subclass's own __len (an inherited one is not looked up:
-- Lua reads metamethods from the metatable itself).
function IterableDataset._length_of(ds)
  local mt = getmetatable(ds)
  if mt == IterableDataset then return rawget(ds, "n") end
  if mt ~= nil and rawget(mt, "__len") ~= nil then return #ds end
  return nil
end

function IterableDataset:__tostring()
  local n = rawget(self, "n")
  return ("IterableDataset(%s samples)"):format(n and tostring(n) or "?")
end

setmetatable(IterableDataset, { __call = function(_, ...) return IterableDataset.new(...) end })

return IterableDataset
