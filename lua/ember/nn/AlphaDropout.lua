--- nn.AlphaDropout([p = 0.5]): alpha dropout while training, as torch.nn.AlphaDropout: each element
-- is set with probability p to SELU's negative saturation, then an affine map keeps the mean
-- and variance (for SELU networks); the identity in eval mode (`nn.functional.alpha_dropout`).
-- Errors name nn.AlphaDropout: p outside [0, 1].
-- @usage local drop = nn.AlphaDropout(0.2)
-- print(drop(ember.randn(4, 6, 3)).shape)   --> ember.Size{4, 6, 3}
-- @classmod nn.AlphaDropout
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local AlphaDropout = Module:extend("AlphaDropout")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
AlphaDropout.SIGNATURE = { sizes = {}, options = { "p", "inplace" } }

function AlphaDropout:__init(...)
  local p = Module.keyword_args("nn.AlphaDropout", { "p", "inplace" }, ...)
  p = p or 0.5
  if type(p) ~= "number" or p < 0 or p > 1 then error("AlphaDropout: p must be a number in [0, 1], got " .. tostring(p), 3) end
  self.p = p
end

--- x with alpha dropout (training), x in eval mode.
-- @tparam Tensor x
-- @treturn Tensor the same shape
function AlphaDropout:forward(x)
  Module.check_tensor_input("AlphaDropout.forward", x)
  return require("ember.nn.functional").alpha_dropout(x, { p = self.p, training = self.training })
end

--- Its p, for printing.
function AlphaDropout:extra_repr() return ("p=%g"):format(self.p) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
AlphaDropout.forward = require("ember._errors").wrap(AlphaDropout.forward)

return AlphaDropout
