#!/usr/bin/python3
"""Writes tests/fixtures/ops_*.lua: PyTorch 1.13 reference values for every
differentiable core op, read by tests/lua/ops_parity_spec.lua.

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_op_fixtures.py

Each file is `return { [case name] = case, ... }` where a case is
  op      -- the name the spec maps to a call through the ember Lua API
  inputs  -- name -> tensor as nested tables (a number for a 0-d tensor);
             float inputs are float64 and differentiable
  dtypes  -- name -> "int64" | "bool" for the inputs that are not float
  args    -- the op's other arguments, already in ember's 1-based convention
  out     -- the forward result (a list of tensors for split/chunk)
  indices -- for max/min along a dim: the returned indices, 1-based
  w       -- fixed random weights shaped like out
  grads   -- name -> d sum(out * w) / d input, for every float input

Index conventions: ember's Lua API is 1-based, so every int64 tensor here
(embedding ids, gather/index_select/scatter_add indices, class targets) is
written with 1 added, and a PyTorch dim d >= 0 becomes d + 1 in args
(negative dims are the same in both). Values are written with %.17g, which
round-trips float64 exactly, so the float64 inputs ember sees are the ones
PyTorch used; NaN is written 0/0 and infinities +-math.huge. The output is deterministic (fixed seed, sorted keys).
"""
import math
import os

import torch
import torch.nn.functional as F

from fixture_writer import Writer, lua_float

torch.manual_seed(20261129)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------
# Lua writer
# ---------------------------------------------------------------------------

def lua_nested(v):
    """Nested tables from tensor.tolist() output (or a scalar)."""
    if isinstance(v, list):
        return "{" + ", ".join(lua_nested(e) for e in v) + "}"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return lua_float(v)


class OpWriter(Writer):
    """The op fixtures' tensors are nested tables (the spec builds them with
    ember.tensor), int64 ones 1-based for ember; keys sorted."""

    def tensor(self, t):
        t = t.detach()
        if t.dtype == torch.int64:
            t = t + 1  # 1-based for ember
        return lua_nested(t.tolist())


WRITER = OpWriter(keys="auto", sort_keys=True, empty="{}")


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

FILES = {}


def randn(*shape):
    return torch.randn(*shape)


def away(x, points=(0.0,), margin=0.1):
    """x moved at least `margin` away from each kink in `points` (so that
    the float32 run and finite differences stay on one side)."""
    x = x.clone()
    for p in points:
        d = x - p
        close = d.abs() < margin
        x[close] = p + torch.where(d[close] >= 0, torch.tensor(margin), torch.tensor(-margin)) * 1.5
    return x


def positive(*shape, lo=0.5, hi=2.0):
    return lo + (hi - lo) * torch.rand(*shape)


def nonzero(*shape, lo=0.5, hi=2.0):
    s = torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0)
    return s * positive(*shape, lo=lo, hi=hi)


def case(file, name, op, inputs, fn, args=None, multi=False, has_indices=False):
    """Runs fn(**inputs) under autograd and records the case. Float inputs
    get requires_grad; fn returns a tensor, a list of tensors (multi) or
    (values, indices) (has_indices)."""
    ins = {}
    dtypes = {}
    for k, v in inputs.items():
        v = v.detach().clone()
        if v.dtype == torch.float64:
            v.requires_grad_(True)
        elif v.dtype == torch.int64:
            dtypes[k] = "int64"
        elif v.dtype == torch.bool:
            dtypes[k] = "bool"
        else:
            raise TypeError(v.dtype)
        ins[k] = v
    res = fn(**ins)
    indices = None
    if has_indices:
        res, indices = res
    outs = list(res) if multi else [res]
    ws = [torch.randn(o.shape) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, ws))
    diff = [k for k in sorted(ins) if ins[k].dtype == torch.float64]
    grads = torch.autograd.grad(loss, [ins[k] for k in diff], allow_unused=True)
    c = {
        "op": op,
        "inputs": {k: v for k, v in ins.items()},
        "args": args or {},
        "out": outs if multi else outs[0],
        "w": ws if multi else ws[0],
        "grads": {k: (g if g is not None else torch.zeros_like(ins[k])) for k, g in zip(diff, grads)},
    }
    if dtypes:
        c["dtypes"] = dtypes
    if indices is not None:
        c["indices"] = indices
    assert name not in FILES.setdefault(file, {}), name
    FILES[file][name] = c


# ---- elementwise ------------------------------------------------------------

def elementwise():
    f = "ops_elementwise"
    # binary, tensor with tensor, broadcasting both ways
    case(f, "add_broadcast", "add", {"a": randn(3, 4), "b": randn(4)}, lambda a, b: a + b)
    case(f, "add_same", "add", {"a": randn(2, 3), "b": randn(2, 3)}, lambda a, b: a + b)
    case(f, "sub_broadcast", "sub", {"a": randn(2, 1, 3), "b": randn(4, 3)}, lambda a, b: a - b)
    case(f, "mul_broadcast", "mul", {"a": randn(3, 1), "b": randn(1, 4)}, lambda a, b: a * b)
    case(f, "mul_scalar_tensor", "mul", {"a": randn(2, 3), "b": randn(())}, lambda a, b: a * b)
    case(f, "div_broadcast", "div", {"a": randn(2, 3), "b": nonzero(3)}, lambda a, b: a / b)
    case(f, "div_lhs_broadcast", "div", {"a": randn(3, 1), "b": nonzero(3, 2)}, lambda a, b: a / b)
    case(f, "pow_tensor", "pow", {"a": positive(2, 3), "b": randn(3)}, lambda a, b: a ** b)
    case(f, "pow_tensor_broadcast_base", "pow", {"a": positive(3, 1), "b": randn(3, 4)},
         lambda a, b: a ** b)
    case(f, "maximum_broadcast", "maximum", {"a": randn(3, 4), "b": randn(4)},
         lambda a, b: torch.maximum(a, b))
    case(f, "minimum_broadcast", "minimum", {"a": randn(2, 1, 3), "b": randn(2, 3)},
         lambda a, b: torch.minimum(a, b))
    # with a Lua number on either side
    case(f, "add_number", "add_number", {"x": randn(2, 3)}, lambda x: x + 1.5, {"s": 1.5})
    case(f, "number_add", "number_add", {"x": randn(2, 3)}, lambda x: 1.5 + x, {"s": 1.5})
    case(f, "sub_number", "sub_number", {"x": randn(2, 3)}, lambda x: x - 0.75, {"s": 0.75})
    case(f, "number_sub", "number_sub", {"x": randn(2, 3)}, lambda x: 2 - x, {"s": 2.0})
    case(f, "mul_number", "mul_number", {"x": randn(2, 3)}, lambda x: x * -2.5, {"s": -2.5})
    case(f, "number_mul", "number_mul", {"x": randn(2, 3)}, lambda x: 3 * x, {"s": 3.0})
    case(f, "div_number", "div_number", {"x": randn(2, 3)}, lambda x: x / 4.0, {"s": 4.0})
    case(f, "number_div", "number_div", {"x": nonzero(2, 3)}, lambda x: 3.0 / x, {"s": 3.0})
    case(f, "number_pow", "number_pow", {"x": randn(2, 3)}, lambda x: 2.5 ** x, {"s": 2.5})
    case(f, "pow_number_2", "pow_number", {"x": randn(2, 3)}, lambda x: x ** 2, {"e": 2.0})
    case(f, "pow_number_3", "pow_number", {"x": randn(2, 3)}, lambda x: x ** 3, {"e": 3.0})
    case(f, "pow_number_half", "pow_number", {"x": positive(2, 3)}, lambda x: x ** 0.5, {"e": 0.5})
    case(f, "pow_number_neg", "pow_number", {"x": positive(2, 3)}, lambda x: x ** -1.5,
         {"e": -1.5})
    case(f, "pow_number_0", "pow_number", {"x": randn(2, 3)}, lambda x: x ** 0, {"e": 0.0})
    case(f, "neg", "neg", {"x": randn(2, 3)}, lambda x: -x)

    # unary methods: t:fn(...)
    def unary(name, fn, x, torch_fn, extra=None):
        args = {"fn": fn}
        if extra:
            args["extra"] = extra
        case(f, name, "unary", {"x": x}, lambda x: torch_fn(x), args)

    unary("exp", "exp", randn(2, 3), torch.exp)
    unary("log", "log", positive(2, 3, lo=0.2, hi=3.0), torch.log)
    unary("sqrt", "sqrt", positive(2, 3, lo=0.2, hi=3.0), torch.sqrt)
    unary("rsqrt", "rsqrt", positive(2, 3, lo=0.2, hi=3.0), torch.rsqrt)
    unary("abs", "abs", away(randn(2, 4)), torch.abs)
    unary("tanh", "tanh", randn(2, 3) * 1.5, torch.tanh)
    unary("sigmoid", "sigmoid", randn(2, 3) * 2, torch.sigmoid)
    unary("relu", "relu", away(randn(3, 4)), torch.relu)
    unary("gelu", "gelu", randn(3, 4) * 2, F.gelu)
    unary("gelu_none", "gelu", randn(2, 3) * 2, F.gelu, ["none"])
    unary("gelu_tanh", "gelu", randn(3, 4) * 2, lambda x: F.gelu(x, approximate="tanh"), ["tanh"])
    unary("elu", "elu", away(randn(3, 4)), F.elu)
    unary("elu_alpha", "elu", away(randn(3, 4)), lambda x: F.elu(x, alpha=0.5), [0.5])
    unary("silu", "silu", randn(3, 4) * 2, F.silu)
    unary("sin", "sin", randn(2, 3) * 2, torch.sin)
    unary("cos", "cos", randn(2, 3) * 2, torch.cos)
    unary("clamp", "clamp", away(randn(3, 4), (-0.5, 0.7)),
          lambda x: torch.clamp(x, -0.5, 0.7), [-0.5, 0.7])
    case(f, "clamp_min_only", "clamp", {"x": away(randn(3, 4), (-0.2,))},
         lambda x: torch.clamp(x, min=-0.2), {"lo": -0.2})
    case(f, "clamp_max_only", "clamp", {"x": away(randn(3, 4), (0.3,))},
         lambda x: torch.clamp(x, max=0.3), {"hi": 0.3})

    # where, masked_fill
    cond = torch.rand(3, 4) < 0.5
    case(f, "where", "where", {"cond": cond, "a": randn(3, 4), "b": randn(3, 4)},
         lambda cond, a, b: torch.where(cond, a, b))
    case(f, "where_broadcast", "where",
         {"cond": torch.rand(3, 1) < 0.5, "a": randn(1, 4), "b": randn(3, 4)},
         lambda cond, a, b: torch.where(cond, a, b))
    case(f, "where_number", "where_number", {"cond": cond, "a": randn(3, 4)},
         lambda cond, a: torch.where(cond, a, torch.tensor(-1.25)), {"b": -1.25})
    case(f, "masked_fill", "masked_fill", {"x": randn(3, 4), "mask": torch.rand(3, 4) < 0.4},
         lambda x, mask: x.masked_fill(mask, -2.0), {"value": -2.0})
    case(f, "masked_fill_broadcast", "masked_fill",
         {"x": randn(2, 3, 4), "mask": torch.rand(3, 1) < 0.5},
         lambda x, mask: x.masked_fill(mask, 0.5), {"value": 0.5})


