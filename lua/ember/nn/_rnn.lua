-- nn/_rnn.lua (internal): the code nn.RNN, nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell
-- share, composed from ember ops (matmul, sigmoid, tanh, relu, chunk, stack,
-- cat) so that autograd gives the backward. PyTorch 1.13's layout and
-- formulas throughout:
--
--  * parameters per layer k (0-based in the name, as PyTorch) and direction:
--    weight_ih_lk [G*H, in], weight_hh_lk [G*H, H], bias_ih_lk, bias_hh_lk
--    [G*H] ("_reverse" appended for the backward direction), registered in
--    that order, layer by layer, forward direction first; G gates stacked
--    in PyTorch's order (LSTM i, f, g, o; GRU r, z, n; RNN 1); every one
--    uniform in +-1/sqrt(hidden_size). The cells: weight_ih, weight_hh,
--    bias_ih, bias_hh.
--  * a layer projects the inputs of all time steps at once (one matmul of
--    [L*N, in] by W_ih^T, plus b_ih) and loops over time only for the
--    recurrent product h W_hh^T + b_hh and the gates.
--  * input [L, N, H_in] (batch_first: [N, L, H_in]) or unbatched [L, H_in];
--    states [D*num_layers, N, H] (never batch-first) or unbatched
--    [D*num_layers, H]; dropout on every layer's output but the last, in
--    training mode only.
--  * LSTM's proj_size P > 0: each step's h = (o * tanh(c)) W_hr^T, with
--    weight_hr_lk [P, H] registered after the layer's biases; h, the
--    outputs and weight_hh's columns are then P wide (c stays H), as PyTorch.
local errors = require "ember._errors"
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local packed = require "ember.nn._packed"

local raise, shape_str = errors.raise, errors.shape_str

local M = {}

-- gates per mode
local GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

local function positive_int(who, v, what)
  if math.type(v) ~= "integer" or v < 1 then
    raise("%s: %s must be a positive integer, got %s", who, what, tostring(v))
  end
  return v
end

local function boolean(who, v, what, default)
  if v == nil then return default end
  if type(v) ~= "boolean" then raise("%s: %s must be true or false, got %s", who, what, tostring(v)) end
  return v
end

-- h W_hh^T (+ b_hh): the recurrent product of one step, [N, G*H].
local function hidden_proj(h, whh_t, bhh)
  local g = h:matmul(whh_t)
  if bhh then g = g + bhh end
  return g
end

-- One time step of each mode: xg = x W_ih^T + b_ih [N, G*H], h [N, H], c [N, H]
-- (LSTM) -> h' (, c'), PyTorch's formulas.
local STEP = {}
function STEP.RNN_TANH(xg, h, _, whh_t, bhh) return (xg + hidden_proj(h, whh_t, bhh)):tanh() end
function STEP.RNN_RELU(xg, h, _, whh_t, bhh) return (xg + hidden_proj(h, whh_t, bhh)):relu() end
function STEP.LSTM(xg, h, c, whh_t, bhh)
  local g = (xg + hidden_proj(h, whh_t, bhh)):chunk(4, 2)
  local i, f, cand, o = g[1]:sigmoid(), g[2]:sigmoid(), g[3]:tanh(), g[4]:sigmoid()
  c = f * c + i * cand
  return o * c:tanh(), c
end
function STEP.GRU(xg, h, _, whh_t, bhh)
  local xi = xg:chunk(3, 2)
  local hh = hidden_proj(h, whh_t, bhh):chunk(3, 2)
  local r = (xi[1] + hh[1]):sigmoid()
  local z = (xi[2] + hh[2]):sigmoid()
  local n = (xi[3] + r * hh[3]):tanh() -- n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
  return n + z * (h - n) -- (1 - z) * n + z * h
end

-- Registers weight_ih<sfx>, weight_hh<sfx>, bias_ih<sfx>, bias_hh<sfx>.
local function add_params(self, sfx, gate_size, in_size, hidden, bias, topts, hidden_size)
  local bound = 1 / math.sqrt(hidden_size or hidden) -- hidden: h's width (proj_size with projections)
  self:register_parameter("weight_ih" .. sfx, ember.uniform({ gate_size, in_size }, -bound, bound, topts))
  self:register_parameter("weight_hh" .. sfx, ember.uniform({ gate_size, hidden }, -bound, bound, topts))
  if bias then
    self:register_parameter("bias_ih" .. sfx, ember.uniform({ gate_size }, -bound, bound, topts))
    self:register_parameter("bias_hh" .. sfx, ember.uniform({ gate_size }, -bound, bound, topts))
  end
end

