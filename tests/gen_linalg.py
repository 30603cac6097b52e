#!/usr/bin/python3
"""Writes tests/fixtures/linalg.lua: PyTorch 1.13 torch.linalg reference
values for ember.linalg (tests/lua/linalg_spec.lua).

Run with Debian's python3-torch:  /usr/bin/python3 tests/gen_linalg.py

Each case names a function of FNS below (the spec has the same functions in
Lua), its inputs, its outputs and the gradients of sum_i sum(out_i * W_i)
for fixed random W_i with respect to every input. Eigen- and singular
vectors and QR's factors are sign-normalized inside the function (each
column of V or U times the sign of its first entry, Vh's rows likewise; Q's
columns and R's rows times the sign of R's diagonal), so that outputs and
gradients do not depend on LAPACK's sign choices. All float64, own seed;
well-conditioned inputs (SPD matrices with a margin, distinct eigen- and
singular values), batched [2, 3, n, n] cases too.
"""
import os

import torch

from fixture_writer import Writer

torch.manual_seed(20261207)
torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
L = torch.linalg


def colsign(V):  # each column times the sign of its first entry
    return V * torch.sign(V[..., :1, :])


def qr_norm(A, mode="reduced"):
    Q, R = L.qr(A, mode=mode)
    d = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))
    k = d.shape[-1]
    Q = torch.cat([Q[..., :k] * d.unsqueeze(-2), Q[..., k:]], -1)
    R = torch.cat([R[..., :k, :] * d.unsqueeze(-1), R[..., k:, :]], -2)
    return Q, R


def svd_norm(A):
    U, S, Vh = L.svd(A, full_matrices=False)
    s = torch.sign(U[..., :1, :])
    return U * s, S, Vh * s.transpose(-2, -1)


def torch_svd_norm(A):  # torch.svd: V, not Vh
    U, S, V = torch.svd(A)
    s = torch.sign(U[..., :1, :])
    return [U * s, S, V * s]


def eigh_norm(A, uplo="L"):
    w, V = L.eigh(A, UPLO=uplo)
    return w, colsign(V)


FNS = {
    "cholesky": lambda A: [L.cholesky(A)],
    "cholesky_upper": lambda A: [L.cholesky(A, upper=True)],
    "inv": lambda A: [L.inv(A)],
    "det": lambda A: [L.det(A)],
    "slogdet": lambda A: list(L.slogdet(A)),
    "logdet": lambda A: [torch.logdet(A)],
    "solve": lambda A, B: [L.solve(A, B)],
    "solve_left_false": lambda A, B: [L.solve(A, B, left=False)],
    "solve_triangular_upper": lambda A, B: [L.solve_triangular(A, B, upper=True)],
    "solve_triangular_lower_unit": lambda A, B: [L.solve_triangular(A, B, upper=False, unitriangular=True)],
    "solve_triangular_right": lambda A, B: [L.solve_triangular(A, B, upper=True, left=False)],
    "qr": lambda A: list(qr_norm(A)),
    "qr_complete": lambda A: list(qr_norm(A, "complete")),
    "eigh": lambda A: list(eigh_norm(A)),
    "eigh_upper": lambda A: list(eigh_norm(A, "U")),
    "eigvalsh": lambda A: [L.eigvalsh(A)],
    "svd": lambda A: list(svd_norm(A)),
    "svdvals": lambda A: [L.svdvals(A)],
    "torch_svd": lambda A: torch_svd_norm(A),
    "pinv": lambda A: [L.pinv(A)],
    "lstsq": lambda A, B: [L.lstsq(A, B).solution],
    "matrix_norm_fro": lambda A: [L.matrix_norm(A)],
    "matrix_norm_nuc": lambda A: [L.matrix_norm(A, "nuc")],
    "matrix_norm_2": lambda A: [L.matrix_norm(A, 2)],
    "matrix_norm_-2": lambda A: [L.matrix_norm(A, -2)],
    "matrix_norm_1": lambda A: [L.matrix_norm(A, 1)],
    "matrix_norm_-1": lambda A: [L.matrix_norm(A, -1)],
    "matrix_norm_inf": lambda A: [L.matrix_norm(A, float("inf"))],
    "matrix_norm_-inf": lambda A: [L.matrix_norm(A, -float("inf"))],
    "vector_norm_3": lambda A: [L.vector_norm(A, 3, dim=-1)],
    "vector_norm_inf": lambda A: [L.vector_norm(A, float("inf"))],
    "norm": lambda A: [L.norm(A)],
    "matrix_power_3": lambda A: [L.matrix_power(A, 3)],
    "matrix_power_-2": lambda A: [L.matrix_power(A, -2)],
    "multi_dot": lambda A, B, C: [L.multi_dot([A, B, C])],
    "matrix_rank": lambda A: [L.matrix_rank(A).double()],
    "matrix_exp": lambda A: [L.matrix_exp(A)],
    "pinverse": lambda A: [torch.pinverse(A)],
    "torch_matrix_power": lambda A: [torch.matrix_power(A, 2)],
    "cholesky_solve": lambda B, Lf: [torch.cholesky_solve(B, Lf)],
    "cholesky_solve_upper": lambda B, U: [torch.cholesky_solve(B, U, upper=True)],
    "cholesky_inverse": lambda Lf: [torch.cholesky_inverse(Lf)],
    "lu": lambda A: list(L.lu(A)),
    "lu_factor": lambda A: [L.lu_factor(A)[0], L.lu_factor(A)[1].double()],
    "lu_solve": lambda A, B: [L.lu_solve(*L.lu_factor(A), B)],
    "lu_solve_adjoint": lambda A, B: [L.lu_solve(*L.lu_factor(A), B, adjoint=True)],
    "cond": lambda A: [L.cond(A)],
    "cond_fro": lambda A: [L.cond(A, "fro")],
    "cond_-2": lambda A: [L.cond(A, -2)],
    "vecdot": lambda x, y: [L.vecdot(x, y)],
    "cross": lambda x, y: [L.cross(x, y)],
}


