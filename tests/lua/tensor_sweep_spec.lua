-- The differential sweep of the tensor API against PyTorch 1.13
-- (tests/gen_tensor_sweep.py writes tests/fixtures/tensor_sweep.lua): every
-- case runs, and ALL mismatches are listed at once (op, case, inputs, got,
-- want) before the one assertion. Values agree to 1e-12 relative in
-- float64 (1e-5 float32, one rounding step 2^-7 in bfloat16); shapes and
-- dtypes exactly; NaN and infinity positions exactly; the sign of zero where
-- a case asks (zsign); gradients of sum(out[1] * w) in float64 to 1e-12.
-- An invalid call must raise an error naming the op (ember.<op>: ...) at
-- the caller's line.
-- A case whose behaviour ember documents as different carries `known` (the
-- doc reference, set in the generator): its mismatch is counted, not failed,
-- and a known case that agrees fails (drop its mark).
local ember = require "ember"
local fx = dofile("tests/fixtures/tensor_sweep.lua")

local TOL = { float64 = 1e-12, float32 = 1e-5, bfloat16 = 2 ^ -7 }

local function T(spec, requires_grad)
  local t
  local n = 1
  for _, s in ipairs(spec.shape) do n = n * s end
  if n == 0 then
    t = ember.zeros(spec.shape, { dtype = spec.dtype })
  elseif #spec.shape == 0 then
    t = ember.tensor(spec.data[1], spec.dtype)
  else
    t = ember.tensor(spec.data, spec.dtype):view(spec.shape)
  end
  if requires_grad then t:requires_grad_() end
  return t
end

local function shape_str(t)
  local s = {}
  for i = 1, t:dim() do s[i] = t:size(i) end
  return table.concat(s, ",")
end

local function show(t)
  if type(t) ~= "userdata" then return tostring(t) end
  local ok, s = pcall(function()
    local v = t:dim() == 0 and { t:item() } or t:reshape(-1):totable()
    local parts = {}
    for i = 1, math.min(#v, 24) do parts[i] = tostring(v[i]) end
    return ("%s[%s]{%s%s}"):format(t.dtype, shape_str(t),
      table.concat(parts, " "), #v > 24 and " ..." or "")
  end)
  return ok and s or tostring(t)
end

local function spec_show(s)
  local parts = {}
  for i = 1, math.min(#s.data, 24) do parts[i] = tostring(s.data[i]) end
  return ("%s[%s]{%s%s}"):format(s.dtype, table.concat(s.shape, ","), table.concat(parts, " "), #s.data > 24 and " ..." or "")
end

local function values(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):totable()
end

-- nil when got matches want, else a reason.
local function compare(got, want, zsign)
  if type(got) ~= "userdata" or not ember.is_tensor(got) then return "not a tensor: " .. type(got) end
  if got.dtype ~= want.dtype then return ("dtype %s, want %s"):format(got.dtype, want.dtype) end
  local gs = {}
  for i = 1, got:dim() do gs[i] = got:size(i) end
  if #gs ~= #want.shape then return ("shape {%s}, want {%s}"):format(table.concat(gs, ","), table.concat(want.shape, ",")) end
  for i = 1, #gs do
    if gs[i] ~= want.shape[i] then return ("shape {%s}, want {%s}"):format(table.concat(gs, ","), table.concat(want.shape, ",")) end
  end
  local g = values(got)
  local tol = TOL[want.dtype]
  for i, w in ipairs(want.data) do
    local v = g[i]
    if tol == nil then
      if v ~= w then return ("element %d: %s, want %s"):format(i, tostring(v), tostring(w)) end
    else
      if w ~= w then
        if v == v then return ("element %d: %s, want nan"):format(i, tostring(v)) end
      elseif v ~= v then
        return ("element %d: nan, want %s"):format(i, tostring(w))
      elseif w == math.huge or w == -math.huge then
        if v ~= w then return ("element %d: %s, want %s"):format(i, tostring(v), tostring(w)) end
      elseif math.abs(v - w) > tol * math.max(math.abs(w), 1) then
        return ("element %d: %.17g, want %.17g"):format(i, v, w)
      elseif zsign and w == 0 and v == 0 and (1 / v) ~= (1 / w) then
        return ("element %d: %s, want %s (sign of zero)"):format(i, tostring(v), tostring(w))
      end
    end
  end
  return nil
end

local function outputs(...)
  local r = table.pack(...)
  if r.n == 1 and type(r[1]) == "table" then return r[1] end
  return r
end

-- nil or a mismatch description for case c.
local function run_case(c)
  local env = setmetatable({ ember = ember }, { __index = _G })
  local grad = c.grads ~= nil
  for k, v in pairs(c.inputs) do env[k] = T(v, grad and c.grads[k] ~= nil) end
  local f = assert(load("return " .. c.expr, "=" .. c.op, "t", env))
  local ok, r = pcall(function() return outputs(f()) end)
  if c.err then
    if ok then return "no error, want one naming " .. c.err end
    -- run again not as a tail call, so that the error can name the case's own line
    local g = assert(load("local r = " .. c.expr .. "\nreturn r", "=sweep_case", "t", env))
    local _, msg = pcall(g)
    msg = tostring(msg)
    if not msg:find("ember." .. c.err, 1, true) then return "error does not name ember." .. c.err .. ": " .. msg end
    if not msg:find("^sweep_case:1:") then return "error not at the caller's line: " .. msg end
    return nil
  end
  if not ok then return "error: " .. tostring(r) end
  if #r ~= #c.want then return ("%d outputs, want %d"):format(#r, #c.want) end
  for i, w in ipairs(c.want) do
    local why = compare(r[i], w, c.zsign)
    if why then return ("output %d: %s\n      got  %s\n      want %s"):format(i, why, show(r[i]), spec_show(w)) end
  end
  if grad then
    local ok2, e = pcall(function() (r[1] * T(c.w)):sum():backward() end)
    if not ok2 then return "backward error: " .. tostring(e) end
    for k, w in pairs(c.grads) do
      local g = env[k].grad or ember.zeros_like(env[k])
      local why = compare(g, w)
      if why then return ("grad of %s: %s\n      got  %s\n      want %s"):format(k, why, show(g), spec_show(w)) end
    end
  end
  return nil
end

describe("the tensor API against PyTorch 1.13 (tests/gen_tensor_sweep.py)", function()
  it("runs every case and lists every mismatch", function()
    local bad, known, ops = {}, 0, {}
    for n, c in ipairs(fx.cases) do
      ops[c.op] = true
      local why = run_case(c)
      if c.known and why then
        known = known + 1
      elseif c.known then
        bad[#bad + 1] = ("#%d %s: %s\n    agrees now: drop its known mark (%s)"):format(n, c.op, c.expr, c.known)
      elseif why then
        local ins = {}
        for k, v in pairs(c.inputs) do ins[#ins + 1] = k .. " = " .. spec_show(v) end
        table.sort(ins)
        bad[#bad + 1] = ("#%d %s: %s\n    inputs: %s\n    %s"):format(n, c.op, c.expr, table.concat(ins, "; "), why)
      end
    end
    local nops = 0
    for _ in pairs(ops) do nops = nops + 1 end
    if #bad > 0 then
      error(("%d of %d cases (%d ops) disagree with PyTorch (%d known differences):\n%s"):format(
        #bad, #fx.cases, nops, known, table.concat(bad, "\n")), 0)
    end
  end)
end)
