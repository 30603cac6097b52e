"""PyTorch 1.13 values of tensor ops: tests/fixtures/tensor_ops_torch.lua,
read by tests/lua/tensor_ops_torch_spec.lua.

    /usr/bin/python3 tests/gen_tensor_ops_torch_fixtures.py

Each case is an ember expression (Lua over inputs a, b, c and `e`, the
ember module), its inputs and PyTorch's outputs of the same call. Indices
are 1-based on ember's side: an input named in `idx` is written +1, an
output position listed in `out_idx` is PyTorch's +1. A case with `grad`
also holds the float64 gradients of sum(out[1] * w) for the inputs named.
"""
import math

import torch

from fixture_writer import Writer, lua_float

torch.manual_seed(82)
D = torch.float64
NAN = float("nan")
CASES = []


def case(name, expr, fn, inputs, idx=(), out_idx=(), grad=()):
    c = {"name": name, "expr": expr.replace('"', "'"), "inputs": {}}  # the writer does not escape quotes
    for k, v in inputs.items():
        c["inputs"][k] = (v + 1) if k in idx else v
    args = {}
    for k, v in inputs.items():
        v = v.clone()
        if k in grad:
            v.requires_grad_(True)
        args[k] = v
    out = fn(*args.values())
    if not isinstance(out, (tuple, list)):
        out = (out,)
    out = list(out)
    c["out"] = [(o + 1) if i + 1 in out_idx else o.detach() for i, o in enumerate(out)]
    if grad:
        w = torch.randn(out[0].shape, dtype=D)
        g = torch.autograd.grad((out[0] * w).sum(), [args[k] for k in grad])
        c["w"] = w
        c["grad"] = {k: gk for k, gk in zip(grad, g)}
    CASES.append(c)


def zero_signed(t):
    """lua_float of each value, -0.0 kept (Lua reads "-0" as the integer 0)."""
    return ["-0.0" if v == 0 and math.copysign(1.0, v) < 0 else lua_float(v) for v in t.reshape(-1).tolist()]


def r(*shape):
    return torch.randn(*shape, dtype=D)


# ---- masked_scatter
x = r(3, 4)
m = torch.rand(3, 4) > 0.5
case("masked_scatter", "a:masked_scatter(b, c)", lambda a, b, c: a.masked_scatter(b, c),
     {"a": x, "b": m, "c": r(15)}, grad=("a", "c"))
case("masked_scatter broadcast mask", "e.masked_scatter(a, b, c)", lambda a, b, c: torch.masked_scatter(a, b, c),
     {"a": r(3, 4), "b": torch.tensor([True, False, True, True]), "c": r(4, 3)}, grad=("a", "c"))
case("masked_scatter transposed", "a:t():masked_scatter(b, c)", lambda a, b, c: a.t().masked_scatter(b, c),
     {"a": r(4, 3), "b": torch.rand(3, 4) > 0.3, "c": r(12)}, grad=("a", "c"))
case("masked_scatter int", "a:masked_scatter(b, c)", lambda a, b, c: a.masked_scatter(b, c),
     {"a": torch.arange(6).view(2, 3), "b": torch.tensor([[True, False, True], [False, False, True]]),
      "c": torch.tensor([10, 20, 30, 40])})

# ---- nanmedian
xn = r(4, 5)
xn[0, 1] = NAN
xn[2, 1:4] = NAN  # an all-NaN row's index is nth_element's choice in torch: see the case below
xn[3, 0] = NAN
xn[3, 4] = NAN
case("nanmedian dim", "e.nanmedian(a, 2)", lambda a: torch.nanmedian(a, 1), {"a": xn}, out_idx=(2,), grad=("a",))
case("nanmedian dim -2 keepdim", "a:nanmedian(-2, true)", lambda a: a.nanmedian(-2, keepdim=True),
     {"a": xn}, out_idx=(2,), grad=("a",))
case("nanmedian all", "a:nanmedian()", lambda a: a.nanmedian(), {"a": xn}, grad=("a",))
case("nanmedian all-NaN row", "a:nanmedian(2)", lambda a: a.nanmedian(1),
     {"a": torch.tensor([[NAN, NAN], [1., NAN]], dtype=D)}, out_idx=(2,))
