#!/usr/bin/python3
"""PyTorch 1.13's numbers for tests/lua/probe_vision_spec.lua: the vision modules as a demanding
PyTorch user calls them (convolutions with 'same'/'valid' padding on even kernels and dilation,
every padding_mode, groups and depthwise, stride with dilation, unbatched and non-contiguous inputs;
transposed convolutions; pools with ceil_mode, count_include_pad, divisor_override, return_indices
and MaxUnpool; adaptive pools; BatchNorm train/eval, momentum=None, track_running_stats=False,
affine=False; GroupNorm; InstanceNorm; Flatten/Unflatten; Upsample; PixelShuffle).

Each case: the module (`mod`, ember's constructor arguments `args` and options `opts`), its state
dict in float64 (buffers too), the input leaf `x` and how the module sees it (`view`: a permute,
narrow or transpose of the leaf, 0-based as torch's, or nil), the output `out`, the weights `R` of
sum(out * R), the leaf's gradient `grad_x`, the parameters' gradients `grads`, the buffers after the
call (`buffers`), and for return_indices the indices (0-based, as torch's).

Writes tests/fixtures/probe_vision.lua. Run with Debian's python3-torch:
    /usr/bin/python3 tests/gen_probe_vision_fixtures.py
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from fixture_writer import Writer, lua_float


def lua_float13(v):
    return "%.13g" % v if lua_float(v) == "%.17g" % v else lua_float(v)

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)


def make_view(leaf, view):
    if view is None:
        return leaf
    if view[0] == "permute":
        return leaf.permute(*view[1])
    if view[0] == "narrow":
        return leaf.narrow(view[1], view[2], view[3])
    if view[0] == "transpose":
        return leaf.transpose(view[1], view[2])
    raise ValueError(view)


def randomize(m):
    """Parameters and running statistics away from their defaults, so that each one matters."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") and p.dim() == 1 else 0.0))
        for name, b in m.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn_like(b) * 0.3)
            elif name.endswith("running_var"):
                b.copy_(torch.rand_like(b) + 0.5)
            elif name.endswith("num_batches_tracked"):
                b.fill_(3)


def torch_opts(opts):
    """ember's options as torch's keywords (momentum=false is torch's None; bias=false)."""
    out = {}
    for k, v in (opts or {}).items():
        if k == "momentum" and v is False:
            v = None
        out[k] = tuple(v) if isinstance(v, list) else v
    return out


def case(name, mod, args, opts, xshape, view=None, train=True, targs=None, call=None, leaf=None, int_args=None):
    """mod: torch.nn's class name (ember's too); args: ember's positional arguments (targs: torch's
    when they differ, e.g. 0-based dims); call: extra forward arguments (torch's; `ecall` in the
    fixture for ember's). leaf: a given input leaf instead of a random one."""
    m = getattr(nn, mod)(*(targs if targs is not None else args), **torch_opts(opts))
    randomize(m)
    m.train(train)
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    x0 = leaf if leaf is not None else torch.randn(*xshape)
    x0 = x0.detach().clone().requires_grad_()
    x = make_view(x0, view)
    res = m(x, *(call or []))
    idx = None
    if isinstance(res, tuple):
        res, idx = res
    R = torch.randn_like(res)
    (res * R).sum().backward()
    c = {"name": name, "mod": mod, "args": args, "opts": opts, "train": train, "state": state, "x": x0.detach(),
         "view": view, "out": res.detach(), "R": R, "grad_x": x0.grad.detach(),
         "grads": {k: p.grad.detach() for k, p in m.named_parameters() if p.grad is not None},
         "buffers": {k: v.detach().clone() for k, v in m.named_buffers()}}
    if idx is not None:
        c["indices"] = idx
    if call is not None:
        c["call"] = call
    return c


