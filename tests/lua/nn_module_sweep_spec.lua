-- The differential sweep of ember.nn's modules against torch.nn (PyTorch
-- 1.13; tests/gen_nn_module_sweep.py writes tests/fixtures/nn_module_sweep.lua).
-- Each case builds the module from ember's Lua spelling, in float64, and
-- checks, listing ALL mismatches at once before the one assertion:
--   * torch_state_dict() has torch's names and shapes, parameters() come in
--     torch's order (their shapes), tostring is torch's repr (True/False
--     read as Lua's true/false);
--   * torch's state dict (random values) loads; the call's outputs equal
--     torch's (1e-10 relative), the state after the call too (running
--     statistics in training);
--   * the gradients of sum(out_i * w_i) for every float input and every
--     parameter (torch's names) equal torch's.
-- Each case runs again in float32 (the module as built, torch's state dict
-- converted on load) against torch's float64 values to 1e-5 of each tensor's
-- scale: the float32 routes (oneDNN, the fused kernels) are held too.
-- The default initialisation of each parameter is compared statistically
-- with torch's (bounds, mean, std over large shapes), and torch options
-- ember lacks must be refused naming the module and the option.
local ember = require "ember"
local nn = ember.nn
local fx = dofile("tests/fixtures/nn_module_sweep.lua")

local TOL = 1e-10

local function T(spec)
  local n = 1
  for _, s in ipairs(spec.shape) do n = n * s end
  if n == 0 then return ember.zeros(spec.shape, { dtype = spec.dtype }) end
  if #spec.shape == 0 then return ember.tensor(spec.data[1], spec.dtype) end
  return ember.tensor(spec.data, spec.dtype):view(spec.shape)
end

local function shape_str(shape)
  local s = {}
  for i, v in ipairs(shape) do s[i] = tostring(v) end
  return "{" .. table.concat(s, ",") .. "}"
end

local function values(t)
  if t:dim() == 0 then return { t:item() } end
  return t:reshape(-1):totable()
end

-- nil when ember tensor `got` matches fixture tensor `want`, else why.
local function compare(got, want, tol)
  if not ember.is_tensor(got) then return "not a tensor: " .. type(got) end
  if shape_str(got.shape) ~= shape_str(want.shape) then
    return ("shape %s, want %s"):format(shape_str(got.shape), shape_str(want.shape))
  end
  if want.dtype ~= "float64" then
    if got.dtype ~= want.dtype then return ("dtype %s, want %s"):format(got.dtype, want.dtype) end
  end
  local g = values(got)
  for i, w in ipairs(want.data) do
    local v = g[i]
    if type(w) == "boolean" or want.dtype == "int64" then
      if v ~= w then return ("element %d: %s, want %s"):format(i, tostring(v), tostring(w)) end
    elseif w ~= w then
      if v == v then return ("element %d: %s, want nan"):format(i, tostring(v)) end
    elseif w == math.huge or w == -math.huge then
      if v ~= w then return ("element %d: %s, want %s"):format(i, tostring(v), tostring(w)) end
    elseif v ~= v or math.abs(v - w) > (tol or TOL) * math.max(math.abs(w), 1) then
      return ("element %d: %.17g, want %.17g"):format(i, v, w)
    end
  end
  return nil
end

-- every value returned, tables (not tensors) flattened depth-first, nils skipped
local function flatten(r, out)
  out = out or {}
  for i = 1, r.n or #r do
    local v = r[i]
    if ember.is_tensor(v) then
      out[#out + 1] = v
    elseif type(v) == "table" then
      flatten(v, out)
    end
  end
  return out
end

-- the gradients of every parameter under torch's names (buffers as zeros):
-- torch_state_dict's walk, each module's own to_torch_names mapping
local function grad_state_dict(m)
  local own = {}
  for _, n in ipairs(m._params) do
    local p = m._reg[n]
    own[n] = p.grad or ember.zeros_like(p)
  end
  for _, n in ipairs(m._buffers) do
    if not m._nonpersistent[n] then own[n] = ember.zeros_like(m._reg[n]) end
  end
  for _, c in ipairs(m._children) do
    for k, v in pairs(grad_state_dict(m._reg[c])) do own[c .. "." .. k] = v end
  end
  return m:to_torch_names(own)
end

local function env_for(c)
  local env = setmetatable({ ember = ember, nn = nn }, { __index = _G })
  local nograd = {}
  for _, k in ipairs(c.nograd or {}) do nograd[k] = true end
  for k, v in pairs(c.inputs) do
    local t = T(v)
    if c.grads and c.grads[k] and not nograd[k] then t:requires_grad_() end
    env[k] = t
  end
  return env
end

local function build(c, env)
  local f = assert(load("return " .. c.ctor, "=" .. c.name, "t", env))
  return f()
end

local function torch_repr(s)
  return (s:gsub("True", "true"):gsub("False", "false"))
end

-- a list of mismatch descriptions for case c (empty when it agrees)
local function run_case(c)
  local bad = {}
  local function fail(fmt, ...) bad[#bad + 1] = fmt:format(...) end
  local env = env_for(c)
  local ok, m = pcall(build, c, env)
  if not ok then fail("constructor: %s", tostring(m)); return bad end
  m:double()
  -- names, shapes, order
  local tsd = m:torch_state_dict()
  for k, v in pairs(c.state) do
    if tsd[k] == nil then
      fail("torch_state_dict lacks %s %s", k, shape_str(v.shape))
    elseif shape_str(tsd[k].shape) ~= shape_str(v.shape) then
      fail("torch_state_dict %s has shape %s, torch's %s", k, shape_str(tsd[k].shape), shape_str(v.shape))
    end
  end
  for k in pairs(tsd) do
    if c.state[k] == nil then fail("torch_state_dict has %s, which torch's lacks", k) end
  end
  local ps = {}
  for i, p in ipairs(m:parameters()) do ps[i] = shape_str(p.shape) end
  local want_ps = {}
  for i, s in ipairs(c.param_shapes) do want_ps[i] = shape_str(s) end
  if not c.layout and table.concat(ps, " ") ~= table.concat(want_ps, " ") then
    fail("parameters() shapes %s, torch's (%s) %s", table.concat(ps, " "), table.concat(c.param_names, " "),
      table.concat(want_ps, " "))
  end
  if c.repr and not c.layout and not c.repr_known and tostring(m) ~= torch_repr(c.repr) then
    fail("printed\n%s\n    torch's\n%s", tostring(m), torch_repr(c.repr))
  end
  -- load torch's state dict
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v) end
  local lok, lerr = pcall(m.load_state_dict, m, sd)
  if not lok then fail("load_state_dict: %s", tostring(lerr)); return bad end
  m:train(c.mode == "train")
  env.m = m
  local f = assert(load(c.call, "=" .. c.name .. ".call", "t", env))
  local cok, r = pcall(function() return table.pack(f()) end)
  if not cok then fail("call: %s", tostring(r)); return bad end
  local outs = flatten(r)
  if #outs ~= #c.want then fail("%d outputs, want %d", #outs, #c.want); return bad end
  for i, w in ipairs(c.want) do
    local why = compare(outs[i], w, c.tol)
    if why then fail("output %d: %s", i, why) end
  end
  if c.state_after then
    local now = m:torch_state_dict()
    for k, w in pairs(c.state_after) do
      local why = "missing"
      if now[k] then why = compare(now[k], w) end
      if why then fail("state %s after the call: %s", k, why) end
    end
  end
  if c.grads and #bad == 0 then
    local loss
    for i, w in ipairs(c.w) do
      if w then
        local term = (outs[i] * T(w)):sum()
        loss = loss and loss + term or term
      end
    end
    local bok, berr = pcall(function() loss:backward() end)
    if not bok then fail("backward: %s", tostring(berr)); return bad end
    for k, w in pairs(c.grads) do
      local g = env[k].grad or ember.zeros_like(env[k])
      local why = compare(g, w, c.tol)
      if why then fail("grad of input %s: %s", k, why) end
    end
    local gsd = grad_state_dict(m)
    for k, w in pairs(c.param_grads) do
      local why = "no such parameter"
      if gsd[k] then why = compare(gsd[k], w, c.tol) end
      if why then fail("grad of %s: %s", k, why) end
    end
  end
  return bad
end

-- float32: the module as built (float32) with torch's state dict loaded (converted) and the
-- inputs in float32 -- the paths float64 does not take (oneDNN convolutions, the fused
-- attention kernel, vectorised rows) -- against torch's float64 results to 1e-5 of each
-- tensor's largest value (at least 1).
local TOL32 = 1e-5

local function close32(got, want)
  if not ember.is_tensor(got) then return "not a tensor: " .. type(got) end
  if shape_str(got.shape) ~= shape_str(want.shape) then
    return ("shape %s, want %s"):format(shape_str(got.shape), shape_str(want.shape))
  end
  if want.dtype ~= "float64" then return compare(got, want) end
  local g, scale = values(got), 1
  for _, w in ipairs(want.data) do if w == w and math.abs(w) ~= math.huge then scale = math.max(scale, math.abs(w)) end end
  for i, w in ipairs(want.data) do
    local v = g[i]
    if w ~= w or math.abs(w) == math.huge then
      if not (v ~= v and w ~= w) and v ~= w then return ("element %d: %s, want %s"):format(i, tostring(v), tostring(w)) end
    elseif v ~= v or math.abs(v - w) > TOL32 * scale then
      return ("element %d: %.9g, want %.9g (scale %.3g)"):format(i, v, w, scale)
    end
  end
  return nil
end

local function run_case32(c)
  local bad = {}
  local function fail(fmt, ...) bad[#bad + 1] = fmt:format(...) end
  local env = setmetatable({ ember = ember, nn = nn }, { __index = _G })
  local nograd = {}
  for _, k in ipairs(c.nograd or {}) do nograd[k] = true end
  for k, v in pairs(c.inputs) do
    local t = T(v)
    if t.dtype == "float64" then t = t:float() end
    if c.grads and c.grads[k] and not nograd[k] then t:requires_grad_() end
    env[k] = t
  end
  local ok, m = pcall(build, c, env)
  if not ok then fail("constructor: %s", tostring(m)); return bad end
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v) end
  local lok, lerr = pcall(m.load_state_dict, m, sd)
  if not lok then fail("load_state_dict: %s", tostring(lerr)); return bad end
  m:train(c.mode == "train")
  env.m = m
  local f = assert(load((c.call:gsub(":double%(%)", ":float()")), "=" .. c.name .. ".call", "t", env))
  local cok, r = pcall(function() return table.pack(f()) end)
  if not cok then fail("call: %s", tostring(r)); return bad end
  local outs = flatten(r)
  if #outs ~= #c.want then fail("%d outputs, want %d", #outs, #c.want); return bad end
  for i, w in ipairs(c.want) do
    local why = close32(outs[i], w)
    if why then fail("output %d: %s", i, why) end
  end
  if c.grads and #bad == 0 then
    local loss
    for i, w in ipairs(c.w) do
      if w then
        local term = (outs[i] * T(w):to(outs[i].dtype)):sum()
        loss = loss and loss + term or term
      end
    end
    local bok, berr = pcall(function() loss:backward() end)
    if not bok then fail("backward: %s", tostring(berr)); return bad end
    for k, w in pairs(c.grads) do
      local why = close32(env[k].grad or ember.zeros_like(env[k]), w)
      if why then fail("grad of input %s: %s", k, why) end
    end
    local gsd = grad_state_dict(m)
    for k, w in pairs(c.param_grads) do
      local why = "no such parameter"
      if gsd[k] then why = close32(gsd[k], w) end
      if why then fail("grad of %s: %s", k, why) end
    end
  end
  return bad
end

describe("ember.nn's modules against torch.nn 1.13 (tests/gen_nn_module_sweep.py)", function()
  it("in float32 (the modules as built) agree with torch's float64 results to 1e-5", function()
    local bad = {}
    for _, c in ipairs(fx.cases) do
      if not c.known then
        local why = run_case32(c)
        if #why > 0 then bad[#bad + 1] = ("%s: %s\n    %s"):format(c.name, c.ctor, table.concat(why, "\n    ")) end
      end
    end
    if #bad > 0 then error(("%d of %d cases disagree in float32:\n%s"):format(#bad, #fx.cases, table.concat(bad, "\n")), 0) end
  end)

  it("builds, loads, runs and differentiates every case as torch", function()
    local bad, known = {}, 0
    for _, c in ipairs(fx.cases) do
      local why = run_case(c)
      if c.known and #why > 0 then
        known = known + 1
      elseif c.known then
        bad[#bad + 1] = ("%s: agrees now: drop its known mark (%s)"):format(c.name, c.known)
      elseif #why > 0 then
        bad[#bad + 1] = ("%s: %s\n    %s"):format(c.name, c.ctor, table.concat(why, "\n    "))
      end
    end
    if #bad > 0 then
      error(("%d of %d cases disagree with torch.nn (%d known differences):\n%s"):format(
        #bad, #fx.cases, known, table.concat(bad, "\n")), 0)
    end
  end)

  it("initialises every parameter as torch does (bounds, mean, std)", function()
    local bad = {}
    for _, c in ipairs(fx.inits) do
      local before = #bad
      -- as many draws as the generator pooled (small parameters' statistics steady)
      local ok, m = pcall(build, c, setmetatable({ ember = ember, nn = nn }, { __index = _G }))
      local draws = { ok and m:torch_state_dict() or nil }
      for i = 2, ok and c.reps or 0 do draws[i] = build(c, setmetatable({ ember = ember, nn = nn }, { __index = _G })):torch_state_dict() end
      if not ok then
        bad[#bad + 1] = c.name .. ": constructor: " .. tostring(m)
      else
        local tsd = m:torch_state_dict()
        for k, s in pairs(c.stats) do
          local p = tsd[k]
          if not p then
            bad[#bad + 1] = ("%s: no parameter %s"):format(c.name, k)
          else
            local parts = {}
            for i, d in ipairs(draws) do parts[i] = d[k]:double():reshape(-1) end
            p = ember.cat(parts)
            local mn, mx, mean = p:min():item(), p:max():item(), p:mean():item()
            local std = p:numel() > 1 and p:std():item() or 0
            local spread = math.max(s.max - s.min, 1e-12)
            -- a constant stays that constant; a draw has torch's range and std
            -- (>= 4000 values: a uniform draw reaches its bounds within 0.5%,
            -- a normal one's extremes vary more)
            local why
            local normal = s.max > 2.5 * s.std -- a uniform draw's max is sqrt(3) std
            if s.std == 0 then
              if mn ~= s.min or mx ~= s.max then why = ("constant %g..%g, torch's %g"):format(mn, mx, s.min) end
            elseif math.abs(mn - s.min) > (normal and 0.15 or 0.02) * spread
              or math.abs(mx - s.max) > (normal and 0.15 or 0.02) * spread then
              why = ("range %.4g..%.4g, torch's %.4g..%.4g"):format(mn, mx, s.min, s.max)
            elseif math.abs(std - s.std) > 0.06 * s.std then
              why = ("std %.4g, torch's %.4g"):format(std, s.std)
            elseif math.abs(mean - (math.abs(s.mean) < 4 * s.std / math.sqrt(s.n) and 0 or s.mean))
              > 6 * s.std / math.sqrt(s.n) + 1e-12 then -- a centred draw against 0, else torch's mean
              why = ("mean %.4g, torch's %.4g"):format(mean, s.mean)
            end
            if why then bad[#bad + 1] = ("%s: %s %s"):format(c.name, k, why) end
          end
        end
      end
      if c.known then -- counted, not failed; one that agrees fails
        local agrees = #bad == before
        for i = #bad, before + 1, -1 do bad[i] = nil end
        if agrees then bad[#bad + 1] = ("%s: agrees now: drop its known mark (%s)"):format(c.name, c.known) end
      end
    end
    if #bad > 0 then error(("%d parameters initialised unlike torch's:\n%s"):format(#bad, table.concat(bad, "\n")), 0) end
  end)

  it("PyTorch's stack form (layer, num_layers [, norm]): copies that start equal to the layer, in its dtype", function()
    for _, c in ipairs {
      { nn.TransformerEncoder, nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 }) },
      { nn.TransformerDecoder, nn.TransformerDecoderLayer(8, 2, { dim_feedforward = 16, batch_first = false }) },
    } do
      local layer = c[2]:double():eval()
      local stack = c[1](layer, 3)
      assert.is_nil(stack.norm) -- none unless given, as torch's
      assert.are.equal(3, #stack.layers)
      local want = layer:state_dict()
      for i = 1, 3 do
        local l = stack.layers[i]
        assert.is_false(l.training)
        assert.are_not.equal(layer, l)
        for k, v in pairs(l:state_dict()) do
          assert.are.equal("float64", v.dtype)
          assert.is_true(ember.equal(v, want[k]), k)
        end
      end
      -- separate copies: training one leaves the others
      ember.no_grad(function() stack.layers[1].norm1.weight:fill_(3) end)
      assert.are.equal(1, stack.layers[2].norm1.weight[1]:item())
      local norm = nn.LayerNorm(8):double()
      assert.are.equal(norm, c[1](layer, 2, norm).norm)
      assert.are.equal(norm, c[1](layer, 2, { norm = norm, enable_nested_tensor = false }).norm)
    end
  end)

  it("takes PyTorch's positional forward arguments, and says when they are mixed with a table", function()
    local parity = require "tests.lua.helpers.parity"
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0 })
    local x = ember.randn(2, 5, 8)
    parity.raises_here(function() layer(x, ember.zeros(5, 5), {}) end,
      "TransformerEncoderLayer.forward: argument 2: an options table comes alone")
    parity.raises_here(function() layer(x, nil, nil, nil, nil) end,
      "TransformerEncoderLayer.forward: takes an options table, or at most 3 of PyTorch's positional arguments")
    local mha = nn.MultiheadAttention(8, 2)
    local _, w = mha(x, x, x, nil, false)
    assert.is_nil(w) -- need_weights = false, positionally
  end)

  it("refuses torch options it does not have, naming the module and the option", function()
    local bad = {}
    for _, c in ipairs(fx.refuse) do
      local f = assert(load("local r = " .. c.ctor .. "\nreturn r", "=refusal", "t", setmetatable({ ember = ember, nn = nn }, { __index = _G })))
      local ok, err = pcall(f)
      if ok then
        bad[#bad + 1] = c.ctor .. ": accepted"
      else
        for _, n in ipairs(c.names) do
          if not tostring(err):find(n, 1, true) then bad[#bad + 1] = ("%s: error does not name %s: %s"):format(c.ctor, n, tostring(err)) end
        end
        if not tostring(err):find("^refusal:1:") then bad[#bad + 1] = c.ctor .. ": error not at the caller's line: " .. tostring(err) end
      end
    end
    if #bad > 0 then error(table.concat(bad, "\n"), 0) end
  end)
end)
