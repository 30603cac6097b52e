#!/usr/bin/python3
"""PyTorch models whose state dicts ember loads as they are (tests/lua/interop_spec.lua):

  tests/fixtures/interop.lua               inputs, float64 outputs and state dicts (PyTorch's names)
  tests/fixtures/interop_*.safetensors     the same state dicts as PyTorch files (F64, F32, BF16)

The models are what a user moving from PyTorch has: an embedding, an
nn.Transformer and a head inside an nn.Module (the Transformer is not the
top module, so every module on the way must map its own names), nn.Sequential
MLPs and CNNs (Conv2d, BatchNorm2d with running statistics and
num_batches_tracked after three training batches, LayerNorm), an LSTM and a
GRU in a module, and nn.MultiheadAttention alone (in_proj_weight, and
q_proj_weight/k_proj_weight/v_proj_weight when kdim and vdim differ).
Every model runs in float64 in eval mode; token ids are written 0-based, as
PyTorch took them (the spec adds 1).

The .safetensors files are written with fixture_writer.save_safetensors
(the standard library; PyTorch 1.13 here has no safetensors package).

Run with Debian's python3-torch: /usr/bin/python3 tests/gen_interop_fixtures.py
"""
import os
from collections import OrderedDict

import torch
import torch.nn as nn

from fixture_writer import Writer, save_safetensors, module_state as state

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
torch.manual_seed(20261206)
torch.set_default_dtype(torch.float64)

V, D = 11, 8


class Seq2Seq(nn.Module):
    """An embedding, nn.Transformer and a head: the Transformer one level down."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.transformer = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                                          dim_feedforward=16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, V)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1]).to(torch.float64)
        return self.head(self.transformer(self.emb(src), self.emb(tgt), tgt_mask=mask))


class Recurrent(nn.Module):
    """A two-layer bidirectional LSTM, then a GRU, then a Linear head."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(10, 3, batch_first=True)
        self.head = nn.Linear(3, 2)

    def forward(self, x):
        return self.head(self.gru(self.lstm(x)[0])[0])


class TVEncoderBlock(nn.Module):
    """torchvision.models.vision_transformer.EncoderBlock (0.14), its names and computation."""

    def __init__(self, num_heads, hidden_dim, mlp_dim):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads, dropout=0.0, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(hidden_dim, eps=1e-6)
        # MLPBlock: torchvision.ops.MLP's Sequential of Linear, GELU, Dropout, Linear, Dropout
        self.mlp = nn.Sequential(nn.Linear(hidden_dim, mlp_dim), nn.GELU(), nn.Dropout(0.0),
                                 nn.Linear(mlp_dim, hidden_dim), nn.Dropout(0.0))

    def forward(self, input):
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class TVEncoder(nn.Module):
    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential(OrderedDict(
            ("encoder_layer_%d" % i, TVEncoderBlock(num_heads, hidden_dim, mlp_dim)) for i in range(num_layers)))
        self.ln = nn.LayerNorm(hidden_dim, eps=1e-6)

    def forward(self, input):
        return self.ln(self.layers(self.dropout(input + self.pos_embedding)))


class TVVisionTransformer(nn.Module):
    """torchvision.models.VisionTransformer (0.14) with representation_size=None: the module
    names of its state dict and its computation, written out (no torchvision here)."""

    def __init__(self, image_size=8, patch_size=4, num_layers=2, num_heads=2, hidden_dim=8, mlp_dim=16,
                 num_classes=3):
        super().__init__()
        self.hidden_dim, self.patch_size = hidden_dim, patch_size
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
        self.encoder = TVEncoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim)
        self.heads = nn.Sequential(OrderedDict([("head", nn.Linear(hidden_dim, num_classes))]))

    def forward(self, x):
        n, _, h, w = x.shape
        x = self.conv_proj(x).reshape(n, self.hidden_dim, (h // self.patch_size) * (w // self.patch_size))
        x = x.permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])


def make_mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 3)).eval()


def make_cnn():
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(4 * 3 * 3, 5))


