--- distributions.MultivariateNormal(loc, {scale_tril = L}): the normal
-- distribution on vectors with mean loc and covariance L L^T
-- (torch.distributions.MultivariateNormal), reparameterized
-- (loc + L eps). **Only scale_tril** (a lower-triangular matrix with a
-- positive diagonal): ember has no Cholesky factorization, so
-- covariance_matrix and precision_matrix are refused (factor them and pass
-- scale_tril). log_prob and kl_divergence solve with L by forward
-- substitution written with ember ops (one step per row: meant for small
-- event sizes). Batch dims of loc and L broadcast.
-- @usage local D = require "ember.distributions"
-- local L = ember.tensor({{1.0, 0.0}, {0.5, 2.0}})
-- local d = D.MultivariateNormal(ember.zeros(2), {scale_tril = L})
-- print(d.event_shape, d:log_prob(ember.tensor({1.0, 1.0})))   --> ember.Size{2}	tensor(-3.0623, ...)
-- print(d.covariance_matrix)                                   --> tensor([[1.0000, 0.5000], [0.5000, 4.2500]], ...)
-- @classmod distributions.MultivariateNormal
local ember = require "ember"
local Distribution = require "ember.distributions.Distribution"
local constraints = require "ember.distributions.constraints"

local MVN = Distribution:extend("MultivariateNormal")
MVN.arg_constraints = { loc = constraints.real_vector, scale_tril = constraints.lower_cholesky }
MVN.support = constraints.real_vector
MVN.has_rsample = true
MVN._param_names = { "loc", "scale_tril" }

local LOG_2PI = math.log(2 * math.pi)

function MVN:__init(...)
  local o = self:_args({ "loc", "covariance_matrix", "precision_matrix", "scale_tril" }, ...)
  if o.covariance_matrix ~= nil or o.precision_matrix ~= nil then
    self:_error("only scale_tril is supported (ember has no Cholesky factorization): give {scale_tril = L} with L L^T the covariance")
  end
  if o.scale_tril == nil then self:_error("scale_tril is required: MultivariateNormal(loc, {scale_tril = L})") end
  local loc, L = o.loc, o.scale_tril
  if not ember.is_tensor(loc) or loc:dim() < 1 then self:_error("loc must be a tensor with at least one dimension") end
  if not ember.is_tensor(L) or L:dim() < 2 then self:_error("scale_tril must be a tensor with at least two dimensions") end
  local n = loc.shape[#loc.shape]
  if L.shape[#L.shape] ~= n or L.shape[#L.shape - 1] ~= n then
    self:_error("scale_tril must be [..., %d, %d] for loc of event size %d, got %s", n, n, n, require("ember._errors").shape_str(L))
  end
  local lb, sb = {}, {}
  for i = 1, #loc.shape - 1 do lb[i] = loc.shape[i] end
  for i = 1, #L.shape - 2 do sb[i] = L.shape[i] end
  local ok, batch = pcall(ember.broadcast_shapes, lb, sb)
  if not ok then self:_error("the batch shapes of loc and scale_tril do not broadcast") end
  if L.dtype ~= loc.dtype then loc = loc:to(L.dtype) end
  self.loc = loc:expand(Distribution._concat(batch, { n }))
  self.scale_tril = L:expand(Distribution._concat(batch, { n, n }))
  self:_check_param("scale_tril")
  self:_check_param("loc")
  self:_set_shapes(batch, { n })
end

--- Solves L X = B for X by forward substitution (L lower triangular
-- [..., n, n], B [..., n, m]; batch dims broadcast), with ember ops.
-- @tparam Tensor L
-- @tparam Tensor B
-- @usage local MVN = require "ember.distributions.MultivariateNormal"
-- print(MVN.solve_tril(ember.tensor({{2.0, 0.0}, {1.0, 1.0}}), ember.tensor({{2.0}, {3.0}})))   --> tensor([[1.0000], [2.0000]], ...)
function MVN.solve_tril(L, B)
  local n = L.shape[#L.shape]
  local rows = {}
  for i = 1, n do
    local r = B:narrow(-2, i, 1)
    if i > 1 then
      local X = ember.cat(rows, -2)                         -- [..., i-1, m]
      r = r - L:narrow(-2, i, 1):narrow(-1, 1, i - 1):matmul(X)
    end
    rows[i] = r / L:narrow(-2, i, 1):narrow(-1, i, 1)
  end
  return ember.cat(rows, -2)
end

-- sum(log diag L), of shape batch_shape
function MVN:_half_log_det()
  return self.scale_tril:diagonal(0, -2, -1):log():sum(-1)
end

--- loc
-- @usage print(require("ember.distributions").MultivariateNormal(ember.ones(2), {scale_tril = ember.eye(2)}).mean)   --> tensor([1.0000, 1.0000], ...)
MVN._props.mean = function(self) return self.loc end
--- the diagonal of L L^T: the rows' sums of squares of L
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(2), {scale_tril = ember.eye(2) * 2}).variance)   --> tensor([4.0000, 4.0000], ...)
MVN._props.variance = function(self) return (self.scale_tril ^ 2):sum(-1) end
--- L L^T
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(2), {scale_tril = ember.eye(2)}).covariance_matrix.shape)   --> ember.Size{2, 2}
MVN._props.covariance_matrix = function(self) return self.scale_tril:matmul(self.scale_tril:transpose(-1, -2)) end

--- loc + L eps, eps ~ N(0, I).
-- @param[opt] sample_shape a table of sizes
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(3), {scale_tril = ember.eye(3)}):rsample({5}).shape)   --> ember.Size{5, 3}
function MVN:rsample(sample_shape)
  local shape = self:extended_shape(sample_shape)
  local eps = Distribution._randn(shape, self.loc.dtype)
  return self.loc + self.scale_tril:matmul(eps:unsqueeze(-1)):squeeze(-1)
end

--- -(n log(2 pi) + |L^-1 (value - loc)|^2) / 2 - sum(log diag L)
-- @tparam Tensor value [..., n]
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(2), {scale_tril = ember.eye(2)}):log_prob(ember.zeros(2)))   --> tensor(-1.8379, ...)
function MVN:log_prob(value)
  value = self:_value(value, "log_prob")
  local diff = value - self.loc
  local n = self.event_shape[1]
  local y = MVN.solve_tril(self.scale_tril, diff:unsqueeze(-1)):squeeze(-1)
  local m = (y ^ 2):sum(-1)
  return (m + n * LOG_2PI) * -0.5 - self:_half_log_det()
end

--- n (1 + log(2 pi)) / 2 + sum(log diag L)
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(2), {scale_tril = ember.eye(2)}):entropy())   --> tensor(2.8379, ...)
function MVN:entropy()
  local n = self.event_shape[1]
  return self:_half_log_det() + 0.5 * n * (1 + LOG_2PI)
end

return MVN
