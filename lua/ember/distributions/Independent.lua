--- distributions.Independent(base, n): reinterprets the last n batch dims
-- of `base` as event dims (torch.distributions.Independent): log_prob and
-- entropy sum over them. Sampling, mean and variance are the base's.
-- @usage local D = require "ember.distributions"
-- local d = D.Independent(D.Normal(ember.zeros(4, 3), ember.ones(4, 3)), 1)
-- print(d.batch_shape, d.event_shape, d:log_prob(ember.zeros(4, 3)).shape)   --> ember.Size{4}	ember.Size{3}	ember.Size{4}
-- @classmod distributions.Independent
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"

local Independent = Distribution:extend("Independent")

function Independent:__init(base, n, opts)
  if type(base) ~= "table" or getmetatable(base) == nil or base.batch_shape == nil then
    self:_error("base must be a distribution, got %s", type(base))
  end
  if math.type(n) ~= "integer" or n < 0 then
    self:_error("reinterpreted_batch_ndims must be a nonnegative integer, got %s", tostring(n))
  end
  local bs = base.batch_shape
  if n > #bs then
    self:_error("reinterpreted_batch_ndims %d is more than the base's %d batch dims", n, #bs)
  end
  self._validate_args = base._validate_args
  if opts and opts.validate_args ~= nil then self._validate_args = opts.validate_args end
  self.base_dist, self.reinterpreted_batch_ndims = base, n
  local b, e = {}, {}
  for i = 1, #bs - n do b[#b + 1] = bs[i] end
  for i = #bs - n + 1, #bs do e[#e + 1] = bs[i] end
  self:_set_shapes(b, Distribution._concat(e, base.event_shape))
  self.has_rsample = base.has_rsample
end

function Independent:__tostring()
  return ("distributions.Independent(%s, %d)"):format(tostring(self.base_dist), self.reinterpreted_batch_ndims)
end

--- The base distribution expanded to batch_shape .. the reinterpreted dims.
-- @param batch_shape a table of sizes
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.zeros(3), 1), 1):expand({2}).batch_shape)   --> ember.Size{2}
function Independent:expand(batch_shape)
  local bs = self:_sample_shape(batch_shape)
  local e = {}
  local nb = #self.base_dist.batch_shape
  for i = nb - self.reinterpreted_batch_ndims + 1, nb do e[#e + 1] = self.base_dist.batch_shape[i] end
  return Independent(self.base_dist:expand(Distribution._concat(bs, e)), self.reinterpreted_batch_ndims,
    { validate_args = self._validate_args })
end

--- the base's support
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Exponential(ember.ones(2)), 1).support.name)   --> nonnegative (>= 0)
Independent._props.support = function(self) return self.base_dist.support end
--- the base's mean
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.ones(2), 1), 1).mean)   --> tensor([1.0000, 1.0000], ...)
Independent._props.mean = function(self) return self.base_dist.mean end
--- the base's variance
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.ones(2), 2), 1).variance)   --> tensor([4.0000, 4.0000], ...)
Independent._props.variance = function(self) return self.base_dist.variance end

--- the base's sample
-- @param[opt] sample_shape a table of sizes
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.zeros(3), 1), 1):sample({2}).shape)   --> ember.Size{2, 3}
function Independent:sample(sample_shape) return self.base_dist:sample(sample_shape) end

--- the base's rsample
-- @param[opt] sample_shape a table of sizes
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.zeros(3), 1), 1):rsample().shape)   --> ember.Size{3}
function Independent:rsample(sample_shape) return self.base_dist:rsample(sample_shape) end

--- the base's log_prob summed over the reinterpreted dims
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.zeros(2), 1), 1):log_prob(ember.zeros(2)))   --> tensor(-1.8379, ...)
function Independent:log_prob(value)
  return Distribution._sum_rightmost(self.base_dist:log_prob(value), self.reinterpreted_batch_ndims)
end

--- the base's entropy summed over the reinterpreted dims
-- @usage local D = require "ember.distributions"
-- print(D.Independent(D.Normal(ember.zeros(2), 1), 1):entropy())   --> tensor(2.8379, ...)
function Independent:entropy()
  return Distribution._sum_rightmost(self.base_dist:entropy(), self.reinterpreted_batch_ndims)
end

return Independent
