#!/usr/bin/env python3
"""bench/twins/cnn_torch.py — PyTorch eager twin of bench/cnn_steps.shf.

conv 3×3 1→16 (padding 1), relu, 2×2 max-pool, conv 3×3 16→32, relu, max-pool, flatten,
1568-128-10 (relu), cross-entropy with integer labels, Adam lr 2e-3 (betas 0.9/0.999, eps 1e-8),
batch 64, on a fixed random batch (x ~ N(0,1) [64 1 28 28], labels uniform in 0..9). He-normal
weights (fan-in = C·KH·KW for a kernel), zero biases. Warm-up 5 steps, then 3 timings of 50
steps, best kept.
usage: /usr/bin/python3 bench/twins/cnn_torch.py [--threads 1]   → RESULT cnn_steps_per_s X steps/s
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 50


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    torch.set_num_threads(ap.parse_args().threads)
    torch.manual_seed(0)
    x = torch.randn(64, 1, 28, 28)
    y = torch.randint(0, 10, (64,))
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    with torch.no_grad():  # He-initialised weights, zero biases, as in bench/cnn_steps.shf
        for layer in model:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                fan_in = layer.weight[0].numel()
                layer.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)
                layer.bias.zero_()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.999), eps=1e-8)

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
    print("RESULT cnn_steps_per_s %.1f steps/s" % (STEPS / best))


if __name__ == "__main__":
    main()