# ---- reductions -------------------------------------------------------------

def reductions():
    f = "ops_reduce"
    x = randn(2, 3, 4)
    case(f, "sum_all", "sum", {"x": x}, lambda x: x.sum())
    case(f, "sum_dim1", "sum", {"x": x}, lambda x: x.sum(0), {"dim": 1})
    case(f, "sum_dim_neg_keepdim", "sum", {"x": x}, lambda x: x.sum(-1, keepdim=True),
         {"dim": -1, "keepdim": True})
    case(f, "sum_dims", "sum", {"x": x}, lambda x: x.sum((0, 2)), {"dim": [1, 3]})
    case(f, "sum_dims_keepdim", "sum", {"x": x}, lambda x: x.sum((1, 2), keepdim=True),
         {"dim": [2, 3], "keepdim": True})
    case(f, "mean_all", "mean", {"x": x}, lambda x: x.mean())
    case(f, "mean_dim2", "mean", {"x": x}, lambda x: x.mean(1), {"dim": 2})
    case(f, "mean_dims_keepdim", "mean", {"x": x}, lambda x: x.mean((0, -1), keepdim=True),
         {"dim": [1, -1], "keepdim": True})
    case(f, "var_all", "var", {"x": x}, lambda x: x.var())
    case(f, "var_all_correction0", "var", {"x": x}, lambda x: torch.var(x, unbiased=False),
         {"correction": 0})
    case(f, "var_dim", "var", {"x": x}, lambda x: x.var(1), {"dim": 2})
    case(f, "var_dim_correction0_keepdim", "var", {"x": x},
         lambda x: torch.var(x, -1, unbiased=False, keepdim=True),
         {"dim": -1, "correction": 0, "keepdim": True})
    case(f, "var_dims", "var", {"x": x}, lambda x: x.var((0, 2)), {"dim": [1, 3]})
    y = randn(3, 5)
    case(f, "max_all", "max_all", {"x": y}, lambda x: x.max())
    case(f, "min_all", "min_all", {"x": y}, lambda x: x.min())
    case(f, "max_dim", "max", {"x": x}, lambda x: tuple(x.max(1)), {"dim": 2}, has_indices=True)
    case(f, "max_dim_keepdim", "max", {"x": x}, lambda x: tuple(x.max(-1, keepdim=True)),
         {"dim": -1, "keepdim": True}, has_indices=True)
    case(f, "min_dim", "min", {"x": x}, lambda x: tuple(x.min(0)), {"dim": 1}, has_indices=True)
    case(f, "min_dim_keepdim", "min", {"x": x}, lambda x: tuple(x.min(2, keepdim=True)),
         {"dim": 3, "keepdim": True}, has_indices=True)


# ---- linear algebra, softmax, normalisation, losses -------------------------

def nn_ops():
    f = "ops_nn"
    mm = lambda a, b: torch.matmul(a, b)
    case(f, "matmul_2d", "matmul", {"a": randn(3, 4), "b": randn(4, 5)}, mm)
    case(f, "matmul_1d_1d", "matmul", {"a": randn(4), "b": randn(4)}, mm)
    case(f, "matmul_1d_2d", "matmul", {"a": randn(4), "b": randn(4, 3)}, mm)
    case(f, "matmul_2d_1d", "matmul", {"a": randn(3, 4), "b": randn(4)}, mm)
    case(f, "matmul_3d_2d", "matmul", {"a": randn(2, 3, 4), "b": randn(4, 5)}, mm)
    case(f, "matmul_2d_3d", "matmul", {"a": randn(3, 4), "b": randn(2, 4, 5)}, mm)
    case(f, "matmul_3d_1d", "matmul", {"a": randn(2, 3, 4), "b": randn(4)}, mm)
    case(f, "matmul_1d_3d", "matmul", {"a": randn(4), "b": randn(2, 4, 3)}, mm)
    case(f, "matmul_batch_broadcast", "matmul", {"a": randn(2, 1, 3, 4), "b": randn(3, 4, 2)}, mm)
    case(f, "bmm", "bmm", {"a": randn(2, 3, 4), "b": randn(2, 4, 5)},
         lambda a, b: torch.bmm(a, b))

    x = randn(2, 3, 4) * 2
    for d in (1, 2, -1):
        lua_d = d if d < 0 else d + 1
        tag = "neg" if d < 0 else str(lua_d)
        case(f, "softmax_dim" + tag, "softmax", {"x": x},
             lambda x, d=d: torch.softmax(x, d), {"dim": lua_d})
        case(f, "log_softmax_dim" + tag, "log_softmax", {"x": x},
             lambda x, d=d: torch.log_softmax(x, d), {"dim": lua_d})

    xl = randn(2, 3, 4) * 1.5 + 0.3
    case(f, "layer_norm_affine", "layer_norm",
         {"x": xl, "weight": randn(4), "bias": randn(4)},
         lambda x, weight, bias: F.layer_norm(x, (4,), weight, bias), {"norm": 1})
    case(f, "layer_norm_plain", "layer_norm", {"x": xl},
         lambda x: F.layer_norm(x, (4,)), {"norm": 1})
    case(f, "layer_norm_weight_only", "layer_norm", {"x": xl, "weight": randn(4)},
         lambda x, weight: F.layer_norm(x, (4,), weight), {"norm": 1})
    case(f, "layer_norm_2dims_shape", "layer_norm",
         {"x": xl, "weight": randn(3, 4), "bias": randn(3, 4)},
         lambda x, weight, bias: F.layer_norm(x, (3, 4), weight, bias, eps=1e-3),
         {"norm": [3, 4], "eps": 1e-3})

    case(f, "dropout_p0_train", "dropout", {"x": randn(3, 4)},
         lambda x: F.dropout(x, 0.0, True), {"p": 0.0, "training": True})
    case(f, "dropout_eval", "dropout", {"x": randn(3, 4)},
         lambda x: F.dropout(x, 0.5, False), {"p": 0.5, "training": False})

    logits = randn(5, 4) * 1.5
    target = torch.tensor([1, 0, 3, 2, 2])
    for red in ("mean", "sum", "none"):
        case(f, "cross_entropy_" + red, "cross_entropy", {"logits": logits, "target": target},
             lambda logits, target, red=red: F.cross_entropy(logits, target, reduction=red),
             {"opts": {"reduction": red}})
    case(f, "cross_entropy_default", "cross_entropy", {"logits": logits, "target": target},
         lambda logits, target: F.cross_entropy(logits, target))
    # ignore_index is a class (0-based 2 in PyTorch, 3 in ember)
    for red in ("mean", "sum", "none"):
        case(f, "cross_entropy_ignore_" + red, "cross_entropy",
             {"logits": logits, "target": target},
             lambda logits, target, red=red: F.cross_entropy(logits, target, ignore_index=2,
                                                             reduction=red),
             {"opts": {"ignore_index": 3, "reduction": red}})
        case(f, "cross_entropy_smoothing_" + red, "cross_entropy",
             {"logits": logits, "target": target},
             lambda logits, target, red=red: F.cross_entropy(logits, target, label_smoothing=0.1,
                                                             reduction=red),
             {"opts": {"label_smoothing": 0.1, "reduction": red}})
        case(f, "cross_entropy_ignore_smoothing_" + red, "cross_entropy",
             {"logits": logits, "target": target},
             lambda logits, target, red=red: F.cross_entropy(
                 logits, target, ignore_index=2, label_smoothing=0.2, reduction=red),
             {"opts": {"ignore_index": 3, "label_smoothing": 0.2, "reduction": red}})
    case(f, "cross_entropy_1d", "cross_entropy",
         {"logits": randn(5), "target": torch.tensor(3)},
         lambda logits, target: F.cross_entropy(logits, target))

    a, b = randn(3, 4), randn(3, 4)
    for red in ("mean", "sum", "none"):
        case(f, "mse_loss_" + red, "mse_loss", {"input": a, "target": b},
             lambda input, target, red=red: F.mse_loss(input, target, reduction=red),
             {"reduction": red})
    case(f, "mse_loss_default", "mse_loss", {"input": a, "target": b},
         lambda input, target: F.mse_loss(input, target))


# ---- indexing and joining ---------------------------------------------------

def indexing():
    f = "ops_index"
    case(f, "embedding", "embedding",
         {"weight": randn(5, 3), "ids": torch.tensor([[0, 2, 4], [2, 2, 1]])},
         lambda weight, ids: F.embedding(ids, weight))
    case(f, "embedding_1d", "embedding",
         {"weight": randn(4, 2), "ids": torch.tensor([3, 0, 3])},
         lambda weight, ids: F.embedding(ids, weight))
    x = randn(3, 4)
    case(f, "index_select_dim1", "index_select", {"x": x, "index": torch.tensor([2, 0, 2])},
         lambda x, index: x.index_select(0, index), {"dim": 1})
    case(f, "index_select_dim2", "index_select",
         {"x": randn(2, 3, 4), "index": torch.tensor([3, 1, 1, 0, 3])},
         lambda x, index: x.index_select(1 + 1, index), {"dim": 3})
    case(f, "index_select_neg_dim", "index_select",
         {"x": randn(2, 3, 4), "index": torch.tensor([1, 2])},
         lambda x, index: x.index_select(-2, index), {"dim": -2})
    case(f, "gather_dim1", "gather",
         {"x": x, "index": torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])},
         lambda x, index: x.gather(0, index), {"dim": 1})
    case(f, "gather_dim_last", "gather",
         {"x": randn(2, 3, 4), "index": torch.randint(0, 4, (2, 3, 5))},
         lambda x, index: x.gather(-1, index), {"dim": -1})
    case(f, "scatter_add_dim1", "scatter_add",
         {"x": randn(3, 4), "index": torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]),
          "src": randn(2, 4)},
         lambda x, index, src: x.scatter_add(0, index, src), {"dim": 1})
    case(f, "scatter_add_dim2", "scatter_add",
         {"x": randn(2, 5), "index": torch.tensor([[4, 0, 4], [1, 1, 3]]), "src": randn(2, 3)},
         lambda x, index, src: x.scatter_add(1, index, src), {"dim": 2})

    cat = lambda a, b, c, d: torch.cat([a, b, c], d)
    case(f, "cat_dim1", "cat", {"a": randn(2, 3), "b": randn(1, 3), "c": randn(3, 3)},
         lambda a, b, c: cat(a, b, c, 0), {"dim": 1})
    case(f, "cat_dim2", "cat", {"a": randn(2, 1, 3), "b": randn(2, 2, 3), "c": randn(2, 3, 3)},
         lambda a, b, c: cat(a, b, c, 1), {"dim": 2})
    case(f, "cat_dim_neg", "cat", {"a": randn(2, 2), "b": randn(2, 1), "c": randn(2, 3)},
         lambda a, b, c: cat(a, b, c, -1), {"dim": -1})
    case(f, "cat_default", "cat", {"a": randn(1, 2), "b": randn(2, 2), "c": randn(1, 2)},
         lambda a, b, c: cat(a, b, c, 0))
    abc = {"a": randn(2, 3), "b": randn(2, 3), "c": randn(2, 3)}
    for d in (0, 1, 2):
        case(f, "stack_dim%d" % (d + 1), "stack", abc,
             lambda a, b, c, d=d: torch.stack([a, b, c], d), {"dim": d + 1})
    case(f, "stack_dim_neg", "stack", abc, lambda a, b, c: torch.stack([a, b, c], -1),
         {"dim": -1})
    case(f, "stack_default", "stack", abc, lambda a, b, c: torch.stack([a, b, c]))

    y = randn(5, 3)
    case(f, "split_dim1", "split", {"x": y}, lambda x: x.split(2, 0), {"size": 2, "dim": 1},
         multi=True)
    case(f, "split_default", "split", {"x": y}, lambda x: x.split(3), {"size": 3}, multi=True)
    case(f, "split_dim2", "split", {"x": randn(2, 7)}, lambda x: x.split(3, 1),
         {"size": 3, "dim": 2}, multi=True)
    case(f, "chunk_dim1", "chunk", {"x": randn(7, 2)}, lambda x: x.chunk(3, 0),
         {"chunks": 3, "dim": 1}, multi=True)
    case(f, "chunk_dim_neg", "chunk", {"x": randn(2, 6)}, lambda x: x.chunk(2, -1),
         {"chunks": 2, "dim": -1}, multi=True)


