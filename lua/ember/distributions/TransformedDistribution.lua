--- distributions.TransformedDistribution(base, transforms): the
-- distribution of transforms applied in order to draws of `base`
-- (torch.distributions.TransformedDistribution), for ember's elementwise
-- transforms (distributions.transforms). log_prob(y) inverts the
-- transforms and subtracts their log|det J| (summed over the event dims);
-- rsample where the base has it; cdf/icdf through the transforms'
-- monotonicity. A tanh-squashed Normal (SAC's policy) is
-- TransformedDistribution(Normal(mu, std), {TanhTransform()}).
-- @usage local D = require "ember.distributions"
-- local T = require "ember.distributions.transforms"
-- local d = D.TransformedDistribution(D.Normal(0.0, 1.0), {T.TanhTransform()})
-- print(d:log_prob(ember.tensor(0.5)))   --> tensor(-0.7821, ...)
-- @classmod distributions.TransformedDistribution
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local transforms = require "ember.distributions.transforms"

local TD = Distribution:extend("TransformedDistribution")

function TD:__init(base, ts, opts)
  if type(base) ~= "table" or base.batch_shape == nil then self:_error("base_distribution must be a distribution, got %s", type(base)) end
  if transforms._is_transform(ts) then ts = { ts } end
  if type(ts) ~= "table" then self:_error("transforms must be a transform or a list of them, got %s", type(ts)) end
  for i, t in ipairs(ts) do
    if not transforms._is_transform(t) then self:_error("transforms[%d] is not a transform (distributions.transforms)", i) end
  end
  self.base_dist, self.transforms = base, ts
  self._validate_args = base._validate_args
  if type(opts) == "table" and opts.validate_args ~= nil then self._validate_args = opts.validate_args end
  self.has_rsample = base.has_rsample
  self:_set_shapes(base.batch_shape, base.event_shape)
end

-- A relaxation (RelaxedBernoulli, RelaxedOneHotCategorical): `Base(...)`
-- (its logit or log) through `transform`, validated as the base is, with
-- the base's temperature, probs, logits and printed parameters.
function TD:_relaxed(Base, transform, ...)
  local base = Base(...)
  TD.__init(self, base, { transform }, { validate_args = base._validate_args })
  self.temperature, self.probs, self.logits, self._shown = base.temperature, base.probs, base.logits, base._shown
end

function TD:__tostring()
  local names = {}
  for i, t in ipairs(self.transforms) do names[i] = tostring(t) end
  return ("distributions.TransformedDistribution(%s, {%s})"):format(tostring(self.base_dist), table.concat(names, ", "))
end

--- the last transform's codomain (the base's support without transforms)
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}).support.name)   --> positive (> 0)
TD._props.support = function(self)
  local n = #self.transforms
  return n > 0 and self.transforms[n].codomain or self.base_dist.support
end

--- The base distribution and the same transforms, expanded to batch_shape.
-- @param batch_shape a table of sizes
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}):expand({3}).batch_shape)   --> ember.Size{3}
function TD:expand(batch_shape)
  return TD(self.base_dist:expand(batch_shape), self.transforms, { validate_args = self._validate_args })
end

local function apply(self, x)
  for _, t in ipairs(self.transforms) do x = t(x) end
  return x
end

--- the transforms applied to a base sample (no gradient)
-- @param[opt] sample_shape a table of sizes
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}):sample({2}).shape)   --> ember.Size{2}
function TD:sample(sample_shape) return apply(self, self.base_dist:sample(sample_shape)):detach() end

--- the transforms applied to a base rsample (where the base has one)
-- @param[opt] sample_shape a table of sizes
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.TanhTransform()}):rsample({2}).shape)   --> ember.Size{2}
function TD:rsample(sample_shape)
  if not self.has_rsample then Distribution.rsample(self, sample_shape) end
  return apply(self, self.base_dist:rsample(sample_shape))
end

--- base log_prob of the inverted value minus the transforms' log|det J|, summed over the event dims
-- @tparam Tensor value
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}):log_prob(ember.tensor(1.0)))   --> tensor(-0.9189, ...)
function TD:log_prob(value)
  value = self:_value(value, "log_prob")
  local ev = #self.event_shape
  local lp = 0
  local y = value
  for i = #self.transforms, 1, -1 do
    local t = self.transforms[i]
    local x = t:inv(y)
    lp = lp - Distribution._sum_rightmost(t:log_abs_det_jacobian(x, y), ev)
    y = x
  end
  return lp + Distribution._sum_rightmost(self.base_dist:log_prob(y), ev - #self.base_dist.event_shape)
end

local function sign(self)
  local s = 1
  for _, t in ipairs(self.transforms) do s = s * t.sign end
  if s == 0 then self:_error("cdf/icdf need monotone transforms (an AffineTransform's scale of mixed signs is not)") end
  return s
end

--- the base cdf of the inverted value (1 - it where the transforms decrease)
-- @tparam Tensor value
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}):cdf(ember.tensor(1.0)))   --> tensor(0.5000, ...)
function TD:cdf(value)
  value = self:_value(value, "cdf")
  for i = #self.transforms, 1, -1 do value = self.transforms[i]:inv(value) end
  local c = self.base_dist:cdf(value)
  if sign(self) == -1 then c = -c + 1 end
  return c
end

--- the transforms applied to the base icdf (of 1 - value where they decrease)
-- @tparam Tensor value probabilities in [0, 1]
-- @usage local D, T = require "ember.distributions", require "ember.distributions.transforms"
-- print(D.TransformedDistribution(D.Normal(0.0, 1.0), {T.ExpTransform()}):icdf(ember.tensor(0.5)))   --> tensor(1.0000, ...)
function TD:icdf(value)
  value = self:_value(value, "icdf", require("ember.distributions.constraints").unit_interval)
  if sign(self) == -1 then value = -value + 1 end
  return apply(self, self.base_dist:icdf(value))
end

return TD
