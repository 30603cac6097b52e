--- ember.data.wordlists: the Debian word lists, prepared for language
-- identification of single words.
--
-- Preparation (issue 4, §7a): lower-case (UTF-8 aware); drop words with an
-- apostrophe, words shorter than 2 or longer than 20 characters, and every
-- word found in more than one list; duplicates within a list count once.
-- Split: with a fixed seed, n_train then n_test words per language.
-- @module data.wordlists
local error = require("ember._errors").error -- raises at the user's line
local source = require "ember.data.source"
local text = require "ember.data.text"

local M = {}

-- code, name, file, Debian package: in the order of the labels (1..5).
M.LANGUAGES = {
  {code = "en", name = "English", path = "/usr/share/dict/american-english", package = "wamerican"},
  {code = "fr", name = "French", path = "/usr/share/dict/french", package = "wfrench"},
  {code = "de", name = "German", path = "/usr/share/dict/ngerman", package = "wngerman"},
  {code = "es", name = "Spanish", path = "/usr/share/dict/spanish", package = "wspanish"},
  {code = "it", name = "Italian", path = "/usr/share/dict/italian", package = "witalian"},
}

--- The cleaned words of one list, in file order, recorded in `owner`
-- (word -> index of the only list holding it, or 0 when several do).
-- A word repeated within the list counts once.
function M.read_list(lang, index, owner, opts)
  opts = opts or {}
  local min_len, max_len = opts.min_len or 2, opts.max_len or 20
  local dir = os.getenv("EMBER_DICT_DIR")
  local path = dir and (dir .. "/" .. lang.path:match("[^/]+$")) or lang.path
  local f = io.open(path, "rb")
  if not f then source.missing("wordlists", path, lang.package) end
  local words = {}
  for line in f:lines() do
    local w = line:gsub("\r$", "")
    -- no apostrophe (' or ’); lines that are not UTF-8 are skipped
    if not w:find("'", 1, true) and not w:find("\226\128\153", 1, true) and utf8.len(w) then
      w = text.lower(w)
      local n = utf8.len(w)
      if n and n >= min_len and n <= max_len then
        local o = owner[w]
        if o == nil then
          owner[w] = index
          words[#words + 1] = w
        elseif o ~= index then
          owner[w] = 0
        end
      end
    end
  end
  f:close()
  return words
end

--- Loads the lists and splits them.
-- opts: n_train (10000), n_test (2000) per language, seed (0), languages
-- (default M.LANGUAGES). Returns {train = {words=, labels=}, test = {...},
-- languages = {...}, available = {count per language after cleaning}}.
-- Labels are 1-based indices into languages.
function M.load(opts)
  local ember = require "ember"
  opts = opts or {}
  local n_train, n_test = opts.n_train or 10000, opts.n_test or 2000
  local langs = opts.languages or M.LANGUAGES
  local lists, owner = {}, {}
  for i, lang in ipairs(langs) do lists[i] = M.read_list(lang, i, owner, opts) end
  -- words in more than one list are ambiguous: drop them everywhere
  local clean, available = {}, {}
  for i = 1, #langs do
    local keep = {}
    for _, w in ipairs(lists[i]) do
      if owner[w] == i then keep[#keep + 1] = w end
    end
    clean[i], available[i] = keep, #keep
  end
  local train, test = {words = {}, labels = {}}, {words = {}, labels = {}}
  -- a generator of its own: reseeding the global one reset the caller's ember.manual_seed
  local g = ember.Generator():manual_seed(opts.seed or 0)
  for i, lang in ipairs(langs) do
    local words = clean[i]
    if #words < n_train + n_test then
      error(("wordlists: %s has %d usable words, %d needed"):format(lang.name, #words, n_train + n_test), 0)
    end
    local perm = ember.randperm(#words, {generator = g}):narrow(1, 1, n_train + n_test):totable()
    for k, p in ipairs(perm) do
      local part = k <= n_train and train or test
      part.words[#part.words + 1] = words[p]
      part.labels[#part.labels + 1] = i
    end
  end
  return {train = train, test = test, languages = langs, available = available}
end

return M
