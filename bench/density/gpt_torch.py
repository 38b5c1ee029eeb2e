"""bench/density/gpt_torch.py — PyTorch twin of examples/gpt/{model,data,args,train}.shf: train a
character-level GPT on Debian's fortunes (90 % train, the last 10 % held out), with Adam, a
warmup + cosine learning rate and global-norm clipping. Model: token + position embeddings,
`layers` pre-norm blocks (layer-norm → causal multi-head self-attention → residual; layer-norm →
GELU MLP of width 4·d → residual), a final layer-norm and a linear head; GPT-2 initialisation.
  /usr/bin/python3 bench/density/gpt_torch.py                  (defaults below: d256 L4 H4 T128 B32)
  /usr/bin/python3 bench/density/gpt_torch.py steps=200 d=64   (any config key as key=value)
  /usr/bin/python3 bench/density/gpt_torch.py resume           (continue from the checkpoint)
  /usr/bin/python3 bench/density/gpt_torch.py stop=500         (stop after step 500, as if interrupted)
Log: `step 120/2000 | loss 1.8423 | val 1.9011 | 412 ms | 9940 tok/s`; a progress bar on a
terminal. Checkpoint (every ckpt-every steps and at the end, written atomically):
<ckpt>.safetensors = params, Adam moments, step, RNG state; <ckpt>.json = config + vocabulary.
"""
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm import tqdm

FORTUNE_FILES = [
    "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education", "ethnic", "food",
    "fortunes", "goedel", "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie", "literature",
    "love", "magic", "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people", "perl", "pets",
    "platitudes", "politics", "pratchett", "riddles", "science", "songs-poems", "sports", "startrek", "tao",
    "wisdom", "work", "zippy"]

defaults = {
    "d": 256, "layers": 4, "heads": 4, "T": 128, "B": 32,
    "lr": 0.002, "min-lr": 0.0001, "warmup": 100, "clip": 1.0, "steps": 1400,
    "log-every": 10, "eval-every": 100, "eval-batches": 8, "ckpt-every": 200, "ckpt": "gpt",
    "seed": 0, "val-frac": 0.1, "max-chars": 0, "data-dir": "/usr/share/games/fortunes", "stop": 0}


# ---- model ----
class Block(nn.Module):
    def __init__(self, d, heads, T):
        super().__init__()
        self.heads = heads
        self.ln1, self.attn, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    # x [B T d] → [B T d]; position t attends to positions s ≤ t.
    def attention(self, x):
        B, T, d = x.shape
        q, k, v = (z.view(B, T, self.heads, -1).transpose(1, 2) for z in self.attn(x).split(d, dim=2))
        att = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)            # [B H T T]
        att = att.masked_fill(~self.causal[:T, :T], -1e9).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.layers = nn.Sequential(*(Block(d, heads, T) for _ in range(layers)))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, std=std)

    # idx [B t] (t ≤ T) → logits [B t V]
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.head(self.ln_f(self.layers(x)))


# mean cross-entropy in nats per character of predicting tgt [B t] from idx [B t]
def gpt_loss(model, idx, tgt):
    return F.cross_entropy(model(idx).flatten(0, 1), tgt.flatten())


# ---- data ----
def read_corpus(data_dir, max_chars):
    text = "".join(Path(data_dir, f).read_text(encoding="utf-8") for f in FORTUNE_FILES)
    return text[:max_chars] if max_chars > 0 else text


# B random windows of `data` [n]: inputs [B T] and the next characters [B T].
def sample_batch(data, B, T, generator=None):
    pos = torch.randint(len(data) - T - 1, (B, 1), generator=generator) + torch.arange(T)
    return data[pos], data[pos + 1]


# ---- command line: key=value overrides (parsed as a number where the default is a number), `resume` ----
def config_from_args(defaults, args):
    config = dict(defaults)
    for a in args:
        k, eq, v = a.partition("=")
        if eq:
            d = defaults.get(k)
            config[k] = v if d is None or isinstance(d, str) else int(v) if v.isdigit() else float(v)
    return config


cfg = config_from_args(defaults, sys.argv[1:])
resume = "resume" in sys.argv[1:] or "--resume" in sys.argv[1:]

