--- nn.Unflatten(dim, sizes): splits dim into the dims `sizes` (a list of
-- integers whose product is its size; one of them may be -1, inferred),
-- as torch.nn.Unflatten. dim is **1-based** (negative from the end).
-- The inverse of `nn.Flatten`.
-- Errors name nn.Unflatten: a bad dim or sizes, sizes that do not multiply to the dim's size.
-- @usage print(nn.Unflatten(2, {2, 5})(ember.randn(3, 10)).shape)   --> ember.Size{3, 2, 5}
-- print(nn.Unflatten(-1, {-1, 4})(ember.randn(3, 8)).shape)        --> ember.Size{3, 2, 4}
-- @classmod nn.Unflatten
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Unflatten = Module:extend("Unflatten")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Unflatten.SIGNATURE = { sizes = { "dim", "unflattened_size" }, options = {} }

function Unflatten:__init(...)
  local dim, sizes = Module.keyword_args("nn.Unflatten", { "dim", "unflattened_size" }, ...)
  if math.type(dim) ~= "integer" or dim == 0 then
    error("Unflatten: dim must be a nonzero integer (dims are 1-based; -1 is the last), got " .. tostring(dim), 2)
  end
  local ok = type(sizes) == "table" and #sizes >= 1
  local inferred = 0
  for _, s in ipairs(ok and sizes or {}) do
    if math.type(s) ~= "integer" or (s < 1 and s ~= -1) then ok = false end
    if s == -1 then inferred = inferred + 1 end
  end
  if not ok or inferred > 1 then
    error("Unflatten: sizes must be a list of positive integers (one may be -1), got "
      .. (type(sizes) == "table" and "{" .. table.concat(sizes, ", ") .. "}" or tostring(sizes)), 2)
  end
  self.dim, self.sizes = dim, { table.unpack(sizes) }
end

--- x with dim split into sizes.
-- @tparam Tensor x
-- @treturn Tensor
function Unflatten:forward(x)
  if not ember.is_tensor(x) then error("Unflatten.forward: expected a tensor, got " .. type(x), 2) end
  local d = self.dim < 0 and x.ndim + 1 + self.dim or self.dim
  if d < 1 or d > x.ndim then
    error(("Unflatten.forward: dim=%d is out of range for a %d-d input of shape %s"):format(self.dim, x.ndim,
      shape_str(x)), 2)
  end
  local n, prod, sizes = x.shape[d], 1, { table.unpack(self.sizes) }
  for _, s in ipairs(sizes) do if s ~= -1 then prod = prod * s end end
  local fits = n % prod == 0
  for i, s in ipairs(sizes) do if s == -1 then sizes[i] = n // prod; prod = n end end
  if not fits or prod ~= n then
    error(("Unflatten.forward: sizes {%s} do not multiply to the size %d of dim %d of shape %s"):format(
      table.concat(self.sizes, ", "), n, self.dim, shape_str(x)), 2)
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x.shape[i] end
  for _, s in ipairs(sizes) do shape[#shape + 1] = s end
  for i = d + 1, x.ndim do shape[#shape + 1] = x.shape[i] end
  return x:reshape(shape)
end

--- The dim and sizes, for printing.
function Unflatten:extra_repr()
  return ("dim=%d, unflattened_size=(%s)"):format(self.dim, table.concat(self.sizes, ", "))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Unflatten.forward = require("ember._errors").wrap(Unflatten.forward)

return Unflatten