case("nanmedian all NaN", "a:nanmedian()", lambda a: a.nanmedian(), {"a": torch.tensor([NAN, NAN], dtype=D)})
case("nanmedian no NaN", "a:nanmedian(1)", lambda a: a.nanmedian(0), {"a": r(6, 2)}, out_idx=(2,), grad=("a",))
case("nanmedian int", "a:nanmedian(2)", lambda a: a.nanmedian(1), {"a": torch.tensor([[5, 1, 3, 9], [2, 8, 4, 6]])},
     out_idx=(2,))

# ---- quantile / nanquantile
xq = r(3, 7)
qs = torch.tensor([0.0, 0.1, 0.5, 0.77, 1.0], dtype=D)
for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
    case("quantile %s" % mode, 'e.quantile(a, b, 2, false, {interpolation = "%s"})' % mode,
         lambda a, b, mode=mode: torch.quantile(a, b, dim=1, interpolation=mode), {"a": xq, "b": qs}, grad=("a",))
case("quantile scalar q, no dim", "a:quantile(0.3)", lambda a: a.quantile(0.3), {"a": xq}, grad=("a",))
case("quantile keepdim no dim", "a:quantile(0.3, {keepdim = true})", lambda a: a.quantile(0.3, keepdim=True),
     {"a": xq}, grad=("a",))
case("quantile dim 1 keepdim", "a:quantile(b, 1, true)", lambda a, b: a.quantile(b, dim=0, keepdim=True),
     {"a": r(4, 3, 2), "b": torch.tensor([0.25, 0.6], dtype=D)}, grad=("a",))
case("quantile 0-d q", "a:quantile(b, -1)", lambda a, b: a.quantile(b, dim=-1),
     {"a": r(2, 5), "b": torch.tensor(0.4, dtype=D)}, grad=("a",))
case("quantile nearest half to even", 'e.quantile(a, b, {interpolation = "nearest"})',
     lambda a, b: torch.quantile(a, b, interpolation="nearest"),
     {"a": torch.arange(5, dtype=D), "b": torch.tensor([0.125, 0.375, 0.625, 0.875], dtype=D)})
xqn = r(3, 6)
xqn[0, 2] = NAN
xqn[1, :] = NAN
case("quantile NaN row", "a:quantile(b, 2)", lambda a, b: a.quantile(b, dim=1), {"a": xqn, "b": qs})
for mode in ("linear", "nearest", "midpoint"):
    case("nanquantile %s" % mode, 'a:nanquantile(b, 2, {interpolation = "%s"})' % mode,
         lambda a, b, mode=mode: a.nanquantile(b, dim=1, interpolation=mode), {"a": xqn, "b": qs})
case("nanquantile no dim", "a:nanquantile(0.6)", lambda a: a.nanquantile(0.6), {"a": xqn})
case("quantile float32", "e.quantile(a:to('float32'), b:to('float32'), 2):to('float64')",
     lambda a, b: torch.quantile(a.float(), b.float(), dim=1).double(), {"a": xq, "b": qs})

# ---- mode
case("mode dim", "a:mode(2)", lambda a: a.mode(1),
     {"a": torch.tensor([[1., 2, 2, 3, 3, 0], [5, 5, 1, 1, 1, 5], [4, 3, 2, 1, 0, -1]], dtype=D)},
     out_idx=(2,), grad=("a",))
case("mode default dim keepdim", "e.mode(a, -1, true)", lambda a: torch.mode(a, -1, keepdim=True),
     {"a": torch.randint(0, 3, (2, 3, 7))}, out_idx=(2,))
case("mode dim 1", "a:mode(1)", lambda a: a.mode(0), {"a": torch.randint(0, 3, (9, 4)).double()},
     out_idx=(2,), grad=("a",))
case("mode 0-d", "a:mode()", lambda a: a.mode(), {"a": torch.tensor(3.5, dtype=D)}, out_idx=(2,))

# ---- histc
xh = r(50)
case("histc", "a:histc(7, -1, 1.5)", lambda a: a.histc(7, -1, 1.5), {"a": xh})
case("histc own range", "e.histc(a, 10)", lambda a: torch.histc(a, 10), {"a": xh})
case("histc default bins", "a:histc()", lambda a: a.histc(), {"a": xh})
case("histc edges", "a:histc({bins = 4, min = 0, max = 4})", lambda a: a.histc(bins=4, min=0, max=4),
     {"a": torch.tensor([0., 1, 2, 3, 4, 4, -0.5, 4.5], dtype=D)})
