-- nn/_packed.lua (internal): torch.nn.utils.rnn's PackedSequence,
-- pack_padded_sequence and pad_packed_sequence, exported by nn/utils.lua as
-- nn.utils.rnn.*; nn/_rnn.lua runs nn.RNN / LSTM / GRU over a PackedSequence.
--
-- A PackedSequence here keeps the padded batch time-major ([L, N, *], L the
-- longest length) and the lengths, in the caller's batch order: the RNN
-- masks each sequence's steps past its length, which gives PyTorch's packed
-- results (each direction starts and ends on a sequence's own valid steps;
-- h_n is the state after the last valid step, in the batch's order). Its
-- fields as PyTorch's: data ([sum(lengths), *], the valid steps time-major
-- with the batch sorted by decreasing length), batch_sizes (int64, the
-- sequences still running at each step), sorted_indices and unsorted_indices
-- (int64, 1-based; nil when enforce_sorted).
local raise = require("ember._errors").raise -- at the user's line
local ember = require "ember.nn._ember"
local core = require "ember.core"

local M = {}

local PackedSequence = {}
PackedSequence.__name = "PackedSequence"
M.PackedSequence = PackedSequence

local FIELDS = { data = true, batch_sizes = true, sorted_indices = true, unsorted_indices = true }

-- The order of the batch by decreasing length (stable), 1-based.
local function sorted_order(lengths)
  local order = {}
  for i = 1, #lengths do order[i] = i end
  table.sort(order, function(a, b)
    if lengths[a] ~= lengths[b] then return lengths[a] > lengths[b] end
    return a < b
  end)
  return order
end

