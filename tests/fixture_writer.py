"""Writes PyTorch reference values as Lua fixture files (tests/fixtures/*.lua),
for every tests/gen_*_fixtures.py.

    from fixture_writer import Writer
    Writer().write(path, "tests/gen_x_fixtures.py", {"cases": [...]})

A value is written as Lua: bool, int, float (17 significant digits, which
read back to the same double; inf and nan as math.huge and 0/0), str, None
(nil), a dict (a table in insertion order), a list or tuple (a list), and a
tensor as {shape = {...}, dtype = "bool" | "int64", data = {...}} (float
tensors name no dtype: the specs read them as float64). The generators that
began with their own writers differ in small ways the committed files keep:
how a key is written, the separator of a tensor's data, how its floats are
formatted, and (tests/gen_op_fixtures.py) a tensor as nested tables with
sorted keys -- each is an option or a method to override, not a copy.
An object with a method lua(writer, indent) writes itself.

grid64(*shape, std=1.0) draws torch.randn values rounded to a 1/64 grid:
exact in the file and short to write (the attention generators' inputs).

save_safetensors(path, tensors) writes a .safetensors file with the
standard library (json, struct) and the tensor bytes as
safetensors.torch.save_file writes them (8-byte header length, JSON header
with "__metadata__": {"format": "pt"}, raw little-endian data): PyTorch 1.13
here has no safetensors package. tests/gen_interop_fixtures.py and
tests/gen_llama_fixtures.py write theirs with it.
"""
import json
import math
import re
import struct

import torch

LUA_KEYWORDS = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
                "true", "until", "while"}


def grid64(*shape, std=1.0):
    """torch.randn(*shape) * std on a 1/64 grid: exact in the file, short to write"""
    return (torch.randn(*shape) * std * 64).round() / 64


def randomized(m, std=0.3):
    """Every parameter of m drawn again from N(0, std) (PyTorch starts some at 0,
    such as the attention biases, which would leave them untested); returns m."""
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, std)
    return m


def module_state(m):
    """m's state dict as detached copies (for a fixture's "state")."""
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def lua_float(v):
    if math.isnan(v):
        return "0/0"
    if math.isinf(v):
        return "math.huge" if v > 0 else "-math.huge"
    return "%.17g" % v


class Writer:
    """keys: "bare" (k = v), "quoted" (["k"] = v) or "auto" (bare where Lua
    allows it); sep: between a tensor's values; sort_keys: dict keys in
    sorted order instead of insertion order; empty: how an empty dict is
    written (None: like any other, an empty line between its braces);
    floats(t): the strings of a float tensor's values (default: lua_float
    of each)."""

    def __init__(self, keys="bare", sep=", ", sort_keys=False, empty=None, floats=None):
        self.keys, self.sep, self.sort_keys, self.empty = keys, sep, sort_keys, empty
        self.floats = floats or (lambda t: [lua_float(float(v)) for v in t.reshape(-1).tolist()])

    def key(self, k):
        if self.keys == "quoted" or (self.keys == "auto" and not (
                re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", k) and k not in LUA_KEYWORDS)):
            return '["%s"]' % k
        return k

    def tensor(self, t):
        t = t.detach()
        shape = "{" + ", ".join(str(s) for s in t.shape) + "}"
        flat = t.reshape(-1).tolist()
        if t.dtype == torch.bool:
            return '{shape = %s, dtype = "bool", data = {%s}}' % (
                shape, self.sep.join("true" if v else "false" for v in flat))
        if t.dtype == torch.int64:
            return '{shape = %s, dtype = "int64", data = {%s}}' % (shape, self.sep.join(str(int(v)) for v in flat))
        return "{shape = %s, data = {%s}}" % (shape, self.sep.join(self.floats(t)))

    def value(self, x, indent=""):
        if hasattr(x, "lua"):
            return x.lua(self, indent)
        if x is None:
            return "nil"
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, int):
            return str(x)
        if isinstance(x, float):
            return lua_float(x)
        if isinstance(x, str):
            return '"%s"' % x
        if isinstance(x, torch.Tensor):
            return self.tensor(x)
        inner = indent + "  "
        if isinstance(x, dict):
            if not x and self.empty is not None:
                return self.empty
            keys = sorted(x) if self.sort_keys else list(x)
            items = ",\n".join("%s%s = %s" % (inner, self.key(k), self.value(x[k], inner)) for k in keys)
            return "{\n" + items + "\n" + indent + "}"
        if isinstance(x, (list, tuple)):
            return "{\n" + ",\n".join(inner + self.value(v, inner) for v in x) + "\n" + indent + "}"
        raise TypeError(type(x))

    def write(self, path, generator, value, version=None):
        """path: `-- Generated by <generator> (PyTorch <version>); do not edit.` and `return <value>`."""
        with open(path, "w") as f:
            f.write("-- Generated by %s (PyTorch %s); do not edit.\n" % (generator, version or torch.__version__))
            f.write("return " + self.value(value) + "\n")


ST_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64",
             torch.float16: "F16", torch.bool: "BOOL", torch.int32: "I32"}


def save_safetensors(path, tensors):
    """tensors: name -> torch tensor, written in sorted name order."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous()
        raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        data = raw.numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
