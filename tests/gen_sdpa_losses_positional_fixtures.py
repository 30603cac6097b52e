"""PyTorch 1.13 reference values for tests/lua/attention_torch_call_spec.lua:
F.scaled_dot_product_attention's PyTorch 2.x positional arguments
(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa),
written out by its definition in float64 (PyTorch 1.13 has no
scaled_dot_product_attention, and 2.5's enable_gqa is repeat_interleave of
the key/value heads):

  out = softmax(q k^T * scale + mask) v,  scale = 1/sqrt(E) by default

  causal_rect   is_causal = True with L = 3 queries and S = 5 keys: PyTorch's
                top-left mask (query i sees keys 1..i, 1-based)
  mask_scale    a bool attn_mask [L, S] (True = may attend) and scale = 0.7
  gqa_causal    4 query heads over 2 key/value heads (enable_gqa), causal

and the losses of torch.nn.functional called with their positional
arguments (losses): cross_entropy(x, y, w, None, 1, None, "sum", 0.1),
nll_loss(logp, y, w, None, 1, None, "sum"), l1_loss(a, b, None, None,
"sum"), smooth_l1_loss(a, b, None, None, "sum", 0.5), huber_loss(a, b,
"sum", 0.7), kl_div(logp, logq, None, None, "batchmean", True),
binary_cross_entropy(p, t, w, None, None, "sum") and
binary_cross_entropy_with_logits(x, t, w, None, None, "mean", pos_weight)
(class ids 0-based here, 1-based in the fixture: + 1), read by
tests/lua/nn_functional_losses_spec.lua.

    /usr/bin/python3 tests/gen_sdpa_losses_positional_fixtures.py   # writes tests/fixtures/sdpa_losses_positional.lua
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(94)
torch.set_default_dtype(torch.float64)


def sdpa(q, k, v, mask=None, causal=False, scale=None, gqa=False):
    if gqa:
        rep = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(rep, -3), v.repeat_interleave(rep, -3)
    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if causal:
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return s.softmax(-1) @ v


def cases():
    out = []
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    out.append({"name": "causal_rect", "q": q, "k": k, "v": v, "out": sdpa(q, k, v, causal=True)})
    q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    mask = torch.rand(3, 5) > 0.4
    mask[:, 0] = True  # every query sees a key
    out.append({"name": "mask_scale", "q": q, "k": k, "v": v, "mask": mask, "scale": 0.7,
                "out": sdpa(q, k, v, mask=mask, scale=0.7)})
    q, k, v = torch.randn(1, 4, 5, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    out.append({"name": "gqa_causal", "q": q, "k": k, "v": v, "out": sdpa(q, k, v, causal=True, gqa=True)})
    return out


def losses():
    F = torch.nn.functional
    x, y, w = torch.randn(5, 4), torch.tensor([0, 1, 3, 1, 2]), torch.rand(4) + 0.5
    a, b = torch.randn(3, 4) * 2, torch.randn(3, 4)
    logp, logq = torch.randn(3, 4).log_softmax(-1), torch.randn(3, 4).log_softmax(-1)
    p, t, bw = torch.rand(3, 4) * 0.9 + 0.05, torch.rand(3, 4), torch.rand(3, 4)
    pw = torch.rand(4) * 2
    return {
        "x": x, "y": y + 1, "w": w, "a": a, "b": b, "logp": logp, "logq": logq, "p": p, "t": t, "bw": bw, "pw": pw,
        "cross_entropy": F.cross_entropy(x, y, w, None, 1, None, "sum", 0.1),
        "nll_loss": F.nll_loss(x.log_softmax(-1), y, w, None, 1, None, "sum"),
        "l1_loss": F.l1_loss(a, b, None, None, "sum"),
        "smooth_l1_loss": F.smooth_l1_loss(a, b, None, None, "sum", 0.5),
        "huber_loss": F.huber_loss(a, b, "sum", 0.7),
        "kl_div": F.kl_div(logp, logq, None, None, "batchmean", True),
        "binary_cross_entropy": F.binary_cross_entropy(p, t, bw, None, None, "sum"),
        "binary_cross_entropy_with_logits": F.binary_cross_entropy_with_logits(a, t, bw, None, None, "mean", pw),
    }


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sdpa_losses_positional.lua")
    Writer(keys="auto").write(path, "tests/gen_sdpa_losses_positional_fixtures.py", {"cases": cases(), "losses": losses()})
