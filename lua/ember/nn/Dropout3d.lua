--- nn.Dropout3d([p = 0.5]): channel dropout while training, as torch.nn.Dropout3d: each channel of
-- [N, C, D, H, W] (or [C, D, H, W]) is zeroed whole with probability p, the others scaled by 1/(1-p);
-- the identity in eval mode (`nn.Dropout2d`'s rule).
-- Errors name nn.Dropout3d: p outside [0, 1], an input of the wrong rank.
-- @usage local drop = nn.Dropout3d(0.2)
-- print(drop(ember.randn(2, 8, 2, 3, 3)).shape)   --> ember.Size{2, 8, 2, 3, 3}
-- @classmod nn.Dropout3d
local Module = require "ember.nn.Module"
local Dropout2d = require "ember.nn.Dropout2d"

local Dropout3d = Module:extend("Dropout3d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Dropout3d.SIGNATURE = { sizes = {}, options = { "p", "inplace" } }

function Dropout3d:__init(...)
  local p = Module.keyword_args("nn.Dropout3d", { "p", "inplace" }, ...)
  self.p = Dropout2d._check_p("Dropout3d", p or 0.5)
end

--- x with whole channels zeroed with probability p (training), x in eval mode.
-- @tparam Tensor x [N, C, D, H, W] (or [C, D, H, W])
-- @treturn Tensor the same shape
function Dropout3d:forward(x)
  return Dropout2d._dropout2d("Dropout3d.forward", x, self.p, self.training, 3)
end

--- Its p, for printing.
function Dropout3d:extra_repr() return ("p=%g"):format(self.p) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Dropout3d.forward = require("ember._errors").wrap(Dropout3d.forward)

return Dropout3d
