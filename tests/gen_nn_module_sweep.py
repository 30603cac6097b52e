"""A differential sweep of ember.nn's MODULES against torch.nn (PyTorch 1.13):
tests/fixtures/nn_module_sweep.lua, read by tests/lua/nn_module_sweep_spec.lua.

    /usr/bin/python3 tests/gen_nn_module_sweep.py

A case is a module built both ways -- `ctor`, ember's Lua spelling (over
`nn`, `ember`), and the torch module beside it here -- in float64, its
parameters and buffers drawn at random and saved as torch's state dict
(`state`, torch's names), inputs, and a Lua chunk `call` over `m` and the
inputs that returns what the torch call returns (a tuple as several values
or a table). The spec builds ember's module, checks that
`torch_state_dict()` has torch's names and shapes and that `parameters()`
come in torch's order (`param_shapes`), loads `state`, runs the call in
`mode` ("train" or "eval"), and compares every output, the state after the
call (running statistics), and the gradients of sum(out_i * w_i) over the
float outputs for every float input and every parameter (by torch's name).
`repr` is torch's str(module), compared with True/False read as true/false
(not where `layout` names ember's documented different children).
Ids named in `idx` are written +1 (ember's are 1-based).

`init` cases hold the statistics of torch's default initialisation of each
parameter (min, max, mean, std, over large shapes) for the spec to compare
with ember's own draw. `refuse` cases hold a torch option ember does not
have: the constructor must refuse it with an error naming the module and
the option.
"""
import math

import torch
import torch.nn as tnn

from fixture_writer import Writer, lua_float

SEED = 4321
torch.manual_seed(SEED)
CASES, INITS, REFUSE = [], [], []


def lf14(v):
    return lua_float(v) if math.isnan(v) or math.isinf(v) else "%.14g" % v


class SweepWriter(Writer):
    """Every tensor names its dtype; strings escaped (reprs span lines)."""

    def value(self, v, indent=""):
        if isinstance(v, str):
            return '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return super().value(v, indent)

    def tensor(self, t):
        t = t.detach()
        shape = "{" + ", ".join(str(s) for s in t.shape) + "}"
        flat = t.reshape(-1).tolist()
        if t.dtype == torch.bool:
            data, dt = ",".join("true" if v else "false" for v in flat), "bool"
        elif t.dtype == torch.int64:
            data, dt = ",".join(str(int(v)) for v in flat), "int64"
        else:
            # 14 digits: the inputs (a 1/256 grid) exactly, the results to 1e-14 (the spec asks 1e-10)
            data, dt = ",".join(lf14(float(v)) for v in flat), "float64"
        return '{shape=%s,dtype="%s",data={%s}}' % (shape, dt, data)


def flat_out(o):
    if o is None:
        return []
    if isinstance(o, (tuple, list)):
        r = []
        for x in o:
            r += flat_out(x)
        return r
    return [o]


def randomise(m):
    """Every float parameter and buffer drawn at random (variances positive)."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(short(torch.randn_like(p) * 0.5))
        for name, b in m.named_buffers():
            if not b.is_floating_point():
                continue
            if name.endswith("running_var"):
                b.copy_(short(torch.rand_like(b) + 0.5))
            else:
                b.copy_(short(torch.randn_like(b) * 0.5))


def case(name, ctor, tmod, inputs, call, tcall, mode="eval", idx=(), grad=True, repr=True, rand=True, known=None, nograd=(), layout=None, tol=None, detach=()):
    """tmod: the torch module (made here, float64); inputs: name -> tensor;
    call: Lua chunk over m and the inputs; tcall(m, **inputs) torch's."""
    m = tmod.double()
    if rand:
        randomise(m)
    m.train(mode == "train")
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    pnames = [n for n, _ in m.named_parameters()]
    pshapes = [list(p.shape) for _, p in m.named_parameters()]
    targs = {}
    for k, v in inputs.items():
        v = v.clone()
        if grad and v.dtype == torch.float64 and k not in nograd:
            v.requires_grad_(True)
        targs[k] = v
    out = flat_out(tcall(m, **targs))
    c = {"name": name, "ctor": ctor, "call": call, "mode": mode,
         "inputs": {k: (v + 1 if k in idx else v) for k, v in inputs.items()},
         "state": state, "param_names": pnames, "param_shapes": pshapes,
         "want": [o.detach() for o in out]}
    if repr:
        c["repr"] = str(m)
    known = known or KNOWN.get(name)
    if known:
        c["known"] = known
    if nograd:
        c["nograd"] = sorted(nograd)
    if layout:
        c["layout"] = layout
    if tol:
        c["tol"] = tol
    if repr and name in REPR_KNOWN:
        c["repr_known"] = REPR_KNOWN[name]
    after = {k: v.detach().clone() for k, v in m.state_dict().items()}
    if any(not torch.equal(after[k], state[k]) for k in state):
        c["state_after"] = after
    if grad:
        ws, loss = [], 0
        for i, o in enumerate(out):
            if o.is_floating_point() and o.requires_grad and i + 1 not in detach:
                w = short(torch.randn(o.shape, dtype=torch.float64))
                loss = loss + (o * w).sum()
                ws.append(w)
            else:
                ws.append(False)
        loss.backward()
        c["w"] = ws
        c["grads"] = {k: (v.grad if v.grad is not None else torch.zeros_like(v))
                      for k, v in targs.items() if v.requires_grad}
        c["param_grads"] = {n: (p.grad if p.grad is not None else torch.zeros_like(p))
                            for n, p in m.named_parameters()}
    CASES.append(c)


# Cases ember fails today, with why: counted, not failed, by the spec (which
# fails a known case that agrees: drop its mark here when it is fixed).
KNOWN = {
    "Conv1d_valid": "nn.Conv* print no padding=valid",
}
KNOWN_INIT = {}

ONE_BASED = "ember's dims and ids are 1-based (lua/README.md), so the printed dim or padding_idx is torch's + 1"
OWN_REPR = "ember prints its options (torch prints none, or Python's float and tuple spellings)"
REPR_KNOWN = {n: ONE_BASED for n in ("Embedding_padding_idx", "Embedding_padding_idx_neg", "Embedding_scale_grad_by_freq", "EmbeddingBag_padding_idx", "Softmax", "GLU_dim", "Flatten",
                                     "Flatten_dims", "Unflatten", "CosineSimilarity_dim", "NLLLoss_ignore", "Softmin")}
REPR_KNOWN.update({n: OWN_REPR for n in (
    "EmbeddingBag_last_offset", "LayerNorm", "LayerNorm_tuple", "LayerNorm_noaffine", "RNN_relu_2l_bi", "ELU_kw",
    "Hardtanh", "GELU", "CosineSimilarity", "PairwiseDistance", "PairwiseDistance_p1_keep", "Dropout_eval",
    "Upsample_nearest", "Upsample_bilinear_ac", "Upsample_linear", "ZeroPad2d", "MarginRankingLoss", "TripletMarginLoss",
    "KLDivLoss_batchmean", "HuberLoss_delta", "SmoothL1Loss_beta", "L1Loss_none", "MSELoss_sum", "BCELoss_w",
    "BCEWithLogitsLoss_w_sum", "BCEWithLogitsLoss_pw", "CrossEntropyLoss_probs", "CrossEntropyLoss_w_ls_ii",
    "GELU_tanh", "GELU_kw", "Threshold", "ConstantPad1d", "Embedding_max_norm", "Embedding_max_norm_p1",
    "LayerNorm_eps_3d_shape")})
REPR_KNOWN.update({"CrossEntropyLoss_" + r: OWN_REPR for r in ("mean", "sum", "none")})
REPR_KNOWN.update({"NLLLoss_w_" + r: OWN_REPR for r in ("mean", "sum", "none")})


def short(t):
    """t on a grid of 1/256: exact in few digits (a smaller fixture)."""
    return (t * 256).round() / 256


def x(*shape):
    return short(torch.randn(*shape, dtype=torch.float64))


def one(call_lua="return m(x)"):
    return call_lua, (lambda m, x: m(x))


# ---------------------------------------------------------------- linear layers
def linear():
    case("Linear", "nn.Linear(4, 3)", tnn.Linear(4, 3), {"x": x(2, 5, 4)}, *one())
    case("Linear_nobias", "nn.Linear(4, 3, {bias = false})", tnn.Linear(4, 3, bias=False), {"x": x(2, 4)}, *one())
    case("Linear_unbatched", "nn.Linear(4, 3)", tnn.Linear(4, 3), {"x": x(4)}, *one())
    case("Bilinear", "nn.Bilinear(3, 4, 2)", tnn.Bilinear(3, 4, 2), {"a": x(5, 3), "b": x(5, 4)},
         "return m(a, b)", lambda m, a, b: m(a, b))
    case("Bilinear_nobias", "nn.Bilinear(3, 4, 2, {bias = false})", tnn.Bilinear(3, 4, 2, bias=False),
         {"a": x(2, 5, 3), "b": x(2, 5, 4)}, "return m(a, b)", lambda m, a, b: m(a, b))
    case("Identity", "nn.Identity()", tnn.Identity(), {"x": x(2, 3)}, *one())


