#!/usr/bin/python3
"""Writes tests/fixtures/nn_modules.lua and tests/fixtures/nn_optim.lua:
PyTorch 1.13 reference values for tests/lua/nn_spec.lua and optim_spec.lua.

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_nn_fixtures.py

nn_modules.lua -- each case: the module's config, its state under EMBER's
parameter names (so the spec loads it with load_state_dict), the inputs, the
output, and the gradients of sum(out * R) for a fixed random R with respect
to the inputs and every parameter. All float64.
  PyTorch -> ember names: self_attn.in_proj_weight [3E, E] -> w_q, w_k, w_v;
  in_proj_bias -> b_q, b_k, b_v; out_proj.{weight,bias} -> w_o, b_o;
  multihead_attn -> cross_attn; linear1/linear2 -> ff.linear1/ff.linear2.
  Masks: key_padding_mask True = padding in both; the decoder's causal mask
  is PyTorch's square subsequent mask, ember's causal=true.

nn_modern.lua -- the modules of issue 27 (SiLU, RMSNorm, gated FeedForward,
Flatten, ModuleList/ModuleDict state-dict names), and the activations and
binary losses of lua/ember/_functional.lua, as nn_modules.lua, but with
PyTorch's own parameter names (which are ember's for these modules), and
their own seed so adding cases leaves nn_modules.lua unchanged. PyTorch 1.13
has no nn.RMSNorm: the reference is its formula, x * rsqrt(mean(x^2) + eps)
* weight, with eps=None meaning torch.finfo(dtype).eps as torch.nn.RMSNorm.
Also nn.init's reference numbers: calculate_gain, fan_in/fan_out of several
shapes (torch.nn.init._calculate_fan_in_and_fan_out), and the bound or std
each initializer's formula gives for them.

nn_more.lua -- cross_entropy_cases(): nn.CrossEntropyLoss with class weights;
more_cases(): the modules PyTorch users expect (BatchNorm1d,
ReLU6/Hardtanh/Hardswish/Hardsigmoid/Mish/Softsign/GLU/PReLU, Unflatten,
KLDivLoss, HuberLoss, CosineSimilarity, PairwiseDistance, the 2-d paddings,
1-d pools, nearest Upsample, PixelShuffle/Unshuffle) as nn_modern.lua, with
each module's PyTorch state_dict keys; their own seed.

nn_rnn.lua -- rnn_cases(): nn.RNN, LSTM, GRU and the LSTM/GRU cells (1 and 2
layers, bidirectional, batch_first, unbatched, with and without hx, without
biases), with PyTorch's parameter names; outputs, last states and the
gradients of input, hx and every parameter; its own seed.

nn_optim_more.lua -- optim_more_cases(): NAdam, RAdam, Adamax, Adadelta and
Adam/AdamW amsgrad trajectories; schedule_more_cases(): the lrs (and
momentum / beta1) of LinearLR, ConstantLR, PolynomialLR,
CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR and SequentialLR; their
own seed, so nn_optim.lua stays unchanged.

nn_functional.lua -- functional_cases(): torch.nn.functional's conv1d/2d, conv_transpose1d/2d, the pools and adaptive
pools, batch_norm/instance_norm (running statistics in and out), group_norm, layer_norm, rms_norm (RMSNormRef's
formula), interpolate in every mode, unfold/fold, embedding with padding_idx, the functions of nn modules (softsign,
prelu, pixel_(un)shuffle, pairwise_distance, triplet_margin_loss, margin_ranking_loss, bilinear) and logsigmoid,
softmin, selu, celu, tanhshrink, threshold, hardshrink, softshrink, normalize and cosine_similarity at torch's
default dim, return_indices and max_unpool, the losses ember had no module for (soft_margin, hinge_embedding,
cosine_embedding, poisson_nll, multilabel_soft_margin, multi_margin), affine_grid and grid_sample, embedding_bag,
lp_pool, local_response_norm, channel_shuffle, pdist, gaussian_nll_loss, triplet_margin_with_distance_loss, rrelu,
conv3d and the 3-d pools, ctc_loss, for tests/lua/nn_functional_spec.lua; inputs, outputs and input gradients, float64; its own seed.

nn_extra.lua -- extra_cases(): ConvTranspose1d/2d, InstanceNorm1d/2d,
EmbeddingBag, Transformer (under PyTorch's names: the spec maps them as
nn.Transformer.from_torch_state_dict does), Bilinear, TripletMarginLoss and
MarginRankingLoss for tests/lua/nn_extra_spec.lua, as nn_more.lua; ids,
offsets and padding_idx 1-based; its own seed.

nn_probe_models.lua -- probe_models_cases(): what a new user probing issue 27's
modules tried (tests/lua/probe_models_spec.lua), as nn_more.lua; its own seed.

nn_flex.lua -- flex_cases(): ember.flex_attention's reference (tests/lua/flex_attention_spec.lua).
PyTorch 1.13 has no flex_attention: each case writes its score_mod and
mask_mod out in torch, softmax(score_mod(q k^T * scale) masked) v, a row
that sees no key giving 0 and logsumexp -inf (as FlexAttention), and
autograd's gradients of sum(out * R) for q, k, v and the learned bias. The
spec's functions use 1-based indices (ember's), these 0-based: the same
elements. Grouped heads: kv head h // (Hq / Hkv). Its own seed.

nn_optim.lua -- parameter trajectories of SGD (plain, momentum+dampening,
nesterov, weight decay), Adam and AdamW (with weight decay), RMSprop (plain,
momentum, centered) and Adagrad (lr decay, initial accumulator) on the loss
sum(A * p^2 + B * p) over a few steps; clip_grad_norm (the returned norm and
the clipped gradients); the warmup+cosine / warmup+linear schedules as
LambdaLR with the factor functions documented in lua/ember/optim/.
"""
import math
import os

import torch

from fixture_writer import Writer

torch.manual_seed(20261129)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def ember_names(module):
    """name -> parameter of a PyTorch module under ember's names."""
    out = {}
    for name, p in module.named_parameters():
        parts = name.split(".")
        prefix = ".".join(parts[:-2])
        pre = prefix + "." if prefix else ""
        pre = pre.replace("multihead_attn", "cross_attn")
        if parts[-1] in ("in_proj_weight", "in_proj_bias"):
            kind = "w" if parts[-1] == "in_proj_weight" else "b"
            base = ".".join(parts[:-1]).replace("multihead_attn", "cross_attn")
            for i, which in enumerate("qkv"):
                out["%s.%s_%s" % (base, kind, which)] = ("split", p, i)
            continue
        if len(parts) >= 2 and parts[-2] == "out_proj":
            kind = "w" if parts[-1] == "weight" else "b"
            out["%s%s_o" % (pre, kind)] = ("whole", p, None)
            continue
        n = name.replace("multihead_attn", "cross_attn")
        if parts[0] in ("linear1", "linear2"):
            n = "ff." + n
        out[n] = ("whole", p, None)
    return out


def pick(entry, grad=False):
    kind, p, i = entry
    t = p.grad if grad else p.detach()
    if kind == "split":
        E = t.shape[0] // 3
        t = t[i * E:(i + 1) * E]
    return t.clone()


def run_case(name, module, config, inputs, forward):
    """forward(module, *inputs) -> out; gradients of sum(out * R)."""
    for t in inputs.values():
        if t.dtype == torch.float64:
            t.requires_grad_(True)
    out = forward(module, **inputs)
    R = torch.randn_like(out)
    (out * R).sum().backward()
    names = ember_names(module)
    case = {"name": name, "config": config}
    case["state"] = {n: pick(e) for n, e in names.items()}
    case["inputs"] = {k: v.detach() for k, v in inputs.items()}
    case["out"] = out.detach()
    case["R"] = R
    case["grad_inputs"] = {k: v.grad for k, v in inputs.items() if v.dtype == torch.float64}
    case["grads"] = {n: pick(e, grad=True) for n, e in names.items()}
    return case


def randomize(module):
    """Random weights (LayerNorm scales around 1), so no term is trivially zero."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(base + 0.3 * torch.randn_like(p))


def module_cases():
    cases = []
    lin = torch.nn.Linear(5, 4)
    cases.append(run_case("Linear", lin, {"in_features": 5, "out_features": 4},
                          {"x": torch.randn(2, 3, 5)}, lambda m, x: m(x)))

    ln = torch.nn.LayerNorm(6, eps=1e-5)
    with torch.no_grad():
        ln.weight.copy_(torch.randn(6))
        ln.bias.copy_(torch.randn(6))
    cases.append(run_case("LayerNorm", ln, {"shape": 6}, {"x": torch.randn(2, 3, 6) * 2 + 1},
                          lambda m, x: m(x)))

    for act in ("relu", "gelu"):
        ff = torch.nn.Sequential()
        ff.linear1 = torch.nn.Linear(6, 10)
        ff.linear2 = torch.nn.Linear(10, 6)
        f = torch.nn.functional.relu if act == "relu" else torch.nn.functional.gelu

        def fwd(m, x, f=f):
            return m.linear2(f(m.linear1(x)))

        case = run_case("FeedForward_" + act, ff, {"d_model": 6, "d_ff": 10, "activation": act},
                        {"x": torch.randn(2, 4, 6)}, fwd)
        # these are the FeedForward's own names (no "ff." prefix)
        case["state"] = {k[3:]: v for k, v in case["state"].items()}
        case["grads"] = {k[3:]: v for k, v in case["grads"].items()}
        cases.append(case)

    for norm_first in (False, True):
        for act in ("relu", "gelu"):
            enc = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                                   activation=act, batch_first=True,
                                                   norm_first=norm_first)
            randomize(enc)
            kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
            cfg = {"d_model": 8, "heads": 2, "dim_feedforward": 16, "norm_first": norm_first,
                   "activation": act}
            cases.append(run_case("TransformerEncoderLayer_%s_%s" % ("pre" if norm_first else "post", act),
                                  enc, cfg, {"x": torch.randn(2, 5, 8), "key_padding_mask": kpm},
                                  lambda m, x, key_padding_mask: m(x, src_key_padding_mask=key_padding_mask)))

    for norm_first in (False, True):
        dec = torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                               batch_first=True, norm_first=norm_first)
        randomize(dec)
        L, S = 4, 6
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        mkpm = torch.tensor([[False] * S, [False] * 4 + [True] * 2])
        cfg = {"d_model": 8, "heads": 2, "dim_feedforward": 16, "norm_first": norm_first}

        def fwd(m, x, memory, memory_key_padding_mask, causal=causal):
            return m(x, memory, tgt_mask=causal, memory_key_padding_mask=memory_key_padding_mask)

        cases.append(run_case("TransformerDecoderLayer_%s" % ("pre" if norm_first else "post"), dec, cfg,
                              {"x": torch.randn(2, L, 8), "memory": torch.randn(2, S, 8),
                               "memory_key_padding_mask": mkpm}, fwd))
    return cases


def loss_cases():
    logits = torch.randn(6, 5, requires_grad=True)
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    out = []
    for ignore, smooth, red in ((None, 0.0, "mean"), (2, 0.1, "mean"), (None, 0.2, "sum"), (4, 0.0, "none")):
        logits.grad = None
        kw = {"label_smoothing": smooth, "reduction": red}
        if ignore is not None:
            kw["ignore_index"] = ignore
        loss = torch.nn.functional.cross_entropy(logits, target, **kw)
        R = torch.randn_like(loss)
        (loss * R).sum().backward()
        out.append({"ignore_index": (ignore + 1) if ignore is not None else False, "label_smoothing": smooth,
                    "reduction": red, "logits": logits.detach(), "target": target + 1,
                    "loss": loss.detach(), "R": R, "grad": logits.grad.clone()})
    return out


# ---------------------------------------------------------------- optim

STEPS = 5


def trajectory(make_opt, p0, A, B):
    p = p0.clone().requires_grad_(True)
    opt = make_opt([p])
    traj = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = (A * p * p + B * p).sum()
        loss.backward()
        opt.step()
        traj.append(p.detach().clone())
    return traj


def optim_cases():
    p0 = torch.randn(3, 4)
    A = torch.rand(3, 4) + 0.5
    B = torch.randn(3, 4)
    specs = [
        ("SGD", {"lr": 0.1}),
        ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
        ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.02}),
        ("Adam", {"lr": 0.01}),
        ("Adam", {"lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1}),
        ("AdamW", {"lr": 0.02, "weight_decay": 0.1}),
        ("AdamW", {"lr": 0.05, "betas": [0.85, 0.95], "weight_decay": 0.5}),
        ("RMSprop", {"lr": 0.01}),
        ("RMSprop", {"lr": 0.02, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1, "momentum": 0.8}),
        ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
        ("Adagrad", {"lr": 0.1}),
        ("Adagrad", {"lr": 0.2, "lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.3,
                     "eps": 1e-6}),
    ]
    out = []
    for name, kw in specs:
        tkw = dict(kw)
        if "betas" in tkw:
            tkw["betas"] = tuple(tkw["betas"])
        cls = getattr(torch.optim, name)
        traj = trajectory(lambda ps: cls(ps, **tkw), p0, A, B)
        out.append({"optimizer": name, "options": kw, "trajectory": traj})
    return {"p0": p0, "A": A, "B": B, "steps": STEPS, "cases": out}


def clip_cases():
    out = []
    for max_norm in (0.5, 100.0):
        a = torch.randn(3, 4, requires_grad=True)
        b = torch.randn(5, requires_grad=True)
        ((a * a * 1.5).sum() + (b * 2).sum() + (a.sum() * b.sum())).backward()
        ga, gb = a.grad.clone(), b.grad.clone()
        total = torch.nn.utils.clip_grad_norm_([a, b], max_norm)
        out.append({"max_norm": max_norm, "a": a.detach(), "b": b.detach(), "grad_a": ga, "grad_b": gb,
                    "total_norm": float(total), "clipped_a": a.grad.clone(), "clipped_b": b.grad.clone()})
    return out


def schedule_cases():
    out = []
    for kind, warm, total, min_ratio in (("cosine", 3, 10, 0.1), ("linear", 3, 10, 0.0), ("cosine", 0, 8, 0.0)):
        def factor(s, warm=warm, total=total, m=min_ratio, kind=kind):
            if s < warm:
                return (s + 1) / warm
            p = min(1.0, (s - warm) / max(1, total - warm))
            if kind == "cosine":
                return m + (1 - m) * 0.5 * (1 + math.cos(math.pi * p))
            return m + (1 - m) * (1 - p)

        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.5)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        lrs = [opt.param_groups[0]["lr"]]
        for _ in range(total + 2):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        out.append({"kind": kind, "warmup_steps": warm, "total_steps": total, "min_lr_ratio": min_ratio,
                    "base_lr": 0.5, "lrs": lrs})
    return out


# ---------------------------------------------------------------- issue 27 modules

def run_plain(name, module, config, inputs, forward):
    """As run_case, under PyTorch's own parameter names."""
    for t in inputs.values():
        if t.dtype == torch.float64:
            t.requires_grad_(True)
    out = forward(module, **inputs)
    R = torch.randn_like(out)
    (out * R).sum().backward()
    return {"name": name, "config": config,
            "state": {n: p.detach().clone() for n, p in module.named_parameters()},
            "inputs": {k: v.detach() for k, v in inputs.items()},
            "out": out.detach(), "R": R,
            "grad_inputs": {k: v.grad for k, v in inputs.items() if v.dtype == torch.float64},
            "grads": {n: p.grad.clone() for n, p in module.named_parameters()}}


class RMSNormRef(torch.nn.Module):
    """torch.nn.RMSNorm (PyTorch >= 2.4) by its formula."""

    def __init__(self, shape, eps=None, affine=True):
        super().__init__()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        if affine:
            self.weight = torch.nn.Parameter(torch.ones(self.shape))
        else:
            self.weight = None

    def forward(self, x):
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        dims = tuple(range(-len(self.shape), 0))
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


