--- nn.MultiheadAttention(embed_dim, num_heads [, {dropout=0, bias=true,
-- batch_first=false, kdim=, vdim=, add_bias_kv=false, add_zero_attn=false, dtype=, device=}]): torch.nn.MultiheadAttention's
-- spelling and calling convention, on ember's nn.MultiHeadAttention (the
-- same children, state dict and fused kernel), for code ported from PyTorch:
--
--  * inputs are sequence-first, [L, B, E], unless batch_first = true (as
--    torch's; ember's own nn.MultiHeadAttention is batch-first), or
--    unbatched [L, E];
--  * forward(query, key, value [, {key_padding_mask=, need_weights=true,
--    attn_mask=, average_attn_weights=true, is_causal=false}]) returns
--    (attn_output, attn_weights): the weights averaged over the heads,
--    [B, L, S], or per head [B, H, L, S] with average_attn_weights =
--    false, and nil with need_weights = false (the fused kernel's fast
--    route: ask for weights only when they are needed, as in PyTorch);
--  * a boolean attn_mask is PyTorch's: true = not allowed to attend; a
--    float one is added to the scores; [L, S] or [B * H, L, S];
--  * the weights are differentiable, as torch's (a loss on attention maps
--    reaches q, k and the q/k projections): while gradients are recorded
--    they are recomputed by core ops from the same projections (the fused
--    kernel's are constants); they are the probabilities before dropout,
--    and a row every key of which is masked has weights 0 (torch's: NaN);
--  * add_bias_kv appends learned rows bias_k, bias_v [1, 1, E] (PyTorch's
--    parameters, xavier_normal_) to every sequence's keys and values, and
--    add_zero_attn a zero key and value per head, the masks padded with a
--    column that masks nothing, as torch's; such a module attends by core
--    ops (no fused kernel), and is_causal is refused with them.
-- A torch.nn.MultiheadAttention state dict (in_proj_weight, ...) loads, as
-- into nn.MultiHeadAttention; the module's own state dict keeps ember's names
-- (q_proj.weight, ...), and `torch_state_dict()` gives torch's. torch's
-- attributes embed_dim, num_heads, head_dim, kdim, vdim, batch_first,
-- add_zero_attn and _qkv_same_embed_dim read as in PyTorch; in_proj_weight
-- (torch's joined [3 E, E] matrix) does not exist: q_proj, k_proj and v_proj
-- hold its three blocks.
-- @usage local mha = nn.MultiheadAttention(16, 4)        -- sequence-first, as torch's
-- local x = ember.randn(5, 2, 16)                         -- [L, B, E]
-- local out, w = mha(x, x, x)
-- print(out.shape, w.shape)   --> ember.Size{5, 2, 16}	ember.Size{2, 5, 5}
-- @classmod nn.MultiheadAttention
local Module = require "ember.nn.Module"
local MHA = require "ember.nn.MultiHeadAttention"
local errors = require "ember._errors"
local masks = require "ember.nn._masks"
local ember = require "ember.nn._ember"

local TorchMHA = MHA:extend("MultiheadAttention")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
TorchMHA.SIGNATURE = { sizes = { "embed_dim", "num_heads" },
  options = { "dropout", "bias", "add_bias_kv", "add_zero_attn", "kdim", "vdim", "batch_first" } }

function TorchMHA:__init(embed_dim, num_heads, opts)
  opts = Module.check_options("nn.MultiheadAttention", opts,
    { "dropout", "bias", "batch_first", "kdim", "vdim", "dtype", "device", "add_bias_kv", "add_zero_attn" })
  for _, k in ipairs { "add_bias_kv", "add_zero_attn", "batch_first" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
      errors.raise("nn.MultiheadAttention: %s must be a boolean, got %s", k, type(opts[k]))
    end
  end
  MHA.__init(self, embed_dim, num_heads, { dropout = opts.dropout, bias = opts.bias, kdim = opts.kdim,
    vdim = opts.vdim, dtype = opts.dtype, device = opts.device })
  self.batch_first = opts.batch_first == true
  self.add_zero_attn = opts.add_zero_attn == true
  -- torch's attribute names, read by ported code (mha.embed_dim, mha.num_heads)
  self.embed_dim, self.num_heads = self.d_model, self.heads
  self._qkv_same_embed_dim = self.kdim == self.d_model and self.vdim == self.d_model
  if opts.add_bias_kv then
    local init = require "ember.nn.weight_init"
    local t = { dtype = opts.dtype, device = opts.device }
    self:register_parameter("bias_k", init.xavier_normal_(ember.empty({ 1, 1, self.d_model }, t)))
    self:register_parameter("bias_v", init.xavier_normal_(ember.empty({ 1, 1, self.d_model }, t)))
  end
end

--- Attention of query over key/value, as torch.nn.MultiheadAttention.forward.
-- @tparam Tensor query [L, B, E] ([B, L, E] with batch_first; [L, E] unbatched)
-- @tparam Tensor key [S, B, kdim]
-- @tparam Tensor value [S, B, vdim]
-- @tparam[opt] table opts key_padding_mask (bool, true = padding; or float, added to the scores, as
-- PyTorch's), need_weights, attn_mask, average_attn_weights, is_causal
-- @treturn Tensor attn_output, shaped as query
-- @treturn ?Tensor attn_weights
function TorchMHA:forward(query, key, value, ...)
  local opts = require("ember.nn._attn_opts").forward_options("MultiheadAttention.forward",
    { "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal" }, ...)
  local who = "MultiheadAttention.forward"
  opts = Module.check_options(who, opts,
    { "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal" })
  Module.check_tensor_input(who, query)
  key = key == nil and query or key
  value = value == nil and key or value
  if query.ndim == 2 then -- unbatched [L, E], as PyTorch: one batch of one
    local o = {}
    for name, x in pairs(opts) do o[name] = x end
    local kpm = opts.key_padding_mask
    if Module.is_tensor(kpm) and kpm.ndim == 1 then o.key_padding_mask = kpm:unsqueeze(1) end
    local one = function(t) return Module.is_tensor(t) and t.ndim == 2 and t:unsqueeze(self.batch_first and 1 or 2) or t end
    local y, w = self:forward(one(query), rawequal(key, query) and one(query) or one(key),
      rawequal(value, key) and (rawequal(key, query) and one(query) or one(key)) or one(value), o)
    return y:squeeze(self.batch_first and 1 or 2), w and w:squeeze(1)
  end
  local batched = query.ndim == 3
  self:_check_torch_layout(who, query, key, value, opts)
  local q, k, v = query, key, value
  if batched and not self.batch_first then
    -- one transpose per distinct tensor: self-attention keeps its joined projection
    q = query:transpose(1, 2)
    k = rawequal(key, query) and q or key:transpose(1, 2)
    v = rawequal(value, key) and k or (rawequal(value, query) and q or value:transpose(1, 2))
  end
  local o = { key_padding_mask = opts.key_padding_mask, need_weights = opts.need_weights ~= false }
  if opts.is_causal then o.causal = true end
  local m = opts.attn_mask
  if m ~= nil then
    if not Module.is_tensor(m) then errors.raise("%s: attn_mask must be a tensor, got %s", who, type(m)) end
    if m.ndim == 3 and batched then -- PyTorch's [B * H, L, S]
      m = m:view(q.shape[1], self.heads, m.shape[2], m.shape[3]) -- checked by _check_torch_layout
    end
    if m.dtype == "bool" then o.block_mask = m else o.attn_mask = m end
  end
  local kpm = opts.key_padding_mask
  if batched and Module.is_tensor(kpm) and kpm.dtype ~= "bool" then
    -- PyTorch's float key_padding_mask [B, S] is added to the scores, as a float attn_mask
    local mask = o.attn_mask or (o.block_mask and o.block_mask:logical_not())
    o.attn_mask, o.key_padding_mask = masks.fold_float_padding(who, "key_padding_mask", mask, kpm, q.shape[1],
      k.shape[2], q.dtype)
    o.block_mask = nil
  end
  local y, w
  if self.bias_k ~= nil or self.add_zero_attn then
    if o.causal then errors.raise("%s: is_causal with add_bias_kv or add_zero_attn: give the mask as attn_mask", who) end
    y, w = self:_attend_extra(q, k, v, o)
  else
    y, w = MHA.forward(self, q, k, v, o)
    if w ~= nil and ember.is_grad_enabled() then w = self:_weights_with_grad(q, k, o) end
  end
  if batched and not self.batch_first then y = y:transpose(1, 2) end
  if w ~= nil and opts.average_attn_weights ~= false then w = w:mean(w.ndim - 2) end
  return y, w
end

-- The inputs and masks in the layout the user gave them (torch's, sequence-
-- first unless batch_first), checked before they are turned batch-first, so
-- that a wrong shape is reported as the user wrote it.
function TorchMHA:_check_torch_layout(who, query, key, value, opts)
  local bf, B, L = self.batch_first, nil, nil
  local bd, ld = bf and 1 or 2, bf and 2 or 1
  local function bad(name, t, l, dim) -- "[L, B, E=8]" or "[B, L, E=8]"
    errors.raise("%s: %s must be %s (batch_first = %s), got %s", who, name,
      (bf and "[B=%s, %s, %s]" or "[%s, B=%s, %s]"):format(bf and B or l, bf and l or B, dim), tostring(bf),
      Module.is_tensor(t) and errors.shape_str(t) or type(t))
  end
  if query.ndim ~= 3 or query.shape[3] ~= self.d_model then
    errors.raise("%s: query must be %s (batch_first = %s) or unbatched [L, E=%d], got %s", who,
      (bf and "[B, L, E=%d]" or "[L, B, E=%d]"):format(self.d_model), tostring(bf), self.d_model,
      errors.shape_str(query))
  end
  B, L = query.shape[bd], query.shape[ld]
  if not Module.is_tensor(key) or key.ndim ~= 3 or key.shape[bd] ~= B or key.shape[3] ~= self.kdim then
    bad("key", key, "S", "kdim=" .. self.kdim)
  end
  local S = key.shape[ld]
  if not Module.is_tensor(value) or value.ndim ~= 3 or value.shape[bd] ~= B or value.shape[ld] ~= S
      or value.shape[3] ~= self.vdim then
    bad("value", value, "S=" .. S, "vdim=" .. self.vdim)
  end
  local m = opts.attn_mask
  if Module.is_tensor(m) then
    if m.ndim == 3 and not (m.shape[1] == B * self.heads and m.shape[2] == L and m.shape[3] == S) then
      errors.raise("%s: a 3-d attn_mask is [batch * num_heads = %d, L, S], got %s (L = %d, S = %d)", who,
        B * self.heads, errors.shape_str(m), L, S)
    elseif m.ndim ~= 3 and not (m.ndim == 2 and m.shape[1] == L and m.shape[2] == S) then
      errors.raise("%s: attn_mask must be [L=%d, S=%d] or [batch * num_heads = %d, L, S], got %s", who, L, S,
        B * self.heads, errors.shape_str(m))
    end
  end
  local kpm = opts.key_padding_mask
  if Module.is_tensor(kpm) and (kpm.ndim ~= 2 or kpm.shape[1] ~= B or kpm.shape[2] ~= S) then
    errors.raise("%s: key_padding_mask must be [B=%d, S=%d], bool (true = padding) or float (added to the scores), "
      .. "got %s %s", who, B, S, errors.shape_str(kpm), kpm.dtype)
  end
end

-- The attention weights [B, H, L, S] of batch-first q [B, L, E] over k
-- [B, S, kdim] with the masks of `o` (attn_mask float, block_mask bool,
-- key_padding_mask bool [B, S], causal bottom-right), composed of core ops
-- so that they carry a gradient; a row with every key masked is 0, as the
-- kernel's.
function TorchMHA:_weights_with_grad(q, k, o)
  local B, L, S, H = q.shape[1], q.shape[2], k.shape[2], self.heads
  local hd = self.head_dim or self.d_model // H
  local qp = self.q_proj(q):view(B, L, H, hd):transpose(2, 3)
  local kp = self.k_proj(k):view(B, S, H, hd):transpose(2, 3)
  local s = qp:matmul(kp:transpose(3, 4)) * (1 / math.sqrt(hd))
  if o.attn_mask ~= nil then s = s + o.attn_mask:to(s.dtype) end
  local blocked = o.block_mask
  if o.key_padding_mask ~= nil then
    local kb = o.key_padding_mask:view(B, 1, 1, S)
    blocked = blocked and blocked:logical_or(kb) or kb
  end
  if o.causal then
    local c = ember.triu(ember.ones({ L, S }, { dtype = "bool", device = s.device }), S - L + 1)
    blocked = blocked and blocked:logical_or(c) or c
  end
  s = s:expand(B, H, L, S)
  if blocked ~= nil then s = s:masked_fill(blocked:expand(B, H, L, S), -math.huge) end
  local dead = s:eq(-math.huge):all(4):view(B, H, L, 1):expand(B, H, L, S)
  return s:masked_fill(dead, 0):softmax(4):masked_fill(dead, 0)
end

-- m (a mask, or nil) with one more column at the end that masks nothing.
local function pad_column(m)
  if m == nil then return nil end
  local shape = {}
  for i = 1, m.ndim do shape[i] = m.shape[i] end
  shape[m.ndim] = 1
  return ember.cat({ m, ember.zeros(shape, { dtype = m.dtype, device = m.device }) }, m.ndim)
end

-- add_bias_kv / add_zero_attn: attention of batch-first q [B, L, E] over k,
-- v [B, S, *] by core ops, as torch's multi_head_attention_forward (bias_k,
-- bias_v appended after the projections, a zero key/value per head after the
-- head split, the masks padded each time). Returns out [B, L, E] and the
-- weights [B, H, L, S'] (nil unless need_weights).
function TorchMHA:_attend_extra(q, k, v, o)
  local B, L, E, H = q.shape[1], q.shape[2], self.d_model, self.heads
  local hd = self.head_dim or E // H
  local qp, kp, vp = self.q_proj(q), self.k_proj(k), self.v_proj(v)
  local am, bm, kpm = o.attn_mask, o.block_mask, o.key_padding_mask
  if self.bias_k ~= nil then
    kp = ember.cat({ kp, self.bias_k:expand(B, 1, E) }, 2)
    vp = ember.cat({ vp, self.bias_v:expand(B, 1, E) }, 2)
    am, bm, kpm = pad_column(am), pad_column(bm), pad_column(kpm)
  end
  local S = kp.shape[2]
  local function heads(t, n) return t:reshape(B, n, H, hd):transpose(2, 3) end
  local qh, kh, vh = heads(qp, L), heads(kp, S), heads(vp, S)
  if self.add_zero_attn then
    local z = ember.zeros({ B, H, 1, hd }, { dtype = kh.dtype, device = kh.device })
    kh, vh = ember.cat({ kh, z }, 3), ember.cat({ vh, z }, 3)
    am, bm, kpm = pad_column(am), pad_column(bm), pad_column(kpm)
    S = S + 1
  end
  local s = qh:matmul(kh:transpose(3, 4)) * (1 / math.sqrt(hd))
  if am ~= nil then s = s + am:to(s.dtype) end
  local blocked = bm
  if kpm ~= nil then
    local kb = kpm:view(B, 1, 1, S)
    blocked = blocked and blocked:logical_or(kb) or kb
  end
  s = s:expand(B, H, L, S)
  if blocked ~= nil then s = s:masked_fill(blocked:expand(B, H, L, S), -math.huge) end
  local dead = s:eq(-math.huge):all(4):view(B, H, L, 1):expand(B, H, L, S)
  local w = s:masked_fill(dead, 0):softmax(4):masked_fill(dead, 0)
  local wd = (self.training and self.dropout > 0) and ember.dropout(w, self.dropout, true) or w
  local y = self.out_proj(wd:matmul(vh):transpose(2, 3):reshape(B, L, H * hd))
  return y, o.need_weights and w or nil
end

--- The sizes, for printing.
function TorchMHA:extra_repr()
  return MHA.extra_repr(self) .. (self.batch_first and ", batch_first=true" or "")
    .. (self.bias_k ~= nil and ", add_bias_kv=true" or "") .. (self.add_zero_attn and ", add_zero_attn=true" or "")
end

return TorchMHA
