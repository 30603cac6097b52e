--- nn.LSTM(input_size, hidden_size [, {num_layers=1, bias=true, batch_first=false, dropout=0,
-- bidirectional=false, proj_size=0, dtype=, device=}]): a multi-layer long short-term memory
-- network, as torch.nn.LSTM. Each step, with PyTorch's gate order i, f, g, o:
--   i = sigmoid(W_ii x + b_ii + W_hi h + b_hi)     f = sigmoid(W_if x + b_if + W_hf h + b_hf)
--   g = tanh(W_ig x + b_ig + W_hg h + b_hg)        o = sigmoid(W_io x + b_io + W_ho h + b_ho)
--   c' = f * c + i * g                             h' = o * tanh(c')
-- Parameters (PyTorch's names and order), per layer k = 0, 1, ... and direction:
-- weight_ih_lk [4*hidden_size, in] (the gates stacked i, f, g, o; in = input_size for
-- layer 0, D*hidden_size after), weight_hh_lk [4*hidden_size, hidden_size], bias_ih_lk and
-- bias_hh_lk [4*hidden_size]; the backward direction's end in "_reverse". All uniform in
-- +-1/sqrt(hidden_size), as PyTorch. D = 2 when bidirectional (the outputs of both
-- directions are concatenated), else 1. dropout: on the output of every layer but the
-- last, in training mode only. proj_size = P > 0 (an LSTM with projections, as PyTorch's):
-- h' = (o * tanh(c')) W_hr^T with weight_hr_lk [P, hidden_size] (after the layer's biases),
-- so h_0/h_n and the output are P wide per direction (weight_hh_lk [4*hidden_size, P], the
-- next layer's in = D*P), while c stays hidden_size wide; P < hidden_size.
-- The input projections of all time steps are one matmul per layer and direction; only
-- the recurrent product loops over time. Composed from ember ops: autograd does the backward.
-- Errors name nn.LSTM / LSTM.forward: sizes that are not positive integers, unknown or bad
-- options, an input that is not [L, N, input_size] (batch_first: [N, L, input_size]) or
-- unbatched [L, input_size], states of the wrong shape or dtype.
-- @usage local lstm = nn.LSTM(10, 20, { num_layers = 2 })
-- local out, state = lstm(ember.randn(5, 3, 10))   -- [L, N, input_size]
-- print(out.shape)        --> ember.Size{5, 3, 20}
-- print(state[1].shape)   --> ember.Size{2, 3, 20}
-- out, state = lstm(ember.randn(5, 3, 10), state)   -- go on from {h_n, c_n}
-- @classmod nn.LSTM
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local LSTM = Module:extend("LSTM")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LSTM.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "num_layers", "bias", "batch_first", "dropout", "bidirectional", "proj_size" } }

function LSTM:__init(input_size, hidden_size, opts)
  rnn.init(self, "LSTM", "LSTM", input_size, hidden_size, opts, { "num_layers", "bias", "batch_first", "dropout",
    "bidirectional", "proj_size", "dtype", "device" })
end

--- The sequence through every layer: output and the last states {h_n, c_n}.
-- @tparam Tensor input [L, N, input_size] ([N, L, input_size] with batch_first), or unbatched [L, input_size],
-- or a PackedSequence (nn.utils.rnn.pack_padded_sequence): the output is then one too, h_n each
-- sequence's state after its last valid step
-- @tparam[opt] table hx {h_0, c_0}, each [D*num_layers, N, hidden_size] (unbatched:
-- [D*num_layers, hidden_size]; never batch-first); zeros when left out
-- @treturn Tensor output [L, N, D*hidden_size] (batch_first: [N, L, D*hidden_size]; unbatched
-- [L, D*hidden_size]): the last layer's h at every step
-- @treturn table {h_n, c_n}, each shaped as h_0: every layer's and direction's last states
function LSTM:forward(input, hx) return rnn.forward(self, input, hx) end

--- The settings, for printing: "10, 20, num_layers=2" as PyTorch.
function LSTM:extra_repr() return rnn.extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LSTM.forward = require("ember._errors").wrap(LSTM.forward)

return LSTM
