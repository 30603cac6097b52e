-- ember.data: text helpers, vocab, tokenizers, padding, Dataset batching,
-- the readers of the Debian data sets and the generators.
local ember = require "ember"
local data = require "ember.data"
local raises_here = require("tests.lua.helpers.parity").raises_here

local function tmpname()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local exists = require("tests.lua.helpers.files").exists

describe("ember.data.text", function()
  it("lower-cases ASCII and the accented capitals of en/fr/de/es/it", function()
    assert.are.equal("wörterbuch", data.text.lower("WÖRTERBUCH"))
    assert.are.equal("école œuvre ñandú ÿ çà", data.text.lower("ÉCOLE ŒUVRE ÑANDÚ Ÿ ÇÀ"))
    assert.are.equal("straße", data.text.lower("Straße"))
    assert.are.equal("×", data.text.lower("×")) -- not a letter
  end)

  it("rejects invalid UTF-8 with a message", function()
    assert.has_error(function() data.text.lower("ab\255") end)
    assert.has_error(function() data.text.chars("\200x") end)
  end)

  it("splits into characters and words", function()
    assert.are.same({"w", "ö", "r"}, data.text.chars("wör"))
    assert.are.same({"And", "God", "said", ",", "Let"}, data.text.words("And God said, Let", true))
    assert.are.same({"said,", "Let"}, data.text.words("said,  Let"))
  end)
end)

describe("ember.data.Vocab", function()
  it("puts the specials first, maps unknown tokens to <unk>", function()
    local v = data.Vocab.new{tokens = {"a", "b"}}
    assert.are.equal(6, v:size())
    assert.are.equal(1, v.pad_id)
    assert.are.equal(2, v.unk_id)
    assert.are.equal(3, v.bos_id)
    assert.are.equal(4, v.eos_id)
    assert.are.equal(5, v:id("a"))
    assert.are.equal(v.unk_id, v:id("zzz"))
    assert.are.equal("b", v:token(6))
    assert.is_true(v:is_special(1))
    assert.is_false(v:is_special(5))
  end)

  it("errors on duplicates, bad ids and a missing <unk>", function()
    assert.has_error(function() data.Vocab.new{tokens = {"a", "a"}} end, nil)
    local v = data.Vocab.new{tokens = {"a"}}
    assert.has_error(function() v:token(99) end)
    local strict = data.Vocab.new{tokens = {"a"}, specials = {"<pad>"}}
    assert.has_error(function() strict:id("b") end)
  end)

  it("saves and loads every token, newlines and backslashes included", function()
    local path = tmpname()
    local v = data.Vocab.new{tokens = {"a", "\n", "\\n", "\t", "é", " "}, kind = "char"}
    v:save(path)
    local w = data.Vocab.load(path)
    os.remove(path)
    assert.are.same(v.tokens, w.tokens)
    assert.are.equal("char", w.kind)
    assert.are.equal(v.unk_id, w.unk_id)
  end)

  it("refuses a file that is not a vocab", function()
    local path = tmpname()
    local f = io.open(path, "w")
    f:write("hello\n")
    f:close()
    local ok, err = pcall(data.Vocab.load, path)
    os.remove(path)
    assert.is_false(ok)
    assert.matches("not an ember vocab file", err)
    assert.has_error(function() data.Vocab.load("/nonexistent/vocab.txt") end)
  end)
end)