# ---------------------------------------------------------------- embeddings
def embeddings():
    ids = torch.tensor([[1, 3, 3, 0], [9, 2, 3, 1]])
    case("Embedding", "nn.Embedding(10, 3)", tnn.Embedding(10, 3), {"i": ids}, "return m(i)", lambda m, i: m(i), idx={"i"})
    case("Embedding_padding_idx", "nn.Embedding(10, 3, {padding_idx = 4})", tnn.Embedding(10, 3, padding_idx=3),
         {"i": ids}, "return m(i)", lambda m, i: m(i), idx={"i"})
    case("Embedding_padding_idx_neg", "nn.Embedding(10, 3, {padding_idx = -2})", tnn.Embedding(10, 3, padding_idx=-2),
         {"i": torch.tensor([[8, 3, 8], [0, 8, 1]])}, "return m(i)", lambda m, i: m(i), idx={"i"})
    # max_norm renormalises the looked-up rows in place (the state after the call)
    case("Embedding_max_norm", "nn.Embedding(10, 3, {max_norm = 0.6})", tnn.Embedding(10, 3, max_norm=0.6),
         {"i": ids}, "return m(i)", lambda m, i: m(i), idx={"i"}, grad=False)
    case("Embedding_max_norm_p1", "nn.Embedding(10, 3, {max_norm = 0.9, norm_type = 1})",
         tnn.Embedding(10, 3, max_norm=0.9, norm_type=1), {"i": ids}, "return m(i)", lambda m, i: m(i), idx={"i"}, grad=False)
    case("Embedding_scale_grad_by_freq", "nn.Embedding(10, 3, {scale_grad_by_freq = true, padding_idx = 2})",
         tnn.Embedding(10, 3, scale_grad_by_freq=True, padding_idx=1), {"i": ids}, "return m(i)", lambda m, i: m(i), idx={"i"})
    flat = torch.tensor([1, 3, 3, 0, 9, 2, 3, 1])
    offs = torch.tensor([0, 3, 3, 5])
    for mode in ("sum", "mean", "max"):
        case("EmbeddingBag_" + mode, 'nn.EmbeddingBag(10, 3, {mode = "%s"})' % mode, tnn.EmbeddingBag(10, 3, mode=mode),
             {"i": flat, "o": offs}, "return m(i, o)", lambda m, i, o: m(i, o), idx={"i", "o"})
    case("EmbeddingBag_2d", "nn.EmbeddingBag(10, 3)", tnn.EmbeddingBag(10, 3), {"i": ids}, "return m(i)",
         lambda m, i: m(i), idx={"i"})
    case("EmbeddingBag_psw", 'nn.EmbeddingBag(10, 3, {mode = "sum"})', tnn.EmbeddingBag(10, 3, mode="sum"),
         {"i": flat, "o": offs, "p": x(8)}, "return m(i, o, p)", lambda m, i, o, p: m(i, o, p), idx={"i", "o"})
    case("EmbeddingBag_padding_idx", 'nn.EmbeddingBag(10, 3, {mode = "mean", padding_idx = 4})',
         tnn.EmbeddingBag(10, 3, mode="mean", padding_idx=3), {"i": flat, "o": offs}, "return m(i, o)",
         lambda m, i, o: m(i, o), idx={"i", "o"})
    case("EmbeddingBag_max_norm", 'nn.EmbeddingBag(10, 3, {mode = "max", max_norm = 0.7, norm_type = 3})',
         tnn.EmbeddingBag(10, 3, mode="max", max_norm=0.7, norm_type=3), {"i": flat, "o": offs}, "return m(i, o)",
         lambda m, i, o: m(i, o), idx={"i", "o"}, grad=False, repr=False)
    case("EmbeddingBag_scale_grad_by_freq", 'nn.EmbeddingBag(10, 3, {mode = "mean", scale_grad_by_freq = true})',
         tnn.EmbeddingBag(10, 3, mode="mean", scale_grad_by_freq=True), {"i": ids}, "return m(i)",
         lambda m, i: m(i), idx={"i"}, repr=False,
         known="torch 1.13's CPU embedding_bag backward divides by the wrong counts with scale_grad_by_freq (sum mode: an id "
               "seen 3 times gets 3, one seen once 1/3); ember divides each id's gradient by its count, as nn.Embedding")
    case("EmbeddingBag_last_offset", 'nn.EmbeddingBag(10, 3, {mode = "sum", include_last_offset = true})',
         tnn.EmbeddingBag(10, 3, mode="sum", include_last_offset=True), {"i": flat, "o": torch.tensor([0, 3, 5, 8])},
         "return m(i, o)", lambda m, i, o: m(i, o), idx={"i", "o"})


# ---------------------------------------------------------------- convolutions
def convs():
    C = [
        ("Conv1d", "nn.Conv1d(4, 6, 3)", tnn.Conv1d(4, 6, 3), (2, 4, 9)),
        ("Conv1d_opts", "nn.Conv1d(4, 6, 3, {stride = 2, padding = 2, dilation = 2, groups = 2, bias = false})",
         tnn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, bias=False), (2, 4, 11)),
        ("Conv1d_same_even", 'nn.Conv1d(3, 2, 4, {padding = "same", dilation = 2})',
         tnn.Conv1d(3, 2, 4, padding="same", dilation=2), (2, 3, 10)),
        ("Conv1d_valid", 'nn.Conv1d(3, 2, 4, {padding = "valid"})', tnn.Conv1d(3, 2, 4, padding="valid"), (2, 3, 10)),
        ("Conv1d_unbatched", "nn.Conv1d(3, 2, 3)", tnn.Conv1d(3, 2, 3), (3, 7)),
        ("Conv2d", "nn.Conv2d(3, 4, 3)", tnn.Conv2d(3, 4, 3), (2, 3, 6, 7)),
        ("Conv2d_opts", "nn.Conv2d(4, 6, {2, 3}, {stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}, groups = 2})",
         tnn.Conv2d(4, 6, (2, 3), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2), (2, 4, 7, 8)),
        ("Conv2d_same", 'nn.Conv2d(3, 4, {2, 3}, {padding = "same", bias = false})',
         tnn.Conv2d(3, 4, (2, 3), padding="same", bias=False), (1, 3, 5, 6)),
        ("Conv2d_depthwise", "nn.Conv2d(4, 8, 3, {groups = 4, padding = 1})", tnn.Conv2d(4, 8, 3, groups=4, padding=1), (2, 4, 5, 5)),
        ("ConvTranspose1d", "nn.ConvTranspose1d(4, 6, 3)", tnn.ConvTranspose1d(4, 6, 3), (2, 4, 5)),
        ("ConvTranspose1d_opts", "nn.ConvTranspose1d(4, 6, 3, {stride = 2, padding = 1, output_padding = 1, groups = 2, dilation = 2, bias = false})",
         tnn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2, bias=False), (2, 4, 5)),
        ("ConvTranspose2d", "nn.ConvTranspose2d(3, 4, 3)", tnn.ConvTranspose2d(3, 4, 3), (2, 3, 4, 5)),
        ("ConvTranspose2d_opts", "nn.ConvTranspose2d(4, 2, {3, 2}, {stride = {2, 3}, padding = {1, 0}, output_padding = {1, 2}, groups = 2})",
         tnn.ConvTranspose2d(4, 2, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2), (2, 4, 3, 4)),
        ("ConvTranspose2d_unbatched", "nn.ConvTranspose2d(3, 2, 2, {stride = 2})", tnn.ConvTranspose2d(3, 2, 2, stride=2), (3, 3, 3)),
    ]
    for pm in ("reflect", "replicate", "circular"):
        C.append(("Conv1d_" + pm, 'nn.Conv1d(3, 2, 3, {padding = 2, padding_mode = "%s"})' % pm,
                  tnn.Conv1d(3, 2, 3, padding=2, padding_mode=pm), (2, 3, 6)))
        C.append(("Conv2d_" + pm, 'nn.Conv2d(2, 3, 3, {padding = {1, 2}, stride = 2, padding_mode = "%s"})' % pm,
                  tnn.Conv2d(2, 3, 3, padding=(1, 2), stride=2, padding_mode=pm), (2, 2, 5, 6)))
    C.append(("Conv2d_same_reflect", 'nn.Conv2d(2, 3, 4, {padding = "same", padding_mode = "reflect"})',
              tnn.Conv2d(2, 3, 4, padding="same", padding_mode="reflect"), (1, 2, 6, 6)))
    for name, ctor, tm, shape in C:
        case(name, ctor, tm, {"x": x(*shape)}, *one())
    case("ConvTranspose2d_output_size", "nn.ConvTranspose2d(2, 3, 3, {stride = 2, padding = 1})",
         tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1), {"x": x(1, 2, 4, 4)},
         "return m(x, {8, 8})", lambda m, x: m(x, output_size=[8, 8]))


# ---------------------------------------------------------------- normalisation
def norms():
    case("BatchNorm1d_train", "nn.BatchNorm1d(3)", tnn.BatchNorm1d(3), {"x": x(5, 3)}, *one(), mode="train")
    case("BatchNorm1d_train_3d", "nn.BatchNorm1d(3)", tnn.BatchNorm1d(3), {"x": x(4, 3, 6)}, *one(), mode="train")
    case("BatchNorm1d_eval", "nn.BatchNorm1d(3)", tnn.BatchNorm1d(3), {"x": x(4, 3, 6)}, *one())
    case("BatchNorm1d_noaffine", "nn.BatchNorm1d(3, {affine = false})", tnn.BatchNorm1d(3, affine=False),
         {"x": x(5, 3)}, *one(), mode="train")
    case("BatchNorm1d_no_stats_eval", "nn.BatchNorm1d(3, {track_running_stats = false})",
         tnn.BatchNorm1d(3, track_running_stats=False), {"x": x(5, 3)}, *one())
    two = ("m(x); return m(y)", lambda m, x, y: (m(x), m(y))[1])
    case("BatchNorm1d_momentum_none", "nn.BatchNorm1d(3, {momentum = false})",
         tnn.BatchNorm1d(3, momentum=None), {"x": x(5, 3), "y": x(4, 3)}, *two, mode="train")
    case("BatchNorm1d_momentum", "nn.BatchNorm1d(3, {momentum = 0.3, eps = 1e-3})",
         tnn.BatchNorm1d(3, momentum=0.3, eps=1e-3), {"x": x(5, 3), "y": x(4, 3)}, *two, mode="train")
    case("BatchNorm2d_train", "nn.BatchNorm2d(3)", tnn.BatchNorm2d(3), {"x": x(2, 3, 4, 5)}, *one(), mode="train")
    case("BatchNorm2d_eval", "nn.BatchNorm2d(3)", tnn.BatchNorm2d(3), {"x": x(2, 3, 4, 5)}, *one())
    case("BatchNorm2d_no_stats", "nn.BatchNorm2d(3, {affine = false, track_running_stats = false})",
         tnn.BatchNorm2d(3, affine=False, track_running_stats=False), {"x": x(2, 3, 4, 5)}, *one(), mode="train")
    case("InstanceNorm1d", "nn.InstanceNorm1d(3)", tnn.InstanceNorm1d(3), {"x": x(2, 3, 6)}, *one())
    case("InstanceNorm1d_affine_stats", "nn.InstanceNorm1d(3, {affine = true, track_running_stats = true})",
         tnn.InstanceNorm1d(3, affine=True, track_running_stats=True), {"x": x(2, 3, 6)}, *one(), mode="train")
    case("InstanceNorm1d_stats_eval", "nn.InstanceNorm1d(3, {affine = true, track_running_stats = true})",
         tnn.InstanceNorm1d(3, affine=True, track_running_stats=True), {"x": x(2, 3, 6)}, *one())
    case("InstanceNorm2d", "nn.InstanceNorm2d(3, {affine = true})", tnn.InstanceNorm2d(3, affine=True),
         {"x": x(2, 3, 4, 5)}, *one(), mode="train")
    case("InstanceNorm2d_unbatched", "nn.InstanceNorm2d(3)", tnn.InstanceNorm2d(3), {"x": x(3, 4, 5)}, *one())
    case("GroupNorm", "nn.GroupNorm(2, 4)", tnn.GroupNorm(2, 4), {"x": x(3, 4, 5)}, *one())
    case("GroupNorm_noaffine", "nn.GroupNorm(4, 4, {affine = false, eps = 1e-3})", tnn.GroupNorm(4, 4, affine=False, eps=1e-3),
         {"x": x(2, 4, 3, 2)}, *one())
    case("LayerNorm", "nn.LayerNorm(4)", tnn.LayerNorm(4), {"x": x(2, 3, 4)}, *one())
    case("LayerNorm_tuple", "nn.LayerNorm({3, 4}, {eps = 1e-3})", tnn.LayerNorm((3, 4), eps=1e-3), {"x": x(2, 3, 4)}, *one())
    case("LayerNorm_noaffine", "nn.LayerNorm({3, 4}, {elementwise_affine = false})",
         tnn.LayerNorm([3, 4], elementwise_affine=False), {"x": x(2, 3, 4)}, *one())


class RMSNormRef(tnn.Module):
    """torch.nn.RMSNorm (PyTorch 2.4; 1.13 has none), as documented there."""

    def __init__(self, shape, eps=None, elementwise_affine=True):
        super().__init__()
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps = eps
        self.weight = tnn.Parameter(torch.ones(self.shape)) if elementwise_affine else None

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        eps = self.eps if self.eps is not None else torch.finfo(x.dtype).eps
        y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
        return y * self.weight if self.weight is not None else y


