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
