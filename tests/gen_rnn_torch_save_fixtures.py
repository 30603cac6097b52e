"""PyTorch 1.13 reference values for tests/lua/nn_modules_torch_spec.lua: the
recurrent modules in the forms tests/gen_nn_fixtures.py's rnn_cases() leaves
out, as a porting user runs them (float64, PyTorch's own initialisation):

  lstm_proj_bidir_hx     LSTM(3, 5, proj_size=2, num_layers=2, bidirectional,
                         batch_first, dropout=0.3) in eval, with {h_0, c_0}
  lstm_proj_unbatched    LSTM(3, 4, proj_size=3), an unbatched input, no hx
  gru_packed_bidir_hx    GRU(3, 4, num_layers=2, bidirectional, batch_first)
                         over pack_padded_sequence(enforce_sorted=False) with
                         h_0; the output through pad_packed_sequence
  lstm_packed_proj       LSTM(2, 4, proj_size=2, bidirectional) over a sorted
                         time-major packed batch (enforce_sorted=True)

Each case: the module's kind and options, its state dict (torch's names), the
inputs, the lengths (packed cases), out, h_n (c_n) and the gradients of
sum(out * R) + sum(h_n * R_h) (+ sum(c_n * R_c)) for the inputs.

And one object saved by torch.save twice, as a zip archive
(tests/fixtures/checkpoint_files_zip.pt) and in the legacy format
(_use_new_zipfile_serialization=False, tests/fixtures/checkpoint_files_legacy.pt):
tensors of every storage type, views (offset, strided, transposed,
expanded), a 0-d and an empty tensor, a Parameter and nested dicts, lists
and tuples. The legacy format names storages by id(), different on every
run: its file is written once and kept. tests/lua/checkpoint_files_spec.lua
reads the two.

    /usr/bin/python3 tests/gen_rnn_torch_save_fixtures.py   # writes the three files
"""
import os
import sys

import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_writer import Writer  # noqa: E402

torch.manual_seed(88)
torch.set_default_dtype(torch.float64)


def run(name, kind, isz, hsz, opts, xshape, hx_shapes=None, lengths=None, train=False):
    m = getattr(torch.nn, kind)(isz, hsz, **opts)
    m.train(train)
    inputs = {"x": torch.randn(*xshape)}
    if hx_shapes:
        inputs["h0"] = torch.randn(*hx_shapes[0]) * 0.5
        if kind == "LSTM":
            inputs["c0"] = torch.randn(*hx_shapes[1]) * 0.5
    for t in inputs.values():
        t.requires_grad_(True)
    hx = None
    if hx_shapes:
        hx = (inputs["h0"], inputs["c0"]) if kind == "LSTM" else inputs["h0"]
    bf = opts.get("batch_first", False)
    x = inputs["x"]
    if lengths is not None:
        x = pack_padded_sequence(x, torch.tensor(lengths), batch_first=bf, enforce_sorted=opts_sorted(lengths))
    out, state = m(x, hx)
    if lengths is not None:
        out, _ = pad_packed_sequence(out, batch_first=bf)
    h_n, c_n = (state if kind == "LSTM" else (state, None))
    c = {"name": name, "kind": kind, "input_size": isz, "hidden_size": hsz, "options": opts,
         "state": {k: v.detach().clone() for k, v in m.state_dict().items()},
         "inputs": {k: v.detach() for k, v in inputs.items()}, "out": out.detach(), "h_n": h_n.detach()}
    if lengths is not None:
        c["lengths"] = lengths
    R, R_h = torch.randn_like(out), torch.randn_like(h_n)
    loss = (out * R).sum() + (h_n * R_h).sum()
    c["R"], c["R_h"] = R, R_h
    if c_n is not None:
        c["c_n"] = c_n.detach()
        c["R_c"] = torch.randn_like(c_n)
        loss = loss + (c_n * c["R_c"]).sum()
    loss.backward()
    c["grad_inputs"] = {k: v.grad for k, v in inputs.items()}
    return c


def opts_sorted(lengths):
    return all(lengths[i] >= lengths[i + 1] for i in range(len(lengths) - 1))


def cases():
    return [
        run("lstm_proj_bidir_hx", "LSTM", 3, 5,
            {"proj_size": 2, "num_layers": 2, "bidirectional": True, "batch_first": True, "dropout": 0.3},
            (3, 4, 3), [(4, 3, 2), (4, 3, 5)]),
        run("lstm_proj_unbatched", "LSTM", 3, 4, {"proj_size": 3}, (5, 3)),
        run("gru_packed_bidir_hx", "GRU", 3, 4, {"num_layers": 2, "bidirectional": True, "batch_first": True},
            (3, 5, 3), [(4, 3, 4)], lengths=[2, 5, 3]),
        run("lstm_packed_proj", "LSTM", 2, 4, {"proj_size": 2, "bidirectional": True},
            (4, 3, 2), lengths=[4, 4, 1]),
    ]


def saved():
    g = torch.Generator().manual_seed(881)
    base = torch.arange(20, dtype=torch.float32)
    return {
        "view": base[3:9], "strided": base.view(4, 5)[:, 1::2], "t": base.view(4, 5).t(),
        "expanded": torch.tensor([[1.5], [-2.0]]).expand(2, 3),
        "bf16": torch.randn(2, 3, generator=g, dtype=torch.float32).bfloat16().t(),
        "f16": torch.randn(3, generator=g, dtype=torch.float32).half(),
        "f64": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "i64": torch.tensor([-(2 ** 40), 7]), "i32": torch.tensor([1, -2, 3], dtype=torch.int32),
        "i16": torch.tensor([-300, 2], dtype=torch.int16), "i8": torch.tensor([-1, 2], dtype=torch.int8),
        "u8": torch.tensor([1, 2, 255], dtype=torch.uint8), "b": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5), "empty": torch.zeros(0, 3),
        "param": torch.nn.Parameter(torch.ones(2)),
        "nested": {"a": [torch.ones(2), (torch.zeros(1), 3, "s")], "b": {1: 2.5, "t": True}},
    }


if __name__ == "__main__":
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    Writer(keys="auto").write(os.path.join(fixtures, "nn_modules_torch_rnn.lua"), "tests/gen_rnn_torch_save_fixtures.py",
                              {"cases": cases()})
    torch.save(saved(), os.path.join(fixtures, "checkpoint_files_zip.pt"))
    legacy = os.path.join(fixtures, "checkpoint_files_legacy.pt")
    if not os.path.exists(legacy):
        torch.save(saved(), legacy, _use_new_zipfile_serialization=False)
