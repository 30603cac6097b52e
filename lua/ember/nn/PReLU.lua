--- nn.PReLU([num_parameters = 1 [, {init = 0.25, dtype=, device=}]]): x where
-- x > 0, weight * x elsewhere, with a learned slope `weight`
-- [num_parameters] (filled with init), as torch.nn.PReLU. One slope for
-- everything, or one per channel: then the input's dim 2 (its channels) must
-- have num_parameters entries. `nn.PReLU(n, 0.1)` is `nn.PReLU(n, {init = 0.1})`
-- and `nn.PReLU{num_parameters = n, init = 0.1}`.
-- State dict as PyTorch: weight.
-- Errors name nn.PReLU: a bad num_parameters or init, an input whose channels differ.
-- @usage local act = nn.PReLU(16)
-- print(act(ember.randn(2, 16, 8, 8)).shape)   --> ember.Size{2, 16, 8, 8}
-- @classmod nn.PReLU
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local PReLU = Module:extend("PReLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
PReLU.SIGNATURE = { sizes = { "num_parameters" }, options = { "init" } }

function PReLU:__init(num_parameters, opts)
  if type(num_parameters) == "table" and not ember.is_tensor(num_parameters) and opts == nil then
    -- nn.PReLU{num_parameters = 3, init = 0.1}: PyTorch's names in one table
    opts = {}
    for k, v in pairs(Module.check_options("nn.PReLU", num_parameters, { "num_parameters", "init", "dtype", "device" })) do
      if k ~= "num_parameters" then opts[k] = v end
    end
    num_parameters = num_parameters.num_parameters
  end
  num_parameters = num_parameters or 1
  if math.type(num_parameters) ~= "integer" or num_parameters < 1 then
    error("PReLU: num_parameters must be a positive integer, got " .. tostring(num_parameters), 2)
  end
  if type(opts) == "number" then opts = { init = opts } end
  opts = opts or {}
  if type(opts) ~= "table" then error("PReLU: options must be a table {init =, dtype =, device =}, got " .. type(opts), 2) end
  local init = opts.init or 0.25
  if type(init) ~= "number" then error("PReLU: init must be a number, got " .. type(init), 2) end
  self.num_parameters, self.init = num_parameters, init
  self:register_parameter("weight", ember.full({ num_parameters }, init, { dtype = opts.dtype, device = opts.device }))
end

--- x where x > 0, weight * x elsewhere (per channel: dim 2).
-- @tparam Tensor x any shape with one slope; [N, C, *] with C = num_parameters otherwise
-- @treturn Tensor the same shape
function PReLU:forward(x)
  if not ember.is_tensor(x) then error("PReLU.forward: expected a tensor, got " .. type(x), 2) end
  return PReLU._prelu("PReLU.forward", x, self.weight)
end

-- x where x > 0, weight * x elsewhere, weight [C] along dim 2 (one value:
-- everywhere): the module's forward and nn.functional.prelu's. who: the
-- caller, for errors.
function PReLU._prelu(who, x, weight)
  local C = weight:numel()
  local wshape = {}
  for i = 1, x.ndim do wshape[i] = 1 end
  if C > 1 then
    if x.ndim < 2 or x.shape[2] ~= C then
      error(("%s: expected an input [N, C, *] with C = num_parameters = %d, got shape %s"):format(who, C,
        shape_str(x)))
    end
    wshape[2] = C
  end
  return ember.where(x:gt(0), x, x * weight:reshape(wshape))
end

--- The number of slopes, for printing.
function PReLU:extra_repr() return ("num_parameters=%d"):format(self.num_parameters) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
PReLU.forward = require("ember._errors").wrap(PReLU.forward)

return PReLU