# ---- views -----------------------------------------------------------------

def views():
    f = "ops_views"
    x = randn(2, 3, 4)
    case(f, "narrow", "narrow", {"x": x}, lambda x: x.narrow(1, 1, 2),
         {"dim": 2, "start": 2, "length": 2})
    case(f, "narrow_last", "narrow", {"x": x}, lambda x: x.narrow(-1, 2, 2),
         {"dim": -1, "start": 3, "length": 2})
    case(f, "select", "select", {"x": x}, lambda x: x.select(0, 1), {"dim": 1, "index": 2})
    case(f, "select_neg_index", "select", {"x": x}, lambda x: x.select(2, -2),
         {"dim": 3, "index": -2})
    case(f, "index_integer", "index_integer", {"x": x}, lambda x: x[1], {"index": 2})
    case(f, "slice_step", "slice", {"x": x}, lambda x: x[:, :, 0:4:2],
         {"dim": 3, "start": 1, "stop": 4, "step": 2})
    case(f, "slice_mid", "slice", {"x": x}, lambda x: x[:, 1:3], {"dim": 2, "start": 2, "stop": 3})
    case(f, "transpose", "transpose", {"x": x}, lambda x: x.transpose(0, 2), {"d0": 1, "d1": 3})
    case(f, "transpose_neg", "transpose", {"x": x}, lambda x: x.transpose(-1, -2),
         {"d0": -1, "d1": -2})
    case(f, "permute", "permute", {"x": x}, lambda x: x.permute(2, 0, 1), {"dims": [3, 1, 2]})
    case(f, "expand", "expand", {"x": randn(3, 1)}, lambda x: x.expand(2, 3, 4),
         {"shape": [2, 3, 4]})
    case(f, "expand_keep", "expand", {"x": randn(1, 4)}, lambda x: x.expand(3, -1),
         {"shape": [3, -1]})
    case(f, "view", "view", {"x": x}, lambda x: x.view(4, 6), {"shape": [4, 6]})
    case(f, "view_infer", "view", {"x": x}, lambda x: x.view(-1, 4), {"shape": [-1, 4]})
    case(f, "reshape", "reshape", {"x": x}, lambda x: x.reshape(6, 4), {"shape": [6, 4]})
    case(f, "reshape_noncontiguous", "transpose_reshape", {"x": x},
         lambda x: x.transpose(0, 1).reshape(3, 8), {"d0": 1, "d1": 2, "shape": [3, 8]})
    y = randn(3, 1, 4, 1)
    case(f, "squeeze_all", "squeeze", {"x": y}, lambda x: x.squeeze())
    case(f, "squeeze_dim", "squeeze", {"x": y}, lambda x: x.squeeze(1), {"dim": 2})
    case(f, "squeeze_neg_dim", "squeeze", {"x": y}, lambda x: x.squeeze(-1), {"dim": -1})
    case(f, "unsqueeze_first", "unsqueeze", {"x": randn(3, 4)}, lambda x: x.unsqueeze(0),
         {"dim": 1})
    case(f, "unsqueeze_mid", "unsqueeze", {"x": randn(3, 4)}, lambda x: x.unsqueeze(1),
         {"dim": 2})
    case(f, "unsqueeze_last", "unsqueeze", {"x": randn(3, 4)}, lambda x: x.unsqueeze(-1),
         {"dim": -1})
    case(f, "flatten", "flatten", {"x": x}, lambda x: x.flatten())
    case(f, "flatten_range", "flatten", {"x": randn(2, 3, 4, 2)}, lambda x: x.flatten(1, 2),
         {"s": 2, "e": 3})
    case(f, "contiguous_of_transpose", "transpose_contiguous", {"x": x},
         lambda x: x.transpose(0, 1).contiguous(), {"d0": 1, "d1": 2})
    case(f, "clone", "clone", {"x": x}, lambda x: x.clone())

# ---- large inputs, checked through projections -------------------------------
#
# Sizes past the CPU backend's thresholds (parallel loops from 32768
# elements, chunked reductions, the BLAS path of matmul, column blocks of
# the index kernels) would make fixtures of megabytes, so these cases
# store no tensors. Inputs are formulas that Lua recomputes exactly:
#   float:  x[i] = off + amp * sin(a * i + b)         (i = 0-based flat index)
#   int64:  x[i] = (i * mul + add) % mod               (written 1-based: + 1)
#   bool:   x[i] = (i * mul + add) % mod == 0
# and results are compared through weighted sums (projections):
#   loss     = sum out[i] * cos(0.37 i + 0.1)          (what backward starts from)
#   out_proj = sum out[i] * sin(1.3 i + 0.5),  out_scale = sqrt(sum out[i]^2)
#   grad_proj[k] = sum g[i] * sin(0.61 i + 0.3),  grad_scale[k] = sqrt(sum g[i]^2)
# The spec compares a projection to within rtol * scale (the rounding of a
# sum of n terms grows like the 2-norm, not like the sum of magnitudes), and
# checks float32 elementwise against ember's own float64 result.


def formula(spec):
    n = 1
    for d in spec["shape"]:
        n *= d
    if spec.get("dtype") in ("int64", "bool"):
        vals = [(i * spec["mul"] + spec["add"]) % spec["mod"] for i in range(n)]
        if spec["dtype"] == "bool":
            return torch.tensor([v == 0 for v in vals]).reshape(spec["shape"])
        return torch.tensor(vals, dtype=torch.int64).reshape(spec["shape"])
    off, amp, a, b = spec.get("off", 0.0), spec.get("amp", 1.0), spec["a"], spec["b"]
    return torch.tensor([off + amp * math.sin(a * i + b) for i in range(n)]).reshape(spec["shape"])


def weights(n, f, a, b):
    return torch.tensor([f(a * i + b) for i in range(n)])


def big_case(name, op, specs, fn, args=None):
    ins = {}
    for k, spec in specs.items():
        v = formula(spec)
        if v.dtype == torch.float64:
            v.requires_grad_(True)
        ins[k] = v
    out = fn(**ins)
    flat = out.reshape(-1)
    n = flat.numel()
    loss = (flat * weights(n, math.cos, 0.37, 0.1)).sum()
    diff = [k for k in sorted(ins) if ins[k].dtype == torch.float64]
    grads = torch.autograd.grad(loss, [ins[k] for k in diff], allow_unused=True)
    gp, gs = {}, {}
    for k, g in zip(diff, grads):
        g = torch.zeros_like(ins[k]) if g is None else g.reshape(-1)
        gp[k] = float((g * weights(g.numel(), math.sin, 0.61, 0.3)).sum())
        gs[k] = float(g.norm())
    c = {
        "op": op,
        "specs": specs,
        "args": args or {},
        "out_shape": list(out.shape),
        "out_proj": float((flat * weights(n, math.sin, 1.3, 0.5)).sum()),
        "out_scale": float(flat.norm()),
        "grad_proj": gp,
        "grad_scale": gs,
    }
    assert name not in FILES.setdefault("ops_large", {}), name
    FILES["ops_large"][name] = c


def wave(shape, a, b, amp=1.0, off=0.0):
    """A float input: off + amp * sin(a * i + b)."""
    return {"shape": list(shape), "a": a, "b": b, "amp": amp, "off": off}


def pattern(shape, mod, mul=7, add=3, dtype="int64"):
    """An int64 (or bool) input: (i * mul + add) % mod (bool: == 0)."""
    return {"shape": list(shape), "mod": mod, "mul": mul, "add": add, "dtype": dtype}


