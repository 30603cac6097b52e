--- nn.Flatten([start_dim=2 [, end_dim=-1]]) or nn.Flatten{start_dim=, end_dim=}: merges the dims start_dim..end_dim
-- into one, as torch.nn.Flatten. Dims are **1-based**, as everywhere in
-- ember, and negative dims count from the end (-1 is the last): the
-- default keeps dim 1 (the batch) and flattens the rest, which is PyTorch's
-- default `Flatten(start_dim=1, end_dim=-1)` written 1-based.
-- Errors name nn.Flatten: a dim that is not an integer, or out of range for the input.
-- @usage local f = nn.Flatten()           -- [B, C, H, W] -> [B, C*H*W]
-- print(f(ember.randn(2, 3, 4, 5)).shape)   --> ember.Size{2, 60}
-- print(nn.Flatten(1, 2)(ember.randn(2, 3, 4)).shape)   --> ember.Size{6, 4}
-- @classmod nn.Flatten
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"

local Flatten = Module:extend("Flatten")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
Flatten.SIGNATURE = { sizes = {}, options = { "start_dim", "end_dim" } }

function Flatten:__init(...)
  local start_dim, end_dim = Module.keyword_args("nn.Flatten", { "start_dim", "end_dim" }, ...)
  start_dim, end_dim = start_dim or 2, end_dim or -1
  for _, d in ipairs { { "start_dim", start_dim }, { "end_dim", end_dim } } do
    if math.type(d[2]) ~= "integer" or d[2] == 0 then
      error(("Flatten: %s must be a nonzero integer (dims are 1-based; -1 is the last), got %s"):format(
        d[1], tostring(d[2])), 2)
    end
  end
  self.start_dim, self.end_dim = start_dim, end_dim
end

--- x with dims start_dim..end_dim merged into one.
-- @tparam Tensor x at least as many dims as start_dim and end_dim name
-- @treturn Tensor
function Flatten:forward(x)
  if not ember.is_tensor(x) then error("Flatten.forward: expected a tensor, got " .. type(x), 2) end
  local n = math.max(x.ndim, 1) -- a 0-d tensor flattens to [1], as in PyTorch
  local function pos(d) return d < 0 and n + 1 + d or d end
  local s, e = pos(self.start_dim), pos(self.end_dim)
  if s < 1 or s > n or e < 1 or e > n then
    error(("Flatten.forward: start_dim=%d, end_dim=%d are out of range for a %d-d input of shape %s "
      .. "(dims are 1-based: 1..%d or -%d..-1)"):format(self.start_dim, self.end_dim, x.ndim,
      require("ember._errors").shape_str(x), n, n), 2)
  end
  if s > e then
    error(("Flatten.forward: start_dim=%d comes after end_dim=%d for a %d-d input"):format(
      self.start_dim, self.end_dim, x.ndim), 2)
  end
  if x.ndim == 0 then return x:reshape({ 1 }) end
  return x:flatten(s, e)
end

--- The dims, for printing.
function Flatten:extra_repr()
  return ("start_dim=%d, end_dim=%d"):format(self.start_dim, self.end_dim)
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
Flatten.forward = require("ember._errors").wrap(Flatten.forward)

return Flatten
