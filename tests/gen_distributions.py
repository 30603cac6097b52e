"""Writes tests/fixtures/distributions.lua: torch.distributions' (PyTorch
1.13) values in float64 for tests/lua/distributions_spec.lua -- log_prob,
entropy, cdf and icdf on fixed parameters and values with the gradients of
sum(out * R) with respect to each parameter (torch autograd), mean,
variance and stddev, and kl_divergence of the registered same-class pairs
with its gradients with respect to both distributions' parameters.

Categories are written 1-based (ember's convention); the spec passes them
as they are. Run with /usr/bin/python3 from the source root.
"""
import torch
import torch.distributions as D

from fixture_writer import Writer

torch.set_default_dtype(torch.float64)
g = torch.Generator().manual_seed(20261207)


def rn(*shape):
    return torch.randn(tuple(shape), generator=g)


def ru(*shape, lo=0.0, hi=1.0):
    return lo + (hi - lo) * torch.rand(tuple(shape), generator=g)


def lower_chol(*batch, n=3):
    a = rn(*batch, n, n) * 0.5
    L = torch.tril(a, -1) + torch.diag_embed(ru(*batch, n, lo=0.5, hi=1.5))
    return L


# name, class, params (name -> tensor), differentiable params, value,
# probabilities for icdf (None: no icdf), what to record
CASES = [
    ("normal", "Normal", {"loc": rn(2, 3), "scale": ru(2, 3, lo=0.5, hi=2.0)}, rn(2, 3), ru(2, 3, lo=0.05, hi=0.95)),
    ("normal_bcast", "Normal", {"loc": rn(3), "scale": ru(2, 1, lo=0.5, hi=2.0)}, rn(4, 2, 3), ru(2, 3, lo=0.05, hi=0.95)),
    ("uniform", "Uniform", {"low": torch.tensor([-1., 0., 0.5, -2.]), "high": torch.tensor([1., 2., 3., 0.5])},
     torch.tensor([0., 1.5, 0.7, -1.]), ru(4, lo=0.05, hi=0.95)),
    ("bernoulli_probs", "Bernoulli", {"probs": ru(5, lo=0.1, hi=0.9)}, torch.tensor([0., 1., 1., 0., 1.]), None),
    ("bernoulli_logits", "Bernoulli", {"logits": rn(2, 3) * 2}, torch.tensor([[0., 1., 1.], [1., 0., 0.]]), None),
    ("categorical_probs", "Categorical", {"probs": ru(4, lo=0.1, hi=1.0)}, torch.tensor([0, 3, 2]), None),
    ("categorical_logits", "Categorical", {"logits": rn(2, 3, 4)}, torch.tensor([[0, 3, 2], [1, 1, 0]]), None),
    ("onehot", "OneHotCategorical", {"logits": rn(2, 3)}, torch.tensor([[0., 1., 0.], [1., 0., 0.]]), None),
    ("binomial", "Binomial", {"total_count": torch.tensor([5., 5., 5.]), "probs": ru(3, lo=0.1, hi=0.9)}, torch.tensor([0., 2., 5.]), None),
    ("binomial_logits", "Binomial", {"total_count": torch.tensor(7.), "logits": rn(2, 2)}, torch.tensor([[1., 7.], [3., 0.]]), None),
    ("exponential", "Exponential", {"rate": ru(4, lo=0.5, hi=2.0)}, ru(4, lo=0.1, hi=3.0), ru(4, lo=0.05, hi=0.95)),
    ("laplace", "Laplace", {"loc": rn(4), "scale": ru(4, lo=0.5, hi=2.0)}, rn(4) * 2, ru(4, lo=0.05, hi=0.95)),
    ("lognormal", "LogNormal", {"loc": rn(4) * 0.5, "scale": ru(4, lo=0.5, hi=1.5)}, ru(4, lo=0.2, hi=3.0), ru(4, lo=0.05, hi=0.95)),
    ("gumbel", "Gumbel", {"loc": rn(4), "scale": ru(4, lo=0.5, hi=2.0)}, rn(4) * 2, ru(4, lo=0.05, hi=0.95)),
    ("cauchy", "Cauchy", {"loc": rn(4), "scale": ru(4, lo=0.5, hi=2.0)}, rn(4) * 2, ru(4, lo=0.05, hi=0.95)),
    ("poisson", "Poisson", {"rate": ru(5, lo=0.5, hi=6.0)}, torch.tensor([0., 1., 3., 7., 2.]), None),
    ("gamma", "Gamma", {"concentration": ru(5, lo=0.3, hi=4.0), "rate": ru(5, lo=0.5, hi=2.0)}, ru(5, lo=0.1, hi=3.0), None),
    ("beta", "Beta", {"concentration1": ru(5, lo=0.3, hi=4.0), "concentration0": ru(5, lo=0.3, hi=4.0)}, ru(5, lo=0.05, hi=0.95), None),
    ("mvn", "MultivariateNormal", {"loc": rn(2, 3), "scale_tril": lower_chol(2)}, rn(4, 2, 3), None),
]

