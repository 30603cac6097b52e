-- The seed tutorials' programs (PyTorch attention tutorials), written in Lua
-- with ember's public API as its reference documents it: an
-- AttentionClassifier trained with Adam and gradient clipping, a
-- multi-head attention written by hand from matmul and softmax checked
-- against nn.MultiHeadAttention with copied weights, a cross-attention
-- block, a decoder layer with a triu causal mask, and an attention heatmap.
--
-- Masks are used in the two forms whose meaning is the same in PyTorch and
-- ember: key_padding_mask (true = a padded key, ignored) and additive float
-- attn_masks (-inf where a query must not look), built with ember.triu as
-- the seeds build theirs with torch.triu.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"

local F64 = { dtype = "float64" }

local function max_abs_diff(a, b) return (a - b):abs():max():item() end

-- The seeds' causal mask: -inf above the diagonal (keys after the query).
local function causal_mask(L, opts)
  return ember.triu(ember.full({ L, L }, -math.huge, opts), 1)
end

-- ---------------------------------------------------------------------------
-- 1. AttentionClassifier: embedding + self-attention + FFN + classifier
-- ---------------------------------------------------------------------------

local AttentionClassifier = nn.Module:extend("AttentionClassifier")

function AttentionClassifier:__init(vocab, d_model, heads, classes)
  self:add_module("embed", nn.Embedding(vocab, d_model))
  self:add_module("attn", nn.MultiHeadAttention(d_model, heads))
  self:add_module("norm1", nn.LayerNorm(d_model))
  self:add_module("ffn", nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model)))
  self:add_module("norm2", nn.LayerNorm(d_model))
  self:add_module("classifier", nn.Linear(d_model, classes))
end

-- ids [B, L] int64 (1-based), pad [B, L] bool (true = padding) -> logits [B, C]
function AttentionClassifier:forward(ids, pad)
  local x = self.embed(ids)
  local a = self.attn:forward(x, x, x, { key_padding_mask = pad })
  x = self.norm1(x + a)
  x = self.norm2(x + self.ffn(x))
  -- mean over the real tokens
  local keep = pad:logical_not():unsqueeze(-1):float()
  local pooled = (x * keep):sum(2) / keep:sum(2)
  return self.classifier(pooled)
end

-- Sequences of tokens 3..12 (1 is padding) of random lengths 4..10; the
-- label is 2 when token 3 occurs in the sequence, else 1.
local function make_batch(n, L)
  local ids, pad, labels = {}, {}, {}
  for b = 1, n do
    local len = math.random(4, L)
    local row, prow, has = {}, {}, false
    for t = 1, L do
      if t <= len then
        row[t] = math.random(3, 12)
        has = has or row[t] == 3
      else
        row[t] = 1
      end
      prow[t] = t > len
    end
    ids[b], pad[b], labels[b] = row, prow, has and 2 or 1
  end
  return ember.tensor(ids, "int64"), ember.tensor(pad), ember.tensor(labels, "int64")
end

describe("tutorial: AttentionClassifier", function()
  it("learns whether a token occurs (Adam, clip_grad_norm, key padding)", function()
    ember.manual_seed(7)
    math.randomseed(7)
    local model = AttentionClassifier(13, 32, 4, 2)
    local opt = optim.Adam(model:parameters(), { lr = 3e-3 })
    local loss_fn = nn.CrossEntropyLoss()
    local first, last
    for step = 1, 150 do
      local ids, pad, y = make_batch(32, 10)
      opt:zero_grad()
      local loss = loss_fn(model(ids, pad), y)
      loss:backward()
      local norm = optim.clip_grad_norm(model:parameters(), 1.0)
      assert(norm == norm, "the gradient norm is NaN")
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    model:eval()
    local ids, pad, y = make_batch(256, 10)
    local pred = ember.no_grad(function() return model(ids, pad):argmax(2) end)
    local acc = pred:eq(y):float():mean():item()
    assert(last < first, ("loss %.3f -> %.3f"):format(first, last))
    assert(acc > 0.9, ("held-out accuracy %.3f"):format(acc))
  end)

  it("ignores what sits in padded positions", function()
    ember.manual_seed(3)
    local model = AttentionClassifier(13, 16, 2, 2)
    model:eval()
    local ids = ember.tensor({ { 4, 5, 6, 1, 1 } }, "int64")
    local pad = ember.tensor { { false, false, false, true, true } }
    local other = ember.tensor({ { 4, 5, 6, 9, 12 } }, "int64")
    local a = ember.no_grad(function() return model(ids, pad) end)
    local b = ember.no_grad(function() return model(other, pad) end)
    assert(max_abs_diff(a, b) < 1e-6)
  end)
end)

