--- nn.Dropout2d([p = 0.5]): channel dropout while training, as
-- torch.nn.Dropout2d: each channel of [N, C, H, W] (or [C, H, W]) is zeroed
-- whole with probability p, the others scaled by 1/(1-p); the identity in
-- eval mode. Draws from the seeded generator (`ember.dropout` on a
-- [N, C, 1, 1] tensor of ones: the channel mask).
-- p = 1 drops every channel (zeros, zero gradients), as PyTorch.
-- Errors name nn.Dropout2d: p outside [0, 1], an input that is not 3-d or 4-d.
-- @usage local drop = nn.Dropout2d(0.2)
-- print(drop(ember.randn(2, 8, 4, 4)).shape)   --> ember.Size{2, 8, 4, 4}
-- @classmod nn.Dropout2d
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Dropout2d = Module:extend("Dropout2d")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Dropout2d.SIGNATURE = { sizes = { "p" }, options = { "inplace" } }

function Dropout2d:__init(p, opts)
  Module.check_options("nn.Dropout2d", opts, { "inplace" })
  self.p = Dropout2d._check_p("Dropout2d", p or 0.5)
end

-- p of a channel dropout, checked (the modules' and nn.functional's
-- dropout1d/2d/3d): a number in [0, 1], as PyTorch's; p = 1 drops every
-- channel. who: the caller, for the error.
function Dropout2d._check_p(who, p)
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("%s: p must be a number in [0, 1], got %s"):format(who, tostring(p)))
  end
  return p
end

--- x with whole channels zeroed with probability p and the rest scaled by 1/(1-p) in training mode; x in eval mode.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor the same shape
function Dropout2d:forward(x)
  return Dropout2d._dropout2d("Dropout2d.forward", x, self.p, self.training)
end

-- Channel dropout of x [N, C, H, W] or [C, H, W] (identity unless
-- training): the module's forward and nn.functional.dropout2d's (nd = 1
-- and 3: dropout1d's and dropout3d's, on [N, C, L] and [N, C, D, H, W]).
-- who: the caller, for errors.
local SHAPES = { "[N, C, L] or [C, L]", "[N, C, H, W] or [C, H, W]", "[N, C, D, H, W] or [C, D, H, W]" }
function Dropout2d._dropout2d(who, x, p, training, nd)
  nd = nd or 2
  if not ember.is_tensor(x) or (x.ndim ~= nd + 1 and x.ndim ~= nd + 2) then
    error(("%s: expected an input %s, got %s"):format(who, SHAPES[nd],
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)))
  end
  if not training or p == 0 then return x end
  local mshape = {}
  for i = 1, x.ndim do mshape[i] = i <= x.ndim - nd and x.shape[i] or 1 end
  local mask = ember.dropout(ember.ones(mshape, { dtype = x.dtype, device = x.device }), p, true)
  return x * mask
end

--- "p=...", for printing.
function Dropout2d:extra_repr() return ("p=%g"):format(self.p) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Dropout2d.forward = require("ember._errors").wrap(Dropout2d.forward)

return Dropout2d
