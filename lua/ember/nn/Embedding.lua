--- nn.Embedding(num_embeddings, dim [, {padding_idx=, max_norm=, norm_type=2,
-- scale_grad_by_freq=false, sparse=false, dtype=, device=}]):
-- a lookup table indexed by 1-based int64 ids, weight ~ N(0, 1) as
-- torch.nn.Embedding. With padding_idx (1-based; negative counts from the
-- end, -1 the last row) that row starts at zero, its outputs are zero and it
-- never receives a gradient. As torch's: max_norm renormalises, in place and
-- before the lookup, each looked-up row whose norm_type-norm exceeds it (to
-- max_norm / (norm + 1e-7) times itself); scale_grad_by_freq divides each
-- row's gradient by how often its id occurs in the call's ids. sparse
-- gradients are refused (sparse = true).
-- `nn.Embedding.from_pretrained(weight [, freeze=true | {freeze=, padding_idx=, max_norm=, ...}])`
-- wraps a given [num, dim] weight (kept as given, padding row included),
-- frozen unless freeze = false, as torch's.
-- Errors: ids must be int64 and within 1..num_embeddings (the message names the bad id).
-- @usage local emb = nn.Embedding(100, 16, {padding_idx = 1})
-- local x = emb(ember.tensor({{5, 7, 1}}, "int64"))   -- [1, 3, 16]
-- local glove = nn.Embedding.from_pretrained(ember.randn(10, 4))   -- frozen
-- print(glove.weight.requires_grad)   --> false
-- @classmod nn.Embedding
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Embedding = Module:extend("Embedding")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Embedding.SIGNATURE = { sizes = { "num_embeddings", "embedding_dim" },
  options = { "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse" } }