KL = [
    ("Normal", {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}, {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}),
    ("LogNormal", {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}, {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}),
    ("Uniform", {"low": torch.tensor([0., 0., -1.]), "high": torch.tensor([1., 2., 1.])},
     {"low": torch.tensor([-1., 0.5, -2.]), "high": torch.tensor([2., 3., 3.])}),
    ("Bernoulli", {"probs": ru(4, lo=0.1, hi=0.9)}, {"logits": rn(4)}),
    ("Categorical", {"logits": rn(2, 4)}, {"probs": ru(2, 4, lo=0.1, hi=1.0)}),
    ("OneHotCategorical", {"logits": rn(3)}, {"logits": rn(2, 3)}),
    ("Binomial", {"total_count": torch.tensor(6.), "probs": ru(3, lo=0.1, hi=0.9)}, {"total_count": torch.tensor(6.), "probs": ru(3, lo=0.1, hi=0.9)}),
    ("Exponential", {"rate": ru(3, lo=0.5, hi=2)}, {"rate": ru(3, lo=0.5, hi=2)}),
    ("Laplace", {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}, {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}),
    ("Gumbel", {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}, {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}),
    ("Cauchy", {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}, {"loc": rn(3), "scale": ru(3, lo=0.5, hi=2)}),
    ("Poisson", {"rate": ru(3, lo=0.5, hi=5)}, {"rate": ru(3, lo=0.5, hi=5)}),
    ("Gamma", {"concentration": ru(3, lo=0.5, hi=4), "rate": ru(3, lo=0.5, hi=2)}, {"concentration": ru(3, lo=0.5, hi=4), "rate": ru(3, lo=0.5, hi=2)}),
    ("Beta", {"concentration1": ru(3, lo=0.5, hi=4), "concentration0": ru(3, lo=0.5, hi=4)}, {"concentration1": ru(3, lo=0.5, hi=4), "concentration0": ru(3, lo=0.5, hi=4)}),
    ("MultivariateNormal", {"loc": rn(2, 3), "scale_tril": lower_chol(2)}, {"loc": rn(3), "scale_tril": lower_chol()}),
]



def spd(*batch, n=3):
    a = rn(*batch, n, n)
    return a @ a.transpose(-1, -2) + 0.5 * torch.eye(n)


# after KL's draws, so that the cases above keep their numbers
CASES += [
    ("mvn_cov", "MultivariateNormal", {"loc": rn(3), "covariance_matrix": spd(2)}, rn(4, 2, 3), None),
    ("mvn_prec", "MultivariateNormal", {"loc": rn(2, 3), "precision_matrix": spd()}, rn(2, 3), None),
]
KL += [
    ("MultivariateNormal", {"loc": rn(3), "covariance_matrix": spd(2)}, {"loc": rn(2, 3), "precision_matrix": spd()}),
]



def pos(n=3, lo=0.5, hi=2.0):
    return ru(n, lo=lo, hi=hi)


