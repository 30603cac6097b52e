-- tests/lua/helpers/gradcheck.lua -- the specs' float64 gradient check: a
-- thin wrapper of ember.autograd.gradcheck's rule (lua/ember/autograd.lua,
-- autograd._gradcheck_run) in its fast mode, with the specs' defaults.
--
--   local gradcheck = require "tests.lua.helpers.gradcheck"   -- from the source root
--   gradcheck.check(function(a, b) return a:matmul(b):tanh() end, {a, b})
--
-- f(inputs...) returns a tensor or a list of tensors. The check takes a
-- fixed pseudo-random combination W of the outputs and compares, for every
-- element of every checked input,
--   analytic:  W^T J   from one backward
--   numeric:   (W^T f(x + h) - W^T f(x - h)) / 2h
-- and fails when |numeric - analytic| > atol + rtol * |numeric|. It also
-- fails when f gives different outputs with grad mode off (the numeric side
-- runs under no_grad), when a gradient has the wrong shape or dtype, when a
-- second backward gives other values, and when zero output gradients do not
-- give zero input gradients.
--
-- Unlike ember.autograd.gradcheck, every float64 tensor input is checked,
-- requires_grad or not (it is switched on with requires_grad_(); it must be
-- a leaf); non-tensor inputs and int64/bool tensors are passed through
-- unchecked. Inputs are used as they are, strides included, so a
-- non-contiguous leaf is checked as non-contiguous; they must not alias
-- each other or themselves (no expanded leaves). After the check, each
-- checked input's .grad holds the analytic gradient W^T J.
--
-- Options (third argument, all optional):
--   h     = 1e-6   step of the central difference (gradcheck's eps)
--   rtol  = 1e-6   relative tolerance
--   atol  = 1e-6   absolute tolerance (rounding in W^T f is ~1e-16 |W^T f| / h)
--   wrt   = {1, 3} positions of the inputs to check (default: every float64 tensor)
--   seed  = 1      seed of the weights W (a small LCG; ember's RNG is left alone)
--   name  = "..."  prefix for the failure message
local ember = require "ember"
local autograd = require "ember.autograd"

local gradcheck = {}

-- Runs the check; returns ok (boolean), a report string and the largest
-- error seen (relative to the tolerance: <= 1 passes).
function gradcheck.run(f, inputs, opts)
  opts = opts or {}
  local n_in = inputs.n or #inputs
  local wrt = opts.wrt
  if not wrt then
    wrt = {}
    for i = 1, n_in do
      local x = inputs[i]
      if ember.is_tensor(x) and x.dtype == "float64" then wrt[#wrt + 1] = i end
    end
  end
  for _, i in ipairs(wrt) do
    if ember.is_tensor(inputs[i]) and inputs[i].is_leaf then inputs[i].grad = nil end
  end
  local ok, report, worst, analytic = autograd._gradcheck_run(f, inputs, {
    eps = opts.h or 1e-6, rtol = opts.rtol or 1e-6, atol = opts.atol or 1e-6,
    wrt = wrt, seed = opts.seed or 1, name = opts.name, fast_mode = true,
  })
  for _, i in ipairs(wrt) do
    if analytic and analytic[i] ~= nil then inputs[i].grad = analytic[i] end
  end
  return ok, report, worst
end

-- Like run, but raises an error with the report on a mismatch.
function gradcheck.check(f, inputs, opts)
  local ok, report, worst = gradcheck.run(f, inputs, opts)
  if not ok then error(report, 2) end
  return worst
end

return gradcheck
