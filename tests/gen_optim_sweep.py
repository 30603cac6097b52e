"""A differential sweep of ember.optim against PyTorch 1.13's torch.optim:
tests/fixtures/optim_sweep.lua, read by tests/lua/optim_sweep_spec.lua.

    /usr/bin/python3 tests/gen_optim_sweep.py

optimizers: every optimizer ember has, over the option combinations
torch 1.13 takes, in float64 on two raw parameters p1 (2x3) and p2 (4)
(one group, or two groups with their own options). The gradient at step t
is deterministic and depends on p (so weight decay and the trajectory
interact): g = A * p + B * cos(0.9 * t) (math.cos on both sides, then two
float64 tensor ops, exact on both sides); p2 has no gradient (None) at
every step t % 4 == 0, and is skipped then (with zero_grad(set_to_none=
False), 1.13's default, it keeps a zero gradient and steps). The parameters after each of
STEPS steps are recorded, and the names of torch's per-parameter state.

lbfgs: LBFGS.step(closure) called a few times on a quadratic-plus-quartic
loss of p1 and p2, with and without the strong Wolfe line search: the
parameters, the loss returned and the iteration and evaluation counts.

schedulers: every torch.optim.lr_scheduler class, an SGD (momentum 0.9) or
Adam over two groups (lr 0.1 and 0.05); the lrs (get_last_lr) and the
momentum (or beta1) at construction and after each step; ReduceLROnPlateau
takes the metrics listed in the case. "override_at": k halves every
group's lr by hand after step k; "epochs": step(epoch) to each of them
first (then 5 plain steps).

resume: a schedule made again with last_epoch on an optimizer that loaded
the state_dict of one that ran 20 steps (torch's way to resume).

errors: options torch refuses, with the words of torch's message (the
spec checks ember refuses them too, naming the option).
"""
import math

import torch

from fixture_writer import Writer

STEPS = 20
SCHED_STEPS = 50
torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)

P1, P2 = torch.randn(2, 3), torch.randn(4)
A1, A2 = torch.rand(2, 3) + 0.5, torch.rand(4) + 0.5
B1, B2 = torch.randn(2, 3), torch.randn(4)


def grad_at(t, p, A, B):
    return A * p.detach() + B * math.cos(0.9 * t)


