-- Fine-tuning a small pretrained decoder end to end, as a PyTorch + Hugging
-- Face user writes it: a Hugging Face folder (tests/fixtures/llama_family,
-- tests/fixtures/torch_load_llama) through Llama.from_pretrained, parts of
-- it frozen, parameter groups, a schedule, gradient accumulation, clipping,
-- bfloat16 autocast, a checkpoint resumed bit for bit, LoRA adapters written
-- by hand, Muon beside AdamW, save_pretrained and generation, and a torch.save
-- training checkpoint continued in ember against PyTorch 1.13's own steps
-- (tests/gen_probe_finetune.py, tests/fixtures/probe_finetune.lua).
local ember = require "ember"
local nn, optim, data = require "ember.nn", require "ember.optim", require "ember.data"
local F = nn.functional
local Llama = require("ember.models").Llama

local FAMILY = "tests/fixtures/llama_family/"

-- next-token cross-entropy of logits [B, L, V] for ids [B, L]
local function lm_loss(logits, ids)
  local V = logits.shape[3]
  return F.cross_entropy(logits[{ {}, { 1, -2 } }]:reshape(-1, V), ids[{ {}, { 2, -1 } }]:reshape(-1))
end

local function same_state(a, b, what)
  local sa, sb = a:state_dict(), b:state_dict()
  for k, v in pairs(sa) do
    assert(sb[k] ~= nil, what .. ": " .. k .. " missing")
    assert(ember.equal(v, sb[k]), what .. ": " .. k .. " differs")
  end
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  return d
end

-- a user's own LoRA layer around an nn.Linear: y = base(x) + scale * B(A(x))
local LoRA = nn.Module:extend("LoRALinear")
function LoRA:__init(base, r, alpha)
  self.base = base
  self.scale = alpha / r
  self.lora_A = nn.Parameter(ember.randn(r, base.in_features) * 0.1)
  self.lora_B = nn.Parameter(ember.zeros(base.out_features, r))
end
function LoRA:forward(x)
  return self.base(x) + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scale
end
function LoRA:merged()
  local lin = nn.Linear(self.base.in_features, self.base.out_features, { bias = self.base.bias ~= nil })
  ember.no_grad(function()
    lin.weight:copy_(self.base.weight + self.lora_B:matmul(self.lora_A) * self.scale)
    if self.base.bias ~= nil then lin.bias:copy_(self.base.bias) end
  end)
  return lin
end

