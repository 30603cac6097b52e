--- ember.data.padding: variable-length id lists as one padded tensor plus
-- the key-padding mask that attention wants (bool [B, L], true = padding,
-- the convention of ember's attention and of PyTorch's key_padding_mask).
-- @module data.padding
local M = {}

local function ember() return require "ember" end

--- lists: a list of Lua lists of 1-based ids. Pads every item with pad_id
-- to the longest one (at least 1 column); items longer than max_len are cut
-- (their first max_len ids kept).
-- The third argument is max_len, or a table `{max_len =, side = "right"}`:
-- side "left" puts the padding before the ids (Hugging Face's
-- padding_side = "left"), as a batch of prompts for ember.generate wants it,
-- each row continuing from its last id.
-- Returns ids int64 [B, L], mask bool [B, L], lengths int64 [B].
-- @usage local ids, mask = ember.data.pad({{5, 6, 7}, {8}}, 1, {side = "left"})
-- print(table.concat(ids[2]:totable(), " "))            --> 1 1 8
-- print(mask[2][1]:item(), mask[2][3]:item())          --> true	false
function M.pad(lists, pad_id, max_len)
  local raise = require("ember._errors").raise -- at the user's line
  if type(lists) ~= "table" then raise("data.pad: lists must be a list of id lists, got %s", type(lists)) end
  if type(pad_id) ~= "number" then raise("data.pad: pad_id must be a number, got %s", type(pad_id)) end
  local side = "right"
  if type(max_len) == "table" then
    local o = max_len
    for k in pairs(o) do
      if k ~= "max_len" and k ~= "side" then
        raise("data.pad: unknown option '%s' (options: max_len, side)", tostring(k))
      end
    end
    max_len, side = o.max_len, o.side or "right"
    if side ~= "right" and side ~= "left" then
      raise("data.pad: side must be \"right\" or \"left\", got %s", tostring(side))
    end
  end
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
    local first = side == "left" and L - n or 0 -- columns of padding before the ids
    for j = 1, L do
      k = k + 1
      local at = j - first
      if at >= 1 and at <= n then
        flat[k], mask[k] = ids[at], false
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