def rmsnorm():
    case("RMSNorm", "nn.RMSNorm(4)", RMSNormRef(4), {"x": x(2, 3, 4)}, *one(), repr=False)
    case("RMSNorm_tuple_eps", "nn.RMSNorm({3, 4}, {eps = 1e-2})", RMSNormRef((3, 4), eps=1e-2), {"x": x(2, 3, 4) * 0.1}, *one(), repr=False)
    case("RMSNorm_noaffine", "nn.RMSNorm(4, {elementwise_affine = false, eps = 1e-6})", RMSNormRef(4, 1e-6, False),
         {"x": x(2, 4)}, *one(), repr=False)


# ---------------------------------------------------------------- recurrent
def rnns():
    case("RNN", "nn.RNN(3, 4)", tnn.RNN(3, 4), {"x": x(5, 2, 3)}, "return m(x)", lambda m, x: m(x))
    case("RNN_relu_2l_bi", 'nn.RNN(3, 4, {num_layers = 2, nonlinearity = "relu", bidirectional = true})',
         tnn.RNN(3, 4, num_layers=2, nonlinearity="relu", bidirectional=True), {"x": x(5, 2, 3), "h": x(4, 2, 4)},
         "return m(x, h)", lambda m, x, h: m(x, h))
    case("RNN_batch_first_nobias", "nn.RNN(3, 4, {batch_first = true, bias = false})",
         tnn.RNN(3, 4, batch_first=True, bias=False), {"x": x(2, 5, 3)}, "return m(x)", lambda m, x: m(x))
    case("RNN_unbatched", "nn.RNN(3, 4, {num_layers = 2})", tnn.RNN(3, 4, num_layers=2), {"x": x(5, 3), "h": x(2, 4)},
         "return m(x, h)", lambda m, x, h: m(x, h))
    case("LSTM", "nn.LSTM(3, 4)", tnn.LSTM(3, 4), {"x": x(5, 2, 3)}, "return m(x)", lambda m, x: m(x))
    case("LSTM_2l_bi_bf", "nn.LSTM(3, 4, {num_layers = 2, bidirectional = true, batch_first = true, dropout = 0.5})",
         tnn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True, dropout=0.5),
         {"x": x(2, 5, 3), "h": x(4, 2, 4), "c": x(4, 2, 4)}, "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)))
    case("LSTM_unbatched", "nn.LSTM(3, 4)", tnn.LSTM(3, 4), {"x": x(5, 3), "h": x(1, 4), "c": x(1, 4)},
         "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)))
    case("LSTM_proj", "nn.LSTM(3, 4, {proj_size = 2})", tnn.LSTM(3, 4, proj_size=2), {"x": x(5, 2, 3)},
         "return m(x)", lambda m, x: m(x))
    case("LSTM_proj_2l_bi", "nn.LSTM(3, 5, {proj_size = 2, num_layers = 2, bidirectional = true})",
         tnn.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True),
         {"x": x(4, 2, 3), "h": x(4, 2, 2), "c": x(4, 2, 5)}, "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)))
    case("LSTM_proj_unbatched_bf", "nn.LSTM(3, 5, {proj_size = 3, batch_first = true})", tnn.LSTM(3, 5, proj_size=3, batch_first=True),
         {"x": x(4, 3), "h": x(1, 3), "c": x(1, 5)}, "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)))
    case("GRU", "nn.GRU(3, 4)", tnn.GRU(3, 4), {"x": x(5, 2, 3)}, "return m(x)", lambda m, x: m(x))
    case("GRU_2l_bi_h0", "nn.GRU(3, 4, {num_layers = 2, bidirectional = true, bias = false})",
         tnn.GRU(3, 4, num_layers=2, bidirectional=True, bias=False), {"x": x(5, 2, 3), "h": x(4, 2, 4)},
         "return m(x, h)", lambda m, x, h: m(x, h))
    case("LSTMCell", "nn.LSTMCell(3, 4)", tnn.LSTMCell(3, 4), {"x": x(2, 3), "h": x(2, 4), "c": x(2, 4)},
         "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)))
    case("LSTMCell_nostate", "nn.LSTMCell(3, 4, {bias = false})", tnn.LSTMCell(3, 4, bias=False), {"x": x(3)},
         "return m(x)", lambda m, x: m(x))
    case("GRUCell", "nn.GRUCell(3, 4)", tnn.GRUCell(3, 4), {"x": x(2, 3), "h": x(2, 4)},
         "return m(x, h)", lambda m, x, h: m(x, h))
    case("RNNCell", 'nn.RNNCell(3, 4, {nonlinearity = "relu"})', tnn.RNNCell(3, 4, nonlinearity="relu"),
         {"x": x(2, 3), "h": x(2, 4)}, "return m(x, h)", lambda m, x, h: m(x, h))
    case("RNNCell_tanh", "nn.RNNCell(3, 4)", tnn.RNNCell(3, 4), {"x": x(2, 3)}, "return m(x)", lambda m, x: m(x))


# ---------------------------------------------------------------- attention and Transformers
def causal(n):
    return torch.triu(torch.full((n, n), float("-inf"), dtype=torch.float64), 1)


LAYOUT = ("lua/ember/nn/_torch_names.lua: ember's attention has q_proj/k_proj/v_proj and the layers an ff child, "
          "so printing and parameters() order differ from torch's; the state dicts map both ways")


def transformers():
    case = lambda *a, **k: globals()["case"](*a, layout=LAYOUT, **k)
    d, h = 4, 2
    lo = "dim_feedforward = 8, dropout = 0.1"
    tk = dict(dim_feedforward=8, dropout=0.1)
    case("TEL_seq_first", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = false})" % lo,
         tnn.TransformerEncoderLayer(d, h, **tk), {"x": x(5, 2, d)}, *one())
    case("TEL_bf_gelu_normfirst", 'nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true, activation = "gelu", norm_first = true, layer_norm_eps = 1e-4})' % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, activation="gelu", norm_first=True, layer_norm_eps=1e-4, **tk),
         {"x": x(2, 5, d)}, *one())
    kpm = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])
    case("TEL_masks", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 5, d), "am": causal(5), "kpm": kpm},
         "return m(x, {attn_mask = am, key_padding_mask = kpm})",
         lambda m, x, am, kpm: m(x, src_mask=am, src_key_padding_mask=kpm))
    case("TEL_torch_names", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 5, d), "am": x(5, 5), "kpm": kpm},
         "return m(x, {src_mask = am, src_key_padding_mask = kpm})",
         lambda m, x, am, kpm: m(x, src_mask=am, src_key_padding_mask=kpm))
    case("TEL_activation_callable", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true, activation = nn.functional.silu})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, activation=torch.nn.functional.silu, **tk), {"x": x(2, 5, d)}, *one())
    case("TDL_activation_module", 'nn.TransformerDecoderLayer(4, 2, {%s, batch_first = true, activation = nn.GELU("tanh")})' % lo,
         tnn.TransformerDecoderLayer(d, h, batch_first=True, activation=tnn.GELU(approximate="tanh"), **tk),
         {"x": x(2, 3, d), "mem": x(2, 4, d)}, "return m(x, mem, {causal = false})", lambda m, x, mem: m(x, mem))
    case("TEL_positional", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 5, d), "am": x(5, 5), "kpm": kpm},
         "return m(x, am, kpm)", lambda m, x, am, kpm: m(x, am, kpm))
    case("TDL_positional", "nn.TransformerDecoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerDecoderLayer(d, h, batch_first=True, **tk),
         {"x": x(2, 4, d), "mem": x(2, 5, d), "tm": causal(4), "mm": x(4, 5), "kpm": kpm},
         "return m(x, mem, tm, mm, nil, kpm)", lambda m, x, mem, tm, mm, kpm: m(x, mem, tm, mm, None, kpm))
    case("MHA_positional", "nn.MultiheadAttention(8, 2)", tnn.MultiheadAttention(8, 2),
         {"q": x(5, 2, 8), "kpm": kpm, "am": x(5, 5)}, "return m(q, q, q, kpm, true, am, false)",
         lambda m, q, kpm, am: m(q, q, q, kpm, True, am, False))
    bm = torch.rand(5, 5) < 0.3
    bm.fill_diagonal_(False)
    case("TEL_bool_mask", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 5, d), "bm": bm},
         "return m(x, {block_mask = bm})", lambda m, x, bm: m(x, src_mask=bm))
    case("TEL_causal", "nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerEncoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 5, d), "am": causal(5)},
         "return m(x, {causal = true})", lambda m, x, am: m(x, src_mask=am), nograd={"am"})
    case("TDL_seq_first", "nn.TransformerDecoderLayer(4, 2, {%s, batch_first = false})" % lo,
         tnn.TransformerDecoderLayer(d, h, **tk), {"x": x(4, 2, d), "mem": x(6, 2, d)},
         "return m(x, mem, {causal = false})", lambda m, x, mem: m(x, mem))
    case("TDL_float_mask", "nn.TransformerDecoderLayer(4, 2, {%s, batch_first = true})" % lo,
         tnn.TransformerDecoderLayer(d, h, batch_first=True, **tk), {"x": x(2, 4, d), "mem": x(2, 6, d), "tm": x(4, 4), "mm": x(4, 6)},
         "return m(x, mem, {tgt_mask = tm, memory_mask = mm})",
         lambda m, x, mem, tm, mm: m(x, mem, tgt_mask=tm, memory_mask=mm))
    mkpm = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    case("TDL_masks_normfirst", 'nn.TransformerDecoderLayer(4, 2, {%s, batch_first = true, norm_first = true, activation = "gelu"})' % lo,
         tnn.TransformerDecoderLayer(d, h, batch_first=True, norm_first=True, activation="gelu", **tk),
         {"x": x(2, 4, d), "mem": x(2, 6, d), "tm": causal(4), "mkpm": mkpm},
         "return m(x, mem, {tgt_mask = tm, memory_key_padding_mask = mkpm})",
         lambda m, x, mem, tm, mkpm: m(x, mem, tgt_mask=tm, memory_key_padding_mask=mkpm))
    d4, lo4, tk4 = 4, "dim_feedforward = 8, dropout = 0.1", dict(dim_feedforward=8, dropout=0.1)
    case("TransformerEncoder_norm", "nn.TransformerEncoder(4, 2, 2, {%s, batch_first = true, final_norm = true})" % lo4,
         tnn.TransformerEncoder(tnn.TransformerEncoderLayer(d4, h, batch_first=True, **tk4), 2, norm=tnn.LayerNorm(d4)),
         {"x": x(2, 5, d4)}, *one())
    case("TransformerEncoder_torch_ctor", "nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true, norm_first = true}), 2)" % lo4,
         tnn.TransformerEncoder(tnn.TransformerEncoderLayer(d4, h, batch_first=True, norm_first=True, **tk4), 2),
         {"x": x(2, 5, d4)}, *one())
    case("TransformerEncoder_torch_forward", "nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {%s, batch_first = true}), 2)" % lo4,
         tnn.TransformerEncoder(tnn.TransformerEncoderLayer(d4, h, batch_first=True, **tk4), 2),
         {"x": x(2, 5, d4), "am": x(5, 5), "kpm": kpm}, "return m(x, {mask = am, src_key_padding_mask = kpm})",
         lambda m, x, am, kpm: m(x, mask=am, src_key_padding_mask=kpm))
    case("TransformerEncoder_torch_ctor_norm", "nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {%s, batch_first = false}), 2, nn.LayerNorm(4))" % lo4,
         tnn.TransformerEncoder(tnn.TransformerEncoderLayer(d4, h, **tk4), 2, norm=tnn.LayerNorm(d4)),
         {"x": x(5, 2, d4)}, *one())
    case("TransformerDecoder", "nn.TransformerDecoder(4, 2, 2, {%s, batch_first = true})" % lo4,
         tnn.TransformerDecoder(tnn.TransformerDecoderLayer(d4, h, batch_first=True, **tk4), 2),
         {"x": x(2, 4, d4), "mem": x(2, 6, d4), "tm": causal(4)},
         "return m(x, mem, {tgt_mask = tm})", lambda m, x, mem, tm: m(x, mem, tgt_mask=tm))
    case("TransformerDecoder_torch_ctor", "nn.TransformerDecoder(nn.TransformerDecoderLayer(4, 2, {%s, batch_first = false}), 2, nn.LayerNorm(4))" % lo4,
         tnn.TransformerDecoder(tnn.TransformerDecoderLayer(d4, h, **tk4), 2, norm=tnn.LayerNorm(d4)),
         {"x": x(4, 2, d4), "mem": x(6, 2, d4)}, "return m(x, mem, {causal = false})", lambda m, x, mem: m(x, mem))
    case("Transformer", "nn.Transformer(4, 2, {num_encoder_layers = 1, num_decoder_layers = 2, %s, batch_first = false})" % lo4,
         tnn.Transformer(d4, h, num_encoder_layers=1, num_decoder_layers=2, **tk4),
         {"s": x(5, 2, d4), "t": x(4, 2, d4), "tm": causal(4)},
         "return m(s, t, {tgt_mask = tm})", lambda m, s, t, tm: m(s, t, tgt_mask=tm), repr=False)
    case("Transformer_bf_kpm", "nn.Transformer{d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, %s, batch_first = true, norm_first = true}" % lo4,
         tnn.Transformer(d4, h, num_encoder_layers=1, num_decoder_layers=1, batch_first=True, norm_first=True, **tk4),
         {"s": x(2, 5, d4), "t": x(2, 4, d4), "kpm": kpm},
         "return m(s, t, {src_key_padding_mask = kpm, memory_key_padding_mask = kpm})",
         lambda m, s, t, kpm: m(s, t, src_key_padding_mask=kpm, memory_key_padding_mask=kpm), repr=False)
    # MultiheadAttention
    case = lambda *a, **k: globals()["case"](*a, layout=LAYOUT, **k)
    mha = lambda m, q, k, v: m(q, k, v)
    case("MHA", "nn.MultiheadAttention(8, 2)", tnn.MultiheadAttention(8, 2), {"q": x(4, 2, 8), "k": x(6, 2, 8), "v": x(6, 2, 8)},
         "return m(q, k, v)", mha)
    case("MHA_kdim_vdim_nobias", "nn.MultiheadAttention(8, 2, {kdim = 3, vdim = 5, bias = false, batch_first = true})",
         tnn.MultiheadAttention(8, 2, kdim=3, vdim=5, bias=False, batch_first=True),
         {"q": x(2, 4, 8), "k": x(2, 6, 3), "v": x(2, 6, 5)}, "return m(q, k, v)", mha)
    case("MHA_masks_per_head", "nn.MultiheadAttention(8, 2, {dropout = 0.2})", tnn.MultiheadAttention(8, 2, dropout=0.2),
         {"q": x(4, 2, 8), "bm": torch.tensor([[False, True, False, False], [False, False, True, True], [True, False, False, True], [False, False, False, False]]), "kpm": torch.tensor([[False, False, True, True], [False] * 4])},
         "return m(q, q, q, {attn_mask = bm, key_padding_mask = kpm, average_attn_weights = false})",
         lambda m, q, bm, kpm: m(q, q, q, attn_mask=bm, key_padding_mask=kpm, average_attn_weights=False))
    case("MHA_float_mask_unbatched", "nn.MultiheadAttention(8, 2)", tnn.MultiheadAttention(8, 2),
         {"q": x(4, 8), "k": x(3, 8), "am": x(4, 3)},
         "return m(q, k, k, {attn_mask = am})", lambda m, q, k, am: m(q, k, k, attn_mask=am))
    case("MHA_causal_weights", "nn.MultiheadAttention(8, 2, {batch_first = true})", tnn.MultiheadAttention(8, 2, batch_first=True),
         {"q": x(2, 4, 8), "am": causal(4)}, "return m(q, q, q, {is_causal = true, attn_mask = am})",
         lambda m, q, am: m(q, q, q, attn_mask=am), nograd={"am"})
    case("MHA_bias_kv", "nn.MultiheadAttention(8, 2, {add_bias_kv = true})", tnn.MultiheadAttention(8, 2, add_bias_kv=True),
         {"q": x(4, 2, 8), "k": x(5, 2, 8), "v": x(5, 2, 8)}, "return m(q, k, v)", mha)
    case("MHA_zero_attn_masks", "nn.MultiheadAttention(8, 2, {add_zero_attn = true, batch_first = true, kdim = 3, vdim = 5})",
         tnn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True, kdim=3, vdim=5),
         {"q": x(2, 4, 8), "k": x(2, 5, 3), "v": x(2, 5, 5), "am": x(4, 5),
          "kpm": torch.tensor([[False, False, True, True, True], [False] * 5])},
         "return m(q, k, v, {attn_mask = am, key_padding_mask = kpm, average_attn_weights = false})",
         lambda m, q, k, v, am, kpm: m(q, k, v, attn_mask=am, key_padding_mask=kpm, average_attn_weights=False))
    case("MHA_both_bool_mask_unbatched", "nn.MultiheadAttention(8, 4, {add_bias_kv = true, add_zero_attn = true, bias = false})",
         tnn.MultiheadAttention(8, 4, add_bias_kv=True, add_zero_attn=True, bias=False),
         {"q": x(3, 8), "k": x(4, 8), "bm": torch.tensor([[False, True, False, False], [True, True, False, True], [False] * 4])},
         "return m(q, k, k, {attn_mask = bm})", lambda m, q, k, bm: m(q, k, k, attn_mask=bm))
    case("MHA_no_weights", "nn.MultiheadAttention(8, 2, {batch_first = true})", tnn.MultiheadAttention(8, 2, batch_first=True),
         {"q": x(2, 4, 8)}, "return m(q, q, q, {need_weights = false})", lambda m, q: m(q, q, q, need_weights=False))


