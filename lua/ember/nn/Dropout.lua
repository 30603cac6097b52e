--- nn.Dropout(p=0.5) or nn.Dropout{p=0.5}: inverted dropout while training (kept values scaled by
-- 1/(1-p); p = 1 gives zeros), the identity in eval mode. Draws from the seeded generator.
-- @usage local drop = nn.Dropout(0.1)
-- drop:eval()   -- identity from now on; drop:train() turns it back on
-- @classmod nn.Dropout
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Dropout = Module:extend("Dropout")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Dropout.SIGNATURE = { sizes = {}, options = { "p", "inplace" } }

function Dropout:__init(p)
  if type(p) == "table" then -- nn.Dropout{p = 0.2}, as the other modules take their options
    p = Module.check_options("nn.Dropout", p, { "p", "inplace" }).p
  end
  p = p or 0.5
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error("nn.Dropout: p must be a number in [0, 1], got " .. tostring(p), 2)
  end
  self.p = p
end

--- x with elements zeroed with probability p and the rest scaled by 1/(1-p) in training mode; x itself in eval mode.
-- @tparam Tensor x
function Dropout:forward(x)
  Module.check_tensor_input("Dropout.forward", x)
  if not self.training or self.p == 0 then return x end
  if self.p == 1 then return x * 0 end -- everything dropped (PyTorch's p = 1): zeros, and zero gradients
  return ember.dropout(x, self.p, true)
end

--- "p=...", for printing.
function Dropout:extra_repr() return ("p=%g"):format(self.p) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Dropout.forward = require("ember._errors").wrap(Dropout.forward)

return Dropout