# (optimizer, options for every group, options of a second group or None)
OPT_SPECS = [
    ("SGD", {"lr": 0.1}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.9}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True}, None),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.05}, None),
    ("SGD", {"lr": 0.05, "maximize": True}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1, "maximize": True}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.7, "nesterov": True, "weight_decay": 0.02, "maximize": True}, None),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "foreach": False}, None),
    ("SGD", {"lr": 0.1}, {"lr": 0.02, "momentum": 0.9, "nesterov": True}),
    ("Adam", {}, None),
    ("Adam", {"lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6}, None),
    ("Adam", {"lr": 0.02, "weight_decay": 0.1}, None),
    ("Adam", {"lr": 0.05, "amsgrad": True}, None),
    ("Adam", {"lr": 0.05, "betas": [0.5, 0.9], "weight_decay": 0.2, "amsgrad": True}, None),
    ("Adam", {"lr": 0.03, "maximize": True}, None),
    ("Adam", {"lr": 0.03, "weight_decay": 0.1, "amsgrad": True, "maximize": True}, None),
    ("Adam", {"lr": 0.03, "weight_decay": 0.1, "maximize": True}, None),
    ("Adam", {"lr": 0.01, "foreach": True}, None),
    ("Adam", {"lr": 0.01}, {"lr": 0.05, "betas": [0.7, 0.95], "weight_decay": 0.1}),
    ("AdamW", {}, None),
    ("AdamW", {"lr": 0.05, "weight_decay": 0.3}, None),
    ("AdamW", {"lr": 0.05, "betas": [0.8, 0.9], "eps": 1e-5, "weight_decay": 0.5, "amsgrad": True}, None),
    ("AdamW", {"lr": 0.03, "maximize": True}, None),
    ("AdamW", {"lr": 0.03, "weight_decay": 0.2, "amsgrad": True, "maximize": True}, None),
    ("AdamW", {"lr": 0.03, "weight_decay": 0.2, "maximize": True}, None),
    ("AdamW", {"lr": 0.01}, {"weight_decay": 0.0, "lr": 0.05}),
    ("Adamax", {}, None),
    ("Adamax", {"lr": 0.05, "betas": [0.8, 0.95], "eps": 1e-4, "weight_decay": 0.1}, None),
    ("Adamax", {"lr": 0.05, "maximize": True, "weight_decay": 0.1}, None),
    ("Adagrad", {}, None),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05}, None),
    ("Adagrad", {"lr": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-6}, None),
    ("Adagrad", {"lr": 0.1, "maximize": True}, None),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.05, "maximize": True}, None),
    ("Adadelta", {}, None),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4}, None),
    ("Adadelta", {"lr": 0.5, "weight_decay": 0.1, "maximize": True}, None),
    ("RMSprop", {}, None),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-6}, None),
    ("RMSprop", {"lr": 0.01, "centered": True}, None),
    ("RMSprop", {"lr": 0.01, "momentum": 0.8}, None),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "weight_decay": 0.1}, None),
    ("RMSprop", {"lr": 0.01, "maximize": True}, None),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9, "maximize": True}, None),
    ("NAdam", {}, None),
    ("NAdam", {"lr": 0.02, "betas": [0.8, 0.95], "weight_decay": 0.1}, None),
    ("NAdam", {"lr": 0.02, "momentum_decay": 0.01}, None),
    ("RAdam", {}, None),
    ("RAdam", {"lr": 0.05, "betas": [0.9, 0.9], "eps": 1e-6, "weight_decay": 0.1}, None),
    ("RAdam", {"lr": 0.05, "betas": [0.8, 0.95]}, None),
    ("Rprop", {}, None),
    ("Rprop", {"lr": 0.05, "etas": [0.3, 1.5], "step_sizes": [1e-3, 0.2]}, None),
    ("Rprop", {"lr": 0.02, "maximize": True}, None),
    ("ASGD", {}, None),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 5, "weight_decay": 0.1}, None),
    ("ASGD", {"lr": 0.05, "t0": 0, "maximize": True}, None),
    # a second group with its own options, for every optimizer
    ("Adamax", {"lr": 0.02}, {"lr": 0.05, "betas": [0.8, 0.9], "maximize": True}),
    # (not a group's own initial_accumulator_value: torch fills every sum from the
    # constructor's at construction, ember from the group's -- lua/ember/optim/Adagrad.lua)
    ("Adagrad", {"lr": 0.1, "initial_accumulator_value": 0.2}, {"lr": 0.05, "lr_decay": 0.1}),
    ("Adadelta", {"lr": 1.0}, {"rho": 0.5, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01}, {"lr": 0.02, "centered": True, "momentum": 0.5}),
    ("NAdam", {"lr": 0.02}, {"betas": [0.7, 0.9], "momentum_decay": 0.02}),
    ("RAdam", {"lr": 0.02}, {"betas": [0.8, 0.9], "weight_decay": 0.05}),
    ("Rprop", {"lr": 0.02}, {"etas": [0.4, 1.1]}),
    ("ASGD", {"lr": 0.02}, {"lambd": 0.01, "t0": 3}),
    # zero_grad(set_to_none=False), 1.13's default: p2 steps with a zero gradient every 4th step
    ("SGD", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1}, None, False),
    ("Adam", {"lr": 0.05, "weight_decay": 0.1}, None, False),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}, None, False),
    # add_param_group after step 8 (fine-tuning unfreezes p2): p2's gradients before are ignored
    ("SGD", {"lr": 0.05, "momentum": 0.9}, {"lr": 0.01, "nesterov": True, "momentum": 0.8}, True, 8),
    ("AdamW", {"lr": 0.02}, {"lr": 0.05, "weight_decay": 0.0}, True, 8),
]