-- nn.RNN's and nn.RNNCell's nonlinearity option ("tanh", the default, or
-- "relu"), kept as self.nonlinearity; returns the mode, "RNN_TANH" or "RNN_RELU".
local function rnn_nonlinearity(self, who, opts)
  local nl = opts.nonlinearity == nil and "tanh" or opts.nonlinearity
  if nl ~= "tanh" and nl ~= "relu" then
    raise("%s: nonlinearity must be \"tanh\" or \"relu\", got %s", who, tostring(nl))
  end
  self.nonlinearity = nl
  return nl == "tanh" and "RNN_TANH" or "RNN_RELU"
end

-- The name suffix of layer `layer` (1-based), direction `dir` (1 or 2).
local function suffix(layer, dir) return ("_l%d%s"):format(layer - 1, dir == 2 and "_reverse" or "") end

-- The multi-layer modules' constructor: `name` "RNN", "LSTM" or "GRU";
-- `mode` "RNN_TANH", "RNN_RELU" (RNN: from opts.nonlinearity), "LSTM", "GRU".
function M.init(self, name, mode, input_size, hidden_size, opts, option_names)
  local who = "nn." .. name
  positive_int(who, input_size, "input_size")
  positive_int(who, hidden_size, "hidden_size")
  opts = Module.check_options(who, opts, option_names)
  local num_layers = opts.num_layers == nil and 1 or positive_int(who, opts.num_layers, "num_layers")
  local dropout = opts.dropout == nil and 0 or opts.dropout
  if type(dropout) ~= "number" or not (dropout >= 0 and dropout <= 1) then
    raise("%s: dropout must be a number in [0, 1] (the probability of zeroing an element), got %s", who,
      tostring(dropout))
  end
  if name == "RNN" then mode = rnn_nonlinearity(self, who, opts) end
  local proj = opts.proj_size == nil and 0 or opts.proj_size
  if math.type(proj) ~= "integer" or proj < 0 then
    raise("%s: proj_size must be an integer >= 0, got %s", who, tostring(proj))
  end
  if proj >= hidden_size then
    raise("%s: proj_size must be smaller than hidden_size (%d), got %d", who, hidden_size, proj)
  end
  self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
  self.bias = boolean(who, opts.bias, "bias", true)
  self.batch_first = boolean(who, opts.batch_first, "batch_first", false)
  self.bidirectional = boolean(who, opts.bidirectional, "bidirectional", false)
  self.dropout, self.proj_size = dropout, proj
  local topts = { dtype = opts.dtype, device = opts.device }
  local D = self.bidirectional and 2 or 1
  local R = proj > 0 and proj or hidden_size -- the width of h and of the outputs
  for layer = 1, num_layers do
    for dir = 1, D do
      local sfx = suffix(layer, dir)
      add_params(self, sfx, GATES[mode] * hidden_size, layer == 1 and input_size or R * D, R, self.bias, topts,
        hidden_size)
      if proj > 0 then
        local bound = 1 / math.sqrt(hidden_size)
        self:register_parameter("weight_hr" .. sfx, ember.uniform({ proj, hidden_size }, -bound, bound, topts))
      end
    end
  end
end

-- The input's dtype against the weights' (autocast mixes them on purpose).
local function check_dtype(who, x, w, what)
  if not ember.dtype_info(x.dtype).floating then
    raise("%s: %s must be floating point (the weights are %s), got %s", who, what, w.dtype, x.dtype)
  end
  if x.dtype ~= w.dtype and not ember.autocast.enabled() then
    raise("%s: %s is %s but the weights are %s: convert it with :to(\"%s\") (or the module with :to(\"%s\"))",
      who, what, x.dtype, w.dtype, w.dtype, x.dtype)
  end
end

-- A state tensor `t` named `what` against its expected shape.
local function check_state(who, t, what, want, dtype, how)
  if not ember.is_tensor(t) then raise("%s: %s must be a tensor %s, got %s", who, what, shape_str({ shape = want }), type(t)) end
  if shape_str(t) ~= shape_str({ shape = want }) then
    raise("%s: %s has shape %s, expected %s (%s)", who, what, shape_str(t), shape_str({ shape = want }), how)
  end
  if t.dtype ~= dtype and not ember.autocast.enabled() then
    raise("%s: %s is %s, the input is %s", who, what, t.dtype, dtype)
  end
end

-- The initial state hx of a module (want [layers*dirs, N, H]) or a cell
-- ([N, H]): a tensor, or LSTM's table {h_0, c_0}, checked; an unbatched
-- input's state gains its batch dim at `dim`. Returns h_0, c_0.
local function read_state(who, hx, lstm, want, how, dtype, batched, dim, want_c)
  local h, c
  if lstm then
    if type(hx) ~= "table" or ember.is_tensor(hx) or hx[1] == nil or hx[2] == nil then
      raise("%s: hx must be a table {h_0, c_0} of two tensors %s, got %s", who, shape_str({ shape = want }),
        ember.is_tensor(hx) and "a tensor" or type(hx))
    end
    h, c = hx[1], hx[2]
    check_state(who, h, "h_0", want, dtype, how)
    check_state(who, c, "c_0", want_c or want, dtype, how)
  else
    h = hx
    check_state(who, h, "hx", want, dtype, how)
  end
  if not batched then
    h = h:unsqueeze(dim)
    if c then c = c:unsqueeze(dim) end
  end
  return h, c