-- ---------------------------------------------------------------------------
-- 2. Multi-head attention by hand, against nn.MultiHeadAttention
-- ---------------------------------------------------------------------------

-- The seeds' MultiHeadAttention: four Linear projections, split into
-- heads, scaled dot products, softmax, merge, output projection.
local HandMHA = nn.Module:extend("HandMHA")

function HandMHA:__init(d_model, heads, opts)
  self.heads, self.d_head = heads, d_model // heads
  for _, n in ipairs { "q_proj", "k_proj", "v_proj", "out_proj" } do
    self:add_module(n, nn.Linear(d_model, d_model, opts))
  end
end

local function split(x, H) -- [B, L, E] -> [B, H, L, E/H]
  local B, L, E = x:size(1), x:size(2), x:size(3)
  return x:view(B, L, H, E // H):transpose(2, 3)
end

-- mask: additive, broadcast to [B, H, Lq, Lk]; pad: [B, Lk] bool, true = ignore.
function HandMHA:forward(q, k, v, mask, pad)
  local H = self.heads
  local Q, K, V = split(self.q_proj(q), H), split(self.k_proj(k), H), split(self.v_proj(v), H)
  local scores = Q:matmul(K:transpose(-2, -1)) / math.sqrt(self.d_head)
  if mask then scores = scores + mask end
  if pad then scores = scores:masked_fill(pad:view(pad:size(1), 1, 1, pad:size(2)), -math.huge) end
  local w = scores:softmax(-1)
  local out = w:matmul(V):transpose(2, 3):contiguous()
  local B, L = out:size(1), out:size(2)
  return self.out_proj(out:view(B, L, H * self.d_head)), w
end

-- Copies the hand-written module's weights into nn.MultiHeadAttention's
-- named parameters (q_proj.weight, q_proj.bias, ..., out_proj.bias).
local function copy_weights(hand, mha)
  local p = mha:named_parameters()
  ember.no_grad(function()
    for _, name in ipairs { "q_proj", "k_proj", "v_proj", "out_proj" } do
      p[name .. ".weight"]:copy_(hand[name].weight)
      p[name .. ".bias"]:copy_(hand[name].bias)
    end
  end)
end

describe("tutorial: multi-head attention from matmul and softmax", function()
  local d, H = 16, 4
  local hand, mha
  before_each(function()
    ember.manual_seed(11)
    hand = HandMHA(d, H, F64)
    mha = nn.MultiHeadAttention(d, H, F64)
    copy_weights(hand, mha)
  end)

  it("gives nn.MultiHeadAttention's output and weights (float64)", function()
    local x = ember.randn({ 3, 7, d }, F64)
    local want, want_w = hand(x, x, x)
    local got, got_w = mha:forward(x, x, x, { need_weights = true })
    assert(max_abs_diff(got, want) < 1e-12, max_abs_diff(got, want))
    -- ember returns the weights of every head, [B, H, Lq, Lk]
    assert.are.equal(ember.Size { 3, H, 7, 7 }, got_w.shape)
    assert(max_abs_diff(got_w, want_w) < 1e-12)
  end)

  it("with a triu causal mask and a key padding mask, and in the gradients", function()
    local x = ember.randn({ 2, 6, d }, F64):requires_grad_()
    local mask = causal_mask(6, F64)
    local pad = ember.tensor { { false, false, false, false, false, false }, { false, false, false, false, true, true } }
    local want = hand(x, x, x, mask, pad)
    want:sum():backward()
    local gx_want = x.grad:clone()
    x.grad = nil
    local got = mha:forward(x, x, x, { attn_mask = mask, key_padding_mask = pad })
    assert(max_abs_diff(got, want) < 1e-12)
    got:sum():backward()
    assert(max_abs_diff(x.grad, gx_want) < 1e-12)
  end)
end)

-- ---------------------------------------------------------------------------
-- 3. A cross-attention block: text queries attend to another sequence
-- ---------------------------------------------------------------------------

local CrossBlock = nn.Module:extend("CrossBlock")

function CrossBlock:__init(d_model, heads, opts)
  self:add_module("cross", nn.MultiHeadAttention(d_model, heads, opts))
  self:add_module("norm1", nn.LayerNorm(d_model, opts))
  self:add_module("ffn", nn.Sequential(nn.Linear(d_model, 2 * d_model, opts), nn.GELU(), nn.Linear(2 * d_model, d_model, opts)))
  self:add_module("norm2", nn.LayerNorm(d_model, opts))
end

function CrossBlock:forward(x, context, context_pad)
  local a, w = self.cross:forward(x, context, context, { key_padding_mask = context_pad, need_weights = true })
  x = self.norm1(x + a)
  return self.norm2(x + self.ffn(x)), w
end

describe("tutorial: a cross-attention block", function()
  it("attends from 5 queries to 9 context tokens, never to padded ones", function()
    ember.manual_seed(5)
    local block = CrossBlock(16, 4, F64)
    local x = ember.randn({ 2, 5, 16 }, F64)
    local ctx = ember.randn({ 2, 9, 16 }, F64)
    local pad = ember.zeros({ 2, 9 }, "bool")
    pad[{ 2, { 7, 9 } }] = true -- the second context has 6 real tokens
    local y, w = block(x, ctx, pad)
    assert.are.equal(ember.Size { 2, 5, 16 }, y.shape)
    assert.are.equal(ember.Size { 2, 4, 5, 9 }, w.shape)
    assert.are.equal(0, w[{ 2, {}, {}, { 7, 9 } }]:abs():max():item())
    assert(max_abs_diff(w:sum(-1), ember.ones({ 2, 4, 5 }, F64)) < 1e-12)
    -- whatever the padded context holds, the output is the same
    local ctx2 = ctx:clone()
    ctx2[{ 2, { 7, 9 } }] = 100
    local y2 = block(x, ctx2, pad)
    assert(max_abs_diff(y, y2) < 1e-12)
  end)

  it("equals the hand-written cross attention with copied weights", function()
    ember.manual_seed(6)
    local hand, mha = HandMHA(8, 2, F64), nn.MultiHeadAttention(8, 2, F64)
    copy_weights(hand, mha)
    local q, kv = ember.randn({ 1, 3, 8 }, F64), ember.randn({ 1, 7, 8 }, F64)
    assert(max_abs_diff(mha:forward(q, kv, kv), (hand(q, kv, kv))) < 1e-12)
  end)
end)

-- ---------------------------------------------------------------------------
-- 4. A decoder layer with a triu causal mask
-- ---------------------------------------------------------------------------

local DecoderLayer = nn.Module:extend("DecoderLayer")

function DecoderLayer:__init(d_model, heads, opts)
  self:add_module("self_attn", nn.MultiHeadAttention(d_model, heads, opts))
  self:add_module("cross_attn", nn.MultiHeadAttention(d_model, heads, opts))
  self:add_module("norm1", nn.LayerNorm(d_model, opts))
  self:add_module("norm2", nn.LayerNorm(d_model, opts))
  self:add_module("norm3", nn.LayerNorm(d_model, opts))
  self:add_module("ffn", nn.Sequential(nn.Linear(d_model, 4 * d_model, opts), nn.ReLU(), nn.Linear(4 * d_model, d_model, opts)))
end

function DecoderLayer:forward(tgt, memory)
  local L = tgt:size(2)
  local mask = causal_mask(L, { dtype = tgt.dtype })
  local x = self.norm1(tgt + self.self_attn:forward(tgt, tgt, tgt, { attn_mask = mask }))
  x = self.norm2(x + self.cross_attn:forward(x, memory, memory))
  return self.norm3(x + self.ffn(x))
end

describe("tutorial: a decoder layer with a triu causal mask", function()
  it("is causal: a position's output does not depend on later targets", function()
    ember.manual_seed(9)
    local layer = DecoderLayer(16, 4, F64)
    local tgt = ember.randn({ 2, 6, 16 }, F64)
    local mem = ember.randn({ 2, 4, 16 }, F64)
    local y = layer(tgt, mem)
    local changed = tgt:clone()
    changed[{ {}, { 4, 6 } }] = ember.randn({ 2, 3, 16 }, F64)
    local y2 = layer(changed, mem)
    assert(max_abs_diff(y[{ {}, { 1, 3 } }], y2[{ {}, { 1, 3 } }]) < 1e-12)
    assert(max_abs_diff(y[{ {}, { 4, 6 } }], y2[{ {}, { 4, 6 } }]) > 1e-3)
  end)

  it("the mask is what torch.triu gives, and trains", function()
    local m = causal_mask(4)
    assert.are.same({ 0, -math.huge, -math.huge, -math.huge }, m[1]:totable())
    assert.are.same({ 0, 0, 0, 0 }, m[4]:totable())
    ember.manual_seed(2)
    local layer = DecoderLayer(8, 2)
    local head = nn.Linear(8, 5)
    local params = layer:parameters()
    for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
    local opt = optim.Adam(params, { lr = 1e-2 })
    local tgt, mem = ember.randn(4, 5, 8), ember.randn(4, 3, 8)
    -- a fixed label per position, 1..5
    local labels = ember.tensor({ { 1, 2, 3, 4, 5 }, { 5, 4, 3, 2, 1 }, { 2, 2, 4, 4, 1 }, { 3, 1, 5, 1, 3 } }, "int64")
    local loss_fn = nn.CrossEntropyLoss()
    local first, last
    for step = 1, 60 do
      opt:zero_grad()
      local logits = head(layer(tgt, mem))
      local loss = loss_fn(logits:reshape(20, 5), labels:reshape(20))
      loss:backward()
      optim.clip_grad_norm(params, 1.0)
      opt:step()
      if step == 1 then first = loss:item() end
      last = loss:item()
    end
    assert(last < 0.5 * first, ("loss %.3f -> %.3f"):format(first, last))
  end)
end)

-- ---------------------------------------------------------------------------
-- 5. The heatmap of attention weights
-- ---------------------------------------------------------------------------

describe("tutorial: attention heatmap", function()
  it("writes one PNG per head with the tokens on the axes", function()
    ember.manual_seed(4)
    local words = { "the", "cat", "sat", "on", "the", "mat" }
    local mha = nn.MultiHeadAttention(8, 2)
    local x = ember.randn(1, #words, 8)
    local _, w = mha:forward(x, x, x, { need_weights = true })
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local files = ember.attention_heatmap(w, dir .. "/attn_%d.png", { tokens_q = words, tokens_k = words, title = "self-attention" })
    assert.are.equal(2, #files)
    for _, path in ipairs(files) do
      local f = assert(io.open(path, "rb"))
      assert.are.equal("\137PNG", f:read(4))
      f:close()
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)
