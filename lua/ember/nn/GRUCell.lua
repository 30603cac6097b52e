--- nn.GRUCell(input_size, hidden_size [, {bias=true, dtype=, device=}]): one GRU step, as
-- torch.nn.GRUCell, with nn.GRU's formulas (gates r, z, n; n = tanh(W_in x + b_in + r *
-- (W_hn h + b_hn))). Parameters weight_ih [3*hidden_size, input_size], weight_hh
-- [3*hidden_size, hidden_size], bias_ih and bias_hh [3*hidden_size], uniform in
-- +-1/sqrt(hidden_size).
-- Errors name nn.GRUCell / GRUCell.forward: bad sizes or options, an input that is not
-- [N, input_size] or [input_size], an hx of the wrong shape or dtype.
-- @usage local cell = nn.GRUCell(3, 5)
-- local h = cell(ember.randn(2, 3))   -- a zero state to start
-- h = cell(ember.randn(2, 3), h)      -- the next step
-- print(h.shape)   --> ember.Size{2, 5}
-- @classmod nn.GRUCell
local Module = require "ember.nn.Module"
local rnn = require "ember.nn._rnn"

local GRUCell = Module:extend("GRUCell")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
GRUCell.SIGNATURE = { sizes = { "input_size", "hidden_size" },
  options = { "bias" } }

function GRUCell:__init(input_size, hidden_size, opts)
  rnn.cell_init(self, "GRUCell", "GRU", input_size, hidden_size, opts)
end

--- One step: h'.
-- @tparam Tensor input [N, input_size] or unbatched [input_size]
-- @tparam[opt] Tensor hx h_0 [N, hidden_size] (unbatched: [hidden_size]); zeros when left out
-- @treturn Tensor h' [N, hidden_size] ([hidden_size] unbatched)
function GRUCell:forward(input, hx) return rnn.cell_forward(self, input, hx) end

--- The sizes, for printing: "3, 5" as PyTorch (and ", bias=false").
function GRUCell:extra_repr() return rnn.cell_extra_repr(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
GRUCell.forward = require("ember._errors").wrap(GRUCell.forward)

return GRUCell
