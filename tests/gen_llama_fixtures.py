#!/usr/bin/python3
"""Writes the fixtures of tests/lua/models_spec.lua (ember.models.Llama):

  tests/fixtures/llama_tiny.safetensors       weights, untied lm_head
  tests/fixtures/llama_tiny_tied.safetensors  weights, tied embeddings (no lm_head.weight)
  tests/fixtures/llama_tiny.lua               configs, input ids, logits, greedy continuations

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_llama_fixtures.py

The reference is a minimal PyTorch Llama written here (not Hugging Face's
code, which PyTorch 1.13's environment lacks) with Hugging Face's
LlamaForCausalLM state-dict names and conventions: pre-norm RMSNorm
(x * rsqrt(mean(x^2) + eps) * weight), RoPE in the "rotate_half" form
(the head dim's first half paired with its second half, inv_freq =
theta^(-2i/d)), grouped-query attention with k/v heads repeated by
repeat_interleave (Hugging Face's repeat_kv), causal softmax attention
scaled by 1/sqrt(head_dim), the SwiGLU MLP down(silu(gate(x)) * up(x)), no
biases, a final RMSNorm and lm_head (or the embedding when tied).

Weights are random float32 (scaled so that logits spread, norms not all
ones) and written with fixture_writer.save_safetensors (no safetensors
package needed). The reference runs in float64 on those float32 weights;
ids in the .lua file are ember's, 1-based (Hugging Face's id + 1). The
greedy continuation's smallest top-1/top-2 logit gap is recorded, so the
spec can check that its float32 tolerance is far below it.
"""
import math
import os

import torch

from fixture_writer import Writer, save_safetensors

torch.manual_seed(20261203)
HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")

CONFIGS = {
    "untied": dict(vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=1000.0,
                   tie_word_embeddings=False),
    "tied": dict(vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                 num_attention_heads=4, num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=10000.0,
                 tie_word_embeddings=True),
}
FILES = {"untied": "llama_tiny.safetensors", "tied": "llama_tiny_tied.safetensors"}


def make_weights(c):
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = H // nh
    w = {}

    def lin(o, i):
        return torch.randn(o, i) * (1.0 / math.sqrt(i))

    w["model.embed_tokens.weight"] = torch.randn(V, H)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        w[p + "self_attn.q_proj.weight"] = lin(nh * hd, H) * 2.0  # sharper attention
        w[p + "self_attn.k_proj.weight"] = lin(nkv * hd, H) * 2.0
        w[p + "self_attn.v_proj.weight"] = lin(nkv * hd, H)
        w[p + "self_attn.o_proj.weight"] = lin(H, nh * hd)
        w[p + "mlp.gate_proj.weight"] = lin(I, H)
        w[p + "mlp.up_proj.weight"] = lin(I, H)
        w[p + "mlp.down_proj.weight"] = lin(H, I)
        w[p + "input_layernorm.weight"] = 1 + 0.2 * torch.randn(H)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.2 * torch.randn(H)
    w["model.norm.weight"] = 1 + 0.2 * torch.randn(H)
    if not c["tie_word_embeddings"]:
        w["lm_head.weight"] = lin(V, H) * 3.0
    return {k: v.float().contiguous() for k, v in w.items()}


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(x, theta):
    # x [B, h, L, d]; positions 0..L-1
    L, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.outer(torch.arange(L, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def forward(w, c, ids):
    """ids 0-based [B, L] -> logits [B, L, V], float64."""
    W = {k: v.double() for k, v in w.items()}
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, eps = H // nh, c["rms_norm_eps"]
    B, L = ids.shape
    h = W["model.embed_tokens.weight"][ids]
    mask = torch.full((L, L), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        x = rms_norm(h, W[p + "input_layernorm.weight"], eps)
        q = (x @ W[p + "self_attn.q_proj.weight"].T).view(B, L, nh, hd).transpose(1, 2)
        k = (x @ W[p + "self_attn.k_proj.weight"].T).view(B, L, nkv, hd).transpose(1, 2)
        v = (x @ W[p + "self_attn.v_proj.weight"].T).view(B, L, nkv, hd).transpose(1, 2)
        q, k = rope(q, c["rope_theta"]), rope(k, c["rope_theta"])
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd) + mask
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, H)
        h = h + o @ W[p + "self_attn.o_proj.weight"].T
        x = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(x @ W[p + "mlp.gate_proj.weight"].T)
        u = x @ W[p + "mlp.up_proj.weight"].T
        h = h + (g * u) @ W[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if c["tie_word_embeddings"] else W["lm_head.weight"]
    return h @ head.T


def greedy(w, c, ids, n):
    """n greedy steps (full recompute); returns ids [B, L + n] and the smallest top-1/top-2 gap."""
    gap = float("inf")
    for _ in range(n):
        last = forward(w, c, ids)[:, -1]
        top = last.topk(2, dim=-1).values
        gap = min(gap, float((top[:, 0] - top[:, 1]).min()))
        ids = torch.cat([ids, last.argmax(-1, keepdim=True)], dim=1)
    return ids, gap


def main():
    out = {"torch_version": torch.__version__.split("+")[0], "new_tokens": 8}
    for name, c in CONFIGS.items():
        w = make_weights(c)
        save_safetensors(os.path.join(FIX, FILES[name]), w)
        ids = torch.randint(0, c["vocab_size"], (2, 7))
        logits = forward(w, c, ids)
        gen, gap = greedy(w, c, ids, out["new_tokens"])
        out[name] = {
            "file": "tests/fixtures/" + FILES[name],
            "config": c,
            "ids": ids + 1,
            "logits": logits,
            "generated": gen + 1,
            "min_greedy_gap": gap,
        }
        print(name, "min greedy top-1/top-2 gap %.3g" % gap, "logit range %.3g" % float(logits.abs().max()))
    Writer().write(os.path.join(FIX, "llama_tiny.lua"), "tests/gen_llama_fixtures.py", out, out["torch_version"])


if __name__ == "__main__":
    main()
