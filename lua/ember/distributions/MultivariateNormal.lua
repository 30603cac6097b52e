--- distributions.MultivariateNormal(loc, {scale_tril = L}) (or
-- {covariance_matrix = S}, {precision_matrix = P}): the normal
-- distribution on vectors with mean loc and covariance L L^T
-- (torch.distributions.MultivariateNormal), reparameterized
-- (loc + L eps). Give exactly one of scale_tril (lower triangular with a
-- positive diagonal), covariance_matrix or precision_matrix (symmetric
-- positive definite): S is factored by ember.linalg.cholesky and P^-1
-- by one after a triangular inverse, differentiable; log_prob and
-- kl_divergence solve with L by ember.linalg.solve_triangular. Batch dims
-- of loc and the matrix broadcast.
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
MVN._param_names = { "loc", "scale_tril", "covariance_matrix", "precision_matrix" }

local LOG_2PI = math.log(2 * math.pi)

function MVN:__init(...)
  local o = self:_args({ "loc", "covariance_matrix", "precision_matrix", "scale_tril" }, ...)
  local given = {}
  for _, k in ipairs { "covariance_matrix", "precision_matrix", "scale_tril" } do
    if o[k] ~= nil then given[#given + 1] = k end
  end
  if #given ~= 1 then
    self:_error("give exactly one of covariance_matrix, precision_matrix and scale_tril (got %s)",
      #given == 0 and "none" or table.concat(given, ", "))
  end
  local which = given[1]
  local loc, L = o.loc, o[which]
  if not ember.is_tensor(loc) or loc:dim() < 1 then self:_error("loc must be a tensor with at least one dimension") end
  if not ember.is_tensor(L) or L:dim() < 2 then self:_error("%s must be a tensor with at least two dimensions", which) end
  local n = loc.shape[#loc.shape]
  if L.shape[#L.shape] ~= n or L.shape[#L.shape - 1] ~= n then
    self:_error("%s must be [..., %d, %d] for loc of event size %d, got %s", which, n, n, n, require("ember._errors").shape_str(L))
  end
  self._shown = { "loc", which }
  if which ~= "scale_tril" then
    if L.dtype ~= "float64" and L.dtype ~= "float32" then L = L:to("float32") end
    if self._validate_args and not (L - L:transpose(-1, -2)):abs():le(1e-6 * (L:abs():max():item() + 1)):all():item() then
      self:_error("%s must be symmetric positive definite (it is not symmetric)", which)
    end
    given = L
    if which == "precision_matrix" then
      local Lp = self:_cholesky(L, which)
      local X = MVN.solve_tril(Lp, ember.eye(n, { dtype = L.dtype }):expand(L.shape))   -- Lp^-1
      L = X:transpose(-1, -2):matmul(X)                                                -- P^-1
    end
    L = self:_cholesky(L, which)
  end
  local lb, sb = {}, {}
  for i = 1, #loc.shape - 1 do lb[i] = loc.shape[i] end
  for i = 1, #L.shape - 2 do sb[i] = L.shape[i] end
  local ok, batch = pcall(ember.broadcast_shapes, lb, sb)
  if not ok then self:_error("the batch shapes of loc and scale_tril do not broadcast") end
  if L.dtype ~= loc.dtype then loc = loc:to(L.dtype) end
  self.loc = loc:expand(Distribution._concat(batch, { n }))
  self.scale_tril = L:expand(Distribution._concat(batch, { n, n }))
  if which ~= "scale_tril" then self[which] = given:expand(Distribution._concat(batch, { n, n })) end
  if which == "scale_tril" then self:_check_param("scale_tril") end
  self:_check_param("loc")
  self:_set_shapes(batch, { n })
end

--- Solves L X = B for X (L lower triangular [..., n, n], B [..., n, m];
-- batch dims broadcast): ember.linalg.solve_triangular with upper = false.
-- @tparam Tensor L
-- @tparam Tensor B
-- @usage local MVN = require "ember.distributions.MultivariateNormal"
-- print(MVN.solve_tril(ember.tensor({{2.0, 0.0}, {1.0, 1.0}}), ember.tensor({{2.0}, {3.0}})))   --> tensor([[1.0000], [2.0000]], ...)
function MVN.solve_tril(L, B)
  return ember.linalg.solve_triangular(L, B, { upper = false })
end

-- The lower Cholesky factor of A [..., n, n] (ember.linalg.cholesky, with
-- its gradient); a matrix that is not positive definite is refused naming `what`.
function MVN:_cholesky(A, what)
  local ok, L = pcall(ember.linalg.cholesky, A)
  if not ok then
    self:_error("%s must be symmetric positive definite (%s)", what, (tostring(L):gsub("^.-ember%.linalg%.cholesky: ", "")))
  end
  return L
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

--- (L L^T)^-1 = L^-T L^-1
-- @usage print(require("ember.distributions").MultivariateNormal(ember.zeros(2), {scale_tril = ember.eye(2) * 2}).precision_matrix)   --> tensor([[0.2500, 0.0000], [0.0000, 0.2500]], ...)
MVN._props.precision_matrix = function(self)
  local X = MVN.solve_tril(self.scale_tril, ember.eye(self.event_shape[1], { dtype = self.scale_tril.dtype }):expand(self.scale_tril.shape))
  return X:transpose(-1, -2):matmul(X)
end

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