def torch_kw(kw):
    out = dict(kw)
    for k in ("betas", "etas", "step_sizes"):
        if k in out:
            out[k] = tuple(out[k])
    return out


def optimizer_case(name, kw, group2, set_to_none=True, add_at=None):
    p1, p2 = P1.clone().requires_grad_(True), P2.clone().requires_grad_(True)
    tkw = torch_kw(kw)
    if name == "NAdam":
        # 1.13's single-tensor loop has the mu_product bug PyTorch 2.0 fixed
        # (lua/ember/optim/NAdam.lua): its foreach path is the algorithm
        tkw["foreach"] = True
    if add_at is not None:
        params = [p1]
    elif group2 is None:
        params = [p1, p2]
    else:
        params = [{"params": [p1]}, {"params": [p2], **torch_kw(group2)}]
    opt = getattr(torch.optim, name)(params, **tkw)
    traj = []
    # ASGD keeps eta and mu as 0-d tensors of the default dtype: torch's own, float32
    torch.set_default_dtype(torch.float32 if name == "ASGD" else torch.float64)
    for t in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=set_to_none)
        p1.grad = grad_at(t, p1, A1, B1)
        if t % 4 != 0:
            p2.grad = grad_at(t, p2, A2, B2)
        opt.step()
        if t == add_at:
            opt.add_param_group({"params": [p2], **torch_kw(group2)})
        traj.append([p1.detach().clone(), p2.detach().clone()])
    torch.set_default_dtype(torch.float64)
    state = sorted(k for k, v in opt.state[p1].items() if v is not None)
    case = {"optimizer": name, "options": kw, "trajectory": traj, "state": state}
    if group2 is not None:
        case["group2"] = group2
    if not set_to_none:
        case["set_to_none"] = False
    if add_at is not None:
        case["add_group_at"] = add_at
    return case


def optimizer_cases():
    return {"p1": P1, "p2": P2, "A1": A1, "A2": A2, "B1": B1, "B2": B2, "steps": STEPS,
            "cases": [optimizer_case(*s) for s in OPT_SPECS]}


LBFGS_SPECS = [
    ({}, 3),
    ({"lr": 0.5, "max_iter": 5, "history_size": 3}, 6),
    ({"line_search_fn": "strong_wolfe", "max_iter": 10}, 3),
    ({"line_search_fn": "strong_wolfe", "history_size": 2, "tolerance_grad": 1e-5, "max_iter": 6}, 4),
    ({"lr": 0.8, "max_iter": 4, "max_eval": 3}, 4),
]


def lbfgs_loss(p1, p2):
    """The closure's loss: quadratic plus a quartic term (written as
    products, as the spec writes it)."""
    return ((A1 * p1 * p1 * 0.5 + B1 * p1).sum() + (p1 * p1 * p1 * p1).sum() * 0.1
            + (A2 * p2 * p2 * 0.5 + B2 * p2).sum() + (p2 * p2 * p2 * p2).sum() * 0.1)


def lbfgs_case(kw, calls):
    """LBFGS.step(closure) `calls` times: the parameters, the returned
    loss and the state's n_iter and func_evals after each call."""
    p1, p2 = P1.clone().requires_grad_(True), P2.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([p1, p2], **kw)

    def closure():
        opt.zero_grad()
        loss = lbfgs_loss(p1, p2)
        loss.backward()
        return loss

    out = []
    for _ in range(calls):
        loss = opt.step(closure)
        st = opt.state[p1]
        out.append({"p": [p1.detach().clone(), p2.detach().clone()], "loss": float(loss),
                    "n_iter": st["n_iter"], "func_evals": st["func_evals"]})
    return {"options": kw, "steps": out}


# ------------------------------------------------------------------ schedulers

