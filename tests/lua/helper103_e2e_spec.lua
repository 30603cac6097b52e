-- helper103: what a new user writing a classifier, a decoder-only LM and a
-- cross-attention VLM from the README and help() ran into: `#tok` was 0
-- for the tokenizers (nn.Embedding(#tok, d) failed), a number in a
-- checkpoint's metadata came back as "0.80000000000000004", and a bool
-- mask could not be scattered (Hugging Face's top-p filter); CrossAttentionBlock's
-- shape errors named the attention's query and key.
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"
local checkpoint = require "ember.checkpoint"

local function same(a, b) assert.is_true(ember.equal(a, b), tostring(a) .. " vs " .. tostring(b)) end

describe("helper103: a new user's three programs", function()
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

  it("checkpoint metadata numbers are written as short as reads back exactly", function()
    local path = os.tmpname()
    local model = nn.Linear(2, 2)
    local opt = optim.AdamW(model:parameters(), { lr = 0.003 })
    checkpoint.save(path, { model = model, optimizer = opt,
      metadata = { acc = 0.8, third = 1 / 3, sum = 0.1 + 0.2, epoch = 3, big = 2 ^ 60 + 0.0 } })
    local meta, raw = checkpoint.load(path, { model = nn.Linear(2, 2) })
    os.remove(path)
    assert.are.equal("0.8", meta.acc)
    assert.are.equal("3", meta.epoch)
    assert.are.equal("0.003", raw["optimizer.param_groups.1.lr"])
    for _, k in ipairs({ "acc", "third", "sum", "big" }) do
      local want = ({ acc = 0.8, third = 1 / 3, sum = 0.1 + 0.2, big = 2 ^ 60 + 0.0 })[k]
      assert.are.equal(want, tonumber(meta[k]))
    end
    assert.are.equal("0.30000000000000004", meta.sum) -- 0.3 would not read back
  end)

  it("a bool mask scatters (Hugging Face's top-p filter), as on 0/1 numbers", function()
    ember.manual_seed(3)
    local logits = ember.randn(4, 11)
    local sorted, idx = logits:sort(-1, true)
    local remove = nn.functional.softmax(sorted, -1):cumsum(-1):gt(0.7)
    local back = remove:scatter(-1, idx, remove)
    assert.are.equal("bool", back.dtype)
    same(back, remove:float():scatter(-1, idx, remove:float()):ne(0))
    -- each row removes the tokens its own sorted order removed
    for r = 1, 4 do
      for j = 1, 11 do
        assert.are.equal(remove[{ r, j }]:item(), back[{ r, idx[{ r, j }]:item() }]:item())
      end
    end
    -- a boolean src, in place too
    local m = ember.zeros(2, 3, "bool")
    same(m:scatter(2, ember.tensor({ { 2 }, { 3 } }, "int64"), true),
      ember.tensor({ { false, true, false }, { false, false, true } }))
    m:scatter_(2, ember.tensor({ { 1 }, { 1 } }, "int64"), true)
    same(m, ember.tensor({ { true, false, false }, { true, false, false } }))
  end)

  it("CrossAttentionBlock's shape errors name its text and image, not the attention's query and key", function()
    local parity = require "tests.lua.helpers.parity"
    local blk = nn.CrossAttentionBlock(16, 4, { self_attention = true })
    parity.raises_here(function() blk(ember.randn(2, 3, 16), ember.randn(2, 9, 8)) end,
      "CrossAttentionBlock.forward: image must be [B=2, Li, image_dim=16], got [2, 9, 8] (image tokens of another "
      .. "width: nn.CrossAttentionBlock(d_model, heads, {image_dim = n}))")
    parity.raises_here(function() blk(ember.randn(2, 3, 16), ember.randn(3, 9, 16)) end,
      "CrossAttentionBlock.forward: image must be [B=2, Li, image_dim=16], got [3, 9, 16]")
    parity.raises_here(function() blk(ember.randn(3, 16), ember.randn(2, 9, 16)) end,
      "CrossAttentionBlock.forward: text must be [B, Lt, d_model=16], got [3, 16]")
    local wide = nn.CrossAttentionBlock(16, 4, { image_dim = 8 })
    assert.is_true(wide(ember.randn(2, 3, 16), ember.randn(2, 9, 8)).shape == ember.Size { 2, 3, 16 })
  end)

  it("an encoder classifier with the README's parts learns a token-order task", function()
    -- label 2 when token 3 comes before token 4 in the row, else 1: needs positions and attention
    ember.manual_seed(0)
    local n, L, V = 512, 6, 8
    local X = ember.randint(5, V + 1, { n, L }, { dtype = "int64" })
    local Y = ember.zeros(n, "int64")
    local g = ember.Generator():manual_seed(1)
    for i = 1, n do
      local p = ember.randperm(L, { generator = g })
      local a, b = p[1]:item(), p[2]:item() -- randperm gives 1-based positions
      X[{ i, a }], X[{ i, b }] = 3, 4
      Y[i] = a < b and 2 or 1
    end
    local Net = nn.Module:extend("Net")
    function Net:__init()
      self.emb, self.pos = nn.Embedding(V, 32), nn.Embedding(L, 32)
      self.enc = nn.TransformerEncoderLayer(32, 4, { dim_feedforward = 64, dropout = 0, norm_first = true })
      self.head = nn.Linear(32, 2)
    end
    function Net:forward(x)
      return self.head(self.enc(self.emb(x) + self.pos(ember.arange(1, L + 1, "int64"))):mean(2))
    end
    local model = Net()
    local loader = data.DataLoader(data.TensorDataset(X, Y), { batch_size = 64, shuffle = true })
    local opt = optim.AdamW(model:parameters(), { lr = 3e-3 })
    local sched = optim.WarmupCosine(opt, { warmup_steps = 10, total_steps = 15 * #loader })
    local first, last
    for _ = 1, 15 do
      for x, y in loader:iter() do
        local loss = nn.functional.cross_entropy(model(x), y)
        opt:zero_grad(); loss:backward(); optim.clip_grad_norm(model, 1.0); opt:step(); sched:step()
        first, last = first or loss:item(), loss:item()
      end
    end
    model:eval()
    local acc = ember.no_grad(function() return model(X):argmax(-1):eq(Y):float():mean():item() end)
    assert.is_true(last < first / 3, ("loss %.3f -> %.3f"):format(first, last))
    assert.is_true(acc > 0.9, "accuracy " .. acc)
  end)
end)
