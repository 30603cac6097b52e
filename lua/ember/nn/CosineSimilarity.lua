--- nn.CosineSimilarity([dim = 2 [, eps = 1e-8]]): the cosine of the angle
-- between x1 and x2 along dim (they broadcast), as torch.nn.CosineSimilarity
-- (`ember.cosine_similarity`: each is divided by its norm, at least eps).
-- dim is **1-based**: the default 2 is PyTorch's dim=1.
-- Errors name nn.CosineSimilarity: a bad dim or eps, inputs that are not tensors.
-- @usage local cos = nn.CosineSimilarity()
-- print(cos(ember.randn(4, 8), ember.randn(4, 8)).shape)   --> ember.Size{4}
-- @classmod nn.CosineSimilarity
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local CosineSimilarity = Module:extend("CosineSimilarity")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
CosineSimilarity.SIGNATURE = { sizes = {}, options = { "dim", "eps" } }

function CosineSimilarity:__init(...)
  local dim, eps = Module.keyword_args("nn.CosineSimilarity", { "dim", "eps" }, ...)
  local opts = type(dim) == "table" and dim or { dim = dim, eps = eps } -- nn.CosineSimilarity(1, 1e-6) too
  if type(opts) ~= "table" then error("CosineSimilarity: options must be a table {dim =, eps =}, got " .. type(opts), 2) end
  self.dim, self.eps = opts.dim or 2, opts.eps or 1e-8
  if math.type(self.dim) ~= "integer" or self.dim == 0 then
    error("CosineSimilarity: dim must be a nonzero integer (dims are 1-based; -1 is the last), got " .. tostring(self.dim), 2)
  end
  if type(self.eps) ~= "number" or not (self.eps >= 0) then
    error("CosineSimilarity: eps must be a number >= 0, got " .. tostring(self.eps), 2)
  end
end

--- The cosine similarity along dim.
-- @tparam Tensor x1
-- @tparam Tensor x2 broadcastable with x1
-- @treturn Tensor the broadcast shape without dim
function CosineSimilarity:forward(x1, x2)
  if not ember.is_tensor(x1) or not ember.is_tensor(x2) then
    error(("CosineSimilarity.forward: expected two tensors, got %s and %s"):format(
      ember.is_tensor(x1) and "a tensor" or type(x1), ember.is_tensor(x2) and "a tensor" or type(x2)), 2)
  end
  return ember.cosine_similarity(x1, x2, { dim = self.dim, eps = self.eps })
end

--- Its options, for printing.
function CosineSimilarity:extra_repr() return ("dim=%d, eps=%g"):format(self.dim, self.eps) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CosineSimilarity.forward = require("ember._errors").wrap(CosineSimilarity.forward)

return CosineSimilarity
