#!/usr/bin/python3
"""PyTorch peer of scripts/bench/attention.lua: one nn.MultiheadAttention layer
(batch_first, float32, CPU), forward + backward, for one configuration.

  /usr/bin/python3 scripts/bench/attention_torch.py L B causal(0|1) [d_model heads reps threads clock]

clock: "wall" (default) or "cpu" (the process's CPU time, as attention.lua --cpu-time).

Prints one line: "<seconds per fwd+bwd (best of reps)> <peak RSS growth in MiB>". The peak is
measured as attention.lua does: VmHWM after resetting it (clear_refs 5)
minus the resident size before the run.
"""
import math
import sys
import time

import torch


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    L, B, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    d_model = int(sys.argv[4]) if len(sys.argv) > 4 else 256
    heads = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    reps = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    threads = int(sys.argv[7]) if len(sys.argv) > 7 else 2
    now = time.process_time if len(sys.argv) > 8 and sys.argv[8] == "cpu" else time.perf_counter
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(d_model, heads, batch_first=True)
    x = torch.randn(B, L, d_model, requires_grad=True)
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1) if causal else None

    def step():
        out, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
        out.sum().backward()

    t_warm = now()
    step()  # warm up
    t_warm = now() - t_warm
    # as attention.lua: short rows get at least a second of runs, up to 50
    reps = max(reps, min(50, math.ceil(1.0 / max(t_warm, 1e-3))))
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = rss_kib("VmRSS")
    dt = float("inf")
    for _ in range(reps):  # the best run, as attention.lua reports
        t0 = now()
        step()
        dt = min(dt, now() - t0)
    peak = rss_kib("VmHWM") - base
    print("%.6f %.1f" % (dt, peak / 1024.0))


if __name__ == "__main__":
    main()
