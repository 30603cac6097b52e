"""PyTorch 1.13 references for tests/lua/autocast_parity_spec.lua:
torch.autocast("cpu", dtype=torch.bfloat16) on the ops whose dtype or
behaviour ember.autocast matched badly: the batch, instance and group norms
and the average pools given a bfloat16 activation (torch keeps bfloat16,
computing the norms' statistics in float32: its mixed-dtype batch_norm), and
the linear algebra of torch's CPU fp32 list (inv, solve, cholesky, lstsq: a
bfloat16 input runs in float32 and returns float32).

Inputs are on a 1/8 grid within +-4, so exact in bfloat16: ember and torch
start from the same numbers. Outputs are written as float64 (a bfloat16
output's values exactly); `dtype` says what torch returned.

    /usr/bin/python3 tests/gen_autocast_parity_fixtures.py   # writes tests/fixtures/autocast_parity.lua
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(104)
HERE = os.path.dirname(os.path.abspath(__file__))
BF = torch.bfloat16


def grid(*shape):
    return ((torch.randn(*shape) * 8).round() / 8).clamp(-4, 4)


def name(dt):
    return str(dt).replace("torch.", "")


def autocast():
    return torch.autocast("cpu", dtype=BF)


def out(t):
    return {"dtype": name(t.dtype), "value": t.detach().double()}


x = grid(4, 3, 5, 5)
R = grid(4, 3, 5, 5)
w, b = torch.tensor([1.5, 0.5, -1.0]), torch.tensor([0.25, -0.5, 1.0])

# nn.BatchNorm2d in training: a bfloat16 input beside float32 parameters
bn = nn.BatchNorm2d(3)
with torch.no_grad():
    bn.weight.copy_(w)
    bn.bias.copy_(b)
xb = x.to(BF).requires_grad_()
with autocast():
    y = bn(xb)
(y.float() * R).sum().backward()
batch_norm_train = {"out": out(y), "running_mean": bn.running_mean.double(), "running_var": bn.running_var.double(),
                    "grad_x": out(xb.grad), "grad_weight": out(bn.weight.grad), "grad_bias": out(bn.bias.grad)}
bn.eval()
with autocast():
    batch_norm_eval = {"out": out(bn(x.to(BF)))}

inorm = nn.InstanceNorm2d(3, affine=True)
with torch.no_grad():
    inorm.weight.copy_(w)
    inorm.bias.copy_(b)
with autocast():
    instance_norm = {"out": out(inorm(x.to(BF)))}
    group_norm = {"out": out(F.group_norm(x.to(BF), 3))}
    adaptive_avg_pool2d = {"out": out(F.adaptive_avg_pool2d(x.to(BF), 2))}
    avg_pool2d = {"out": out(F.avg_pool2d(x.to(BF), 2))}

A = grid(4, 4) + 4 * torch.eye(4)
M = grid(4, 4)
S = M @ M.t() / 4 + 2 * torch.eye(4)  # on a 1/256 grid, rounded to bfloat16 below
S = S.to(BF).float()
B = grid(4, 2)
Atall = grid(6, 3)
Btall = grid(6, 2)
with autocast():
    linalg = {
        "A": A, "S": S, "B": B, "Atall": Atall, "Btall": Btall,
        "inv": out(torch.linalg.inv(A.to(BF))),
        "solve": out(torch.linalg.solve(A.to(BF), B.to(BF))),
        "cholesky": out(torch.linalg.cholesky(S.to(BF))),
        # float32 inputs: torch's lstsq is one kernel, float32 inside
        "lstsq": out(torch.linalg.lstsq(Atall, Btall).solution),
        "lstsq_bf16": out(torch.linalg.lstsq(Atall.to(BF), Btall.to(BF)).solution),
        "eigvalsh": out(torch.linalg.eigvalsh(S.to(BF))),
    }

Writer().write(os.path.join(HERE, "fixtures", "autocast_parity.lua"), "tests/gen_autocast_parity_fixtures.py", {
    "x": x, "R": R, "weight": w, "bias": b,
    "batch_norm_train": batch_norm_train, "batch_norm_eval": batch_norm_eval, "instance_norm": instance_norm,
    "group_norm": group_norm, "adaptive_avg_pool2d": adaptive_avg_pool2d, "avg_pool2d": avg_pool2d,
    "linalg": linalg,
})
