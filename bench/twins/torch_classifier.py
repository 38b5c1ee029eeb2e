"""bench/twins/torch_classifier.py — the timing harness the PyTorch classifier twins share
(mlp_torch.py, cnn_torch.py): their threads option, and Adam steps of cross-entropy on a fixed
batch — warm-up 5 steps, then 3 timings of `steps` steps, best kept, printed as
`RESULT <name>_steps_per_s X steps/s`.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def set_threads():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    torch.set_num_threads(ap.parse_args().threads)


def report_steps(name, model, opt, x, y, steps):
    def run_steps(n):
        t0 = time.perf_counter()
        for _ in range(n):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        loss.item()
        return time.perf_counter() - t0

    run_steps(5)
    best = min(run_steps(steps) for _ in range(3))
    print("RESULT %s_steps_per_s %.1f steps/s" % (name, steps / best))
