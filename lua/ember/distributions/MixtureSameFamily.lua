--- distributions.MixtureSameFamily(mixture, components): a mixture of K
-- distributions of one family (torch.distributions.MixtureSameFamily) --
-- `mixture` a Categorical over K (batch shape B), `components` a
-- distribution of batch shape B .. [K] (the last batch dim: the
-- components); batch shape B, the components' event shape. log_prob is
-- logsumexp(log mixture weights + components' log_prob); sample draws a
-- component then its value (no rsample, as torch's); mean, variance
-- (total variance), cdf for univariate components.
-- @usage local D = require "ember.distributions"
-- -- a Gaussian mixture model with 3 components
-- local gmm = D.MixtureSameFamily(D.Categorical{logits = ember.zeros(3)},
--                                 D.Normal(ember.tensor({-2.0, 0.0, 2.0}), ember.ones(3)))
-- print(gmm.batch_shape, gmm:log_prob(ember.tensor(0.0)), gmm.mean)   --> ember.Size{}	tensor(-1.7780, ...)	tensor(0.0000, ...)
-- @classmod distributions.MixtureSameFamily
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Categorical = require "ember.distributions.Categorical"

local MSF = Distribution:extend("MixtureSameFamily")

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

function MSF:__init(mixture, components, opts)
  if getmetatable(mixture) ~= Categorical then
    self:_error("mixture_distribution must be a distributions.Categorical, got %s", type(mixture) == "table" and tostring(mixture.__name) or type(mixture))
  end
  if type(components) ~= "table" or components.batch_shape == nil then
    self:_error("component_distribution must be a distribution, got %s", type(components))
  end
  local cb = components.batch_shape
  if #cb < 1 then self:_error("component_distribution must have a batch dim for the components (its batch shape is [])") end
  local k = cb[#cb]
  if mixture._num_events ~= k then
    self:_error("the mixture has %d categories but component_distribution's last batch dim is %d", mixture._num_events, k)
  end
  local b = {}
  for i = 1, #cb - 1 do b[i] = cb[i] end
  if not same(mixture.batch_shape, b) then
    self:_error("the mixture's batch shape [%s] is not component_distribution's without its last dim [%s]",
      table.concat(mixture.batch_shape, ", "), table.concat(b, ", "))
  end
  self.mixture_distribution, self.component_distribution = mixture, components
  self._validate_args = components._validate_args
  if type(opts) == "table" and opts.validate_args ~= nil then self._validate_args = opts.validate_args end
  self._event_ndims = #components.event_shape
  self:_set_shapes(b, components.event_shape)
end

function MSF:__tostring()
  return ("distributions.MixtureSameFamily(%s, %s)"):format(tostring(self.mixture_distribution), tostring(self.component_distribution))
end

--- the components' support
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.ones(2)), D.Exponential(ember.ones(2))).support.name)   --> nonnegative (>= 0)
MSF._props.support = function(self) return self.component_distribution.support end

-- the mixture weights, shaped to multiply a components' quantity [.., K, event...]
function MSF:_weights()
  local p = self.mixture_distribution.probs
  for _ = 1, self._event_ndims do p = p:unsqueeze(-1) end
  return p
end

--- sum over components of weight * component mean
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.tensor({0.25, 0.75})), D.Normal(ember.tensor({0.0, 4.0}), 1.0)).mean)   --> tensor(3.0000, ...)
MSF._props.mean = function(self)
  return (self:_weights() * self.component_distribution.mean):sum(-1 - self._event_ndims)
end

--- the mixture's total variance: E[component variance] + Var[component mean]
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.tensor({0.5, 0.5})), D.Normal(ember.tensor({-1.0, 1.0}), 1.0)).variance)   --> tensor(2.0000, ...)
MSF._props.variance = function(self)
  local w = self:_weights()
  local dim = -1 - self._event_ndims
  local c = self.component_distribution
  local m = (w * c.mean):sum(dim, true)
  return (w * c.variance):sum(dim) + (w * (c.mean - m) ^ 2):sum(dim)
end

-- value with a components dim inserted before its event dims
function MSF:_pad(value)
  return value:unsqueeze(-1 - self._event_ndims)
end

--- logsumexp over components of log weight + component log_prob
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.ones(2)), D.Normal(ember.zeros(2), 1.0)):log_prob(ember.tensor(0.0)))   --> tensor(-0.9189, ...)
function MSF:log_prob(value)
  value = self:_value(value, "log_prob", false)
  local lp = self.component_distribution:log_prob(self:_pad(value))
  local mix = self.mixture_distribution.logits:log_softmax(-1)
  return (lp + mix):logsumexp(-1)
end

--- sum over components of weight * component cdf (univariate components)
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.ones(2)), D.Normal(ember.tensor({-1.0, 1.0}), 1.0)):cdf(ember.tensor(0.0)))   --> tensor(0.5000, ...)
function MSF:cdf(value)
  if self._event_ndims ~= 0 then self:_error("cdf needs univariate components (event shape [])") end
  value = self:_value(value, "cdf", false)
  local c = self.component_distribution:cdf(self:_pad(value))
  return (c * self.mixture_distribution.probs):sum(-1)
end

--- draws (no gradient): a component from the mixture, then that component's value
-- @param[opt] sample_shape a table of sizes
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.ones(2)), D.Normal(ember.zeros(2), 1.0)):sample({4}).shape)   --> ember.Size{4}
function MSF:sample(sample_shape)
  local ss = self:_sample_shape(sample_shape)
  local which = self.mixture_distribution:sample(ss)                 -- ss .. B, 1-based
  local values = self.component_distribution:sample(ss):detach()     -- ss .. B .. [K] .. E
  local idx = which
  for _ = 1, self._event_ndims + 1 do idx = idx:unsqueeze(-1) end
  local shape = {}
  for i = 1, #values.shape do shape[i] = values.shape[i] end
  shape[#shape - self._event_ndims] = 1
  local dim = -1 - self._event_ndims
  return values:gather(dim, idx:expand(shape)):squeeze(dim)
end

--- The mixture and the components expanded to batch_shape (.. [K]).
-- @param batch_shape a table of sizes
-- @usage local D = require "ember.distributions"
-- print(D.MixtureSameFamily(D.Categorical(ember.ones(2)), D.Normal(ember.zeros(2), 1.0)):expand({3}).batch_shape)   --> ember.Size{3}
function MSF:expand(batch_shape)
  local bs = self:_sample_shape(batch_shape)
  local k = self.mixture_distribution._num_events
  return MSF(self.mixture_distribution:expand(bs), self.component_distribution:expand(Distribution._concat(bs, { k })),
    { validate_args = self._validate_args })
end

return MSF
