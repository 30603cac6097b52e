--- nn.Linear(in_features, out_features [, {bias=true, dtype=, device=, init="uniform"|"zeros"}]):
-- y = x W^T + b over the last dim, W [out, in], as torch.nn.Linear, with
-- its initialisation: W and b uniform in +-1/sqrt(in_features).
-- Errors: a positive integer is required for each size; forward names the expected in_features.
-- @usage local lin = nn.Linear(4, 3)
-- print(lin(ember.randn(2, 4)).shape)   --> ember.Size{2, 3}
-- @classmod nn.Linear
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Linear = Module:extend("Linear")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
Linear.SIGNATURE = { sizes = { "in_features", "out_features" },
  options = { "bias" } }

local function check_size(v, what)
  if math.type(v) ~= "integer" or v < 1 then
    error(("Linear: %s must be a positive integer, got %s"):format(what, tostring(v)), 3)
  end
end

function Linear:__init(in_features, out_features, opts)
  check_size(in_features, "in_features")
  check_size(out_features, "out_features")
  opts = Module.check_options("nn.Linear", opts, { "bias", "init", "dtype", "device" })
  self.in_features, self.out_features = in_features, out_features
  local bound = 1 / math.sqrt(in_features)
  local topts = { dtype = opts.dtype, device = opts.device }
  -- init = "zeros" draws nothing from the generator: for a container that
  -- initialises the weights itself (MultiHeadAttention).
  local function init(shape)
    if opts.init == "zeros" then return ember.zeros(shape, topts) end
    return ember.uniform(shape, -bound, bound, topts)
  end
  self.weight = init({ out_features, in_features }):requires_grad_()
  if opts.bias ~= false then self.bias = init({ out_features }):requires_grad_() end
end

-- dtype name -> whether it is floating point (ember.dtype_info's answer,
-- kept: a decoding step's forward asked it, and built its table, per layer)
local floating = setmetatable({}, { __index = function(t, dt)
  local info = ember.dtype_info(dt)
  local v = info ~= nil and info.floating
  t[dt] = v
  return v
end })

-- The dtypes an input and a weight may mix under autocast (its product
-- runs in bfloat16); float64 is left as it is, so it mixes with nothing.
local AUTOCAST_MIX = { float32 = true, bfloat16 = true }

--- x W^T + b.
-- @tparam Tensor x [..., in_features]
-- @treturn Tensor [..., out_features]
function Linear:forward(x)
  if not ember.is_tensor(x) or x.ndim == 0 then
    error(("Linear.forward: expected a tensor of shape [..., %d], got %s"):format(self.in_features,
      ember.is_tensor(x) and "a 0-d tensor" or type(x)), 2)
  end
  local w, b = self.weight, self.bias
  local xdt, autocast = x.dtype, ember.autocast
  local cast = autocast.enabled()
  if not floating[xdt] then
    error(("Linear.forward: input must be floating point (the weight is %s), got %s: convert it with "
      .. ":to(\"%s\")"):format(w.dtype, xdt, w.dtype), 2)
  end
  -- autocast mixes float32 and bfloat16 (it casts the float32 one), never float64
  if xdt ~= w.dtype and not (cast and AUTOCAST_MIX[xdt] and AUTOCAST_MIX[w.dtype]) then
    error(("Linear.forward: the input is %s but the weight is %s: convert the input (x:to(\"%s\")) "
      .. "or the module (m:to(\"%s\"))"):format(xdt, w.dtype, w.dtype, xdt), 2)
  end
  local n = x:size(x.ndim)
  if n ~= self.in_features then
    error(("Linear.forward: input's last dim is %d, expected in_features=%d (input shape [%s])"):format(
      n, self.in_features, table.concat(x.shape, ", ")), 2)
  end
  -- Under autocast the weight and the bias are cast here, so that a
  -- decoding loop finds them in the cast cache (ember.autocast.cast), and
  -- the bias joins the bfloat16 product in bfloat16, as torch.autocast runs
  -- linear (all of it in the low dtype): added as float32 it would promote
  -- the activations to float32, and the next product would cast them back.
  if cast and w.dtype == "float32" then
    w = autocast.cast(w)
    if b and b.dtype == "float32" then b = autocast.cast(b) end
  end
  -- one product with the bias as its C: no add of its own over the output
  return ember.linear(x, w, b)
end

--- The sizes, for printing.
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Linear.forward = require("ember._errors").wrap(Linear.forward)

return Linear
