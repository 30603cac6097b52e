"""PyTorch 1.13's values for nn.utils.parametrize, nn.utils.parametrizations
and the hook-based nn.utils.weight_norm / spectral_norm
(tests/lua/parametrize_spec.lua): tests/fixtures/parametrize.lua.

    /usr/bin/python3 tests/gen_parametrize.py

Each case is a float64 Linear(4, 3) or Conv2d(2, 3, 3) with one
reparametrization, trained for 3 SGD steps (lr 0.1) on sum(m(x) * R) in
training mode: `state0` is the state dict before (PyTorch's names), each
step's output and the gradients of every parameter (by name), `state` the
state dict after, `eval_out` the output in eval mode after, and `removed` the
state dict once the reparametrization is removed (remove_parametrizations,
remove_weight_norm, remove_spectral_norm) in eval mode.

- `weight_norm`: torch.nn.utils.weight_norm (the hook-based one; 1.13 has no
  parametrizations.weight_norm). The case `pweight_norm_*` is the same run
  under PyTorch 2.1's parametrization names (weight_g -> parametrizations.
  weight.original0, weight_v -> original1): the values are the same formula.
- `spectral_norm`: torch.nn.utils.parametrizations.spectral_norm (u, v
  iterated in training mode, state names parametrizations.weight.0._u);
  `hspectral_norm`: the hook-based torch.nn.utils.spectral_norm.
- `symmetric`: register_parametrization with X.triu() + X.triu(1).T.
"""
import torch
import torch.nn as tnn
import torch.nn.utils.parametrize as P
from torch.nn.utils import parametrizations

from fixture_writer import Writer

torch.manual_seed(4242)
torch.set_default_dtype(torch.float64)


class Symmetric(tnn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(0, 1)


def make(kind):
    if kind == "linear":
        return tnn.Linear(4, 3), torch.randn(5, 4)
    if kind == "linear3":
        return tnn.Linear(3, 3), torch.randn(5, 3)
    return tnn.Conv2d(2, 3, 3), torch.randn(2, 2, 5, 5)


def run(name, kind, apply, rename=None, opts=None):
    m, x = make(kind)
    apply(m)
    rn = rename or {}
    def sd():
        return {rn.get(k, k): v.clone() for k, v in m.state_dict().items()}
    case = {"name": name, "kind": kind, "opts": opts or {}, "x": x}
    # the start: after one forward (a power iteration in training mode)
    R = torch.randn(m(x).shape)
    case["state0"] = sd()
    case["R"] = R
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    steps = []
    for _ in range(3):
        opt.zero_grad()
        out = m(x)
        (out * R).sum().backward()
        steps.append({"out": out.detach().clone(),
                      "grads": {rn.get(k, k): p.grad.clone() for k, p in m.named_parameters()}})
        opt.step()
    case["steps"] = steps
    case["state"] = sd()
    m.eval()
    case["eval_out"] = m(x).detach()
    case["eval_weight"] = getattr(m, "weight").detach()
    remove(m)
    case["removed"] = {k: v.clone() for k, v in m.state_dict().items()}
    return case


def remove(m):
    # each kind's removal, in eval mode (spectral norm does not iterate)
    if P.is_parametrized(m):
        P.remove_parametrizations(m, "weight")
    for hook in list(m._forward_pre_hooks.values()):
        if isinstance(hook, tnn.utils.weight_norm.__globals__["WeightNorm"]):
            tnn.utils.remove_weight_norm(m)
        else:
            tnn.utils.remove_spectral_norm(m)


WN = {"weight_g": "parametrizations.weight.original0", "weight_v": "parametrizations.weight.original1"}

cases = []
for kind in ("linear", "conv"):
    for dim, dname in ((0, "dim1"), (None, "none"), (1, "dim2")):
        cases.append(run("weight_norm_%s_%s" % (kind, dname), kind,
                         lambda m, d=dim: tnn.utils.weight_norm(m, "weight", d), opts={"dim": dname}))
        cases.append(run("pweight_norm_%s_%s" % (kind, dname), kind,
                         lambda m, d=dim: tnn.utils.weight_norm(m, "weight", d), WN, opts={"dim": dname}))
    cases.append(run("spectral_norm_%s" % kind, kind, lambda m: parametrizations.spectral_norm(m)))
    cases.append(run("spectral_norm2_%s" % kind, kind,
                     lambda m: parametrizations.spectral_norm(m, n_power_iterations=2, dim=1),
                     opts={"n_power_iterations": 2, "dim": 2}))
    cases.append(run("hspectral_norm_%s" % kind, kind, lambda m: tnn.utils.spectral_norm(m)))
    cases.append(run("hspectral_norm2_%s" % kind, kind,
                     lambda m: tnn.utils.spectral_norm(m, n_power_iterations=2, dim=1),
                     opts={"n_power_iterations": 2, "dim": 2}))


def sym(m):
    P.register_parametrization(m, "weight", Symmetric())


cases.append(run("symmetric", "linear3", sym))

Writer(keys="auto").write("tests/fixtures/parametrize.lua", "tests/gen_parametrize.py", {"cases": cases})
