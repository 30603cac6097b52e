--- ember.data.padding: variable-length id lists as one padded tensor plus
-- the key-padding mask that attention wants (bool [B, L], true = padding,
-- the convention of ember's attention and of PyTorch's key_padding_mask).
-- @module data.padding
local M = {}

local function ember() return require "ember" end

--- lists: a list of Lua lists of 1-based ids. Pads every item with pad_id
-- to the longest one (at least 1 column); items longer than max_len are cut
-- (their first max_len ids kept).
-- The third argument is max_len, or a table `{max_len =, side = "right",
-- padding = "longest", truncation = true}`: side "left" puts the padding
-- before the ids (Hugging Face's padding_side = "left"), as a batch of
-- prompts for ember.generate wants it, each row continuing from its last
-- id; padding = "max_length" pads every item to max_len columns (Hugging
-- Face's; "longest" or true: to the longest item); truncation = false
-- leaves items longer than max_len whole (an error with "max_length").
-- Returns ids int64 [B, L], mask bool [B, L], lengths int64 [B].
-- @usage local ids, mask = ember.data.pad({{5, 6, 7}, {8}}, 1, {side = "left"})
-- print(table.concat(ids[2]:totable(), " "))            --> 1 1 8
-- print(mask[2][1]:item(), mask[2][3]:item())          --> true	false
function M.pad(lists, pad_id, max_len)
  local raise = require("ember._errors").raise -- at the user's line
  if type(lists) ~= "table" then raise("data.pad: lists must be a list of id lists, got %s", type(lists)) end
  if type(pad_id) ~= "number" then raise("data.pad: pad_id must be a number, got %s", type(pad_id)) end
  local side, to_max, truncation = "right", false, true
  if type(max_len) == "table" then
    local o = max_len
    for k in pairs(o) do
      if k ~= "max_len" and k ~= "side" and k ~= "padding" and k ~= "truncation" then
        raise("data.pad: unknown option '%s' (options: max_len, side, padding, truncation)", tostring(k))
      end
    end
    max_len, side = o.max_len, o.side or "right"
    if side ~= "right" and side ~= "left" then
      raise("data.pad: side must be \"right\" or \"left\", got %s", tostring(side))
    end
    if o.padding ~= nil and o.padding ~= true and o.padding ~= "longest" and o.padding ~= "max_length" then
      raise("data.pad: padding must be \"longest\" (or true) or \"max_length\", got %s", tostring(o.padding))
    end
    to_max = o.padding == "max_length"
    if o.truncation ~= nil and type(o.truncation) ~= "boolean" then
      raise("data.pad: truncation must be a boolean, got %s", tostring(o.truncation))
    end
    if o.truncation == false then truncation = false end
    if to_max and max_len == nil then raise("data.pad: padding = \"max_length\" needs max_len") end
  end
  if max_len ~= nil and (math.type(max_len) ~= "integer" or max_len < 1) then
    raise("data.pad: max_len must be an integer >= 1, got %s", tostring(max_len))
  end
  local B, L = #lists, to_max and max_len or 1
  for i, ids in ipairs(lists) do
    if type(ids) ~= "table" then raise("data.pad: item %d must be a list of ids, got %s", i, type(ids)) end
    local n = #ids
    if max_len and n > max_len then
      if truncation then
        n = max_len
      elseif to_max then
        raise("data.pad: item %d has %d ids, more than max_len = %d, and truncation = false: with padding = "
          .. "\"max_length\" every item must fit", i, n, max_len)
      end
    end
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

-- A vocab's special tokens, in id order.
local function specials_of(vocab)
  local out = {}
  for _, t in ipairs(vocab.tokens) do if vocab.specials[t] then out[#out + 1] = t end end
  if #out == 0 then out[1] = "(none)" end
  return out
end

--- A tokenizer's encode_batch (CharTokenizer's and WordTokenizer's): each
-- text through tok:encode with opts' bos and eos, then padded by pad() with
-- the vocab's <pad> -- max_len, padding_side (pad's side), padding and
-- truncation as there. An option it does not know is an error naming `who`.
function M.encode_batch(tok, who, texts, opts)
  local raise = require("ember._errors").raise
  opts = opts or {}
  if type(texts) ~= "table" then raise("%s.encode_batch: texts must be a list of strings, got %s", who, type(texts)) end
  if type(opts) ~= "table" then raise("%s.encode_batch: options must be a table, got %s", who, type(opts)) end
  local known = { bos = true, eos = true, max_len = true, padding_side = true, padding = true, truncation = true }
  for k in pairs(opts) do
    if not known[k] then
      raise("%s.encode_batch: unknown option '%s' (options: bos, eos, max_len, padding, padding_side, truncation)",
        who, tostring(k))
    end
  end
  if tok.vocab.pad_id == nil then -- data.pad's "pad_id must be a number, got nil" named no token
    raise("%s.encode_batch: the vocabulary has no \"<pad>\" token to pad with (its specials are %s); fit "
      .. "with specials that include \"<pad>\"", who, table.concat(specials_of(tok.vocab), " "))
  end
  local lists, enc = {}, { bos = opts.bos, eos = opts.eos }
  for i, s in ipairs(texts) do lists[i] = tok:encode(s, enc) end
  local ok, a, b, c = pcall(M.pad, lists, tok.vocab.pad_id, { max_len = opts.max_len, side = opts.padding_side,
    padding = opts.padding, truncation = opts.truncation })
  if not ok then raise("%s.encode_batch: %s", who, (tostring(a):gsub("^[^\n]-:%d+: ", ""):gsub("^data%.pad: ", ""))) end
  return a, b, c
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
