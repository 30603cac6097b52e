-- ember._variant_dense: the composed route of attention variants written in
-- Lua (lua/ember/variant.lua): the traced graphs of score, mask and sink
-- evaluated densely on [B, H, Lq, Lk] by core ops, which autograd
-- differentiates -- what need_weights and kernel = "composed" run, where a
-- device's kernel declines the call, and the reference the fused kernel is
-- tested against. variant.dense is this module's dense.
local ember = require "ember.core" -- the C module, which ember itself is (init.lua)
local errors = require "ember._errors"

local M = {}

-- Evaluates a graph on [B,H,Lq,Lk]-broadcast tensors (differentiable in s
-- and the captured tables, through core ops).
local function eval_dense(root, env)
  local memo = {}
  local function ev(n)
    local v = memo[n]
    if v then return v end
    local a = {}
    for i, x in ipairs(n.args) do a[i] = ev(x) end
    local op, dt = n.op, env.dtype
    if op == "CONST" then v = ember.full({ 1, 1, 1, 1 }, n.value, { dtype = dt, device = env.device })
    elseif op == "S" or op == "B" or op == "H" or op == "Q" or op == "K" then v = env[op]
    elseif op == "ADD" then v = a[1] + a[2]
    elseif op == "SUB" then v = a[1] - a[2]
    elseif op == "MUL" then v = a[1] * a[2]
    elseif op == "DIV" then v = a[1] / a[2]
    elseif op == "IDIV" then v = (a[1] / a[2]):floor()
    elseif op == "MOD" then v = a[1] - (a[1] / a[2]):floor() * a[2]
    elseif op == "POW" then v = a[1]:pow(a[2])
    elseif op == "MIN" then v = ember.minimum(a[1], a[2])
    elseif op == "MAX" then v = ember.maximum(a[1], a[2])
    elseif op == "CLAMP_LO" or op == "CLAMP_HI" then -- torch.clamp's gradients: the value's at the bound
      local keep = op == "CLAMP_LO" and a[1]:ge(a[2]) or a[1]:le(a[2])
      v = ember.where(keep, a[1], a[2])
    elseif op == "LT" then v = a[1]:lt(a[2]):to(dt)
    elseif op == "LE" then v = a[1]:le(a[2]):to(dt)
    elseif op == "EQ" then v = a[1]:eq(a[2]):to(dt)
    elseif op == "NE" then v = a[1]:ne(a[2]):to(dt)
    elseif op == "AND" then v = a[1]:ne(0):logical_and(a[2]:ne(0)):to(dt)
    elseif op == "OR" then v = a[1]:ne(0):logical_or(a[2]:ne(0)):to(dt)
    elseif op == "NOT" then v = a[1]:eq(0):to(dt)
    elseif op == "NEG" then v = -a[1]
    elseif op == "WHERE" then
      local shape = ember.broadcast_shapes and ember.broadcast_shapes(a[1].shape, a[2].shape, a[3].shape)
      v = ember.where(a[1]:ne(0), a[2], a[3])
      if shape then v = v:expand(shape) end
    elseif op == "LOAD" then v = env.load(n, a)
    else v = a[1][op:lower()](a[1]) end -- abs floor ceil exp log tanh sqrt sigmoid sign
    memo[n] = v
    return v
  end
  return ev(root)
end

-- Index tensors broadcast together -> the captured tensor's elements.
local function dense_load(env, caps, tensors, variant)
  return function(n, idx)
    local c = caps[n.cap + 1]
    local t = tensors[n.cap + 1]
    local shape = { 1, 1, 1, 1 }
    for _, x in ipairs(idx) do
      for d = 1, 4 do if x.shape[d] > shape[d] then shape[d] = x.shape[d] end end
    end
    if c.ndim == 0 then -- a 0-d table: its one value
      local x = t:reshape(1, 1, 1, 1)
      return x.dtype ~= env.dtype and x:to(env.dtype) or x
    end
    local flat = nil
    local stride = 1
    for d = c.ndim, 1, -1 do
      local x = idx[d]:expand(shape)
      local size = t.shape[d]
      local lo, hi = x:min():item(), x:max():item()
      if (x - x:floor()):abs():max():item() ~= 0 then
        errors.raise("attention variant '%s': '%s' indexed with a non-integer value in dim %d; use // or floor() to " ..
          "make an integer", variant, c.name, d)
      end
      if lo < 1 or hi > size then -- as the fused kernel says it, with the range the index ran over
        errors.raise("attention variant '%s': index %d out of range for dim %d of '%s' (size %d; the indices run " ..
          "%d..%d)", variant, hi > size and hi or lo, d, c.name, size, lo, hi)
      end
      local term = (x - 1) * stride
      flat = flat and flat + term or term
      stride = stride * size
    end
    local src = t:reshape(-1)
    if src.dtype ~= env.dtype then src = src:to(env.dtype) end
    local ids = (flat:reshape(-1) + 0.5):floor():long() + 1
    return src:index_select(1, ids):view(shape)
  end
end

-- ember.flex_attention's logsumexp and ember.create_block_mask's block map
-- evaluate the same graphs the same way (lua/ember/flex.lua)
M.eval, M.loader = eval_dense, dense_load