describe("LoRA written by hand on q_proj / v_proj of a loaded model", function()
  it("trains the adapters only, their state dict alone, and merges into the same model", function()
    ember.manual_seed(0)
    local m = Llama.from_pretrained(FAMILY .. "qwen2") -- q, k, v with biases
    local frozen = {}
    for k, v in pairs(m:state_dict()) do frozen[k] = v:clone() end
    m:requires_grad_(false)
    for i = 0, m.config.num_hidden_layers - 1 do
      local attn = m:get_submodule(("model.layers.%d.self_attn"):format(i))
      attn.q_proj = LoRA(attn.q_proj, 4, 8)
      attn.v_proj = LoRA(attn.v_proj, 4, 8)
    end
    local params = {}
    for _, p in ipairs(m:parameters()) do if p.requires_grad then params[#params + 1] = p end end
    assert.are.equal(4 * m.config.num_hidden_layers, #params)
    local opt = optim.AdamW(params, { lr = 1e-2 })
    m:train()
    local ids = ember.randint(1, m.config.vocab_size + 1, { 2, 7 }, { dtype = "int64" })
    local first
    for _ = 1, 4 do
      local loss = lm_loss(m(ids), ids)
      first = first or loss:item()
      opt:zero_grad()
      loss:backward()
      opt:step()
    end
    assert(lm_loss(m(ids), ids):item() < first, "the adapters lower the loss")
    for name, p in pairs(m:named_parameters()) do
      assert.are.equal(name:match("%.lora_[AB]$") ~= nil, p.grad ~= nil, name .. "'s gradient")
    end
    -- the base weights are untouched, under their wrapped names
    local sd, adapters = m:state_dict(), {}
    for k, v in pairs(frozen) do
      local wrapped = k:gsub("%.([qv])_proj%.", ".%1_proj.base.")
      assert(ember.equal(v, sd[wrapped]), k .. " changed")
    end
    for k, v in pairs(sd) do if k:match("lora_") then adapters[k] = v end end
    local p = os.tmpname()
    ember.save(adapters, p)
    local back = ember.load(p)
    os.remove(p)
    local n = 0
    for k, v in pairs(back) do
      n = n + 1
      assert(ember.equal(v, adapters[k]), k)
    end
    assert.are.equal(4 * m.config.num_hidden_layers, n)
    -- torch's get_parameter reaches them by their state dict names
    assert(rawequal(m:get_parameter("model.layers.1.self_attn.v_proj.lora_B"), m.model.layers[2].self_attn.v_proj.lora_B))
    assert(rawequal(m:get_parameter("model.layers.0.self_attn.q_proj.base.bias"), m.model.layers[1].self_attn.q_proj.base.bias))
    assert.has_error(function() m:get_parameter("model.layers.0.self_attn.q_proj.weight") end,
      "Llama.get_parameter: 'model.layers.0.self_attn.q_proj' (LoRALinear) has no parameter 'weight'")
    -- merged: plain Linears again, the same logits and generation, and a Hugging Face folder
    m:eval()
    local out = m(ids)
    local gen = m:generate(ids, { max_new_tokens = 3 }) -- the KV-cached path through the wrappers
    local bf = ember.autocast("bfloat16", function() return m(ids) end)
    assert((bf:float() - out):abs():max():item() < 0.1 * out:abs():max():item())
    for i = 0, m.config.num_hidden_layers - 1 do
      local attn = m:get_submodule(("model.layers.%d.self_attn"):format(i))
      attn.q_proj, attn.v_proj = attn.q_proj:merged(), attn.v_proj:merged()
    end
    local merged = m(ids)
    local dm = (merged - out):abs():max():item()
    assert(dm < 1e-5 * out:abs():max():item(), "merged differs by " .. dm) -- float32 rounding
    local d = tmpdir()
    m:save_pretrained(d)
    local again = Llama.from_pretrained(d)
    os.execute("rm -rf '" .. d .. "'")
    assert(ember.equal(again(ids), merged))
    assert(ember.equal(again:generate(ids, { max_new_tokens = 3 }), gen))
  end)
end)

describe("fine-tuning Qwen3's last layer, as a Hugging Face training loop", function()
  local X = ember.randint(1, 54, { 20, 6 }, { dtype = "int64", generator = ember.Generator():manual_seed(5) })

  -- the model from the folder, all frozen but the last layer and the head;
  -- AdamW with weight decay on the matrices, none on norms and biases
  local function setup()
    local m = Llama.from_pretrained(FAMILY .. "qwen3"):train()
    m:requires_grad_(false)
    m.model.layers[m.config.num_hidden_layers]:requires_grad_(true)
    m.lm_head:requires_grad_(true)
    local decay, no_decay = {}, {}
    for name, p in pairs(m:named_parameters()) do
      if p.requires_grad then
        local list = (p.ndim < 2 or name:match("norm") or name:match("bias")) and no_decay or decay
        list[#list + 1] = p
      end
    end
    local opt = optim.AdamW({ { params = decay, weight_decay = 0.1 }, { params = no_decay, weight_decay = 0 } },
      { lr = 1e-3 })
    return m, opt, optim.WarmupCosine(opt, { warmup_steps = 2, total_steps = 10 })
  end

  local function splits()
    return data.random_split(data.TensorDataset(X), { 0.9, 0.1 }, ember.Generator():manual_seed(1))
  end

  -- optimizer steps from+1 .. to, two micro-batches each, under bfloat16 autocast
  local function train(m, opt, sched, from, to)
    local train_set = splits()[1]
    local loader = data.DataLoader(train_set, { batch_size = 3, shuffle = true, generator = ember.Generator():manual_seed(9) })
    local k, losses = 0, {}
    for ids in loader:iter() do
      k = k + 1
      if k > 2 * to then break end
      if k > 2 * from then
        local loss = ember.autocast("bfloat16", function() return lm_loss(m(ids), ids) / 2 end)
        loss:backward()
        if k % 2 == 0 then
          nn.utils.clip_grad_norm_(m:parameters(), 1.0)
          opt:step()
          sched:step()
          opt:zero_grad()
          losses[#losses + 1] = loss:item()
        end
      end
    end
    return losses
  end

  local function evaluate(m)
    local val = splits()[2]
    local ids = data.default_collate({ val[1][1], val[2][1] })
    m:eval()
    local loss = ember.inference_mode(function() return lm_loss(m(ids), ids) end)
    m:train()
    return loss:item()
  end

  it("random_split 90/10, frozen layers untouched, resumed from ember.save bit for bit", function()
    local tr, val = table.unpack(splits())
    assert.are.same({ 18, 2 }, { #tr, #val })
    local m, opt, sched = setup()
    local frozen = {}
    for k, v in pairs(m:state_dict()) do
      if not k:match("^model%.layers%.1%.") and not k:match("^lm_head") then frozen[k] = v:clone() end
    end
    train(m, opt, sched, 0, 2)
    local p = os.tmpname()
    ember.save({ model = m:state_dict(), optimizer = opt:state_dict(), scheduler = sched:state_dict(), step = 2 }, p)
    local before = evaluate(m)
    local rest = train(m, opt, sched, 2, 4)
    assert(evaluate(m) < before, "the last layer learns")
    for k, v in pairs(m:state_dict()) do
      if frozen[k] then assert(ember.equal(v, frozen[k]), k .. " is frozen but changed") end
    end
    for name, p2 in pairs(m:named_parameters()) do
      assert.are.equal(frozen[name] == nil, p2.requires_grad, name)
    end
    -- a fresh process's view: new model, optimizer and schedule from the file
    local ck = ember.load(p)
    os.remove(p)
    local m2, opt2, sched2 = setup()
    m2:load_state_dict(ck.model)
    opt2:load_state_dict(ck.optimizer)
    sched2:load_state_dict(ck.scheduler)
    assert.are.equal(2, ck.step)
    assert.are.same(rest, train(m2, opt2, sched2, ck.step, 4))
    same_state(m, m2, "resumed")
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
    assert.are.equal(evaluate(m), evaluate(m2))
  end)
end)

describe("Muon on the hidden 2-D weights and AdamW on the rest, one loop", function()
  it("steps both, resumes both bit for bit", function()
    local function setup()
      local m = Llama.from_pretrained(FAMILY .. "llama31"):train()
      local hidden, rest = {}, {}
      for name, p in pairs(m:named_parameters()) do
        local list = (p.ndim == 2 and name:match("^model%.layers%.")) and hidden or rest
        list[#list + 1] = p
      end
      return m, { optim.Muon(hidden, { lr = 0.02, weight_decay = 0 }), optim.AdamW(rest, { lr = 1e-3 }) }
    end
    local ids = ember.randint(1, 54, { 3, 6 }, { dtype = "int64", generator = ember.Generator():manual_seed(3) })
    local function steps(m, opts, n)
      local losses = {}
      for _ = 1, n do
        for _, o in ipairs(opts) do o:zero_grad() end
        local loss = lm_loss(m(ids), ids)
        loss:backward()
        for _, o in ipairs(opts) do o:step() end
        losses[#losses + 1] = loss:item()
      end
      return losses
    end
    local m, opts = setup()
    local w0 = m.model.layers[1].mlp.up_proj.weight:clone()
    steps(m, opts, 2)
    assert(not ember.equal(w0, m.model.layers[1].mlp.up_proj.weight))
    local p = os.tmpname()
    -- the objects themselves, as torch.save({"model": model, ...}) takes them: saved as their state dicts
    ember.save({ model = m, muon = opts[1], adamw = opts[2] }, p)
    local after = steps(m, opts, 2)
    assert(after[2] < after[1])
    local ck = ember.load(p)
    os.remove(p)
    local m2, opts2 = setup()
    m2:load_state_dict(ck.model)
    opts2[1]:load_state_dict(ck.muon)
    opts2[2]:load_state_dict(ck.adamw)
    assert.are.same(after, steps(m2, opts2, 2))
    same_state(m, m2, "resumed")
  end)
end)

describe("generation before and after fine-tuning, batch against one prompt at a time", function()
  -- two prompts of different lengths, left-padded into one batch
  local a = ember.tensor({ { 5, 9, 2 } }, { dtype = "int64" })
  local b = ember.tensor({ { 7, 3, 11, 4, 6 } }, { dtype = "int64" })
  local batch = ember.tensor({ { 1, 1, 5, 9, 2 }, { 7, 3, 11, 4, 6 } }, { dtype = "int64" })
  local mask = ember.tensor({ { true, true, false, false, false }, { false, false, false, false, false } }, { dtype = "bool" })

  -- a row of the batch's result without its left padding and the pads after its end
  local function row(g, i, lead, pad, want)
    local r = g[{ { i }, { lead + 1, -1 } }]
    local n = r.shape[2]
    while n > want.shape[2] and r[1][n]:item() == pad do n = n - 1 end
    return r[{ {}, { 1, n } }]
  end

  local function check(m, what)
    for _, o in ipairs {
      {}, { repetition_penalty = 1.3 }, { strategy = "sample", top_p = 1e-6 }, { stop = { { 3 }, { 7, 8 } }, pad_id = 2 },
      { repetition_penalty = 1.2, stop = { { 3 } }, pad_id = 2 },
    } do
      o.max_new_tokens = 10
      local ga, gb = m:generate(a, o), m:generate(b, o)
      o.prompt_padding_mask = mask
      local g = m:generate(batch, o)
      for i, want in ipairs { ga, gb } do
        local got = row(g, i, i == 1 and 2 or 0, o.pad_id or 1, want)
        assert(got.shape[2] == want.shape[2] and ember.equal(got, want),
          ("%s row %d: %s vs alone %s"):format(what, i, tostring(got), tostring(want)))
      end
      if o.strategy == "sample" then -- a nucleus of one token is greedy
        o.strategy, o.top_p, o.prompt_padding_mask = nil, nil, nil
        assert(ember.equal(m:generate(a, o), ga))
      end
    end
  end

  it("greedy, top_p, repetition_penalty and stop sequences on a fine-tuned Mistral and its save_pretrained folder", function()
    local m = Llama.from_pretrained(FAMILY .. "mistral")
    check(m, "pretrained")
    local before = m:generate(a, { max_new_tokens = 8 })
    local opt = optim.Lion(m:parameters(), { lr = 0.05 })
    m:train()
    local ids = ember.randint(1, m.config.vocab_size + 1, { 4, 8 }, { dtype = "int64", generator = ember.Generator():manual_seed(4) })
    for _ = 1, 3 do
      opt:zero_grad()
      lm_loss(m(ids), ids):backward()
      opt:step()
    end
    check(m, "fine-tuned")
    assert.is_true(m.training, "generate gives the training mode back")
    m:eval()
    local after = m:generate(a, { max_new_tokens = 8 })
    assert(not ember.equal(before, after), "fine-tuning changed the continuation")
    local d = tmpdir()
    m:save_pretrained(d)
    local again = Llama.from_pretrained(d)
    os.execute("rm -rf '" .. d .. "'")
    assert.are.same(m.config.sliding_window, again.config.sliding_window)
    assert(ember.equal(again:generate(a, { max_new_tokens = 8 }), after))
    check(again, "reloaded")
  end)
end)

describe("a torch.save training checkpoint continued in ember", function()
  it("loads the model, AdamW's state (0-based ids, a tensor step) and StepLR's, and takes PyTorch's next steps", function()
    local T = require("tests.lua.helpers.parity").T
    local FX = dofile("tests/fixtures/probe_finetune.lua")
    local ck = ember.load("tests/fixtures/probe_finetune_ckpt.pt")
    assert.are.equal(3, ck.step)
    local m = Llama(ck.config):to("float64")
    m:load_state_dict(ck.model)
    local opt = optim.AdamW(m:parameters(), { lr = 1e-2, betas = { 0.9, 0.95 }, weight_decay = 0.1 })
    opt:load_state_dict(ck.optimizer)
    assert.are.equal(3, opt.state[1].step)
    local sched = optim.StepLR(opt, { step_size = 2, gamma = 0.5 })
    sched:load_state_dict(ck.scheduler)
    m:train()
    for i, want in ipairs(FX.losses) do
      local ids = T(FX.batches[ck.step + i], "int64")
      opt:zero_grad()
      local loss = lm_loss(m(ids), ids)
      loss:backward()
      opt:step()
      sched:step()
      assert.are.equal(FX.lrs[i], opt.param_groups[1].lr)
      assert(math.abs(loss:item() - want) < 1e-12, ("step %d: loss %.17g, torch %.17g"):format(ck.step + i, loss:item(), want))
    end
    for k, v in pairs(m:state_dict()) do
      local e = (v - T(FX.final[k], "float64")):abs():max():item()
      assert(e < 1e-12, ("%s after the steps: %.3g from torch's"):format(k, e))
    end
  end)
end)

describe("named_parameters, named_buffers and state_dict iterate in registration order", function()
  -- parameter groups built with pairs(m:named_parameters()) must list the
  -- parameters in the same order in every process, or a resumed optimizer's
  -- state (by position) lands on other parameters of the same shape (the
  -- norms of a no-decay group)
  it("as PyTorch's OrderedDict, so groups made from them are the same in every run", function()
    local m = Llama.from_pretrained(FAMILY .. "qwen3")
    m.model.layers[1].self_attn:register_buffer("extra", ember.zeros(2))
    local function names(t)
      local list = {}
      for k in pairs(t) do list[#list + 1] = k end
      return list
    end
    local want = {}
    for _, n in ipairs(m:parameter_names()) do want[#want + 1] = n end
    assert.are.same(want, names(m:named_parameters()))
    local sd = m:state_dict()
    local keys = names(sd)
    assert.are.equal("model.embed_tokens.weight", keys[1])
    assert.are.equal("lm_head.weight", keys[#keys])
    local at = {}
    for i, k in ipairs(keys) do at[k] = i end
    assert.are.same({ "model.layers.0.self_attn.extra" }, names(m:named_buffers()))
    -- still a plain table: keys removed and added
    sd["lm_head.weight"] = nil
    sd.added = ember.zeros(1)
    keys = names(sd)
    assert.are.equal("added", keys[#keys])
    assert.is_nil(at.added)
    for _, k in ipairs(keys) do assert.are_not.equal("lm_head.weight", k) end
  end)
end)

describe("two corpora joined, batches from a BatchSampler, as torch.utils.data", function()
  it("ConcatDataset, RandomSampler, BatchSampler with torch's keywords, DataLoader{batch_sampler =}", function()
    local X = ember.randint(1, 54, { 10, 6 }, { dtype = "int64", generator = ember.Generator():manual_seed(2) })
    local ds = data.ConcatDataset({ data.TensorDataset(X[{ { 1, 4 } }]), data.TensorDataset(X[{ { 5, 10 } }]) })
    assert.are.equal(10, #ds)
    local function epoch(bs)
      local rows = {}
      for x in data.DataLoader(ds, { batch_sampler = bs }):iter() do rows[#rows + 1] = x end
      return rows
    end
    local sampler = function() return data.RandomSampler(ds, { generator = ember.Generator():manual_seed(1) }) end
    local a = epoch(data.BatchSampler(sampler(), 3, false))
    local b = epoch(data.BatchSampler(sampler(), { batch_size = 3, drop_last = false }))
    assert.are.equal(4, #a)
    assert.are.same({ 1, 6 }, { b[4].shape[1], b[4].shape[2] })
    for i = 1, 4 do assert(ember.equal(a[i], b[i])) end
    assert.are.equal(3, #data.BatchSampler(sampler(), { batch_size = 3, drop_last = true }))
    -- every row once
    local seen = 0
    for _, x in ipairs(a) do seen = seen + x:sum():item() end
    assert.are.equal(X:sum():item(), seen)
    local m = Llama.from_pretrained(FAMILY .. "qwen3"):train()
    local opt = optim.SGD(m:parameters(), { lr = 0.1 })
    for _, ids in ipairs(a) do
      opt:zero_grad()
      lm_loss(m(ids), ids):backward()
      opt:step()
    end
    -- torch's worker options, as a script with num_workers > 0 passes them: the same batches
    local loader = data.DataLoader(ds, { batch_sampler = data.BatchSampler(sampler(), 3, false), num_workers = 2,
      persistent_workers = true, prefetch_factor = 2, worker_init_fn = function() end, timeout = 0, pin_memory = true })
    local k = 0
    for x in loader:iter() do
      k = k + 1
      assert(ember.equal(x, a[k]))
    end
    assert.has_error(function() data.DataLoader(ds, { batch_size = 2, persistent_workers = 1 }) end,
      "DataLoader: persistent_workers must be a boolean, got number")
    assert.has_error(function() data.BatchSampler(sampler(), { batch_size = 3, droplast = true }) end,
      "BatchSampler: unknown option 'droplast' (options: batch_size, drop_last)")
  end)
end)

describe("from_pretrained(folder, {attention_dropout = p}), as Hugging Face's from_pretrained(..., attention_dropout=p)", function()
  it("drops attention weights in training mode only, and save_pretrained keeps it", function()
    local plain = Llama.from_pretrained(FAMILY .. "qwen3")
    local m = Llama.from_pretrained(FAMILY .. "qwen3", { attention_dropout = 0.5 })
    local ids = ember.tensor({ { 3, 9, 4, 1, 7, 2 } }, { dtype = "int64" })
    local want = plain(ids)
    assert(ember.equal(m(ids), want), "eval mode: no dropout")
    m:train()
    ember.manual_seed(1)
    local a = m(ids)
    ember.manual_seed(2)
    assert(not ember.equal(a, want), "training mode drops attention weights")
    assert(not ember.equal(a, m(ids)), "a new mask each forward")
    assert.are.same(m:generate(ids, { max_new_tokens = 4 }), plain:generate(ids, { max_new_tokens = 4 }))
    local d = tmpdir()
    m:save_pretrained(d)
    local again = Llama.from_pretrained(d)
    os.execute("rm -rf '" .. d .. "'")
    assert.are.equal(0.5, again.config.attention_dropout)
    assert.are.equal(0.0, plain.config.attention_dropout)
    assert.has_error(function() Llama.from_pretrained(FAMILY .. "qwen3", { attention_dropout = 1 }) end,
      "Llama.from_pretrained: config.attention_dropout must be a number in [0, 1), got 1")
  end)
end)

describe("gradient_checkpointing_enable under bfloat16 autocast, the embedding frozen", function()
  it("gives the gradients of the run without it, bit for bit", function()
    local m = Llama.from_pretrained(FAMILY .. "qwen3"):train()
    m.model.embed_tokens:requires_grad_(false)
    local ids = ember.randint(1, 54, { 2, 6 }, { dtype = "int64", generator = ember.Generator():manual_seed(6) })
    local function grads()
      m:zero_grad()
      -- a layer's output is float32 (the residual adds bfloat16 products to float32)
      ember.autocast("bfloat16", function() return lm_loss(m(ids), ids) end):backward()
      local g = {}
      for name, p in pairs(m:named_parameters()) do g[name] = p.grad and p.grad:clone() end
      return g
    end
    local want = grads()
    m:gradient_checkpointing_enable()
    local got = grads()
    for name, g in pairs(want) do assert(ember.equal(g, got[name]), name) end
    assert.is_nil(got["model.embed_tokens.weight"])
    -- backward() inside the autocast scope (PyTorch runs it, its backward
    -- ops taking the forward's dtypes): the same gradients, and autocast
    -- still on after it
    for _, ck in ipairs { true, false } do
      if not ck then m:gradient_checkpointing_disable() end
      m:zero_grad()
      local on
      ember.autocast("bfloat16", function()
        lm_loss(m(ids), ids):backward()
        on = ember.autocast.enabled()
      end)
      assert.is_true(on)
      for name, p in pairs(m:named_parameters()) do
        if want[name] then assert(ember.equal(want[name], p.grad), name .. " (backward inside autocast)") end
      end
    end
  end)
end)

describe("an optimizer state_dict in torch's numbering (0-based ids, a 0-dim tensor step)", function()
  -- ember's own state_dict renumbered as torch.optim writes it
  local function as_torch(sd)
    local state, groups = {}, {}
    for id, st in pairs(sd.state) do
      local s = {}
      for k, v in pairs(st) do s[k] = k == "step" and ember.tensor(v, { dtype = "float32" }) or v end
      state[id - 1] = s
    end
    for gi, g in ipairs(sd.param_groups) do
      local c = {}
      for k, v in pairs(g) do c[k] = v end
      c.params = {}
      for i, id in ipairs(g.params) do c.params[i] = id - 1 end
      groups[gi] = c
    end
    return { state = state, param_groups = groups }
  end

  for _, case in ipairs {
    { "AdamW", function(ps) return optim.AdamW(ps, { lr = 1e-2 }) end },
    { "Adafactor", function(ps) return optim.Adafactor(ps, { lr = 1e-2 }) end },
  } do
    it(case[1] .. " goes on as the run it was saved from", function()
      local function setup()
        local m = Llama.from_pretrained(FAMILY .. "qwen3"):train()
        return m, case[2]({ { params = m.model.layers[1]:parameters() }, { params = m.model.layers[2]:parameters() } })
      end
      local ids = ember.randint(1, 54, { 2, 6 }, { dtype = "int64", generator = ember.Generator():manual_seed(8) })
      local function step(m, opt)
        opt:zero_grad()
        lm_loss(m(ids), ids):backward()
        opt:step()
      end
      local m, opt = setup()
      step(m, opt)
      local sd = as_torch(opt:state_dict())
      local m2, opt2 = setup()
      m2:load_state_dict(m:state_dict())
      opt2:load_state_dict(sd)
      step(m, opt)
      step(m2, opt2)
      same_state(m, m2, case[1])
    end)
  end
end)

describe("a left-padded batch without its mask, as Hugging Face's generate infers it from pad_token_id", function()
  it("takes the given pad_id at the start of rows as padding", function()
    local m = Llama.from_pretrained(FAMILY .. "qwen3")
    local batch = ember.tensor({ { 2, 2, 5, 9, 4 }, { 7, 3, 11, 4, 6 } }, { dtype = "int64" })
    local mask = batch:eq(2)
    local want = m:generate(batch, { max_new_tokens = 6, pad_id = 2, prompt_padding_mask = mask })
    assert(ember.equal(m:generate(batch, { max_new_tokens = 6, pad_id = 2 }), want))
    local alone = m:generate(ember.tensor({ { 5, 9, 4 } }, { dtype = "int64" }), { max_new_tokens = 6, pad_id = 2 })
    assert(ember.equal(want[{ { 1 }, { 3, -1 } }], alone))
    -- from the config's pad_token_id (0-based), as Hugging Face's generation_config
    local c = Llama.from_pretrained(FAMILY .. "qwen3", { pad_token_id = 1 })
    assert(ember.equal(c:generate(batch, { max_new_tokens = 6 }), want))
    -- the pad id inside a prompt is a token there: no mask is made up
    local mid = ember.tensor({ { 5, 2, 9 } }, { dtype = "int64" })
    assert(ember.equal(m:generate(mid, { max_new_tokens = 4, pad_id = 2 }), m:generate(mid, { max_new_tokens = 4 })))
  end)
end)
