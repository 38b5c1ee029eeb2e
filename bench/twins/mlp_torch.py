#!/usr/bin/env python3
"""bench/twins/mlp_torch.py — PyTorch eager twin of bench/mlp_steps.shf.

784-256-10 MLP (relu), cross-entropy with integer labels, Adam lr 1e-3 (betas 0.9/0.999, eps
1e-8), batch 128, on a fixed random batch (x ~ N(0,1) [128 784], labels uniform in 0..9).
Warm-up 5 steps, then 3 timings of 200 steps, best kept.
usage: /usr/bin/python3 bench/twins/mlp_torch.py [--threads 1]   → RESULT mlp_steps_per_s X steps/s
"""
import torch
from torch_classifier import report_steps, set_threads

STEPS = 200


def main():
    set_threads()
    torch.manual_seed(0)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    with torch.no_grad():  # He-initialised weights, zero biases, as in bench/mlp_steps.shf
        for layer in (model[0], model[2]):
            layer.weight.normal_(0.0, (2.0 / layer.in_features) ** 0.5)
            layer.bias.zero_()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)

    report_steps("mlp", model, opt, x, y, STEPS)

if __name__ == "__main__":
    main()
