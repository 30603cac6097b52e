--- nn.GRU(input_size, hidden_size [, {num_layers=1, bias=true, batch_first=false, dropout=0,
-- bidirectional=false, dtype=, device=}]): a multi-layer gated recurrent unit network, as
-- torch.nn.GRU. Each step, with PyTorch's gate order r, z, n:
--   r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)     z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
--   n = tanh(W_in x + b_in + r * (W_hn h + b_hn))  h' = (1 - z) * n + z * h
-- Parameters (PyTorch's names and order), per layer k = 0, 1, ... and direction:
-- weight_ih_lk [3*hidden_size, in] (the gates stacked r, z, n; in = input_size for layer 0,
-- D*hidden_size after), weight_hh_lk [3*hidden_size, hidden_size], bias_ih_lk and bias_hh_lk
-- [3*hidden_size]; the backward direction's end in "_reverse". All uniform in
-- +-1/sqrt(hidden_size), as PyTorch. D = 2 when bidirectional (the outputs of both
-- directions are concatenated), else 1. dropout: on the output of every layer but the
-- last, in training mode only.
-- The input projections of all time steps are one matmul per layer and direction; only
-- the recurrent product loops over time. Composed from ember ops: autograd does the backward.
-- Errors name nn.GRU / GRU.forward: sizes that are not positive integers, unknown or bad
-- options, an input that is not [L, N, input_size] (batch_first: [N, L, input_size]) or
-- unbatched [L, input_size], an hx of the wrong shape or dtype.
-- @usage local gru = nn.GRU(8, 16, { batch_first = true, bidirectional = true })
-- local out, h_n = gru(ember.randn(4, 7, 8))   -- [N, L, input_size]
-- print(out.shape)   --> ember.Size{4, 7, 32}
-- print(h_n.shape)   --> ember.Size{2, 4, 16}
-- @classmod nn.GRU
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local GRU = Module:extend("GRU")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
GRU.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "num_layers", "bias", "batch_first", "dropout", "bidirectional" } }

function GRU:__init(input_size, hidden_size, opts)
  rnn.init(self, "GRU", "GRU", input_size, hidden_size, opts, { "num_layers", "bias", "batch_first", "dropout",
    "bidirectional", "dtype", "device" })
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
function GRU:forward(input, hx) return rnn.forward(self, input, hx) end

--- The settings, for printing: "8, 16, batch_first=true" as PyTorch.
function GRU:extra_repr() return rnn.extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GRU.forward = require("ember._errors").wrap(GRU.forward)

return GRU
