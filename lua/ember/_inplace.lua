-- ember/_inplace.lua: PyTorch's in-place twins of elementwise ops,
-- t:masked_fill_(mask, v), t:clamp_(lo, hi), t:relu_(), t:sub_(x) ...:
-- the out-of-place op, written back into t (t:copy_), t returned. As
-- copy_, they refuse a tensor that is part of an autograd graph (ember
-- does not record in-place ops: use the out-of-place op there) and a leaf
-- that requires grad outside no_grad; where copy_ works (data, buffers,
-- no_grad blocks) they do. init.lua loads it.
local core = require "ember.core"
local errors = require "ember._errors"
local T = core.Tensor

local OPS = {
  "masked_fill", "clamp", "clamp_min", "clamp_max", "relu", "sub", "div", "pow", "abs", "neg", "exp", "log",
  "sqrt", "rsqrt", "sigmoid", "tanh", "floor", "ceil", "round", "trunc", "sign", "sin", "cos", "log1p", "expm1",
  "erf", "silu", "gelu", "lerp", "addcmul", "addcdiv", "nan_to_num",
}

for _, op in ipairs(OPS) do
  local name, f = op .. "_", T[op]
  if T[name] == nil and f ~= nil then
    T[name] = function(x, ...)
      local ok, err = pcall(function(...) x:copy_(f(x, ...)) end, ...)
      if not ok then
        -- the message names what the user called, not copy_
        errors.raise("%s", (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub("ember%.copy_", "ember." .. name)))
      end
      return x
    end
  end
end
