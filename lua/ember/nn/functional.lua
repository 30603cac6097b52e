--- nn.functional: torch.nn.functional's functions, under its names:
-- `local F = ember.nn.functional` (or `require "ember.nn.functional"`),
-- then `F.conv2d(x, w, b, {stride = 2, padding = 1})`, `F.max_pool2d(x, 2)`,
-- `F.batch_norm(x, mean, var, {training = true})`, `F.interpolate(x,
-- {scale_factor = 2, mode = "bilinear"})`, `F.cross_entropy(logits, y)`.
--
-- What ember already has as a function is the same function here (no
-- copy: `F.relu == ember.relu`, `F.softmax == ember.softmax`, with their
-- conventions: ember.softmax needs its dim, dims, targets and ids are
-- 1-based), but for the losses (nll_loss, l1_loss, smooth_l1_loss,
-- huber_loss, kl_div, binary_cross_entropy(_with_logits)), which take
-- torch's positional order here besides ember's options table. Where torch's default differs from ember's function, F has
-- torch's: F.normalize and F.cosine_similarity work along dim 2 (torch's
-- dim=1), ember.normalize and ember.cosine_similarity along the last;
-- F.one_hot's num_classes may be left out (the largest label).
-- The rest are written once, and the modules call the same code: nn.Conv2d's
-- forward is `F.conv2d`'s with its own weight, nn.BatchNorm2d's is
-- `F.batch_norm`'s with its running statistics, and so on.
--
-- Arguments: the tensors positionally, the rest either positionally in
-- torch's order (`F.conv2d(x, w, b, 2, 1)`: stride 2, padding 1) or as an
-- options table by torch's keyword names, where an options table may
-- stand for all the arguments from its place on (`F.conv2d(x, w, {padding
-- = 1})`: no bias). Unknown options are refused. Sizes are an integer or
-- a table ({h, w}), as torch's int or tuple. Errors name the function
-- ("nn.functional.conv2d: ...") at the caller's line.
-- @usage local F = ember.nn.functional
-- local x = ember.randn(2, 3, 8, 8)
-- local y = F.conv2d(x, ember.randn(4, 3, 3, 3), nil, {padding = 1})
-- print(y.shape)                                       --> ember.Size{2, 4, 8, 8}
-- print(F.max_pool2d(y, 2).shape)                      --> ember.Size{2, 4, 4, 4}
-- print(F.interpolate(x, {scale_factor = 2, mode = "bilinear"}).shape)   --> ember.Size{2, 3, 16, 16}
-- print(F.relu == ember.relu)                          --> true
-- @module nn.functional
local ember = require "ember.nn._ember"
local impl = require "ember.nn._functional_impl"
-- arguments past a function's own are an error naming it (they were dropped without a word)
local no_extra = require("ember._errors").no_extra

local F = {}

-- ember's functions that are torch.nn.functional's (the same values)
local SAME = {
  "relu", "relu6", "gelu", "silu", "elu", "leaky_relu", "softplus", "sigmoid", "tanh", "hardtanh", "hardswish",
  "hardsigmoid", "mish", "glu", "softmax", "log_softmax", "linear", "pad", "nll_loss",
  "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
  "binary_cross_entropy", "binary_cross_entropy_with_logits", "scaled_dot_product_attention",
}
for _, name in ipairs(SAME) do F[name] = ember[name] end

-- The losses after (input, target) in torch's positional order, or an
-- options table (ember's functions take the table only: the positional
-- arguments were dropped without a word, F.l1_loss(x, y, nil, nil, "sum")
-- gave the mean). size_average and reduce, torch's deprecated pair, are
-- refused saying what to write.
local LOSS_ARGS = {
  nll_loss = { "weight", "size_average", "ignore_index", "reduce", "reduction" },
  l1_loss = { "size_average", "reduce", "reduction" },
  smooth_l1_loss = { "size_average", "reduce", "reduction", "beta" },
  huber_loss = { "reduction", "delta" },
  kl_div = { "size_average", "reduce", "reduction", "log_target" },
  binary_cross_entropy = { "weight", "size_average", "reduce", "reduction" },
  binary_cross_entropy_with_logits = { "weight", "size_average", "reduce", "reduction", "pos_weight" },
}
local function loss_args(who, names, ...)
  local o = require("ember.nn._functional_checks").args(who, names, ...)
  for i, k in ipairs(names) do
    local v = o[k]
    if v ~= nil and (k == "size_average" or k == "reduce") then
      require("ember.nn._loss").deprecated_reduction(who, k, i + 2)
    end
    if v ~= nil and (k == "weight" or k == "pos_weight") and not ember.is_tensor(v) then
      require("ember._errors").raise("%s: options must be a table ({%s = ...}), and %s (argument %d by position) a tensor, "
        .. "got %s", who, type(v) == "string" and "reduction" or k, k, i + 2, type(v) == "string" and ("%q"):format(v) or type(v))
    end
  end
  return o
end
for name, names in pairs(LOSS_ARGS) do
  local fn, who = ember[name], "nn.functional." .. name
  F[name] = function(input, target, ...) return fn(input, target, loss_args(who, names, ...)) end
end

-- ---- convolutions ------------------------------------------------------

--- 2-d convolution (cross-correlation), as torch.nn.functional.conv2d:
-- `F.conv2d(x, weight [, bias] [, {stride=1, padding=0, dilation=1, groups=1}])`
-- or torch's positional `F.conv2d(x, weight, bias, stride, padding, dilation, groups)`.
-- x [N, C, H, W] or [C, H, W], weight [out, C / groups, kh, kw], bias [out]
-- or nil. Sizes are an integer or a pair {h, w}; padding is also "same"
-- (stride 1) or "valid". nn.Conv2d's forward is this (nn/_conv.lua): the
-- backend's kernel where it has one, else composed from core ops.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, dilation, groups, or an options table
-- @treturn Tensor [N, out, Ho, Wo]
-- @usage local F = ember.nn.functional
-- local y = F.conv2d(ember.randn(1, 4, 9, 9), ember.randn(8, 2, 3, 3), nil, {stride = 2, groups = 2})
-- print(y.shape)   --> ember.Size{1, 8, 4, 4}
function F.conv2d(x, weight, bias, ...) return impl.conv2d(x, weight, bias, ...) end

--- 1-d convolution, as torch.nn.functional.conv1d: `F.conv1d(x, weight [,
-- bias] [, {stride=1, padding=0, dilation=1, groups=1}])` (or positional, as
-- conv2d), x [N, C, L] or [C, L], weight [out, C / groups, k]. nn.Conv1d's
-- forward is this.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, dilation, groups, or an options table
-- @treturn Tensor [N, out, Lo]
-- @usage local F = ember.nn.functional
-- print(F.conv1d(ember.randn(2, 3, 10), ember.randn(5, 3, 3), nil, {padding = "same"}).shape)   --> ember.Size{2, 5, 10}
function F.conv1d(x, weight, bias, ...) return impl.conv1d(x, weight, bias, ...) end

--- 2-d transposed convolution, as torch.nn.functional.conv_transpose2d:
-- `F.conv_transpose2d(x, weight [, bias] [, {stride=1, padding=0,
-- output_padding=0, groups=1, dilation=1}])` or torch's positional order
-- (stride, padding, output_padding, groups, dilation). weight [C, out /
-- groups, kh, kw]. The output is [N, out, Ho, Wo], Ho = (H - 1) stride -
-- 2 padding + dilation (kh - 1) + output_padding + 1. nn.ConvTranspose2d's
-- forward is this (nn/_conv_transpose.lua).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, output_padding, groups, dilation, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.conv_transpose2d(ember.randn(1, 4, 5, 5), ember.randn(4, 2, 4, 4), nil, {stride = 2, padding = 1}).shape)   --> ember.Size{1, 2, 10, 10}
function F.conv_transpose2d(x, weight, bias, ...) return impl.conv_transpose2d(x, weight, bias, ...) end

--- 1-d transposed convolution, as torch.nn.functional.conv_transpose1d:
-- as conv_transpose2d on [N, C, L] (or [C, L]) with weight [C, out / groups, k].
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, output_padding, groups, dilation, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.conv_transpose1d(ember.randn(2, 3, 6), ember.randn(3, 5, 3), nil, {stride = 2}).shape)   --> ember.Size{2, 5, 13}
function F.conv_transpose1d(x, weight, bias, ...) return impl.conv_transpose1d(x, weight, bias, ...) end

--- 3-d transposed convolution, as torch.nn.functional.conv_transpose3d: `F.conv_transpose3d(x,
-- weight [, bias] [, {stride=1, padding=0, output_padding=0, groups=1, dilation=1}])` or torch's
-- positional order (stride, padding, output_padding, groups, dilation). x [N, C, D, H, W] or
-- [C, D, H, W], weight [C, out / groups, kd, kh, kw]; each output size is (in - 1) stride -
-- 2 padding + dilation (k - 1) + output_padding + 1. nn.ConvTranspose3d's forward.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias [out]
-- @param[opt] ... stride, padding, output_padding, groups, dilation, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.conv_transpose3d(ember.randn(1, 4, 3, 3, 3), ember.randn(4, 2, 2, 2, 2), nil, {stride = 2}).shape)   --> ember.Size{1, 2, 6, 6, 6}
function F.conv_transpose3d(x, weight, bias, ...) return impl.conv_transpose3d(x, weight, bias, ...) end

