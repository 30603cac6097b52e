--- ember.data.vocab: a token <-> id table with special tokens, saved as text.
--
-- Ids are 1-based, as every index in ember's Lua API. The special tokens
-- come first, in the order given (default <pad>=1, <unk>=2, <bos>=3,
-- <eos>=4), then the ordinary tokens. Unknown tokens map to <unk>.
--
-- File format (UTF-8 text): a first line "ember-vocab 1 <kind>", then one
-- token per line in id order, with "\\", "\n", "\r" and "\t" escaped, so
-- that any token (even a newline character) survives a round trip.
-- @classmod data.Vocab
local error = require("ember._errors").error -- raises at the user's line
local Vocab = {}
Vocab.__index = Vocab

Vocab.DEFAULT_SPECIALS = {"<pad>", "<unk>", "<bos>", "<eos>"}

--- Vocab.new{tokens = {...}, specials = {...}, kind = "char"}
-- Duplicates in tokens are an error (a vocab is a bijection).
function Vocab.new(opts)
  opts = opts or {}
  local self = setmetatable({tokens = {}, ids = {}, kind = opts.kind or "token"}, Vocab)
  local specials = opts.specials or Vocab.DEFAULT_SPECIALS
  self.specials = {}
  for _, s in ipairs(specials) do
    self:_add(s)
    self.specials[s] = true
  end
  for _, t in ipairs(opts.tokens or {}) do self:_add(t) end
  self.pad_id = self.ids["<pad>"]
  self.unk_id = self.ids["<unk>"]
  self.bos_id = self.ids["<bos>"]
  self.eos_id = self.ids["<eos>"]
  return self
end

function Vocab:_add(tok)
  if type(tok) ~= "string" then
    error(("Vocab: tokens must be strings, got %s"):format(type(tok)), 3)
  end
  if self.ids[tok] then error(("Vocab: duplicate token %q"):format(tok), 3) end
  local id = #self.tokens + 1
  self.tokens[id] = tok
  self.ids[tok] = id
end

--- Number of tokens, specials included.
function Vocab:size() return #self.tokens end
Vocab.__len = Vocab.size

--- The id of tok; unknown tokens give <unk> (an error when there is none).
function Vocab:id(tok)
  local id = self.ids[tok]
  if id then return id end
  if self.unk_id then return self.unk_id end
  error(("Vocab: unknown token %q and the vocab has no <unk>"):format(tok), 2)
end