# torch's pairs of different classes (p class, p params, q params, q class)
PARAMS = {
    "Normal": lambda: {"loc": rn(3), "scale": pos()},
    "Laplace": lambda: {"loc": rn(3), "scale": pos()},
    "Gumbel": lambda: {"loc": rn(3), "scale": pos()},
    "Exponential": lambda: {"rate": pos()},
    "Gamma": lambda: {"concentration": pos(lo=0.5, hi=4), "rate": pos()},
    "Beta": lambda: {"concentration1": pos(lo=0.5, hi=4), "concentration0": pos(lo=0.5, hi=4)},
    "Poisson": lambda: {"rate": pos(lo=0.5, hi=5)},
    "Bernoulli": lambda: {"probs": pos(lo=0.1, hi=0.9)},
    "Binomial": lambda: {"total_count": torch.tensor(4.), "probs": pos(lo=0.1, hi=0.9)},
    "Pareto": lambda: {"scale": pos(), "alpha": pos(lo=2.5, hi=5.0)},
    "Pareto_low_alpha": lambda: {"scale": pos(), "alpha": torch.tensor([0.8, 1.5, 3.0])},
    "Uniform_above": lambda: {"low": pos(lo=2.0, hi=3.0), "high": pos(lo=3.5, hi=5.0)},
    "Uniform_wide": lambda: {"low": -pos(), "high": pos()},
    "Uniform_pos": lambda: {"low": pos(lo=0.1, hi=0.5), "high": pos(lo=1.0, hi=3.0)},
    "Uniform_unit": lambda: {"low": pos(lo=0.05, hi=0.3), "high": pos(lo=0.6, hi=0.95)},
    "Uniform_cover": lambda: {"low": -pos(), "high": pos(lo=1.5, hi=3)},
}
CROSS = [
    ("Bernoulli", "Poisson"), ("Beta", "Exponential"), ("Beta", "Gamma"), ("Beta", "Normal"), ("Beta", "Uniform_cover"),
    ("Beta", "Uniform_unit"), ("Exponential", "Gamma"), ("Exponential", "Gumbel"), ("Exponential", "Normal"),
    ("Gamma", "Exponential"), ("Gamma", "Gumbel"), ("Gamma", "Normal"), ("Gumbel", "Normal"), ("Laplace", "Normal"),
    ("Normal", "Gumbel"), ("Normal", "Laplace"), ("Uniform_unit", "Beta"), ("Uniform_wide", "Beta"),
    ("Uniform_pos", "Exponential"), ("Uniform_wide", "Exponential"), ("Uniform_pos", "Gamma"), ("Uniform_wide", "Gamma"),
    ("Uniform_wide", "Gumbel"), ("Uniform_wide", "Normal"),
    ("Normal", "Uniform_wide"), ("Normal", "Exponential"), ("Laplace", "Beta"), ("Gumbel", "Gamma"), ("Exponential", "Uniform_wide"),
    ("Gamma", "Beta"), ("Poisson", "Binomial"), ("Poisson", "Bernoulli"),
    ("Pareto", "Exponential"), ("Pareto_low_alpha", "Exponential"), ("Pareto", "Gamma"), ("Pareto_low_alpha", "Gamma"),
    ("Pareto", "Normal"), ("Pareto_low_alpha", "Normal"), ("Uniform_above", "Pareto"), ("Uniform_wide", "Pareto"),
    ("Normal", "Pareto"), ("Pareto", "Uniform_wide"), ("Pareto", "Pareto"), ("Pareto_low_alpha", "Pareto"),
]
CASES += [
    ("dirichlet", "Dirichlet", {"concentration": ru(2, 4, lo=0.4, hi=3.0)}, torch.softmax(rn(3, 2, 4), -1), None),
]
KL += [
    ("Dirichlet", {"concentration": ru(2, 3, lo=0.4, hi=3.0)}, {"concentration": ru(3, lo=0.4, hi=3.0)}),
]
CASES += [
    ("studentt", "StudentT", {"df": torch.tensor([0.7, 1.5, 3.0, 8.0]), "loc": rn(4), "scale": ru(4, lo=0.5, hi=2.0)}, rn(4) * 2, None),
    ("halfnormal", "HalfNormal", {"scale": ru(4, lo=0.5, hi=2.0)}, ru(4, lo=0.1, hi=3.0), ru(4, lo=0.05, hi=0.95)),
    ("geometric", "Geometric", {"probs": ru(4, lo=0.1, hi=0.9)}, torch.tensor([0., 1., 3., 6.]), None),
    ("geometric_logits", "Geometric", {"logits": rn(2, 2)}, torch.tensor([[0., 2.], [5., 1.]]), None),
]
CASES += [
    ("relaxed_bernoulli", "RelaxedBernoulli", {"temperature": ru(4, lo=0.3, hi=2.0), "logits": rn(4)}, ru(4, lo=0.05, hi=0.95), None),
    ("relaxed_bernoulli_probs", "RelaxedBernoulli", {"temperature": torch.tensor(0.7), "probs": ru(2, 2, lo=0.1, hi=0.9)}, ru(3, 2, 2, lo=0.05, hi=0.95), None),
    ("relaxed_onehot", "RelaxedOneHotCategorical", {"temperature": torch.tensor(0.6), "logits": rn(2, 4)}, torch.softmax(rn(3, 2, 4), -1), None),
    ("relaxed_onehot_probs", "RelaxedOneHotCategorical", {"temperature": torch.tensor(1.7), "probs": ru(3, lo=0.1, hi=1.0)}, torch.softmax(rn(2, 3), -1), None),
]
CASES += [
    ("chi2", "Chi2", {"df": ru(4, lo=0.5, hi=6.0)}, ru(4, lo=0.2, hi=5.0), None),
    ("halfcauchy", "HalfCauchy", {"scale": ru(4, lo=0.5, hi=2.0)}, ru(4, lo=0.1, hi=3.0), ru(4, lo=0.05, hi=0.95)),
    ("multinomial", "Multinomial", {"total_count": 5, "probs": ru(4, lo=0.1, hi=1.0)}, torch.tensor([[1., 0., 3., 1.], [0., 0., 0., 5.]]), None),
    ("multinomial_logits", "Multinomial", {"total_count": 3, "logits": rn(2, 3)}, torch.tensor([[1., 1., 1.], [3., 0., 0.]]), None),
]
KL += [
    ("Chi2", {"df": ru(3, lo=0.5, hi=6.0)}, {"df": ru(3, lo=0.5, hi=6.0)}),
]
CASES += [
    ("negative_binomial", "NegativeBinomial", {"total_count": ru(4, lo=0.5, hi=5.0), "probs": ru(4, lo=0.1, hi=0.9)}, torch.tensor([0., 2., 5., 1.]), None),
    ("negative_binomial_logits", "NegativeBinomial", {"total_count": torch.tensor(3.0), "logits": rn(2, 2)}, torch.tensor([[0., 1.], [4., 2.]]), None),
    ("pareto", "Pareto", {"scale": ru(4, lo=0.5, hi=2.0), "alpha": torch.tensor([0.7, 1.5, 2.5, 4.0])}, ru(4, lo=2.1, hi=5.0), ru(4, lo=0.05, hi=0.95)),
    ("weibull", "Weibull", {"scale": ru(4, lo=0.5, hi=2.0), "concentration": ru(4, lo=0.5, hi=3.0)}, ru(4, lo=0.1, hi=3.0), ru(4, lo=0.05, hi=0.95)),
]
CASES += [
    ("continuous_bernoulli", "ContinuousBernoulli", {"probs": torch.tensor([0.1, 0.3, 0.5003, 0.8, 0.97])}, ru(5, lo=0.05, hi=0.95), ru(5, lo=0.05, hi=0.95)),
    ("continuous_bernoulli_logits", "ContinuousBernoulli", {"logits": rn(2, 2) * 2}, ru(2, 2, lo=0.05, hi=0.95), ru(2, 2, lo=0.05, hi=0.95)),
]
CASES += [
    ("lowrank_mvn", "LowRankMultivariateNormal", {"loc": rn(2, 3), "cov_factor": rn(3, 2), "cov_diag": ru(3, lo=0.5, hi=1.5)}, rn(4, 2, 3), None),
]
CASES += [
    ("von_mises", "VonMises", {"loc": rn(5), "concentration": torch.tensor([0.3, 1.0, 3.0, 3.75, 8.0])}, rn(5) * 3, None),
]
CASES += [
    ("fisher_snedecor", "FisherSnedecor", {"df1": ru(4, lo=0.5, hi=6.0), "df2": torch.tensor([1.5, 3.0, 4.5, 9.0])}, ru(4, lo=0.2, hi=3.0), None),
    ("kumaraswamy", "Kumaraswamy", {"concentration1": ru(4, lo=0.5, hi=4.0), "concentration0": ru(4, lo=0.5, hi=4.0)}, ru(4, lo=0.05, hi=0.95), ru(4, lo=0.05, hi=0.95)),
]
KL_CROSS = [(p.split("_")[0], PARAMS[p](), PARAMS[q](), q.split("_")[0]) for p, q in CROSS]
KL_CROSS += [
    ("Geometric", {"probs": pos(lo=0.1, hi=0.9)}, {"logits": rn(3)}, "Geometric"),
    ("HalfNormal", {"scale": pos()}, {"scale": pos()}, "HalfNormal"),
]

