"""PyTorch 1.13 reference values for tests/lua/attention_torch_call_spec.lua:
torch.nn.MultiheadAttention and the Transformer layers called as PyTorch
code calls them (float64), for the forms a porting user writes that ember
once refused or computed otherwise:

  mha_average        MultiheadAttention(batch_first=True) weights averaged over
                     the heads (ember's nn.MultiHeadAttention with
                     average_attn_weights = true)
  mha_float_kpm      a float key_padding_mask (added to the scores),
                     batch_first=False (nn.MultiheadAttention)
  enc_3d_mask        TransformerEncoderLayer(batch_first=False) with a float
                     src_mask [B * nhead, L, L] and a bool src_key_padding_mask
  dec_3d_masks       TransformerDecoderLayer(batch_first=True) with float
                     tgt_mask [B * nhead, T, T] and memory_mask [B * nhead, T, S]
  dec_plain          TransformerDecoderLayer without masks (PyTorch's
                     tgt_is_causal = False: not causal)
  dec_causal         TransformerDecoderLayer with the square subsequent mask
                     (tgt_is_causal = True)

Each case: the state dict (torch's names), the inputs, the output, the
weights (when returned) and the gradients of sum(out * R) for the inputs.

    /usr/bin/python3 tests/gen_attention_torch_call_mha_fixtures.py   # writes tests/fixtures/attention_torch_call_mha.lua
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer, randomized, module_state as state  # noqa: E402

torch.manual_seed(83)
torch.set_default_dtype(torch.float64)
E, H, B, L, S = 8, 2, 2, 3, 4




def finish(name, m, inputs, out, weights=None, extra=None):
    R = torch.randn(out.shape)
    (out * R).sum().backward()
    c = {"name": name, "state": state(m), "inputs": [x.detach() for x in inputs], "out": out.detach(), "R": R,
         "grads": [x.grad.detach() for x in inputs]}
    if weights is not None:
        c["weights"] = weights.detach()
    c.update(extra or {})
    return c


def cases():
    out = []
    # 1. averaged weights, batch first, cross-attention
    m = randomized(torch.nn.MultiheadAttention(E, H, batch_first=True))
    q, kv = torch.randn(B, L, E, requires_grad=True), torch.randn(B, S, E, requires_grad=True)
    y, w = m(q, kv, kv, need_weights=True, average_attn_weights=True)
    out.append(finish("mha_average", m, [q, kv], y, w))

    # 2. float key_padding_mask and bool attn_mask, [L, B, E]
    m = randomized(torch.nn.MultiheadAttention(E, H))
    q, kv = torch.randn(L, B, E, requires_grad=True), torch.randn(S, B, E, requires_grad=True)
    kpm = torch.zeros(B, S)
    kpm[0, 3] = float("-inf")
    kpm[1, 0] = -1.5
    kpm[1, 2] = 0.75
    # (1.13 joins a float key_padding_mask to a bool attn_mask by logical_or and
    # cannot join it to a float one; 2.x adds it in both: the spec checks those)
    y, w = m(q, kv, kv, key_padding_mask=kpm)
    out.append(finish("mha_float_kpm", m, [q, kv], y, w, {"key_padding_mask": kpm}))

    # 3. encoder layer, [L, B, E], 3-d float src_mask
    enc = randomized(torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, dropout=0.0))
    x = torch.randn(L, B, E, requires_grad=True)
    sm = torch.randn(B * H, L, L)
    pad = torch.zeros(B, L, dtype=torch.bool)
    pad[1, 2] = True
    y = enc(x, src_mask=sm, src_key_padding_mask=pad)
    out.append(finish("enc_3d_mask", enc, [x], y, None, {"src_mask": sm, "src_key_padding_mask": pad}))

    # 4-6. decoder layer, batch first
    dec = randomized(torch.nn.TransformerDecoderLayer(E, H, dim_feedforward=16, dropout=0.0, batch_first=True))
    t, mem = torch.randn(B, L, E, requires_grad=True), torch.randn(B, S, E, requires_grad=True)
    tm, mm = torch.randn(B * H, L, L), torch.randn(B * H, L, S)
    y = dec(t, mem, tgt_mask=tm, memory_mask=mm)
    out.append(finish("dec_3d_masks", dec, [t, mem], y, None, {"tgt_mask": tm, "memory_mask": mm}))
    t, mem = t.detach().clone().requires_grad_(), mem.detach().clone().requires_grad_()
    y = dec(t, mem)
    out.append(finish("dec_plain", dec, [t, mem], y))
    t, mem = t.detach().clone().requires_grad_(), mem.detach().clone().requires_grad_()
    y = dec(t, mem, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(L))
    out.append(finish("dec_causal", dec, [t, mem], y))
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "attention_torch_call_mha.lua")
    Writer(keys="auto").write(path, "tests/gen_attention_torch_call_mha_fixtures.py", {"cases": cases()})
