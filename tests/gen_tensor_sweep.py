"""A differential sweep of ember's tensor API against PyTorch 1.13:
tests/fixtures/tensor_sweep.lua, read by tests/lua/tensor_sweep_spec.lua.

    /usr/bin/python3 tests/gen_tensor_sweep.py

Each case is an ember expression (Lua, over inputs a, b, c, ...), its
inputs and PyTorch's outputs of the same call (the torch function beside it
here). Indices are 1-based on ember's side: an input named in `idx` is
written +1, an output position named in `out_idx` is PyTorch's +1.
float64 cases with grad = True also hold the gradients of sum(out[1] * w)
for random w. A case with `err` must raise an error whose message contains
it. Random data from a fixed seed; the file stays small (< 1 MB).
"""
import math
import random

import torch

from fixture_writer import Writer, lua_float

SEED = 1234
DT = {torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
      torch.bool: "bool", torch.bfloat16: "bfloat16"}


def lf(v):
    if v == 0.0 and math.copysign(1.0, v) < 0:
        return "-0.0"
    return lua_float(v)


class SweepWriter(Writer):
    """Every tensor names its dtype; -0.0 keeps its sign."""

    def tensor(self, t):
        t = t.detach()
        shape = "{" + ", ".join(str(s) for s in t.shape) + "}"
        flat = t.reshape(-1).tolist()
        if t.dtype == torch.bool:
            data = ",".join("true" if v else "false" for v in flat)
        elif t.dtype == torch.int64:
            data = ",".join(str(int(v)) for v in flat)
        else:
            data = ",".join(lf(float(v)) for v in flat)
        return '{shape=%s,dtype="%s",data={%s}}' % (shape, DT[t.dtype], data)


CASES = []
rng = random.Random(SEED)
torch.manual_seed(SEED)


def case(op, expr, fn, inputs, idx=(), out_idx=(), grad=False, err=None, known=None, zsign=False, optional=False):
    """fn(*inputs.values()) is PyTorch's value; expr is ember's spelling of it.
    optional: left out where PyTorch refuses it (a dtype its op lacks)."""
    c = {"op": op, "expr": expr, "inputs": {}}
    for k, v in inputs.items():
        c["inputs"][k] = (v + 1) if k in idx else v
    if err is not None:
        try:
            fn(*[v.clone() for v in inputs.values()])
        except Exception:
            pass
        else:
            raise AssertionError("torch accepts the error case %s: %s" % (op, expr))
        c["err"] = err
        CASES.append(c)
        return
    targs = {}
    for k, v in inputs.items():
        v = v.clone()
        if grad and v.dtype == torch.float64:
            v.requires_grad_(True)
        targs[k] = v
    try:
        out = fn(*targs.values())
    except (RuntimeError, TypeError):
        if optional:
            return
        raise
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    want = []
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            o = torch.tensor(o)
        o = o.detach()
        if i + 1 in out_idx:
            o = o + 1
        want.append(o)
    c["want"] = want
    if zsign:
        c["zsign"] = True
    if known:
        c["known"] = known
    if grad:
        o = outs[0]
        w = torch.randn(o.shape, dtype=torch.float64)
        (o * w).sum().backward()
        c["w"] = w
        c["grads"] = {k: (v.grad if v.grad is not None else torch.zeros_like(v))
                      for k, v in targs.items() if v.requires_grad}
    CASES.append(c)


# ---------------------------------------------------------------- data
SPECIAL = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 5e-324, -1e-310, 1e-40]


def rnd(shape, dtype=torch.float64, special=False, lo=None, hi=None, ties=False):
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if dtype == torch.int64:
        return torch.randint(-5, 6, shape)
    if ties:
        x = torch.randint(-3, 4, shape).double()
    elif lo is not None:
        x = torch.rand(shape, dtype=torch.float64) * (hi - lo) + lo
    else:
        x = torch.randn(shape, dtype=torch.float64) * 2
    if special and x.numel() > 0:
        flat = x.view(-1)
        for i in range(flat.numel()):
            if rng.random() < 0.3:
                flat[i] = rng.choice(SPECIAL)
    return x.to(dtype)


SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((0, 3), (3,)),
               ((2, 0), (1, 1)), ((), ()), ((1,), (2, 3, 1)), ((5,), (1,))]


def lua_tbl(xs):
    return "{" + ", ".join(str(x) for x in xs) + "}"


# ---------------------------------------------------------------- broadcasting binary ops
def binary():
    ops = [("add", "a:add(b)", lambda a, b: a + b), ("sub", "a - b", lambda a, b: a - b),
           ("mul", "a * b", lambda a, b: a * b), ("div", "a / b", lambda a, b: a / b),
           ("pow", "a:pow(b)", lambda a, b: torch.pow(a, b)),
           ("maximum", "ember.maximum(a, b)", torch.maximum), ("minimum", "a:minimum(b)", torch.minimum),
           ("eq", "a:eq(b)", torch.eq), ("ne", "a:ne(b)", torch.ne), ("lt", "a:lt(b)", torch.lt),
           ("le", "a:le(b)", torch.le), ("gt", "a:gt(b)", torch.gt), ("ge", "a:ge(b)", torch.ge)]
    for name, expr, fn in ops:
        for sa, sb in SHAPE_PAIRS:
            special = rng.random() < 0.4
            a, b = rnd(sa, special=special), rnd(sb, special=special)
            if name == "pow":
                a = a.abs()
            case(name, expr, fn, {"a": a, "b": b}, grad=(not special and name not in ("eq", "ne", "lt", "le", "gt", "ge")))
    for sa, sb in SHAPE_PAIRS[:6]:
        c = rnd(sa, torch.bool)
        case("where", "ember.where(c, a, b)", lambda c, a, b: torch.where(c, a, b),
             {"c": c, "a": rnd(sb), "b": rnd(sa)}, grad=True)
        case("where", "ember.where(c, a, 2.5)", lambda c, a: torch.where(c, a, 2.5), {"c": c, "a": rnd(sb)})
        case("where", "a:where(c, b)", lambda c, a, b: a.where(c, b), {"c": c, "a": rnd(sa), "b": rnd(sb)})


# ---------------------------------------------------------------- dtype promotion
def promotion():
    dts = [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16]
    for da in dts:
        for db in dts:
            a, b = rnd((2, 3), da), rnd((3,), db)
            case("promote_add", "a + b", lambda a, b: a + b, {"a": a, "b": b})
            case("promote_mul", "a * b", lambda a, b: a * b, {"a": a, "b": b})
            if not (da == torch.bool and db == torch.bool):
                case("promote_div", "a / b", lambda a, b: a / b, {"a": a, "b": b + (b == 0).to(b.dtype) if db != torch.bool else b})
            case("promote_maximum", "ember.maximum(a, b)", torch.maximum, {"a": a, "b": b})
            case("promote_lt", "a:lt(b)", torch.lt, {"a": a, "b": b})
            case("promote_where", "ember.where(c, a, b)", lambda c, a, b: torch.where(c, a, b),
                 {"c": rnd((2, 3), torch.bool), "a": a, "b": b})
        a = rnd((2, 3), da)
        case("scalar_add_int", "a + 2", lambda a: a + 2, {"a": a})
        case("scalar_mul_float", "a * 2.5", lambda a: a * 2.5, {"a": a})
        case("scalar_rsub", "3 - a", lambda a: 3 - a, {"a": a}) if da != torch.bool else None
        case("scalar_div_int", "a / 2", lambda a: a / 2, {"a": a})
        case("scalar_pow", "a:pow(2)", lambda a: a.pow(2), {"a": a}) if da != torch.bool else None
        case("scalar_gt", "a:gt(0.5)", lambda a: a.gt(0.5), {"a": a})
        case("scalar_0d_tensor", "a + b", lambda a, b: a + b, {"a": a, "b": rnd((), torch.float64)})
        case("scalar_0d_int", "a * b", lambda a, b: a * b, {"a": a, "b": torch.tensor(3)})
        case("sum_dtype", "a:sum()", lambda a: a.sum(), {"a": a})
        case("mean_float", "a:mean()", lambda a: a.mean(), {"a": a}) if da.is_floating_point else None
        case("cumsum_dtype", "a:cumsum(2)", lambda a: a.cumsum(1), {"a": a})


