-- tests/lua/helpers/parity.lua -- comparing ember against PyTorch's
-- committed fixtures (tests/gen_*_fixtures.py write them): a fixture tensor
-- {shape =, data =, dtype =} as an ember tensor, the relative error, the
-- shape-and-tolerance check, and a case by name.
--
--   local parity = require "tests.lua.helpers.parity"   -- from the source root
--   local T, check = parity.T, parity.check
--   check("out", m(T(c.inputs.x)), T(c.out), 1e-12)
local ember = require "ember"
local assert = require "luassert" -- busted's assert lives in the spec's environment, not here

local M = {}

--- The fixture tensor `spec` in its own dtype, else `dtype`, else float64.
function M.T(spec, dtype)
  return ember.tensor(spec.data, { dtype = spec.dtype or dtype or "float64" }):view(spec.shape)
end

--- max |a - b| / max |b|, in float64.
function M.max_rel(a, b)
  local ad, bd = a:double(), b:double()
  return (ad - bd):abs():max():item() / math.max(bd:abs():max():item(), 1e-300)
end

--- Fails unless `got` has `want`'s shape and is within relative error `tol`.
function M.check(what, got, want, tol)
  assert(got ~= nil, what .. " is nil")
  assert.are.same(want.shape, got.shape, what .. " shape")
  local e = M.max_rel(got, want)
  assert(e <= tol, ("%s: relative error %.3g > %.1g"):format(what, e, tol))
end

--- The case named `name` in fixtures.cases.
function M.case(fixtures, name)
  for _, c in ipairs(fixtures.cases) do if c.name == name then return c end end
  error("no fixture " .. name, 2)
end

--- The keys of t, sorted (a state dict's names, to compare as a list).
function M.sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

--- fn() must raise an error that points at the calling spec's line (the
-- user's line, not the library's) and contains `want`.
function M.raises_here(fn, want)
  local file = debug.getinfo(2, "S").short_src:match("[^/]+$")
  local ok, msg = pcall(fn)
  assert.is_false(ok, "expected an error containing: " .. want)
  assert(type(msg) == "string", "error is a " .. type(msg))
  assert(msg:find(file:gsub("%p", "%%%0") .. ":%d+: "), "the error does not point at the caller's line: " .. msg)
  assert(msg:find(want, 1, true), ("expected %q in the error: %s"):format(want, msg))
end

return M
