"""PyTorch peer of scripts/kjv_lm.lua: a decoder-only character LM on the
King James Bible (4 layers, d=128, 4 heads, rotary positions in attention (no
position table), context 128, AdamW 5e-3, batches of 32 windows, 5500 steps),
bits per character on the last 10%. As kjv_lm.lua, --model picks the layer:
  llama (the default, ember.models.Llama's): RMSNorm, grouped-query attention
        with --kv-heads 2 (K and V repeat_interleave'd to the 4 heads, as
        Hugging Face's repeat_kv), SwiGLU --swiglu 384, no biases, projections
        U(+-1/sqrt(fan_in)) (nn.Linear's default, kjv_lm.lua's --init uniform),
        embedding N(0, 1), untied head;
  transformer: pre-LayerNorm layers with biases, MLP 512 ReLU (--activation).
The layers are written out (torch 1.13 has neither rotary positions in its
TransformerEncoderLayer nor a Llama), with the same parameters and
initialisation as ember's.

    /usr/bin/python3 scripts/bench/torch_kjv_lm.py [--model llama] [--steps 5500] [--threads 2]
"""
import math
import re
import subprocess

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_common import Clock, parser, setup, warmup_cosine


def kjv_text():
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses = [m.group(1) for m in (re.match(r"^\S+\d+:\d+ (.*)$", l) for l in raw.split("\n")) if m]
    return "\n".join(verses) + "\n"


def rope(x, base=10000.0):
    """Rotary positions (rotate-half form, as ember's MultiHeadAttention) on x [B, H, L, dh]."""
    L, dh = x.shape[2], x.shape[3]
    half = dh // 2
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64) / dh)
    ang = torch.arange(L, dtype=torch.float64).unsqueeze(1) * inv.unsqueeze(0)
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


class DecoderLayer(nn.Module):
    """x + attn(norm1(x)), then x + ffn(norm2(x)); causal self-attention with rotary q and k."""
    def __init__(self, d, heads, ffn, activation):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        for lin in (self.q, self.k, self.v):  # as ember (and torch.nn.MultiheadAttention)
            nn.init.xavier_uniform_(lin.weight)
        nn.init.uniform_(self.o.weight, -1 / math.sqrt(d), 1 / math.sqrt(d))
        for lin in (self.q, self.k, self.v, self.o):
            nn.init.zeros_(lin.bias)
        self.ff1, self.ff2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, causal):
        B, L, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(B, L, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        q, k = rope(q), rope(k)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        a = torch.softmax(scores.masked_fill(causal, float("-inf")), -1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(B, L, d))
        return x + self.ff2(self.act(self.ff1(self.norm2(x))))


class RMSNorm(nn.Module):
    """x / rms(x) * weight, the rms taken in float32 (Hugging Face's LlamaRMSNorm)."""
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class LlamaLayer(nn.Module):
    """x + attn(rmsnorm(x)) with grouped-query heads, then x + down(silu(gate(h)) * up(h))."""
    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.dh = heads, kv_heads, d // heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(d), RMSNorm(d)

    def forward(self, x, causal):
        B, L, d = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, L, self.heads, self.dh).transpose(1, 2)
        k, v = (p(h).view(B, L, self.kv_heads, self.dh).transpose(1, 2) for p in (self.k_proj, self.v_proj))
        q, k = rope(q), rope(k)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        a = torch.softmax(scores.masked_fill(causal, float("-inf")), -1) @ v
        x = x + self.o_proj(a.transpose(1, 2).reshape(B, L, d))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class CharLM(nn.Module):
    def __init__(self, V, d=128, heads=4, layers=4, ffn=512, activation="relu"):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.layers = nn.ModuleList([DecoderLayer(d, heads, ffn, activation) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, V)

    def forward(self, ids):
        L = ids.shape[1]
        h = self.embed(ids)
        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        for layer in self.layers:
            h = layer(h, causal)
        return self.out(self.norm(h))


class LlamaLM(CharLM):
    """CharLM's forward over Llama's layers, final RMSNorm and untied head."""
    def __init__(self, V, d=128, heads=4, kv_heads=2, layers=4, ffn=384):
        nn.Module.__init__(self)
        self.embed = nn.Embedding(V, d)
        self.layers = nn.ModuleList([LlamaLayer(d, heads, kv_heads, ffn) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.out = nn.Linear(d, V, bias=False)


def bits_per_char(model, ids, L, max_windows=None):
    n = (len(ids) - 1) // L
    if max_windows:
        n = min(n, max_windows)
    model.eval()
    total = 0.0
    with torch.no_grad():
        for first in range(0, n, 64):
            starts = torch.arange(first, min(n, first + 64)) * L
            w = ids[starts.unsqueeze(1) + torch.arange(L + 1)]
            logits = model(w[:, :L])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1), reduction="sum").item()
    model.train()
    return total / (n * L) / math.log(2)


def main():
    p = parser("PyTorch peer of scripts/kjv_lm.lua", epochs=1, lr=5e-3, batch=32)
    p.add_argument("--steps", type=int, default=5500)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--model", choices=["llama", "transformer"], default="llama")
    p.add_argument("--kv-heads", "--kv_heads", type=int, default=2)
    p.add_argument("--swiglu", type=int, default=384)
    p.add_argument("--activation", choices=["relu", "gelu"], default="relu")
    p.add_argument("--eval-every", "--eval_every", type=int, default=500)
    args = p.parse_args()
    setup(args)
    text = kjv_text()
    cut = int(len(text) * 0.9)
    chars = sorted(set(text[:cut]))
    stoi = {c: i + 4 for i, c in enumerate(chars)}
    train = torch.tensor([stoi[c] for c in text[:cut]])
    test = torch.tensor([stoi.get(c, 1) for c in text[cut:]])
    L, B = args.context, args.batch
    layers = 4
    if args.smoke:
        L, B, layers = 64, 16, 2
    if args.model == "llama":
        model = LlamaLM(len(chars) + 4, kv_heads=args.kv_heads, layers=layers, ffn=args.swiglu)
    else:
        model = CharLM(len(chars) + 4, layers=layers, activation=args.activation)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    total = 25 if args.smoke else (args.max_steps or args.steps)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.99))
    sched = warmup_cosine(opt, min(200, total // 5), total, min_ratio=0.1)
    clock = Clock()
    for step in range(1, total + 1):
        with clock:
            starts = torch.randint(0, len(train) - L - 1, (B,))
            w = train[starts.unsqueeze(1) + torch.arange(L + 1)]
            logits = model(w[:, :L])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        if clock.over(args.time_limit):
            break
        if step % args.eval_every == 0 and step < total:
            print(f"step {step}: test {bits_per_char(model, test, L):.3f} bpc  train time {clock.total:.1f} s "
                  f"({step * B * L / clock.total:.0f} char/s)", flush=True)
    bpc = bits_per_char(model, test, L, 8 if args.smoke else None)
    print(f"RESULT torch_kjv_lm test_bpc={bpc:.3f} train_s={clock.total:.3f} steps={step}")


if __name__ == "__main__":
    main()
