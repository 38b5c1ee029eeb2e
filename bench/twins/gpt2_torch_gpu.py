#!/usr/bin/env python3
"""bench/twins/gpt2_torch_gpu.py — PyTorch twin of bench/gpt2_gpu.shf (GPT-2 small, bf16, one train step).

The model, precision and measurement of bench/gpt2_gpu.shf: vocab 50304 (GPT-2's 50257 padded
like llm.c; loss over all columns, random tokens from all of them), d 768, 12 layers, 12 heads,
T 1024, B 8; learned token and position embeddings, pre-norm blocks (fused qkv projection, einsum
attention scores with a -1e9 causal mask and softmax, tanh-GELU MLP 4·d), final layer-norm, head
tied to the token embedding, cross-entropy, AdamW lr 3e-4, betas (0.9, 0.95), eps 1e-8, weight
decay 0.1 on every parameter (fused=True where this torch has it on the device). Init N(0, 0.02),
residual projections N(0, 0.02/√(2·layers)), zero biases.
Precision by explicit casts, op for op as the Sheaf program (not torch.autocast): f32 master
weights and residual stream; weights and activations cast to bf16 before every matmul/einsum,
bias add and GELU in bf16, layer-norm, attention softmax and loss in f32.
Timing: the first step and the second on their own, then --steps steps; torch.cuda.synchronize()
and loss.item() before each clock reading. MFU = (6·N + 12·layers·T·d)·tokens / step time / peak
with N = parameters without the position embedding (tied head counted once).
usage: python3 bench/twins/gpt2_torch_gpu.py [--device cuda|cpu] [--compile] [--B 8] [--steps 10]
         [--d 768 --layers 12 --heads 12 --T 1024 --vocab 50304] [--peak-tflops 989] [--threads N]
  tiny CPU check: /usr/bin/python3 bench/twins/gpt2_torch_gpu.py --device cpu --d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2
  → RESULT gpt2_first_step_s X s, RESULT gpt2_second_step_s X s, RESULT gpt2_ms_per_step X ms,
    RESULT gpt2_tokens_per_s X tok/s, RESULT gpt2_mfu X %
"""
import argparse
import inspect
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

BF16 = torch.bfloat16


def linear(x, lin):
    """bf16 operands, bf16 result with the bf16 bias (as `affine` in bench/gpt2_gpu.shf)."""
    return F.linear(x.to(BF16), lin.weight.to(BF16), lin.bias.to(BF16))


class Block(nn.Module):
    def __init__(self, d, heads, T):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    def attention(self, x):  # x f32 [B T d] → bf16 [B T d]
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = (z.reshape(b, t, self.heads, hd) for z in linear(x, self.attn).split(d, dim=2))
        att = torch.einsum("bthd,bshd->bhts", q, k).float() * (1.0 / math.sqrt(hd))
        att = F.softmax(att.masked_fill(~self.causal, -1e9), dim=-1)
        y = torch.einsum("bhts,bshd->bthd", att.to(BF16), v)
        return linear(y.reshape(b, t, d), self.proj)

    def forward(self, x):
        x = x + self.attention(self.ln1(x)).float()
        h = F.gelu(linear(self.ln2(x), self.fc), approximate="tanh")
        return x + linear(h, self.out).float()


class GPT2(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.vocab = a.vocab
        self.wte = nn.Embedding(a.vocab, a.d)
        self.wpe = nn.Parameter(torch.zeros(a.T, a.d))
        self.blocks = nn.ModuleList([Block(a.d, a.heads, a.T) for _ in range(a.layers)])
        self.ln_f = nn.LayerNorm(a.d)
        with torch.no_grad():  # the initialisation of bench/gpt2_gpu.shf
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln" in name or name.startswith("ln"):
                    pass  # gamma 1, beta 0 (nn.LayerNorm's own)
                elif name.endswith("proj.weight") or name.endswith("out.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * a.layers))
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, idx, tgt):
        x = self.wte(idx) + self.wpe
        for blk in self.blocks:
            x = blk(x)
        logits = F.linear(self.ln_f(x).to(BF16), self.wte.weight.to(BF16)).float()  # tied head
        return F.cross_entropy(logits.reshape(-1, self.vocab), tgt.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward+loss (torch ≥ 2)")
    for name, default in [("vocab", 50304), ("d", 768), ("layers", 12), ("heads", 12), ("T", 1024), ("B", 8),
                          ("steps", 10), ("seed", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    model = GPT2(a).to(dev)
    idx = torch.randint(0, a.vocab, (a.B, a.T), device=dev)
    tgt = torch.randint(0, a.vocab, (a.B, a.T), device=dev)
    fused = dev.type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                            **({"fused": True} if fused else {}))
    step_loss = torch.compile(model) if a.compile else model
    n_params = sum(p.numel() for p in model.parameters()) - model.wpe.numel()
    tokens = a.B * a.T
    flops_per_token = 6 * n_params + 12 * a.layers * a.T * a.d
    print("gpt2 torch %s on %s%s%s: vocab %d d %d layers %d heads %d T %d B %d; %d parameters without wpe; %.3e FLOP a step"
          % (torch.__version__, a.device, " (%s)" % torch.cuda.get_device_name(dev) if dev.type == "cuda" else "",
             ", compiled" if a.compile else "", a.vocab, a.d, a.layers, a.heads, a.T, a.B, n_params,
             flops_per_token * tokens))

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def run_steps(n):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            opt.zero_grad(set_to_none=True)
            loss = step_loss(idx, tgt)
            loss.backward()
            opt.step()
        value = loss.item()  # on the host before the clock stops
        sync()
        return time.perf_counter() - t0, value

    t1, l1 = run_steps(1)
    print("loss %.4f after 1 step (ln vocab = %.4f)" % (l1, math.log(a.vocab)))
    print("RESULT gpt2_first_step_s %.3f s" % t1)
    t2, _ = run_steps(1)
    print("RESULT gpt2_second_step_s %.3f s" % t2)
    t, loss = run_steps(a.steps)
    step_s = t / a.steps
    print("RESULT gpt2_ms_per_step %.2f ms" % (1000.0 * step_s))
    print("RESULT gpt2_tokens_per_s %.1f tok/s" % (tokens / step_s))
    print("RESULT gpt2_mfu %.2f %%" % (100.0 * flops_per_token * tokens / (step_s * a.peak_tflops * 1e12)))
    print("loss %.4f after %d steps" % (loss, a.steps + 2))
    if dev.type == "cuda":
        print("peak GPU memory %.2f GiB" % (torch.cuda.max_memory_allocated(dev) / 2**30))


if __name__ == "__main__":
    main()
