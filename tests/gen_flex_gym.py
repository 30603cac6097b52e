#!/usr/bin/python3
"""Writes tests/fixtures/flex_gym.lua: PyTorch float64 references for the
attention-gym catalogue (github.com/pytorch-labs/attention-gym) written in
Lua through ember.flex_attention, for tests/lua/flex_gym_spec.lua.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 tests/gen_flex_gym.py

PyTorch 1.13 has no flex_attention: each score_mod / mask_mod is written here
densely in plain torch, 0-based and top-left as PyTorch 2.5's flex_attention
reads them (q_idx is the query's row 0..Lq-1, kv_idx the key's 0..Lk-1), on
index grids b [B,1,1,1], h [1,H,1,1], q [1,1,Lq,1], k [1,1,1,Lk]:

  s = scale * q k^T (scale 1/sqrt(E) unless given), s = score_mod(s),
  s = -inf where mask_mod is false, out = softmax(s) v (a row that sees no
  key gives 0, as flex_attention), grouped heads: kv head h // (Hq/Hkv).

Each case stores out, the row logsumexp (flex_attention's return_lse; -inf
for a row that sees no key) and the gradients of sum(out * R) for q, k, v and
the learned tensor it reads (if any); the spec's Lua functions are the same rules
1-based. The inputs are rounded to 3 decimals (exact in the file). One more
case trains nn.MultiHeadAttention with a drop-in relative-bias variant three
AdamW steps: its initial weights, the losses and the final weights; and
mha_catalogue trains the catalogue's variants (as variant files) so.

Its own seed: the other fixtures do not change when this one does.
"""
import math
import os

import torch

from fixture_writer import Writer, lua_float

torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
# 13 significant digits: within 1e-12 of the float64 result, far inside the spec's 1e-10
WRITER = Writer(keys="auto", sep=",", floats=lambda t: ["%.13g" % v if math.isfinite(v) else lua_float(v)
                                                        for v in t.reshape(-1).tolist()])


def rounded(*shape):
    return torch.round(torch.randn(*shape) * 1000) / 1000


def attend(q, k, v, score_mod=None, mask_mod=None, scale=None):
    B, Hq, Lq, E = q.shape
    Hk, Lk = k.shape[1], k.shape[2]
    if Hk != Hq:
        k, v = k.repeat_interleave(Hq // Hk, 1), v.repeat_interleave(Hq // Hk, 1)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else 1 / math.sqrt(E))
    b = torch.arange(B).view(B, 1, 1, 1)
    h = torch.arange(Hq).view(1, Hq, 1, 1)
    qi = torch.arange(Lq).view(1, 1, Lq, 1)
    ki = torch.arange(Lk).view(1, 1, 1, Lk)
    if score_mod is not None:
        s = score_mod(s, b, h, qi, ki).expand(B, Hq, Lq, Lk)
    allowed = torch.ones(B, Hq, Lq, Lk, dtype=torch.bool)
    if mask_mod is not None:
        allowed = mask_mod(b, h, qi, ki).expand(B, Hq, Lq, Lk)
    s = torch.where(allowed, s, torch.full((), -math.inf))
    attend.lse = torch.logsumexp(s.detach(), -1)  # -inf where a row sees no key
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros(()))
    e = torch.where(allowed, torch.exp(s - m), torch.zeros(()))
    d = e.sum(-1, keepdim=True)
    return (e / torch.where(d > 0, d, torch.ones(()))) @ v


# the shapes: "self" (odd length, B > 1), "cross" (Lq != Lk, grouped heads),
# "grid" (a 6 x 7 image for the 2-d neighbourhood)
SHAPES = {"self": (2, 2, 2, 37, 37, 4), "cross": (2, 4, 2, 21, 50, 4), "grid": (1, 2, 2, 42, 42, 4)}
INPUTS = {}
for name, (B, Hq, Hk, Lq, Lk, E) in SHAPES.items():
    INPUTS[name] = {"q": rounded(B, Hq, Lq, E), "k": rounded(B, Hk, Lk, E), "v": rounded(B, Hk, Lk, E),
                    "R": rounded(B, Hq, Lq, E)}

cases = []