def spd(*shape):
    n = shape[-1]
    X = torch.randn(*shape)
    return X @ X.transpose(-2, -1) + n * torch.eye(n)


def general(*shape):  # well conditioned: a random matrix plus a diagonal margin
    n = shape[-1]
    return torch.randn(*shape) + (n if shape[-1] == shape[-2] else 0) * torch.eye(shape[-2], shape[-1])


def triangular(*shape, upper):
    A = general(*shape)
    return A.triu() if upper else A.tril()


TRIANGLE_GRADS = {"cholesky_solve": [(1, "lower")], "cholesky_solve_upper": [(1, "upper")],
                  "cholesky_inverse": [(0, "lower")]}


def singular_pair():  # LU meets an exact zero pivot in both
    A, B = torch.randn(4, 4), torch.randn(4, 4)
    A[:, 2] = 0
    B[:, 0] = 0
    return torch.stack([A, B])


def case(name, fn, *inputs, grads=True):
    inputs = [x.clone().requires_grad_(grads) for x in inputs]
    outs = FNS[fn](*inputs)
    Ws = [torch.randn(o.shape) for o in outs]
    out = {"name": name, "fn": fn, "inputs": [x.detach() for x in inputs], "outputs": [o.detach() for o in outs],
           "W": Ws}
    if grads:
        loss = sum((o * w).sum() for o, w in zip(outs, Ws))
        gs = [g.detach() for g in torch.autograd.grad(loss, inputs)]
        # torch's cholesky_solve/cholesky_inverse differentiate L as a full
        # matrix although only its triangle is read; ember's gradient is that
        # triangle's, which equals torch's there
        for i, part in TRIANGLE_GRADS.get(fn, []):
            gs[i] = gs[i].tril() if part == "lower" else gs[i].triu()
        out["grads"] = gs
    return out