end

-- One direction of one layer over the whole sequence: x [L, N, in] ->
-- out [L, N, H], h_n [N, H], c_n [N, H] (LSTM). masks (a packed sequence):
-- per step t a bool [N, 1], true where t is within the sequence's length;
-- elsewhere the state is carried unchanged and the output is 0.
local function run_direction(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, reverse, masks, w_hr)
  local L, N = x.shape[1], x.shape[2]
  -- every time step's input projection in one product
  local xp = x:reshape(L * N, x.shape[3]):matmul(w_ih:t())
  if b_ih then xp = xp + b_ih end
  local steps = ember.unbind(xp:view(L, N, xp.shape[2]), 1)
  local whh_t, step, hs = w_hh:t(), STEP[mode], {}
  local whr_t = w_hr and w_hr:t()
  for k = 1, L do
    local t = reverse and L + 1 - k or k
    local h2, c2 = step(steps[t], h, c, whh_t, b_hh)
    if whr_t then h2 = h2:matmul(whr_t) end
    if masks then
      local m = masks[t]
      h = ember.where(m, h2, h)
      if c then c = ember.where(m, c2, c) end
      hs[t] = ember.where(m, h2, 0)
    else
      h, c = h2, c2
      hs[t] = h
    end
  end
  return ember.stack(hs, 1), h, c
end

-- The multi-layer modules' forward: output, h_n (and c_n for LSTM).
function M.forward(self, input, hx)
  local who, lstm = self.__name .. ".forward", self.mode == "LSTM"
  local w0 = self.weight_ih_l0
  local layout = self.batch_first and "[N, L, H_in]" or "[L, N, H_in]"
  local pk = packed.is_packed(input) and input
  if pk then input = pk._padded end -- time-major whatever batch_first
  if not ember.is_tensor(input) then
    raise("%s: expected an input tensor %s or unbatched [L, H_in], got %s", who, layout, type(input))
  end
  if input.ndim ~= 2 and input.ndim ~= 3 then
    raise("%s: expected a 3-d input %s or a 2-d unbatched one [L, H_in], got shape %s", who, layout,
      shape_str(input))
  end
  if pk and input.ndim ~= 3 then
    raise("%s: a packed sequence must hold [L, N, H_in] steps, got shape %s", who, shape_str(input))
  end
  check_dtype(who, input, w0, "input")
  if input.shape[input.ndim] ~= self.input_size then
    raise("%s: input's last dim is %d, expected input_size=%d (input shape %s)", who, input.shape[input.ndim],
      self.input_size, shape_str(input))
  end
  local batched = input.ndim == 3
  local x = input
  if not batched then x = x:unsqueeze(2) elseif self.batch_first and not pk then x = x:transpose(1, 2) end
  local L, N, H = x.shape[1], x.shape[2], self.hidden_size
  local R = (self.proj_size or 0) > 0 and self.proj_size or H -- h's width
  if L == 0 then raise("%s: the sequence is empty (input shape %s)", who, shape_str(input)) end
  local D = self.bidirectional and 2 or 1
  local S = D * self.num_layers
  local h0, c0
  if hx ~= nil then
    local want = batched and { S, N, R } or { S, R }
    local want_c = batched and { S, N, H } or { S, H }
    local how = (batched and "num_layers * num_directions, batch, %s" or
      "num_layers * num_directions, %s, for an unbatched input"):format(R ~= H and "proj_size (h_0; c_0: hidden_size)"
      or "hidden_size")
    h0, c0 = read_state(who, hx, lstm, want, how, input.dtype, batched, 2, want_c)
  end
  local zero = ember.zeros({ N, H }, { dtype = x.dtype, device = x.device })
  local zero_h = R == H and zero or ember.zeros({ N, R }, { dtype = x.dtype, device = x.device })
  local hs = h0 and ember.unbind(h0, 1)
  local cs = c0 and ember.unbind(c0, 1)
  local hn, cn = {}, {}
  local masks
  if pk then
    local len = ember.tensor(pk._lengths, { dtype = "int64", device = x.device }):view(N, 1)
    masks = {}
    for t = 1, L do masks[t] = len:ge(t) end
  end
  for layer = 1, self.num_layers do
    local outs = {}
    for dir = 1, D do
      local k, sfx = (layer - 1) * D + dir, suffix(layer, dir)
      outs[dir], hn[k], cn[k] = run_direction(self.mode, x, hs and hs[k] or zero_h, lstm and (cs and cs[k] or zero),
        self["weight_ih" .. sfx], self["weight_hh" .. sfx], self["bias_ih" .. sfx], self["bias_hh" .. sfx], dir == 2,
        masks, self["weight_hr" .. sfx])
    end
    x = D == 2 and ember.cat(outs, 3) or outs[1]
    if layer < self.num_layers and self.training and self.dropout > 0 then
      x = self.dropout == 1 and x * 0 or ember.dropout(x, self.dropout, true)
    end
  end
  local out, h_n, c_n = x, ember.stack(hn, 1), lstm and ember.stack(cn, 1) or nil
  if pk then
    out = packed.new(out, pk._lengths, pk._sorted)
  elseif not batched then
    out, h_n = out:squeeze(2), h_n:squeeze(2)
    if c_n then c_n = c_n:squeeze(2) end
  elseif self.batch_first then
    out = out:transpose(1, 2)
  end
  if lstm then return out, { h_n, c_n } end
  return out, h_n
