--- nn.GLU([dim = -1]): the gated linear unit, as torch.nn.GLU: x is split
-- in two halves a, b along dim and the result is a * sigmoid(b). dim is
-- **1-based** (negative from the end), PyTorch's default dim=-1 included.
-- Errors name nn.GLU: a dim that is not a nonzero integer, out of range, or of odd size.
-- @usage print(nn.GLU()(ember.randn(4, 10)).shape)   --> ember.Size{4, 5}
-- @classmod nn.GLU
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local GLU = Module:extend("GLU")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
GLU.SIGNATURE = { sizes = {}, options = { "dim" } }

function GLU:__init(...)
  local dim = Module.keyword_args("nn.GLU", { "dim" }, ...)
  dim = dim or -1
  if math.type(dim) ~= "integer" or dim == 0 then
    error("GLU: dim must be a nonzero integer (dims are 1-based; -1 is the last), got " .. tostring(dim), 2)
  end
  self.dim = dim
end

--- a * sigmoid(b) for the halves a, b of x along dim.
-- @tparam Tensor x with an even size along dim
-- @treturn Tensor x's shape with that size halved
function GLU:forward(x)
  if not ember.is_tensor(x) then error("GLU.forward: expected a tensor, got " .. type(x), 2) end
  local d = self.dim < 0 and x.ndim + 1 + self.dim or self.dim
  if d < 1 or d > x.ndim then
    error(("GLU.forward: dim=%d is out of range for a %d-d input of shape %s"):format(self.dim, x.ndim,
      shape_str(x)), 2)
  end
  local n = x.shape[d]
  if n % 2 ~= 0 then
    error(("GLU.forward: the halved dim must have an even size, but dim %d of shape %s has %d"):format(self.dim,
      shape_str(x), n), 2)
  end
  return ember.glu(x, d)
end

--- The dim, for printing.
function GLU:extra_repr() return ("dim=%d"):format(self.dim) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GLU.forward = require("ember._errors").wrap(GLU.forward)

return GLU
