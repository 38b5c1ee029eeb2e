"""bench/density/xor_torch.py — PyTorch twin of examples/xor/train.shf: a 2-8-1 MLP (relu hidden
layer, sigmoid output) learns XOR by gradient descent on the mean squared error.
  /usr/bin/python3 bench/density/xor_torch.py      (500 steps: loss < 0.01, predictions ≈ 0 1 1 0)
"""
import torch
from torch import nn

config = dict(hidden=8, lr=0.7, steps=500, log_every=50, seed=0)
torch.manual_seed(config["seed"])

X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
Y = torch.tensor([[0.0], [1.0], [1.0], [0.0]])

h = config["hidden"]
model = nn.Sequential(nn.Linear(2, h), nn.ReLU(), nn.Linear(h, 1), nn.Sigmoid())
# He-initialised weights, small positive hidden biases (no dead units at the start).
with torch.no_grad():
    for layer, bias in ((model[0], 0.1), (model[2], 0.0)):
        nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        layer.bias.fill_(bias)

opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
loss_fn = nn.MSELoss()
for i in range(config["steps"]):
    loss = loss_fn(model(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (i + 1) % config["log_every"] == 0:
        print(f"step {i + 1:4d} | loss {loss.item():.6f}")

with torch.no_grad():
    print(f"predictions: {model(X).reshape(4).numpy()}")
    print(f"final loss: {loss_fn(model(X), Y).item():.6f}")
