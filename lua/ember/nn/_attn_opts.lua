-- Shared by the attention-bearing layers: the options of one
-- MultiHeadAttention from a layer's options table.
--   attention = "standard" | "linear" | "local" | "relpos" | ...
--   attention_options = { <the variant's own options> }
--   rope, bias, dtype, device, kv_heads (grouped-query attention)
--   attention_dropout: dropout on the attention weights. Given, it is used
--     as is (a variant without dropout on its weights then refuses it).
--     Not given, it is the layer's dropout (default 0.1, as PyTorch's
--     layers) where the variant has dropout on its weights, and 0 where it
--     has none (linear attention): so giving dropout=0.1 explicitly behaves
--     exactly as leaving it out.
local ember = require "ember.nn._ember"
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local M = {}

-- Does the variant drop attention weights? (nil when it is unknown: the
-- module then reports the unknown name.)
local function has_dropout(name)
  local ok, v = pcall(ember.attention_variants, name)
  if not ok then return nil end
  return v.caps.dropout
end

-- The attention dropout a layer with `dropout` uses when none is given:
-- `dropout` itself, or 0 where the variant has no dropout on its weights
-- (then also true, so that a command line can say so).
function M.default_attention_dropout(attention, dropout)
  if (dropout or 0) ~= 0 and has_dropout(attention or "standard") == false then return 0, true end
  return dropout
end

-- A layer's options checked as Module.check_options does; a key that is
-- an option of the layer's attention variant (given as to
-- nn.MultiHeadAttention, which takes them directly) is refused saying
-- where it goes: attention_options (or cross_attention_options). The
-- known options come in one or more lists (a stack's own and its layer's).
function M.check_layer_options(who, opts, ...)
  if type(opts) == "table" then
    local set = {}
    for i = 1, select("#", ...) do
      for _, n in ipairs(select(i, ...)) do set[n] = true end
    end
    for key in pairs(opts) do
      if not set[key] then
        for _, field in ipairs { "attention", "cross_attention" } do
          local name = opts[field] or "standard"
          local ok, v = pcall(ember.attention_variants, name)
          if set[field] and ok and type(v) == "table" then
            for _, o in ipairs(v.options or {}) do
              if o.name == key then
                errors.raise("%s: '%s' is an option of attention '%s': give it as %s_options = {%s = ...}",
                  who, tostring(key), name, field, tostring(key))
              end
            end
          end
        end
      end
    end
  end
  opts = Module.check_options(who, opts, ...)
  for _, key in ipairs { "checkpoint", "norm_first" } do
    if opts[key] ~= nil and type(opts[key]) ~= "boolean" then
      errors.raise("%s: %s must be a boolean, got %s", who, key, type(opts[key]))
    end
  end
  return opts
end

