-- nn.ReLU(): max(x, 0).
local Module = require "ember.nn.Module"

local ReLU = Module:extend("ReLU")

function ReLU:forward(x) return x:relu() end

return ReLU
