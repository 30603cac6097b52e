-- ember.linalg (lua/ember/linalg.lua on em_linalg, core/src/ops_linalg.c):
-- outputs and the gradients of sum(f(A) * W) against PyTorch 1.13
-- (tests/fixtures/linalg.lua, made by tests/gen_linalg.py) in float64 to
-- 1e-10 and float32 to 1e-4, batched cases included; eigen/singular vectors
-- and QR's factors sign-normalized as the generator does; float64
-- gradchecks of every differentiable function on well-conditioned inputs;
-- torch's top-level names; bad input refused at the caller's line.
local ember = require "ember"
local gradcheck = require "tests.lua.helpers.gradcheck"
local compare = require "tests.lua.helpers.parity"

local L = ember.linalg
local fixtures = dofile("tests/fixtures/linalg.lua")
local F64 = { dtype = "float64" }
local T, check, raises_here = compare.T, compare.check, compare.raises_here

local function mT(X) return X:transpose(-2, -1) end
local function colsign(V) return V * V:narrow(-2, 1, 1):sign() end

local function qr_norm(A, mode)
  local Q, R = L.qr(A, mode)
  local d = R:diagonal(0, -2, -1):sign()
  local k = d.shape[d:dim()]
  local Qn = Q:narrow(-1, 1, k) * d:unsqueeze(-2)
  if Q.shape[Q:dim()] > k then Qn = ember.cat({ Qn, Q:narrow(-1, k + 1, Q.shape[Q:dim()] - k) }, -1) end
  local Rn = R:narrow(-2, 1, k) * d:unsqueeze(-1)
  if R.shape[R:dim() - 1] > k then Rn = ember.cat({ Rn, R:narrow(-2, k + 1, R.shape[R:dim() - 1] - k) }, -2) end
  return { Qn, Rn }
end

local function svd_norm(A)
  local U, S, Vh = L.svd(A, false)
  local s = U:narrow(-2, 1, 1):sign()
  return { U * s, S, Vh * mT(s) }
end

-- The generator's FNS, in Lua.
local FNS = {
  cholesky = function(A) return { L.cholesky(A) } end,
  cholesky_upper = function(A) return { L.cholesky(A, { upper = true }) } end,
  inv = function(A) return { L.inv(A) } end,
  det = function(A) return { L.det(A) } end,
  slogdet = function(A) return { L.slogdet(A) } end,
  logdet = function(A) return { ember.logdet(A) } end,
  solve = function(A, B) return { L.solve(A, B) } end,
  solve_left_false = function(A, B) return { L.solve(A, B, { left = false }) } end,
  solve_triangular_upper = function(A, B) return { L.solve_triangular(A, B, { upper = true }) } end,
  solve_triangular_lower_unit = function(A, B)
    return { L.solve_triangular(A, B, { upper = false, unitriangular = true }) }
  end,
  solve_triangular_right = function(A, B) return { L.solve_triangular(A, B, { upper = true, left = false }) } end,
  qr = function(A) return qr_norm(A) end,
  qr_complete = function(A) return qr_norm(A, "complete") end,
  eigh = function(A) local w, V = L.eigh(A); return { w, colsign(V) } end,
  eigh_upper = function(A) local w, V = L.eigh(A, "U"); return { w, colsign(V) } end,
  eigvalsh = function(A) return { L.eigvalsh(A) } end,
  svd = svd_norm,
  svdvals = function(A) return { L.svdvals(A) } end,
  torch_svd = function(A)
    local U, S, V = ember.svd(A)
    local s = U:narrow(-2, 1, 1):sign()
    return { U * s, S, V * s }
  end,
  pinv = function(A) return { L.pinv(A) } end,
  lstsq = function(A, B) return { (L.lstsq(A, B)) } end,
  matrix_norm_fro = function(A) return { L.matrix_norm(A) } end,
  matrix_norm_nuc = function(A) return { L.matrix_norm(A, "nuc") } end,
  ["matrix_norm_2"] = function(A) return { L.matrix_norm(A, 2) } end,
  ["matrix_norm_-2"] = function(A) return { L.matrix_norm(A, -2) } end,
  ["matrix_norm_1"] = function(A) return { L.matrix_norm(A, 1) } end,
  ["matrix_norm_-1"] = function(A) return { L.matrix_norm(A, -1) } end,
  matrix_norm_inf = function(A) return { L.matrix_norm(A, math.huge) } end,
  ["matrix_norm_-inf"] = function(A) return { L.matrix_norm(A, -math.huge) } end,
  vector_norm_3 = function(A) return { L.vector_norm(A, 3, -1) } end,
  vector_norm_inf = function(A) return { L.vector_norm(A, math.huge) } end,
  norm = function(A) return { L.norm(A) } end,
  matrix_power_3 = function(A) return { L.matrix_power(A, 3) } end,
  ["matrix_power_-2"] = function(A) return { L.matrix_power(A, -2) } end,
  multi_dot = function(A, B, C) return { L.multi_dot({ A, B, C }) } end,
  matrix_rank = function(A) return { L.matrix_rank(A):to(A.dtype) } end,
  matrix_exp = function(A) return { ember.matrix_exp(A) } end,
  pinverse = function(A) return { A:pinverse() } end,
  torch_matrix_power = function(A) return { ember.matrix_power(A, 2) } end,
  cholesky_solve = function(B, Lf) return { ember.cholesky_solve(B, Lf) } end,
  cholesky_solve_upper = function(B, U) return { B:cholesky_solve(U, true) } end,
  cholesky_inverse = function(Lf) return { ember.cholesky_inverse(Lf) } end,
  lu = function(A) return { L.lu(A) } end,
  lu_factor = function(A) local LU, piv = L.lu_factor(A); return { LU, piv:to(A.dtype) } end,
  lu_solve = function(A, B) local LU, piv = L.lu_factor(A); return { L.lu_solve(LU, piv, B) } end,
  lu_solve_adjoint = function(A, B)
    local LU, piv = L.lu_factor(A)
    return { L.lu_solve(LU, piv, B, { adjoint = true }) }
  end,
  cond = function(A) return { L.cond(A) } end,
  cond_fro = function(A) return { L.cond(A, "fro") } end,
  ["cond_-2"] = function(A) return { L.cond(A, -2) } end,
  vecdot = function(x, y) return { L.vecdot(x, y) } end,
  cross = function(x, y) return { L.cross(x, y) } end,
}

