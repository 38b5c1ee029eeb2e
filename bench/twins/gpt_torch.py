#!/usr/bin/env python3
"""bench/twins/gpt_torch.py — PyTorch eager twin of bench/gpt_step.shf.

Char-level GPT train step: vocab 96, d_model 256, 4 layers, 4 heads, T 128, B 32; token +
position embeddings; pre-norm blocks (layer-norm, causal multi-head attention via einsum with a
-1e9 mask and softmax, fused qkv projection, tanh-GELU MLP 4·d, residuals); final layer-norm,
bias-free head, cross-entropy, Adam lr 3e-4. The first and second steps are timed on their own,
then 5 steps.
usage: /usr/bin/python3 bench/twins/gpt_torch.py [--threads 1]
  → RESULT gpt_first_step_s X s, RESULT gpt_second_step_s X s, RESULT gpt_ms_per_step X ms
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

V, D, L, H, T, B, LR, STEPS = 96, 256, 4, 4, 128, 32, 3e-4, 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc, self.out = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.attn(x).split(d, dim=2)
        q, k, v = (z.reshape(b, t, H, d // H) for z in (q, k, v))
        att = torch.einsum("bthd,bshd->bhts", q, k) * (1.0 / (d // H) ** 0.5)
        att = F.softmax(att.masked_fill(~self.causal, -1e9), dim=-1)
        return self.proj(torch.einsum("bhts,bshd->bthd", att, v).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, D), nn.Parameter(torch.randn(T, D) * 0.02)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(self, idx):
        return self.head(self.ln_f(self.blocks(self.wte(idx) + self.wpe)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    torch.set_num_threads(ap.parse_args().threads)
    torch.manual_seed(0)
    idx, tgt = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    model = GPT()
    with torch.no_grad():  # the initialisation of bench/gpt_step.shf: N(0, 0.02) weights, zero biases
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif not name.startswith("ln") and ".ln" not in name:
                p.normal_(0.0, 0.02)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def run_steps(n):
        t0 = time.perf_counter()
        for _ in range(n):
            opt.zero_grad()
            loss = F.cross_entropy(model(idx).reshape(-1, V), tgt.reshape(-1))
            loss.backward()
            opt.step()
        return time.perf_counter() - t0, loss.item()

    t1, _ = run_steps(1)
    print("RESULT gpt_first_step_s %.3f s" % t1)
    t2, _ = run_steps(1)
    print("RESULT gpt_second_step_s %.3f s" % t2)
    t, loss = run_steps(STEPS)
    print("RESULT gpt_ms_per_step %.1f ms" % (1000.0 * t / STEPS))
    print("loss %.4f after %d steps; %d parameters" % (loss, STEPS + 2, sum(p.numel() for p in model.parameters())))


if __name__ == "__main__":
    main()