case("histc constant", "a:histc(3)", lambda a: a.histc(3), {"a": torch.full((4,), 2.0, dtype=D)})
case("histc float32", "a:to('float32'):histc(5, -2, 2):to('float64')",
     lambda a: a.float().histc(5, -2, 2).double(), {"a": xh})

case("histogram", "e.histogram(a, 7)", lambda a: torch.histogram(a, 7), {"a": r(50)})
case("histogram range weight density", "e.histogram(a, 4, {range = {0, 3}, weight = b, density = true})",
     lambda a, b: torch.histogram(a, 4, range=(0., 3.), weight=b, density=True), {"a": r(5, 4) + 1.5, "b": torch.rand(5, 4, dtype=D)})
case("histogram edges", "e.histogram(a, b)", lambda a, b: torch.histogram(a, b),
     {"a": torch.tensor([1., 2, 1, 5, 3, 0, -1], dtype=D), "b": torch.tensor([0., 1, 2.5, 3], dtype=D)})
case("histogram constant", "e.histogram(a, 4)", lambda a: torch.histogram(a, 4), {"a": torch.full((3,), 2.0, dtype=D)})
case("histogram empty", "e.histogram(a, 3)", lambda a: torch.histogram(a, 3), {"a": torch.zeros(0, dtype=D)})
case("histogram edges on the grid", "e.histogram(a, {bins = 10})", lambda a: torch.histogram(a, bins=10),
     {"a": torch.linspace(0, 1, 11, dtype=D)})

# ---- scatter_reduce / index_reduce
xs = r(3, 5)
ix = torch.randint(0, 3, (4, 5))
src = r(4, 5)
for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
        case("scatter_reduce %s include_self=%s" % (red, inc),
             'a:scatter_reduce(1, b, c, "%s", {include_self = %s})' % (red, "true" if inc else "false"),
             lambda a, b, c, red=red, inc=inc: a.scatter_reduce(0, b, c, red, include_self=inc),
             {"a": xs, "b": ix, "c": src}, idx=("b",), grad=("a", "c"))
ix2 = torch.randint(0, 5, (2, 3))
case("scatter_reduce dim 2 smaller index", 'e.scatter_reduce(a, -1, b, c, "amax")',
     lambda a, b, c: torch.scatter_reduce(a, -1, b, c, "amax"), {"a": xs, "b": ix2, "c": r(3, 4)},
     idx=("b",))  # torch 1.13's backward fails here (src larger than index): the spec gradchecks it
case("scatter_reduce prod zeros", 'a:scatter_reduce(1, b, c, "prod")',
     lambda a, b, c: a.scatter_reduce(0, b, c, "prod"),
     {"a": torch.tensor([2., 0, 3], dtype=D), "b": torch.tensor([0, 0, 1, 2, 2]),
      "c": torch.tensor([0., 4, 5, 0, 0], dtype=D)}, idx=("b",))
case("scatter_reduce int mean", 'a:scatter_reduce(1, b, c, "mean")',
     lambda a, b, c: a.scatter_reduce(0, b, c, "mean"),
     {"a": torch.tensor([1, -7, 3]), "b": torch.tensor([0, 1, 1, 0]), "c": torch.tensor([4, 2, -1, 6])}, idx=("b",))
case("scatter_reduce int amin no self", 'a:scatter_reduce(1, b, c, "amin", {include_self = false})',
     lambda a, b, c: a.scatter_reduce(0, b, c, "amin", include_self=False),
     {"a": torch.tensor([1, -7, 3]), "b": torch.tensor([0, 1, 1, 0]), "c": torch.tensor([4, 2, -1, 6])}, idx=("b",))
case("scatter_reduce amax NaN", 'a:scatter_reduce(1, b, c, "amax")',
     lambda a, b, c: a.scatter_reduce(0, b, c, "amax"),
     {"a": torch.tensor([1., NAN, 3], dtype=D), "b": torch.tensor([0, 1, 2, 0]),
      "c": torch.tensor([NAN, 2., 1, 0.5], dtype=D)}, idx=("b",))
xi = r(4, 3)
ii = torch.tensor([0, 2, 0, 3, 2])
for red in ("prod", "mean", "amax", "amin"):
    case("index_reduce %s" % red, 'a:index_reduce(1, b, c, "%s")' % red,
         lambda a, b, c, red=red: a.index_reduce(0, b, c, red), {"a": xi, "b": ii, "c": r(5, 3)},
         idx=("b",), grad=("a", "c"))