def large():
    big = [200, 170]  # 34000 elements: past the parallel threshold
    big_case("add_broadcast", "add", {"a": wave(big, 0.11, 0.2), "b": wave([170], 0.7, 1.0)},
             lambda a, b: a + b)
    big_case("mul_outer", "mul", {"a": wave([200, 1], 0.13, 0.4), "b": wave([1, 170], 0.29, 0.1)},
             lambda a, b: a * b)
    big_case("div_broadcast", "div", {"a": wave(big, 0.17, 0.0), "b": wave([200, 1], 0.3, 0.2, 0.5, 1.5)},
             lambda a, b: a / b)
    big_case("pow_tensor", "pow", {"a": wave(big, 0.05, 0.3, 0.5, 1.2), "b": wave([170], 0.41, 0.9)},
             lambda a, b: a ** b)
    big_case("maximum", "maximum", {"a": wave(big, 0.013, 0.5), "b": wave(big, 0.021, 0.1)},
             lambda a, b: torch.maximum(a, b))
    big_case("pow_number", "pow_number", {"x": wave(big, 0.07, 0.1, 2.0)}, lambda x: x ** 3,
             {"e": 3.0})
    for fn, tf, spec in (
            ("exp", torch.exp, wave(big, 0.031, 0.2, 2.0)),
            ("log", torch.log, wave(big, 0.031, 0.2, 0.9, 1.0)),
            ("sqrt", torch.sqrt, wave(big, 0.033, 0.2, 0.9, 1.0)),
            ("rsqrt", torch.rsqrt, wave(big, 0.035, 0.2, 0.9, 1.0)),
            ("tanh", torch.tanh, wave(big, 0.037, 0.2, 3.0)),
            ("sigmoid", torch.sigmoid, wave(big, 0.039, 0.2, 4.0)),
            ("relu", torch.relu, wave(big, 0.041, 0.25, 2.0)),
            ("gelu", F.gelu, wave(big, 0.043, 0.2, 3.0)),
            ("silu", F.silu, wave(big, 0.047, 0.2, 3.0)),
            ("abs", torch.abs, wave(big, 0.049, 0.25, 2.0)),
            ("elu", F.elu, wave(big, 0.051, 0.25, 2.0)),
            ("sin", torch.sin, wave(big, 0.053, 0.2, 3.0))):
        big_case(fn, "unary", {"x": spec}, lambda x, tf=tf: tf(x), {"fn": fn})
    big_case("gelu_tanh", "unary", {"x": wave(big, 0.045, 0.2, 3.0)},
             lambda x: F.gelu(x, approximate="tanh"), {"fn": "gelu", "extra": ["tanh"]})
    big_case("clamp", "clamp", {"x": wave(big, 0.057, 0.2, 2.0)},
             lambda x: torch.clamp(x, -0.5, 0.7), {"lo": -0.5, "hi": 0.7})
    big_case("where", "where", {"cond": pattern(big, 3, 5, 1, "bool"), "a": wave(big, 0.06, 0.1),
                                "b": wave([170], 0.5, 0.3)},
             lambda cond, a, b: torch.where(cond, a, b))
    big_case("masked_fill", "masked_fill", {"x": wave(big, 0.063, 0.1),
                                            "mask": pattern([200, 1], 4, 3, 1, "bool")},
             lambda x, mask: x.masked_fill(mask, -1.0), {"value": -1.0})

    r = [130, 300]  # 39000 elements, rows and columns past the reduce chunks
    x = wave(r, 0.0123, 0.4, 2.0, 0.3)
    big_case("sum_all", "sum", {"x": x}, lambda x: x.sum())
    big_case("sum_dim1", "sum", {"x": x}, lambda x: x.sum(0), {"dim": 1})
    big_case("sum_dim2", "sum", {"x": x}, lambda x: x.sum(1), {"dim": 2})
    big_case("sum_long_row", "sum", {"x": wave([3, 20000], 0.0031, 0.2)}, lambda x: x.sum(1),
             {"dim": 2})
    big_case("sum_long_column", "sum", {"x": wave([20000, 3], 0.0037, 0.2)}, lambda x: x.sum(0),
             {"dim": 1})
    big_case("mean_all", "mean", {"x": x}, lambda x: x.mean())
    big_case("mean_dim2_keepdim", "mean", {"x": x}, lambda x: x.mean(1, keepdim=True),
             {"dim": 2, "keepdim": True})
    big_case("var_all", "var", {"x": x}, lambda x: x.var(), {"correction": 1})
    big_case("var_dim1", "var", {"x": x}, lambda x: x.var(0), {"dim": 1})
    big_case("var_dim2", "var", {"x": x}, lambda x: torch.var(x, 1, unbiased=False),
             {"dim": 2, "correction": 0})
    big_case("max_dim1", "max_values", {"x": x}, lambda x: x.max(0).values, {"dim": 1})
    big_case("max_dim2", "max_values", {"x": x}, lambda x: x.max(1).values, {"dim": 2})
    big_case("min_dim2", "min_values", {"x": x}, lambda x: x.min(1).values, {"dim": 2})
    big_case("max_all", "max_all", {"x": x}, lambda x: x.max())

    mm = lambda a, b: torch.matmul(a, b)
    big_case("matmul_2d", "matmul", {"a": wave([70, 90], 0.013, 0.1), "b": wave([90, 60], 0.017, 0.2)}, mm)
    big_case("matmul_wide", "matmul", {"a": wave([40, 300], 0.011, 0.1),
                                       "b": wave([300, 270], 0.0019, 0.2)}, mm)
    big_case("matmul_batched", "matmul", {"a": wave([3, 40, 50], 0.019, 0.1),
                                          "b": wave([50, 60], 0.023, 0.2)}, mm)
    big_case("matmul_batch_broadcast", "matmul", {"a": wave([2, 1, 30, 40], 0.019, 0.1),
                                                  "b": wave([3, 40, 50], 0.023, 0.2)}, mm)
    big_case("matmul_matrix_vector", "matmul", {"a": wave([300, 400], 0.0007, 0.1),
                                                "b": wave([400], 0.023, 0.2)}, mm)
    big_case("matmul_transposed", "matmul_tt", {"a": wave([90, 70], 0.013, 0.1),
                                                "b": wave([60, 90], 0.017, 0.2)},
             lambda a, b: torch.matmul(a.t(), b.t()))
    big_case("bmm", "bmm", {"a": wave([4, 30, 50], 0.019, 0.1), "b": wave([4, 50, 40], 0.023, 0.2)},
             lambda a, b: torch.bmm(a, b))
    s = wave([40, 1000], 0.0071, 0.3, 4.0)
    big_case("softmax_last", "softmax", {"x": s}, lambda x: torch.softmax(x, -1), {"dim": -1})
    big_case("softmax_first", "softmax", {"x": s}, lambda x: torch.softmax(x, 0), {"dim": 1})
    big_case("log_softmax_last", "log_softmax", {"x": s}, lambda x: torch.log_softmax(x, -1),
             {"dim": -1})
    big_case("log_softmax_first", "log_softmax", {"x": s}, lambda x: torch.log_softmax(x, 0),
             {"dim": 1})
    big_case("layer_norm", "layer_norm", {"x": wave([50, 700], 0.0091, 0.3, 2.0, 0.5),
                                          "weight": wave([700], 0.1, 0.2, 0.5, 1.0),
                                          "bias": wave([700], 0.13, 0.5)},
             lambda x, weight, bias: F.layer_norm(x, (700,), weight, bias), {"norm": 1})
    big_case("cross_entropy_smoothing_ignore", "cross_entropy",
             {"logits": wave([300, 120], 0.0029, 0.1, 3.0), "target": pattern([300], 120, 37, 5)},
             lambda logits, target: F.cross_entropy(logits, target, ignore_index=42,
                                                    label_smoothing=0.1),
             {"opts": {"ignore_index": 43, "label_smoothing": 0.1}})
    big_case("cross_entropy_none", "cross_entropy",
             {"logits": wave([300, 120], 0.0031, 0.1, 3.0), "target": pattern([300], 120, 37, 5)},
             lambda logits, target: F.cross_entropy(logits, target, reduction="none"),
             {"opts": {"reduction": "none"}})
    big_case("mse_loss", "mse_loss", {"input": wave(big, 0.011, 0.1), "target": wave(big, 0.013, 0.2)},
             lambda input, target: F.mse_loss(input, target), {"reduction": "mean"})

    big_case("embedding", "embedding", {"weight": wave([1000, 80], 0.0013, 0.1),
                                        "ids": pattern([20, 30], 97, 389, 11)},  # repeats
             lambda weight, ids: F.embedding(ids, weight))
    big_case("index_select", "index_select", {"x": wave([100, 400], 0.0017, 0.1),
                                              "index": pattern([150], 100, 13, 2)},  # repeats
             lambda x, index: x.index_select(1, index), {"dim": 2})
    big_case("gather", "gather", {"x": wave([100, 400], 0.0019, 0.1),
                                  "index": pattern([100, 350], 400, 13, 2)},
             lambda x, index: x.gather(1, index), {"dim": 2})
    big_case("scatter_add", "scatter_add", {"x": wave([300, 120], 0.0023, 0.1),
                                            "index": pattern([400, 120], 300, 7, 1),
                                            "src": wave([400, 120], 0.0029, 0.2)},
             lambda x, index, src: x.scatter_add(0, index, src), {"dim": 1})
    big_case("cat", "cat", {"a": wave([100, 200], 0.003, 0.1), "b": wave([100, 50], 0.005, 0.1),
                            "c": wave([100, 170], 0.007, 0.1)},
             lambda a, b, c: torch.cat([a, b, c], 1), {"dim": 2})
    big_case("stack", "stack", {"a": wave(big, 0.003, 0.1), "b": wave(big, 0.005, 0.1),
                                "c": wave(big, 0.007, 0.1)},
             lambda a, b, c: torch.stack([a, b, c], 1), {"dim": 2})
    big_case("transpose_contiguous", "transpose_contiguous", {"x": wave([300, 200], 0.0011, 0.1)},
             lambda x: x.t().contiguous(), {"d0": 1, "d1": 2})
    big_case("permute_reshape", "permute_reshape", {"x": wave([30, 40, 50], 0.0011, 0.1)},
             lambda x: x.permute(2, 0, 1).reshape(50, 1200),
             {"dims": [3, 1, 2], "shape": [50, 1200]})


# ---- edge values: kinks hit exactly, ties, large magnitudes ------------------

