#!/usr/bin/python3
"""A torch training checkpoint of a tiny Hugging Face-layout Llama, for tests/lua/probe_finetune_spec.lua:

  tests/fixtures/probe_finetune_ckpt.pt  torch.save({"model": state_dict, "optimizer": AdamW's state_dict,
                                         "scheduler": StepLR's state_dict, "step": 3, "config": {...}})
                                         after three AdamW steps in float64
  tests/fixtures/probe_finetune.lua      the config, the batches, and what PyTorch 1.13 computes when it
                                         loads that checkpoint and goes on for two more steps: each step's
                                         loss and lr, and the state dict after them

The model is transformers' LlamaForCausalLM written out here (no transformers on this machine): RMSNorm,
rotate-half RoPE, grouped-query attention (repeat_kv), the SiLU-gated MLP, under Hugging Face's names.

Run with Debian's python3-torch: /usr/bin/python3 tests/gen_probe_finetune.py
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from fixture_writer import Writer

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)

CONFIG = {"vocab_size": 29, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
          "tie_word_embeddings": False}


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.kv = c["num_attention_heads"], c["num_key_value_heads"]
        self.dh = c["hidden_size"] // self.h
        d = c["hidden_size"]
        self.q_proj = nn.Linear(d, self.h * self.dh, bias=False)
        self.k_proj = nn.Linear(d, self.kv * self.dh, bias=False)
        self.v_proj = nn.Linear(d, self.kv * self.dh, bias=False)
        self.o_proj = nn.Linear(self.h * self.dh, d, bias=False)
        self.theta = c["rope_theta"]

    def forward(self, x):
        B, L, _ = x.shape
        q = self.q_proj(x).view(B, L, self.h, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(B, L, self.kv, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.kv, self.dh).transpose(1, 2)
        inv = 1.0 / (self.theta ** (torch.arange(0, self.dh, 2, dtype=torch.int64).double() / self.dh))
        freqs = torch.outer(torch.arange(L).double(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, self.h * self.dh)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, i = c["hidden_size"], c["intermediate_size"]
        self.gate_proj, self.up_proj = nn.Linear(d, i, bias=False), nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn, self.mlp = Attention(c), MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, h):
        h = h + self.self_attn(self.input_layernorm(h))
        return h + self.mlp(self.post_attention_layernorm(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.model = Model(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0, 0.2)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def lm_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def main():
    c = CONFIG
    model = LlamaForCausalLM(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    batches = [torch.randint(0, c["vocab_size"], (3, 7)) for _ in range(5)]
    for ids in batches[:3]:
        opt.zero_grad()
        lm_loss(model(ids), ids).backward()
        opt.step()
        sched.step()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "step": 3, "config": c},
               os.path.join(FIX, "probe_finetune_ckpt.pt"))
    losses, lrs = [], []
    for ids in batches[3:]:
        opt.zero_grad()
        loss = lm_loss(model(ids), ids)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        lrs.append(opt.param_groups[0]["lr"])
    out = {
        "config": c,
        "batches": [ids + 1 for ids in batches],  # ember's ids are 1-based
        "losses": losses,
        "lrs": lrs,  # after each step's sched.step()
        "final": dict(model.state_dict()),
    }
    Writer(keys="quoted").write(os.path.join(FIX, "probe_finetune.lua"), "tests/gen_probe_finetune.py", out)


if __name__ == "__main__":
    main()
