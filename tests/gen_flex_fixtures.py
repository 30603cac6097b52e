#!/usr/bin/python3
"""Writes tests/fixtures/attention_flex.lua: PyTorch reference values for the
attention variants written in Lua (plugins/flex), for
tests/lua/attention_variant_fixtures_spec.lua.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 tests/gen_flex_fixtures.py

Its own seed, so the other fixtures do not change when this one does.

Attention is computed densely in float64 on q, k, v [B, H, L, d], written
here from the variants' definitions (not from ember):

  s = scale * q k^T, scale = 1/sqrt(d) (ember.Attention's default)
  softcap       s -> cap * tanh(s / cap)
  example_lua   s -> s + table[min(|p - j|, K), h]            (table [K+1, H], learned)
  document      key j visible iff doc[b, p] == doc[b, j]      (doc [B, Lk], int64)
  prefix_lm     key j visible iff j <= p or j < prefix[b]     (prefix [B], int64)
  sliding_sinks key j visible iff -window_right <= p - j <= window_left or j < sinks
  sinks         a learned logit sink[h] joins each softmax as one more column
                with no value, dropped after the softmax (gpt-oss)

Positions are 0-based here (the Lua variants' are 1-based: `k <= prefix[b]`
there is `j < prefix[b]` here). p = i + Lk - Lq is query i's position on
the key axis (bottom-right aligned, as ember's causal); causal keeps j <= p;
key_padding_mask [B, Lk] is true = padding. All rules are ANDed. A row that
sees no key gives output 0 and gradient 0 (ember's rule; PyTorch's softmax
would give NaN, so the softmax here is written out with that rule).

The inputs q, k, v and the upstream gradient grad_out are shared by all the
cases (a cross-attention case takes the last Lq query rows) and rounded to
3 decimals, so that the file's short decimals are exactly the tensors used
here. Each case stores the variant, its options, the call options (causal,
Lq, key_padding_mask), the per-call inputs (variant_inputs), the learned table
(if any), empty_rows (how many query rows see no key), the output and the
gradients of
sum(out * grad_out) with respect to q, k, v and the table, each tensor with
a fixed number of decimals: a step of at most 1e-11 times its largest
magnitude, so within 5e-12 of PyTorch's float64 relative to that magnitude,
well inside the spec's 1e-10 measured the same way.
"""
import math
import os

import torch

from fixture_writer import Writer

torch.manual_seed(20261203)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))

B, H, L, D = 2, 2, 40, 8


def rounded(*shape, std=1.0, mean=0.0):
    return torch.round((torch.randn(*shape) * std + mean) * 1000) / 1000


def num(x, fmt):
    x = float(x)
    s = fmt % x
    if "." in s and "e" not in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if float(s) == 0 else s


def fixed_format(t):
    """A reference tensor with a fixed number of decimals: a step of at most
    1e-11 times its largest magnitude, so each value is within 5e-12 of it
    relative to that magnitude (the spec's tolerance is 1e-10 so measured)."""
    top = float(t.abs().max())
    if top == 0:
        return "%.0f"
    return "%%.%df" % max(0, math.ceil(11 - math.log10(top)))


def floats(t):
    f = fixed_format(t)
    return [num(v, f) for v in t.reshape(-1).tolist()]


class Exact:
    """A tensor written with 3 decimals (an input, exactly representable so)."""

    def __init__(self, t):
        self.t = t

    def lua(self, writer, indent):
        flat = self.t.reshape(-1).tolist()
        for v in flat:  # the short decimal must be the tensor exactly
            assert float("%.3f" % v) == v, v
        shape = "{" + ", ".join(str(s) for s in self.t.shape) + "}"
        return "{shape = %s, data = {%s}}" % (shape, writer.sep.join(num(v, "%.3f") for v in flat))


WRITER = Writer(sep=",", floats=floats)


Q, K, V, R = rounded(B, H, L, D), rounded(B, H, L, D), rounded(B, H, L, D), rounded(B, H, L, D)