# ---------------------------------------------------------------- reductions
def reductions():
    x = rnd((2, 3, 4))
    specs = [([1], False), ([-1], True), ([1, 3], False), ([-1, -3], True), ([2], True)]
    for dims, keep in specs:
        td = tuple(d - 1 if d > 0 else d for d in dims)
        L = lua_tbl(dims)
        for name in ("sum", "mean", "logsumexp", "amax", "amin"):
            case(name, "a:%s(%s, %s)" % (name, L, str(keep).lower()),
                 (lambda n, td, keep: lambda a: getattr(torch, n)(a, td, keepdim=keep))(name, td, keep),
                 {"a": x}, grad=True)
        for unb in (True, False):
            case("var", "a:var(%s, %s, %s)" % (L, str(unb).lower(), str(keep).lower()),
                 (lambda td, unb, keep: lambda a: a.var(td, unbiased=unb, keepdim=keep))(td, unb, keep), {"a": x}, grad=True)
            case("std", "a:std(%s, %s, %s)" % (L, str(unb).lower(), str(keep).lower()),
                 (lambda td, unb, keep: lambda a: a.std(td, unbiased=unb, keepdim=keep))(td, unb, keep), {"a": x}, grad=True)
        case("var_correction", "a:var(%s, {correction = 2, keepdim = %s})" % (L, str(keep).lower()),
             (lambda td, keep: lambda a: a.var(td, correction=2, keepdim=keep))(td, keep), {"a": x}, grad=True)
        for p in (1, 2, 3, "math.huge"):
            tp = float("inf") if p == "math.huge" else p
            case("norm", "a:norm(%s, %s, %s)" % (p, L, str(keep).lower()),
                 (lambda tp, td, keep: lambda a: a.norm(tp, td, keepdim=keep))(tp, td, keep), {"a": x}, grad=True)
    for d in (1, 2, -1, 3):
        td = d - 1 if d > 0 else d
        for keep in (False, True):
            for name in ("prod",):
                case(name, "a:prod(%d, %s)" % (d, str(keep).lower()),
                     (lambda td, keep: lambda a: a.prod(td, keepdim=keep))(td, keep), {"a": x}, grad=True)
            xt = rnd((2, 3, 4), ties=True)
            case("max_dim", "a:max(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: tuple(a.max(td, keepdim=keep)))(td, keep), {"a": xt}, out_idx=(2,), grad=True)
            case("min_dim", "a:min(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: tuple(a.min(td, keepdim=keep)))(td, keep), {"a": xt}, out_idx=(2,), grad=True)
            case("argmax", "a:argmax(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: a.argmax(td, keepdim=keep))(td, keep), {"a": xt}, out_idx=(1,))
            case("argmin", "a:argmin(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: a.argmin(td, keepdim=keep))(td, keep), {"a": xt}, out_idx=(1,))
            b = rnd((2, 3, 4), torch.bool)
            case("any", "a:any(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: a.any(td, keepdim=keep))(td, keep), {"a": b})
            case("all", "a:all(%d, %s)" % (d, str(keep).lower()),
                 (lambda td, keep: lambda a: a.all(td, keepdim=keep))(td, keep), {"a": b})
        case("cumsum", "a:cumsum(%d)" % d, (lambda td: lambda a: a.cumsum(td))(td), {"a": x}, grad=True)
        case("cumprod", "a:cumprod(%d)" % d, (lambda td: lambda a: a.cumprod(td))(td), {"a": x}, grad=True)
    xt = rnd((4, 6), ties=True)
    case("argmax_all", "a:argmax()", lambda a: a.argmax(), {"a": xt}, out_idx=(1,))
    case("argmin_all", "a:argmin()", lambda a: a.argmin(), {"a": xt}, out_idx=(1,))
    case("max_all", "a:max()", lambda a: a.max(), {"a": xt})
    case("prod_all", "a:prod()", lambda a: a.prod(), {"a": rnd((3, 3))}, grad=True)
    case("prod_zero_grad", "a:prod(2)", lambda a: a.prod(1), {"a": torch.tensor([[0., 2., 3.], [0., 0., 2.]], dtype=torch.float64)}, grad=True)
    case("any_all", "a:any()", lambda a: a.any(), {"a": rnd((3, 4), torch.bool)})
    case("all_float", "a:all()", lambda a: a.all(), {"a": rnd((3, 4), special=True)})
    case("sum_empty", "a:sum(1)", lambda a: a.sum(0), {"a": rnd((0, 3))})
    case("prod_empty", "a:prod(1)", lambda a: a.prod(0), {"a": rnd((0, 3))}, grad=True)
    case("prod_empty_all", "a:prod()", lambda a: a.prod(), {"a": rnd((2, 0))}, grad=True)
    case("mean_empty", "a:mean(1)", lambda a: a.mean(0), {"a": rnd((0, 3))})
    case("amax_0d", "a:amax()", lambda a: a.amax(), {"a": rnd(())})
    case("sum_0d_dim", "a:sum(1)", lambda a: a.sum(0), {"a": rnd(())})
    case("logsumexp_inf", "a:logsumexp(2)", lambda a: a.logsumexp(1),
         {"a": torch.tensor([[float("-inf")] * 3, [float("inf"), 1., 2.], [1000., 1000., -1.]], dtype=torch.float64)})
    case("sum_nan", "a:sum(2)", lambda a: a.sum(1), {"a": rnd((3, 4), special=True)})
    case("max_nan", "a:max(2)", lambda a: tuple(a.max(1)), {"a": torch.tensor([[1., float("nan"), 3.], [2., 1., 0.]], dtype=torch.float64)}, out_idx=(2,))
    case("amax_nan", "a:amax(2)", lambda a: a.amax(1), {"a": torch.tensor([[1., float("nan"), 3.], [2., 1., 0.]], dtype=torch.float64)})
    case("cumsum_int", "a:cumsum(1)", lambda a: a.cumsum(0), {"a": rnd((5,), torch.int64)})
    case("cumprod_bool", "a:cumprod(1)", lambda a: a.cumprod(0), {"a": rnd((5,), torch.bool)})
    case("var_single", "a:var(1)", lambda a: a.var(0), {"a": rnd((1, 3))})
    case("std_all", "a:std()", lambda a: a.std(), {"a": rnd((4, 3))}, grad=True)
    case("norm_all", "a:norm()", lambda a: a.norm(), {"a": rnd((4, 3))}, grad=True)
    case("norm_zero_grad", "a:norm()", lambda a: a.norm(), {"a": torch.zeros(3, dtype=torch.float64)}, grad=True)
    case("mean_f32", "a:mean(2)", lambda a: a.mean(1), {"a": rnd((3, 7), torch.float32)})
    case("sum_bf16", "a:sum(2)", lambda a: a.sum(1), {"a": rnd((3, 7), torch.bfloat16)})


# ---------------------------------------------------------------- views
def views():
    x = rnd((3, 4, 5))
    V = [("transpose", "a:transpose(1, 3)", lambda a: a.transpose(0, 2)),
         ("permute", "a:permute(3, 1, 2)", lambda a: a.permute(2, 0, 1)),
         ("permute_neg", "a:permute(-1, -3, -2)", lambda a: a.permute(-1, -3, -2)),
         ("narrow", "a:narrow(2, 2, 2)", lambda a: a.narrow(1, 1, 2)),
         ("narrow_neg", "a:narrow(-1, 3, 3)", lambda a: a.narrow(-1, 2, 3)),
         ("select", "a:select(2, 4)", lambda a: a.select(1, 3)),
         ("select_neg", "a:select(-1, -1)", lambda a: a.select(-1, -1)),
         ("unfold", "a:unfold(3, 2, 2)", lambda a: a.unfold(2, 2, 2)),
         ("unfold_overlap", "a:unfold(2, 3, 1)", lambda a: a.unfold(1, 3, 1)),
         ("reshape_nc", "a:transpose(1, 2):reshape(4, -1)", lambda a: a.transpose(0, 1).reshape(4, -1)),
         ("contig_view", "a:transpose(1, 2):contiguous():view(-1, 5)", lambda a: a.transpose(0, 1).contiguous().view(-1, 5)),
         ("view_split", "a:view(3, 2, 2, 5)", lambda a: a.view(3, 2, 2, 5)),
         ("flatten", "a:flatten()", lambda a: a.flatten()),
         ("flatten_range", "a:flatten(2, 3)", lambda a: a.flatten(1, 2)),
         ("flatten_neg", "a:transpose(1, 2):flatten(1, -2)", lambda a: a.transpose(0, 1).flatten(0, -2)),
         ("unflatten", "a:unflatten(2, {2, 2})", lambda a: a.unflatten(1, (2, 2))),
         ("unflatten_neg1", "a:unflatten(-1, {-1, 1})", lambda a: a.unflatten(-1, (-1, 1))),
         ("unsqueeze", "a:unsqueeze(4)", lambda a: a.unsqueeze(3)),
         ("unsqueeze_neg", "a:unsqueeze(-1)", lambda a: a.unsqueeze(-1)),
         ("unsqueeze_neg4", "a:unsqueeze(-4)", lambda a: a.unsqueeze(-4)),
         ("chunk", "a:chunk(2, 2)", lambda a: a.chunk(2, 1)),
         ("chunk_uneven", "a:chunk(3, 3)", lambda a: a.chunk(3, 2)),
         ("chunk_more", "a:chunk(4, 1)", lambda a: a.chunk(4, 0)),
         ("split", "a:split(2, 3)", lambda a: a.split(2, 2)),
         ("split_sizes", "a:split({1, 3}, 2)", lambda a: a.split([1, 3], 1)),
         ("tensor_split", "a:tensor_split(3, 2)", lambda a: a.tensor_split(3, 1)),
         ("tensor_split_idx", "a:tensor_split({2, 4}, 3)", lambda a: a.tensor_split([1, 3], 2)),
         ("movedim", "a:movedim(1, -1)", lambda a: a.movedim(0, -1)),
         ("t_view", "a:select(1, 2):t()", lambda a: a[1].t()),
         ("diagonal", "a:diagonal(0, 2, 3)", lambda a: a.diagonal(0, 1, 2)),
         ("flip", "a:flip({1, 3})", lambda a: a.flip([0, 2])),
         ("roll", "a:roll(2, 3)", lambda a: a.roll(2, 2))]
    for name, expr, fn in V:
        case(name, expr, fn, {"a": x}, grad=True)
    y = rnd((3, 1, 2))
    case("expand", "a:expand(2, 3, 4, 2)", lambda a: a.expand(2, 3, 4, 2), {"a": y}, grad=True)
    case("expand_m1", "a:expand(-1, 5, -1)", lambda a: a.expand(-1, 5, -1), {"a": y}, grad=True)
    case("squeeze", "a:squeeze()", lambda a: a.squeeze(), {"a": y}, grad=True)
    case("squeeze_dim", "a:squeeze(2)", lambda a: a.squeeze(1), {"a": y}, grad=True)
    case("squeeze_noop", "a:squeeze(1)", lambda a: a.squeeze(0), {"a": y}, grad=True)
    case("squeeze_neg", "a:squeeze(-2)", lambda a: a.squeeze(-2), {"a": y}, grad=True)
    case("expand_reshape", "a:expand(3, 4, 2):reshape(-1)", lambda a: a.expand(3, 4, 2).reshape(-1), {"a": y}, grad=True)
    z = rnd((0, 4))
    case("reshape_empty", "a:reshape(2, 0, 4)", lambda a: a.reshape(2, 0, 4), {"a": z})
    case("chunk_empty", "a:chunk(2, 2)", lambda a: a.chunk(2, 1), {"a": z})
    s = rnd(())
    case("unsqueeze_0d", "a:unsqueeze(1)", lambda a: a.unsqueeze(0), {"a": s})
    case("view_0d", "a:view(1, 1)", lambda a: a.view(1, 1), {"a": s})
    case("flatten_0d", "a:flatten()", lambda a: a.flatten(), {"a": s})


# ---------------------------------------------------------------- indexing
def indexing():
    x = rnd((4, 5, 3))
    I = [("index_int", "a[2]", lambda a: a[1]),
         ("index_neg", "a[-1]", lambda a: a[-1]),
         ("index_pair", "a[{2, -2}]", lambda a: a[1, -2]),
         ("index_range", "a[{{2, 3}, {}, 1}]", lambda a: a[1:3, :, 0]),
         ("slice_step", "a:slice(2, 1, 5, 2)", lambda a: a[:, 0:5:2]),
         ("slice_step3", "a:slice(1, 2, 4, 2)", lambda a: a[1:4:2]),
         ("slice_neg", "a:slice(2, -3, -1)", lambda a: a[:, -3:]),
         ("index_select", "a:index_select(2, i)", None),
         ("take_along_dim", "a:take_along_dim(j, 2)", None)]
    i = torch.tensor([4, 0, 0, 2])
    j = torch.randint(0, 5, (4, 2, 3))
    for name, expr, fn in I:
        if name == "index_select":
            case(name, expr, lambda a, i: a.index_select(1, i), {"a": x, "i": i}, idx={"i"}, grad=True)
        elif name == "take_along_dim":
            case(name, expr, lambda a, j: torch.take_along_dim(a, j, 1), {"a": x, "j": j}, idx={"j"}, grad=True)
        else:
            case(name, expr, fn, {"a": x}, grad=True)
    m = rnd((4, 5, 3), torch.bool)
    case("bool_mask", "a[m]", lambda a, m: a[m], {"a": x, "m": m}, grad=True)
    case("bool_mask_rows", "a[m]", lambda a, m: a[m], {"a": x, "m": torch.tensor([True, False, True, True])}, grad=True)
    case("masked_select", "a:masked_select(m)", lambda a, m: a.masked_select(m), {"a": x, "m": m[0, :, :1]}, grad=True)
    case("masked_fill", "a:masked_fill(m, -1.5)", lambda a, m: a.masked_fill(m, -1.5), {"a": x, "m": m[:, :1]}, grad=True)
    case("masked_fill_nan", "a:masked_fill(m, 0/0)", lambda a, m: a.masked_fill(m, float("nan")), {"a": x, "m": m})
    case("masked_fill_int", "a:masked_fill(m, 7)", lambda a, m: a.masked_fill(m, 7), {"a": rnd((3, 3), torch.int64), "m": rnd((3, 3), torch.bool)})
    case("index_tensor", "a[{i}]", lambda a, i: a[i], {"a": x, "i": torch.tensor([3, 0, 0, 2])}, idx={"i"}, grad=True)
    case("index_tensor_2d", "a[i]", lambda a, i: a[i], {"a": x, "i": torch.tensor([[0, 3], [3, 3]])}, idx={"i"}, grad=True)
    case("index_tensor_2d_table", "a[{i}]", lambda a, i: a[i], {"a": x, "i": torch.tensor([[0, 3], [3, 3]])}, idx={"i"}, grad=True)
    case("index_tensor_2d_mid", "a[{{}, i, -1}]", lambda a, i: a[:, i, -1], {"a": x, "i": torch.tensor([[0, 4], [2, 2], [1, 0]])}, idx={"i"}, grad=True)
    case("index_tensor_0d_table", "a[{{2, 3}, i}]", lambda a, i: a[1:3, i], {"a": x, "i": torch.tensor(4)}, idx={"i"}, grad=True)
    g = torch.randint(0, 4, (3, 5, 3))
    case("gather", "a:gather(1, g)", lambda a, g: a.gather(0, g), {"a": x, "g": g}, idx={"g"}, grad=True)
    case("gather_neg", "a:gather(-1, g)", lambda a, g: a.gather(-1, g), {"a": x, "g": torch.randint(0, 3, (4, 5, 2))}, idx={"g"}, grad=True)
    src = rnd((3, 5, 3))
    case("scatter", "a:scatter(1, g, s)", lambda a, g, s: a.scatter(0, g, s), {"a": x, "g": torch.stack([torch.randperm(4)[:3] for _ in range(15)], 1).view(3, 5, 3), "s": src}, idx={"g"}, grad=True)
    case("scatter_add", "a:scatter_add(1, g, s)", lambda a, g, s: a.scatter_add(0, g, s), {"a": x, "g": g, "s": src}, idx={"g"}, grad=True)
    case("scatter_scalar", "a:scatter(2, g, 9.5)", lambda a, g: a.scatter(1, g, 9.5), {"a": x, "g": torch.randint(0, 5, (4, 2, 3))}, idx={"g"})
    case("scatter_add_small", "a:scatter_add(2, g, s)", lambda a, g, s: a.scatter_add(1, g, s), {"a": x, "g": torch.randint(0, 5, (2, 2, 2)), "s": rnd((3, 3, 3))}, idx={"g"})
    case("index_put", "a:index_put({i}, v)", lambda a, i, v: a.index_put((i,), v), {"a": x, "i": torch.tensor([3, 1]), "v": rnd((5, 3))}, idx={"i"}, grad=True)
    case("index_put_acc", "a:index_put({i}, v, true)", lambda a, i, v: a.index_put((i,), v, accumulate=True), {"a": x, "i": torch.tensor([3, 1, 3, 3]), "v": rnd((5, 3))}, idx={"i"}, grad=True)
    case("index_put_2", "a:index_put({i, j}, v, true)", lambda a, i, j, v: a.index_put((i, j), v, accumulate=True), {"a": x, "i": torch.tensor([0, 0, 2]), "j": torch.tensor([1, 1, 4]), "v": rnd((3,))}, idx={"i", "j"}, grad=True)
    case("index_put_bool", "a:index_put({m}, v)", lambda a, m, v: a.index_put((m,), v), {"a": rnd((3, 4)), "m": rnd((3, 4), torch.bool), "v": torch.tensor(2.5, dtype=torch.float64)})
    case("index_add", "a:index_add(1, i, s)", lambda a, i, s: a.index_add(0, i, s), {"a": x, "i": torch.tensor([1, 1, 3]), "s": src}, idx={"i"}, grad=True)
    case("index_fill", "a:index_fill(2, i, -2)", lambda a, i: a.index_fill(1, i, -2), {"a": x, "i": torch.tensor([0, 4])}, idx={"i"}, grad=True)
    case("take", "a:take(i)", lambda a, i: a.take(i), {"a": x, "i": torch.tensor([[0, 59], [7, 7]])}, idx={"i"}, grad=True)
    case("nonzero", "a:nonzero()", lambda a: a.nonzero(), {"a": rnd((3, 4), torch.bool)}, out_idx=(1,))
    case("index_select_empty", "a:index_select(1, i)", lambda a, i: a.index_select(0, i), {"a": x, "i": torch.zeros(0, dtype=torch.int64)}, idx={"i"})
    case("bool_mask_none", "a[m]", lambda a, m: a[m], {"a": rnd((2, 3)), "m": torch.zeros(2, 3, dtype=torch.bool)})


# ---------------------------------------------------------------- sorting
def sorting():
    x = rnd((4, 7), ties=True)
    for d in (1, 2, -1):
        td = d - 1 if d > 0 else d
        for desc in (False, True):
            case("sort_stable", "a:sort{dim = %d, descending = %s, stable = true}" % (d, str(desc).lower()),
                 (lambda td, desc: lambda a: tuple(torch.sort(a, dim=td, descending=desc, stable=True)))(td, desc),
                 {"a": x}, out_idx=(2,), grad=True)
            case("argsort_stable", "a:argsort{dim = %d, descending = %s, stable = true}" % (d, str(desc).lower()),
                 (lambda td, desc: lambda a: torch.argsort(a, dim=td, descending=desc, stable=True) if hasattr(torch.argsort, "__call__") and False else torch.sort(a, dim=td, descending=desc, stable=True)[1])(td, desc),
                 {"a": x}, out_idx=(1,))
    xs = torch.randperm(28).double().view(4, 7)
    for k in (1, 3):
        for largest in (True, False):
            case("topk", "a:topk(%d, 2, %s)" % (k, str(largest).lower()),
                 (lambda k, largest: lambda a: tuple(a.topk(k, 1, largest=largest)))(k, largest), {"a": xs}, out_idx=(2,), grad=True)
        case("kthvalue", "a:kthvalue(%d, 1)" % k, (lambda k: lambda a: tuple(a.kthvalue(k, 0)))(k), {"a": xs}, out_idx=(2,), grad=True)
    case("sort_nan", "a:sort()", lambda a: tuple(a.sort()), {"a": torch.tensor([3., float("nan"), -1., float("inf"), float("-inf"), 0.], dtype=torch.float64)}, out_idx=(2,))
    case("sort_nan_desc", "a:sort(1, true)", lambda a: tuple(a.sort(0, True)), {"a": torch.tensor([3., float("nan"), -1., float("inf"), float("-inf"), 0.], dtype=torch.float64)}, out_idx=(2,))
    case("sort_int", "a:sort()", lambda a: tuple(a.sort(stable=True)), {"a": rnd((9,), torch.int64)}, out_idx=(2,))
    case("topk_int", "a:topk(3)", lambda a: tuple(a.topk(3)), {"a": torch.tensor([5, 1, 9, 3, 7])}, out_idx=(2,))
    case("kthvalue_keep", "a:kthvalue(2, -1, true)", lambda a: tuple(a.kthvalue(2, -1, True)), {"a": xs}, out_idx=(2,))
    u = rnd((3, 6), ties=True)
    case("unique", "ember.unique(a)", lambda a: torch.unique(a), {"a": u})
    case("unique_inv_counts", "ember.unique(a, {return_inverse = true, return_counts = true})",
         lambda a: tuple(torch.unique(a, return_inverse=True, return_counts=True)), {"a": u}, out_idx=(2,))
    case("unique_int", "a:unique{return_counts = true}", lambda a: tuple(torch.unique(a, return_counts=True)), {"a": rnd((10,), torch.int64)})
    case("unique_bool", "ember.unique(a)", lambda a: torch.unique(a), {"a": rnd((10,), torch.bool)})
    case("unique_dim", "ember.unique(a, {dim = 1})", lambda a: torch.unique(a, dim=0),
         {"a": torch.tensor([[1., 2.], [0., 5.], [1., 2.]], dtype=torch.float64)})
    case("unique_dim2", "ember.unique(a, {dim = -1, return_inverse = true, return_counts = true})",
         lambda a: tuple(torch.unique(a, dim=-1, return_inverse=True, return_counts=True)),
         {"a": torch.tensor([[1, 0, 1, 1], [2, 3, 2, 1], [0, 0, 0, 5]])}, out_idx=(2,))
    case("unique_dim_3d", "a:unique{dim = 2, return_inverse = true}", lambda a: tuple(torch.unique(a, dim=1, return_inverse=True)),
         {"a": torch.randint(0, 2, (2, 6, 2)).double()}, out_idx=(2,))
    case("unique_consecutive_int", "a:unique_consecutive()", lambda a: torch.unique_consecutive(a),
         {"a": torch.tensor([[3, 3, 1], [1, 2, 2]])})
    case("unique_consecutive_empty", "ember.unique_consecutive(a, {return_counts = true})",
         lambda a: tuple(torch.unique_consecutive(a, return_counts=True)), {"a": rnd((0,))})
    case("unique_consecutive", "ember.unique_consecutive(a, {return_inverse = true, return_counts = true})",
         lambda a: tuple(torch.unique_consecutive(a, return_inverse=True, return_counts=True)),
         {"a": torch.tensor([1., 1., 2., 2., 3., 1., 1., 2.], dtype=torch.float64)}, out_idx=(2,))
    case("searchsorted", "ember.searchsorted(a, b)", lambda a, b: torch.searchsorted(a, b),
         {"a": torch.tensor([1., 3., 5., 7.], dtype=torch.float64), "b": torch.tensor([0., 3., 6., 9.], dtype=torch.float64)}, out_idx=(1,))
    case("searchsorted_right", "ember.searchsorted(a, b, {right = true})", lambda a, b: torch.searchsorted(a, b, right=True),
         {"a": torch.tensor([[1., 3., 5., 7.], [2., 2., 2., 4.]], dtype=torch.float64), "b": torch.tensor([[0., 3., 7., 9.], [2., 2., 5., 1.]], dtype=torch.float64)}, out_idx=(1,))
    case("bucketize", "ember.bucketize(a, b)", lambda a, b: torch.bucketize(a, b),
         {"a": rnd((3, 4), ties=True), "b": torch.tensor([-2., 0., 1., 3.], dtype=torch.float64)}, out_idx=(1,))


# ---------------------------------------------------------------- elementwise math
def elementwise():
    x = rnd((17,), special=True)
    unary = [("exp", torch.exp), ("log1p", torch.log1p), ("expm1", torch.expm1), ("erf", torch.erf),
             ("lgamma", torch.lgamma), ("digamma", torch.digamma), ("sigmoid", torch.sigmoid),
             ("tanh", torch.tanh), ("abs", torch.abs), ("neg", torch.neg), ("sqrt", torch.sqrt),
             ("rsqrt", torch.rsqrt), ("floor", torch.floor), ("ceil", torch.ceil), ("trunc", torch.trunc),
             ("round", torch.round), ("sign", torch.sign), ("sin", torch.sin), ("log", torch.log),
             ("reciprocal", torch.reciprocal), ("frac", torch.frac), ("relu", torch.relu)]
    for name, fn in unary:
        case(name, "a:%s()" % name, fn, {"a": x}, zsign=True)
        case(name, "a:%s()" % name, fn, {"a": rnd((3, 4), lo=0.1, hi=3)}, grad=name not in ("floor", "ceil", "trunc", "round", "sign"))
        case(name + "_f32", "a:%s()" % name, fn, {"a": rnd((2, 5), torch.float32, lo=0.1, hi=3)})
        case(name + "_bf16", "a:%s()" % name, fn, {"a": rnd((2, 5), torch.bfloat16, lo=0.1, hi=3)})
        case(name + "_f32_special", "a:%s()" % name, fn, {"a": x.float()}, zsign=True)
        case(name + "_bf16_special", "a:%s()" % name, fn, {"a": x.to(torch.bfloat16)}, zsign=True)
    case("erfinv", "a:erfinv()", torch.erfinv, {"a": torch.tensor([-1., -0.999, -0.5, -0.0, 0.0, 0.3, 0.9999, 1., 1.5, float("nan")], dtype=torch.float64)}, zsign=True)
    case("erfinv", "a:erfinv()", torch.erfinv, {"a": rnd((3, 3), lo=-0.9, hi=0.9)}, grad=True)
    case("lgamma_poles", "a:lgamma()", torch.lgamma, {"a": torch.tensor([0., -1., -2.5, 1., 2., 0.5, -0.0, 171.5], dtype=torch.float64)})
    case("digamma_poles", "a:digamma()", torch.digamma, {"a": torch.tensor([0., -0.0, -1., -2.5, 1., 1e-300, 30.], dtype=torch.float64)})
    case("round_half_even", "a:round()", torch.round, {"a": torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, 4503599627370497.0, -0.2], dtype=torch.float64)}, zsign=True)
    case("round_f32", "a:round()", torch.round, {"a": torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 8388609.0], dtype=torch.float32)})
    case("round_decimals", "a:round{decimals = 1}", lambda a: torch.round(a, decimals=1), {"a": torch.tensor([0.25, 0.35, -1.45, 2.5], dtype=torch.float64)})
    case("softplus", "ember.softplus(a)", torch.nn.functional.softplus, {"a": rnd((3, 4))}, grad=True)
    case("softplus_beta", "ember.softplus(a, 2, 1)", lambda a: torch.nn.functional.softplus(a, 2, 1), {"a": rnd((3, 4)) * 3}, grad=True)
    case("softplus_special", "ember.softplus(a)", torch.nn.functional.softplus, {"a": x})
    for sa, sb in SHAPE_PAIRS[:4]:
        a, b = rnd(sa, special=True), rnd(sb, special=True)
        case("atan2", "ember.atan2(a, b)", torch.atan2, {"a": a, "b": b}, zsign=True)
        case("fmod", "a:fmod(b)", torch.fmod, {"a": a, "b": b}, zsign=True)
        case("remainder", "a:remainder(b)", torch.remainder, {"a": a, "b": b}, zsign=True)
        case("floor_divide", "a:floor_divide(b)", torch.floor_divide, {"a": a, "b": b})
        case("isclose", "ember.isclose(a, b)", lambda a, b: torch.isclose(*torch.broadcast_tensors(a, b)), {"a": a, "b": b})
        case("isclose_nan", "ember.isclose(a, b, {equal_nan = true})", lambda a, b: torch.isclose(*torch.broadcast_tensors(a, b), equal_nan=True), {"a": a, "b": b})
        a, b = rnd(sa), rnd(sb)
        case("atan2", "ember.atan2(a, b)", torch.atan2, {"a": a, "b": b}, grad=True)
        case("fmod", "a:fmod(b)", torch.fmod, {"a": a * 3, "b": b}, grad=True)
        case("remainder", "a:remainder(b)", torch.remainder, {"a": a * 3, "b": b}, grad=True)
    big_a = torch.tensor([7.5, 1e17, 12345.678, -1e300, 0.3, -7.5, 5.0, -0.0], dtype=torch.float64)
    big_b = torch.tensor([0.1, 3.3, 0.1, 3.0, 0.1, 0.1, float("inf"), 2.0], dtype=torch.float64)
    for name in ("fmod", "remainder", "floor_divide"):
        case(name + "_exact", "a:%s(b)" % name, getattr(torch, name), {"a": big_a, "b": big_b}, zsign=True)
        case(name + "_exact_f32", "a:%s(b)" % name, getattr(torch, name), {"a": big_a.float(), "b": big_b.float()}, zsign=True)
    ia, ib = torch.tensor([7, -7, 7, -7, 0, 5]), torch.tensor([2, 2, -2, -2, 3, -5])
    case("fmod_int", "a:fmod(b)", torch.fmod, {"a": ia, "b": ib})
    case("remainder_int", "a:remainder(b)", torch.remainder, {"a": ia, "b": ib})
    case("floor_divide_int", "a:floor_divide(b)", torch.floor_divide, {"a": ia, "b": ib})
    case("remainder_scalar", "a:remainder(-3)", lambda a: a.remainder(-3), {"a": rnd((6,)) * 4}, zsign=True)
    case("fmod_scalar", "a:fmod(2.5)", lambda a: a.fmod(2.5), {"a": rnd((6,)) * 4}, zsign=True)
    case("div_floor", "a:div(b, {rounding_mode = 'floor'})", lambda a, b: a.div(b, rounding_mode="floor"), {"a": ia, "b": ib})
    case("div_trunc", "a:div(b, {rounding_mode = 'trunc'})", lambda a, b: a.div(b, rounding_mode="trunc"), {"a": rnd((6,)) * 5, "b": rnd((6,))})
    lo, hi = rnd((3, 4)) - 1, rnd((3, 4)) + 1
    case("clamp_tensor", "a:clamp(l, h)", lambda a, l, h: a.clamp(l, h), {"a": rnd((3, 4)) * 2, "l": lo, "h": hi}, grad=True)
    case("clamp_bcast", "a:clamp(l, h)", lambda a, l, h: a.clamp(l, h), {"a": rnd((3, 4)) * 2, "l": rnd((4,)) - 1, "h": rnd((3, 1)) + 1}, grad=True)
    case("clamp_min_gt_max", "a:clamp(1, -1)", lambda a: a.clamp(1, -1), {"a": rnd((5,))})
    case("clamp_nan", "a:clamp(-1, 1)", lambda a: a.clamp(-1, 1), {"a": x})
    case("clamp_min_only", "a:clamp(l)", lambda a, l: a.clamp(l), {"a": rnd((3, 4)), "l": rnd((3, 4))}, grad=True)
    case("clamp_int", "a:clamp(-2, 3)", lambda a: a.clamp(-2, 3), {"a": rnd((8,), torch.int64)})
    case("clamp_int_float", "a:clamp(-2.5, 3.5)", lambda a: a.clamp(-2.5, 3.5), {"a": rnd((8,), torch.int64)})
    case("nan_to_num", "a:nan_to_num()", torch.nan_to_num, {"a": x})
    case("nan_to_num_args", "a:nan_to_num(0.5, 9, -9)", lambda a: a.nan_to_num(0.5, 9., -9.), {"a": x})
    case("nan_to_num_f32", "a:nan_to_num()", torch.nan_to_num, {"a": x.float()})
    case("nan_to_num_int", "a:nan_to_num()", torch.nan_to_num, {"a": rnd((4,), torch.int64)})
    case("sigmoid_special", "a:sigmoid()", torch.sigmoid, {"a": torch.tensor([-800., -40., 40., 800.], dtype=torch.float64)})
    case("isnan", "a:isnan()", torch.isnan, {"a": x})
    case("isinf", "a:isinf()", torch.isinf, {"a": x})
    case("isfinite", "a:isfinite()", torch.isfinite, {"a": x})
    case("signbit_mul", "a * -1", lambda a: a * -1, {"a": x}, zsign=True)
    case("pow_special", "a:pow(b)", torch.pow, {"a": torch.tensor([0., 0., -0.0, 2., -2., float("nan"), 1., float("inf"), -1.], dtype=torch.float64),
                                                   "b": torch.tensor([0., -1., -1., 0.5, 0.5, 0., float("nan"), -0.5, float("inf")], dtype=torch.float64)}, zsign=True)
    case("pow_int", "a:pow(b)", torch.pow, {"a": torch.tensor([2, -3, 0, 5]), "b": torch.tensor([3, 3, 0, 2])})
    case("int_div_true", "a / b", lambda a, b: a / b, {"a": ia, "b": ib})
    case("xlogy", "ember.xlogy(a, b)", torch.xlogy, {"a": torch.tensor([0., 0., 1., 2.], dtype=torch.float64), "b": torch.tensor([0., float("nan"), 2., 0.], dtype=torch.float64)})
    case("logaddexp", "ember.logaddexp(a, b)", torch.logaddexp, {"a": rnd((3, 4)), "b": rnd((4,))}, grad=True)
    case("hypot", "ember.hypot(a, b)", torch.hypot, {"a": rnd((3, 4)), "b": rnd((4,))}, grad=True)
    case("lerp", "a:lerp(b, 0.3)", lambda a, b: a.lerp(b, 0.3), {"a": rnd((3, 4)), "b": rnd((4,))}, grad=True)
    case("addcmul", "a:addcmul(b, c, {value = 0.5})", lambda a, b, c: a.addcmul(b, c, value=0.5), {"a": rnd((3, 4)), "b": rnd((4,)), "c": rnd((3, 1))}, grad=True)
    case("logit", "a:logit()", torch.logit, {"a": rnd((3, 4), lo=0.05, hi=0.95)}, grad=True)
    case("logcumsumexp", "a:logcumsumexp(2)", lambda a: a.logcumsumexp(1), {"a": rnd((3, 4))}, grad=True)
    case("cummax", "a:cummax(2)", lambda a: tuple(a.cummax(1)), {"a": rnd((3, 5), ties=True)}, out_idx=(2,), grad=True)
    case("diff", "a:diff()", lambda a: a.diff(), {"a": rnd((3, 5))}, grad=True)


# ---------------------------------------------------------------- dtypes through reductions and scalars
def dtype_more():
    def opt_case(*args, **kw):
        case(*args, optional=True, **kw)

    for dt in (torch.int64, torch.bool, torch.bfloat16, torch.float32):
        a = rnd((3, 4), dt)
        opt_case("prod_dtype", "a:prod(2)", lambda a: a.prod(1), {"a": a})
        opt_case("amax_dtype", "a:amax({1, 2})", lambda a: a.amax((0, 1)), {"a": a})
        opt_case("max_dim_dtype", "a:max(1)", lambda a: tuple(a.max(0)), {"a": a}, out_idx=(2,))
        opt_case("argmax_dtype", "a:argmax(2)", lambda a: a.argmax(1), {"a": a}, out_idx=(1,))
        opt_case("cumprod_dtype", "a:cumprod(1)", lambda a: a.cumprod(0), {"a": a})
        opt_case("sum_dim_dtype", "a:sum({1, 2}, true)", lambda a: a.sum((0, 1), keepdim=True), {"a": a})
        opt_case("where_scalars", "ember.where(a:ne(0), 1, 0)", lambda a: torch.where(a != 0, 1, 0), {"a": a})
        opt_case("where_bool_scalars", "ember.where(a:ne(0), false, true)", lambda a: torch.where(a != 0, False, True), {"a": a})
        opt_case("where_float_scalars", "ember.where(a:ne(0), 1.5, 0)", lambda a: torch.where(a != 0, 1.5, 0.), {"a": a})
        opt_case("clamp_dtype", "a:clamp(0, 1)", lambda a: a.clamp(0, 1), {"a": a}) if dt != torch.bool else None
        opt_case("neg_cmp_scalar", "a:le(-0.5)", lambda a: a.le(-0.5), {"a": a})
        opt_case("sort_dtype", "a:sort(2, true)", lambda a: tuple(a.sort(stable=True, dim=1, descending=True)), {"a": a}, out_idx=(2,)) if dt != torch.bool else None
        opt_case("logsumexp_dtype", "a:logsumexp(2)", lambda a: a.logsumexp(1), {"a": a}) if dt != torch.bool else None
    x = rnd((3, 4))
    case("sum_dtype_opt", "a:sum(2, false, {dtype = 'float64'})", lambda a: a.sum(1, dtype=torch.float64), {"a": rnd((3, 4), torch.float32)})
    case("mean_dtype_opt", "a:mean({dtype = 'float64'})", lambda a: a.mean(dtype=torch.float64), {"a": rnd((3, 4), torch.int64)})
    case("cumsum_dtype_opt", "a:cumsum(2, {dtype = 'float64'})", lambda a: a.cumsum(1, dtype=torch.float64), {"a": rnd((3, 4), torch.int64)})
    for p in ("0", "-math.huge", "'fro'", "0.5"):
        tp = {"0": 0, "-math.huge": -float("inf"), "'fro'": "fro", "0.5": 0.5}[p]
        case("norm_p", "a:norm(%s, 2)" % p, (lambda tp: lambda a: a.norm(tp, 1))(tp), {"a": x}, grad=p != "0")
    case("var_empty", "a:var(1)", lambda a: a.var(0), {"a": rnd((0, 3))})
    case("std_correction0", "a:std(2, {correction = 0})", lambda a: a.std(1, correction=0), {"a": x}, grad=True)
    case("topk_empty", "a:topk(0, 2)", lambda a: tuple(a.topk(0, 1)), {"a": x}, out_idx=(2,))
    # which of tied elements kthvalue's index names is unspecified in PyTorch: values only
    case("kthvalue_ties", "(a:kthvalue(2, 2))", lambda a: a.kthvalue(2, 1).values, {"a": torch.tensor([[1., 1., 1.], [2., 0., 2.]], dtype=torch.float64)})
    case("bf16_scalar_mul", "a * 2.5", lambda a: a * 2.5, {"a": rnd((5,), torch.bfloat16)})
    case("bf16_int_tensor", "a + b", lambda a, b: a + b, {"a": rnd((5,), torch.bfloat16), "b": rnd((5,), torch.int64)})
    case("bf16_f32_0d", "a * b", lambda a, b: a * b, {"a": rnd((5,), torch.bfloat16), "b": torch.tensor(1.7, dtype=torch.float32)})
    case("int_0d_float_scalar", "a * 0.5", lambda a: a * 0.5, {"a": torch.tensor(7)})
    case("bool_scalar_add", "a + true", lambda a: a + True, {"a": rnd((4,), torch.int64)})
    case("int_pow_float", "a:pow(0.5)", lambda a: a.pow(0.5), {"a": torch.tensor([4, 9, 2])})
    case("float_pow_int_tensor", "a:pow(b)", lambda a, b: a.pow(b), {"a": rnd((4,)), "b": torch.tensor([0, 1, 2, 3])})
    case("scalar_pow_tensor", "ember.pow(2, a)", lambda a: torch.pow(2, a), {"a": rnd((4,))}, grad=True)
    case("rsub_tensor", "2 - a", lambda a: 2 - a, {"a": rnd((4,), torch.int64)})
    case("rdiv_tensor", "2 / a", lambda a: 2 / a, {"a": torch.tensor([1, 2, 0, -4])})


# ---------------------------------------------------------------- joins, repeats, in place, conversions
def more():
    x = rnd((3, 4))
    e = rnd((0,))
    case("cat_promote", "ember.cat({a, b}, 1)", lambda a, b: torch.cat([a, b], 0), {"a": rnd((2, 3), torch.float32), "b": rnd((1, 3), torch.int64)})
    case("cat_empty_1d", "ember.cat({a, b}, 1)", lambda a, b: torch.cat([a, b], 0), {"a": x, "b": e})
    case("cat_neg", "ember.cat({a, b}, -1)", lambda a, b: torch.cat([a, b], -1), {"a": x, "b": rnd((3, 2))}, grad=True)
    case("stack", "ember.stack({a, b}, 2)", lambda a, b: torch.stack([a, b], 1), {"a": x, "b": rnd((3, 4))}, grad=True)
    case("stack_neg", "ember.stack({a, b}, -1)", lambda a, b: torch.stack([a, b], -1), {"a": x, "b": rnd((3, 4))}, grad=True)
    case("matmul_bcast", "a:matmul(b)", lambda a, b: a.matmul(b), {"a": rnd((2, 1, 3, 4)), "b": rnd((5, 4, 2))}, grad=True)
    case("matmul_vec", "a:matmul(b)", lambda a, b: a.matmul(b), {"a": rnd((4,)), "b": rnd((2, 4, 3))}, grad=True)
    case("matmul_int", "a:matmul(b)", lambda a, b: a.matmul(b), {"a": rnd((2, 3), torch.int64), "b": rnd((3, 2), torch.int64)})
    case("tile", "a:tile({2, 1, 2})", lambda a: a.tile((2, 1, 2)), {"a": x}, grad=True)
    case("repeat_interleave", "a:repeat_interleave(2, 1)", lambda a: a.repeat_interleave(2, 0), {"a": x}, grad=True)
    case("repeat_interleave_t", "a:repeat_interleave(r, 2)", lambda a, r: a.repeat_interleave(r, 1), {"a": x, "r": torch.tensor([0, 2, 1, 3])}, grad=True)
    case("broadcast_to", "a:broadcast_to({2, 3, 4})", lambda a: a.broadcast_to((2, 3, 4)), {"a": x}, grad=True)
    case("flip_empty", "a:flip(1)", lambda a: a.flip(0), {"a": e})
    case("roll_neg", "a:roll(-1, 1)", lambda a: a.roll(-1, 0), {"a": x}, grad=True)
    case("roll_flat", "a:roll(5)", lambda a: a.roll(5), {"a": x}, grad=True)
    case("narrow_negstart", "a:narrow(2, -2, 2)", lambda a: a.narrow(1, -2, 2), {"a": x}, grad=True)
    case("split_zero", "a:split({0, 4}, 2)", lambda a: a.split([0, 4], 1), {"a": x})
    case("tensor_split_beyond", "a:tensor_split({2, 9}, 2)", lambda a: a.tensor_split([1, 8], 1), {"a": x})
    case("sort_0d", "a:sort()", lambda a: tuple(a.sort()), {"a": rnd(())}, out_idx=(2,))
    case("sort_empty", "a:sort()", lambda a: tuple(a.sort()), {"a": e}, out_idx=(2,))
    case("argmax_0d_keep", "a:argmax(1, true)", lambda a: a.argmax(0, keepdim=True), {"a": rnd(())}, out_idx=(1,))
    case("logsumexp_empty", "a:logsumexp(1)", lambda a: a.logsumexp(0), {"a": rnd((0, 2))})
    case("logsumexp_empty_keep", "a:logsumexp({1, 2}, true)", lambda a: a.logsumexp((0, 1), keepdim=True), {"a": rnd((2, 0))})
    case("logsumexp_empty_other", "a:logsumexp(1)", lambda a: a.logsumexp(0), {"a": rnd((2, 0))})
    case("std_single", "a:std()", lambda a: a.std(), {"a": rnd((1,))})
    case("nansum", "a:nansum(2)", lambda a: a.nansum(1), {"a": rnd((3, 4), special=True).nan_to_num(posinf=1.0, neginf=-1.0).masked_fill(torch.rand(3, 4) < 0.3, float("nan"))})
    case("nanmean", "a:nanmean(2)", lambda a: a.nanmean(1), {"a": rnd((3, 4)).masked_fill(torch.tensor([[True, False, False, False]] * 2 + [[True] * 4]), float("nan"))})
    case("mean_bf16", "a:mean(1)", lambda a: a.mean(0), {"a": rnd((6, 3), torch.bfloat16)})
    case("var_bf16", "a:var(1)", lambda a: a.var(0), {"a": rnd((6, 3), torch.bfloat16)})
    case("masked_fill_0d", "a:masked_fill(m, v)", lambda a, m, v: a.masked_fill(m, v), {"a": x, "m": rnd((3, 4), torch.bool), "v": torch.tensor(-3.0, dtype=torch.float64)}, grad=True)
    case("eq_int_float", "a:eq(b)", lambda a, b: a.eq(b), {"a": torch.tensor([1, 2, 3]), "b": torch.tensor([1.0, 2.5, 3.0], dtype=torch.float64)})
    case("maximum_int_float", "ember.maximum(a, b)", torch.maximum, {"a": torch.tensor([1, 5, -3]), "b": torch.tensor([1.5, 2.0, float("nan")], dtype=torch.float32)})
    case("to_long", "a:long()", lambda a: a.long(), {"a": torch.tensor([-2.7, -0.5, 0.5, 2.7, 1e10], dtype=torch.float64)})
    case("to_bool", "a:bool()", lambda a: a.bool(), {"a": torch.tensor([0.0, -0.0, 1e-300, float("nan"), -2.0], dtype=torch.float64)})
    case("to_bf16", "a:to('bfloat16')", lambda a: a.to(torch.bfloat16), {"a": torch.tensor([1.00390625, 1.01171875, -3.3, 1e-40, 3.4e38, float("inf")], dtype=torch.float64)})
    case("to_float_round", "a:float()", lambda a: a.float(), {"a": torch.tensor([1 + 2 ** -24, 1 + 3 * 2 ** -24, 1e-46, 3.5e38], dtype=torch.float64)})
    case("round_neg_decimals", "a:round{decimals = -1}", lambda a: a.round(decimals=-1), {"a": torch.tensor([15., 25., -35., 44.9], dtype=torch.float64)})
    case("div_floor_float", "a:div(b, {rounding_mode = 'floor'})", lambda a, b: a.div(b, rounding_mode="floor"), {"a": torch.tensor([-0.0, 0.0, 5.0, -5.0, 1.0], dtype=torch.float64), "b": torch.tensor([3.0, -3.0, -2.0, 2.0, 0.0], dtype=torch.float64)}, zsign=True)
    case("add_inplace", "a:clone():add_(b)", lambda a, b: a.clone().add_(b), {"a": x, "b": rnd((4,))}, grad=True)
    case("mul_inplace_int", "a:clone():mul_(3)", lambda a: a.clone().mul_(3), {"a": rnd((4,), torch.int64)})
    case("clamp_inplace", "a:clone():clamp_(-0.5, 0.5)", lambda a: a.clone().clamp_(-0.5, 0.5), {"a": x}, grad=True)
    case("index_put_inplace_acc", "a:clone():index_put_({i}, v, true)", lambda a, i, v: a.clone().index_put_((i,), v, accumulate=True),
         {"a": x, "i": torch.tensor([2, 2, 0]), "v": torch.tensor(1.5, dtype=torch.float64)}, idx={"i"}, grad=True)
    case("addcdiv", "a:addcdiv(b, c, {value = -2})", lambda a, b, c: a.addcdiv(b, c, value=-2), {"a": x, "b": rnd((4,)), "c": rnd((3, 1)) + 5}, grad=True)
    case("cummin", "a:cummin(1)", lambda a: tuple(a.cummin(0)), {"a": rnd((5, 3), ties=True)}, out_idx=(2,), grad=True)
    case("diff_n", "a:diff(2, 1)", lambda a: a.diff(2, 0), {"a": rnd((5, 3))}, grad=True)
    case("aminmax", "a:aminmax{dim = 2}", lambda a: tuple(a.aminmax(dim=1)), {"a": x})
    case("count_nonzero", "a:count_nonzero(2)", lambda a: a.count_nonzero(1), {"a": rnd((3, 4), torch.int64)})


# ---------------------------------------------------------------- gradients at ties, kinks and bounds
def kinks():
    t = torch.tensor([[1., 3., 3.], [-2., -2., 0.]], dtype=torch.float64)
    z = torch.tensor([-1., 0., -0.0, 2., 0.5], dtype=torch.float64)
    case("grad_amax_ties", "a:amax(2)", lambda a: a.amax(1), {"a": t}, grad=True)
    case("grad_max_all_ties", "a:max()", lambda a: a.max(), {"a": t}, grad=True)
    case("grad_min_all_ties", "a:min()", lambda a: a.min(), {"a": t}, grad=True)
    case("grad_maximum_ties", "ember.maximum(a, b)", torch.maximum, {"a": t, "b": torch.tensor([1., -2., 1.], dtype=torch.float64)}, grad=True)
    case("grad_minimum_ties", "ember.minimum(a, b)", torch.minimum, {"a": t, "b": torch.tensor([1., -2., 1.], dtype=torch.float64)}, grad=True)
    case("grad_clamp_bounds", "a:clamp(-1, 0.5)", lambda a: a.clamp(-1, 0.5), {"a": z}, grad=True)
    case("grad_clamp_tensor_bounds", "a:clamp(l, h)", lambda a, l, h: a.clamp(l, h), {"a": z, "l": torch.full((5,), -1., dtype=torch.float64), "h": torch.full((5,), 0.5, dtype=torch.float64)}, grad=True)
    case("grad_abs0", "a:abs()", lambda a: a.abs(), {"a": z}, grad=True)
    case("grad_relu0", "a:relu()", lambda a: a.relu(), {"a": z}, grad=True)
    case("grad_sign", "a:sign()", lambda a: a.sign(), {"a": z}, grad=True)
    case("grad_sqrt0", "a:sqrt()", lambda a: a.sqrt(), {"a": z.abs()}, grad=True)
    case("grad_pow0", "a:pow(2)", lambda a: a.pow(2), {"a": z}, grad=True)
    case("grad_pow_half0", "a:pow(0.5)", lambda a: a.pow(0.5), {"a": z.abs()}, grad=True)
    case("grad_pow_t0", "a:pow(b)", lambda a, b: a.pow(b), {"a": torch.tensor([0., 0., 2., 0.], dtype=torch.float64), "b": torch.tensor([2., 0., 0., 0.5], dtype=torch.float64)}, grad=True)
    case("grad_std_const", "a:std(2)", lambda a: a.std(1), {"a": torch.tensor([[2., 2., 2.], [1., 2., 3.]], dtype=torch.float64)}, grad=True)
    case("grad_norm_row0", "a:norm(2, 2)", lambda a: a.norm(2, 1), {"a": torch.tensor([[0., 0.], [3., 4.]], dtype=torch.float64)}, grad=True)
    case("grad_norm1_0", "a:norm(1)", lambda a: a.norm(1), {"a": z}, grad=True)
    case("grad_norm_inf_ties", "a:norm(math.huge)", lambda a: a.norm(float("inf")), {"a": torch.tensor([3., -3., 1.], dtype=torch.float64)}, grad=True)
    case("grad_median", "a:median()", lambda a: a.median(), {"a": torch.tensor([3., 1., 2., 2.], dtype=torch.float64)}, grad=True)
    case("grad_cumprod0", "a:cumprod(1)", lambda a: a.cumprod(0), {"a": torch.tensor([2., 0., 3., 0., 4.], dtype=torch.float64)}, grad=True)
    case("grad_prod_two0", "a:prod()", lambda a: a.prod(), {"a": torch.tensor([2., 0., 3., 0.], dtype=torch.float64)}, grad=True)
    case("grad_logsumexp_inf", "a:logsumexp(1)", lambda a: a.logsumexp(0), {"a": torch.tensor([float("-inf"), 0., 1.], dtype=torch.float64)}, grad=True)
    case("grad_where_nan", "ember.where(c, a, b)", lambda c, a, b: torch.where(c, a, b), {"c": torch.tensor([True, False]), "a": torch.tensor([1., 2.], dtype=torch.float64), "b": torch.tensor([3., 4.], dtype=torch.float64)}, grad=True)
    case("grad_masked_select", "a:masked_select(m)", lambda a, m: a.masked_select(m), {"a": rnd((2, 3)), "m": torch.tensor([True, False, True])}, grad=True)
    case("grad_sort_ties", "a:sort{stable = true}", lambda a: tuple(a.sort(stable=True)), {"a": torch.tensor([2., 1., 2., 1.], dtype=torch.float64)}, out_idx=(2,), grad=True)
    case("grad_topk_ties", "a:topk(2)", lambda a: tuple(a.topk(2)), {"a": torch.tensor([1., 3., 2., 0.], dtype=torch.float64)}, out_idx=(2,), grad=True)
    case("grad_hypot0", "ember.hypot(a, b)", torch.hypot, {"a": torch.tensor([0., 3.], dtype=torch.float64), "b": torch.tensor([0., 4.], dtype=torch.float64)}, grad=True)
    case("grad_atan2_0", "ember.atan2(a, b)", torch.atan2, {"a": torch.tensor([0., 1.], dtype=torch.float64), "b": torch.tensor([0., 0.], dtype=torch.float64)}, grad=True,
         known="lua/ember/_special.lua, atan2: value and gradient finite everywhere (0 at the origin, where torch's is NaN)")
    case("clamp_nan_bound", "a:clamp(l, h)", lambda a, l, h: a.clamp(l, h), {"a": z, "l": torch.tensor([float("nan"), -1., -1., 3., -1.], dtype=torch.float64), "h": torch.tensor([0.5, float("nan"), 0.5, 0.5, 0.5], dtype=torch.float64)}, grad=True)
    case("clamp_tensor_min_number_max", "a:clamp(l, 0.5)", lambda a, l: a.clamp(l, torch.tensor(0.5, dtype=torch.float64)), {"a": z, "l": torch.tensor([-1., 0., 0.5, 0., 1.], dtype=torch.float64)}, grad=True)
    case("clamp_f32_f64_bound", "a:clamp(l)", lambda a, l: a.clamp(l), {"a": rnd((4,), torch.float32), "l": rnd((4,))})
    case("clamp_int_tensor_bound", "a:clamp(l, h)", lambda a, l, h: a.clamp(l, h), {"a": rnd((5,), torch.int64), "l": torch.tensor([-1, -1, 0, 2, -9]), "h": torch.tensor([1, 0, 0, 1, 9])})
    case("grad_xlogy0", "ember.xlogy(a, b)", torch.xlogy, {"a": torch.tensor([0., 2.], dtype=torch.float64), "b": torch.tensor([0., 3.], dtype=torch.float64)}, grad=True)
    case("grad_div0", "a / b", lambda a, b: a / b, {"a": torch.tensor([1., 0.], dtype=torch.float64), "b": torch.tensor([0., 0.], dtype=torch.float64)}, grad=True)
    case("grad_log0", "a:log()", lambda a: a.log(), {"a": torch.tensor([0., 1.], dtype=torch.float64)}, grad=True)
    case("grad_cummax_ties", "a:cummax(1)", lambda a: tuple(a.cummax(0)), {"a": torch.tensor([1., 3., 3., 2., 3.], dtype=torch.float64)}, out_idx=(2,), grad=True)
    case("grad_kthvalue", "a:kthvalue(2)", lambda a: tuple(a.kthvalue(2)), {"a": torch.tensor([[4., 1., 3.], [0., 9., 5.]], dtype=torch.float64)}, out_idx=(2,), grad=True)


# ---------------------------------------------------------------- random: shapes, strides, dtypes
def fuzz(n=160):
    """Random broadcasting pairs seen through non-contiguous views, random
    reductions over random dims: each case's inputs are written contiguous,
    ember makes the same view as PyTorch (a transpose or a stepped slice)."""
    dts = [torch.float64, torch.float64, torch.float32, torch.int64, torch.bool, torch.bfloat16]
    bins = [("add", "{A} + b", lambda a, b: a + b), ("mul", "{A} * b", lambda a, b: a * b),
            ("sub", "{A} - b", lambda a, b: a - b), ("div", "{A} / b", lambda a, b: a / b),
            ("maximum", "ember.maximum({A}, b)", torch.maximum), ("lt", "{A}:lt(b)", torch.lt),
            ("eq", "{A}:eq(b)", torch.eq)]
    reds = [("sum", "sum"), ("amax", "amax"), ("mean", "mean"), ("prod", "prod"), ("amin", "amin")]
    for k in range(n):
        nd = rng.randint(0, 3)
        shape = [rng.choice([0, 1, 2, 3, 4]) if rng.random() < 0.15 else rng.randint(1, 4) for _ in range(nd)]
        da, db = rng.choice(dts), rng.choice(dts)
        view, tview = "a", (lambda t: t)
        if nd >= 2 and rng.random() < 0.5:
            view, tview = "a:transpose(1, %d)" % nd, (lambda t, nd=nd: t.transpose(0, nd - 1))
            base = list(shape)
            base[0], base[-1] = base[-1], base[0]
        elif nd >= 1 and rng.random() < 0.4:
            view, tview = "a:slice(1, 1, -1, 2)", (lambda t: t[0::2])
            base = [shape[0] * 2 - 1 if shape[0] > 0 else 0] + shape[1:]
        else:
            base = list(shape)
        if k % 2 == 0:
            bshape = [1 if rng.random() < 0.3 else s for s in shape][rng.randint(0, nd):] if nd else []
            name, expr, fn = rng.choice(bins)
            if (da == torch.bool and db == torch.bool and name in ("sub", "div")) or (name == "sub" and torch.bool in (da, db)):
                continue
            case("fuzz_" + name, expr.replace("{A}", "(%s)" % view),
                 (lambda fn, tview: lambda a, b: fn(tview(a), b))(fn, tview),
                 {"a": rnd(base, da, special=rng.random() < 0.3), "b": rnd(bshape, db)}, optional=True)
        else:
            if nd == 0:
                continue
            name, meth = rng.choice(reds)
            if da == torch.bool or (name == "mean" and not da.is_floating_point):
                da = torch.float64
            dims = sorted(rng.sample(range(1, nd + 1), rng.randint(1, nd)))
            if name == "prod":
                dims = dims[:1]
            lua_dims = [d if rng.random() < 0.5 else d - nd - 1 for d in dims]
            keep = rng.random() < 0.5
            tdims = [d - 1 for d in dims]
            if name in ("amax", "amin") and any(shape[d] == 0 for d in tdims):
                continue
            arg = str(lua_dims[0]) if name == "prod" else lua_tbl(lua_dims)
            tdarg = tdims[0] if name == "prod" else tuple(tdims)
            case("fuzz_" + name, "(%s):%s(%s, %s)" % (view, meth, arg, str(keep).lower()),
                 (lambda meth, tview, tdarg, keep: lambda a: getattr(tview(a), meth)(tdarg, keepdim=keep))(meth, tview, tdarg, keep),
                 {"a": rnd(base, da)}, grad=(da == torch.float64), optional=True)


# ---------------------------------------------------------------- errors
def errors():
    x = rnd((3, 4))
    case("sum_bad_dim", "a:sum(3)", lambda a: a.sum(2), {"a": x}, err="sum")
    case("add_shapes", "a + b", lambda a, b: a + b, {"a": x, "b": rnd((3,))}, err="add")
    case("view_bad", "a:t():view(12)", lambda a: a.t().view(12), {"a": x}, err="view")
    case("gather_range", "a:gather(2, g)", lambda a, g: a.gather(1, g), {"a": x, "g": torch.tensor([[4]])}, idx={"g"}, err="gather")
    case("index_range", "a[4]", lambda a: a[3], {"a": x}, err="index")
    case("narrow_range", "a:narrow(2, 3, 3)", lambda a: a.narrow(1, 2, 3), {"a": x}, err="narrow")
    case("permute_dup", "a:permute(1, 1)", lambda a: a.permute(0, 0), {"a": x}, err="permute")
    case("topk_k", "a:topk(5)", lambda a: a.topk(5), {"a": x}, err="topk")
    case("expand_bad", "a:expand(2, 3)", lambda a: a.expand(2, 3), {"a": x}, err="expand")
    case("cat_shapes", "ember.cat({a, b}, 1)", lambda a, b: torch.cat([a, b], 0), {"a": x, "b": rnd((3, 5))}, err="cat")
    case("masked_fill_shape", "a:masked_fill(m, 1)", lambda a, m: a.masked_fill(m, 1), {"a": x, "m": rnd((2,), torch.bool)}, err="masked_fill")
    case("squeeze_dim", "a:squeeze(5)", lambda a: a.squeeze(4), {"a": x}, err="squeeze")
    case("mean_int", "a:mean()", lambda a: a.mean(), {"a": rnd((3,), torch.int64)}, err="mean")
    case("argmax_empty", "a:argmax()", lambda a: a.argmax(), {"a": rnd((0,))}, err="argmax")
    case("kthvalue_k", "a:kthvalue(5, 2)", lambda a: a.kthvalue(5, 1), {"a": x}, err="kthvalue")
    case("index_select_2d", "a:index_select(1, i)", lambda a, i: a.index_select(0, i), {"a": x, "i": torch.zeros(2, 2, dtype=torch.int64)}, err="index_select")
    case("unflatten_bad", "a:unflatten(2, {3, 3})", lambda a: a.unflatten(1, (3, 3)), {"a": x}, err="unflatten")
    case("where_cond_float", "ember.where(a, a, a)", lambda a: torch.where(a, a, a), {"a": x}, err="where")
    case("pow_int_negative", "a:pow(-1)", lambda a: a.pow(-1), {"a": torch.tensor([1, 2])}, err="pow")
    case("select_empty", "a:select(1, 1)", lambda a: a.select(0, 0), {"a": rnd((0, 3))}, err="select")
    case("stack_shapes", "ember.stack({a, b})", lambda a, b: torch.stack([a, b]), {"a": x, "b": rnd((4, 3))}, err="stack")
    case("matmul_shapes", "a:matmul(b)", lambda a, b: a.matmul(b), {"a": x, "b": x}, err="matmul")


def main():
    for f in (binary, promotion, reductions, views, indexing, sorting, elementwise, dtype_more, more, kinks, fuzz, errors):
        f()
    ops = sorted({c["op"] for c in CASES})
    SweepWriter(keys="auto", sep=",").write("tests/fixtures/tensor_sweep.lua", "tests/gen_tensor_sweep.py",
                                            {"seed": SEED, "cases": CASES})
    print("%d cases, %d ops" % (len(CASES), len(ops)))


if __name__ == "__main__":
    main()
