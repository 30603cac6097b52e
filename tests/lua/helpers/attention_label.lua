-- tests/lua/helpers/attention_label.lua -- a readable, stable test name for
-- an attention spec: label{attention = "local", window_left = 4} is
-- "local(window_left=4)" (options sorted, so pairs() order never shows).
--
--   local label = require "tests.lua.helpers.attention_label"   -- from the source root
return function(spec)
  local parts = {}
  for k, v in pairs(spec) do if k ~= "attention" then parts[#parts + 1] = k .. "=" .. tostring(v) end end
  table.sort(parts)
  return spec.attention .. "(" .. table.concat(parts, ",") .. ")"
end