def conv_cases():
    cs = []
    C = cs.append
    # Conv2d
    C(case("conv2d_basic", "Conv2d", [3, 4, 3], {"padding": 1}, (2, 3, 5, 6)))
    C(case("conv2d_tuples", "Conv2d", [3, 4, [2, 3]], {"stride": [2, 1], "padding": [1, 0], "dilation": [1, 2]},
           (2, 3, 7, 8)))
    C(case("conv2d_same_even", "Conv2d", [2, 3, 4], {"padding": "same"}, (2, 2, 6, 5)))
    C(case("conv2d_same_even_dil", "Conv2d", [2, 3, [2, 4]], {"padding": "same", "dilation": [3, 1]}, (1, 2, 7, 6)))
    C(case("conv2d_same_dil_odd_total", "Conv2d", [2, 2, [4, 2]], {"padding": "same", "dilation": 3}, (1, 2, 9, 8)))
    C(case("conv2d_valid_even", "Conv2d", [2, 3, 2], {"padding": "valid"}, (2, 2, 5, 4)))
    for mode in ("reflect", "replicate", "circular"):
        C(case("conv2d_" + mode, "Conv2d", [2, 3, 3], {"padding": [2, 1], "padding_mode": mode}, (2, 2, 5, 6)))
        C(case("conv2d_" + mode + "_same_even", "Conv2d", [2, 3, [4, 3]],
               {"padding": "same", "padding_mode": mode, "dilation": [1, 2]}, (1, 2, 6, 7)))
        C(case("conv2d_" + mode + "_stride", "Conv2d", [2, 2, 3],
               {"padding": 1, "stride": 2, "padding_mode": mode, "bias": False}, (1, 2, 5, 5)))
    C(case("conv2d_groups", "Conv2d", [4, 6, 3], {"groups": 2, "padding": 1}, (2, 4, 5, 5)))
    C(case("conv2d_depthwise", "Conv2d", [4, 4, 3], {"groups": 4, "padding": "same"}, (2, 4, 6, 5)))
    C(case("conv2d_depthwise_mult", "Conv2d", [3, 6, [3, 2]], {"groups": 3, "stride": [1, 2]}, (2, 3, 6, 7)))
    C(case("conv2d_stride_dil", "Conv2d", [3, 4, 3], {"stride": 2, "dilation": 2, "padding": 1}, (2, 3, 9, 10)))
    C(case("conv2d_stride_dil_tuple", "Conv2d", [2, 4, [3, 2]], {"stride": [3, 2], "dilation": [2, 3], "padding": [2, 1],
                                                                 "groups": 2}, (1, 2, 11, 9)))
    C(case("conv2d_nobias", "Conv2d", [3, 4, 3], {"bias": False}, (2, 3, 5, 5)))
    C(case("conv2d_unbatched", "Conv2d", [3, 4, 3], {"padding": 1}, (3, 5, 6)))
    C(case("conv2d_unbatched_reflect", "Conv2d", [3, 4, 3], {"padding": 1, "padding_mode": "reflect"}, (3, 5, 6)))
    C(case("conv2d_nhwc_view", "Conv2d", [3, 4, 3], {"padding": 1, "stride": 2}, (2, 6, 7, 3),
           view=("permute", (0, 3, 1, 2))))
    C(case("conv2d_narrow_view", "Conv2d", [3, 4, 3], {"padding": 1}, (2, 3, 9, 8), view=("narrow", 2, 2, 5)))
    C(case("conv2d_transposed_hw", "Conv2d", [3, 4, [3, 2]], {"padding": "same"}, (2, 3, 7, 5),
           view=("transpose", 2, 3)))
    C(case("conv2d_batch1_1x1", "Conv2d", [3, 5, 1], {}, (1, 3, 1, 1)))
    C(case("conv2d_1x1_input_pad", "Conv2d", [3, 5, 3], {"padding": 1}, (1, 3, 1, 1)))
    C(case("conv2d_stride_gt_kernel", "Conv2d", [2, 3, 2], {"stride": 3}, (2, 2, 8, 7)))
    C(case("conv2d_patch", "Conv2d", [3, 8, 4], {"stride": 4}, (2, 3, 8, 12)))
    C(case("conv2d_stride_past_input", "Conv2d", [2, 3, 3], {"stride": [2 ** 40, 2], "padding": 1}, (2, 2, 5, 5)))
    C(case("conv1d_stride_past_input", "Conv1d", [2, 3, 2], {"stride": 2 ** 40}, (2, 2, 5)))
    # Conv1d
    C(case("conv1d_basic", "Conv1d", [3, 4, 3], {"padding": 1}, (2, 3, 7)))
    C(case("conv1d_same_even_dil", "Conv1d", [2, 3, 4], {"padding": "same", "dilation": 3}, (2, 2, 11)))
    C(case("conv1d_valid", "Conv1d", [2, 3, 4], {"padding": "valid", "stride": 2}, (2, 2, 11)))
    for mode in ("reflect", "replicate", "circular"):
        C(case("conv1d_" + mode, "Conv1d", [2, 3, 4], {"padding": "same", "padding_mode": mode}, (2, 2, 7)))
    C(case("conv1d_depthwise", "Conv1d", [4, 8, 3], {"groups": 4, "stride": 2, "dilation": 2, "padding": 2},
           (2, 4, 12)))
    C(case("conv1d_unbatched", "Conv1d", [3, 4, 3], {"bias": False}, (3, 8)))
    C(case("conv1d_ncl_view", "Conv1d", [3, 4, 2], {"stride": 2}, (2, 9, 3), view=("transpose", 1, 2)))
    # Conv3d
    C(case("conv3d_basic", "Conv3d", [2, 3, 3], {"padding": 1}, (2, 2, 4, 5, 4)))
    C(case("conv3d_same_even", "Conv3d", [2, 3, [2, 3, 4]], {"padding": "same", "dilation": [2, 1, 1]},
           (1, 2, 5, 4, 5)))
    C(case("conv3d_stride_dil_groups", "Conv3d", [4, 4, 3], {"stride": 2, "dilation": 2, "padding": 2, "groups": 2},
           (1, 4, 6, 7, 6)))
    for mode in ("reflect", "replicate", "circular"):
        C(case("conv3d_" + mode, "Conv3d", [2, 2, 3], {"padding": [1, 2, 1], "padding_mode": mode}, (1, 2, 4, 4, 5)))
    C(case("conv3d_unbatched", "Conv3d", [2, 3, 2], {"bias": False}, (2, 3, 4, 3)))
    C(case("conv3d_view", "Conv3d", [3, 2, 2], {"padding": "same"}, (1, 4, 3, 5, 3),
           view=("permute", (0, 4, 1, 2, 3))))
    # ConvTranspose
    C(case("convt2d_basic", "ConvTranspose2d", [3, 4, 3], {"stride": 2, "padding": 1, "output_padding": 1},
           (2, 3, 4, 5)))
    C(case("convt2d_groups_dil", "ConvTranspose2d", [4, 6, [3, 2]],
           {"stride": [2, 3], "padding": [1, 0], "dilation": [2, 1], "groups": 2}, (2, 4, 3, 4)))
    C(case("convt2d_depthwise_nobias", "ConvTranspose2d", [3, 3, 4], {"stride": 2, "groups": 3, "bias": False},
           (1, 3, 3, 3)))
    C(case("convt2d_unbatched", "ConvTranspose2d", [2, 3, 3], {"stride": 2}, (2, 4, 3)))
    C(case("convt2d_view", "ConvTranspose2d", [3, 2, 2], {"stride": 2}, (2, 4, 5, 3), view=("permute", (0, 3, 1, 2))))
    C(case("convt2d_output_size", "ConvTranspose2d", [2, 3, 3], {"stride": 2, "padding": 1}, (1, 2, 4, 4),
           call=[[8, 8]]))
    C(case("convt1d_basic", "ConvTranspose1d", [3, 2, 4], {"stride": 3, "padding": 2, "dilation": 2,
                                                          "output_padding": 1}, (2, 3, 5)))
    C(case("convt1d_unbatched", "ConvTranspose1d", [2, 4, 3], {"groups": 2}, (2, 6)))
    C(case("convt3d_basic", "ConvTranspose3d", [2, 3, [2, 3, 2]], {"stride": [2, 1, 2], "padding": [0, 1, 1],
                                                                   "output_padding": [1, 0, 1]}, (1, 2, 3, 3, 2)))
    C(case("convt3d_groups", "ConvTranspose3d", [4, 2, 2], {"stride": 2, "groups": 2, "dilation": [1, 2, 1]},
           (2, 4, 2, 3, 2)))
    return cs


