--- nn.LazyLinear(out_features [, {bias=true, dtype=, device=, init=}]): nn.Linear whose in_features is
-- taken from the first input's last dim, as torch.nn.LazyLinear. The first forward (or a
-- load_state_dict holding "weight") makes the parameters -- nn.Linear's, initialised as nn.Linear's
-- -- and the module becomes an nn.Linear (PyTorch's cls_to_become). Until then it has no parameters:
-- run one batch through it (or load a state dict) before building the optimizer, as PyTorch's docs
-- advise (PyTorch hands the optimizer placeholders; ember has none to hand).
-- Errors name nn.LazyLinear: a bad out_features or option (checked when built), an input that is not a
-- floating-point tensor.
-- @usage local lin = nn.LazyLinear(3)
-- print(lin(ember.randn(2, 5)).shape, lin.in_features)   --> ember.Size{2, 3}   5
-- print(lin)   --> Linear(in_features=5, out_features=3, bias=true)
-- @classmod nn.LazyLinear
local errors = require "ember._errors"
local Module = require "ember.nn.Module"
local Linear = require "ember.nn.Linear"

local LazyLinear = Module:extend("LazyLinear")

function LazyLinear:__init(out_features, opts)
  if math.type(out_features) ~= "integer" or out_features < 1 then
    errors.raise("LazyLinear: out_features must be a positive integer, got %s", tostring(out_features))
  end
  self.out_features = out_features
  self._lazy_opts = Module.check_options("nn.LazyLinear", opts, { "bias", "init", "dtype", "device" })
end

-- Makes the parameters for in_features and turns self into an nn.Linear.
local function materialize(self, in_features)
  local opts = rawget(self, "_lazy_opts")
  rawset(self, "_lazy_opts", nil)
  setmetatable(self, Linear)
  Linear.__init(self, in_features, self.out_features, opts)
end

--- The first call sizes the layer from x's last dim, then it is nn.Linear's forward.
-- @tparam Tensor x [*, in_features]
-- @treturn Tensor [*, out_features]
function LazyLinear:forward(x)
  Module.check_float_input("LazyLinear.forward", x)
  if x.ndim == 0 then errors.raise("LazyLinear.forward: expected an input [*, in_features], got a 0-d tensor") end
  materialize(self, x.shape[x.ndim])
  return self:forward(x)
end

--- Loads a state dict; one holding "weight" [out_features, in] first makes the parameters for in
-- (PyTorch's lazy load).
-- @tparam table sd
-- @bool[opt=true] strict
function LazyLinear:load_state_dict(sd, strict)
  local w = type(sd) == "table" and sd.weight
  if Module.is_tensor(w) and w.ndim == 2 then
    if w.shape[1] ~= self.out_features then
      errors.raise("LazyLinear.load_state_dict: weight has %d rows, out_features is %d", w.shape[1], self.out_features)
    end
    materialize(self, w.shape[2])
    return self:load_state_dict(sd, strict)
  end
  return Module.load_state_dict(self, sd, strict)
end

--- Its sizes, for printing (PyTorch's: in_features=0 until the first call).
function LazyLinear:extra_repr()
  return ("in_features=0, out_features=%d, bias=%s"):format(self.out_features, tostring(self._lazy_opts.bias ~= false))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LazyLinear.forward = errors.wrap(LazyLinear.forward)

return LazyLinear
