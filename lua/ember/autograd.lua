--- ember.autograd: torch.autograd's namespace. `grad` and `Function` are
-- ember.grad and ember.Function themselves (the same values); `backward`
-- runs one backward pass over several outputs; `gradcheck` compares a
-- function's gradients with float64 finite differences; `functional`
-- holds `jacobian` and `vjp`; `detect_anomaly` / `set_detect_anomaly`
-- make a backward that produces a NaN or inf gradient fail, naming the op
-- and where the forward called it.
--
--   local autograd = ember.autograd
--   local x = ember.randn({3}, {dtype = "float64"}):requires_grad_()
--   print(autograd.gradcheck(function(a) return a:tanh() * a end, {x}))   --> true
--   print(autograd.grad == ember.grad)                                  --> true
--
-- ember has no higher-order gradients (its backward is not itself
-- differentiable): create_graph is refused, and so are the functions that
-- need it (functional.hessian, jvp, hvp, vhp; gradgradcheck). Inputs and
-- outputs lists are Lua lists; every index a message names is 1-based.
-- @module autograd
local ember = require "ember"
local errors = require "ember._errors"

local M = {}

local is_tensor = ember.is_tensor
local function fail(op, fmt, ...)
  errors.raise("ember.autograd." .. op .. ": " .. fmt, ...)
end

-- The folder of ember's Lua files, as chunk names start ("@/path/lua/ember/"):
-- anomaly mode leaves their frames out of where a node was made.
local LIBRARY = debug.getinfo(1, "S").source:match("^(@.*[/\\])autograd%.lua$") or ""

M.grad = ember.grad
M.Function = ember.Function
M.no_grad = ember.no_grad
M.enable_grad = ember.enable_grad
M.set_grad_enabled = ember.set_grad_enabled
M.is_grad_enabled = ember.is_grad_enabled
M.inference_mode = ember.inference_mode

