#!/usr/bin/python3
"""Writes the fixtures of tests/lua/llama_family_spec.lua: Hugging Face
model folders of the Llama family's variants, as ember.models.Llama's
from_pretrained reads them.

  tests/fixtures/llama_family/<case>/config.json, model.safetensors
  tests/fixtures/llama_family.lua   per case: input ids, logits, greedy continuation

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_llama_family.py

The reference is a minimal PyTorch decoder written here (transformers is
not installed next to PyTorch 1.13), with the semantics of transformers'
modeling code for each variant:

  llama    LlamaAttention: q, k, v and o_proj with bias when attention_bias;
           config.rope_scaling as modeling_rope_utils.py computes it:
           "linear" (inv_freq / factor), "dynamic" (NTK: theta rescaled by
           (factor * n / max_position_embeddings - (factor - 1))^(d / (d - 2))
           once the call's length n passes max_position_embeddings; a cached
           key keeps the rotation of the call that made it, as transformers'
           cache), "llama3" (per wavelength band) and "yarn" (ramp between
           interpolated and extrapolated frequencies, cos/sin times the
           attention factor 0.1 ln(factor) + 1); the older spelling "type"
  qwen2    Qwen2Attention: q, k, v with bias, o_proj without
  qwen3    Qwen3Attention: head_dim apart from hidden_size / heads
           (q_proj [heads * head_dim, hidden]), q_norm / k_norm (an RMSNorm
           over head_dim on each head of q and k, before RoPE)
  mistral  MistralAttention with sliding_window W: query i sees keys j with
           i - W < j <= i (transformers' sliding_window_overlay)

and what they share: pre-norm RMSNorm, rotate_half RoPE (positions from 0),
grouped-query attention (repeat_interleave, Hugging Face's repeat_kv),
softmax attention scaled by 1/sqrt(head_dim), the SwiGLU MLP, a final
RMSNorm and lm_head (the embedding when tie_word_embeddings).

The weights are random float32; the reference runs in float64 on them
(RoPE's frequencies too; transformers computes inv_freq in float32). The
greedy continuation runs with a KV cache as transformers' generate does
(one token a call), and its smallest top-1/top-2 logit gap is recorded.
Ids in the .lua file are ember's, 1-based (Hugging Face's id + 1).
"""
import json
import math
import os

import torch

from fixture_writer import Writer, save_safetensors

torch.manual_seed(20261207)
HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")

BASE = dict(vocab_size=53, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, rms_norm_eps=1e-5, hidden_act="silu", initializer_range=0.02,
            bos_token_id=0, transformers_version="4.46.0", torch_dtype="float32", use_cache=True)

# name -> config.json's keys over BASE, as the Hub's files of each family spell them
CASES = {
    # Llama 3.1/3.2: llama3 rope_scaling, tied embeddings (3.2 1B), head_dim written out
    "llama31": dict(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=False, mlp_bias=False,
                    attention_dropout=0.0, pretraining_tp=1, head_dim=8, max_position_embeddings=4096,
                    rope_theta=500000.0, tie_word_embeddings=True,
                    rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                      original_max_position_embeddings=512, rope_type="llama3")),
    # an older config: linear scaling spelt "type"; Llama's attention_bias (q, k, v and o)
    "llama_linear_bias": dict(architectures=["LlamaForCausalLM"], model_type="llama", attention_bias=True,
                              max_position_embeddings=64, rope_theta=10000.0, tie_word_embeddings=False,
                              rope_scaling=dict(type="linear", factor=2.0)),
    # dynamic NTK past max_position_embeddings (the prompt is longer already)
    "llama_dynamic": dict(architectures=["LlamaForCausalLM"], model_type="llama", max_position_embeddings=5,
                          rope_theta=10000.0, tie_word_embeddings=False,
                          rope_scaling=dict(rope_type="dynamic", factor=2.0)),
    "llama_yarn": dict(architectures=["LlamaForCausalLM"], model_type="llama", max_position_embeddings=64,
                       rope_theta=10000.0, tie_word_embeddings=False,
                       rope_scaling=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16)),
    # Qwen2.5: q, k, v biases, sliding window off (as the released configs)
    "qwen2": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", max_position_embeddings=128,
                  max_window_layers=2, use_sliding_window=False, sliding_window=128, rope_theta=1000000.0,
                  tie_word_embeddings=True, rope_scaling=None, attention_dropout=0.0),
    # Qwen3: head_dim 12 (heads * head_dim = 48 != hidden_size 32), q_norm / k_norm
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=12, attention_bias=False,
                  max_position_embeddings=128, max_window_layers=2, use_sliding_window=False, sliding_window=None,
                  rope_theta=1000000.0, tie_word_embeddings=False, rope_scaling=None, attention_dropout=0.0),
    # Qwen2 with use_sliding_window: layers from max_window_layers on slide (here the second)
    "qwen2_sliding": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", max_position_embeddings=128,
                          max_window_layers=1, use_sliding_window=True, sliding_window=3, rope_theta=10000.0,
                          tie_word_embeddings=False),
    # Mistral 7B v0.1: a sliding window shorter than the sequences
    "mistral": dict(architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=4,
                    max_position_embeddings=128, rope_theta=10000.0, tie_word_embeddings=False,
                    attention_dropout=0.0),
}


