--- distributions.Categorical(probs) or Categorical{logits = l}: a category
-- out of K, the last dim of probs/logits (torch.distributions.Categorical);
-- the other dims are the batch shape. probs are nonnegative and are
-- normalized to sum to 1; logits are normalized (logits - logsumexp).
-- **Categories are 1-based** as every index in ember: sample() gives int64
-- values in 1..K and log_prob takes them (torch's are 0..K-1).
-- mean and variance are NaN, as torch's.
-- @usage local D = require "ember.distributions"
-- -- REINFORCE: sample actions from a policy's logits, weight log_prob by the return
-- local logits = ember.zeros(5, 3):requires_grad_()      -- 5 states, 3 actions
-- local dist = D.Categorical{logits = logits}
-- local actions = dist:sample()                          -- int64 in 1..3, shape [5]
-- local returns = ember.ones(5)
-- local loss = -(dist:log_prob(actions) * returns):mean()
-- loss:backward()
-- print(actions.shape, actions.dtype, logits.grad.shape)   --> ember.Size{5}	int64	ember.Size{5, 3}
-- @classmod distributions.Categorical
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Categorical = Distribution:extend("Categorical")
Categorical.arg_constraints = { probs = constraints.simplex, logits = constraints.real_vector }
Categorical._param_names = { "probs", "logits" }
Categorical._index_values = true -- values are int64 category indices

local FLOAT_MIN = { float64 = -1.7976931348623157e308, float32 = -3.4028234663852886e38 }

function Categorical:__init(...)
  local o = self:_args({ "probs", "logits" }, ...)
  local which = self:_probs_or_logits(o)
  local v = o[which]
  if type(v) == "number" or (ember.is_tensor(v) and v:dim() < 1) then
    self:_error("%s must have at least one dimension (the categories), got %s", which, ember.is_tensor(v) and "a 0-d tensor" or "a number")
  end
  self:_broadcast_all({ which }, o)
  self._shown = { which }
  if which == "probs" then
    if self._validate_args and not self.probs:ge(0):all():item() then
      self:_error("probs must be nonnegative (normalized along the last dim to a probability vector)")
    end
    self.probs = self.probs / self.probs:sum(-1, true)
    self:_check_param("probs")
    self.logits = Distribution._clamp_probs(self.probs):log()
  else
    self:_check_param("logits")
    self.logits = self.logits - self.logits:logsumexp(-1, true)
    self.probs = self.logits:softmax(-1)
  end
  self:_init_shapes()
end

function Categorical:_init_shapes()
  local s = self.logits.shape
  self._num_events = s[#s]
  local b = {}
  for i = 1, #s - 1 do b[i] = s[i] end
  self:_set_shapes(b, {})
end

-- A Categorical from normalized probs and logits (OneHotCategorical's inner one).
function Categorical._from(probs, logits, validate)
  local c = setmetatable({ probs = probs, logits = logits, _validate_args = validate }, Categorical)
  c:_init_shapes()
  return c
end

-- Makes `dist` (OneHotCategorical, Multinomial, ExpRelaxedCategorical) one
-- over the K categories of a Categorical of o's probs or logits, validated
-- as dist is: dist._categorical, its probs, logits and _shown, batch shape
-- the Categorical's, event shape [K]. Returns the Categorical.
function Categorical._over(dist, o)
  local c = Categorical { probs = o.probs, logits = o.logits, validate_args = dist._validate_args }
  dist._categorical, dist.probs, dist.logits, dist._shown = c, c.probs, c.logits, c._shown
  dist:_set_shapes(c.batch_shape, { c._num_events })
  return c
end

--- the number of categories K
-- @usage print(require("ember.distributions").Categorical(ember.ones(3)).param_shape)   --> ember.Size{3}
Categorical._props.param_shape = function(self) return self.probs.shape end

--- categorical(K): an integer in 1..K
-- @usage print(require("ember.distributions").Categorical(ember.ones(3)).support.name)   --> a category in 1..3
Categorical._props.support = function(self) return constraints.categorical(self._num_events) end
--- NaN (torch's: a category has no mean)
-- @usage print(require("ember.distributions").Categorical(ember.ones(3)).mean)   --> tensor(nan, ...)
Categorical._props.mean = function(self) return ember.full(self.batch_shape, 0 / 0, { dtype = self.probs.dtype }) end
--- NaN (torch's)
-- @usage print(require("ember.distributions").Categorical(ember.ones(3)).variance)   --> tensor(nan, ...)
Categorical._props.variance = function(self) return ember.full(self.batch_shape, 0 / 0, { dtype = self.probs.dtype }) end

--- int64 categories in 1..K, shape sample_shape .. batch_shape (multinomial draws).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Categorical(ember.tensor({0.0, 1.0})):sample({3}))   --> tensor([2, 2, 2], ...)
function Categorical:sample(sample_shape)
  local ss = self:_sample_shape(sample_shape)
  local n = 1
  for _, s in ipairs(ss) do n = n * s end
  local out_shape = self:extended_shape(ss)
  if n == 0 or self.probs:numel() == 0 then return ember.zeros(out_shape, { dtype = "int64" }) end
  local p2 = self.probs:detach():reshape(-1, self._num_events)
  local draws = ember.multinomial(p2, n, true)   -- [B, n]
  return draws:transpose(1, 2):contiguous():reshape(out_shape)
end

--- log probs[value] (value: int64 categories in 1..K, broadcast with the batch shape)
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Categorical(ember.tensor({0.25, 0.75})):log_prob(ember.tensor(2, {dtype = "int64"})))   --> tensor(-0.2877, ...)
function Categorical:log_prob(value)
  if type(value) == "number" or (type(value) == "table" and not ember.is_tensor(value)) then
    local ok, t = pcall(ember.tensor, value, { dtype = "int64" })
    if not ok then self:_error("log_prob: the value must be a tensor of categories, a number or a table of numbers") end
    value = t
  end
  value = self:_value(value, "log_prob")
  value = value:to("int64"):unsqueeze(-1)
  local shape = ember.broadcast_shapes(value.shape, self.logits.shape)
  local idx_shape = {}
  for i = 1, #shape - 1 do idx_shape[i] = shape[i] end
  idx_shape[#shape] = 1
  return self.logits:expand(shape):gather(-1, value:expand(idx_shape)):squeeze(-1)
end

--- -sum(probs log probs) over the categories
-- @usage print(require("ember.distributions").Categorical(ember.ones(4)):entropy())   --> tensor(1.3863, ...)
function Categorical:entropy()
  local lo = self.logits:clamp(FLOAT_MIN[self.logits.dtype] or FLOAT_MIN.float32, nil)
  return -(lo * self.probs):sum(-1)
end

--- All K categories, shape [K, 1, ...] (expand = false) or [K, batch...] (torch's enumerate_support; 1-based).
-- @bool[opt=true] expand
-- @usage print(require("ember.distributions").Categorical(ember.ones(3)):enumerate_support())   --> tensor([1, 2, 3], ...)
function Categorical:enumerate_support(expand)
  return self:_support_values(ember.arange(1, self._num_events + 1, { dtype = "int64" }), expand)
end

return Categorical
