--- nn.MoE(d_model, d_ff, num_experts, top_k [, opts]): a sparse
-- mixture-of-experts feed-forward block (Mixtral, Qwen-MoE, DeepSeek-MoE,
-- OLMoE), a drop-in for nn.FeedForward: [..., d_model] in, the same out.
-- Also `nn.MoE{d_model =, d_ff =, num_experts =, top_k =, ...options}`.
--
-- A router `gate` (nn.Linear(d_model, num_experts), no bias) scores every
-- token; each token goes to its `top_k` experts, and the output is the sum
-- of their outputs weighted by the routing weights. Two routing rules
-- (`router`):
--
--  * "topk_softmax" (default, Mixtral's MixtralSparseMoeBlock): the softmax
--    over the top-k logits (= softmax over all, top-k, renormalised);
--  * "softmax_topk" (Qwen-MoE, DeepSeek-MoE, OLMoE): the softmax over all
--    experts, then the top-k probabilities, renormalised to sum 1 only with
--    `norm_topk_prob = true` (default false, as those configs).
--
-- (With top_k = 1, Mixtral's rule gives every token the weight 1 and the
-- router learns from the auxiliary losses only; Switch Transformer's top-1
-- is "softmax_topk".)
--
-- Each expert is an nn.FeedForward(d_model, d_ff, {activation = "swiglu",
-- bias = false}): `w2(silu(w1 x) * w3 x)`. Routing is dropless and the same
-- in training and evaluation unless jitter_noise is set (no capacity, no
-- token dropped): the k * T
-- (token, expert) pairs are sorted by expert (argsort), gathered with
-- index_select, each expert runs once on its own rows, and the rows go back
-- to token order (the inverse permutation) to be summed with the routing
-- weights; the gradients reach the router through the top-k weights.
--
-- Shared experts (`shared_experts = n`, DeepSeek-MoE / Qwen2-MoE): one
-- always-on FeedForward of `shared_d_ff` (default n * d_ff) added to every
-- token's output, in `shared_experts`; with `shared_expert_gate = true` it
-- is scaled by Qwen2-MoE's sigmoid(shared_expert_gate(x)) (a Linear(d_model,
-- 1), no bias).
--
-- **After each forward** the module holds (as fairseq's `l_aux` and the
-- Hugging Face blocks' router logits; the forward returns only the output):
--
--  * `m.aux_loss`: the Switch/Mixtral load-balancing loss
--    `num_experts * sum_i f_i * P_i`, f_i the fraction of tokens routed to
--    expert i (each of a token's k choices counts: Hugging Face's
--    `load_balancing_loss_func`, which is `top_k` when balanced), P_i the
--    mean router probability of expert i (softmax over all experts);
--    differentiable through P;
--  * `m.z_loss`: ST-MoE's router z-loss, mean over tokens of
--    logsumexp(logits)^2;
--  * `m.tokens_per_expert`: an int64 [num_experts] tensor of the tokens each
--    expert took (for monitoring);
--  * `m.router_logits`: the [tokens, num_experts] logits.
--
-- With `m(x, {attention_mask = mask})` (Hugging Face's [B, L], 1 = token,
-- 0 = padding) the losses and counts take the tokens only; padding is
-- still routed, as theirs. Add the losses to yours, with Mixtral's
-- `router_aux_loss_coef` (0.02) or ST-MoE's z-loss coefficient (1e-3).
--
-- State dict: ember's names are `gate.weight`, `experts.0.linear1.weight`
-- (w1, the gate projection), `experts.0.linear3.weight` (w3, up),
-- `experts.0.linear2.weight` (w2, down), ..., `shared_experts.*`,
-- `shared_expert_gate.weight`. load_state_dict also takes Hugging Face's
-- layouts as they are: Mixtral's `gate.weight`, `experts.N.w1/w2/w3.weight`,
-- Qwen/DeepSeek/OLMoE's `experts.N.gate_proj/up_proj/down_proj.weight`,
-- Qwen2-MoE's `shared_expert.*` (DeepSeek's `shared_experts.*`).
-- `torch_state_dict()` writes Mixtral's names, Qwen's with `hf_names =
-- "qwen"` (Qwen2-MoE's `shared_expert`), or DeepSeek's / OLMoE's with
-- `hf_names = "deepseek"` (gate_proj, ..., `shared_experts`).
--
-- Options: router ("topk_softmax" | "softmax_topk"), norm_topk_prob,
-- activation (nn.FeedForward's, "swiglu"), bias (false), shared_experts (0),
-- shared_d_ff, shared_expert_gate (false), jitter_noise (0: Mixtral's
-- router_jitter_noise, in training only: the block's input, router's and
-- experts', times U(1 - j, 1 + j)), hf_names ("mixtral" | "qwen" | "deepseek"), dtype,
-- device. Errors name nn.MoE at the user's line: top_k outside
-- 1..num_experts, non-integer sizes, an input whose last dim is not d_model.
-- @usage local moe = nn.MoE(64, 128, 8, 2)            -- Mixtral's block: 8 experts, top-2
-- local y = moe(ember.randn(4, 10, 64))
-- print(y.shape, moe.tokens_per_expert:sum():item())   --> ember.Size{4, 10, 64}	80
-- local loss = y:pow(2):mean() + 0.02 * moe.aux_loss + 1e-3 * moe.z_loss
-- loss:backward()
-- local qwen = nn.MoE{d_model = 64, d_ff = 32, num_experts = 16, top_k = 4, router = "softmax_topk",
--   shared_experts = 2, shared_expert_gate = true, hf_names = "qwen"}
-- print(qwen(ember.randn(10, 64)).shape)               --> ember.Size{10, 64}
-- @classmod nn.MoE
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local error = errors.error -- raises at the user's line
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local FeedForward = require "ember.nn.FeedForward"
local ModuleList = require "ember.nn.ModuleList"

local MoE = Module:extend("MoE")

local OPTIONS = { "router", "norm_topk_prob", "activation", "bias", "shared_experts", "shared_d_ff",
                  "shared_expert_gate", "jitter_noise", "hf_names", "dtype", "device" }
local SIZES = { "d_model", "d_ff", "num_experts", "top_k" }

local function positive_integer(name, v)
  if math.type(v) ~= "integer" or v < 1 then
    error(("nn.MoE: %s must be a positive integer, got %s"):format(name, tostring(v)))
  end
end

function MoE:__init(d_model, d_ff, num_experts, top_k, opts, ...)
  require("ember._errors").no_extra("nn.MoE", { "d_model", "d_ff", "num_experts", "top_k", "opts" }, 1, d_model, d_ff, num_experts, top_k, opts, ...)
  if type(d_model) == "table" and not ember.is_tensor(d_model) and d_ff == nil then
    -- nn.MoE{d_model =, d_ff =, num_experts =, top_k =, options...}
    local all = d_model
    Module.check_options("nn.MoE", all, SIZES, OPTIONS)
    d_model, d_ff, num_experts, top_k, opts = all.d_model, all.d_ff, all.num_experts, all.top_k, {}
    for k, v in pairs(all) do
      if k ~= "d_model" and k ~= "d_ff" and k ~= "num_experts" and k ~= "top_k" then opts[k] = v end
    end
  end
  opts = Module.check_options("nn.MoE", opts, OPTIONS)
  local sizes = { d_model, d_ff, num_experts, top_k }
  for i = 1, 4 do positive_integer(SIZES[i], sizes[i]) end
  if top_k > num_experts then
    error(("nn.MoE: top_k (%d) must be at most num_experts (%d)"):format(top_k, num_experts))
  end
  local router = opts.router or "topk_softmax"
  if router ~= "topk_softmax" and router ~= "softmax_topk" then
    error(("nn.MoE: router must be \"topk_softmax\" (Mixtral) or \"softmax_topk\" (Qwen-MoE, DeepSeek, OLMoE), "
      .. "got %s"):format(tostring(router)))
  end
  local norm = opts.norm_topk_prob
  if norm ~= nil and type(norm) ~= "boolean" then
    error(("nn.MoE: norm_topk_prob must be a boolean, got %s"):format(type(norm)))
  end
  if router == "topk_softmax" and norm == false then
    error("nn.MoE: norm_topk_prob = false needs router = \"softmax_topk\" (Mixtral's topk_softmax always "
      .. "sums to 1)")
  end
  local n_shared = opts.shared_experts or 0
  if math.type(n_shared) ~= "integer" or n_shared < 0 then
    error(("nn.MoE: shared_experts must be an integer >= 0, got %s"):format(tostring(n_shared)))
  end
  if n_shared == 0 and (opts.shared_d_ff ~= nil or opts.shared_expert_gate) then
    error("nn.MoE: shared_d_ff and shared_expert_gate need shared_experts >= 1")
  end
  if opts.shared_d_ff ~= nil then positive_integer("shared_d_ff", opts.shared_d_ff) end
  local jitter = opts.jitter_noise or 0
  if type(jitter) ~= "number" or jitter < 0 or jitter >= 1 then
    error(("nn.MoE: jitter_noise must be a number in [0, 1), got %s"):format(tostring(jitter)))
  end
  self.jitter_noise = jitter
  local hf = opts.hf_names or "mixtral"
  if hf ~= "mixtral" and hf ~= "qwen" and hf ~= "deepseek" then
    error(("nn.MoE: hf_names must be \"mixtral\", \"qwen\" or \"deepseek\", got %s"):format(tostring(hf)))
  end
  self.d_model, self.d_ff, self.num_experts, self.top_k = d_model, d_ff, num_experts, top_k
  self.router, self.norm_topk_prob = router, router == "topk_softmax" or norm == true
  self.hf_names = hf
  local lin = { bias = false, dtype = opts.dtype, device = opts.device }
  local ff = { activation = opts.activation or "swiglu", bias = opts.bias or false, dtype = opts.dtype,
               device = opts.device }
  self:add_module("gate", Linear(d_model, num_experts, lin))
  local experts = ModuleList()
  for _ = 1, num_experts do experts:append(FeedForward(d_model, d_ff, ff)) end
  self:add_module("experts", experts)
  if n_shared > 0 then
    self:add_module("shared_experts", FeedForward(d_model, opts.shared_d_ff or n_shared * d_ff, ff))
    if opts.shared_expert_gate then self:add_module("shared_expert_gate", Linear(d_model, 1, lin)) end
  end
end

-- The routing weights [T, k] and the 1-based experts [T, k] of the logits
-- [T, E], and the router probabilities [T, E] (softmax over all experts).
local function route(self, logits)
  local probs = logits:softmax(-1)
  local w, idx
  if self.router == "topk_softmax" then
    local top
    top, idx = logits:topk(self.top_k, -1)
    w = top:softmax(-1)
  else
    w, idx = probs:topk(self.top_k, -1)
    if self.norm_topk_prob then w = w / w:sum(-1, true) end
  end
  return w, idx, probs
end

-- The auxiliary losses (Switch/Mixtral load balancing, ST-MoE's z-loss)
-- and tokens_per_expert, over the tokens where mask [T] is nonzero (all
-- without a mask), as transformers' load_balancing_loss_func with an
-- attention_mask. rawset: a tensor that requires grad assigned to a field
-- would become a parameter.
local function router_losses(self, rl, probs, flat, counts, T, mask)
  local E, k = self.num_experts, self.top_k
  local n, lse2 = T, rl:logsumexp(-1):pow(2)
  local P, z = probs:sum(1), lse2:sum()
  if mask then
    n = mask:sum():item()
    counts = (flat - 1):bincount { minlength = E, weights = mask:unsqueeze(2):expand(T, k):reshape(T * k) }
    counts = counts:round():to("int64")
    P, z = (probs * mask:unsqueeze(2)):sum(1), (lse2 * mask):sum()
  end
  if n == 0 then -- no token: zero losses (a mean over no token would be NaN)
    rawset(self, "aux_loss", P:sum() * 0)
    rawset(self, "z_loss", z * 0)
  else
    rawset(self, "aux_loss", (counts:to(P.dtype) * P):sum() * (E / (n * n)))
    rawset(self, "z_loss", z / n)
  end
  rawset(self, "tokens_per_expert", counts)
end

--- The block's output for x [..., d_model] (unbatched [L, d] and batched
-- [B, L, d] alike), of x's shape; sets `aux_loss`, `z_loss`,
-- `tokens_per_expert` and `router_logits` (see the class's notes).
-- @tparam Tensor x [..., d_model]
-- @tparam[opt] table opts `attention_mask`: x's leading shape ([B, L]), 1
-- (or true) for a token, 0 for padding, as Hugging Face's: padding is still
-- routed (its output is computed), but the auxiliary losses and
-- tokens_per_expert count the tokens only
-- @treturn Tensor [..., d_model]
-- @usage local moe = nn.MoE(16, 32, 4, 2, {router = "softmax_topk"})
-- local y = moe(ember.randn(6, 16))
-- print(y.shape, moe.aux_loss.shape)   --> ember.Size{6, 16}	ember.Size{}
-- local pad = ember.tensor({{1, 1, 1}, {1, 0, 0}})   -- the second sequence has one token
-- moe(ember.randn(2, 3, 16), {attention_mask = pad})
-- print(moe.tokens_per_expert:sum():item())   --> 8
function MoE:forward(x, opts)
  Module.check_float_input("MoE.forward", x)
  opts = Module.check_options("MoE.forward", opts, { "attention_mask" })
  local d, E, k = self.d_model, self.num_experts, self.top_k
  if x:dim() < 1 or x:size(-1) ~= d then
    error(("nn.MoE: expected an input [..., d_model = %d], got %s"):format(d, errors.shape_str(x)))
  end
  local T = x:numel() // d
  local mask = opts.attention_mask
  if mask ~= nil then
    local ok = ember.is_tensor(mask) and mask:dim() == x:dim() - 1
    for i = 1, x:dim() - 1 do ok = ok and mask:size(i) == x:size(i) end
    if not ok then
      local lead = {}
      for i = 1, x:dim() - 1 do lead[i] = x:size(i) end
      error(("nn.MoE: attention_mask must be a tensor of the input's leading shape [%s] (1 = token, 0 = padding), "
        .. "got %s"):format(table.concat(lead, ", "), ember.is_tensor(mask) and errors.shape_str(mask) or type(mask)))
    end
  end
  local h = x:reshape(T, d)
  if self.training and self.jitter_noise > 0 then -- Mixtral's router_jitter_noise: inputs * U(1 - j, 1 + j)
    h = h * (ember.rand_like(h) * (2 * self.jitter_noise) + (1 - self.jitter_noise))
  end
  local logits = self.gate(h)
  -- the router in float32 at least (Hugging Face's softmax(..., dtype=torch.float) under bfloat16)
  local rl = logits.dtype == "bfloat16" and logits:float() or logits
  local w, idx, probs = route(self, rl)
  if mask then mask = mask:reshape(T):to(probs.dtype) end
  local flat = idx:reshape(T * k)                               -- expert of each (token, choice), 1-based
  local counts = (flat - 1):bincount { minlength = E }           -- tokens per expert
  local order = flat:argsort()                                  -- stable: grouped by expert
  local token = ember.arange(1, T + 1, { dtype = "int64", device = x.device }):unsqueeze(2)
      :expand(T, k):reshape(T * k):index_select(1, order)      -- the token of each sorted row
  local rows = h:index_select(1, token)
  local n = counts:tolist()
  local outs, start = {}, 1
  for e = 1, E do
    if n[e] > 0 then
      outs[#outs + 1] = self.experts[e](rows:narrow(1, start, n[e]))
      start = start + n[e]
    end
  end
  -- back in (token, choice) order: the inverse permutation, then each token's
  -- k rows weighted and summed; index_select's backward
  -- is an index_add, cheaper than index_add's own (a gather over [T * k, d])
  local ys = #outs == 0 and rows or #outs == 1 and outs[1] or ember.cat(outs, 1) -- none: no token
  ys = ys:index_select(1, order:argsort()):view(T, k, d)
  local out = (ys * w:unsqueeze(3)):sum(2):to(x.dtype)
  if self.shared_experts then
    local s = self.shared_experts(h)
    if self.shared_expert_gate then s = self.shared_expert_gate(h):sigmoid() * s end
    out = out + s:to(x.dtype)
  end
  router_losses(self, rl, probs, flat, counts, T, mask)
  rawset(self, "router_logits", logits)
  return out:reshape(x.shape)
end

-- Hugging Face's names of an expert's projections: ember's (FeedForward's) -> theirs.
local HF = { mixtral = { linear1 = "w1", linear3 = "w3", linear2 = "w2" },
             qwen = { linear1 = "gate_proj", linear3 = "up_proj", linear2 = "down_proj" } }
HF.deepseek = HF.qwen -- the same projections; the shared MLP keeps the plural `shared_experts`

--- Loads Hugging Face's names as they are: Qwen2-MoE's `shared_expert.*` as
-- `shared_experts.*`, and each expert's w1/w3/w2 (Mixtral) or
-- gate_proj/up_proj/down_proj (Qwen, DeepSeek, OLMoE) through
-- nn.FeedForward's map; then Module.upgrade_state_dict.
-- @tparam table sd name -> tensor (relative to this module)
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer
function MoE:upgrade_state_dict(sd, prefix)
  local out = {}
  for key, v in pairs(sd) do
    local rest = type(key) == "string" and key:match("^shared_expert%.(.+)$")
    if rest and sd["shared_experts." .. rest] == nil then out["shared_experts." .. rest] = v else out[key] = v end
  end
  return Module.upgrade_state_dict(self, out, prefix)
end

--- torch_state_dict's hook: each expert's linear1/linear3/linear2 under
-- Mixtral's w1/w3/w2, or gate_proj/up_proj/down_proj with `hf_names =
-- "qwen"` (and Qwen2-MoE's `shared_expert`) or `"deepseek"` (DeepSeek's and
-- OLMoE's names: `shared_experts` stays).
-- @tparam table sd name -> tensor
-- @treturn table
-- @usage local moe = nn.MoE(8, 16, 2, 1)
-- print(moe:torch_state_dict()["experts.1.w2.weight"].shape)   --> ember.Size{8, 16}
function MoE:to_torch_names(sd)
  local map, out = HF[self.hf_names], {}
  for key, v in pairs(sd) do
    local head, lin, tail = key:match("^(experts%.%d+%.)(linear%d)(%..+)$")
    if not head then head, lin, tail = key:match("^(shared_experts%.)(linear%d)(%..+)$") end
    local name = head and map[lin] and (head .. map[lin] .. tail) or key
    if self.hf_names == "qwen" then name = name:gsub("^shared_experts%.", "shared_expert.") end
    out[name] = v
  end
  return out
end

--- The sizes and routing rule, for printing.
function MoE:extra_repr()
  return ("d_model=%d, d_ff=%d, num_experts=%d, top_k=%d, router=%s%s"):format(self.d_model, self.d_ff,
    self.num_experts, self.top_k, self.router,
    self.router == "softmax_topk" and (", norm_topk_prob=" .. tostring(self.norm_topk_prob)) or "")
end

-- C errors (bad shapes, dtypes) name the user's line, not this file's.
MoE.forward = errors.wrap(MoE.forward)

return MoE