class GatedFF(torch.nn.Module):
    """Llama's MLP: w2(act(w1 x) * w3 x), under ember's names."""

    def __init__(self, d, f, act, bias):
        super().__init__()
        self.linear1 = torch.nn.Linear(d, f, bias=bias)
        self.linear3 = torch.nn.Linear(d, f, bias=bias)
        self.linear2 = torch.nn.Linear(f, d, bias=bias)
        self.act = torch.nn.functional.silu if act == "swiglu" else torch.nn.functional.gelu

    def forward(self, x):
        return self.linear2(self.act(self.linear1(x)) * self.linear3(x))


def modern_cases():
    torch.manual_seed(20261203)
    cases = []
    cases.append(run_plain("SiLU", torch.nn.SiLU(), {}, {"x": torch.randn(2, 3, 5) * 2}, lambda m, x: m(x)))

    for label, shape, eps, affine in (("RMSNorm", 6, 1e-6, True), ("RMSNorm_2d_default_eps", [3, 4], None, True),
                                      ("RMSNorm_no_affine", 5, 1e-5, False)):
        m = RMSNormRef(shape, eps, affine)
        if affine:
            with torch.no_grad():
                m.weight.copy_(1 + 0.3 * torch.randn_like(m.weight))
        xshape = (2, 3) + ((shape,) if isinstance(shape, int) else tuple(shape))
        cfg = {"shape": shape, "elementwise_affine": affine}
        if eps is not None:
            cfg["eps"] = eps
        cases.append(run_plain(label, m, cfg, {"x": torch.randn(*xshape) * 1.5 + 0.2}, lambda m, x: m(x)))

    for act in ("swiglu", "geglu"):
        for bias in (True, False):
            ff = GatedFF(6, 10, act, bias)
            randomize(ff)
            cases.append(run_plain("FeedForward_%s%s" % (act, "" if bias else "_nobias"), ff,
                                   {"d_model": 6, "d_ff": 10, "activation": act, "bias": bias},
                                   {"x": torch.randn(2, 4, 6)}, lambda m, x: m(x)))

    # Flatten(start_dim=1, end_dim=2) in PyTorch's 0-based dims is ember's Flatten(2, 3)
    cases.append(run_plain("Flatten", torch.nn.Flatten(1, 2), {"start_dim": 2, "end_dim": 3},
                           {"x": torch.randn(2, 3, 4, 5)}, lambda m, x: m(x)))

    # A ModuleList of Linear-ReLU-Linear and a ModuleDict of two heads: the
    # state dict names are PyTorch's ("0.weight", "head_b.bias").
    ml = torch.nn.ModuleList([torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3)])

    def run_list(m, x):
        for layer in m:
            x = layer(x)
        return x

    cases.append(run_plain("ModuleList", ml, {}, {"x": torch.randn(3, 4)}, run_list))
    md = torch.nn.ModuleDict([("head_b", torch.nn.Linear(4, 2)), ("head_a", torch.nn.Linear(4, 2, bias=False))])
    cases.append(run_plain("ModuleDict", md, {"order": ["head_b", "head_a"]}, {"x": torch.randn(3, 4)},
                           lambda m, x: m["head_b"](x) * m["head_a"](x).tanh()))
    return cases + vision_cases() + activation_cases()


def activation_cases():
    """The activation modules and binary losses composed in
    lua/ember/_functional.lua (their own seed). Softmax's dim is ember's
    (1-based) in the config. The losses' targets are float32 multiples of
    1/8 (exact in either dtype), so they carry no gradient; weight and
    pos_weight are the state (ember's module buffers)."""
    torch.manual_seed(20261206)
    cases = []
    x = torch.randn(2, 3, 4) * 2
    x[0, 0, 0] = 0.0  # LeakyReLU's and ELU's derivative at 0
    for label, mod, cfg in (("Tanh", torch.nn.Tanh(), {}), ("Sigmoid", torch.nn.Sigmoid(), {}),
                            ("Softmax_dim2", torch.nn.Softmax(dim=1), {"dim": 2}),
                            ("LogSoftmax", torch.nn.LogSoftmax(dim=-1), {"dim": -1}),
                            ("LeakyReLU", torch.nn.LeakyReLU(0.2), {"negative_slope": 0.2}),
                            ("ELU", torch.nn.ELU(1.3), {"alpha": 1.3}),
                            ("Softplus", torch.nn.Softplus(beta=2, threshold=5), {"beta": 2, "threshold": 5})):
        cases.append(run_plain(label, mod, cfg, {"x": x.clone() * (3 if label == "Softplus" else 1)},
                               lambda m, x: m(x)))

    def loss_case(label, fn, cfg, logits, target, state):
        logits = logits.clone().requires_grad_(True)
        out = fn(logits, target.double(), **{k: v for k, v in state.items()}, reduction=cfg["reduction"])
        R = torch.randn_like(out)
        (out * R).sum().backward()
        return {"name": label, "config": cfg, "state": state,
                "inputs": {"x": logits.detach(), "target": target},
                "out": out.detach(), "R": R, "grad_inputs": {"x": logits.grad}, "grads": {}}

    F = torch.nn.functional
    logits = torch.randn(4, 3) * 3
    logits[0, 0], logits[0, 1], logits[0, 2] = 0.0, 40.0, -40.0
    hard = (torch.rand(4, 3) > 0.5).float()
    soft = torch.randint(0, 9, (4, 3)).float() / 8
    for red in ("mean", "sum", "none"):
        cases.append(loss_case("BCEWithLogitsLoss_" + red, F.binary_cross_entropy_with_logits,
                               {"reduction": red}, logits, hard, {}))
    cases.append(loss_case("BCEWithLogitsLoss_weights", F.binary_cross_entropy_with_logits, {"reduction": "mean"},
                           logits, soft, {"weight": torch.rand(4, 3) + 0.5, "pos_weight": torch.rand(3) * 3}))
    probs = torch.rand(4, 3) * 0.9 + 0.05
    cases.append(loss_case("BCELoss_mean", F.binary_cross_entropy, {"reduction": "mean"}, probs, soft, {}))
    cases.append(loss_case("BCELoss_weight_sum", F.binary_cross_entropy, {"reduction": "sum"}, probs, hard,
                           {"weight": torch.rand(4, 3) + 0.5}))

    # NLLLoss on log-probabilities; targets 1-based in the fixture
    logp = torch.log_softmax(torch.randn(6, 4), -1)
    cls = torch.tensor([0, 3, 2, 2, 1, 3])
    for label, red, weight, ignore in (("NLLLoss_mean", "mean", None, None),
                                       ("NLLLoss_weight_ignore", "mean", torch.rand(4) + 0.5, 2),
                                       ("NLLLoss_sum_ignore", "sum", None, 3), ("NLLLoss_none", "none", None, None)):
        x = logp.clone().requires_grad_(True)
        kw = {"reduction": red}
        if weight is not None:
            kw["weight"] = weight
        if ignore is not None:
            kw["ignore_index"] = ignore
        out = F.nll_loss(x, cls, **kw)
        R = torch.randn_like(out)
        (out * R).sum().backward()
        cfg = {"reduction": red}
        if ignore is not None:
            cfg["ignore_index"] = ignore + 1
        cases.append({"name": label, "config": cfg, "state": {"weight": weight} if weight is not None else {},
                      "inputs": {"x": x.detach(), "target": cls + 1}, "out": out.detach(), "R": R,
                      "grad_inputs": {"x": x.grad}, "grads": {}})

    # L1 and smooth L1 (targets float32, so they carry no gradient)
    pred, tgt = torch.randn(4, 5), torch.randn(4, 5).float()
    for red in ("mean", "sum"):
        cases.append(loss_case("L1Loss_" + red, F.l1_loss, {"reduction": red}, pred, tgt, {}))
    cases.append(loss_case("SmoothL1Loss_beta05", lambda x, t, reduction: F.smooth_l1_loss(x, t, reduction=reduction,
                                                                                          beta=0.5),
                           {"reduction": "mean", "beta": 0.5}, pred, tgt, {}))
    cases.append(loss_case("SmoothL1Loss_none", F.smooth_l1_loss, {"reduction": "none"}, pred, tgt, {}))
    return cases


def vision_cases():
    """BatchNorm2d, GroupNorm and the 2-d pools (their own seed). Configs are
    ember's: 1-based nothing here, sizes as {h, w} pairs."""
    torch.manual_seed(20261205)
    cases = []

    def bn_case(name, bn, x, cfg):
        randomize(bn)
        with torch.no_grad():
            bn.weight.copy_(1 + 0.3 * torch.randn_like(bn.weight))
        case = run_plain(name, bn, cfg, {"x": x}, lambda m, x: m(x))
        case["buffers"] = {n: b.detach().clone() for n, b in bn.named_buffers()}
        return case

    bn = torch.nn.BatchNorm2d(3)
    cases.append(bn_case("BatchNorm2d_train", bn, torch.randn(4, 3, 5, 5) * 2 + 0.5, {"num_features": 3}))
    # eval mode with running statistics of its own (loaded from "buffers_in")
    bn = torch.nn.BatchNorm2d(3, eps=1e-3)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(3))
        bn.running_var.copy_(torch.rand(3) + 0.5)
        bn.num_batches_tracked.fill_(7)
    before = {n: b.detach().clone() for n, b in bn.named_buffers()}
    bn.eval()
    case = bn_case("BatchNorm2d_eval", bn, torch.randn(2, 3, 4, 3), {"num_features": 3, "eps": 1e-3, "eval": True})
    case["buffers_in"] = before
    cases.append(case)
    # momentum=None: a cumulative average over two batches (the output of the second)
    bn = torch.nn.BatchNorm2d(2, momentum=None)
    x1 = torch.randn(3, 2, 4, 4) + 1
    with torch.no_grad():
        bn(x1)
    case = bn_case("BatchNorm2d_cumulative", bn, torch.randn(3, 2, 4, 4) * 0.5, {"num_features": 2, "momentum": False})
    case["first_batch"] = x1
    cases.append(case)

    for name, g, c, shape in (("GroupNorm", 2, 6, (2, 6, 3, 4)), ("GroupNorm_instance_3d", 3, 3, (2, 3, 5))):
        gn = torch.nn.GroupNorm(g, c)
        randomize(gn)
        with torch.no_grad():
            gn.weight.copy_(1 + 0.3 * torch.randn(c))
        cases.append(run_plain(name, gn, {"num_groups": g, "num_channels": c},
                               {"x": torch.randn(*shape) * 1.5 + 0.3}, lambda m, x: m(x)))

    def pool_case(name, mod, cfg, shape):
        cases.append(run_plain(name, mod, cfg, {"x": torch.randn(*shape)}, lambda m, x: m(x)))

    pool_case("MaxPool2d_k3s2p1", torch.nn.MaxPool2d(3, stride=2, padding=1),
              {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 3, 7, 6))
    pool_case("MaxPool2d_rect_dilated", torch.nn.MaxPool2d((2, 3), stride=(1, 2), dilation=(2, 1)),
              {"kernel_size": [2, 3], "stride": [1, 2], "dilation": [2, 1]}, (2, 2, 6, 7))
    pool_case("MaxPool2d_unbatched", torch.nn.MaxPool2d(2), {"kernel_size": 2}, (3, 6, 6))
    pool_case("AvgPool2d_k3s2p1", torch.nn.AvgPool2d(3, stride=2, padding=1),
              {"kernel_size": 3, "stride": 2, "padding": 1}, (2, 3, 7, 6))
    pool_case("AvgPool2d_k3s2p1_exclude_pad", torch.nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
              {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 7, 6))
    pool_case("AvgPool2d_rect_divisor", torch.nn.AvgPool2d((2, 3), stride=(2, 1), divisor_override=4),
              {"kernel_size": [2, 3], "stride": [2, 1], "divisor_override": 4}, (1, 2, 5, 6))
    pool_case("AdaptiveAvgPool2d_3x2", torch.nn.AdaptiveAvgPool2d((3, 2)), {"output_size": [3, 2]}, (2, 3, 7, 5))
    pool_case("AdaptiveAvgPool2d_1", torch.nn.AdaptiveAvgPool2d(1), {"output_size": 1}, (2, 4, 5, 3))
    pool_case("AdaptiveAvgPool2d_4_unbatched", torch.nn.AdaptiveAvgPool2d(4), {"output_size": 4}, (3, 10, 9))
    return cases


# ---------------------------------------------------------------- more PyTorch modules

