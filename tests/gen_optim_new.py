"""Reference trajectories of the optimizers past torch 1.13's set: Muon,
Lion and Adafactor -- tests/fixtures/optim_new.lua, read by
tests/lua/optim_new_spec.lua.

    /usr/bin/python3 tests/gen_optim_new.py

PyTorch 1.13 has none of them, so each is written here, minimally, from
its definition (what lua/ember/optim/Muon.lua, Lion.lua, Adafactor.lua say
they follow):
  * Muon: torch.optim.Muon (PyTorch 2.9, a port of Keller Jordan's
    muon.py): SGD momentum (buf.lerp_(g, 1 - momentum), nesterov
    g.lerp(buf, momentum)), then the quintic Newton-Schulz iteration
    (a, b, c) = (3.4445, -4.7750, 2.0315), 5 steps, on X / max(||X||_F,
    eps) (the transpose of a tall matrix), decoupled weight decay
    p *= 1 - lr * wd, p -= lr * ratio * O with ratio sqrt(max(1, A/B))
    ("original", Keller Jordan's) or 0.2 * sqrt(max(A, B))
    ("match_rms_adamw", Moonshot's). The iteration runs in the dtype of the
    case: float64 (compared to 1e-12), or bfloat16 as both references run
    it (compared with a tolerance: ember's and torch's bfloat16 matrix
    products round differently).
  * Lion (Chen et al. 2023, Algorithm 2; lucidrains/lion-pytorch):
    c = b1 * m + (1 - b1) * g; p *= 1 - lr * wd; p -= lr * sign(c);
    m = b2 * m + (1 - b2) * g.
  * Adafactor: torch.optim.Adafactor (PyTorch 2.5's _single_tensor_adafactor),
    factored second moments over the last two dimensions of a >= 2-d
    parameter, rho_t = min(lr, 1/sqrt(t)), alpha = max(eps2, RMS(p)) * rho_t,
    1 - beta2_t = t^beta2_decay, update clipping by d, eps1 None = the
    dtype's machine epsilon.

The parameters (float64): w1 [4, 6] (wide), w2 [5, 3] (tall), v [4], t
[2, 3, 4]. The gradient at step t is g = A * p + B * cos(0.9 * t) (as
tests/gen_optim_sweep.py); the second parameter of each case has no
gradient at every step t % 4 == 0 and is skipped then. The parameters
after each of STEPS steps are recorded, and the names of the state of the
first parameter.
"""
import math

import torch

from fixture_writer import Writer

STEPS = 20
torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)

SHAPES = {"w1": (4, 6), "w2": (5, 3), "v": (4,), "t": (2, 3, 4)}
P = {k: torch.randn(*s) for k, s in SHAPES.items()}
A = {k: torch.rand(*s) + 0.5 for k, s in SHAPES.items()}
B = {k: torch.randn(*s) for k, s in SHAPES.items()}


def grad_at(t, name, p):
    return A[name] * p.detach() + B[name] * math.cos(0.9 * t)


# ------------------------------------------------------------------ Muon

NS_COEFFS = (3.4445, -4.7750, 2.0315)


def newton_schulz(G, coeffs, steps, eps, dtype):
    a, b, c = coeffs
    X = G.to(dtype)
    tall = G.size(0) > G.size(1)
    if tall:
        X = X.T
    X = X / X.norm().clamp(min=eps)
    for _ in range(steps):
        gram = X @ X.T
        upd = b * gram + c * gram @ gram
        X = a * X + upd @ X
    if tall:
        X = X.T
    return X


def muon_step(p, g, state, o):
    if "momentum_buffer" not in state:
        state["momentum_buffer"] = torch.zeros_like(g)
    buf = state["momentum_buffer"]
    buf.lerp_(g, 1 - o["momentum"])
    upd = g.lerp(buf, o["momentum"]) if o["nesterov"] else buf
    O = newton_schulz(upd, o["ns_coefficients"], o["ns_steps"], o["eps"], o["dtype"])
    rows, cols = p.shape
    if o["adjust_lr_fn"] == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = math.sqrt(max(1, rows / cols))
    p.mul_(1 - o["lr"] * o["weight_decay"])
    p.add_(O, alpha=-o["lr"] * ratio)


MUON_DEFAULTS = {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.95, "nesterov": True,
                 "ns_coefficients": NS_COEFFS, "eps": 1e-7, "ns_steps": 5, "adjust_lr_fn": None,
                 "ns_dtype": "bfloat16"}

# ------------------------------------------------------------------ Lion


def lion_step(p, g, state, o):
    if o["maximize"]:
        g = -g
    if "exp_avg" not in state:
        state["exp_avg"] = torch.zeros_like(p)
    m = state["exp_avg"]
    b1, b2 = o["betas"]
    c = m * b1 + g * (1 - b1)
    p.mul_(1 - o["lr"] * o["weight_decay"])
    p.add_(c.sign(), alpha=-o["lr"])
    m.mul_(b2).add_(g, alpha=1 - b2)


LION_DEFAULTS = {"lr": 1e-4, "betas": (0.9, 0.99), "weight_decay": 0.0, "maximize": False}

# ------------------------------------------------------------------ Adafactor


