#!/usr/bin/python3
"""Files torch.save writes, for ember.load (lua/ember/_torch_load.lua; tests/lua/torch_load_spec.lua):

  tests/fixtures/torch_load_tensors.pt     a dict of tensors of every storage type, views among them
  tests/fixtures/torch_load_checkpoint.pt  a training checkpoint: model and optimizer state dicts, numbers,
                                           strings, lists, None, torch.Size, a numpy scalar, a Parameter
  tests/fixtures/torch_load_module.pt      a whole nn.Module pickled (its class: refused)
  tests/fixtures/torch_load_legacy.pt      the pre-1.6 format (_use_new_zipfile_serialization=False)
  tests/fixtures/torch_load.lua            what each holds, as float64 values, 0-based keys as written
  tests/fixtures/torch_load_llama/         one small Llama's weights as Hugging Face's older folders hold
                                           them: bin/ (pytorch_model.bin), sharded/ (two .bin shards and
                                           pytorch_model.bin.index.json), and safetensors/ (model.safetensors)

Run with Debian's python3-torch: /usr/bin/python3 tests/gen_torch_load_fixtures.py
"""
import json
import os

import numpy
import torch
import torch.nn as nn

from fixture_writer import Writer, save_safetensors

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
torch.manual_seed(20261207)


def expect(t):
    """A tensor as the spec checks it: ember's dtype, shape, float64 values (exact for every dtype here)."""
    ember_dtype = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16",
                   torch.float16: "float32", torch.int64: "int64", torch.int32: "int64", torch.int16: "int64",
                   torch.int8: "int64", torch.uint8: "int64", torch.bool: "bool"}[t.dtype]
    return {"dtype": ember_dtype, "requires_grad": t.requires_grad, "value": t.detach().to(torch.float64)}


def tensors_file():
    base = torch.randn(4, 6)
    half = torch.tensor([1.0, -2.5, 65504.0, 6.1e-05, 5.96e-08, -0.0, float("inf")], dtype=torch.float16)
    d = {
        "f32": torch.randn(2, 3),
        "f64": torch.randn(3, dtype=torch.float64),
        "bf16": torch.randn(2, 2).to(torch.bfloat16),
        "f16": half,
        "i64": torch.tensor([0, -1, 2**40, -(2**62)]),
        "i32": torch.tensor([7, -2147483648, 2147483647], dtype=torch.int32),
        "i16": torch.tensor([-32768, 5], dtype=torch.int16),
        "i8": torch.tensor([-128, 127, 0], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 3),
        "transposed": base.t(),                 # strides (1, 6) into the 24-element storage
        "rows": base[1:3],                      # storage offset 6
        "column": base[:, 2],                   # offset 2, stride 6
        "expanded": torch.arange(3.0).expand(2, 3),  # stride 0
    }
    d["tied"] = d["f32"]                        # one storage, two names
    torch.save(d, os.path.join(FIX, "torch_load_tensors.pt"))
    return {k: expect(v) for k, v in d.items()}


def checkpoint_file():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(5, 3), torch.randn(5, 2)
    for _ in range(2):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    p = nn.Parameter(torch.randn(2))
    g = torch.ones(2, requires_grad=True)
    ck = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 7, "best": 0.91, "name": "run-1", "tags": ["a", "b"], "pair": (1, "x"),
        "size": torch.Size([2, 3]), "big": 2**40, "neg": -5, "flag": True, "none": None,
        "np": numpy.float64(0.5), "param": p, "needs_grad": g,
    }
    torch.save(ck, os.path.join(FIX, "torch_load_checkpoint.pt"))
    sd = model.state_dict()
    st = opt.state_dict()
    return {
        "model": {k: expect(v) for k, v in sd.items()},
        "model_keys": list(sd),
        "x": x, "out": model(x).detach(),
        "optimizer_state": [{"key": k, "step": float(v["step"]), "exp_avg": expect(v["exp_avg"])}
                            for k, v in st["state"].items()],
        "param_groups_params": st["param_groups"][0]["params"],
        "lr": st["param_groups"][0]["lr"],
        "param": expect(p), "needs_grad": expect(g),
    }


def refused_files():
    torch.save(nn.Linear(2, 2), os.path.join(FIX, "torch_load_module.pt"))
    # the legacy format names storages by id(), different on every run: written once, kept
    legacy = os.path.join(FIX, "torch_load_legacy.pt")
    if not os.path.exists(legacy):
        torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)


def llama_folders():
    """One Llama's weights, random, under Hugging Face's names, in three folders of the same config."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 29, "hidden_size": 16,
           "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32"}
    d, inter, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_size"] // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    sd = {"model.embed_tokens.weight": torch.randn(cfg["vocab_size"], d), "model.norm.weight": 1 + 0.1 * torch.randn(d),
          "lm_head.weight": torch.randn(cfg["vocab_size"], d) * 0.3}
    for i in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        for name, shape in [("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (kv, d)), ("self_attn.v_proj", (kv, d)),
                            ("self_attn.o_proj", (d, d)), ("mlp.gate_proj", (inter, d)), ("mlp.up_proj", (inter, d)),
                            ("mlp.down_proj", (d, inter))]:
            sd[pre + name + ".weight"] = torch.randn(*shape) * 0.3
        sd[pre + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(d)
        sd[pre + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(d)
    root = os.path.join(FIX, "torch_load_llama")
    for sub in ("bin", "sharded", "safetensors"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        with open(os.path.join(root, sub, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
    torch.save(sd, os.path.join(root, "bin", "pytorch_model.bin"))
    names = sorted(sd)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for k, part in enumerate(halves):
        fname = "pytorch_model-%05d-of-00002.bin" % (k + 1)
        torch.save({n: sd[n] for n in part}, os.path.join(root, "sharded", fname))
        weight_map.update({n: fname for n in part})
    with open(os.path.join(root, "sharded", "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t.numel() * 4 for t in sd.values())}, "weight_map": weight_map}, f,
                  indent=2, sort_keys=True)
    save_safetensors(os.path.join(root, "safetensors", "model.safetensors"), sd)


def main():
    w = Writer(keys="quoted")
    cases = {"tensors": tensors_file(), "checkpoint": checkpoint_file()}
    refused_files()
    llama_folders()
    w.write(os.path.join(FIX, "torch_load.lua"), "tests/gen_torch_load_fixtures.py", cases)


if __name__ == "__main__":
    main()