def more_cases():
    """Modules PyTorch users expect (BatchNorm1d, the hard activations, GLU,
    PReLU, Unflatten, KLDiv/Huber losses, the distances, 2-d padding, 1-d
    pools, nearest Upsample, PixelShuffle) for tests/lua/nn_more_spec.lua,
    with their own seed. Configs are ember's (1-based dims). Each case also
    lists the module's PyTorch state_dict keys ("keys")."""
    torch.manual_seed(20261214)
    cases = []

    def plain(name, mod, cfg, inputs, forward=lambda m, x: m(x)):
        case = run_plain(name, mod, cfg, inputs, forward)
        case["keys"] = sorted(mod.state_dict().keys())
        case["buffers"] = {n: b.detach().clone() for n, b in mod.named_buffers()}
        cases.append(case)
        return case

    # BatchNorm1d: [N, C] and [N, C, L] in training, eval with running stats
    # of its own, momentum=None over two batches, and neither affine nor stats
    def bn(c, **kw):
        m = torch.nn.BatchNorm1d(c, **kw)
        if m.affine:
            with torch.no_grad():
                m.weight.copy_(1 + 0.3 * torch.randn(c))
                m.bias.copy_(0.3 * torch.randn(c))
        return m

    plain("BatchNorm1d_2d", bn(3), {"num_features": 3}, {"x": torch.randn(6, 3) * 2 + 0.5})
    plain("BatchNorm1d_3d", bn(4, momentum=0.3), {"num_features": 4, "momentum": 0.3},
          {"x": torch.randn(3, 4, 5) * 1.5 - 0.2})
    m = bn(3, eps=1e-3)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(3))
        m.running_var.copy_(torch.rand(3) + 0.5)
        m.num_batches_tracked.fill_(5)
    before = {n: b.detach().clone() for n, b in m.named_buffers()}
    m.eval()
    plain("BatchNorm1d_eval", m, {"num_features": 3, "eps": 1e-3, "eval": True}, {"x": torch.randn(2, 3, 4)})
    cases[-1]["buffers_in"] = before
    m = bn(2, momentum=None)
    x1 = torch.randn(5, 2, 3) + 1
    with torch.no_grad():
        m(x1)
    plain("BatchNorm1d_cumulative", m, {"num_features": 2, "momentum": False}, {"x": torch.randn(4, 2, 3) * 0.5})
    cases[-1]["first_batch"] = x1
    m = bn(3, affine=False, track_running_stats=False)
    m.eval()
    plain("BatchNorm1d_bare_eval", m, {"num_features": 3, "affine": False, "track_running_stats": False},
          {"x": torch.randn(5, 3) * 3})

    # activations; x holds the kinks exactly (0, +-1, +-3, 6, ...)
    x = torch.randn(2, 3, 4) * 3
    kinks = [0.0, 1.0, -1.0, 3.0, -3.0, 6.0, -2.0, 1.5, 2.0]
    x.view(-1)[:len(kinks)] = torch.tensor(kinks)
    for label, mod, cfg in (("ReLU6", torch.nn.ReLU6(), {}),
                            ("Hardtanh", torch.nn.Hardtanh(-2.0, 1.5), {"min_val": -2.0, "max_val": 1.5}),
                            ("Hardtanh_default", torch.nn.Hardtanh(), {}),
                            ("Hardswish", torch.nn.Hardswish(), {}), ("Hardsigmoid", torch.nn.Hardsigmoid(), {}),
                            ("Mish", torch.nn.Mish(), {}), ("Softsign", torch.nn.Softsign(), {}),
                            ("PReLU", torch.nn.PReLU(), {}),
                            ("GLU_dim2", torch.nn.GLU(dim=1), {"dim": 2}),
                            ("GLU_last", torch.nn.GLU(), {"dim": -1})):
        xx = x.clone()
        if label.startswith("GLU") and label.endswith("dim2"):
            xx = torch.randn(2, 6, 3)
        plain(label, mod, cfg, {"x": xx})
    m = torch.nn.PReLU(3, init=0.1)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.1, -0.4, 0.7]))
    plain("PReLU_channels", m, {"num_parameters": 3, "init": 0.1}, {"x": x.clone().reshape(2, 3, 4)})
    plain("Unflatten", torch.nn.Unflatten(1, (2, 3)), {"dim": 2, "sizes": [2, 3]}, {"x": torch.randn(2, 6, 4)})

    # losses: both arguments require grad (KLDiv's target > 0 here: PyTorch's
    # xlogy has a NaN gradient at a zero target)
    F = torch.nn.functional
    logp = torch.log_softmax(torch.randn(4, 5), -1)
    tp = torch.softmax(torch.randn(4, 5), -1)
    for red in ("mean", "batchmean", "sum", "none"):
        plain("KLDivLoss_" + red, torch.nn.KLDivLoss(reduction=red), {"reduction": red},
              {"x": logp.clone(), "target": tp.clone()}, lambda m, x, target: m(x, target))
    plain("KLDivLoss_log_target", torch.nn.KLDivLoss(reduction="batchmean", log_target=True),
          {"reduction": "batchmean", "log_target": True},
          {"x": logp.clone(), "target": torch.log(tp)}, lambda m, x, target: m(x, target))
    # a zero target: the loss there is 0 (xlogy); only the input's gradient
    tz = tp.clone()
    tz[0, 1] = 0.0
    xz = logp.clone().requires_grad_(True)
    out = F.kl_div(xz, tz, reduction="sum")
    R = torch.randn_like(out)
    (out * R).sum().backward()
    cases.append({"name": "KLDivLoss_zero_target", "config": {"reduction": "sum"}, "state": {}, "keys": [],
                  "inputs": {"x": xz.detach(), "target": tz.float()}, "target64": tz, "out": out.detach(), "R": R,
                  "grad_inputs": {"x": xz.grad}, "grads": {}, "buffers": {}})
    pred, tgt = torch.randn(4, 5), torch.randn(4, 5)
    pred[0, 0], tgt[0, 0] = 0.5, 0.0  # |d| = delta exactly
    pred[0, 1], tgt[0, 1] = 1.0, 0.0
    for label, delta, red in (("HuberLoss_mean", 1.0, "mean"), ("HuberLoss_delta05_sum", 0.5, "sum"),
                              ("HuberLoss_delta2_none", 2.0, "none")):
        plain(label, torch.nn.HuberLoss(reduction=red, delta=delta), {"reduction": red, "delta": delta},
              {"x": pred.clone() * 2, "target": tgt.clone()}, lambda m, x, target: m(x, target))
    plain("CosineSimilarity", torch.nn.CosineSimilarity(), {"dim": 2},
          {"x": torch.randn(3, 5, 2), "x2": torch.randn(3, 5, 2)}, lambda m, x, x2: m(x, x2))
    plain("CosineSimilarity_last_broadcast", torch.nn.CosineSimilarity(dim=-1, eps=1e-6), {"dim": -1, "eps": 1e-6},
          {"x": torch.randn(4, 6), "x2": torch.randn(1, 6)}, lambda m, x, x2: m(x, x2))
    for label, kw, cfg in (("PairwiseDistance", {}, {}), ("PairwiseDistance_p1_keepdim", {"p": 1.0, "keepdim": True},
                                                          {"p": 1, "keepdim": True}),
                           ("PairwiseDistance_p3_eps", {"p": 3.0, "eps": 1e-3}, {"p": 3, "eps": 1e-3})):
        plain(label, torch.nn.PairwiseDistance(**kw), cfg, {"x": torch.randn(4, 6), "x2": torch.randn(4, 6)},
              lambda m, x, x2: m(x, x2))

    # padding
    for label, mod, cfg, shape in (
            ("ZeroPad2d", torch.nn.ZeroPad2d((1, 2, 0, 1)), {"padding": [1, 2, 0, 1]}, (2, 3, 4, 5)),
            ("ZeroPad2d_int", torch.nn.ZeroPad2d(2), {"padding": 2}, (3, 2, 3)),
            ("ConstantPad2d_crop", torch.nn.ConstantPad2d((1, 0, -1, 2), 0.5), {"padding": [1, 0, -1, 2], "value": 0.5},
             (2, 2, 4, 3)),
            ("ReflectionPad2d", torch.nn.ReflectionPad2d((2, 1, 1, 3)), {"padding": [2, 1, 1, 3]}, (2, 2, 4, 5)),
            ("ReflectionPad2d_unbatched", torch.nn.ReflectionPad2d(1), {"padding": 1}, (3, 3, 3)),
            ("ReplicationPad2d", torch.nn.ReplicationPad2d((1, 2, 3, 0)), {"padding": [1, 2, 3, 0]}, (2, 2, 3, 4))):
        plain(label, mod, cfg, {"x": torch.randn(*shape)})

    # 1-d pools
    for label, mod, cfg, shape in (
            ("MaxPool1d_k3s2p1", torch.nn.MaxPool1d(3, stride=2, padding=1), {"kernel_size": 3, "stride": 2, "padding": 1},
             (2, 3, 9)),
            ("MaxPool1d_dilated_unbatched", torch.nn.MaxPool1d(2, stride=1, dilation=2),
             {"kernel_size": 2, "stride": 1, "dilation": 2}, (3, 8)),
            ("AvgPool1d_k3s2p1", torch.nn.AvgPool1d(3, stride=2, padding=1), {"kernel_size": 3, "stride": 2, "padding": 1},
             (2, 3, 9)),
            ("AvgPool1d_exclude_pad", torch.nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False),
             {"kernel_size": 4, "stride": 3, "padding": 2, "count_include_pad": False}, (2, 2, 10)),
            ("AdaptiveAvgPool1d_3", torch.nn.AdaptiveAvgPool1d(3), {"output_size": 3}, (2, 3, 7)),
            ("AdaptiveAvgPool1d_4_unbatched", torch.nn.AdaptiveAvgPool1d(4), {"output_size": 4}, (3, 10))):
        plain(label, mod, cfg, {"x": torch.randn(*shape)})

    # nearest upsampling (fractional factors pick PyTorch's float32 rows) and pixel shuffles
    for label, mod, cfg in (("Upsample_x2", torch.nn.Upsample(scale_factor=2), {"scale_factor": 2}),
                            ("Upsample_x1.5", torch.nn.Upsample(scale_factor=1.5), {"scale_factor": 1.5}),
                            ("Upsample_x2.6_x3", torch.nn.Upsample(scale_factor=(2.6, 3)), {"scale_factor": [2.6, 3]}),
                            ("Upsample_size", torch.nn.Upsample(size=(5, 7)), {"size": [5, 7]}),
                            ("Upsample_size_down", torch.nn.Upsample(size=(2, 3)), {"size": [2, 3]})):
        plain(label, mod, cfg, {"x": torch.randn(2, 2, 3, 4)})
    plain("PixelShuffle", torch.nn.PixelShuffle(2), {"upscale_factor": 2}, {"x": torch.randn(2, 12, 3, 4)})
    plain("PixelShuffle_5d", torch.nn.PixelShuffle(3), {"upscale_factor": 3}, {"x": torch.randn(2, 2, 9, 2, 3)})
    plain("PixelUnshuffle", torch.nn.PixelUnshuffle(2), {"downscale_factor": 2}, {"x": torch.randn(2, 3, 4, 6)})
    plain("PixelUnshuffle_unbatched", torch.nn.PixelUnshuffle(3), {"downscale_factor": 3}, {"x": torch.randn(2, 6, 3)})
    return cases


def init_cases():
    """nn.init's formulas, through PyTorch's own helpers."""
    init = torch.nn.init
    gains = []
    for nl, a in (("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                  ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)):
        gains.append({"nonlinearity": nl, "param": a if a is not None else False,
                      "gain": init.calculate_gain(nl, a)})
    shapes = []
    for shape in ((5, 3), (7, 4, 3), (8, 3, 5, 5), (6, 2, 3, 3, 2)):
        t = torch.empty(*shape)
        fan_in, fan_out = init._calculate_fan_in_and_fan_out(t)
        entry = {"shape": list(shape), "fan_in": fan_in, "fan_out": fan_out}
        # the bound of uniform and the std of normal each initializer gives
        entry["xavier_uniform_bound"] = 1.0 * math.sqrt(6.0 / (fan_in + fan_out))
        entry["xavier_normal_std"] = 1.0 * math.sqrt(2.0 / (fan_in + fan_out))
        gain = init.calculate_gain("leaky_relu", 0.1)
        entry["kaiming_uniform_a0.1_fan_in_bound"] = gain * math.sqrt(3.0 / fan_in)
        entry["kaiming_normal_relu_fan_out_std"] = init.calculate_gain("relu") / math.sqrt(fan_out)
        shapes.append(entry)
        # PyTorch's own initializers stay inside those bounds and near those stds
        big = torch.empty(*shape)
        init.xavier_uniform_(big)
        assert big.abs().max() <= entry["xavier_uniform_bound"]
        init.kaiming_uniform_(big, a=0.1)
        assert big.abs().max() <= entry["kaiming_uniform_a0.1_fan_in_bound"]
    # trunc_normal_'s mean and std: the truncated normal's moments
    trunc = []
    for mean, std, a, b in ((0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 3.0), (0.0, 0.02, -0.04, 0.04),
                            (1.0, 1.0, 1.5, 4.0)):
        def phi(z):
            return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

        def Phi(z):
            return 0.5 * (1 + math.erf(z / math.sqrt(2)))

        al, be = (a - mean) / std, (b - mean) / std
        Z = Phi(be) - Phi(al)
        m = mean + std * (phi(al) - phi(be)) / Z
        var = std * std * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
        # kurtosis (for the spec's tolerance on the sample std), by the midpoint rule
        K = 200000
        xs = [a + (b - a) * (i + 0.5) / K for i in range(K)]
        ws = [phi((x - mean) / std) for x in xs]
        W = sum(ws)
        m4 = sum(w * (x - m) ** 4 for w, x in zip(ws, xs)) / W
        kurt = m4 / (var * var)
        sample = init.trunc_normal_(torch.empty(400000), mean, std, a, b)
        assert abs(float(sample.mean()) - m) < 6 * math.sqrt(var / 400000)
        assert abs(float(sample.std()) - math.sqrt(var)) < 0.01 * math.sqrt(var)
        trunc.append({"mean": mean, "std": std, "a": a, "b": b, "t_mean": m, "t_std": math.sqrt(var),
                      "t_kurtosis": kurt})
    return {"gains": gains, "shapes": shapes, "trunc_normal": trunc}


def write(path, value):
    Writer(keys="quoted").write(path, "tests/gen_nn_fixtures.py", value)


def cross_entropy_cases():
    """nn.CrossEntropyLoss with class weights (with label smoothing and
    ignore_index, every reduction), and [B, C, L] logits (ember's [B, L, C]:
    the spec permutes), own seed. Targets are written 1-based; "R" weights
    the per-element losses of reduction "none"."""
    torch.manual_seed(20261215)
    out = []
    specs = [
        ({"weight": True}, "mean"), ({"weight": True}, "sum"), ({"weight": True}, "none"),
        ({"weight": True, "label_smoothing": 0.2}, "mean"), ({"weight": True, "label_smoothing": 0.2}, "none"),
        ({"weight": True, "ignore_index": 2, "label_smoothing": 0.1}, "mean"),
        ({"ignore_index": 2, "label_smoothing": 0.3}, "mean"), ({"label_smoothing": 0.1, "three_d": True}, "mean"),
        ({"weight": True, "three_d": True}, "mean"),
    ]
    for opts, red in specs:
        three = opts.get("three_d", False)
        logits = torch.randn(2, 4, 3) if three else torch.randn(7, 4)  # [B, C, L] or [N, C]
        logits.requires_grad_(True)
        target = torch.randint(0, 4, (2, 3) if three else (7,))
        if "ignore_index" in opts:
            target[0] = opts["ignore_index"] - 1  # 1-based ignore_index in ember
            if not three:
                target[3] = opts["ignore_index"] - 1
        w = torch.rand(4) + 0.25 if opts.get("weight") else None
        loss = torch.nn.functional.cross_entropy(
            logits, target, weight=w, reduction=red, label_smoothing=opts.get("label_smoothing", 0.0),
            ignore_index=opts["ignore_index"] - 1 if "ignore_index" in opts else -100)
        R = torch.randn_like(loss)
        (loss * R).sum().backward()
        case = {"reduction": red, "three_d": three, "logits": logits.detach(), "target": (target + 1).tolist(),
                "loss": loss.detach(), "R": R, "grad": logits.grad.clone(),
                "label_smoothing": opts.get("label_smoothing", 0.0)}
        if w is not None:
            case["weight"] = w
        if "ignore_index" in opts:
            case["ignore_index"] = opts["ignore_index"]
        out.append(case)
    return out


def rnn_cases():
    """nn.RNN (tanh, relu), nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell against
    PyTorch 1.13, own seed (tests/fixtures/nn_rnn.lua). Each case: the kind, the
    sizes and ember's options, the parameter names in PyTorch's order (the state
    dict's keys), the state, the inputs (x, and h0 / c0 when the case passes hx),
    the outputs (out; h_n, c_n: for a cell h' is out and c' is c_n) and the
    gradients of sum(out * R) + sum(h_n * R_h) + sum(c_n * R_c) with respect to
    the inputs and every parameter; float64, PyTorch's own initialisation."""
    torch.manual_seed(20261221)
    specs = [
        # name, kind, input_size, hidden_size, options, L, N (None: unbatched), hx, train
        ("RNN_tanh", "RNN", 3, 4, {}, 5, 2, False, True),
        ("RNN_relu_2layers_hx", "RNN", 3, 4, {"num_layers": 2, "nonlinearity": "relu"}, 5, 2, True, True),
        ("RNN_bidir_batch_first_hx", "RNN", 3, 4, {"bidirectional": True, "batch_first": True}, 4, 3, True, True),
        ("RNN_dropout_eval", "RNN", 3, 4, {"num_layers": 2, "dropout": 0.5}, 4, 2, False, False),
        ("LSTM", "LSTM", 3, 4, {}, 5, 2, False, True),
        ("LSTM_hx", "LSTM", 3, 4, {}, 5, 2, True, True),
        ("LSTM_2layers_bidir_hx", "LSTM", 3, 4, {"num_layers": 2, "bidirectional": True}, 5, 2, True, True),
        ("LSTM_2layers_batch_first", "LSTM", 3, 5, {"num_layers": 2, "batch_first": True}, 4, 3, False, True),
        ("LSTM_unbatched_hx", "LSTM", 3, 4, {"num_layers": 2}, 6, None, True, True),
        ("LSTM_nobias_bidir_batch_first_hx", "LSTM", 2, 3,
         {"bias": False, "bidirectional": True, "batch_first": True}, 4, 2, True, True),
        ("GRU", "GRU", 3, 4, {}, 5, 2, False, True),
        ("GRU_2layers_bidir_batch_first_hx", "GRU", 3, 4,
         {"num_layers": 2, "bidirectional": True, "batch_first": True}, 4, 3, True, True),
        ("GRU_unbatched", "GRU", 3, 4, {}, 6, None, False, True),
        ("GRU_nobias_2layers_hx", "GRU", 3, 4, {"bias": False, "num_layers": 2}, 5, 2, True, True),
        ("LSTMCell_hx", "LSTMCell", 3, 4, {}, None, 3, True, True),
        ("LSTMCell_unbatched", "LSTMCell", 3, 4, {}, None, None, False, True),
        ("GRUCell_hx", "GRUCell", 3, 4, {}, None, 3, True, True),
        ("GRUCell_unbatched_nobias", "GRUCell", 3, 4, {"bias": False}, None, None, False, True),
    ]
    cases = []
    for name, kind, isz, hsz, opts, L, N, with_hx, train in specs:
        cell = kind.endswith("Cell")
        m = getattr(torch.nn, kind)(isz, hsz, **opts)
        m.train(train)
        D = 2 if opts.get("bidirectional") else 1
        S = D * opts.get("num_layers", 1)
        if cell:
            xshape = (N, isz) if N else (isz,)
            hshape = (N, hsz) if N else (hsz,)
        else:
            xshape = ((N, L, isz) if opts.get("batch_first") else (L, N, isz)) if N else (L, isz)
            hshape = (S, N, hsz) if N else (S, hsz)
        inputs = {"x": torch.randn(*xshape)}
        if with_hx:
            inputs["h0"] = torch.randn(*hshape) * 0.5
            if kind.startswith("LSTM"):
                inputs["c0"] = torch.randn(*hshape) * 0.5
        for t in inputs.values():
            t.requires_grad_(True)
        hx = None
        if with_hx:
            hx = (inputs["h0"], inputs["c0"]) if kind.startswith("LSTM") else inputs["h0"]
        res = m(inputs["x"], hx)
        if kind == "LSTMCell":
            out, h_n, c_n = res[0], None, res[1]
        elif cell:
            out, h_n, c_n = res, None, None
        elif kind == "LSTM":
            out, (h_n, c_n) = res
        else:
            out, (h_n, c_n) = res[0], (res[1], None)
        case = {"name": name, "kind": kind, "input_size": isz, "hidden_size": hsz, "options": opts,
                "train": train, "param_names": list(m.state_dict().keys()),
                "state": {n: p.detach().clone() for n, p in m.named_parameters()},
                "inputs": {k: v.detach() for k, v in inputs.items()}, "out": out.detach()}
        R = torch.randn_like(out)
        loss = (out * R).sum()
        case["R"] = R
        if h_n is not None:
            case["h_n"] = h_n.detach()
            case["R_h"] = torch.randn_like(h_n)
            loss = loss + (h_n * case["R_h"]).sum()
        if c_n is not None:
            case["c_n"] = c_n.detach()
            case["R_c"] = torch.randn_like(c_n)
            loss = loss + (c_n * case["R_c"]).sum()
        loss.backward()
        case["grad_inputs"] = {k: v.grad for k, v in inputs.items()}
        case["grads"] = {n: p.grad.clone() for n, p in m.named_parameters()}
        cases.append(case)
    return cases


STEPS_MORE = 10


def optim_more_cases():
    """NAdam, RAdam, Adamax, Adadelta and Adam/AdamW with amsgrad on the
    loss of optim_cases() (their own p0, A, B and seed), 10 steps (RAdam's
    rectified branch starts at step 6 with beta2 0.9). NAdam's reference is
    1.13's foreach path: its default single-tensor loop has the mu_product
    bug PyTorch 2.0 fixed (see lua/ember/optim/NAdam.lua)."""
    torch.manual_seed(20261221)
    p0 = torch.randn(3, 4)
    A = torch.rand(3, 4) + 0.5
    B = torch.randn(3, 4)
    specs = [
        ("NAdam", {"lr": 0.01}),
        ("NAdam", {"lr": 0.02, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1, "momentum_decay": 0.01}),
        ("RAdam", {"lr": 0.01}),
        ("RAdam", {"lr": 0.05, "betas": [0.9, 0.9], "eps": 1e-6, "weight_decay": 0.1}),
        ("Adamax", {"lr": 0.02}),
        ("Adamax", {"lr": 0.05, "betas": [0.8, 0.9], "eps": 1e-4, "weight_decay": 0.1}),
        ("Adamax", {"lr": 0.02, "maximize": True}),
        ("Adadelta", {}),
        ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}),
        ("Adadelta", {"lr": 0.3, "maximize": True}),
        ("Adam", {"lr": 0.05, "amsgrad": True}),
        ("Adam", {"lr": 0.05, "betas": [0.8, 0.9], "weight_decay": 0.1, "amsgrad": True}),
        ("AdamW", {"lr": 0.05, "betas": [0.9, 0.8], "weight_decay": 0.5, "amsgrad": True}),
    ]
    out = []
    global STEPS
    saved, STEPS = STEPS, STEPS_MORE
    try:
        for name, kw in specs:
            tkw = dict(kw)
            if "betas" in tkw:
                tkw["betas"] = tuple(tkw["betas"])
            if name == "NAdam":
                tkw["foreach"] = True
            cls = getattr(torch.optim, name)
            traj = trajectory(lambda ps: cls(ps, **tkw), p0, A, B)
            out.append({"optimizer": name, "options": kw, "trajectory": traj})
    finally:
        STEPS = saved
    return {"p0": p0, "A": A, "B": B, "steps": STEPS_MORE, "cases": out}


