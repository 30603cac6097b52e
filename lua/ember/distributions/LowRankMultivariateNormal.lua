--- distributions.LowRankMultivariateNormal(loc, cov_factor, cov_diag): the
-- normal distribution on vectors with covariance W W^T + diag(D), W =
-- cov_factor [..., n, m], D = cov_diag [..., n] > 0
-- (torch.distributions.LowRankMultivariateNormal), reparameterized
-- (loc + W eps_m + sqrt(D) eps_n). log_prob and entropy use the Woodbury
-- identity and the determinant lemma on the m x m capacitance matrix
-- I + W^T D^-1 W (its Cholesky by ember.linalg), as torch's.
-- @usage local D = require "ember.distributions"
-- local d = D.LowRankMultivariateNormal(ember.zeros(3), ember.tensor({{1.0}, {0.5}, {0.0}}), ember.ones(3))
-- print(d.variance, d:log_prob(ember.zeros(3)))   --> tensor([2.0000, 1.2500, 1.0000], ...)	tensor(-3.1623, ...)
-- @classmod distributions.LowRankMultivariateNormal
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local LR = Distribution:extend("LowRankMultivariateNormal")
LR.arg_constraints = { loc = constraints.real_vector, cov_factor = constraints.real, cov_diag = constraints.positive }
LR.support = constraints.real_vector
LR.has_rsample = true
LR._param_names = { "loc", "cov_factor", "cov_diag" }

local LOG_2PI = math.log(2 * math.pi)

function LR:__init(...)
  local o = self:_args({ "loc", "cov_factor", "cov_diag" }, ...)
  local loc, W, Dg = o.loc, o.cov_factor, o.cov_diag
  if not ember.is_tensor(loc) or loc:dim() < 1 then self:_error("loc must be a tensor with at least one dimension") end
  if not ember.is_tensor(W) or W:dim() < 2 then self:_error("cov_factor must be a tensor with at least two dimensions [..., n, m]") end
  if not ember.is_tensor(Dg) or Dg:dim() < 1 then self:_error("cov_diag must be a tensor with at least one dimension") end
  local n = loc.shape[#loc.shape]
  if W.shape[#W.shape - 1] ~= n then self:_error("cov_factor must be [..., %d, m] for loc of event size %d, got [%s]", n, n, table.concat(W.shape, ", ")) end
  if Dg.shape[#Dg.shape] ~= n then self:_error("cov_diag must be [..., %d], got [%s]", n, table.concat(Dg.shape, ", ")) end
  local ok, shape = pcall(ember.broadcast_shapes, loc:unsqueeze(-1).shape, W.shape, Dg:unsqueeze(-1).shape)
  if not ok then
    self:_error("incompatible batch shapes: loc [%s], cov_factor [%s], cov_diag [%s]",
      table.concat(loc.shape, ", "), table.concat(W.shape, ", "), table.concat(Dg.shape, ", "))
  end
  local m = W.shape[#W.shape]
  local b = {}
  for i = 1, #shape - 2 do b[i] = shape[i] end
  self.loc = loc:expand(Distribution._concat(b, { n }))
  self.cov_factor = W:expand(Distribution._concat(b, { n, m }))
  self.cov_diag = Dg:expand(Distribution._concat(b, { n }))
  self:_check_param("cov_diag")
  self:_check_param("loc")
  self:_set_shapes(b, { n })
  self:_after_expand()
end

-- the Cholesky factor of the capacitance I + W^T D^-1 W
function LR:_after_expand()
  local W, Dg = self.cov_factor, self.cov_diag
  local m = W.shape[#W.shape]
  local K = (W:transpose(-1, -2) / Dg:unsqueeze(-2)):matmul(W) + ember.eye(m, { dtype = W.dtype })
  self._capacitance_tril = ember.linalg.cholesky(K)
end

function LR:_logdet()
  return self._capacitance_tril:diagonal(0, -2, -1):log():sum(-1) * 2 + self.cov_diag:log():sum(-1)
end

--- loc
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.ones(2), ember.zeros(2, 1), ember.ones(2)).mean)   --> tensor([1.0000, 1.0000], ...)
LR._props.mean = function(self) return self.loc end
--- the rows' sums of squares of W, plus D
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(2), ember.ones(2, 1), ember.ones(2)).variance)   --> tensor([2.0000, 2.0000], ...)
LR._props.variance = function(self) return (self.cov_factor ^ 2):sum(-1) + self.cov_diag end
--- W W^T + diag(D)
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(2), ember.ones(2, 1), ember.ones(2)).covariance_matrix)   --> tensor([[2.0000, 1.0000], [1.0000, 2.0000]], ...)
LR._props.covariance_matrix = function(self)
  return self.cov_factor:matmul(self.cov_factor:transpose(-1, -2)) + self.cov_diag:diag_embed()
