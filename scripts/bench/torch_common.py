"""Shared pieces of the PyTorch peers of scripts/*.lua (run with Debian's
/usr/bin/python3 and python3-torch 1.13): options, the warm-up + cosine
schedule, and timing. Each peer trains the same model in the same config
as its Lua script and prints its wall time and metric."""
import argparse
import math
import time

import torch


def parser(description, epochs, lr, batch):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--smoke", action="store_true", help="a few steps on a subset")
    p.add_argument("--max-steps", "--max_steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--time-limit", "--time_limit", type=float, default=None,
                   help="stop after this many seconds of training (the schedule is unchanged), then evaluate")
    p.add_argument("--bf16", action="store_true",
                   help="run everything under CPU autocast to bfloat16 (torch.autocast's op lists)")
    return p


def setup(args):
    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    if getattr(args, "bf16", False):
        # torch.autocast("cpu", torch.bfloat16) for the whole run, without its
        # cast cache: the cache lives until the outermost autocast exits, so
        # kept on for the whole run it would keep the weights of step 1
        torch.set_autocast_cpu_dtype(torch.bfloat16)
        torch.set_autocast_cpu_enabled(True)
        torch.set_autocast_cache_enabled(False)
        # torch 1.13's nn.TransformerEncoderLayer takes its inference fast
        # path (fp32 weights on bf16 activations: "expected scalar type
        # BFloat16 but found Float") unless torch.is_autocast_enabled(), which
        # asks about CUDA's autocast only: make it ask about the CPU's too
        cuda_autocast = torch.is_autocast_enabled
        torch.is_autocast_enabled = lambda: torch.is_autocast_cpu_enabled() or cuda_autocast()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads"
          + (", autocast bfloat16" if getattr(args, "bf16", False) else ""))


def warmup_cosine(opt, warmup, total, min_ratio=0.0):
    """The schedule of ember's optim.WarmupCosine (LambdaLR form)."""
    def f(s):
        if s < warmup:
            return (s + 1) / warmup
        p = min(1.0, (s - warmup) / max(1, total - warmup))
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p))
    return torch.optim.lr_scheduler.LambdaLR(opt, f)


class Clock:
    """Training wall time, excluding evaluation."""
    def __init__(self):
        self.total = 0.0
        self.start = None

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.total += time.perf_counter() - self.start
        self.start = None

    def over(self, limit):
        """True once the training time (the running interval included) reaches limit seconds."""
        now = self.total + (time.perf_counter() - self.start if self.start is not None else 0.0)
        return limit is not None and now >= limit
