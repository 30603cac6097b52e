--- nn.CTCLoss([{blank = 1, reduction = "mean", zero_infinity = false}]): the
-- connectionist temporal classification loss, as torch.nn.CTCLoss
-- (`nn.functional.ctc_loss`): forward(log_probs [T, N, C], targets, input_lengths,
-- target_lengths). Class ids are **1-based**: blank = 1 is PyTorch's blank=0, and the
-- targets' ids are PyTorch's + 1. "mean" divides each sequence's loss by its target
-- length, then averages, as PyTorch.
-- Errors name nn.CTCLoss (options) and nn.functional.ctc_loss (inputs).
-- @usage local ctc = nn.CTCLoss()
-- local lp = ember.randn(6, 2, 4):log_softmax(3)
-- local loss = ctc(lp, ember.tensor({{2, 3}, {4, 2}}, "int64"), {6, 5}, {2, 2})
-- print(loss.shape)   --> ember.Size{}
-- @classmod nn.CTCLoss
local error = require("ember._errors").error -- raises at the user's line
local Module = require "ember.nn.Module"
local losses = require "ember.nn._loss"

local CTCLoss = Module:extend("CTCLoss")
-- PyTorch's positional order and the table of names (nn/_module_args.lua)
CTCLoss.SIGNATURE = { sizes = {}, options = { "blank", "reduction", "zero_infinity" }, string_option = "reduction" }

function CTCLoss:__init(opts)
  opts = losses.setup(self, opts, nil, nil, nil, { "blank", "zero_infinity" })
  self.blank = opts.blank == nil and 1 or opts.blank
  if math.type(self.blank) ~= "integer" or self.blank < 1 then
    error("CTCLoss: blank must be a positive class id (1-based), got " .. tostring(self.blank), 3)
  end
  self.zero_infinity = opts.zero_infinity == true
  if opts.zero_infinity ~= nil and type(opts.zero_infinity) ~= "boolean" then
    error("CTCLoss: zero_infinity must be a boolean, got " .. type(opts.zero_infinity), 3)
  end
end

--- The loss.
-- @tparam Tensor log_probs [T, N, C] log-probabilities
-- @tparam Tensor targets int64 [N, S] (padded) or [sum of target_lengths], 1-based ids
-- @tparam Tensor|table input_lengths [N]
-- @tparam Tensor|table target_lengths [N]
-- @treturn Tensor
function CTCLoss:forward(log_probs, targets, input_lengths, target_lengths)
  Module.check_tensor_input("CTCLoss.forward", log_probs)
  return require("ember.nn.functional").ctc_loss(log_probs, targets, input_lengths, target_lengths, {
    blank = self.blank, reduction = self.reduction, zero_infinity = self.zero_infinity,
  })
end

--- Its options, for printing.
function CTCLoss:extra_repr()
  return ("blank=%d, reduction=%s, zero_infinity=%s"):format(self.blank, self.reduction, tostring(self.zero_infinity))
end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
CTCLoss.forward = require("ember._errors").wrap(CTCLoss.forward)

return CTCLoss
