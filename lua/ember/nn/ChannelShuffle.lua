--- nn.ChannelShuffle(groups): the channels of [N, C, *] regrouped (C = g k: channel g' k + i
-- goes to i g + g'), as torch.nn.ChannelShuffle (`nn.functional.channel_shuffle`).
-- Errors name nn.ChannelShuffle at the caller's line: its options, and its input (checked as nn.functional's, named ChannelShuffle.forward).
-- @usage print(nn.ChannelShuffle(2)(ember.randn(1, 4, 2, 2)).shape)   --> ember.Size{1, 4, 2, 2}
-- @classmod nn.ChannelShuffle
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"

local ChannelShuffle = Module:extend("ChannelShuffle")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
ChannelShuffle.SIGNATURE = { sizes = { "groups" }, options = {} }

-- one option's check (the constructor's)
local function check(what, v, ok, want)
  if not ok then error(("ChannelShuffle: %s must be %s, got %s"):format(what, want, tostring(v)), 4) end
end

function ChannelShuffle:__init(groups)
  check("groups", groups, math.type(groups) == "integer" and groups > 0, "a positive integer")
  self.groups = groups
end

--- The shuffled channels.
-- @tparam Tensor x [N, C, *]
-- @treturn Tensor
function ChannelShuffle:forward(x)
  Module.check_tensor_input("ChannelShuffle.forward", x)
  return require("ember.nn.functional").channel_shuffle(x, self.groups)
end

--- Its options, for printing.
function ChannelShuffle:extra_repr() return ("groups=%d"):format(self.groups) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
ChannelShuffle.forward = require("ember._errors").wrap(ChannelShuffle.forward, true)

return ChannelShuffle