--- Runs an instance densely on [B, H, L, d] tensors (the composed route,
-- and the reference the fused kernel is tested against).
-- @tparam table inst what variant.trace returned
-- @tparam table tables the instance's table tensors, in order
-- @tparam table inputs the per-call tensors by name
-- @treturn Tensor out, Tensor weights
function M.dense(inst, tables, inputs, q, k, v, o)
  local def = inst.def
  local B, H, Lq, Lk = q.shape[1], q.shape[2], q.shape[3], k.shape[3]
  if k.shape[2] ~= H then -- grouped-query heads: each kv head serves H / Hkv query heads in a row
    local function rep(t)
      local Hkv, L, d = t.shape[2], t.shape[3], t.shape[4]
      return t:unsqueeze(3):expand(B, Hkv, H // Hkv, L, d):reshape(B, H, L, d)
    end
    k, v = rep(k), rep(v)
  end
  if B == 0 or Lq == 0 or Lk == 0 then
    -- attention over nothing is zeros, as the core's (core/src/attention.c):
    -- (q k^T) v is an empty sum, in the graph with zero gradients; the
    -- variant's functions are not run (they would index empty tensors)
    return q:matmul(k:transpose(3, 4)):matmul(v), ember.zeros({ B, H, Lq, Lk }, { dtype = q.dtype, device = q.device })
  end
  local out_dtype = q.dtype
  if q.dtype == "bfloat16" then q, k, v = q:float(), k:float(), v:float() end
  local dt, dev = q.dtype, q.device
  local opts = { dtype = dt, device = dev }
  local env = { dtype = dt, device = dev,
    B = ember.arange(1, B + 1, opts):view(B, 1, 1, 1), H = ember.arange(1, H + 1, opts):view(1, H, 1, 1),
    Q = ember.arange(Lk - Lq + 1, Lk + 1, opts):view(1, 1, Lq, 1), K = ember.arange(1, Lk + 1, opts):view(1, 1, 1, Lk) }
  local tensors = {}
  for i, c in ipairs(inst.caps) do
    if c.param then tensors[i] = tables[c.param] else tensors[i] = inputs[c.input] end
  end
  env.load = dense_load(env, inst.caps, tensors, def.name)
  local scale = o.scale or 1 / math.sqrt(q.shape[4])
  local s = q:matmul(k:transpose(3, 4)) * scale
  if inst.score_graph then
    env.S = s
    local raw = s
    s = eval_dense(inst.score_graph, env):expand(B, H, Lq, Lk)
    -- NaN or +inf made by the function is an error, as on the fused route (a
    -- score that was NaN already, from q and k, stays NaN, as there)
    local bad = s:isnan():logical_or(s:eq(math.huge)):logical_and(raw:isnan():logical_not())
    if bad:any():item() then
      local at = bad:reshape(-1):nonzero()[1][1]:item() - 1 -- 0-based flat index of the first
      local kk, qq = at % Lk, (at // Lk) % Lq
      local hh, bb = (at // (Lk * Lq)) % H, at // (Lk * Lq * H)
      local val = s[bb + 1][hh + 1][qq + 1][kk + 1]:item()
      errors.raise("attention variant '%s': the score function gave %s at b=%d h=%d q=%d k=%d", def.name,
        val ~= val and "NaN" or "+inf", bb + 1, hh + 1, qq + 1, kk + 1)
    end
  end
  if o.attn_mask and o.attn_mask.dtype ~= "bool" then s = s + o.attn_mask:to(dt) end
  local allowed = nil
  local function both(m) allowed = allowed and allowed:logical_and(m) or m end
  if inst.mask_graph then both(eval_dense(inst.mask_graph, env):ne(0):expand(B, H, Lq, Lk)) end
  if o.attn_mask and o.attn_mask.dtype == "bool" then both(o.attn_mask:expand(B, H, Lq, Lk)) end
  if o.key_padding_mask then both(o.key_padding_mask:logical_not():view(B, 1, 1, Lk):expand(B, H, Lq, Lk)) end
  if o.causal then
    both(env.K:le(env.Q):expand(B, H, Lq, Lk))
  end
  local sink = inst.sink_graph and eval_dense(inst.sink_graph, env):expand(B, H, Lq, 1) or nil
  if allowed then s = s:masked_fill(allowed:logical_not(), -math.huge) end
  -- a row whose every logit is -inf (hidden by the mask, or made -inf by the
  -- score function or a float mask; its sink too) sees nothing: output 0 and
  -- gradient 0, as the fused kernel gives (plugins/README.md), not softmax's NaN
  local logits = sink and ember.cat({ s, sink }, 4) or s
  local n = logits.shape[4]
  local dead = logits:eq(-math.huge):all(4):view(B, H, Lq, 1)
  if dead:any():item() then
    logits = logits:masked_fill(dead:expand(B, H, Lq, n), 0)
  else
    dead = nil
  end
  local p = logits:softmax(4)
  if sink then p = p:narrow(4, 1, Lk) end
  if dead then p = p * dead:logical_not():to(dt) end
  local w = p
  -- the core's dropout on the contiguous [B, H, Lq, Lk] probabilities:
  -- it reserves B*H*Lq*Lk Philox counters and keeps element (b,h,i,j) by
  -- the fused kernel's rule, so both routes drop the same weights under a seed
  if o.training and (o.dropout or 0) > 0 then p = ember.dropout(p:contiguous(), o.dropout, true) end
  local out = p:matmul(v)
  if out_dtype == "bfloat16" then out, w = out:to("bfloat16"), w:to("bfloat16") end
  return out, w:detach()
end

return M
