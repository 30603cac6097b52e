#!/usr/bin/python3
"""Writes tests/fixtures/attention_mha.lua: reference values of PyTorch's
nn.MultiheadAttention (batch_first, float64) for tests/lua/mha_parity_spec.lua.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 tests/gen_attention_fixtures.py

Each case stores the inputs, the projection weights under ember's names
(w_q, w_k, w_v [E, in], b_q, b_k, b_v [E], w_o [E, E], b_o [E]), the masks in
EMBER's semantics, the output, the per-head weights [B, H, Lq, Lk], and the
gradients of sum(out * R) with respect to query, key, value and every
projection weight.

Mask conversions (PyTorch -> ember):
  bool attn_mask: PyTorch True = masked, ember true = may attend -> negate;
  key_padding_mask: True = padding in both;
  causal: ember's causal=true is bottom-right aligned (query i sees key j iff
  j <= i + Lk - Lq); PyTorch gets that as an explicit bool mask.
  additive float masks are the same in both.
"""
import os

import torch

from fixture_writer import Writer

torch.manual_seed(20261129)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


def causal_allowed(lq, lk):
    i = torch.arange(lq).unsqueeze(1)
    j = torch.arange(lk).unsqueeze(0)
    return j <= i + (lk - lq)


def case(name, B, Lq, Lk, E, H, kdim=None, vdim=None, causal=False, key_padding=False,
         bool_mask=False, float_mask=False, mask3d=False, self_attn=False):
    kdim = kdim or E
    vdim = vdim or E
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True, kdim=kdim, vdim=vdim)
    with torch.no_grad():  # non-zero biases so their gradients and values are tested
        if mha.in_proj_bias is not None:
            mha.in_proj_bias.normal_(0, 0.1)
        mha.out_proj.bias.normal_(0, 0.1)
    query = torch.randn(B, Lq, E, requires_grad=True)
    if self_attn:
        key = value = query
    else:
        key = torch.randn(B, Lk, kdim, requires_grad=True)
        value = torch.randn(B, Lk, vdim, requires_grad=True)

    ember_masks = {}
    torch_mask = None
    allowed = torch.ones(Lq, Lk, dtype=torch.bool)
    if causal:
        allowed &= causal_allowed(Lq, Lk)
    if bool_mask:
        rnd = torch.rand(Lq, Lk) > 0.3
        rnd[:, -1] = True  # every row keeps one key
        allowed &= rnd
        ember_masks["attn_mask"] = rnd
    if causal or bool_mask:
        torch_mask = ~allowed
    kpm = None
    if key_padding:
        kpm = torch.zeros(B, Lk, dtype=torch.bool)
        kpm[0, Lk - 2:] = True
        kpm[-1, 1 if causal else 0] = True  # never a fully masked row: PyTorch gives NaN there
        ember_masks["key_padding_mask"] = kpm
    if float_mask:
        fm = torch.randn(B, H, Lq, Lk) if mask3d else torch.randn(Lq, Lk)
        if causal or bool_mask:
            fm = fm.masked_fill(~allowed, float("-inf"))
        ember_masks["attn_mask"] = fm
        torch_mask = fm.reshape(B * H, Lq, Lk) if mask3d else fm
    # ember expresses causal with the flag, the rest as masks above.

    out, weights = mha(query, key, value, key_padding_mask=kpm, attn_mask=torch_mask,
                       need_weights=True, average_attn_weights=False)
    assert not torch.isnan(out).any(), name + ": PyTorch produced NaN (a fully masked row?)"
    R = torch.randn_like(out)
    out.backward(R)

    if mha._qkv_same_embed_dim:
        wq, wk, wv = mha.in_proj_weight.chunk(3)
        gq, gk, gv = mha.in_proj_weight.grad.chunk(3)
    else:
        wq, wk, wv = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        gq, gk, gv = mha.q_proj_weight.grad, mha.k_proj_weight.grad, mha.v_proj_weight.grad
    bq, bk, bv = mha.in_proj_bias.chunk(3)
    gbq, gbk, gbv = mha.in_proj_bias.grad.chunk(3)
    c = {
        "name": name, "B": B, "Lq": Lq, "Lk": Lk, "E": E, "H": H, "kdim": kdim, "vdim": vdim,
        "causal": causal, "self_attn": self_attn,
        "query": query, "R": R,
        "state": {"w_q": wq, "w_k": wk, "w_v": wv, "b_q": bq, "b_k": bk, "b_v": bv,
                  "w_o": mha.out_proj.weight, "b_o": mha.out_proj.bias},
        "out": out, "weights": weights,
        "grad": {"query": query.grad, "w_q": gq, "w_k": gk, "w_v": gv, "b_q": gbq, "b_k": gbk,
                 "b_v": gbv, "w_o": mha.out_proj.weight.grad, "b_o": mha.out_proj.bias.grad},
        "masks": ember_masks,
    }
    if not self_attn:
        c["key"] = key
        c["value"] = value
        c["grad"]["key"] = key.grad
        c["grad"]["value"] = value.grad
    return c


cases = [
    case("self", 2, 5, 5, 8, 2, self_attn=True),
    case("self_causal", 2, 6, 6, 8, 2, causal=True, self_attn=True),
    case("self_key_padding", 2, 5, 5, 8, 4, key_padding=True, self_attn=True),
    case("self_additive_mask", 2, 5, 5, 8, 2, float_mask=True, self_attn=True),
    case("self_causal_padding_additive_4d", 2, 6, 6, 12, 3, causal=True, key_padding=True,
         float_mask=True, mask3d=True, self_attn=True),
    case("self_bool_mask", 1, 5, 5, 8, 2, bool_mask=True, self_attn=True),
    case("cross", 2, 3, 6, 8, 2),
    case("cross_kdim_vdim_padding", 2, 4, 7, 8, 2, kdim=6, vdim=5, key_padding=True),
    case("cross_causal_bottom_right", 2, 3, 6, 8, 2, causal=True),
    case("cross_causal_padding", 2, 4, 5, 8, 4, causal=True, key_padding=True),
]

path = os.path.join(HERE, "fixtures", "attention_mha.lua")
Writer().write(path, "tests/gen_attention_fixtures.py", {"torch_version": torch.__version__, "cases": cases})
print("wrote", path, os.path.getsize(path), "bytes")