--- The token of a 1-based id.
function Vocab:token(id)
  local t = self.tokens[id]
  if not t then
    error(("Vocab: id %s out of range [1, %d]"):format(tostring(id), #self.tokens), 2)
  end
  return t
end

-- The tokenizers' shared checks (CharTokenizer, WordTokenizer), raised at
-- the user's line naming `who` ("CharTokenizer.encode").

--- Checks an options table of ember.data (the tokenizers', the samplers'):
-- an option it does not know (torchtext's min_freq for min_count, a typo)
-- is an error naming `who` and the known ones (nn.Module.check_options's
-- rule and message), not an option silently left out. Returns opts, or {}
-- for nil.
-- @tparam string who "CharTokenizer.fit"
-- @param[opt] opts
-- @tparam table known name -> true
function Vocab.check_opts(who, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then require("ember._errors").raise("%s: options must be a table, got %s", who, type(opts)) end
  local names = {}
  for n in pairs(known) do names[#names + 1] = n end
  return require("ember.nn.Module").check_options(who, opts, names)
end

--- Checks encode's text and options ({bos =, eos =}; the vocab must hold the
-- tokens asked for).
-- @tparam string who the tokenizer's name
-- @param s the text
-- @param[opt] opts
-- @tparam[opt] Vocab vocab the tokenizer's
function Vocab.check_encode(who, s, opts, vocab)
  local raise = require("ember._errors").raise
  if type(s) ~= "string" then raise("%s.encode: the text must be a string, got %s", who, type(s)) end
  if opts == nil then return end
  if type(opts) ~= "table" then raise("%s.encode: options must be a table {bos =, eos =}, got %s", who, type(opts)) end
  for k in pairs(opts) do
    if k ~= "bos" and k ~= "eos" then raise("%s.encode: unknown option '%s' (options: bos, eos)", who, tostring(k)) end
  end
  for _, k in ipairs { "bos", "eos" } do -- a vocab without the token left it out without a word
    if opts[k] and vocab and vocab[k .. "_id"] == nil then
      raise("%s.encode: %s = true, but the vocabulary has no \"<%s>\" token (fit with specials that include it)",
        who, k, k)
    end
  end
end

--- decode's ids as a Lua list: a list of ids or a 1-D tensor (a batch [B, L]
-- is refused naming `who`: decode each row).
-- @tparam string who the tokenizer's name
-- @param ids
function Vocab.id_list(who, ids)
  local raise = require("ember._errors").raise
  local mt = getmetatable(ids)
  if mt ~= nil and mt.__name == "ember.Tensor" then
    if ids:dim() ~= 1 then
      raise("%s.decode: ids must be a list of ids or a 1-D tensor, got a %d-D tensor [%s] (a batch: decode "
        .. "each row, ids[i])", who, ids:dim(), table.concat(ids.shape, ", "))
    end
    return ids:totable()
  end
  if type(ids) ~= "table" then raise("%s.decode: ids must be a list of ids or a 1-D tensor, got %s", who, type(ids)) end
  for i, id in ipairs(ids) do
    if math.type(id) ~= "integer" and not (type(id) == "number" and id == math.floor(id)) then
      raise("%s.decode: id %d is %s, not an integer%s", who, i, tostring(id),
        type(id) == "table" and " (a batch: decode each row)" or "")
    end
  end
  return ids
end

--- Is id one of the special tokens (pad, unk, bos, eos)?
-- @tparam integer id
function Vocab:is_special(id) return self.specials[self.tokens[id]] == true end

local ESC = {["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}
local UNESC = {["\\"] = "\\", n = "\n", r = "\r", t = "\t"}

--- Writes the vocab to path (atomically: a temporary file, then rename).
function Vocab:save(path)
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then error("Vocab:save: " .. err, 2) end
  local n_special = 0
  for _, t in ipairs(self.tokens) do if self.specials[t] then n_special = n_special + 1 end end
  f:write(("ember-vocab 1 %s %d\n"):format(self.kind, n_special))
  for _, t in ipairs(self.tokens) do f:write((t:gsub("[\\\n\r\t]", ESC)), "\n") end
  f:close()
  local ok, rerr = os.rename(tmp, path)
  if not ok then error("Vocab:save: " .. rerr, 2) end
end

--- Reads a vocab written by Vocab:save. The first n_special tokens are the
-- special ones.
function Vocab.load(path)
  local f, err = io.open(path, "rb")
  if not f then error("Vocab.load: " .. err, 2) end
  local header = f:read("l")
  local kind, n_special = (header or ""):match("^ember%-vocab 1 (%S+) (%d+)$")
  if not kind then
    f:close()
    error(("Vocab.load: %s is not an ember vocab file (first line %q)"):format(path, header or ""), 2)
  end
  local tokens = {}
  for line in f:lines() do
    local tok = line:gsub("\\(.)", function(c)
      local u = UNESC[c]
      if not u then error(("Vocab.load: %s: bad escape \\%s"):format(path, c), 0) end
      return u
    end)
    tokens[#tokens + 1] = tok
  end
  f:close()
  n_special = tonumber(n_special)
  if n_special > #tokens then
    error(("Vocab.load: %s says %d special tokens but holds %d tokens"):format(path, n_special, #tokens), 2)
  end
  local specials, rest = {}, {}
  for i, t in ipairs(tokens) do
    if i <= n_special then specials[i] = t else rest[#rest + 1] = t end
  end
  return Vocab.new{tokens = rest, specials = specials, kind = kind}
end

function Vocab:__tostring()
  return ("Vocab(%s, %d tokens)"):format(self.kind, #self.tokens)
end

return Vocab
