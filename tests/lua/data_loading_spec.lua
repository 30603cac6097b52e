-- ember.data as a PyTorch / Hugging Face user drives it; each case failed
-- before its fix.
-- * samplers: walked by `for i in s do` (torch's `for i in sampler`), torch's
--   positional generator, more draws without replacement than positive
--   weights refused when the sampler is made.
-- * DataLoader: a sampler's (or batch_sampler's) rows outside 1..#ds were
--   index_select's error at a library line; now DataLoader's, at the loop.
-- * fashion_mnist.load: opts.limit of -1, 2.5 or "3" failed inside the
--   library (a raw comparison error for a string) and unknown options were
--   ignored.
-- * tokenizers: encode_batch and data.pad take Hugging Face's padding =
--   "max_length" and truncation; encode / decode refuse what is not text or
--   ids; CharTokenizer.fit / WordTokenizer.fit("one text") saw no text
--   (ipairs over a string): a vocabulary of the specials only; fit(nil) was
--   a raw "attempt to index a nil value"; #tok is the vocabulary size.
local ember = require "ember"
local nn = require "ember.nn"
local data = require "ember.data"
local raises_here = require("tests.lua.helpers.parity").raises_here

local function ids(n)
  return data.TensorDataset(ember.randn(n, 2), ember.arange(1, n + 1, "int64"))
end

local exists = require("tests.lua.helpers.files").exists