local function run_case(c, dtype, tol)
  local inputs = {}
  for i, x in ipairs(c.inputs) do inputs[i] = T(x):to(dtype):requires_grad_(c.grads ~= nil) end
  local outs = FNS[c.fn](table.unpack(inputs))
  assert.are.equal(#c.outputs, #outs, c.name .. ": number of outputs")
  local loss
  for i, o in ipairs(outs) do
    assert.are.equal(dtype, o.dtype, c.name .. " output dtype")
    check(("%s output %d (%s)"):format(c.name, i, dtype), o, T(c.outputs[i]), tol)
    local term = (o * T(c.W[i]):to(dtype)):sum()
    loss = loss and loss + term or term
  end
  if not c.grads then return end
  loss:backward()
  for i, g in ipairs(c.grads) do
    check(("%s grad %d (%s)"):format(c.name, i, dtype), inputs[i].grad, T(g), tol)
  end
end

describe("ember.linalg against PyTorch", function()
  for _, c in ipairs(fixtures.cases) do
    it(c.name .. ": values and gradients in float64 (1e-10)", function() run_case(c, "float64", 1e-10) end)
    it(c.name .. ": values and gradients in float32 (1e-4)", function() run_case(c, "float32", 1e-4) end)
  end
  it("covers every function of the generator", function()
    local seen = {}
    for _, c in ipairs(fixtures.cases) do seen[c.fn] = true end
    for k in pairs(FNS) do assert(seen[k], "no fixture case for " .. k) end
  end)
end)

describe("ember.linalg gradchecks (float64)", function()
  ember.manual_seed(7)
  local n = 4
  local I = ember.eye(n, F64)
  local X = ember.randn(n, n, F64)
  local G = X + n * I -- well conditioned
  local B = ember.randn(n, 2, F64)
  local W = ember.randn(5, 3, F64)
  local Wide = ember.randn(3, 5, F64)
  local function spd(Y) return Y:matmul(mT(Y)) + I end
  local function sym(Y) return Y + mT(Y) end
  local cases = {
    { "cholesky", function(Y) return L.cholesky(spd(Y)) end, { X } },
    { "inv", L.inv, { G } },
    { "det", L.det, { G } },
    -- torch 1.13 gives 0 here; the adjugate is the limit of the gradient
    { "det at exactly singular matrices (the adjugate, by the SVD)", L.det, { ember.stack({ G * ember.tensor({ 1, 1, 0, 1 }, F64), G * ember.tensor({ { 1 }, { 0 }, { 1 }, { 1 } }, F64) }) } },
    { "slogdet", function(Y) return select(2, L.slogdet(Y)) end, { G } },
    { "solve", L.solve, { G, B } },
    { "solve_triangular", function(Y, Z) return L.solve_triangular(Y, Z, { upper = false }) end, { G, B } },
    { "qr tall", function(Y) return qr_norm(Y) end, { W } },
    { "qr wide", function(Y) return qr_norm(Y) end, { Wide } },
    { "eigh", function(Y) local w, V = L.eigh(sym(Y)); return { w, colsign(V) } end, { X } },
    { "eigvalsh", function(Y) return L.eigvalsh(sym(Y)) end, { X } },
    { "svd tall", svd_norm, { W } },
    { "svd wide", svd_norm, { Wide } },
    { "svd square", svd_norm, { X } },
    { "svdvals", L.svdvals, { W } },
    { "pinv", L.pinv, { W } },
    { "lstsq", function(Y, Z) return (L.lstsq(Y, Z)) end, { W, ember.randn(5, 2, F64) } },
    { "matrix_norm nuc", function(Y) return L.matrix_norm(Y, "nuc") end, { W } },
    { "matrix_exp (with squaring)", L.matrix_exp, { 2 * X } },
    { "cond", L.cond, { G } },
    { "lu", function(Y) local _, Lm, U = L.lu(Y); return { Lm, U } end, { X } },
    { "lu_solve (left = false)", function(Y, Z)
      local LU, piv = L.lu_factor(Y)
      return L.lu_solve(LU, piv, mT(Z), { left = false })
    end, { G, B } },
    { "batched cholesky and inv", function(Y) return L.inv(L.cholesky(Y:matmul(mT(Y)) + ember.eye(3, F64))) end,
      { ember.randn(2, 3, 3, 3, F64) } },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local inputs = {}
      for i, x in ipairs(c[3]) do inputs[i] = x:clone():requires_grad_() end
      gradcheck.check(c[2], inputs)
    end)
  end
end)

describe("ember.linalg values", function()
  it("reconstructions: L L^T, Q R, V diag(w) V^T, U diag(S) Vh, P-free solve", function()
    local A = ember.randn(2, 3, 5, 5, F64)
    local S = A:matmul(mT(A)) + 5 * ember.eye(5, F64)
    local Lf = L.cholesky(S)
    assert.is_true(ember.allclose(Lf:matmul(mT(Lf)), S, { atol = 1e-12 }))
    local Q, R = L.qr(A)
    assert.is_true(ember.allclose(Q:matmul(R), A, { atol = 1e-12 }))
    local w, V = L.eigh(S)
    assert.is_true(ember.allclose((V * w:unsqueeze(-2)):matmul(mT(V)), S, { atol = 1e-10 }))
    local U, Sv, Vh = L.svd(A)
    assert.is_true(ember.allclose((U * Sv:unsqueeze(-2)):matmul(Vh), A, { atol = 1e-12 }))
  end)
  it("svd full_matrices (torch's default) and complete QR give square orthogonal factors", function()
    local A = ember.randn(5, 3, F64)
    local U, S, Vh = L.svd(A)
    assert.are.same({ 5, 5 }, { U.shape[1], U.shape[2] })
    assert.is_true(ember.allclose(mT(U):matmul(U), ember.eye(5, F64), { atol = 1e-12 }))
    local Q, R = L.qr(A, "complete")
    assert.are.same({ 5, 3 }, { R.shape[1], R.shape[2] })
    assert.is_true(ember.allclose(Q:matmul(R), A, { atol = 1e-12 }))
    local Q2, R2 = L.qr(A, { mode = "r" })
    assert.are.equal(0, Q2:numel())
    assert.is_true(ember.allclose(R2:abs(), L.qr(A)[2] and select(2, L.qr(A)):abs(), { atol = 1e-12 }))
  end)
  it("eigh and cholesky read only the lower triangle (UPLO U the upper), as torch's", function()
    local A = ember.randn(4, 4, F64)
    local S = A:matmul(mT(A)) + 4 * ember.eye(4, F64)
    local junk = S:tril() + 100 * ember.randn(4, 4, F64):triu(1)
    assert.is_true(ember.allclose(L.eigvalsh(junk), L.eigvalsh(S), { atol = 1e-10 }))
    assert.is_true(ember.allclose(L.cholesky(junk), L.cholesky(S), { atol = 1e-12 }))
    assert.is_true(ember.allclose(L.eigvalsh(mT(junk), "U"), L.eigvalsh(S), { atol = 1e-10 }))
  end)
  it("empty batches and empty matrices: empty results, torch's identities for full U and complete Q", function()
    local B0 = ember.zeros(2, 0, 3, 3, F64)
    for _, f in ipairs { "inv", "cholesky", "qr", "lu_factor", "svd", "matrix_exp", "lu" } do
      local r = L[f](B0)
      assert.are.same({ 2, 0, 3, 3 }, { r.shape[1], r.shape[2], r.shape[3], r.shape[4] }, f)
    end
    assert.are.same({ 2, 0 }, { L.det(B0).shape[1], L.det(B0).shape[2] })
    assert.are.equal(1, L.det(ember.zeros(0, 0, F64)):item())
    local U, S, Vh = L.svd(ember.zeros(3, 0, F64))
    assert.is_true(ember.equal(U, ember.eye(3, F64)) and S:numel() == 0 and Vh:numel() == 0)
    assert.is_true(ember.equal(L.qr(ember.zeros(3, 0, F64), "complete"), ember.eye(3, F64)))
  end)
  it("det and slogdet of a singular matrix: 0, and sign 0 with -inf", function()
    local A = ember.tensor({ { 1, 2 }, { 2, 4 } }, F64)
    assert.are.equal(0, L.det(A):item())
    local sign, logabs = L.slogdet(A)
    assert.are.equal(0, sign:item())
    assert.are.equal(-math.huge, logabs:item())
    assert.are.equal(-math.huge, ember.logdet(A):item())
  end)
  it("cholesky_ex reports the failing batch element's minor, with no error", function()
    local A = ember.eye(3, F64):expand(2, 3, 3):clone()
    A[2][2][2] = -1
    local _, info = L.cholesky_ex(A)
    assert.are.same({ 0, 2 }, { info[1]:item(), info[2]:item() })
  end)
  it("the *_ex functions: info per batch element (the 1-based zero pivot), no error; NaN where singular", function()
    local A = ember.stack({ ember.tensor({ { 1, 2 }, { 2, 4 } }, F64), 2 * ember.eye(2, F64),
      ember.tensor({ { 0, 0 }, { 0, 1 } }, F64) })
    local _, _, info = L.lu_factor_ex(A)
    assert.are.same({ 2, 0, 1 }, { info[1]:item(), info[2]:item(), info[3]:item() })
    local X, info2 = L.solve_ex(A, ember.ones(3, 2, F64))
    assert.is_true(ember.equal(info2, info))
    assert.is_true(X[1][1]:isnan():item() and X[3][2]:isnan():item())
    assert.is_true(ember.allclose(X[2], ember.full({ 2 }, 0.5, F64)))
    local Y, i3 = L.inv_ex(A)
    assert.are.equal(2, i3[1]:item())
    assert.is_true(ember.allclose(L.solve_ex(2 * ember.eye(2, F64), ember.ones(2, F64)), ember.full({ 2 }, 0.5, F64)))
  end)
  it("top-level names: ember.inverse, det, cholesky(upper), qr(some), svd returns V", function()
    local A = ember.tensor({ { 4, 2 }, { 2, 5 } }, F64)
    assert.is_true(ember.allclose(ember.inverse(A), L.inv(A)))
    assert.are.equal(16, ember.det(A):item())
    assert.is_true(ember.allclose(ember.cholesky(A, true), mT(L.cholesky(A))))
    local Q = ember.qr(ember.randn(4, 2, F64), false)
    assert.are.same({ 4, 4 }, { Q.shape[1], Q.shape[2] })
    local B = ember.randn(4, 3, F64)
    local U, S, V = ember.svd(B)
    assert.is_true(ember.allclose((U * S):matmul(mT(V)), B, { atol = 1e-12 }))
    assert.is_true(ember.allclose(A:inverse(), L.inv(A)) and A:det():item() == 16 and math.abs(A:logdet():item() - math.log(16)) < 1e-12)
    assert.is_true(ember.allclose(A:cholesky(), L.cholesky(A)) and math.abs(select(2, A:slogdet()):item() - math.log(16)) < 1e-12)
    assert.is_true(ember.allclose(select(2, B:svd()), S) and B:qr().shape[2] == 3)
    local U0, S0, V0 = ember.svd(B, true, false)
    assert.is_true(ember.allclose(S0, S) and U0:abs():sum():item() == 0 and V0:abs():sum():item() == 0)
  end)
  it("matrix_rank, multi_dot with vectors, matrix_power 0, norm dispatch", function()
    assert.are.equal(2, L.matrix_rank(ember.randn(4, 2, F64):matmul(ember.randn(2, 4, F64))):item())
    assert.are.equal(4, L.matrix_rank(ember.eye(4, F64)):item())
    local a = ember.tensor({ 1, 2 }, F64)
    assert.are.equal(15, L.multi_dot({ a, 3 * ember.eye(2, F64), a }):item())
    assert.is_true(ember.equal(L.matrix_power(ember.randn(2, 3, 3, F64), 0), ember.eye(3, F64):expand(2, 3, 3):clone()))
    local A = ember.tensor({ { 3, 0 }, { 0, 4 } }, F64)
    assert.are.equal(5, L.norm(A):item())
    assert.are.equal(4, L.norm(A, 2):item())
    assert.are.equal(7, L.norm(A, "nuc"):item())
    assert.are.equal(4, L.norm(A, math.huge, 2):amax():item()) -- a vector norm along dim 2
    assert.are.same({ 1, 1 }, { L.matrix_norm(A, "fro", nil, true).shape[1], L.matrix_norm(A, "fro", nil, true).shape[2] })
  end)
end)

describe("ember.linalg errors", function()
  local A = ember.tensor({ { 1, 2 }, { 3, 4 } }, F64)
  it("not positive-definite, naming the minor and the batch element", function()
    raises_here(function() L.cholesky(-A) end,
      "ember.linalg.cholesky: The factorization could not be completed because the input is not positive-definite (the leading minor of order 1 is not positive-definite).")
    local batch = ember.eye(2, F64):expand(3, 2, 2):clone()
    batch[3][1][1] = -1
    raises_here(function() L.cholesky(batch) end, "linalg.cholesky: (Batch element 3 of 3): The factorization")
  end)
  it("singular for solve and inv", function()
    local S = ember.tensor({ { 1, 2 }, { 2, 4 } }, F64)
    raises_here(function() L.inv(S) end, "ember.linalg.inv: The diagonal element 2 is zero, the solve could not be completed because the input matrix is singular.")
    raises_here(function() L.solve(S, ember.ones(2, F64)) end, "ember.linalg.solve: The diagonal element 2 is zero")
    raises_here(function() L.solve_triangular(ember.zeros(2, 2, F64), ember.ones(2, 1, F64), { upper = true }) end,
      "singular")
  end)
  it("shapes, dims, dtypes, options", function()
    raises_here(function() L.inv(ember.randn(2, 3, F64)) end, "ember.linalg.inv: A must be batches of square matrices, but they are 2 by 3 matrices")
    raises_here(function() L.det(ember.randn(3, F64)) end, "ember.linalg.det: A must have at least 2 dimensions, got [3]")
    raises_here(function() L.cholesky(A:to("bfloat16")) end, "ember.linalg.cholesky: expected A to be a float32 or float64 tensor, got bfloat16")
    raises_here(function() L.svd(ember.ones(2, 2, { dtype = "int64" })) end, "got int64")
    raises_here(function() L.solve(A, ember.ones(3, F64)) end, "ember.linalg.solve: A [2, 2] and B [3, 1]: B must have 2 rows")
    raises_here(function() L.solve(A, ember.ones(2)) end, "expected B to have the dtype of A (float64), got float32")
    raises_here(function() L.cholesky(A, { uper = true }) end, "unknown option 'uper'")
    raises_here(function() L.solve_triangular(A, A) end, "the option upper is required")
    raises_here(function() L.qr(A, "full") end, "unrecognized mode 'full'")
    raises_here(function() L.matrix_norm(A, 3) end, "Order 3 not supported")
    raises_here(function() L.multi_dot({ A }) end, "expected at least 2 tensors")
    raises_here(function() L.matrix_power(A, 1.5) end, "n must be an integer")
  end)
  it("the gradient of complete QR with m > n is refused as torch's", function()
    local X = ember.randn(4, 2, F64):requires_grad_()
    local Q, R = L.qr(X, "complete")
    raises_here(function() (Q:sum() + R:sum()):backward() end, "not differentiable when mode='complete' and nrows > ncols")
  end)
  it("a backend without the linalg kernel is named (CUDA, where there is one)", function()
    local ok = pcall(ember.zeros, 1, { device = "cuda" })
    if not ok then return pending("no CUDA device here") end
    raises_here(function() L.inv(ember.eye(2, { device = "cuda" })) end, "the 'cuda' backend has no linear algebra kernel")
  end)
end)
