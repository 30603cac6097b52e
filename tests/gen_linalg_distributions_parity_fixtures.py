"""PyTorch 1.13 reference values for tests/lua/linalg_distributions_parity_spec.lua:
torch.linalg, torch.distributions and torch.special as a PyTorch user calls
them, in float64, for the forms ember once computed otherwise or refused.

  linalg_*   inputs, outputs and (where named) gradients of sum(out * R)
  dist_*     log_prob / entropy / cdf / icdf / mean / variance values
  kl_*       kl_divergence(p, q)
  special_*  torch.special values at edge inputs (0, negatives, inf, nan)

    /usr/bin/python3 tests/gen_linalg_distributions_parity_fixtures.py   # writes tests/fixtures/linalg_distributions_parity.lua
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
    # values of the batched functions: A [2, 3, 3], a tall T [2, 4, 3], a rank-2 R
    T = torch.randn(2, 4, 3)
    B = torch.randn(2, 4, 2)
    R = torch.randn(2, 4, 2) @ torch.randn(2, 2, 3)
    L = torch.linalg
    v = {"A": A, "S": S, "T": T, "B": B, "R": R}
    v["solve"] = L.solve(A, B[:, :3])
    v["inv"] = L.inv(A)
    v["det"] = L.det(A)
    v["slogdet_sign"], v["slogdet_logabs"] = L.slogdet(A)
    v["lstsq"] = L.lstsq(T, B).solution
    v["pinv_R"] = L.pinv(R)
    v["rank_R"] = L.matrix_rank(R)
    v["rank_R_tol"] = L.matrix_rank(R, atol=1.0, rtol=0.0)
    v["mpow_3"], v["mpow_m2"] = L.matrix_power(A, 3), L.matrix_power(A, -2)
    for o, k in [("fro", "fro"), ("nuc", "nuc"), (2, "2"), (-2, "m2"), (1, "1"), (-1, "m1"), (math.inf, "inf"),
                 (-math.inf, "minf")]:
        v["mnorm_" + k] = L.matrix_norm(T, o)
    v["vnorm_3_dims"] = L.vector_norm(T, 3, dim=(0, 2), keepdim=True)
    v["eigvalsh"] = L.eigvalsh(S)
    v["svdvals"] = L.svdvals(T)
    v["cond"] = L.cond(A)
    v["cond_fro"] = L.cond(A, "fro")
    v["matrix_exp"] = L.matrix_exp(A * 0.3)
    v["multi_dot"] = L.multi_dot([T[0], A[0], B[0, :3]])
    v["cholesky_inverse"] = torch.cholesky_inverse(L.cholesky(S))
    out.append(dict(name="linalg_values", **v))
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
        for what in ("entropy", "mean", "variance", "mode", "cdf", "icdf"):
            try:
                if what == "cdf":
                    c[what] = d.cdf(x)
                elif what == "icdf":
                    if q is not None:
                        c[what] = d.icdf(q)
                elif ctor != "Kumaraswamy" or what != "mode":  # torch 1.13's Kumaraswamy mode is NaN
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


def composite_cases():
    """Distributions built from others, and the multivariate ones."""
    out = []
    t = torch.tensor
    loc, scale = torch.randn(3, 2), torch.rand(3, 2) + 0.5
    x = torch.randn(4, 3, 2)
    d = D.Independent(D.Normal(loc, scale), 1)
    out.append({"name": "comp_independent", "loc": loc, "scale": scale, "x": x, "log_prob": d.log_prob(x),
                "entropy": d.entropy(), "mode": d.mode})
    logits, mloc, mscale = torch.randn(3, 4), torch.randn(3, 4), torch.rand(3, 4) + 0.5
    xm = torch.randn(5, 3)
    d = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mloc, mscale))
    out.append({"name": "comp_mixture", "logits": logits, "loc": mloc, "scale": mscale, "x": xm,
                "log_prob": d.log_prob(xm), "mean": d.mean, "variance": d.variance, "cdf": d.cdf(xm)})
    # a mixture of diagonal 2-D Normals (Independent components)
    mloc2, mscale2 = torch.randn(4, 2), torch.rand(4, 2) + 0.5
    xm2 = torch.randn(5, 2)
    d = D.MixtureSameFamily(D.Categorical(logits=logits[0]), D.Independent(D.Normal(mloc2, mscale2), 1))
    out.append({"name": "comp_mixture_indep", "logits": logits[0], "loc": mloc2, "scale": mscale2, "x": xm2,
                "log_prob": d.log_prob(xm2), "mean": d.mean, "variance": d.variance})
    # exp(2 + 3 * Normal): affine then exp
    xt = torch.rand(3, 2) * 5 + 0.1
    d = D.TransformedDistribution(D.Normal(loc, scale), [D.AffineTransform(2.0, 3.0), D.ExpTransform()])
    out.append({"name": "comp_transformed", "loc": loc, "scale": scale, "x": xt, "log_prob": d.log_prob(xt),
                "cdf": d.cdf(xt)})
    # sigmoid and tanh of a Normal
    xs = torch.rand(3, 2) * 0.9 + 0.05
    d = D.TransformedDistribution(D.Normal(loc, scale), [D.SigmoidTransform()])
    out.append({"name": "comp_sigmoid", "loc": loc, "scale": scale, "x": xs, "log_prob": d.log_prob(xs)})
    d = D.TransformedDistribution(D.Normal(loc, scale), [D.TanhTransform()])
    out.append({"name": "comp_tanh", "loc": loc, "scale": scale, "x": xs * 2 - 1, "log_prob": d.log_prob(xs * 2 - 1)})
    # MultivariateNormal, batched, by each of its parameters
    A = torch.randn(2, 3, 3)
    cov = A @ A.mT + torch.eye(3)
    mloc = torch.randn(2, 3)
    xv = torch.randn(4, 2, 3)
    d = D.MultivariateNormal(mloc, covariance_matrix=cov)
    q = D.MultivariateNormal(mloc.flip(0), covariance_matrix=cov.flip(0))
    out.append({"name": "comp_mvn", "loc": mloc, "cov": cov, "x": xv, "log_prob": d.log_prob(xv),
                "entropy": d.entropy(), "variance": d.variance, "scale_tril": d.scale_tril,
                "precision": d.precision_matrix, "kl": D.kl_divergence(d, q)})
    # LowRankMultivariateNormal
    W, diag = torch.randn(2, 3, 2), torch.rand(2, 3) + 0.5
    d = D.LowRankMultivariateNormal(mloc, W, diag)
    out.append({"name": "comp_lowrank", "loc": mloc, "W": W, "diag": diag, "x": xv, "log_prob": d.log_prob(xv),
                "entropy": d.entropy(), "variance": d.variance, "covariance": d.covariance_matrix})
    # Categorical / OneHotCategorical (torch's 0-based values; ember's are 1-based)
    cl = torch.randn(2, 4)
    xc = t([[0, 3], [2, 1], [3, 3]])
    d = D.Categorical(logits=cl)
    out.append({"name": "comp_categorical", "logits": cl, "x": xc, "log_prob": d.log_prob(xc), "entropy": d.entropy(),
                "kl": D.kl_divergence(d, D.Categorical(logits=cl.flip(0))), "mode": d.mode,
                "onehot_mode": D.OneHotCategorical(logits=cl).mode})
    # mode: a Dirichlet with every concentration below 1 in one batch row, a Beta with both below 1
    dc = t([[0.5, 0.3, 0.9], [2.0, 0.5, 3.0]])
    out.append({"name": "comp_dirichlet_mode", "c": dc, "mode": D.Dirichlet(dc).mode,
                "beta_mode": D.Beta(t([0.5, 2.0, 0.7]), t([0.4, 3.0, 1.5])).mode})
    # RelaxedBernoulli / RelaxedOneHotCategorical log_prob
    xr = t([[0.2, 0.9], [0.5, 0.01]])
    d = D.RelaxedBernoulli(t(0.7), logits=t([0.3, -1.2]))
    out.append({"name": "comp_relaxed_bernoulli", "logits": t([0.3, -1.2]), "x": xr, "log_prob": d.log_prob(xr)})
    xo = t([[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]])
    d = D.RelaxedOneHotCategorical(t(0.7), logits=t([0.3, -1.2, 0.5]))
    out.append({"name": "comp_relaxed_onehot", "logits": t([0.3, -1.2, 0.5]), "x": xo, "log_prob": d.log_prob(xo)})
    return out


def special_cases():
    """torch.special at its edges: 0, negatives, tails, inf, nan."""
    out = []
    t = torch.tensor
    inf, nan = math.inf, math.nan
    x = t([0.0, 1e-300, 0.3, -0.3, 1.5, -1.5, 2.0, 2.5, -2.5, 5.0, -5.0, 10.0, -10.0, 27.0, -27.0,
           40.0, -40.0, 1e10, -1e10, inf, -inf, nan])
    S = torch.special
    for name in ["erfc", "erfcx", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr", "expit", "gammaln",
                 "digamma", "sinc"]:
        out.append({"name": "special_" + name, "x": x, "out": getattr(S, name)(x)})
    i = t([0.5, 3.0, 15.0, 29.0, 31.0, 60.0, 300.0, -31.0, -15.0])
    for name in ["i0", "i0e", "i1", "i1e"]:
        out.append({"name": "special_%s_range" % name, "x": i, "out": getattr(S, name)(i)})
    p = t([0.0, 1e-300, 1e-20, 1e-5, 0.02, 0.3, 0.5, 0.7, 0.975, 1 - 1e-10, 1.0, 1.5, -0.1, nan])
    out.append({"name": "special_ndtri", "x": p, "out": S.ndtri(p)})
    zx = t([1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 0.5, 2.0, 2.0, 2.0, 2.0, 60.0, nan])
    zq = t([1.0, 2.0, 1.0, 0.5, 3.0, 7.0, 1.0, -1.0, -1.5, 0.0, 1e-3, 2.0, 1.0])
    out.append({"name": "special_zeta", "x": zx, "q": zq, "out": S.zeta(zx, zq)})
    px = t([0.25, 1.0, 3.7, 20.0, -1.5, 0.0])
    for n in [0, 1, 2, 3, 5]:
        out.append({"name": "special_polygamma_%d" % n, "n": n, "x": px, "out": S.polygamma(n, px)})
    # torch's trigamma (polygamma 1) is good to about 1e-10: mpmath's values too
    import mpmath
    mpmath.mp.dps = 30
    out.append({"name": "special_trigamma_mpmath", "x": px[:5],
                "out": t([float(mpmath.polygamma(1, v)) for v in px[:5].tolist()])})
    out.append({"name": "special_multigammaln", "x": t([2.5, 3.0, 10.0]), "p": 3,
                "out": S.multigammaln(t([2.5, 3.0, 10.0]), 3)})
    xa, ya = t([0.0, 0.0, 0.0, 2.0, -1.0, 3.0]), t([-1.0, nan, 0.0, 1.0, -0.5, inf])
    out.append({"name": "special_xlog1py", "x": xa, "y": ya, "out": S.xlog1py(xa, ya)})
    out.append({"name": "special_xlogy", "x": xa, "y": ya + 1, "out": S.xlogy(xa, ya + 1)})
    lx = t([0.0, 1.0, 0.5, 1e-8, -1.0, 2.0])
    out.append({"name": "special_logit_eps", "x": lx, "eps": 1e-6, "out": S.logit(lx, eps=1e-6)})
    # gradients of sum(f(x) * R) (away from the branch points)
    g = t([-12.0, -3.0, -0.7, 0.4, 1.3, 2.6, 8.0])
    for name in ["erfc", "erfcx", "ndtr", "log_ndtr", "i0", "i0e", "i1", "i1e", "entr"]:
        xs = g.abs() + 0.1 if name == "entr" else g
        out.append(grad_case("special_grad_" + name, getattr(S, name), [xs]))
    out.append(grad_case("special_grad_ndtri", S.ndtri, [t([1e-12, 0.01, 0.3, 0.6, 0.999])]))
    out.append(grad_case("special_grad_zeta", lambda q: S.zeta(t(3.0), q), [t([0.3, 1.0, 4.5])]))
    out.append(grad_case("special_grad_polygamma", lambda x: S.polygamma(2, x), [t([0.3, 1.0, 4.5])]))
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "linalg_distributions_parity.lua")
    Writer(keys="auto").write(path, "tests/gen_linalg_distributions_parity_fixtures.py",
                              {"cases": linalg_cases() + dist_cases() + composite_cases() + special_cases()})