def cfg_of(name):
    c = dict(BASE)
    c.update(CASES[name])
    return c


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def make_weights(c):
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], head_dim(c)
    mt = c["model_type"]
    qkv_bias = mt == "qwen2" or (mt in ("llama", "qwen3") and c.get("attention_bias", False))
    o_bias = mt in ("llama", "qwen3") and c.get("attention_bias", False)
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
        if qkv_bias:
            w[p + "self_attn.q_proj.bias"] = 0.5 * torch.randn(nh * hd)
            w[p + "self_attn.k_proj.bias"] = 0.5 * torch.randn(nkv * hd)
            w[p + "self_attn.v_proj.bias"] = 0.5 * torch.randn(nkv * hd)
        if o_bias:
            w[p + "self_attn.o_proj.bias"] = 0.5 * torch.randn(H)
        if mt == "qwen3":
            w[p + "self_attn.q_norm.weight"] = 1 + 0.3 * torch.randn(hd)
            w[p + "self_attn.k_norm.weight"] = 1 + 0.3 * torch.randn(hd)
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


def rope_parameters(c, seq_len):
    """(inv_freq [d/2], attention_factor) for a call whose positions end at seq_len - 1 (modeling_rope_utils.py)."""
    d, base = head_dim(c), c["rope_theta"]
    rs = c.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    ar = torch.arange(0, d, 2, dtype=torch.float64)
    inv = 1.0 / (base ** (ar / d))
    if kind == "default":
        return inv, 1.0
    factor = rs["factor"]
    if kind == "linear":
        return inv / factor, 1.0
    if kind == "dynamic":
        mp = c["max_position_embeddings"]
        n = seq_len if seq_len > mp else mp
        b = base * ((factor * n / mp) - (factor - 1)) ** (d / (d - 2))
        return 1.0 / (b ** (ar / d)), 1.0
    if kind == "llama3":
        old, lo, hi = rs["original_max_position_embeddings"], rs["low_freq_factor"], rs["high_freq_factor"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        inv_l = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, inv_l), 1.0
    if kind == "yarn":
        orig = rs.get("original_max_position_embeddings") or c["max_position_embeddings"]
        att = rs.get("attention_factor")
        if att is None:
            att = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr(rot):
            return (d * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

        low, high = max(math.floor(corr(beta_fast)), 0), min(math.ceil(corr(beta_slow)), d - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        extra = 1 - ramp
        pos_freqs = base ** (ar / d)
        inv = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
        return inv, att
    raise ValueError(kind)


def rope(x, c, first, seq_len):
    # x [B, h, L, d]; positions first .. first + L - 1
    L = x.shape[-2]
    inv, att = rope_parameters(c, seq_len)
    freqs = torch.outer(torch.arange(first, first + L, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * (emb.cos() * att) + rotate_half(x) * (emb.sin() * att)


def layer_window(c, l):
    """The sliding window of layer l (0-based), or None (full attention)."""
    mt = c["model_type"]
    if mt == "mistral":
        return c.get("sliding_window")
    if mt in ("qwen2", "qwen3") and c.get("use_sliding_window") and l >= c.get("max_window_layers", 28):
        return c.get("sliding_window")
    return None


def forward(w, c, ids, cache=None):
    """ids 0-based [B, L] -> logits [B, L, V], float64. cache: a list of per-layer (k, v), grown in place."""
    W = {k: v.double() for k, v in w.items()}
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, eps = head_dim(c), c["rms_norm_eps"]
    B, L = ids.shape
    past = cache[0][0].shape[2] if cache and cache[0] is not None else 0
    total = past + L
    h = W["model.embed_tokens.weight"][ids]
    qi = torch.arange(past, total).view(L, 1)
    kj = torch.arange(total).view(1, total)
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        x = rms_norm(h, W[p + "input_layernorm.weight"], eps)

        def proj(name, n):
            y = x @ W[p + "self_attn.%s_proj.weight" % name].T
            if p + "self_attn.%s_proj.bias" % name in W:
                y = y + W[p + "self_attn.%s_proj.bias" % name]
            return y.view(B, L, n, hd).transpose(1, 2)

        q, k, v = proj("q", nh), proj("k", nkv), proj("v", nkv)
        if c["model_type"] == "qwen3":
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, c, past, total), rope(k, c, past, total)
        if cache is not None:
            if cache[l] is not None:
                k = torch.cat([cache[l][0], k], dim=2)
                v = torch.cat([cache[l][1], v], dim=2)
            cache[l] = (k, v)
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
        allowed = kj <= qi
        win = layer_window(c, l)
        if win is not None:
            allowed = allowed & (kj > qi - win)
        mask = torch.zeros(L, total, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
        s = q @ k.transpose(-1, -2) / math.sqrt(hd) + mask
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, L, nh * hd)
        o = o @ W[p + "self_attn.o_proj.weight"].T
        if p + "self_attn.o_proj.bias" in W:
            o = o + W[p + "self_attn.o_proj.bias"]
        h = h + o
        x = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(x @ W[p + "mlp.gate_proj.weight"].T)
        u = x @ W[p + "mlp.up_proj.weight"].T
        h = h + (g * u) @ W[p + "mlp.down_proj.weight"].T
    h = rms_norm(h, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if c["tie_word_embeddings"] else W["lm_head.weight"]
    return h @ head.T


def greedy(w, c, ids, n):
    """n greedy steps with a KV cache (as transformers' generate); ids [B, L + n], smallest top-1/top-2 gap."""
    gap = float("inf")
    cache = [None] * c["num_hidden_layers"]
    logits = forward(w, c, ids, cache)
    for i in range(n):
        last = logits[:, -1]
        top = last.topk(2, dim=-1).values
        gap = min(gap, float((top[:, 0] - top[:, 1]).min()))
        nxt = last.argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        if i + 1 < n:
            logits = forward(w, c, nxt, cache)
    return ids, gap


def main():
    out = {"torch_version": torch.__version__.split("+")[0], "new_tokens": 6, "cases": {}}
    for name in CASES:
        c = cfg_of(name)
        w = make_weights(c)
        folder = os.path.join(FIX, "llama_family", name)
        os.makedirs(folder, exist_ok=True)
        save_safetensors(os.path.join(folder, "model.safetensors"), w)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")
        ids = torch.randint(0, c["vocab_size"], (2, 7))
        logits = forward(w, c, ids)
        gen, gap = greedy(w, c, ids, out["new_tokens"])
        out["cases"][name] = {
            "folder": "tests/fixtures/llama_family/" + name,
            "ids": ids + 1,
            "logits": logits,
            "generated": gen + 1,
            "min_greedy_gap": gap,
        }
        print(name, "min greedy top-1/top-2 gap %.3g" % gap, "logit range %.3g" % float(logits.abs().max()))
    Writer().write(os.path.join(FIX, "llama_family.lua"), "tests/gen_llama_family.py", out, out["torch_version"])


if __name__ == "__main__":
    main()
