--- nn.BatchNorm1d(num_features [, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, dtype=, device=}]): batch normalisation of
-- [N, C] or [N, C, L] per channel (over N, and L), as torch.nn.BatchNorm1d.
-- The same rules as `nn.BatchNorm2d` (its code: batch statistics while
-- training, running ones after `eval()`, `momentum = false` for PyTorch's
-- momentum=None, the cumulative average), and the same state dict: weight,
-- bias, running_mean, running_var, num_batches_tracked.
-- Errors name nn.BatchNorm1d: bad num_features or options, input that is not
-- [N, C] or [N, C, L] with C = num_features, one value per channel while training.
-- @usage local bn = nn.BatchNorm1d(16)
-- print(bn(ember.randn(8, 16)).shape)       --> ember.Size{8, 16}
-- print(bn(ember.randn(8, 16, 10)).shape)   --> ember.Size{8, 16, 10}
-- @classmod nn.BatchNorm1d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local BatchNorm2d = require "ember.nn.BatchNorm2d"

local BatchNorm1d = Module:extend("BatchNorm1d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
BatchNorm1d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

function BatchNorm1d:__init(num_features, opts)
  BatchNorm2d._init_shared(self, "BatchNorm1d", num_features, opts)
end

--- x normalised per channel (batch statistics in training, running ones in eval), scaled and shifted.
-- @tparam Tensor x [N, C] or [N, C, L]
-- @treturn Tensor the same shape
function BatchNorm1d:forward(x)
  if not ember.is_tensor(x) or (x.ndim ~= 2 and x.ndim ~= 3) or x.shape[2] ~= self.num_features then
    error(("BatchNorm1d.forward: expected a 2-d or 3-d input [N, C] or [N, C, L] with C = num_features = %d, got %s")
      :format(self.num_features, ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  return BatchNorm2d._normalize(self, "BatchNorm1d", x)
end

--- The settings, for printing.
BatchNorm1d.extra_repr = BatchNorm2d.extra_repr
--- A state without num_batches_tracked loads with it 0 (BatchNorm2d.upgrade_state_dict).
BatchNorm1d.upgrade_state_dict = BatchNorm2d.upgrade_state_dict

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function BatchNorm1d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function BatchNorm1d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BatchNorm1d.forward = require("ember._errors").wrap(BatchNorm1d.forward)

return BatchNorm1d
