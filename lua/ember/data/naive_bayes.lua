--- ember.data.naive_bayes: a character n-gram multinomial Naive Bayes text
-- classifier, the classic baseline for language identification. Each
-- string is wrapped in word-boundary markers ("^word$") and counted as its
-- 1..n-grams of characters; add-alpha smoothing.
--
--   local naive_bayes = require "ember.data.naive_bayes"
--   local words, labels = {"wort", "word", "mot", "parola", "palabra"}, {1, 2, 3, 4, 5}
--   local test_words, test_labels = {"wörter", "words"}, {1, 2}
--   local nb = naive_bayes.train(words, labels, {n = 3, alpha = 0.5, classes = 5})
--   nb:predict("wörterbuch")     -- a 1-based class
--   nb:accuracy(test_words, test_labels)
-- @classmod data.naive_bayes
local text = require "ember.data.text"

local NB = {}
NB.__index = NB

local function features(s, n)
  local ch = text.chars("^" .. s .. "$")
  local out = {}
  for i = 1, #ch do
    local g = ch[i]
    out[#out + 1] = g
    for k = 1, n - 1 do
      if i + k > #ch then break end
      g = g .. ch[i + k]
      out[#out + 1] = g
    end
  end
  return out
end
NB.features = features

--- texts, labels: parallel lists; labels 1..classes. A class with no
-- text among them (`classes` may name more) is never predicted.
function NB.train(texts, labels, opts)
  opts = opts or {}
  if #texts == 0 or #texts ~= #labels then
    error(("data.naive_bayes.train: needs texts and as many labels, got %d texts and %d labels"):format(#texts,
      #labels), 2)
  end
  local self = setmetatable({n = opts.n or 3, alpha = opts.alpha or 0.5, classes = opts.classes}, NB)
  local C = self.classes or 0
  if not self.classes then for _, y in ipairs(labels) do if y > C then C = y end end end
  self.classes = C
  local counts, totals, docs, vocab, V = {}, {}, {}, {}, 0
  for c = 1, C do counts[c], totals[c], docs[c] = {}, 0, 0 end
  for i, s in ipairs(texts) do
    local c = labels[i]
    docs[c] = docs[c] + 1
    local cc = counts[c]
    for _, f in ipairs(features(s, self.n)) do
      cc[f] = (cc[f] or 0) + 1
      totals[c] = totals[c] + 1
      if not vocab[f] then vocab[f] = true V = V + 1 end
    end
  end
  self.counts, self.log_prior, self.log_denom = counts, {}, {}
  for c = 1, C do
    -- a class with no training text has no evidence at all: it is never
    -- predicted (scikit-learn's MultinomialNB knows only the classes it saw)
    self.log_prior[c] = docs[c] > 0 and math.log((docs[c] + 1) / (#texts + C)) or -math.huge
    self.log_denom[c] = math.log(totals[c] + self.alpha * V)
  end
  return self
end

--- The log score of each class for s (a list); -math.huge for a class
-- that had no training text.
function NB:scores(s)
  local f = features(s, self.n)
  local out = {}
  for c = 1, self.classes do
    local cc, a, sc = self.counts[c], self.alpha, self.log_prior[c] - #f * self.log_denom[c]
    for _, g in ipairs(f) do sc = sc + math.log((cc[g] or 0) + a) end
    out[c] = sc
  end
  return out
end

--- The most likely label of s, among the classes seen in training.
-- @tparam string s
function NB:predict(s)
  local sc, best = self:scores(s), 1
  for c = 2, #sc do if sc[c] > sc[best] then best = c end end
  return best
end

--- The fraction of texts whose predicted label is right.
-- @tparam table texts
-- @tparam table labels
function NB:accuracy(texts, labels)
  local ok = 0
  for i, s in ipairs(texts) do if self:predict(s) == labels[i] then ok = ok + 1 end end
  return ok / #texts
end

return NB