def pool_cases():
    cs = []
    C = cs.append
    C(case("maxpool2d_ceil", "MaxPool2d", [3], {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 6, 7)))
    C(case("maxpool2d_dil_tuple", "MaxPool2d", [[2, 3]], {"stride": [1, 2], "dilation": [2, 1], "padding": [1, 1]},
           (2, 2, 7, 8)))
    C(case("maxpool2d_ceil_drop_last", "MaxPool2d", [2], {"stride": 2, "padding": 1, "ceil_mode": True},
           (1, 2, 5, 5)))
    C(case("maxpool2d_unbatched_view", "MaxPool2d", [2], {}, (5, 4, 3), view=("permute", (2, 0, 1))))
    C(case("maxpool2d_indices", "MaxPool2d", [3], {"stride": 2, "padding": 1, "return_indices": True},
           (2, 2, 6, 5)))
    C(case("maxpool1d_ceil_dil", "MaxPool1d", [3], {"stride": 2, "dilation": 2, "ceil_mode": True, "padding": 1},
           (2, 3, 10)))
    C(case("maxpool1d_indices", "MaxPool1d", [2], {"return_indices": True}, (3, 7)))
    C(case("maxpool3d_ceil", "MaxPool3d", [2], {"stride": [2, 1, 2], "ceil_mode": True, "padding": 1}, (1, 2, 5, 4, 5)))
    C(case("maxpool3d_indices_dil", "MaxPool3d", [2], {"dilation": 2, "return_indices": True}, (2, 5, 5, 4)))
    C(case("avgpool2d_no_pad_count", "AvgPool2d", [3], {"stride": 2, "padding": 1, "count_include_pad": False},
           (2, 2, 6, 7)))
    C(case("avgpool2d_ceil_pad", "AvgPool2d", [3], {"stride": 2, "padding": 1, "ceil_mode": True}, (1, 2, 6, 6)))
    C(case("avgpool2d_ceil_nopad_count", "AvgPool2d", [[3, 2]], {"stride": [2, 2], "padding": [1, 1], "ceil_mode": True,
                                                               "count_include_pad": False}, (1, 2, 6, 7)))
    C(case("avgpool2d_divisor", "AvgPool2d", [2], {"padding": 1, "divisor_override": 3}, (2, 2, 5, 5)))
    C(case("avgpool2d_unbatched", "AvgPool2d", [2], {"stride": 1}, (2, 3, 3)))
    C(case("avgpool1d_ceil", "AvgPool1d", [3], {"stride": 2, "padding": 1, "ceil_mode": True,
                                                "count_include_pad": False}, (2, 3, 8)))
    C(case("avgpool1d_pad", "AvgPool1d", [4], {"stride": 3, "padding": 2}, (3, 9)))
    C(case("avgpool3d_all", "AvgPool3d", [[2, 3, 2]], {"stride": 2, "padding": 1, "ceil_mode": True,
                                                      "count_include_pad": False}, (1, 2, 5, 6, 5)))
    C(case("avgpool3d_divisor", "AvgPool3d", [2], {"divisor_override": 5}, (2, 4, 4, 4)))
    C(case("adaptiveavg2d", "AdaptiveAvgPool2d", [[3, 4]], None, (2, 3, 7, 10)))
    C(case("adaptiveavg2d_larger", "AdaptiveAvgPool2d", [[5, 3]], None, (1, 2, 3, 2)))
    C(case("adaptiveavg2d_unbatched_view", "AdaptiveAvgPool2d", [2], None, (5, 5, 3), view=("permute", (2, 0, 1))))
    C(case("adaptiveavg1d", "AdaptiveAvgPool1d", [4], None, (2, 3, 10)))
    C(case("adaptiveavg3d", "AdaptiveAvgPool3d", [[2, 3, 1]], None, (1, 2, 5, 7, 3)))
    C(case("adaptivemax2d", "AdaptiveMaxPool2d", [[3, 2]], None, (2, 2, 7, 5)))
    C(case("adaptivemax2d_none", "AdaptiveMaxPool2d", [[False, 2]], None, (2, 3, 5), targs=[(None, 2)]))
    C(case("adaptiveavg2d_none", "AdaptiveAvgPool2d", [[4, False]], None, (1, 2, 7, 3), targs=[(4, None)]))
    # ties (ReLU's zeros, small integers): the gradient and the index go to the first largest, row-major
    ties = lambda *shape: torch.randint(0, 3, shape).double()
    C(case("ties_maxpool2d", "MaxPool2d", [3], {"stride": 2, "padding": 1, "return_indices": True}, None,
           leaf=ties(2, 2, 7, 6)))
    C(case("ties_maxpool2d_relu", "MaxPool2d", [2], {"return_indices": True}, None,
           leaf=torch.randn(2, 3, 6, 6).clamp(min=0)))
    C(case("ties_maxpool1d", "MaxPool1d", [3], {"stride": 1, "dilation": 2, "return_indices": True}, None,
           leaf=ties(2, 2, 9)))
    C(case("ties_maxpool3d", "MaxPool3d", [2], {"stride": 1, "return_indices": True}, None, leaf=ties(1, 2, 3, 4, 3)))
    C(case("ties_adaptivemax2d", "AdaptiveMaxPool2d", [[2, 3]], None, None, leaf=ties(2, 2, 5, 7)))
    C(case("ties_adaptivemax1d", "AdaptiveMaxPool1d", [3], None, None, leaf=ties(2, 2, 8)))
    C(case("ties_adaptivemax2d_larger", "AdaptiveMaxPool2d", [[5, 4]], None, None, leaf=ties(1, 2, 3, 3)))
    C(case("ties_adaptivemax2d_global", "AdaptiveMaxPool2d", [1], None, None, leaf=ties(2, 3, 4, 5)))
    C(case("ties_adaptivemax3d", "AdaptiveMaxPool3d", [2], None, None, leaf=ties(1, 2, 4, 3, 5)))
    C(case("adaptivemax1d", "AdaptiveMaxPool1d", [3], None, (2, 2, 8)))
    C(case("adaptivemax3d", "AdaptiveMaxPool3d", [2], None, (1, 2, 5, 4, 3)))
    return cs


