--- nn.Embedding(num_embeddings, dim [, {padding_idx=, dtype=, device=}]):
-- a lookup table indexed by 1-based int64 ids, weight ~ N(0, 1) as
-- torch.nn.Embedding. With padding_idx (1-based) that row starts at zero,
-- its outputs are zero and it never receives a gradient.
-- Errors: ids must be int64 and within 1..num_embeddings (the message names the bad id).
-- @usage local emb = nn.Embedding(100, 16, {padding_idx = 1})
-- local x = emb(ember.tensor({{5, 7, 1}}, "int64"))   -- [1, 3, 16]
-- @classmod nn.Embedding
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Embedding = Module:extend("Embedding")

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
  local pad = opts.padding_idx
  if pad ~= nil then
    if math.type(pad) ~= "integer" or pad < 1 or pad > num_embeddings then
      error(("%s: padding_idx must be an id in 1..%d, got %s"):format(name, num_embeddings, tostring(pad)))
    end
    self.padding_idx = pad
    w[pad] = 0
  end
  self:register_parameter("weight", w)
end

function Embedding:__init(num_embeddings, dim, opts)
  opts = Module.check_options("nn.Embedding", opts, { "padding_idx", "dtype", "device" })
  Embedding._init_weight(self, "Embedding", num_embeddings, dim, opts)
end

--- The rows of the weight for int64 ids (1-based): [...] ids give [..., dim].
-- @tparam Tensor ids int64, 1-based
-- @treturn Tensor
function Embedding:forward(ids)
  return Embedding._lookup("Embedding.forward", self.weight, ids, self.padding_idx)
end

-- The rows of weight for ids (checked int64 here), padding_idx's rows
-- without a gradient (PyTorch's): the module's forward and
-- nn.functional.embedding's. who: the caller, for errors.
function Embedding._lookup(who, weight, ids, padding_idx)
  if not ember.is_tensor(ids) then error(who .. ": expected an int64 tensor of ids, got " .. type(ids)) end
  if ids.dtype ~= "int64" then error(who .. ": ids must be int64 (1-based), got " .. ids.dtype) end
  local ok, out = pcall(ember.embedding, weight, ids)
  if not ok then -- an id out of range: named by the caller (PyTorch's 0-based ids are the usual cause)
    error(who .. ": " .. tostring(out):gsub("^[^\n]-:%d+: ", ""):gsub("^ember%.embedding: ", ""))
  end
  if padding_idx then
    -- the padding rows' values, cut off from the weight's gradient
    local pad = ids:eq(padding_idx):unsqueeze(-1)
    out = ember.where(pad, weight[padding_idx]:detach(), out)
  end
  return out
end

--- The sizes (and padding_idx), for printing.
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Embedding.forward = require("ember._errors").wrap(Embedding.forward)

return Embedding
