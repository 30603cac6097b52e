-- A float32 and a bfloat16 instance of one attention variant with the same
-- tables, drawn bfloat16-representable (so both kernels see equal values),
-- for the specs that hold the bfloat16 kernel to the float32 one.
--   local bf16_pair = require "tests.lua.helpers.bf16_pair"
--   local a32, abf = bf16_pair.make({attention = "relpos", heads = 4, head_dim = 16})
--   local q = bf16_pair.round(ember.randn(2, 4, 70, 16))
local ember = require "ember"

local M = {}

--- t rounded to bfloat16 and back: a float32 tensor of bfloat16 values.
function M.round(t) return t:to("bfloat16"):to("float32") end

--- ember.Attention(spec) in float32 and in bfloat16 (spec's dtype is
-- replaced), the tables N(0, 0.25) rounded to bfloat16, the same in both.
function M.make(spec)
  local function one(dtype)
    local o = { dtype = dtype }
    for k, v in pairs(spec) do if k ~= "dtype" then o[k] = v end end
    return ember.Attention(o)
  end
  local a32, abf = one("float32"), one("bfloat16")
  ember.no_grad(function()
    for i, p in ipairs(a32:parameters()) do
      p:copy_(M.round(ember.randn(p.shape) * 0.5))
      abf:parameters()[i]:copy_(p)
    end
  end)
  return a32, abf
end

return M