def schedule_more_cases():
    """torch.optim.lr_scheduler's LinearLR, ConstantLR, PolynomialLR,
    CosineAnnealingWarmRestarts (also stepped to given epochs), OneCycleLR,
    CyclicLR and SequentialLR: the lrs of two parameter groups (lr 0.1 and
    0.05) at construction and after each step, and with cycle_momentum the
    momentum (SGD's, or Adam's beta1; beta2 recorded to check it stays).
    "scale_fn": "inv" is 1 / (x + 1)."""
    L = torch.optim.lr_scheduler
    fns = {"inv": lambda x: 1 / (x + 1)}

    def make(opt, spec):
        name, kw = spec["scheduler"], dict(spec.get("options", {}))
        if name == "SequentialLR":
            subs = [make(opt, s) for s in spec["schedulers"]]
            return L.SequentialLR(opt, subs, spec["milestones"])
        if "scale_fn" in kw:
            kw["scale_fn"] = fns[kw["scale_fn"]]
        return getattr(L, name)(opt, **kw)

    specs = [
        {"scheduler": "LinearLR", "steps": 8},
        {"scheduler": "LinearLR", "options": {"start_factor": 0.25, "end_factor": 0.75, "total_iters": 4}, "steps": 7},
        {"scheduler": "ConstantLR", "steps": 8},
        {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 3}, "steps": 6},
        {"scheduler": "PolynomialLR", "steps": 8},
        {"scheduler": "PolynomialLR", "options": {"total_iters": 6, "power": 2.0}, "steps": 8},
        {"scheduler": "PolynomialLR", "options": {"total_iters": 4, "power": 0.5}, "steps": 6},
        {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 3}, "steps": 10},
        {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 2, "T_mult": 2, "eta_min": 0.01},
         "steps": 16},
        {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 2, "T_mult": 3, "eta_min": 0.001},
         "epochs": [0.5, 1.75, 2, 5.5, 9, 20.25, 3, 0, 7.999]},
        {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 4}, "epochs": [1.5, 4, 6.25, 13, 2]},
        {"scheduler": "OneCycleLR", "options": {"max_lr": [0.1, 0.2], "total_steps": 20}, "steps": 20,
         "momentum": 0.9},
        {"scheduler": "OneCycleLR", "options": {"max_lr": 0.5, "epochs": 4, "steps_per_epoch": 5, "pct_start": 0.25,
                                                "anneal_strategy": "linear", "three_phase": True, "div_factor": 10.0,
                                                "final_div_factor": 100.0, "base_momentum": [0.8, 0.7],
                                                "max_momentum": 0.9}, "steps": 20, "momentum": 0.9},
        {"scheduler": "OneCycleLR", "options": {"max_lr": 0.01, "total_steps": 15, "pct_start": 0.4}, "steps": 15,
         "optimizer": "Adam"},
        {"scheduler": "OneCycleLR", "options": {"max_lr": 0.3, "total_steps": 12, "cycle_momentum": False,
                                                "three_phase": True}, "steps": 12},
        {"scheduler": "CyclicLR", "options": {"base_lr": 0.01, "max_lr": [0.1, 0.2], "step_size_up": 3,
                                              "step_size_down": 2}, "steps": 14, "momentum": 0.9},
        {"scheduler": "CyclicLR", "options": {"base_lr": [0.01, 0.02], "max_lr": 0.1, "step_size_up": 2,
                                              "mode": "triangular2", "base_momentum": 0.85,
                                              "max_momentum": [0.95, 0.9]}, "steps": 14, "momentum": 0.9},
        {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 3, "mode": "exp_range",
                                              "gamma": 0.9}, "steps": 14, "momentum": 0.9},
        {"scheduler": "CyclicLR", "options": {"base_lr": 0.001, "max_lr": 0.1, "step_size_up": 2, "scale_fn": "inv",
                                              "scale_mode": "iterations", "cycle_momentum": False},
         "steps": 10, "optimizer": "Adam"},
        {"scheduler": "SequentialLR", "schedulers": [
            {"scheduler": "LinearLR", "options": {"start_factor": 0.1, "total_iters": 3}},
            {"scheduler": "ExponentialLR", "options": {"gamma": 0.9}}], "milestones": [3], "steps": 10},
        {"scheduler": "SequentialLR", "schedulers": [
            {"scheduler": "ConstantLR", "options": {"factor": 0.5, "total_iters": 2}},
            {"scheduler": "CosineAnnealingLR", "options": {"T_max": 4, "eta_min": 0.001}},
            {"scheduler": "StepLR", "options": {"step_size": 2, "gamma": 0.5}}], "milestones": [2, 7], "steps": 14},
        {"scheduler": "SequentialLR", "schedulers": [
            {"scheduler": "LinearLR", "options": {"start_factor": 0.5, "total_iters": 4}},
            {"scheduler": "CosineAnnealingWarmRestarts", "options": {"T_0": 3}}], "milestones": [4], "steps": 12},
    ]
    out = []
    for spec in specs:
        a = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        groups = [{"params": [a]}, {"params": [b], "lr": 0.05}]
        if spec.get("optimizer") == "Adam":
            opt = torch.optim.Adam(groups, lr=0.1, betas=(0.9, 0.99))
        else:
            opt = torch.optim.SGD(groups, lr=0.1, momentum=spec.get("momentum", 0.0))
        sched = make(opt, spec)

        def record():
            lrs.append([g["lr"] for g in opt.param_groups])
            if "betas" in opt.param_groups[0]:
                moms.append([g["betas"][0] for g in opt.param_groups])
                beta2.append([g["betas"][1] for g in opt.param_groups])
            else:
                moms.append([g["momentum"] for g in opt.param_groups])

        lrs, moms, beta2 = [], [], []
        record()
        if "epochs" in spec:
            for e in spec["epochs"]:
                opt.step()
                sched.step(e)
                record()
        else:
            for _ in range(spec["steps"]):
                opt.step()
                sched.step()
                record()
        case = {k: v for k, v in spec.items()}
        case.setdefault("optimizer", "SGD")
        case["lrs"], case["momentums"] = lrs, moms
        if beta2:
            case["beta2"] = beta2
        out.append(case)
    return out


