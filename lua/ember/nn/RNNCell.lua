--- nn.RNNCell(input_size, hidden_size [, {bias=true, nonlinearity="tanh"|"relu", dtype=, device=}]):
-- one Elman RNN step, as torch.nn.RNNCell, with nn.RNN's formula:
-- h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (relu with nonlinearity = "relu"). Parameters
-- weight_ih [hidden_size, input_size], weight_hh [hidden_size, hidden_size], bias_ih and
-- bias_hh [hidden_size], uniform in +-1/sqrt(hidden_size).
-- Errors name nn.RNNCell / RNNCell.forward: bad sizes or options, an input that is not
-- [N, input_size] or [input_size], an hx of the wrong shape or dtype.
-- @usage local cell = nn.RNNCell(3, 5)
-- local h = cell(ember.randn(2, 3))   -- a zero state to start
-- h = cell(ember.randn(2, 3), h)      -- the next step
-- print(h.shape)   --> ember.Size{2, 5}
-- @classmod nn.RNNCell
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local RNNCell = Module:extend("RNNCell")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
RNNCell.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "bias", "nonlinearity" } }

function RNNCell:__init(input_size, hidden_size, opts)
  rnn.cell_init(self, "RNNCell", "RNN", input_size, hidden_size, opts)
end

--- One step: h'.
-- @tparam Tensor input [N, input_size] or unbatched [input_size]
-- @tparam[opt] Tensor hx h_0 [N, hidden_size] (unbatched: [hidden_size]); zeros when left out
-- @treturn Tensor h' [N, hidden_size] ([hidden_size] unbatched)
function RNNCell:forward(input, hx) return rnn.cell_forward(self, input, hx) end

--- The sizes, for printing: "3, 5" as PyTorch (and ", bias=false", ", nonlinearity=relu").
function RNNCell:extra_repr() return rnn.cell_extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
RNNCell.forward = require("ember._errors").wrap(RNNCell.forward)

return RNNCell
