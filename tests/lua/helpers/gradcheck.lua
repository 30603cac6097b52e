-- tests/lua/helpers/gradcheck.lua -- a float64 central-difference gradient
-- checker for anything built from ember ops.
--
--   local gradcheck = require "tests.lua.helpers.gradcheck"   -- from the source root
--   gradcheck.check(function(a, b) return a:matmul(b):tanh() end, {a, b})
--
-- f(inputs...) returns a tensor or a list of tensors. The checker takes the
-- scalar L = sum_k sum(out_k * W_k) for fixed pseudo-random weights W_k (so
-- every output element matters, with a different weight) and compares, for
-- every element of every float64 input,
--   analytic:  d L / d x   from autograd (L:backward())
--   numeric:   (L(x + h) - L(x - h)) / 2h
-- and fails when |numeric - analytic| > atol + rtol * max(|numeric|, |analytic|).
-- It also fails when f gives a different L with grad mode off (the numeric
-- side runs under no_grad), or when a gradient has the wrong shape or dtype.
--
-- Inputs are used as they are, strides included, so a non-contiguous leaf
-- (e.g. base:transpose(1, 2):detach()) is checked as non-contiguous. A
-- float64 input that does not require grad yet is switched on with
-- requires_grad_() (it must be a leaf); non-tensor inputs and int64/bool
-- tensors are passed through unchecked. Inputs must not alias each other or
-- themselves (no expanded leaves): each element is perturbed in place,
-- under no_grad, through a 0-d view made with select().
-- After the check, each checked input's .grad holds the analytic gradient.
--
-- Options (third argument, all optional):
--   h     = 1e-6   step of the central difference
--   rtol  = 1e-6   relative tolerance
--   atol  = 1e-6   absolute tolerance (rounding in L is ~1e-16 |L| / h)
--   wrt   = {1, 3} positions of the inputs to check (default: every float64 tensor)
--   seed  = 1      seed of the weights W (a small LCG here; ember's RNG is left alone)
--   name  = "..."  prefix for the failure message
local ember = require "ember"

local gradcheck = {}

-- Deterministic weights in +-[0.5, 1.5): never near zero, so no output
-- element is ignored. A 31-bit LCG keeps the sequence identical on every
-- platform and leaves ember's global generator untouched.
local function weights_like(t, state)
  local n = t:numel()
  local w = {}
  for i = 1, n do
    state.x = (state.x * 1103515245 + 12345) % 2147483648
    local u = state.x / 2147483648
    local mag = 0.5 + (u * 2 % 1)
    w[i] = (u < 0.5) and -mag or mag
  end
  local opts = { dtype = "float64", device = t.device }
  if n == 0 then return ember.zeros(t.shape, opts) end
  return ember.tensor(w, opts):reshape(t.shape)
end

local function as_list(out)
  if type(out) == "userdata" then return { out } end
  assert(type(out) == "table", "gradcheck: f must return a tensor or a list of tensors, got " .. type(out))
  return out
end

-- Flat Lua list of a tensor's elements in row-major logical order.
local function flat(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):totable()
end

-- Row-major multi-indices (1-based) of a shape.
local function each_index(shape)
  local idx, n = {}, 1
  for d = 1, #shape do idx[d] = 1; n = n * shape[d] end
  local k = 0
  return function()
    k = k + 1
    if k > n then return nil end
    if k > 1 then
      local d = #shape
      while d >= 1 do
        idx[d] = idx[d] + 1
        if idx[d] <= shape[d] then break end
        idx[d] = 1
        d = d - 1
      end
    end
    return k, idx
  end
end

-- A 0-d view of element idx of t.
local function element(t, idx)
  local e = t
  for d = #idx, 1, -1 do e = e:select(d, idx[d]) end
  return e
end

local function fmt_index(idx)
  local parts = {}
  for i, v in ipairs(idx) do parts[i] = tostring(v) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

-- L = sum_k sum(out_k * W_k) as a tensor (0-d) and as a number.
local function objective(outs, ws)
  local total
  for k, o in ipairs(outs) do
    assert(o.dtype == "float64",
      ("gradcheck: output %d is %s; checks are float64 only"):format(k, o.dtype))
    local s = (o * ws[k]):sum()
    total = total and (total + s) or s
  end
  return total
end

-- Runs the check; returns ok (boolean), a report string and the largest
-- error seen (relative to the tolerance: <= 1 passes).
function gradcheck.run(f, inputs, opts)
  opts = opts or {}
  local h = opts.h or 1e-6
  local rtol = opts.rtol or 1e-6
  local atol = opts.atol or 1e-6
  local prefix = opts.name and (opts.name .. ": ") or ""
  local n_in = inputs.n or #inputs

  -- which inputs to check
  local check = {}
  if opts.wrt then
    for _, i in ipairs(opts.wrt) do check[i] = true end
  else
    for i = 1, n_in do
      local x = inputs[i]
      if type(x) == "userdata" and x.dtype == "float64" then check[i] = true end
    end
  end
  local positions = {}
  for i = 1, n_in do
    if check[i] then
      local x = inputs[i]
      assert(type(x) == "userdata" and x.dtype == "float64",
        prefix .. "gradcheck: input " .. i .. " must be a float64 tensor")
      assert(x.is_leaf, prefix .. "gradcheck: input " .. i ..
        " is not a leaf (made by " .. tostring(x.grad_fn) .. "); pass x:detach()")
      if not x.requires_grad then x:requires_grad_(true) end
      x.grad = nil
      positions[#positions + 1] = i
    end
  end
  assert(#positions > 0, prefix .. "gradcheck: no float64 input to check")

  local function call()
    return as_list(f(table.unpack(inputs, 1, n_in)))
  end

  -- analytic
  local outs = call()
  local state = { x = opts.seed or 1 }
  local ws = {}
  for k, o in ipairs(outs) do ws[k] = weights_like(o, state) end
  local loss = objective(outs, ws)
  if loss.requires_grad then loss:backward() end
  local analytic = {}
  for _, i in ipairs(positions) do
    local x = inputs[i]
    local g = x.grad
    if g ~= nil then
      if #g.shape ~= #x.shape then
        return false, ("%sinput %d: gradient has shape [%s], input [%s]"):format(prefix, i,
          table.concat(g.shape, ", "), table.concat(x.shape, ", ")), math.huge
      end
      for d = 1, #x.shape do
        if g.shape[d] ~= x.shape[d] then
          return false, ("%sinput %d: gradient has shape [%s], input [%s]"):format(prefix, i,
            table.concat(g.shape, ", "), table.concat(x.shape, ", ")), math.huge
        end
      end
      if g.dtype ~= "float64" then
        return false, ("%sinput %d: gradient is %s, expected float64"):format(prefix, i, g.dtype), math.huge
      end
      analytic[i] = flat(g)
    else
      analytic[i] = false -- no gradient: zeros
    end
  end

  -- numeric, and the comparison
  local function value()
    return ember.no_grad(function() return objective(call(), ws):item() end)
  end
  -- the forward must not depend on grad mode
  local l_grad, l_nograd = loss:item(), value()
  if math.abs(l_grad - l_nograd) > 1e-12 * math.max(1, math.abs(l_grad)) then
    return false, ("%sthe forward differs with grad mode off: L = %.17g, with no_grad %.17g"):format(
      prefix, l_grad, l_nograd), math.huge
  end
  local worst, report = 0, nil
  local failures = 0
  for _, i in ipairs(positions) do
    local x = inputs[i]
    for k, idx in each_index(x.shape) do
      local e = ember.no_grad(element, x, idx)
      local orig = e:item()
      ember.no_grad(e.fill_, e, orig + h)
      local lp = value()
      ember.no_grad(e.fill_, e, orig - h)
      local lm = value()
      ember.no_grad(e.fill_, e, orig)
      local num = (lp - lm) / (2 * h)
      local ana = analytic[i] and analytic[i][k] or 0
      local err = math.abs(num - ana)
      local tol = atol + rtol * math.max(math.abs(num), math.abs(ana))
      local ratio = err / tol
      if ratio ~= ratio then ratio = math.huge end -- NaN
      if ratio > 1 then
        failures = failures + 1
        if ratio > worst or not report then
          report = ("%sinput %d element %s: analytic %.17g, numeric %.17g (|diff| %.3g > tol %.3g)"):format(
            prefix, i, fmt_index(idx), ana, num, err, tol)
        end
      end
      if ratio > worst then worst = ratio end
    end
  end
  if failures > 0 then
    return false, report .. (failures > 1 and (" and %d more mismatches"):format(failures - 1) or ""), worst
  end
  return true, ("%smax error %.3g of tolerance"):format(prefix, worst), worst
end

-- Like run, but raises an error with the report on a mismatch.
function gradcheck.check(f, inputs, opts)
  local ok, report, worst = gradcheck.run(f, inputs, opts)
  if not ok then error(report, 2) end
  return worst
end

return gradcheck
