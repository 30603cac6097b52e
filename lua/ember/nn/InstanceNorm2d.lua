--- nn.InstanceNorm2d(num_features [, {eps=1e-5, momentum=0.1, affine=false,
-- track_running_stats=false, dtype=, device=}]): instance normalisation of
-- [N, C, H, W] (or unbatched [C, H, W]): each sample's channel normalised
-- over H and W with its own mean and biased variance, as
-- torch.nn.InstanceNorm2d (PyTorch's defaults: no affine, no running stats).
--
-- affine=true learns a per-channel `weight` (ones) and `bias` (zeros).
-- track_running_stats=true keeps `running_mean` / `running_var` (moved
-- each training call by momentum towards the batch's average of the
-- instances' means and unbiased variances) and uses them after `eval()`;
-- `num_batches_tracked` is in the state dict, as PyTorch's, and stays 0 as
-- PyTorch's does. State dict names as PyTorch's.
-- Without affine or running stats the channel count is free (PyTorch only
-- warns); with either, C must be num_features.
-- Composed from core ops (reshape, mean, rsqrt): gradients through autograd.
-- Errors name nn.InstanceNorm2d at the caller's line: bad num_features or
-- options, an input that is not 3-d or 4-d, the wrong channel count, a
-- single spatial element while training.
-- @usage local norm = nn.InstanceNorm2d(16, {affine = true})
-- print(norm(ember.randn(8, 16, 32, 32)).shape)   --> ember.Size{8, 16, 32, 32}
-- @classmod nn.InstanceNorm2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local BatchNorm2d = require "ember.nn.BatchNorm2d"
local norm = require "ember.nn._norm"

local InstanceNorm2d = Module:extend("InstanceNorm2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
InstanceNorm2d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

-- The constructor, shared with nn.InstanceNorm1d: BatchNorm2d's checks and
-- tensors with PyTorch's instance-norm defaults (affine and running stats off).
function InstanceNorm2d._init_shared(self, name, num_features, opts)
  opts = Module.check_options("nn." .. name, opts,
    { "eps", "momentum", "affine", "track_running_stats", "dtype", "device" })
  if opts.momentum == false then
    error(name .. ": momentum must be a number in [0, 1] (PyTorch's instance norms have no cumulative average), "
      .. "got false")
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.affine, o.track_running_stats = opts.affine == true, opts.track_running_stats == true
  BatchNorm2d._init_shared(self, name, num_features, o)
end

function InstanceNorm2d:__init(num_features, opts)
  InstanceNorm2d._init_shared(self, "InstanceNorm2d", num_features, opts)
end

-- The normalisation of x [N, C, *] or [C, *] (nd spatial dims), shared with nn.InstanceNorm1d.
function InstanceNorm2d._normalize(self, name, nd, x)
  local shape = ({ "[N, C, L] or [C, L]", "[N, C, H, W] or [C, H, W]", "[N, C, D, H, W] or [C, D, H, W]" })[nd]
  if not ember.is_tensor(x) or (x.ndim ~= nd + 1 and x.ndim ~= nd + 2) then
    error(("%s.forward: expected a %d-d or %d-d input %s, got %s"):format(name, nd + 1, nd + 2, shape,
      ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)))
  end
  local batched = x.ndim == nd + 2
  local xb = batched and x or x:unsqueeze(1)
  local C = xb.shape[2]
  local C0 = self.num_features
  if C ~= C0 and (self.affine or self.track_running_stats) then
    error(("%s.forward: expected %d channels (num_features) at dim %d, got shape [%s]"):format(name, C0,
      batched and 2 or 1, table.concat(x.shape, ", ")))
  end
  local track = self.track_running_stats
  return norm.instance_norm(name .. ".forward", xb, track and self.running_mean or nil,
    track and self.running_var or nil, self.weight, self.bias, self.training or not track, self.momentum, self.eps,
    self.training):reshape(x.shape)
end

--- Each sample's channels normalised over H and W (running statistics in eval with track_running_stats), scaled and shifted with affine.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @treturn Tensor the same shape
function InstanceNorm2d:forward(x)
  return InstanceNorm2d._normalize(self, "InstanceNorm2d", 2, x)
end

--- The settings, for printing (PyTorch's text).
InstanceNorm2d.extra_repr = BatchNorm2d.extra_repr
--- A state without num_batches_tracked loads with it 0 (BatchNorm2d.upgrade_state_dict).
InstanceNorm2d.upgrade_state_dict = BatchNorm2d.upgrade_state_dict

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function InstanceNorm2d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function InstanceNorm2d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
InstanceNorm2d.forward = require("ember._errors").wrap(InstanceNorm2d.forward)

return InstanceNorm2d
