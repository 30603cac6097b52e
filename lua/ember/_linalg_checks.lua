-- ember/_linalg_checks.lua (internal): the argument rules of ember.linalg
-- (lua/ember/linalg.lua, which documents the functions): a matrix (batch)
-- argument, an options table with only known names, batch dims broadcast,
-- torch's vector-or-matrix B, UPLO, the norms' positional-or-table
-- arguments and their dims. Errors are "ember.linalg.<op>: ..." raised
-- without a position; linalg.lua's wrappers move them to the caller's line.
local core = require "ember.core"
local errors = require "ember._errors"
local G = require "ember._linalg_grad"

local M = {}
local shape_str = errors.shape_str
local mT, rows, cols = G.mT, G.rows, G.cols

local function fail(op, fmt, ...)
  error(("ember.linalg.%s: " .. fmt):format(op, ...), 0)
end

-- A checked matrix (batch) argument: a float32/float64 tensor of >= 2 dims,
-- square when asked. Others are refused naming the function.
local function check(op, A, square, what)
  what = what or "A"
  if not core.is_tensor(A) then fail(op, "%s must be a tensor, got %s", what, type(A)) end
  if A.dtype ~= "float32" and A.dtype ~= "float64" then
    fail(op, "expected %s to be a float32 or float64 tensor, got %s (convert with :double() or :float())", what, A.dtype)
  end
  if A:dim() < 2 then fail(op, "%s must have at least 2 dimensions, got %s", what, shape_str(A)) end
  if square and A.shape[A:dim()] ~= A.shape[A:dim() - 1] then
    fail(op, "%s must be batches of square matrices, but they are %d by %d matrices", what, A.shape[A:dim() - 1],
      A.shape[A:dim()])
  end
  return A
end

-- An option table with only the given names (true: a boolean).
local function options(op, opts, names)
  if opts == nil then return {} end
  if type(opts) ~= "table" or core.is_tensor(opts) then fail(op, "expected an options table, got %s", type(opts)) end
  for k, v in pairs(opts) do
    local want = names[k]
    if want == nil then
      local list = {}
      for n in pairs(names) do list[#list + 1] = n end
      table.sort(list)
      fail(op, "unknown option '%s' (expected %s)", tostring(k), table.concat(list, ", "))
    end
    if want == "boolean" and type(v) ~= "boolean" then fail(op, "%s must be a boolean, got %s", k, type(v)) end
    if want == "number" and type(v) ~= "number" then fail(op, "%s must be a number, got %s", k, type(v)) end
  end
  return opts
end

-- A and B with their batch dims broadcast (expand: differentiable).
local function broadcast_batch(op, A, B)
  local na, nb = A:dim() - 2, B:dim() - 2
  local ba, bb = {}, {}
  for i = 1, na do ba[i] = A.shape[i] end
  for i = 1, nb do bb[i] = B.shape[i] end
  local ok, bs = pcall(core.broadcast_shapes, ba, bb)
  if not ok then fail(op, "the batch dims of A %s and B %s cannot be broadcast", shape_str(A), shape_str(B)) end
  local sa, sb = {}, {}
  for i = 1, #bs do sa[i], sb[i] = bs[i], bs[i] end
  sa[#sa + 1], sa[#sa + 2] = rows(A), cols(A)
  sb[#sb + 1], sb[#sb + 2] = rows(B), cols(B)
  return A:expand(sa), B:expand(sb)
end

-- torch's rule: B is a (batch of) vector(s) when it is 1-d, or has one dim
-- less than A and A's batch dims.
local function b_is_vector(A, B)
  if B:dim() == 1 then return true end
  if B:dim() ~= A:dim() - 1 then return false end
  for i = 1, B:dim() - 1 do
    if B.shape[i] ~= A.shape[i] then return false end
  end
  return true
end

-- A's triangle named by UPLO as the lower one the kernel reads.
local function uplo_input(op, A, UPLO)
  if type(UPLO) == "table" then UPLO = options(op, UPLO, { UPLO = "string" }).UPLO end
  UPLO = UPLO or "L"
  if UPLO ~= "L" and UPLO ~= "U" then fail(op, "UPLO must be 'L' or 'U', got %s", tostring(UPLO)) end
  if UPLO == "U" then return mT(A) end
  return A
end
-- ord, dim, keepdim from torch's positional arguments or one option table.
local function norm_args(op, ord, dim, keepdim, extra)
  if type(ord) == "table" and not core.is_tensor(ord) then
    if dim ~= nil or keepdim ~= nil then fail(op, "expected ({ord =, dim =, keepdim =}) alone, got more arguments") end
    local names = { ord = true, dim = true, keepdim = true, dtype = true }
    for k, v in pairs(extra or {}) do names[k] = v end
    for k in pairs(ord) do
      if not names[k] then fail(op, "unknown option '%s' (expected ord, dim, keepdim, dtype)", tostring(k)) end
    end
    local o = ord
    return o.ord, o.dim, o.keepdim, o.dtype
  end
  return ord, dim, keepdim
end

local function floating(op, x, dtype)
  if not core.is_tensor(x) then fail(op, "argument 1 must be a tensor, got %s", type(x)) end
  if dtype then x = x:to(dtype) end
  if x.dtype ~= "float32" and x.dtype ~= "float64" and x.dtype ~= "bfloat16" then
    fail(op, "expected a floating point tensor, got %s", x.dtype)
  end
  return x
end

-- A's dims d1, d2 (1-based, negative from the end) moved to the end.
local function matrix_dims(op, A, dim)
  dim = dim or { -2, -1 }
  if type(dim) ~= "table" or #dim ~= 2 then
    fail(op, "dim must be a table of 2 dims, got %s", type(dim) == "table" and ("a table of %d"):format(#dim) or tostring(dim))
  end
  local nd = A:dim()
  if nd < 2 then fail(op, "A must have at least 2 dimensions, got %s", shape_str(A)) end
  local d = {}
  for i = 1, 2 do
    local v = dim[i]
    if math.type(v) ~= "integer" or v == 0 or v < -nd or v > nd then
      fail(op, "dim %s is out of range for a tensor with %d dims (1-based)", tostring(v), nd)
    end
    d[i] = v < 0 and nd + 1 + v or v
  end
  if d[1] == d[2] then fail(op, "dims must be different, got %d and %d", dim[1], dim[2]) end
  return d
end

M.fail, M.check, M.options = fail, check, options
M.broadcast_batch, M.b_is_vector, M.uplo_input = broadcast_batch, b_is_vector, uplo_input
M.norm_args, M.floating, M.matrix_dims = norm_args, floating, matrix_dims

return M