def edges():
    f = "ops_edge"
    t = lambda *v: torch.tensor(v, dtype=torch.float64)
    kinks = t(-1.5, 0.0, 0.7, -0.0, 2.0, 0.0)
    case(f, "relu_at_zero", "unary", {"x": kinks}, lambda x: torch.relu(x), {"fn": "relu"})
    case(f, "abs_at_zero", "unary", {"x": kinks}, lambda x: torch.abs(x), {"fn": "abs"})
    case(f, "elu_at_zero", "unary", {"x": kinks}, lambda x: F.elu(x, 0.5), {"fn": "elu", "extra": [0.5]})
    case(f, "clamp_at_bounds", "clamp", {"x": t(-0.5, -0.6, 0.7, 0.71, 0.0, 0.7)},
         lambda x: torch.clamp(x, -0.5, 0.7), {"lo": -0.5, "hi": 0.7})
    case(f, "maximum_ties", "maximum", {"a": t(1.0, 2.0, -3.0, 0.5), "b": t(1.0, 1.0, -3.0, 0.75)},
         lambda a, b: torch.maximum(a, b))
    case(f, "minimum_ties", "minimum", {"a": t(1.0, 2.0, -3.0, 0.5), "b": t(1.0, 1.0, -3.0, 0.75)},
         lambda a, b: torch.minimum(a, b))
    case(f, "max_all_ties", "max_all", {"x": t(1.0, 3.0, -2.0, 3.0, 0.5, 3.0)}, lambda x: x.max())
    case(f, "min_all_ties", "min_all", {"x": t(1.0, -3.0, -2.0, -3.0)}, lambda x: x.min())
    case(f, "pow_number_0_at_zero", "pow_number", {"x": kinks}, lambda x: x ** 0, {"e": 0.0})
    case(f, "pow_number_2_at_zero", "pow_number", {"x": kinks}, lambda x: x ** 2, {"e": 2.0})
    case(f, "pow_number_1_at_zero", "pow_number", {"x": kinks}, lambda x: x ** 1, {"e": 1.0})
    case(f, "pow_tensor_zero_base", "pow", {"a": t(0.0, 0.0, 1.5, 2.0), "b": t(2.0, 1.0, 0.5, 0.0)},
         lambda a, b: a ** b)
    case(f, "pow_tensor_negative_base_integer_exponent", "pow",
         {"a": t(-1.5, -2.0, -0.5), "b": t(2.0, 3.0, -1.0)}, lambda a, b: a ** b)
    big = randn(3, 5) * 300
    case(f, "softmax_large_values", "softmax", {"x": big}, lambda x: torch.softmax(x, -1),
         {"dim": -1})
    case(f, "log_softmax_large_values", "log_softmax", {"x": big},
         lambda x: torch.log_softmax(x, -1), {"dim": -1})
    case(f, "softmax_large_offset", "softmax", {"x": randn(3, 5) + 1000}, lambda x: torch.softmax(x, 1),
         {"dim": 2})
    case(f, "cross_entropy_large_logits", "cross_entropy",
         {"logits": randn(4, 5) * 200, "target": torch.tensor([0, 4, 2, 1])},
         lambda logits, target: F.cross_entropy(logits, target, label_smoothing=0.1),
         {"opts": {"label_smoothing": 0.1}})
    case(f, "sigmoid_large", "unary", {"x": t(-40.0, -20.0, 0.0, 20.0, 40.0, -750.0)},
         lambda x: torch.sigmoid(x), {"fn": "sigmoid"})
    case(f, "silu_large", "unary", {"x": t(-40.0, -20.0, 0.0, 20.0, 40.0, -750.0)},
         lambda x: F.silu(x), {"fn": "silu"})
    case(f, "tanh_large", "unary", {"x": t(-40.0, -20.0, 0.0, 20.0, 40.0, 400.0)},
         lambda x: torch.tanh(x), {"fn": "tanh"})
    case(f, "gelu_large", "unary", {"x": t(-40.0, -10.0, 0.0, 10.0, 40.0)},
         lambda x: F.gelu(x), {"fn": "gelu"})
    case(f, "gelu_tanh_large", "unary", {"x": t(-40.0, -10.0, 0.0, 10.0, 40.0)},
         lambda x: F.gelu(x, approximate="tanh"), {"fn": "gelu", "extra": ["tanh"]})
    case(f, "elu_large_negative", "unary", {"x": t(-40.0, -800.0, 3.0)},
         lambda x: F.elu(x), {"fn": "elu"})
    case(f, "layer_norm_offset", "layer_norm",
         {"x": randn(3, 16) + 100, "weight": randn(16), "bias": randn(16)},
         lambda x, weight, bias: F.layer_norm(x, (16,), weight, bias), {"norm": 1})
    case(f, "var_offset", "var", {"x": randn(3, 16) + 100}, lambda x: x.var(1), {"dim": 2})
    case(f, "var_single_element_correction0", "var", {"x": randn(3, 1)},
         lambda x: torch.var(x, 1, unbiased=False), {"dim": 2, "correction": 0})
    case(f, "mean_offset", "mean", {"x": randn(4, 16) + 1e4}, lambda x: x.mean(1), {"dim": 2})
    case(f, "softmax_single", "softmax", {"x": randn(3, 1)}, lambda x: torch.softmax(x, 1),
         {"dim": 2})
    case(f, "log_softmax_single", "log_softmax", {"x": randn(3, 1)},
         lambda x: torch.log_softmax(x, 1), {"dim": 2})
    case(f, "sum_0d", "sum", {"x": randn(())}, lambda x: x.sum())
    case(f, "exp_0d", "unary", {"x": randn(())}, lambda x: torch.exp(x), {"fn": "exp"})
    case(f, "add_0d_0d", "add", {"a": randn(()), "b": randn(())}, lambda a, b: a + b)
    case(f, "matmul_1x1", "matmul", {"a": randn(1, 1), "b": randn(1, 3)}, lambda a, b: a @ b)


# ---- high ranks (index arithmetic up to EM_MAX_DIMS = 8) ---------------------

def ranks():
    f = "ops_rank"
    x6 = randn(2, 1, 3, 2, 1, 2)
    case(f, "sum_rank6_dims", "sum", {"x": x6}, lambda x: x.sum((1, 3, 5), keepdim=True),
         {"dim": [2, 4, 6], "keepdim": True})
    case(f, "mean_rank6_dim", "mean", {"x": x6}, lambda x: x.mean(2), {"dim": 3})
    case(f, "var_rank6_dims", "var", {"x": x6}, lambda x: x.var((0, 3)), {"dim": [1, 4]})
    case(f, "max_rank6_dim", "max", {"x": x6}, lambda x: tuple(x.max(2)), {"dim": 3},
         has_indices=True)
    case(f, "add_rank6_rank4", "add", {"a": x6, "b": randn(3, 2, 1, 1)}, lambda a, b: a + b)
    case(f, "mul_rank5_broadcast_both", "mul", {"a": randn(2, 1, 3, 1, 2), "b": randn(4, 1, 2, 1)},
         lambda a, b: a * b)
    case(f, "where_rank5", "where", {"cond": torch.rand(1, 2, 1, 3, 1) < 0.5,
                                    "a": randn(2, 1, 2, 3, 2), "b": randn(2, 1, 1, 2)},
         lambda cond, a, b: torch.where(cond, a, b))
    case(f, "permute_rank5", "permute", {"x": randn(2, 3, 1, 2, 2)},
         lambda x: x.permute(4, 2, 0, 3, 1), {"dims": [5, 3, 1, 4, 2]})
    case(f, "transpose_reshape_rank5", "transpose_reshape", {"x": randn(2, 3, 1, 2, 2)},
         lambda x: x.transpose(0, 3).reshape(6, 4), {"d0": 1, "d1": 4, "shape": [6, 4]})
    case(f, "matmul_rank5_batch_broadcast", "matmul",
         {"a": randn(2, 1, 2, 3, 4), "b": randn(2, 1, 4, 2)}, lambda a, b: a @ b)
    case(f, "softmax_rank5_dim3", "softmax", {"x": randn(2, 1, 3, 2, 2)},
         lambda x: torch.softmax(x, 2), {"dim": 3})
    case(f, "log_softmax_rank5_dim1", "log_softmax", {"x": randn(2, 1, 3, 2, 2)},
         lambda x: torch.log_softmax(x, 0), {"dim": 1})
    case(f, "layer_norm_rank4_two_dims", "layer_norm",
         {"x": randn(2, 1, 3, 4), "weight": randn(3, 4), "bias": randn(3, 4)},
         lambda x, weight, bias: F.layer_norm(x, (3, 4), weight, bias), {"norm": 2})
    case(f, "cat_rank5_dim4", "cat", {"a": randn(2, 1, 2, 1, 2), "b": randn(2, 1, 2, 3, 2),
                                      "c": randn(2, 1, 2, 2, 2)},
         lambda a, b, c: torch.cat([a, b, c], 3), {"dim": 4})
    case(f, "stack_rank4_dim3", "stack", {"a": randn(2, 1, 3, 2), "b": randn(2, 1, 3, 2),
                                          "c": randn(2, 1, 3, 2)},
         lambda a, b, c: torch.stack([a, b, c], 2), {"dim": 3})
    case(f, "gather_rank4_dim2", "gather",
         {"x": randn(2, 3, 2, 2), "index": torch.randint(0, 3, (2, 4, 2, 2))},
         lambda x, index: x.gather(1, index), {"dim": 2})
    case(f, "scatter_add_rank4_dim3", "scatter_add",
         {"x": randn(2, 2, 3, 2), "index": torch.randint(0, 3, (2, 2, 4, 2)),
          "src": randn(2, 2, 4, 2)},
         lambda x, index, src: x.scatter_add(2, index, src), {"dim": 3})
    case(f, "index_select_rank5_dim4", "index_select",
         {"x": randn(2, 1, 2, 3, 2), "index": torch.tensor([2, 0, 2, 1])},
         lambda x, index: x.index_select(3, index), {"dim": 4})
    case(f, "embedding_ids_rank3", "embedding",
         {"weight": randn(4, 3), "ids": torch.tensor([[[0, 3], [1, 1]], [[2, 0], [3, 3]]])},
         lambda weight, ids: F.embedding(ids, weight))
    x8 = randn(2, 1, 2, 1, 2, 1, 2, 2)
    case(f, "exp_rank8", "unary", {"x": x8}, lambda x: torch.exp(x), {"fn": "exp"})
    case(f, "sum_rank8_dim5", "sum", {"x": x8}, lambda x: x.sum(4), {"dim": 5})
    case(f, "transpose_rank8", "transpose", {"x": x8}, lambda x: x.transpose(0, 7),
         {"d0": 1, "d1": 8})
    case(f, "mul_rank8_broadcast", "mul", {"a": x8, "b": randn(2, 1, 2, 1, 1, 2)},
         lambda a, b: a * b)
    case(f, "squeeze_rank8", "squeeze", {"x": x8}, lambda x: x.squeeze())
    case(f, "unsqueeze_to_rank8", "unsqueeze", {"x": randn(2, 1, 2, 1, 2, 1, 2)},
         lambda x: x.unsqueeze(-1), {"dim": -1})


# ---- everyday helpers (lua/ember/_helpers.lua) -------------------------------

def helpers():
    """triu/tril, sort/topk, std, norm, cumsum, masked_select, flip, roll and
    Torch7 table indexing; their own seed, so the other files stay as they are."""
    torch.manual_seed(20261201)
    f = "ops_helpers"
    x = randn(4, 5)
    b = randn(2, 3, 4)
    for d in (0, 1, -2):
        case(f, "triu_%d" % d, "triu", {"x": x}, lambda x, d=d: torch.triu(x, d), {"diagonal": d})
        case(f, "tril_%d" % d, "tril", {"x": x}, lambda x, d=d: torch.tril(x, d), {"diagonal": d})
    case(f, "triu_batched", "triu", {"x": b}, lambda x: torch.triu(x, 1), {"diagonal": 1})
    case(f, "sort_last", "sort", {"x": x}, lambda x: tuple(torch.sort(x, -1)), {"dim": -1},
         has_indices=True)
    case(f, "sort_dim1_desc", "sort", {"x": b}, lambda x: tuple(torch.sort(x, 0, descending=True)),
         {"dim": 1, "descending": True}, has_indices=True)
    case(f, "topk_last", "topk", {"x": x}, lambda x: tuple(torch.topk(x, 3)), {"k": 3},
         has_indices=True)
    case(f, "topk_smallest_dim2", "topk", {"x": b}, lambda x: tuple(torch.topk(x, 2, 1, largest=False)),
         {"k": 2, "dim": 2, "largest": False}, has_indices=True)
    case(f, "std_all", "std", {"x": x}, lambda x: x.std())
    case(f, "std_dim", "std", {"x": b}, lambda x: x.std(1, keepdim=True),
         {"dim": 2, "keepdim": True})
    case(f, "std_correction0", "std", {"x": x}, lambda x: x.std(-1, correction=0),
         {"dim": -1, "correction": 0})
    case(f, "norm_2_all", "norm", {"x": x}, lambda x: x.norm())
    case(f, "norm_1_dim", "norm", {"x": b}, lambda x: x.norm(1, 2), {"p": 1, "dim": 3})
    case(f, "norm_3_keepdim", "norm", {"x": b}, lambda x: x.norm(3, 1, keepdim=True),
         {"p": 3, "dim": 2, "keepdim": True})
    case(f, "norm_inf_dim", "norm", {"x": x}, lambda x: x.norm(float("inf"), 0),
         {"p": math.inf, "dim": 1})
    case(f, "cumsum_dim1", "cumsum", {"x": randn(9, 3)}, lambda x: x.cumsum(0), {"dim": 1})
    case(f, "cumsum_last", "cumsum", {"x": b}, lambda x: x.cumsum(-1), {"dim": -1})
    case(f, "cumsum_long", "cumsum", {"x": randn(37)}, lambda x: x.cumsum(0), {"dim": 1})
    case(f, "masked_select", "masked_select", {"x": x, "mask": x > 0}, lambda x, mask: x.masked_select(mask))
    case(f, "masked_select_broadcast", "masked_select", {"x": b, "mask": torch.rand(3, 1) > 0.4},
         lambda x, mask: x.masked_select(mask))
    case(f, "flip_one", "flip", {"x": x}, lambda x: x.flip(1), {"dims": [2]})
    case(f, "flip_two", "flip", {"x": b}, lambda x: x.flip(0, -1), {"dims": [1, -1]})
    case(f, "roll_flat", "roll", {"x": x}, lambda x: x.roll(7), {"shifts": 7})
    case(f, "roll_dims", "roll", {"x": b}, lambda x: x.roll((1, -3), (1, 2)),
         {"shifts": [1, -3], "dims": [2, 3]})
    case(f, "index_table_number_range", "index_table", {"x": b}, lambda x: x[1, 0:2],
         {"key": [2, [1, 2]]})
    case(f, "index_table_all_single", "index_table", {"x": b}, lambda x: x[:, 2:3, -2:],
         {"key": [[], [3], [-2, -1]]})


