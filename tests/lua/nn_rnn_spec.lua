-- nn.RNN (tanh, relu), nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell
-- (lua/ember/nn/_rnn.lua and one file per module) against PyTorch 1.13
-- through the committed fixtures (tests/gen_nn_fixtures.py rnn_cases() ->
-- tests/fixtures/nn_rnn.lua): outputs, h_n / c_n and the gradients of the
-- input, hx and every parameter in float64 (1e-10) and float32 (1e-4);
-- parameter names, order and state-dict keys as PyTorch's; its initialisation
-- bounds; float64 gradchecks; one input-projection product per layer and
-- direction; dropout between layers in training only; printing; errors at
-- the caller's line naming the module.
local ember = require "ember"
local nn = require "ember.nn"
local gradcheck = require "tests.lua.helpers.gradcheck"
local parity = require "tests.lua.helpers.parity"

local fixtures = dofile("tests/fixtures/nn_rnn.lua")
local T, check, raises_here = parity.T, parity.check, parity.raises_here
local F64 = { dtype = "float64" }

local function make(c, dtype)
  local o = { dtype = dtype }
  for k, v in pairs(c.options) do o[k] = v end
  return nn[c.kind](c.input_size, c.hidden_size, o)
end

local function maxdiff(a, b) return (a:double() - b:double()):abs():max():item() end