end
--- the Cholesky factor of the covariance (as torch: D^1/2 chol(I + D^-1/2 W W^T D^-1/2))
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(2), ember.zeros(2, 1), ember.ones(2)).scale_tril)   --> tensor([[1.0000, 0.0000], [0.0000, 1.0000]], ...)
LR._props.scale_tril = function(self)
  local n = self.event_shape[1]
  local s = self.cov_diag:sqrt():unsqueeze(-1)
  local DW = self.cov_factor / s
  local K = DW:matmul(DW:transpose(-1, -2)) + ember.eye(n, { dtype = DW.dtype })
  return s * ember.linalg.cholesky(K)
end

--- loc + W eps_m + sqrt(D) eps_n
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(3), ember.ones(3, 2), ember.ones(3)):rsample({4}).shape)   --> ember.Size{4, 3}
function LR:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local m = self.cov_factor.shape[#self.cov_factor.shape]
  local ws = {}
  for i = 1, #shape - 1 do ws[i] = shape[i] end
  ws[#shape] = m
  local eps_w = Distribution._randn(ws, self.loc.dtype)
  local eps_d = Distribution._randn(shape, self.loc.dtype)
  return self.loc + self.cov_factor:matmul(eps_w:unsqueeze(-1)):squeeze(-1) + self.cov_diag:sqrt() * eps_d
end

--- -(n log 2 pi + log det + Mahalanobis) / 2, by Woodbury and the determinant lemma
-- @tparam Tensor value [..., n]
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(2), ember.zeros(2, 1), ember.ones(2)):log_prob(ember.zeros(2)))   --> tensor(-1.8379, ...)
function LR:log_prob(value)
  value = self:_value(value, "log_prob")
  local diff = value - self.loc
  local W, Dg = self.cov_factor, self.cov_diag
  local Wt_Dinv = W:transpose(-1, -2) / Dg:unsqueeze(-2)
  local Wt_Dinv_x = Wt_Dinv:matmul(diff:unsqueeze(-1))                        -- [..., m, 1]
  local t1 = (diff ^ 2 / Dg):sum(-1)
  local L = self._capacitance_tril
  local shape = ember.broadcast_shapes(L.shape, Distribution._concat({ table.unpack(Wt_Dinv_x.shape, 1, #Wt_Dinv_x.shape - 2) }, { L.shape[#L.shape], L.shape[#L.shape] }))
  local y = ember.linalg.solve_triangular(L:expand(shape), Wt_Dinv_x, { upper = false })
  local t2 = (y ^ 2):sum(-1):sum(-1)
  return (self:_logdet() + (t1 - t2) + self.event_shape[1] * LOG_2PI) * -0.5
end

--- (n (1 + log 2 pi) + log det) / 2
-- @usage print(require("ember.distributions").LowRankMultivariateNormal(ember.zeros(2), ember.zeros(2, 1), ember.ones(2)):entropy())   --> tensor(2.8379, ...)
function LR:entropy()
  return (self:_logdet() + self.event_shape[1] * (1 + LOG_2PI)) * 0.5
end

return LR