case("index_reduce dim 2 no self", 'a:index_reduce(2, b, c, "mean", {include_self = false})',
     lambda a, b, c: a.index_reduce(1, b, c, "mean", include_self=False),
     {"a": xi, "b": torch.tensor([1, 1, 0, 1]), "c": r(4, 4)}, idx=("b",), grad=("a", "c"))

# ---- searchsorted / bucketize (merged by one sort), isin, msort, cartesian_prod
seq = torch.tensor([1., 2, 2, 3, 5, 5], dtype=D)
vals = torch.tensor([[0., 2, 2.5, 5], [5, 6, NAN, 1]], dtype=D)
case("searchsorted left ties NaN", "e.searchsorted(a, b)", lambda a, b: torch.searchsorted(a, b),
     {"a": seq, "b": vals}, out_idx=(1,))
case("searchsorted right ties", "e.searchsorted(a, b, {side = 'right'})", lambda a, b: torch.searchsorted(a, b, side="right"),
     {"a": seq, "b": vals}, out_idx=(1,))
case("searchsorted batched", "e.searchsorted(a, b, {right = true})", lambda a, b: torch.searchsorted(a, b, right=True),
     {"a": torch.sort(torch.randint(0, 6, (3, 7)).double(), 1)[0], "b": torch.randint(-1, 7, (3, 5)).double()}, out_idx=(1,))
case("searchsorted sorter", "e.searchsorted(a, b, {sorter = c})", lambda a, b, c: torch.searchsorted(a, b, sorter=c),
     {"a": torch.tensor([5., 1, 3, 3], dtype=D), "b": torch.tensor([[3., 0], [9, 4]], dtype=D),
      "c": torch.tensor([1, 2, 3, 0])}, idx=("c",), out_idx=(1,))
case("searchsorted int number", "e.searchsorted(a, 4)", lambda a: torch.searchsorted(a, 4), {"a": torch.tensor([1, 3, 5])},
     out_idx=(1,))
case("bucketize", "e.bucketize(a, b, {right = true})", lambda a, b: torch.bucketize(a, b, right=True),
     {"a": r(4, 50), "b": torch.linspace(-2, 2, 9, dtype=D)}, out_idx=(1,))
case("isin", "e.isin(a, b)", lambda a, b: torch.isin(a, b), {"a": torch.randint(-5, 5, (4, 6)), "b": torch.tensor([1, 3, -2, 3])})
case("isin invert NaN", "e.isin(a, b, {invert = true})", lambda a, b: torch.isin(a, b, invert=True),
     {"a": torch.tensor([1., NAN, 2, 4], dtype=D), "b": torch.tensor([[NAN, 2], [4, 9]], dtype=D)})
case("isin number", "e.isin(a, 2)", lambda a: torch.isin(a, 2), {"a": torch.tensor([1, 2, 3])})
case("msort", "a:msort()", lambda a: a.msort(), {"a": r(4, 3)}, grad=("a",))
case("cartesian_prod", "e.cartesian_prod(a, b, c)", lambda a, b, c: torch.cartesian_prod(a, b, c),
     {"a": r(2), "b": r(3), "c": r(2)}, grad=("a", "b", "c"))
case("cartesian_prod int", "e.cartesian_prod(a, b)", lambda a, b: torch.cartesian_prod(a, b),
     {"a": torch.tensor([1, 2]), "b": torch.tensor([3, 4, 5])})

