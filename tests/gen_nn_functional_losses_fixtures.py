"""PyTorch 1.13 reference values for tests/lua/nn_functional_losses_spec.lua:
torch.nn.functional's losses and pad as a PyTorch user calls them, for the
forms ember once refused or computed otherwise (float64):

  ce            F.cross_entropy with weight= (and label_smoothing,
                ignore_index), and with class-probability targets, each
                reduction; the loss and the gradient of sum(loss * R)
  ctc           F.ctc_loss with an empty target (target_lengths 0) and the
                unbatched form (log_probs [T, C], targets [S]), of
                log_softmax(logits): the gradient is the logits' (torch's
                ctc backward of log_probs alone is not the true gradient;
                through log_softmax it is)
  pad           F.pad with negative amounts in reflect, replicate and
                circular modes (crops)

Class ids and ignore_index are written 0-based as torch's; the spec adds 1.

    /usr/bin/python3 tests/gen_nn_functional_losses_fixtures.py   # writes tests/fixtures/nn_functional_losses.lua
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(86)
torch.set_default_dtype(torch.float64)


def with_grad(f, x):
    x = x.detach().clone().requires_grad_()
    out = f(x)
    R = torch.randn(out.shape)
    (out * R).sum().backward()
    return out.detach(), R, x.grad.detach()


def ce_cases():
    out = []
    x = torch.randn(5, 4)
    y = torch.tensor([0, 3, 2, 3, 1])
    W = torch.tensor([0.5, 2.0, 1.0, 3.0])
    probs = torch.softmax(torch.randn(5, 4), 1)
    for red in ["mean", "sum", "none"]:
        for opts in [{"weight": W}, {"weight": W, "label_smoothing": 0.2},
                     {"weight": W, "label_smoothing": 0.1, "ignore_index": 3}]:
            loss, R, g = with_grad(lambda a: F.cross_entropy(a, y, reduction=red, **opts), x)
            out.append({"x": x, "target": y, "opts": dict(opts, reduction=red), "out": loss, "R": R, "grad": g})
        for opts in [{}, {"label_smoothing": 0.3}, {"weight": W, "label_smoothing": 0.1}]:
            loss, R, g = with_grad(lambda a: F.cross_entropy(a, probs, reduction=red, **opts), x)
            out.append({"x": x, "target": probs, "opts": dict(opts, reduction=red), "out": loss, "R": R, "grad": g})
    return out


def ctc_cases():
    out = []
    lp = torch.randn(6, 3, 5)  # logits
    targets = torch.tensor([[1, 2, 2], [3, 3, 4], [4, 1, 2]])
    il, tl = [6, 5, 4], [0, 2, 0]
    for red in ["none", "sum", "mean"]:
        loss, R, g = with_grad(lambda a: F.ctc_loss(a.log_softmax(-1), targets, il, tl, reduction=red), lp)
        out.append({"name": "empty_target", "logits": lp, "targets": targets, "input_lengths": il,
                    "target_lengths": tl, "reduction": red, "out": loss, "R": R, "grad": g})
    lp1 = lp[:, 0].clone()
    for red in ["none", "mean"]:
        loss, R, g = with_grad(lambda a: F.ctc_loss(a.log_softmax(-1), torch.tensor([1, 2, 2]), [6], [3], reduction=red),
                               lp1)
        out.append({"name": "unbatched", "logits": lp1, "targets": torch.tensor([1, 2, 2]), "input_lengths": [6],
                    "target_lengths": [3], "reduction": red, "out": loss, "R": R, "grad": g})
    return out


def pad_cases():
    out = []
    x3 = torch.randn(1, 2, 5)
    x4 = torch.randn(1, 2, 3, 4)
    for mode in ["reflect", "replicate", "circular"]:
        for x, pad in [(x3, [-1, 2]), (x3, [2, -1]), (x3, [-2, -1]), (x3, [3, -2]), (x4, [-1, 2, 1, -1]),
                       (x4, [1, -2, -1, 0])]:
            y, R, g = with_grad(lambda a: F.pad(a, pad, mode), x)
            out.append({"mode": mode, "pad": pad, "x": x, "out": y, "R": R, "grad": g})
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn_functional_losses.lua")
    Writer(keys="auto").write(path, "tests/gen_nn_functional_losses_fixtures.py",
                              {"ce": ce_cases(), "ctc": ctc_cases(), "pad": pad_cases()})