FNS = {
    "inv": lambda x: 1 / (x + 1),
    "decay95": lambda e: 0.95 ** e,
    "mul98": lambda e: 0.98,
    "step_mul": lambda e: 0.5 if e % 10 == 0 else 1.0,
}


def make_sched(opt, spec):
    L = torch.optim.lr_scheduler
    name, kw = spec["scheduler"], dict(spec.get("options", {}))
    if name in ("SequentialLR", "ChainedScheduler"):
        subs = [make_sched(opt, s) for s in spec["schedulers"]]
        if name == "ChainedScheduler":
            return L.ChainedScheduler(subs)
        return L.SequentialLR(opt, subs, spec["milestones"])
    for k in ("scale_fn", "lr_lambda"):
        if k in kw:
            kw[k] = FNS[kw[k]]
    return getattr(L, name)(opt, **kw)


S = SCHED_STEPS
SCHED_SPECS = [
    {"scheduler": "StepLR", "options": {"step_size": 7}},
    {"scheduler": "StepLR", "options": {"step_size": 3, "gamma": 0.7}},
    {"scheduler": "MultiStepLR", "options": {"milestones": [5, 12, 30]}},
    {"scheduler": "MultiStepLR", "options": {"milestones": [10, 20, 45], "gamma": 0.5}},
    {"scheduler": "ExponentialLR", "options": {"gamma": 0.95}},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 20}},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 15, "eta_min": 0.01}},
    {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 10}},
    {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 3, "T_mult": 2, "eta_min": 0.001}},
    {"scheduler": "LinearLR", "options": {}},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.1, "end_factor": 0.5, "total_iters": 30}},
    {"scheduler": "LinearLR", "options": {"start_factor": 1.0, "end_factor": 0.2, "total_iters": 40}},
    {"scheduler": "ConstantLR", "options": {}},
    {"scheduler": "ConstantLR", "options": {"factor": 0.25, "total_iters": 12}},
    {"scheduler": "PolynomialLR", "options": {}},
    {"scheduler": "PolynomialLR", "options": {"total_iters": 40, "power": 2.0}},
    {"scheduler": "PolynomialLR", "options": {"total_iters": 30, "power": 0.5}},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "decay95"}},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "inv"}},
    {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}},
    {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "step_mul"}},
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 6}, "momentum": 0.9},
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": [0.1, 0.05], "step_size_up": 4,
                                          "step_size_down": 7, "mode": "triangular2",
                                          "base_momentum": 0.8, "max_momentum": 0.95}, "momentum": 0.9},
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 5, "mode": "exp_range",
                                          "gamma": 0.97}, "momentum": 0.9},
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 5, "scale_fn": "inv",
                                          "scale_mode": "cycle", "cycle_momentum": False}},
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 5, "scale_fn": "inv",
                                          "scale_mode": "iterations", "cycle_momentum": False}, "optimizer": "Adam"},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.5, "total_steps": S}, "momentum": 0.9},
    {"scheduler": "OneCycleLR", "options": {"max_lr": [0.4, 0.2], "total_steps": S, "anneal_strategy": "linear"},
     "momentum": 0.9},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.3, "epochs": 5, "steps_per_epoch": 10, "three_phase": True,
                                            "pct_start": 0.2, "div_factor": 10.0, "final_div_factor": 50.0},
     "momentum": 0.9},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.3, "total_steps": S, "three_phase": True,
                                            "anneal_strategy": "linear", "base_momentum": 0.8,
                                            "max_momentum": [0.9, 0.99]}, "momentum": 0.9},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.01, "total_steps": S}, "optimizer": "Adam"},
    {"scheduler": "SequentialLR", "schedulers": [
        {"scheduler": "LinearLR", "options": {"start_factor": 0.1, "total_iters": 10}},
        {"scheduler": "CosineAnnealingLR", "options": {"T_max": 40, "eta_min": 0.001}}], "milestones": [10]},
    {"scheduler": "SequentialLR", "schedulers": [
        {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 5}},
        {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}},
        {"scheduler": "StepLR", "options": {"step_size": 5, "gamma": 0.5}}], "milestones": [8, 25]},
    {"scheduler": "SequentialLR", "schedulers": [
        {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}},
        {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}},
        {"scheduler": "LambdaLR", "options": {"lr_lambda": "inv"}}], "milestones": [10, 30]},
    {"scheduler": "SequentialLR", "schedulers": [
        {"scheduler": "LinearLR", "options": {"start_factor": 0.2, "total_iters": 5}},
        {"scheduler": "CyclicLR", "options": {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 4}}],
     "milestones": [5], "momentum": 0.9},
    {"scheduler": "ChainedScheduler", "schedulers": [
        {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 4}},
        {"scheduler": "ExponentialLR", "options": {"gamma": 0.95}}]},
    {"scheduler": "ChainedScheduler", "schedulers": [
        {"scheduler": "LinearLR", "options": {"start_factor": 0.2, "total_iters": 8}},
        {"scheduler": "StepLR", "options": {"step_size": 10, "gamma": 0.5}},
        {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}}]},
    # an lr set by hand mid-run: the chainable schedules go on from it
    {"scheduler": "StepLR", "options": {"step_size": 7, "gamma": 0.5}, "override_at": 10},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 20, "eta_min": 0.001}, "override_at": 10},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.2, "total_iters": 30}, "override_at": 10},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "decay95"}, "override_at": 10},
    # add_param_group after step 5 (lr 0.2): chainable schedules change it too, closed-form ones leave it
    {"scheduler": "StepLR", "options": {"step_size": 3, "gamma": 0.5}, "add_group_at": 5},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 8, "eta_min": 0.001}, "add_group_at": 5},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.2, "total_iters": 10}, "add_group_at": 5},
    {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}, "add_group_at": 5},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "decay95"}, "add_group_at": 5},
    # (OneCycleLR: torch 1.13 fails at the next step, KeyError 'initial_lr'; ember leaves the group)
    # step(epoch): the closed form where torch has one (MultiplicativeLR chains)
    {"scheduler": "StepLR", "options": {"step_size": 3, "gamma": 0.5}, "epochs": [1, 2, 7, 8, 4, 12]},
    {"scheduler": "MultiStepLR", "options": {"milestones": [2, 5, 9]}, "epochs": [1, 5, 6, 3, 9, 10]},
    {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}, "epochs": [1, 2, 6, 7, 3]},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 10, "eta_min": 0.01}, "epochs": [1, 4, 5, 15, 16, 2]},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.25, "total_iters": 8}, "epochs": [1, 3, 4, 12, 2]},
    {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 4}, "epochs": [1, 4, 2, 6]},
    {"scheduler": "PolynomialLR", "options": {"total_iters": 8, "power": 2.0}, "epochs": [1, 3, 4, 9, 2]},
    {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}, "epochs": [1, 2, 5, 6]},
    {"scheduler": "ReduceLROnPlateau", "options": {"patience": 2}, "metrics": "down_flat"},
    {"scheduler": "ReduceLROnPlateau", "options": {"mode": "max", "factor": 0.5, "patience": 1, "cooldown": 2,
                                                   "min_lr": [0.01, 0.001]}, "metrics": "up_flat"},
    {"scheduler": "ReduceLROnPlateau", "options": {"threshold": 0.05, "threshold_mode": "abs", "patience": 0,
                                                   "factor": 0.7, "min_lr": 0.004}, "metrics": "down_flat"},
    {"scheduler": "ReduceLROnPlateau", "options": {"mode": "max", "threshold": 0.1, "threshold_mode": "rel",
                                                   "patience": 3, "eps": 1e-3}, "metrics": "up_flat"},
]