end

-- The multi-layer modules' settings, as PyTorch prints them.
function M.extra_repr(self)
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if (self.proj_size or 0) ~= 0 then s = s .. (", proj_size=%d"):format(self.proj_size) end
  if self.num_layers ~= 1 then s = s .. (", num_layers=%d"):format(self.num_layers) end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.dropout ~= 0 then s = s .. (", dropout=%g"):format(self.dropout) end
  if self.bidirectional then s = s .. ", bidirectional=true" end
  if self.nonlinearity and self.nonlinearity ~= "tanh" then s = s .. ", nonlinearity=" .. self.nonlinearity end
  return s
end

-- The cells' constructor: `name` "LSTMCell", "GRUCell" or "RNNCell" (mode
-- "RNN": opts.nonlinearity "tanh" or "relu", as nn.RNN's).
function M.cell_init(self, name, mode, input_size, hidden_size, opts)
  local who = "nn." .. name
  positive_int(who, input_size, "input_size")
  positive_int(who, hidden_size, "hidden_size")
  opts = Module.check_options(who, opts, mode == "RNN" and { "bias", "nonlinearity", "dtype", "device" }
    or { "bias", "dtype", "device" })
  if mode == "RNN" then mode = rnn_nonlinearity(self, who, opts) end
  self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
  self.bias = boolean(who, opts.bias, "bias", true)
  add_params(self, "", GATES[mode] * hidden_size, input_size, hidden_size, self.bias,
    { dtype = opts.dtype, device = opts.device })
end

-- The cells' forward: h' (and c' for LSTMCell).
function M.cell_forward(self, input, hx)
  local who, lstm = self.__name .. ".forward", self.mode == "LSTM"
  if not ember.is_tensor(input) then
    raise("%s: expected an input tensor [N, input_size] or unbatched [input_size], got %s", who, type(input))
  end
  if input.ndim ~= 1 and input.ndim ~= 2 then
    raise("%s: expected a 2-d input [N, input_size] or a 1-d unbatched one [input_size], got shape %s", who,
      shape_str(input))
  end
  check_dtype(who, input, self.weight_ih, "input")
  if input.shape[input.ndim] ~= self.input_size then
    raise("%s: input's last dim is %d, expected input_size=%d (input shape %s)", who, input.shape[input.ndim],
      self.input_size, shape_str(input))
  end
  local batched = input.ndim == 2
  local x = batched and input or input:unsqueeze(1)
  local N, H = x.shape[1], self.hidden_size
  local h, c
  if hx ~= nil then
    local want = batched and { N, H } or { H }
    local how = batched and "batch, hidden_size" or "hidden_size, for an unbatched input"
    h, c = read_state(who, hx, lstm, want, how, input.dtype, batched, 1)
  end
  local zero = (h == nil or (lstm and c == nil)) and ember.zeros({ N, H }, { dtype = x.dtype, device = x.device })
  h, c = h or zero, lstm and (c or zero) or nil
  local xg = x:matmul(self.weight_ih:t())
  if self.bias_ih then xg = xg + self.bias_ih end
  h, c = STEP[self.mode](xg, h, c, self.weight_hh:t(), self.bias_hh)
  if not batched then
    h = h:squeeze(1)
    if c then c = c:squeeze(1) end
  end
  if lstm then return h, c end
  return h
end

-- The cells' settings, as PyTorch prints them.
function M.cell_extra_repr(self)
  return ("%d, %d"):format(self.input_size, self.hidden_size) .. (self.bias and "" or ", bias=false")
    .. ((self.nonlinearity or "tanh") ~= "tanh" and ", nonlinearity=" .. self.nonlinearity or "")
end

return M
