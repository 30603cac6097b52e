--- nn.LazyLinear(out_features [, {bias=true, dtype=, device=, init=}]): nn.Linear whose in_features is
-- taken from the first input's last dim, as torch.nn.LazyLinear. The first forward (or a
-- load_state_dict holding "weight") makes the parameters -- nn.Linear's, initialised as nn.Linear's
-- -- and the module becomes an nn.Linear (PyTorch's cls_to_become; nn/_lazy.lua). Until then it has
-- no parameters: run one batch through it (or load a state dict) before building the optimizer, as
-- PyTorch's docs advise (PyTorch hands the optimizer placeholders; ember has none to hand).
-- Errors: bad out_features or options name nn.Linear (checked when built), a non-float input names
-- nn.LazyLinear.
-- @usage local lin = nn.LazyLinear(3)
-- print(lin(ember.randn(2, 5)).shape, lin.in_features)   --> ember.Size{2, 3}   5
-- print(lin)   --> Linear(in_features=5, out_features=3, bias=true)
-- @classmod nn.LazyLinear
local errors = require "ember._errors"
local lazy = require "ember.nn._lazy"

return lazy.class("LazyLinear", require "ember.nn.Linear", function() return 1 end,
  function(who, x)
    if x.ndim == 0 then errors.raise("%s: expected an input [*, in_features], got a 0-d tensor", who) end
    return x.shape[x.ndim]
  end,
  function(who, sd, out_features)
    local w = sd.weight
    if not (require("ember.nn.Module").is_tensor(w) and w.ndim == 2) then return nil end
    if w.shape[1] ~= out_features then
      errors.raise("%s: weight has %d rows, out_features is %d", who, w.shape[1], out_features)
    end
    return w.shape[2]
  end)
