"""PyTorch 1.13 reference values for tests/lua/nn_transformer_torch_spec.lua:
a user porting torch.nn.Transformer / torch.nn.MultiheadAttention code.
Each case is a torch module in float64 (its state dict under torch's names,
every parameter drawn again so that zero-started biases count), the inputs,
the masks, the output and the gradients of sum(out * R) for the inputs and
for every parameter (torch's names):

  tr_post_relu_seqfirst   nn.Transformer(batch_first=False, norm_first=False,
                          relu): float src_mask and memory_mask with -inf,
                          generate_square_subsequent_mask as tgt_mask, bool
                          key padding masks for src, tgt and memory
  tr_pre_gelu_bool        nn.Transformer(batch_first=True, norm_first=True,
                          gelu, layer_norm_eps=1e-3): bool src/tgt/memory
                          masks (true = masked)
  tr_callable_floatkpm    nn.Transformer(activation=torch.tanh): float key
                          padding masks (added to the scores)
  tr_unbatched            nn.Transformer on [L, E] inputs, [L] key padding
  mha_kdim_vdim_3d        MultiheadAttention(kdim, vdim), L != S, 3-d float
                          attn_mask [B * H, L, S], per-head weights
  mha_bias_kv_zero_attn   add_bias_kv, add_zero_attn, bias=False,
                          batch_first, bool attn_mask and key padding
  mha_nobias_avg          bias=False, averaged weights, L != S
  train_adam              nn.Transformer(dropout=0), 5 Adam steps on a fixed
                          batch: the parameters after (torch's names)

    /usr/bin/python3 tests/gen_nn_transformer_torch_fixtures.py   # writes tests/fixtures/nn_transformer_torch.lua
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer, randomized, module_state as state  # noqa: E402

torch.manual_seed(125)
torch.set_default_dtype(torch.float64)
D, H, FF, B, LS, LT = 8, 2, 12, 2, 5, 4




def finish(c, m, inputs, out):
    R = torch.randn(out.shape)
    (out * R).sum().backward()
    c.update({"state": c.get("state") or None, "inputs": [x.detach() for x in inputs], "out": out.detach(), "R": R,
              "grads": [x.grad.detach() for x in inputs],
              "param_grads": {k: p.grad.detach().clone() for k, p in m.named_parameters()}})
    return c


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


def transformer_cases():
    out = []
    # 1. post-norm, relu, sequence-first, float masks and bool key padding
    m = randomized(torch.nn.Transformer(D, H, 2, 2, FF, 0.0))
    st = state(m)
    src, tgt = leaf(LS, B, D), leaf(LT, B, D)
    sm = torch.randn(LS, LS)
    sm[0, 3], sm[2, 1] = float("-inf"), float("-inf")
    mm = torch.randn(LT, LS)
    mm[1, 0] = float("-inf")
    tm = torch.nn.Transformer.generate_square_subsequent_mask(LT)
    skp = torch.tensor([[False] * LS, [False] * (LS - 2) + [True] * 2])
    tkp = torch.tensor([[False] * (LT - 1) + [True], [False] * LT])
    mkp = skp.clone()
    y = m(src, tgt, src_mask=sm, tgt_mask=tm, memory_mask=mm, src_key_padding_mask=skp, tgt_key_padding_mask=tkp,
          memory_key_padding_mask=mkp)
    out.append(finish({"name": "tr_post_relu_seqfirst", "state": st,
                       "config": {"num_encoder_layers": 2, "num_decoder_layers": 2, "activation": "relu",
                                  "batch_first": False, "norm_first": False, "layer_norm_eps": 1e-5},
                       "masks": {"src_mask": sm, "tgt_mask": tm, "memory_mask": mm, "src_key_padding_mask": skp,
                                 "tgt_key_padding_mask": tkp, "memory_key_padding_mask": mkp}}, m, [src, tgt], y))

    # 2. pre-norm, gelu, batch first, eps, bool masks (true = masked)
    m = randomized(torch.nn.Transformer(D, H, 1, 2, FF, 0.0, activation="gelu", layer_norm_eps=1e-3,
                                        batch_first=True, norm_first=True))
    st = state(m)
    src, tgt = leaf(B, LS, D), leaf(B, LT, D)
    sm = torch.rand(LS, LS) < 0.3
    sm.fill_diagonal_(False)
    tm = torch.triu(torch.ones(LT, LT, dtype=torch.bool), 1)
    mm = torch.zeros(LT, LS, dtype=torch.bool)
    mm[0, 1:3] = True
    mm[3, 0] = True
    y = m(src, tgt, src_mask=sm, tgt_mask=tm, memory_mask=mm)
    out.append(finish({"name": "tr_pre_gelu_bool", "state": st,
                       "config": {"num_encoder_layers": 1, "num_decoder_layers": 2, "activation": "gelu",
                                  "batch_first": True, "norm_first": True, "layer_norm_eps": 1e-3},
                       "masks": {"src_mask": sm, "tgt_mask": tm, "memory_mask": mm}}, m, [src, tgt], y))

    # 3. a callable activation, float key padding masks (1.13 adds them to the scores)
    m = randomized(torch.nn.Transformer(D, H, 1, 1, FF, 0.0, activation=torch.tanh))
    st = state(m)
    src, tgt = leaf(LS, B, D), leaf(LT, B, D)
    skp = torch.zeros(B, LS)
    skp[1, 4], skp[0, 2] = float("-inf"), -0.5
    tkp = torch.zeros(B, LT)
    tkp[0, 1] = 0.75
    mkp = torch.zeros(B, LS)
    mkp[1, 0] = -1.25
    y = m(src, tgt, src_key_padding_mask=skp, tgt_key_padding_mask=tkp, memory_key_padding_mask=mkp)
    out.append(finish({"name": "tr_callable_floatkpm", "state": st,
                       "config": {"num_encoder_layers": 1, "num_decoder_layers": 1, "activation": "tanh",
                                  "batch_first": False, "norm_first": False, "layer_norm_eps": 1e-5},
                       "masks": {"src_key_padding_mask": skp, "tgt_key_padding_mask": tkp,
                                 "memory_key_padding_mask": mkp}}, m, [src, tgt], y))

    # 4. unbatched [L, E], [L] key padding, a causal tgt_mask
    m = randomized(torch.nn.Transformer(D, H, 1, 1, FF, 0.0))
    st = state(m)
    src, tgt = leaf(LS, D), leaf(LT, D)
    skp = torch.tensor([False, False, False, True, True])
    tm = torch.nn.Transformer.generate_square_subsequent_mask(LT)
    y = m(src, tgt, tgt_mask=tm, src_key_padding_mask=skp, memory_key_padding_mask=skp)
    out.append(finish({"name": "tr_unbatched", "state": st,
                       "config": {"num_encoder_layers": 1, "num_decoder_layers": 1, "activation": "relu",
                                  "batch_first": False, "norm_first": False, "layer_norm_eps": 1e-5},
                       "masks": {"tgt_mask": tm, "src_key_padding_mask": skp, "memory_key_padding_mask": skp}},
                      m, [src, tgt], y))
    return out


def mha_cases():
    out = []
    L, S, KD, VD = 3, 5, 6, 4
    # 5. kdim / vdim, L != S, 3-d float attn_mask, per-head weights, sequence-first
    m = randomized(torch.nn.MultiheadAttention(D, H, kdim=KD, vdim=VD))
    st = state(m)
    q, k, v = leaf(L, B, D), leaf(S, B, KD), leaf(S, B, VD)
    am = torch.randn(B * H, L, S)
    am[1, 2, 0] = float("-inf")
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[0, 4] = True
    y, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
    c = finish({"name": "mha_kdim_vdim_3d", "state": st, "opts": {"kdim": KD, "vdim": VD, "batch_first": False},
                "call": {"need_weights": True, "average_attn_weights": False},
                "masks": {"attn_mask": am, "key_padding_mask": kpm}, "weights": w.detach()}, m, [q, k, v], y)
    out.append(c)

    # 6. add_bias_kv, add_zero_attn, bias=False, batch_first, bool masks
    m = randomized(torch.nn.MultiheadAttention(D, H, bias=False, add_bias_kv=True, add_zero_attn=True,
                                               batch_first=True))
    st = state(m)
    q, kv = leaf(B, L, D), leaf(B, S, D)
    am = torch.zeros(L, S, dtype=torch.bool)
    am[0, 0], am[2, 3] = True, True
    kpm = torch.zeros(B, S, dtype=torch.bool)
    kpm[1, 1:] = True
    y, w = m(q, kv, kv, key_padding_mask=kpm, attn_mask=am)
    out.append(finish({"name": "mha_bias_kv_zero_attn", "state": st,
                       "opts": {"bias": False, "add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
                       "call": {"need_weights": True, "average_attn_weights": True},
                       "masks": {"attn_mask": am, "key_padding_mask": kpm}, "weights": w.detach()}, m, [q, kv], y))

    # 7. bias=False alone, averaged weights, L != S
    m = randomized(torch.nn.MultiheadAttention(D, H, bias=False))
    st = state(m)
    q, kv = leaf(L, B, D), leaf(S, B, D)
    y, w = m(q, kv, kv)
    out.append(finish({"name": "mha_nobias_avg", "state": st, "opts": {"bias": False, "batch_first": False},
                       "call": {"need_weights": True, "average_attn_weights": True}, "masks": {},
                       "weights": w.detach()}, m, [q, kv], y))
    return out


def train_case():
    m = randomized(torch.nn.Transformer(D, H, 1, 1, FF, 0.0, batch_first=True))
    st = state(m)
    src, tgt, target = torch.randn(B, LS, D), torch.randn(B, LT, D), torch.randn(B, LT, D)
    tm = torch.nn.Transformer.generate_square_subsequent_mask(LT)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = ((m(src, tgt, tgt_mask=tm) - target) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"name": "train_adam", "state": st, "src": src, "tgt": tgt, "target": target, "lr": 1e-2,
            "losses": losses, "after": state(m)}


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn_transformer_torch.lua")
    Writer(keys="auto").write(path, "tests/gen_nn_transformer_torch_fixtures.py",
                              {"transformer": transformer_cases(), "mha": mha_cases(), "train": train_case()})