-- PyTorch's form of a stack, cls(layer, num_layers [, norm]) (`self` is
-- the stack being made, `cls` its layer class): num_layers copies of
-- `layer` -- each made again from the layer's own constructor arguments,
-- then given its state dict, dtype, device and train/eval mode, so that
-- they start equal, as torch's copy.deepcopy makes them -- and `norm` (a
-- module, or {norm =} with torch's other keywords enable_nested_tensor and
-- mask_check, which change nothing here) as the final "norm", none when
-- left out (as torch's, whatever norm_first). The layer itself is not
-- part of the stack.
function M.stack_from_layer(self, who, cls, layer, num_layers, norm)
  if not layer:isinstance(cls) then
    errors.raise("%s: PyTorch's form (layer, num_layers [, norm]) takes an nn.%s, got an nn.%s", who, cls.__name,
      tostring(layer.__name))
  end
  if math.type(num_layers) ~= "integer" or num_layers < 1 then
    errors.raise("%s: num_layers must be a positive integer, got %s", who, tostring(num_layers))
  end
  if type(norm) == "table" and not Module.is_module(norm) then
    norm = Module.check_options(who, norm, { "norm", "enable_nested_tensor", "mask_check" }).norm
  end
  if norm ~= nil and not Module.is_module(norm) then
    errors.raise("%s: norm must be a module (nn.LayerNorm(d_model)) or nil, got %s", who, type(norm))
  end
  local args = rawget(layer, "_ctor_args")
  local sd = layer:state_dict()
  local p = layer:parameters()[1]
  local layers = require("ember.nn.Sequential")()
  for _ = 1, num_layers do
    local l = cls(table.unpack(args, 1, args.n))
    if p then l:to({ dtype = p.dtype, device = p.device }) end
    l:load_state_dict(sd)
    l:train(layer.training)
    layers:add(l)
  end
  self:add_module("layers", layers)
  if norm ~= nil then self:add_module("norm", norm) end
end

-- A forward's arguments after its inputs: ember's one options table, or
-- PyTorch's positional ones (layer(x, src_mask, src_key_padding_mask)),
-- named by `names` in torch's order, as that table.
function M.forward_options(who, names, ...)
  local n, first = select("#", ...), ...
  if n == 0 or (n == 1 and (first == nil or (type(first) == "table" and not ember.is_tensor(first)))) then
    return first
  end
  if n > #names then
    errors.raise("%s: takes an options table, or at most %d of PyTorch's positional arguments (%s), got %d", who,
      #names, table.concat(names, ", "), n)
  end
  local o = {}
  for i = 1, n do
    local v = select(i, ...)
    if type(v) == "table" and not ember.is_tensor(v) then
      errors.raise("%s: argument %d: an options table comes alone, not after PyTorch's positional arguments (%s)",
        who, i, table.concat(names, ", "))
    end
    o[names[i]] = v
  end
  return o
end

-- PyTorch's batch_first option of the Transformer layers: true (ember's
-- layout, [B, L, E], the default here) or false ([L, B, E] in and out).
function M.batch_first(who, opts)
  local v = opts.batch_first
  if v ~= nil and type(v) ~= "boolean" then errors.raise("%s: batch_first must be a boolean, got %s", who, type(v)) end
  return v ~= false
end

-- A layer's input whose last dim is not the width the layer was made for:
-- an error naming the layer's own argument (src, tgt, memory), not the
-- query or key of the attention inside. `hint` ends the message.
function M.check_width(who, name, t, width, hint)
  if Module.is_tensor(t) and t:dim() >= 1 and t.shape[t:dim()] ~= width then
    errors.raise("%s: %s must have %d features in its last dim, got %s%s", who, name, width, errors.shape_str(t),
      hint or "")
  end
end

-- [L, B, E] <-> [B, L, E] (a view) for a layer with batch_first = false; a
-- 2-d (unbatched) input, or nil, is left as it is, as PyTorch leaves it.
function M.flip_batch(x)
  if Module.is_tensor(x) and x.ndim == 3 then return x:transpose(1, 2) end
  return x
end

-- A Transformer layer's mask in PyTorch's 3-d layout [B * heads, L, S]
-- (torch.nn.TransformerEncoderLayer's src_mask, the decoder's tgt_mask and
-- memory_mask take it) as [B, heads, L, S], which nn.MultiHeadAttention
-- takes; any other mask (or nil) as it is. (For B = 1 the two layouts are
-- one: [heads, L, S] broadcasts as [1, heads, L, S].)
function M.torch_3d_mask(m, B, heads)
  if Module.is_tensor(m) and m.ndim == 3 and m.shape[1] == B * heads and B > 1 then
    return m:view(B, heads, m.shape[2], m.shape[3])
  end
  return m
end

-- The per-call tensors (variant_inputs) a variant written in Lua needs:
-- their names, sorted; {} for a variant that needs none (the C ones) and
-- for an unknown name (the module reports that).
function M.input_names(attention)
  pcall(ember.attention_variants, attention) -- loads the plugins (lua ones register then)
  local variant = require "ember.variant"
  local def = variant.get(attention or "standard")
  local names = {}
  for i, c in ipairs(def and variant.inputs_of(def) or {}) do names[i] = c.name end
  return names
end

-- The variants whose per-call tensors M.sequence_inputs makes, and what
-- they are: for rows that each hold one sequence (a classifier's batch,
-- an encoder's input; nothing packed), where both attend as standard
-- attention with the key padding mask does.
M.SEQUENCE_INPUTS = {
  document = "doc: one document per row (its padding, if any, another)",
  prefix_lm = "prefix: the whole row, seen both ways",
}

-- variant_inputs for `attention` on x [B, L, ...] whose rows each hold one
-- sequence, key_padding_mask bool [B, L] (true = padding) or nil; nil for
-- a variant that needs none. A variant it does not know is refused.
function M.sequence_inputs(attention, x, key_padding_mask)
  local names = M.input_names(attention)
  if #names == 0 then return nil end
  local B, L, device = x.shape[1], x.shape[2], x.device
  if attention == "document" then
    local doc = ember.ones({ B, L }, { dtype = "int64", device = device })
    if key_padding_mask ~= nil then doc = doc + key_padding_mask:long() end
    return { doc = doc }
  elseif attention == "prefix_lm" then
    return { prefix = ember.full({ B }, L, { dtype = "int64", device = device }) }
  end
  local known = {}
  for n in pairs(M.SEQUENCE_INPUTS) do known[#known + 1] = n end
  table.sort(known)
  errors.raise("attention '%s' needs the per-call tensors %s, which are made here for %s only", attention,
    table.concat(names, ", "), table.concat(known, " and "))
end

-- spec[k] = v for each of a layer's (or model config's) attention_options:
-- the variant's own options. One that is MultiHeadAttention's own (heads,
-- d_model, dropout, kv_heads, causal, ...) is refused, naming `where`: it
-- would silently replace what the layer itself set (a 2-head layer whose
-- attention ran 4 heads, an attention 8 wide in a 16-wide layer).
function M.merge_variant_options(spec, aopts, where)
  if aopts == nil then return spec end
  where = where or "attention_options"
  if type(aopts) ~= "table" then
    errors.raise("%s must be a table of the attention variant's options, got %s", where, type(aopts))
  end
  local own = {}
  for _, k in ipairs(require("ember.nn.MultiHeadAttention").OWN) do own[k] = true end
  for k, v in pairs(aopts) do
    if own[k] then
      errors.raise("%s.%s is the attention module's own option, not one of attention '%s' (it would replace the "
        .. "layer's %s): attention_options hold the variant's options only (ember.attention_variants(%q))",
        where, tostring(k), tostring(spec.attention or "standard"), tostring(k), tostring(spec.attention or "standard"))
    end
    spec[k] = v
  end
  return spec
end

function M.mha_spec(d_model, heads, opts, extra)
  local attention = opts.attention or "standard"
  local dropout = opts.attention_dropout
  if dropout == nil then dropout = M.default_attention_dropout(attention, opts.dropout or 0.1) end
  local spec = {
    d_model = d_model, heads = heads, attention = attention, dropout = dropout,
    bias = opts.bias, rope = opts.rope, dtype = opts.dtype, device = opts.device, kv_heads = opts.kv_heads,
  }
  M.merge_variant_options(spec, opts.attention_options, opts._attention_options_name)
  for k, v in pairs(extra or {}) do spec[k] = v end
  return spec
end

-- f(...), a cross-attention's call; when its variant lacks a per-call
-- tensor, the error names the option that carries them in the calling
-- module (memory_variant_inputs, image_variant_inputs), not variant_inputs.
function M.cross_call(option, f, ...)
  local res = table.pack(pcall(f, ...))
  if res[1] then return table.unpack(res, 2, res.n) end
  local msg = res[2]
  if type(msg) == "string" then msg = msg:gsub("%(variant_inputs = {", "(" .. option .. " = {") end
  error(msg, 0) -- as it was raised: at the user's line already
end

return M
