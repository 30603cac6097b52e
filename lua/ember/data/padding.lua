--- ember.data.padding: variable-length id lists as one padded tensor plus
-- the key-padding mask that attention wants (bool [B, L], true = padding,
-- the convention of ember's attention and of PyTorch's key_padding_mask).
-- @module data.padding
local M = {}

local function ember() return require "ember" end

--- lists: a list of Lua lists of 1-based ids. Pads every item with pad_id
-- to the longest one (at least 1 column); items longer than max_len are cut.
-- Returns ids int64 [B, L], mask bool [B, L], lengths int64 [B].
function M.pad(lists, pad_id, max_len)
  local raise = require("ember._errors").raise -- at the user's line
  if type(lists) ~= "table" then raise("data.pad: lists must be a list of id lists, got %s", type(lists)) end
  if type(pad_id) ~= "number" then raise("data.pad: pad_id must be a number, got %s", type(pad_id)) end
  if max_len ~= nil and (math.type(max_len) ~= "integer" or max_len < 1) then
    raise("data.pad: max_len must be an integer >= 1, got %s", tostring(max_len))
  end
  local B, L = #lists, 1
  for i, ids in ipairs(lists) do
    if type(ids) ~= "table" then raise("data.pad: item %d must be a list of ids, got %s", i, type(ids)) end
    local n = #ids
    if max_len and n > max_len then n = max_len end
    if n > L then L = n end
  end
  local flat, mask, lengths = {}, {}, {}
  local k = 0
  for b = 1, B do
    local ids = lists[b]
    local n = math.min(#ids, L)
    lengths[b] = n
    for j = 1, L do
      k = k + 1
      if j <= n then
        flat[k], mask[k] = ids[j], false
      else
        flat[k], mask[k] = pad_id, true
      end
    end
  end
  local e = ember()
  if B == 0 then
    return e.zeros({0, L}, {dtype = "int64"}), e.zeros({0, L}, {dtype = "bool"}),
           e.zeros({0}, {dtype = "int64"})
  end
  return e.tensor(flat, {dtype = "int64"}):view(B, L), e.tensor(mask):view(B, L),
         e.tensor(lengths, {dtype = "int64"})
end

--- Cuts the columns that are padding in every row of a right-padded ids
-- tensor [B, L] (a batch taken from a dataset padded to its longest item).
-- Returns ids [B, L'] and mask bool [B, L'] with L' the batch's longest item.
function M.trim(ids, pad_id)
  local keep = ids:ne(pad_id):long():sum(1)           -- [L]: real tokens per column
  local L = ids:size(2)
  local last = 0
  local counts = keep:totable()
  for j = L, 1, -1 do
    if counts[j] > 0 then last = j break end
  end
  if last == 0 then last = 1 end
  if last < L then ids = ids:narrow(2, 1, last) end
  return ids, ids:eq(pad_id)
end

return M