def extra_cases():
    """The nn modules of tests/lua/nn_extra_spec.lua (tests/fixtures/nn_extra.lua),
    own seed: ConvTranspose1d/2d, InstanceNorm1d/2d (running stats too),
    EmbeddingBag (sum/mean/max, offsets and 2-d forms, padding_idx,
    per_sample_weights), Transformer (PyTorch's names and masks), Bilinear,
    TripletMarginLoss, MarginRankingLoss. As more_cases: configs are ember's,
    ids, offsets and padding_idx 1-based; each case lists the module's PyTorch
    state_dict keys ("keys") and its buffers after the forward ("buffers")."""
    torch.manual_seed(20261206)
    cases = []

    def plain(name, mod, cfg, inputs, forward=lambda m, x: m(x), **extra):
        case = run_plain(name, mod, cfg, inputs, forward)
        case["keys"] = sorted(mod.state_dict().keys())
        case["buffers"] = {n: b.detach().clone() for n, b in mod.named_buffers()}
        case.update(extra)
        cases.append(case)
        return case

    # ConvTranspose2d / 1d: PyTorch's own initialisation
    ct = lambda cls, *args, **kw: cls(*args, **kw)  # noqa: E731

    plain("ConvTranspose2d", ct(torch.nn.ConvTranspose2d, 3, 4, 3), {}, {"x": torch.randn(2, 3, 4, 5)})
    plain("ConvTranspose2d_s2p1op1", ct(torch.nn.ConvTranspose2d, 3, 2, 3, stride=2, padding=1, output_padding=1),
          {}, {"x": torch.randn(2, 3, 4, 3)})
    plain("ConvTranspose2d_groups_dilation", ct(torch.nn.ConvTranspose2d, 4, 6, (2, 3), stride=(2, 1), padding=(0, 1),
                                                dilation=(2, 1), groups=2), {}, {"x": torch.randn(2, 4, 3, 4)})
    plain("ConvTranspose2d_crop_nobias_unbatched", ct(torch.nn.ConvTranspose2d, 2, 3, 3, stride=3, padding=3,
                                                      output_padding=(2, 0), bias=False), {},
          {"x": torch.randn(2, 4, 4)})
    plain("ConvTranspose2d_depthwise_output_size", ct(torch.nn.ConvTranspose2d, 3, 3, 3, stride=2, padding=1,
                                                      groups=3), {"output_size": [8, 7]},
          {"x": torch.randn(1, 3, 4, 4)}, lambda m, x: m(x, output_size=[8, 7]))
    plain("ConvTranspose1d", ct(torch.nn.ConvTranspose1d, 3, 4, 3), {}, {"x": torch.randn(2, 3, 6)})
    plain("ConvTranspose1d_groups_stride_op", ct(torch.nn.ConvTranspose1d, 4, 6, 3, stride=3, padding=1,
                                                 output_padding=2, dilation=2, groups=2), {},
          {"x": torch.randn(2, 4, 5)})
    plain("ConvTranspose1d_unbatched_dilation_op", ct(torch.nn.ConvTranspose1d, 2, 2, 2, dilation=3,
                                                      output_padding=2, bias=False), {}, {"x": torch.randn(2, 5)})

    # InstanceNorm1d / 2d
    def inorm(cls, c, **kw):
        m = cls(c, **kw)
        if m.affine:
            with torch.no_grad():
                m.weight.copy_(1 + 0.3 * torch.randn(c))
                m.bias.copy_(0.3 * torch.randn(c))
        return m

    plain("InstanceNorm1d", inorm(torch.nn.InstanceNorm1d, 3), {}, {"x": torch.randn(2, 3, 5) * 2 + 0.5})
    plain("InstanceNorm1d_affine_unbatched", inorm(torch.nn.InstanceNorm1d, 3, affine=True, eps=1e-3), {},
          {"x": torch.randn(3, 6) * 1.5 - 1})
    plain("InstanceNorm2d_affine_track", inorm(torch.nn.InstanceNorm2d, 4, affine=True, track_running_stats=True,
                                               momentum=0.3), {}, {"x": torch.randn(3, 4, 3, 5) * 2 + 1})
    m = inorm(torch.nn.InstanceNorm2d, 3, affine=True, track_running_stats=True)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(3))
        m.running_var.copy_(torch.rand(3) + 0.5)
    m.eval()
    c = plain("InstanceNorm2d_track_eval", m, {}, {"x": torch.randn(2, 3, 4, 4)})
    c["buffers_in"] = c["buffers"]
    plain("InstanceNorm2d_unbatched", inorm(torch.nn.InstanceNorm2d, 2), {}, {"x": torch.randn(2, 3, 4)})

    # EmbeddingBag: ids, offsets and padding_idx are 1-based in the fixture
    def bag(name, n, d, inputs, mode="mean", padding_idx=None, **kw):
        m = torch.nn.EmbeddingBag(n, d, mode=mode, padding_idx=padding_idx, **kw)
        cfg = {"mode": mode}
        if padding_idx is not None:
            cfg["padding_idx"] = padding_idx + 1
        for k, v in kw.items():
            cfg[k] = v
        ids, offsets = inputs["input"], inputs.get("offsets")
        case = run_plain(name, m, cfg, inputs, lambda mod, **kw2: mod(**kw2))
        case["inputs"]["input"] = ids + 1
        if offsets is not None:
            case["inputs"]["offsets"] = offsets + 1
        case["keys"] = sorted(m.state_dict().keys())
        cases.append(case)

    ids = torch.tensor([2, 0, 4, 4, 7, 1, 3, 5, 6])
    off = torch.tensor([0, 3, 3, 7])  # bag 2 is empty
    bag("EmbeddingBag_mean_offsets", 8, 3, {"input": ids, "offsets": off})
    bag("EmbeddingBag_sum_offsets_psw", 8, 3, {"input": ids, "offsets": off,
                                               "per_sample_weights": torch.randn(9)}, mode="sum")
    bag("EmbeddingBag_max_offsets", 8, 3, {"input": ids, "offsets": off}, mode="max")
    bag("EmbeddingBag_mean_2d_padding", 6, 4, {"input": torch.tensor([[1, 2, 2], [0, 0, 5], [0, 0, 0]])},
        padding_idx=0)
    bag("EmbeddingBag_max_2d_padding", 6, 4, {"input": torch.tensor([[1, 3, 2], [4, 0, 5]])}, mode="max",
        padding_idx=0)
    bag("EmbeddingBag_sum_last_offset_padding", 7, 2, {"input": torch.tensor([3, 6, 1, 3, 0, 2]),
                                                      "offsets": torch.tensor([0, 2, 2, 6])}, mode="sum",
        padding_idx=3, include_last_offset=True)

    # Transformer: PyTorch's names; dropout 0 in training mode (1.13's fast path is for eval)
    def tf(name, cfg, B, Ls, Lt, masks=None):
        m = torch.nn.Transformer(batch_first=True, dropout=0.0, **cfg)
        randomize(m)
        src, tgt = torch.randn(B, Ls, cfg["d_model"]), torch.randn(B, Lt, cfg["d_model"])
        masks = masks or {}
        case = run_plain(name, m, cfg, {"src": src, "tgt": tgt, **masks}, lambda mod, src, tgt, **mk: mod(src, tgt, **mk))
        case["keys"] = sorted(m.state_dict().keys())
        # ember's attention takes float masks as constants (no gradient)
        for k in masks:
            case["grad_inputs"].pop(k, None)
        cases.append(case)

    small = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 1, "dim_feedforward": 12}
    tf("Transformer", small, 2, 5, 4)
    pad_s = torch.tensor([[False] * 5, [False, False, False, True, True]])
    pad_t = torch.tensor([[False] * 4, [False, False, False, True]])
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    tf("Transformer_masks", small, 2, 5, 4, {"tgt_mask": tmask, "src_key_padding_mask": pad_s,
                                             "tgt_key_padding_mask": pad_t, "memory_key_padding_mask": pad_s})
    smask = torch.randn(5, 5) * 0.5
    mmask = torch.randn(4, 5) * 0.5
    tf("Transformer_norm_first_gelu_float_masks",
       {"d_model": 8, "nhead": 4, "num_encoder_layers": 1, "num_decoder_layers": 2, "dim_feedforward": 6,
        "norm_first": True, "activation": "gelu", "layer_norm_eps": 1e-4}, 2, 5, 3,
       {"src_mask": smask, "tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(3),
        "memory_mask": mmask[:3]})
    cases.append({"name": "square_subsequent_mask", "out": torch.nn.Transformer.generate_square_subsequent_mask(4)})

    # Bilinear, TripletMarginLoss, MarginRankingLoss
    plain("Bilinear", torch.nn.Bilinear(3, 4, 2), {}, {"x1": torch.randn(5, 3), "x2": torch.randn(5, 4)},
          lambda m, x1, x2: m(x1, x2))
    plain("Bilinear_nobias_3d", torch.nn.Bilinear(2, 3, 4, bias=False), {},
          {"x1": torch.randn(2, 3, 2), "x2": torch.randn(2, 3, 3)}, lambda m, x1, x2: m(x1, x2))
    trip = {"a": torch.randn(5, 4), "p": torch.randn(5, 4), "n": torch.randn(5, 4)}
    for nm, kw in [("TripletMarginLoss", {}), ("TripletMarginLoss_p1_swap_sum", {"p": 1.0, "swap": True, "reduction": "sum"}),
                   ("TripletMarginLoss_margin2_none", {"margin": 2.0, "reduction": "none", "eps": 1e-3})]:
        plain(nm, torch.nn.TripletMarginLoss(**kw), kw, {k: v.clone() for k, v in trip.items()},
              lambda m, a, p, n: m(a, p, n))
    rk = {"x1": torch.randn(6), "x2": torch.randn(6), "y": torch.tensor([1., -1, 1, 1, -1, -1])}
    for nm, kw in [("MarginRankingLoss", {}), ("MarginRankingLoss_margin_sum", {"margin": 0.5, "reduction": "sum"}),
                   ("MarginRankingLoss_none", {"margin": 0.2, "reduction": "none"})]:
        plain(nm, torch.nn.MarginRankingLoss(**kw), kw, {k: v.clone() for k, v in rk.items()},
              lambda m, x1, x2, y: m(x1, x2, y))
    return cases


def probe_cases():
    """nn.CrossEntropyLoss against class probabilities (soft targets shaped
    like the logits: PyTorch 1.10+'s), with class weights, label smoothing
    and every reduction, and [B, C, L] logits (ember's [B, L, C]: the spec
    permutes logits and target), own seed. "R" weights the per-element
    losses of reduction "none"."""
    torch.manual_seed(20261206)
    out = []
    specs = [({}, "mean"), ({"weight": True}, "mean"), ({"label_smoothing": 0.2}, "mean"),
             ({"weight": True, "label_smoothing": 0.1}, "sum"), ({"weight": True}, "none"),
             ({"three_d": True}, "none"), ({"three_d": True, "label_smoothing": 0.3}, "mean")]
    for opts, red in specs:
        three = opts.get("three_d", False)
        logits = torch.randn(2, 4, 3, dtype=torch.float64) if three else torch.randn(6, 4, dtype=torch.float64)
        logits.requires_grad_(True)
        target = torch.randn(logits.shape, dtype=torch.float64).softmax(1)
        w = torch.rand(4, dtype=torch.float64) + 0.25 if opts.get("weight") else None
        loss = torch.nn.functional.cross_entropy(logits, target, weight=w, reduction=red,
                                                 label_smoothing=opts.get("label_smoothing", 0.0))
        R = torch.randn_like(loss)
        (loss * R).sum().backward()
        case = {"reduction": red, "three_d": three, "logits": logits.detach(), "target": target,
                "loss": loss.detach(), "R": R, "grad": logits.grad.clone(),
                "label_smoothing": opts.get("label_smoothing", 0.0)}
        if w is not None:
            case["weight"] = w
        out.append(case)
    return out


# ---------------------------------------------------------------- issue 27 probes

def probe_models_cases():
    """What a new user probing issue 27's modules tried (tests/lua/probe_models_spec.lua):
    the pools with ceil_mode, the convolutions with padding_mode, the adaptive max pools. Each case's config names the ember module, its
    kernel_size and options; own seed."""
    torch.manual_seed(20261207)
    cases = []

    def pool(name, cls, args, kw, ember_opts, shape):
        cfg = {"module": cls.__name__, "kernel_size": ember_opts.pop("kernel_size"), "opts": ember_opts}
        cases.append(run_plain(name, cls(*args, **kw), cfg, {"x": torch.randn(*shape)}, lambda m, x: m(x)))

    P = torch.nn
    pool("MaxPool2d_ceil", P.MaxPool2d, (3,), dict(stride=2, ceil_mode=True),
         {"kernel_size": 3, "stride": 2, "ceil_mode": True}, (2, 2, 8, 7))
    pool("MaxPool2d_ceil_pad_dilated", P.MaxPool2d, ((3, 2),), dict(stride=2, padding=1, dilation=(1, 2), ceil_mode=True),
         {"kernel_size": [3, 2], "stride": 2, "padding": 1, "dilation": [1, 2], "ceil_mode": True}, (1, 2, 6, 9))
    pool("MaxPool2d_ceil_window_past_input", P.MaxPool2d, (3,), dict(stride=2, ceil_mode=True),
         {"kernel_size": 3, "stride": 2, "ceil_mode": True}, (1, 2, 2, 2))
    pool("AvgPool2d_ceil_pad", P.AvgPool2d, (3,), dict(stride=2, padding=1, ceil_mode=True),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 2, 6, 7))
    pool("AvgPool2d_ceil_exclude_pad", P.AvgPool2d, (3,), dict(stride=2, padding=1, ceil_mode=True,
         count_include_pad=False),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}, (2, 2, 6, 7))
    pool("AvgPool2d_ceil_divisor", P.AvgPool2d, ((2, 3),), dict(stride=2, ceil_mode=True, divisor_override=5),
         {"kernel_size": [2, 3], "stride": 2, "ceil_mode": True, "divisor_override": 5}, (1, 2, 5, 6))
    # the last window would start past the input and the left padding: PyTorch drops it
    pool("MaxPool2d_ceil_last_window_dropped", P.MaxPool2d, (2,), dict(stride=4, padding=1, ceil_mode=True),
         {"kernel_size": 2, "stride": 4, "padding": 1, "ceil_mode": True}, (1, 2, 5, 9))
    pool("AvgPool1d_ceil_last_window_dropped", P.AvgPool1d, (2,), dict(stride=4, padding=1, ceil_mode=True),
         {"kernel_size": 2, "stride": 4, "padding": 1, "ceil_mode": True}, (2, 1, 5))
    pool("MaxPool1d_ceil", P.MaxPool1d, (3,), dict(stride=2, padding=1, ceil_mode=True),
         {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 2, 8))
    pool("AvgPool1d_ceil", P.AvgPool1d, (4,), dict(stride=3, padding=2, ceil_mode=True),
         {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True}, (2, 2, 9))
    pool("AvgPool1d_ceil_exclude_pad", P.AvgPool1d, (4,), dict(stride=3, padding=2, ceil_mode=True,
         count_include_pad=False),
         {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True, "count_include_pad": False}, (2, 2, 9))

    def conv(name, cls, args, kw, opts, shape):
        m = cls(*args, **kw)
        cfg = {"module": cls.__name__, "in_channels": args[0], "out_channels": args[1], "kernel_size": args[2],
               "opts": opts}
        cases.append(run_plain(name, m, cfg, {"x": torch.randn(*shape)}, lambda m, x: m(x)))

    # padding_mode: PyTorch pads with F.pad(mode) and convolves without padding
    conv("Conv2d_reflect", P.Conv2d, (3, 4, 3), dict(padding=(1, 2), padding_mode="reflect", stride=2),
         {"padding": [1, 2], "padding_mode": "reflect", "stride": 2}, (2, 3, 6, 7))
    conv("Conv2d_replicate_groups_dilated", P.Conv2d, (2, 4, (3, 2)),
         dict(padding=2, padding_mode="replicate", groups=2, dilation=(1, 2)),
         {"padding": 2, "padding_mode": "replicate", "groups": 2, "dilation": [1, 2]}, (1, 2, 5, 6))
    conv("Conv2d_circular", P.Conv2d, (2, 3, 3), dict(padding=1, padding_mode="circular"),
         {"padding": 1, "padding_mode": "circular"}, (2, 2, 4, 5))
    conv("Conv2d_same_reflect", P.Conv2d, (2, 3, 4), dict(padding="same", padding_mode="reflect"),
         {"padding": "same", "padding_mode": "reflect"}, (2, 2, 6, 5))
    conv("Conv1d_circular_stride", P.Conv1d, (2, 4, 5), dict(padding=2, padding_mode="circular", stride=2),
         {"padding": 2, "padding_mode": "circular", "stride": 2}, (2, 2, 9))
    conv("Conv1d_reflect_unbatched", P.Conv1d, (2, 4, 3), dict(padding=1, padding_mode="reflect"),
         {"padding": 1, "padding_mode": "reflect"}, (2, 7))

    # the adaptive max pools: the bins of the adaptive average, reduced by max
    def adaptive(name, cls, out, shape):
        cases.append(run_plain(name, cls(out), {"module": cls.__name__, "output_size": list(out) if isinstance(out, tuple)
                                               else out}, {"x": torch.randn(*shape)}, lambda m, x: m(x)))

    adaptive("AdaptiveMaxPool2d_3x5", P.AdaptiveMaxPool2d, (3, 5), (2, 3, 7, 11))
    adaptive("AdaptiveMaxPool2d_1_unbatched", P.AdaptiveMaxPool2d, 1, (3, 5, 4))
    adaptive("AdaptiveMaxPool2d_upsample", P.AdaptiveMaxPool2d, (4, 6), (1, 2, 3, 5))
    adaptive("AdaptiveMaxPool1d_4", P.AdaptiveMaxPool1d, 4, (2, 3, 10))
    return cases


# ---------------------------------------------------------------- ember.flex_attention