local function check_opts(op, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_tensor(opts) then fail(op, "options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      fail(op, "unknown option '%s' (known: %s)", tostring(k), table.concat(names, ", "))
    end
  end
  return opts
end

local function no_create_graph(op, opts)
  if opts.create_graph then
    fail(op, "create_graph is not supported: ember's backward is not itself differentiable (no higher-order gradients)")
  end
end

local function tensor_list(op, x, what)
  if is_tensor(x) then return { x }, true end
  if type(x) ~= "table" or #x == 0 then fail(op, "%s must be a tensor or a list of tensors, got %s", what, type(x)) end
  for i, t in ipairs(x) do
    if not is_tensor(t) then fail(op, "%s[%d] is a %s, not a tensor", what, i, type(t)) end
  end
  return x, false
end

--- autograd.backward(tensors [, grad_tensors] [, {retain_graph =, inputs =}]) (or torch's
-- positional retain_graph, create_graph, grad_variables, inputs after grad_tensors):
-- torch.autograd.backward. Adds the gradients of tensors (a tensor or a
-- list), weighted by grad_tensors (one per tensor; nil for a one-element
-- tensor), into the .grad of the leaves they depend on, in one backward
-- pass; with `inputs` (a tensor or a list), into theirs only (every other
-- leaf's .grad is left as it was). retain_graph keeps the graph for
-- another backward; create_graph is refused.
-- @usage local w = ember.tensor({1, 2}, {dtype = "float64"}):requires_grad_()
-- local a, b = (w * w):sum(), w:sum()
-- ember.autograd.backward({a, b})
-- print(w.grad)   --> tensor([3.0000, 5.0000], ...)
function M.backward(tensors, grad_tensors, opts, ...)
  local op = "backward"
  if opts == nil and type(grad_tensors) == "table" and not is_tensor(grad_tensors) and grad_tensors[1] == nil
      and next(grad_tensors) ~= nil then
    opts, grad_tensors = grad_tensors, nil -- backward(tensors, {retain_graph = true})
  end
  local n_more = select("#", ...)
  if type(opts) == "boolean" or n_more > 0 then
    -- torch's positional form: backward(tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs)
    if opts ~= nil and type(opts) ~= "boolean" then
      fail(op, "retain_graph (argument 3) must be a boolean or nil, got %s", type(opts))
    end
    if n_more > 3 then fail(op, "takes at most 6 arguments (tensors, grad_tensors, retain_graph, create_graph, "
      .. "grad_variables, inputs), got %d", 3 + n_more) end
    local create_graph, grad_variables, inputs = ...
    if grad_variables ~= nil then fail(op, "grad_variables is deprecated (as in torch): give grad_tensors") end
    opts = { retain_graph = opts, create_graph = create_graph, inputs = inputs }
  end
  opts = check_opts(op, opts, { grad_tensors = true, retain_graph = true, create_graph = true, inputs = true })
  no_create_graph(op, opts)
  if grad_tensors == nil then grad_tensors = opts.grad_tensors end
  local outs = tensor_list(op, tensors, "tensors")
  local gs = grad_tensors
  if is_tensor(gs) then gs = { gs } end
  if gs ~= nil and type(gs) ~= "table" then fail(op, "grad_tensors must be a tensor or a list, got %s", type(gs)) end
  if opts.retain_graph ~= nil and type(opts.retain_graph) ~= "boolean" then
    fail(op, "retain_graph must be a boolean, got %s", type(opts.retain_graph))
  end
  local retain = opts.retain_graph == true
  local inputs = opts.inputs
  if inputs ~= nil then
    if is_tensor(inputs) then inputs = { inputs } end
    if type(inputs) ~= "table" then fail(op, "inputs must be a tensor or a list, got %s", type(inputs)) end
    for i, t in ipairs(inputs) do
      if not is_tensor(t) then fail(op, "inputs[%d] is a %s, not a tensor", i, type(t)) end
      if not t.requires_grad then fail(op, "inputs[%d] does not require grad", i) end
    end
  end
  for i, t in ipairs(outs) do
    if not t.requires_grad then fail(op, "tensors[%d] does not require grad and has no grad_fn", i) end
    if (gs == nil or gs[i] == nil) and t:numel() ~= 1 then
      fail(op, "grad can be implicitly created only for one-element tensors: give grad_tensors[%d] for %s", i,
        errors.shape_str(t))
    end
  end
  if #outs == 1 and (gs == nil or #gs <= 1) then
    return outs[1]:backward(gs and gs[1], { retain_graph = retain, inputs = inputs })
  end
  local root = ember._outputs_root("autograd.backward", outs, gs, { "tensor", "grad_tensors" })
  root:backward(nil, { retain_graph = retain, inputs = inputs })
end

-- ---- anomaly detection --------------------------------------------------------------

--- autograd.set_detect_anomaly(mode): turns anomaly detection on or off
-- (torch.autograd.set_detect_anomaly) and returns the previous mode; as a
-- scope, `local a <close> = autograd.set_detect_anomaly(true)` restores the
-- previous mode when a goes out of scope. While on, every gradient a
-- node's backward returns is checked: a NaN or inf fails the backward with
-- "ember.backward: function 'div backward' returned nan values in its 2nd
-- output ..." (the gradient of the op's 2nd input), and a node recorded
-- while it is on also names the Lua lines of the forward that made it.
-- Slow (each gradient is read back): for finding a bug, not for training.
-- @usage local a <close> = ember.autograd.set_detect_anomaly(true)
-- local x = ember.tensor({0, 1}, {dtype = "float64"}):requires_grad_()
-- local ok, err = pcall(function() x:sqrt():sum():backward() end)
-- print(ok, err:match("function '[%w_]+ backward' returned %a+ values"))   --> false function 'sqrt backward' returned inf values
function M.set_detect_anomaly(mode)
  if type(mode) ~= "boolean" then
    fail("set_detect_anomaly", "mode must be a boolean, got %s", type(mode))
  end
  local prev = ember._set_detect_anomaly(mode, LIBRARY)
  local closed = false
  return setmetatable({ previous = prev }, {
    __close = function()
      if closed then return end
      closed = true
      ember._set_detect_anomaly(prev, LIBRARY)
    end,
    __name = "ember.autograd anomaly mode",
    __tostring = function() return "anomaly mode scope (previous: " .. tostring(prev) .. ")" end,
  })
end

--- autograd.detect_anomaly([fn, ...]): anomaly detection on for a scope
-- (torch.autograd.detect_anomaly): `local a <close> = autograd.detect_anomaly()`,
-- or detect_anomaly(fn, ...) runs fn(...) with it on and returns its
-- results. The previous mode comes back after, errors included.
-- @usage local x = ember.tensor({0, 1}, {dtype = "float64"}):requires_grad_()
-- local ok, err = pcall(ember.autograd.detect_anomaly, function() (x:sqrt() * 0):sum():backward() end)
-- print(ok, err:match("function 'sqrt backward' returned nan values in its 1st output") ~= nil)   --> false true
-- -- (0 * the inf slope of sqrt at 0: without anomaly mode x.grad[1] would be NaN)
function M.detect_anomaly(fn, ...)
  if fn == nil then return M.set_detect_anomaly(true) end
  if type(fn) ~= "function" then
    fail("detect_anomaly", "expected a function (detect_anomaly(fn, ...)) or nothing "
      .. "(local a <close> = detect_anomaly()), got %s", type(fn))
  end
  local scope <close> = M.set_detect_anomaly(true)
  return fn(...)
end

--- autograd.is_anomaly_enabled(): whether anomaly detection is on (torch.is_anomaly_enabled).
function M.is_anomaly_enabled() return ember._is_anomaly_enabled() end

-- ---- gradcheck ----------------------------------------------------------------------

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
  local o = { dtype = "float64", device = t.device }
  if n == 0 then return ember.zeros(t.shape, o) end
  return ember.tensor(w, o):reshape(t.shape)
end

local function flat(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):totable()
end

-- 1-based multi-index of row-major position k (1-based) in shape.
local function unflat(shape, k)
  local idx, rest = {}, k - 1
  for d = #shape, 1, -1 do
    idx[d] = rest % shape[d] + 1
    rest = rest // shape[d]
  end
  return idx
end

local function fmt_index(idx)
  local parts = {}
  for i, v in ipairs(idx) do parts[i] = tostring(v) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

-- A 0-d view of element idx of t.
local function element(t, idx)
  local e = t
  for d = #idx, 1, -1 do e = e:select(d, idx[d]) end
  return e
end

local function overlaps(t)
  for d = 1, t:dim() do
    if t.shape[d] > 1 and t:stride(d) == 0 then return true end
  end
  return false
end

-- What a function returned, as one value: its one result, or the list of
-- several (`return a, b`, as an ember.Function of several outputs gives
-- them), which gradcheck and jacobian take as torch takes a tuple.
local function results(...)
  if select("#", ...) > 1 then return { ... } end
  return (...)
end

-- The outputs of fn as a list; .diff[k]: output k is a float64 tensor (the
-- ones checked: int64 and bool outputs are not differentiable).
local function outputs_of(op, fn, inputs, n_in)
  local out = results(fn(table.unpack(inputs, 1, n_in)))
  local list = is_tensor(out) and { out } or out
  if type(list) ~= "table" then fail(op, "the function must return a tensor or a list of tensors, got %s", type(out)) end
  local diff = {}
  for k, o in ipairs(list) do
    if is_tensor(o) and (o.dtype == "float64" or o.dtype == "float32" or o.dtype == "bfloat16" or o.dtype == "float16") then
      if o.dtype ~= "float64" then
        fail(op, "output %d is %s; gradcheck compares float64 outputs only (compute in float64)", k, o.dtype)
      end
      diff[k] = true
    end
  end
  return list, diff
end

-- The check itself, shared by gradcheck and tests/lua/helpers/gradcheck.lua.
-- Returns ok, a message, the worst error as a fraction of the tolerance (> 1
-- fails) and, in fast mode, the analytic w^T J per checked input (position ->
-- tensor). opts: eps, atol, rtol, nondet_tol, fast_mode, check_undefined_grad
-- (gradcheck's), and the helper's: wrt (positions to check), seed (of the
-- output weights), name (a message prefix).
function M._gradcheck_run(fn, inputs, opts)
  local op = "gradcheck"
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    fail(op, "fn must be a function, got %s", type(fn))
  end
  if is_tensor(inputs) then inputs = { inputs } end
  if type(inputs) ~= "table" then fail(op, "inputs must be a tensor or a list, got %s", type(inputs)) end
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  for _, k in ipairs { "eps", "atol", "rtol", "nondet_tol" } do
    local v = opts[k]
    if v ~= nil and (type(v) ~= "number" or v < 0 or v ~= v) then fail(op, "%s must be a number >= 0, got %s", k, tostring(v)) end
  end
  if eps <= 0 then fail(op, "eps must be > 0, got %s", tostring(eps)) end
  local nondet_tol = opts.nondet_tol or 0
  local prefix = opts.name and (opts.name .. ": ") or ""
  local n_in = inputs.n or #inputs

  -- the inputs checked: those that require grad (or the helper's wrt)
  local positions, wrt = {}, nil
  if opts.wrt then
    wrt = {}
    for _, i in ipairs(opts.wrt) do wrt[i] = true end
  end
  for i = 1, n_in do
    local x = inputs[i]
    if is_tensor(x) and (wrt == nil and x.requires_grad or wrt and wrt[i]) then
      if x.dtype ~= "float64" then
        fail(op, "input %d requires gradient and is not a double precision floating point tensor (it is %s): "
          .. "finite differences in %s would not be accurate enough; pass x:double() (PyTorch warns the same)", i, x.dtype, x.dtype)
      end
      if not x.is_leaf then
        fail(op, "input %d is not a leaf (made by %s): pass x:detach():requires_grad_()", i, tostring(x.grad_fn))
      end
      if overlaps(x) then
        fail(op, "input %d has a dimension with stride 0: gradcheck perturbs each element in place, so its elements "
          .. "must not overlap; pass x:contiguous()", i)
      end
      if not x.requires_grad then x:requires_grad_(true) end
      positions[#positions + 1] = i
    elseif wrt and wrt[i] then
      fail(op, "input %d must be a float64 tensor", i)
    end
  end
  if #positions == 0 then
    fail(op, "expects at least one input tensor to require gradient, but none of them have requires_grad = true")
  end
  local checked = {}
  for j, i in ipairs(positions) do checked[j] = inputs[i] end

  local function call() return outputs_of(op, fn, inputs, n_in) end
  local function value(ws) -- the outputs under no_grad, as flat lists (or w^T f)
    return ember.no_grad(function()
      local outs = call()
      if ws then
        local total = 0
        for k, o in ipairs(outs) do if ws[k] then total = total + (o * ws[k]):sum():item() end end
        return total
      end
      local r = {}
      for k, o in ipairs(outs) do if is_tensor(o) then r[k] = flat(o) end end
      return r
    end)
  end

  -- w^T J for output weights ws (a list per output, nil: 0), as flat lists per checked input
  local function vjp_rows(outs, diff, ws)
    local os, gs = {}, {}
    for k, o in ipairs(outs) do
      if diff[k] and ws[k] and o.requires_grad then os[#os + 1] = o; gs[#gs + 1] = ws[k] end
    end
    local res = {}
    if #os == 0 then return res, {} end
    local grads = M.grad(os, checked, { grad_outputs = gs, retain_graph = true, allow_unused = true })
    for j, i in ipairs(positions) do
      local g, x = grads[j], inputs[i]
      if g ~= nil then
        local same = #g.shape == #x.shape
        for d = 1, #x.shape do same = same and g.shape[d] == x.shape[d] end
        if not same then
          return nil, ("%sgradient for input %d has shape %s, but the input is %s"):format(prefix, i,
            errors.shape_str(g), errors.shape_str(x))
        end
        if g.dtype ~= x.dtype then
          return nil, ("%sgradient for input %d is %s, but the input is %s"):format(prefix, i, g.dtype, x.dtype)
        end
        res[j] = g
      end
    end
    return res
  end

  local outs, diff = call()
  -- the forward must not depend on grad mode (the numerical side runs under no_grad)
  local plain = value()
  for k, o in ipairs(outs) do
    if diff[k] then
      local a, b = flat(o:detach()), plain[k]
      for e = 1, #a do
        if math.abs(a[e] - b[e]) > 1e-12 * math.max(1, math.abs(a[e])) and not (a[e] ~= a[e] and b[e] ~= b[e]) then
          return false, ("%sthe forward differs with grad mode off: output %d element %s is %.17g, with no_grad %.17g"):format(
            prefix, k, fmt_index(unflat(o.shape, e)), a[e], b[e]), math.huge
        end
      end
    end
  end

  local function compare(ana, num)
    local err = math.abs(num - ana)
    local ratio = err / (atol + rtol * math.abs(num))
    if ratio ~= ratio then ratio = math.huge end
    return ratio, err
  end

  local worst, report, failures = 0, nil, 0

  -- backward of zero output gradients: zero input gradients (torch's check_undefined_grad)
  local function check_zero(outs_)
    if opts.check_undefined_grad == false then return nil end
    local zs = {}
    for k, o in ipairs(outs_) do if diff[k] then zs[k] = ember.zeros_like(o) end end
    local rows, msg = vjp_rows(outs_, diff, zs)
    if not rows then return msg end
    for j, i in ipairs(positions) do
      if rows[j] then
        local v = flat(rows[j])
        for e = 1, #v do
          if v[e] ~= 0 then
            return ("%sbackward with zero output gradients gave a nonzero gradient for input %d (element %s is %.17g): "
              .. "a backward must map zero gradients to zero"):format(prefix, i, fmt_index(unflat(inputs[i].shape, e)), v[e])
          end
        end
      end
    end
  end

  -- Every backward runs before the numerical side: perturbing an input in
  -- place (and back) bumps its version, which the graph's saved tensors check.
  if opts.fast_mode then
    -- one combination w of the outputs: w^T J against finite differences of w^T f, per input element
    local state = { x = opts.seed or 1 }
    local ws = {}
    for k, o in ipairs(outs) do if diff[k] then ws[k] = weights_like(o, state) end end
    local rows, msg = vjp_rows(outs, diff, ws)
    if not rows then return false, msg, math.huge end
    local again = vjp_rows(outs, diff, ws)
    local zmsg = check_zero(outs)
    local analytic, ana = {}, {}
    for j, i in ipairs(positions) do
      local x = inputs[i]
      ana[j] = rows[j] and flat(rows[j]) or false
      analytic[i] = rows[j]
      local ana2 = again and again[j] and flat(again[j]) or false
      for e = 1, x:numel() do
        local a, a2 = ana[j] and ana[j][e] or 0, ana2 and ana2[e] or 0
        if math.abs(a - a2) > nondet_tol then
          return false, ("%sbackward is not reentrant: running it twice on the same inputs gave %.17g and %.17g for "
            .. "input %d element %s (nondet_tol %g)"):format(prefix, a, a2, i, fmt_index(unflat(x.shape, e)), nondet_tol),
            math.huge, analytic
        end
      end
    end
    for j, i in ipairs(positions) do
      local x = inputs[i]
      for e = 1, x:numel() do
        local idx = unflat(x.shape, e)
        local el = ember.no_grad(element, x, idx)
        local orig = el:item()
        ember.no_grad(el.fill_, el, orig + eps)
        local lp = value(ws)
        ember.no_grad(el.fill_, el, orig - eps)
        local lm = value(ws)
        ember.no_grad(el.fill_, el, orig)
        local num = (lp - lm) / (2 * eps)
        local a = ana[j] and ana[j][e] or 0
        local ratio, err = compare(a, num)
        if ratio > 1 then
          failures = failures + 1
          if ratio > worst or not report then
            report = ("%sgradient mismatch for input %d element %s (of a fixed combination of the outputs): "
              .. "analytic %.17g, numeric %.17g (|diff| %.3g > tol %.3g)"):format(prefix, i, fmt_index(idx), a, num, err,
              atol + rtol * math.abs(num))
          end
        end
        if ratio > worst then worst = ratio end
      end
    end
    if failures > 0 then
      return false, report .. (failures > 1 and (" and %d more mismatches"):format(failures - 1) or ""), worst, analytic
    end
    if zmsg then return false, zmsg, math.huge, analytic end
    return true, ("%smax error %.3g of tolerance"):format(prefix, worst), worst, analytic
  end

  -- full mode: the analytical Jacobian, a row per output element (a
  -- vector-Jacobian product each, run twice) ...
  local analytical = {} -- analytical[k][r][j]: flat d out_k[r] / d input j, or false (zeros)
  for k, o in ipairs(outs) do
    if diff[k] then
      local oshape = o.shape
      analytical[k] = {}
      for r = 1, o:numel() do
        local rows = {}
        if o.requires_grad then
          local onehot = ember.zeros_like(o)
          ember.no_grad(function() element(onehot, unflat(oshape, r)):fill_(1) end)
          local msg
          rows, msg = vjp_rows(outs, diff, { [k] = onehot })
          if not rows then return false, msg, math.huge end
          local again = vjp_rows(outs, diff, { [k] = onehot })
          for j, i in ipairs(positions) do
            local a, b = rows[j] and flat(rows[j]), again[j] and flat(again[j])
            for e = 1, inputs[i]:numel() do
              local va, vb = a and a[e] or 0, b and b[e] or 0
              if math.abs(va - vb) > nondet_tol then
                return false, ("%sbackward is not reentrant: running it twice on the same inputs gave %.17g and %.17g "
                  .. "for d output %d %s / d input %d %s (nondet_tol %g)"):format(prefix, va, vb, k,
                  fmt_index(unflat(oshape, r)), i, fmt_index(unflat(inputs[i].shape, e)), nondet_tol), math.huge
              end
            end
            rows[j] = a or false
          end
        end
        analytical[k][r] = rows
      end
    end
  end
  local zmsg = check_zero(outs)
  -- ... the numerical one, a column per input element ...
  local numeric = {} -- numeric[j][e][k]: flat d out_k / d x_e
  for j, i in ipairs(positions) do
    local x = inputs[i]
    numeric[j] = {}
    for e = 1, x:numel() do
      local el = ember.no_grad(element, x, unflat(x.shape, e))
      local orig = el:item()
      ember.no_grad(el.fill_, el, orig + eps)
      local fp = value()
      ember.no_grad(el.fill_, el, orig - eps)
      local fm = value()
      ember.no_grad(el.fill_, el, orig)
      local col = {}
      for k in pairs(diff) do
        local c = {}
        for r = 1, #fp[k] do c[r] = (fp[k][r] - fm[k][r]) / (2 * eps) end
        col[k] = c
      end
      numeric[j][e] = col
    end
  end
  -- ... compared element by element
  for k, o in ipairs(outs) do
    if diff[k] then
      local oshape = o.shape
      for r = 1, o:numel() do
        for j, i in ipairs(positions) do
          local x = inputs[i]
          local a = analytical[k][r][j]
          for e = 1, x:numel() do
            local ana, num = a and a[e] or 0, numeric[j][e][k][r]
            local ratio, err = compare(ana, num)
            if ratio > 1 then
              failures = failures + 1
              if ratio > worst or not report then
                local what = o.requires_grad and "Jacobian mismatch" or
                  "the output does not require grad, but its numerical gradient is not zero:"
                report = ("%s%s for output %d with respect to input %d, worst at row %d, column %d (output element %s, "
                  .. "input element %s): numerical %.17g, analytical %.17g (|diff| %.3g > tol %.3g)"):format(prefix, what,
                  k, i, r, e, fmt_index(unflat(oshape, r)), fmt_index(unflat(x.shape, e)), num, ana, err,
                  atol + rtol * math.abs(num))
              end
            end
            if ratio > worst then worst = ratio end
          end
        end
      end
    end
  end
  if failures > 0 then
    return false, report .. (failures > 1 and (" and %d more mismatched elements"):format(failures - 1) or ""), worst
  end
  if zmsg then return false, zmsg, math.huge end
  return true, ("%smax error %.3g of tolerance"):format(prefix, worst), worst
end

local GRADCHECK_OPTS = {
  eps = true, atol = true, rtol = true, raise_exception = true, check_undefined_grad = true, nondet_tol = true,
  fast_mode = true, check_grad_dtypes = true, check_batched_grad = true, check_forward_ad = true,
  check_backward_ad = true, check_sparse_nnz = true,
}

--- autograd.gradcheck(fn, inputs [, {eps = 1e-6, atol = 1e-5, rtol = 1e-3,
-- raise_exception = true, nondet_tol = 0, check_undefined_grad = true,
-- fast_mode = false}]): torch.autograd.gradcheck. inputs is a tensor or a
-- list (other values are passed through); the float64 tensors that require
-- grad are checked. fn returns a tensor, a list, or several values (each
-- output checked, as torch's tuple). The numerical Jacobian (central differences of step
-- eps, each element perturbed in place) is compared with the analytical one
-- (one vector-Jacobian product per output element, run twice: a backward
-- that is not reentrant fails) element by element: |analytical - numerical|
-- <= atol + rtol * |numerical|. A mismatch names the output and the input
-- and the worst element, 1-based, as row (output element) and column (input
-- element). Also checked: gradients of the inputs' shape and dtype, a
-- forward that does not change with grad mode off (the numerical side runs
-- under no_grad), and (check_undefined_grad) that zero output gradients give
-- zero input gradients. fast_mode compares one fixed combination w of the
-- outputs, w^T J against finite differences of w^T f, per input element: one
-- backward instead of one per output element. Returns true; a failure
-- raises, or with raise_exception = false returns false and the message.
-- An input that requires grad but is not float64 is refused (finite
-- differences in float32 are too coarse: PyTorch's warning, as an error).
-- check_batched_grad and check_forward_ad are refused (ember has no vmap
-- and no forward mode).
-- @usage local square = ember.Function{name = "doc_square",
--   forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
--   backward = function(ctx, g) return 2 * g * ctx.saved[1] end}
-- local x = ember.randn({2, 3}, {dtype = "float64"}):requires_grad_()
-- print(ember.autograd.gradcheck(function(a) return square(a) end, {x}))   --> true
-- local wrong = ember.Function{name = "doc_wrong_square",
--   forward = function(ctx, a) ctx:save_for_backward(a); return a * a end,
--   backward = function(ctx, g) return 2.1 * g * ctx.saved[1] end}
-- print(ember.autograd.gradcheck(function(a) return wrong(a) end, x, {raise_exception = false}))   --> false ember.autograd.gradcheck: Jacobian mismatch for output 1 with respect to input 1, ...
function M.gradcheck(fn, inputs, opts)
  local op = "gradcheck"
  opts = check_opts(op, opts, GRADCHECK_OPTS)
  for _, k in ipairs { "raise_exception", "check_undefined_grad", "fast_mode", "check_grad_dtypes" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then fail(op, "%s must be a boolean, got %s", k, type(opts[k])) end
  end
  if opts.check_batched_grad then fail(op, "check_batched_grad is not supported: ember has no vmap") end
  if opts.check_forward_ad then fail(op, "check_forward_ad is not supported: ember has no forward-mode autograd") end
  if opts.check_sparse_nnz then fail(op, "check_sparse_nnz is not supported: ember has no sparse tensors") end
  if opts.check_backward_ad == false then fail(op, "check_backward_ad = false leaves nothing to check") end
  local ok, msg = M._gradcheck_run(fn, inputs, {
    eps = opts.eps, atol = opts.atol, rtol = opts.rtol, nondet_tol = opts.nondet_tol,
    fast_mode = opts.fast_mode, check_undefined_grad = opts.check_undefined_grad,
  })
  if ok then return true end
  msg = "ember.autograd.gradcheck: " .. msg
  if opts.raise_exception == false then return false, msg end
  errors.error(msg)
end

--- autograd.gradgradcheck: refused; it checks second derivatives, and
-- ember's backward is not differentiable (no higher-order gradients).
function M.gradgradcheck()
  fail("gradgradcheck", "second derivatives need a differentiable backward (create_graph), which ember does not have")
end

-- ---- autograd.functional ------------------------------------------------------------

local F = {}
M.functional = F

-- The inputs as fresh leaves that require grad (the caller's tensors are
-- left alone), and whether they came as one tensor.
local function fresh_inputs(op, inputs)
  local list, single = tensor_list(op, inputs, "inputs")
  local ins = {}
  for i, x in ipairs(list) do
    if not (x.dtype == "float64" or x.dtype == "float32" or x.dtype == "bfloat16" or x.dtype == "float16") then
      fail(op, "input %d is %s; only floating-point inputs can be differentiated", i, x.dtype)
    end
    ins[i] = x:detach():requires_grad_()
  end
  return ins, single
end

local function call_fn(op, func, ins)
  if type(func) ~= "function" and not (type(func) == "table" and getmetatable(func) and getmetatable(func).__call) then
    fail(op, "func must be a function, got %s", type(func))
  end
  local out = results(func(table.unpack(ins)))
  local outs, single = nil, is_tensor(out)
  if single then outs = { out }
  else
    if type(out) ~= "table" or #out == 0 then
      fail(op, "func must return a tensor or a list of tensors, got %s", type(out))
    end
    for i, o in ipairs(out) do
      if not is_tensor(o) then fail(op, "output %d of func is a %s, not a tensor", i, type(o)) end
    end
    outs = out
  end
  return outs, single
end

-- func(ins...) with grad mode on (the caller may be under no_grad), as torch's functional API.
local function call_with_grad(op, func, ins)
  local prev = ember.set_grad_enabled(true)
  local ok, outs, single = pcall(call_fn, op, func, ins)
  ember.set_grad_enabled(prev)
  if not ok then error(outs, 0) end
  return outs, single
end

local function unused(op, strict, k, i)
  if strict then
    fail(op, "output %d of the user-provided function is independent of input %d; strict mode does not allow it", k, i)
  end
end

--- functional.jacobian(func, inputs [, {strict = false, vectorize = false,
-- strategy = "reverse-mode", create_graph = false}]): torch.autograd.functional.jacobian.
-- inputs is a tensor or a list; func(inputs...) returns a tensor, a list,
-- or several values (taken as a list, as torch's tuple).
-- The Jacobian of output k with respect to input i has the shape of output k
-- followed by the shape of input i; the result is one tensor for a tensor
-- in and a tensor out, a list over inputs (or over outputs) when one side is
-- a list, and a list of lists (result[k][i]) when both are. Computed in
-- reverse mode, one vector-Jacobian product per output element (vectorize
-- is accepted and computes the same rows; strategy "forward-mode" and
-- create_graph are refused). An input an output does not depend on gets
-- zeros; with strict = true it is an error. The caller's tensors are not
-- changed (func sees detached copies that require grad).
-- @usage local J = ember.autograd.functional.jacobian(function(x) return x * x end,
--   ember.tensor({1, 2}, {dtype = "float64"}))
-- print(J)   --> tensor([[2.0000, 0.0000], ...
function M.functional.jacobian(func, inputs, opts)
  local op = "functional.jacobian"
  opts = check_opts(op, opts, { create_graph = true, strict = true, vectorize = true, strategy = true })
  no_create_graph(op, opts)
  if opts.strategy ~= nil and opts.strategy ~= "reverse-mode" then
    if opts.strategy == "forward-mode" then
      fail(op, "strategy 'forward-mode' is not supported: ember has no forward-mode autograd (use 'reverse-mode')")
    end
    fail(op, "strategy must be 'reverse-mode' or 'forward-mode', got %s", tostring(opts.strategy))
  end
  for _, k in ipairs { "strict", "vectorize" } do
    if opts[k] ~= nil and type(opts[k]) ~= "boolean" then fail(op, "%s must be a boolean, got %s", k, type(opts[k])) end
  end
  local ins, single_in = fresh_inputs(op, inputs)
  local outs, single_out = call_with_grad(op, func, ins)
  local result = {}
  for k, o in ipairs(outs) do
    local row = {}
    local n = o:numel()
    local flat_rows = {}
    for i = 1, #ins do flat_rows[i] = {} end
    for r = 1, n do
      local grads
      if o.requires_grad then
        local onehot = ember.zeros(n, { dtype = o.dtype, device = o.device })
        ember.no_grad(function() onehot[r] = 1 end)
        grads = M.grad(o, ins, { grad_outputs = onehot:reshape(o.shape), retain_graph = true, allow_unused = true })
      else
        grads = {}
      end
      for i, x in ipairs(ins) do
        local g = grads[i]
        if g == nil then
          unused(op, opts.strict, k, i)
          g = ember.zeros(x.shape, { dtype = x.dtype, device = x.device })
        end
        flat_rows[i][r] = g:reshape(-1)
      end
    end
    for i, x in ipairs(ins) do
      local shape = {}
      for _, s in ipairs(o.shape) do shape[#shape + 1] = s end
      for _, s in ipairs(x.shape) do shape[#shape + 1] = s end
      local J
      if n == 0 or x:numel() == 0 then
        J = ember.zeros(shape, { dtype = x.dtype, device = x.device })
      else
        J = ember.stack(flat_rows[i], 1):reshape(shape)
      end
      row[i] = J:detach()
    end
    result[k] = single_in and row[1] or row
  end
  if single_out then return result[1] end
  return result
end

--- functional.vjp(func, inputs [, v] [, {strict = false, create_graph = false}]):
-- torch.autograd.functional.vjp. Returns two values, func's output
-- (detached) and v^T J: the gradients of the outputs weighted by v (a
-- tensor per output; may be left out for a one-element output) with
-- respect to each input, a tensor for a tensor input, else a list. An
-- input the outputs do not depend on gets zeros (strict = true: an error).
-- @usage local out, g = ember.autograd.functional.vjp(function(x) return x:pow(3) end,
--   ember.tensor({1, 2}, {dtype = "float64"}), ember.tensor({1, 1}, {dtype = "float64"}))
-- print(g)   --> tensor([ 3.0000, 12.0000], ...)
function M.functional.vjp(func, inputs, v, opts)
  local op = "functional.vjp"
  if opts == nil and type(v) == "table" and not is_tensor(v) and v[1] == nil and next(v) ~= nil then
    opts, v = v, nil
  end
  opts = check_opts(op, opts, { create_graph = true, strict = true })
  no_create_graph(op, opts)
  local ins, single_in = fresh_inputs(op, inputs)
  local outs, single_out = call_with_grad(op, func, ins)
  local vs = v
  if is_tensor(vs) then vs = { vs } end
  if vs == nil then
    for k, o in ipairs(outs) do
      if o:numel() ~= 1 then
        fail(op, "v can be left out only when the output has one element; output %d is %s", k, errors.shape_str(o))
      end
    end
    vs = {}
    for k, o in ipairs(outs) do vs[k] = ember.ones_like(o) end
  elseif type(vs) ~= "table" or #vs ~= #outs then
    fail(op, "v must have one tensor per output of func (%d), got %s", #outs, type(vs) == "table" and #vs or type(vs))
  end
  for k, o in ipairs(outs) do
    local w = vs[k]
    if not is_tensor(w) then fail(op, "v[%d] must be a tensor, got %s", k, type(w)) end
    local same = #w.shape == #o.shape
    for d = 1, #o.shape do same = same and w.shape[d] == o.shape[d] end
    if not same then fail(op, "v[%d] is %s, but output %d is %s", k, errors.shape_str(w), k, errors.shape_str(o)) end
  end
  local used_outs, used_vs = {}, {}
  for k, o in ipairs(outs) do
    if o.requires_grad then used_outs[#used_outs + 1] = o; used_vs[#used_vs + 1] = vs[k] end
  end
  local grads = {}
  if #used_outs > 0 then grads = M.grad(used_outs, ins, { grad_outputs = used_vs, allow_unused = true }) end
  local res = {}
  for i, x in ipairs(ins) do
    local g = grads[i]
    if g == nil then
      unused(op, opts.strict, 1, i)
      g = ember.zeros(x.shape, { dtype = x.dtype, device = x.device })
    end
    res[i] = g:detach()
  end
  local out_d = {}
  for k, o in ipairs(outs) do out_d[k] = o:detach() end
  return single_out and out_d[1] or out_d, single_in and res[1] or res
end

local function needs_double_backward(name)
  return function()
    fail("functional." .. name, "needs the derivative of a gradient (double backward), which ember does not have: "
      .. "its backward is not itself differentiable; functional.jacobian and functional.vjp work")
  end
end

--- functional.hessian: refused (needs double backward, which ember does not have).
F.hessian = needs_double_backward("hessian")
--- functional.jvp: refused (needs double backward or forward mode, which ember does not have).
F.jvp = needs_double_backward("jvp")
--- functional.hvp: refused (needs double backward, which ember does not have).
F.hvp = needs_double_backward("hvp")
--- functional.vhp: refused (needs double backward, which ember does not have).
F.vhp = needs_double_backward("vhp")

return M
