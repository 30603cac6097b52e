#!/usr/bin/python3
"""PyTorch's answers for ember's dtype API (tests/lua/dtype_api_spec.lua):
torch.finfo and torch.iinfo of ember's dtypes, promote_types and can_cast of
every pair, result_type of tensors and numbers, and the dtypes the factories
and the promotions give under set_default_dtype(float64).

    tests/fixtures/dtype_api.lua

Run with Debian's python3-torch: /usr/bin/python3 tests/gen_dtype_api_fixtures.py
"""
import os

import torch

from fixture_writer import Writer

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
DTYPES = {"bool": torch.bool, "int64": torch.int64, "bfloat16": torch.bfloat16,
          "float32": torch.float32, "float64": torch.float64}
NAME = {v: k for k, v in DTYPES.items()}


def operand(kind):
    """("t", dtype): a 1-d tensor; ("z", dtype): a 0-d tensor; ("i", 2), ("f", 2.5), ("b", True): numbers.
    The fixture writes a row as "t:int64 f:2.5 float32" (a, b, torch.result_type(a, b))."""
    k, v = kind
    if k == "t":
        return torch.ones(2, dtype=DTYPES[v])
    if k == "z":
        return torch.ones((), dtype=DTYPES[v])
    return v


def main():
    finfo = {}
    for n in ("float32", "float64", "bfloat16"):
        f = torch.finfo(DTYPES[n])
        finfo[n] = {"bits": f.bits, "eps": f.eps, "max": f.max, "min": f.min, "tiny": f.tiny,
                    "smallest_normal": f.smallest_normal, "resolution": f.resolution}
    i = torch.iinfo(torch.int64)
    # min as a string: the Lua literal -9223372036854775808 reads as a float
    iinfo = {"int64": {"bits": i.bits, "max": i.max, "min": str(i.min)}}
    names = list(DTYPES)
    promote, can_cast = [], []  # rows "a b answer"
    for a in names:
        for b in names:
            promote.append("%s %s %s" % (a, b, NAME[torch.promote_types(DTYPES[a], DTYPES[b])]))
            can_cast.append("%s %s %s" % (a, b, str(torch.can_cast(DTYPES[a], DTYPES[b])).lower()))
    kinds = [("t", n) for n in names] + [("z", n) for n in names] + [("i", 2), ("f", 2.5), ("b", True)]
    result = {}
    for default in ("float32", "float64"):
        torch.set_default_dtype(DTYPES[default])
        rows = []
        for a in kinds:
            for b in kinds:
                rows.append("%s:%s %s:%s %s" % (a[0], str(a[1]).lower(), b[0], str(b[1]).lower(),
                                                 NAME[torch.result_type(operand(a), operand(b))]))
        result[default] = rows
    # what a float64 default changes (ember's factories make floats where torch's
    # make int64 from integers, so only the float cases are compared)
    torch.set_default_dtype(torch.float64)
    l = torch.tensor([1, 2])
    made = {
        "zeros": torch.zeros(2).dtype, "ones": torch.ones(2).dtype, "empty": torch.empty(2).dtype,
        "full": torch.full((2,), 1.5).dtype, "rand": torch.rand(2).dtype, "randn": torch.randn(2).dtype,
        "arange": torch.arange(0.0, 3.0).dtype, "linspace": torch.linspace(0, 1, 3).dtype,
        "logspace": torch.logspace(0, 1, 3).dtype, "eye": torch.eye(2).dtype,
        "tensor": torch.tensor([1.5, 2.0]).dtype, "int_times_float": (l * 0.5).dtype,
        "int_div_int": (l / l).dtype, "exp_of_int": torch.exp(l).dtype, "sqrt_of_int": torch.sqrt(l).dtype,
        "int_pow_float": (l ** 0.5).dtype, "bool_times_float": (l > 1).mul(0.5).dtype,
        "where_floats": torch.where(l > 1, 0.5, 1.5).dtype, "reciprocal_of_int": torch.reciprocal(l).dtype,
        "clamp_int_float": l.clamp(-2.5, 3.5).dtype, "logsumexp_of_int": torch.logsumexp(l.view(1, 2), 1).dtype,
        "number_div_int": (2 / l).dtype, "int_div_number": (l / 2).dtype, "sigmoid_of_int": torch.sigmoid(l).dtype,
        "linear_weight": torch.nn.Linear(2, 2).weight.dtype, "linear_bias": torch.nn.Linear(2, 2).bias.dtype,
        "layernorm_weight": torch.nn.LayerNorm(2).weight.dtype, "embedding_weight": torch.nn.Embedding(3, 2).weight.dtype,
        "batchnorm_running_mean": torch.nn.BatchNorm1d(2).running_mean.dtype,
    }
    torch.set_default_dtype(torch.float32)
    Writer().write(os.path.join(FIX, "dtype_api.lua"), "tests/gen_dtype_api_fixtures.py", {
        "finfo": finfo, "iinfo": iinfo, "promote_types": promote, "can_cast": can_cast,
        "result_type": result, "float64_default": {k: NAME[v] for k, v in made.items()},
    })


if __name__ == "__main__":
    main()
