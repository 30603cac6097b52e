"""PyTorch 1.13 reference values for tests/lua/nn_modules_torch_spec.lua: the
nn modules of current models that ember has beside PyTorch's, written out
by hand where PyTorch 1.13 has no module (float64):

  moe_mixtral      a dense reference of nn.MoE's default router (Mixtral's
                   MixtralSparseMoeBlock: softmax over the top-k logits),
                   every expert run on every token and weighted by the
                   scattered routing weights; the load-balancing loss as
                   transformers' load_balancing_loss_func and ST-MoE's z-loss
  moe_qwen         router = "softmax_topk", norm_topk_prob = false, a shared
                   expert scaled by sigmoid(shared_expert_gate(x)) (Qwen2-MoE)
  moe_masked       the Mixtral block's losses with an attention_mask
  rms_eps          RMSNorm as Hugging Face's LlamaRMSNorm (eps inside the
                   root, weight after), eps = 1e-5
  rms_plain        no weight (elementwise_affine = false), eps = 1e-6
  ln_nobias        F.layer_norm with a weight and no bias (torch 2.1's
                   LayerNorm(bias=False))
  bilinear         nn.Bilinear(3, 4, 5)
  fold, unfold     nn.Fold / nn.Unfold with dilation, padding and stride
  prelu            nn.PReLU(3) on [B, C, L]
  softplus         nn.Softplus(beta=2, threshold=1.5) (values both sides of
                   the threshold)
  hardtanh         nn.Hardtanh(-0.5, 2) (values both sides of the bounds and on them)
  embedding_maxnorm nn.Embedding(6, 3, max_norm=1.2, padding_idx=1): the
                   output, the renormalised weight after the call and its
                   gradient (padding row zero)
  groupnorm        nn.GroupNorm(2, 6, eps=1e-3) on [B, C, H, W]
  pixel_shuffle, pixel_unshuffle, channel_shuffle   with extra leading dims
                   (PixelShuffle(3) on [2, 2, 18, 2, 3]), ChannelShuffle(3) (its
                   backward by its definition: torch 1.13 has none)
  embedding_freq   nn.Embedding(5, 2, padding_idx=3, scale_grad_by_freq=True)
  sinusoidal       "Attention Is All You Need"'s table for d_model = 6,
                   positions 3..6 (the start of a cached decode)

Each module case: the state dict (PyTorch's names, or Hugging Face's), the
inputs, the output, R, and the gradients of sum(out * R) for the inputs and
the parameters.

    /usr/bin/python3 tests/gen_nn_modules_torch_fixtures.py   # writes tests/fixtures/nn_modules_torch.lua
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(93)
torch.set_default_dtype(torch.float64)


def leaf(*shape):
    return torch.randn(*shape).requires_grad_()


def case(name, params, inputs, out, extra=None):
    """params: name -> leaf tensor (the state dict); inputs: name -> tensor."""
    R = torch.randn(out.shape)
    (out * R).sum().backward()
    c = {"name": name, "state": {k: v.detach().clone() for k, v in params.items()},
         "inputs": {k: v.detach() for k, v in inputs.items()}, "out": out.detach(), "R": R,
         "grad_inputs": {k: v.grad.detach() for k, v in inputs.items() if v.requires_grad},
         "grads": {k: v.grad.detach() for k, v in params.items()}}
    c.update(extra or {})
    return c


def swiglu(x, w1, w3, w2):
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


def moe(name, router, norm, shared, mask=None):
    d, ff, E, k, B, L = 6, 5, 4, 2, 2, 5
    p = {"gate.weight": leaf(E, d)}
    for e in range(E):
        for w, shape in (("w1", (ff, d)), ("w3", (ff, d)), ("w2", (d, ff))):
            names = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"} if shared else {}
            p["experts.%d.%s.weight" % (e, names.get(w, w))] = leaf(*shape)
    if shared:
        p["shared_expert.gate_proj.weight"] = leaf(8, d)
        p["shared_expert.up_proj.weight"] = leaf(8, d)
        p["shared_expert.down_proj.weight"] = leaf(d, 8)
        p["shared_expert_gate.weight"] = leaf(1, d)
    x = leaf(B, L, d)
    h = x.reshape(-1, d)
    logits = F.linear(h, p["gate.weight"])
    probs = logits.softmax(-1)
    if router == "topk_softmax":
        top, idx = logits.topk(k, -1)
        w = top.softmax(-1)
    else:
        w, idx = probs.topk(k, -1)
        if norm:
            w = w / w.sum(-1, keepdim=True)
    dense = torch.zeros(h.shape[0], E).scatter(1, idx, w)  # the routing weight of every (token, expert)
    n = ("gate_proj", "up_proj", "down_proj") if shared else ("w1", "w3", "w2")
    outs = torch.stack([swiglu(h, *[p["experts.%d.%s.weight" % (e, q)] for q in n]) for e in range(E)], 1)
    y = (outs * dense.unsqueeze(2)).sum(1)
    if shared:
        s = swiglu(h, p["shared_expert.gate_proj.weight"], p["shared_expert.up_proj.weight"],
                   p["shared_expert.down_proj.weight"])
        y = y + torch.sigmoid(F.linear(h, p["shared_expert_gate.weight"])) * s
    y = y.reshape(B, L, d)
    # transformers' load_balancing_loss_func (one layer), with its attention_mask rule
    expert_mask = F.one_hot(idx, E).double()  # [T, k, E]
    m = torch.ones(B * L) if mask is None else mask.reshape(-1).double()
    tokens_per_expert = (expert_mask * m[:, None, None]).sum(0) / m.sum()
    prob_per_expert = (probs * m[:, None]).sum(0) / m.sum()
    aux = (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * E
    z = (torch.logsumexp(logits, -1) ** 2 * m).sum() / m.sum()
    counts = (expert_mask * m[:, None, None]).sum((0, 1)).long()
    # the gradients of sum(y * R) + 3 aux + 5 z: the losses reach the router
    R = torch.randn(y.shape)
    ((y * R).sum() + 3 * aux + 5 * z).backward()
    return {"name": name, "router": router, "norm_topk_prob": norm, "shared": shared,
            "state": {kk: v.detach().clone() for kk, v in p.items()}, "inputs": {"x": x.detach()},
            "out": y.detach(), "R": R, "aux_loss": aux.detach(), "z_loss": z.detach(),
            "tokens_per_expert": counts, "mask": mask,
            "grad_inputs": {"x": x.grad.detach()}, "grads": {kk: v.grad.detach() for kk, v in p.items()}}


def cases():
    out = [moe("moe_mixtral", "topk_softmax", True, False),
           moe("moe_qwen", "softmax_topk", False, True),
           moe("moe_masked", "topk_softmax", True, False,
               torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], dtype=torch.int64))]

    w, x = leaf(7), leaf(2, 3, 7)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
    out.append(case("rms_eps", {"weight": w}, {"x": x}, y))
    x = (torch.randn(4, 5) * 1e-3).requires_grad_()  # mean square near eps: where it is added matters
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    out.append(case("rms_plain", {}, {"x": x}, y))

    w, x = leaf(2, 4), leaf(3, 2, 4)
    out.append(case("ln_nobias", {"weight": w}, {"x": x}, F.layer_norm(x, (2, 4), w, None, 1e-5)))

    m = torch.nn.Bilinear(3, 4, 5)
    x1, x2 = leaf(2, 3), leaf(2, 4)
    out.append(case("bilinear", dict(m.named_parameters()), {"x1": x1, "x2": x2}, m(x1, x2)))

    x = leaf(2, 3, 5, 6)
    u = torch.nn.Unfold(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    out.append(case("unfold", {}, {"x": x}, u(x)))
    f = torch.nn.Fold(output_size=(5, 6), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    x = leaf(*u(x).shape)
    out.append(case("fold", {}, {"x": x}, f(x)))

    m = torch.nn.PReLU(3)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([0.1, -0.3, 0.7]))
    x = leaf(2, 3, 4)
    out.append(case("prelu", dict(m.named_parameters()), {"x": x}, m(x)))

    x = torch.tensor([-2.0, -0.3, 0.2, 0.7, 0.76, 1.0, 3.0]).requires_grad_()
    out.append(case("softplus", {}, {"x": x}, torch.nn.Softplus(beta=2, threshold=1.5)(x)))
    x = torch.tensor([-2.0, -0.5, -0.4, 0.0, 1.9, 2.0, 2.5]).requires_grad_()  # the bounds: gradient 0 there
    out.append(case("hardtanh", {}, {"x": x}, torch.nn.Hardtanh(-0.5, 2)(x)))

    m = torch.nn.Embedding(6, 3, max_norm=1.2, padding_idx=1)
    with torch.no_grad():
        m.weight.mul_(2)
    w0 = m.weight.detach().clone()
    ids = torch.tensor([[0, 1, 3], [3, 5, 1]])
    y = m(ids)
    R = torch.randn(y.shape)
    (y * R).sum().backward()
    out.append({"name": "embedding_maxnorm", "weight0": w0, "ids": ids + 1, "out": y.detach(), "R": R,
                "weight1": m.weight.detach().clone(), "grad": m.weight.grad.detach()})

    m = torch.nn.GroupNorm(2, 6, eps=1e-3)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    x = leaf(2, 6, 3, 2)
    out.append(case("groupnorm", dict(m.named_parameters()), {"x": x}, m(x)))
    x = leaf(2, 2, 18, 2, 3)
    out.append(case("pixel_shuffle", {}, {"x": x}, torch.nn.PixelShuffle(3)(x)))
    x = leaf(2, 2, 6, 4)
    out.append(case("pixel_unshuffle", {}, {"x": x}, torch.nn.PixelUnshuffle(2)(x)))
    x = leaf(2, 6, 2, 1)
    y = x.view(2, 3, 2, 2, 1).transpose(1, 2).reshape(2, 6, 2, 1)  # 1.13's channel_shuffle has no backward
    assert torch.equal(y, torch.nn.ChannelShuffle(3)(x.detach()))
    out.append(case("channel_shuffle", {}, {"x": x}, y))

    m = torch.nn.Embedding(5, 2, padding_idx=3, scale_grad_by_freq=True)
    ids = torch.tensor([[0, 3, 0, 4], [0, 4, 3, 2]])
    y = m(ids)
    R = torch.randn(y.shape)
    (y * R).sum().backward()
    out.append({"name": "embedding_freq", "weight0": m.weight.detach().clone(), "ids": ids + 1, "out": y.detach(),
                "R": R, "grad": m.weight.grad.detach()})

    d, pos = 6, torch.arange(2, 6, dtype=torch.float64).unsqueeze(1)  # 0-based 2..5 = 1-based 3..6
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
    pe = torch.zeros(4, d)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    out.append({"name": "sinusoidal", "start": 3, "pe": pe})
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn_modules_torch.lua")
    Writer(keys="auto").write(path, "tests/gen_nn_modules_torch_fixtures.py", {"cases": cases()})
