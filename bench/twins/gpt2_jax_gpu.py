#!/usr/bin/env python3
"""bench/twins/gpt2_jax_gpu.py — JAX twin of bench/gpt2_gpu.shf (GPT-2 small, bf16; jax.jit of the whole step).

The model, precision and measurement of bench/gpt2_gpu.shf and bench/twins/gpt2_torch_gpu.py:
vocab 50304 (GPT-2's 50257 padded like llm.c), d 768, 12 layers, 12 heads, T 1024, B 8; the
parameter tree of the Sheaf program (fused qkv, biases on every linear layer, tied head =
wteᵀ); pre-norm blocks with einsum attention, -1e9 causal mask, softmax, tanh-GELU MLP;
cross-entropy; AdamW lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on every leaf, written as
adamw-step in lib/optim.shf. f32 master weights and residual stream; weights and activations cast
to bf16 before every matmul/einsum (bf16 results, bias add and GELU in bf16); layer-norm, softmax
and loss in f32. One jax.jit of value_and_grad + update, the state donated. The first step (trace +
XLA compile + run) and the second on their own, then --steps steps; the last loss is read on the
host (float()) before the clock stops. MFU as in the Sheaf program.
Skips cleanly (exit status 0, a note, no RESULT lines) when jax cannot be imported.
usage: python3 bench/twins/gpt2_jax_gpu.py [--device cuda|cpu] [--B 8] [--steps 10]
         [--d 768 --layers 12 --heads 12 --T 1024 --vocab 50304] [--peak-tflops 989]
  tiny CPU check: python3 bench/twins/gpt2_jax_gpu.py --device cpu --d 64 --layers 2 --heads 2 --T 64 --B 2 --vocab 512 --steps 2
  → RESULT gpt2_first_step_s X s, RESULT gpt2_second_step_s X s, RESULT gpt2_ms_per_step X ms,
    RESULT gpt2_tokens_per_s X tok/s, RESULT gpt2_mfu X %
"""
import argparse
import math
import os
import sys
import time

B1, B2, EPS, WD = 0.9, 0.95, 1e-8, 0.1


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda", help="cuda or cpu (sets JAX_PLATFORMS)")
    for name, default in [("vocab", 50304), ("d", 768), ("layers", 12), ("heads", 12), ("T", 1024), ("B", 8),
                          ("steps", 10), ("seed", 0)]:
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    return ap.parse_args()


