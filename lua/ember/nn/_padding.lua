-- nn/_padding.lua (internal): what the padding modules (ConstantPad2d,
-- ZeroPad2d, ReflectionPad2d, ReplicationPad2d and the 1-d ConstantPad1d,
-- ReflectionPad1d, ReplicationPad1d) share: their padding option and their
-- forward, which is `ember.pad` after checks that name the module.
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"

local M = {}

-- padding: an integer (every side) or {left, right, top, bottom} ({left,
-- right} for the 1-d modules, sides = 2), kept as self.padding; negative
-- amounts (cropping) only for constant padding.
function M.setup(self, padding, allow_negative, sides)
  local name, n = self.__name, sides or 4
  local p = padding
  if math.type(padding) == "integer" then
    p = {}
    for i = 1, n do p[i] = padding end
  end
  local ok = type(p) == "table" and #p == n
  for i = 1, n do ok = ok and math.type(p[i]) == "integer" and (allow_negative or p[i] >= 0) end
  if not ok then
    error(("%s: padding must be %s integer or a list of %s, got %s"):format(name,
      allow_negative and "an" or "a non-negative", n == 4 and "four {left, right, top, bottom}" or "two {left, right}",
      type(padding) == "table" and "{" .. table.concat(padding, ", ") .. "}" or tostring(padding)), 3)
  end
  self.padding = table.move(p, 1, n, 1, {})
end

-- x [N, C, H, W] or [C, H, W] padded (mode, value as ember.pad); for the
-- 1-d modules x [N, C, L] or [C, L].
function M.forward(self, x, mode, value)
  local name, p = self.__name, self.padding
  local d = #p // 2 -- dims padded
  if not ember.is_tensor(x) or (x.ndim ~= d + 1 and x.ndim ~= d + 2) then
    error(("%s.forward: expected an input %s, got %s"):format(name,
      d == 2 and "[N, C, H, W] or [C, H, W]" or "[N, C, L] or [C, L]",
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)), 3)
  end
  local H, W = x.shape[x.ndim - 1], x.shape[x.ndim]
  for i, n in ipairs(d == 2 and { W, W, H, H } or { W, W }) do
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