# ---- tensor_extra: inverse hyperbolics, sinc, signs, NaN-ignoring extremes, statistics, building
wide = torch.tensor([-1e300, -3e9, -2.5, -1e-12, -0.0, 0.0, 1e-300, 0.3, 7.0, 4e8, 1e200], dtype=D)
case("asinh", "a:asinh()", lambda a: a.asinh(), {"a": wide})
case("asinh grad", "e.arcsinh(a)", lambda a: torch.arcsinh(a), {"a": r(3, 4) * 3}, grad=("a",))
case("acosh", "a:acosh()", lambda a: a.acosh(), {"a": torch.tensor([1.0, 1 + 1e-12, 1.5, 10, 3e9, 1e300, 0.5, NAN], dtype=D)})
case("acosh grad", "a:arccosh()", lambda a: a.arccosh(), {"a": r(6).abs() + 1.1}, grad=("a",))
case("atanh", "a:atanh()", lambda a: a.atanh(), {"a": torch.tensor([-1.0, -0.5, -1e-13, 0, 0.3, 0.999999, 1, 1.5], dtype=D)})
case("atanh grad", "e.arctanh(a)", lambda a: torch.arctanh(a), {"a": torch.rand(5, dtype=D) * 1.8 - 0.9}, grad=("a",))
case("sinc", "a:sinc()", lambda a: a.sinc(), {"a": torch.tensor([0., 0.5, 1, -2.5, 1e-9, 3.3], dtype=D)}, grad=("a",))
sb = torch.tensor([-0.0, 0.0, -1, 2, float("inf"), -float("inf")], dtype=D)
case("signbit", "a:signbit()", lambda a: a.signbit(), {"a": sb})
case("signbit int", "a:signbit()", lambda a: a.signbit(), {"a": torch.tensor([-3, 0, 4])})
case("copysign", "e.copysign(a, b)", lambda a, b: torch.copysign(a, b), {"a": r(6), "b": sb}, grad=("a",))
case("copysign number", "a:copysign(-1)", lambda a: a.copysign(-1), {"a": r(4)})
case("isposinf isneginf", "e.isposinf(a), a:isneginf()", lambda a: (torch.isposinf(a), a.isneginf()), {"a": sb})
fa = torch.tensor([1., NAN, 3, NAN, -0.5], dtype=D)
fb = torch.tensor([2., 0, NAN, NAN, -1], dtype=D)
case("fmax", "e.fmax(a, b)", lambda a, b: torch.fmax(a, b), {"a": fa, "b": fb})
case("fmin", "a:fmin(b)", lambda a, b: a.fmin(b), {"a": fa, "b": fb})
case("fmax grad", "e.fmax(a, b)", lambda a, b: torch.fmax(a, b), {"a": r(5), "b": r(5)}, grad=("a", "b"))
case("logaddexp2", "e.logaddexp2(a, b)", lambda a, b: torch.logaddexp2(a, b), {"a": r(3, 4) * 50, "b": r(4) * 50}, grad=("a", "b"))
case("float_power int", "e.float_power(a, 2)", lambda a: torch.float_power(a, 2), {"a": torch.tensor([-3, 0, 5])})
case("float_power tensor", "a:float_power(b)", lambda a, b: a.float_power(b), {"a": r(4).abs(), "b": r(4)}, grad=("a", "b"))
case("heaviside", "e.heaviside(a, b)", lambda a, b: torch.heaviside(a, b),
     {"a": torch.tensor([-1., 0, 2, NAN, -0.0], dtype=D), "b": torch.tensor([0.5], dtype=D)})
case("dist", "e.dist(a, b, 3)", lambda a, b: torch.dist(a, b, 3), {"a": r(3, 4), "b": r(4)}, grad=("a", "b"))
case("dist default", "a:dist(b)", lambda a, b: a.dist(b), {"a": r(5), "b": r(5)}, grad=("a", "b"))
case("cov", "a:cov()", lambda a: a.cov(), {"a": r(3, 6)}, grad=("a",))
case("cov correction 0", "e.cov(a, {correction = 0})", lambda a: torch.cov(a, correction=0), {"a": r(2, 5)}, grad=("a",))
case("cov 1-d", "a:cov()", lambda a: a.cov(), {"a": r(5)})
case("corrcoef", "a:corrcoef()", lambda a: a.corrcoef(), {"a": r(3, 6)}, grad=("a",))
case("block_diag", "e.block_diag(a, b, c)", lambda a, b, c: torch.block_diag(a, b, c),
     {"a": r(2, 2), "b": r(3), "c": torch.tensor(4.0, dtype=D)}, grad=("a", "b"))
case("block_diag int", "e.block_diag(a, b)", lambda a, b: torch.block_diag(a, b), {"a": torch.tensor([[1, 2]]), "b": torch.tensor([[3], [4]])})
case("diagflat", "e.diagflat(a, -1)", lambda a: torch.diagflat(a, -1), {"a": r(2, 2)}, grad=("a",))
case("column_stack", "e.column_stack({a, b, c})", lambda a, b, c: torch.column_stack((a, b, c)),
     {"a": r(3), "b": r(3, 2), "c": r(3)})
