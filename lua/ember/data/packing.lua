--- ember.data.packing: variable-length sequences packed into rows of a
-- fixed length, for training without padding waste; with the document
-- ids that the `document` attention variant (plugins/flex/document.lua)
-- reads, so no token attends across documents.
--
--    local p = ember.data.pack({{5, 6, 7}, {8, 9}, {4, 4, 4, 4}}, 6, {pad_id = 1})
--    -- p.tokens [2, 6]: {5 6 7 8 9 1}, {4 4 4 4 1 1}   (p.pad_id = 1 where a row has room)
--    -- p.doc    [2, 6]: {1 1 1 2 2 0}, {1 1 1 1 0 0}   (0: padding)
--    -- p.pos    [2, 6]: {1 2 3 1 2 1}, {1 2 3 4 1 1}   (1-based within the document; padding 1)
--    -- p.padding [2, 6]: true at the padding
--    local tok = nn.Embedding(10, 16, {padding_idx = p.pad_id})   -- ids are 1-based: a pad id >= 1
--    local pos = nn.Embedding(6, 16)
--    local mha = nn.MultiHeadAttention(16, 2, {attention = "document"})
--    local y = mha(tok(p.tokens) + pos(p.pos), {variant_inputs = {doc = p.doc}, key_padding_mask = p.padding})
--
-- Padding positions hold pad_id in tokens, 0 in doc (the document variant
-- keeps them apart) and 1 in pos, so that p.tokens and p.pos index
-- nn.Embedding tables (1-based ids) as they are; p.padding (and a loss's
-- ignore_index = p.pad_id) keeps them out of the attention and the loss.
--
-- Sequences are taken in order and a row is closed when the next one does
-- not fit; a sequence longer than a row is split over rows (each piece is a
-- document of its own: it cannot see the piece before it).
-- @module data.packing
local M = {}

local function ember() return require "ember" end

--- Packs lists of ids into rows of `len` positions.
-- @tparam table seqs a list of sequences: Lua lists of ids, or 1-D
-- int64 tensors
-- @int len positions per row
-- @tparam table opts `pad_id` (required when a row has room left), `rows`
-- (pad to at least this many rows)
-- @treturn table `tokens`, `doc`, `pos` (int64 [B, len]; at padding:
-- pad_id, 0 and 1), `padding` (bool [B, len], true = padding, as
-- key_padding_mask), `lengths` (int64 [B]: the used positions of each row),
-- `pad_id` (the option, for nn.Embedding's padding_idx and a loss's
-- ignore_index)
-- @usage local p = ember.data.pack({{5, 6, 7}, {8, 9}}, 4, {pad_id = 1})
-- local emb = nn.Embedding(10, 8, {padding_idx = p.pad_id})
-- local pos = nn.Embedding(4, 8)
-- print(p.pos:totable()[2][3], (emb(p.tokens) + pos(p.pos)).shape)   --> 1	ember.Size{2, 4, 8}
function M.pack(seqs, len, opts)
  opts = opts or {}
  local errors = require "ember._errors"
  if type(seqs) ~= "table" then
    errors.raise("data.pack: expected a list of sequences (id lists or 1-D int64 tensors), got %s%s", type(seqs),
      ember().is_tensor(seqs) and " (a tensor: give a list of 1-D tensors, e.g. t:unbind(1))" or "")
  end
  if math.type(len) ~= "integer" or len < 1 then
    errors.raise("data.pack: the row length must be a positive integer, got %s", tostring(len))
  end
  if type(opts) ~= "table" then errors.raise("data.pack: options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if k ~= "pad_id" and k ~= "rows" then errors.raise("data.pack: unknown option '%s' (options: pad_id, rows)", tostring(k)) end
  end
  -- (an int64 tensor would truncate a pad_id of 1.5 to 1)
  local function whole(x) return type(x) == "number" and math.tointeger(x) ~= nil end
  local function shown(x) return type(x) == "string" and ("%q"):format(x) or tostring(x) end
  if opts.pad_id ~= nil and not whole(opts.pad_id) then
    errors.raise("data.pack: pad_id must be an integer token id, got %s", shown(opts.pad_id))
  end
  if opts.rows ~= nil and not (whole(opts.rows) and opts.rows >= 0) then
    errors.raise("data.pack: rows must be an integer >= 0 (pad to at least this many rows), got %s", shown(opts.rows))
  end
  local rows = {}
  local cur = nil
  local function new_row()
    cur = { tokens = {}, doc = {}, pos = {}, ndoc = 0 }
    rows[#rows + 1] = cur
  end
  for i, s in ipairs(seqs) do
    if ember().is_tensor(s) then
      if s:dim() ~= 1 or s.dtype ~= "int64" then
        errors.raise("data.pack: sequence %d must be a 1-D int64 tensor, got %s of shape [%s]", i,
          s.dtype, table.concat(s.shape, ", "))
      end
      s = s:totable()
    end
    if type(s) ~= "table" then errors.raise("data.pack: sequence %d must be a list of ids or a 1-D int64 tensor, got %s", i, type(s)) end
    local n, at = #s, 1
    if n > 0 and (not cur or #cur.tokens + math.min(n, len) > len) then new_row() end
    while at <= n do
      if #cur.tokens == len then new_row() end
      local take = math.min(n - at + 1, len - #cur.tokens)
      cur.ndoc = cur.ndoc + 1
      for j = 0, take - 1 do
        local id = s[at + j]
        if math.type(id) ~= "integer" then
          errors.raise("data.pack: sequence %d has a non-integer id at %d (%s)", i, at + j, tostring(id))
        end
        cur.tokens[#cur.tokens + 1], cur.doc[#cur.doc + 1], cur.pos[#cur.pos + 1] = id, cur.ndoc, j + 1
      end
      at = at + take
    end
  end
  while #rows < (opts.rows or 1) do new_row() end
  local tokens, doc, pos, pad, lengths = {}, {}, {}, {}, {}
  for b, r in ipairs(rows) do
    lengths[b] = #r.tokens
    if #r.tokens < len and opts.pad_id == nil then
      errors.raise("data.pack: row %d has %d free positions: give pad_id", b, len - #r.tokens)
    end
    tokens[b], doc[b], pos[b], pad[b] = {}, {}, {}, {}
    for j = 1, len do
      local used = j <= #r.tokens
      tokens[b][j] = used and r.tokens[j] or opts.pad_id
      doc[b][j] = used and r.doc[j] or 0
      pos[b][j] = used and r.pos[j] or 1 -- a position an nn.Embedding takes; the padding mask hides it
      pad[b][j] = not used
    end
  end
  local e = ember()
  local i64 = { dtype = "int64" }
  return { tokens = e.tensor(tokens, i64), doc = e.tensor(doc, i64), pos = e.tensor(pos, i64),
    padding = e.tensor(pad, { dtype = "bool" }), lengths = e.tensor(lengths, i64), pad_id = opts.pad_id }
end

return M