def unpool_cases():
    """MaxUnpool after a pool with return_indices: x is the pooled values, `indices` torch's."""
    cs = []
    for name, pool, unpool, shape, k, opts, out_size in [
            ("maxunpool2d", nn.MaxPool2d, "MaxUnpool2d", (2, 2, 6, 4), 2, {"stride": 2}, None),
            ("maxunpool2d_size", nn.MaxPool2d, "MaxUnpool2d", (1, 2, 7, 7), 3, {"stride": 2, "padding": 1}, [7, 7]),
            ("maxunpool1d", nn.MaxPool1d, "MaxUnpool1d", (2, 3, 9), 2, {}, [9]),
            ("maxunpool3d", nn.MaxPool3d, "MaxUnpool3d", (1, 2, 4, 4, 5), 2, {}, [4, 4, 5])]:
        x = torch.randn(*shape)
        y, idx = pool(k, return_indices=True, **torch_opts(opts))(x)
        c = case(name, unpool, [k], opts, None, leaf=y, call=[idx] + ([out_size] if out_size else []))
        c["indices"] = idx
        del c["call"]
        c["output_size"] = out_size
        cs.append(c)
    return cs


def norm_cases():
    cs = []
    C = cs.append
    C(case("bn2d_train", "BatchNorm2d", [3], {}, (4, 3, 3, 2)))
    C(case("bn2d_eval", "BatchNorm2d", [3], {}, (2, 3, 3, 2), train=False))
    C(case("bn2d_momentum_none", "BatchNorm2d", [3], {"momentum": False}, (4, 3, 2, 2)))
    C(case("bn2d_momentum", "BatchNorm2d", [2], {"momentum": 0.3, "eps": 1e-3}, (3, 2, 2, 3)))
    C(case("bn2d_no_stats_train", "BatchNorm2d", [3], {"track_running_stats": False}, (3, 3, 2, 2)))
    C(case("bn2d_no_stats_eval", "BatchNorm2d", [3], {"track_running_stats": False}, (3, 3, 2, 2), train=False))
    C(case("bn2d_no_affine", "BatchNorm2d", [3], {"affine": False}, (2, 3, 3, 3)))
    C(case("bn2d_nhwc_view", "BatchNorm2d", [3], {}, (2, 4, 3, 3), view=("permute", (0, 3, 1, 2))))
    C(case("bn2d_batch1", "BatchNorm2d", [2], {}, (1, 2, 3, 3)))
    C(case("bn1d_2d", "BatchNorm1d", [4], {}, (5, 4)))
    C(case("bn1d_3d", "BatchNorm1d", [3], {"momentum": False}, (2, 3, 4)))
    C(case("bn1d_eval_3d", "BatchNorm1d", [3], {}, (2, 3, 4), train=False))
    C(case("bn1d_nlc_view", "BatchNorm1d", [3], {}, (2, 5, 3), view=("transpose", 1, 2)))
    C(case("in2d_unbatched_stats", "InstanceNorm2d", [2], {"track_running_stats": True}, (2, 3, 4)))
    C(case("bn3d_train", "BatchNorm3d", [2], {}, (2, 2, 2, 3, 2)))
    C(case("bn3d_eval_noaffine", "BatchNorm3d", [2], {"affine": False}, (2, 2, 2, 3, 2), train=False))
    C(case("gn_groups1", "GroupNorm", [1, 4], {}, (2, 4, 3, 3)))
    C(case("gn_groupsC", "GroupNorm", [4, 4], {}, (2, 4, 3, 2)))
    C(case("gn_groups2_noaffine", "GroupNorm", [2, 6], {"affine": False, "eps": 1e-3}, (3, 6, 5)))
    C(case("gn_3d_input", "GroupNorm", [3, 6], {}, (2, 6, 4)))
    C(case("gn_5d_view", "GroupNorm", [2, 4], {}, (2, 3, 2, 2, 4), view=("permute", (0, 4, 1, 2, 3))))
    C(case("in2d_default", "InstanceNorm2d", [3], {}, (2, 3, 4, 3)))
    C(case("in2d_affine", "InstanceNorm2d", [3], {"affine": True}, (2, 3, 4, 3)))
    C(case("in2d_stats_train", "InstanceNorm2d", [3], {"track_running_stats": True, "affine": True}, (2, 3, 4, 3)))
    C(case("in2d_stats_eval", "InstanceNorm2d", [3], {"track_running_stats": True}, (2, 3, 4, 3), train=False))
    C(case("in2d_unbatched", "InstanceNorm2d", [3], {"affine": True}, (3, 4, 5)))
    C(case("in1d", "InstanceNorm1d", [3], {"affine": True, "momentum": 0.2, "track_running_stats": True},
           (2, 3, 6)))
    C(case("in1d_unbatched", "InstanceNorm1d", [3], {}, (3, 6)))
    C(case("in3d", "InstanceNorm3d", [2], {"affine": True}, (2, 2, 3, 2, 3)))
    return cs