text = read_corpus(cfg["data-dir"], cfg["max-chars"])
vocab = sorted(set(text))
stoi = {c: i for i, c in enumerate(vocab)}
ids = torch.tensor([stoi[c] for c in text])
n_train = int(len(ids) * (1.0 - cfg["val-frac"]))
train_data, val_data = ids[:n_train], ids[n_train:]
print(f"data: {len(ids)} characters ({n_train} train, {len(val_data)} held out), vocabulary of {len(vocab)}")

torch.manual_seed(cfg["seed"])
model = GPT(len(vocab), cfg["d"], cfg["layers"], cfg["heads"], cfg["T"])
opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])


def lr_at(step):
    warmup, lr = cfg["warmup"], cfg["lr"]
    if step < warmup:
        lr = lr * step / warmup
    else:
        lr = lr * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / (cfg["steps"] - warmup))))
    return max(cfg["min-lr"], lr)


# held-out loss averaged over the same eval-batches batches each time
@torch.no_grad()
def val_loss():
    gen = torch.Generator().manual_seed(1000 + cfg["seed"])
    losses = [gpt_loss(model, *sample_batch(val_data, cfg["B"], cfg["T"], gen)).item() for _ in range(cfg["eval-batches"])]
    return sum(losses) / len(losses)


# ---- checkpoints ----
ckpt_file = cfg["ckpt"] + ".safetensors"


def save_checkpoint(step):
    tensors = {f"params.{k}": v for k, v in model.state_dict().items()}
    for name, p in model.named_parameters():
        tensors[f"m.{name}"], tensors[f"v.{name}"] = opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]
    tensors["step"], tensors["rng"] = torch.tensor(step), torch.get_rng_state()
    save_file(tensors, ckpt_file + ".tmp")
    os.replace(ckpt_file + ".tmp", ckpt_file)
    Path(cfg["ckpt"] + ".json").write_text(json.dumps({"config": cfg, "vocab": vocab}))


def load_checkpoint():
    tensors = load_file(ckpt_file)
    model.load_state_dict({k[len("params."):]: v for k, v in tensors.items() if k.startswith("params.")})
    for name, p in model.named_parameters():
        opt.state[p] = {"step": tensors["step"].float(), "exp_avg": tensors[f"m.{name}"], "exp_avg_sq": tensors[f"v.{name}"]}
    torch.set_rng_state(tensors["rng"])
    return int(tensors["step"])


step = 0
if resume and os.path.exists(ckpt_file):
    step = load_checkpoint()
    print(f"resumed from {ckpt_file} at step {step}")
print(f"model: {sum(p.numel() for p in model.parameters())} parameters; d {cfg['d']} layers {cfg['layers']} "
      f"heads {cfg['heads']} context {cfg['T']} batch {cfg['B']}")

# ---- the loop ----
tokens_per_step = cfg["B"] * cfg["T"]
end = min(cfg["stop"], cfg["steps"]) if cfg["stop"] > 0 else cfg["steps"]
val, t0 = None, time.time()
for step in (bar := tqdm(range(step + 1, end + 1), disable=None)):
    for group in opt.param_groups:
        group["lr"] = lr_at(step - 1)
    loss = gpt_loss(model, *sample_batch(train_data, cfg["B"], cfg["T"]))
    opt.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
    opt.step()
    loss = loss.item()
    bar.set_postfix(loss=loss)
    if step % cfg["eval-every"] == 0 or step == cfg["steps"]:
        val = val_loss()
    if step % cfg["log-every"] == 0 or step == cfg["steps"]:
        ms = 1000.0 * (time.time() - t0) / cfg["log-every"]
        bar.write(f"step {step}/{cfg['steps']} | loss {loss:.4f} | val {'-' if val is None else f'{val:.4f}'} "
                  f"| {ms:.0f} ms | {1000.0 * tokens_per_step / ms:.0f} tok/s")
        t0 = time.time()
    if step % cfg["ckpt-every"] == 0 or step in (cfg["steps"], cfg["stop"]):
        save_checkpoint(step)

print(f"final held-out loss {val_loss():.4f} nats/char after {step} steps")
