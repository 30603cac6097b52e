--- nn.LSTMCell(input_size, hidden_size [, {bias=true, dtype=, device=}]): one LSTM step,
-- as torch.nn.LSTMCell, with nn.LSTM's formulas (gates i, f, g, o). Parameters weight_ih
-- [4*hidden_size, input_size], weight_hh [4*hidden_size, hidden_size], bias_ih and bias_hh
-- [4*hidden_size], uniform in +-1/sqrt(hidden_size).
-- Errors name nn.LSTMCell / LSTMCell.forward: bad sizes or options, an input that is not
-- [N, input_size] or [input_size], states of the wrong shape or dtype.
-- @usage local cell = nn.LSTMCell(3, 5)
-- local h, c = cell(ember.randn(2, 3))      -- zero states to start
-- h, c = cell(ember.randn(2, 3), { h, c })  -- the next step
-- print(h.shape, c.shape)   --> ember.Size{2, 5} ember.Size{2, 5}
-- @classmod nn.LSTMCell
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local LSTMCell = Module:extend("LSTMCell")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
LSTMCell.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "bias" } }

function LSTMCell:__init(input_size, hidden_size, opts)
  rnn.cell_init(self, "LSTMCell", "LSTM", input_size, hidden_size, opts)
end

--- One step: h' and c' (PyTorch's tuple (h_1, c_1), as two values).
-- @tparam Tensor input [N, input_size] or unbatched [input_size]
-- @tparam[opt] table hx {h_0, c_0}, each [N, hidden_size] (unbatched: [hidden_size]); zeros when left out
-- @treturn Tensor h' [N, hidden_size] ([hidden_size] unbatched)
-- @treturn Tensor c', shaped as h'
function LSTMCell:forward(input, hx) return rnn.cell_forward(self, input, hx) end

--- The sizes, for printing: "3, 5" as PyTorch (and ", bias=false").
function LSTMCell:extra_repr() return rnn.cell_extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
LSTMCell.forward = require("ember._errors").wrap(LSTMCell.forward)

return LSTMCell
