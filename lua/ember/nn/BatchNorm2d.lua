--- nn.BatchNorm2d(num_features [, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, dtype=, device=}]): batch normalisation of
-- [N, C, H, W] over N, H and W per channel, as torch.nn.BatchNorm2d.
--
-- Training: each channel is normalised with the batch's mean and biased
-- variance, and the running statistics move towards the batch's
-- (running = (1 - momentum) * running + momentum * batch, with the
-- unbiased variance; `momentum = false` is PyTorch's momentum=None, a
-- cumulative average over the batches seen). Evaluation (`eval()`): the running
-- statistics are used. Then scaled by weight (ones) and shifted by bias
-- (zeros). State dict as PyTorch: weight, bias, running_mean, running_var,
-- num_batches_tracked (int64).
-- Composed from core ops (a reshape, mean, rsqrt): gradients through autograd;
-- the computation is `nn.functional.batch_norm`'s (nn/_norm.lua).
-- Errors name nn.BatchNorm2d: bad num_features, input that is not [N, C, H, W]
-- with C = num_features, a batch of one value per channel while training,
-- an input of another dtype than the module's (a bfloat16 input beside
-- float32 tensors is mixed precision, as PyTorch's: bfloat16 out).
-- @usage local bn = nn.BatchNorm2d(16)
-- local y = bn(ember.randn(8, 16, 32, 32))   -- training: batch statistics
-- bn:eval()                                  -- running statistics from now on
-- @classmod nn.BatchNorm2d
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"
local Module = require "ember.nn.Module"
local torch_names = require "ember.nn._torch_names"
local norm = require "ember.nn._norm"

local BatchNorm2d = Module:extend("BatchNorm2d")
-- PyTorch's positional order (nn.Module's construct: nn/_module_args.lua)
BatchNorm2d.SIGNATURE = { sizes = { "num_features" },
  options = { "eps", "momentum", "affine", "track_running_stats" } }

-- The constructor's checks and tensors, shared with nn.BatchNorm1d (`name`
-- is the module's, for its errors).
function BatchNorm2d._init_shared(self, name, num_features, opts)
  if math.type(num_features) ~= "integer" or num_features < 1 then
    error(name .. ": num_features must be a positive integer, got " .. tostring(num_features), 2)
  end
  opts = Module.check_options("nn." .. name, opts, { "eps", "momentum", "affine", "track_running_stats", "dtype", "device" })
  self.num_features = num_features
  self.eps = opts.eps or 1e-5
  if opts.momentum == false then self.momentum = nil else self.momentum = opts.momentum or 0.1 end
  if type(self.eps) ~= "number" or self.eps < 0 then
    error(name .. ": eps must be a non-negative number, got " .. tostring(self.eps), 2)
  end
  if self.momentum ~= nil and (type(self.momentum) ~= "number" or self.momentum < 0 or self.momentum > 1) then
    error(name .. ": momentum must be a number in [0, 1] or false, got " .. tostring(self.momentum), 2)
  end
  self.affine = opts.affine ~= false
  self.track_running_stats = opts.track_running_stats ~= false
  local topts = { dtype = opts.dtype, device = opts.device }
  if self.affine then
    self:register_parameter("weight", ember.ones({ num_features }, topts))
    self:register_parameter("bias", ember.zeros({ num_features }, topts))
  end
  if self.track_running_stats then
    self:register_buffer("running_mean", ember.zeros({ num_features }, topts))
    self:register_buffer("running_var", ember.ones({ num_features }, topts))
    self:register_buffer("num_batches_tracked", ember.zeros({}, { dtype = "int64", device = opts.device }))
  end
end

function BatchNorm2d:__init(num_features, opts)
  BatchNorm2d._init_shared(self, "BatchNorm2d", num_features, opts)
end

--- x normalised per channel (batch statistics in training, running ones in eval), scaled and shifted.
-- @tparam Tensor x [N, C, H, W]
-- @treturn Tensor [N, C, H, W]
function BatchNorm2d:forward(x)
  if not ember.is_tensor(x) or x.ndim ~= 4 or x.shape[2] ~= self.num_features then
    error(("BatchNorm2d.forward: expected a 4-d input [N, C, H, W] with C = num_features = %d, got %s"):format(
      self.num_features, ember.is_tensor(x) and ("shape [" .. table.concat(x.shape, ", ") .. "]") or type(x)), 2)
  end
  return BatchNorm2d._normalize(self, "BatchNorm2d", x)
end

-- The normalisation of x [N, C, *] (checked by the caller), shared with
-- nn.BatchNorm1d (`name` is the module's, for its errors): nn/_norm.lua's
-- batch_norm (nn.functional.batch_norm's) with the module's tensors.
function BatchNorm2d._normalize(self, name, x)
  Module.check_float_input(name .. ".forward", x)
  local track = self.track_running_stats
  return norm.batch_norm(name .. ".forward", x, track and self.running_mean or nil, track and self.running_var or nil,
    self.weight, self.bias, self.training or not track, self.momentum, self.eps,
    track and self.num_batches_tracked or nil)
end

--- A state without num_batches_tracked (older PyTorch, some converted
-- files) loads with it 0, as PyTorch's (nn/_torch_names.lua); then
-- Module.upgrade_state_dict. nn.BatchNorm1d and the InstanceNorms share it.
-- @tparam table sd name -> tensor
-- @string[opt] prefix as Module.upgrade_state_dict's
-- @treturn table
-- @treturn integer how many earlier-ember names were mapped
function BatchNorm2d:upgrade_state_dict(sd, prefix)
  return Module.upgrade_state_dict(self, torch_names.num_batches_tracked(self, sd), prefix)
end

--- The settings, for printing.
function BatchNorm2d:extra_repr()
  return ("%d, eps=%g, momentum=%s, affine=%s, track_running_stats=%s"):format(self.num_features, self.eps,
    self.momentum and ("%g"):format(self.momentum) or "None", tostring(self.affine), tostring(self.track_running_stats))
end

--- running_mean 0, running_var 1, num_batches_tracked 0 (PyTorch's reset_running_stats; nothing without them).
function BatchNorm2d:reset_running_stats() require("ember.nn._norm").reset_running_stats(self) end

--- The running statistics reset, the weight 1 and the bias 0 (PyTorch's reset_parameters).
function BatchNorm2d:reset_parameters() require("ember.nn._norm").reset_parameters(self) end

-- C errors (bad ids, shapes, dtypes) name the user's line, not this file's.
BatchNorm2d.forward = require("ember._errors").wrap(BatchNorm2d.forward)

return BatchNorm2d
