#!/usr/bin/python3
"""Writes tests/fixtures/nn_conv.lua: PyTorch 1.13 reference values for
nn.Conv1d and nn.Conv2d (tests/lua/nn_conv_spec.lua).

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_conv_fixtures.py

Each case: the module's config (ember's option names: kernel_size, stride,
padding, dilation as numbers or {h, w} pairs, groups, bias), its state dict
(PyTorch's names, which are ember's: weight, bias), the input x, the output,
and the gradients of sum(out * R) for a fixed random R with respect to x and
every parameter. All float64, own seed, small shapes.
"""
import os

import torch

from fixture_writer import Writer

torch.manual_seed(20261206)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def lua_size(v):
    return list(v) if isinstance(v, tuple) else v


def case(name, nd, cin, cout, k, shape, **opts):
    cls = torch.nn.Conv2d if nd == 2 else torch.nn.Conv1d
    m = cls(cin, cout, k, **opts)
    x = torch.randn(*shape).requires_grad_()
    out = m(x)
    R = torch.randn_like(out)
    (out * R).sum().backward()
    config = {"nd": nd, "in_channels": cin, "out_channels": cout, "kernel_size": lua_size(k)}
    for key in ("stride", "padding", "dilation", "groups", "bias"):
        if key in opts:
            config[key] = lua_size(opts[key])
    return {
        "name": name,
        "config": config,
        "state": {n: p.detach().clone() for n, p in m.named_parameters()},
        "x": x.detach(),
        "out": out.detach(),
        "R": R,
        "grad_x": x.grad,
        "grads": {n: p.grad for n, p in m.named_parameters()},
    }


def cases():
    return [
        case("plain_3x3", 2, 3, 4, 3, (2, 3, 6, 5)),
        case("stride2_pad1", 2, 3, 4, 3, (2, 3, 7, 6), stride=2, padding=1),
        case("dilation2", 2, 2, 3, 3, (2, 2, 7, 7), dilation=2, padding=1),
        case("groups2", 2, 4, 6, 3, (2, 4, 5, 5), groups=2, padding=1),
        case("depthwise", 2, 4, 4, 3, (2, 4, 5, 6), groups=4, stride=(2, 1), padding=(1, 0)),
        case("same_even_kernel", 2, 3, 2, (2, 4), (1, 3, 5, 6), padding="same", dilation=(1, 2)),
        case("valid_no_bias", 2, 2, 3, 2, (2, 2, 4, 4), padding="valid", bias=False),
        case("pointwise_1x1", 2, 5, 3, 1, (2, 5, 3, 4)),
        case("rect_kernel_stride", 2, 3, 4, (3, 1), (2, 3, 8, 5), stride=(2, 3), padding=(0, 2)),
        case("patch_4x4_s4", 2, 3, 5, 4, (2, 3, 8, 8), stride=4),
        case("unbatched", 2, 3, 2, 3, (3, 5, 5), padding=1),
        case("conv1d", 1, 3, 4, 3, (2, 3, 9), stride=2, padding=1),
        case("conv1d_same_dilated_groups", 1, 4, 6, 3, (2, 4, 8), padding="same", dilation=2, groups=2),
        case("conv1d_unbatched", 1, 2, 3, 2, (2, 6)),
    ]


def main():
    path = os.path.join(HERE, "fixtures", "nn_conv.lua")
    Writer(keys="quoted").write(path, "tests/gen_conv_fixtures.py", {"cases": cases()})


if __name__ == "__main__":
    main()
