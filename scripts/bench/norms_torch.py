#!/usr/bin/python3
"""PyTorch peer of scripts/bench/norms.lua:

  /usr/bin/python3 scripts/bench/norms_torch.py REPS THREADS wall|cpu WIDTHS

WIDTHS is a comma-separated list of feature counts (rows are 4096). For
layer_norm and rms_norm, float32 and bf16 (a bfloat16 input, float32 weight
and bias, under torch.autocast("cpu", dtype=torch.bfloat16)), prints
"op n prec fwd_ms bwd_ms": the best of REPS of one forward with the graph
recorded, and of torch.autograd.backward of its output with the graph
retained, into the .grad of input, weight (and bias), reset to None before
each run. PyTorch 1.13 has no RMSNorm: rms_norm is the
composition Llama's code writes, x * rsqrt(mean(x^2) + eps) * weight, in
float32. torch 1.13's CPU autocast leaves layer_norm alone, and its kernel
refuses a bfloat16 input with float32 weights, so the bf16 layer_norm casts
the input to float32 first (x.float()), which is what ember's autocast does.
"""
import sys
import time

import torch

ROWS, EPS = 4096, 1e-5


def best(fn, reps, now):
    fn()
    b = float("inf")
    for _ in range(reps):
        t0 = now()
        fn()
        b = min(b, now() - t0)
    return b * 1e3


def rms_norm(x, w):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def case(op, n, prec, reps, now):
    torch.manual_seed(0)
    x = torch.randn(ROWS, n)
    if prec == "bf16":
        x = x.bfloat16()
    x.requires_grad_()
    w = (torch.rand(n) + 0.5).requires_grad_()
    b = torch.randn(n).requires_grad_() if op == "layer_norm" else None

    def fwd():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            if op == "layer_norm":
                return torch.nn.functional.layer_norm(x.float(), (n,), w, b, EPS)
            return rms_norm(x, w)

    tf = best(fwd, reps, now)
    y = fwd()
    gy = torch.randn(ROWS, n).to(y.dtype)
    ins = [x, w, b] if b is not None else [x, w]

    def bwd():
        for t in ins:
            t.grad = None
        torch.autograd.backward(y, gy, retain_graph=True)

    tb = best(bwd, reps, now)
    return tf, tb


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--help", "-h"):
        print(__doc__.strip())
        return
    if len(sys.argv) != 5:
        sys.exit("usage: " + __doc__.strip().splitlines()[2].strip() + "  (see --help)")
    reps, threads = int(sys.argv[1]), int(sys.argv[2])
    now = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
    torch.set_num_threads(threads)
    for op in ("layer_norm", "rms_norm"):
        for n in (int(v) for v in sys.argv[4].split(",")):
            for prec in ("fp32", "bf16"):
                tf, tb = case(op, n, prec, reps, now)
                print(f"{op} {n} {prec} {tf:.4f} {tb:.4f}", flush=True)


if __name__ == "__main__":
    main()
