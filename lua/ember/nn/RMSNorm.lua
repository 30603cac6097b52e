--- nn.RMSNorm(shape [, {eps=, elementwise_affine=true, dtype=, device=}]):
-- root-mean-square normalisation over the last #shape dims (shape: a number
-- or a table), as torch.nn.RMSNorm (Llama's norm):
--
--    y = x / sqrt(mean(x^2) + eps) * weight
--
-- with `weight` (ones) when elementwise_affine, and no bias (state dict:
-- "weight", as PyTorch). eps defaults to the machine epsilon of the dtype
-- the norm is computed in (PyTorch's eps=None): 2^-23 for float32, 2^-52
-- for float64. Hugging Face Llama checkpoints use eps=1e-5 or 1e-6: give it.
--
-- bfloat16 input is normalised in float32 (the mean of squares would lose
-- too much in bfloat16) and returned as bfloat16; under
-- `ember.autocast("bfloat16")` the result is float32, as norms are there
-- (`ember.layer_norm` too).
-- The norm runs on the backend's fused kernel (`rms_norm` of ember_backend.h:
-- one pass forward, one backward) where it has one; a backend without it
-- (the CUDA plugin today), or a weight in another dtype than x outside
-- autocast, gets it composed from core ops, with the same result.
-- Errors name nn.RMSNorm: a bad shape or eps, an input whose last dims are not `shape`.
-- @usage local norm = nn.RMSNorm(64, {eps = 1e-6})
-- local y = norm(ember.randn(2, 10, 64))   -- normalised over the last dim
-- @classmod nn.RMSNorm
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local norm = require "ember.nn._norm"

local RMSNorm = Module:extend("RMSNorm")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
RMSNorm.SIGNATURE = { sizes = { "normalized_shape" },
  options = { "eps", "elementwise_affine" } }

function RMSNorm:__init(shape, opts)
  opts = Module.check_options("nn.RMSNorm", opts, { "eps", "elementwise_affine", "dtype", "device" })
  if type(opts) ~= "table" then error("RMSNorm: options must be a table, got " .. type(opts), 2) end
  if math.type(shape) == "integer" then shape = { shape } end
  if type(shape) == "userdata" and shape.totable then shape = shape:totable() end
  if type(shape) ~= "table" or #shape == 0 then
    error("RMSNorm: normalized_shape must be a positive integer or a table of them, got " .. tostring(shape), 2)
  end
  local copy = {}
  for i, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 1 then
      error("RMSNorm: normalized_shape entries must be positive integers, got " .. tostring(d), 2)
    end
    copy[i] = d
  end
  if opts.eps ~= nil and (type(opts.eps) ~= "number" or opts.eps < 0) then
    error("RMSNorm: eps must be a non-negative number (or nil for the dtype's epsilon), got " .. tostring(opts.eps), 2)
  end
  self.normalized_shape = copy
  self.eps = opts.eps
  if opts.elementwise_affine ~= false then
    self:register_parameter("weight", ember.ones(copy, { dtype = opts.dtype, device = opts.device }))
  end
end

--- x / sqrt(mean(x^2 over the normalised dims) + eps), times weight.
-- @tparam Tensor x [..., *normalized_shape], floating
-- @treturn Tensor the same shape (float32 for bfloat16 input under autocast)
function RMSNorm:forward(x)
  if not ember.is_tensor(x) then error("RMSNorm.forward: expected a tensor, got " .. type(x), 2) end
  Module.check_float_input("RMSNorm.forward", x)
  return norm.rms_norm("RMSNorm.forward", x, self.normalized_shape, self.weight, self.eps)
end

--- The shape, eps and whether it has a weight, for printing.
function RMSNorm:extra_repr()
  return ("[%s], eps=%s, elementwise_affine=%s"):format(table.concat(self.normalized_shape, ", "),
    self.eps and ("%g"):format(self.eps) or "None", tostring(self.weight ~= nil))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
RMSNorm.forward = require("ember._errors").wrap(RMSNorm.forward)

return RMSNorm
