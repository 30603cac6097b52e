"""Optimizer and scheduler state dicts as torch 1.13 saves them, and what
torch does after loading them -- tests/fixtures/optim_torch_state.pt and
tests/fixtures/optim_torch_state.lua, read by
tests/lua/optim_torch_files_spec.lua.

    /usr/bin/python3 tests/gen_optim_torch_files.py

optim_torch_state.pt (torch.save) holds, for each scheduler case below,
{"opt": SGD.state_dict(), "sched": scheduler.state_dict()} taken after CUT
steps of a run on two parameter groups (lr 0.1 and 0.05, momentum 0.9),
and for the optimizer case {"model": the parameters, "opt":
Adam.state_dict(), "x": the input} after CUT steps. The Lua fixture holds
the lrs torch gives in the steps after the cut (the scheduler loaded into a
fresh one over a fresh optimizer continues them), the parameters after
CUT more Adam steps, and MultiStepLR's lrs with milestones given out of
order and one twice (torch keeps them in a Counter). OneCycleLR's and
CyclicLR's state dicts are left out: torch 1.13 pickles a method of the
scheduler in them (OneCycleLR's anneal_func; CyclicLR's cannot be saved at
all), which weights_only loading refuses, as ember.load does.
"""
import copy
import os
import warnings

import torch

from fixture_writer import Writer

warnings.simplefilter("ignore")  # torch's step-order warning: no optimizer step with gradients here
L = torch.optim.lr_scheduler
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
CUT, STEPS = 13, 30

# name -> how the case's scheduler is made (the spec makes the same)
SCHEDULERS = {
    "StepLR": lambda o: L.StepLR(o, 4, 0.5),
    "MultiStepLR": lambda o: L.MultiStepLR(o, [3, 12, 20], 0.5),
    "ExponentialLR": lambda o: L.ExponentialLR(o, 0.9),
    "CosineAnnealingLR": lambda o: L.CosineAnnealingLR(o, 12, 0.001),
    "LambdaLR": lambda o: L.LambdaLR(o, lambda e: 0.9 ** e),
    "MultiplicativeLR": lambda o: L.MultiplicativeLR(o, lambda e: 0.95),
    "LinearLR": lambda o: L.LinearLR(o, 0.1, 1.0, 20),
    "ConstantLR": lambda o: L.ConstantLR(o, 0.5, 15),
    "PolynomialLR": lambda o: L.PolynomialLR(o, 25, 2.0),
    "CosineAnnealingWarmRestarts": lambda o: L.CosineAnnealingWarmRestarts(o, 3, 2, 0.001),
    "SequentialLR": lambda o: L.SequentialLR(o, [L.LinearLR(o, 0.2, total_iters=5), L.ExponentialLR(o, 0.9)], [5]),
    "ChainedScheduler": lambda o: L.ChainedScheduler([L.StepLR(o, 4, 0.5), L.ExponentialLR(o, 0.95)]),
    "ReduceLROnPlateau": lambda o: L.ReduceLROnPlateau(o, patience=1, cooldown=1),
}
METRICS = [1.0, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7] + [0.7] * (STEPS - 14)


def sgd2():
    a = torch.zeros(2, requires_grad=True)
    b = torch.zeros(2, requires_grad=True)
    return torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.05}], lr=0.1, momentum=0.9)


def lrs(o):
    return [g["lr"] for g in o.param_groups]


def schedulers(saved):
    out = {}
    for name, make in SCHEDULERS.items():
        o = sgd2()
        s = make(o)
        after = []
        for i in range(1, STEPS):
            o.step()
            s.step(METRICS[i - 1]) if name == "ReduceLROnPlateau" else s.step()
            if i == CUT:
                saved[name] = copy.deepcopy({"opt": o.state_dict(), "sched": s.state_dict()})
            elif i > CUT:
                after.append(lrs(o))
        out[name] = after
    return out


def multistep_counter():
    o = sgd2()
    s = L.MultiStepLR(o, [10, 5, 5], 0.5)
    out = [lrs(o)]
    for _ in range(STEPS):
        o.step()
        s.step()
        out.append(lrs(o))
    return out


def adam(saved):
    torch.manual_seed(0)
    w1 = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    b1 = torch.randn(4, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, dtype=torch.float64)
    opt = torch.optim.Adam([{"params": [w1, b1], "betas": (0.8, 0.99), "amsgrad": True},
                            {"params": [w2], "lr": 0.05, "weight_decay": 0.1}], lr=0.01)

    def closure():
        opt.zero_grad()
        loss = (torch.tanh(x @ w1.t() + b1) @ w2.t()).pow(2).sum()
        loss.backward()
        return loss

    for _ in range(CUT):
        opt.step(closure)
    # a copy: the state dict holds the live state tensors (step too), which the next steps change
    saved["Adam"] = copy.deepcopy({"params": [p.detach() for p in (w1, b1, w2)], "opt": opt.state_dict(), "x": x})
    for _ in range(CUT):
        opt.step(closure)
    return [p.detach().flatten().tolist() for p in (w1, b1, w2)]


def main():
    saved = {}
    data = {
        "cut": CUT,
        "metrics": METRICS,
        "schedulers": schedulers(saved),
        "multistep_counter": multistep_counter(),
        "adam_after": adam(saved),
    }
    torch.save(saved, os.path.join(FIX, "optim_torch_state.pt"))
    Writer().write(os.path.join(FIX, "optim_torch_state.lua"), "tests/gen_optim_torch_files.py", data)


if __name__ == "__main__":
    main()
