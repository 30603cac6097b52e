-- nn/_padding.lua (internal): what the 2-d padding modules (ConstantPad2d,
-- ZeroPad2d, ReflectionPad2d, ReplicationPad2d) share: their padding
-- option and their forward, which is `ember.pad` after checks that name
-- the module.
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"

local M = {}

-- padding: an integer (all four sides) or {left, right, top, bottom}, kept
-- as self.padding; negative amounts (cropping) only for constant padding.
function M.setup(self, padding, allow_negative)
  local name = self.__name
  local p = math.type(padding) == "integer" and { padding, padding, padding, padding } or padding
  local ok = type(p) == "table" and #p == 4
  for i = 1, 4 do ok = ok and math.type(p[i]) == "integer" and (allow_negative or p[i] >= 0) end
  if not ok then
    error(("%s: padding must be %s integer or a list of four {left, right, top, bottom}, got %s"):format(name,
      allow_negative and "an" or "a non-negative", type(padding) == "table"
      and "{" .. table.concat(padding, ", ") .. "}" or tostring(padding)), 3)
  end
  self.padding = { p[1], p[2], p[3], p[4] }
end

-- x [N, C, H, W] or [C, H, W] padded (mode, value as ember.pad).
function M.forward(self, x, mode, value)
  local name, p = self.__name, self.padding
  if not ember.is_tensor(x) or (x.ndim ~= 3 and x.ndim ~= 4) then
    error(("%s.forward: expected an input [N, C, H, W] or [C, H, W], got %s"):format(name,
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)), 3)
  end
  local H, W = x.shape[x.ndim - 1], x.shape[x.ndim]
  for i, n in ipairs { W, W, H, H } do
    local bad = (mode == "reflect" and p[i] >= n) or (mode == "replicate" and n == 0)
      or (mode == "constant" and n + math.min(p[i], 0) + math.min(p[i % 2 == 1 and i + 1 or i - 1], 0) < 0)
    if bad then
      error(("%s.forward: padding (%s) is too large for an input of shape %s%s"):format(name,
        table.concat(p, ", "), shape_str(x), mode == "reflect" and " (reflect padding must be less than the dim's size)" or ""), 3)
    end
  end
  return ember.pad(x, p, mode, value)
end

-- PyTorch's text of the padding: (left, right, top, bottom).
function M.repr(self) return "(" .. table.concat(self.padding, ", ") .. ")" end

return M
