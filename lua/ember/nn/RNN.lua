--- nn.RNN(input_size, hidden_size [, {num_layers=1, nonlinearity="tanh"|"relu", bias=true,
-- batch_first=false, dropout=0, bidirectional=false, dtype=, device=}]): a multi-layer Elman
-- RNN, as torch.nn.RNN. Each step:
--   h' = tanh(W_ih x + b_ih + W_hh h + b_hh)       (relu instead of tanh with nonlinearity="relu")
-- Parameters (PyTorch's names and order), per layer k = 0, 1, ... and direction:
-- weight_ih_lk [hidden_size, in] (in = input_size for layer 0, D*hidden_size after),
-- weight_hh_lk [hidden_size, hidden_size], bias_ih_lk and bias_hh_lk [hidden_size]; the
-- backward direction's end in "_reverse". All uniform in +-1/sqrt(hidden_size), as PyTorch.
-- D = 2 when bidirectional (the outputs of both directions are concatenated), else 1.
-- dropout: on the output of every layer but the last, in training mode only.
-- The input projections of all time steps are one matmul per layer and direction; only
-- the recurrent product loops over time. Composed from ember ops: autograd does the backward.
-- Errors name nn.RNN / RNN.forward: sizes that are not positive integers, unknown or bad
-- options, an input that is not [L, N, input_size] (batch_first: [N, L, input_size]) or
-- unbatched [L, input_size], an hx of the wrong shape or dtype.
-- @usage local rnn = nn.RNN(4, 6, { num_layers = 2, nonlinearity = "relu" })
-- local out, h_n = rnn(ember.randn(9, 4))   -- unbatched [L, input_size]
-- print(out.shape)   --> ember.Size{9, 6}
-- print(h_n.shape)   --> ember.Size{2, 6}
-- @classmod nn.RNN
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local RNN = Module:extend("RNN")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
RNN.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "num_layers", "nonlinearity", "bias", "batch_first", "dropout", "bidirectional" } }

function RNN:__init(input_size, hidden_size, opts)
  rnn.init(self, "RNN", nil, input_size, hidden_size, opts, { "num_layers", "nonlinearity", "bias", "batch_first",
    "dropout", "bidirectional", "dtype", "device" })
end

--- The sequence through every layer: output and the last hidden states h_n.
-- @tparam Tensor input [L, N, input_size] ([N, L, input_size] with batch_first), or unbatched [L, input_size],
-- or a PackedSequence (nn.utils.rnn.pack_padded_sequence): the output is then one too, h_n each
-- sequence's state after its last valid step
-- @tparam[opt] Tensor hx h_0 [D*num_layers, N, hidden_size] (unbatched: [D*num_layers, hidden_size];
-- never batch-first); zeros when left out
-- @treturn Tensor output [L, N, D*hidden_size] (batch_first: [N, L, D*hidden_size]; unbatched
-- [L, D*hidden_size]): the last layer's h at every step
-- @treturn Tensor h_n, shaped as h_0: every layer's and direction's last state
function RNN:forward(input, hx) return rnn.forward(self, input, hx) end

--- The settings, for printing: "4, 6, num_layers=2" as PyTorch (and ", nonlinearity=relu").
function RNN:extra_repr() return rnn.extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
RNN.forward = require("ember._errors").wrap(RNN.forward)

return RNN
