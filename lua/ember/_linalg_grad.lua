-- ember/_linalg_grad.lua: the differentiable cores of ember.linalg
-- (lua/ember/linalg.lua, which checks the arguments and documents them):
-- each an ember.Function over the backend's LAPACK kernel (ember._linalg)
-- with its backward written in ember ops, by the standard formulas
-- (torch's cholesky_backward after Murray 2016, -A^-T G A^-T for the
-- inverse, G det(A) A^-T, the solves, QR reduced (m >= n, and m < n by
-- splitting A), eigh with F = 1 / (lambda_j - lambda_i), SVD as torch's
-- svd_backward, LU square as torch's). An ember.Function has one output: several travel packed
-- along the last dim (pack / unpack_). Also the small helpers both files use.
local core = require "ember.core"

local G = {}

local function mT(X) return X:transpose(-2, -1) end
local function rows(A) return A.shape[A:dim() - 1] end
local function cols(A) return A.shape[A:dim()] end
local function C(...) return core._linalg(...) end

-- The batch shape of A (its dims but the last two) followed by the given sizes.
local function batch_shape(A, ...)
  local s = {}
  for i = 1, A:dim() - 2 do s[i] = A.shape[i] end
  for _, v in ipairs { ... } do s[#s + 1] = v end
  return s
end

-- Several outputs of one Function travel packed along the last dim (an
-- ember.Function has one output): each [..., a, b] flattened to [..., a*b].
local function pack(...)
  local flat = {}
  for i, t in ipairs { ... } do flat[i] = t:reshape(batch_shape(t, rows(t) * cols(t))) end
  return core.cat(flat, -1)
end

-- The inverse of pack: sizes is a list of {rows, cols} (cols nil: a vector).
local function unpack_(P, sizes, like)
  local out, at = {}, 1
  for i, sz in ipairs(sizes) do
    local n = sz[1] * (sz[2] or 1)
    local part = P:narrow(-1, at, n)
    local s = {}
    for d = 1, P:dim() - 1 do s[d] = P.shape[d] end
    s[#s + 1] = sz[1]
    if sz[2] then s[#s + 1] = sz[2] end
    out[i] = part:reshape(s)
    at = at + n
  end
  return table.unpack(out)
end

-- Triangular solves of the backward formulas (no gradient of their own).
local function trsolve(A, B, upper, unit) return C("trsolve", A, B, { upper = upper, unitriangular = unit }) end
-- X A = B for triangular A: A^T X^T = B^T.
local function trsolve_right(A, B, upper, unit) return mT(trsolve(mT(A), mT(B), not upper, unit)) end

local function eye_like(A, n)
  return core.eye(n, { dtype = A.dtype, device = A.device })
end

-- sym(X) as the diagonal with the other half added: tril(X) + tril(X, -1)^T.
local function copyltu(X) return X:tril() + mT(X:tril(-1)) end

local CHOLESKY = core.Function {
  name = "linalg_cholesky",
  forward = function(ctx, A)
    local L = C("cholesky", A, { name = "linalg.cholesky" })
    ctx:save_for_backward(L)
    return L
  end,
  -- torch's cholesky_backward (Murray 2016): gA = L^-T Phi(L^T gL) L^-1,
  -- Phi taking the lower triangle with half the diagonal, symmetrized
  backward = function(ctx, gL)
    local L = ctx.saved[1]
    local g = (mT(L):matmul(gL)):tril()
    g = 0.5 * (g + mT(g:tril(-1)))
    g = trsolve(mT(L), g, true)
    return trsolve_right(L, g, false)
  end,
}

local SOLVE = core.Function {
  name = "linalg_solve",
  forward = function(ctx, A, B, name)
    local X = C("solve", A, B, { name = name })
    ctx:save_for_backward(A, X)
    ctx.name = name
    return X
  end,
  -- gB = A^-T gX, gA = -gB X^T
  backward = function(ctx, gX)
    local A, X = ctx.saved[1], ctx.saved[2]
    local gB = C("solve", mT(A), gX, { name = ctx.name .. " backward" })
    return -gB:matmul(mT(X)), gB
  end,
}

local TRSOLVE = core.Function {
  name = "linalg_solve_triangular",
  forward = function(ctx, A, B, upper, unit)
    local X = C("trsolve", A, B, { upper = upper, unitriangular = unit, name = "linalg.solve_triangular" })
    ctx:save_for_backward(A, X)
    ctx.upper, ctx.unit = upper, unit
    return X
  end,
  -- gB = A^-T gX, gA = -gB X^T on A's triangle (off the diagonal when unit)
  backward = function(ctx, gX)
    local A, X = ctx.saved[1], ctx.saved[2]
    local gB = trsolve(mT(A), gX, not ctx.upper, ctx.unit)
    local gA = -gB:matmul(mT(X))
    if ctx.upper then gA = gA:triu(ctx.unit and 1 or 0) else gA = gA:tril(ctx.unit and -1 or 0) end
    return gA, gB
  end,
}

local INV = core.Function {
  name = "linalg_inv",
  forward = function(ctx, A, name)
    local I = core.zeros_like(A) + eye_like(A, rows(A))
    local Y = C("solve", A, I, { name = name })
    ctx:save_for_backward(Y)
    return Y
  end,
  -- gA = -A^-T gY A^-T
  backward = function(ctx, gY)
    local Y = ctx.saved[1]
    return -mT(Y):matmul(gY):matmul(mT(Y))
  end,
}

-- LU of A (no error on a singular one): the diagonal of U, and the
-- permutation's sign (+-1, A's dtype) of A's batch shape.
local function lu_parts(A)
  local LU, piv = C("lu", A, { name = "linalg.det", ex = true })
  local n = rows(A)
  local moved = piv:ne(core.arange(1, n + 1, { dtype = "int64", device = A.device })):to(A.dtype):sum(-1)
  local sign = 1 - 2 * (moved - 2 * (moved / 2):floor())
  return LU:diagonal(0, -2, -1), sign
end

local DET = core.Function {
  name = "linalg_det",
  forward = function(ctx, A)
    local d, sign = lu_parts(A)
    local det = d:prod(-1) * sign
    ctx:save_for_backward(A, det)
    return det
  end,
  -- gA = g det(A) A^-T; where some matrix of the batch is singular, the
  -- adjugate's transpose from the SVD for all: det(U) det(V) U diag(p) V^T
  -- with p_i the product of the singular values but s_i (continuous in A)
  backward = function(ctx, g)
    local A, det = ctx.saved[1], ctx.saved[2]
    local n = rows(A)
    local Y, singular = C("solve", A, core.zeros_like(A) + eye_like(A, n), { name = "linalg.det backward", ex = true })
    if singular == 0 then return (g * det):unsqueeze(-1):unsqueeze(-1) * mT(Y) end
    local U, S, Vh = C("svd", A, { name = "linalg.det backward" })
    local du, su = lu_parts(U)
    local dv, sv = lu_parts(Vh)
    local I = eye_like(A, n)
    local p = (S:unsqueeze(-2) * (1 - I) + I):prod(-1)
    local scale = g * du:prod(-1) * su * dv:prod(-1) * sv
    return scale:unsqueeze(-1):unsqueeze(-1) * (U * p:unsqueeze(-2)):matmul(Vh)
  end,
}

local LOGABSDET = core.Function {
  name = "linalg_slogdet",
  forward = function(ctx, A)
    local d = lu_parts(A)
    ctx:save_for_backward(A)
    return d:abs():log():sum(-1)
  end,
  -- g A^-T
  backward = function(ctx, g)
    local A = ctx.saved[1]
    local Y = C("solve", A, core.zeros_like(A) + eye_like(A, rows(A)),
      { name = "linalg.slogdet backward (log|det A| has no finite gradient at a singular A)" })
    return g:unsqueeze(-1):unsqueeze(-1) * mT(Y)
  end,
}

-- torch's reduced QR backward for m >= n (R square, invertible):
-- gA = (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q
local function qr_backward_tall(Q, R, gQ, gR)
  local Mx = R:matmul(mT(gR)) - mT(gQ):matmul(Q)
  local b = gQ + Q:matmul(copyltu(Mx))
  return trsolve_right(mT(R), b, false)
end

local QR = core.Function {
  name = "linalg_qr",
  forward = function(ctx, A, full)
    local Q, R = C("qr", A, { name = "linalg.qr", full = full })
    ctx:save_for_backward(Q, R)
    ctx.m, ctx.n, ctx.full = rows(A), cols(A), full
    return pack(Q, R)
  end,
  backward = function(ctx, gP)
    local Q, R = ctx.saved[1], ctx.saved[2]
    local m, n = ctx.m, ctx.n
    if ctx.full and m > n then
      error("ember.linalg.qr: The QR decomposition is not differentiable when mode='complete' and nrows > ncols.", 0)
    end
    local k = math.min(m, n)
    local gQ, gR = unpack_(gP, { { m, k }, { k, n } })
    if m >= n then return qr_backward_tall(Q, R, gQ, gR) end
    -- wide: A = [X | Y], X = Q U square, Y = Q V; Y's part of gQ goes to X's
    local U, V = R:narrow(-1, 1, m), R:narrow(-1, m + 1, n - m)
    local gU, gV = gR:narrow(-1, 1, m), gR:narrow(-1, m + 1, n - m)
    local Y = Q:matmul(V)
    local gX = qr_backward_tall(Q, U, gQ + Y:matmul(mT(gV)), gU)
    return core.cat({ gX, Q:matmul(gV) }, -1)
  end,
}

local EIGH = core.Function {
  name = "linalg_eigh",
  forward = function(ctx, A)
    local w, V = C("eigh", A, { name = "linalg.eigh" })
    ctx:save_for_backward(w, V)
    return pack(w:unsqueeze(-1), V)
  end,
  -- gA = V (skew(V^T gV) / E + diag(gw)) V^T, E_ij = w_j - w_i (1 on the diagonal)
  backward = function(ctx, gP)
    local w, V = ctx.saved[1], ctx.saved[2]
    local n = w.shape[w:dim()]
    local gw, gV = unpack_(gP, { { n }, { n, n } })
    local K = mT(V):matmul(gV)
    K = 0.5 * (K - mT(K))
    local E = w:unsqueeze(-2) - w:unsqueeze(-1)
    E = E + eye_like(E, n)
    local inner = K / E + core.diag_embed(gw)
    return V:matmul(inner):matmul(mT(V))
  end,
}

local EIGVALSH = core.Function {
  name = "linalg_eigvalsh",
  forward = function(ctx, A)
    local w, V = C("eigh", A, { name = "linalg.eigvalsh" })
    ctx:save_for_backward(V)
    return w
  end,
  -- gA = V diag(gw) V^T
  backward = function(ctx, gw)
    local V = ctx.saved[1]
    return (V * gw:unsqueeze(-2)):matmul(mT(V))
  end,
}

-- torch's svd_backward (reduced, real): gU [.., m, k], gS [.., k], gVh [.., k, n].
local function svd_backward(U, S, Vh, gU, gS, gVh)
  local m, n, k = rows(U), cols(Vh), S.shape[S:dim()]
  local V, gV = mT(Vh), mT(gVh)
  local UhgU = mT(U):matmul(gU)
  UhgU = UhgU - mT(UhgU)
  local VhgV = mT(V):matmul(gV)
  VhgV = VhgV - mT(VhgV)
  local S2 = S * S
  local E = S2:unsqueeze(-2) - S2:unsqueeze(-1)
  E = E + eye_like(E, k)
  local gA = (UhgU * S:unsqueeze(-2) + S:unsqueeze(-1) * VhgV) / E + core.diag_embed(gS)
  if m > n then
    gA = U:matmul(gA)
    local gUSinv = gU / S:unsqueeze(-2)
    gA = gA + gUSinv - U:matmul(mT(U):matmul(gUSinv))
    return gA:matmul(Vh)
  elseif m < n then
    gA = gA:matmul(Vh)
    local gVhSinv = gVh / S:unsqueeze(-1)
    gA = gA + gVhSinv - gVhSinv:matmul(V):matmul(Vh)
    return U:matmul(gA)
  end
  return U:matmul(gA):matmul(Vh)
end

local SVD = core.Function {
  name = "linalg_svd",
  forward = function(ctx, A, full)
    local U, S, Vh = C("svd", A, { name = "linalg.svd", full = full })
    ctx:save_for_backward(U, S, Vh)
    ctx.m, ctx.n, ctx.full = rows(A), cols(A), full
    return pack(U, S:unsqueeze(-1), Vh)
  end,
  backward = function(ctx, gP)
    local U, S, Vh = ctx.saved[1], ctx.saved[2], ctx.saved[3]
    local m, n = ctx.m, ctx.n
    local k = math.min(m, n)
    local uc, vr = ctx.full and m or k, ctx.full and n or k
    local gU, gS, gVh = unpack_(gP, { { m, uc }, { k }, { vr, n } })
    if ctx.full then -- the columns past k are not determined: their gradient is left out, as torch's
      U, gU = U:narrow(-1, 1, k), gU:narrow(-1, 1, k)
      Vh, gVh = Vh:narrow(-2, 1, k), gVh:narrow(-2, 1, k)
    end
    return svd_backward(U, S, Vh, gU, gS, gVh)
  end,
}

local SVDVALS = core.Function {
  name = "linalg_svdvals",
  forward = function(ctx, A)
    local U, S, Vh = C("svd", A, { name = "linalg.svdvals" })
    ctx:save_for_backward(U, Vh)
    return S
  end,
  -- gA = U diag(gS) Vh
  backward = function(ctx, gS)
    local U, Vh = ctx.saved[1], ctx.saved[2]
    return (U * gS:unsqueeze(-2)):matmul(Vh)
  end,
}

-- The permutation matrices P (A = P L U) of LAPACK's 1-based pivots
-- [..., k] of n-row matrices: the row swaps replayed on the host.
local function perm_matrix(piv, n, dtype, device)
  local k = piv.shape[piv:dim()]
  local shape = {}
  for i = 1, piv:dim() - 1 do shape[i] = piv.shape[i] end
  local nb = 1
  for i = 1, piv:dim() - 1 do nb = nb * piv.shape[i] end
  local rowsl = nb > 0 and piv:reshape(nb, k):tolist() or {}
  local perms = {}
  for b, row in ipairs(rowsl) do
    local perm = {}
    for i = 1, n do perm[i] = i end
    for i = 1, k do
      local j = row[i]
      perm[i], perm[j] = perm[j], perm[i]
    end
    perms[b] = perm
  end
  shape[#shape + 1], shape[#shape + 2] = n, n
  if nb == 0 or n == 0 then return core.zeros(shape, { dtype = dtype, device = device }) end
  local Pt = core.one_hot(core.tensor(perms, { dtype = "int64", device = device }), n):to(dtype) -- rows e_perm[i]: P^T
  return mT(Pt):reshape(shape)
end

local LU = core.Function {
  name = "linalg_lu",
  forward = function(ctx, A, name)
    local LUm, piv = C("lu", A, { name = name, ex = true }) -- a singular A factors too
    local m, n = rows(A), cols(A)
    local k = math.min(m, n)
    local Lm = LUm:narrow(-1, 1, k):tril(-1) + core.eye(m, k, { dtype = A.dtype, device = A.device })
    local Um = LUm:narrow(-2, 1, k):triu()
    ctx:save_for_backward(Lm, Um)
    ctx.piv, ctx.m, ctx.n, ctx.name = piv, m, n, name
    return pack(Lm, Um)
  end,
  -- torch's square LU backward: gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T
  backward = function(ctx, gP)
    local Lm, Um = ctx.saved[1], ctx.saved[2]
    local m, n = ctx.m, ctx.n
    if m ~= n then
      error(("ember.%s: the gradient is implemented for square matrices only, got %d by %d"):format(ctx.name, m, n), 0)
    end
    local gL, gU = unpack_(gP, { { n, n }, { n, n } })
    local gR = mT(Lm):matmul(gL):tril(-1) + gU:matmul(mT(Um)):triu()
    local gA = trsolve(mT(Lm), gR, true, true)
    gA = trsolve_right(mT(Um), gA, false)
    return perm_matrix(ctx.piv, n, gA.dtype, gA.device):matmul(gA)
  end,
}

G.mT, G.rows, G.cols, G.C, G.batch_shape, G.unpack_, G.eye_like, G.lu_parts =
  mT, rows, cols, C, batch_shape, unpack_, eye_like, lu_parts
G.CHOLESKY, G.SOLVE, G.TRSOLVE, G.INV, G.DET, G.LOGABSDET = CHOLESKY, SOLVE, TRSOLVE, INV, DET, LOGABSDET
G.QR, G.EIGH, G.EIGVALSH, G.SVD, G.SVDVALS = QR, EIGH, EIGVALSH, SVD, SVDVALS
G.LU, G.perm_matrix = LU, perm_matrix

return G
