--- nn.LayerNorm(shape [, {eps=1e-5, elementwise_affine=true, bias=true, dtype=, device=}]):
-- normalises over the last #shape dims (shape: a number or a table), then
-- scales by weight (ones) and shifts by bias (zeros), as torch.nn.LayerNorm;
-- `bias = false` keeps the weight only (PyTorch 2.1's option: OLMo-style
-- models, checkpoints without a LayerNorm bias).
-- @usage local ln = nn.LayerNorm(16)
-- local y = ln(ember.randn(2, 5, 16))   -- normalised over the last dim
-- @classmod nn.LayerNorm
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local norm = require "ember.nn._norm"

local LayerNorm = Module:extend("LayerNorm")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LayerNorm.SIGNATURE = { sizes = { "normalized_shape" },
  options = { "eps", "elementwise_affine", "bias" } }

function LayerNorm:__init(shape, opts)
  opts = Module.check_options("nn.LayerNorm", opts, { "eps", "elementwise_affine", "bias", "dtype", "device" })
  if type(shape) == "number" then shape = { shape } end
  if type(shape) ~= "table" or #shape == 0 then
    error("LayerNorm: normalized_shape must be a positive integer or a table of them, got "
      .. tostring(shape), 2)
  end
  for _, d in ipairs(shape) do
    if math.type(d) ~= "integer" or d < 1 then
      error("LayerNorm: normalized_shape entries must be positive integers, got " .. tostring(d), 2)
    end
  end
  self.normalized_shape = shape
  self.eps = opts.eps or 1e-5
  local topts = { dtype = opts.dtype, device = opts.device }
  if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
    error(("nn.LayerNorm: bias must be true or false, got %s"):format(type(opts.bias)), 2)
  end
  self.elementwise_affine = opts.elementwise_affine ~= false -- PyTorch's attribute
  if self.elementwise_affine then
    self:register_parameter("weight", ember.ones(shape, topts))
    if opts.bias ~= false then self:register_parameter("bias", ember.zeros(shape, topts)) end
  end
end

--- x normalised over its last dims (normalized_shape), then scaled and shifted.
-- @tparam Tensor x [..., *normalized_shape]
function LayerNorm:forward(x)
  Module.check_tensor_input("LayerNorm.forward", x)
  return norm.layer_norm("LayerNorm.forward", x, self.normalized_shape, self.weight, self.bias, self.eps)
end

--- The shape and eps, for printing.
function LayerNorm:extra_repr()
  local s = ("[%s], eps=%g, elementwise_affine=%s"):format(table.concat(self.normalized_shape, ", "),
    self.eps, tostring(self.weight ~= nil))
  if self.weight ~= nil and self.bias == nil then s = s .. ", bias=false" end
  return s
end

--- The weight 1 and the bias 0, as the constructor makes them (PyTorch's reset_parameters).
function LayerNorm:reset_parameters() norm.reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LayerNorm.forward = require("ember._errors").wrap(LayerNorm.forward)

return LayerNorm
