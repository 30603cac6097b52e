"""PyTorch 1.13 reference values for tests/lua/helper87_probe_spec.lua:
torch.linalg, torch.distributions and torch.special as a PyTorch user calls
them, in float64, for the forms ember once computed otherwise or refused.

  linalg_*   inputs, outputs and (where named) gradients of sum(out * R)
  dist_*     log_prob / entropy / cdf / icdf / mean / variance values
  kl_*       kl_divergence(p, q)
  special_*  torch.special values at edge inputs (0, negatives, inf, nan)

    /usr/bin/python3 tests/gen_helper87_fixtures.py   # writes tests/fixtures/helper87_linalg.lua
"""
import math
import os
import sys

import torch
import torch.distributions as D

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(87)
torch.set_default_dtype(torch.float64)


def grad_case(name, f, inputs, extra=None):
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    out = f(*xs)
    R = torch.randn(out.shape)
    (out * R).sum().backward()
    c = {"name": name, "inputs": [x.detach() for x in inputs], "out": out.detach(), "R": R,
         "grads": [x.grad.detach() for x in xs]}
    c.update(extra or {})
    return c


def linalg_cases():
    out = []
    # torch.linalg.norm of a 1-D input with ord given: a vector norm
    v = torch.tensor([3.0, -4.0, 0.5, 0.0])
    for o in [1, 2, 0.5, math.inf, -math.inf, 0, 3]:
        out.append({"name": "linalg_norm_1d_%s" % o, "x": v, "ord": o, "out": torch.linalg.norm(v, o)})
    # torch.linalg.cholesky_ex is differentiable (the symmetrized gradient)
    A = torch.randn(2, 3, 3)
    S = A @ A.mT + torch.eye(3)
    out.append(grad_case("linalg_cholesky_ex", lambda a: torch.linalg.cholesky_ex(a)[0], [S]))
    out.append(grad_case("linalg_cholesky", lambda a: torch.linalg.cholesky(a), [S]))
    out.append(grad_case("linalg_eigh_vals", lambda a: torch.linalg.eigvalsh(a), [S]))
    return out