def case(name, shape, score_mod=None, mask_mod=None, learned=None, scale=None, extra=None):
    """learned: {name: tensor} read by the mods (a dict of leaves made here)."""
    x = INPUTS[shape]
    q, k, v = (x[n].clone().requires_grad_() for n in "qkv")
    ls = {n: t.clone().requires_grad_() for n, t in (learned or {}).items()}
    sm = (lambda s, b, h, qi, ki: score_mod(s, b, h, qi, ki, ls)) if score_mod else None
    out = attend(q, k, v, sm, mask_mod, scale)
    (out * x["R"]).sum().backward()
    c = {"name": name, "shape": shape}
    for n, t in (extra or {}).items():
        c[n] = t
    for n, t in (learned or {}).items():
        c[n] = t
    c["out"], c["lse"], c["dq"], c["dk"], c["dv"] = out, attend.lse, q.grad, k.grad, v.grad
    for n, t in ls.items():
        c["d" + n] = t.grad
    cases.append(c)


def causal(b, h, q, k):
    return q >= k


def sliding_window(W):
    return lambda b, h, q, k: (q >= k) & (q - k <= W)


def prefix_lm(P):
    return lambda b, h, q, k: (k < P) | (q >= k)


def dilated(W, D):
    return lambda b, h, q, k: ((q - k).abs() <= W) & ((q - k) % D == 0)


def alibi_slopes(H):
    return torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)])