-- PyTorch's fields, built on first use (data is differentiable).
PackedSequence.__index = function(self, k)
  if not FIELDS[k] then return rawget(PackedSequence, k) end
  local lengths, padded = self._lengths, self._padded
  local order = sorted_order(lengths)
  local L, N = padded:size(1), padded:size(2)
  local idx, sizes = {}, {}
  for t = 1, L do
    sizes[t] = 0
    for _, b in ipairs(order) do
      if lengths[b] >= t then
        idx[#idx + 1] = (t - 1) * N + b
        sizes[t] = sizes[t] + 1
      end
    end
  end
  local shape = { L * N }
  for d = 3, padded:dim() do shape[#shape + 1] = padded:size(d) end
  local inv = {}
  for i, b in ipairs(order) do inv[b] = i end
  local i64 = { dtype = "int64", device = padded.device }
  rawset(self, "data", padded:reshape(shape):index_select(1, core.tensor(idx, i64)))
  rawset(self, "batch_sizes", core.tensor(sizes, { dtype = "int64" }))
  if not self._sorted then
    rawset(self, "sorted_indices", core.tensor(order, i64))
    rawset(self, "unsorted_indices", core.tensor(inv, i64))
  end
  return rawget(self, k)
end

function PackedSequence:__tostring()
  return ("PackedSequence(lengths={%s}, max_length=%d, batch=%d)"):format(table.concat(self._lengths, ", "),
    self._padded:size(1), self._padded:size(2))
end

-- Whether v is a PackedSequence.
function M.is_packed(v) return getmetatable(v) == PackedSequence end

-- A PackedSequence of a time-major padded batch [L, N, *] whose length is
-- the longest of `lengths` (a list of integers, in the batch's order).
function M.new(padded, lengths, sorted)
  return setmetatable({ _padded = padded, _lengths = lengths, _sorted = sorted }, PackedSequence)
end

-- lengths as a Lua list of integers: a tensor of integers or a list.
local function lengths_list(op, lengths, n, L)
  local list
  if core.is_tensor(lengths) then
    if lengths:dim() ~= 1 then
      raise("%s: lengths must be 1-d (one length per sequence), got %d-d", op, lengths:dim())
    end
    list = lengths:to("cpu"):totable()
  elseif type(lengths) == "table" then
    list = lengths
  else
    raise("%s: lengths must be a tensor or a list of integers, got %s", op, type(lengths))
  end
  if #list ~= n then
    raise("%s: expected %d lengths (one per sequence of the batch), got %d", op, n, #list)
  end
  local out = {}
  for i, v in ipairs(list) do
    if type(v) ~= "number" or v ~= math.floor(v) then
      raise("%s: length %d is %s, not an integer", op, i, tostring(v))
    end
    v = math.tointeger(v)
    if v < 1 then
      raise("%s: length %d is %d: every sequence needs at least one step (PyTorch refuses 0 too)", op, i, v)
    end
    if v > L then raise("%s: length %d is %d, longer than the input's %d steps", op, i, v, L) end
    out[i] = v
  end
  return out
end

local function options(op, opts, positional, names)
  if type(opts) == "boolean" then opts = { [names[1]] = opts, [names[2]] = positional } end
  opts = opts or {}
  if type(opts) ~= "table" then raise("%s: options must be a table, got %s", op, type(opts)) end
  local known = {}
  for _, n in ipairs(names) do known[n] = true end
  for k in pairs(opts) do
    if not known[k] then raise("%s: unknown option '%s' (options are %s)", op, tostring(k), table.concat(names, ", ")) end
  end
  return opts
end

-- torch.nn.utils.rnn.pack_padded_sequence (documented in nn/utils.lua).
function M.pack_padded_sequence(input, lengths, opts, enforce_sorted)
  local op = "nn.utils.rnn.pack_padded_sequence"
  opts = options(op, opts, enforce_sorted, { "batch_first", "enforce_sorted" })
  if not core.is_tensor(input) then raise("%s: input must be a tensor, got %s", op, type(input)) end
  if input:dim() < 2 then
    raise("%s: input must be at least 2-d ([L, N, *], or [N, L, *] with batch_first), got %d-d", op, input:dim())
  end
  local x = opts.batch_first and input:transpose(1, 2) or input
  local L, N = x:size(1), x:size(2)
  local list = lengths_list(op, lengths, N, L)
  local sorted = opts.enforce_sorted ~= false
  if sorted then
    for i = 2, N do
      if list[i] > list[i - 1] then
        raise("%s: lengths must be sorted in decreasing order when enforce_sorted is true (length %d is %d after %d); "
          .. "pass {enforce_sorted = false} for any order", op, i, list[i], list[i - 1])
      end
    end
  end
  local longest = 0
  for _, v in ipairs(list) do longest = math.max(longest, v) end
  if longest < L then x = x:narrow(1, 1, longest) end
  return M.new(x, list, sorted)
end

-- torch.nn.utils.rnn.pad_packed_sequence (documented in nn/utils.lua).
function M.pad_packed_sequence(sequence, opts, padding_value, total_length)
  local op = "nn.utils.rnn.pad_packed_sequence"
  if type(opts) == "boolean" then
    opts = { batch_first = opts, padding_value = padding_value, total_length = total_length }
  end
  opts = options(op, opts, nil, { "batch_first", "padding_value", "total_length" })
  if not M.is_packed(sequence) then
    raise("%s: expected a PackedSequence (from pack_padded_sequence or an RNN), got %s", op,
      core.is_tensor(sequence) and "a tensor" or type(sequence))
  end
  local x, lengths = sequence._padded, sequence._lengths
  local L, N = x:size(1), x:size(2)
  local value = opts.padding_value or 0
  if type(value) ~= "number" then raise("%s: padding_value must be a number, got %s", op, type(value)) end
  local keep = ember.arange(1, L + 1, "int64"):view(L, 1)
    :le(core.tensor(lengths, { dtype = "int64" }):view(1, N))
  local shape = { L, N }
  for d = 3, x:dim() do shape[d] = 1 end
  keep = keep:view(shape):to(x.device)
  x = ember.where(keep, x, value)
  local total = opts.total_length
  if total ~= nil then
    if math.type(total) ~= "integer" then raise("%s: total_length must be an integer, got %s", op, tostring(total)) end
    if total < L then
      raise("%s: total_length is %d, shorter than the longest sequence (%d steps)", op, total, L)
    end
    if total > L then
      local pad = { total - L }
      for d = 2, x:dim() do pad[d] = x:size(d) end
      x = ember.cat({ x, core.full(pad, value, { dtype = x.dtype, device = x.device }) }, 1)
    end
  end
  if opts.batch_first then x = x:transpose(1, 2) end
  return x, core.tensor(lengths, { dtype = "int64" })
end

return M
