#!/usr/bin/python3
"""The way back to PyTorch (tests/lua/interop_spec.lua runs it where PyTorch is
installed): a state dict that ember wrote with
`ember.save(model:torch_state_dict(), STATE)` loads with torch's strict
load_state_dict into the generator's model of that KIND, which then computes,
on the inputs in INPUTS (written by ember.save too), the output ember computed.

Usage: /usr/bin/python3 tests/interop_torch_check.py KIND STATE INPUTS
KIND: seq2seq, cnn, recurrent, mha_kdim, vit (torchvision's VisionTransformer, written out). Prints `maxdiff <max |torch - ember|>`.
"""
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_interop_fixtures as gen  # noqa: E402  (the models, in float64)

DTYPES = {"F64": torch.float64, "F32": torch.float32, "I64": torch.int64, "BF16": torch.bfloat16}


def load(path):
    """A safetensors file as name -> tensor (the format, read with the standard library)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=DTYPES[v["dtype"]]).reshape(v["shape"])
    return out


def main():
    kind, state_path, inputs_path = sys.argv[1:4]
    x = load(inputs_path)
    model = {"seq2seq": gen.Seq2Seq, "cnn": gen.make_cnn, "recurrent": gen.Recurrent,
             "mha_kdim": lambda: gen.make_mha(kdim=6, vdim=5), "vit": gen.TVVisionTransformer}[kind]()
    model.load_state_dict(load(state_path), strict=True)
    model.eval()
    with torch.no_grad():
        if kind == "seq2seq":
            out = model(x["src"], x["tgt"])
        elif kind == "mha_kdim":
            out = model(x["q"], x["k"], x["v"], need_weights=False)[0]
        else:
            out = model(x["x"])
    print("maxdiff %.17g" % float((out - x["out"]).abs().max()))


if __name__ == "__main__":
    main()