# ---------------------------------------------------------------- activations
def activations():
    z = torch.tensor([-3., -1.5, -0.5, 0.3, 1.2, 2.5, 25., -30.], dtype=torch.float64)
    A = [
        ("ELU_alpha", "nn.ELU(0.5)", tnn.ELU(0.5)),
        ("ELU_kw", "nn.ELU{alpha = 2}", tnn.ELU(alpha=2.0)),
        ("LeakyReLU", "nn.LeakyReLU(0.2)", tnn.LeakyReLU(0.2)),
        ("LeakyReLU_default", "nn.LeakyReLU()", tnn.LeakyReLU()),
        ("Softplus", "nn.Softplus{beta = 2, threshold = 1}", tnn.Softplus(beta=2, threshold=1)),
        ("Softplus_default", "nn.Softplus()", tnn.Softplus()),
        ("Hardtanh", "nn.Hardtanh(-0.5, 2)", tnn.Hardtanh(-0.5, 2.)),
        ("GELU_tanh", 'nn.GELU("tanh")', tnn.GELU(approximate="tanh")),
        ("GELU_kw", 'nn.GELU{approximate = "tanh"}', tnn.GELU(approximate="tanh")),
        ("GELU", "nn.GELU()", tnn.GELU()),
        ("ReLU6", "nn.ReLU6()", tnn.ReLU6()),
        ("Hardswish", "nn.Hardswish()", tnn.Hardswish()),
        ("Hardsigmoid", "nn.Hardsigmoid()", tnn.Hardsigmoid()),
        ("Mish", "nn.Mish()", tnn.Mish()),
        ("SiLU", "nn.SiLU()", tnn.SiLU()),
        ("Softsign", "nn.Softsign()", tnn.Softsign()),
        ("Sigmoid", "nn.Sigmoid()", tnn.Sigmoid()),
        ("Tanh", "nn.Tanh()", tnn.Tanh()),
        ("ReLU", "nn.ReLU()", tnn.ReLU()),
        ("PReLU", "nn.PReLU()", tnn.PReLU()),
        ("SELU", "nn.SELU()", tnn.SELU()),
        ("CELU", "nn.CELU(0.7)", tnn.CELU(0.7)),
        ("LogSigmoid", "nn.LogSigmoid()", tnn.LogSigmoid()),
        ("Softshrink", "nn.Softshrink(0.6)", tnn.Softshrink(0.6)),
        ("Hardshrink", "nn.Hardshrink(0.6)", tnn.Hardshrink(0.6)),
        ("Tanhshrink", "nn.Tanhshrink()", tnn.Tanhshrink()),
        ("Threshold", "nn.Threshold(0.1, 20)", tnn.Threshold(0.1, 20.)),
    ]
    for name, ctor, tm in A:
        # torch's hardsigmoid_backward multiplies by 1/6 rounded to float32, celu's
        # backward scales by 1/alpha in float32 (ember's are exact in float64)
        case(name, ctor, tm, {"x": z.clone()}, *one(), tol=1e-7 if name in ("Hardsigmoid", "CELU") else None)
    case("PReLU_channels", "nn.PReLU(3)", tnn.PReLU(3), {"x": x(2, 3, 4)}, *one())
    case("PReLU_init", "nn.PReLU(3, {init = 0.1})", tnn.PReLU(3, init=0.1), {"x": x(2, 3)}, *one(), rand=False)
    case("Softmax", "nn.Softmax(2)", tnn.Softmax(1), {"x": x(2, 3, 4)}, *one())
    case("LogSoftmax", "nn.LogSoftmax(-1)", tnn.LogSoftmax(-1), {"x": x(2, 3, 4)}, *one())
    case("Softmin", "nn.Softmin(2)", tnn.Softmin(1), {"x": x(2, 3, 4)}, *one())
    case("GLU", "nn.GLU()", tnn.GLU(), {"x": x(2, 4)}, *one())
    case("GLU_dim", "nn.GLU(1)", tnn.GLU(0), {"x": x(4, 3)}, *one())