case("row_stack", "e.row_stack({a, b})", lambda a, b: torch.row_stack((a, b)), {"a": r(3), "b": r(2, 3)})
case("atleast_3d", "e.atleast_3d(a), e.atleast_3d(b), e.atleast_2d(c), e.atleast_1d(c)",
     lambda a, b, c: (torch.atleast_3d(a), torch.atleast_3d(b), torch.atleast_2d(c), torch.atleast_1d(c)),
     {"a": r(3), "b": r(2, 3), "c": torch.tensor(1.5, dtype=D)})
case("hsplit", "a:hsplit(3)[2]", lambda a: a.hsplit(3)[1], {"a": r(2, 6)})
case("hsplit indices", "a:hsplit({2, 5})[2]", lambda a: a.hsplit([1, 4])[1], {"a": r(2, 6)})
case("vsplit", "a:vsplit(2)[2]", lambda a: a.vsplit(2)[1], {"a": r(4, 3)})
case("dsplit", "e.dsplit(a, 2)[1]", lambda a: torch.dsplit(a, 2)[0], {"a": r(2, 2, 4)})
case("trapezoid", "e.trapezoid(a)", lambda a: torch.trapezoid(a), {"a": r(3, 5)}, grad=("a",))
case("trapezoid dx dim", "e.trapezoid(a, {dx = 0.5, dim = 1})", lambda a: torch.trapezoid(a, dx=0.5, dim=0), {"a": r(3, 5)})
case("trapezoid x", "e.trapezoid(a, b)", lambda a, b: torch.trapezoid(a, b), {"a": r(2, 4), "b": torch.tensor([0., 1, 3, 3.5], dtype=D)}, grad=("a",))
case("trapz x 2d", "e.trapz(a, b, {dim = 1})", lambda a, b: torch.trapz(a, b, dim=0), {"a": r(3, 2), "b": r(3, 2)}, grad=("a", "b"))
case("vander", "e.vander(a)", lambda a: torch.vander(a), {"a": r(4)})  # torch 1.13 vander has no backward (in-place cumprod): gradchecked in the spec
case("vander increasing", "e.vander(a, 3, {increasing = true})", lambda a: torch.vander(a, 3, increasing=True), {"a": torch.tensor([2, -1, 3])})
case("combinations", "e.combinations(a)", lambda a: torch.combinations(a), {"a": r(4)}, grad=("a",))
case("combinations r3 replacement", "e.combinations(a, 3, {with_replacement = true})",
     lambda a: torch.combinations(a, 3, with_replacement=True), {"a": torch.tensor([1, 2, 3])})
case("gcd lcm", "e.gcd(a, b), a:lcm(b)", lambda a, b: (torch.gcd(a, b), a.lcm(b)),
     {"a": torch.tensor([[12, -18, 0, 7], [0, 5, 9, -4]]), "b": torch.tensor([8, 12, 0, -21])})
case("put", "a:put(b, c)", lambda a, b, c: a.put(b, c), {"a": r(3, 4), "b": torch.tensor([0, 11, 5]), "c": r(3)},
     idx=("b",), grad=("a", "c"))
case("put accumulate", "a:put(b, c, true)", lambda a, b, c: a.put(b, c, accumulate=True),
     {"a": r(3, 4), "b": torch.tensor([[0, 11], [0, 5]]), "c": r(2, 2)}, idx=("b",), grad=("a", "c"))

# ---- products with an input (the addmm rule), renorm, flip of no dims
case("addmv", "a:addmv(b, c, {beta = 0.5, alpha = 2})", lambda a, b, c: a.addmv(b, c, beta=0.5, alpha=2),
     {"a": r(2), "b": r(2, 3), "c": r(3)}, grad=("a", "b", "c"))
case("addr", "e.addr(a, b, c)", lambda a, b, c: torch.addr(a, b, c), {"a": r(1, 3), "b": r(2), "c": r(3)}, grad=("a", "b", "c"))
case("addbmm", "a:addbmm(b, c, {alpha = -1})", lambda a, b, c: a.addbmm(b, c, alpha=-1),
     {"a": r(2, 3), "b": r(4, 2, 5), "c": r(4, 5, 3)}, grad=("a", "b", "c"))