describe("DataLoader's sampler rows", function()
  it("a row past the dataset is DataLoader's error at the loop's line", function()
    local loader = data.DataLoader(ids(10), { sampler = { 1, 20 } })
    raises_here(function() for _ in loader do end end, "DataLoader: the sampler gave row 20, but the dataset has rows 1..10")
    loader = data.DataLoader(ids(10), { sampler = data.SubsetRandomSampler({ 3, 11 }), batch_size = 2 })
    raises_here(function() for _ in loader do end end, "the sampler gave row 11")
    loader = data.DataLoader(ids(4), { sampler = { 0 } })
    raises_here(function() for _ in loader:iter() do end end, "the sampler gave row 0")
    loader = data.DataLoader(ids(4), { sampler = { 1.5 } })
    raises_here(function() for _ in loader do end end, "DataLoader: sampler row 1 is 1.5")
  end)
  it("a batch_sampler's batch too, and a sampler that gives no int64 tensor", function()
    local bs = { batches = function() return { ember.tensor({ 1, 2 }, { dtype = "int64" }), ember.tensor({ 9 }, { dtype = "int64" }) } end }
    local loader = data.DataLoader(ids(5), { batch_sampler = bs })
    raises_here(function() for _ in loader do end end, "DataLoader: the batch_sampler gave row 9, but the dataset has rows 1..5")
    local bad = { indices = function() return ember.tensor({ 1, 2 }) end }
    loader = data.DataLoader(ids(5), { sampler = bad })
    raises_here(function() for _ in loader do end end, "the sampler must give 1-d int64 tensors of rows, got a float32 tensor")
  end)
  it("rows in range still load, in the sampler's order", function()
    local loader = data.DataLoader(ids(6), { sampler = { 6, 1, 3 }, batch_size = 2 })
    local got = {}
    for b in loader do for _, v in ipairs(b[2]:totable()) do got[#got + 1] = v end end
    assert.are.same({ 6, 1, 3 }, got)
  end)
end)

describe("fashion_mnist.load's options", function()
  it("limit must be an integer >= 0, at the user's line", function()
    raises_here(function() data.fashion_mnist.load("test", { limit = -1 }) end, "fashion_mnist.load: limit must be an integer >= 0, got -1")
    raises_here(function() data.fashion_mnist.load("test", { limit = 2.5 }) end, "got 2.5")
    raises_here(function() data.fashion_mnist.load("test", { limit = "3" }) end, "got 3")
    raises_here(function() data.fashion_mnist.load("test", { limt = 3 }) end, "fashion_mnist.load: unknown option 'limt'")
    raises_here(function() data.fashion_mnist.load("test", 3) end, "options must be a table")
  end)
  ;(exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") and it or pending)(
    "limit = 0 gives empty tensors, limit = 3 three rows", function()
    local x, y = data.fashion_mnist.load("test", { limit = 0 })
    assert.are.same({ 0, 28, 28 }, x.shape)
    assert.are.same({ 0 }, y.shape)
    x, y = data.fashion_mnist.load("test", { limit = 3 })
    assert.are.same({ 3, 28, 28 }, x.shape)
    assert.are.equal("int64", y.dtype)
  end)
end)

describe("data samplers as torch's", function()
  local data = require "ember.data"

  -- torch: `for i in sampler:` / list(sampler). ember's samplers had only
  -- s:iter(), and `for i in s do` failed inside Lua with "attempt to call a
  -- data.SequentialSampler value".
  it("are walked by `for i in s do` (BatchSampler: `for rows in bs do`)", function()
    local got = {}
    for i in data.SequentialSampler(4) do got[#got + 1] = i end
    assert.are.same({ 1, 2, 3, 4 }, got)
    local seen = {}
    for i in data.RandomSampler(5, { generator = ember.Generator():manual_seed(1) }) do seen[#seen + 1] = i end
    table.sort(seen)
    assert.are.same({ 1, 2, 3, 4, 5 }, seen)
    local sizes = {}
    for rows in data.BatchSampler(data.SequentialSampler(5), 2, false) do sizes[#sizes + 1] = #rows end
    assert.are.same({ 2, 2, 1 }, sizes)
    -- a loop broken off and started again begins a new epoch
    local s = data.SequentialSampler(3)
    for _ in s do break end
    got = {}
    for i in s do got[#got + 1] = i end
    assert.are.same({ 1, 2, 3 }, got)
    -- repeated rows (draws with replacement) go on too
    got = {}
    for i in data.WeightedRandomSampler({ 0, 1 }, 4) do got[#got + 1] = i end
    assert.are.same({ 2, 2, 2, 2 }, got)
    raises_here(function() for _ in s do for _ in s do end end end, "nest loops with `for i in s:iter() do`")
  end)

  -- torch's positional generator: WeightedRandomSampler(w, n, True, g) was
  -- refused as "unknown option '_state'" (the generator read as an options
  -- table), SubsetRandomSampler(idx, g) the same; RandomSampler(ds, True, 8)
  -- as "options must be a table".
  it("take torch's positional generator (and RandomSampler's replacement, num_samples)", function()
    local function rows(s) return s:indices():totable() end
    local a = rows(data.WeightedRandomSampler({ 1, 2, 3 }, 6, true, ember.Generator():manual_seed(5)))
    local b = rows(data.WeightedRandomSampler({ 1, 2, 3 }, 6, { generator = ember.Generator():manual_seed(5) }))
    assert.are.same(b, a)
    a = rows(data.SubsetRandomSampler({ 2, 4, 6, 8 }, ember.Generator():manual_seed(7)))
    b = rows(data.SubsetRandomSampler({ 2, 4, 6, 8 }, { generator = ember.Generator():manual_seed(7) }))
    assert.are.same(b, a)
    local r = data.RandomSampler(5, true, 8, ember.Generator():manual_seed(2))
    assert.are.equal(8, #r)
    assert.are.same(rows(data.RandomSampler(5, { replacement = true, num_samples = 8,
      generator = ember.Generator():manual_seed(2) })), rows(r))
    raises_here(function() data.RandomSampler(5, { replacement = true }, 8) end, "RandomSampler: give the options")
  end)

  -- without replacement, more draws than positive weights failed at the
  -- first loop naming ember.multinomial; now when the sampler is made
  it("refuse more draws without replacement than positive weights, naming the sampler", function()
    raises_here(function() data.WeightedRandomSampler({ 0.1, 0.9, 0, 0 }, 3, false) end,
      "WeightedRandomSampler: cannot draw 3 rows without replacement: only 2 weights are positive")
    assert.are.equal(2, #data.WeightedRandomSampler({ 0.1, 0.9, 0, 0 }, 2, false):indices():totable())
  end)
end)

describe("encode_batch and data.pad as Hugging Face's tokenizers", function()
  local data = require "ember.data"

  -- encode_batch read only bos, eos, max_len and padding_side: Hugging
  -- Face's padding = "max_length", truncation = false, or a misspelt
  -- max_length were ignored without a word (rows padded to the longest,
  -- and cut at max_len whatever truncation said).
  it("take padding = \"max_length\" and truncation, and refuse other options", function()
    local tok = data.CharTokenizer.fit({ "hello world", "abc" })
    local pad = tok.vocab.pad_id
    local ids, mask = tok:encode_batch({ "abc", "hello" }, { max_len = 8, padding = "max_length" })
    assert.are.same({ 2, 8 }, ids.shape)
    assert.are.same({ false, false, false, true, true, true, true, true }, mask:totable()[1])
    assert.are.equal(pad, ids:totable()[2][8])
    ids = tok:encode_batch({ "abc", "hello" }, { max_len = 4, truncation = false })
    assert.are.same({ 2, 5 }, ids.shape) -- nothing cut: padded to the longest
    ids = tok:encode_batch({ "abc", "hello" }, { max_len = 4 })
    assert.are.same({ 2, 4 }, ids.shape) -- cut, as before
    ids, mask = tok:encode_batch({ "ab" }, { max_len = 4, padding = "max_length", padding_side = "left", eos = true })
    assert.are.same({ { pad, tok.vocab:id("a"), tok.vocab:id("b"), tok.vocab.eos_id } }, ids:totable())
    raises_here(function() tok:encode_batch({ "abc" }, { max_length = 4 }) end,
      "CharTokenizer.encode_batch: unknown option 'max_length' (options: bos, eos, max_len, padding, padding_side, truncation)")
    raises_here(function() tok:encode_batch({ "abc" }, { padding = "max_length" }) end,
      "CharTokenizer.encode_batch: padding = \"max_length\" needs max_len")
    raises_here(function() tok:encode_batch({ "hello" }, { max_len = 2, padding = "max_length", truncation = false }) end,
      "item 1 has 5 ids, more than max_len = 2, and truncation = false")
    local w = data.WordTokenizer.fit({ "the cat sat", "a dog" })
    assert.are.same({ 2, 5 }, w:encode_batch({ "the cat", "dog" }, { padding = "max_length", max_len = 5 }).shape)
    raises_here(function() w:encode_batch({ "dog" }, { truncate = true }) end, "WordTokenizer.encode_batch: unknown option 'truncate'")
  end)

  it("data.pad pads to max_len with padding = \"max_length\"", function()
    local ids, mask, lengths = data.pad({ { 5, 6, 7 }, { 8 } }, 1, { max_len = 4, padding = "max_length" })
    assert.are.same({ { 5, 6, 7, 1 }, { 8, 1, 1, 1 } }, ids:totable())
    assert.are.same({ false, true, true, true }, mask:totable()[2])
    assert.are.same({ 3, 1 }, lengths:totable())
    assert.are.same({ { 5, 6, 7 }, { 8, 1, 1 } }, data.pad({ { 5, 6, 7 }, { 8 } }, 1, { max_len = 2, truncation = false }):totable())
    raises_here(function() data.pad({ { 5 } }, 1, { padding = "max" }) end, "data.pad: padding must be")
  end)
end)

describe("the tokenizers' encode and decode", function()
  local data = require "ember.data"

  -- encode(5) failed inside the library (text.lua: "attempt to index a
  -- number value"); encode's options other than bos and eos (Hugging
  -- Face's add_special_tokens) were ignored without a word; decode of a
  -- batch [B, L] said "Vocab: id table: 0x... out of range".
  it("refuse a text that is not a string, unknown options and a batch to decode, naming the call", function()
    local tok = data.CharTokenizer.fit({ "hello", "abc" })
    local w = data.WordTokenizer.fit({ "the cat sat", "a dog" })
    raises_here(function() tok:encode(5) end, "CharTokenizer.encode: the text must be a string, got number")
    raises_here(function() w:encode(nil) end, "WordTokenizer.encode: the text must be a string, got nil")
    raises_here(function() tok:encode("ab", { add_special_tokens = true }) end,
      "CharTokenizer.encode: unknown option 'add_special_tokens' (options: bos, eos)")
    local ids = tok:encode_batch({ "abc", "hello" })
    raises_here(function() tok:decode(ids) end,
      "CharTokenizer.decode: ids must be a list of ids or a 1-D tensor, got a 2-D tensor [2, 5]")
    raises_here(function() w:decode(w:encode_batch({ "the cat", "dog" }):totable()) end,
      "WordTokenizer.decode: id 1 is table")
    raises_here(function() tok:decode({ 1.5 }) end, "CharTokenizer.decode: id 1 is 1.5, not an integer")
    -- what worked still works: a row, a list, float ids of a float tensor
    assert.are.equal("abc", tok:decode(ids[1]))
    assert.are.equal("hello", tok:decode(ids[2]:double():totable()))
    assert.are.equal("the cat sat", w:decode(w:encode("the cat sat")))
  end)
end)

describe("tokenizers' fit", function()
  it("takes one string as one text (it gave a vocabulary of the specials only)", function()
    local one = data.CharTokenizer.fit("hello")
    local list = data.CharTokenizer.fit({ "hello" })
    assert.are.same(list:encode("hole"), one:encode("hole"))
    assert.are.equal("hole", one:decode(one:encode("hole")))
    local w = data.WordTokenizer.fit("the cat sat")
    assert.are.same(data.WordTokenizer.fit({ "the cat sat" }):encode("cat sat"), w:encode("cat sat"))
  end)
  it("anything else is an error at the user's line", function()
    raises_here(function() data.CharTokenizer.fit(nil) end, "CharTokenizer.fit: texts must be a list of strings (or one string), got nil")
    raises_here(function() data.WordTokenizer.fit(5) end, "WordTokenizer.fit: texts must be a list of strings (or one string), got number")
    raises_here(function() data.WordTokenizer.fit({ "a", 3 }) end, "WordTokenizer.fit: text 2 is a number, not a string")
  end)
end)

describe("#tok of a tokenizer", function()
  it("#tok is the vocabulary size of both tokenizers (nn.Embedding(#tok, d))", function()
    local texts = { "a good film", "a bad film .", "not good" }
    local word = data.WordTokenizer.fit(texts)
    local char = data.CharTokenizer.fit(texts)
    for _, tok in ipairs({ word, char }) do
      assert.are.equal(tok:size(), #tok)
      assert.is_true(#tok > 4)
      local x = tok:encode_batch(texts)
      assert.is_true(nn.Embedding(#tok, 8)(x).shape == ember.Size { 3, x:size(2), 8 })
    end
  end)
end)