def shape_cases():
    cs = []
    C = cs.append
    C(case("flatten_default", "Flatten", [], None, (2, 3, 2, 2), targs=[]))
    C(case("flatten_middle", "Flatten", [2, 3], None, (2, 3, 2, 4), targs=[1, 2]))
    C(case("flatten_neg", "Flatten", [1, -2], None, (2, 3, 2, 4), targs=[0, -2]))
    C(case("unflatten", "Unflatten", [2, [2, 3]], None, (4, 6, 2), targs=[1, (2, 3)]))
    C(case("unflatten_neg", "Unflatten", [-1, [2, -1]], None, (4, 6), targs=[-1, (2, -1)]))
    C(case("pixel_shuffle", "PixelShuffle", [2], None, (2, 8, 3, 2)))
    C(case("pixel_shuffle_unbatched", "PixelShuffle", [3], None, (9, 2, 2)))
    C(case("pixel_unshuffle", "PixelUnshuffle", [2], None, (2, 3, 4, 6)))
    C(case("upsample_nearest", "Upsample", [], {"scale_factor": 2}, (2, 2, 3, 3), targs=[]))
    C(case("upsample_nearest_frac", "Upsample", [], {"scale_factor": 1.5}, (1, 2, 5, 4), targs=[]))
    C(case("upsample_nearest_size", "Upsample", [], {"size": [5, 7]}, (1, 2, 3, 4), targs=[]))
    C(case("upsample_bilinear", "Upsample", [], {"scale_factor": 2, "mode": "bilinear"}, (2, 2, 3, 4), targs=[]))
    C(case("upsample_bilinear_ac", "Upsample", [], {"size": [5, 6], "mode": "bilinear", "align_corners": True},
           (1, 2, 3, 4), targs=[]))
    C(case("upsample_bicubic", "Upsample", [], {"scale_factor": [2, 1.5], "mode": "bicubic"}, (1, 2, 4, 4), targs=[]))
    C(case("upsample_linear", "Upsample", [], {"scale_factor": 2.5, "mode": "linear"}, (2, 2, 4), targs=[]))
    C(case("upsample_trilinear", "Upsample", [], {"size": [3, 4, 5], "mode": "trilinear"}, (1, 2, 2, 3, 3), targs=[]))
    C(case("upsample_nearest_exact", "Upsample", [], {"scale_factor": 1.7, "mode": "nearest-exact"}, (1, 2, 5, 3),
           targs=[]))
    C(case("upsample_recompute", "Upsample", [], {"scale_factor": 1.7, "mode": "bilinear",
                                                  "recompute_scale_factor": True}, (1, 2, 5, 4), targs=[]))
    C(case("upsample_bilinear_down", "Upsample", [], {"size": [3, 2], "mode": "bilinear"}, (1, 2, 7, 5), targs=[]))
    C(case("upsample_view", "Upsample", [], {"scale_factor": 2, "mode": "bilinear"}, (2, 3, 4, 2),
           view=("permute", (0, 3, 1, 2)), targs=[]))
    C(case("unfold", "Unfold", [[2, 3]], {"dilation": [1, 2], "padding": 1, "stride": [2, 1]}, (2, 3, 5, 6)))
    C(case("unfold_unbatched", "Unfold", [2], {"stride": 2}, (3, 4, 4)))
    C(case("fold", "Fold", [[4, 5], 2], {"stride": [2, 1], "padding": [1, 0]}, (2, 8, 12)))
    C(case("fold_dilation", "Fold", [[5, 5], [2, 3]], {"dilation": 2}, (1, 12, 3)))
    C(case("lppool2d", "LPPool2d", [2, [3, 2]], {"stride": [2, 1], "ceil_mode": True}, (2, 2, 6, 5)))
    C(case("lppool1d", "LPPool1d", [3, 2], None, (2, 3, 7), leaf=torch.rand(2, 3, 7) + 0.5))
    C(case("lrn", "LocalResponseNorm", [3], {"alpha": 0.01, "beta": 0.6, "k": 2.0}, (2, 5, 3, 2)))
    C(case("lrn_3d_input", "LocalResponseNorm", [2], None, (2, 4, 5)))
    C(case("reflection_pad2d", "ReflectionPad2d", [[1, 2, 2, 0]], None, (2, 2, 3, 4)))
    C(case("replication_pad3d", "ReplicationPad3d", [[1, 0, 2, 1, 0, 2]], None, (1, 2, 2, 3, 2)))
    C(case("constant_pad2d", "ConstantPad2d", [[2, 1, 0, 3], 1.5], None, (2, 3, 3)))
    C(case("zero_pad2d", "ZeroPad2d", [1], None, (1, 2, 2, 3)))
    C(case("upsampling_bilinear2d", "UpsamplingBilinear2d", [[5, 4]], None, (1, 2, 3, 2)))
    C(case("upsampling_nearest2d", "UpsamplingNearest2d", [None, 2], None, (1, 2, 3, 2)))
    C(case("softmax2d", "Softmax2d", [], None, (2, 4, 3, 2)))
    return cs


