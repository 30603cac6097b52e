--- distributions.Dirichlet(concentration): probability vectors over the
-- last dim's K categories (torch.distributions.Dirichlet); concentration
-- > 0, shape [..., K] (event shape [K]). sample() normalizes K Gamma
-- draws; rsample() normalizes reparameterized Gamma draws (their implicit
-- gradients, `Gamma.rsample`): an unbiased pathwise gradient, though not
-- torch's per draw (torch's, torch._dirichlet_grad, holds each marginal
-- Beta's quantile fixed).
-- @usage local D = require "ember.distributions"
-- local d = D.Dirichlet(ember.tensor({1.0, 2.0, 3.0}))
-- print(d.mean, d:log_prob(ember.tensor({0.2, 0.3, 0.5})))   --> tensor([0.1667, 0.3333, 0.5000], ...)	tensor(1.5041, ...)
-- @classmod distributions.Dirichlet
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Gamma = require "ember.distributions.Gamma"
local constraints = require "ember.distributions.constraints"

local Dirichlet = Distribution:extend("Dirichlet")
Dirichlet.arg_constraints = { concentration = constraints.positive }
Dirichlet.support = constraints.simplex
Dirichlet._param_names = { "concentration" }
Dirichlet.has_rsample = true

function Dirichlet:__init(...)
  local o = self:_args({ "concentration" }, ...)
  local c = o.concentration
  if not ember.is_tensor(c) or c:dim() < 1 then
    self:_error("concentration must be a tensor with at least one dimension (the categories)")
  end
  self:_broadcast_all({ "concentration" }, o)
  self:_check_param("concentration")
  local s = self.concentration.shape
  local b = {}
  for i = 1, #s - 1 do b[i] = s[i] end
  self:_set_shapes(b, { s[#s] })
end

--- concentration / its sum
-- @usage print(require("ember.distributions").Dirichlet(ember.ones(4)).mean)   --> tensor([0.2500, 0.2500, 0.2500, 0.2500], ...)
Dirichlet._props.mean = function(self) return self.concentration / self.concentration:sum(-1, true) end
--- c (a0 - c) / (a0^2 (a0 + 1)), a0 the sum of c
-- @usage print(require("ember.distributions").Dirichlet(ember.ones(2)).variance)   --> tensor([0.0833, 0.0833], ...)
Dirichlet._props.variance = function(self)
  local c = self.concentration
  local a0 = c:sum(-1, true)
  return c * (a0 - c) / (a0 ^ 2 * (a0 + 1))
end

--- probability vectors (no gradient): Gamma(c, 1) draws over their sum.
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").Dirichlet(ember.ones(3)):sample({2}):sum(-1))   --> tensor([1.0000, 1.0000], ...)
function Dirichlet:sample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local a = Distribution._sampler_input(self.concentration, shape)
  local g = Gamma._standard(a)
  local x = (g / g:sum(-1, true)):to(self.concentration.dtype)
  local tiny = Distribution._tiny(x.dtype)
  return x:clamp(tiny, 1 - Distribution._eps(x.dtype))
end

--- probability vectors whose gradient flows to the concentration: reparameterized Gamma(c, 1)
-- draws over their sum.
-- @param[opt] sample_shape a table of sizes
-- @usage local c = ember.ones({3}, {dtype = "float64"}):requires_grad_()
-- local x = require("ember.distributions").Dirichlet(c):rsample({2})
-- print(x:sum(-1))   --> tensor([1.0000, 1.0000], ...)
function Dirichlet:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local g = Gamma._rstandard(self.concentration:expand(shape))
  local x = g / g:sum(-1, true)
  return Distribution._clamp_value(x, Distribution._tiny(x.dtype), 1 - Distribution._eps(x.dtype))
end

--- sum((c - 1) log x) + lgamma(sum c) - sum(lgamma c)
-- @tparam Tensor value probability vectors [..., K]
-- @usage print(require("ember.distributions").Dirichlet(ember.ones(3)):log_prob(ember.tensor({0.2, 0.3, 0.5})))   --> tensor(0.6931, ...)
function Dirichlet:log_prob(value)
  value = self:_value(value, "log_prob")
  local c = self.concentration
  return ember.xlogy(c - 1, value):sum(-1) + c:sum(-1):lgamma() - c:lgamma():sum(-1)
end

--- sum(lgamma c) - lgamma(a0) - (K - a0) digamma(a0) - sum((c - 1) digamma c)
-- @usage print(require("ember.distributions").Dirichlet(ember.ones(2)):entropy())   --> tensor(0.0000, ...)
function Dirichlet:entropy()
  local c = self.concentration
  local k = c.shape[#c.shape]
  local a0 = c:sum(-1)
  return c:lgamma():sum(-1) - a0:lgamma() - (-a0 + k) * a0:digamma() - ((c - 1) * c:digamma()):sum(-1)
end

return Dirichlet
