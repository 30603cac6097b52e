--- ember.data.WordTokenizer: one token per word.
--
--   local WordTokenizer = require "ember.data.word_tokenizer"
--   local lines = {"In the beginning was the Word.", "And the Word was with God."}
--   local tok = WordTokenizer.fit(lines, {max_size = 10000, lower = true})
--   local ids = tok:encode("In the beginning")  -- ids, 1-based; unseen words -> <unk>
--   print(tok:decode(ids))                      --> in the beginning
--   local path = os.tmpname()
--   tok:save(path); tok = WordTokenizer.load(path); os.remove(path)
--
-- Words are whitespace-separated; with split_punct (default true) each
-- punctuation mark is a word of its own. lower (default false) lower-cases
-- UTF-8 text first. Both settings are saved with the vocab.
-- @classmod data.WordTokenizer
local error = require("ember._errors").error -- raises at the user's line
local Vocab = require "ember.data.vocab"
local text = require "ember.data.text"
local padding = require "ember.data.padding"
local check_opts = Vocab.check_opts -- an unknown option is an error (torchtext's min_freq)

local WordTokenizer = {}
WordTokenizer.__index = WordTokenizer

local function new(vocab, lower, split_punct)
  return setmetatable({vocab = vocab, lower = lower, split_punct = split_punct}, WordTokenizer)
end

local function kind(lower, split_punct)
  return ("word:lower=%s:punct=%s"):format(tostring(lower), tostring(split_punct))
end

--- The words of s as this tokenizer splits them (lowercased, punctuation split, as fitted).
-- @tparam string s
function WordTokenizer:words(s)
  if self.lower then s = text.lower(s) end
  return text.words(s, self.split_punct)
end

--- A vocab of the most frequent words of texts (a list of strings, or one
-- string; ties broken by the word, so the ids do not depend on hash
-- order). opts: max_size (all),
-- min_count (1), lower (false), split_punct (true), specials.
function WordTokenizer.fit(texts, opts)
  texts = text.texts("WordTokenizer.fit", texts)
  opts = check_opts("WordTokenizer.fit", opts,
    {max_size = true, min_count = true, lower = true, split_punct = true, specials = true})
  local split = opts.split_punct ~= false
  local probe = new(nil, opts.lower or false, split)
  local counts = {}
  for _, s in ipairs(texts) do
    for _, w in ipairs(probe:words(s)) do counts[w] = (counts[w] or 0) + 1 end
  end
  local words = {}
  for w, n in pairs(counts) do
    if n >= (opts.min_count or 1) then words[#words + 1] = w end
  end
  table.sort(words, function(a, b)
    if counts[a] ~= counts[b] then return counts[a] > counts[b] end
    return a < b
  end)
  if opts.max_size and #words > opts.max_size then
    for i = #words, opts.max_size + 1, -1 do words[i] = nil end
  end
  local vocab = Vocab.new{tokens = words, specials = opts.specials,
                          kind = kind(probe.lower, split)}
  return new(vocab, probe.lower, split)
end

--- A tokenizer saved with :save.
-- @tparam string path
function WordTokenizer.load(path)
  local vocab = Vocab.load(path)
  local lower, punct = vocab.kind:match("^word:lower=(%a+):punct=(%a+)$")
  if not lower then
    error(("WordTokenizer.load: %s holds a '%s' vocab, not a word vocab"):format(path, vocab.kind), 2)
  end
  return new(vocab, lower == "true", punct == "true")
end

--- Writes the vocabulary (and the split settings) to a file.
-- @tparam string path
function WordTokenizer:save(path) self.vocab:save(path) end
--- The vocabulary size (specials included); `#tok` too, as Hugging Face's len(tokenizer)
-- (nn.Embedding(#tok, d)).
function WordTokenizer:size() return self.vocab:size() end
WordTokenizer.__len = WordTokenizer.size

--- The ids of s's words as a Lua list; opts.bos / opts.eos add those tokens.
-- @tparam string s
-- @param[opt] opts `{bos=, eos=}`
function WordTokenizer:encode(s, opts)
  Vocab.check_encode("WordTokenizer", s, opts, self.vocab)
  local v, ids = self.vocab, {}
  if opts and opts.bos then ids[1] = v.bos_id end
  for _, w in ipairs(self:words(s)) do ids[#ids + 1] = v:id(w) end
  if opts and opts.eos then ids[#ids + 1] = v.eos_id end
  return ids
end

--- The text of ids (a list or a tensor), specials left out unless keep_specials.
-- @param ids
-- @tparam[opt=false] boolean keep_specials
function WordTokenizer:decode(ids, keep_specials)
  ids = Vocab.id_list("WordTokenizer", ids)
  local v, out = self.vocab, {}
  for _, id in ipairs(ids) do
    if keep_specials or not v:is_special(id) then out[#out + 1] = v:token(id) end
  end
  return table.concat(out, " ")
end

--- ids int64 [B, L] padded with <pad>, mask bool [B, L] (true = padding);
-- opts as encode, plus max_len, padding_side ("right" or "left"), padding
-- and truncation, as CharTokenizer:encode_batch.
function WordTokenizer:encode_batch(texts, opts)
  return padding.encode_batch(self, "WordTokenizer", texts, opts)
end

function WordTokenizer:__tostring()
  return ("WordTokenizer(%d tokens)"):format(self.vocab:size())
end

return WordTokenizer