describe("ember.data.CharTokenizer", function()
  local tok = data.CharTokenizer.fit({"hallo", "wörter"})

  it("builds its vocab sorted by code point, independent of data order", function()
    local other = data.CharTokenizer.fit({"wörter", "hallo"})
    assert.are.same(tok.vocab.tokens, other.vocab.tokens)
    assert.are.equal(4 + 9, tok:size()) -- a e h l o r t w ö
  end)

  it("encodes with <bos>/<eos>/<unk> and decodes back", function()
    local ids = tok:encode("hölz", {bos = true, eos = true})
    assert.are.equal(tok.vocab.bos_id, ids[1])
    assert.are.equal(tok.vocab.unk_id, ids[5]) -- z was never seen
    assert.are.equal(tok.vocab.eos_id, ids[6])
    assert.are.equal("höl", tok:decode(ids))
    assert.are.equal("<bos>höl<unk><eos>", tok:decode(ids, true))
    assert.are.equal("hallo", tok:decode(ember.tensor(tok:encode("hallo"), {dtype = "int64"})))
  end)

  it("pads a batch to its longest item with the padding mask", function()
    local ids, mask, lengths = tok:encode_batch({"hallo", "ö", "wört"})
    assert.are.same({3, 5}, ids.shape)
    assert.are.equal("bool", mask.dtype)
    assert.are.same({5, 1, 4}, lengths:totable())
    assert.are.same({false, true, true, true, true}, mask[2]:totable())
    assert.are.equal(tok.vocab.pad_id, ids[2][3]:item())
    assert.is_true(ids:eq(tok.vocab.pad_id) == mask)
  end)

  it("encodes a long text into a tensor with the byte fast path", function()
    local t = tok:encode_tensor("hallo wörter")
    assert.are.equal("int64", t.dtype)
    assert.are.same(tok:encode("hallo wörter"), t:totable())
  end)

  it("round-trips through save/load", function()
    local path = tmpname()
    tok:save(path)
    local back = data.CharTokenizer.load(path)
    os.remove(path)
    assert.are.same(tok:encode("wörter"), back:encode("wörter"))
  end)
end)

describe("ember.data.WordTokenizer", function()
  it("keeps the most frequent words, lower-cases, splits punctuation", function()
    local tok = data.WordTokenizer.fit({"The cat sat.", "the dog sat, the end"}, {lower = true, max_size = 3})
    assert.are.equal(4 + 3, tok:size())
    assert.are.equal(5, tok.vocab:id("the")) -- most frequent first
    local ids = tok:encode("THE zebra sat")
    assert.are.equal(tok.vocab.unk_id, ids[2])
    assert.are.equal("the <unk> sat", tok:decode(ids, true))
    local path = tmpname()
    tok:save(path)
    local back = data.WordTokenizer.load(path)
    os.remove(path)
    assert.is_true(back.lower)
    assert.are.same(ids, back:encode("THE zebra sat"))
    local x, mask = tok:encode_batch({"the cat", "sat"})
    assert.are.same({2, 2}, x.shape)
    assert.are.same({false, true}, mask[2]:totable())
  end)

  it("refuses to load a char vocab", function()
    local path = tmpname()
    data.CharTokenizer.fit({"ab"}):save(path)
    local ok, err = pcall(data.WordTokenizer.load, path)
    os.remove(path)
    assert.is_false(ok)
    assert.matches("not a word vocab", err)
  end)
end)

