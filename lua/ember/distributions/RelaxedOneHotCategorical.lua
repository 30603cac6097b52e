--- distributions.RelaxedOneHotCategorical(temperature, probs) or
-- RelaxedOneHotCategorical(temperature, {logits = l}): the Concrete /
-- Gumbel-softmax distribution on the simplex
-- (torch.distributions.RelaxedOneHotCategorical), reparameterized:
-- softmax((logits + Gumbel noise) / temperature). `base_dist` is the
-- ExpRelaxedCategorical (its log); log_prob goes through the
-- ExpTransform's Jacobian, as torch's. The argmax of a sample is a
-- Categorical(probs) draw.
-- @usage local D = require "ember.distributions"
-- -- a discrete VAE's latent: differentiable relaxed one-hot samples
-- local logits = ember.zeros(4, 3):requires_grad_()
-- local z = D.RelaxedOneHotCategorical(0.5, {logits = logits}):rsample()
-- z:select(2, 1):sum():backward()
-- print(z.shape, logits.grad.shape)   --> ember.Size{4, 3}	ember.Size{4, 3}
-- @classmod distributions.RelaxedOneHotCategorical
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Categorical = require "ember.distributions.Categorical"
local TD = require "ember.distributions.TransformedDistribution"
local transforms = require "ember.distributions.transforms"
local constraints = require "ember.distributions.constraints"

--- distributions.ExpRelaxedCategorical(temperature, probs | {logits =}): the log of a RelaxedOneHotCategorical's value
-- (torch.distributions.relaxed_categorical.ExpRelaxedCategorical), reparameterized.
-- @usage local D = require "ember.distributions"
-- print(D.ExpRelaxedCategorical(1.0, ember.ones(2)):rsample():exp():sum())   --> tensor(1.0000, ...)
local ERC = Distribution:extend("ExpRelaxedCategorical")
ERC.arg_constraints = { temperature = constraints.positive, probs = constraints.simplex, logits = constraints.real_vector }
ERC.support = constraints.real_vector
ERC.has_rsample = true
ERC._param_names = { "probs", "logits" }

function ERC:__init(...)
  local o = self:_args({ "temperature", "probs", "logits" }, ...)
  local t = o.temperature
  if type(t) == "number" then t = nil end
  local c = Categorical._over(self, o)
  if t == nil then t = ember.tensor(o.temperature, { dtype = c.logits.dtype }) end
  if not ember.is_tensor(t) then self:_error("temperature must be a number or a tensor, got %s", type(o.temperature)) end
  self.temperature = t
  if self._validate_args and not t:gt(0):all():item() then self:_error("temperature must be positive (> 0)") end
  self._shown = { "temperature", c._shown[1] }
end

--- log of softmax((logits + g) / temperature), g Gumbel noise
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").ExpRelaxedCategorical(1.0, ember.ones(3)):rsample({2}).shape)   --> ember.Size{2, 3}
function ERC:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local u = Distribution._clamp_probs(Distribution._rand(shape, self.logits.dtype))
  local gumbels = -(-u:log()):log()
  local scores = (self.logits + gumbels) / self.temperature
  return scores - scores:logsumexp(-1, true)
end

--- the Concrete density of log-probabilities, as torch writes it
-- @tparam Tensor value [..., K]
-- @usage print(require("ember.distributions").ExpRelaxedCategorical(1.0, ember.ones(2)):log_prob(ember.tensor({0.5, 0.5}):log()))   --> tensor(-1.3863, ...)
function ERC:log_prob(value)
  value = self:_value(value, "log_prob")
  local K = self._categorical._num_events
  local T = self.temperature
  local log_scale = ember.full(T.shape, K, { dtype = T.dtype }):lgamma() - T:log() * -(K - 1)
  local score = self.logits - value * T:unsqueeze(-1)
  score = (score - score:logsumexp(-1, true)):sum(-1)
  return score + log_scale
end

local ROHC = TD:extend("RelaxedOneHotCategorical")
ROHC.ExpRelaxedCategorical = ERC

function ROHC:__init(...)
  self:_relaxed(ERC, transforms.ExpTransform(), ...)
end

function ROHC:__tostring() return Distribution.__tostring(self) end

--- the simplex
-- @usage print(require("ember.distributions").RelaxedOneHotCategorical(1.0, ember.ones(2)).support.name)   --> a probability vector ...
ROHC._props.support = function() return constraints.simplex end

--- The same relaxation with its parameters expanded to batch_shape.
-- @param batch_shape a table of sizes
-- @usage print(require("ember.distributions").RelaxedOneHotCategorical(1.0, ember.ones(2)):expand({3}).batch_shape)   --> ember.Size{3}
function ROHC:expand(batch_shape)
  local bs = self:_sample_shape(batch_shape)
  local k = self.logits.shape[#self.logits.shape]
  return ROHC(self.temperature, { logits = self.logits:expand(Distribution._concat(bs, { k })), validate_args = self._validate_args })
end

return ROHC