def main():
    a = parse_args()
    os.environ["JAX_PLATFORMS"] = a.device
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print("gpt2_jax_gpu.py: jax not importable (%s): skipped" % e)
        return 0
    bf16 = jnp.bfloat16
    V, D, L, H, T = a.vocab, a.d, a.layers, a.heads, a.T

    def init_params(key):
        def normal(k, shape, std):
            return jax.random.normal(k, shape) * std

        def ln():
            return {"gamma": jnp.ones(D), "beta": jnp.zeros(D)}

        def linear(k, n_in, n_out, std):
            return {"W": normal(k, (n_in, n_out), std), "b": jnp.zeros(n_out)}

        std_res = 0.02 / math.sqrt(2 * L)

        def layer(k):
            k1, k2, k3, k4 = jax.random.split(k, 4)
            return {"ln1": ln(), "attn": linear(k1, D, 3 * D, 0.02), "proj": linear(k2, D, D, std_res),
                    "ln2": ln(), "fc": linear(k3, D, 4 * D, 0.02), "out": linear(k4, 4 * D, D, std_res)}

        k1, k2, k3 = jax.random.split(key, 3)
        return {"wte": normal(k1, (V, D), 0.02), "wpe": normal(k2, (T, D), 0.02),
                "layers": [layer(k) for k in jax.random.split(k3, L)], "ln-f": ln()}

    def layer_norm(x, p):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.var(x, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * p["gamma"] + p["beta"]

    def affine(x, p):  # bf16 operands, bf16 result and bias add
        return x.astype(bf16) @ p["W"].astype(bf16) + p["b"].astype(bf16)

    causal = jnp.tril(jnp.ones((T, T), dtype=bool))

    def attention(x, p):
        b, t, d = x.shape
        hd = d // H
        q, k, v = (z.reshape(b, t, H, hd) for z in jnp.split(affine(x, p["attn"]), 3, axis=2))
        att = jnp.einsum("bthd,bshd->bhts", q, k).astype(jnp.float32) * (1.0 / math.sqrt(hd))
        att = jax.nn.softmax(jnp.where(causal, att, -1e9), axis=-1)
        y = jnp.einsum("bhts,bshd->bthd", att.astype(bf16), v)
        return affine(y.reshape(b, t, d), p["proj"])

    def block(x, p):
        x = x + attention(layer_norm(x, p["ln1"]), p).astype(jnp.float32)
        h = jax.nn.gelu(affine(layer_norm(x, p["ln2"]), p["fc"]), approximate=True)
        return x + affine(h, p["out"]).astype(jnp.float32)

    def loss(p, idx, tgt):
        x = p["wte"][idx] + p["wpe"]
        for lp in p["layers"]:
            x = block(x, lp)
        logits = jnp.einsum("btd,vd->btv", layer_norm(x, p["ln-f"]).astype(bf16), p["wte"].astype(bf16))
        logits = logits.astype(jnp.float32).reshape(-1, V)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tgt.reshape(-1, 1), axis=1))

    def train_step(s, idx, tgt):
        l, g = jax.value_and_grad(loss)(s["params"], idx, tgt)
        tm = jax.tree_util.tree_map
        t = s["t"] + 1
        m = tm(lambda m, g: B1 * m + (1 - B1) * g, s["m"], g)
        v = tm(lambda v, g: B2 * v + (1 - B2) * g * g, s["v"], g)
        c1, c2 = 1 - B1 ** t, 1 - B2 ** t
        p = tm(lambda p, m, v: p - a.lr * (m / c1 / (jnp.sqrt(v / c2) + EPS) + WD * p), s["params"], m, v)
        return l, {"params": p, "m": m, "v": v, "t": t}

    step = jax.jit(train_step, donate_argnums=0)
    k_idx, k_tgt, k_p = jax.random.split(jax.random.PRNGKey(a.seed), 3)
    idx = jax.random.randint(k_idx, (a.B, T), 0, V)
    tgt = jax.random.randint(k_tgt, (a.B, T), 0, V)
    params = init_params(k_p)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": jax.tree_util.tree_map(jnp.zeros_like, params),
             "t": jnp.zeros((), jnp.float32)}
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params)) - T * D
    tokens = a.B * T
    flops_per_token = 6 * n_params + 12 * L * T * D
    print("gpt2 jax %s on %s (%s): vocab %d d %d layers %d heads %d T %d B %d; %d parameters without wpe; %.3e FLOP a step"
          % (jax.__version__, a.device, jax.devices()[0].device_kind, V, D, L, H, T, a.B, n_params,
             flops_per_token * tokens))

    def run_steps(s, n):
        t0 = time.perf_counter()
        for _ in range(n):
            l, s = step(s, idx, tgt)
        value = float(l)  # blocks until the step is done
        return time.perf_counter() - t0, value, s

    t1, l1, state = run_steps(state, 1)
    print("loss %.4f after 1 step (ln vocab = %.4f)" % (l1, math.log(V)))
    print("RESULT gpt2_first_step_s %.3f s" % t1)
    t2, _, state = run_steps(state, 1)
    print("RESULT gpt2_second_step_s %.3f s" % t2)
    t, l, state = run_steps(state, a.steps)
    step_s = t / a.steps
    print("RESULT gpt2_ms_per_step %.2f ms" % (1000.0 * step_s))
    print("RESULT gpt2_tokens_per_s %.1f tok/s" % (tokens / step_s))
    print("RESULT gpt2_mfu %.2f %%" % (100.0 * flops_per_token * tokens / (step_s * a.peak_tflops * 1e12)))
    print("loss %.4f after %d steps" % (l, a.steps + 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