-- The sizes, padding_idx and the weight ~ N(0, 1) with the padding row
-- zero (PyTorch's reset_parameters), shared with nn.EmbeddingBag; name: the
-- module's, for errors.
function Embedding._init_weight(self, name, num_embeddings, embedding_dim, opts)
  for _, f in ipairs { { "num_embeddings", num_embeddings }, { "embedding_dim", embedding_dim } } do
    if math.type(f[2]) ~= "integer" or f[2] < 1 then
      error(("%s: %s must be a positive integer, got %s"):format(name, f[1], tostring(f[2])))
    end
  end
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  local w = ember.randn({ num_embeddings, embedding_dim }, { dtype = opts.dtype, device = opts.device })
  local pad = Embedding._padding_idx(name, opts.padding_idx, num_embeddings)
  if pad ~= nil then
    self.padding_idx = pad
    w[pad] = 0
  end
  self:register_parameter("weight", w)
end

-- padding_idx checked (an id in 1..n, or -n..-1 from the end, as PyTorch's
-- negative ones), as a 1-based id; nil stays nil.
function Embedding._padding_idx(name, pad, n)
  if pad == nil then return nil end
  if math.type(pad) ~= "integer" or pad == 0 or pad < -n or pad > n then
    error(("%s: padding_idx must be an id in 1..%d, got %s (negative ids -%d..-1 count from the end)"):format(name, n,
      tostring(pad), n), 3)
  end
  return pad < 0 and n + pad + 1 or pad
end

local LOOKUP_OPTIONS = { "max_norm", "norm_type", "scale_grad_by_freq", "sparse" }

-- max_norm, norm_type, scale_grad_by_freq and sparse checked (the module's
-- and nn.functional.embedding's); returns the table of the lookup options.
function Embedding._lookup_options(who, o)
  local r = { max_norm = o.max_norm, norm_type = o.norm_type or 2, scale_grad_by_freq = o.scale_grad_by_freq or false }
  if r.max_norm ~= nil and (type(r.max_norm) ~= "number" or not (r.max_norm > 0)) then
    error(("%s: max_norm must be a number > 0, got %s"):format(who, tostring(r.max_norm)), 3)
  end
  if type(r.norm_type) ~= "number" or not (r.norm_type > 0) then
    error(("%s: norm_type must be a number > 0, got %s"):format(who, tostring(r.norm_type)), 3)
  end
  if type(r.scale_grad_by_freq) ~= "boolean" then
    error(("%s: scale_grad_by_freq must be a boolean, got %s"):format(who, type(r.scale_grad_by_freq)), 3)
  end
  if o.sparse ~= nil and o.sparse ~= false then
    error(("%s: sparse gradients are not supported (sparse = %s): ember's gradients are dense"):format(who,
      tostring(o.sparse)), 3)
  end
  return r
end

function Embedding:__init(num_embeddings, dim, opts)
  opts = Module.check_options("nn.Embedding", opts, { "padding_idx", "dtype", "device" }, LOOKUP_OPTIONS)
  Embedding._init_weight(self, "Embedding", num_embeddings, dim, opts)
  local o = Embedding._lookup_options("nn.Embedding", opts)
  self.max_norm, self.norm_type, self.scale_grad_by_freq = o.max_norm, o.norm_type, o.scale_grad_by_freq
end

--- An embedding holding `embeddings` as its weight, as torch.nn.Embedding.from_pretrained.
-- @tparam Tensor embeddings [num_embeddings, embedding_dim], kept as given
-- @tparam[opt=true] bool|table freeze whether the weight is frozen (no gradient), or a table
-- {freeze = true, padding_idx =, max_norm =, norm_type =, scale_grad_by_freq =, sparse =}
-- @treturn nn.Embedding
function Embedding.from_pretrained(embeddings, freeze)
  local who = "nn.Embedding.from_pretrained"
  local opts = type(freeze) == "table" and Module.check_options(who, freeze, { "freeze", "padding_idx" }, LOOKUP_OPTIONS)
    or { freeze = freeze }
  if opts.freeze == nil then opts.freeze = true end
  if type(opts.freeze) ~= "boolean" then error(who .. ": freeze must be a boolean, got " .. type(opts.freeze), 2) end
  if not ember.is_tensor(embeddings) or embeddings.ndim ~= 2 then
    error(who .. ": embeddings must be a 2-d tensor [num_embeddings, embedding_dim], got "
      .. (ember.is_tensor(embeddings) and embeddings.ndim .. "-d" or type(embeddings)), 2)
  end
  local n, d = embeddings.shape[1], embeddings.shape[2]
  local m = Embedding(n, d, { padding_idx = opts.padding_idx, max_norm = opts.max_norm, norm_type = opts.norm_type,
    scale_grad_by_freq = opts.scale_grad_by_freq, sparse = opts.sparse, dtype = embeddings.dtype,
    device = embeddings.device })
  m.weight = embeddings:detach():clone()
  m.weight:requires_grad_(not opts.freeze) -- a parameter assigned is made trainable: frozen after
  return m
end

--- The rows of the weight for int64 ids (1-based): [...] ids give [..., dim].
-- @tparam Tensor ids int64, 1-based
-- @treturn Tensor
function Embedding:forward(ids)
  return Embedding._lookup("Embedding.forward", self.weight, ids, self.padding_idx, self)
end

-- The rows of weight for ids (checked int64 here), padding_idx's rows
-- without a gradient (PyTorch's): the module's forward and
-- nn.functional.embedding's. who: the caller, for errors; o (optional):
-- max_norm, norm_type, scale_grad_by_freq (Embedding._lookup_options').
function Embedding._lookup(who, weight, ids, padding_idx, o)
  if not ember.is_tensor(ids) then error(who .. ": expected an int64 tensor of ids, got " .. type(ids)) end
  if ids.dtype ~= "int64" then error(who .. ": ids must be int64 (1-based), got " .. ids.dtype) end
  local flat = ids:reshape(-1)
  if o and o.max_norm then Embedding._renorm_(weight, flat, o.max_norm, o.norm_type) end
  local ok, out = pcall(ember.embedding, weight, ids)
  if not ok then -- an id out of range: named by the caller (PyTorch's 0-based ids are the usual cause)
    error(who .. ": " .. tostring(out):gsub("^[^\n]-:%d+: ", ""):gsub("^ember%.embedding: ", ""))
  end
  if padding_idx then
    -- the padding rows' values, cut off from the weight's gradient
    local pad = ids:eq(padding_idx):unsqueeze(-1)
    out = ember.where(pad, weight[padding_idx]:detach(), out)
  end
  if o and o.scale_grad_by_freq then Embedding._scale_grad_by_freq(out, ids) end
  return out
end

-- torch's embedding_renorm_: the rows of `weight` that the ids `flat` look
-- up and whose norm_type-norm exceeds max_norm, scaled in place to
-- max_norm / (norm + 1e-7) times themselves (nn.EmbeddingBag's too). Ids
-- out of range are left to the lookup's error.
function Embedding._renorm_(weight, flat, max_norm, norm_type)
  if flat:numel() == 0 or flat:min():item() < 1 or flat:max():item() > weight.shape[1] then return end
  ember.no_grad(function()
    local u = ember.unique(flat)
    local rows = weight:index_select(1, u)
    local norm = rows:norm(norm_type, 2, true)
    local scale = ember.where(norm:gt(max_norm), max_norm / (norm + 1e-7), ember.ones_like(norm))
    weight:index_put_({ u }, rows * scale)
  end)
end

-- scale_grad_by_freq: the gradient reaching `out` (the rows looked up for
-- `ids`, [..., dim]) divided at each position by its id's count in the call.
function Embedding._scale_grad_by_freq(out, ids)
  if not out.requires_grad or ids:numel() == 0 then return end
  local flat = ids:reshape(-1)
  local count = ember.bincount(flat - 1):index_select(1, flat):to(out.dtype) -- bincount's 0-based values: id - 1
  local shape = { table.unpack(ids.shape) }
  shape[#shape + 1] = 1
  local s = (1 / count):view(shape)
  out:register_hook(function(g) return g * s end)
end

--- The sizes (and padding_idx), for printing.
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx then s = s .. ", padding_idx=" .. self.padding_idx end
  if self.max_norm then s = s .. (", max_norm=%g"):format(self.max_norm) end
  if self.norm_type and self.norm_type ~= 2 then s = s .. (", norm_type=%g"):format(self.norm_type) end
  if self.scale_grad_by_freq then s = s .. ", scale_grad_by_freq=true" end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Embedding.forward = require("ember._errors").wrap(Embedding.forward)

return Embedding