-- ---- pooling -----------------------------------------------------------

--- 2-d max pooling, as torch.nn.functional.max_pool2d: `F.max_pool2d(x,
-- kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])` or positional (stride, padding, dilation,
-- ceil_mode, return_indices). x [N, C, H, W] or [C, H, W]; padding is
-- -inf, at most half the kernel. The gradient goes to the first largest
-- value of each window. nn.MaxPool2d's forward is this. With
-- return_indices, also where each max is: int64, 1-based flat indices into
-- each H * W plane (PyTorch's, plus one), what `F.max_unpool2d` takes.
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, dilation, ceil_mode, return_indices, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.max_pool2d(ember.randn(1, 2, 7, 7), 3, {stride = 2, ceil_mode = true}).shape)   --> ember.Size{1, 2, 3, 3}
-- local y, idx = F.max_pool2d(ember.tensor{{{{1, 5}, {7, 2}}}}, 2, {return_indices = true})
-- print(y:item(), idx:item())                                   --> 7.0 3
function F.max_pool2d(x, kernel_size, ...) return impl.max_pool2d(x, kernel_size, ...) end

--- 2-d average pooling, as torch.nn.functional.avg_pool2d: `F.avg_pool2d(x,
-- kernel_size [, {stride=kernel_size, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override=}])` or positional in that
-- order. nn.AvgPool2d's forward is this.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, ceil_mode, count_include_pad, divisor_override, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.avg_pool2d(ember.ones(1, 1, 4, 4), 2):sum():item())   --> 4.0
function F.avg_pool2d(x, kernel_size, ...) return impl.avg_pool2d(x, kernel_size, ...) end

--- torch.nn.functional.max_pool2d_with_indices: `F.max_pool2d` with
-- return_indices = true (the values and the 1-based flat indices).
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, dilation, ceil_mode, or an options table
-- @treturn Tensor
-- @treturn Tensor the indices
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool2d_with_indices(ember.tensor{{{{1, 5}, {7, 2}}}}, 2)
-- print(y:item(), idx:item())   --> 7.0 3
function F.max_pool2d_with_indices(x, kernel_size, ...) return impl.max_pool2d_with_indices(x, kernel_size, ...) end

--- torch.nn.functional.max_pool1d_with_indices: `F.max_pool1d` with return_indices = true.
-- @tparam Tensor x
-- @int kernel_size
-- @param[opt] ... stride, padding, dilation, ceil_mode, or an options table
-- @treturn Tensor
-- @treturn Tensor the indices
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool1d_with_indices(ember.tensor{{{1, 5, 2, 4}}}, 2)
-- print(idx)   --> tensor([[[2, 4]]], shape=[1, 1, 2], dtype=int64, device=cpu)
function F.max_pool1d_with_indices(x, kernel_size, ...) return impl.max_pool1d_with_indices(x, kernel_size, ...) end

