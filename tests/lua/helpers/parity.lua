-- tests/lua/helpers/parity.lua -- comparing ember against PyTorch's
-- committed fixtures (tests/gen_*_fixtures.py write them): a fixture tensor
-- {shape =, data =, dtype =} as an ember tensor, the relative error, the
-- shape-and-tolerance check, a case by name, and a module against a case
-- (in float64, and in float32 against the same float64 numbers).
--
--   local parity = require "tests.lua.helpers.parity"   -- from the source root
--   local T, check = parity.T, parity.check
--   check("out", m(T(c.inputs.x)), T(c.out), 1e-12)
local ember = require "ember"
local assert = require "luassert" -- busted's assert lives in the spec's environment, not here

local M = {}

--- The shape of a nested-table tensor (as the op fixtures write them; a number is 0-d).
function M.nested_shape(v)
  local shape = {}
  while type(v) == "table" do
    shape[#shape + 1] = #v
    v = v[1]
  end
  return shape
end

--- The numbers of a nested-table tensor in row-major order.
function M.nested_values(v, out)
  out = out or {}
  if type(v) ~= "table" then
    out[#out + 1] = v
  else
    for _, e in ipairs(v) do M.nested_values(e, out) end
  end
  return out
end

--- A tensor's values in row-major order (a 0-d tensor's one value too).
function M.values(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):totable()
end

--- The fixture tensor `spec` in its own dtype, else `dtype`, else float64.
function M.T(spec, dtype)
  return ember.tensor(spec.data, { dtype = spec.dtype or dtype or "float64" }):view(spec.shape)
end

--- max |a - b| / max |b|, in float64.
function M.max_rel(a, b)
  local ad, bd = a:double(), b:double()
  return (ad - bd):abs():max():item() / math.max(bd:abs():max():item(), 1e-300)
end

--- Fails unless `a` and `b` (both given) have one shape and the same
-- values, bit for bit (two runs that must not differ at all).
function M.bitwise_equal(a, b, what)
  assert(a ~= nil and b ~= nil, what .. ": missing")
  assert.are.same(a.shape, b.shape, what .. " shape")
  local d = (a:double() - b:double()):abs():max():item()
  assert(d == 0, ("%s: differs by %.3g (must be bitwise equal)"):format(what, d))
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

--- A module against its fixture case `c` (gen_nn_fixtures.py's cases):
-- loads c.state (plus opts.extra, tensors by name) into m, runs
-- opts.forward(m, inputs) (default m(inputs.x)) on c.inputs (float64 ones
-- requiring grad), backpropagates sum(out * c.R), and checks the output,
-- every input gradient and every parameter gradient within opts.tol
-- (default 1e-12), and that every parameter was compared. Gradients named
-- as ember named MultiHeadAttention's tensors before it moved to Lua
-- (w_q, ...) are mapped as load_state_dict maps them.
function M.module(m, c, opts)
  opts = opts or {}
  local T, check, tol = M.T, M.check, opts.tol or 1e-12
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v) end
  for k, v in pairs(opts.extra or {}) do sd[k] = v end
  m:load_state_dict(sd)
  local inputs = {}
  for k, v in pairs(c.inputs) do
    inputs[k] = T(v)
    if inputs[k].dtype == "float64" then inputs[k]:requires_grad_(true) end
  end
  local out = (opts.forward or function(mod, i) return mod(i.x) end)(m, inputs)
  check(c.name .. " output", out, T(c.out), tol)
  ;(out * T(c.R)):sum():backward()
  for k, g in pairs(c.grad_inputs) do check(c.name .. " grad " .. k, inputs[k].grad, T(g), tol) end
  local params = m:named_parameters()
  local grads = m:upgrade_state_dict(c.grads)
  local n, scale = 0, 0
  for _, g in pairs(grads) do scale = math.max(scale, T(g):abs():max():item()) end
  for k, g in pairs(grads) do
    n = n + 1
    assert(params[k] ~= nil, c.name .. ": no parameter " .. k)
    if k:match("k_proj%.bias$") then
      -- zero in exact arithmetic (a key bias shifts every score of a row
      -- equally, which softmax ignores): both sides are rounding noise, so
      -- measure against the scale of the other gradients
      local e = (params[k].grad - T(g)):abs():max():item() / scale
      assert(e <= tol, ("%s grad %s: error %.3g of the gradient scale"):format(c.name, k, e))
    else
      check(c.name .. " grad " .. k, params[k].grad, T(g), tol)
    end
  end
  local count = 0
  for _ in pairs(params) do count = count + 1 end
  assert.are.equal(n, count, c.name .. ": parameter count")
end

--- The buffers to load with a case's state: the case's starting ones
-- (c.buffers_in), else the module's own, in `dtype` (int64 ones stay).
function M.start_buffers(m, c, dtype)
  local out = {}
  for k, v in pairs(c.buffers_in or {}) do out[k] = M.T(v) end
  local params = m:named_parameters()
  for k, v in pairs(m:state_dict()) do if out[k] == nil and not params[k] then out[k] = v:clone() end end
  for k, v in pairs(out) do if v.dtype ~= "int64" then out[k] = v:to(dtype) end end
  return out
end

--- A float32 module against its float64 fixture case `c`: loads opts.extra
-- (tensors by name) and c.state rounded to float32, runs opts.forward(m,
-- inputs) (default m(inputs.x)) on c.inputs (float64 ones rounded to
-- float32 and requiring grad), backpropagates sum(out * c.R), and checks
-- that the output is float32 and it, the input gradients and the parameter
-- gradients (named as M.module maps them; a key projection's bias, zero in
-- exact arithmetic, left out) are within opts.tol of PyTorch's float64 numbers.
function M.module_float32(m, c, opts)
  local T, check, tol = M.T, M.check, opts.tol
  local sd = {}
  for k, v in pairs(opts.extra or {}) do sd[k] = v end
  for k, v in pairs(c.state) do sd[k] = T(v):float() end
  m:load_state_dict(sd)
  local inputs = {}
  for k, v in pairs(c.inputs) do
    inputs[k] = T(v)
    if inputs[k].dtype == "float64" then inputs[k] = inputs[k]:float():requires_grad_(true) end
  end
  local out = (opts.forward or function(mod, i) return mod(i.x) end)(m, inputs)
  assert.are.equal("float32", out.dtype)
  check(c.name .. " float32 output", out, T(c.out), tol)
  ;(out * T(c.R):float()):sum():backward()
  for k, g in pairs(c.grad_inputs) do check(c.name .. " float32 grad " .. k, inputs[k].grad, T(g), tol) end
  local params = m:named_parameters()
  for k, g in pairs(m:upgrade_state_dict(c.grads)) do
    if not k:match("k_proj%.bias$") then check(c.name .. " float32 grad " .. k, params[k].grad, T(g), tol) end
  end
end

--- The keys of t, sorted (a state dict's names, to compare as a list).
function M.sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

--- A CrossEntropyLoss fixture case (cross_entropy in nn_more.lua,
-- soft_cross_entropy in nn_probe.lua): PyTorch's [B, C(, L)] logits, the
-- target made by `target(c)` (permuted with the logits for a 3-d case,
-- when permute_target), the module from the case's options; checks the
-- loss and the logits' gradient of sum(loss * R) to 1e-12.
function M.cross_entropy_case(nn, c, i, target, permute_target)
  local logits = M.T(c.logits):requires_grad_()
  local x, t = logits, target(c)
  if c.three_d then -- PyTorch's [B, C, L] -> ember's [B, L, C]
    x = logits:permute(1, 3, 2)
    if permute_target then t = t:permute(1, 3, 2) end
  end
  local m = nn.CrossEntropyLoss { weight = c.weight and M.T(c.weight) or nil, ignore_index = c.ignore_index,
    label_smoothing = c.label_smoothing, reduction = c.reduction }
  local loss = m(x, t)
  local want = M.T(c.loss)
  assert.are.same(want.shape, loss.shape, "case " .. i)
  assert.is_true((loss - want):abs():max():item() < 1e-12, "case " .. i .. " loss")
  ;(loss * M.T(c.R)):sum():backward()
  assert.is_true((logits.grad - M.T(c.grad)):abs():max():item() < 1e-12, "case " .. i .. " grad")
end

--- The message of fn()'s error, or nil when it ran (for asserting on a
-- message's parts, where raises_here's one substring is not enough).
function M.error_of(fn)
  local ok, e = pcall(fn)
  return not ok and tostring(e) or nil
end

--- The message of fn()'s error; fails when fn ran.
function M.must_fail(fn)
  local ok, err = pcall(fn)
  assert.is_false(ok, "expected an error")
  return tostring(err)
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