def flex_cases():
    """ember.flex_attention's reference (see the module docstring): the
    score and mask functions of each case written out densely."""
    torch.manual_seed(20261208)
    cases = []

    def run(name, B, Hq, Hkv, Lq, Lk, E, Ev, scale, score, mask, extra, learned):
        q = torch.randn(B, Hq, Lq, E, requires_grad=True)
        k = torch.randn(B, Hkv, Lk, E, requires_grad=True)
        v = torch.randn(B, Hkv, Lk, Ev, requires_grad=True)
        for t in learned:
            extra[t].requires_grad_(True)
        g = Hq // Hkv
        kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        sc = scale if scale is not None else 1 / math.sqrt(E)
        s = q @ kk.transpose(-1, -2) * sc
        b = torch.arange(B).view(B, 1, 1, 1)
        h = torch.arange(Hq).view(1, Hq, 1, 1)
        qi = torch.arange(Lq).view(1, 1, Lq, 1)
        ki = torch.arange(Lk).view(1, 1, 1, Lk)
        if score is not None:
            s = score(s, b, h, qi, ki, extra).expand(B, Hq, Lq, Lk)
        if mask is not None:
            allowed = mask(b, h, qi, ki, extra).expand(B, Hq, Lq, Lk)
            s = s.masked_fill(~allowed, -math.inf)
        lse = torch.logsumexp(s, -1)
        dead = torch.isinf(lse) & (lse < 0)
        p = torch.softmax(s.masked_fill(dead.unsqueeze(-1), 0), -1) * (~dead).unsqueeze(-1)
        out = p @ vv
        R = torch.randn_like(out)
        (out * R).sum().backward()
        case = {"name": name, "scale": scale, "q": q.detach(), "k": k.detach(), "v": v.detach(), "R": R,
                "out": out.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
        for key, t in extra.items():
            case[key] = t.detach()
        for t in learned:
            case["d" + t] = extra[t].grad
        cases.append(case)

    # a learned bias per head, causal (the README's example)
    run("bias_causal", 2, 2, 2, 6, 6, 4, 4, None,
        lambda s, b, h, qi, ki, x: s + x["bias"][h, qi, ki],
        lambda b, h, qi, ki, x: qi >= ki, {"bias": torch.randn(2, 6, 6)}, ["bias"])
    # grouped heads, softcap, a sliding window, Lq < Lk (q_idx is the row: top-left), a scale
    run("gqa_softcap_window", 2, 4, 2, 5, 8, 4, 3, 0.5,
        lambda s, b, h, qi, ki, x: 2.0 * torch.tanh(s / 2.0),
        lambda b, h, qi, ki, x: (qi - ki).abs() <= 2, {}, [])
    # documents (int ids captured), a per-head ALiBi slope (a constant tensor); the first row sees no key
    run("document_alibi_empty_row", 2, 3, 3, 7, 7, 4, 4, None,
        lambda s, b, h, qi, ki, x: s - x["slope"][h] * (qi - ki).abs(),
        lambda b, h, qi, ki, x: (x["doc"][b, qi] == x["doc"][b, ki]) & (ki < qi),
        {"doc": torch.tensor([[0, 0, 0, 1, 1, 2, 2], [0, 1, 1, 1, 1, 1, 2]]),
         "slope": torch.tensor([0.5, 0.25, 0.125])}, [])
    return cases


# ---------------------------------------------------------------- nn.functional

def functional_cases():
    """torch.nn.functional's functions for tests/lua/nn_functional_spec.lua: each case the inputs (float64 ones get
    gradients), the output, R and the gradients of sum(out * R); the spec makes the matching F call by the case's
    name. batch_norm/instance_norm cases also hold the running statistics after the call; embedding's ids and
    padding_idx are 1-based. F.rms_norm (PyTorch 2.4) is RMSNormRef's formula. Own seed."""
    torch.manual_seed(20261208)
    F = torch.nn.functional
    cases = []

    def case(name, fn, inputs, extra=None):
        c = run_plain(name, torch.nn.Identity(), {}, inputs, lambda m, **kw: fn(**kw))
        del c["state"], c["grads"], c["config"]
        if extra:
            c.update(extra)
        cases.append(c)
        return c

    r = torch.randn
    D = dict(dtype=torch.float64)
    case("conv2d_all_options", lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2),
                                                           groups=2),
         {"x": r(1, 4, 7, 6, **D), "w": r(6, 2, 3, 2, **D), "b": r(6, **D)})
    case("conv2d_same", lambda x, w: F.conv2d(x, w, padding="same"), {"x": r(1, 3, 5, 6, **D), "w": r(4, 3, 4, 3, **D)})
    case("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), {"x": r(2, 3, 9, **D), "w": r(4, 3, 3, **D),
                                                                           "b": r(4, **D)})
    case("conv_transpose2d", lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0),
                                                                output_padding=(1, 2), groups=2),
         {"x": r(1, 4, 3, 4, **D), "w": r(4, 3, 3, 2, **D), "b": r(6, **D)})
    case("conv_transpose1d", lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=1,
                                                                dilation=2),
         {"x": r(2, 3, 5, **D), "w": r(3, 2, 4, **D), "b": r(2, **D)})
    case("max_pool2d", lambda x: F.max_pool2d(x, (3, 2), stride=2, padding=1, dilation=(1, 2), ceil_mode=True),
         {"x": r(2, 3, 7, 8, **D)})
    case("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         {"x": r(2, 3, 7, 8, **D)})
    case("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, (2, 3), divisor_override=4), {"x": r(1, 2, 6, 7, **D)})
    case("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), {"x": r(2, 3, 10, **D)})
    case("avg_pool1d", lambda x: F.avg_pool1d(x, 4, stride=3, padding=2, count_include_pad=False),
         {"x": r(2, 3, 10, **D)})
    case("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), {"x": r(2, 3, 7, 9, **D)})
    case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 3)), {"x": r(2, 3, 7, 9, **D)})
    case("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 4), {"x": r(2, 3, 10, **D)})
    case("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3), {"x": r(2, 3, 10, **D)})

    # the norms: running statistics in and out
    rm, rv = r(3, **D), r(3, **D).abs() + 0.5
    stats = {"running_mean_in": rm.clone(), "running_var_in": rv.clone()}
    c = case("batch_norm_training", lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2,
                                                                   eps=1e-3),
             {"x": r(4, 3, 2, 5, **D) * 2 + 1, "w": r(3, **D), "b": r(3, **D)}, dict(stats))
    c.update({"running_mean": rm.clone(), "running_var": rv.clone()})
    case("batch_norm_eval", lambda x, w, b: F.batch_norm(x, stats["running_mean_in"], stats["running_var_in"], w, b),
         {"x": r(4, 3, 6, **D), "w": r(3, **D), "b": r(3, **D)}, dict(stats))
    rm2, rv2 = stats["running_mean_in"].clone(), stats["running_var_in"].clone()
    c = case("instance_norm_stats", lambda x, w, b: F.instance_norm(x, rm2, rv2, w, b, use_input_stats=True,
                                                                      momentum=0.3, eps=1e-4),
             {"x": r(2, 3, 4, 5, **D) * 3 - 1, "w": r(3, **D), "b": r(3, **D)}, dict(stats))
    c.update({"running_mean": rm2.clone(), "running_var": rv2.clone()})
    case("instance_norm_plain", lambda x: F.instance_norm(x), {"x": r(2, 3, 7, **D)})
    case("group_norm", lambda x, w, b: F.group_norm(x, 3, w, b, eps=1e-3),
         {"x": r(2, 6, 3, 4, **D), "w": r(6, **D), "b": r(6, **D)})
    case("layer_norm", lambda x, w, b: F.layer_norm(x, (4, 5), w, b, eps=1e-4),
         {"x": r(2, 3, 4, 5, **D), "w": r(4, 5, **D), "b": r(4, 5, **D)})

    def rms(x, w):
        ref = RMSNormRef(8, eps=1e-6)
        ref.weight = None
        return ref(x) * w
    case("rms_norm", rms, {"x": r(2, 3, 8, **D), "w": r(8, **D)})

    # interpolate: every mode, align_corners both ways, sizes and scale factors
    x3, x4, x5 = r(2, 2, 5, **D), r(1, 2, 4, 5, **D), r(1, 2, 3, 4, 3, **D)
    I = F.interpolate
    for name, x, kw in [
        ("nearest_scale2", x4, dict(scale_factor=2)),
        ("nearest_scale1.5_1d", x3, dict(scale_factor=1.5)),
        ("nearest_size_3d", x5, dict(size=(5, 3, 7))),
        ("nearest_down", x4, dict(size=(3, 2))),
        ("nearest-exact", x4, dict(size=(7, 3), mode="nearest-exact")),
        ("linear", x3, dict(scale_factor=1.7, mode="linear")),
        ("linear_align", x3, dict(size=9, mode="linear", align_corners=True)),
        ("bilinear", x4, dict(size=(7, 8), mode="bilinear")),
        ("bilinear_align", x4, dict(size=(7, 8), mode="bilinear", align_corners=True)),
        ("bilinear_scale", x4, dict(scale_factor=(2.5, 1.5), mode="bilinear")),
        ("bilinear_down", x4, dict(scale_factor=0.6, mode="bilinear")),
        ("bilinear_recompute", x4, dict(scale_factor=1.3, mode="bilinear", recompute_scale_factor=True)),
        ("bicubic", x4, dict(size=(6, 9), mode="bicubic")),
        ("bicubic_align", x4, dict(scale_factor=2, mode="bicubic", align_corners=True)),
        ("trilinear", x5, dict(size=(4, 6, 5), mode="trilinear")),
        ("area", x4, dict(size=(3, 2), mode="area")),
    ]:
        c = case("interpolate_" + name, lambda x, kw=kw: I(x, **kw), {"x": x.clone()})
        c["kw"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()}

    case("unfold", lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), {"x": r(1, 3, 6, 7, **D)})
    case("fold", lambda x: F.fold(x, (6, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
         {"x": r(1, 18, 20, **D)})
    ids = torch.tensor([[2, 0, 4], [4, 1, 0]])
    c = case("embedding_padding", lambda ids, w: F.embedding(ids, w, padding_idx=0), {"ids": ids, "w": r(5, 3, **D)})
    c["inputs"]["ids"] = ids + 1
    # the modules' rules as functions, and the activations ember had not
    x = r(3, 4, 5, **D) * 2
    case("softsign", lambda x: F.softsign(x), {"x": x.clone()})
    case("prelu", lambda x, w: F.prelu(x, w), {"x": x.clone(), "w": r(4, **D)})
    case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), {"x": r(2, 8, 3, 2, **D)})
    case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 3), {"x": r(1, 2, 6, 3, **D)})
    case("pairwise_distance", lambda a, b: F.pairwise_distance(a, b, p=1.5, eps=1e-3, keepdim=True),
         {"a": r(4, 5, **D), "b": r(4, 5, **D)})
    case("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, p=1, swap=True,
                                                                      reduction="none"),
         {"a": r(4, 5, **D), "p": r(4, 5, **D), "n": r(4, 5, **D)})
    case("margin_ranking_loss", lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3, reduction="sum"),
         {"a": r(6, **D), "b": r(6, **D), "y": torch.tensor([1., -1, 1, 1, -1, -1], **D)})
    case("bilinear", lambda a, b, w, bias: F.bilinear(a, b, w, bias),
         {"a": r(2, 3, 4, **D), "b": r(2, 3, 5, **D), "w": r(6, 4, 5, **D), "bias": r(6, **D)})
    case("logsigmoid", lambda x: F.logsigmoid(x), {"x": x.clone()})
    case("softmin", lambda x: F.softmin(x, dim=1), {"x": x.clone()})
    case("selu", lambda x: F.selu(x), {"x": x.clone()})
    case("celu", lambda x: F.celu(x, alpha=0.7), {"x": x.clone()})
    case("tanhshrink", lambda x: F.tanhshrink(x), {"x": x.clone()})
    case("threshold", lambda x: F.threshold(x, 0.1, -2.0), {"x": x.clone()})
    case("hardshrink", lambda x: F.hardshrink(x, 0.3), {"x": x.clone()})
    case("softshrink", lambda x: F.softshrink(x, 0.3), {"x": x.clone()})
    # torch's default dim=1 (ember's dim 2), where ember's own functions take the last
    x4 = r(2, 3, 4, 5, **D)
    case("normalize_default_dim", lambda x: F.normalize(x), {"x": x4.clone()})
    case("normalize_p1_dim0", lambda x: F.normalize(x, 1, 0), {"x": x4.clone()})
    case("cosine_similarity_default_dim", lambda a, b: F.cosine_similarity(a, b),
         {"a": x4.clone(), "b": r(2, 3, 4, 5, **D)})
    # return_indices (1-based in the fixture) and max_unpool
    xp = r(2, 3, 7, 8, **D)
    c = case("max_pool2d_indices", lambda x: F.max_pool2d(x, (3, 2), stride=2, padding=1, dilation=(1, 2),
                                                          ceil_mode=True), {"x": xp.clone()})
    c["indices"] = F.max_pool2d(xp, (3, 2), stride=2, padding=1, dilation=(1, 2), ceil_mode=True,
                                return_indices=True)[1] + 1
    xq = r(2, 3, 11, **D)
    c = case("max_pool1d_indices", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), {"x": xq.clone()})
    c["indices"] = F.max_pool1d(xq, 3, stride=2, padding=1, return_indices=True)[1] + 1
    # windows that do not overlap: repeated indices keep an unspecified one of their values
    _, idx2 = F.max_pool2d(r(2, 3, 7, 8, **D), 2, stride=2, padding=1, return_indices=True)
    c = case("max_unpool2d", lambda x: F.max_unpool2d(x, idx2, 2, stride=2, padding=1, output_size=(7, 8)),
             {"x": r(2, 3, 4, 5, **D)})
    c["indices"] = idx2 + 1
    _, idx1 = F.max_pool1d(r(2, 3, 9, **D), 2, return_indices=True)
    c = case("max_unpool1d", lambda x: F.max_unpool1d(x, idx1, 2), {"x": r(2, 3, 4, **D)})
    c["indices"] = idx1 + 1
    # the losses ember had no module for; targets that get no gradient are float32 or int64
    f32 = dict(dtype=torch.float32)
    pm = torch.tensor([1., -1, -1, 1, 1, -1], **f32)
    case("soft_margin_loss", lambda x, y: F.soft_margin_loss(x, y.double(), reduction="sum"), {"x": r(6, **D), "y": pm})
    case("hinge_embedding_loss", lambda x, y: F.hinge_embedding_loss(x, y.double(), margin=0.8, reduction="none"),
         {"x": r(6, **D), "y": torch.tensor([1., -1, 0, 1, -1, -1], **f32)})
    case("cosine_embedding_loss", lambda a, b, y: F.cosine_embedding_loss(a, b, y.double(), margin=0.2),
         {"a": r(4, 5, **D), "b": r(4, 5, **D), "y": torch.tensor([1., -1, -1, 1], **f32)})
    case("cosine_embedding_loss_1d", lambda a, b, y: F.cosine_embedding_loss(a, b, y.double(), reduction="sum"),
         {"a": r(5, **D), "b": r(5, **D), "y": torch.tensor(-1., **f32)})
    case("poisson_nll_loss", lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True),
         {"x": r(3, 4, **D).abs() + 0.1, "t": (r(3, 4, **D) * 3).abs().round() + 1})  # (0: PyTorch's gradient NaN)
    case("poisson_nll_loss_log", lambda x, t: F.poisson_nll_loss(x, t, reduction="sum"),
         {"x": r(3, 4, **D), "t": (r(3, 4, **D) * 3).abs().round()})
    case("multilabel_soft_margin_loss", lambda x, y, w: F.multilabel_soft_margin_loss(x, y, weight=w),
         {"x": r(3, 5, **D), "y": (r(3, 5, **D) > 0).double(), "w": r(5, **D).abs()})
    mt, mw = torch.tensor([2, 0, 4, 1]), r(5, **D).abs()  # (PyTorch: no gradient for weight)
    c = case("multi_margin_loss", lambda x: F.multi_margin_loss(x, mt, p=2, margin=0.7, weight=mw, reduction="none"),
             {"x": r(4, 5, **D)})
    c["inputs"]["target"], c["weight"] = mt + 1, mw
    # affine_grid and grid_sample: points inside and outside the image, every mode and padding
    th = r(2, 2, 3, **D) * 0.6
    case("affine_grid", lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=False), {"t": th.clone()})
    case("affine_grid_align", lambda t: F.affine_grid(t, [2, 3, 4, 1], align_corners=True), {"t": th.clone()})
    gx = r(1, 2, 4, 5, **D)
    for mode, pad, align in [("bilinear", "zeros", False), ("bilinear", "border", True),
                             ("bilinear", "reflection", False), ("bilinear", "reflection", True),
                             ("nearest", "zeros", False), ("nearest", "border", True)]:
        name = "grid_sample_%s_%s%s" % (mode, pad, "_align" if align else "")
        c = case(name, lambda x, g, mode=mode, pad=pad, align=align: F.grid_sample(
            x, g, mode=mode, padding_mode=pad, align_corners=align), {"x": gx.clone(), "g": r(1, 5, 6, 2, **D) * 1.3})
        c["kw"] = {"mode": mode, "padding_mode": pad, "align_corners": align}
    # more of torch.nn.functional
    ids = torch.tensor([2, 0, 4, 4, 7, 1, 3, 5, 6])
    off = torch.tensor([0, 3, 3, 7])
    c = case("embedding_bag_mean", lambda w: F.embedding_bag(ids, w, off), {"w": r(8, 3, **D)})
    c["ids"], c["offsets"] = ids + 1, off + 1
    psw = r(9, **D)
    c = case("embedding_bag_sum_psw_last", lambda w, psw: F.embedding_bag(ids, w, torch.tensor([0, 3, 7, 9]),
                                                                            mode="sum", per_sample_weights=psw,
                                                                            include_last_offset=True),
             {"w": r(8, 3, **D), "psw": psw})
    c["ids"], c["offsets"] = ids + 1, torch.tensor([0, 3, 7, 9]) + 1
    ids2 = torch.tensor([[1, 3, 2], [4, 0, 5]])
    c = case("embedding_bag_max_padding", lambda w: F.embedding_bag(ids2, w, mode="max", padding_idx=0),
             {"w": r(6, 4, **D)})
    c["ids"] = ids2 + 1
    case("lp_pool2d", lambda x: F.lp_pool2d(x, 2, (2, 3), stride=2), {"x": r(2, 3, 6, 7, **D)})
    case("lp_pool1d", lambda x: F.lp_pool1d(x, 3, 3, ceil_mode=True), {"x": r(2, 3, 10, **D).abs() + 0.1})
    case("local_response_norm", lambda x: F.local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0),
         {"x": r(2, 5, 3, 4, **D)})
    case("local_response_norm_3d", lambda x: F.local_response_norm(x, 4), {"x": r(2, 6, 5, **D)})
    def shuffle(x):  # (PyTorch 1.13's channel_shuffle has no derivative: its definition, checked against it)
        y = x.view(2, 3, 2, 2, 3).transpose(1, 2).reshape(x.shape)
        assert torch.equal(y, F.channel_shuffle(x.detach(), 3))
        return y
    case("channel_shuffle", shuffle, {"x": r(2, 6, 2, 3, **D)})
    case("pdist", lambda x: F.pdist(x), {"x": r(5, 4, **D)})
    case("pdist_p1.5", lambda x: F.pdist(x, 1.5), {"x": r(4, 3, **D)})
    v = r(3, 4, **D).abs() + 0.1
    v[0, 0] = 1e-8  # below eps: clamped in value, its gradient kept
    case("gaussian_nll_loss", lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True, eps=1e-4),
         {"x": r(3, 4, **D), "t": r(3, 4, **D), "v": v})
    case("gaussian_nll_loss_var_1d", lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction="sum"),
         {"x": r(3, 4, **D), "t": r(3, 4, **D), "v": r(3, **D).abs() + 0.5})
    case("gaussian_nll_loss_var_last1", lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction="none"),
         {"x": r(3, 4, **D), "t": r(3, 4, **D), "v": r(3, 1, **D).abs() + 0.5})
    case("triplet_margin_with_distance_loss", lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, margin=1.5, swap=True, reduction="none"), {"a": r(4, 5, **D), "p": r(4, 5, **D), "n": r(4, 5, **D)})
    case("rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.3), {"x": r(3, 4, **D)})
    # 3-d: volumes
    case("conv3d", lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2),
         {"x": r(1, 4, 5, 6, 5, **D), "w": r(6, 2, 3, 2, 3, **D), "b": r(6, **D)})
    case("conv3d_same_unbatched", lambda x, w: F.conv3d(x, w, padding="same"),
         {"x": r(3, 4, 5, 4, **D), "w": r(2, 3, 2, 3, 2, **D)})
    case("max_pool3d", lambda x: F.max_pool3d(x, (2, 3, 2), stride=2, padding=1, dilation=(1, 1, 2), ceil_mode=True),
         {"x": r(1, 2, 5, 6, 7, **D)})
    case("avg_pool3d", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
         {"x": r(1, 2, 5, 6, 7, **D)})
    case("avg_pool3d_include_pad", lambda x: F.avg_pool3d(x, (2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 0)),
         {"x": r(1, 2, 4, 5, 6, **D)})
    case("avg_pool3d_ceil_include_pad", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True),
         {"x": r(1, 2, 6, 6, 5, **D)})  # the last windows run past the padding: not counted
    case("avg_pool3d_divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=3), {"x": r(1, 2, 4, 4, 4, **D)})
    case("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), {"x": r(1, 2, 5, 7, 6, **D)})
    case("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (3, 2, 4)), {"x": r(1, 2, 5, 7, 6, **D)})
    # ctc_loss (through log_softmax: PyTorch's gradient in log_probs assumes it); labels and blank 1-based in the fixture
    tg = torch.tensor([[1, 2, 2, 3], [3, 3, 0, 0], [2, 0, 0, 0]])
    il, tl = [9, 7, 5], [4, 2, 1]
    for name, red, zi in [("ctc_loss_mean", "mean", False), ("ctc_loss_none", "none", False)]:
        c = case(name, lambda z, red=red, zi=zi: F.ctc_loss(z.log_softmax(2), tg, il, tl, reduction=red, zero_infinity=zi),
                 {"z": r(9, 3, 4, **D)})
        c["targets"], c["input_lengths"], c["target_lengths"] = tg + 1, il, tl
    flat = torch.tensor([1, 1, 2, 0])
    c = case("ctc_loss_concat_blank_last", lambda z: F.ctc_loss(z.log_softmax(2), flat, [6, 4], [3, 1], blank=3,
                                                                reduction="sum"), {"z": r(6, 2, 4, **D)})
    c["targets"], c["input_lengths"], c["target_lengths"] = flat + 1, [6, 4], [3, 1]
    # an impossible target (1 1 needs 3 steps, 2 given) as 0, the rest summed
    tz = torch.tensor([[1, 1], [2, 0]])
    c = case("ctc_loss_zero_infinity", lambda z: F.ctc_loss(z.log_softmax(2), tz, [2, 3], [2, 1], reduction="sum",
                                                            zero_infinity=True), {"z": r(3, 2, 3, **D)})
    c["targets"], c["input_lengths"], c["target_lengths"] = tz + 1, [2, 3], [2, 1]
    return cases


# ---------------------------------------------------------------- PyTorch user API

def pytorch_user_cases():
    """nn_pytorch_user.lua, for tests/lua/pytorch_user_api_spec.lua:
    torch.nn.utils.parameters_to_vector of Sequential(Linear, LayerNorm,
    Linear, GRU(2 layers)) with its state dict (PyTorch's 0-based keys; ember's
    Sequential counts from 1), and rnn.pad_sequence (batch_first and not,
    a padding value, an empty sequence) with the gradients of sum(out * R)
    for each sequence; own seed."""
    torch.manual_seed(20261208)
    P = torch.nn
    model = P.Sequential(P.Linear(3, 4), P.LayerNorm(4), P.Linear(4, 2), P.GRU(2, 3, num_layers=2))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    vec = torch.nn.utils.parameters_to_vector(model.parameters())
    out = {"vector": {"state": {k: v.clone() for k, v in model.state_dict().items()}, "vec": vec.detach()},
           "pad": []}
    for name, shapes, bf, pv in [("time_first", [(3, 2), (1, 2), (4, 2)], False, 0.0),
                                 ("batch_first_value", [(2, 3), (5, 3), (1, 3)], True, -1.5),
                                 ("with_empty_1d", [(0,), (3,), (2,)], True, 7.0)]:
        seqs = [torch.randn(*sh).requires_grad_(True) for sh in shapes]
        y = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=bf, padding_value=pv)
        R = torch.randn_like(y)
        (y * R).sum().backward()
        out["pad"].append({"name": name, "batch_first": bf, "padding_value": pv,
                           "seqs": [s.detach() for s in seqs], "out": y.detach(), "R": R,
                           "grads": [s.grad.clone() for s in seqs]})
    return out


def autograd_cases():
    """nn_autograd.lua, for tests/lua/autograd_namespace_spec.lua: torch.autograd.functional.jacobian of a
    function of one tensor (x.exp() * x.sum()), of two tensors with two outputs ((a @ b).tanh() and the 0-d
    (a * a).sum(), which does not depend on b: zeros), and of a small attention softmax(q k^T / sqrt(2)) v with
    respect to q, k and v; torch.autograd.functional.vjp of log_softmax with a given v. float64; its own seed."""
    torch.manual_seed(20261207)
    jac = torch.autograd.functional.jacobian
    x = torch.randn(2, 3)
    out = {"single": {"x": x, "jac": jac(lambda x: x.exp() * x.sum(), x)}}
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    j = jac(lambda a, b: ((a @ b).tanh(), (a * a).sum()), (a, b))
    out["pair"] = {"a": a, "b": b, "jac": [[j[0][0], j[0][1]], [j[1][0], j[1][1]]]}
    q, k, v = torch.randn(3, 2), torch.randn(4, 2), torch.randn(4, 2)
    j = jac(lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(2), -1) @ v, (q, k, v))
    out["attention"] = {"q": q, "k": k, "v": v, "jac": list(j)}
    x, w = torch.randn(2, 4), torch.randn(2, 4)
    o, g = torch.autograd.functional.vjp(lambda x: torch.log_softmax(x, -1), x, w)
    out["vjp"] = {"x": x, "v": w, "out": o, "vjp": g}
    return out


def torch_mha_cases():
    """nn_torch_mha.lua, for tests/lua/nn_torch_mha_spec.lua: torch.nn.MultiheadAttention in float64 with
    random weights (its state dict, torch's names), called as PyTorch code calls it: sequence-first
    self-attention with a key_padding_mask and averaged weights; batch_first cross-attention with kdim/vdim,
    a boolean attn_mask [L, S] and per-head weights; a float attn_mask [B * H, L, S]; an unbatched query.
    out, weights and the gradients of sum(out * R) for query, key and value; own seed."""
    torch.manual_seed(20261209)
    cases = []
    specs = [
        ("self_seq_first", dict(kdim=None, vdim=None, batch_first=False), (5, 2), (5, 2), "kpm", True, True),
        ("cross_batch_first", dict(kdim=6, vdim=3, batch_first=True), (2, 4), (2, 3), "bool", True, False),
        ("float_mask_bh", dict(kdim=None, vdim=None, batch_first=False), (4, 2), (3, 2), "float3", True, True),
        ("unbatched", dict(kdim=None, vdim=None, batch_first=False), (4,), (6,), None, False, True),
    ]
    E, H = 8, 2
    for name, kw, qs, ks, mask, need, avg in specs:
        m = torch.nn.MultiheadAttention(E, H, kdim=kw["kdim"], vdim=kw["vdim"], batch_first=kw["batch_first"]).double()
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.randn_like(p) * 0.5)
        kd, vd = kw["kdim"] or E, kw["vdim"] or E
        if len(qs) == 1:
            q = torch.randn(qs[0], E, dtype=torch.float64)
            k = torch.randn(ks[0], kd, dtype=torch.float64)
            v = torch.randn(ks[0], vd, dtype=torch.float64)
        elif kw["batch_first"]:
            q = torch.randn(qs[0], qs[1], E, dtype=torch.float64)
            k = torch.randn(ks[0], ks[1], kd, dtype=torch.float64)
            v = torch.randn(ks[0], ks[1], vd, dtype=torch.float64)
        else:
            q = torch.randn(qs[0], qs[1], E, dtype=torch.float64)
            k = torch.randn(ks[0], ks[1], kd, dtype=torch.float64)
            v = torch.randn(ks[0], ks[1], vd, dtype=torch.float64)
        if name == "self_seq_first":
            k = v = q
        B = 1 if len(qs) == 1 else (qs[0] if kw["batch_first"] else qs[1])
        L = qs[0] if (len(qs) == 1 or not kw["batch_first"]) else qs[1]
        S = ks[0] if (len(ks) == 1 or not kw["batch_first"]) else ks[1]
        extra, args = {}, {}
        if mask == "kpm":
            kpm = torch.zeros(B, S, dtype=torch.bool)
            kpm[1, -2:] = True
            extra["key_padding_mask"] = kpm
            args["key_padding_mask"] = kpm
        elif mask == "bool":
            am = torch.rand(L, S) < 0.3
            am[:, 0] = False
            extra["attn_mask"] = am
            args["attn_mask"] = am
        elif mask == "float3":
            am = torch.randn(B * H, L, S, dtype=torch.float64)
            extra["attn_mask"] = am
            args["attn_mask"] = am
        leaves = [t.clone().requires_grad_(True) for t in ((q,) if name == "self_seq_first" else (q, k, v))]
        qq = leaves[0]
        kk = leaves[0] if name == "self_seq_first" else leaves[1]
        vv = leaves[0] if name == "self_seq_first" else leaves[2]
        out, w = m(qq, kk, vv, need_weights=need, average_attn_weights=avg, **args)
        R = torch.randn_like(out)
        (out * R).sum().backward()
        case = {"name": name, "embed_dim": E, "num_heads": H, "batch_first": kw["batch_first"],
                "state": {k2: v2.detach().clone() for k2, v2 in m.state_dict().items()},
                "need_weights": need, "average": avg, "inputs": [t.detach() for t in leaves],
                "out": out.detach(), "R": R, "grads": [t.grad.clone() for t in leaves]}
        if kw["kdim"] is not None:
            case["kdim"], case["vdim"] = kw["kdim"], kw["vdim"]
        if w is not None:
            case["weights"] = w.detach()
        case.update(extra)
        cases.append(case)
    return cases


