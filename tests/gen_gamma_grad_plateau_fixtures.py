"""PyTorch 1.13 reference values for tests/lua/linalg_distributions_parity_spec.lua
(gamma_grad) and tests/lua/optim_torch_forms_spec.lua (plateau):

  gamma_grad   torch._standard_gamma_grad(alpha, x): d x / d alpha of a
               standard Gamma draw at a fixed quantile (what Gamma.rsample's
               backward multiplies by), float64, on a grid that reaches each
               of torch's three approximations (x < 0.8; alpha > 8 near and
               away from the mode; the rational one)
  plateau      ReduceLROnPlateau(mode="max", factor=0.5, patience=1,
               threshold=0.1, threshold_mode="abs", cooldown=1, min_lr=0.01,
               eps=1e-12) on SGD(lr=0.1): the lr after each metric, and the
               names of its state_dict()

    /usr/bin/python3 tests/gen_gamma_grad_plateau_fixtures.py   # writes tests/fixtures/gamma_grad_plateau.lua
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.set_default_dtype(torch.float64)


def gamma_grad():
    alphas, xs = [], []
    for a in [0.1, 0.5, 1.0, 2.5, 5.0, 7.9, 8.5, 12.0, 30.0, 100.0]:
        for x in [0.01, 0.5, 0.79, 0.81] + [a * r for r in [0.05, 0.3, 0.7, 0.95, 1.05, 1.5, 3.0]]:
            alphas.append(a)
            xs.append(x)
    a, x = torch.tensor(alphas), torch.tensor(xs)
    return {"alpha": a, "x": x, "grad": torch._standard_gamma_grad(a, x)}


def plateau():
    p = [torch.nn.Parameter(torch.zeros(1))]
    opt = torch.optim.SGD(p, lr=0.1)
    s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=1, threshold=0.1,
                                                   threshold_mode="abs", cooldown=1, min_lr=0.01, eps=1e-12)
    metrics = [1, 1.05, 1.02, 1.5, 1.55, 1.4, 1.3, 1.2, 1.1, 1.0, 0.9, 0.8]
    lrs = []
    for m in metrics:
        s.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    return {"metrics": metrics, "lrs": lrs, "state_keys": sorted(s.state_dict().keys())}


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gamma_grad_plateau.lua")
    Writer(keys="auto").write(path, "tests/gen_gamma_grad_plateau_fixtures.py", {"gamma_grad": gamma_grad(), "plateau": plateau()})
