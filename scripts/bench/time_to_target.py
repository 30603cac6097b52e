#!/usr/bin/env python3
"""Reads a training log (an ember script's or its PyTorch peer's) and prints
the training seconds at which the test metric first reached the issue's
target, or "not reached (best ...)".

    python3 scripts/bench/time_to_target.py TASK LOG

Every evaluation line of both sides carries the metric and the training time
so far ("(123 s)" in ember's, "train time 123.4 s" in PyTorch's); the final
RESULT line counts as one more evaluation. Standard library only."""
import re
import sys

NUM = r"(\d+(?:\.\d+)?)"
# task -> (metric regexes, targets, higher is better); the targets are issue
# 14's goals (addition: "stays >= 99.5%", KJV: <= 1.75 bpc)
TASKS = {
    "langid": ([r"test acc " + NUM + "%", r"test_acc=" + NUM + "%"], [90.5], True),
    "fashion_vit": ([r"test acc " + NUM + "%", r"test_acc=" + NUM + "%"], [91.0], True),
    "addition": ([r"exact match " + NUM + "%", r"exact_match=" + NUM + "%"], [99.5], True),
    "kjv_lm": ([r"test " + NUM + r" (?:bits per character|bpc)", r"test_bpc=" + NUM], [1.75], False),
    "sort_of_clevr": ([r"relational " + NUM + r"%\s+non-relational " + NUM + "%",
                       r"rel_acc=" + NUM + r"% nonrel_acc=" + NUM + "%"], [94.0, 94.0], True),
}
TIME = [r"\(" + NUM + r" s\)", r"train time " + NUM + " s", r"train_s=" + NUM]


def evaluations(task, lines):
    """(seconds, [metric values]) for each evaluation line, in order."""
    metric_res, _, _ = TASKS[task]
    for line in lines:
        if line.startswith("RESULT") or re.match(r"\s*(epoch|step) \d+:", line):
            for mre in metric_res:
                m = re.search(mre, line)
                t = next(filter(None, (re.search(r, line) for r in TIME)), None)
                if m and t:
                    yield float(t.group(1)), [float(v) for v in m.groups()]
                    break


def time_to_target(task, lines):
    _, targets, higher = TASKS[task]
    best = None
    for secs, values in evaluations(task, lines):
        ok = all((v >= t) if higher else (v <= t) for v, t in zip(values, targets))
        if ok:
            return f"{secs:.0f} s ({'/'.join(f'{v:g}' for v in values)})"
        key = min(values) if higher else -values[0]
        if best is None or key > best[0]:
            best = (key, secs, values)
    if best is None:
        return "no evaluation in log"
    return f"not reached (best {'/'.join(f'{v:g}' for v in best[2])} at {best[1]:.0f} s)"


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if len(sys.argv) != 3 or sys.argv[1] not in TASKS:
        sys.exit("usage: time_to_target.py {%s} LOG" % "|".join(TASKS))
    try:
        with open(sys.argv[2], errors="replace") as f:
            lines = f.read().replace("\r", "\n").splitlines()
    except OSError as e:
        sys.exit(f"time_to_target.py: {e}")
    print(time_to_target(sys.argv[1], lines))


if __name__ == "__main__":
    main()