case("renorm", "a:renorm(2, 1, 1)", lambda a: a.renorm(2, 0, 1), {"a": r(3, 4)}, grad=("a",))
case("renorm p1 dim 3", "a:renorm(1, -1, 2)", lambda a: a.renorm(1, -1, 2), {"a": r(2, 3, 4)}, grad=("a",))
case("flip no dims", "a:flip({})", lambda a: a.flip(()), {"a": r(2, 3)})

case("searchsorted NaN values", "e.searchsorted(a, b), e.searchsorted(a, b, {right = true})",
     lambda a, b: (torch.searchsorted(a, b), torch.searchsorted(a, b, right=True)),
     {"a": torch.tensor([1., 2, 3], dtype=D), "b": torch.tensor([1.5, NAN, 3, NAN], dtype=D)}, out_idx=(1, 2))
case("searchsorted NaN at the end of seq", "e.searchsorted(a, b)", lambda a, b: torch.searchsorted(a, b),
     {"a": torch.tensor([1., 2, NAN], dtype=D), "b": torch.tensor([NAN, 0.5, 1.5], dtype=D)}, out_idx=(1,))
case("median empty", "a:median(), a:nanmedian()", lambda a: (a.median(), a.nanmedian()), {"a": torch.zeros(0, dtype=D)})
case("index_fill 0-d", "a:index_fill(1, b, -1)", lambda a, b: a.index_fill(0, b, -1),
     {"a": torch.tensor(2.5, dtype=D), "b": torch.tensor([0])}, idx=("b",))
case("gather scatter scatter_add 0-d", "a:gather(1, b), a:scatter(-1, b, c), a:scatter_add(1, b, c), a:scatter(1, b, 4.0)",
     lambda a, b, c: (a.gather(0, b), a.scatter(-1, b, c), a.scatter_add(0, b, c), a.scatter(0, b, 4.0)),
     {"a": torch.tensor(2.5, dtype=D), "b": torch.tensor(0), "c": torch.tensor(7.0, dtype=D)}, idx=("b",))
# ---- erfc, aliases, sum_to_size, cumulative_trapezoid
case("erfc", "a:erfc()", lambda a: a.erfc(),
     {"a": torch.tensor([-30, -3, -0.2, -0.0, 0, 1e-10, 0.1, 1, 2.4, 2.5, 2.6, 3, 6, 10, 26, 30, NAN, float("inf")], dtype=D)})
case("erfc grad", "e.erfc(a)", lambda a: torch.erfc(a), {"a": r(3, 4) * 3}, grad=("a",))
case("comparison aliases", "a:greater(b), a:greater_equal(b), e.less(a, b), a:less_equal(0), a:not_equal(b)",
     lambda a, b: (a.greater(b), a.greater_equal(b), torch.less(a, b), a.less_equal(0), a.not_equal(b)),
     {"a": torch.tensor([1., 2, NAN, 0], dtype=D), "b": torch.tensor([2., 2, 1, -1], dtype=D)})
case("rsub", "e.rsub(a, b, {alpha = 2})", lambda a, b: torch.rsub(a, b, alpha=2), {"a": r(3), "b": r(2, 3)}, grad=("a", "b"))
case("rsub number", "e.rsub(a, 1)", lambda a: torch.rsub(a, 1), {"a": torch.tensor([3, -1])})
case("sum_to_size", "a:sum_to_size(3, 1)", lambda a: a.sum_to_size(3, 1), {"a": r(2, 3, 4)}, grad=("a",))
case("sum_to_size table", "a:sum_to_size({4})", lambda a: a.sum_to_size((4,)), {"a": r(2, 3, 4)})
case("cumulative_trapezoid", "e.cumulative_trapezoid(a)", lambda a: torch.cumulative_trapezoid(a), {"a": r(3, 5)}, grad=("a",))
case("cumulative_trapezoid x dim", "e.cumulative_trapezoid(a, b, {dim = 1})",
     lambda a, b: torch.cumulative_trapezoid(a, b, dim=0), {"a": r(4, 2), "b": torch.tensor([0., 0.5, 2, 2.5], dtype=D)},
     grad=("a", "b"))
case("cumulative_trapezoid dx", "e.cumulative_trapezoid(a, {dx = 0.1})", lambda a: torch.cumulative_trapezoid(a, dx=0.1), {"a": r(5)})

Writer(floats=zero_signed).write("tests/fixtures/tensor_ops_torch.lua", "tests/gen_tensor_ops_torch_fixtures.py", {"cases": CASES})
print(len(CASES), "cases")