def random_cases():
    """Random sizes (a fixed seed): transposed convolutions (stride, padding, dilation,
    output_padding, groups per dim) and 1-d, 2-d and 3-d pools (ceil_mode, count_include_pad,
    divisor_override, dilation, return_indices)."""
    import random
    rnd = random.Random(27)
    cs = []
    while len(cs) < 16:
        nd = [1, 2, 2, 2, 3][len(cs) % 5]
        g = rnd.choice([1, 1, 2])
        cin, cout = g * rnd.randint(1, 2), g * rnd.randint(1, 2)
        k = [rnd.randint(1, 4) for _ in range(nd)]
        st = [rnd.randint(1, 3) for _ in range(nd)]
        dl = [rnd.randint(1, 3) for _ in range(nd)]
        pd = [rnd.randint(0, 3) for _ in range(nd)]
        op = [rnd.randint(0, max(st[i], dl[i]) - 1) for i in range(nd)]
        sp = [rnd.randint(1, 4) for _ in range(nd)]
        if any((sp[i] - 1) * st[i] - 2 * pd[i] + dl[i] * (k[i] - 1) + op[i] + 1 < 1 for i in range(nd)):
            continue
        opts = {"stride": st, "padding": pd, "dilation": dl, "output_padding": op, "groups": g,
                "bias": rnd.random() < 0.7}
        cs.append(case("random_convt%dd_%d" % (nd, len(cs)), "ConvTranspose%dd" % nd, [cin, cout, k], opts,
                       (rnd.randint(1, 2), cin, *sp)))
    n = 0
    while n < 16:
        mod = ["MaxPool2d", "AvgPool2d"][n % 2]
        k = [rnd.randint(1, 4) for _ in range(2)]
        st = [rnd.randint(1, 3) for _ in range(2)]
        pd = [rnd.randint(0, k[i] // 2) for i in range(2)]
        opts = {"stride": st, "padding": pd, "ceil_mode": rnd.random() < 0.6}
        dl = [1, 1]
        if mod == "MaxPool2d":
            dl = [rnd.randint(1, 2) for _ in range(2)]
            opts["dilation"] = dl
            opts["return_indices"] = rnd.random() < 0.5
        else:
            opts["count_include_pad"] = rnd.random() < 0.5
        sp = [rnd.randint(1, 7) for _ in range(2)]
        if any(sp[i] + 2 * pd[i] < dl[i] * (k[i] - 1) + 1 for i in range(2)):
            continue
        cs.append(case("random_%s_%d" % (mod.lower(), n), mod, [k], opts, (rnd.randint(1, 2), 2, *sp)))
        n += 1
    n = 0
    while n < 12:
        nd = [1, 3][n % 2]
        mod = ["MaxPool%dd", "AvgPool%dd"][(n // 2) % 2] % nd
        k = [rnd.randint(1, 3) for _ in range(nd)]
        st = [rnd.randint(1, 3) for _ in range(nd)]
        pd = [rnd.randint(0, k[i] // 2) for i in range(nd)]
        opts = {"stride": st, "padding": pd, "ceil_mode": rnd.random() < 0.6}
        dl = [1] * nd
        if mod.startswith("Max"):
            dl = [rnd.randint(1, 2) for _ in range(nd)]
            opts["dilation"] = dl
            opts["return_indices"] = rnd.random() < 0.5
        else:
            opts["count_include_pad"] = rnd.random() < 0.5
            if nd == 3 and rnd.random() < 0.3:
                opts["divisor_override"] = rnd.randint(1, 5)
        sp = [rnd.randint(1, 6) for _ in range(nd)]
        if any(sp[i] + 2 * pd[i] < dl[i] * (k[i] - 1) + 1 for i in range(nd)):
            continue
        if mod == "AvgPool3d" and any(sp[i] < k[i] for i in range(3)):
            continue  # torch's avg_pool3d wants the kernel within the unpadded input (avg_pool2d does not)
        cs.append(case("random_%s_%d" % (mod.lower(), n), mod, [k], opts, (rnd.randint(1, 2), 2, *sp)))
        n += 1
    return cs


def fcase(name, fn, tensors, args, targs=None, grad=None):
    """nn.functional.<fn> called with torch's positional arguments: tensors (name -> tensor; those in
    `grad`, default all float ones, require grad), args the call's arguments where a string "@name"
    is that tensor (targs: torch's, when they differ). Records out, R, each tensor's gradient and the
    tensors that need none after the call (batch_norm's running statistics, updated in place)."""
    ts = {k: v.clone().requires_grad_(v.is_floating_point() and (grad is None or k in grad))
          for k, v in tensors.items()}
    def resolve(a):
        return ts[a[1:]] if isinstance(a, str) and a.startswith("@") else (tuple(a) if isinstance(a, list) else a)
    res = getattr(F, fn)(*[resolve(a) for a in (targs if targs is not None else args)])
    idx = None
    if isinstance(res, tuple):
        res, idx = res
    R = torch.randn_like(res)
    (res * R).sum().backward()
    c = {"name": name, "fn": fn, "tensors": {k: v.detach() for k, v in tensors.items()}, "args": args,
         "nargs": len(args), "out": res.detach(), "R": R,
         "grads": {k: t.grad for k, t in ts.items() if t.grad is not None},
         "after": {k: t.detach() for k, t in ts.items() if not t.requires_grad}}
    if idx is not None:
        c["indices"] = idx
    return c


def functional_cases():
    r = torch.randn
    cs = []
    C = cs.append
    C(fcase("f_conv2d_positional", "conv2d", {"x": r(2, 4, 7, 6), "w": r(6, 2, 3, 2), "b": r(6)},
            ["@x", "@w", "@b", [2, 1], [1, 2], [1, 2], 2]))
    C(fcase("f_conv2d_same_even", "conv2d", {"x": r(1, 2, 6, 7), "w": r(3, 2, 4, 2)},
            ["@x", "@w", None, 1, "same", [1, 3]]))
    C(fcase("f_conv1d_valid", "conv1d", {"x": r(2, 3, 9), "w": r(3, 1, 4), "b": r(3)},
            ["@x", "@w", "@b", 2, "valid", 1, 3]))
    C(fcase("f_conv3d", "conv3d", {"x": r(1, 2, 4, 5, 4), "w": r(4, 1, 2, 3, 2)},
            ["@x", "@w", None, [1, 2, 1], [1, 0, 1], [2, 1, 1], 2]))
    C(fcase("f_conv_transpose2d_positional", "conv_transpose2d", {"x": r(2, 4, 3, 4), "w": r(4, 3, 3, 2), "b": r(6)},
            ["@x", "@w", "@b", [2, 3], [1, 0], [1, 2], 2, [1, 2]]))
    C(fcase("f_conv_transpose1d", "conv_transpose1d", {"x": r(1, 2, 5), "w": r(2, 3, 3)},
            ["@x", "@w", None, 3, 1, 2, 1, 2]))
    C(fcase("f_max_pool2d_positional", "max_pool2d", {"x": r(2, 3, 7, 6)}, ["@x", 3, 2, 1, 1, True, True]))
    C(fcase("f_avg_pool2d_positional", "avg_pool2d", {"x": r(2, 3, 7, 6)}, ["@x", [3, 2], 2, 1, True, False, None]))
    C(fcase("f_avg_pool2d_divisor", "avg_pool2d", {"x": r(1, 2, 5, 5)}, ["@x", 2, 2, 1, False, True, 2]))
    C(fcase("f_max_pool1d", "max_pool1d", {"x": r(2, 7)}, ["@x", 2, 2, 1, 1, True]))
    C(fcase("f_avg_pool1d", "avg_pool1d", {"x": r(2, 3, 8)}, ["@x", 3, 2, 1, True, False]))
    C(fcase("f_adaptive_avg_pool2d", "adaptive_avg_pool2d", {"x": r(2, 3, 9, 5)}, ["@x", [4, 3]]))
    C(fcase("f_batch_norm_train", "batch_norm", {"x": r(4, 3, 2), "rm": r(3) * 0.1, "rv": torch.rand(3) + 0.5,
                                                 "w": r(3), "b": r(3)},
            ["@x", "@rm", "@rv", "@w", "@b", True, 0.2, 1e-3], grad=("x", "w", "b")))
    C(fcase("f_batch_norm_eval", "batch_norm", {"x": r(4, 3, 2, 2), "rm": r(3) * 0.1, "rv": torch.rand(3) + 0.5},
            ["@x", "@rm", "@rv", None, None, False], grad=("x",)))
    C(fcase("f_group_norm", "group_norm", {"x": r(2, 6, 3, 2), "w": r(6), "b": r(6)}, ["@x", 3, "@w", "@b", 1e-4]))
    C(fcase("f_instance_norm", "instance_norm", {"x": r(2, 3, 5), "w": r(3), "b": r(3)},
            ["@x", None, None, "@w", "@b", True, 0.1, 1e-4]))
    C(fcase("f_interpolate_positional", "interpolate", {"x": r(1, 2, 3, 4)}, ["@x", None, 1.5, "bilinear", True]))
    C(fcase("f_interpolate_area", "interpolate", {"x": r(1, 2, 7, 5)}, ["@x", [3, 2], None, "area"]))
    C(fcase("f_interpolate_bicubic_ac", "interpolate", {"x": r(1, 2, 4, 3)}, ["@x", [7, 5], None, "bicubic", True]))
    C(fcase("f_interpolate_bicubic_down", "interpolate", {"x": r(1, 2, 9, 7)}, ["@x", None, [0.45, 0.6], "bicubic"]))
    C(fcase("f_interpolate_trilinear_ac", "interpolate", {"x": r(1, 2, 3, 2, 4)},
            ["@x", None, [1.5, 2, 0.75], "trilinear", True]))
    C(fcase("f_interpolate_linear_down", "interpolate", {"x": r(2, 2, 9)}, ["@x", 4, None, "linear"]))
    C(fcase("f_interpolate_nearest_3d", "interpolate", {"x": r(2, 2, 5)}, ["@x", None, 2.3, "nearest"]))
    C(fcase("f_interpolate_nearest_5d", "interpolate", {"x": r(1, 1, 2, 3, 3)}, ["@x", [3, 5, 2], None, "nearest"]))
    C(fcase("f_interpolate_recompute", "interpolate", {"x": r(1, 2, 5, 4)},
            ["@x", None, 1.7, "bilinear", False, True]))
    C(fcase("f_interpolate_area_1d", "interpolate", {"x": r(2, 3, 10)}, ["@x", 4, None, "area"]))
    C(fcase("f_interpolate_nearest_exact_down", "interpolate", {"x": r(1, 2, 7, 9)},
            ["@x", [3, 4], None, "nearest-exact"]))
    C(fcase("f_fractional_max_pool2d", "fractional_max_pool2d", {"x": r(2, 3, 9, 8), "u": torch.rand(2, 3, 2)},
            ["@x", [3, 2], [4, 5], None, True, "@u"], grad=("x",)))
    C(fcase("f_fractional_max_pool2d_ratio", "fractional_max_pool2d", {"x": r(1, 2, 10, 7), "u": torch.rand(1, 2, 2)},
            ["@x", 2, None, [0.5, 0.7], False, "@u"], grad=("x",)))
    C(fcase("f_fractional_max_pool3d", "fractional_max_pool3d", {"x": r(1, 2, 6, 7, 5), "u": torch.rand(1, 2, 3)},
            ["@x", 2, [3, 4, 3], None, True, "@u"], grad=("x",)))
    # grid_sample: points inside and outside [-1, 1] (each padding mode), both corner conventions
    grid = lambda *shape: torch.rand(*shape) * 2.6 - 1.3
    for mode, pmode, ac in [("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
                            ("bilinear", "reflection", True), ("nearest", "zeros", True), ("nearest", "reflection", False),
                            ("bilinear", "zeros", True)]:
        C(fcase("f_grid_sample_%s_%s_%s" % (mode, pmode, "ac" if ac else "noac"), "grid_sample",
                {"x": r(2, 3, 4, 5), "g": grid(2, 3, 6, 2)}, ["@x", "@g", mode, pmode, ac],
                grad=("x", "g") if mode == "bilinear" else ("x",)))
    C(fcase("f_affine_grid", "affine_grid", {"theta": r(2, 2, 3)}, ["@theta", [2, 3, 4, 5], False]))
    C(fcase("f_affine_grid_ac", "affine_grid", {"theta": r(1, 2, 3)}, ["@theta", [1, 1, 3, 2], True]))
    C(fcase("f_pixel_shuffle", "pixel_shuffle", {"x": r(1, 8, 2, 3)}, ["@x", 2]))
    C(fcase("f_pixel_unshuffle", "pixel_unshuffle", {"x": r(2, 2, 4, 6)}, ["@x", 2]))
    return cs


def sequence_cases():
    """Running statistics over several calls from a fresh module: modes[i] (train or eval) for
    input xs[i]; the outputs and the buffers after the last call."""
    cs = []
    for name, mod, args, opts, shape, modes in [
            ("seq_bn2d_momentum_none", "BatchNorm2d", [3], {"momentum": False}, (2, 3, 2, 2),
             [True, True, True, False, True, False]),
            ("seq_bn1d", "BatchNorm1d", [4], {"momentum": 0.25}, (3, 4), [True, False, True, True, False]),
            ("seq_bn3d_noaffine", "BatchNorm3d", [2], {"affine": False}, (2, 2, 2, 1, 2), [True, True, False]),
            ("seq_in2d_stats", "InstanceNorm2d", [2], {"track_running_stats": True, "momentum": 0.3},
             (2, 2, 3, 2), [True, True, False, True, False])]:
        m = getattr(nn, mod)(*args, **torch_opts(opts))
        xs, outs = [], []
        for train in modes:
            m.train(train)
            x = torch.randn(*shape) * 2 + 1
            xs.append(x)
            outs.append(m(x).detach())
        cs.append({"name": name, "mod": mod, "args": args, "opts": opts, "modes": modes, "xs": xs, "outs": outs,
                   "buffers": {k: v.detach().clone() for k, v in m.named_buffers()}})
    return cs


def main():
    cases = conv_cases() + pool_cases() + unpool_cases() + norm_cases() + shape_cases() + random_cases()
    functional = functional_cases()
    sequences = sequence_cases()
    names = [c["name"] for c in cases + functional + sequences]
    assert len(names) == len(set(names)), "duplicate case names"
    # 13 significant digits: the spec's float64 tolerance is 1e-10, and the file is a third smaller
    Writer(keys="auto", floats=lambda t: [lua_float13(v) for v in t.reshape(-1).tolist()]).write(os.path.join(HERE, "fixtures", "probe_vision.lua"), "tests/gen_probe_vision_fixtures.py",
                              {"cases": cases, "functional": functional, "sequences": sequences})


if __name__ == "__main__":
    main()