def metrics(kind):
    # a loss that falls, then wobbles on a plateau (down_flat), or an accuracy (up_flat)
    out = []
    for t in range(S):
        v = 1.0 / (1 + 0.3 * min(t, 12)) + 0.02 * math.sin(1.7 * t)
        out.append(round(v if kind == "down_flat" else 1 - v, 12))
    return out


def schedule_case(spec):
    a = torch.zeros(1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    groups = [{"params": [a]}, {"params": [b], "lr": 0.05}]
    if spec.get("optimizer") == "Adam":
        opt = torch.optim.Adam(groups, lr=0.1, betas=(0.9, 0.99))
    else:
        opt = torch.optim.SGD(groups, lr=0.1, momentum=spec.get("momentum", 0.0))
    sched = make_sched(opt, spec)
    lrs, moms = [], []

    def record():
        lrs.append([g["lr"] for g in opt.param_groups])
        if "betas" in opt.param_groups[0]:
            moms.append([g["betas"][0] for g in opt.param_groups])
        else:
            moms.append([g["momentum"] for g in opt.param_groups])

    record()
    ms = metrics(spec["metrics"]) if "metrics" in spec else None
    if "epochs" in spec:
        for e in spec["epochs"]:
            opt.step()
            sched.step(e)
            record()
    for k in range(S if "epochs" not in spec else 5):
        opt.step()
        if ms:
            sched.step(ms[k])
        else:
            sched.step()
            assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups] or "add_group_at" in spec
        if k + 1 == spec.get("override_at"):
            for g in opt.param_groups:
                g["lr"] = g["lr"] * 0.5
        if k + 1 == spec.get("add_group_at"):
            opt.add_param_group({"params": [torch.zeros(1, requires_grad=True)], "lr": 0.2})
        record()
    case = dict(spec)
    case.setdefault("optimizer", "SGD")
    if ms:
        case["metrics"] = ms
    case["lrs"], case["momentums"] = lrs, moms
    return case