NOGRAD = {"total_count"}


def leaves(params):
    out = {}
    for k, v in params.items():
        if not torch.is_tensor(v):  # Multinomial's integer total_count
            out[k] = v
            continue
        v = v.clone()
        if k not in NOGRAD and k[2:] not in NOGRAD:
            v.requires_grad_(True)
        out[k] = v
    return out


def make(cls, params):
    return getattr(D, cls)(**params)


def with_grads(fn, params):
    """fn(params) -> tensor; its value, R and the gradients of sum(out * R)."""
    ps = leaves(params)
    out = fn(ps)
    R = rn(*out.shape)
    if not out.requires_grad:  # a constant (an infinite KL): no gradients
        return {"value": out.detach(), "R": R, "grads": {}}
    gs = torch.autograd.grad((out * R).sum(), [ps[k] for k in ps if torch.is_tensor(ps[k]) and ps[k].requires_grad], allow_unused=True)
    grads, i = {}, 0
    for k in ps:
        if torch.is_tensor(ps[k]) and ps[k].requires_grad:
            grads[k] = gs[i] if gs[i] is not None else torch.zeros_like(ps[k])
            i += 1
    return {"value": out.detach(), "R": R, "grads": grads}


def case(name, cls, params, value, probs):
    c = {"name": name, "dist": cls, "params": params}
    d = make(cls, params)
    c["batch_shape"] = list(d.batch_shape)
    c["event_shape"] = list(d.event_shape)
    lua_value = value + 1 if cls == "Categorical" else value
    c["value"] = lua_value
    c["log_prob"] = with_grads(lambda ps: make(cls, ps).log_prob(value), params)
    if cls not in ("Poisson", "RelaxedBernoulli", "RelaxedOneHotCategorical", "NegativeBinomial", "VonMises", "FisherSnedecor"):
        c["entropy"] = with_grads(lambda ps: make(cls, ps).entropy(), params)
    if cls not in ("Categorical", "RelaxedBernoulli", "RelaxedOneHotCategorical"):
        c["mean"], c["variance"], c["stddev"] = d.mean, d.variance, d.stddev
    if probs is not None:
        c["cdf"] = with_grads(lambda ps: make(cls, ps).cdf(value), params)
        c["icdf_value"] = probs
        c["icdf"] = with_grads(lambda ps: make(cls, ps).icdf(probs), params)
    return c


