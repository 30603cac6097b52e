#!/usr/bin/python3
"""PyTorch peer of scripts/bench/precision.lua, one case per run:

  /usr/bin/python3 scripts/bench/precision_torch.py attention L B fp32|bf16 REPS THREADS [wall|cpu]
  /usr/bin/python3 scripts/bench/precision_torch.py causal L B fp32|bf16 REPS THREADS [wall|cpu]
  /usr/bin/python3 scripts/bench/precision_torch.py classifier B L fp32|bf16 REPS THREADS [wall|cpu]

bf16 runs the forward and the loss under torch.autocast("cpu", dtype=torch.bfloat16),
the way PyTorch documents mixed precision on the CPU. Prints the best of REPS in ms
(wall clock, or with cpu the process's CPU time, as precision.lua --cpu-time).
"""
import sys
import time

import torch


def attention_step(L, B, bf16, causal=False):
    mha = torch.nn.MultiheadAttention(256, 8, batch_first=True)
    x = torch.randn(B, L, 256, requires_grad=True)
    # torch 1.13's MultiheadAttention has no is_causal: a boolean mask, True = hidden
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1) if causal else None

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out, _ = mha(x, x, x, need_weights=False, attn_mask=mask)
        out.float().sum().backward()
        mha.zero_grad()
    return step


def classifier_step(B, L, bf16):
    emb = torch.nn.Embedding(10000, 128)
    enc = torch.nn.TransformerEncoderLayer(128, 4, dim_feedforward=256, dropout=0.1, batch_first=True)
    head = torch.nn.Linear(128, 5)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    x = torch.randint(0, 10000, (B, L))
    y = torch.randint(0, 5, (B,))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = torch.nn.functional.cross_entropy(head(enc(emb(x)).mean(1)), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
    return step


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("--help", "-h"):
        print(__doc__.strip())
        return
    if len(sys.argv) not in (7, 8):
        sys.exit("usage: " + __doc__.strip().splitlines()[2].strip() + "  (see --help)")
    kind, a, b, prec, reps, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    now = time.process_time if len(sys.argv) == 8 and sys.argv[7] == "cpu" else time.perf_counter
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if kind == "classifier":
        step = classifier_step(a, b, prec == "bf16")
    else:
        step = attention_step(a, b, prec == "bf16", kind == "causal")
    step()
    step()
    best = float("inf")
    for _ in range(reps):
        t0 = now()
        step()
        best = min(best, now() - t0)
    print("%.3f" % (best * 1e3))


if __name__ == "__main__":
    main()