# ---------------------------------------------------------------- researcher workflows

def probe_workflows_cases():
    """nn_probe_workflows.lua, for tests/lua/probe_workflows_spec.lua: a few training steps of the
    scripts a researcher from PyTorch writes, from the initial weights and data written here (state
    dicts under ember's names: a Sequential's children count from 1; class labels 1-based). Per step
    the loss (and lr), the gradients where a step is worth checking, and the weights after the last
    step. cnn: Conv2d/BatchNorm2d/ReLU/MaxPool2d/Flatten/Linear, SGD momentum + weight decay, StepLR,
    then eval (running statistics). gan: two Adams, fake.detach(), BCEWithLogits, and the first-order
    gradient of D at interpolated inputs. rnn: LSTM over padded sequences through
    pack_padded_sequence (h_n of each sequence's last valid step), clip_grad_norm_. vae: the
    reparameterization with eps written here, the KL term, Adam. accum: gradient accumulation over
    two micro-batches, param groups with their own lr, a frozen layer, an embedding tied to the
    output layer. ema: SGD with an EMA copy updated under no_grad (mul_/add_ and lerp_), a forward
    hook's features, a replaced head loaded from a partial state dict. autocast: a
    TransformerEncoderLayer's loss and gradients under torch.autocast("cpu", bfloat16), float32
    weights (torch's state dict names, which ember loads). float64 but autocast; its own seed."""
    torch.manual_seed(20261210)
    P, F = torch.nn, torch.nn.functional

    def seq1(sd):
        out = {}
        for k, v in sd.items():
            head, _, rest = k.partition(".")
            out[(str(int(head) + 1) + "." + rest) if head.isdigit() else k] = v.detach().clone()
        return out

    def grads1(model):
        return seq1({k: p.grad for k, p in model.named_parameters() if p.grad is not None})

    def randomize(model):
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p) * 0.5)

    out = {}
    # 1. the CNN classifier
    cnn = P.Sequential(P.Conv2d(2, 3, 3, padding=1), P.BatchNorm2d(3), P.ReLU(), P.MaxPool2d(2), P.Flatten(),
                       P.Linear(12, 4))
    randomize(cnn)
    state = seq1(cnn.state_dict())
    opt = torch.optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    steps = []
    for _ in range(4):
        x, y = torch.randn(6, 2, 4, 4), torch.randint(0, 4, (6,))
        cnn.train()
        opt.zero_grad()
        loss = F.cross_entropy(cnn(x), y)
        loss.backward()
        steps.append({"x": x, "y": y + 1, "loss": loss.detach(), "lr": opt.param_groups[0]["lr"],
                      "grads": grads1(cnn)})
        opt.step()
        sched.step()
        cnn.eval()  # a validation pass between steps: running statistics, no update
        with torch.no_grad():
            xv = torch.randn(2, 2, 4, 4)
            steps[-1]["val_x"], steps[-1]["val_out"] = xv, cnn(xv)
    cnn.eval()
    xe = torch.randn(3, 2, 4, 4)
    out["cnn"] = {"state": state, "steps": steps, "final": seq1(cnn.state_dict()), "eval_x": xe,
                  "eval_out": cnn(xe).detach()}

    # 2. a GAN step (no double backward) and a gradient penalty's first-order gradient
    G = P.Sequential(P.Linear(2, 6), P.ReLU(), P.Linear(6, 3))
    D = P.Sequential(P.Linear(3, 6), P.LeakyReLU(0.2), P.Linear(6, 1))
    randomize(G)
    randomize(D)
    gstate, dstate = seq1(G.state_dict()), seq1(D.state_dict())
    optD = torch.optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.9))
    optG = torch.optim.Adam(G.parameters(), lr=2e-2, betas=(0.5, 0.9))
    bce = P.BCEWithLogitsLoss()
    steps = []
    for _ in range(3):
        real, z = torch.randn(5, 3), torch.randn(5, 2)
        optD.zero_grad()
        fake = G(z)
        d_real, d_fake = D(real), D(fake.detach())
        loss_d = bce(d_real, torch.ones_like(d_real)) + bce(d_fake, torch.zeros_like(d_fake))
        loss_d.backward()
        d_grads = grads1(D)
        optD.step()
        optG.zero_grad()
        d_gen = D(fake)
        loss_g = bce(d_gen, torch.ones_like(d_gen))
        loss_g.backward()
        steps.append({"real": real, "z": z, "loss_d": loss_d.detach(), "loss_g": loss_g.detach(),
                      "d_grads": d_grads, "g_grads": grads1(G)})
        optG.step()
    real, fake, alpha = torch.randn(4, 3), torch.randn(4, 3), torch.rand(4, 1)
    xi = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    (gi,) = torch.autograd.grad(D(xi).sum(), xi)
    out["gan"] = {"G": gstate, "D": dstate, "steps": steps, "G_final": seq1(G.state_dict()),
                  "D_final": seq1(D.state_dict()),
                  "gp": {"real": real, "fake": fake, "alpha": alpha, "grad": gi,
                         "penalty": ((gi.norm(2, dim=1) - 1) ** 2).mean()}}

    # 3. an LSTM classifier over padded sequences, clip_grad_norm_
    emb, lstm, head = P.Embedding(7, 4, padding_idx=0), P.LSTM(4, 5, batch_first=True), P.Linear(5, 3)
    mods = {"emb": emb, "lstm": lstm, "head": head}
    for m in mods.values():
        randomize(m)
    with torch.no_grad():
        emb.weight[0].zero_()
    params = [p for m in mods.values() for p in m.parameters()]
    state = {name: {k: v.detach().clone() for k, v in m.state_dict().items()} for name, m in mods.items()}
    opt = torch.optim.SGD(params, lr=0.5)
    lengths = torch.tensor([4, 2, 3, 1])
    steps = []
    for _ in range(3):
        ids = torch.randint(1, 7, (4, 4))
        for b in range(4):
            ids[b, lengths[b]:] = 0
        y = torch.randint(0, 3, (4,))
        opt.zero_grad()
        packed = torch.nn.utils.rnn.pack_padded_sequence(emb(ids), lengths, batch_first=True,
                                                         enforce_sorted=False)
        _, (h, _) = lstm(packed)
        loss = F.cross_entropy(head(h[-1]), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm=0.5)
        steps.append({"ids": ids + 1, "y": y + 1, "loss": loss.detach(), "norm": norm,
                      "grads": {name: {k: p.grad.clone() for k, p in m.named_parameters()}
                                for name, m in mods.items()}})
        opt.step()
    out["rnn"] = {"state": state, "lengths": lengths, "padding_idx": 1, "steps": steps,
                  "final": {name: {k: v.detach().clone() for k, v in m.state_dict().items()}
                            for name, m in mods.items()}}

    # 4. a VAE
    enc = P.Sequential(P.Linear(4, 6), P.ReLU(), P.Linear(6, 4))
    dec = P.Sequential(P.Linear(2, 6), P.Tanh(), P.Linear(6, 4))
    randomize(enc)
    randomize(dec)
    estate, dstate = seq1(enc.state_dict()), seq1(dec.state_dict())
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
    steps = []
    for _ in range(3):
        x, eps = torch.randn(5, 4), torch.randn(5, 2)
        opt.zero_grad()
        mu, logvar = enc(x).chunk(2, dim=1)
        z = mu + eps * torch.exp(0.5 * logvar)
        recon = F.mse_loss(dec(z), x, reduction="sum")
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (recon + kl) / x.shape[0]
        loss.backward()
        steps.append({"x": x, "eps": eps, "recon": recon.detach(), "kl": kl.detach(), "loss": loss.detach(),
                      "enc_grads": grads1(enc)})
        opt.step()
    out["vae"] = {"enc": estate, "dec": dstate, "steps": steps, "enc_final": seq1(enc.state_dict()),
                  "dec_final": seq1(dec.state_dict())}

    # 5. accumulation, param groups, a frozen layer, tied weights
    emb = P.Embedding(8, 4)
    body = P.Linear(4, 4)
    mid = P.Linear(4, 4)
    outl = P.Linear(4, 8, bias=False)
    for m in (emb, body, mid):
        randomize(m)
    outl.weight = emb.weight
    body.requires_grad_(False)
    state = {"emb": emb.weight.detach().clone(), "body": {k: v.clone() for k, v in body.state_dict().items()},
             "mid": {k: v.clone() for k, v in mid.state_dict().items()}}
    opt = torch.optim.SGD([{"params": [emb.weight], "lr": 0.2},
                           {"params": list(mid.parameters())}], lr=0.05, momentum=0.9)

    def lm(ids):
        return outl(torch.tanh(mid(torch.tanh(body(emb(ids))))))

    steps = []
    for _ in range(3):
        micro = []
        opt.zero_grad()
        for _ in range(2):
            ids, tgt = torch.randint(0, 8, (3, 2)), torch.randint(0, 8, (3, 2))
            loss = F.cross_entropy(lm(ids).reshape(-1, 8), tgt.reshape(-1)) / 2
            loss.backward()
            micro.append({"ids": ids + 1, "tgt": tgt + 1, "loss": loss.detach()})
        steps.append({"micro": micro, "emb_grad": emb.weight.grad.clone(), "mid_grad": mid.weight.grad.clone()})
        opt.step()
    out["accum"] = {"state": state, "steps": steps, "emb_final": emb.weight.detach().clone(),
                    "mid_final": {k: v.clone() for k, v in mid.state_dict().items()}}

    # 6. EMA, a forward hook, model surgery
    net = P.Sequential(P.Linear(3, 5), P.ReLU(), P.Linear(5, 2))
    randomize(net)
    state = seq1(net.state_dict())
    torch_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
    ema = [p.detach().clone() for p in net.parameters()]
    ema2 = [p.detach().clone() for p in net.parameters()]
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    feats = []
    hook = net[1].register_forward_hook(lambda m, i, o: feats.append(o.detach().clone()))
    steps = []
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randn(4, 2)
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for e, e2, p in zip(ema, ema2, net.parameters()):
                e.mul_(0.9).add_(p, alpha=0.1)
                e2.lerp_(p, 0.25)
        steps.append({"x": x, "y": y, "loss": loss.detach(), "feature": feats[-1]})
    hook.remove()
    names = [k for k, _ in net.named_parameters()]
    new_head = P.Linear(5, 3)
    randomize(new_head)
    head_state = {k: v.clone() for k, v in new_head.state_dict().items()}
    trained = seq1(net.state_dict())
    net[2] = new_head
    net.load_state_dict({k: v for k, v in torch_state.items() if not k.startswith("2.")}, strict=False)
    xs = torch.randn(2, 3)
    out["ema"] = {"state": state, "steps": steps, "trained": trained,
                  "ema": seq1(dict(zip(names, ema))), "ema_lerp": seq1(dict(zip(names, ema2))),
                  "head": head_state, "surgery_x": xs, "surgery_out": net(xs).detach()}

    # 7. autocast bfloat16 on a TransformerEncoderLayer (float32 weights)
    layer = P.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True).float()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    x = torch.randn(2, 5, 8, dtype=torch.float32)
    R = torch.randn(2, 5, 8, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x)
        loss = (y.float() * R).sum()
    loss.backward()
    full = (layer(x) * R).sum()
    out["autocast"] = {"state": {k: v.detach().clone() for k, v in layer.state_dict().items()}, "x": x, "R": R,
                       "out_dtype": str(y.dtype).replace("torch.", ""), "loss": loss.detach(),
                       "loss_fp32": full.detach(),
                       "grads": {k: p.grad.clone() for k, p in layer.named_parameters()}}

    # 8. packed sequences through a 2-layer bidirectional GRU and an LSTM (h0 given), unsorted lengths
    packed = []
    for kind, cls, kw in [("GRU", P.GRU, dict(num_layers=2, bidirectional=True)),
                          ("LSTM", P.LSTM, dict(num_layers=1, bidirectional=True))]:
        rnn = cls(3, 4, batch_first=True, **kw)
        randomize(rnn)
        lengths = torch.tensor([2, 5, 1, 3])
        x = torch.randn(4, 5, 3).requires_grad_(True)
        D = 2 * kw["num_layers"]
        h0 = torch.randn(D, 4, 4)
        hx = (h0, torch.randn(D, 4, 4)) if kind == "LSTM" else h0
        pk = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out_p, hn = rnn(pk, hx)
        padded, _ = torch.nn.utils.rnn.pad_packed_sequence(out_p, batch_first=True, padding_value=-1.0,
                                                              total_length=6)
        hn = hn[0] if kind == "LSTM" else hn
        R, R2 = torch.randn_like(padded), torch.randn_like(hn)
        ((padded * R).sum() + (hn * R2).sum()).backward()
        packed.append({"kind": kind, "config": kw,
                       "state": {k: v.detach().clone() for k, v in rnn.state_dict().items()},
                       "lengths": lengths, "x": x.detach(), "h0": h0, "c0": hx[1] if kind == "LSTM" else None,
                       "out": padded.detach(), "h_n": hn.detach(), "R": R, "R2": R2, "x_grad": x.grad.clone(),
                       "grads": {k: p.grad.clone() for k, p in rnn.named_parameters()}})
    out["packed"] = packed

    # 9. AdamW (amsgrad) with a no-decay group of its own lr, LambdaLR with one function per group
    m = P.Sequential(P.Linear(3, 4), P.LayerNorm(4), P.Linear(4, 2))
    randomize(m)
    state = seq1(m.state_dict())
    decay = [p for n, p in m.named_parameters() if n in ("0.weight", "2.weight")]
    rest = [p for n, p in m.named_parameters() if n not in ("0.weight", "2.weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0, "lr": 3e-2}],
                            lr=1e-2, betas=(0.9, 0.95), eps=1e-6, amsgrad=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, [lambda s: 1 / (s + 1), lambda s: 0.9 ** s])
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    steps = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        sched.step()
        steps.append({"loss": loss.detach(), "lrs": [g["lr"] for g in opt.param_groups]})
    out["groups"] = {"state": state, "x": x, "y": y, "steps": steps, "final": seq1(m.state_dict())}

    # 10. an attention classifier: a pre-norm GELU TransformerEncoder (no final norm) with a key padding
    # mask, masked mean pooling, AdamW; PyTorch's state dict names (ember's TransformerEncoder loads them)
    enc = P.TransformerEncoder(P.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True, norm_first=True,
                                                         activation="gelu"), 2, enable_nested_tensor=False)
    head = P.Linear(8, 3)
    for m in (enc, head):
        randomize(m)
    state = {"enc": {k: v.detach().clone() for k, v in enc.state_dict().items()},
             "head": {k: v.detach().clone() for k, v in head.state_dict().items()}}
    opt = torch.optim.AdamW(list(enc.parameters()) + list(head.parameters()), lr=1e-2)
    x, y = torch.randn(3, 5, 8), torch.tensor([0, 2, 1])
    pad = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1]]).bool()
    steps = []
    for _ in range(3):
        opt.zero_grad()
        h = enc(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        loss = F.cross_entropy(head((h * keep).sum(1) / keep.sum(1)), y)
        loss.backward()
        steps.append({"loss": loss.detach()})
        if len(steps) == 1:
            steps[0]["grads"] = {k: p.grad.clone() for k, p in enc.named_parameters()}
        opt.step()
    out["encoder"] = {"state": state, "x": x, "y": y + 1, "pad": pad, "steps": steps,
                      "final": {k: v.detach().clone() for k, v in enc.state_dict().items()}}

    # 11. full backward hooks: on the first Linear (its input needs no grad: grad_input None), on the Tanh,
    # and on the last Linear returning grad_input halved (the earlier layers' gradients halve)
    net = P.Sequential(P.Linear(3, 4), P.Tanh(), P.Linear(4, 2))
    randomize(net)
    seen = {}

    def keep(name):
        def hook(m, gin, gout):
            seen[name] = {"grad_input": [g.clone() if g is not None else None for g in gin],
                          "grad_output": [g.clone() for g in gout]}
        return hook

    net[0].register_full_backward_hook(keep("first"))
    net[1].register_full_backward_hook(keep("tanh"))
    net[2].register_full_backward_hook(lambda m, gin, gout: tuple(g * 0.5 for g in gin))
    x, R = torch.randn(5, 3), torch.randn(5, 2)
    (net(x) * R).sum().backward()
    out["backward_hooks"] = {"state": seq1(net.state_dict()), "x": x, "R": R,
                             "first_grad_output": seen["first"]["grad_output"][0],
                             "first_grad_input_is_none": seen["first"]["grad_input"][0] is None,
                             "tanh_grad_input": seen["tanh"]["grad_input"][0],
                             "tanh_grad_output": seen["tanh"]["grad_output"][0], "grads": grads1(net)}

    # 12. MultiplicativeLR's lrs, one function for both groups and one per group (ember's steps are 1-based
    # as PyTorch's last_epoch after the first step)
    def mult_lrs(lambdas):
        ps = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
        opt = torch.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.5}], lr=0.1)
        sched = torch.optim.lr_scheduler.MultiplicativeLR(opt, lambdas)
        lrs = []
        for _ in range(5):
            opt.step()
            sched.step()
            lrs.append([g["lr"] for g in opt.param_groups])
        return lrs

    out["multiplicative"] = {"one": mult_lrs(lambda s: 0.9 if s % 2 else 1.1),
                             "per_group": mult_lrs([lambda s: 0.95, lambda s: 1 / (s + 1)])}
    return out


