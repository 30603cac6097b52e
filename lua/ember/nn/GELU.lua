--- nn.GELU([approximate = "none" | "tanh"]) or nn.GELU{approximate =}: the exact erf form (PyTorch's
-- default) or the tanh approximation.
-- @usage local x = ember.randn(2, 3)
-- local y = nn.GELU("tanh")(x)
-- @classmod nn.GELU
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local GELU = Module:extend("GELU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
GELU.SIGNATURE = { sizes = {}, options = { "approximate" } }

function GELU:__init(...)
  local approximate = Module.keyword_args("nn.GELU", { "approximate" }, ...)
  approximate = approximate or "none"
  if approximate ~= "none" and approximate ~= "tanh" then
    error("GELU: approximate must be \"none\" or \"tanh\", got " .. tostring(approximate), 2)
  end
  self.approximate = approximate
end

--- GELU of x (exact, or the tanh approximation).
-- @tparam Tensor x
function GELU:forward(x)
  Module.check_tensor_input("GELU.forward", x)
  if self.approximate == "tanh" then return x:gelu("tanh") end
  return x:gelu()
end

--- The approximation, for printing.
function GELU:extra_repr()
  return self.approximate == "none" and "" or "approximate=tanh"
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GELU.forward = require("ember._errors").wrap(GELU.forward)

return GELU