-- Runs fixture case c in `dtype`: loads PyTorch's state, runs forward on the
-- fixture's inputs, backpropagates sum(out * R) + sum(h_n * R_h) + sum(c_n * R_c)
-- and compares everything against PyTorch's float64 values within `tol`.
local function run_case(c, dtype, tol)
  local m = make(c, dtype)
  assert.are.same(c.param_names, { table.unpack(m:parameter_names()) }, c.name .. " parameter order")
  local want = { table.unpack(c.param_names) }
  table.sort(want)
  assert.are.same(want, parity.sorted_keys(m:state_dict()), c.name .. " state_dict keys")
  local sd = {}
  for k, v in pairs(c.state) do sd[k] = T(v):to(dtype) end
  m:load_state_dict(sd)
  m:train(c.train)
  local inputs = {}
  for k, v in pairs(c.inputs) do inputs[k] = T(v):to(dtype):requires_grad_() end
  local lstm = c.kind == "LSTM" or c.kind == "LSTMCell"
  local hx
  if inputs.h0 then hx = lstm and { inputs.h0, inputs.c0 } or inputs.h0 end
  local out, h_n, c_n
  if c.kind == "LSTM" then
    local state
    out, state = m(inputs.x, hx)
    h_n, c_n = state[1], state[2]
  elseif c.kind == "LSTMCell" then
    out, c_n = m(inputs.x, hx)
  elseif c.kind == "GRUCell" then
    out = m(inputs.x, hx)
  else
    out, h_n = m(inputs.x, hx)
  end
  local what = c.name .. " " .. dtype
  assert.are.equal(dtype, out.dtype, what)
  check(what .. " output", out, T(c.out), tol)
  local loss = (out * T(c.R):to(dtype)):sum()
  if c.h_n then
    check(what .. " h_n", h_n, T(c.h_n), tol)
    loss = loss + (h_n * T(c.R_h):to(dtype)):sum()
  end
  if c.c_n then
    check(what .. " c_n", c_n, T(c.c_n), tol)
    loss = loss + (c_n * T(c.R_c):to(dtype)):sum()
  end
  loss:backward()
  local n = 0
  for k, g in pairs(c.grad_inputs) do
    n = n + 1
    check(what .. " grad " .. k, inputs[k].grad, T(g), tol)
  end
  assert.are.equal(#parity.sorted_keys(inputs), n, what .. " every input's gradient compared")
  local params = m:named_parameters()
  for _, name in ipairs(c.param_names) do
    check(what .. " grad " .. name, params[name].grad, T(c.grads[name]), tol)
  end
end

describe("recurrent modules match PyTorch 1.13", function()
  it("the fixtures cover every module and option", function()
    local kinds, seen = {}, {}
    for _, c in ipairs(fixtures.cases) do
      kinds[c.kind] = true
      for k, v in pairs(c.options) do seen[k .. "=" .. tostring(v)] = true end
      if c.inputs.h0 then seen.hx = true end
    end
    for _, k in ipairs { "RNN", "LSTM", "GRU", "LSTMCell", "GRUCell" } do assert.is_true(kinds[k], k) end
    for _, k in ipairs { "num_layers=2", "bidirectional=true", "batch_first=true", "bias=false", "nonlinearity=relu",
                         "dropout=0.5", "hx" } do
      assert.is_true(seen[k], k)
    end
  end)

  for _, c in ipairs(fixtures.cases) do
    it(c.name .. " (float64, 1e-10)", function() run_case(c, "float64", 1e-10) end)
    it(c.name .. " (float32, 1e-4)", function() run_case(c, "float32", 1e-4) end)
  end
end)

describe("recurrent modules: float64 gradchecks", function()
  -- every parameter is an input of the check too: perturbed in place, it
  -- changes the module's output, and its analytic gradient is compared
  local function gc(name, m, x, hx, unpack_state)
    m:to("float64")
    local params = m:parameters()
    local inputs = { x }
    for _, t in ipairs(hx) do inputs[#inputs + 1] = t end
    for _, p in ipairs(params) do inputs[#inputs + 1] = p end
    local nh = #hx
    gradcheck.check(function(xx, ...)
      local states = { ... }
      local out, st = m(xx, unpack_state(table.unpack(states, 1, nh)))
      if type(st) == "table" then return { out, st[1], st[2] } end
      return { out, st }
    end, inputs, { name = name })
  end

  it("a 2-layer bidirectional LSTM, with {h_0, c_0}", function()
    ember.manual_seed(11)
    local h0, c0 = ember.randn({ 4, 2, 3 }, F64) * 0.5, ember.randn({ 4, 2, 3 }, F64) * 0.5
    gc("LSTM", nn.LSTM(2, 3, { num_layers = 2, bidirectional = true }), ember.randn({ 3, 2, 2 }, F64), { h0, c0 },
      function(h, c) return { h, c } end)
  end)

  it("a 2-layer batch-first GRU, with h_0", function()
    ember.manual_seed(12)
    gc("GRU", nn.GRU(2, 3, { num_layers = 2, batch_first = true }), ember.randn({ 2, 3, 2 }, F64),
      { ember.randn({ 2, 2, 3 }, F64) * 0.5 }, function(h) return h end)
  end)

  it("the cells", function()
    ember.manual_seed(13)
    local cell = nn.LSTMCell(3, 2, { dtype = "float64" })
    local inputs = { ember.randn({ 2, 3 }, F64), ember.randn({ 2, 2 }, F64), ember.randn({ 2, 2 }, F64) }
    for _, p in ipairs(cell:parameters()) do inputs[#inputs + 1] = p end
    gradcheck.check(function(x, h, c) return { cell(x, { h, c }) } end, inputs, { name = "LSTMCell" })
    local gcell = nn.GRUCell(3, 2, { dtype = "float64" })
    inputs = { ember.randn({ 2, 3 }, F64), ember.randn({ 2, 2 }, F64) }
    for _, p in ipairs(gcell:parameters()) do inputs[#inputs + 1] = p end
    gradcheck.check(function(x, h) return gcell(x, h) end, inputs, { name = "GRUCell" })
  end)
end)

describe("recurrent modules", function()
  it("register PyTorch's parameters with its shapes and initialisation U(-1/sqrt(H), 1/sqrt(H))", function()
    ember.manual_seed(1)
    local m = nn.GRU(5, 16, { num_layers = 2, bidirectional = true })
    local shapes = {
      weight_ih_l0 = { 48, 5 }, weight_hh_l0 = { 48, 16 }, bias_ih_l0 = { 48 }, bias_hh_l0 = { 48 },
      weight_ih_l1 = { 48, 32 }, weight_ih_l1_reverse = { 48, 32 }, weight_hh_l1_reverse = { 48, 16 },
    }
    local bound = 1 / math.sqrt(16)
    for name, p in pairs(m:named_parameters()) do
      if shapes[name] then assert.are.same(shapes[name], { table.unpack(p.shape) }, name) end
      assert.is_true(p.requires_grad, name)
      assert.is_true(p:abs():max():item() <= bound, name)
      assert.is_true(p:abs():max():item() > 0.8 * bound, name) -- spread over the range
    end
    assert.are.equal(16, #m:parameters())
    assert.are.same({ "weight_ih_l0", "weight_hh_l0" }, { table.unpack(nn.RNN(2, 3, { bias = false }):parameter_names()) })
    assert.are.same({ "weight_ih", "weight_hh", "bias_ih", "bias_hh" }, { table.unpack(nn.LSTMCell(2, 3):parameter_names()) })
    assert.are.same({ 12, 2 }, { table.unpack(nn.LSTMCell(2, 3).weight_ih.shape) })
    assert.are.same({ 9, 3 }, { table.unpack(nn.GRUCell(2, 3).weight_hh.shape) })
    assert.are.equal("float64", nn.LSTM(2, 3, { dtype = "float64" }).weight_hh_l0.dtype)
  end)

  it("project every time step's input in one product per layer and direction", function()
    local m = nn.LSTM(3, 4, { num_layers = 2, bidirectional = true })
    local x = ember.randn(7, 2, 3)
    local prof = ember.profile(function() return m(x) end)
    local gemms = 0
    for _, s in ipairs(prof:stats()) do
      if s.name == "gemm" and s.phase == "forward" then gemms = gemms + s.calls end
    end
    -- 4 layer-directions: 1 input projection + 7 recurrent products each
    assert.are.equal(4 * (1 + 7), gemms)
  end)

  it("carry the state: two halves with the state passed on equal the whole sequence", function()
    ember.manual_seed(2)
    for _, kind in ipairs { "LSTM", "GRU", "RNN" } do
      local m = nn[kind](3, 4, { num_layers = 2, batch_first = true, dtype = "float64" })
      local x = ember.randn({ 2, 6, 3 }, F64)
      local whole, st = m(x)
      local a, st1 = m(x:narrow(2, 1, 2))
      local b, st2 = m(x:narrow(2, 3, 4), st1)
      assert.is_true(maxdiff(ember.cat({ a, b }, 2), whole) < 1e-14, kind)
      if kind == "LSTM" then
        assert.is_true(maxdiff(st2[1], st[1]) < 1e-14 and maxdiff(st2[2], st[2]) < 1e-14, kind)
      else
        assert.is_true(maxdiff(st2, st) < 1e-14, kind)
      end
      -- the cells are one step of the 1-layer module with the same weights
    end
    local lstm, cell = nn.LSTM(3, 4, { dtype = "float64" }), nn.LSTMCell(3, 4, { dtype = "float64" })
    cell:load_state_dict({ weight_ih = lstm.weight_ih_l0, weight_hh = lstm.weight_hh_l0, bias_ih = lstm.bias_ih_l0,
                           bias_hh = lstm.bias_hh_l0 })
    local x = ember.randn({ 3, 2, 3 }, F64)
    local out, st = lstm(x)
    local h, c
    for t = 1, 3 do h, c = cell(x[t], h and { h, c }) end
    assert.is_true(maxdiff(out[3], h) < 1e-14 and maxdiff(st[2][1], c) < 1e-14)
    local gru, gcell = nn.GRU(3, 4, { dtype = "float64" }), nn.GRUCell(3, 4, { dtype = "float64" })
    gcell:load_state_dict({ weight_ih = gru.weight_ih_l0, weight_hh = gru.weight_hh_l0, bias_ih = gru.bias_ih_l0,
                            bias_hh = gru.bias_hh_l0 })
    local gout = gru(x)
    h = nil
    for t = 1, 3 do h = gcell(x[t], h) end
    assert.is_true(maxdiff(gout[3], h) < 1e-14)
  end)

  it("apply dropout between layers in training mode only, never after the last layer", function()
    ember.manual_seed(3)
    local x = ember.randn(5, 2, 3)
    local m = nn.GRU(3, 8, { num_layers = 2, dropout = 0.5 })
    m:eval()
    local a, b = m(x), m(x)
    assert.are.equal(0, maxdiff(a, b))
    m:train()
    assert.is_true(maxdiff(m(x), a) > 1e-3)
    -- dropout = 1 zeroes the second layer's input: its output is that of a zero sequence
    local full = nn.LSTM(3, 4, { num_layers = 2, dropout = 1 })
    local top = nn.LSTM(8, 4)
    top:load_state_dict({ weight_ih_l0 = ember.zeros(16, 8), weight_hh_l0 = full.weight_hh_l1,
                          bias_ih_l0 = full.bias_ih_l1, bias_hh_l0 = full.bias_hh_l1 })
    assert.is_true(maxdiff(full(x), top(ember.randn(5, 2, 8))) < 1e-6)
    -- one layer: dropout has nothing to act on
    local one = nn.RNN(3, 4, { dropout = 0.9 })
    local y1 = one(x)
    one:eval()
    assert.are.equal(0, maxdiff(y1, one(x)))
  end)

  it("convert with :to(), state dicts round-trip, outputs keep the input's layout", function()
    local m = nn.LSTM(3, 4, { batch_first = true, bidirectional = true })
    m:double()
    assert.are.equal("float64", m.weight_ih_l0_reverse.dtype)
    local out, st = m(ember.randn({ 2, 5, 3 }, F64))
    assert.are.same({ 2, 5, 8 }, { table.unpack(out.shape) })
    assert.are.same({ 2, 2, 4 }, { table.unpack(st[1].shape) })
    local copy = nn.LSTM(3, 4, { batch_first = true, bidirectional = true, dtype = "float64" })
    copy:load_state_dict(m:state_dict())
    local x = ember.randn({ 2, 5, 3 }, F64)
    assert.are.equal(0, maxdiff(m(x), copy(x)))
    local y, h = nn.GRU(3, 4, { num_layers = 3 })(ember.randn(6, 3))
    assert.are.same({ 6, 4 }, { table.unpack(y.shape) })
    assert.are.same({ 3, 4 }, { table.unpack(h.shape) })
    assert.are.same({ 4 }, { table.unpack(nn.GRUCell(3, 4)(ember.randn(3)).shape) })
  end)

  it("print as PyTorch's", function()
    assert.are.equal("LSTM(10, 20)", tostring(nn.LSTM(10, 20)))
    assert.are.equal("LSTM(10, 20, num_layers=2, bias=false, batch_first=true, dropout=0.1, bidirectional=true)",
      tostring(nn.LSTM(10, 20, { num_layers = 2, bias = false, batch_first = true, dropout = 0.1, bidirectional = true })))
    assert.are.equal("GRU(3, 4, num_layers=3)", tostring(nn.GRU(3, 4, { num_layers = 3 })))
    assert.are.equal("RNN(3, 4)", tostring(nn.RNN(3, 4)))
    assert.are.equal("RNN(3, 4, nonlinearity=relu)", tostring(nn.RNN(3, 4, { nonlinearity = "relu" })))
    assert.are.equal("LSTMCell(3, 4)", tostring(nn.LSTMCell(3, 4)))
    assert.are.equal("GRUCell(3, 4, bias=false)", tostring(nn.GRUCell(3, 4, { bias = false })))
    local seq = nn.Sequential(nn.Linear(2, 3), nn.GRU(3, 4))
    assert.truthy(tostring(seq):find("(2): GRU(3, 4)", 1, true))
  end)
end)

describe("recurrent modules raise clear errors at the caller's line", function()
  it("for bad constructor arguments and options", function()
    raises_here(function() nn.LSTM(0, 4) end, "nn.LSTM: input_size must be a positive integer, got 0")
    raises_here(function() nn.GRU(3, 2.5) end, "nn.GRU: hidden_size must be a positive integer, got 2.5")
    raises_here(function() nn.RNN(3, 4, { num_layer = 2 }) end,
      "nn.RNN: unknown option 'num_layer' (options: batch_first, bias, bidirectional, device, dropout, dtype, "
      .. "nonlinearity, num_layers)")
    raises_here(function() nn.GRU(3, 4, { proj_size = 2 }) end, "nn.GRU: unknown option 'proj_size'")
    raises_here(function() nn.LSTM(3, 4, { proj_size = 4 }) end,
      "nn.LSTM: proj_size must be smaller than hidden_size (4), got 4")
    raises_here(function() nn.LSTM(3, 4, { proj_size = -1 }) end, "nn.LSTM: proj_size must be an integer >= 0, got -1")
    raises_here(function() nn.LSTM(3, 4, { num_layers = 0 }) end, "nn.LSTM: num_layers must be a positive integer, got 0")
    raises_here(function() nn.LSTM(3, 4, { dropout = 1.5 }) end, "nn.LSTM: dropout must be a number in [0, 1]")
    raises_here(function() nn.RNN(3, 4, { nonlinearity = "sigmoid" }) end,
      "nn.RNN: nonlinearity must be \"tanh\" or \"relu\", got sigmoid")
    raises_here(function() nn.GRU(3, 4, { bidirectional = 1 }) end, "nn.GRU: bidirectional must be true or false, got 1")
    raises_here(function() nn.LSTMCell(3, 4, { num_layers = 2 }) end, "nn.LSTMCell: unknown option 'num_layers'")
    raises_here(function() nn.GRUCell(-1, 4) end, "nn.GRUCell: input_size must be a positive integer, got -1")
  end)

  it("for inputs and states of the wrong shape or dtype", function()
    local lstm = nn.LSTM(3, 4, { num_layers = 2 })
    raises_here(function() lstm(ember.randn(5, 2, 6)) end,
      "LSTM.forward: input's last dim is 6, expected input_size=3 (input shape [5, 2, 6])")
    raises_here(function() lstm(ember.randn(5)) end,
      "LSTM.forward: expected a 3-d input [L, N, H_in] or a 2-d unbatched one [L, H_in], got shape [5]")
    raises_here(function() lstm("x") end, "LSTM.forward: expected an input tensor [L, N, H_in]")
    raises_here(function() lstm(ember.randn(5, 2, 3), ember.zeros(2, 2, 4)) end,
      "LSTM.forward: hx must be a table {h_0, c_0} of two tensors [2, 2, 4], got a tensor")
    raises_here(function() lstm(ember.randn(5, 2, 3), { ember.zeros(1, 2, 4), ember.zeros(2, 2, 4) }) end,
      "LSTM.forward: h_0 has shape [1, 2, 4], expected [2, 2, 4] (num_layers * num_directions, batch, hidden_size)")
    raises_here(function() lstm(ember.randn(5, 3), { ember.zeros(2, 1, 4), ember.zeros(2, 1, 4) }) end,
      "LSTM.forward: h_0 has shape [2, 1, 4], expected [2, 4] (num_layers * num_directions, hidden_size, for an unbatched input)")
    raises_here(function() lstm(ember.randn(5, 2, 3), { ember.zeros(2, 2, 4), ember.zeros(2, 2, 5) }) end,
      "LSTM.forward: c_0 has shape [2, 2, 5], expected [2, 2, 4]")
    raises_here(function() lstm(ember.randn({ 5, 2, 3 }, F64)) end,
      "LSTM.forward: input is float64 but the weights are float32: convert it with :to(\"float32\")")
    raises_here(function() lstm(ember.zeros({ 5, 2, 3 }, { dtype = "int64" })) end,
      "LSTM.forward: input must be floating point (the weights are float32), got int64")
    raises_here(function() lstm(ember.zeros(0, 2, 3)) end, "LSTM.forward: the sequence is empty (input shape [0, 2, 3])")
    local gru = nn.GRU(3, 4, { batch_first = true, bidirectional = true })
    raises_here(function() gru(ember.randn(2, 5, 4)) end,
      "GRU.forward: input's last dim is 4, expected input_size=3 (input shape [2, 5, 4])")
    raises_here(function() gru(ember.randn(2, 5, 3), ember.zeros(1, 2, 4)) end,
      "GRU.forward: hx has shape [1, 2, 4], expected [2, 2, 4]")
    raises_here(function() gru(ember.randn(2, 5, 3), ember.zeros({ 2, 2, 4 }, F64)) end,
      "GRU.forward: hx is float64, the input is float32")
    raises_here(function() gru(ember.randn(2, 5, 3), { ember.zeros(2, 2, 4) }) end,
      "GRU.forward: hx must be a tensor [2, 2, 4], got table")
    raises_here(function() nn.RNN(3, 4)(ember.randn(1, 5, 2, 3)) end, "RNN.forward: expected a 3-d input")
    raises_here(function() nn.LSTMCell(3, 4)(ember.randn(2, 5)) end,
      "LSTMCell.forward: input's last dim is 5, expected input_size=3 (input shape [2, 5])")
    raises_here(function() nn.LSTMCell(3, 4)(ember.randn(2, 3), { ember.zeros(2, 4) }) end,
      "LSTMCell.forward: hx must be a table {h_0, c_0} of two tensors [2, 4], got table")
    raises_here(function() nn.GRUCell(3, 4)(ember.randn(3), ember.zeros(1, 4)) end,
      "GRUCell.forward: hx has shape [1, 4], expected [4] (hidden_size, for an unbatched input)")
    raises_here(function() nn.GRUCell(3, 4)(ember.randn(2, 2, 3)) end, "GRUCell.forward: expected a 2-d input")
  end)
end)