def compat():
    """PyTorch's products and conveniences that ember builds in Lua (mm, bmm,
    dot, outer, square, reciprocal, logsumexp, amax/amin, unbind, tile); their
    own seed and file, so the other files stay as they are."""
    torch.manual_seed(20261202)
    f = "ops_compat"
    case(f, "mm", "mm", {"a": randn(3, 4), "b": randn(4, 2)}, lambda a, b: a.mm(b))
    case(f, "bmm", "bmm", {"a": randn(2, 3, 4), "b": randn(2, 4, 5)}, lambda a, b: a.bmm(b))
    case(f, "dot", "dot", {"a": randn(7), "b": randn(7)}, lambda a, b: a.dot(b))
    case(f, "outer", "outer", {"a": randn(3), "b": randn(4)}, lambda a, b: a.outer(b))
    case(f, "square", "square", {"x": randn(3, 4)}, lambda x: x.square())
    case(f, "reciprocal", "reciprocal", {"x": nonzero(3, 4)}, lambda x: x.reciprocal())
    b = randn(2, 3, 4) * 10
    case(f, "logsumexp_last", "logsumexp", {"x": b}, lambda x: x.logsumexp(-1), {"dim": -1})
    case(f, "logsumexp_dim1_keepdim", "logsumexp", {"x": b}, lambda x: x.logsumexp(0, keepdim=True),
         {"dim": 1, "keepdim": True})
    x = randn(4, 5)
    case(f, "amax_dim1", "amax", {"x": x}, lambda x: x.amax(0), {"dim": 1})
    case(f, "amin_last_keepdim", "amin", {"x": x}, lambda x: x.amin(-1, keepdim=True),
         {"dim": -1, "keepdim": True})
    case(f, "unbind_dim2", "unbind", {"x": randn(3, 4)}, lambda x: list(x.unbind(1)), {"dim": 2}, multi=True)
    case(f, "tile_more_reps", "tile", {"x": randn(2, 3)}, lambda x: x.tile((2, 1, 2)), {"reps": [2, 1, 2]})
    case(f, "tile_fewer_reps", "tile", {"x": randn(2, 1, 3)}, lambda x: x.tile((3,)), {"reps": [3]})


def rounding():
    """floor, ceil, round, trunc and sign: values and their zero gradients,
    inputs kept off the steps (integers; halves for round) so that float32
    lands on the same side; round's exact halves go to even. Their own seed
    and file, so the other files stay as they are."""
    torch.manual_seed(20261203)
    f = "ops_rounding"
    steps = [float(k) for k in range(-6, 7)]
    halves = [k + 0.5 for k in range(-7, 7)]

    def unary(name, fn, x, torch_fn):
        case(f, name, "unary", {"x": x}, lambda x: torch_fn(x), {"fn": fn})

    unary("floor", "floor", away(randn(3, 4) * 3, steps, 0.05), torch.floor)
    unary("ceil", "ceil", away(randn(3, 4) * 3, steps, 0.05), torch.ceil)
    unary("trunc", "trunc", away(randn(3, 4) * 3, steps, 0.05), torch.trunc)
    unary("round", "round", away(randn(3, 4) * 3, halves, 0.05), torch.round)
    unary("round_halves_to_even", "round", torch.tensor(halves[3:11]), torch.round)
    unary("sign", "sign", away(randn(3, 4)), torch.sign)


def einsum():
    """ember.einsum (lua/ember/_einsum.lua, composed from core ops) against
    torch.einsum: contractions, batch letters, implicit output, diagonals,
    "..." broadcasting, size-1 broadcasting, three operands. Its own seed
    and file."""
    torch.manual_seed(20261204)
    f = "ops_einsum"

    def es(name, eq, *shapes):
        names = "abc"[:len(shapes)]
        inputs = {n: randn(*sh) for n, sh in zip(names, shapes)}
        case(f, name, "einsum", inputs, lambda **kw: torch.einsum(eq, *[kw[n] for n in names]), {"eq": eq})

    es("matmul", "ij,jk->ik", (3, 4), (4, 2))
    es("implicit", "ij,jk", (3, 4), (4, 2))
    es("implicit_upper_first", "ba,Ab", (2, 3), (4, 2))
    es("attention_scores", "bhqd,bhkd->bhqk", (2, 2, 3, 4), (2, 2, 5, 4))
    es("attention_values", "bhqk,bhkd->bhqd", (2, 2, 3, 5), (2, 2, 5, 4))
    es("batched", "bij,bjk->bik", (2, 3, 4), (2, 4, 2))
    es("outer", "i,j->ij", (3,), (4,))
    es("dot", "i,i->", (5,), (5,))
    es("column_sums", "ij->j", (3, 4))
    es("transpose", "ijk->kij", (2, 3, 4))
    es("trace", "ii->", (4, 4))
    es("diagonal", "ii->i", (4, 4))
    es("batch_diagonal", "bii->bi", (2, 3, 3))
    es("ellipsis_broadcast", "...ij,...jk->...ik", (2, 3, 4), (4, 5))
    es("ellipsis_summed", "...ij->ij", (2, 3, 4))
    es("size1_broadcast", "ij,ij->ij", (3, 1), (1, 4))
    es("bilinear", "bn,anm,bm->ba", (2, 3), (5, 3, 4), (2, 4))
    es("kept_from_first_and_third", "ij,jk,il->ikl", (2, 3), (3, 4), (2, 5))
    es("size1_broadcast_later", "ij,jk,ik->ik", (1, 2), (2, 3), (4, 3))


def functional():
    """prod, cumprod, repeat_interleave, log1p, expm1, normalize,
    cosine_similarity, softplus and leaky_relu (ember composes most of them
    in Lua); their own seed and file, so the other files stay as they are."""
    torch.manual_seed(20261206)
    f = "ops_functional"
    x = randn(3, 4)
    z = randn(2, 3, 4)
    z[0, 1, 2] = 0.0  # a zero factor: the gradient of a product through it
    case(f, "prod_all", "prod", {"x": x}, lambda x: x.prod())
    case(f, "prod_dim2", "prod", {"x": z}, lambda x: x.prod(1), {"dim": 2})
    case(f, "prod_last_keepdim", "prod", {"x": z}, lambda x: x.prod(-1, keepdim=True), {"dim": -1, "keepdim": True})
    case(f, "prod_odd_dim", "prod", {"x": randn(7, 2)}, lambda x: x.prod(0), {"dim": 1})
    case(f, "cumprod_dim2", "cumprod", {"x": z}, lambda x: x.cumprod(1), {"dim": 2})
    case(f, "cumprod_long", "cumprod", {"x": randn(19) * 0.3 + 1}, lambda x: x.cumprod(0), {"dim": 1})
    case(f, "repeat_interleave_int", "repeat_interleave", {"x": x}, lambda x: x.repeat_interleave(2, 1),
         {"repeats": 2, "dim": 2})
    case(f, "repeat_interleave_counts", "repeat_interleave", {"x": x},
         lambda x: x.repeat_interleave(torch.tensor([1, 0, 3]), 0), {"repeats": [1, 0, 3], "dim": 1})
    case(f, "repeat_interleave_flat", "repeat_interleave", {"x": randn(2, 2)}, lambda x: x.repeat_interleave(3),
         {"repeats": 3})
    case(f, "log1p", "log1p", {"x": positive(3, 4, lo=0.01, hi=3.0) - 0.005}, lambda x: x.log1p())
    case(f, "expm1", "expm1", {"x": randn(3, 4)}, lambda x: x.expm1())
    case(f, "normalize_last", "normalize", {"x": z}, lambda x: F.normalize(x, dim=-1), {"dim": -1})
    case(f, "normalize_p1_dim1", "normalize", {"x": x}, lambda x: F.normalize(x, p=1.0, dim=0), {"p": 1, "dim": 1})
    case(f, "cosine_similarity", "cosine_similarity", {"a": randn(4, 5), "b": randn(4, 5)},
         lambda a, b: F.cosine_similarity(a, b, dim=-1), {"dim": -1})
    case(f, "cosine_similarity_broadcast_dim1", "cosine_similarity", {"a": randn(3, 4), "b": randn(3, 1)},
         lambda a, b: F.cosine_similarity(a, b, dim=0), {"dim": 1})
    case(f, "softplus", "softplus", {"x": randn(3, 4) * 4}, lambda x: F.softplus(x, beta=1.5, threshold=4),
         {"beta": 1.5, "threshold": 4})
    case(f, "leaky_relu", "leaky_relu", {"x": away(randn(3, 4))}, lambda x: F.leaky_relu(x, 0.1),
         {"negative_slope": 0.1})
    img = randn(2, 3, 4, 5)
    case(f, "pad_constant", "pad", {"x": img}, lambda x: F.pad(x, (1, 2, 0, 3), value=0.5),
         {"pad": [1, 2, 0, 3], "mode": "constant", "value": 0.5})
    case(f, "pad_crop", "pad", {"x": img}, lambda x: F.pad(x, (-1, 2, 1, -2)),
         {"pad": [-1, 2, 1, -2], "mode": "constant"})
    for mode in ("reflect", "replicate", "circular"):
        case(f, "pad_" + mode, "pad", {"x": img}, lambda x, mode=mode: F.pad(x, (2, 1, 3, 2), mode=mode),
             {"pad": [2, 1, 3, 2], "mode": mode})


