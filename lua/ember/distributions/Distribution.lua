--- distributions.Distribution: the base class of ember.distributions
-- (torch.distributions.Distribution): `batch_shape` and `event_shape`
-- (ember.Size), `sample(sample_shape)`, `rsample(sample_shape)` where
-- `has_rsample`, `log_prob(value)`, `entropy()`, `cdf`/`icdf` where the
-- distribution has them, the properties `mean`, `variance`, `stddev`,
-- `support` and the table `arg_constraints`, and `expand(batch_shape)`.
--
-- A subclass is `Distribution:extend(name)`; it sets `arg_constraints`,
-- `_param_names` (the tensors `expand` expands) and defines its methods
-- (the default `__init` takes the `_param_names`, broadcasts and checks them);
-- properties are getters in `cls._props` (`d.mean` calls `_props.mean(d)`).
--
-- Validation is torch's default: on (`validate_args = true`) unless a
-- constructor gets `{validate_args = false}` or
-- `Distribution.set_default_validate_args(false)` switched it off. The
-- constructor checks each parameter against its constraint and
-- `log_prob`/`cdf` check that the value has the event shape, broadcasts
-- with the batch shape and lies in the support; errors name the
-- distribution and point at the caller's line.
-- @usage local D = require "ember.distributions"
-- local d = D.Normal(ember.zeros(3), ember.ones(3))
-- print(d.batch_shape, d.event_shape)   --> ember.Size{3}	ember.Size{}
-- print(pcall(D.Normal, 0, -1))         --> false ...distributions.Normal: scale must be positive (> 0), found -1...
-- @classmod distributions.Distribution
local ember = require "ember"
local errors = require "ember._errors"

local Distribution = {}
Distribution.__name = "Distribution"
Distribution._props = {}
Distribution.has_rsample = false
Distribution.arg_constraints = {}
Distribution._param_names = {}
Distribution.__index = Distribution

local default_validate = true

--- Switches the default validation of new distributions on or off
-- (torch.distributions.Distribution.set_default_validate_args).
-- @bool value
-- @usage local D = require "ember.distributions"
-- D.Distribution.set_default_validate_args(false)
-- print(D.Normal(0, -1).scale)   --> tensor(-1.0000, ...)
-- D.Distribution.set_default_validate_args(true)
function Distribution.set_default_validate_args(value)
  if type(value) ~= "boolean" then
    errors.raise("Distribution.set_default_validate_args: expected a boolean, got %s", type(value))
  end
  default_validate = value
end

