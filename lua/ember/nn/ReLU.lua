-- nn.ReLU(): max(x, 0).
local Module = require "ember.nn.Module"

local ReLU = Module:extend("ReLU")

function ReLU:forward(x) return x:relu() end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ReLU.forward = require("ember._errors").wrap(ReLU.forward)

return ReLU