cases = [
    case("cholesky 4x4", "cholesky", spd(4, 4)),
    case("cholesky batched [2,3,4,4]", "cholesky", spd(2, 3, 4, 4)),
    case("cholesky upper", "cholesky_upper", spd(3, 3)),
    case("inv 4x4", "inv", general(4, 4)),
    case("inv batched [2,3,4,4]", "inv", general(2, 3, 4, 4)),
    case("det 4x4", "det", general(4, 4)),
    case("det batched [2,3,3,3]", "det", general(2, 3, 3, 3)),
    case("det with row swaps (odd permutation)", "det", torch.tensor([[0., 2, 1], [1, 0, 0], [0, 1, 3]]) + 0.1 * torch.randn(3, 3)),
    # values only: torch 1.13 gives a zero gradient at an exactly singular
    # matrix; ember gives the adjugate's (the limit; linalg_spec's gradcheck)
    case("det of exactly singular matrices (a zero column in each), batched (values only)", "det",
         singular_pair(), grads=False),
    case("slogdet negative det", "slogdet", torch.tensor([[0., 2, 1], [1, 0, 0], [0, 1, 3]]) + 0.1 * torch.randn(3, 3)),
    case("logdet spd", "logdet", spd(4, 4)),
    case("solve matrix B", "solve", general(4, 4), torch.randn(4, 2)),
    case("solve vector B", "solve", general(4, 4), torch.randn(4)),
    case("solve batched [2,3,4,4] with a broadcast B [4,2]", "solve", general(2, 3, 4, 4), torch.randn(4, 2)),
    case("solve left=false", "solve_left_false", general(3, 3), torch.randn(2, 3)),
    case("solve_triangular upper", "solve_triangular_upper", triangular(4, 4, upper=True), torch.randn(4, 3)),
    case("solve_triangular lower unit", "solve_triangular_lower_unit", general(4, 4), torch.randn(4, 2)),
    case("solve_triangular right", "solve_triangular_right", triangular(3, 3, upper=True), torch.randn(2, 3)),
    case("qr tall 5x3", "qr", torch.randn(5, 3)),
    case("qr square batched [2,3,4,4]", "qr", torch.randn(2, 3, 4, 4)),
    case("qr wide 3x5", "qr", torch.randn(3, 5)),
    case("qr complete wide 3x5", "qr_complete", torch.randn(3, 5)),
    case("qr complete tall 5x3 (values only)", "qr_complete", torch.randn(5, 3), grads=False),
    case("eigh 4x4", "eigh", spd(4, 4)),
    case("eigh batched [2,3,4,4]", "eigh", spd(2, 3, 4, 4)),
    case("eigh UPLO=U", "eigh_upper", spd(4, 4)),
    case("eigvalsh", "eigvalsh", spd(5, 5)),
    case("svd tall 5x3", "svd", torch.randn(5, 3)),
    case("svd wide 3x5", "svd", torch.randn(3, 5)),
    case("svd batched [2,3,4,4]", "svd", torch.randn(2, 3, 4, 4)),
    case("svdvals 4x6", "svdvals", torch.randn(4, 6)),
    case("torch.svd returns V", "torch_svd", torch.randn(4, 3)),
    case("pinv 5x3", "pinv", torch.randn(5, 3)),
    case("lstsq tall", "lstsq", torch.randn(6, 3), torch.randn(6, 2)),
    case("lstsq batched", "lstsq", torch.randn(2, 5, 3), torch.randn(2, 5, 2)),
    case("matrix_norm fro", "matrix_norm_fro", torch.randn(2, 3, 4)),
    case("matrix_norm nuc", "matrix_norm_nuc", torch.randn(3, 4)),
    case("matrix_norm 2", "matrix_norm_2", torch.randn(4, 3)),
    case("matrix_norm -2", "matrix_norm_-2", torch.randn(4, 3)),
    case("matrix_norm 1", "matrix_norm_1", torch.randn(3, 4)),
    case("matrix_norm -1", "matrix_norm_-1", torch.randn(3, 4)),
    case("matrix_norm inf", "matrix_norm_inf", torch.randn(3, 4)),
    case("matrix_norm -inf", "matrix_norm_-inf", torch.randn(3, 4)),
    case("vector_norm 3 dim -1", "vector_norm_3", torch.randn(3, 4)),
    case("vector_norm inf", "vector_norm_inf", torch.randn(3, 4)),
    case("norm", "norm", torch.randn(3, 4)),
    case("matrix_power 3", "matrix_power_3", torch.randn(2, 3, 3)),
    case("matrix_power -2", "matrix_power_-2", general(3, 3)),
    case("multi_dot", "multi_dot", torch.randn(2, 3), torch.randn(3, 4), torch.randn(4, 2)),
    case("lu 4x4 (row swaps)", "lu", torch.randn(4, 4)),
    case("lu batched [2,3,3,3]", "lu", torch.randn(2, 3, 3, 3)),
    case("lu tall 5x3 (values only)", "lu", torch.randn(5, 3), grads=False),
    case("lu wide 3x5 (values only)", "lu", torch.randn(3, 5), grads=False),
    case("lu_factor", "lu_factor", torch.randn(4, 4)),
    case("lu_solve through lu_factor", "lu_solve", general(2, 4, 4), torch.randn(2, 4, 2)),
    case("lu_solve adjoint", "lu_solve_adjoint", torch.randn(4, 4), torch.randn(4, 3)),
    case("torch.pinverse", "pinverse", torch.randn(3, 5)),
    case("torch.matrix_power", "torch_matrix_power", torch.randn(3, 3)),
    case("torch.cholesky_solve", "cholesky_solve", torch.randn(2, 4, 2), L.cholesky(spd(2, 4, 4))),
    case("torch.cholesky_solve upper", "cholesky_solve_upper", torch.randn(4, 3), L.cholesky(spd(4, 4), upper=True)),
    case("torch.cholesky_inverse", "cholesky_inverse", L.cholesky(spd(4, 4))),
    case("matrix_exp small norm", "matrix_exp", 0.3 * torch.randn(4, 4)),
    case("matrix_exp with squaring, batched [2,3,4,4]", "matrix_exp", 3 * torch.randn(2, 3, 4, 4)),
    case("cond 2", "cond", general(4, 4)),
    case("cond fro (values only: torch 1.13 fails its backward, an in-place write in linalg.cond)", "cond_fro", general(4, 4), grads=False),
    case("cond -2 of a 5x3", "cond_-2", torch.randn(5, 3)),
    case("vecdot", "vecdot", torch.randn(2, 4), torch.randn(4)),
    case("cross", "cross", torch.randn(2, 3), torch.randn(2, 3)),
    case("matrix_rank of a rank-2 4x4", "matrix_rank", torch.randn(4, 2) @ torch.randn(2, 4), grads=False),
]

Writer().write(os.path.join(HERE, "fixtures", "linalg.lua"), "tests/gen_linalg.py", {"cases": cases})
