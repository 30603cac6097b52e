--- distributions.Normal(loc, scale): the normal distribution
-- (torch.distributions.Normal), reparameterized (`rsample`: loc + scale * eps).
-- loc and scale are numbers or tensors, broadcast to the batch shape;
-- scale must be > 0.
-- @usage local D = require "ember.distributions"
-- -- a VAE's latent: rsample for the pathwise gradient, KL to a standard normal
-- local mu, logvar = ember.zeros(4, 2):requires_grad_(), ember.zeros(4, 2):requires_grad_()
-- local q = D.Normal(mu, (logvar * 0.5):exp())
-- local z = q:rsample()                                   -- [4, 2], gradient flows to mu and logvar
-- local kl = D.kl_divergence(q, D.Normal(ember.zeros(4, 2), ember.ones(4, 2))):sum(-1):mean()
-- kl:backward()
-- print(z.shape, kl:item())   --> ember.Size{4, 2}	0.0
-- @classmod distributions.Normal
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local Normal = Distribution:extend("Normal")
Normal.arg_constraints = { loc = constraints.real, scale = constraints.positive }
Normal.support = constraints.real
Normal.has_rsample = true
Normal._param_names = { "loc", "scale" }

local LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

--- loc
-- @usage print(require("ember.distributions").Normal(1.5, 2.0).mean)   --> tensor(1.5000, ...)
Normal._props.mean = function(self) return self.loc end
--- scale
-- @usage print(require("ember.distributions").Normal(1.5, 2.0).stddev)   --> tensor(2.0000, ...)
Normal._props.stddev = function(self) return self.scale end
--- scale ^ 2
-- @usage print(require("ember.distributions").Normal(1.5, 2.0).variance)   --> tensor(4.0000, ...)
Normal._props.variance = function(self) return self.scale ^ 2 end

--- loc + scale * eps, eps ~ N(0, 1) from ember's generator.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Normal(0.0, 1.0):rsample({2, 3}).shape)   --> ember.Size{2, 3}
function Normal:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  return self.loc + Distribution._randn(shape, self.loc.dtype) * self.scale
end

--- -(value - loc)^2 / (2 scale^2) - log(scale) - log(sqrt(2 pi))
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Normal(0.0, 1.0):log_prob(1.0))   --> tensor(-1.4189, ...)
function Normal:log_prob(value)
  value = self:_value(value, "log_prob")
  return -((value - self.loc) ^ 2) / (self.scale ^ 2 * 2) - self.scale:log() - LOG_SQRT_2PI
end

--- 0.5 + log(sqrt(2 pi)) + log(scale)
-- @usage print(require("ember.distributions").Normal(0.0, 1.0):entropy())   --> tensor(1.4189, ...)
function Normal:entropy()
  return self.scale:log() + (0.5 + LOG_SQRT_2PI)
end

--- 0.5 (1 + erf((value - loc) / (scale sqrt 2)))
-- @tparam Tensor value
-- @usage print(require("ember.distributions").Normal(0.0, 1.0):cdf(1.0))   --> tensor(0.8413, ...)
function Normal:cdf(value)
  value = self:_value(value, "cdf")
  return (((value - self.loc) / (self.scale * math.sqrt(2))):erf() + 1) * 0.5
end

--- loc + scale sqrt(2) erfinv(2 value - 1)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").Normal(0.0, 1.0):icdf(0.975))   --> tensor(1.9600, ...)
function Normal:icdf(value)
  value = self:_value(value, "icdf", constraints.unit_interval)
  return self.loc + self.scale * (value * 2 - 1):erfinv() * math.sqrt(2)
end

return Normal
