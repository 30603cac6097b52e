-- addition.lua -- an encoder-decoder Transformer learns 3-digit addition:
-- "535+61" -> "596".
--
--   ember scripts/addition.lua [--epochs 20] [--help]
--
-- The encoder (2 TransformerEncoderLayers) reads the problem's characters;
-- the decoder (2 TransformerDecoderLayers: causal self-attention, then
-- cross-attention to the encoder's output) writes the sum digit by digit
-- after a <bos> token and ends with <eos>. 50,000 training and 5,000
-- held-out problems that never overlap. The metric is exact match of the
-- greedy decoding (with a key/value cache) on the held-out problems.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local data = require "ember.data"
local cli = require "ember.cli"
local metrics = require "ember.metrics"
local progress = require "ember.progress"
local checkpoint = require "ember.checkpoint"
local generate = require "ember.generate"

local opts = cli.parse(arg, {
  script = "scripts/addition.lua",
  about = "Encoder-decoder Transformer learning 3-digit addition (exact match, greedy decoding).",
  examples = {"--attention linear", "--predict 535+61"},
  defaults = {epochs = 30, lr = 1e-3, batch = 128},
  options = {
    {"d_model", 128, "model width", integer = true, min = 1},
    {"heads", 4, "attention heads", integer = true, min = 1},
    {"enc_layers", 2, "encoder layers", integer = true, min = 1},
    {"dec_layers", 2, "decoder layers", integer = true, min = 1},
    {"ffn", 512, "feed-forward width", integer = true, min = 1},
    {"dropout", 0.0, "dropout", min = 0, below = 1},
    {"weight_decay", 0.01, "AdamW weight decay", min = 0},
    {"warmup", 400, "learning-rate warm-up steps", integer = true, min = 0},
    {"n_train", 50000, "training problems", integer = true, min = 1},
    {"n_test", 5000, "held-out problems", integer = true, min = 1},
    {"predict", nil, "solve one problem, e.g. 535+61, with the saved model", type = "string"},
  },
})
local world = opts.world -- one process, or the ranks of `mpirun -np N` (only rank 0 prints and writes)
opts.attention_dropout = cli.attention_dropout(opts)

local MODEL_KEYS = {"d_model", "heads", "enc_layers", "dec_layers", "ffn", "dropout", "attention", "attention_options"}
local SRC_LEN, TGT_LEN = 7, 6 -- "999+999"; <bos> + up to 4 digits + <eos>

local Seq2Seq = nn.Module:extend("Seq2Seq")

function Seq2Seq:__init(vocab_size, pad_id, o)
  local d = o.d_model
  self:add_module("embed", nn.Embedding(vocab_size, d, {padding_idx = pad_id}))
  self:add_module("src_pos", nn.LearnedPositionalEncoding(SRC_LEN, d))
  self:add_module("tgt_pos", nn.LearnedPositionalEncoding(TGT_LEN, d))
  local lopts = {dim_feedforward = o.ffn, dropout = o.dropout, attention_dropout = o.attention_dropout,
                 norm_first = true, attention = o.attention, attention_options = o.attention_opts}
  self.n_enc, self.n_dec = o.enc_layers, o.dec_layers
  for i = 1, o.enc_layers do self:add_module("enc" .. i, nn.TransformerEncoderLayer(d, o.heads, lopts)) end
  self:add_module("enc_norm", nn.LayerNorm(d))
  for i = 1, o.dec_layers do self:add_module("dec" .. i, nn.TransformerDecoderLayer(d, o.heads, lopts)) end
  self:add_module("dec_norm", nn.LayerNorm(d))
  self:add_module("out", nn.Linear(d, vocab_size))
end

-- src [B, Ls], src_mask bool [B, Ls] (true = padding) -> memory [B, Ls, d]
function Seq2Seq:encode(src, src_mask)
  local h = self.src_pos(self.embed(src))
  for i = 1, self.n_enc do h = self["enc" .. i](h, {key_padding_mask = src_mask}) end
  return self.enc_norm(h)
end

-- The decoder, in the form ember.generate wants: ids [B, Lt] (teacher
-- forcing; or, with o.cache, only the new tokens, the first at position
-- o.start) attending to o.memory -> logits [B, Lt, vocab].
function Seq2Seq:decode(ids, o)
  local h = self.tgt_pos(self.embed(ids), o.start or 1)
  for i = 1, self.n_dec do
    local cache
    if o.cache then
      o.cache[i] = o.cache[i] or {}
      cache = o.cache[i]
    end
    h = self["dec" .. i](h, o.memory, {memory_key_padding_mask = o.memory_key_padding_mask, cache = cache})
  end
  return self.out(self.dec_norm(h))
end

function Seq2Seq:forward(src, src_mask, tgt)
  return self:decode(tgt, {memory = self:encode(src, src_mask), memory_key_padding_mask = src_mask})
end

-- Greedy decoding with the key/value cache (ember.generate): one new token
-- per step, the encoder's keys/values computed once. Returns the strings.
function Seq2Seq:greedy(tok, src, src_mask)
  local B, v = src:size(1), tok.vocab
  local memory = ember.no_grad(function() return self:encode(src, src_mask) end)
  local ids = generate.generate(self, ember.full({B, 1}, v.bos_id, {dtype = "int64", device = src.device}), {
    max_new_tokens = TGT_LEN - 1, strategy = "greedy", eos_id = v.eos_id,
    memory = memory, memory_key_padding_mask = src_mask})
  local out = {}
  for b, row in ipairs(ids:totable()) do
    local s = {}
    for t = 2, #row do
      local id = row[t]
      if id == v.eos_id then break end
      s[#s + 1] = v:is_special(id) and "?" or v:token(id)
    end
    out[b] = table.concat(s)
  end
  return out
end

local tok = data.CharTokenizer.from_chars(data.addition.ALPHABET)
local pad = tok.vocab.pad_id

local function tensors(part)
  local src = tok:encode_batch(part.inputs, {max_len = SRC_LEN})
  local tgt_lists = {}
  for i, s in ipairs(part.targets) do tgt_lists[i] = tok:encode(s, {bos = true, eos = true}) end
  local tgt = data.pad(tgt_lists, pad, TGT_LEN)
  return src, tgt
end

local function exact_match(model, src, src_mask, targets, bs)
  model:eval()
  local ok = 0
  local first, count = world:shard_range(#targets) -- this rank's share of the problems
  for start = first, first + count - 1, bs do
    local n = math.min(bs, first + count - start)
    local got = model:greedy(tok, src:narrow(1, start, n), src_mask:narrow(1, start, n))
    for i = 1, n do if got[i] == targets[start + i - 1] then ok = ok + 1 end end
  end
  model:train()
  local total
  ok, total = world:sum(ok, count)
  return ok / total
end

local model_path = opts.out .. "/addition.safetensors"
if opts.predict then
  local a, b = opts.predict:match("^%s*(%d+)%s*%+%s*(%d+)%s*$")
  if not (a and #a <= 3 and #b <= 3) then
    cli.option_error("--predict takes a problem of two numbers of 1 to 3 digits, e.g. 535+61; got '%s'", opts.predict)
  end
  opts.predict = a .. "+" .. b
  local f = io.open(model_path, "rb")
  if not f then
    cli.option_error("--predict: no saved model at %s; train one first (ember scripts/addition.lua%s)", model_path,
      opts.out ~= "runs/addition" and (" --out " .. opts.out) or "")
  end
  f:close()
  local _, meta = checkpoint.load_tensors(model_path)
  cli.apply_metadata(opts, meta, MODEL_KEYS)
  opts.attention_opts = cli.parse_kv(opts.attention_options)
  local model = Seq2Seq(tok:size(), pad, opts)
  checkpoint.load(model_path, {model = model})
  model:to(opts.device)
  model:eval()
  local src, mask = tok:encode_batch({opts.predict}, {max_len = SRC_LEN})
  src, mask = src:to(opts.device), mask:to(opts.device)
  print(("%s = %s"):format(opts.predict, model:greedy(tok, src, mask)[1]))
  return
end

cli.prepare_out(opts, {"addition.safetensors", "metrics.csv", "loss.png", "accuracy.png"})
cli.smoke_note(opts, {"epochs", "n_train", "n_test"})
local n_train, n_test = opts.n_train, opts.n_test
if opts.smoke then n_train, n_test = 2000, 200 end
local probs = data.addition.generate{n_train = n_train, n_test = n_test, seed = opts.seed}
local src_tr, tgt_tr = tensors(probs.train)
local src_te, src_te_mask = tok:encode_batch(probs.test.inputs, {max_len = SRC_LEN})
local train = data.Dataset.new({src = src_tr, tgt = tgt_tr}, {pad = {src = pad, tgt = pad}}):to(opts.device)
local example = probs.train.inputs[1] .. " = " .. probs.train.targets[1]
probs.train = nil -- 100,000 Lua strings that every garbage collection would walk
collectgarbage()
src_te, src_te_mask = src_te:to(opts.device), src_te_mask:to(opts.device)
print(("data: %d training / %d held-out problems, e.g. %s"):format(train:size(), #probs.test.inputs, example))

ember.manual_seed(opts.seed)
local model = Seq2Seq(tok:size(), pad, opts):to(opts.device)
local net = world:wrap(model) -- DistributedDataParallel under mpirun
print(model)
print(("%d parameters, attention variant %s"):format(model:num_parameters(), opts.attention))
local epochs = opts.smoke and 1 or opts.epochs
local total_steps = opts.smoke and 40 or world:num_batches(train, opts.batch) * epochs
if opts.max_steps then total_steps = math.min(total_steps, opts.max_steps) end
local params = model:parameters()
local opt = optim.AdamW(params, {lr = opts.lr, weight_decay = opts.weight_decay})
local sched = optim.WarmupCosine(opt, {warmup_steps = math.min(opts.warmup, total_steps // 5), total_steps = total_steps})
local log_every = opts.smoke and 5 or 50
local log = metrics.new(opts.out .. "/metrics.csv", {"epoch", "step", "time", "lr", "loss", "token_acc", "exact_match"})

local eval_watch = cli.stopwatch() -- evaluation time is not training time
exact_match = eval_watch.wrap(exact_match)
local t0, step, losses = ember.clock(), 0, {}
for epoch = 1, epochs do
  local bar = progress.new{total = train:size(), label = ("epoch %d/%d"):format(epoch, epochs), unit = "ex"}
  local seen, ep, win = 0, metrics.Means(), metrics.Means() -- this epoch; since the last log line
  for b in world:batches(train, opts.batch, {shuffle = true, epoch = epoch, seed = opts.seed}) do
    step = step + 1
    local L = b.tgt:size(2)
    local tgt_in, tgt_out = b.tgt:narrow(2, 1, L - 1), b.tgt:narrow(2, 2, L - 1)
    local flat_out = tgt_out:reshape(-1)
    local logits, loss = cli.autocast(opts, function()
      local lg = net(b.src, b.src_mask, tgt_in)
      return lg, ember.cross_entropy(lg:reshape(-1, lg:size(3)), flat_out, {ignore_index = pad})
    end)
    local V = logits:size(3)
    opt:zero_grad()
    loss:backward()
    optim.clip_grad_norm(params, 1.0)
    opt:step()
    sched:step()
    local l, n = loss:item(), b.src:size(1)
    losses[#losses + 1] = l
    local real = flat_out:ne(pad)
    local ok = logits:reshape(-1, V):argmax(2):eq(flat_out):logical_and(real):long():sum():item()
    local n_tok = real:long():sum():item()
    for _, m in ipairs({ep, win}) do m:add("loss", l * n, n) m:add("tok_acc", ok, n_tok) end
    seen = seen + n * world.size
    bar:update(seen, {loss = ep:mean("loss"), tok_acc = ep:mean("tok_acc")})
    if step % log_every == 0 or step >= total_steps then -- the last, maybe shorter, window too
      win:reduce() -- over every rank
      log:log{epoch = epoch, step = step, time = ember.clock() - t0 - eval_watch.total, lr = opt.param_groups[1].lr,
              loss = win:mean("loss"), token_acc = win:mean("tok_acc")}
      win:reset()
    end
    if step >= total_steps then break end
  end
  bar:finish()
  ep:reduce()
  local em = exact_match(model, src_te, src_te_mask, probs.test.targets, 1000)
  log:log{epoch = epoch, step = step, time = ember.clock() - t0 - eval_watch.total, exact_match = em}
  print(("epoch %d: loss %.4f  token acc %.2f%%  held-out exact match %.2f%%  (%.0f s)"):format(
    epoch, ep:mean("loss"), ep:mean("tok_acc") * 100, em * 100, ember.clock() - t0 - eval_watch.total))
  if step >= total_steps then break end
end
local train_time = ember.clock() - t0 - eval_watch.total
local em = exact_match(model, src_te, src_te_mask, probs.test.targets, 1000)
print(("held-out exact match %.2f%% (greedy decoding) after %.1f s of training"):format(em * 100, train_time))
print(("RESULT ember_addition exact_match=%.2f%% train_s=%.3f steps=%d"):format(em * 100, train_time, step))
log:close()
if world.main then checkpoint.save(model_path, {model = model, metadata = cli.config_metadata(opts, MODEL_KEYS)}) end
print("saved " .. model_path)
if log:plot(opts.out .. "/loss.png", {x = "step", y = {"loss"}, title = "addition: training loss"})
   and log:plot(opts.out .. "/accuracy.png", {x = "step", y = {"token_acc", "exact_match"}, title = "addition: accuracy"}) then
  print(("plots: %s/loss.png, %s/accuracy.png"):format(opts.out, opts.out))
end
local sample = {"535+61", "999+999", "7+8"}
local src, mask = tok:encode_batch(sample, {max_len = SRC_LEN})
src, mask = src:to(opts.device), mask:to(opts.device)
model:eval()
for i, s in ipairs(model:greedy(tok, src, mask)) do print(("%s = %s"):format(sample[i], s)) end

if opts.smoke then cli.finish_smoke(losses) end
