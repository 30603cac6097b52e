"""PyTorch 1.13 references for tests/lua/flex_attention_mods_spec.lua: attention
variants a FlexAttention user writes in Lua (ember.flex_attention's
score_mod / block_mask) that the attention-gym catalogue
(tests/gen_flex_gym.py) does not hold: a learned relative table read twice
in one score, a learned per-head slope under grouped heads, a learned 0-d
temperature with a prefix-LM mask, a learned tensor read by both the score
and the mask, index arithmetic on negative numbers (floor division,
Python's %, C's fmod), a score_mod nonlinear in the score, a captured
transposed view, a score_mod that sends whole rows to -inf, and a mask_mod
that chooses between two masks with where.

PyTorch 1.13 has no flex_attention: each case is written out densely in
float64 (scores = q k^T * scale, the mod, softmax, @ v). Indices are 0-based
here and 1-based in the spec; q_idx is the query's row (top-left), as
PyTorch's. A row that sees no key gives output 0 and gradient 0 (ember's
rule, and flex_attention's output). Each case holds q, k, v, the learned
tensor (if any), R, out and the gradients of sum(out * R).

    /usr/bin/python3 tests/gen_flex_attention_mods_fixtures.py   # writes tests/fixtures/flex_attention_mods.lua
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer, lua_float, grid64 as rnd  # noqa: E402

torch.manual_seed(97)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def grids(B, H, Lq, Lk):
    b = torch.arange(B).view(B, 1, 1, 1).expand(B, H, Lq, Lk)
    h = torch.arange(H).view(1, H, 1, 1).expand(B, H, Lq, Lk)
    q = torch.arange(Lq).view(1, 1, Lq, 1).expand(B, H, Lq, Lk)
    k = torch.arange(Lk).view(1, 1, 1, Lk).expand(B, H, Lq, Lk)
    return b, h, q, k


def attend(q, k, v, score_mod=None, mask_mod=None):
    B, H, Lq, E = q.shape
    Hk, Lk = k.shape[1], k.shape[2]
    kk, vv = k.repeat_interleave(H // Hk, 1), v.repeat_interleave(H // Hk, 1)
    s = q @ kk.transpose(-1, -2) / math.sqrt(E)
    b, h, qi, ki = grids(B, H, Lq, Lk)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, ki).expand(B, H, Lq, Lk)
    allowed = s != float("-inf")
    if mask_mod is not None:
        allowed = allowed & mask_mod(b, h, qi, ki).expand(B, H, Lq, Lk)
    any_row = allowed.any(-1, keepdim=True)
    s = s.masked_fill(~allowed, float("-inf")).masked_fill(~any_row, 0.0)
    return (torch.softmax(s, -1) * any_row) @ vv


cases = []


def case(name, B, H, Hk, Lq, Lk, E, score_mod=None, mask_mod=None, learned=None, extra=None):
    q, k, v = rnd(B, H, Lq, E), rnd(B, Hk, Lk, E), rnd(B, Hk, Lk, E)
    ins = [q, k, v] + ([learned] if learned is not None else [])
    for t in ins:
        t.requires_grad_(True)
    out = attend(q, k, v, score_mod, mask_mod)
    R = rnd(*out.shape)
    grads = torch.autograd.grad((out * R).sum(), ins)
    c = {"name": name, "q": q.detach(), "k": k.detach(), "v": v.detach(), "R": R, "out": out.detach(),
         "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if learned is not None:
        c["learned"], c["dlearned"] = learned.detach(), grads[3]
    if extra:
        c.update(extra)
    cases.append(c)


# a learned relative table [2L+1, H] read twice in one score (two scattered gradients)
L = 9
tbl = rnd(2 * L + 1, 2, std=0.5)
case("relbias_twice", 1, 2, 2, 7, 9, 4,
     score_mod=lambda s, b, h, q, k, t=tbl: s + t[k - q + L, h] * t[q - k + L, h], learned=tbl)

# a learned slope per query head, kv heads shared by two query heads, causal
slopes = torch.tensor([0.25, 0.5, 0.75, 1.0])
case("gqa_slope", 2, 4, 2, 8, 8, 4,
     score_mod=lambda s, b, h, q, k, t=slopes: s - t[h] * (q - k).abs(),
     mask_mod=lambda b, h, q, k: q >= k, learned=slopes)

# a learned 0-d temperature, prefix-LM (the first 3 keys seen by every query)
temp = torch.tensor(0.75)
case("temperature_prefix", 2, 2, 2, 8, 8, 4,
     score_mod=lambda s, b, h, q, k, t=temp: s / t,
     mask_mod=lambda b, h, q, k: (k < 3) | (q >= k), learned=temp)

# a learned per-key bias the mask also reads (the mask takes no gradient)
w = rnd(9, std=0.5)
case("key_bias_and_mask", 1, 2, 2, 7, 9, 4,
     score_mod=lambda s, b, h, q, k, t=w: s + t[k],
     mask_mod=lambda b, h, q, k, t=w: (t.detach()[k] > 0) | (k == q), learned=w)

# floor division, Python's % and C's fmod of negative differences (Lq != Lk)
case("negative_index_arithmetic", 2, 2, 2, 7, 9, 4,
     score_mod=lambda s, b, h, q, k: (s + torch.div(q - k, 3, rounding_mode="floor") * 0.25
                                      + torch.remainder(k - q, 4) * 0.125 + torch.fmod(q - k, 3) * 0.0625))

# a score_mod nonlinear in the score (its derivative in the backward)
case("nonlinear_score", 1, 2, 2, 7, 9, 4,
     score_mod=lambda s, b, h, q, k: (torch.where(s > 0, s * s, -torch.sqrt(s.abs() + 0.5)) + torch.sigmoid(s)
                                      + torch.pow(s.abs() + 1, 1.5) * 0.25))

# a captured transposed view: bias [Lk, Lq] read as bias.T[q, kv]
bias = rnd(9, 7)
case("transposed_capture", 1, 2, 2, 7, 9, 4,
     score_mod=lambda s, b, h, q, k, t=bias: s + t.t()[q, k], extra={"bias": bias})

# a score_mod that sends rows 0..2 to -inf everywhere (out 0, gradient 0)
case("rows_all_minus_inf", 1, 2, 2, 6, 9, 4,
     score_mod=lambda s, b, h, q, k: torch.where(q > 2, s, torch.tensor(float("-inf"))))

# a mask_mod that chooses between two masks with where (a bool where, as torch's):
# rows 0..3 see the keys after them, the later rows a causal window of 3 and key 0
case("where_of_masks", 2, 2, 2, 7, 9, 4,
     mask_mod=lambda b, h, q, k: ~torch.where(q >= 4, ((q - k).abs() > 2) & (k != 0), k < q))


def full(t):
    return [lua_float(float(x)) for x in t.reshape(-1).tolist()]


if __name__ == "__main__":
    Writer(floats=full).write(os.path.join(HERE, "fixtures", "flex_attention_mods.lua"),
                              "tests/gen_flex_attention_mods_fixtures.py", {"cases": cases})