--- A subclass named `name` (distributions.Normal's is `Distribution:extend("Normal")`).
-- @tparam string name
-- @usage local D = require "ember.distributions"
-- local Half = D.Distribution:extend("Half")
-- print(Half.__name)   --> Half
function Distribution:extend(name)
  local cls = {}
  cls._props = setmetatable({}, { __index = self._props })
  cls.__name = name
  cls.__index = function(t, k)
    local g = cls._props[k]
    if g then return g(t) end
    return cls[k]
  end
  cls.__tostring = Distribution.__tostring
  return setmetatable(cls, {
    __index = self,
    __call = function(c, ...)
      local o = setmetatable({}, c)
      o:__init(...)
      return o
    end,
    __tostring = function() return "distributions." .. name end,
  })
end

function Distribution:__tostring()
  local parts = {}
  for _, n in ipairs(rawget(self, "_shown") or self._param_names) do
    local v = rawget(self, n)
    if v ~= nil then
      parts[#parts + 1] = n .. ": " .. (v:dim() == 0 and ("%g"):format(v:item()) or errors.shape_str(v))
    end
  end
  return ("distributions.%s(%s)"):format(self.__name, table.concat(parts, ", "))
end

-- errors naming the distribution, at the user's line
function Distribution:_error(fmt, ...)
  errors.raise("distributions." .. self.__name .. ": " .. fmt, ...)
end

local function is_tensor(x) return ember.is_tensor(x) end
Distribution._is_tensor = is_tensor

-- Reads a constructor's arguments: positional in `names` order with an
-- optional trailing options table, or one options table; returns the table
-- name -> value with validate_args among them. Unknown options are refused.
function Distribution:_args(names, ...)
  local n = select("#", ...)
  local first = ...
  local o = {}
  local known = { validate_args = true }
  for _, k in ipairs(names) do known[k] = true end
  local opts
  if n == 1 and type(first) == "table" and not is_tensor(first) then
    opts = first
  else
    local args = table.pack(...)
    local last = args[args.n]
    if args.n > 0 and type(last) == "table" and not is_tensor(last) then
      opts, args.n = last, args.n - 1
    end
    if args.n > #names then self:_error("expected at most %d arguments (%s), got %d", #names, table.concat(names, ", "), args.n) end
    for i = 1, args.n do o[names[i]] = args[i] end
  end
  for k, v in pairs(opts or {}) do
    if not known[k] then self:_error("unknown option '%s' (known: %s, validate_args)", tostring(k), table.concat(names, ", ")) end
    if o[k] ~= nil then self:_error("'%s' given twice", k) end
    o[k] = v
  end
  if o.validate_args ~= nil and type(o.validate_args) ~= "boolean" then
    self:_error("validate_args must be a boolean, got %s", type(o.validate_args))
  end
  self._validate_args = o.validate_args
  if o.validate_args == nil then self._validate_args = default_validate end
  return o
end

-- Numbers and tensors as tensors of one floating dtype (the first floating
-- tensor's, else the default dtype), broadcast to one shape (torch's broadcast_all).
function Distribution:_broadcast_all(names, o)
  local dtype
  for _, k in ipairs(names) do
    local v = o[k]
    if is_tensor(v) and (v.dtype == "float64" or v.dtype == "float32" or v.dtype == "float16" or v.dtype == "bfloat16") then
      dtype = v.dtype
      break
    end
  end
  dtype = dtype or ember.get_default_dtype()
  local ts, shapes = {}, {}
  for i, k in ipairs(names) do
    local v = o[k]
    if type(v) == "number" then
      v = ember.tensor(v, { dtype = dtype })
    elseif not is_tensor(v) then
      self:_error("%s must be a number or a tensor, got %s", k, type(v))
    elseif v.dtype == "int64" or v.dtype == "int32" or v.dtype == "bool" then
      v = v:to(dtype)
    end
    ts[i], shapes[i] = v, v.shape
  end
  local ok, shape = pcall(ember.broadcast_shapes, table.unpack(shapes))
  if not ok then
    local s = {}
    for i, k in ipairs(names) do s[i] = k .. " " .. errors.shape_str(ts[i]) end
    self:_error("the parameters do not broadcast: %s", table.concat(s, ", "))
  end
  for i, k in ipairs(names) do
    local t = ts[i]
    if #t.shape ~= #shape or not (t.shape == shape) then t = t:expand(shape) end
    self[k] = t
  end
  return shape
end

-- the first value of t where ok is false, as messages write it ("-100", "1.5", "nan")
local function first_bad(t, ok)
  local okv = ok:reshape(-1):totable()
  local tv = t:reshape(-1):double():totable()
  for i = 1, #okv do
    if not okv[i] then
      local v = tv[i]
      return v ~= v and "nan" or ("%.6g"):format(v)
    end
  end
end

-- Checks the parameter `name` against arg_constraints (when validating).
function Distribution:_check_param(name, constraint)
  if not self._validate_args then return end
  constraint = constraint or self.arg_constraints[name]
  local t = self[name]
  local ok = constraint.check(t)
  if not ok:all():item() then
    if constraint.event_dim then self:_error("%s must be %s", name, constraint.name) end
    local v = first_bad(t:expand(ok.shape), ok)
    self:_error("%s must be %s, found %s", name, constraint.name, v or "a value outside it")
  end
end

-- The default constructor: the parameters `_param_names`, positional in that
-- order or options (`_param_defaults` fills those not given), broadcast to
-- one shape (_broadcast_all), each checked against arg_constraints in that
-- order; batch shape the broadcast one, event shape []. Returns the options.
function Distribution:__init(...)
  local names = self._param_names
  local o = self:_args(names, ...)
  for k, v in pairs(self._param_defaults or {}) do
    if o[k] == nil then o[k] = v end
  end
  local shape = self:_broadcast_all(names, o)
  for _, k in ipairs(names) do self:_check_param(k) end
  self:_set_shapes(shape, {})
  return o
end

-- Which of probs and logits the options give; exactly one (torch's rule).
function Distribution:_probs_or_logits(o)
  if (o.probs == nil) == (o.logits == nil) then self:_error("give either probs or logits, not both nor neither") end
  return o.probs ~= nil and "probs" or "logits"
end

-- The parameters of a binary-event distribution (Bernoulli, Binomial, ...):
-- probs or logits (exactly one) and the `extra` ones (total_count,
-- temperature) broadcast together, each checked (the extra first), the
-- other of probs/logits derived from the given one (logits from the clamped
-- probs, probs = sigmoid(logits)), shown as extra .. {which}; batch shape
-- the broadcast one, event shape []. Returns which was given.
function Distribution:_binary_params(o, extra)
  extra = extra or {}
  local which = self:_probs_or_logits(o)
  local shape = self:_broadcast_all({ which, table.unpack(extra) }, o)
  self._shown = { table.unpack(extra) }
  self._shown[#self._shown + 1] = which
  for _, k in ipairs(extra) do self:_check_param(k) end
  self:_check_param(which)
  if which == "probs" then
    self.logits = Distribution._probs_to_logits(self.probs)
  else
    self.probs = self.logits:sigmoid()
  end
  self:_set_shapes(shape, {})
  return which
end

local function concat(...)
  local out = {}
  for _, s in ipairs { ... } do for i = 1, #s do out[#out + 1] = s[i] end end
  return out
end
Distribution._concat = concat

-- torch's enumerate_support layout of the n values v ([n, event...]):
-- [n, 1, ..., event...] (a 1 per batch dim), expanded to
-- [n, batch..., event...] unless expand is false.
function Distribution:_support_values(v, expand)
  local n, ev = v.shape[1], {}
  for i = 2, #v.shape do ev[#ev + 1] = v.shape[i] end
  local shape = { n }
  for _ = 1, #self.batch_shape do shape[#shape + 1] = 1 end
  v = v:view(concat(shape, ev))
  if expand ~= false then v = v:expand(concat({ n }, self.batch_shape, ev)) end
  return v
end

-- Sets batch_shape and event_shape (tables of integers or ember.Size).
function Distribution:_set_shapes(batch_shape, event_shape)
  self.batch_shape = ember.Size(concat(batch_shape or {}))
  self.event_shape = ember.Size(concat(event_shape or {}))
end

-- sample_shape as a list: nil -> {}, an integer n -> {n}, a table or ember.Size.
function Distribution:_sample_shape(sample_shape)
  if sample_shape == nil then return {} end
  if math.type(sample_shape) == "integer" then sample_shape = { sample_shape } end
  if type(sample_shape) ~= "table" or is_tensor(sample_shape) then
    self:_error("sample_shape must be a table of sizes (or ember.Size), got %s", type(sample_shape))
  end
  local out = {}
  for i = 1, #sample_shape do
    local s = sample_shape[i]
    if math.type(s) ~= "integer" or s < 0 then self:_error("sample_shape[%d] must be a nonnegative integer, got %s", i, tostring(s)) end
    out[i] = s
  end
  return out
end

--- sample_shape .. batch_shape .. event_shape, the shape of a sample (torch's _extended_shape).
-- @param[opt] sample_shape a table of sizes or ember.Size (default {})
-- @usage local D = require "ember.distributions"
-- print(D.Normal(ember.zeros(3), 1):extended_shape({5}))   --> ember.Size{5, 3}
function Distribution:extended_shape(sample_shape)
  return ember.Size(concat(self:_sample_shape(sample_shape), self.batch_shape, self.event_shape))
end

-- The dtype of the distribution's numbers (its first parameter's).
function Distribution:_dtype()
  for _, n in ipairs(self._param_names) do
    local v = rawget(self, n)
    if v ~= nil then return v.dtype end
  end
  return ember.get_default_dtype()
end

-- Checks a value given to log_prob / cdf / icdf: a tensor (a number or a
-- table of numbers becomes one of the distribution's dtype, as do integer
-- and bool tensors except where the class sets _index_values) whose trailing dims are the event shape
-- and that broadcasts with the batch shape; in the support (`support`
-- false: not checked, icdf's values are probabilities in [0, 1]).
function Distribution:_value(value, what, support)
  if type(value) == "number" or (type(value) == "table" and not is_tensor(value)) then
    local ok, t = pcall(ember.tensor, value, { dtype = self:_dtype() })
    if not ok then self:_error("%s: the value must be a tensor, a number or a table of numbers", what) end
    value = t
  end
  if not is_tensor(value) then self:_error("%s: the value must be a tensor, got %s", what, type(value)) end
  -- integer and bool values (counts, 0/1) in the parameters' dtype; Categorical keeps its int64 indices
  if not self._index_values and (value.dtype == "int64" or value.dtype == "int32" or value.dtype == "bool" or value.dtype == "uint8") then
    value = value:to(self:_dtype())
  end
  if not self._validate_args then return value end
  local ev, vs = self.event_shape, value.shape
  local n = #ev
  local okshape = #vs >= n
  for i = 1, n do
    if not okshape then break end
    okshape = vs[#vs - n + i] == ev[i]
  end
  if not okshape then
    self:_error("%s: the value's shape %s does not end with the event shape %s", what, errors.shape_str(value), "[" .. table.concat(ev, ", ") .. "]")
  end
  local ok = pcall(ember.broadcast_shapes, vs, concat(self.batch_shape, ev))
  if not ok then
    self:_error("%s: the value's shape %s does not broadcast with the batch shape %s", what, errors.shape_str(value), "[" .. table.concat(self.batch_shape, ", ") .. "]")
  end
  if support ~= false then
    local c = support or self.support
    local okv = c.check(value)
    if not okv:all():item() then
      local v = not c.event_dim and first_bad(value:expand(okv.shape), okv) or nil
      self:_error("%s: the value must be %s (the support), found %s", what, c.name, v or "a value outside it")
    end
  end
  return value
end

--- A sample of shape sample_shape .. batch_shape .. event_shape, without
-- gradient (torch's sample: rsample detached where there is one).
-- @param[opt] sample_shape a table of sizes or ember.Size (default {})
-- @usage local D = require "ember.distributions"
-- print(D.Normal(ember.zeros(2), 1):sample({4}).shape)   --> ember.Size{4, 2}
function Distribution:sample(sample_shape)
  if self.has_rsample then return self:rsample(sample_shape):detach() end
  self:_error("has no sample(), as torch's base class (a subclass defines it)")
end

--- A reparameterized sample (its gradient flows to the parameters); only
-- where `has_rsample` is true.
-- @param[opt] sample_shape a table of sizes or ember.Size (default {})
-- @usage local D = require "ember.distributions"
-- local mu = ember.zeros(2):requires_grad_()
-- D.Normal(mu, 1):rsample():sum():backward()
-- print(mu.grad)   --> tensor([1.0000, 1.0000], ...)
function Distribution:rsample(sample_shape)
  self:_error("rsample is not available (has_rsample = false: no reparameterized sampling); use sample()")
end

--- n samples: sample({n}) (torch's sample_n).
-- @tparam integer n
-- @usage local D = require "ember.distributions"
-- print(D.Bernoulli(0.5):sample_n(3).shape)   --> ember.Size{3}
function Distribution:sample_n(n) return self:sample({ n }) end

--- The log of the density (or mass) at value, of shape broadcast(value) without the event dims.
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.Normal(0.0, 1.0):log_prob(ember.tensor(0.0)))   --> tensor(-0.9189, ...)
function Distribution:log_prob(value)
  self:_error("has no log_prob(), as torch's base class (a subclass defines it)")
end

--- The entropy, of shape batch_shape.
-- @usage local D = require "ember.distributions"
-- print(D.Exponential(1.0):entropy())   --> tensor(1.0000, ...)
function Distribution:entropy()
  self:_error("has no entropy() (torch.distributions has none for it either)")
end

--- exp(entropy()) (torch's perplexity).
-- @usage local D = require "ember.distributions"
-- print(D.Exponential(1.0):perplexity())   --> tensor(2.7183, ...)
function Distribution:perplexity() return self:entropy():exp() end

--- The cumulative distribution function at value.
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.Normal(0.0, 1.0):cdf(ember.tensor(0.0)))   --> tensor(0.5000, ...)
function Distribution:cdf(value)
  self:_error("has no cdf()")
end

--- The inverse cdf at a probability value in [0, 1].
-- @tparam Tensor value
-- @usage local D = require "ember.distributions"
-- print(D.Exponential(1.0):icdf(ember.tensor(0.5)))   --> tensor(0.6931, ...)
function Distribution:icdf(value)
  self:_error("has no icdf()")
end

--- The distribution with its parameters expanded to batch_shape (no copy;
-- the new batch shape must be one the old broadcasts to).
-- @param batch_shape a table of sizes or ember.Size
-- @usage local D = require "ember.distributions"
-- print(D.Normal(0.0, 1.0):expand({2, 3}).batch_shape)   --> ember.Size{2, 3}
function Distribution:expand(batch_shape)
  local bs = self:_sample_shape(batch_shape)
  local new = setmetatable({}, getmetatable(self))
  for k, v in pairs(self) do new[k] = v end
  local nb = #self.batch_shape
  for _, n in ipairs(self._param_names) do
    local v = rawget(self, n)
    if v ~= nil then
      local tail = {}
      for i = nb + 1, #v.shape do tail[#tail + 1] = v.shape[i] end
      local ok, e = pcall(v.expand, v, concat(bs, tail))
      if not ok then
        self:_error("expand: the batch shape %s does not broadcast to [%s]", "[" .. table.concat(self.batch_shape, ", ") .. "]", table.concat(bs, ", "))
      end
      new[n] = e
    end
  end
  new.batch_shape = ember.Size(bs)
  if new._after_expand then new:_after_expand(bs) end
  return new
end

--- The standard deviation: sqrt(variance) unless the class says otherwise.
-- @usage local D = require "ember.distributions"
-- print(D.Uniform(0.0, 12.0).stddev)   --> tensor(3.4641, ...)
Distribution._props.stddev = function(self) return self.variance:sqrt() end

--- The mean (per class; an error where it has none).
-- @usage local D = require "ember.distributions"
-- print(D.Exponential(4.0).mean)   --> tensor(0.2500, ...)
Distribution._props.mean = function(self) self:_error("has no mean, as torch's base class (a subclass defines it)") end

--- The variance (per class; an error where it has none).
-- @usage local D = require "ember.distributions"
-- print(D.Exponential(2.0).variance)   --> tensor(0.2500, ...)
Distribution._props.variance = function(self) self:_error("has no variance, as torch's base class (a subclass defines it)") end

-- eps of a dtype (torch.finfo(dtype).eps) and its smallest normal number (tiny)
local EPS = { float64 = 2.220446049250313e-16, float32 = 1.1920928955078125e-07, float16 = 9.765625e-04, bfloat16 = 0.0078125 }
local TINY = { float64 = 2.2250738585072014e-308, float32 = 1.1754943508222875e-38, float16 = 6.103515625e-05, bfloat16 = 1.1754943508222875e-38 }
function Distribution._eps(dtype) return EPS[dtype] or EPS.float32 end
function Distribution._tiny(dtype) return TINY[dtype] or TINY.float32 end

-- the Euler-Mascheroni constant (Gumbel's mean, Weibull's and Kumaraswamy's entropies, KLs)
Distribution._EULER = 0.57721566490153286060

-- torch's clamp_probs: probabilities into [eps, 1 - eps]
function Distribution._clamp_probs(p)
  local eps = EPS[p.dtype] or EPS.float32
  return p:clamp(eps, 1 - eps)
end

-- torch's probs_to_logits (is_binary): log(p) - log(1 - p) of the clamped probabilities
function Distribution._probs_to_logits(p)
  p = Distribution._clamp_probs(p)
  return p:log() - (-p):log1p()
end

-- uniform draws in [0, 1) of `shape` and `dtype` from ember's global generator
function Distribution._rand(shape, dtype) return ember.rand(shape, { dtype = dtype }) end
function Distribution._randn(shape, dtype) return ember.randn(shape, { dtype = dtype }) end

-- a parameter as the float64 samplers (Gamma._standard) take it: detached,
-- float64, expanded to the sample's shape, contiguous
function Distribution._sampler_input(t, shape) return t:detach():double():expand(shape):contiguous() end

-- x with its values clamped into [lo, hi] (nil: no bound) and its gradient
-- passed through as it is (torch's rsample clamping the detached draw in place)
function Distribution._clamp_value(x, lo, hi)
  local d = x:detach()
  return x + (d:clamp(lo, hi) - d)
end

-- standard exponential draws -log(1 - u), u uniform in [0, 1), of `shape` and `dtype`
function Distribution._rand_exponential(shape, dtype) return -(-Distribution._rand(shape, dtype)):log1p() end

-- sums the rightmost n dims of t
function Distribution._sum_rightmost(t, n)
  for _ = 1, n do t = t:sum(-1) end
  return t
end

return Distribution