RESUME_SPECS = [
    {"scheduler": "StepLR", "options": {"step_size": 7, "gamma": 0.5}},
    {"scheduler": "MultiStepLR", "options": {"milestones": [5, 21, 25]}},
    {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 30, "eta_min": 0.001}},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.1, "total_iters": 25}},
    {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 22}},
    {"scheduler": "PolynomialLR", "options": {"total_iters": 28, "power": 2.0}},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "inv"}},
    {"scheduler": "MultiplicativeLR", "options": {"lr_lambda": "mul98"}},
    {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 8, "eta_min": 0.001}},
    {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 15, "T_mult": 2}},
    # known: 1.13 takes the loaded momentum as base_momentum when resuming (lua/ember/optim/CyclicLR.lua)
    {"scheduler": "CyclicLR", "options": {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 6}, "momentum": 0.9,
     "known_momentum": "lua/ember/optim/CyclicLR.lua"},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.5, "total_steps": 40}, "momentum": 0.9},
]


def resume_case(spec, done=20):
    """torch's last_epoch: a run of `done` steps saves the optimizer's
    state_dict (with each group's initial_lr); a fresh optimizer loads it
    and the schedule is made again with last_epoch = done (its initial step
    goes to done + 1), then steps 10 times. The lrs and momentums after
    the construction and each step."""
    def build():
        a = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        return torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.05}], lr=0.1,
                               momentum=spec.get("momentum", 0.0))
    opt = build()
    sched = make_sched(opt, spec)
    for _ in range(done):
        opt.step()
        sched.step()
    saved = opt.state_dict()
    opt2 = build()
    opt2.load_state_dict(saved)
    kw = dict(spec.get("options", {}))
    res = make_sched(opt2, {"scheduler": spec["scheduler"], "options": {**kw, "last_epoch": done}})
    lrs, moms = [], []
    for k in range(11):
        if k:
            opt2.step()
            res.step()
        lrs.append([g["lr"] for g in opt2.param_groups])
        moms.append([g["momentum"] for g in opt2.param_groups])
    case = dict(spec)
    case.update({"done": done, "lrs": lrs, "momentums": moms})
    return case