def adafactor_step(p, g, state, o):
    if o["maximize"]:
        g = -g
    if "step" not in state:
        state["step"] = 0
        if g.dim() > 1:
            rs, cs = list(g.shape), list(g.shape)
            rs[-1], cs[-2] = 1, 1
            state["row_var"], state["col_var"] = g.new_zeros(rs), g.new_zeros(cs)
        else:
            state["variance"] = torch.zeros_like(g)
    eps1, eps2 = o["eps"]
    if eps1 is None:
        eps1 = torch.finfo(p.dtype).eps
    state["step"] += 1
    t = float(state["step"])
    one_minus_beta2_t = t ** o["beta2_decay"]
    rho_t = min(o["lr"], 1 / (t ** 0.5))
    alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho_t
    if o["weight_decay"] != 0:
        p.mul_(1 - o["lr"] * o["weight_decay"])
    if g.dim() > 1:
        row_mean = torch.linalg.vector_norm(g, dim=-1, keepdim=True).square_().div_(g.size(-1))
        state["row_var"].lerp_(row_mean, one_minus_beta2_t)
        col_mean = torch.linalg.vector_norm(g, dim=-2, keepdim=True).square_().div_(g.size(-2))
        state["col_var"].lerp_(col_mean, one_minus_beta2_t)
        var_est = state["row_var"] @ state["col_var"]
        var_est.div_(state["row_var"].mean(dim=-2, keepdim=True).clamp_(min=eps1))
    else:
        state["variance"].lerp_(g * g, one_minus_beta2_t)
        var_est = state["variance"].clone()
    update = var_est.clamp_(min=eps1 * eps1).rsqrt_()
    update.mul_(g)
    denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * o["d"]))
    p.add_(update, alpha=-alpha / denom)


ADAFACTOR_DEFAULTS = {"lr": 1e-2, "beta2_decay": -0.8, "eps": (None, 1e-3), "d": 1.0, "weight_decay": 0.0,
                      "maximize": False}

STEPPERS = {"Muon": (muon_step, MUON_DEFAULTS), "Lion": (lion_step, LION_DEFAULTS),
            "Adafactor": (adafactor_step, ADAFACTOR_DEFAULTS)}
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}

# (optimizer, params, options of every group, options of a second group (the
# last parameter) or None)
SPECS = [
    ("Muon", ["w1", "w2"], {"ns_dtype": "float64"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.02, "weight_decay": 0, "ns_dtype": "float64"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.05, "weight_decay": 0.2, "momentum": 0.9, "nesterov": False,
                            "ns_dtype": "float64"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.01, "adjust_lr_fn": "match_rms_adamw", "ns_dtype": "float64"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.02, "ns_steps": 3, "ns_coefficients": [2.0, -1.5, 0.5], "eps": 1e-3,
                            "ns_dtype": "float64"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.02, "ns_dtype": "float64"}, {"lr": 0.05, "momentum": 0.8}),
    ("Muon", ["w1", "w2"], {"lr": 0.02, "ns_dtype": "float32"}, None),
    ("Muon", ["w1", "w2"], {"lr": 0.02}, None),
    ("Lion", ["w1", "v"], {}, None),
    ("Lion", ["w1", "v"], {"lr": 0.01, "betas": [0.8, 0.95], "weight_decay": 0.5}, None),
    ("Lion", ["w1", "v"], {"lr": 0.01, "weight_decay": 0.1, "maximize": True}, None),
    ("Lion", ["w1", "v"], {"lr": 0.01}, {"lr": 0.003, "betas": [0.95, 0.98]}),
    ("Adafactor", ["w2", "v"], {}, None),
    ("Adafactor", ["w1", "t", "v"], {"lr": 0.05, "weight_decay": 0.1}, None),
    ("Adafactor", ["w2", "v"], {"beta2_decay": -0.5, "eps": [1e-30, 1e-3], "d": 1.5}, None),
    ("Adafactor", ["w1", "v"], {"lr": 0.02, "eps": [None, 0.5], "maximize": True}, None),
    ("Adafactor", ["w2", "v"], {"lr": 0.02}, {"lr": 0.1, "d": 2.0, "weight_decay": 0.05}),
]


def fill(defaults, kw):
    o = dict(defaults)
    o.update(kw)
    if "ns_dtype" in o:
        o["dtype"] = DTYPES[o["ns_dtype"]]
    return o


def run_case(name, names, kw, group2):
    step_fn, defaults = STEPPERS[name]
    ps = [P[n].clone() for n in names]
    opts = [fill(defaults, kw) for _ in names]
    if group2 is not None:
        opts[-1] = fill(defaults, {**kw, **group2})
    states = [{} for _ in names]
    traj = []
    for t in range(1, STEPS + 1):
        for i, (n, p) in enumerate(zip(names, ps)):
            if i == len(names) - 1 and t % 4 == 0:
                continue
            step_fn(p, grad_at(t, n, p), states[i], opts[i])
        traj.append([p.clone() for p in ps])
    case = {"optimizer": name, "params": names, "options": kw, "trajectory": traj,
            "state": sorted(states[0])}
    if group2 is not None:
        case["group2"] = group2
    return case


def main():
    data = {"P": P, "A": A, "B": B, "steps": STEPS,
            "cases": [run_case(*s) for s in SPECS]}
    Writer().write("tests/fixtures/optim_new.lua", "tests/gen_optim_new.py", data)


if __name__ == "__main__":
    main()