def attend(q, k, v, score=None, allowed=None, sink=None):
    """Softmax attention with a score rule, a visibility [B, H, Lq, Lk] and
    an optional sink logit per head [H]; a row that sees nothing gives 0."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if score is not None:
        s = score(s)
    s = torch.where(allowed, s, torch.zeros(()))
    m = torch.where(allowed, s, torch.full((), -math.inf)).amax(-1, keepdim=True)
    if sink is not None:
        m = torch.maximum(m, sink.view(1, -1, 1, 1).expand_as(m))
    m = torch.where(torch.isfinite(m), m, torch.zeros(())).detach()
    e = torch.where(allowed, torch.exp(s - m), torch.zeros(()))
    denom = e.sum(-1, keepdim=True)
    if sink is not None:
        denom = denom + torch.exp(sink.view(1, -1, 1, 1) - m)
    p = e / torch.where(denom > 0, denom, torch.ones(()))
    return p @ v


def case(name, attention, options=None, causal=False, Lq=L, kpm=None, inputs=None,
         table=None, score=None, mask=None, sink=False):
    """score(s, tbl) -> s'; mask(b, pos, j) -> bool [B, 1, Lq, Lk] from
    pos [1, 1, Lq, 1] and j [1, 1, 1, Lk] (0-based)."""
    q = Q[:, :, L - Lq:].clone().requires_grad_()
    k, v = K.clone().requires_grad_(), V.clone().requires_grad_()
    R_ = R[:, :, L - Lq:]
    tbl = table.clone().requires_grad_() if table is not None else None
    pos = (torch.arange(Lq) + (L - Lq)).view(1, 1, Lq, 1)
    j = torch.arange(L).view(1, 1, 1, L)
    allowed = torch.ones(B, H, Lq, L, dtype=torch.bool)
    if causal:
        allowed = allowed & (j <= pos)
    if kpm is not None:
        allowed = allowed & ~kpm.view(B, 1, 1, L)
    if mask is not None:
        allowed = allowed & mask(pos, j)
    out = attend(q, k, v, score=(lambda s: score(s, tbl)) if score else None, allowed=allowed,
                 sink=tbl if sink else None)
    assert not torch.isnan(out).any(), name
    (out * R_).sum().backward()
    for g in (q.grad, k.grad, v.grad):
        assert not torch.isnan(g).any(), name
    c = {"name": name, "attention": attention, "options": options or {}, "causal": causal, "Lq": Lq}
    if kpm is not None:
        c["key_padding_mask"] = kpm
    if inputs:
        c["variant_inputs"] = inputs
    if tbl is not None:
        c["table"] = Exact(table)
    # rows that see no key: hidden by the rules, or every score made -inf
    c["empty_rows"] = int(((~allowed).all(-1) | (out == 0).all(-1)).sum())
    c["out"] = out
    c["grad"] = {"q": q.grad, "k": k.grad, "v": v.grad}
    if tbl is not None:
        c["grad"]["table"] = tbl.grad
    return c


def docs(lengths_per_row):
    rows = []
    for lens in lengths_per_row:
        r = []
        for i, n in enumerate(lens):
            r += [i + 1] * n
        assert len(r) == L, (lens, len(r))
        rows.append(r)
    return torch.tensor(rows, dtype=torch.int64)


def same_doc(doc):
    def m(pos, j):
        dq = doc[:, pos.view(-1)].view(B, 1, -1, 1)
        dk = doc.view(B, 1, 1, L)
        return dq == dk
    return m


cases = []

cases.append(case("softcap_causal", "softcap", {"cap": 1.25}, causal=True,
                  score=lambda s, t: 1.25 * torch.tanh(s / 1.25)))

# packed rows; row 2 ends in 6 padding positions (their own document, all keys
# padded): those queries see nothing and give 0
doc = docs([[7, 19, 14], [25, 9, 6]])
kpm = torch.zeros(B, L, dtype=torch.bool)
kpm[1, L - 6:] = True
cases.append(case("document_padded", "document", kpm=kpm, inputs={"doc": doc}, mask=same_doc(doc)))

# a KV-cached step: the last 16 queries against all 40 keys, causal
doc2 = docs([[11, 5, 24], [30, 10]])
cases.append(case("document_cross_causal", "document", causal=True, Lq=16, inputs={"doc": doc2},
                  mask=same_doc(doc2)))

prefix = torch.tensor([13, 0], dtype=torch.int64)
cases.append(case("prefix_lm", "prefix_lm", inputs={"prefix": prefix},
                  mask=lambda pos, j: (j <= pos) | (j < prefix.view(B, 1, 1, 1))))

# causal, and key 1 of row 2 padded: that row's first query sees only the sink
kpm_s = torch.zeros(B, L, dtype=torch.bool)
kpm_s[1, 0] = True
cases.append(case("sinks_causal_padded", "sinks", causal=True, kpm=kpm_s,
                  table=rounded(H, std=1.5, mean=1.0), sink=True))

Kd = 9
def dist_bias(s, t):
    d = (torch.arange(L - s.shape[-2], L).view(-1, 1) - torch.arange(L).view(1, -1)).abs().clamp(max=Kd)
    return s + t[d].permute(2, 0, 1).unsqueeze(0)
# the last 16 queries: the distance is taken from their positions on the key axis
cases.append(case("example_lua_cross", "example_lua", {"max_distance": Kd}, Lq=16,
                  table=rounded(Kd + 1, H, std=0.5), score=dist_bias))

cases.append(case("sliding_sinks_causal", "sliding_sinks", {"window_left": 9, "window_right": 0, "sinks": 3},
                  causal=True, Lq=8, mask=lambda pos, j: ((pos - j <= 9) & (j - pos <= 0)) | (j < 3)))

# ties: the table's two rows are equal, so torch.maximum(t1, t2) gives each half
# the gradient and torch.clamp(t1, min=t2) gives t1 all of it and t2 none (the
# Lua variant "fixture_ties" is defined in attention_variant_fixtures_spec.lua)
tie = rounded(1, H, std=0.5).repeat(2, 1)


def ties(s, t):
    rel = (torch.arange(L).view(1, -1) - torch.arange(L - s.shape[-2], L).view(-1, 1)).to(s.dtype)  # j - p
    a, b = t[0].view(1, -1, 1, 1), t[1].view(1, -1, 1, 1)
    return s + torch.maximum(a, b) * rel * 0.1 + torch.clamp(a, min=b) * rel * 0.05


cases.append(case("ties", "fixture_ties", causal=True, table=tie, score=ties))

# FlexAttention's way to mask, a score of -inf: keys k <= q - 3 (1-based), so the
# first 3 rows see nothing and give 0 (ember's rule; the Lua twin "fixture_neginf"
# is defined in attention_variant_fixtures_spec.lua)
def neginf(s, t):
    rel = torch.arange(L).view(1, -1) - torch.arange(L - s.shape[-2], L).view(-1, 1)  # j - p
    return torch.where(rel <= -3, s, torch.full((), -math.inf))


cases.append(case("neginf_rows", "fixture_neginf", score=neginf))

# a 0-d learned table (a temperature, torch.nn.Parameter(torch.tensor(x))) in the
# score and as the sink of every head (the Lua twin "fixture_scalar" is defined in
# attention_variant_fixtures_spec.lua)
cases.append(case("scalar_table", "fixture_scalar", causal=True, table=torch.tensor(1.375),
                  score=lambda s, t: s * t + t * t, sink=True))

fixture = {"torch_version": torch.__version__, "B": B, "H": H, "L": L, "d": D,
           "inputs": {"q": Exact(Q), "k": Exact(K), "v": Exact(V), "grad_out": Exact(R)},
           "cases": cases}
path = os.path.join(HERE, "fixtures", "attention_flex.lua")
WRITER.write(path, "tests/gen_flex_fixtures.py", fixture)
print("wrote", path, os.path.getsize(path), "bytes")