def dist_cases():
    out = []
    t = torch.tensor
    specs = [
        ("Normal", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([[0.1, -0.7], [1.5, 2.0]]), t([0.2, 0.9])),
        ("Laplace", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), t([0.2, 0.9])),
        ("Cauchy", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), t([0.2, 0.9])),
        ("Gumbel", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), t([0.2, 0.9])),
        ("LogNormal", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, 0.7]), t([0.2, 0.9])),
        ("HalfNormal", [t([2.0, 0.3])], {}, t([0.1, 0.7]), t([0.2, 0.9])),
        ("HalfCauchy", [t([2.0, 0.3])], {}, t([0.1, 0.7]), t([0.2, 0.9])),
        ("Exponential", [t([2.0, 0.3])], {}, t([0.1, 0.7]), t([0.2, 0.9])),
        ("Uniform", [t([0.0, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), t([0.2, 0.9])),
        ("Gamma", [t([2.0, 0.3]), t([1.5, 4.0])], {}, t([0.1, 0.7]), None),
        ("Chi2", [t([2.0, 5.0])], {}, t([0.1, 0.7]), None),
        ("Beta", [t([2.0, 0.3]), t([1.5, 4.0])], {}, t([0.1, 0.7]), None),
        ("StudentT", [t([2.0, 5.0]), t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), None),
        ("Pareto", [t([2.0, 0.3]), t([1.5, 4.0])], {}, t([2.5, 0.7]), t([0.2, 0.9])),
        ("Weibull", [t([2.0, 0.3]), t([1.5, 4.0])], {}, t([2.5, 0.7]), t([0.2, 0.9])),
        ("Kumaraswamy", [t([2.0, 0.3]), t([1.5, 4.0])], {}, t([0.1, 0.7]), None),
        ("FisherSnedecor", [t([2.0, 5.0]), t([3.0, 9.0])], {}, t([0.1, 0.7]), None),
        ("VonMises", [t([0.5, -1.0]), t([2.0, 0.3])], {}, t([0.1, -0.7]), None),
        ("Poisson", [t([2.0, 0.3])], {}, t([0.0, 3.0]), None),
        ("Geometric", [], {"probs": t([0.2, 0.7])}, t([0.0, 3.0]), None),
        ("Bernoulli", [], {"logits": t([0.2, -1.7])}, t([0.0, 1.0]), None),
        ("Binomial", [t([10.0, 4.0])], {"probs": t([0.2, 0.7])}, t([0.0, 3.0]), None),
        ("NegativeBinomial", [t([10.0, 4.0])], {"probs": t([0.2, 0.7])}, t([0.0, 3.0]), None),
        ("ContinuousBernoulli", [], {"probs": t([0.2, 0.7])}, t([0.1, 0.9]), t([0.2, 0.9])),
        ("Dirichlet", [t([[2.0, 0.3, 1.0], [0.5, 0.5, 4.0]])], {}, t([0.2, 0.3, 0.5]), None),
        ("Multinomial", [5], {"probs": t([0.2, 0.3, 0.5])}, t([1.0, 1.0, 3.0]), None),
    ]
    for ctor, args, kw, x, q in specs:
        d = getattr(D, ctor)(*args, **kw)
        # each value torch has (NotImplementedError: none), q the icdf's input
        c = {"name": "dist_" + ctor, "ctor": ctor, "args": args, "kw": kw, "x": x, "q": q,
             "log_prob": d.log_prob(x)}
        for what in ("entropy", "mean", "variance", "cdf", "icdf"):
            try:
                if what == "cdf":
                    c[what] = d.cdf(x)
                elif what == "icdf":
                    if q is not None:
                        c[what] = d.icdf(q)
                else:
                    c[what] = d.entropy() if what == "entropy" else getattr(d, what)
            except NotImplementedError:
                pass
        out.append(c)
    # kl_divergence(p, q) for every pair torch registers among these, q's
    # parameters flipped (the same values, in other places: p and q differ)
    def flip(v):
        return v.flip(0) if torch.is_tensor(v) else v

    for pc, pa, pk, _, _ in specs:
        for qc, qa, qk, _, _ in specs:
            qa, qk = [flip(a) for a in qa], {k: flip(v) for k, v in qk.items()}
            try:
                v = D.kl_divergence(getattr(D, pc)(*pa, **pk), getattr(D, qc)(*qa, **qk))
            except NotImplementedError:
                continue
            out.append({"name": "kl_%s_%s" % (pc, qc), "p": {"ctor": pc, "args": pa, "kw": pk},
                        "q": {"ctor": qc, "args": qa, "kw": qk}, "kl": v})
    # the finite branches of the ContinuousBernoulli / Uniform pairs
    cb = {"ctor": "ContinuousBernoulli", "args": [], "kw": {"probs": t([0.2, 0.7])}}
    u = {"ctor": "Uniform", "args": [t([0.2, -1.0]), t([0.7, 2.0])], "kw": {}}
    P, Q = D.ContinuousBernoulli(probs=t([0.2, 0.7])), D.Uniform(t([0.2, -1.0]), t([0.7, 2.0]))
    out.append({"name": "kl_ContinuousBernoulli_Uniform_finite", "p": cb, "q": u, "kl": D.kl_divergence(P, Q)})
    out.append({"name": "kl_Uniform_ContinuousBernoulli_finite", "p": u, "q": cb, "kl": D.kl_divergence(Q, P)})
    return out


def special_cases():
    out = []
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "helper87_linalg.lua")
    Writer(keys="auto").write(path, "tests/gen_helper87_fixtures.py",
                              {"cases": linalg_cases() + dist_cases() + special_cases()})
