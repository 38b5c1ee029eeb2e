#!/usr/bin/env python3
"""bench/twins/cnn_torch.py — PyTorch eager twin of bench/cnn_steps.shf.

conv 3×3 1→16 (padding 1), relu, 2×2 max-pool, conv 3×3 16→32, relu, max-pool, flatten,
1568-128-10 (relu), cross-entropy with integer labels, Adam lr 2e-3 (betas 0.9/0.999, eps 1e-8),
batch 64, on a fixed random batch (x ~ N(0,1) [64 1 28 28], labels uniform in 0..9). He-normal
weights (fan-in = C·KH·KW for a kernel), zero biases. Warm-up 5 steps, then 3 timings of 50
steps, best kept.
usage: /usr/bin/python3 bench/twins/cnn_torch.py [--threads 1]   → RESULT cnn_steps_per_s X steps/s
"""
import torch
import torch.nn as nn
from torch_classifier import report_steps, set_threads

STEPS = 50


def main():
    set_threads()
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

    report_steps("cnn", model, opt, x, y, STEPS)

if __name__ == "__main__":
    main()