def more():
    """The tensor functions ember composes in lua/ember/_functional_more.lua
    and the activations and losses added to _functional.lua, read by
    tests/lua/ops_more_spec.lua (not ops_parity_spec: some inputs hold NaN
    and infinities). Its own seed and file, so the other files stay as they
    are. A differentiable case is op "call": args.fn is called with
    args.call, where "@k" names input k (also inside a nested list), as
    ember.<fn>(...) and, with args.method, as a method of its first
    argument too. A non-differentiable case (value = true) lists inputs and
    outs as {shape =, dtype =, data =} written as they are -- int64 values
    are NOT shifted, and the indices among the outputs are already 1-based."""
    torch.manual_seed(20261207)
    f = "ops_more"

    def call(name, fn, inputs, torch_fn, args, method=False, multi=False):
        a = {"fn": fn, "call": args}
        if method:
            a["method"] = True
        case(f, name, "call", inputs, torch_fn, a, multi=multi)

    class Flat:
        """A tensor as {shape =, dtype =, data =}, int64 values as they are."""

        def __init__(self, t):
            self.t = t.detach()

        def lua(self, writer, indent):
            return Writer.tensor(writer, self.t)

    def value(name, fn, inputs, torch_fn, args):
        """A non-differentiable case: torch_fn(**inputs) is a tensor or a tuple."""
        res = torch_fn(**inputs)
        outs = list(res) if isinstance(res, (tuple, list)) else [res]
        c = {"op": "value", "value": True, "inputs": {k: Flat(v) for k, v in inputs.items()},
             "args": {"fn": fn, "call": args}, "outs": [Flat(o) for o in outs]}
        assert name not in FILES.setdefault(f, {}), name
        FILES[f][name] = c

    x = randn(3, 4)
    # clamp with one bound, and with tensor bounds (broadcast)
    call("clamp_min_number", "clamp_min", {"x": away(x, (0.2,))}, lambda x: x.clamp_min(0.2), ["@x", 0.2], True)
    call("clamp_max_number", "clamp_max", {"x": away(x, (-0.1,))}, lambda x: x.clamp_max(-0.1), ["@x", -0.1], True)
    lo, hi = randn(3, 4) * 0.3 - 0.6, randn(4) * 0.3 + 0.6
    xc = x.clone()
    for bound in (lo, hi.expand(3, 4)):
        xc = torch.where((xc - bound).abs() < 0.1, bound + 0.15, xc)
    call("clamp_min_tensor", "clamp_min", {"x": xc, "lo": lo}, lambda x, lo: torch.clamp_min(x, lo), ["@x", "@lo"], True)
    call("clamp_max_tensor", "clamp_max", {"x": xc, "hi": hi}, lambda x, hi: torch.clamp_max(x, hi), ["@x", "@hi"], True)
    call("clamp_tensors", "clamp", {"x": xc, "lo": lo, "hi": hi}, lambda x, lo, hi: torch.clamp(x, lo, hi),
         ["@x", "@lo", "@hi"], True)
    call("clamp_tensor_number", "clamp", {"x": away(xc, (0.5,)), "lo": lo}, lambda x, lo: torch.clamp(x, lo, torch.tensor(0.5)),
         ["@x", "@lo", 0.5], True)
    # activations
    call("hardtanh", "hardtanh", {"x": away(randn(3, 4), (-0.5, 0.8))},
         lambda x: F.hardtanh(x, -0.5, 0.8), ["@x", -0.5, 0.8])
    call("hardtanh_opts", "hardtanh", {"x": away(randn(3, 4) * 2, (-1.0, 1.0))}, lambda x: F.hardtanh(x),
         ["@x", {"max_val": 1}])
    call("relu6", "relu6", {"x": away(randn(3, 4) * 4, (0.0, 6.0))}, lambda x: F.relu6(x), ["@x"])
    call("hardswish", "hardswish", {"x": away(randn(3, 4) * 3, (-3.0, 3.0))}, lambda x: F.hardswish(x), ["@x"])
    call("hardsigmoid", "hardsigmoid", {"x": away(randn(3, 4) * 3, (-3.0, 3.0))}, lambda x: F.hardsigmoid(x), ["@x"])
    call("mish", "mish", {"x": randn(3, 4) * 3}, lambda x: F.mish(x), ["@x"])
    call("glu_last", "glu", {"x": randn(3, 6)}, lambda x: F.glu(x), ["@x"])
    call("glu_dim1", "glu", {"x": randn(4, 2, 3)}, lambda x: F.glu(x, 0), ["@x", 1])
    call("logit", "logit", {"x": positive(3, 4, lo=0.05, hi=0.95)}, lambda x: torch.logit(x), ["@x"], True)
    call("logit_eps", "logit", {"x": away(positive(3, 4, lo=0.0, hi=1.0), (0.2, 0.8), 0.05)},
         lambda x: torch.logit(x, 0.2), ["@x", 0.2], True)
    # combinations
    a, b = randn(3, 4), randn(3, 4)
    call("lerp_low", "lerp", {"a": a, "b": b}, lambda a, b: torch.lerp(a, b, 0.3), ["@a", "@b", 0.3], True)
    call("lerp_high", "lerp", {"a": a, "b": b}, lambda a, b: torch.lerp(a, b, 0.8), ["@a", "@b", 0.8], True)
    w = away(positive(3, 4, lo=0.0, hi=1.0), (0.5,), 0.05)
    call("lerp_tensor", "lerp", {"a": a, "b": randn(4), "w": w}, lambda a, b, w: torch.lerp(a, b, w),
         ["@a", "@b", "@w"], True)
    call("addcmul", "addcmul", {"x": randn(3, 4), "t1": randn(3, 1), "t2": randn(4)},
         lambda x, t1, t2: torch.addcmul(x, t1, t2, value=0.5), ["@x", "@t1", "@t2", {"value": 0.5}], True)
    call("addcdiv", "addcdiv", {"x": randn(3, 4), "t1": randn(3, 4), "t2": nonzero(3, 4)},
         lambda x, t1, t2: torch.addcdiv(x, t1, t2, value=-2), ["@x", "@t1", "@t2", {"value": -2}], True)
    call("addcmul_default", "addcmul", {"x": randn(3, 4), "t1": randn(3, 4), "t2": randn(3, 4)},
         lambda x, t1, t2: torch.addcmul(x, t1, t2), ["@x", "@t1", "@t2"], True)
    # unary math
    call("exp2", "exp2", {"x": randn(3, 4) * 3}, lambda x: torch.exp2(x), ["@x"], True)
    call("log2", "log2", {"x": positive(3, 4, lo=0.1, hi=10.0)}, lambda x: torch.log2(x), ["@x"], True)
    call("log10", "log10", {"x": positive(3, 4, lo=0.1, hi=100.0)}, lambda x: torch.log10(x), ["@x"], True)
    call("sinh", "sinh", {"x": randn(3, 4) * 3}, lambda x: torch.sinh(x), ["@x"], True)
    call("sinh_small", "sinh", {"x": randn(3, 4) * 1e-3}, lambda x: torch.sinh(x), ["@x"], True)
    call("cosh", "cosh", {"x": randn(3, 4) * 3}, lambda x: torch.cosh(x), ["@x"], True)
    call("tan", "tan", {"x": randn(3, 4) * 0.6}, lambda x: torch.tan(x), ["@x"], True)
    xz = randn(3, 4)
    xz[0, 1] = 0.0
    xz[2, 3] = 0.0
    call("xlogy", "xlogy", {"x": xz, "y": positive(3, 4, lo=0.1, hi=3.0)}, lambda x, y: torch.xlogy(x, y), ["@x", "@y"], True)
    call("xlogy_number", "xlogy", {"y": positive(3, 4, lo=0.1, hi=3.0)}, lambda y: torch.xlogy(2.5, y),
         [2.5, "@y"])
    # remainders: the quotients kept off the integers, so that float32 rounds the same way
    bb = nonzero(3, 4, lo=0.5, hi=2.0)
    frac = positive(3, 4, lo=0.1, hi=0.9)
    aa = bb * (torch.randint(-4, 4, (3, 4)).double() + frac)
    call("remainder", "remainder", {"a": aa, "b": bb}, lambda a, b: torch.remainder(a, b), ["@a", "@b"], True)
    call("fmod", "fmod", {"a": aa, "b": bb}, lambda a, b: torch.fmod(a, b), ["@a", "@b"], True)
    xr = 1.5 * (torch.randint(-4, 4, (3, 4)).double() + positive(3, 4, lo=0.1, hi=0.9))
    call("remainder_number", "remainder", {"a": xr}, lambda a: torch.remainder(a, -1.5), ["@a", -1.5], True)
    call("fmod_number", "fmod", {"a": xr}, lambda a: torch.fmod(a, 1.5), ["@a", 1.5], True)
    xn = randn(3, 4)
    xn[0, 0], xn[1, 2], xn[2, 1] = math.nan, math.inf, -math.inf
    call("nan_to_num", "nan_to_num", {"x": xn}, lambda x: torch.nan_to_num(x, 0.5, 3.0, -4.0),
         ["@x", {"nan": 0.5, "posinf": 3, "neginf": -4}], True)
    # losses
    inp = F.log_softmax(randn(3, 5), -1)
    tgt = F.softmax(randn(3, 5), -1)
    for red in ("batchmean", "sum", "mean", "none"):
        call("kl_div_" + red, "kl_div", {"input": inp, "target": tgt},
             lambda input, target, red=red: F.kl_div(input, target, reduction=red),
             ["@input", "@target", {"reduction": red}])
    call("kl_div_log_target", "kl_div", {"input": inp, "target": F.log_softmax(randn(3, 5), -1)},
         lambda input, target: F.kl_div(input, target, reduction="batchmean", log_target=True),
         ["@input", "@target", {"reduction": "batchmean", "log_target": True}])
    tz = tgt.clone()
    tz[1, 2] = 0.0  # a zero target: no loss, PyTorch's NaN gradient for the target
    call("kl_div_zero_target", "kl_div", {"input": inp, "target": tz},
         lambda input, target: F.kl_div(input, target, reduction="sum"), ["@input", "@target", {"reduction": "sum"}])
    hi_, ht_ = randn(4, 5) * 2, randn(4, 5)
    d = hi_ - ht_
    hi_ = torch.where((d.abs() - 0.7).abs() < 0.05, hi_ + 0.2 * torch.sign(d), hi_)
    for red in ("mean", "sum", "none"):
        call("huber_loss_" + red, "huber_loss", {"input": hi_, "target": ht_},
             lambda input, target, red=red: F.huber_loss(input, target, reduction=red, delta=0.7),
             ["@input", "@target", {"reduction": red, "delta": 0.7}])
    # matrices and shapes
    v = randn(4)
    for k in (0, 2, -1):
        call("diag_vector_%d" % k, "diag", {"x": v}, lambda x, k=k: torch.diag(x, k), ["@x", k], True)
    m = randn(3, 5)
    for k in (0, 1, -2, 4):
        call("diag_matrix_%d" % k, "diag", {"x": m}, lambda x, k=k: torch.diag(x, k), ["@x", k], True)
    call("trace_square", "trace", {"x": randn(4, 4)}, lambda x: torch.trace(x), ["@x"], True)
    call("trace_wide", "trace", {"x": m}, lambda x: torch.trace(x), ["@x"], True)
    call("diff_last", "diff", {"x": randn(3, 5)}, lambda x: torch.diff(x), ["@x"], True)
    call("diff_n2_dim1", "diff", {"x": randn(5, 3)}, lambda x: torch.diff(x, 2, 0), ["@x", 2, 1], True)
    call("diff_prepend_append", "diff", {"x": randn(2, 4), "p": randn(2, 1), "q": randn(2, 2)},
         lambda x, p, q: torch.diff(x, 1, -1, p, q), ["@x", {"prepend": "@p", "append": "@q"}], True)
    call("mv", "mv", {"a": randn(3, 4), "v": randn(4)}, lambda a, v: torch.mv(a, v), ["@a", "@v"], True)
    t3 = randn(2, 3, 4)
    call("movedim_one", "movedim", {"x": t3}, lambda x: torch.movedim(x, 0, -1), ["@x", 1, -1], True)
    call("movedim_two", "movedim", {"x": t3}, lambda x: torch.movedim(x, (0, 1), (2, 0)),
         ["@x", [1, 2], [3, 1]], True)
    call("moveaxis", "moveaxis", {"x": t3}, lambda x: torch.moveaxis(x, 2, 0), ["@x", 3, 1], True)
    call("swapaxes", "swapaxes", {"x": t3}, lambda x: torch.swapaxes(x, 0, 2), ["@x", 1, 3], True)
    call("swapdims", "swapdims", {"x": t3}, lambda x: torch.swapdims(x, -1, 1), ["@x", -1, 2], True)
    call("broadcast_to", "broadcast_to", {"x": randn(3, 1)}, lambda x: torch.broadcast_to(x, (2, 3, 4)),
         ["@x", [2, 3, 4]], True)
    call("hstack_1d", "hstack", {"a": randn(2), "b": randn(3)}, lambda a, b: torch.hstack((a, b)), [["@a", "@b"]])
    call("hstack_2d", "hstack", {"a": randn(2, 2), "b": randn(2, 3)}, lambda a, b: torch.hstack((a, b)),
         [["@a", "@b"]])
    call("vstack", "vstack", {"a": randn(3), "b": randn(2, 3)}, lambda a, b: torch.vstack((a, b)), [["@a", "@b"]])
    call("dstack", "dstack", {"a": randn(2, 3), "b": randn(2, 3, 2)}, lambda a, b: torch.dstack((a, b)),
         [["@a", "@b"]])
    call("dstack_1d", "dstack", {"a": randn(3), "b": randn(3)}, lambda a, b: torch.dstack((a, b)), [["@a", "@b"]])
    call("tensor_split_sections", "tensor_split", {"x": randn(7, 2)}, lambda x: list(torch.tensor_split(x, 3)),
         ["@x", 3], True, multi=True)
    # torch's split points 1 and 4 are ember's start positions 2 and 5
    call("tensor_split_indices", "tensor_split", {"x": randn(2, 6)},
         lambda x: list(torch.tensor_split(x, [1, 4], dim=1)), ["@x", [2, 5], 2], True, multi=True)
    # not differentiable: values only
    ic = torch.randint(0, 3, (3, 4)).double() * randn(3, 4).sign()
    value("count_nonzero_all", "count_nonzero", {"x": ic}, lambda x: torch.count_nonzero(x), ["@x"])
    value("count_nonzero_dim1", "count_nonzero", {"x": ic}, lambda x: torch.count_nonzero(x, 0), ["@x", 1])
    value("count_nonzero_dims", "count_nonzero", {"x": ic}, lambda x: torch.count_nonzero(x, (0, 1)),
          ["@x", [1, -1]])
    ia = torch.randint(-7, 8, (3, 4))
    ib = torch.randint(1, 4, (3, 4)) * torch.where(torch.rand(3, 4) < 0.5, -1, 1)
    value("floor_divide_float", "floor_divide", {"a": aa, "b": bb}, lambda a, b: torch.floor_divide(a, b), ["@a", "@b"])
    value("floor_divide_int", "floor_divide", {"a": ia, "b": ib}, lambda a, b: torch.floor_divide(a, b), ["@a", "@b"])
    value("remainder_int", "remainder", {"a": ia, "b": ib}, lambda a, b: torch.remainder(a, b), ["@a", "@b"])
    value("fmod_int", "fmod", {"a": ia, "b": ib}, lambda a, b: torch.fmod(a, b), ["@a", "@b"])
    value("remainder_int_number", "remainder", {"a": ia}, lambda a: torch.remainder(a, -3), ["@a", -3])
    # indices among the outputs: 1-based for ember (+ 1)
    value("nonzero", "nonzero", {"x": ic}, lambda x: torch.nonzero(x) + 1, ["@x"])
    value("nonzero_3d", "nonzero", {"x": torch.rand(2, 3, 2) < 0.4}, lambda x: torch.nonzero(x) + 1, ["@x"])
    value("nonzero_as_tuple", "nonzero", {"x": ic}, lambda x: tuple(i + 1 for i in torch.nonzero(x, as_tuple=True)),
          ["@x", {"as_tuple": True}])
    value("argwhere", "argwhere", {"x": ic}, lambda x: torch.argwhere(x) + 1, ["@x"])
    iu = torch.randint(-3, 4, (4, 5))
    value("unique", "unique", {"x": iu}, lambda x: torch.unique(x), ["@x"])
    value("unique_inverse_counts", "unique", {"x": iu},
          lambda x: (lambda o, i, c: (o, i + 1, c))(*torch.unique(x, return_inverse=True, return_counts=True)),
          ["@x", {"return_inverse": True, "return_counts": True}])
    value("unique_float_counts", "unique", {"x": ic}, lambda x: torch.unique(x, return_counts=True),
          ["@x", {"return_counts": True}])
    ibin = torch.randint(0, 6, (12,))
    value("bincount", "bincount", {"x": ibin}, lambda x: torch.bincount(x), ["@x"])
    value("bincount_minlength", "bincount", {"x": ibin}, lambda x: torch.bincount(x, minlength=9),
          ["@x", {"minlength": 9}])
    value("bincount_weights", "bincount", {"x": ibin, "w": randn(12)},
          lambda x, w: torch.bincount(x, weights=w), ["@x", {"weights": "@w"}])
    seq = torch.tensor([-1.0, 0.0, 0.0, 0.5, 2.0])
    vals = torch.tensor([[-2.0, 0.0, 0.25], [0.5, 3.0, -1.0]])
    value("searchsorted_left", "searchsorted", {"s": seq, "v": vals},
          lambda s, v: torch.searchsorted(s, v) + 1, ["@s", "@v"])
    value("searchsorted_right", "searchsorted", {"s": seq, "v": vals},
          lambda s, v: torch.searchsorted(s, v, right=True) + 1, ["@s", "@v", {"right": True}])
    s2 = torch.sort(randn(3, 6), -1).values
    value("searchsorted_batched", "searchsorted", {"s": s2, "v": randn(3, 4)},
          lambda s, v: torch.searchsorted(s, v, side="right") + 1, ["@s", "@v", {"side": "right"}])
    value("bucketize", "bucketize", {"x": vals, "b": seq}, lambda x, b: torch.bucketize(x, b) + 1, ["@x", "@b"])
    value("bucketize_right", "bucketize", {"x": vals, "b": seq},
          lambda x, b: torch.bucketize(x, b, right=True) + 1, ["@x", "@b", {"right": True}])