def kl_case(cls, pp, qp, qcls=None):
    qcls = qcls or cls
    both = {**{"p_" + k: v for k, v in pp.items()}, **{"q_" + k: v for k, v in qp.items()}}

    def fn(ps):
        p = make(cls, {k[2:]: v for k, v in ps.items() if k.startswith("p_")})
        q = make(qcls, {k[2:]: v for k, v in ps.items() if k.startswith("q_")})
        return D.kl_divergence(p, q)
    c = {"name": "kl_" + cls + "_" + qcls, "dist": cls, "q_dist": qcls, "p": pp, "q": qp}
    c["kl"] = with_grads(fn, both)
    return c


def main():
    cases = [case(*c) for c in CASES]
    # Independent(Normal, 1)
    loc, scale, value = rn(2, 3), ru(2, 3, lo=0.5, hi=2), rn(2, 3)
    ind = {"name": "independent_normal", "params": {"loc": loc, "scale": scale}, "value": value}
    ind["log_prob"] = with_grads(lambda ps: D.Independent(D.Normal(ps["loc"], ps["scale"]), 1).log_prob(value), {"loc": loc, "scale": scale})
    ind["entropy"] = with_grads(lambda ps: D.Independent(D.Normal(ps["loc"], ps["scale"]), 1).entropy(), {"loc": loc, "scale": scale})
    q = {"loc": rn(2, 3), "scale": ru(2, 3, lo=0.5, hi=2)}
    ind["q"] = q
    ind["kl"] = D.kl_divergence(D.Independent(D.Normal(loc, scale), 1), D.Independent(D.Normal(q["loc"], q["scale"]), 1))
    kls = [kl_case(*k) for k in KL] + [kl_case(*k) for k in KL_CROSS]
    # infinities: Uniform whose support is not inside q's, Categorical with q probability 0
    inf = {
        "uniform": D.kl_divergence(D.Uniform(torch.tensor([0., 0.]), torch.tensor([1., 3.])), D.Uniform(torch.tensor([0.5, -1.]), torch.tensor([2., 4.]))),
        "categorical": D.kl_divergence(D.Categorical(torch.tensor([0.5, 0.5, 0.])), D.Categorical(torch.tensor([[0.5, 0., 0.5], [0.2, 0.3, 0.5]]))),
        "bernoulli": D.kl_divergence(D.Bernoulli(torch.tensor([0., 1., 0.5])), D.Bernoulli(torch.tensor([0.5, 0.5, 0.]))),
    }
    # TransformedDistribution of a Normal: (transforms, value, probabilities for cdf/icdf or None)
    import torch.distributions.transforms as TT

    def tr(specs):
        out = []
        for sp in specs:
            kw = {k: v for k, v in sp.items() if k != "name"}
            out.append(getattr(TT, sp["name"])(**kw))
        return out
    loc, scale = rn(3) * 0.5, ru(3, lo=0.5, hi=1.5)
    TCASES = [
        ("tanh", [{"name": "TanhTransform"}], ru(3, lo=-0.9, hi=0.9), ru(3, lo=0.05, hi=0.95)),
        ("exp_affine", [{"name": "ExpTransform"}, {"name": "AffineTransform", "loc": 1.0, "scale": -2.0}], -ru(3, lo=0.5, hi=5.0) + 1.0, ru(3, lo=0.05, hi=0.95)),
        ("sigmoid", [{"name": "SigmoidTransform"}], ru(3, lo=0.05, hi=0.95), ru(3, lo=0.05, hi=0.95)),
        ("affine_power", [{"name": "AffineTransform", "loc": 3.0, "scale": ru(3, lo=0.5, hi=2.0)}, {"name": "PowerTransform", "exponent": 0.5}], ru(3, lo=1.0, hi=2.5), None),
    ]
    tcases = []
    for name, specs, value, probs in TCASES:
        base = {"loc": loc, "scale": scale}
        mk = lambda ps: D.TransformedDistribution(D.Normal(ps["loc"], ps["scale"]), tr(specs))
        c = {"name": name, "params": base, "transforms": specs, "value": value,
             "log_prob": with_grads(lambda ps: mk(ps).log_prob(value), base)}
        if probs is not None:
            c["cdf"] = with_grads(lambda ps: mk(ps).cdf(value), base)
            c["icdf_value"] = probs
            c["icdf"] = with_grads(lambda ps: mk(ps).icdf(probs), base)
        tcases.append(c)
    # MixtureSameFamily: a batch of 1-d Gaussian mixtures, and a mixture of Independent(Normal, 1) in 2-d
    mparams = {"logits": rn(2, 3), "loc": rn(2, 3) * 2, "scale": ru(2, 3, lo=0.5, hi=1.5)}
    mk1 = lambda ps: D.MixtureSameFamily(D.Categorical(logits=ps["logits"]), D.Normal(ps["loc"], ps["scale"]))
    v1 = rn(4, 2) * 2
    m1 = {"name": "gmm", "params": mparams, "value": v1,
          "log_prob": with_grads(lambda ps: mk1(ps).log_prob(v1), mparams),
          "cdf": with_grads(lambda ps: mk1(ps).cdf(v1), mparams),
          "mean": with_grads(lambda ps: mk1(ps).mean, mparams),
          "variance": with_grads(lambda ps: mk1(ps).variance, mparams)}
    mparams2 = {"probs": ru(3, lo=0.2, hi=1.0), "loc": rn(3, 2), "scale": ru(3, 2, lo=0.5, hi=1.5)}
    mk2 = lambda ps: D.MixtureSameFamily(D.Categorical(probs=ps["probs"]), D.Independent(D.Normal(ps["loc"], ps["scale"]), 1))
    v2 = rn(5, 2)
    m2 = {"name": "gmm_2d", "params": mparams2, "value": v2,
          "log_prob": with_grads(lambda ps: mk2(ps).log_prob(v2), mparams2),
          "mean": with_grads(lambda ps: mk2(ps).mean, mparams2),
          "variance": with_grads(lambda ps: mk2(ps).variance, mparams2)}
    Writer().write("tests/fixtures/distributions.lua", "tests/gen_distributions.py",
                   {"cases": cases, "independent": ind, "kl": kls, "kl_inf": inf, "transformed": tcases, "mixture": [m1, m2]})


if __name__ == "__main__":
    main()
