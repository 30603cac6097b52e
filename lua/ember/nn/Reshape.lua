--- nn.Reshape(size1, size2, ... [, batchMode]): Torch7's nn.Reshape,
-- `x:reshape(sizes)` (a copy where a view cannot be made) with Torch7's
-- batch rule: an input with as many elements as the sizes give (and a
-- first dim other than 1) is reshaped whole, any other keeps its first dim
-- as the batch ([B, sizes...]); batchMode true always keeps the first dim,
-- false never does.
-- @usage local r = nn.Reshape(2, 6)
-- print(r(ember.zeros(3, 4)).shape, r(ember.zeros(5, 3, 4)).shape)   --> ember.Size{2, 6}	ember.Size{5, 2, 6}
-- @classmod nn.Reshape
local errors = require "ember._errors"
local Module = require "ember.nn.Module"

local Reshape = Module:extend("Reshape")

function Reshape:__init(...)
  local args = { ... }
  local n = select("#", ...)
  if n == 1 and type(args[1]) ~= "number" and type(args[1]) ~= "boolean" then args, n = args[1], #args[1] end
  if type(args[n]) == "boolean" then self.batch_mode = args[n]; n = n - 1 end
  local size, total = {}, 1
  for i = 1, n do
    local s = args[i]
    if math.type(s) ~= "integer" or s < 1 then
      errors.raise("nn.Reshape: size %d must be a positive integer, got %s", i, tostring(s))
    end
    size[i], total = s, total * s
  end
  if n == 0 then errors.raise("nn.Reshape: expected sizes") end
  self.size, self.nelement = size, total
end

--- x reshaped.
-- @tparam Tensor x
function Reshape:forward(x)
  Module.check_tensor_input("Reshape.forward", x)
  if self.batch_mode == false or (self.batch_mode == nil and x:numel() == self.nelement and x:size(1) ~= 1) then
    return x:reshape(table.unpack(self.size))
  end
  return x:reshape(x:size(1), table.unpack(self.size))
end

--- The settings, for printing.
function Reshape:extra_repr() return table.concat(self.size, ", ") end

Reshape.forward = errors.wrap(Reshape.forward)

return Reshape