def special():
    """atan, asin, acos, erfinv, lgamma, digamma (core ops) and atan2,
    logcumsumexp (lua/ember/_special.lua), read by tests/lua/ops_more_spec.lua
    in more()'s "call" format. Its own seed and file, so the other files
    stay as they are."""
    torch.manual_seed(20261208)
    f = "ops_special"

    def call(name, fn, inputs, torch_fn, args, method=True):
        a = {"fn": fn, "call": args}
        if method:
            a["method"] = True
        case(f, name, "call", inputs, torch_fn, a)

    def unit(*shape):
        return torch.rand(*shape) * 1.9 - 0.95

    # the poles of lgamma and digamma (0, -1, -2, ...) kept 0.3 away
    poles = [float(-k) for k in range(0, 8)]
    gam = away(randn(3, 4) * 3, poles, 0.2)
    call("atan", "atan", {"x": randn(3, 4) * 3}, lambda x: torch.atan(x), ["@x"])
    call("asin", "asin", {"x": unit(3, 4)}, lambda x: torch.asin(x), ["@x"])
    call("acos", "acos", {"x": unit(3, 4)}, lambda x: torch.acos(x), ["@x"])
    call("erfinv", "erfinv", {"x": unit(3, 4)}, lambda x: torch.erfinv(x), ["@x"])
    call("lgamma", "lgamma", {"x": gam}, lambda x: torch.lgamma(x), ["@x"])
    call("digamma", "digamma", {"x": gam}, lambda x: torch.digamma(x), ["@x"])
    call("lgamma_large", "lgamma", {"x": positive(2, 3, lo=5.0, hi=300.0)}, lambda x: torch.lgamma(x), ["@x"])
    # every quadrant, and y broadcast against x
    call("atan2", "atan2", {"y": randn(3, 4), "x": randn(3, 4)}, lambda y, x: torch.atan2(y, x), ["@y", "@x"])
    call("atan2_broadcast", "atan2", {"y": randn(3, 1), "x": randn(4)}, lambda y, x: torch.atan2(y, x), ["@y", "@x"])
    # torch dim 1 is ember's 2; a spread of 60 in float64 and float32 alike
    xs = randn(3, 6) * 3
    xs[0, 0] = -60.0
    xs[1, 3] = 40.0
    call("logcumsumexp", "logcumsumexp", {"x": xs}, lambda x: torch.logcumsumexp(x, 1), ["@x", 2])
    call("logcumsumexp_dim1", "logcumsumexp", {"x": randn(5, 2, 3)}, lambda x: torch.logcumsumexp(x, 0), ["@x", 1])
    call("logcumsumexp_neg_dim", "logcumsumexp", {"x": randn(2, 7)}, lambda x: torch.logcumsumexp(x, -1), ["@x", -1])


def main():
    elementwise()
    reductions()
    nn_ops()
    indexing()
    views()
    edges()
    ranks()
    large()
    helpers()
    compat()
    rounding()
    einsum()
    functional()
    more()
    special()
    for name in sorted(FILES):
        path = os.path.join(HERE, "fixtures", name + ".lua")
        WRITER.write(path, "tests/gen_op_fixtures.py", FILES[name])
        print("wrote %s (%d cases, %d bytes)" % (path, len(FILES[name]), os.path.getsize(path)))


if __name__ == "__main__":
    main()