def make_mha(kdim=None, vdim=None):
    return nn.MultiheadAttention(D, 2, batch_first=True, kdim=kdim, vdim=vdim).eval()


def randomize(m):
    """Every parameter and float buffer nonzero, so a mixed-up name shows."""
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5)



def main():
    cases = {}

    # 1. nn.Transformer inside an nn.Module
    m = Seq2Seq().eval()
    randomize(m)
    src, tgt = torch.randint(0, V, (2, 6)), torch.randint(0, V, (2, 4))
    with torch.no_grad():
        out = m(src, tgt)
    sd = state(m)
    cases["seq2seq"] = {"keys": list(sd), "state": sd, "src": src, "tgt": tgt, "out": out}
    save_safetensors(os.path.join(FIX, "interop_seq2seq_f64.safetensors"), sd)
    save_safetensors(os.path.join(FIX, "interop_seq2seq_f32.safetensors"), {k: v.float() for k, v in sd.items()})

    # 2. nn.Sequential MLP with LayerNorm; its state also as bfloat16 and float16
    #    (model.half(): most half-precision checkpoints), and as torch.save's zip
    m = make_mlp()
    randomize(m)
    x = torch.randn(5, 4)
    sd = state(m)
    cases["mlp"] = {"keys": list(sd), "state": sd, "x": x}
    with torch.no_grad():
        cases["mlp"]["out"] = m(x)
        for tag, dt in [("bf16", torch.bfloat16), ("f16", torch.float16)]:
            low = {k: v.to(dt) for k, v in sd.items()}
            m_low = make_mlp()
            m_low.load_state_dict({k: v.to(torch.float64) for k, v in low.items()})
            cases["mlp"]["state_" + tag] = {k: v.to(torch.float64) for k, v in low.items()}
            cases["mlp"]["out_" + tag] = m_low(x)
            save_safetensors(os.path.join(FIX, "interop_mlp_%s.safetensors" % tag), low)
    torch.save({k: v.float() for k, v in sd.items()}, os.path.join(FIX, "interop_mlp.pt"))

    # 3. nn.Sequential CNN with BatchNorm2d's running statistics
    m = make_cnn()
    randomize(m)
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(4, 3, 6, 6) * 2 + 1)
    m.eval()
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        out = m(x)
    sd = state(m)
    cases["cnn"] = {"keys": list(sd), "state": sd, "x": x, "out": out}
    save_safetensors(os.path.join(FIX, "interop_cnn_f32.safetensors"),
                     {k: (v.float() if v.is_floating_point() else v) for k, v in sd.items()})

    # 4. LSTM and GRU in a module
    m = Recurrent().eval()
    randomize(m)
    x = torch.randn(2, 5, 4)
    with torch.no_grad():
        out = m(x)
    sd = state(m)
    cases["recurrent"] = {"keys": list(sd), "state": sd, "x": x, "out": out}

    # 5. nn.MultiheadAttention alone: in_proj_weight, and separate q/k/v weights (kdim, vdim)
    for name, kw, kv in [("mha", {}, (D, D)), ("mha_kdim", {"kdim": 6, "vdim": 5}, (6, 5))]:
        m = make_mha(**kw)
        randomize(m)
        q, k, v = torch.randn(2, 3, D), torch.randn(2, 7, kv[0]), torch.randn(2, 7, kv[1])
        with torch.no_grad():
            out = m(q, k, v, need_weights=False)[0]
        sd = state(m)
        cases[name] = {"keys": list(sd), "state": sd, "q": q, "k": k, "v": v, "out": out}

    # 6. a torchvision-shaped ViT (its names: encoder.layers.encoder_layer_0.ln_1, mlp.0, heads.head, ...)
    m = TVVisionTransformer().eval()
    randomize(m)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        out = m(x)
    sd = state(m)
    cases["vit"] = {"keys": list(sd), "state": sd, "x": x, "out": out}

    Writer(keys="auto").write(os.path.join(FIX, "interop.lua"), "tests/gen_interop_fixtures.py", cases)


if __name__ == "__main__":
    main()