describe("the tokenizers' options and special tokens", function()
  it("fit refuses an option it does not know (torchtext's min_freq was ignored: every character kept)", function()
    raises_here(function() data.CharTokenizer.fit({ "aab" }, { min_freq = 2 }) end,
      "CharTokenizer.fit: unknown option 'min_freq' (options: min_count, specials)")
    raises_here(function() data.WordTokenizer.fit({ "a a b" }, { maxsize = 1 }) end,
      "WordTokenizer.fit: unknown option 'maxsize'")
    raises_here(function() data.CharTokenizer.from_chars("ab", { special = {} }) end,
      "CharTokenizer.from_chars: unknown option 'special'")
    assert.are.equal(4 + 1, #data.CharTokenizer.fit({ "aab" }, { min_count = 2 }))
  end)

  it("bos / eos need the vocabulary's <bos> / <eos> (they were left out without a word)", function()
    local specials = { "<pad>", "<unk>" }
    local char = data.CharTokenizer.fit({ "ab" }, { specials = specials })
    local word = data.WordTokenizer.fit({ "a b" }, { specials = specials })
    raises_here(function() char:encode("ab", { bos = true }) end,
      "CharTokenizer.encode: bos = true, but the vocabulary has no \"<bos>\" token")
    raises_here(function() word:encode_batch({ "a b" }, { eos = true }) end,
      "WordTokenizer.encode: eos = true, but the vocabulary has no \"<eos>\" token")
    assert.are.same({ 3, 4 }, char:encode("ab"))
  end)

  it("encode_batch without a <pad> names the token, not data.pad's pad_id = nil", function()
    local tok = data.CharTokenizer.fit({ "ab" }, { specials = { "[PAD]", "<unk>" } })
    raises_here(function() tok:encode_batch({ "a", "ab" }) end,
      "CharTokenizer.encode_batch: the vocabulary has no \"<pad>\" token to pad with (its specials are [PAD] <unk>)")
  end)
end)

describe("ember.data.padding", function()
  it("pads, cuts at max_len and keeps at least one column", function()
    local ids, mask = data.pad({{5, 6, 7}, {8}}, 1, 2)
    assert.are.same({{5, 6}, {8, 1}}, ids:totable())
    assert.are.same({{false, false}, {false, true}}, mask:totable())
    local e = data.pad({{}, {}}, 1)
    assert.are.same({2, 1}, e.shape)
  end)

  it("pads on the left (side = \"left\", a tokenizer's padding_side), as ember.generate's prompts want", function()
    local ids, mask, lengths = data.pad({{5, 6, 7}, {8}}, 1, {side = "left"})
    assert.are.same({{5, 6, 7}, {1, 1, 8}}, ids:totable())
    assert.are.same({{false, false, false}, {true, true, false}}, mask:totable())
    assert.are.same({3, 1}, lengths:totable())
    -- max_len cuts as on the right: the first ids are kept
    ids = data.pad({{5, 6, 7}, {8}}, 1, {max_len = 2, side = "left"})
    assert.are.same({{5, 6}, {1, 8}}, ids:totable())
    assert.are.same({{5, 6, 7}, {8, 1, 1}}, data.pad({{5, 6, 7}, {8}}, 1, {side = "right"}):totable())
    assert.has_error(function() data.pad({{5}}, 1, {side = "middle"}) end,
      'data.pad: side must be "right" or "left", got middle')
    assert.has_error(function() data.pad({{5}}, 1, {padding_side = "left"}) end,
      "data.pad: unknown option 'padding_side' (options: max_len, side, padding, truncation)")
    -- a tokenizer's batch, and generate continuing each row from its last id
    local tok = data.CharTokenizer.fit({"abcdef"})
    local x, m = tok:encode_batch({"abc", "a"}, {padding_side = "left"})
    assert.are.same({{false, false, false}, {true, true, false}}, m:totable())
    assert.are.equal(tok:encode("a")[1], x[2][3]:item())
    local TinyLM = require "tests.lua.helpers.tiny_lm"
    ember.manual_seed(0)
    local lm = TinyLM{vocab = tok:size(), cross = false}
    local out = require("ember.generate").generate(lm, x, {max_new_tokens = 2, prompt_padding_mask = m})
    assert.are.same({2, 5}, out.shape)
    local alone = require("ember.generate").generate(lm, ember.tensor({tok:encode("a")}, {dtype = "int64"}),
      {max_new_tokens = 2})
    assert.are.same(alone[1]:totable(), out[2]:narrow(1, 3, 3):totable())
  end)

  it("trims columns that are padding in every row", function()
    local ids = ember.tensor({{5, 6, 1, 1}, {7, 1, 1, 1}}, {dtype = "int64"})
    local t, mask = data.padding.trim(ids, 1)
    assert.are.same({{5, 6}, {7, 1}}, t:totable())
    assert.are.same({{false, false}, {false, true}}, mask:totable())
  end)
end)

describe("ember.data.Dataset", function()
  local x = ember.arange(1, 11, {dtype = "int64"}):view(10, 1) * ember.ones({1, 3}, {dtype = "int64"})
  local y = ember.arange(1, 11, {dtype = "int64"})

  it("checks that the fields have the same number of rows", function()
    assert.has_error(function() data.Dataset.new{x = x, y = ember.zeros(3)} end)
    assert.has_error(function() data.Dataset.new{} end)
    assert.has_error(function() data.Dataset.new({x = x}, {pad = {z = 1}}) end)
  end)

  it("iterates in order, the last batch partial unless drop_last", function()
    local ds = data.Dataset.new{x = x, y = y}
    local sizes = {}
    for b, i in ds:batches(4) do sizes[i] = b.y:size(1) end
    assert.are.same({4, 4, 2}, sizes)
    assert.are.equal(2, ds:num_batches(4, true))
    local n = 0
    for _ in ds:batches(4, {drop_last = true}) do n = n + 1 end
    assert.are.equal(2, n)
    assert.has_error(function() ds:batches(0) end)
  end)

  it("shuffles reproducibly from the seed, keeping rows together", function()
    local ds = data.Dataset.new{x = x, y = y}
    local function order(seed)
      ember.manual_seed(seed)
      local seen = {}
      for b in ds:batches(3, {shuffle = true}) do
        for i, v in ipairs(b.y:totable()) do
          seen[#seen + 1] = v
          assert.are.equal(v, b.x[i][2]:item())
        end
      end
      return seen
    end
    local a, b, c = order(7), order(7), order(8)
    assert.are.same(a, b)
    assert.are_not.same(a, c)
    table.sort(a)
    assert.are.same(y:totable(), a)
  end)

  it("takes its rows from a sampler, as torch's DataLoader(sampler=)", function()
    local ds = data.Dataset.new{x = x, y = y}
    local DistributedSampler = require("ember.distributed").DistributedSampler
    local shards = {}
    for r = 0, 1 do
      local s = DistributedSampler(ds, {num_replicas = 2, rank = r, seed = 3})
      s:set_epoch(1)
      local rows, sizes = {}, {}
      for b, i in ds:batches(2, {sampler = s}) do
        sizes[i] = b.y:size(1)
        for k, v in ipairs(b.y:totable()) do
          rows[#rows + 1] = v
          assert.are.equal(v, b.x[k][2]:item()) -- rows stay together
        end
      end
      assert.are.same({2, 2, 1}, sizes)
      assert.are.same(s:list(), rows) -- y holds the row numbers: the sampler's order
      local via = {}
      for b in s:batches(ds, 2) do for _, v in ipairs(b.y:totable()) do via[#via + 1] = v end end
      assert.are.same(rows, via)
      shards[r + 1] = rows
    end
    local all = {}
    for _, rows in ipairs(shards) do for _, v in ipairs(rows) do all[#all + 1] = v end end
    table.sort(all)
    assert.are.same(y:totable(), all) -- 10 rows, two disjoint shards of 5
    local n = 0
    for _ in ds:batches(2, {sampler = DistributedSampler(10, {num_replicas = 2, rank = 0}), drop_last = true}) do
      n = n + 1
    end
    assert.are.equal(2, n)
  end)

  it("names a wrong option of batches", function()
    local ds = data.Dataset.new{x = x, y = y}
    local s = {indices = function() return ember.tensor({1, 2}, {dtype = "int64"}) end}
    local function says(msg, f)
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(msg, 1, true), tostring(err))
      assert.is_truthy(tostring(err):find("data_spec.lua", 1, true), "not at the caller's line: " .. tostring(err))
    end
    says("Dataset:batches: shuffle and sampler exclude each other", function() ds:batches(2, {sampler = s, shuffle = true}) end)
    says("Dataset:batches: sampler must have an indices() method, got number", function() ds:batches(2, {sampler = 3}) end)
    says("Dataset:batches: unknown option 'shufle'", function() ds:batches(2, {shufle = true}) end)
    says("Dataset:batches: options must be a table, got string", function() ds:batches(2, "shuffle") end)
    local got = {}
    for b in ds:batches(5, {sampler = s}) do got[#got + 1] = b.y:totable() end
    assert.are.same({{1, 2}}, got)
  end)

  it("cuts padded fields to the batch's longest item and adds the mask", function()
    local tok = data.CharTokenizer.fit({"abcdef"})
    local ids = tok:encode_batch({"abcdef", "ab", "abc", "a"})
    local ds = data.Dataset.new({x = ids}, {pad = {x = tok.vocab.pad_id}})
    local widths = {}
    for b in ds:batches(2) do widths[#widths + 1] = b.x:size(2) assert.are.same(b.x.shape, b.x_mask.shape) end
    assert.are.same({6, 3}, widths)
  end)

  it("takes subsets", function()
    local ds = data.Dataset.new{x = x, y = y}:subset(4)
    assert.are.equal(4, ds:size())
  end)
end)

describe("ember.data.Rng", function()
  it("is SplitMix64: known first output, reproducible, in range", function()
    local r = data.Rng.new(0)
    assert.are.equal(math.tointeger(0xE220A8397B1DCDAF), r:next64())
    local a, b = data.Rng.new(5), data.Rng.new(5)
    for _ = 1, 100 do
      local u = a:uniform()
      assert.are.equal(u, b:uniform())
      assert.is_true(u >= 0 and u < 1)
      local k = a:int(3, 5)
      b:int(3, 5)
      assert.is_true(k >= 3 and k <= 5)
    end
  end)
end)

describe("ember.data.addition", function()
  it("makes non-overlapping train and held-out problems with correct sums", function()
    local d = data.addition.generate{n_train = 3000, n_test = 500, seed = 3}
    assert.are.equal(3000, #d.train.inputs)
    assert.are.equal(500, #d.test.inputs)
    local seen = {}
    for i, s in ipairs(d.train.inputs) do
      local a, b = s:match("^(%d+)%+(%d+)$")
      assert.are.equal(tostring(tonumber(a) + tonumber(b)), d.train.targets[i])
      seen[s] = true
    end
    for i, s in ipairs(d.test.inputs) do
      local a, b = s:match("^(%d+)%+(%d+)$")
      assert.is_nil(seen[s])
      assert.is_nil(seen[b .. "+" .. a]) -- nor its mirror image
      assert.are.equal(tostring(tonumber(a) + tonumber(b)), d.test.targets[i])
      seen[s] = true
    end
    local again = data.addition.generate{n_train = 3000, n_test = 500, seed = 3}
    assert.are.same(d.test.inputs, again.test.inputs)
  end)

  it("leaves ember's global generator as the caller seeded it (generate reseeded it with opts.seed)", function()
    ember.manual_seed(1)
    local want = ember.rand(4)
    ember.manual_seed(1)
    data.addition.generate{n_train = 20, n_test = 5, seed = 9}
    assert.is_true(ember.rand(4):equal(want))
    -- the same problems for a seed as ember.manual_seed(seed); ember.randperm(10^6) drew
    ember.manual_seed(9)
    local p = ember.randperm(1000 * 1000):narrow(1, 1, 20):totable()
    local d = data.addition.generate{n_train = 20, n_test = 5, seed = 9}
    for i = 1, 20 do assert.are.equal(((p[i] - 1) // 1000) .. "+" .. ((p[i] - 1) % 1000), d.train.inputs[i]) end
  end)
end)

describe("ember.data.sort_of_clevr", function()
  local soc = data.sort_of_clevr
  local d = soc.generate{n_images = 30, seed = 2}

  it("has 6 non-overlapping objects per image, each colour once", function()
    local c = d.centers:totable()
    for n = 1, 30 do
      for i = 1, 6 do
        local x, y = c[n][i][1], c[n][i][2]
        assert.is_true(x >= 5 and x <= 70 and y >= 5 and y <= 70)
        for j = i + 1, 6 do
          local dx, dy = math.abs(x - c[n][j][1]), math.abs(y - c[n][j][2])
          assert.is_true(dx > 10 or dy > 10, "objects overlap")
        end
      end
    end
  end)

  it("asks 10 non-relational then 10 relational questions with consistent answers", function()
    local q, a, rel = d.questions:totable(), d.answers:totable(), d.relational:totable()
    local c, sh = d.centers:totable(), d.shapes:totable()
    for n = 1, 30 do
      local xs, ys = {}, {}
      for i = 1, 6 do xs[i], ys[i] = c[n][i][1], c[n][i][2] end
      for k = 1, 20 do
        local kind, colour = q[n][k][1] - 6, q[n][k][2]
        assert.are.equal(k > 10, rel[n][k])
        assert.are.equal(k > 10, kind > 3)
        assert.is_true(colour >= 1 and colour <= 6)
        local ans = soc.ANSWERS[a[n][k]]
        if kind == 1 then assert.are.equal(soc.SHAPES[sh[n][colour]], ans) end
        if kind == 2 then assert.are.equal(xs[colour] < 37.5 and "yes" or "no", ans) end
        if kind == 6 then
          local same = 0
          for i = 1, 6 do if sh[n][i] == sh[n][colour] then same = same + 1 end end
          assert.are.equal(tostring(same), ans)
        end
        if kind == 4 then
          local best, bd
          for i = 1, 6 do
            local dd = (xs[i] - xs[colour]) ^ 2 + (ys[i] - ys[colour]) ^ 2
            if i ~= colour and (not bd or dd < bd) then best, bd = i, dd end
          end
          assert.are.equal(soc.SHAPES[sh[n][best]], ans)
        end
      end
    end
  end)

  it("renders white images with each object's colour at its center", function()
    local img = soc.render(d, ember.tensor({1, 2}, {dtype = "int64"}))
    assert.are.same({2, 3, 75, 75}, img.shape)
    assert.are.equal(1, img[1][1][1][1]:item()) -- a corner is white (no object touches it)
    local c = d.centers:totable()
    for i = 1, 6 do
      local x, y = math.floor(c[1][i][1]) + 1, math.floor(c[1][i][2]) + 1
      for ch = 1, 3 do
        assert.is_true(math.abs(img[1][ch][y][x]:item() - soc.RGB[i][ch] / 255) < 1e-5)
      end
    end
  end)

  it("is reproducible from the seed", function()
    local again = soc.generate{n_images = 30, seed = 2}
    assert.is_true(again.centers == d.centers)
    assert.is_true(again.answers == d.answers)
    local other = soc.generate{n_images = 30, seed = 3}
    assert.is_false(other.centers == d.centers)
  end)
end)

describe("ember.data readers", function()
  it("name the Debian package when the data is missing", function()
    local ok, err = pcall(data.source.require_file, "kjv", "/nonexistent/bible.data", "bible-kjv-text")
    assert.is_false(ok)
    assert.matches("apt%-get install %-y bible%-kjv%-text", err)
    ok, err = pcall(data.wordlists.read_list, {path = "/nonexistent/dict/klingon", package = "wklingon"}, 1, {})
    assert.is_false(ok)
    assert.matches("cannot read /nonexistent/dict/klingon; install the Debian package wklingon", err)
    ok, err = pcall(data.fashion_mnist.load, "validation")
    assert.is_false(ok)
    assert.matches("split must be", err)
  end)

  local have_dicts = exists("/usr/share/dict/ngerman") and exists("/usr/share/dict/french")
    and exists("/usr/share/dict/spanish") and exists("/usr/share/dict/italian")
    and exists("/usr/share/dict/american-english")
  ;(have_dicts and it or pending)("prepare the word lists: cleaned, disjoint, balanced, seeded", function()
    local d = data.wordlists.load{n_train = 300, n_test = 100, seed = 4}
    assert.are.equal(1500, #d.train.words)
    assert.are.equal(500, #d.test.words)
    local where = {}
    for _, part in ipairs({d.train, d.test}) do
      for i, w in ipairs(part.words) do
        assert.is_nil(w:find("'", 1, true))
        local n = utf8.len(w)
        assert.is_true(n >= 2 and n <= 20)
        assert.are.equal(data.text.lower(w), w)
        assert.is_nil(where[w], "a word appears twice: " .. w)
        where[w] = part.labels[i]
      end
    end
    local again = data.wordlists.load{n_train = 300, n_test = 100, seed = 4}
    assert.are.same(d.test.words, again.test.words)
  end)

  ;(have_dicts and it or pending)("wordlists.load leaves ember's global generator as the caller seeded it", function()
    ember.manual_seed(1)
    local want = ember.rand(4)
    ember.manual_seed(1)
    data.wordlists.load{n_train = 10, n_test = 2, seed = 4}
    assert.is_true(ember.rand(4):equal(want))
  end)

  ;(exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") and it or pending)(
    "read Fashion-MNIST idx files", function()
    local x, y = data.fashion_mnist.load("test", {limit = 100})
    assert.are.same({100, 28, 28}, x.shape)
    assert.are.same({100}, y.shape)
    assert.is_true(x:min():item() >= 0 and x:max():item() <= 1)
    assert.is_true(y:min():item() >= 1 and y:max():item() <= 10)
    assert.are.equal(10, y[1]:item()) -- the first test image is an ankle boot (label 9 + 1)
  end)

  ;(exists("/usr/lib/bible.data") and exists("/usr/bin/bible") and it or pending)(
    "extract the King James text, one verse per line", function()
    local text = data.kjv.text()
    local first = "In the beginning God created the heaven and the earth.\nAnd the earth"
    assert.are.equal(first, text:sub(1, #first))
    assert.is_true(text:find("The grace of our Lord Jesus Christ be with you all. Amen.\n$") ~= nil)
    local _, verses = text:gsub("\n", "")
    assert.are.equal(31102, verses)
    local a, b = data.kjv.split(text, 0.9)
    assert.are.equal(#text, #a + #b)
  end)
end)

describe("ember.data.naive_bayes", function()
  it("uses 1-3-grams with word-boundary markers and separates two toy languages", function()
    assert.are.same({"^", "^a", "^ab", "a", "ab", "ab$", "b", "b$", "$"}, data.naive_bayes.features("ab", 3))
    local nb = data.naive_bayes.train({"aaa", "aab", "aba", "xyz", "xxy", "zyx"}, {1, 1, 1, 2, 2, 2})
    assert.are.equal(1, nb:predict("baa"))
    assert.are.equal(2, nb:predict("yzx"))
    assert.are.equal(1, nb:accuracy({"ab", "zz"}, {1, 2}))
  end)

  it("never predicts a class it saw no text of (scikit-learn's rule)", function()
    -- class 2 of 3 has no text: with a smoothed prior and no counts, every
    -- n-gram is likelier under it than under a seen class, so a text of
    -- n-grams seen nowhere used to be labelled 2
    local nb = data.naive_bayes.train({"aaa", "aab", "xyz", "xxy"}, {1, 1, 3, 3}, {classes = 3})
    for _, s in ipairs({"qqqqqqqq", "mnopmnop", "aaa", "xyz"}) do
      assert.are_not.equal(2, nb:predict(s), s)
    end
    assert.are.equal(-math.huge, nb:scores("aaa")[2])
    assert.are.equal(1, nb:predict("aaa"))
    assert.are.equal(3, nb:predict("xyz"))
    assert.has_error(function() data.naive_bayes.train({}, {}) end,
      "data.naive_bayes.train: needs texts and as many labels, got 0 texts and 0 labels")
  end)
end)