# ---------------------------------------------------------------- losses
def losses():
    two = "return m(a, b)"
    tl = lambda m, a, b: m(a, b)
    logits = x(5, 4)
    tgt = torch.tensor([0, 3, 1, 1, 2])
    w = torch.rand(4, dtype=torch.float64) + 0.5
    for red in ("mean", "sum", "none"):
        case("CrossEntropyLoss_" + red, 'nn.CrossEntropyLoss{reduction = "%s"}' % red, tnn.CrossEntropyLoss(reduction=red),
             {"a": logits, "b": tgt}, two, tl, idx={"b"})
        case("NLLLoss_w_" + red, 'nn.NLLLoss{weight = W, reduction = "%s"}' % red,
             tnn.NLLLoss(weight=w, reduction=red), {"a": logits.log_softmax(1), "b": tgt, "W": w},
             "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"})
    case("CrossEntropyLoss_w_ls_ii", "nn.CrossEntropyLoss{weight = W, label_smoothing = 0.2, ignore_index = 2}",
         tnn.CrossEntropyLoss(weight=w, label_smoothing=0.2, ignore_index=1), {"a": logits, "b": tgt, "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"})
    case("CrossEntropyLoss_probs", "nn.CrossEntropyLoss{label_smoothing = 0.1}", tnn.CrossEntropyLoss(label_smoothing=0.1),
         {"a": logits, "b": x(5, 4).softmax(1)}, two, tl)
    case("NLLLoss_ignore", "nn.NLLLoss{ignore_index = 4}", tnn.NLLLoss(ignore_index=3),
         {"a": logits.log_softmax(1), "b": tgt}, two, tl, idx={"b"})
    p = torch.rand(3, 4, dtype=torch.float64) * 0.9 + 0.05
    y = (torch.rand(3, 4) < 0.5).double()
    pw = torch.rand(4, dtype=torch.float64) + 0.5
    bw = torch.rand(3, 4, dtype=torch.float64)
    case("BCEWithLogitsLoss_pw", "nn.BCEWithLogitsLoss{pos_weight = P}", tnn.BCEWithLogitsLoss(pos_weight=pw),
         {"a": x(3, 4), "b": y, "P": pw}, "return m(a, b)",
         lambda m, a, b, P: m(a, b), nograd={"P"})
    case("BCEWithLogitsLoss_w_sum", 'nn.BCEWithLogitsLoss{weight = W, reduction = "sum"}', tnn.BCEWithLogitsLoss(weight=bw, reduction="sum"),
         {"a": x(3, 4), "b": y, "W": bw}, "return m(a, b)",
         lambda m, a, b, W: m(a, b), nograd={"W"})
    case("BCELoss_w", 'nn.BCELoss{weight = W, reduction = "none"}', tnn.BCELoss(weight=bw, reduction="none"),
         {"a": p, "b": y, "W": bw}, "return m(a, b)",
         lambda m, a, b, W: m(a, b), nograd={"W"})
    case("MSELoss_sum", 'nn.MSELoss{reduction = "sum"}', tnn.MSELoss(reduction="sum"), {"a": x(3, 4), "b": x(3, 4)}, two, tl)
    case("L1Loss_none", 'nn.L1Loss{reduction = "none"}', tnn.L1Loss(reduction="none"), {"a": x(3, 4), "b": x(3, 4)}, two, tl)
    case("SmoothL1Loss_beta", "nn.SmoothL1Loss{beta = 0.5}", tnn.SmoothL1Loss(beta=0.5), {"a": x(3, 4), "b": x(3, 4)}, two, tl)
    case("HuberLoss_delta", 'nn.HuberLoss{delta = 0.7, reduction = "sum"}', tnn.HuberLoss(delta=0.7, reduction="sum"),
         {"a": x(3, 4), "b": x(3, 4)}, two, tl)
    case("KLDivLoss_batchmean", 'nn.KLDivLoss{reduction = "batchmean", log_target = true}',
         tnn.KLDivLoss(reduction="batchmean", log_target=True),
         {"a": x(3, 4).log_softmax(1), "b": x(3, 4).log_softmax(1)}, two, tl)
    case("MarginRankingLoss", "nn.MarginRankingLoss{margin = 0.3}", tnn.MarginRankingLoss(margin=0.3),
         {"a": x(6), "b": x(6), "y": torch.tensor([1., -1., 1., 1., -1., -1.], dtype=torch.float64)},
         "return m(a, b, y)", lambda m, a, b, y: m(a, b, y))
    case("TripletMarginLoss", "nn.TripletMarginLoss{margin = 0.5, p = 1}", tnn.TripletMarginLoss(margin=0.5, p=1),
         {"a": x(4, 3), "b": x(4, 3), "c": x(4, 3)}, "return m(a, b, c)", lambda m, a, b, c: m(a, b, c))


# ---------------------------------------------------------------- shape modules
def shapes():
    case("PixelShuffle", "nn.PixelShuffle(2)", tnn.PixelShuffle(2), {"x": x(2, 8, 2, 3)}, *one())
    case("PixelUnshuffle", "nn.PixelUnshuffle(2)", tnn.PixelUnshuffle(2), {"x": x(1, 2, 4, 6)}, *one())
    case("Upsample_nearest", "nn.Upsample{scale_factor = 2}", tnn.Upsample(scale_factor=2), {"x": x(1, 2, 3, 3)}, *one())
    case("Upsample_bilinear_ac", 'nn.Upsample{size = {5, 7}, mode = "bilinear", align_corners = true}',
         tnn.Upsample(size=(5, 7), mode="bilinear", align_corners=True), {"x": x(1, 2, 3, 4)}, *one())
    case("Upsample_linear", 'nn.Upsample{scale_factor = 3, mode = "linear"}', tnn.Upsample(scale_factor=3, mode="linear"),
         {"x": x(2, 2, 4)}, *one())
    case("ZeroPad2d", "nn.ZeroPad2d({1, 0, 2, 1})", tnn.ZeroPad2d((1, 0, 2, 1)), {"x": x(1, 2, 3, 3)}, *one())
    case("ConstantPad2d", "nn.ConstantPad2d(1, 3.5)", tnn.ConstantPad2d(1, 3.5), {"x": x(2, 3, 3)}, *one())
    case("ReflectionPad2d", "nn.ReflectionPad2d({2, 1, 0, 2})", tnn.ReflectionPad2d((2, 1, 0, 2)), {"x": x(1, 2, 3, 4)}, *one())
    case("ReplicationPad2d", "nn.ReplicationPad2d(2)", tnn.ReplicationPad2d(2), {"x": x(1, 2, 3, 3)}, *one())
    case("ConstantPad1d", "nn.ConstantPad1d({2, 1}, -1)", tnn.ConstantPad1d((2, 1), -1.), {"x": x(2, 3, 4)}, *one())
    case("ReflectionPad1d", "nn.ReflectionPad1d({3, 1})", tnn.ReflectionPad1d((3, 1)), {"x": x(2, 3, 5)}, *one())
    case("ReplicationPad1d", "nn.ReplicationPad1d(2)", tnn.ReplicationPad1d(2), {"x": x(2, 3, 4)}, *one())
    case("Flatten", "nn.Flatten()", tnn.Flatten(), {"x": x(2, 3, 4)}, *one())
    case("Flatten_dims", "nn.Flatten(1, 2)", tnn.Flatten(0, 1), {"x": x(2, 3, 4)}, *one())
    case("Unflatten", "nn.Unflatten(2, {2, 3})", tnn.Unflatten(1, (2, 3)), {"x": x(4, 6)}, *one())
    case("CosineSimilarity", "nn.CosineSimilarity()", tnn.CosineSimilarity(), {"a": x(3, 4), "b": x(3, 4)}, "return m(a, b)", lambda m, a, b: m(a, b))
    case("CosineSimilarity_dim", "nn.CosineSimilarity{dim = 1, eps = 1e-6}", tnn.CosineSimilarity(dim=0, eps=1e-6),
         {"a": x(3, 4), "b": x(1, 4)}, "return m(a, b)", lambda m, a, b: m(a, b))
    case("PairwiseDistance", "nn.PairwiseDistance()", tnn.PairwiseDistance(), {"a": x(3, 4), "b": x(3, 4)}, "return m(a, b)", lambda m, a, b: m(a, b))
    case("PairwiseDistance_p1_keep", "nn.PairwiseDistance{p = 1, keepdim = true}", tnn.PairwiseDistance(p=1, keepdim=True),
         {"a": x(3, 4), "b": x(3, 4)}, "return m(a, b)", lambda m, a, b: m(a, b))
    case("Dropout_eval", "nn.Dropout(0.5)", tnn.Dropout(0.5), {"x": x(3, 4)}, *one())


