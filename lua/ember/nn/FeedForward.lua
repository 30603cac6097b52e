--- nn.FeedForward(d_model, d_ff [, {activation="relu"|"gelu", dropout=0,
-- bias=true, dtype=, device=}]): the position-wise MLP of a Transformer,
-- linear2(dropout(act(linear1(x)))), as inside torch.nn.TransformerEncoderLayer.
-- @usage local ffn = nn.FeedForward(64, 256, {activation = "gelu"})
-- @classmod nn.FeedForward
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"
local Dropout = require "ember.nn.Dropout"
local ReLU = require "ember.nn.ReLU"
local GELU = require "ember.nn.GELU"

local FeedForward = Module:extend("FeedForward")

function FeedForward:__init(d_model, d_ff, opts)
  opts = opts or {}
  local lopts = { bias = opts.bias, dtype = opts.dtype, device = opts.device }
  self:add_module("linear1", Linear(d_model, d_ff, lopts))
  local act = opts.activation or "relu"
  if act == "relu" then self:add_module("activation", ReLU())
  elseif act == "gelu" then self:add_module("activation", GELU())
  else error("FeedForward: activation must be \"relu\" or \"gelu\", got " .. tostring(act), 2) end
  self:add_module("dropout", Dropout(opts.dropout or 0))
  self:add_module("linear2", Linear(d_ff, d_model, lopts))
end

--- linear2(dropout(activation(linear1(x)))).
-- @tparam Tensor x [..., d_model]
-- @treturn Tensor [..., d_model]
function FeedForward:forward(x)
  return self.linear2(self.dropout(self.activation(self.linear1(x))))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
FeedForward.forward = require("ember._errors").wrap(FeedForward.forward)

return FeedForward
