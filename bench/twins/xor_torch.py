#!/usr/bin/env python3
"""bench/twins/xor_torch.py — PyTorch eager twin of bench/xor_steps.shf.

XOR 2-8-1 MLP (relu hidden, sigmoid output, MSE), SGD lr 0.7; one step = forward, backward,
optimizer update. Warm-up 5 steps, then 5 timings of 500 steps in a Python loop (the last loss
read with .item() before the clock stops), best kept.
usage: /usr/bin/python3 bench/twins/xor_torch.py [--threads 1]   → RESULT xor_500_steps_ms X ms
"""
import argparse
import math
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    torch.set_num_threads(ap.parse_args().threads)
    torch.manual_seed(0)
    X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    Y = torch.tensor([[0.0], [1.0], [1.0], [0.0]])
    params = [torch.randn(2, 8) * math.sqrt(2.0 / 2), torch.full((8,), 0.1),
              torch.randn(8, 1) * math.sqrt(2.0 / 8), torch.zeros(1)]
    for p in params:
        p.requires_grad_(True)
    W1, b1, W2, b2 = params
    opt = torch.optim.SGD(params, lr=0.7)

    def step():
        opt.zero_grad()
        out = torch.sigmoid(torch.relu(X @ W1 + b1) @ W2 + b2)
        loss = ((out - Y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    def time_steps(n):
        t0 = time.perf_counter()
        for _ in range(n):
            loss = step()
        loss.item()
        return (time.perf_counter() - t0) * 1000.0

    time_steps(5)
    print("RESULT xor_500_steps_ms %.3f ms" % min(time_steps(500) for _ in range(5)))


if __name__ == "__main__":
    main()
