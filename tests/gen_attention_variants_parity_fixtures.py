"""PyTorch 1.13 references for tests/lua/attention_variants_parity_spec.lua: every
attention variant ember ships, written out by hand from its definition
(plugins/README.md and the papers) as a dense float64 softmax, at the shapes
a researcher meets: cross attention (Lq != Lk), one-token decoding, lengths
that are not a multiple of a kernel tile (7, 65, 130), head dims 8/24/80,
grouped-query heads, causal with Lq < Lk and Lq > Lk (bottom-right: the
first rows of the latter see no key), padded keys that empty a whole row.

Rules (ember's, plugins/README.md): p = i + Lk - Lq is query i's position on
the key axis (0-based here); causal keeps j <= p; a row that sees no key
gives output 0 and gradient 0; scale 1/sqrt(dk); a kv head serves
H / Hkv query heads (repeat_interleave).

Each case: the inputs q, k, v (and any table), R, out and the gradients of
sum(out * R) for q, k, v and the tables.

    /usr/bin/python3 tests/gen_attention_variants_parity_fixtures.py   # writes tests/fixtures/attention_variants_parity.lua
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer, lua_float, grid64 as rnd  # noqa: E402

torch.manual_seed(91)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def positions(Lq, Lk):
    p = torch.arange(Lq).unsqueeze(1) + (Lk - Lq)  # [Lq, 1] query positions on the key axis
    j = torch.arange(Lk).unsqueeze(0)              # [1, Lk]
    return p, j


def softmax_attend(s, allowed, v, sink=None):
    """s [B,H,Lq,Lk], allowed broadcastable bool; rows with no key give 0 (and no gradient)"""
    allowed = allowed.expand_as(s)
    any_row = allowed.any(-1, keepdim=True)
    m = s.masked_fill(~allowed, float("-inf")).masked_fill(~any_row, 0.0)
    if sink is not None:
        sk = sink.view(1, -1, 1, 1).expand(s.shape[0], s.shape[1], s.shape[2], 1)
        p = torch.softmax(torch.cat([m, sk], -1), -1)[..., :-1]
    else:
        p = torch.softmax(m, -1)
    p = p * any_row
    return p


def t5_bucket(r, num_buckets, max_distance, bidirectional):
    """Raffel et al. 2020 (transformers' T5Attention._relative_position_bucket), r = j - p"""
    ret = torch.zeros_like(r)
    n = r.clone()
    if bidirectional:
        num_buckets //= 2
        ret += (n > 0).long() * num_buckets
        n = n.abs()
    else:
        n = -torch.clamp(n, max=0)
    max_exact = num_buckets // 2
    small = n < max_exact
    large = max_exact + (torch.log(n.double().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return ret + torch.where(small, n, large)


def alibi_slopes(n):
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + pow2(2 * c)[0::2][:n - c]


def elu1(x):
    return torch.nn.functional.elu(x) + 1


def reference(variant, opts, q, k, v, tables, causal, kpm, scale=None, mask=None):
    B, H, Lq, dk = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(H // Hkv, 1)
    v = v.repeat_interleave(H // Hkv, 1)
    p, j = positions(Lq, Lk)
    r = j - p                      # relative position of the key
    allowed = torch.ones(B, 1, Lq, Lk, dtype=torch.bool)
    if causal:
        allowed = allowed & (j <= p)
    if kpm is not None:
        allowed = allowed & ~kpm.view(B, 1, 1, Lk)
    if scale is None:
        scale = 1 / math.sqrt(dk)
    fmask = None
    if mask is not None and mask.dtype == torch.bool:   # ember's bool attn_mask: true = may attend
        allowed = allowed & mask
    elif mask is not None:                               # a float one is added to the scores
        fmask = mask
    sink = None
    extra_v = None
    if variant == "linear":
        fq, fk = elu1(q), elu1(k)
        a = (fq @ fk.transpose(-1, -2)) * allowed.expand(B, H, Lq, Lk)
        return (a @ v) / (a.sum(-1, keepdim=True) + opts.get("eps", 1e-6))
    s = (q @ k.transpose(-1, -2)) * scale
    if variant == "local" and opts["mode"] == "sliding":
        wl, wr = opts["window_left"], opts["window_right"]
        allowed = allowed & (j >= p - wl) & (j <= p + wr)
    elif variant == "local" and opts["mode"] == "block":
        bs, lb = opts["block_size"], opts["local_blocks"]
        near = ((j // bs) - (p // bs)).abs() <= lb
        g = opts.get("global_tokens", 0)
        gb = opts.get("global_blocks", 0) * bs
        glob = (j < max(g, gb)) | (p < max(g, gb))
        allowed = allowed & (near | glob)
    elif variant == "relpos" and opts["mode"] == "shaw":
        K = opts["max_relative_position"]
        idx = r.clamp(-K, K) + K                                  # [Lq, Lk]
        rk, rv = tables["rel_k"], tables["rel_v"]
        s = s + torch.einsum("bhid,ijd->bhij", q, rk[idx]) * scale
        extra_v = rv[idx]                                         # [Lq, Lk, dv]
    elif variant == "relpos" and opts["mode"] == "t5":
        bk = t5_bucket(r, opts["num_buckets"], opts["max_distance"], opts["bidirectional"])
        s = s + tables["bias"][bk].permute(2, 0, 1).unsqueeze(0)
    elif variant == "relpos" and opts["mode"] == "alibi":
        sl = torch.tensor(alibi_slopes(H)).view(1, H, 1, 1)
        s = s - sl * r.abs()
    elif variant == "softcap":
        s = opts["cap"] * torch.tanh(s / opts["cap"])
    elif variant == "sinks":
        sink = tables["sink"]
    elif variant == "sliding_sinks":
        wl, wr, ns = opts["window_left"], opts["window_right"], opts["sinks"]
        allowed = allowed & (((p - j <= wl) & (j - p <= wr)) | (j < ns))
    elif variant == "example_lua":
        d = r.abs().clamp(max=opts["max_distance"])
        s = s + tables["distance_bias"][d].permute(2, 0, 1).unsqueeze(0)
    elif variant == "flex":   # score_mod: s + bias[h][q_idx][kv_idx] (top-left q_idx); mask_mod: kv_idx <= q_idx + 2
        s = s + tables["bias"].unsqueeze(0)
        qi = torch.arange(Lq).unsqueeze(1)
        allowed = allowed & (j <= qi + 2)
    elif variant != "standard":
        raise ValueError(variant)
    if fmask is not None:
        allowed = allowed & (fmask > float("-inf"))
        s = s + fmask.masked_fill(fmask == float("-inf"), 0)
    w = softmax_attend(s, allowed, v, sink)
    out = w @ v
    if extra_v is not None:
        out = out + torch.einsum("bhij,ijd->bhid", w, extra_v)
    return out


TABLES = {
    ("relpos", "shaw"): lambda o, H, dk, dv: {"rel_k": rnd(2 * o["max_relative_position"] + 1, dk, std=0.5),
                                             "rel_v": rnd(2 * o["max_relative_position"] + 1, dv, std=0.5)},
    ("relpos", "t5"): lambda o, H, dk, dv: {"bias": rnd(o["num_buckets"], H)},
    ("sinks", None): lambda o, H, dk, dv: {"sink": rnd(H)},
    ("example_lua", None): lambda o, H, dk, dv: {"distance_bias": rnd(o["max_distance"] + 1, H)},
}

cases = []


def case(name, variant, opts, B, H, Hkv, Lq, Lk, d, causal=False, kpm_rows=None, dv=None, scale=None, mask=None):
    q = rnd(B, H, Lq, d).requires_grad_()
    k = rnd(B, Hkv, Lk, d).requires_grad_()
    v = rnd(B, Hkv, Lk, dv or d).requires_grad_()
    mk = TABLES.get((variant, opts.get("mode")))
    tables = {}
    if variant == "flex":
        tables = {"bias": rnd(H, Lq, Lk)}
    elif mk:
        tables = mk(opts, H, d, dv or d)
    for t in tables.values():
        t.requires_grad_()
    kpm = None
    if kpm_rows is not None:
        kpm = torch.zeros(B, Lk, dtype=torch.bool)
        for b, cols in kpm_rows.items():
            for c in cols:
                kpm[b, c] = True
    out = reference(variant, opts, q, k, v, tables, causal, kpm, scale, mask)
    R = rnd(*out.shape)
    (out * R).sum().backward()
    for t in [q, k, v] + list(tables.values()):
        assert not torch.isnan(t.grad).any(), name
    c = {"name": name, "variant": variant, "options": opts, "causal": causal,
         "q": q.detach(), "k": k.detach(), "v": v.detach(), "R": R, "out": out.detach(),
         "dq": q.grad, "dk": k.grad, "dv": v.grad,
         "tables": {n: t.detach() for n, t in tables.items()},
         "dtables": {n: t.grad for n, t in tables.items()}}
    if kpm is not None:
        c["key_padding_mask"] = kpm
    if scale is not None:
        c["scale"] = scale
    if mask is not None:
        c["attn_mask"] = mask
    cases.append(c)


# (B, H, Hkv, Lq, Lk, d, causal, kpm): self 7; cross Lq < Lk causal (bottom-right);
# decoding one query; Lq > Lk causal (rows that see nothing); GQA with padding that
# empties batch row 2; MQA cross; tiles 65, 130; head dims 24, 80
SHAPES = {
    "self7": (2, 2, 2, 7, 7, 8, False, None),
    "cross5x9c": (1, 2, 2, 5, 9, 24, True, None),
    "dec1x13c": (1, 2, 2, 1, 13, 8, True, None),
    "cross9x4c": (1, 2, 2, 9, 4, 8, True, None),
    "gqa4_2pad": (2, 4, 2, 6, 6, 8, True, {1: [0, 1, 2, 3, 4, 5], 0: [4]}),
    "mqa3_1x": (1, 3, 1, 4, 11, 8, False, None),
    "tile65": (1, 1, 1, 65, 65, 8, True, None),
    "tile130": (1, 1, 1, 130, 130, 8, False, {0: [3, 129]}),
    "d80": (1, 1, 1, 5, 8, 80, False, None),
}

VARIANTS = [
    ("standard", "standard", {}),
    ("sliding", "local", {"mode": "sliding", "window_left": 2, "window_right": 1}),
    ("block", "local", {"mode": "block", "block_size": 4, "local_blocks": 1, "global_blocks": 0,
                        "global_tokens": 1}),
    ("shaw", "relpos", {"mode": "shaw", "max_relative_position": 3}),
    ("t5", "relpos", {"mode": "t5", "num_buckets": 8, "max_distance": 20, "bidirectional": True}),
    ("t5uni", "relpos", {"mode": "t5", "num_buckets": 6, "max_distance": 12, "bidirectional": False}),
    ("alibi", "relpos", {"mode": "alibi"}),
    ("linear", "linear", {"feature_map": "elu"}),
    ("softcap", "softcap", {"cap": 1.5}),
    ("sinks", "sinks", {}),
    ("sliding_sinks", "sliding_sinks", {"window_left": 2, "window_right": 0, "sinks": 2}),
    ("example_lua", "example_lua", {"max_distance": 3}),
    ("flex", "flex", {}),
]
BIG = {"tile65", "tile130", "d80"}
BIG_FOR = {"standard", "sliding", "shaw", "t5", "alibi", "sinks", "linear"}

for vname, variant, opts in VARIANTS:
    for sname, (B, H, Hkv, Lq, Lk, d, causal, kpm) in SHAPES.items():
        if sname in BIG and vname not in BIG_FOR:
            continue
        if sname == "tile130" and vname not in {"standard", "sliding", "t5", "alibi"}:
            continue
        if sname == "tile65" and vname == "sinks":
            continue
        if sname == "d80" and vname not in {"standard", "shaw", "linear", "sinks"}:
            continue
        if variant == "flex":   # FlexAttention has no causal flag nor key padding: its mask_mod is the mask
            causal, kpm = False, None
        case(vname + "/" + sname, variant, dict(opts), B, H, Hkv, Lq, Lk, d, causal, kpm)

# value heads of another width (Shaw's rel_v is [2K+1, dv]); a scale of the
# user's, negative (ember carries it in q for the declared variants); a float
# attn_mask with a row of -inf (that row gives 0); a bool attn_mask [B, 1, Lq, Lk]
# (true = may attend); block mode's global blocks
fm = rnd(6, 9)
fm[2] = float("-inf")
fm[4, :5] = float("-inf")
bmask = torch.rand(2, 1, 6, 6) > 0.4
bmask[1, 0, 3] = False
case("shaw/dv12", "relpos", {"mode": "shaw", "max_relative_position": 2}, 1, 2, 2, 5, 7, 8, True, dv=12)
case("t5/scale_neg", "relpos", {"mode": "t5", "num_buckets": 8, "max_distance": 20, "bidirectional": True},
     1, 2, 1, 6, 6, 8, True, scale=-0.3)
case("shaw/scale2", "relpos", {"mode": "shaw", "max_relative_position": 2}, 1, 2, 2, 6, 6, 8, False, scale=0.7)
case("alibi/floatmask", "relpos", {"mode": "alibi"}, 1, 3, 3, 6, 9, 8, True, mask=fm)
case("softcap/floatmask", "softcap", {"cap": 1.5}, 1, 2, 1, 6, 9, 8, False, mask=fm)
case("sinks/boolmask", "sinks", {}, 2, 2, 2, 6, 6, 8, False, mask=bmask)
case("example_lua/boolmask", "example_lua", {"max_distance": 3}, 2, 2, 1, 6, 6, 8, True, mask=bmask)
case("block/global_blocks", "local", {"mode": "block", "block_size": 3, "local_blocks": 0, "global_blocks": 1,
                                     "global_tokens": 0}, 1, 2, 2, 10, 10, 8, False)
case("block/global_both", "local", {"mode": "block", "block_size": 2, "local_blocks": 0, "global_blocks": 1,
                                   "global_tokens": 3}, 1, 2, 2, 4, 9, 8, True)


def short(t):
    return ["%.10g" % x if math.isfinite(x) else lua_float(x) for x in t.reshape(-1).tolist()]


if __name__ == "__main__":
    Writer(floats=short).write(os.path.join(HERE, "fixtures", "attention_variants_parity.lua"),
                               "tests/gen_attention_variants_parity_fixtures.py", {"cases": cases})
