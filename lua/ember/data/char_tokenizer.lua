--- ember.data.CharTokenizer: one token per UTF-8 character.
--
--   local CharTokenizer = require "ember.data.char_tokenizer"
--   local words = {"wort", "wörter", "word"}
--   local tok = CharTokenizer.fit(words)             -- vocab from the training text
--   local ids = tok:encode("wörter", {bos = true})   -- {3, ...} (1-based)
--   print(tok:decode(ids))                           --> wörter
--   local x, mask = tok:encode_batch(words)          -- int64 [B, L], bool [B, L] (true = padding)
--   local path = os.tmpname()                        -- "vocab.txt", say
--   tok:save(path); tok = CharTokenizer.load(path); os.remove(path)
--
-- Characters never seen by fit map to <unk>.
-- @classmod data.CharTokenizer
local error = require("ember._errors").error -- raises at the user's line
local Vocab = require "ember.data.vocab"
local text = require "ember.data.text"
local padding = require "ember.data.padding"
local check_opts = Vocab.check_opts -- an unknown option is an error (torchtext's min_freq)

local CharTokenizer = {}
CharTokenizer.__index = CharTokenizer

local function new(vocab)
  return setmetatable({vocab = vocab}, CharTokenizer)
end

--- A tokenizer over the characters of `texts` (a list of strings, or one string), sorted by
-- code point so the ids do not depend on the order of the data.
-- opts: specials (list, default <pad> <unk> <bos> <eos>), min_count (1).
function CharTokenizer.fit(texts, opts)
  texts = text.texts("CharTokenizer.fit", texts)
  opts = check_opts("CharTokenizer.fit", opts, {specials = true, min_count = true})
  local counts = {}
  for _, s in ipairs(texts) do
    for _, ch in ipairs(text.chars(s)) do counts[ch] = (counts[ch] or 0) + 1 end
  end
  local chars = {}
  for ch, n in pairs(counts) do
    if n >= (opts.min_count or 1) then chars[#chars + 1] = ch end
  end
  table.sort(chars, function(a, b) return utf8.codepoint(a) < utf8.codepoint(b) end)
  return new(Vocab.new{tokens = chars, specials = opts.specials, kind = "char"})
end

--- A tokenizer over a fixed alphabet given as one string ("0123456789+").
function CharTokenizer.from_chars(alphabet, opts)
  opts = check_opts("CharTokenizer.from_chars", opts, {specials = true})
  return new(Vocab.new{tokens = text.chars(alphabet), specials = opts.specials, kind = "char"})
end

--- A tokenizer saved with :save.
-- @tparam string path
function CharTokenizer.load(path) return new(Vocab.load(path)) end
--- Writes the vocabulary to a file.
-- @tparam string path
function CharTokenizer:save(path) self.vocab:save(path) end
--- The vocabulary size (specials included); `#tok` too, as Hugging Face's len(tokenizer)
-- (nn.Embedding(#tok, d)).
function CharTokenizer:size() return self.vocab:size() end
CharTokenizer.__len = CharTokenizer.size

--- The ids of s as a Lua list; opts.bos / opts.eos add those tokens.
function CharTokenizer:encode(s, opts)
  Vocab.check_encode("CharTokenizer", s, opts, self.vocab)
  local v, ids = self.vocab, {}
  if opts and opts.bos then ids[1] = v.bos_id end
  for _, ch in ipairs(text.chars(s)) do ids[#ids + 1] = v:id(ch) end
  if opts and opts.eos then ids[#ids + 1] = v.eos_id end
  return ids
end

--- The text of a list of ids (or a 1-D int64 tensor); special tokens are
-- left out unless keep_specials.
function CharTokenizer:decode(ids, keep_specials)
  ids = Vocab.id_list("CharTokenizer", ids)
  local v, out = self.vocab, {}
  for _, id in ipairs(ids) do
    if keep_specials or not v:is_special(id) then out[#out + 1] = v:token(id) end
  end
  return table.concat(out)
end

--- A batch: int64 ids [B, L] padded with <pad> to the longest item, and the
-- key-padding mask bool [B, L] (true = padding). opts as encode, plus
-- max_len (items longer are cut), padding_side ("right", or "left" for
-- a batch of prompts to ember.generate, as Hugging Face's), padding
-- ("longest", or "max_length": every row max_len long) and truncation
-- (false: no item is cut), as data.pad; another option is an error.
function CharTokenizer:encode_batch(texts, opts)
  return padding.encode_batch(self, "CharTokenizer", texts, opts)
end

--- A long text as one int64 tensor [n] (e.g. a whole corpus for a language
-- model). Fast when the vocab has at most 255 tokens: every character maps
-- to one byte, and ember.from_bytes turns the bytes into ids in C.
function CharTokenizer:encode_tensor(s)
  local ember = require "ember"
  local v = self.vocab
  if v:size() <= 255 then
    local map = {}
    for id, tok in ipairs(v.tokens) do map[tok] = string.char(id) end
    local unk = v.unk_id and string.char(v.unk_id)
    local pattern = s:find("[\128-\255]") and utf8.charpattern or "."
    local bytes = s:gsub(pattern, function(ch)
      local b = map[ch] or unk
      if not b then error(("CharTokenizer: unknown character %q and no <unk>"):format(ch), 0) end
      return b
    end)
    return ember.from_bytes(bytes, {#bytes}, {dtype = "int64"})
  end
  return ember.tensor(self:encode(s), {dtype = "int64"})
end

function CharTokenizer:__tostring()
  return ("CharTokenizer(%d tokens)"):format(self.vocab:size())
end

return CharTokenizer