GET_LR_SPECS = [
    {"scheduler": "StepLR", "options": {"step_size": 3, "gamma": 0.5}},
    {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}},
    {"scheduler": "CosineAnnealingLR", "options": {"T_max": 5, "eta_min": 0.01}},
    {"scheduler": "LinearLR", "options": {"start_factor": 0.25, "total_iters": 4}},
    {"scheduler": "LambdaLR", "options": {"lr_lambda": "inv"}},
    {"scheduler": "OneCycleLR", "options": {"max_lr": 0.5, "total_steps": 12}, "momentum": 0.9},
]


def get_lr_case(spec):
    """get_lr() (which torch warns is not the lr in use outside step())
    after each of 12 steps."""
    import warnings
    a = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([a], lr=0.1, momentum=spec.get("momentum", 0.0))
    sched = make_sched(opt, spec)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(12):
            opt.step()
            sched.step()
            out.append(sched.get_lr()[0])
    case = dict(spec)
    case["get_lr"] = out
    return case


# ------------------------------------------------------------------ swa_utils

def swa_cases():
    """torch.optim.swa_utils: AveragedModel over 4 updates of a Linear(3, 2)
    whose weights are set from the fixture each time (the running mean, an
    EMA avg_fn 0.25 * avg + 0.75 * p, and use_buffers with a BatchNorm1d's
    running statistics); SWALR's lrs over 12 steps (cos and linear, anneal
    0, 1 and 4 epochs, one swa_lr per group, after 5 steps of
    CosineAnnealingLR); update_bn's running statistics over three batches
    (one a [x, y] list)."""
    torch.manual_seed(7)
    L = torch.optim.swa_utils
    states = [{"weight": torch.randn(2, 3), "bias": torch.randn(2)} for _ in range(4)]
    avg = []
    for kind in ("mean", "ema"):
        m = torch.nn.Linear(3, 2)
        fn = None if kind == "mean" else (lambda a, p, n: 0.25 * a + 0.75 * p)
        swa = L.AveragedModel(m, avg_fn=fn)
        out = []
        for st in states:
            with torch.no_grad():
                m.weight.copy_(st["weight"])
                m.bias.copy_(st["bias"])
            swa.update_parameters(m)
            out.append({"weight": swa.module.weight.detach().clone(), "bias": swa.module.bias.detach().clone(),
                        "n_averaged": int(swa.n_averaged)})
        avg.append({"avg_fn": kind, "steps": out})
    # use_buffers: a BatchNorm1d's running statistics are averaged too
    xs = [torch.randn(5, 3) for _ in range(4)]
    bn = torch.nn.BatchNorm1d(3)
    swa = L.AveragedModel(bn, use_buffers=True)
    out = []
    for x in xs:
        bn.train()
        bn(x)
        swa.update_parameters(bn)
        out.append({"running_mean": swa.module.running_mean.clone(), "running_var": swa.module.running_var.clone(),
                    "num_batches_tracked": int(swa.module.num_batches_tracked)})
    buffers = {"xs": xs, "steps": out}

    swalr = []
    for kw, pre in (({"swa_lr": 0.05}, 0), ({"swa_lr": [0.05, 0.01], "anneal_epochs": 4, "anneal_strategy": "linear"}, 0),
                    ({"swa_lr": 0.02, "anneal_epochs": 0}, 0), ({"swa_lr": 0.03, "anneal_epochs": 1}, 0),
                    ({"swa_lr": 0.05, "anneal_epochs": 4}, 5)):
        a = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.05}], lr=0.1)
        if pre:
            cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
            for _ in range(pre):
                opt.step()
                cos.step()
        s = L.SWALR(opt, **kw)
        lrs = [[g["lr"] for g in opt.param_groups]]
        for _ in range(12):
            opt.step()
            s.step()
            lrs.append([g["lr"] for g in opt.param_groups])
        swalr.append({"options": kw, "cosine_first": pre, "lrs": lrs})

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4, momentum=0.3))
    batches = [torch.randn(6, 3), torch.randn(6, 3), torch.randn(5, 3)]
    model.eval()
    L.update_bn([batches[0], [batches[1], torch.zeros(6)], batches[2]], model)
    bn_case = {"weight": model[0].weight.detach(), "bias": model[0].bias.detach(), "batches": batches,
               "running_mean": model[1].running_mean, "running_var": model[1].running_var,
               "num_batches_tracked": int(model[1].num_batches_tracked), "momentum": model[1].momentum,
               "training": model.training}
    return {"states": states, "averaged": avg, "buffers": buffers, "swalr": swalr, "update_bn": bn_case}


