"""bench/density/mlp_torch.py — PyTorch twin of examples/mlp/train.shf: a 784-256-10 MLP trained on
Fashion-MNIST (Debian's dataset-fashion-mnist) with Adam. Prints the training loss, test accuracy
and time of every epoch, then saves the parameters as a safetensors checkpoint.
  /usr/bin/python3 bench/density/mlp_torch.py     (2 epochs: ≈ 85-86 % test accuracy)
"""
import gzip
import time

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

config = dict(hidden=256, batch=128, epochs=2, lr=0.001, seed=0, checkpoint="mlp-checkpoint.safetensors")
data_dir = "/usr/share/datasets/fashion-mnist/"


def load_idx(name, offset):
    with gzip.open(data_dir + name) as f:
        return torch.from_numpy(np.frombuffer(f.read(), np.uint8, offset=offset).copy())


x_train = load_idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784) / 255.0
y_train = load_idx("train-labels-idx1-ubyte.gz", 8).long()
x_test = load_idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784) / 255.0
y_test = load_idx("t10k-labels-idx1-ubyte.gz", 8).long()

torch.manual_seed(config["seed"])
h = config["hidden"]
model = nn.Sequential(nn.Linear(784, h), nn.ReLU(), nn.Linear(h, 10))
# He-initialised weights, zero biases.
for layer in (model[0], model[2]):
    nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    nn.init.zeros_(layer.bias)
opt = torch.optim.Adam(model.parameters(), lr=config["lr"])


@torch.no_grad()
def accuracy(x, y):
    return (model(x).argmax(1) == y).float().mean().item()


batch = config["batch"]
steps = 60000 // batch
for epoch in range(config["epochs"]):
    perm = torch.randperm(60000)
    t0 = time.time()
    loss_sum = 0.0
    for i in range(steps):
        idx = perm[i * batch:(i + 1) * batch]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum += loss.item()
    print(f"epoch {epoch + 1} | train loss {loss_sum / steps:.4f} | "
          f"test accuracy {100 * accuracy(x_test, y_test):.2f}% | {time.time() - t0:.1f} s")

save_file(model.state_dict(), config["checkpoint"])
print(f"saved {config['checkpoint']}")
print(f"{accuracy(x_test, y_test):.4f}")
