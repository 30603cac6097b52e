-- ember/_linalg_top.lua (internal): torch's top-level linear-algebra names
-- (ember.inverse, det, logdet, slogdet, cholesky, qr, svd, matrix_exp,
-- matrix_power, pinverse, cholesky_solve, cholesky_inverse; init.lua puts
-- them on ember and on the tensor metatable) with torch's positional
-- arguments (cholesky(A, upper), qr(A, some), svd(A, some, compute_uv)
-- returning V), on ember.linalg's functions. `require(this)(linalg)` builds
-- the table (linalg.lua's M._top).
local core = require "ember.core"
local errors = require "ember._errors"
local G = require "ember._linalg_grad"
local args = require "ember._linalg_checks"

local guard = errors.wrap
local fail, check = args.fail, args.check
local mT, rows, cols, batch_shape, eye_like = G.mT, G.rows, G.cols, G.batch_shape, G.eye_like

return function(M)
  return {
    matrix_exp = function(A) return M.matrix_exp(A) end,
    matrix_power = function(A, n) return M.matrix_power(A, n) end,
    pinverse = guard(function(A, rcond)
      if rcond ~= nil and type(rcond) ~= "number" then
        fail("pinverse", "rcond must be a number, got %s", type(rcond))
      end
      return M.pinv(A, { rtol = rcond or 1e-15 })
    end),
    -- A X = B for A = L L^T (or U^T U): two triangular solves
    cholesky_solve = guard(function(B, Lf, upper)
      if upper ~= nil and type(upper) ~= "boolean" then
        fail("cholesky_solve", "upper must be a boolean, got %s", type(upper))
      end
      if upper then Lf = mT(Lf) end
      local Y = M.solve_triangular(Lf, B, { upper = false })
      return M.solve_triangular(mT(Lf), Y, { upper = true })
    end),
    cholesky_inverse = guard(function(Lf, upper)
      if upper ~= nil and type(upper) ~= "boolean" then
        fail("cholesky_inverse", "upper must be a boolean, got %s", type(upper))
      end
      check("cholesky_inverse", Lf, true, "L")
      local I = core.zeros_like(Lf) + eye_like(Lf, rows(Lf))
      return M._top.cholesky_solve(I, Lf, upper)
    end),
    inverse = function(A) return M.inv(A) end,
    det = function(A) return M.det(A) end,
    slogdet = function(A) return M.slogdet(A) end,
    logdet = guard(function(A)
      local sign, logabs = M.slogdet(A)
      return logabs + sign:log()
    end),
    cholesky = guard(function(A, upper)
      if upper ~= nil and type(upper) ~= "boolean" then
        fail("cholesky", "upper must be a boolean, got %s", type(upper))
      end
      return M.cholesky(A, { upper = upper or false })
    end),
    qr = guard(function(A, some)
      if some ~= nil and type(some) ~= "boolean" then fail("qr", "some must be a boolean, got %s", type(some)) end
      return M.qr(A, some == false and "complete" or "reduced")
    end),
    svd = guard(function(A, some, compute_uv)
      if some ~= nil and type(some) ~= "boolean" then fail("svd", "some must be a boolean, got %s", type(some)) end
      if compute_uv == false then
        local S = M.svdvals(A)
        local m, n = rows(A), cols(A)
        local o = { dtype = A.dtype, device = A.device }
        local U = core.zeros(batch_shape(A, m, some == false and m or math.min(m, n)), o)
        local V = core.zeros(batch_shape(A, n, some == false and n or math.min(m, n)), o)
        return U, S, V
      end
      local U, S, Vh = M.svd(A, some == false)
      return U, S, mT(Vh)
    end),
  }
end