# ------------------------------------------------------------------ errors

def refused(fn):
    try:
        fn()
    except (ValueError, TypeError, KeyError) as e:
        return str(e)
    raise AssertionError("torch accepted it")


def error_cases():
    p = [torch.zeros(2, requires_grad=True)]
    O = torch.optim
    specs = [
        ("SGD", {"lr": -0.1}, "lr"),
        ("SGD", {"lr": 0.1, "momentum": -0.5}, "momentum"),
        ("SGD", {"lr": 0.1, "weight_decay": -1}, "weight_decay"),
        ("SGD", {"lr": 0.1, "nesterov": True}, "nesterov"),
        ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.5, "nesterov": True}, "nesterov"),
        ("Adam", {"lr": -1e-3}, "lr"),
        ("Adam", {"betas": [1.0, 0.999]}, "betas"),
        ("Adam", {"betas": [0.9, -0.1]}, "betas"),
        ("Adam", {"eps": -1e-8}, "eps"),
        ("Adam", {"weight_decay": -0.1}, "weight_decay"),
        ("AdamW", {"betas": [0.9, 1.5]}, "betas"),
        ("Adamax", {"betas": [-0.1, 0.9]}, "betas"),
        ("Adagrad", {"lr_decay": -0.1}, "lr_decay"),
        ("Adagrad", {"initial_accumulator_value": -1}, "initial_accumulator_value"),
        ("Adadelta", {"rho": 1.5}, "rho"),
        ("RMSprop", {"alpha": -0.1}, "alpha"),
        ("RMSprop", {"momentum": -0.1}, "momentum"),
        ("NAdam", {"momentum_decay": -0.1}, "momentum_decay"),
        ("RAdam", {"betas": [0.9, 1.0]}, "betas"),
        ("Rprop", {"etas": [1.1, 1.2]}, "etas"),
        ("Rprop", {"etas": [0.5, 0.9]}, "etas"),
        ("ASGD", {"weight_decay": -0.1}, "weight_decay"),
    ]
    out = []
    for name, kw, word in specs:
        msg = refused(lambda: getattr(O, name)(p, **torch_kw(kw)))
        out.append({"optimizer": name, "options": kw, "word": word, "torch": msg})
    # an unknown option: torch's TypeError names it
    msg = refused(lambda: O.Adam(p, lr=0.1, beta=0.9))
    out.append({"optimizer": "Adam", "options": {"lr": 0.1, "beta": 0.9}, "word": "beta", "torch": msg})
    return out


def main():
    data = {
        "optimizers": optimizer_cases(),
        "lbfgs": [lbfgs_case(*s) for s in LBFGS_SPECS],
        "schedulers": [schedule_case(s) for s in SCHED_SPECS],
        "resume": [resume_case(s) for s in RESUME_SPECS],
        "get_lr": [get_lr_case(s) for s in GET_LR_SPECS],
        "swa": swa_cases(),
        "errors": error_cases(),
    }
    Writer().write("tests/fixtures/optim_sweep.lua", "tests/gen_optim_sweep.py", data)


if __name__ == "__main__":
    main()