# ---------------------------------------------------------------- default initialisation
def init(name, ctor, make):
    """make(): a fresh torch module. Small parameters are pooled over
    `reps` draws (the spec draws as many) so that their statistics are
    steady: at least 4000 values each."""
    smallest = min(p.numel() for p in make().parameters())
    reps = min(60, -(-4000 // smallest))
    pooled = {}
    for _ in range(reps):
        for n, p in make().named_parameters():
            pooled.setdefault(n, []).append(p.detach().double().reshape(-1))
    stats = {}
    for n, ps in pooled.items():
        p = torch.cat(ps)
        stats[n] = {"n": p.numel(), "min": p.min().item(), "max": p.max().item(), "mean": p.mean().item(),
                    "std": p.std().item() if p.numel() > 1 else 0.0}
    c = {"name": name, "ctor": ctor, "reps": reps, "stats": stats}
    if name in KNOWN_INIT:
        c["known"] = KNOWN_INIT[name]
    INITS.append(c)


def inits():
    init("Linear", "nn.Linear(200, 300)", lambda: tnn.Linear(200, 300))
    init("Bilinear", "nn.Bilinear(30, 40, 50)", lambda: tnn.Bilinear(30, 40, 50))
    init("Conv1d", "nn.Conv1d(16, 64, 5, {groups = 2})", lambda: tnn.Conv1d(16, 64, 5, groups=2))
    init("Conv2d", "nn.Conv2d(16, 64, 3)", lambda: tnn.Conv2d(16, 64, 3))
    init("Conv3d", "nn.Conv3d(8, 32, 3, {groups = 2})", lambda: tnn.Conv3d(8, 32, 3, groups=2))
    init("BatchNorm3d", "nn.BatchNorm3d(16)", lambda: tnn.BatchNorm3d(16))
    init("ConvTranspose1d", "nn.ConvTranspose1d(32, 48, 5)", lambda: tnn.ConvTranspose1d(32, 48, 5))
    init("ConvTranspose2d", "nn.ConvTranspose2d(32, 48, 3, {groups = 4})", lambda: tnn.ConvTranspose2d(32, 48, 3, groups=4))
    init("Embedding", "nn.Embedding(500, 40)", lambda: tnn.Embedding(500, 40))
    init("EmbeddingBag", "nn.EmbeddingBag(500, 40)", lambda: tnn.EmbeddingBag(500, 40))
    init("BatchNorm2d", "nn.BatchNorm2d(64)", lambda: tnn.BatchNorm2d(64))
    init("GroupNorm", "nn.GroupNorm(4, 64)", lambda: tnn.GroupNorm(4, 64))
    init("LayerNorm", "nn.LayerNorm(64)", lambda: tnn.LayerNorm(64))
    init("InstanceNorm1d", "nn.InstanceNorm1d(64, {affine = true})", lambda: tnn.InstanceNorm1d(64, affine=True))
    init("PReLU", "nn.PReLU(8)", lambda: tnn.PReLU(8))
    init("RNN", "nn.RNN(64, 96)", lambda: tnn.RNN(64, 96))
    init("LSTM", "nn.LSTM(64, 96, {num_layers = 2})", lambda: tnn.LSTM(64, 96, num_layers=2))
    init("LSTM_proj", "nn.LSTM(64, 96, {proj_size = 40})", lambda: tnn.LSTM(64, 96, proj_size=40))
    init("GRU", "nn.GRU(64, 96)", lambda: tnn.GRU(64, 96))
    init("LSTMCell", "nn.LSTMCell(64, 96)", lambda: tnn.LSTMCell(64, 96))
    init("GRUCell", "nn.GRUCell(64, 96)", lambda: tnn.GRUCell(64, 96))
    init("RNNCell", "nn.RNNCell(64, 96)", lambda: tnn.RNNCell(64, 96))
    init("MultiheadAttention", "nn.MultiheadAttention(96, 4)", lambda: tnn.MultiheadAttention(96, 4))
    init("MultiheadAttention_bias_kv", "nn.MultiheadAttention(96, 4, {add_bias_kv = true})",
         lambda: tnn.MultiheadAttention(96, 4, add_bias_kv=True))
    init("MultiheadAttention_kdim", "nn.MultiheadAttention(96, 4, {kdim = 32, vdim = 48})",
         lambda: tnn.MultiheadAttention(96, 4, kdim=32, vdim=48))
    init("TransformerEncoderLayer", "nn.TransformerEncoderLayer(96, 4, {dim_feedforward = 192})",
         lambda: tnn.TransformerEncoderLayer(96, 4, dim_feedforward=192))
    init("Transformer", "nn.Transformer(64, 4, {num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 128})",
         lambda: tnn.Transformer(64, 4, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=128))


def refusals():
    """torch options ember does not have: refused naming the module and the option."""
    REFUSE.append({"ctor": "nn.MultiheadAttention(8, 2, {add_bias_kv = 1})", "names": ["MultiheadAttention", "add_bias_kv"]})
    REFUSE.append({"ctor": "nn.Embedding(10, 3, {sparse = true})", "names": ["Embedding", "sparse"]})
    REFUSE.append({"ctor": "nn.EmbeddingBag(10, 3, {sparse = true})", "names": ["EmbeddingBag", "sparse"]})
    REFUSE.append({"ctor": 'nn.EmbeddingBag(10, 3, {mode = "max", scale_grad_by_freq = true})', "names": ["EmbeddingBag", "scale_grad_by_freq"]})


# ---------------------------------------------------------------- more option combinations
def more():
    case("GroupNorm_2d_input", "nn.GroupNorm(2, 4)", tnn.GroupNorm(2, 4), {"x": x(3, 4)}, *one())
    case("InstanceNorm1d_unbatched", "nn.InstanceNorm1d(3, {affine = true})", tnn.InstanceNorm1d(3, affine=True),
         {"x": x(3, 6)}, *one())
    case("InstanceNorm2d_stats_train", "nn.InstanceNorm2d(3, {track_running_stats = true, momentum = 0.2})",
         tnn.InstanceNorm2d(3, track_running_stats=True, momentum=0.2), {"x": x(2, 3, 4, 4)}, *one(), mode="train")
    case("BatchNorm2d_momentum_none_eval_after", "nn.BatchNorm2d(2, {momentum = false})", tnn.BatchNorm2d(2, momentum=None),
         {"x": x(3, 2, 2, 2), "y": x(2, 2, 3, 1)}, "m(x); m(y); m:eval(); return m(x)",
         lambda m, x, y: (m(x), m(y), m.eval(), m(x))[3], mode="train")
    case("LayerNorm_eps_3d_shape", "nn.LayerNorm({2, 3, 4}, {eps = 0.1})", tnn.LayerNorm((2, 3, 4), eps=0.1),
         {"x": x(2, 2, 3, 4)}, *one())
    case("Bilinear_unbatched", "nn.Bilinear(3, 4, 2)", tnn.Bilinear(3, 4, 2), {"a": x(3), "b": x(4)},
         "return m(a, b)", lambda m, a, b: m(a, b))
    case("PReLU_1d", "nn.PReLU()", tnn.PReLU(), {"x": x(5)}, *one())
    case("PReLU_channels_2d", "nn.PReLU(4)", tnn.PReLU(4), {"x": x(3, 4)}, *one())
    case("PReLU_channels_4d", "nn.PReLU(3)", tnn.PReLU(3), {"x": x(2, 3, 2, 2)}, *one())
    case("GRU_unbatched_bf", "nn.GRU(3, 4, {batch_first = true, num_layers = 2})", tnn.GRU(3, 4, batch_first=True, num_layers=2),
         {"x": x(5, 3), "h": x(2, 4)}, "return m(x, h)", lambda m, x, h: m(x, h))
    case("GRUCell_unbatched", "nn.GRUCell(3, 4)", tnn.GRUCell(3, 4), {"x": x(3), "h": x(4)}, "return m(x, h)",
         lambda m, x, h: m(x, h))
    case("RNN_bi_bf_h0", "nn.RNN(3, 4, {bidirectional = true, batch_first = true, num_layers = 3})",
         tnn.RNN(3, 4, bidirectional=True, batch_first=True, num_layers=3), {"x": x(2, 4, 3), "h": x(6, 2, 4)},
         "return m(x, h)", lambda m, x, h: m(x, h))
    case("Conv2d_dilation_same", 'nn.Conv2d(2, 3, 3, {padding = "same", dilation = 2, padding_mode = "circular"})',
         tnn.Conv2d(2, 3, 3, padding="same", dilation=2, padding_mode="circular"), {"x": x(1, 2, 6, 5)}, *one())
    case("Conv1d_groups_nobias_replicate", 'nn.Conv1d(6, 3, 2, {groups = 3, bias = false, padding = 1, padding_mode = "replicate", stride = 2})',
         tnn.Conv1d(6, 3, 2, groups=3, bias=False, padding=1, padding_mode="replicate", stride=2), {"x": x(2, 6, 7)}, *one())
    case("ConvTranspose1d_output_size", "nn.ConvTranspose1d(2, 3, 3, {stride = 3, padding = 1, dilation = 2})",
         tnn.ConvTranspose1d(2, 3, 3, stride=3, padding=1, dilation=2), {"x": x(1, 2, 4)},
         "return m(x, {13})", lambda m, x: m(x, output_size=[13]))
    case("Upsample_bicubic", 'nn.Upsample{scale_factor = {2, 1.5}, mode = "bicubic"}', tnn.Upsample(scale_factor=(2, 1.5), mode="bicubic"),
         {"x": x(1, 2, 3, 4)}, *one(), repr=False)
    case("Upsample_nearest_exact", 'nn.Upsample{size = 7, mode = "nearest-exact"}', tnn.Upsample(size=7, mode="nearest-exact"),
         {"x": x(1, 2, 5)}, *one(), repr=False)
    case("Upsample_trilinear", 'nn.Upsample{scale_factor = 2, mode = "trilinear"}', tnn.Upsample(scale_factor=2, mode="trilinear"),
         {"x": x(1, 1, 2, 3, 2)}, *one(), repr=False)
    case("Upsample_nearest_frac", 'nn.Upsample{scale_factor = 1.7, mode = "nearest"}', tnn.Upsample(scale_factor=1.7, mode="nearest"),
         {"x": x(1, 2, 5, 7)}, *one(), repr=False)
    case("Upsample_bilinear_frac", 'nn.Upsample{scale_factor = {1.5, 0.6}, mode = "bilinear"}',
         tnn.Upsample(scale_factor=(1.5, 0.6), mode="bilinear"), {"x": x(1, 2, 5, 7)}, *one(), repr=False)
    case("Upsample_area", 'nn.Upsample{size = {3, 4}, mode = "area"}', tnn.Upsample(size=(3, 4), mode="area"),
         {"x": x(1, 2, 5, 7)}, *one(), repr=False)
    case("Upsample_linear_ac_frac", 'nn.Upsample{scale_factor = 2.5, mode = "linear", align_corners = true}',
         tnn.Upsample(scale_factor=2.5, mode="linear", align_corners=True), {"x": x(2, 1, 4)}, *one(), repr=False)
    case("PixelShuffle_unbatched", "nn.PixelShuffle(3)", tnn.PixelShuffle(3), {"x": x(9, 2, 2)}, *one())
    case("Flatten_neg", "nn.Flatten(-2, -1)", tnn.Flatten(-2, -1), {"x": x(2, 3, 4)}, *one(), repr=False)
    case("Unflatten_neg", "nn.Unflatten(-1, {2, -1})", tnn.Unflatten(-1, (2, -1)), {"x": x(3, 6)}, *one(), repr=False)
    case("MHA_float_kpm_3d_mask", "nn.MultiheadAttention(8, 2, {batch_first = true})", tnn.MultiheadAttention(8, 2, batch_first=True),
         {"q": x(2, 3, 8), "k": x(2, 4, 8), "am": x(4, 3, 4), "kpm": torch.tensor([[False, False, True, False], [False] * 4])},
         "return m(q, k, k, {attn_mask = am, key_padding_mask = kpm})",
         lambda m, q, k, am, kpm: m(q, k, k, attn_mask=am, key_padding_mask=kpm), layout=LAYOUT)
    case("Transformer_positional", "nn.Transformer(4, 2, {num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8, dropout = 0.1, batch_first = false})",
         tnn.Transformer(4, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8),
         {"s": x(5, 2, 4), "t": x(3, 2, 4), "tm": causal(3), "sk": torch.tensor([[False] * 5, [False, False, False, True, True]])},
         "return m(s, t, nil, tm, nil, sk, nil, sk)", lambda m, s, t, tm, sk: m(s, t, None, tm, None, sk, None, sk), layout=LAYOUT)
    case("Transformer_masks", "nn.Transformer(4, 2, {num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8, dropout = 0.1, batch_first = true, activation = 'gelu'})",
         tnn.Transformer(4, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=8, batch_first=True, activation="gelu"),
         {"s": x(2, 5, 4), "t": x(2, 3, 4), "sm": x(5, 5), "mm": x(3, 5), "tk": torch.tensor([[False, False, True], [False] * 3])},
         "return m(s, t, {src_mask = sm, memory_mask = mm, tgt_key_padding_mask = tk})",
         lambda m, s, t, sm, mm, tk: m(s, t, src_mask=sm, memory_mask=mm, tgt_key_padding_mask=tk), layout=LAYOUT)
    # losses
    lg, tg = x(5, 4), torch.tensor([0, 3, 1, 1, 2])
    w = short(torch.rand(4, dtype=torch.float64) + 0.5)
    case("CrossEntropyLoss_probs_w", "nn.CrossEntropyLoss{weight = W}", tnn.CrossEntropyLoss(weight=w),
         {"a": lg, "b": x(5, 4).softmax(1), "W": w}, "return m(a, b)", lambda m, a, b, W: m(a, b), nograd={"W", "b"}, repr=False)
    case("CrossEntropyLoss_none_ii_ls", 'nn.CrossEntropyLoss{reduction = "none", ignore_index = 4, label_smoothing = 0.3}',
         tnn.CrossEntropyLoss(reduction="none", ignore_index=3, label_smoothing=0.3), {"a": lg, "b": tg}, "return m(a, b)",
         lambda m, a, b: m(a, b), idx={"b"}, repr=False)
    case("CrossEntropyLoss_sum_w_ii", 'nn.CrossEntropyLoss{weight = W, ignore_index = 2, reduction = "sum"}',
         tnn.CrossEntropyLoss(weight=w, ignore_index=1, reduction="sum"), {"a": lg, "b": tg, "W": w}, "return m(a, b)",
         lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"}, repr=False)
    case("CrossEntropyLoss_unbatched", "nn.CrossEntropyLoss()", tnn.CrossEntropyLoss(), {"a": x(4), "b": torch.tensor(2)},
         "return m(a, b)", lambda m, a, b: m(a, b), idx={"b"}, repr=False)
    case("KLDivLoss_mean", "nn.KLDivLoss()", tnn.KLDivLoss(), {"a": x(3, 4).log_softmax(1), "b": x(3, 4).softmax(1)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("KLDivLoss_none", 'nn.KLDivLoss{reduction = "none"}', tnn.KLDivLoss(reduction="none"),
         {"a": x(3, 4).log_softmax(1), "b": x(3, 4).softmax(1)}, "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("BCELoss_bcast_w", "nn.BCELoss{weight = W}", tnn.BCELoss(weight=w),
         {"a": short(torch.rand(3, 4, dtype=torch.float64) * 0.9 + 0.05), "b": (torch.rand(3, 4) < 0.5).double(), "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), nograd={"W"}, repr=False)
    case("BCEWithLogitsLoss_soft_targets", "nn.BCEWithLogitsLoss()", tnn.BCEWithLogitsLoss(),
         {"a": x(3, 4), "b": short(torch.rand(3, 4, dtype=torch.float64))}, "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("SmoothL1Loss_beta0", "nn.SmoothL1Loss{beta = 0}", tnn.SmoothL1Loss(beta=0.0), {"a": x(3, 4), "b": x(3, 4)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("HuberLoss_none", 'nn.HuberLoss{reduction = "none"}', tnn.HuberLoss(reduction="none"), {"a": x(3, 4), "b": x(3, 4)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("MSELoss_bcast_none", 'nn.MSELoss{reduction = "none"}', tnn.MSELoss(reduction="none"), {"a": x(3, 4), "b": x(3, 4)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("MarginRankingLoss_none", 'nn.MarginRankingLoss{reduction = "none"}', tnn.MarginRankingLoss(reduction="none"),
         {"a": x(4), "b": x(4), "y": torch.tensor([1., -1., -1., 1.], dtype=torch.float64)}, "return m(a, b, y)",
         lambda m, a, b, y: m(a, b, y), nograd={"y"}, repr=False)
    case("CrossEntropyLoss_probs_w_ls", 'nn.CrossEntropyLoss{weight = W, label_smoothing = 0.25, reduction = "sum"}',
         tnn.CrossEntropyLoss(weight=w, label_smoothing=0.25, reduction="sum"), {"a": lg, "b": x(5, 4).softmax(1), "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), nograd={"W", "b"}, repr=False)
    case("CrossEntropyLoss_w_ls_none", 'nn.CrossEntropyLoss{weight = W, label_smoothing = 0.1, reduction = "none"}',
         tnn.CrossEntropyLoss(weight=w, label_smoothing=0.1, reduction="none"), {"a": lg, "b": tg, "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"}, repr=False)
    pw4 = short(torch.rand(4, dtype=torch.float64) + 0.5)
    bw4 = short(torch.rand(3, 4, dtype=torch.float64))
    case("BCEWithLogitsLoss_pw_w_none", 'nn.BCEWithLogitsLoss{pos_weight = P, weight = W, reduction = "none"}',
         tnn.BCEWithLogitsLoss(pos_weight=pw4, weight=bw4, reduction="none"),
         {"a": x(3, 4) * 4, "b": short(torch.rand(3, 4, dtype=torch.float64)), "P": pw4, "W": bw4},
         "return m(a, b)", lambda m, a, b, P, W: m(a, b), nograd={"P", "W"}, repr=False)
    case("KLDivLoss_sum", 'nn.KLDivLoss{reduction = "sum"}', tnn.KLDivLoss(reduction="sum"),
         {"a": x(3, 4).log_softmax(1), "b": torch.tensor([[0.5, 0.5, 0., 0.], [0.25, 0.25, 0.25, 0.25], [1., 0., 0., 0.]], dtype=torch.float64)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("NLLLoss_unbatched_w", "nn.NLLLoss{weight = W}", tnn.NLLLoss(weight=w), {"a": x(4).log_softmax(0), "b": torch.tensor(2), "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"}, repr=False)
    case("NLLLoss_kdim_none", 'nn.NLLLoss{weight = W, reduction = "none", ignore_index = 2}',
         tnn.NLLLoss(weight=w, reduction="none", ignore_index=1), {"a": x(2, 4, 3, 2).log_softmax(1),
         "b": torch.tensor([[[0, 1], [3, 2], [1, 1]], [[2, 0], [0, 3], [1, 2]]]), "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"}, repr=False)
    case("NLLLoss_kdim_mean", "nn.NLLLoss{weight = W}", tnn.NLLLoss(weight=w), {"a": x(2, 4, 3).log_softmax(1),
         "b": torch.tensor([[0, 3, 1], [2, 2, 0]]), "W": w},
         "return m(a, b)", lambda m, a, b, W: m(a, b), idx={"b"}, nograd={"W"}, repr=False)
    case("SmoothL1Loss_bcast", "nn.SmoothL1Loss{beta = 2}", tnn.SmoothL1Loss(beta=2.0), {"a": x(3, 4) * 3, "b": x(3, 4)},
         "return m(a, b)", lambda m, a, b: m(a, b), repr=False)
    case("TripletMarginLoss_swap", "nn.TripletMarginLoss{swap = true, margin = 2}", tnn.TripletMarginLoss(swap=True, margin=2.0),
         {"a": x(4, 3), "b": x(4, 3), "c": x(4, 3)}, "return m(a, b, c)", lambda m, a, b, c: m(a, b, c), repr=False)


# ---------------------------------------------------------------- the rest of torch.nn's layers and losses
def rest():
    y = torch.tensor([1., -1., 1., -1.], dtype=torch.float64)
    two = lambda m, a, b: m(a, b)
    case("CosineEmbeddingLoss", "nn.CosineEmbeddingLoss{margin = 0.2}", tnn.CosineEmbeddingLoss(margin=0.2),
         {"a": x(4, 3), "b": x(4, 3), "y": y}, "return m(a, b, y)", lambda m, a, b, y: m(a, b, y), nograd={"y"}, repr=False)
    case("HingeEmbeddingLoss_sum", 'nn.HingeEmbeddingLoss{margin = 0.5, reduction = "sum"}',
         tnn.HingeEmbeddingLoss(margin=0.5, reduction="sum"), {"a": x(4), "b": y}, "return m(a, b)", two, nograd={"b"}, repr=False)
    case("SoftMarginLoss_none", 'nn.SoftMarginLoss{reduction = "none"}', tnn.SoftMarginLoss(reduction="none"),
         {"a": x(4), "b": y}, "return m(a, b)", two, nograd={"b"}, repr=False)
    w3 = short(torch.rand(3, dtype=torch.float64) + 0.5)
    case("MultiLabelSoftMarginLoss_w", "nn.MultiLabelSoftMarginLoss{weight = W}", tnn.MultiLabelSoftMarginLoss(weight=w3),
         {"a": x(2, 3), "b": torch.tensor([[1., 0., 1.], [0., 0., 1.]], dtype=torch.float64), "W": w3}, "return m(a, b)",
         lambda m, a, b, W: m(a, b), nograd={"b", "W"}, repr=False)
    case("MultiMarginLoss_p2_w", "nn.MultiMarginLoss{p = 2, margin = 0.7, weight = W}", tnn.MultiMarginLoss(p=2, margin=0.7, weight=w3),
         {"a": x(4, 3), "b": torch.tensor([2, 0, 1, 0]), "W": w3}, "return m(a, b)", lambda m, a, b, W: m(a, b),
         idx={"b"}, nograd={"W"}, repr=False)
    case("PoissonNLLLoss_full", "nn.PoissonNLLLoss{log_input = false, full = true}", tnn.PoissonNLLLoss(log_input=False, full=True),
         {"a": short(torch.rand(5, dtype=torch.float64) * 3 + 0.1), "b": torch.tensor([0., 2., 1., 3., 5.], dtype=torch.float64)},
         "return m(a, b)", two, nograd={"b"}, repr=False)
    case("PoissonNLLLoss", "nn.PoissonNLLLoss()", tnn.PoissonNLLLoss(), {"a": x(5), "b": torch.tensor([0., 2., 1., 3., 5.], dtype=torch.float64)},
         "return m(a, b)", two, nograd={"b"}, repr=False)
    case("GaussianNLLLoss_full", 'nn.GaussianNLLLoss{full = true, reduction = "sum"}', tnn.GaussianNLLLoss(full=True, reduction="sum"),
         {"a": x(4, 2), "b": x(4, 2), "v": short(torch.rand(4, 2, dtype=torch.float64) + 0.1)}, "return m(a, b, v)",
         lambda m, a, b, v: m(a, b, v), repr=False)
    case("GaussianNLLLoss_var1", "nn.GaussianNLLLoss()", tnn.GaussianNLLLoss(),
         {"a": x(4, 2), "b": x(4, 2), "v": short(torch.rand(4, 1, dtype=torch.float64) + 0.1)}, "return m(a, b, v)",
         lambda m, a, b, v: m(a, b, v), repr=False)
    case("TripletMarginWithDistanceLoss", "nn.TripletMarginWithDistanceLoss{margin = 0.5, swap = true}",
         tnn.TripletMarginWithDistanceLoss(margin=0.5, swap=True), {"a": x(4, 3), "b": x(4, 3), "c": x(4, 3)},
         "return m(a, b, c)", lambda m, a, b, c: m(a, b, c), repr=False)
    case("TripletMarginWithDistanceLoss_cos", "nn.TripletMarginWithDistanceLoss{distance_function = function(u, v) return 1 - ember.cosine_similarity(u, v) end}",
         tnn.TripletMarginWithDistanceLoss(distance_function=lambda u, v: 1 - torch.nn.functional.cosine_similarity(u, v)),
         {"a": x(4, 3), "b": x(4, 3), "c": x(4, 3)}, "return m(a, b, c)", lambda m, a, b, c: m(a, b, c), repr=False)
    case("Unfold", "nn.Unfold({2, 3}, {padding = 1, stride = {1, 2}, dilation = {2, 1}})",
         tnn.Unfold((2, 3), padding=1, stride=(1, 2), dilation=(2, 1)), {"x": x(2, 2, 5, 6)}, *one(), repr=False)
    case("Fold", "nn.Fold({5, 6}, {2, 3}, {padding = 1, stride = {1, 2}})", tnn.Fold((5, 6), (2, 3), padding=1, stride=(1, 2)),
         {"x": x(2, 12, 18)}, *one(), repr=False)
    # torch 1.13 has no derivative for channel_shuffle: values only
    case("ChannelShuffle", "nn.ChannelShuffle(3)", tnn.ChannelShuffle(3), {"x": x(2, 6, 2, 2)}, *one(), repr=False, grad=False)
    case("LocalResponseNorm", "nn.LocalResponseNorm(3, {alpha = 0.01, beta = 0.5, k = 2})",
         tnn.LocalResponseNorm(3, alpha=0.01, beta=0.5, k=2.0), {"x": x(2, 5, 3, 3)}, *one(), repr=False)
    case("LPPool1d", "nn.LPPool1d(2, 3, {stride = 2})", tnn.LPPool1d(2, 3, stride=2), {"x": x(2, 3, 9)}, *one(), repr=False)
    case("LPPool2d", "nn.LPPool2d(3, 2)", tnn.LPPool2d(3, 2), {"x": x(1, 2, 4, 6).abs() + 0.1}, *one(), repr=False)
    case("MaxUnpool2d", "nn.MaxUnpool2d(2)", tnn.MaxUnpool2d(2), {"x": x(1, 2, 3, 3), "i": torch.tensor([[[[0, 3, 5], [12, 14, 22], [25, 30, 34]]] * 2])},
         "return m(x, i)", lambda m, x, i: m(x, i), idx={"i"}, repr=False)
    case("MaxUnpool1d_output_size", "nn.MaxUnpool1d(2, {stride = 2})", tnn.MaxUnpool1d(2, stride=2),
         {"x": x(1, 2, 3), "i": torch.tensor([[[1, 2, 6], [0, 3, 5]]])}, "return m(x, i, {7})",
         lambda m, x, i: m(x, i, output_size=[7]), idx={"i"}, repr=False)
    case("Softmax2d", "nn.Softmax2d()", tnn.Softmax2d(), {"x": x(2, 3, 2, 2)}, *one())
    case("Softmax2d_unbatched", "nn.Softmax2d()", tnn.Softmax2d(), {"x": x(3, 2, 2)}, *one())
    case("UpsamplingNearest2d", "nn.UpsamplingNearest2d{scale_factor = 2}", tnn.UpsamplingNearest2d(scale_factor=2),
         {"x": x(1, 2, 2, 3)}, *one(), repr=False)
    case("UpsamplingBilinear2d", "nn.UpsamplingBilinear2d({5, 4})", tnn.UpsamplingBilinear2d((5, 4)),
         {"x": x(1, 2, 2, 3)}, *one(), repr=False)
    case("ParameterList", "nn.ParameterList{ember.zeros(2, 3), ember.zeros(3)}",
         tnn.ParameterList([tnn.Parameter(torch.zeros(2, 3)), tnn.Parameter(torch.zeros(3))]), {"x": x(4, 2)},
         "m:append(ember.zeros(3):double()); return x:matmul(m[1]) * m[2] + m[-1]:exp()",
         lambda m, x: (m.append(tnn.Parameter(torch.zeros(3, dtype=torch.float64))), x.matmul(m[0]) * m[1] + m[2].exp())[1],
         repr=False, rand=True)
    case("RReLU_eval", "nn.RReLU(0.1, 0.3)", tnn.RReLU(0.1, 0.3), {"x": x(3, 4)}, *one(), repr=False)
    # through log_softmax: torch's ctc_loss backward assumes its input came from one (its
    # gradient with respect to a leaf of log-probabilities is not the derivative)
    z = x(6, 2, 4)
    for red in ("mean", "sum", "none"):
        case("CTCLoss_" + red, 'nn.CTCLoss{blank = 1, reduction = "%s"}' % red, tnn.CTCLoss(blank=0, reduction=red),
             {"z": z, "t": torch.tensor([[1, 2, 2], [3, 1, 0]]), "il": torch.tensor([6, 5]), "tl": torch.tensor([3, 2])},
             "return m(z:log_softmax(3), t, il, tl)", lambda m, z, t, il, tl: m(z.log_softmax(2), t, il, tl), idx={"t"}, repr=False)
    case("CTCLoss_blank_last_1d", "nn.CTCLoss{blank = 4, zero_infinity = true}", tnn.CTCLoss(blank=3, zero_infinity=True),
         {"z": z, "t": torch.tensor([0, 1, 2, 2, 1]), "il": torch.tensor([6, 2]), "tl": torch.tensor([2, 3])},
         "return m(z:log_softmax(3), t, il, tl)", lambda m, z, t, il, tl: m(z.log_softmax(2), t, il, tl), idx={"t"}, repr=False)
    # 3-d layers
    case("Conv3d", "nn.Conv3d(2, 4, {2, 3, 2}, {stride = {1, 2, 1}, padding = {1, 0, 1}, dilation = {1, 1, 2}, groups = 2})",
         tnn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), groups=2), {"x": x(2, 2, 3, 5, 4)}, *one())
    case("Conv3d_same_replicate", 'nn.Conv3d(2, 3, 3, {padding = "same", padding_mode = "replicate", bias = false})',
         tnn.Conv3d(2, 3, 3, padding="same", padding_mode="replicate", bias=False), {"x": x(1, 2, 3, 4, 3)}, *one())
    case("Conv3d_circular", 'nn.Conv3d(2, 2, 2, {padding = 1, padding_mode = "circular"})',
         tnn.Conv3d(2, 2, 2, padding=1, padding_mode="circular"), {"x": x(1, 2, 3, 3, 3)}, *one())
    case("Conv3d_unbatched", "nn.Conv3d(2, 2, 2)", tnn.Conv3d(2, 2, 2), {"x": x(2, 3, 3, 3)}, *one())
    case("BatchNorm3d_train", "nn.BatchNorm3d(3)", tnn.BatchNorm3d(3), {"x": x(2, 3, 2, 2, 3)}, *one(), mode="train")
    case("BatchNorm3d_eval", "nn.BatchNorm3d(3, {affine = false})", tnn.BatchNorm3d(3, affine=False), {"x": x(2, 3, 2, 2, 3)}, *one())
    case("InstanceNorm3d", "nn.InstanceNorm3d(3, {affine = true, track_running_stats = true})",
         tnn.InstanceNorm3d(3, affine=True, track_running_stats=True), {"x": x(2, 3, 2, 3, 2)}, *one(), mode="train")
    case("MaxPool3d", "nn.MaxPool3d({2, 2, 1}, {stride = {1, 2, 1}, padding = {1, 0, 0}})",
         tnn.MaxPool3d((2, 2, 1), stride=(1, 2, 1), padding=(1, 0, 0)), {"x": x(1, 2, 3, 4, 3)}, *one(), repr=False)
    case("AvgPool3d", "nn.AvgPool3d(2, {ceil_mode = true, count_include_pad = false, padding = 1})",
         tnn.AvgPool3d(2, ceil_mode=True, count_include_pad=False, padding=1), {"x": x(1, 2, 3, 4, 5)}, *one(), repr=False)
    case("AdaptiveAvgPool3d", "nn.AdaptiveAvgPool3d({2, false, 3})", tnn.AdaptiveAvgPool3d((2, None, 3)),
         {"x": x(1, 2, 3, 4, 5)}, *one(), repr=False)
    case("AdaptiveMaxPool3d", "nn.AdaptiveMaxPool3d(2)", tnn.AdaptiveMaxPool3d(2), {"x": x(2, 3, 5, 4)}, *one(), repr=False)
    for name in ("Dropout1d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"):
        shape = {"Dropout1d": (2, 3, 4), "Dropout3d": (1, 2, 2, 2, 2)}.get(name, (2, 3, 4))
        case(name + "_eval", "nn.%s(0.3)" % name, getattr(tnn, name)(0.3), {"x": x(*shape)}, *one(), repr=False)


# ---------------------------------------------------------------- random option combinations
def fuzz():
    import random
    rng = random.Random(SEED)

    def lua_size(v):
        return str(v) if isinstance(v, int) else "{" + ", ".join(str(e) for e in v) + "}"

    for k in range(24):
        nd = rng.choice([1, 2])
        transpose = rng.random() < 0.4
        g = rng.choice([1, 1, 2])
        cin, cout = g * rng.randint(1, 2), g * rng.randint(1, 2)
        ks = [rng.randint(1, 3) for _ in range(nd)]
        st = [rng.randint(1, 3) for _ in range(nd)]
        dl = [rng.randint(1, 2) for _ in range(nd)]
        pd = [rng.randint(0, (d * (kk - 1)) // 2) for kk, d in zip(ks, dl)]
        bias = rng.random() < 0.7
        opts = {"stride": st, "padding": pd, "dilation": dl, "groups": g}
        if transpose:
            op = [rng.randint(0, max(s_, d) - 1) for s_, d in zip(st, dl)]
            opts["output_padding"] = op
            name = "ConvTranspose%dd" % nd
        else:
            name = "Conv%dd" % nd
            if rng.random() < 0.3:
                opts["padding_mode"] = rng.choice(["reflect", "replicate", "circular"])
        spatial = [rng.randint(dl_ * (kk - 1) + 2, 7) for kk, dl_ in zip(ks, dl)]
        t = getattr(tnn, name)(cin, cout, tuple(ks) if nd == 2 else ks[0], bias=bias,
                               **{k_: (tuple(v) if nd == 2 else v[0]) if isinstance(v, list) else v for k_, v in opts.items()})
        lo = ", ".join("%s = %s" % (k_, lua_size(v if nd == 2 else v[0]) if isinstance(v, list) else
                                     ('"%s"' % v if isinstance(v, str) else v)) for k_, v in opts.items())
        ctor = "nn.%s(%d, %d, %s, {%s, bias = %s})" % (name, cin, cout, lua_size(ks if nd == 2 else ks[0]), lo,
                                                       "true" if bias else "false")
        try:
            case("fuzz_%02d_%s" % (k, name), ctor, t, {"x": x(2, cin, *spatial)}, *one(), repr=False)
        except RuntimeError:
            CASES.pop() if CASES and CASES[-1]["name"].startswith("fuzz_%02d" % k) else None
    for k in range(10):
        kind = rng.choice(["RNN", "LSTM", "GRU"])
        L = rng.randint(1, 3)
        bi, bf, bias = rng.random() < 0.5, rng.random() < 0.5, rng.random() < 0.7
        inp, hid = rng.randint(1, 3), rng.randint(2, 4)
        kw = dict(num_layers=L, bidirectional=bi, batch_first=bf, bias=bias)
        lo = "num_layers = %d, bidirectional = %s, batch_first = %s, bias = %s" % (L, str(bi).lower(), str(bf).lower(), str(bias).lower())
        proj = 0
        if kind == "LSTM" and rng.random() < 0.4:
            proj = rng.randint(1, hid - 1)
            kw["proj_size"] = proj
            lo += ", proj_size = %d" % proj
        if kind == "RNN" and rng.random() < 0.5:
            kw["nonlinearity"] = "relu"
            lo += ', nonlinearity = "relu"'
        t = getattr(tnn, kind)(inp, hid, **kw)
        T, N, D = rng.randint(1, 4), rng.randint(1, 3), 2 if bi else 1
        xin = x(N, T, inp) if bf else x(T, N, inp)
        h = x(D * L, N, proj or hid)
        if kind == "LSTM":
            c = x(D * L, N, hid)
            case("fuzz_rnn_%02d_%s" % (k, kind), "nn.LSTM(%d, %d, {%s})" % (inp, hid, lo), t, {"x": xin, "h": h, "c": c},
                 "return m(x, {h, c})", lambda m, x, h, c: m(x, (h, c)), repr=False)
        else:
            case("fuzz_rnn_%02d_%s" % (k, kind), "nn.%s(%d, %d, {%s})" % (kind, inp, hid, lo), t, {"x": xin, "h": h},
                 "return m(x, h)", lambda m, x, h: m(x, h), repr=False)


def main():
    for f in (linear, embeddings, convs, norms, rmsnorm, rnns, transformers, activations, losses, shapes, more, rest, fuzz, inits, refusals):
        f()
    SweepWriter(keys="auto", sep=",").write("tests/fixtures/nn_module_sweep.lua", "tests/gen_nn_module_sweep.py",
                                            {"seed": SEED, "cases": CASES, "inits": INITS, "refuse": REFUSE})
    print("%d cases, %d init cases, %d refusals" % (len(CASES), len(INITS), len(REFUSE)))


if __name__ == "__main__":
    main()
