#!/usr/bin/python3
"""PyTorch peer of scripts/bench/conv.lua, one case per run:

  /usr/bin/python3 scripts/bench/conv_torch.py B CIN COUT K STRIDE PADDING H fp32|bf16 REPS THREADS

A step is y = Conv2d(CIN, COUT, K, stride, padding)(x) on x [B, CIN, H, H],
then y.float().sum().backward(); bf16 runs the forward under
torch.autocast("cpu", dtype=torch.bfloat16). Prints the best of REPS (after
warm-up steps: at least two and 0.3 s, as conv.lua) in wall-clock ms.
"""
import sys
import time

import torch


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--help", "-h"):
        print(__doc__.strip())
        return
    if len(sys.argv) != 11:
        sys.exit("usage: " + __doc__.strip().splitlines()[2].strip() + "  (see --help)")
    B, cin, cout, k, stride, padding, H = (int(v) for v in sys.argv[1:8])
    bf16 = sys.argv[8] == "bf16"
    reps, threads = int(sys.argv[9]), int(sys.argv[10])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = torch.nn.Conv2d(cin, cout, k, stride=stride, padding=padding)
    x = torch.randn(B, cin, H, H, requires_grad=True)

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            y = m(x)
        y.float().sum().backward()
        m.zero_grad()
        x.grad = None

    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < 0.3:
        step()
        n += 1
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    print("%.3f" % (best * 1e3))


if __name__ == "__main__":
    main()