def main():
    write(os.path.join(HERE, "fixtures", "nn_modules.lua"),
          {"torch_version": torch.__version__, "cases": module_cases(), "losses": loss_cases()})
    write(os.path.join(HERE, "fixtures", "nn_optim.lua"),
          {"torch_version": torch.__version__, "optim": optim_cases(), "clip": clip_cases(),
           "schedules": schedule_cases()})
    write(os.path.join(HERE, "fixtures", "nn_modern.lua"),
          {"torch_version": torch.__version__, "cases": modern_cases(), "init": init_cases()})
    write(os.path.join(HERE, "fixtures", "nn_more.lua"), {"torch_version": torch.__version__, "cases": more_cases(),
                                                          "cross_entropy": cross_entropy_cases()})
    write(os.path.join(HERE, "fixtures", "nn_rnn.lua"), {"torch_version": torch.__version__, "cases": rnn_cases()})
    write(os.path.join(HERE, "fixtures", "nn_optim_more.lua"),
          {"torch_version": torch.__version__, "optim": optim_more_cases(), "schedules": schedule_more_cases()})
    write(os.path.join(HERE, "fixtures", "nn_extra.lua"), {"torch_version": torch.__version__, "cases": extra_cases()})
    write(os.path.join(HERE, "fixtures", "nn_probe.lua"), {"torch_version": torch.__version__,
                                                           "soft_cross_entropy": probe_cases()})
    write(os.path.join(HERE, "fixtures", "nn_probe_models.lua"), {"torch_version": torch.__version__,
                                                                  "cases": probe_models_cases()})
    write(os.path.join(HERE, "fixtures", "nn_flex.lua"), {"torch_version": torch.__version__, "cases": flex_cases()})
    write(os.path.join(HERE, "fixtures", "nn_pytorch_user.lua"), {"torch_version": torch.__version__,
                                                                  **pytorch_user_cases()})
    write(os.path.join(HERE, "fixtures", "nn_functional.lua"), {"torch_version": torch.__version__,
                                                               "cases": functional_cases()})
    write(os.path.join(HERE, "fixtures", "nn_autograd.lua"), {"torch_version": torch.__version__,
                                                             **autograd_cases()})
    write(os.path.join(HERE, "fixtures", "nn_probe_workflows.lua"), {"torch_version": torch.__version__,
                                                                    **probe_workflows_cases()})
    write(os.path.join(HERE, "fixtures", "nn_torch_mha.lua"), {"torch_version": torch.__version__,
                                                              "cases": torch_mha_cases()})


if __name__ == "__main__":
    main()
