-- nn/_norm.lua (internal): the normalisations, each written once. The
-- modules (nn.BatchNorm1d/2d, nn.InstanceNorm1d/2d, nn.GroupNorm,
-- nn.LayerNorm, nn.RMSNorm) own the parameters and buffers and call these;
-- nn.functional's batch_norm, instance_norm, group_norm, layer_norm and
-- rms_norm check their arguments and call them too. `who` names the caller
-- in errors ("BatchNorm2d.forward", "nn.functional.batch_norm"); errors
-- are raised at the user's line. Composed from core ops (reshape, mean,
-- rsqrt), so gradients come from autograd; layer_norm and rms_norm run the
-- backend's fused kernels where it has them.
local error = require("ember._errors").error -- raises at the user's line
local ember = require "ember.nn._ember"

local M = {}

-- during a checkpoint's recompute the running statistics stay (they moved in the forward)
local recomputing = require("ember.nn.activation_checkpoint").recomputing

local function shape_of(x) return "[" .. table.concat(x.shape, ", ") .. "]" end

-- {1, C, 1, ...} for x of x.ndim dims: a per-channel tensor's broadcast shape.
local function channel_shape(x, C)
  local s = { 1, C }
  for _ = 3, x.ndim do s[#s + 1] = 1 end
  return s
end

-- The dims a per-channel statistic of x [N, C, *] reduces: all but the channels'.
local function channel_reduce_dims(x)
  local d = { 1 }
  for i = 3, x.ndim do d[#d + 1] = i end
  return d
end

-- Batch normalisation with the batch's statistics, as one autograd node
-- (PyTorch's native batch_norm): composed from core ops, the forward and
-- its backward made about 25 passes over x (a transposed copy, the centred
-- x, its square, the broadcasts and each of their gradients), 14 ms at
-- [32, 24, 38, 38] against PyTorch's 7.5; here the forward reads x three
-- times (var_mean, the centring, the scale and shift) and the backward
-- five. st: the channel dims and broadcast shape in, the batch's mean and
-- biased variance out (for the running statistics). The centred x, not x,
-- is kept: the weight's gradient sum(dy * (x - mean)) * rstd then has no
-- cancellation when the mean is large against the spread (PyTorch's form).
local BatchNormBatchStats = ember.Function {
  name = "batch_norm",
  forward = function(ctx, x, weight, bias, eps, st)
    local var, mean = ember.var_mean(x, st.dims, false)
    local rstd = (var + eps):rsqrt()
    local xc = x - mean:view(st.bshape)
    local scale = (weight and weight * rstd or rstd):view(st.bshape)
    local y = bias and ember.addcmul(bias:view(st.bshape), xc, scale) or xc * scale
    st.mean, st.var, st.weight = mean, var, weight
    ctx.st = st
    ctx.save_for_backward(xc, rstd)
    return y
  end,
  backward = function(ctx, dy)
    local st = ctx.st
    local xc, rstd = table.unpack(ctx.saved_tensors)
    local n = xc:numel() / rstd:numel()
    local need = ctx.needs_input_grad
    local sum_dy = dy:sum(st.dims)
    local dw_hat = (dy * xc):sum(st.dims) * rstd -- sum(dy * xhat)
    local dx
    if need[1] then
      -- dx = a dy + b (x - mean) + c per channel, a = w rstd, b = -a rstd sum(dy xhat) / n, c = -a sum(dy) / n
      local a = st.weight and st.weight * rstd or rstd
      local b, c = -a * rstd * dw_hat / n, -a * sum_dy / n
      dx = ember.addcmul(ember.addcmul(c:view(st.bshape), dy, a:view(st.bshape)), xc, b:view(st.bshape))
    end
    return dx, need[2] and dw_hat or nil, need[3] and sum_dy or nil
  end,
}

-- A bfloat16 input's normalisation in bfloat16: the batch, instance and
-- group norms compute in float32 beside float32 parameters (and under
-- ember.autocast) and return their input's dtype, as PyTorch's mixed-dtype
-- batch_norm (so its instance_norm) and CPU autocast, which leaves these
-- norms alone: a bfloat16 conv's output stays bfloat16 through them.
local function as_input(x, y)
  if x.dtype == "bfloat16" and y.dtype ~= "bfloat16" then return y:to("bfloat16") end
  return y
end

-- The tensors of a batch, instance or group norm in x's dtype, as
-- PyTorch's: a bfloat16 x may meet float32 ones (the mixed precision of
-- autocast and of a bfloat16 model with float32 norms: the output is
-- bfloat16); any other difference is an error naming the tensor (a float64
-- x came out float32 in training and float64 in eval).
local function check_dtypes(who, x, tensors)
  for _, t in ipairs(tensors) do
    local v = t[2]
    if v ~= nil and v.dtype ~= x.dtype and not (x.dtype == "bfloat16" and v.dtype == "float32") then
      error(("%s: the input is %s but the %s is %s (convert one: x:to(\"%s\") or the %s's dtype)"):format(who,
        x.dtype, t[1], v.dtype, v.dtype, t[1]))
    end
  end
end

-- Batch normalisation of x [N, C, *] over every dim but the channels.
-- Batch statistics when `training` or when there are no running statistics
-- (running_mean nil); then, when training with running statistics, they
-- move by `momentum` towards the batch's (unbiased variance). `counter`
-- (a module's num_batches_tracked, optional) counts the batches; momentum
-- nil then means the cumulative average 1 / counter (PyTorch's None).
function M.batch_norm(who, x, running_mean, running_var, weight, bias, training, momentum, eps, counter)
  check_dtypes(who, x, { { "weight", weight }, { "bias", bias }, { "running_mean", running_mean },
    { "running_var", running_var } })
  local x_in = x
  local C = x.shape[2]
  local bshape = channel_shape(x, C)
  local update = training and running_mean ~= nil and not recomputing()
  local mean, var
  if (training or running_mean == nil) and x:numel() == 0 then
    -- an empty batch, as PyTorch: an empty output, the batch counted, the statistics unchanged
    if update and counter then ember.no_grad(function() counter:add_(1) end) end
    local o = { dtype = x.dtype, device = x.device }
    mean, var = ember.zeros({ C }, o), ember.ones({ C }, o)
  elseif training or running_mean == nil then
    local n = x:numel() / C
    if n <= 1 and training then
      error(("%s: expected more than 1 value per channel when training, got input shape %s"):format(who, shape_of(x)))
    end
    -- one dtype (under autocast x may be bfloat16 beside float32 parameters: float32, as composed before)
    local dt = weight and weight.dtype or bias and bias.dtype or x.dtype
    if x.dtype ~= dt then x = x:to(dt) end
    local st = { dims = channel_reduce_dims(x), bshape = bshape }
    local y = BatchNormBatchStats(x, weight, bias, eps, st)
    mean, var = st.mean, st.var -- biased, as normalised
    if update then
      ember.no_grad(function()
        if counter then counter:add_(1) end
        local m = momentum or (1 / counter:item())
        local unbiased = var:detach() * (n / (n - 1))
        running_mean:copy_(running_mean * (1 - m) + mean:detach():to(running_mean.dtype) * m)
        running_var:copy_(running_var * (1 - m) + unbiased:to(running_var.dtype) * m)
      end)
    end
    return as_input(x_in, y)
  else
    mean, var = running_mean, running_var
  end
  local y = (x - mean:view(bshape)) * (var + eps):rsqrt():view(bshape)
  if weight then y = y * weight:view(bshape) end
  if bias then y = y + bias:view(bshape) end
  return as_input(x_in, y)
end

-- Instance normalisation of x [N, C, *]: each sample's channel over the
-- spatial dims. use_input_stats: the instance's own statistics (and, with
-- running statistics given, those move by momentum towards the batch's
-- average of them); else the running statistics. `check_size`: an error
-- when there is a single spatial element to normalise over.
function M.instance_norm(who, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps, check_size)
  check_dtypes(who, x, { { "weight", weight }, { "bias", bias }, { "running_mean", running_mean },
    { "running_var", running_var } })
  local N, C = x.shape[1], x.shape[2]
  local n = 1 -- the spatial size (from the shape: an empty batch has no inferable dim for -1)
  for i = 3, x.ndim do n = n * x.shape[i] end
  local xr = x:reshape({ N, C, n })
  local y
  if use_input_stats then
    if n <= 1 and check_size then
      error(("%s: expected more than 1 spatial element when training, got input shape %s"):format(who, shape_of(x)))
    end
    local mean = xr:mean(3, true)
    local d = xr - mean
    local var = (d * d):mean(3, true) -- biased, for normalising
    if running_mean ~= nil and not recomputing() then
      ember.no_grad(function()
        local m = momentum
        local unbiased = var:detach():reshape({ N, C }) * (n / (n - 1))
        local bm = mean:detach():reshape({ N, C }):mean(1):to(running_mean.dtype)
        running_mean:copy_(running_mean * (1 - m) + bm * m)
        running_var:copy_(running_var * (1 - m) + unbiased:mean(1):to(running_var.dtype) * m)
      end)
    end
    y = d * (var + eps):rsqrt()
  else
    y = (xr - running_mean:view({ 1, C, 1 })) * (running_var + eps):rsqrt():view({ 1, C, 1 })
  end
  if weight then y = y * weight:view({ 1, C, 1 }) end
  if bias then y = y + bias:view({ 1, C, 1 }) end
  return as_input(x, y:reshape(x.shape))
end

-- Group normalisation of x [N, C, *] (C divisible by G, checked by the caller);
-- who: the caller, for errors.
function M.group_norm(who, x, G, weight, bias, eps)
  check_dtypes(who, x, { { "weight", weight }, { "bias", bias } })
  local N = x.shape[1]
  local xg = x:reshape({ N, G, x:numel() // math.max(N * G, 1) }) -- (not -1: an empty batch has no inferable dim)
  local mean = xg:mean(3, true)
  local d = xg - mean
  local var = (d * d):mean(3, true)
  local y = (d * (var + eps):rsqrt()):reshape(x.shape)
  local cshape = channel_shape(x, x.shape[2])
  if weight then y = y * weight:view(cshape) end
  if bias then y = y + bias:view(cshape) end
  return as_input(x, y)
end

-- Raises unless x's last dims are `ns` (a table of integers).
function M.check_trailing(who, x, ns)
  local n = #ns
  local ok = x.ndim >= n
  for i = 1, n do ok = ok and x.shape[x.ndim - n + i] == ns[i] end
  if not ok then
    error(("%s: input shape %s does not end with normalized_shape [%s]"):format(who, shape_of(x),
      table.concat(ns, ", ")))
  end
end

-- PyTorch's reset_running_stats (the batch and instance norms): running_mean 0, running_var 1,
-- num_batches_tracked 0, when the module keeps them.
function M.reset_running_stats(self)
  if self.running_mean == nil then return end
  ember.no_grad(function()
    self.running_mean:zero_()
    self.running_var:fill_(1)
    self.num_batches_tracked:zero_()
  end)
end

-- PyTorch's reset_parameters of a norm: the running statistics reset (when kept), the weight 1
-- and the bias 0 (when affine), as the constructor makes them.
function M.reset_parameters(self)
  M.reset_running_stats(self)
  ember.no_grad(function()
    if self.weight ~= nil then self.weight:fill_(1) end
    if self.bias ~= nil then self.bias:zero_() end
  end)
end

-- Layer normalisation over the last #ns dims (ember.layer_norm's kernel).
function M.layer_norm(who, x, ns, weight, bias, eps)
  M.check_trailing(who, x, ns)
  if not ember.autocast.enabled() then
    -- the kernel takes one dtype (its own error named ember.layer_norm, F.layer_norm's inside the library)
    for _, t in ipairs { { "weight", weight }, { "bias", bias } } do
      if t[2] ~= nil and t[2].dtype ~= x.dtype then
        error(("%s: the input is %s but the %s is %s (convert one: x:to(\"%s\") or the %s's dtype)"):format(who,
          x.dtype, t[1], t[2].dtype, t[2].dtype, t[1]))
      end
    end
  end
  return ember.layer_norm(x, #ns, weight, bias, eps)
end

-- torch.finfo(dtype).eps of the dtypes a norm computes in
local MACHINE_EPS = { float64 = 2.0 ^ -52, float32 = 2.0 ^ -23, bfloat16 = 2.0 ^ -7, float16 = 2.0 ^ -10 }

-- RMS normalisation over the last #ns dims: x / sqrt(mean(x^2) + eps) * weight;
-- eps nil is the machine epsilon of the dtype it computes in. The backend's
-- fused kernel where it has one and the weight is in x's dtype (under
-- autocast both become float32), else composed (bfloat16 in float32).
function M.rms_norm(who, x, ns, weight, eps)
  M.check_trailing(who, x, ns)
  local n = #ns
  local in_dtype = x.dtype
  local low = in_dtype == "bfloat16" or in_dtype == "float16"
  eps = eps or MACHINE_EPS[low and "float32" or in_dtype] or MACHINE_EPS.float32
  if weight == nil or weight.dtype == in_dtype or ember.autocast.enabled() then
    local y = ember._rms_norm(x, n, weight, eps)
    if y then return y end
  end
  local h = low and x:to("float32") or x
  -- the mean of squares over the last n dims, kept for broadcasting
  local sq = h * h
  local ms
  if n == 1 then
    ms = sq:mean(-1, true)
  else
    local flat = {}
    for i = 1, x.ndim - n do flat[i] = x.shape[i] end
    local count = 1
    for i = 1, n do count = count * ns[i] end
    flat[#flat + 1] = count -- (not -1: an empty batch has no inferable dim)
    ms = sq:reshape(flat):mean(-1, true)
    for _ = 2, n do ms = ms:unsqueeze(-1) end
  end
  local y = h * (ms + eps):rsqrt()
  if weight then y = y * weight end
  if low and not ember.autocast.enabled() then y = y:to(in_dtype) end
  return y
end

return M
