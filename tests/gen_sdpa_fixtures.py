"""PyTorch references for ember.scaled_dot_product_attention where the
float attn_mask is learned (requires grad), as torch's math attention:
softmax(q k^T * scale + mask) v with the gradient of the mask too; grouped
kv heads repeated (repeat_interleave); a row the mask hides whole gives 0
and gradient 0, as in ember.
Writes tests/fixtures/attention_sdpa.lua; run with Debian's python3-torch:
    /usr/bin/python3 tests/gen_sdpa_fixtures.py
"""
import os

import torch

from fixture_writer import Writer

torch.manual_seed(0)
D = torch.float64


def case(name, B, Hq, Hk, L, S, E, Ev, dead_row=False, scale=None):
    q = torch.randn(B, Hq, L, E, dtype=D)
    k = torch.randn(B, Hk, S, E, dtype=D)
    v = torch.randn(B, Hk, S, Ev, dtype=D)
    m = torch.randn(1, Hq, L, S, dtype=D)
    m[0, 0, 0, S - 1] = float("-inf")
    if dead_row:
        m[0, Hq - 1, L - 1, :] = float("-inf")
    m.requires_grad_()
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    kk, vv = k.repeat_interleave(Hq // Hk, 1), v.repeat_interleave(Hq // Hk, 1)
    sc = scale if scale is not None else 1 / E ** 0.5
    s = q @ kk.transpose(-1, -2) * sc + m
    # a row with no key: output 0 and no gradient (PyTorch 2.5's math attention
    # does the same; 1.13 gives NaN, which would reach every key's gradient)
    dead = (s == float("-inf")).all(-1, keepdim=True)
    p = s.masked_fill(dead, 0).softmax(-1) * (~dead)
    out = p @ vv
    g = torch.randn_like(out)
    (out * g).sum().backward()
    grads = [t.grad for t in (q, k, v, m)]
    return {"name": name, "scale": scale, "q": q.detach(), "k": k.detach(), "v": v.detach(), "mask": m.detach(),
            "grad_out": g, "out": out.detach(), "dq": grads[0], "dk": grads[1], "dv": grads[2], "dmask": grads[3]}


cases = [
    case("learned_mask", 2, 2, 2, 4, 5, 3, 3),
    case("learned_mask_gqa_dead_row", 2, 4, 2, 3, 6, 5, 4, dead_row=True, scale=0.3),
]
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "attention_sdpa.lua")
Writer().write(path, "tests/gen_sdpa_fixtures.py", {"torch_version": torch.__version__, "cases": cases})
