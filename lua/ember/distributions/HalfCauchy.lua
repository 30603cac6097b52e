--- distributions.HalfCauchy(scale): |X| for X ~ Cauchy(0, scale)
-- (torch.distributions.HalfCauchy), reparameterized; scale > 0, values >= 0.
-- Its mean and variance are inf, as torch's.
-- @usage local D = require "ember.distributions"
-- print(D.HalfCauchy(1.0):log_prob(1.0), D.HalfCauchy(1.0):icdf(0.5))   --> tensor(-1.1447, ...)	tensor(1.0000, ...)
-- @classmod distributions.HalfCauchy
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local Cauchy = require "ember.distributions.Cauchy"
local half = require "ember.distributions._half"

local HalfCauchy = Distribution:extend("HalfCauchy")
half.install(HalfCauchy, Cauchy)

--- inf
-- @usage print(require("ember.distributions").HalfCauchy(1.0).mean)   --> tensor(inf, ...)
HalfCauchy._props.mean = function(self) return ember.full(self.batch_shape, math.huge, { dtype = self.scale.dtype }) end
--- inf (the Cauchy's)
-- @usage print(require("ember.distributions").HalfCauchy(1.0).variance)   --> tensor(inf, ...)
HalfCauchy._props.variance = function(self) return self.base_dist.variance end

--- |Cauchy(0, scale):rsample()|
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").HalfCauchy(1.0):rsample({3}).shape)   --> ember.Size{3}
function HalfCauchy:rsample(sample_shape) return half.rsample(self, sample_shape) end

--- Cauchy(0, scale)'s log_prob + log 2
-- @tparam Tensor value
-- @usage print(require("ember.distributions").HalfCauchy(1.0):log_prob(0.0))   --> tensor(-0.4516, ...)
function HalfCauchy:log_prob(value) return half.log_prob(self, value) end

--- 2 Cauchy's cdf - 1
-- @tparam Tensor value
-- @usage print(require("ember.distributions").HalfCauchy(1.0):cdf(1.0))   --> tensor(0.5000, ...)
function HalfCauchy:cdf(value) return half.cdf(self, value) end

--- Cauchy's icdf((value + 1) / 2)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").HalfCauchy(2.0):icdf(0.5))   --> tensor(2.0000, ...)
function HalfCauchy:icdf(value) return half.icdf(self, value) end

--- Cauchy's entropy - log 2
-- @usage print(require("ember.distributions").HalfCauchy(1.0):entropy())   --> tensor(1.8379, ...)
function HalfCauchy:entropy() return half.entropy(self) end

return HalfCauchy