def t5_bucket(rel, num_buckets, max_distance):
    # bidirectional T5 buckets of rel = k - q (transformers' _relative_position_bucket)
    nb = num_buckets // 2
    ret = (rel > 0).long() * nb
    n = rel.abs()
    max_exact = nb // 2
    large = max_exact + (torch.log(n.double().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (nb - max_exact)).floor().long()
    large = torch.minimum(large, torch.full_like(large, nb - 1))
    return ret + torch.where(n < max_exact, n, large)


for shape in ("self", "cross"):
    B, Hq, Hk, Lq, Lk, E = SHAPES[shape]
    case("causal", shape, mask_mod=causal)
    case("sliding_window", shape, mask_mod=sliding_window(6))
    case("prefix_lm", shape, mask_mod=prefix_lm(9))
    case("dilated_sliding_window", shape, mask_mod=dilated(8, 2))
    case("alibi", shape, score_mod=lambda s, b, h, q, k, L: s + alibi_slopes(Hq).view(1, -1, 1, 1) * (k - q))
    if shape == "self":
        case("alibi_causal", shape, mask_mod=causal,
             score_mod=lambda s, b, h, q, k, L: s + alibi_slopes(Hq).view(1, -1, 1, 1) * (k - q))
    # a learned table indexed by the relative position q - k (q - k + Lk - 1 in 0..Lq+Lk-2)
    case("relative_bias", shape, learned={"rel": rounded(Hq, Lq + Lk - 1)},
         score_mod=lambda s, b, h, q, k, L: s + L["rel"][h, q - k + Lk - 1])
    if shape == "self":
        case("tanh_softcap", shape, score_mod=lambda s, b, h, q, k, L: 1.5 * torch.tanh(s / 1.5))
    case("t5_bias", shape, learned={"t5": rounded(8, Hq)},
         score_mod=lambda s, b, h, q, k, L: s + L["t5"][t5_bucket(k - q, 8, 20), h])
    # Gemma 2's local layers: its own scale (query_pre_attn_scalar), logit softcap, causal sliding window
    case("gemma_softcap_window", shape, scale=0.9, mask_mod=sliding_window(8),
         score_mod=lambda s, b, h, q, k, L: 2.0 * torch.tanh(s / 2.0))
    # a learned per-head slope of the distance (a trainable ALiBi), causal
    case("learned_head_slope", shape, learned={"w": rounded(Hq)}, mask_mod=causal,
         score_mod=lambda s, b, h, q, k, L: s - torch.exp(L["w"][h]) * (q - k).abs())

# documents: per-batch ids [B, L], two calls with other ids (the same Lua code)
B, Hq, Hk, Lq, Lk, E = SHAPES["self"]
for i, lens in enumerate(([[5, 12, 20], [30, 7]], [[1, 36], [9, 9, 9, 10]])):
    doc = torch.tensor([[j + 1 for j, n in enumerate(ls) for _ in range(n)] for ls in lens], dtype=torch.int64)
    case("document_%d" % (i + 1), "self", extra={"doc": doc},
         mask_mod=lambda b, h, q, k, doc=doc: doc[b, q] == doc[b, k])

# causal and key padding (lengths per batch) with and_masks, or global tokens with or_masks
lens = torch.tensor([23, 37], dtype=torch.int64)
case("causal_and_padding", "self", extra={"lens": lens},
     mask_mod=lambda b, h, q, k: (q >= k) & (k < lens[b]))
case("causal_and_padding_or_global", "self", extra={"lens": lens},
     mask_mod=lambda b, h, q, k: ((q >= k) & (k < lens[b])) | (k < 2) | (q < 2))

# padded queries and keys, causal: the padded query rows see no key (out 0, logsumexp -inf)
case("causal_padded_rows", "self", extra={"lens": lens},
     mask_mod=lambda b, h, q, k: (q >= k) & (k < lens[b]) & (q < lens[b]))

# block-sparse: a bool map of 8 x 8 blocks read by the mask, and causal
for shape in ("self", "cross"):
    B, Hq, Hk, Lq, Lk, E = SHAPES[shape]
    blocks = torch.rand((Lq + 7) // 8, (Lk + 7) // 8) > 0.4
    blocks[:, 0] = True
    case("block_sparse", shape, extra={"blocks": blocks},
         mask_mod=lambda b, h, q, k, blocks=blocks: blocks[q // 8, k // 8] & (q >= k))

# NATTEN-style 2-d neighbourhood on a 6 x 7 image (row-major tokens), 3 x 5 kernel, centres clamped
GH, GW, KH, KW = 6, 7, 3, 5


def natten(b, h, q, k):
    qx, qy, kx, ky = q // GW, q % GW, k // GW, k % GW
    cx = qx.clamp(KH // 2, GH - 1 - KH // 2)
    cy = qy.clamp(KW // 2, GW - 1 - KW // 2)
    return ((cx - kx).abs() <= KH // 2) & ((cy - ky).abs() <= KW // 2)


case("natten_2d", "grid", mask_mod=natten)


# nn.MultiHeadAttention(16, 4) with a drop-in variant: a learned relative bias
# rel[h, clamp(q - k, -K, K) + K] ([4, 2K + 1], K = 6), causal; AdamW 3 steps
def mha_case():
    d, H, L, Bm, K = 16, 4, 19, 2, 6
    hd = d // H
    W = {}
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        W[n + ".weight"] = rounded(d, d) * 0.25
        W[n + ".bias"] = rounded(d) * 0.1
    W["attn.rel"] = rounded(H, 2 * K + 1) * 0.5
    x, R = rounded(Bm, L, d), rounded(Bm, L, d)
    P = {n: t.clone().requires_grad_() for n, t in W.items()}
    opt = torch.optim.AdamW(list(P.values()), lr=0.01, weight_decay=0.05)
    qi, ki = torch.arange(L).view(L, 1), torch.arange(L).view(1, L)
    idx = (qi - ki).clamp(-K, K) + K
    losses = []
    for _ in range(3):
        opt.zero_grad()

        def proj(n, t):
            return (t @ P[n + ".weight"].t() + P[n + ".bias"]).view(Bm, L, H, hd).transpose(1, 2)
        q, k, v = proj("q_proj", x), proj("k_proj", x), proj("v_proj", x)
        o = attend(q, k, v, score_mod=lambda s, b, h, qq, kk: s + P["attn.rel"][:, idx].unsqueeze(0),
                   mask_mod=causal)
        y = o.transpose(1, 2).reshape(Bm, L, d) @ P["out_proj.weight"].t() + P["out_proj.bias"]
        loss = (y * R).sum()
        loss.backward()
        losses.append(float(loss))
        opt.step()
    return {"K": K, "d_model": d, "heads": H, "x": x, "R": R, "state": W, "losses": losses,
            "final": {n: t.detach() for n, t in P.items()}}


MHA = mha_case()


# The catalogue as drop-in variants (ember.attention_variant files) in
# nn.MultiHeadAttention(16, 4): one set of weights, input and target, each
# variant trained three AdamW steps; the variant's own tensors are "attn.<name>"
# (learned ones train too), per-call tensors are variant_inputs. Self-attention
# over L = 20 tokens (a 4 x 5 image for natten), so q is q_idx here.
def mha_catalogue():
    d, H, L, Bm = 16, 4, 20, 2
    hd = d // H
    W = {}
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        W[n + ".weight"] = rounded(d, d) * 0.25
        W[n + ".bias"] = rounded(d) * 0.1
    x, R = rounded(Bm, L, d), rounded(Bm, L, d)
    doc = torch.tensor([[1] * 7 + [2] * 9 + [3] * 4, [1] * 15 + [2] * 5], dtype=torch.int64)
    lens = torch.tensor([13, 20], dtype=torch.int64)
    prefix = torch.tensor([5, 0], dtype=torch.int64)
    blocks = torch.tensor([[True, False, False], [True, True, False], [False, True, True]])
    slopes = torch.tensor([2 ** (-8 * (i + 1) / H) for i in range(H)]).view(1, H, 1, 1)

    def grid_mask(b, h, q, k):  # a 4 x 5 image, 3 x 3 neighbourhoods, centres inside
        qx, qy, kx, ky = q // 5, q % 5, k // 5, k % 5
        return ((qx.clamp(1, 2) - kx).abs() <= 1) & ((qy.clamp(1, 3) - ky).abs() <= 1)

    V = [  # name, causal, score(s, b, h, q, k, P), mask(b, h, q, k), learned tables, per-call inputs
        ("gym_sliding_window", False, None, sliding_window(6), {}, {}),
        ("gym_prefix_lm", False, None, lambda b, h, q, k: (k < prefix[b]) | (k <= q), {}, {"prefix": prefix}),
        ("gym_document", True, None, lambda b, h, q, k: doc[b, q] == doc[b, k], {}, {"doc": doc}),
        ("gym_dilated", False, None, dilated(8, 2), {}, {}),
        ("gym_alibi", True, lambda s, b, h, q, k, P: s + slopes * (k - q), None, {}, {}),
        ("gym_softcap", False, lambda s, b, h, q, k, P: 1.5 * torch.tanh(s / 1.5), None, {}, {}),
        ("gym_t5", False, lambda s, b, h, q, k, P: s + P["attn.t5"][t5_bucket(k - q, 8, 20), h], None,
         {"t5": rounded(8, H) * 0.5}, {}),
        ("gym_head_slope", True, lambda s, b, h, q, k, P: s - torch.exp(P["attn.w"][h]) * (q - k).abs(), None,
         {"w": rounded(H) * 0.5}, {}),
        ("gym_padding", True, None, lambda b, h, q, k: k < lens[b], {}, {"lens": lens}),
        ("gym_block_sparse", True, None, lambda b, h, q, k: blocks[q // 8, k // 8], {}, {}),
        ("gym_natten", False, None, grid_mask, {}, {}),
    ]
    qi, ki = torch.arange(L).view(1, 1, L, 1), torch.arange(L).view(1, 1, 1, L)
    out = {"d_model": d, "heads": H, "x": x, "R": R, "state": W, "doc": doc, "lens": lens, "prefix": prefix,
           "blocks": blocks, "cases": []}
    for name, is_causal, score, mask, learned, inputs in V:
        P = {n: t.clone().requires_grad_() for n, t in W.items()}
        for n, t in learned.items():
            P["attn." + n] = t.clone().requires_grad_()
        opt = torch.optim.AdamW(list(P.values()), lr=0.01, weight_decay=0.05)

        def mask_mod(b, h, q, k):
            m = torch.ones((), dtype=torch.bool)
            if mask is not None:
                m = m & mask(b, h, q, k)
            if is_causal:
                m = m & (q >= k)
            return m
        losses = []
        for _ in range(3):
            opt.zero_grad()

            def proj(n, t):
                return (t @ P[n + ".weight"].t() + P[n + ".bias"]).view(Bm, L, H, hd).transpose(1, 2)
            q, k, v = proj("q_proj", x), proj("k_proj", x), proj("v_proj", x)
            o = attend(q, k, v, score_mod=(lambda s, b, h, qq, kk: score(s, b, h, qq, kk, P)) if score else None,
                       mask_mod=mask_mod)
            y = o.transpose(1, 2).reshape(Bm, L, d) @ P["out_proj.weight"].t() + P["out_proj.bias"]
            loss = (y * R).sum()
            loss.backward()
            losses.append(float(loss))
            opt.step()
        final = {"q_proj.weight": P["q_proj.weight"].detach()}  # through the scores: the variant shows there
        for n in learned:
            final["attn." + n] = P["attn." + n].detach()
        c = {"name": name, "causal": is_causal, "inputs": list(inputs), "losses": losses, "final": final}
        if learned:
            c["learned"] = {"attn." + n: t for n, t in learned.items()}
        out["cases"].append(c)
    return out


fixture = {"inputs": INPUTS, "cases": cases, "mha": MHA, "mha_catalogue": mha_catalogue()}
WRITER.write(os.path.join(HERE, "fixtures", "flex_gym.lua"), "tests/gen_flex_gym.py", fixture)
