#!/usr/bin/env python3
"""bench/twins/mlp_torch.py — PyTorch eager twin of bench/mlp_steps.shf.

784-256-10 MLP (relu), cross-entropy with integer labels, Adam lr 1e-3 (betas 0.9/0.999, eps
1e-8), batch 128, on a fixed random batch (x ~ N(0,1) [128 784], labels uniform in 0..9).
Warm-up 5 steps, then 3 timings of 200 steps, best kept.
usage: /usr/bin/python3 bench/twins/mlp_torch.py [--threads 1]   → RESULT mlp_steps_per_s X steps/s
"""
import argparse
import time

import torch
import torch.nn.functional as F

STEPS = 200


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    torch.set_num_threads(ap.parse_args().threads)
    torch.manual_seed(0)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    with torch.no_grad():  # He-initialised weights, zero biases, as in bench/mlp_steps.shf
        for layer in (model[0], model[2]):
            layer.weight.normal_(0.0, (2.0 / layer.in_features) ** 0.5)
            layer.bias.zero_()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)

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
    best = min(run_steps(STEPS) for _ in range(3))
    print("RESULT mlp_steps_per_s %.1f steps/s" % (STEPS / best))


if __name__ == "__main__":
    main()
