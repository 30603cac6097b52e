--- distributions.Chi2(df): the chi-squared distribution, Gamma(df / 2, 1 / 2)
-- (torch.distributions.Chi2, a Gamma); df > 0. Its methods are the Gamma's
-- (rsample too: its gradient flows to df); `df` is concentration * 2; kl_divergence takes it as a Gamma.
-- @usage local D = require "ember.distributions"
-- local d = D.Chi2(4.0)
-- print(d.mean, d.variance, d:log_prob(2.0))   --> tensor(4.0000, ...)	tensor(8.0000, ...)	tensor(-1.6931, ...)
-- @classmod distributions.Chi2
local ember = require "ember"
local Gamma = require "ember.distributions.Gamma"

local Chi2 = Gamma:extend("Chi2")

function Chi2:__init(...)
  local o = self:_args({ "df" }, ...)
  local df = o.df
  if type(df) ~= "number" and not ember.is_tensor(df) then self:_error("df must be a number or a tensor, got %s", type(df)) end
  if self._validate_args and not (type(df) == "number" and df > 0 or ember.is_tensor(df) and df:gt(0):all():item()) then
    self:_error("df must be positive (> 0)")
  end
  Gamma.__init(self, df * 0.5, 0.5, { validate_args = self._validate_args })
end

--- concentration * 2
-- @usage print(require("ember.distributions").Chi2(3.0).df)   --> tensor(3.0000, ...)
Chi2._props.df = function(self) return self.concentration * 2 end

return Chi2
