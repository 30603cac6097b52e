--- ember.linalg: torch.linalg's functions. The factorizations run on the
-- backend's LAPACK kernel (`ember._linalg`, core/src/ops_linalg.c; the CPU
-- backend's LAPACK is OpenBLAS's; a backend without it, CUDA, is refused by
-- name), float32 and float64, over any batch dims [..., m, n] (their
-- ember.Functions are lua/ember/_linalg_grad.lua); the rest is
-- composed from them and ember's ops. Each differentiable function carries
-- its gradient (ember.Function, the standard formulas: Cholesky as Murray
-- 2016, inverse -A^-T G A^-T, det G det(A) A^-T, QR reduced, eigh with
-- F = 1 / (lambda_j - lambda_i), SVD reduced as torch's svd_backward).
-- Keyword arguments are option tables (`linalg.cholesky(A, {upper = true})`);
-- dims are 1-based, negative from the end. Numerical failures (not
-- positive-definite, singular) are errors as torch words them, naming the
-- batch element (1-based), raised at the caller's line. Under
-- ember.autocast the factorizations and what is built on them run in
-- float32, bfloat16 inputs cast up (torch's CPU autocast's fp32 list).
-- torch's top-level names ember.inverse, det, logdet, slogdet, cholesky,
-- qr, svd (returning V, as torch.svd), matrix_exp, matrix_power,
-- pinverse, cholesky_solve and cholesky_inverse are these functions too,
-- and tensor methods (A:det()).
-- Not here: eig/eigvals (general, complex results), ldl,
-- tensorinv/tensorsolve, householder_product, complex dtypes, QR's complete
-- mode gradient for m > n (an error, as torch's), second derivatives (the
-- backward formulas read saved factors as constants).
-- @module ember.linalg
-- @usage local A = ember.tensor({{4, 2}, {2, 3}}, {dtype = "float64"})
-- print(ember.linalg.det(A))   --> tensor(8.0000, shape=[], dtype=float64, device=cpu)
local core = require "ember.core"
local errors = require "ember._errors"

local M = {}
local guard = errors.wrap
local shape_str = errors.shape_str

-- the argument rules (lua/ember/_linalg_checks.lua): errors name the function
local args = require "ember._linalg_checks"
local fail, check, options, broadcast_batch, b_is_vector, uplo_input, norm_args, floating, matrix_dims =
  args.fail, args.check, args.options, args.broadcast_batch, args.b_is_vector, args.uplo_input, args.norm_args,
  args.floating, args.matrix_dims

local G = require "ember._linalg_grad"
local mT, rows, cols, C, batch_shape, unpack_, eye_like, lu_parts =
  G.mT, G.rows, G.cols, G.C, G.batch_shape, G.unpack_, G.eye_like, G.lu_parts
local CHOLESKY, SOLVE, TRSOLVE, INV, DET, LOGABSDET = G.CHOLESKY, G.SOLVE, G.TRSOLVE, G.INV, G.DET, G.LOGABSDET
local QR, EIGH, EIGVALSH, SVD, SVDVALS = G.QR, G.EIGH, G.EIGVALSH, G.SVD, G.SVDVALS
local LU, perm_matrix = G.LU, G.perm_matrix

local EPS = { float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16 }

-- Cholesky

--- The Cholesky factor of a symmetric positive-definite matrix (batch):
-- lower L with A = L L^T (only A's lower triangle is read), or with
-- `{upper = true}` upper U = L^T, A = U^T U (torch.linalg.cholesky).
-- A matrix that is not positive-definite is an error naming the order of
-- the failing minor and the batch element.
-- @tparam Tensor A [..., n, n], float32 or float64
-- @tparam[opt] table opts upper (false)
-- @treturn Tensor
-- @usage local A = ember.tensor({{4, 2}, {2, 5}}, {dtype = "float64"})
-- print(ember.linalg.cholesky(A))   --> tensor([[2.0000, 0.0000], [1.0000, 2.0000]], shape=[2, 2], dtype=float64, device=cpu)
-- print(pcall(ember.linalg.cholesky, -A))   --> false ...not positive-definite (the leading minor of order 1 ...
function M.cholesky(A, opts)
  check("cholesky", A, true)
  opts = options("cholesky", opts, { upper = "boolean" })
  local L = CHOLESKY(A)
  if opts.upper then return mT(L) end
  return L
end

--- torch.linalg.cholesky_ex: the factor and info, no error on failure:
-- info is int64 of A's batch shape, 0 where the factorization succeeded,
-- else the order of the leading minor that is not positive-definite
-- (LAPACK's info; matrices after a failing one are not factored and hold 0).
-- @tparam Tensor A [..., n, n]
-- @tparam[opt] table opts upper
-- @treturn Tensor L
-- @treturn Tensor info
-- @usage local L, info = ember.linalg.cholesky_ex(-ember.eye(2, {dtype = "float64"}))
-- print(info)   --> tensor(1, shape=[], dtype=int64, device=cpu)
function M.cholesky_ex(A, opts)
  check("cholesky_ex", A, true)
  opts = options("cholesky_ex", opts, { upper = "boolean" })
  local L, elem, code = C("cholesky", A, { name = "linalg.cholesky_ex", ex = true })
  local info = core.zeros(batch_shape(A), { dtype = "int64", device = A.device })
  if elem > 0 then
    info:view(-1)[elem] = code
  elseif A.requires_grad then
    L = CHOLESKY(A) -- factored: differentiable as linalg.cholesky (torch's is)
  end
  if opts.upper then L = mT(L) end
  return L, info
end

-- Solves, inverse, determinants

--- Solves A X = B for X (torch.linalg.solve), with A square and
-- invertible, B [..., n, k] or a vector [..., n] (torch's rule), batch dims
-- broadcast; `{left = false}` solves X A = B. A singular A is an error.
-- @tparam Tensor A [..., n, n]
-- @tparam Tensor B [..., n, k] or [..., n]
-- @tparam[opt] table opts left (true)
-- @treturn Tensor X
-- @usage local A = ember.tensor({{3, 1}, {1, 2}}, {dtype = "float64"})
-- print(ember.linalg.solve(A, ember.tensor({9, 8}, {dtype = "float64"})))   --> tensor([2.0000, 3.0000], shape=[2], dtype=float64, device=cpu)
function M.solve(A, B, opts)
  local op = "solve"
  check(op, A, true)
  if not core.is_tensor(B) then fail(op, "B must be a tensor, got %s", type(B)) end
  if B.dtype ~= A.dtype then fail(op, "expected B to have the dtype of A (%s), got %s", A.dtype, B.dtype) end
  opts = options(op, opts, { left = "boolean" })
  if opts.left == false then
    return mT(M.solve(mT(A), mT(B)))
  end
  local vec = b_is_vector(A, B)
  if vec then B = B:unsqueeze(-1) end
  if rows(B) ~= rows(A) then
    fail(op, "A %s and B %s: B must have %d rows", shape_str(A), shape_str(B), rows(A))
  end
  local Ab, Bb = broadcast_batch(op, A, B)
  local X = SOLVE(Ab, Bb, "linalg.solve")
  if vec then X = X:squeeze(-1) end
  return X
end

--- Solves A X = B for a triangular A (torch.linalg.solve_triangular):
-- `upper` is required (which triangle of A is read, the other is
-- ignored); `left = false` solves X A = B; `unitriangular` takes A's
-- diagonal as ones. Batch dims broadcast. A zero on the diagonal is an error.
-- @tparam Tensor A [..., n, n]
-- @tparam Tensor B [..., n, k] ([..., k, n] with left = false)
-- @tparam table opts upper (required), left (true), unitriangular (false)
-- @treturn Tensor X
-- @usage local A = ember.tensor({{2, 0}, {1, 4}}, {dtype = "float64"})
-- print(ember.linalg.solve_triangular(A, ember.tensor({{2}, {9}}, {dtype = "float64"}), {upper = false}))   --> tensor([[1.0000], [2.0000]], shape=[2, 1], dtype=float64, device=cpu)
function M.solve_triangular(A, B, opts)
  local op = "solve_triangular"
  check(op, A, true)
  check(op, B, false, "B")
  if B.dtype ~= A.dtype then fail(op, "expected B to have the dtype of A (%s), got %s", A.dtype, B.dtype) end
  opts = options(op, opts, { upper = "boolean", left = "boolean", unitriangular = "boolean" })
  if opts.upper == nil then fail(op, "the option upper is required (true: A is upper triangular, false: lower)") end
  if opts.left == false then
    return mT(M.solve_triangular(mT(A), mT(B), { upper = not opts.upper, unitriangular = opts.unitriangular }))
  end
  if rows(B) ~= rows(A) then fail(op, "A %s and B %s: B must have %d rows", shape_str(A), shape_str(B), rows(A)) end
  local Ab, Bb = broadcast_batch(op, A, B)
  return TRSOLVE(Ab, Bb, opts.upper, opts.unitriangular or false)
end

--- The inverse of a square matrix (batch) (torch.linalg.inv); a singular
-- matrix is an error naming its zero pivot and the batch element.
-- @tparam Tensor A [..., n, n]
-- @treturn Tensor
-- @usage print(ember.linalg.inv(ember.tensor({{2, 0}, {0, 4}}, {dtype = "float64"})))   --> tensor([[0.5000, 0.0000], [0.0000, 0.2500]], shape=[2, 2], dtype=float64, device=cpu)
function M.inv(A)
  check("inv", A, true)
  return INV(A, "linalg.inv")
end

--- The determinant of a square matrix (batch) (torch.linalg.det), from
-- its LU factorization; 0 for a singular matrix, whose gradient is the
-- adjugate's transpose (by the SVD; torch 1.13 gives 0 there).
-- @tparam Tensor A [..., n, n]
-- @treturn Tensor of A's batch shape
-- @usage print(ember.linalg.det(ember.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})))   --> tensor(-2.0000, shape=[], dtype=float64, device=cpu)
function M.det(A)
  check("det", A, true)
  if rows(A) == 0 then return core.ones(batch_shape(A), { dtype = A.dtype, device = A.device }) end
  return DET(A)
end

--- The sign and the log of the absolute value of the determinant
-- (torch.linalg.slogdet): sign 0 and logabsdet -inf for a singular matrix.
-- The gradient flows through logabsdet.
-- @tparam Tensor A [..., n, n]
-- @treturn Tensor sign
-- @treturn Tensor logabsdet
-- @usage local sign, logabsdet = ember.linalg.slogdet(ember.tensor({{1, 2}, {3, 4}}, {dtype = "float64"}))
-- print(sign, logabsdet)   --> tensor(-1.0000, shape=[], dtype=float64, device=cpu) tensor(0.6931, shape=[], dtype=float64, device=cpu)
function M.slogdet(A)
  check("slogdet", A, true)
  if rows(A) == 0 then
    local o = { dtype = A.dtype, device = A.device }
    return core.ones(batch_shape(A), o), core.zeros(batch_shape(A), o)
  end
  local d, sign
  do
    local prev = core.set_grad_enabled(false)
    d, sign = lu_parts(A)
    core.set_grad_enabled(prev)
  end
  sign = sign * d:sign():prod(-1)
  return sign, LOGABSDET(A)
end

-- LU

--- The LU decomposition with partial pivoting A = P L U (torch.linalg.lu):
-- P [..., m, m] a permutation, L [..., m, k] unit lower, U [..., k, n]
-- upper, k = min(m, n). A singular A factors too (a zero on U's diagonal).
-- Differentiable for square A (torch's formula).
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] table opts pivot (true; false is refused)
-- @treturn Tensor P
-- @treturn Tensor L
-- @treturn Tensor U
-- @usage local P, L, U = ember.linalg.lu(ember.tensor({{1, 2}, {3, 4}}, {dtype = "float64"}))
-- print(P, U[1][1])   --> tensor([[0.0000, 1.0000], [1.0000, 0.0000]], shape=[2, 2], dtype=float64, device=cpu) tensor(3.0000, shape=[], dtype=float64, device=cpu)
function M.lu(A, opts)
  check("lu", A)
  options("lu", opts, { pivot = "boolean" })
  if opts and opts.pivot == false then fail("lu", "pivot = false is not supported (LAPACK's getrf pivots)") end
  local m, n = rows(A), cols(A)
  local k = math.min(m, n)
  local Lm, Um = unpack_(LU(A, "linalg.lu"), { { m, k }, { k, n } })
  local _, piv = C("lu", A:detach(), { name = "linalg.lu", ex = true })
  return perm_matrix(piv, m, A.dtype, A.device), Lm, Um
end

--- The compact LU factorization (torch.linalg.lu_factor): LU [..., m, n]
-- holding L below the diagonal (its unit diagonal left out) and U on and
-- above it, and the pivots [..., min(m, n)], int64, 1-based as LAPACK's
-- and torch's (row i was swapped with row pivots[i]). Differentiable for
-- square A. For `linalg.lu_solve`.
-- @tparam Tensor A [..., m, n]
-- @treturn Tensor LU
-- @treturn Tensor pivots
-- @usage local LU, pivots = ember.linalg.lu_factor(ember.tensor({{1, 2}, {3, 4}}, {dtype = "float64"}))
-- print(pivots)   --> tensor([2, 2], shape=[2], dtype=int64, device=cpu)
function M.lu_factor(A)
  check("lu_factor", A)
  local m, n = rows(A), cols(A)
  local k = math.min(m, n)
  local Lm, Um = unpack_(LU(A, "linalg.lu_factor"), { { m, k }, { k, n } })
  local _, piv = C("lu", A:detach(), { name = "linalg.lu_factor", ex = true })
  -- LU = (L - I) padded with U's columns past k, plus U padded with zero rows
  local Lpart = Lm - core.eye(m, k, { dtype = A.dtype, device = A.device })
  if n > k then Lpart = core.cat({ Lpart, core.zeros(batch_shape(A, m, n - k), { dtype = A.dtype, device = A.device }) }, -1) end
  local Upart = Um
  if m > k then Upart = core.cat({ Upart, core.zeros(batch_shape(A, m - k, n), { dtype = A.dtype, device = A.device }) }, -2) end
  return Lpart + Upart, piv
end

--- Solves A X = B from A's lu_factor (torch.linalg.lu_solve): `{left =
-- true, adjoint = false}` (left false: X A = B; adjoint: A^T). Composed of
-- triangular solves on LU's triangles, so differentiable with respect to
-- LU and B.
-- @tparam Tensor LU [..., n, n]
-- @tparam Tensor pivots [..., n]
-- @tparam Tensor B [..., n, k]
-- @tparam[opt] table opts left, adjoint
-- @treturn Tensor X
-- @usage local A = ember.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})
-- local LU, pivots = ember.linalg.lu_factor(A)
-- print(ember.linalg.lu_solve(LU, pivots, ember.tensor({{5}, {11}}, {dtype = "float64"})))   --> tensor([[1.0000], [2.0000]], shape=[2, 1], dtype=float64, device=cpu)
function M.lu_solve(LU, pivots, B, opts)
  local LUm = LU
  local op = "lu_solve"
  check(op, LUm, true, "LU")
  check(op, B, false, "B")
  if not core.is_tensor(pivots) or pivots.dtype ~= "int64" then fail(op, "pivots must be an int64 tensor (lu_factor's)") end
  opts = options(op, opts, { left = "boolean", adjoint = "boolean" })
  if opts.left == false then
    return mT(M.lu_solve(LUm, pivots, mT(B), { adjoint = not opts.adjoint }))
  end
  local n = rows(LUm)
  if rows(B) ~= n then fail(op, "LU %s and B %s: B must have %d rows", shape_str(LUm), shape_str(B), n) end
  local P = perm_matrix(pivots, n, LUm.dtype, LUm.device)
  if opts.adjoint then -- A^T = U^T L^T P^T: X = P L^-T U^-T B
    local Y = M.solve_triangular(mT(LUm), B, { upper = false })
    Y = M.solve_triangular(mT(LUm), Y, { upper = true, unitriangular = true })
    return P:matmul(Y)
  end
  local Y = M.solve_triangular(LUm, mT(P):matmul(B), { upper = false, unitriangular = true })
  return M.solve_triangular(LUm, Y, { upper = true })
end

-- QR, eigh, SVD

--- The QR decomposition A = Q R (torch.linalg.qr): mode "reduced" (Q
-- [..., m, k], R [..., k, n], k = min(m, n)), "complete" (Q [..., m, m], R
-- [..., m, n]) or "r" (R only, Q empty), as a string or `{mode = }`. R's
-- diagonal has LAPACK's signs, as torch's. Differentiable (reduced; complete
-- when m <= n).
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] string|table mode "reduced"
-- @treturn Tensor Q
-- @treturn Tensor R
-- @usage local A = ember.tensor({{3, 1}, {4, 2}}, {dtype = "float64"})
-- local Q, R = ember.linalg.qr(A)
-- print(ember.allclose(Q:matmul(R), A), R[1][1])   --> true tensor(-5.0000, shape=[], dtype=float64, device=cpu)
function M.qr(A, mode)
  check("qr", A)
  if type(mode) == "table" then mode = options("qr", mode, { mode = "string" }).mode end
  mode = mode or "reduced"
  if mode ~= "reduced" and mode ~= "complete" and mode ~= "r" then
    fail("qr", "qr received unrecognized mode '%s' but expected one of 'reduced' (default), 'r', or 'complete'",
      tostring(mode))
  end
  local m, n = rows(A), cols(A)
  local full = mode == "complete" and m > n
  local qc = full and m or math.min(m, n)
  local rr = full and m or math.min(m, n)
  local Q, R = unpack_(QR(A, full), { { m, qc }, { rr, n } })
  if full and n == 0 then Q = core.zeros_like(Q) + eye_like(A, m) end -- torch's identity
  if mode == "r" then
    return core.zeros({ 0 }, { dtype = A.dtype, device = A.device }), R
  end
  return Q, R
end

--- Eigenvalues (ascending) and eigenvectors (the columns of V) of a real
-- symmetric matrix (torch.linalg.eigh): A = V diag(w) V^T, reading the
-- lower triangle (UPLO "L", the default) or the upper ("U"). Each
-- eigenvector's sign is arbitrary (LAPACK's). The gradient needs distinct
-- eigenvalues and a loss that does not depend on those signs.
-- @tparam Tensor A [..., n, n]
-- @tparam[opt] string|table UPLO "L"
-- @treturn Tensor w [..., n]
-- @treturn Tensor V [..., n, n]
-- @usage local w, V = ember.linalg.eigh(ember.tensor({{2, 1}, {1, 2}}, {dtype = "float64"}))
-- print(w)   --> tensor([1.0000, 3.0000], shape=[2], dtype=float64, device=cpu)
function M.eigh(A, UPLO)
  check("eigh", A, true)
  A = uplo_input("eigh", A, UPLO)
  local n = rows(A)
  local w, V = unpack_(EIGH(A), { { n }, { n, n } })
  return w, V
end

--- The eigenvalues of a real symmetric matrix, ascending (torch.linalg.eigvalsh).
-- @tparam Tensor A [..., n, n]
-- @tparam[opt] string|table UPLO "L"
-- @treturn Tensor [..., n]
-- @usage print(ember.linalg.eigvalsh(ember.tensor({{2, 1}, {1, 2}}, {dtype = "float64"})))   --> tensor([1.0000, 3.0000], shape=[2], dtype=float64, device=cpu)
function M.eigvalsh(A, UPLO)
  check("eigvalsh", A, true)
  return EIGVALSH(uplo_input("eigvalsh", A, UPLO))
end

--- The singular value decomposition A = U diag(S) Vh (torch.linalg.svd):
-- S descending; with `full_matrices` (true by default, as torch's; a
-- boolean or `{full_matrices = }`) U is [..., m, m] and Vh [..., n, n], else
-- reduced (U [..., m, k], Vh [..., k, n], k = min(m, n)). The singular
-- vectors' signs are arbitrary (LAPACK's). The gradient needs distinct
-- (and, for m ~= n, nonzero) singular values and a loss that does not
-- depend on those signs.
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] boolean|table full_matrices true
-- @treturn Tensor U
-- @treturn Tensor S
-- @treturn Tensor Vh
-- @usage local A = ember.tensor({{3, 0}, {0, -2}, {0, 0}}, {dtype = "float64"})
-- local U, S, Vh = ember.linalg.svd(A, false)
-- print(S, U.shape, ember.allclose((U * S):matmul(Vh), A))   --> tensor([3.0000, 2.0000], shape=[2], dtype=float64, device=cpu) ember.Size{3, 2} true
function M.svd(A, full_matrices)
  check("svd", A)
  if type(full_matrices) == "table" then
    full_matrices = options("svd", full_matrices, { full_matrices = "boolean" }).full_matrices
  end
  if full_matrices == nil then full_matrices = true end
  if type(full_matrices) ~= "boolean" then fail("svd", "full_matrices must be a boolean, got %s", type(full_matrices)) end
  local m, n = rows(A), cols(A)
  local k = math.min(m, n)
  local full = full_matrices and m ~= n
  local U, S, Vh = unpack_(SVD(A, full), { { m, full and m or k }, { k }, { full and n or k, n } })
  if full and k == 0 then -- nothing factored: torch's identities
    U, Vh = core.zeros_like(U) + eye_like(A, m), core.zeros_like(Vh) + eye_like(A, n)
  end
  return U, S, Vh
end

--- The singular values, descending (torch.linalg.svdvals).
-- @tparam Tensor A [..., m, n]
-- @treturn Tensor [..., min(m, n)]
-- @usage print(ember.linalg.svdvals(ember.tensor({{0, 2}, {-3, 0}}, {dtype = "float64"})))   --> tensor([3.0000, 2.0000], shape=[2], dtype=float64, device=cpu)
function M.svdvals(A)
  check("svdvals", A)
  return SVDVALS(A)
end

-- Composed

--- The least-squares solution of A X = B for a full-rank A
-- (torch.linalg.lstsq), by QR: min ||A X - B|| for m >= n, the
-- minimum-norm solution for m < n. Returns solution, residuals (the
-- squared residual norms [..., k] when m > n, else empty), rank (n or m,
-- int64) and singular_values (empty), as torch's fields. Differentiable.
-- A rank-deficient A is not detected (its R is singular: an error or inf).
-- @tparam Tensor A [..., m, n]
-- @tparam Tensor B [..., m, k]
-- @tparam[opt] table opts rcond, driver (accepted, unused: always QR)
-- @treturn Tensor solution [..., n, k]
-- @treturn Tensor residuals
-- @treturn Tensor rank
-- @treturn Tensor singular_values
-- @usage local A = ember.tensor({{1, 0}, {0, 1}, {1, 1}}, {dtype = "float64"})
-- local X = ember.linalg.lstsq(A, ember.tensor({{1}, {2}, {4}}, {dtype = "float64"}))
-- print(X)   --> tensor([[1.3333], [2.3333]], shape=[2, 1], dtype=float64, device=cpu)
function M.lstsq(A, B, opts)
  local op = "lstsq"
  check(op, A)
  check(op, B, false, "B")
  if B.dtype ~= A.dtype then fail(op, "expected B to have the dtype of A (%s), got %s", A.dtype, B.dtype) end
  options(op, opts, { rcond = "number", driver = "string" })
  if rows(B) ~= rows(A) then fail(op, "A %s and B %s: B must have %d rows", shape_str(A), shape_str(B), rows(A)) end
  A, B = broadcast_batch(op, A, B)
  local m, n = rows(A), cols(A)
  local X
  if m >= n then
    local Q, R = M.qr(A)
    X = M.solve_triangular(R, mT(Q):matmul(B), { upper = true })
  else
    local Q, R = M.qr(mT(A))
    X = Q:matmul(M.solve_triangular(mT(R), B, { upper = false }))
  end
  local o = { dtype = A.dtype, device = A.device }
  local residuals = core.zeros({ 0 }, o)
  if m > n then residuals = ((A:matmul(X) - B) ^ 2):sum(-2) end
  local rank = core.full(batch_shape(A), math.min(m, n), { dtype = "int64", device = A.device })
  return X, residuals, rank, core.zeros({ 0 }, o)
end

--- The vector norm of x over dim (all elements by default)
-- (torch.linalg.vector_norm): ord 2 (default), any real, math.huge,
-- -math.huge or 0; `ord`, `dim`, `keepdim`, `dtype` positional or as a table.
-- @tparam Tensor x
-- @tparam[opt] number ord 2
-- @tparam[opt] number|table dim
-- @tparam[opt] boolean keepdim
-- @treturn Tensor
-- @usage print(ember.linalg.vector_norm(ember.tensor({3, -4})), ember.linalg.vector_norm(ember.tensor({3, -4}), math.huge))   --> tensor(5.0000, shape=[], dtype=float32, device=cpu) tensor(4.0000, shape=[], dtype=float32, device=cpu)
function M.vector_norm(x, ord, dim, keepdim)
  local dtype
  ord, dim, keepdim, dtype = norm_args("vector_norm", ord, dim, keepdim)
  x = floating("vector_norm", x, dtype)
  ord = ord or 2
  if type(ord) ~= "number" then fail("vector_norm", "ord must be a number, got %s", tostring(ord)) end
  return x:norm(ord, dim, keepdim)
end

--- The matrix norm over two dims (torch.linalg.matrix_norm): ord "fro"
-- (default), "nuc", 2, -2 (largest / smallest singular value), 1, -1
-- (max / min column abs sum), math.huge, -math.huge (max / min row abs sum);
-- dim {-2, -1} by default.
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] string|number ord "fro"
-- @tparam[opt] table dim
-- @tparam[opt] boolean keepdim
-- @treturn Tensor
-- @usage local A = ember.tensor({{1, -2}, {3, 4}}, {dtype = "float64"})
-- print(ember.linalg.matrix_norm(A, 1), ember.linalg.matrix_norm(A, math.huge))   --> tensor(6.0000, shape=[], dtype=float64, device=cpu) tensor(7.0000, shape=[], dtype=float64, device=cpu)
function M.matrix_norm(A, ord, dim, keepdim)
  local op, dtype = "matrix_norm", nil
  ord, dim, keepdim, dtype = norm_args(op, ord, dim, keepdim)
  A = floating(op, A, dtype)
  ord = ord or "fro"
  local d = matrix_dims(op, A, dim)
  if ord == "fro" then return A:norm(2, { d[1], d[2] }, keepdim) end
  -- move the two dims to the end (d1 rows, d2 columns)
  local perm = {}
  for i = 1, A:dim() do
    if i ~= d[1] and i ~= d[2] then perm[#perm + 1] = i end
  end
  perm[#perm + 1], perm[#perm + 2] = d[1], d[2]
  local B = A:permute(perm)
  local r
  if ord == "nuc" or ord == 2 or ord == -2 then
    check(op, B)
    local S = M.svdvals(B)
    if ord == "nuc" then r = S:sum(-1) elseif ord == 2 then r = S:amax(-1) else r = S:amin(-1) end
  elseif ord == 1 or ord == -1 then
    local s = B:abs():sum(-2)
    r = ord == 1 and s:amax(-1) or s:amin(-1)
  elseif ord == math.huge or ord == -math.huge then
    local s = B:abs():sum(-1)
    r = ord > 0 and s:amax(-1) or s:amin(-1)
  else
    fail(op, "Order %s not supported (expected \"fro\", \"nuc\", 2, -2, 1, -1, math.huge, -math.huge)", tostring(ord))
  end
  if keepdim then
    local lo, hi = math.min(d[1], d[2]), math.max(d[1], d[2])
    r = r:unsqueeze(lo):unsqueeze(hi)
  end
  return r
end

--- torch.linalg.norm: a matrix norm when ord is a string, or dim has two
-- dims, or (ord given, dim not) A is 2-d; the vector 2-norm of all
-- elements when neither ord nor dim is given; else a vector norm.
-- @tparam Tensor A
-- @tparam[opt] string|number ord
-- @tparam[opt] number|table dim
-- @tparam[opt] boolean keepdim
-- @treturn Tensor
-- @usage local A = ember.tensor({{3, 0}, {0, 4}}, {dtype = "float64"})
-- print(ember.linalg.norm(A), ember.linalg.norm(A, 2), ember.linalg.norm(A, "nuc"))   --> tensor(5.0000, shape=[], dtype=float64, device=cpu) tensor(4.0000, shape=[], dtype=float64, device=cpu) tensor(7.0000, shape=[], dtype=float64, device=cpu)
function M.norm(A, ord, dim, keepdim)
  local dtype
  ord, dim, keepdim, dtype = norm_args("norm", ord, dim, keepdim)
  A = floating("norm", A, dtype)
  if type(dim) == "number" then dim = { dim } end
  if dim ~= nil and #dim == 2 then return M.matrix_norm(A, ord, dim, keepdim) end
  if type(ord) == "string" or (ord ~= nil and dim == nil) then
    if dim == nil and A:dim() ~= 1 and A:dim() ~= 2 then
      fail("norm", "input must be 1-D or 2-D when dim is nil and ord is given, got %s", shape_str(A))
    end
    -- a matrix norm of a 2-D input (or a string ord); a vector norm of a 1-D one
    if A:dim() == 2 or type(ord) == "string" then return M.matrix_norm(A, ord, dim, keepdim) end
  end
  if dim ~= nil and #dim == 1 then dim = dim[1] end
  return M.vector_norm(A, ord, dim, keepdim)
end

-- torch's tolerance: max(atol, rtol * largest singular value), rtol
-- defaulting to eps * max(m, n) when atol is not given (or 0).
local function tolerance(op, A, S, opts)
  opts = options(op, opts, { atol = "number", rtol = "number", hermitian = "boolean", tol = "number" })
  local atol = opts.atol or opts.tol or 0
  local rtol = opts.rtol
  if rtol == nil then rtol = atol > 0 and 0 or EPS[A.dtype] * math.max(rows(A), cols(A)) end
  local smax = S:amax(-1, true)
  return core.maximum(smax * rtol, core.full({}, atol, { dtype = A.dtype, device = A.device }))
end

--- The numerical rank (torch.linalg.matrix_rank): the singular values
-- above max(atol, rtol * the largest), int64; `{atol =, rtol =, hermitian =}`.
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] table opts
-- @treturn Tensor int64
-- @usage print(ember.linalg.matrix_rank(ember.tensor({{1, 2}, {2, 4}}, {dtype = "float64"})))   --> tensor(1, shape=[], dtype=int64, device=cpu)
function M.matrix_rank(A, opts)
  check("matrix_rank", A)
  local S
  do
    local prev = core.set_grad_enabled(false)
    S = M.svdvals(A)
    core.set_grad_enabled(prev)
  end
  local tol = tolerance("matrix_rank", A, S, opts)
  return S:gt(tol):to("int64"):sum(-1)
end

--- The pseudo-inverse (torch.linalg.pinv), by the SVD: singular values at
-- or below max(atol, rtol * the largest) count as zero. Differentiable
-- (distinct nonzero singular values).
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] table opts atol, rtol, hermitian
-- @treturn Tensor [..., n, m]
-- @usage print(ember.linalg.pinv(ember.tensor({{2, 0}, {0, 0}}, {dtype = "float64"})))   --> tensor([[0.5000, 0.0000], [0.0000, 0.0000]], shape=[2, 2], dtype=float64, device=cpu)
function M.pinv(A, opts)
  check("pinv", A)
  local U, S, Vh = M.svd(A, false)
  local tol = tolerance("pinv", A, S:detach(), opts)
  local keep = S:gt(tol)
  local Sinv = core.where(keep, 1 / core.where(keep, S, core.ones_like(S)), core.zeros_like(S))
  return (mT(Vh) * Sinv:unsqueeze(-2)):matmul(mT(U))
end

--- A square matrix (batch) to an integer power (torch.linalg.matrix_power):
-- repeated squaring; 0 gives the identity, a negative power the inverse's.
-- @tparam Tensor A [..., n, n]
-- @tparam integer n
-- @treturn Tensor
-- @usage print(ember.linalg.matrix_power(ember.tensor({{1, 1}, {0, 1}}, {dtype = "float64"}), 3))   --> tensor([[1.0000, 3.0000], [0.0000, 1.0000]], shape=[2, 2], dtype=float64, device=cpu)
function M.matrix_power(A, n)
  local op = "matrix_power"
  if not core.is_tensor(A) then fail(op, "A must be a tensor, got %s", type(A)) end
  if A:dim() < 2 or rows(A) ~= cols(A) then
    fail(op, "A must be batches of square matrices, got %s", shape_str(A))
  end
  if math.type(n) ~= "integer" then fail(op, "n must be an integer, got %s", tostring(n)) end
  if n == 0 then return core.zeros_like(A) + eye_like(A, rows(A)) end
  if n < 0 then
    A = M.inv(check(op, A))
    n = -n
  end
  local result, base = nil, A
  while n > 0 do
    if n % 2 == 1 then result = result and result:matmul(base) or base end
    n = n // 2
    if n > 0 then base = base:matmul(base) end
  end
  return result
end

--- The product of a list of matrices (torch.linalg.multi_dot): the first
-- may be a vector [n] (a row), the last a vector (a column), and those dims
-- are dropped from the result. Computed left to right (torch picks the
-- cheapest order; the values agree up to rounding).
-- @tparam {Tensor,...} tensors at least 2
-- @treturn Tensor
-- @usage local a = ember.tensor({1, 2}, {dtype = "float64"})
-- print(ember.linalg.multi_dot({a, ember.eye(2, {dtype = "float64"}) * 3, a}))   --> tensor(15.0000, shape=[], dtype=float64, device=cpu)
function M.multi_dot(tensors)
  local op = "multi_dot"
  if type(tensors) ~= "table" or core.is_tensor(tensors) then fail(op, "expected a list of tensors, got %s", type(tensors)) end
  local n = #tensors
  if n < 2 then fail(op, "expected at least 2 tensors but got %d", n) end
  for i, t in ipairs(tensors) do
    if not core.is_tensor(t) then fail(op, "tensor %d is a %s", i, type(t)) end
    local okdim = t:dim() == 2 or ((i == 1 or i == n) and t:dim() == 1)
    if not okdim then
      fail(op, "tensor %d must be 2-D%s, got %s", i, (i == 1 or i == n) and " (or 1-D)" or "", shape_str(t))
    end
  end
  local first_vec, last_vec = tensors[1]:dim() == 1, tensors[n]:dim() == 1
  local acc = first_vec and tensors[1]:unsqueeze(1) or tensors[1]
  for i = 2, n do
    local t = tensors[i]
    if i == n and last_vec then t = t:unsqueeze(2) end
    if acc.shape[2] ~= t.shape[1] then
      fail(op, "tensors %d and %d cannot be multiplied (%s and %s)", i - 1, i, shape_str(acc), shape_str(t))
    end
    acc = acc:matmul(t)
  end
  if first_vec then acc = acc:squeeze(1) end
  if last_vec then acc = acc:squeeze(-1) end
  return acc
end

-- Pade 13 coefficients and the 1-norm bound under which it is exact to
-- float64's precision (Higham 2005, "The scaling and squaring method for
-- the matrix exponential revisited").
local PADE13 = { 64764752532480000, 32382376266240000, 7771770303897600, 1187353796428800, 129060195264000,
  10559470521600, 670442572800, 33522128640, 1323241920, 40840800, 960960, 16380, 182, 1 }
local THETA13 = 5.371920351148152

--- The matrix exponential (torch.linalg.matrix_exp): Pade 13 with scaling
-- and squaring (Higham 2005), one scaling for the whole batch; composed from
-- matmul and solve, so its gradient is the derivative of that approximant.
-- @tparam Tensor A [..., n, n]
-- @treturn Tensor
-- @usage print(ember.linalg.matrix_exp(ember.tensor({{0, 1}, {0, 0}}, {dtype = "float64"})))   --> tensor([[1.0000, 1.0000], [0.0000, 1.0000]], shape=[2, 2], dtype=float64, device=cpu)
function M.matrix_exp(A)
  local op = "matrix_exp"
  check(op, A, true)
  local n = rows(A)
  if n == 0 or A:numel() == 0 then return A:clone() end
  local norm1 = A:detach():abs():sum(-2):amax():item()
  local s = 0
  if norm1 > THETA13 then s = math.max(0, math.ceil(math.log(norm1 / THETA13, 2))) end
  local X = s > 0 and A / (2 ^ s) or A
  local I = eye_like(A, n)
  local b = PADE13
  local A2 = X:matmul(X)
  local A4 = A2:matmul(A2)
  local A6 = A4:matmul(A2)
  local U = X:matmul(A6:matmul(b[14] * A6 + b[12] * A4 + b[10] * A2) + b[8] * A6 + b[6] * A4 + b[4] * A2 + b[2] * I)
  local V = A6:matmul(b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * I
  local R = SOLVE(V - U, V + U, "linalg.matrix_exp")
  for _ = 1, s do R = R:matmul(R) end
  return R
end

--- The condition number (torch.linalg.cond): for p nil, 2 or -2 the ratio
-- of the extreme singular values (any shape); for "fro", "nuc", 1, -1,
-- math.huge, -math.huge the norm of A times that of its inverse (square A).
-- @tparam Tensor A [..., m, n]
-- @tparam[opt] string|number p
-- @treturn Tensor
-- @usage print(ember.linalg.cond(ember.tensor({{4, 0}, {0, 2}}, {dtype = "float64"})))   --> tensor(2.0000, shape=[], dtype=float64, device=cpu)
function M.cond(A, p)
  local op = "cond"
  check(op, A)
  if p == nil or p == 2 or p == -2 then
    local S = M.svdvals(A)
    local big, small = S:amax(-1), S:amin(-1)
    if p == -2 then return small / big end
    return big / small
  end
  check(op, A, true)
  return M.matrix_norm(A, p) * M.matrix_norm(M.inv(A), p)
end

--- torch.linalg.inv_ex: the inverse and info (int64 of A's batch shape: 0,
-- or the 1-based zero pivot where A is singular), without an error.
-- @tparam Tensor A [..., n, n]
-- @treturn Tensor inverse (not meaningful where info is nonzero)
-- @treturn Tensor info
-- @usage local _, info = ember.linalg.inv_ex(ember.zeros(2, 2, {dtype = "float64"}))
-- print(info)   --> tensor(1, shape=[], dtype=int64, device=cpu)
function M.inv_ex(A)
  check("inv_ex", A, true)
  local I = core.zeros_like(A) + eye_like(A, rows(A))
  local Y, elem, code = C("solve", A, I, { name = "linalg.inv_ex", ex = true })
  local info = core.zeros(batch_shape(A), { dtype = "int64", device = A.device })
  if elem > 0 then
    info:view(-1)[elem] = code
    return Y, info
  end
  return M.inv(A), info
end

--- torch.linalg.solve_ex: the solution and info (int64 of the batch
-- shape: 0, or the 1-based zero pivot where A is singular), without an
-- error; `{left =}` as linalg.solve.
-- @tparam Tensor A [..., n, n]
-- @tparam Tensor B [..., n, k] or [..., n]
-- @tparam[opt] table opts left
-- @treturn Tensor X (NaN where info is nonzero)
-- @treturn Tensor info
-- @usage local _, info = ember.linalg.solve_ex(ember.zeros(2, 2, {dtype = "float64"}), ember.ones(2, {dtype = "float64"}))
-- print(info)   --> tensor(1, shape=[], dtype=int64, device=cpu)
function M.solve_ex(A, B, opts)
  local op = "solve_ex"
  check(op, A, true)
  if not core.is_tensor(B) then fail(op, "B must be a tensor, got %s", type(B)) end
  opts = options(op, opts, { left = "boolean" })
  local _, _, info = M.lu_factor_ex(A)
  if info:abs():sum():item() == 0 then return M.solve(A, B, opts), info end
  -- some matrix is singular: NaN there (torch leaves LAPACK's inf or nan),
  -- the others solved (the singular ones replaced by I meanwhile)
  local bad = info:ne(0):unsqueeze(-1):unsqueeze(-1)
  local safe = core.where(bad, core.zeros_like(A) + eye_like(A, rows(A)), A)
  local X = M.solve(safe, B, opts)
  local mask = bad
  if X:dim() < A:dim() then mask = bad:squeeze(-1) end
  X = core.where(mask, core.full({}, 0 / 0, { dtype = X.dtype, device = X.device }), X)
  return X, info
end

--- torch.linalg.lu_factor_ex: lu_factor's LU and pivots and info (int64
-- of the batch shape: 0, or the 1-based zero pivot of U), never an error.
-- @tparam Tensor A [..., m, n]
-- @treturn Tensor LU
-- @treturn Tensor pivots
-- @treturn Tensor info
-- @usage local LU, pivots, info = ember.linalg.lu_factor_ex(ember.tensor({{1, 2}, {2, 4}}, {dtype = "float64"}))
-- print(info)   --> tensor(2, shape=[], dtype=int64, device=cpu)
function M.lu_factor_ex(A)
  check("lu_factor_ex", A)
  local LUm, piv = M.lu_factor(A)
  local info = core.zeros(batch_shape(A), { dtype = "int64", device = A.device })
  -- the first zero on U's diagonal of each matrix (LAPACK's info)
  local d = LUm:detach():diagonal(0, -2, -1)
  local k = d.shape[d:dim()]
  if k > 0 and A:numel() > 0 then
    local zero = d:eq(0):to("int64")
    local idx = core.arange(1, k + 1, { dtype = "int64", device = A.device })
    -- smallest index where zero: k + 1 - max over (zero * (k + 1 - idx))
    local first = (k + 1) - (zero * (k + 1 - idx)):amax(-1)
    info = core.where(zero:sum(-1):gt(0), first, info)
  end
  return LUm, piv, info
end

--- The cross product of 3-vectors along dim (-1 by default), as
-- torch.linalg.cross (ember.cross picks the first dim of size 3).
-- @tparam Tensor a
-- @tparam Tensor b
-- @tparam[opt] number dim -1
-- @treturn Tensor
-- @usage print(ember.linalg.cross(ember.tensor({1, 0, 0}), ember.tensor({0, 1, 0})))   --> tensor([0.0000, 0.0000, 1.0000], shape=[3], dtype=float32, device=cpu)
function M.cross(a, b, dim)
  if type(dim) == "table" then dim = options("cross", dim, { dim = "number" }).dim end
  if core.is_tensor(a) and core.is_tensor(b) and a:dim() ~= b:dim() then
    fail("cross", "inputs must have the same number of dimensions (as torch's), got %s and %s", shape_str(a), shape_str(b))
  end
  return core.cross(a, b, dim or -1)
end

--- The dot product of vectors along dim (-1 by default): sum(x * y, dim)
-- with broadcasting (torch.linalg.vecdot, real tensors).
-- @tparam Tensor x
-- @tparam Tensor y
-- @tparam[opt] number|table dim -1
-- @treturn Tensor
-- @usage print(ember.linalg.vecdot(ember.tensor({1, 2, 3}), ember.tensor({4, 5, 6})))   --> tensor(32.0000, shape=[], dtype=float32, device=cpu)
function M.vecdot(x, y, dim)
  if type(dim) == "table" then dim = options("vecdot", dim, { dim = "number" }).dim end
  return (x * y):sum(dim or -1)
end

--- The diagonals of the matrices of A (torch.linalg.diagonal): offset 0,
-- dim1 -2 and dim2 -1 by default, positional or `{offset =, dim1 =, dim2 =}`.
-- @tparam Tensor A
-- @tparam[opt] number|table offset 0
-- @tparam[opt] number dim1 -2
-- @tparam[opt] number dim2 -1
-- @treturn Tensor
-- @usage print(ember.linalg.diagonal(ember.tensor({{1, 2}, {3, 4}})))   --> tensor([1.0000, 4.0000], shape=[2], dtype=float32, device=cpu)
function M.diagonal(A, offset, dim1, dim2)
  if type(offset) == "table" then
    local o = options("diagonal", offset, { offset = "number", dim1 = "number", dim2 = "number" })
    offset, dim1, dim2 = o.offset, o.dim1, o.dim2
  end
  return A:diagonal(offset or 0, dim1 or -2, dim2 or -1)
end

-- Under ember.autocast these run in float32, as torch's CPU autocast runs
-- its linear algebra (its fp32 list: inv, solve, cholesky, qr, svd, eigh,
-- lstsq, ...): bfloat16 tensor arguments are cast up (differentiably) and
-- the function runs as outside autocast, so the products inside lstsq,
-- pinv, cond and matrix_exp stay float32 too (they made bfloat16 there, and
-- lstsq then refused its own product). One check when autocast is off.
local autocast_on = core._autocast_state
local function in_float32(f)
  return function(...)
    if not autocast_on() then return f(...) end
    local n, a = select("#", ...), { ... }
    for i = 1, n do
      local v = a[i]
      if core.is_tensor(v) and v.dtype == "bfloat16" then a[i] = v:to("float32") end
    end
    return require("ember.autocast")._outside(f, table.unpack(a, 1, n))
  end
end
local FLOAT32_UNDER_AUTOCAST = { "cholesky", "cholesky_ex", "solve", "solve_triangular", "inv", "inv_ex", "det",
  "slogdet", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "qr", "eigh", "eigvalsh", "svd", "svdvals", "lstsq",
  "matrix_rank", "pinv", "matrix_exp", "cond", "solve_ex" }
for _, k in ipairs(FLOAT32_UNDER_AUTOCAST) do M[k] = in_float32(assert(M[k], k)) end

-- Errors (ours and the C op's) move to the caller's line.
for k, f in pairs(M) do
  if type(f) == "function" then M[k] = guard(f) end
end

-- torch's top-level names (init.lua puts them on ember): lua/ember/_linalg_top.lua;
-- all but matrix_power (products, as torch's) in float32 under autocast, as above
M._top = require("ember._linalg_top")(M)
for k, f in pairs(M._top) do
  if k ~= "matrix_power" then M._top[k] = in_float32(f) end
end

return M
