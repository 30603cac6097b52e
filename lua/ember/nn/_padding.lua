-- nn/_padding.lua (internal): what the padding modules (ConstantPad2d,
-- ZeroPad2d, ReflectionPad2d, ReplicationPad2d and the 1-d ConstantPad1d,
-- ReflectionPad1d, ReplicationPad1d, the 3-d ConstantPad3d, ReflectionPad3d,
-- ReplicationPad3d and ZeroPad1d/3d) share: their padding option and their
-- forward, which is `ember.pad` after checks that name the module.
local error = require("ember._errors").error -- raises at the user's line
local shape_str = require("ember._errors").shape_str
local ember = require "ember.nn._ember"

local M = {}

-- padding: an integer (every side) or {left, right, top, bottom} ({left,
-- right} for the 1-d modules, sides = 2; {left, right, top, bottom, front,
-- back} for the 3-d ones, sides = 6), kept as self.padding; negative
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
      allow_negative and "an" or "a non-negative",
      ({ [2] = "two {left, right}", [4] = "four {left, right, top, bottom}",
        [6] = "six {left, right, top, bottom, front, back}" })[n],
      type(padding) == "table" and "{" .. table.concat(padding, ", ") .. "}" or tostring(padding)), 3)
  end
  self.padding = table.move(p, 1, n, 1, {})
end

-- x [N, C, H, W] or [C, H, W] padded (mode, value as ember.pad); for the
-- 1-d modules x [N, C, L] or [C, L], for the 3-d ones [N, C, D, H, W] or [C, D, H, W].
function M.forward(self, x, mode, value)
  local name, p = self.__name, self.padding
  local d = #p // 2 -- dims padded
  if not ember.is_tensor(x) or (x.ndim ~= d + 1 and x.ndim ~= d + 2) then
    error(("%s.forward: expected an input %s, got %s"):format(name,
      ({ "[N, C, L] or [C, L]", "[N, C, H, W] or [C, H, W]", "[N, C, D, H, W] or [C, D, H, W]" })[d],
      ember.is_tensor(x) and ("shape " .. shape_str(x)) or type(x)), 3)
  end
  local sizes = {} -- each side's dim size: the last dim's for p[1], p[2], the one before for p[3], p[4], ...
  for i = 1, 2 * d do sizes[i] = x.shape[x.ndim - (i - 1) // 2] end
  for i, n in ipairs(sizes) do
    local bad = (mode == "reflect" and p[i] >= n) or (mode == "replicate" and n == 0)
      or (mode == "constant" and n + math.min(p[i], 0) + math.min(p[i % 2 == 1 and i + 1 or i - 1], 0) < 0)
    if bad then
      error(("%s.forward: padding (%s) is too large for an input of shape %s%s"):format(name,
        table.concat(p, ", "), shape_str(x), mode == "reflect" and " (reflect padding must be less than the dim's size)" or ""), 3)
    end
  end
  return ember.pad(x, p, mode, value)
end

-- PyTorch's keyword form of a padding module's arguments, `{padding = p [, value = v]}`
-- (a table without the list's [1]), positionally; other calls come back as given.
function M.args(who, names, ...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and first[1] == nil and not ember.is_tensor(first) then
    return require("ember.nn.Module").keyword_args(who, names, ...)
  end
  return ...
end

-- A number as Python prints it: an integer as is, a float in the fewest digits that read
-- back as it, with ".0" when they have no point (value=-2.0, value=0.5).
function M.py_number(v)
  if math.type(v) == "integer" then return tostring(v) end
  for digits = 1, 17 do
    local s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then return s:find("[%.eni]") and s or s .. ".0" end
  end
  return tostring(v)
end

-- PyTorch's text of the padding: (left, right, top, bottom[, front, back]).
function M.repr(self) return "(" .. table.concat(self.padding, ", ") .. ")" end

return M
