--- nn.Dropout1d([p = 0.5]): channel dropout while training, as torch.nn.Dropout1d: each channel of
-- [N, C, L] (or [C, L]) is zeroed whole with probability p, the others scaled by 1/(1-p);
-- the identity in eval mode (`nn.Dropout2d`'s rule).
-- Errors name nn.Dropout1d: p outside [0, 1], an input of the wrong rank.
-- @usage local drop = nn.Dropout1d(0.2)
-- print(drop(ember.randn(2, 8, 5)).shape)   --> ember.Size{2, 8, 5}
-- @classmod nn.Dropout1d
local Module = require "ember.nn.Module"
local Dropout2d = require "ember.nn.Dropout2d"

local Dropout1d = Module:extend("Dropout1d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Dropout1d.SIGNATURE = { sizes = {}, options = { "p", "inplace" } }

function Dropout1d:__init(...)
  local p = Module.keyword_args("nn.Dropout1d", { "p", "inplace" }, ...)
  self.p = Dropout2d._check_p("Dropout1d", p or 0.5)
end

--- x with whole channels zeroed with probability p (training), x in eval mode.
-- @tparam Tensor x [N, C, L] (or [C, L])
-- @treturn Tensor the same shape
function Dropout1d:forward(x)
  return Dropout2d._dropout2d("Dropout1d.forward", x, self.p, self.training, 1)
end

--- Its p, for printing.
function Dropout1d:extra_repr() return ("p=%g"):format(self.p) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Dropout1d.forward = require("ember._errors").wrap(Dropout1d.forward)

return Dropout1d
