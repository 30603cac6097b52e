--- distributions.HalfNormal(scale): |X| for X ~ Normal(0, scale)
-- (torch.distributions.HalfNormal), reparameterized; scale > 0, values >= 0.
-- @usage local D = require "ember.distributions"
-- local d = D.HalfNormal(2.0)
-- print(d.mean, d:log_prob(1.0))   --> tensor(1.5958, ...)	tensor(-1.0439, ...)
-- @classmod distributions.HalfNormal
local Distribution = require "ember.distributions.Distribution"
local Normal = require "ember.distributions.Normal"
local half = require "ember.distributions._half"

local HalfNormal = Distribution:extend("HalfNormal")
half.install(HalfNormal, Normal)

--- scale sqrt(2 / pi)
-- @usage print(require("ember.distributions").HalfNormal(1.0).mean)   --> tensor(0.7979, ...)
HalfNormal._props.mean = function(self) return self.scale * math.sqrt(2 / math.pi) end
--- scale^2 (1 - 2 / pi)
-- @usage print(require("ember.distributions").HalfNormal(1.0).variance)   --> tensor(0.3634, ...)
HalfNormal._props.variance = function(self) return self.scale ^ 2 * (1 - 2 / math.pi) end

--- |Normal(0, scale):rsample()|
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").HalfNormal(1.0):rsample({3}).shape)   --> ember.Size{3}
function HalfNormal:rsample(sample_shape) return half.rsample(self, sample_shape) end

--- Normal(0, scale)'s log_prob + log 2
-- @tparam Tensor value
-- @usage print(require("ember.distributions").HalfNormal(1.0):log_prob(0.0))   --> tensor(-0.2258, ...)
function HalfNormal:log_prob(value) return half.log_prob(self, value) end

--- 2 Normal's cdf - 1
-- @tparam Tensor value
-- @usage print(require("ember.distributions").HalfNormal(1.0):cdf(1.0))   --> tensor(0.6827, ...)
function HalfNormal:cdf(value) return half.cdf(self, value) end

--- Normal's icdf((value + 1) / 2)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage print(require("ember.distributions").HalfNormal(1.0):icdf(0.5))   --> tensor(0.6745, ...)
function HalfNormal:icdf(value) return half.icdf(self, value) end

--- Normal's entropy - log 2
-- @usage print(require("ember.distributions").HalfNormal(1.0):entropy())   --> tensor(0.7258, ...)
function HalfNormal:entropy() return half.entropy(self) end

return HalfNormal