--- 1-d max pooling, as torch.nn.functional.max_pool1d: `F.max_pool1d(x,
-- kernel_size [, {stride=, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])`, x [N, C, L] or [C, L]. nn.MaxPool1d's forward
-- is this. return_indices: also the 1-based positions of the maxima.
-- @tparam Tensor x
-- @int kernel_size
-- @param[opt] ... stride, padding, dilation, ceil_mode, return_indices, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.max_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2))   --> tensor([[[5.0000, 4.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.max_pool1d(x, kernel_size, ...) return impl.max_pool1d(x, kernel_size, ...) end

--- 1-d average pooling, as torch.nn.functional.avg_pool1d: `F.avg_pool1d(x,
-- kernel_size [, {stride=, padding=0, ceil_mode=false, count_include_pad=true}])`.
-- nn.AvgPool1d's forward is this.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int kernel_size
-- @param[opt] ... stride, padding, ceil_mode, count_include_pad, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.avg_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2))   --> tensor([[[3.0000, 3.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.avg_pool1d(x, kernel_size, ...) return impl.avg_pool1d(x, kernel_size, ...) end

--- max_pool2d's partial inverse, as torch.nn.functional.max_unpool2d:
-- `F.max_unpool2d(x, indices, kernel_size [, {stride=kernel_size,
-- padding=0, output_size=}])` (or positional): each value of x put at its
-- index (max_pool2d's return_indices, 1-based) of an output plane of
-- (H - 1) stride - 2 padding + kernel rows (and columns; output_size
-- chooses another size), zeros elsewhere. An index that repeats
-- (overlapping windows) keeps one of its values, as PyTorch's (which one
-- is unspecified there too).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @tparam Tensor indices int64, x's shape
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, padding, output_size, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{{{{1, 5}, {7, 2}}}}
-- local y, idx = F.max_pool2d(x, 2, {return_indices = true})
-- print(F.max_unpool2d(y, idx, 2))   --> tensor([[[[0.0000, 0.0000], [7.0000, 0.0000]]]], shape=[1, 1, 2, 2], dtype=float32, device=cpu)
function F.max_unpool2d(x, indices, kernel_size, ...) return impl.max_unpool2d(x, indices, kernel_size, ...) end

--- max_pool1d's partial inverse, as torch.nn.functional.max_unpool1d:
-- `F.max_unpool1d(x, indices, kernel_size [, {stride=, padding=0, output_size=}])`.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @tparam Tensor indices int64, x's shape (1-based)
-- @int kernel_size
-- @param[opt] ... stride, padding, output_size, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool1d(ember.tensor{{{1, 5, 2, 4}}}, 2, {return_indices = true})
-- print(F.max_unpool1d(y, idx, 2))   --> tensor([[[0.0000, 5.0000, 0.0000, 4.0000]]], shape=[1, 1, 4], dtype=float32, device=cpu)
function F.max_unpool1d(x, indices, kernel_size, ...) return impl.max_unpool1d(x, indices, kernel_size, ...) end

--- Adaptive 2-d average pooling, as torch.nn.functional.adaptive_avg_pool2d:
-- `F.adaptive_avg_pool2d(x, output_size)`, output_size an integer or
-- {oh, ow} (false: that dim's size, PyTorch's None); PyTorch's bins.
-- nn.AdaptiveAvgPool2d's forward is this.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param output_size
-- @treturn Tensor [N, C, oh, ow]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_avg_pool2d(ember.randn(2, 8, 7, 5), 1).shape)   --> ember.Size{2, 8, 1, 1}
function F.adaptive_avg_pool2d(x, output_size, ...)
  no_extra("nn.functional.adaptive_avg_pool2d", { "output_size" }, 2, output_size, ...)
  return impl.adaptive_avg_pool2d(x, output_size)
end

--- Adaptive 2-d max pooling, as torch.nn.functional.adaptive_max_pool2d.
-- nn.AdaptiveMaxPool2d's forward is this. With return_indices, also where
-- each max is: int64, 1-based flat indices into each input plane of H * W
-- (PyTorch's are 0-based), as F.max_pool2d's.
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @param output_size an integer or {oh, ow}
-- @param[opt] ... return_indices (false), or an options table
-- @treturn Tensor [N, C, oh, ow]
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.adaptive_max_pool2d(ember.randn(2, 8, 7, 5), {3, 2}).shape)   --> ember.Size{2, 8, 3, 2}
function F.adaptive_max_pool2d(x, output_size, ...) return impl.adaptive_max_pool2d(x, output_size, ...) end

--- Adaptive 1-d average pooling, as torch.nn.functional.adaptive_avg_pool1d.
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int output_size
-- @treturn Tensor [N, C, output_size]
-- @usage local F = ember.nn.functional
-- print(F.adaptive_avg_pool1d(ember.tensor{{{1, 2, 3, 4}}}, 2))   --> tensor([[[1.5000, 3.5000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.adaptive_avg_pool1d(x, output_size, ...)
  no_extra("nn.functional.adaptive_avg_pool1d", { "output_size" }, 2, output_size, ...)
  return impl.adaptive_avg_pool1d(x, output_size)
end

--- Adaptive 1-d max pooling, as torch.nn.functional.adaptive_max_pool1d.
-- With return_indices, also the 1-based positions of the maxima (int64).
-- @tparam Tensor x [N, C, L] or [C, L]
-- @int output_size
-- @param[opt] ... return_indices (false), or an options table
-- @treturn Tensor [N, C, output_size]
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.adaptive_max_pool1d(ember.tensor{{{1, 2, 3, 4}}}, 2))   --> tensor([[[2.0000, 4.0000]]], shape=[1, 1, 2], dtype=float32, device=cpu)
function F.adaptive_max_pool1d(x, output_size, ...) return impl.adaptive_max_pool1d(x, output_size, ...) end

-- ---- normalisation -----------------------------------------------------

--- Batch normalisation, as torch.nn.functional.batch_norm:
-- `F.batch_norm(x, running_mean, running_var [, weight, bias, training=false,
-- momentum=0.1, eps=1e-5])`, or an options table for any of them from its
-- place on (`F.batch_norm(x, rm, rv, {training = true})`). x [N, C, *].
-- Training (or without running statistics): each channel normalised by the
-- batch's mean and biased variance, and the running statistics (when
-- given) updated in place: running = (1 - momentum) running + momentum
-- batch (unbiased variance). Evaluation: the running statistics are used.
-- Then times weight and plus bias ([C] each, optional). nn.BatchNorm1d/2d's
-- forward is this (nn/_norm.lua).
-- @tparam Tensor x
-- @tparam[opt] Tensor running_mean [C], updated in place when training
-- @tparam[opt] Tensor running_var [C], updated in place when training
-- @param[opt] ... weight, bias, training, momentum, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local mean, var = ember.zeros(3), ember.ones(3)
-- local y = F.batch_norm(ember.randn(8, 3, 4, 4) + 2, mean, var, {training = true})
-- print(mean:gt(0.1):all():item())   --> true
function F.batch_norm(x, ...) return impl.batch_norm(x, ...) end

--- Instance normalisation, as torch.nn.functional.instance_norm:
-- `F.instance_norm(x [, running_mean, running_var, weight, bias,
-- use_input_stats=true, momentum=0.1, eps=1e-5])` or an options table:
-- each sample's channel normalised over the spatial dims of x [N, C, *]
-- with its own mean and biased variance (use_input_stats; the running
-- statistics, when given, move towards the batch's average of them), or
-- with the running statistics. nn.InstanceNorm1d/2d's forward is this.
-- @tparam Tensor x
-- @param[opt] ... running_mean, running_var, weight, bias, use_input_stats, momentum, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.instance_norm(ember.randn(2, 3, 16) * 5 + 1)
-- print(y:mean(3):abs():max():item() < 1e-5)   --> true
function F.instance_norm(x, ...) return impl.instance_norm(x, ...) end

--- Group normalisation, as torch.nn.functional.group_norm:
-- `F.group_norm(x, num_groups [, weight, bias, eps=1e-5])` or an options
-- table: the channels of x [N, C, *] split into num_groups groups, each
-- sample's group normalised by its mean and biased variance, then times
-- weight and plus bias ([C], optional). nn.GroupNorm's forward is this.
-- @tparam Tensor x
-- @int num_groups dividing C
-- @param[opt] ... weight, bias, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- print(F.group_norm(ember.randn(2, 6, 5), 3).shape)   --> ember.Size{2, 6, 5}
function F.group_norm(x, num_groups, ...) return impl.group_norm(x, num_groups, ...) end

--- Layer normalisation, as torch.nn.functional.layer_norm:
-- `F.layer_norm(x, normalized_shape [, weight, bias, eps=1e-5])` or an
-- options table: x normalised over its last #normalized_shape dims (which
-- must be normalized_shape: an integer or a table), then times weight and
-- plus bias (normalized_shape each, optional). `ember.layer_norm(x, n, ...)`
-- takes the number of dims instead. nn.LayerNorm's forward is this.
-- @tparam Tensor x
-- @param normalized_shape
-- @param[opt] ... weight, bias, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.layer_norm(ember.randn(2, 5, 8), 8)
-- print(y:mean(-1):abs():max():item() < 1e-5)   --> true
function F.layer_norm(x, normalized_shape, ...) return impl.layer_norm(x, normalized_shape, ...) end

--- Root-mean-square normalisation, as torch.nn.functional.rms_norm
-- (PyTorch 2.4): `F.rms_norm(x, normalized_shape [, weight, eps])` or an
-- options table: x / sqrt(mean(x^2 over the last dims) + eps) * weight;
-- eps nil is the machine epsilon of the dtype (float32's for bfloat16
-- input, which is computed in float32). nn.RMSNorm's forward is this.
-- @tparam Tensor x
-- @param normalized_shape an integer or a table
-- @param[opt] ... weight, eps, or an options table
-- @treturn Tensor x's shape
-- @usage local F = ember.nn.functional
-- local y = F.rms_norm(ember.randn(3, 16) * 4, 16, {eps = 1e-6})
-- print(((y * y):mean(-1) - 1):abs():max():item() < 1e-4)   --> true
function F.rms_norm(x, normalized_shape, ...) return impl.rms_norm(x, normalized_shape, ...) end

-- ---- resampling --------------------------------------------------------

--- Resampling, as torch.nn.functional.interpolate: `F.interpolate(x,
-- {size =, scale_factor =, mode = "nearest", align_corners =,
-- recompute_scale_factor =})` (or torch's positional order). x
-- [N, C, L], [N, C, H, W] or [N, C, D, H, W]; give size (an integer or a
-- table: the output's spatial sizes) or scale_factor (a number or a table:
-- each size times it, rounded down). Modes: "nearest" (PyTorch's, with its
-- float32 index arithmetic), "nearest-exact", "linear" (3-d), "bilinear"
-- (4-d), "bicubic" (4-d, A = -0.75, as PyTorch), "trilinear" (5-d) and
-- "area" (adaptive average pooling). align_corners (the interpolating
-- modes only; false by default) maps the corner pixels' centres onto each
-- other. With a scale_factor the source positions use it (1 / scale_factor),
-- as PyTorch, unless recompute_scale_factor. Differentiable (an
-- index_select per tap, summed); nn.Upsample's forward is this. antialias
-- (bilinear and bicubic) widens the filter by the scale when downsampling,
-- as PyTorch's (torchvision's Resize), so each output averages every input
-- it covers.
-- @tparam Tensor x
-- @param[opt] ... size, scale_factor, mode, align_corners, recompute_scale_factor, antialias, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{{{{1, 2}, {3, 4}}}}
-- print(F.interpolate(x, {size = 3, mode = "bilinear", align_corners = true}))   --> tensor([[[[1.0000, 1.5000, 2.0000], [2.0000, 2.5000, 3.0000], [3.0000, 3.5000, 4.0000]]]], shape=[1, 1, 3, 3], dtype=float32, device=cpu)
-- print(F.interpolate(x, {scale_factor = 2}).shape)                             --> ember.Size{1, 1, 4, 4}
function F.interpolate(x, ...) return impl.interpolate(x, ...) end

--- torch.nn.functional.upsample (deprecated there): F.interpolate.
-- @tparam Tensor x
-- @param[opt] ... as interpolate's
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample(ember.randn(1, 2, 3), {scale_factor = 2, mode = "linear"}).shape)   --> ember.Size{1, 2, 6}
function F.upsample(x, ...) return impl.upsample(x, ...) end

--- torch.nn.functional.upsample_nearest: `F.upsample_nearest(x [, size, scale_factor])` (or an options table).
-- @tparam Tensor x
-- @param[opt] ... size, scale_factor, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample_nearest(ember.randn(1, 2, 3, 3), {size = 5}).shape)   --> ember.Size{1, 2, 5, 5}
function F.upsample_nearest(x, ...) return impl.upsample_nearest(x, ...) end

--- torch.nn.functional.upsample_bilinear: bilinear with align_corners = true,
-- as PyTorch's: `F.upsample_bilinear(x [, size, scale_factor])` (or an options table).
-- @tparam Tensor x [N, C, H, W]
-- @param[opt] ... size, scale_factor, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.upsample_bilinear(ember.randn(1, 2, 3, 3), {scale_factor = 2}).shape)   --> ember.Size{1, 2, 6, 6}
function F.upsample_bilinear(x, ...) return impl.upsample_bilinear(x, ...) end

-- ---- sliding windows ---------------------------------------------------

--- Sliding local blocks (im2col), as torch.nn.functional.unfold:
-- `F.unfold(x, kernel_size [, dilation=1, padding=0, stride=1])` or an
-- options table. x [N, C, H, W] (or [C, H, W]) gives [N, C kh kw, L]: column
-- l holds block l's values (channel-major, then the kernel's rows and
-- columns), L = Ho Wo blocks in row-major order. The columns nn.Conv2d's
-- composed route multiplies (nn/_conv.lua). `ember.unfold` / `x:unfold` is
-- torch's Tensor.unfold (windows of one dim), not this.
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... dilation, padding, stride, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.unfold(ember.randn(2, 3, 5, 5), 3, {padding = 1}).shape)   --> ember.Size{2, 27, 25}
function F.unfold(x, kernel_size, ...) return impl.unfold(x, kernel_size, ...) end

--- Sliding local blocks summed back into an image (col2im), as
-- torch.nn.functional.fold, unfold's adjoint: `F.fold(x, output_size,
-- kernel_size [, dilation=1, padding=0, stride=1])` or an options table.
-- x [N, C kh kw, L] (or [C kh kw, L]) gives [N, C, H, W] with {H, W} =
-- output_size; values of overlapping blocks add up.
-- @tparam Tensor x
-- @param output_size an integer or {H, W}
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... dilation, padding, stride, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local ones = ember.ones(1, 4, 9)                 -- 3 x 3 blocks of 2 x 2, one channel
-- local y = F.fold(ones, 4, 2)                       -- overlapping: the middle is hit 4 times
-- print(y.shape, y:sum():item())                     --> ember.Size{1, 1, 4, 4} 36.0
function F.fold(x, output_size, kernel_size, ...) return impl.fold(x, output_size, kernel_size, ...) end

-- ---- torch's argument order where ember's differs ----------------------

--- Rows of `weight` picked by int64 ids, as torch.nn.functional.embedding
-- (torch's order: the ids first; `ember.embedding(weight, ids)` is the
-- other): `F.embedding(ids, weight [, {padding_idx =}])`. Ids are 1-based
-- (ember's convention); padding_idx (1-based) gets no gradient, as
-- PyTorch's. nn.Embedding's forward is this.
-- @tparam Tensor ids int64, 1-based
-- @tparam Tensor weight [num, dim]
-- @param[opt] ... padding_idx, or an options table
-- @treturn Tensor [..., dim]
-- @usage local F = ember.nn.functional
-- local w = ember.tensor{{0, 0}, {1, 2}, {3, 4}}
-- print(F.embedding(ember.tensor({3, 2}, {dtype = "int64"}), w))   --> tensor([[3.0000, 4.0000], [1.0000, 2.0000]], shape=[2, 2], dtype=float32, device=cpu)
function F.embedding(ids, weight, ...) return impl.embedding(ids, weight, ...) end

--- One-hot rows of 1-based int64 labels, as torch.nn.functional.one_hot:
-- `F.one_hot(labels [, num_classes])`, int64 [..., num_classes];
-- num_classes left out (or -1, torch's default) is the largest label.
-- `ember.one_hot`, which this calls, needs it.
-- @tparam Tensor labels int64, 1-based
-- @int[opt] num_classes
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.one_hot(ember.tensor({3, 1}, {dtype = "int64"})))   --> tensor([[0, 0, 1], [1, 0, 0]], shape=[2, 3], dtype=int64, device=cpu)
function F.one_hot(labels, num_classes, ...)
  no_extra("nn.functional.one_hot", { "num_classes" }, 2, num_classes, ...)
  return impl.one_hot(labels, num_classes)
end

--- Mean squared error, as torch.nn.functional.mse_loss: `F.mse_loss(input,
-- target [, reduction])`, reduction "mean" (default), "sum" or "none", by
-- position (as `ember.mse_loss`, which this calls) or as `{reduction =}`.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.mse_loss(ember.tensor{1, 2}, ember.tensor{0, 0}, {reduction = "sum"}):item())   --> 5.0
function F.mse_loss(input, target, ...) return impl.mse_loss(input, target, ...) end

--- Cross entropy, as torch.nn.functional.cross_entropy with ember's layout:
-- `F.cross_entropy(logits, target [, {weight =, ignore_index = -100,
-- label_smoothing = 0, reduction = "mean"}])` (or those by position in torch's
-- order: weight, size_average, ignore_index, reduce, reduction, label_smoothing;
-- size_average and reduce, deprecated in torch, are refused), logits [N, C] (or [C]) and
-- 1-based int64 class ids [N] (or 0-d): `ember.cross_entropy`'s fused op.
-- With a class `weight` [C], or with float targets holding class
-- probabilities shaped like the logits, nn.CrossEntropyLoss's rule (which
-- also takes [..., C] logits, the classes last).
-- @tparam Tensor logits
-- @tparam Tensor target int64 class ids, or float class probabilities
-- @tparam[opt] table opts weight, ignore_index, label_smoothing, reduction
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local logits = ember.tensor({{2, 0, 0}, {0, 2, 0}})
-- print(F.cross_entropy(logits, ember.tensor({1, 2}, "int64")):item() < 0.25)                      --> true
-- print(F.cross_entropy(logits, ember.tensor({{1, 0, 0}, {0, 1, 0}})):item() < 0.25)               --> true
-- print(F.cross_entropy(logits, ember.tensor({1, 2}, "int64"), {weight = ember.ones(3)}).shape)   --> ember.Size{}
function F.cross_entropy(logits, target, ...)
  -- torch's positional order too
  local o = loss_args("nn.functional.cross_entropy",
    { "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing" }, ...)
  return impl.cross_entropy(logits, target, next(o) ~= nil and o or nil)
end

-- ---- the modules' rules as functions, and torch's activations ember had not ----

--- x / (1 + |x|), as torch.nn.functional.softsign (nn.Softsign's forward).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softsign(ember.tensor{-3, 1}))   --> tensor([-0.7500,  0.5000], shape=[2], dtype=float32, device=cpu)
function F.softsign(x, ...)
  no_extra("nn.functional.softsign", {}, 2, ...)
  return impl.softsign(x)
end

--- x where x > 0, weight * x elsewhere, as torch.nn.functional.prelu
-- (nn.PReLU's forward): weight has one value, or C values for the
-- channels of x [N, C, *].
-- @tparam Tensor x
-- @tparam Tensor weight
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.prelu(ember.tensor{-2, 3}, ember.tensor{0.25}))   --> tensor([-0.5000,  3.0000], shape=[2], dtype=float32, device=cpu)
function F.prelu(x, weight, ...)
  no_extra("nn.functional.prelu", { "weight" }, 2, weight, ...)
  return impl.prelu(x, weight)
end

--- Channel dropout, as torch.nn.functional.dropout2d: `F.dropout2d(x [, p=0.5,
-- training=true, inplace=false])` (or an options table): each channel of [N, C, H, W]
-- (or [C, H, W]) zeroed whole with probability p, the rest scaled by
-- 1 / (1 - p); x itself when not training. nn.Dropout2d's forward. torch's
-- inplace (here and in every dropout, selu, celu, threshold and rrelu): true
-- puts the result into x, as `F.relu_` and the like.
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout2d(ember.ones(2, 3, 4, 4), 0.5, false):sum():item())   --> 96.0
function F.dropout2d(x, ...) return impl.dropout2d(x, ...) end

--- [*, C r^2, H, W] -> [*, C, H r, W r], as torch.nn.functional.pixel_shuffle (nn.PixelShuffle's forward).
-- @tparam Tensor x
-- @int upscale_factor r
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pixel_shuffle(ember.randn(1, 8, 3, 3), 2).shape)   --> ember.Size{1, 2, 6, 6}
function F.pixel_shuffle(x, upscale_factor, ...)
  no_extra("nn.functional.pixel_shuffle", { "upscale_factor" }, 2, upscale_factor, ...)
  return impl.pixel_shuffle(x, upscale_factor)
end

--- [*, C, H r, W r] -> [*, C r^2, H, W], as torch.nn.functional.pixel_unshuffle (nn.PixelUnshuffle's forward).
-- @tparam Tensor x
-- @int downscale_factor r
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pixel_unshuffle(ember.randn(1, 2, 6, 6), 2).shape)   --> ember.Size{1, 8, 3, 3}
function F.pixel_unshuffle(x, downscale_factor, ...)
  no_extra("nn.functional.pixel_unshuffle", { "downscale_factor" }, 2, downscale_factor, ...)
  return impl.pixel_unshuffle(x, downscale_factor)
end

--- ||x1 - x2 + eps||_p over the last dim, as torch.nn.functional.pairwise_distance:
-- `F.pairwise_distance(x1, x2 [, p=2, eps=1e-6, keepdim=false])` or an
-- options table. nn.PairwiseDistance's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @param[opt] ... p, eps, keepdim, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pairwise_distance(ember.tensor{{3, 4}}, ember.zeros(1, 2), {eps = 0}))   --> tensor([5.0000], shape=[1], dtype=float32, device=cpu)
function F.pairwise_distance(x1, x2, ...) return impl.pairwise_distance(x1, x2, ...) end

--- The triplet margin loss, as torch.nn.functional.triplet_margin_loss:
-- `F.triplet_margin_loss(anchor, positive, negative [, margin=1, p=2,
-- eps=1e-6, swap=false])`, with {reduction = "mean"} by name (or every
-- option in the table): max(d(a, p) - d(a, n) + margin, 0), d the
-- pairwise distance. nn.TripletMarginLoss's forward.
-- @tparam Tensor anchor [N, D] or [D]
-- @tparam Tensor positive
-- @tparam Tensor negative
-- @param[opt] ... margin, p, eps, swap, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local a = ember.zeros(1, 2)
-- print(F.triplet_margin_loss(a, a, ember.tensor{{3, 4}}, {margin = 6, eps = 0}):item())   --> 1.0
function F.triplet_margin_loss(anchor, positive, negative, ...)
  return impl.triplet_margin_loss(anchor, positive, negative, ...)
end

--- The margin ranking loss, as torch.nn.functional.margin_ranking_loss:
-- `F.margin_ranking_loss(x1, x2, y [, margin=0])`, {reduction = "mean"} by
-- name: max(-y (x1 - x2) + margin, 0), y 1 or -1. nn.MarginRankingLoss's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor y
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.margin_ranking_loss(ember.tensor{1, 2}, ember.tensor{2, 1}, ember.tensor{1, 1}):item())   --> 0.5
function F.margin_ranking_loss(x1, x2, y, ...) return impl.margin_ranking_loss(x1, x2, y, ...) end

--- x1^T W_o x2 (+ b_o) for every output o, as torch.nn.functional.bilinear:
-- x1 [..., I1], x2 [..., I2] with the same leading dims, weight [O, I1, I2],
-- bias [O] or nil. nn.Bilinear's forward.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @treturn Tensor [..., O]
-- @usage local F = ember.nn.functional
-- print(F.bilinear(ember.randn(4, 2), ember.randn(4, 3), ember.randn(5, 2, 3)).shape)   --> ember.Size{4, 5}
function F.bilinear(x1, x2, weight, bias, ...)
  no_extra("nn.functional.bilinear", { "bias" }, 4, bias, ...)
  return impl.bilinear(x1, x2, weight, bias)
end

--- log(sigmoid(x)) = -softplus(-x), as torch.nn.functional.logsigmoid (stable for large |x|).
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.logsigmoid(ember.tensor{0, -100}))   --> tensor([  -0.6931, -100.0000], shape=[2], dtype=float32, device=cpu)
function F.logsigmoid(x, ...)
  no_extra("nn.functional.logsigmoid", {}, 2, ...)
  return impl.logsigmoid(x)
end

--- softmax(-x) along a dim, as torch.nn.functional.softmin: `F.softmin(x, dim)`
-- (ember.softmax's arguments: a dim is required, `{dim =, dtype =}` too).
-- @tparam Tensor x
-- @param ... dim, as ember.softmax's
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softmin(ember.tensor{0, math.log(3)}, 1))   --> tensor([0.7500, 0.2500], shape=[2], dtype=float32, device=cpu)
function F.softmin(x, ...) return impl.softmin(x, ...) end

--- scale * elu(x, alpha) with PyTorch's constants (alpha 1.6733, scale 1.0507), as torch.nn.functional.selu:
-- `F.selu(x [, inplace=false])`.
-- @tparam Tensor x
-- @param[opt] ... inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.selu(ember.tensor{1}):item())   --> 1.0507010221481
function F.selu(x, ...) return impl.selu(x, ...) end

--- max(0, x) + min(0, alpha (e^(x / alpha) - 1)), as torch.nn.functional.celu: `F.celu(x [, alpha=1, inplace=false])` (or {alpha =, inplace =}).
-- @tparam Tensor x
-- @param[opt] ... alpha, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.celu(ember.tensor{2, -100}, 2))   --> tensor([ 2.0000, -2.0000], shape=[2], dtype=float32, device=cpu)
function F.celu(x, ...) return impl.celu(x, ...) end

--- x - tanh(x), as torch.nn.functional.tanhshrink.
-- @tparam Tensor x
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.tanhshrink(ember.tensor{0}):item())   --> 0.0
function F.tanhshrink(x, ...)
  no_extra("nn.functional.tanhshrink", {}, 2, ...)
  return impl.tanhshrink(x)
end

--- x where x > threshold, value elsewhere, as torch.nn.functional.threshold: `F.threshold(x, threshold, value [, inplace=false])`.
-- @tparam Tensor x
-- @number threshold
-- @number value
-- @bool[opt] inplace
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.threshold(ember.tensor{1, 3}, 2, -1))   --> tensor([-1.0000, 3.0000], shape=[2], dtype=float32, device=cpu)
function F.threshold(x, threshold, value, inplace, ...)
  no_extra("nn.functional.threshold", { "threshold", "value", "inplace" }, 2, threshold, value, inplace, ...)
  return impl.threshold(x, threshold, value, inplace)
end

--- x where |x| > lambd, 0 elsewhere, as torch.nn.functional.hardshrink: `F.hardshrink(x [, lambd=0.5])` (or {lambd =}).
-- @tparam Tensor x
-- @param[opt] ... lambd, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.hardshrink(ember.tensor{0.25, -2}))   --> tensor([ 0.0000, -2.0000], shape=[2], dtype=float32, device=cpu)
function F.hardshrink(x, ...) return impl.hardshrink(x, ...) end

--- x - lambd where x > lambd, x + lambd where x < -lambd, 0 between, as
-- torch.nn.functional.softshrink: `F.softshrink(x [, lambd=0.5])` (or {lambd =}).
-- @tparam Tensor x
-- @param[opt] ... lambd, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.softshrink(ember.tensor{0.25, -2}))   --> tensor([ 0.0000, -1.5000], shape=[2], dtype=float32, device=cpu)
function F.softshrink(x, ...) return impl.softshrink(x, ...) end

--- Dropout, as torch.nn.functional.dropout: `F.dropout(x [, p=0.5,
-- training=true, inplace=false])` by position (`ember.dropout`, which this calls) or as
-- `{p =, training =, inplace =}`.
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout(ember.ones(4), {p = 0.5, training = false}))   --> tensor([1.0000, 1.0000, 1.0000, 1.0000], shape=[4], dtype=float32, device=cpu)
function F.dropout(x, ...) return impl.dropout(x, ...) end

--- x / max(||x||_p, eps) along a dim, as torch.nn.functional.normalize:
-- `F.normalize(x [, p=2, dim=2, eps=1e-12])` or an options table. The
-- default dim is torch's dim=1 (1-based: 2, the channels of [N, C, ...]);
-- `ember.normalize`, which this calls, defaults to the last dim.
-- @tparam Tensor x
-- @param[opt] ... p, dim, eps, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.normalize(ember.tensor{{3, 0}, {4, 1}}, {dim = 1}))   --> tensor([[0.6000, 0.0000], [0.8000, 1.0000]], shape=[2, 2], dtype=float32, device=cpu)
-- print(F.normalize(ember.tensor{{3, 4}}))                       --> tensor([[0.6000, 0.8000]], shape=[1, 2], dtype=float32, device=cpu)
function F.normalize(x, ...) return impl.normalize(x, ...) end

--- The cosine of the angle between x1 and x2 along a dim, as
-- torch.nn.functional.cosine_similarity: `F.cosine_similarity(x1, x2 [,
-- dim=2, eps=1e-8])` or an options table; dim 2 is torch's default dim=1
-- (`ember.cosine_similarity`, which this calls, defaults to the last dim).
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @param[opt] ... dim, eps, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.cosine_similarity(ember.tensor{{1, 0}}, ember.tensor{{1, 1}}):item())   --> 0.70710676908493
function F.cosine_similarity(x1, x2, ...) return impl.cosine_similarity(x1, x2, ...) end

-- ---- torch's losses ember had no module for ----------------------------

--- log(1 + e^(-y x)) averaged, as torch.nn.functional.soft_margin_loss:
-- `F.soft_margin_loss(input, target [, {reduction = "mean"}])`, target 1 or -1.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.soft_margin_loss(ember.tensor{0}, ember.tensor{1}):item())   --> 0.6931471824646
function F.soft_margin_loss(input, target, ...) return impl.soft_margin_loss(input, target, ...) end

--- x where y = 1, max(0, margin - x) where y = -1, as
-- torch.nn.functional.hinge_embedding_loss: `F.hinge_embedding_loss(input,
-- target [, margin=1])`, {reduction =} by name.
-- @tparam Tensor input
-- @tparam Tensor target 1 or -1
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.hinge_embedding_loss(ember.tensor{0.3, 0.4}, ember.tensor{1, -1}, {reduction = "sum"}):item())   --> 0.90000003576279
function F.hinge_embedding_loss(input, target, ...) return impl.hinge_embedding_loss(input, target, ...) end

--- 1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1,
-- as torch.nn.functional.cosine_embedding_loss: `F.cosine_embedding_loss(x1,
-- x2, y [, margin=0])`, {reduction =} by name; x1, x2 [N, D] (y [N]) or [D]
-- (y 0-d), the cosine along D with PyTorch's 1e-12 in each norm's square.
-- @tparam Tensor x1
-- @tparam Tensor x2
-- @tparam Tensor y
-- @param[opt] ... margin, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.cosine_embedding_loss(ember.tensor{{1, 0}}, ember.tensor{{0, 1}}, ember.tensor{1}):item())   --> 1.0
function F.cosine_embedding_loss(x1, x2, y, ...) return impl.cosine_embedding_loss(x1, x2, y, ...) end

--- The Poisson negative log-likelihood, as torch.nn.functional.poisson_nll_loss:
-- `F.poisson_nll_loss(input, target [, log_input=true, full=false, eps=1e-8])`,
-- {reduction =} by name: e^input - target input (log_input), else
-- input - target log(input + eps); full adds Stirling's term
-- target log(target) - target + log(2 pi target) / 2 where target > 1.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... log_input, full, eps, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.poisson_nll_loss(ember.tensor{0}, ember.tensor{2}):item())   --> 1.0
function F.poisson_nll_loss(input, target, ...) return impl.poisson_nll_loss(input, target, ...) end

--- The multi-label one-versus-all loss, as
-- torch.nn.functional.multilabel_soft_margin_loss: input [N, C] (or [C]),
-- target of 0s and 1s the same shape: the mean over the classes of
-- -(y log sigmoid(x) + (1 - y) log sigmoid(-x)) (times weight [C] when
-- given), then reduced over N. `F.multilabel_soft_margin_loss(input,
-- target [, {weight =, reduction = "mean"}])`.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... weight, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.multilabel_soft_margin_loss(ember.zeros(1, 2), ember.tensor{{1, 0}}):item())   --> 0.6931471824646
function F.multilabel_soft_margin_loss(input, target, ...)
  return impl.multilabel_soft_margin_loss(input, target, ...)
end

--- The multi-class hinge loss, as torch.nn.functional.multi_margin_loss:
-- input [N, C] (or [C]), 1-based int64 targets [N] (or 0-d): for each
-- sample, the sum over the classes i other than y of max(0, margin -
-- x[y] + x[i])^p, divided by C (times weight[y] when given).
-- `F.multi_margin_loss(input, target [, p=1, margin=1, weight])`,
-- {reduction =} by name; p is 1 or 2.
-- @tparam Tensor input
-- @tparam Tensor target int64, 1-based
-- @param[opt] ... p, margin, weight, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.multi_margin_loss(ember.tensor{{0.1, 0.2, 0.4, 0.8}}, ember.tensor({4}, {dtype = "int64"})):item())   --> 0.32499998807907
function F.multi_margin_loss(input, target, ...) return impl.multi_margin_loss(input, target, ...) end

--- The multi-label hinge loss, as torch.nn.functional.multilabel_margin_loss:
-- `F.multilabel_margin_loss(input, target [, {reduction = "mean"}])`. input [N, C] or [C]; target
-- int64 of its shape: each sample's 1-based target classes, the first 0 ending the list
-- (PyTorch's -1; 0-based ids there). Each sample's loss is the sum over its target classes j and
-- its other classes i of max(0, 1 - (x[j] - x[i])), over C.
-- @tparam Tensor input
-- @tparam Tensor target
-- @param[opt] ... reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.multilabel_margin_loss(ember.tensor{{0.1, 0.2, 0.4, 0.8}}, ember.tensor({{4, 1, 0, 0}}, "int64")):item())   --> 0.85000002384186
function F.multilabel_margin_loss(input, target, ...) return impl.multilabel_margin_loss(input, target, ...) end

-- ---- more of torch.nn.functional ---------------------------------------------

--- Sums, means or maxima of bags of embeddings, as
-- torch.nn.functional.embedding_bag: `F.embedding_bag(ids, weight [,
-- offsets] [, {mode = "mean", per_sample_weights =, include_last_offset =
-- false, padding_idx =}])`. ids 1-d with offsets (1-based starts of the
-- bags: a tensor or a Lua list) or 2-d [B, L] (each row a bag); ids and
-- padding_idx 1-based. nn.EmbeddingBag's forward is this. max_norm,
-- scale_grad_by_freq and sparse are not supported.
-- @tparam Tensor ids int64
-- @tparam Tensor weight [num, dim]
-- @param[opt] ... offsets, or an options table
-- @treturn Tensor [B, dim]
-- @usage local F = ember.nn.functional
-- local w = ember.tensor{{1, 1}, {2, 4}, {3, 9}}
-- local ids = ember.tensor({1, 2, 3}, {dtype = "int64"})
-- print(F.embedding_bag(ids, w, {1, 3}, {mode = "sum"}))   --> tensor([[3.0000, 5.0000], [3.0000, 9.0000]], shape=[2, 2], dtype=float32, device=cpu)
function F.embedding_bag(ids, weight, ...) return impl.embedding_bag(ids, weight, ...) end

--- Power-average pooling, as torch.nn.functional.lp_pool2d: `F.lp_pool2d(x,
-- norm_type, kernel_size [, stride, ceil_mode])` (or an options table):
-- (sum of x^p over each window)^(1/p).
-- @tparam Tensor x [N, C, H, W] or [C, H, W]
-- @number norm_type p
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... stride, ceil_mode, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.lp_pool2d(ember.tensor{{{{3, 0}, {0, 4}}}}, 2, 2):item())   --> 5.0
function F.lp_pool2d(x, norm_type, kernel_size, ...) return impl.lp_pool2d(x, norm_type, kernel_size, ...) end

--- Power-average pooling of [N, C, L], as torch.nn.functional.lp_pool1d
-- (see lp_pool2d).
-- @tparam Tensor x [N, C, L] or [C, L]
-- @number norm_type p
-- @int kernel_size
-- @param[opt] ... stride, ceil_mode, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.lp_pool1d(ember.tensor{{{3, 4}}}, 2, 2):item())   --> 5.0
function F.lp_pool1d(x, norm_type, kernel_size, ...) return impl.lp_pool1d(x, norm_type, kernel_size, ...) end

--- Local response normalisation across channels, as
-- torch.nn.functional.local_response_norm: `F.local_response_norm(x, size
-- [, alpha=1e-4, beta=0.75, k=1])` (or an options table): x / (k + alpha *
-- mean of x^2 over the `size` neighbouring channels)^beta (AlexNet's).
-- @tparam Tensor x [N, C, *]
-- @int size
-- @param[opt] ... alpha, beta, k, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.local_response_norm(ember.randn(2, 6, 4, 4), 3).shape)   --> ember.Size{2, 6, 4, 4}
function F.local_response_norm(x, size, ...) return impl.local_response_norm(x, size, ...) end

--- Channel dropout of [N, C, L] (or [C, L]), as torch.nn.functional.dropout1d:
-- `F.dropout1d(x [, p=0.5, training=true, inplace=false])` (see dropout2d).
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout1d(ember.ones(2, 3, 5), 0.5, false):sum():item())   --> 30.0
function F.dropout1d(x, ...) return impl.dropout1d(x, ...) end

--- Channel dropout of [N, C, D, H, W] (or [C, D, H, W]), as
-- torch.nn.functional.dropout3d: `F.dropout3d(x [, p=0.5, training=true, inplace=false])`.
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.dropout3d(ember.ones(1, 2, 2, 2, 2), {training = false}):sum():item())   --> 16.0
function F.dropout3d(x, ...) return impl.dropout3d(x, ...) end

--- Alpha dropout (for SELU networks), as torch.nn.functional.alpha_dropout:
-- `F.alpha_dropout(x [, p=0.5, training=true, inplace=false])`: each element dropped with
-- probability p to SELU's negative saturation, then an affine map that
-- keeps the mean and variance of unit-normal input, as PyTorch's.
-- Defaults as PyTorch's: training=true unless given (torch's default is false here:
-- `F.alpha_dropout(x, p)` is x there; give training explicitly to be sure).
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.alpha_dropout(ember.ones(3), 0.2, false))   --> tensor([1.0000, 1.0000, 1.0000], shape=[3], dtype=float32, device=cpu)
function F.alpha_dropout(x, ...) return impl.alpha_dropout(x, ...) end

--- Alpha dropout of whole channels of [N, C, *], as torch.nn.functional.feature_alpha_dropout.
-- @tparam Tensor x
-- @param[opt] ... p, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.feature_alpha_dropout(ember.randn(2, 4, 3), 0.5).shape)   --> ember.Size{2, 4, 3}
function F.feature_alpha_dropout(x, ...) return impl.feature_alpha_dropout(x, ...) end

--- The channels of [N, C, *] regrouped, as torch.nn.functional.channel_shuffle (ShuffleNet):
-- `F.channel_shuffle(x, groups)`: C = groups * k channels read as [groups, k], transposed.
-- @tparam Tensor x
-- @int groups
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.channel_shuffle(ember.arange(4):view(1, 4, 1), 2):view(-1))   --> tensor([0.0000, 2.0000, 1.0000, 3.0000], shape=[4], dtype=float32, device=cpu)
function F.channel_shuffle(x, groups, ...)
  no_extra("nn.functional.channel_shuffle", { "groups" }, 2, groups, ...)
  return impl.channel_shuffle(x, groups)
end

--- The p-norm distance between every two rows of x [N, M] (i < j, row
-- by row), as torch.nn.functional.pdist: `F.pdist(x [, p=2])`, [N (N - 1) / 2].
-- @tparam Tensor x
-- @param[opt] ... p, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.pdist(ember.tensor{{0, 0}, {3, 4}, {0, 1}}))   --> tensor([5.0000, 1.0000, 4.2426], shape=[3], dtype=float32, device=cpu)
function F.pdist(x, ...) return impl.pdist(x, ...) end

--- The Gaussian negative log-likelihood, as torch.nn.functional.gaussian_nll_loss:
-- `F.gaussian_nll_loss(input, target, var [, full=false, eps=1e-6])`,
-- {reduction =} by name: (log(var) + (input - target)^2 / var) / 2, var
-- clamped to eps in value (its gradient unchanged, as PyTorch's); var has
-- input's shape, or it without (or with 1 as) the last dim; full adds log(2 pi) / 2.
-- @tparam Tensor input
-- @tparam Tensor target
-- @tparam Tensor var
-- @param[opt] ... full, eps, or an options table (with reduction)
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.gaussian_nll_loss(ember.tensor{1}, ember.tensor{3}, ember.tensor{1}):item())   --> 2.0
function F.gaussian_nll_loss(input, target, var, ...) return impl.gaussian_nll_loss(input, target, var, ...) end

--- A sample from the Gumbel-softmax distribution, as
-- torch.nn.functional.gumbel_softmax: `F.gumbel_softmax(logits [, tau=1,
-- hard=false, eps, dim=-1])` (or an options table): softmax((logits +
-- Gumbel noise) / tau); hard: the one-hot of its largest, with the soft
-- sample's gradient (straight through). Draws from ember's generator.
-- @tparam Tensor logits
-- @param[opt] ... tau, hard, eps (unused, as PyTorch's), dim, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local y = F.gumbel_softmax(ember.randn(4, 5), {tau = 0.5, hard = true})
-- print(y:sum(2))   --> tensor([1.0000, 1.0000, 1.0000, 1.0000], shape=[4], dtype=float32, device=cpu)
function F.gumbel_softmax(logits, ...) return impl.gumbel_softmax(logits, ...) end

--- The triplet margin loss with a distance of your own, as
-- torch.nn.functional.triplet_margin_with_distance_loss:
-- `F.triplet_margin_with_distance_loss(a, p, n [, {distance_function =
-- F.pairwise_distance, margin = 1, swap = false, reduction = "mean"}])`:
-- max(d(a, p) - d(a, n) + margin, 0).
-- @tparam Tensor anchor
-- @tparam Tensor positive
-- @tparam Tensor negative
-- @param[opt] ... distance_function, margin, swap, reduction, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local cos = function(a, b) return 1 - F.cosine_similarity(a, b) end
-- local a = ember.tensor{{1, 0}}
-- print(F.triplet_margin_with_distance_loss(a, a, ember.tensor{{0, 1}}, {distance_function = cos}):item())   --> 0.0
function F.triplet_margin_with_distance_loss(anchor, positive, negative, ...)
  return impl.triplet_margin_with_distance_loss(anchor, positive, negative, ...)
end

--- The randomized leaky ReLU, as torch.nn.functional.rrelu: `F.rrelu(x [,
-- lower=1/8, upper=1/3, training=false, inplace=false])` (or an options table): while
-- training each negative element's slope is drawn from U(lower, upper),
-- else it is (lower + upper) / 2.
-- @tparam Tensor x
-- @param[opt] ... lower, upper, training, inplace, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.rrelu(ember.tensor{-1, 2}, 0.2, 0.4))   --> tensor([-0.3000,  2.0000], shape=[2], dtype=float32, device=cpu)
function F.rrelu(x, ...) return impl.rrelu(x, ...) end

-- ---- sampling at points ----------------------------------------------------

--- The image sampled at given points, as torch.nn.functional.grid_sample:
-- `F.grid_sample(x, grid [, {mode = "bilinear", padding_mode = "zeros",
-- align_corners = false}])` (or positional). x [N, C, H, W], grid
-- [N, Ho, Wo, 2] of (x, y) in [-1, 1] (-1: the left and top, 1: the right
-- and bottom; align_corners: the corner pixels' centres, else their outer
-- edges); or a volume x [N, C, D, H, W], grid [N, Do, Ho, Wo, 3] of (x, y, z).
-- mode "bilinear" (trilinear for a volume, as PyTorch), "nearest" or (images only) "bicubic" (4 x 4 taps,
-- A = -0.75, the padding applied to each tap as PyTorch's); padding_mode "zeros" (outside reads
-- 0), "border" (clamped to the edge) or "reflection" (mirrored). Gradients
-- reach x and, in bilinear mode, the grid, as PyTorch's (nearest: no
-- gradient to the grid; PyTorch's is zeros; a point clamped onto the edge
-- passes none, as PyTorch's).
-- @tparam Tensor x
-- @tparam Tensor grid
-- @param[opt] ... mode, padding_mode, align_corners, or an options table
-- @treturn Tensor [N, C, Ho, Wo]
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{{{{1, 2}, {3, 4}}}}
-- local grid = ember.tensor{{{{0, 0}, {1, 1}}}}   -- the centre and the bottom-right corner
-- print(F.grid_sample(x, grid, {align_corners = true}))   --> tensor([[[[2.5000, 4.0000]]]], shape=[1, 1, 1, 2], dtype=float32, device=cpu)
function F.grid_sample(x, grid, ...) return impl.grid_sample(x, grid, ...) end

--- The sampling grid of an affine map, as torch.nn.functional.affine_grid:
-- `F.affine_grid(theta, size [, {align_corners = false}])`, theta [N, 2, 3]
-- taking output (x, y, 1) in [-1, 1] coordinates to input ones, size the
-- output's {N, C, H, W}: [N, H, W, 2], what `F.grid_sample` takes (a
-- spatial transformer); for a volume theta [N, 3, 4] and size
-- {N, C, D, H, W}: [N, D, H, W, 3]. Differentiable in theta.
-- @tparam Tensor theta
-- @tparam table size {N, C, H, W} or {N, C, D, H, W}
-- @param[opt] ... align_corners, or an options table
-- @treturn Tensor [N, H, W, 2]
-- @usage local F = ember.nn.functional
-- local identity = ember.tensor{{{1, 0, 0}, {0, 1, 0}}}
-- local x = ember.randn(1, 3, 4, 5)
-- local y = F.grid_sample(x, F.affine_grid(identity, {1, 3, 4, 5}))
-- print((y - x):abs():max():item() < 1e-6)   --> true
function F.affine_grid(theta, size, ...) return impl.affine_grid(theta, size, ...) end

-- ---- 3-d: volumes --------------------------------------------------------------

--- 3-d convolution, as torch.nn.functional.conv3d: `F.conv3d(x, weight [,
-- bias] [, {stride=1, padding=0, dilation=1, groups=1}])` (or positional),
-- x [N, C, D, H, W] or [C, D, H, W], weight [out, C / groups, kd, kh, kw];
-- sizes an integer or a table of three, padding also "same" or "valid".
-- Composed from conv2d (nn/_conv.lua): one per depth tap of the kernel.
-- @tparam Tensor x
-- @tparam Tensor weight
-- @tparam[opt] Tensor bias
-- @param[opt] ... stride, padding, dilation, groups, or an options table
-- @treturn Tensor [N, out, Do, Ho, Wo]
-- @usage local F = ember.nn.functional
-- print(F.conv3d(ember.randn(1, 2, 5, 6, 7), ember.randn(4, 2, 3, 3, 3), nil, {padding = 1}).shape)   --> ember.Size{1, 4, 5, 6, 7}
function F.conv3d(x, weight, bias, ...) return impl.conv3d(x, weight, bias, ...) end

--- 3-d max pooling, as torch.nn.functional.max_pool3d: `F.max_pool3d(x,
-- kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])` (or positional), x [N, C, D, H, W] or [C, D, H, W]. The
-- gradient goes to the first largest of each window. With return_indices, also
-- where each max is: int64 1-based flat indices into each D x H x W volume
-- (PyTorch's, 0-based there), for max_unpool3d.
-- @tparam Tensor x
-- @param kernel_size an integer or {kd, kh, kw}
-- @param[opt] ... stride, padding, dilation, ceil_mode, return_indices, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.max_pool3d(ember.randn(1, 2, 4, 6, 6), 2).shape)   --> ember.Size{1, 2, 2, 3, 3}
function F.max_pool3d(x, kernel_size, ...) return impl.max_pool3d(x, kernel_size, ...) end

--- torch.nn.functional.max_pool3d_with_indices: `F.max_pool3d(x, kernel_size, ...)` with
-- return_indices = true (the values and the 1-based flat indices into each D x H x W volume).
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @param kernel_size an integer or {kd, kh, kw}
-- @param[opt] ... stride, padding, dilation, ceil_mode, or an options table
-- @treturn Tensor
-- @treturn Tensor the indices
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool3d_with_indices(ember.arange(8):view(1, 1, 2, 2, 2), 2)
-- print(y:item(), idx:item())   --> 7.0 8
function F.max_pool3d_with_indices(x, kernel_size, ...) return impl.max_pool3d_with_indices(x, kernel_size, ...) end

--- max_pool3d's partial inverse, as torch.nn.functional.max_unpool3d:
-- `F.max_unpool3d(x, indices, kernel_size [, {stride=kernel_size, padding=0, output_size=}])`
-- (or positional): each value of x put at its index (max_pool3d's return_indices, 1-based) of
-- an output volume of (D - 1) stride - 2 padding + kernel planes (and rows, columns;
-- output_size chooses another size), zeros elsewhere.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @tparam Tensor indices int64, x's shape
-- @param kernel_size an integer or {kd, kh, kw}
-- @param[opt] ... stride, padding, output_size, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local y, idx = F.max_pool3d(ember.randn(1, 2, 4, 4, 4), 2, {return_indices = true})
-- print(F.max_unpool3d(y, idx, 2).shape)   --> ember.Size{1, 2, 4, 4, 4}
function F.max_unpool3d(x, indices, kernel_size, ...) return impl.max_unpool3d(x, indices, kernel_size, ...) end

--- Fractional max pooling, as torch.nn.functional.fractional_max_pool2d: `F.fractional_max_pool2d(x,
-- kernel_size [, {output_size =, output_ratio =, return_indices = false, _random_samples =}])` (or
-- torch's positional order). x [N, C, H, W] or [C, H, W]; give output_size (an integer or {h, w})
-- or output_ratio (in (0, 1): the output is floor(size * ratio)). Each plane's window starts are
-- PyTorch's pseudo-random sequence from its two samples u in [0, 1) (_random_samples [N, C, 2],
-- {u_w, u_h}; drawn with ember.rand when not given): floor((i + u) a) - floor(u a), a = (in -
-- kernel) / (out - 1), the last window at the end. With return_indices, also the 1-based flat
-- indices into each H x W plane (for max_unpool2d). The gradient goes to the first largest.
-- @tparam Tensor x
-- @param kernel_size an integer or {kh, kw}
-- @param[opt] ... output_size, output_ratio, return_indices, _random_samples, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.fractional_max_pool2d(ember.randn(1, 2, 9, 9), 2, {output_size = 5}).shape)   --> ember.Size{1, 2, 5, 5}
function F.fractional_max_pool2d(x, kernel_size, ...) return impl.fractional_max_pool2d(x, kernel_size, ...) end

--- Fractional max pooling of volumes, as torch.nn.functional.fractional_max_pool3d:
-- `F.fractional_max_pool3d(x, kernel_size [, {output_size =, output_ratio =, return_indices = false,
-- _random_samples =}])`, x [N, C, D, H, W] or [C, D, H, W]; fractional_max_pool2d's rule along each
-- of the three dims, the samples [N, C, 3] ordered {u_t, u_h, u_w} as PyTorch's; the indices are
-- 1-based flat into each D x H x W volume (for max_unpool3d).
-- @tparam Tensor x
-- @param kernel_size an integer or {kd, kh, kw}
-- @param[opt] ... output_size, output_ratio, return_indices, _random_samples, or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.fractional_max_pool3d(ember.randn(1, 2, 8, 8, 8), 2, {output_ratio = 0.5}).shape)   --> ember.Size{1, 2, 4, 4, 4}
function F.fractional_max_pool3d(x, kernel_size, ...) return impl.fractional_max_pool3d(x, kernel_size, ...) end

--- 3-d average pooling, as torch.nn.functional.avg_pool3d: `F.avg_pool3d(x,
-- kernel_size [, {stride=kernel_size, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override=}])` (or positional).
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @param kernel_size an integer or {kd, kh, kw}
-- @param[opt] ... stride, padding, ceil_mode, count_include_pad, divisor_override, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.avg_pool3d(ember.ones(1, 1, 2, 2, 2), 2):item())   --> 1.0
function F.avg_pool3d(x, kernel_size, ...) return impl.avg_pool3d(x, kernel_size, ...) end

--- Adaptive 3-d average pooling, as torch.nn.functional.adaptive_avg_pool3d:
-- output_size an integer or {od, oh, ow} (false: that dim's size).
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @param output_size
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- print(F.adaptive_avg_pool3d(ember.randn(2, 3, 5, 7, 9), 1).shape)   --> ember.Size{2, 3, 1, 1, 1}
function F.adaptive_avg_pool3d(x, output_size, ...)
  no_extra("nn.functional.adaptive_avg_pool3d", { "output_size" }, 2, output_size, ...)
  return impl.adaptive_avg_pool3d(x, output_size)
end

--- Adaptive 3-d max pooling, as torch.nn.functional.adaptive_max_pool3d. With return_indices,
-- also where each max is: int64, 1-based flat indices into each input volume of D * H * W.
-- @tparam Tensor x [N, C, D, H, W] or [C, D, H, W]
-- @param output_size an integer or {od, oh, ow}
-- @param[opt] ... return_indices (false), or an options table
-- @treturn Tensor
-- @treturn[opt] Tensor the indices, with return_indices
-- @usage local F = ember.nn.functional
-- print(F.adaptive_max_pool3d(ember.randn(2, 3, 5, 7, 9), {2, 3, 4}).shape)   --> ember.Size{2, 3, 2, 3, 4}
function F.adaptive_max_pool3d(x, output_size, ...) return impl.adaptive_max_pool3d(x, output_size, ...) end

-- ---- connectionist temporal classification ---------------------------------------

--- The CTC loss, as torch.nn.functional.ctc_loss: `F.ctc_loss(log_probs,
-- targets, input_lengths, target_lengths [, {blank = 1, reduction =
-- "mean", zero_infinity = false}])`. log_probs [T, N, C] (log_softmax over
-- C), targets [N, S] (padded) or the N label sequences concatenated (1-d),
-- 1-based class ids other than blank (1 by default: PyTorch's 0);
-- input_lengths and target_lengths N integers (tensors or tables). The
-- negative log-likelihood of all alignments (the forward recursion in log
-- space, one step of tensor ops per time step; gradients by autograd);
-- "mean" divides each by its target length, then averages, as PyTorch.
-- An impossible target gives inf (0 with zero_infinity). PyTorch's
-- unbatched form: log_probs [T, C], targets [S], the lengths 0-d tensors
-- or one-element lists; the loss is 0-d.
-- @tparam Tensor log_probs
-- @tparam Tensor targets
-- @param input_lengths
-- @param target_lengths
-- @param[opt] ... blank, reduction, zero_infinity, or an options table
-- @treturn Tensor
-- @usage local F = ember.nn.functional
-- local lp = ember.log_softmax(ember.zeros(3, 1, 2), 3)   -- 3 steps, blank and one class, even odds
-- local loss = F.ctc_loss(lp, ember.tensor({{2}}, {dtype = "int64"}), {3}, {1}, {reduction = "sum"})
-- print(loss:item())   --> 0.287682056427
function F.ctc_loss(log_probs, targets, input_lengths, target_lengths, ...)
  return impl.ctc_loss(log_probs, targets, input_lengths, target_lengths, ...)
end

-- ---- in place ----------------------------------------------------------------

--- relu in place, as torch.nn.functional.relu_: x overwritten and returned
-- (recorded by autograd as ember's in-place ops; a leaf that requires grad
-- is refused outside no_grad). The other *_ functions below likewise.
-- @tparam Tensor x
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- local x = ember.tensor{-1, 2}
-- F.relu_(x)
-- print(x)   --> tensor([0.0000, 2.0000], shape=[2], dtype=float32, device=cpu)
function F.relu_(x, ...)
  no_extra("nn.functional.relu_", {}, 2, ...)
  return impl.relu_(x)
end

--- elu in place (torch.nn.functional.elu_): `F.elu_(x [, alpha])`.
-- @tparam Tensor x
-- @param[opt] ... ember.elu's arguments
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.elu_(ember.tensor{2}):item())   --> 2.0
function F.elu_(x, ...) return impl.elu_(x, ...) end

--- leaky_relu in place (torch.nn.functional.leaky_relu_): `F.leaky_relu_(x [, negative_slope])`.
-- @tparam Tensor x
-- @param[opt] ... ember.leaky_relu's arguments
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.leaky_relu_(ember.tensor{-10}, 0.1):item())   --> -1.0
function F.leaky_relu_(x, ...) return impl.leaky_relu_(x, ...) end

--- hardtanh in place (torch.nn.functional.hardtanh_): `F.hardtanh_(x [, min_val, max_val])`.
-- @tparam Tensor x
-- @param[opt] ... ember.hardtanh's arguments
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.hardtanh_(ember.tensor{-3}):item())   --> -1.0
function F.hardtanh_(x, ...) return impl.hardtanh_(x, ...) end

--- selu in place (torch.nn.functional.selu_).
-- @tparam Tensor x
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.selu_(ember.tensor{0}):item())   --> 0.0
function F.selu_(x, ...)
  no_extra("nn.functional.selu_", {}, 2, ...)
  return impl.selu_(x)
end

--- celu in place (torch.nn.functional.celu_): `F.celu_(x [, alpha])`.
-- @tparam Tensor x
-- @param[opt] ... alpha, or an options table
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.celu_(ember.tensor{1}):item())   --> 1.0
function F.celu_(x, ...) return impl.celu_(x, ...) end

--- threshold in place (torch.nn.functional.threshold_): `F.threshold_(x, threshold, value)`.
-- @tparam Tensor x
-- @number threshold
-- @number value
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.threshold_(ember.tensor{1}, 2, 0):item())   --> 0.0
function F.threshold_(x, threshold, value, ...)
  no_extra("nn.functional.threshold_", { "threshold", "value" }, 2, threshold, value, ...)
  return impl.threshold_(x, threshold, value)
end

--- rrelu in place (torch.nn.functional.rrelu_): `F.rrelu_(x [, lower, upper, training])`.
-- @tparam Tensor x
-- @param[opt] ... lower, upper, training, or an options table
-- @treturn Tensor x
-- @usage local F = ember.nn.functional
-- print(F.rrelu_(ember.tensor{-8}, 0.25, 0.25):item())   --> -2.0
function F.rrelu_(x, ...) return impl.rrelu_(x, ...) end

return F
