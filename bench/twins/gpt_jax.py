#!/usr/bin/env python3
"""bench/twins/gpt_jax.py — JAX twin of bench/gpt_step.shf (jax.jit of the whole train step).

Char-level GPT: vocab 96, d_model 256, 4 layers, 4 heads, T 128, B 32; the parameter tree of
bench/gpt_step.shf (fused qkv, biases on every linear layer but the head); pre-norm blocks with
einsum attention, -1e9 causal mask, softmax, tanh-GELU MLP; cross-entropy; Adam lr 3e-4 as in
lib/optim.shf. The first step (trace + XLA compile + run) and the second are timed on their own,
then 5 steps.
usage: python3 bench/twins/gpt_jax.py
  → RESULT gpt_first_step_s X s, RESULT gpt_second_step_s X s, RESULT gpt_ms_per_step X ms
"""
import time

import jax
import jax.numpy as jnp

V, D, L, H, T, B, LR, STEPS = 96, 256, 4, 4, 128, 32, 3e-4, 5
B1, B2, EPS = 0.9, 0.999, 1e-8
CAUSAL = jnp.tril(jnp.ones((T, T), dtype=bool))


def init_params(key):
    def normal(k, shape):
        return jax.random.normal(k, shape) * 0.02

    def ln():
        return {"gamma": jnp.ones(D), "beta": jnp.zeros(D)}

    def linear(k, n_in, n_out):
        return {"W": normal(k, (n_in, n_out)), "b": jnp.zeros(n_out)}

    def layer(k):
        k1, k2, k3, k4 = jax.random.split(k, 4)
        return {"ln1": ln(), "attn": linear(k1, D, 3 * D), "proj": linear(k2, D, D),
                "ln2": ln(), "fc": linear(k3, D, 4 * D), "out": linear(k4, 4 * D, D)}

    k1, k2, k3, k4 = jax.random.split(key, 4)
    return {"wte": normal(k1, (V, D)), "wpe": normal(k2, (T, D)),
            "layers": [layer(k) for k in jax.random.split(k3, L)],
            "ln-f": ln(), "head": normal(k4, (D, V))}


def layer_norm(x, p):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + 1e-5) * p["gamma"] + p["beta"]


def affine(x, p):
    return x @ p["W"] + p["b"]


def attention(x, p):
    b, t, d = x.shape
    q, k, v = (z.reshape(b, t, H, d // H) for z in jnp.split(affine(x, p["attn"]), 3, axis=2))
    att = jnp.einsum("bthd,bshd->bhts", q, k) * (1.0 / (d // H) ** 0.5)
    att = jax.nn.softmax(jnp.where(CAUSAL, att, -1e9), axis=-1)
    return affine(jnp.einsum("bhts,bshd->bthd", att, v).reshape(b, t, d), p["proj"])


def block(x, p):
    x = x + attention(layer_norm(x, p["ln1"]), p)
    return x + affine(jax.nn.gelu(affine(layer_norm(x, p["ln2"]), p["fc"]), approximate=True), p["out"])


def loss(p, idx, tgt):
    x = p["wte"][idx] + p["wpe"]
    for lp in p["layers"]:
        x = block(x, lp)
    logits = (layer_norm(x, p["ln-f"]) @ p["head"]).reshape(-1, V)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), tgt.reshape(-1, 1), axis=1))


@jax.jit
def train_step(s, idx, tgt):
    l, g = jax.value_and_grad(loss)(s["params"], idx, tgt)
    tm = jax.tree_util.tree_map
    t = s["t"] + 1
    m = tm(lambda m, g: B1 * m + (1 - B1) * g, s["m"], g)
    v = tm(lambda v, g: B2 * v + (1 - B2) * g * g, s["v"], g)
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    p = tm(lambda p, m, v: p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS), s["params"], m, v)
    return l, {"params": p, "m": m, "v": v, "t": t}


def main():
    ki, kt, kp = jax.random.split(jax.random.PRNGKey(0), 3)
    idx, tgt = jax.random.randint(ki, (B, T), 0, V), jax.random.randint(kt, (B, T), 0, V)
    params = init_params(kp)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": zeros, "t": jnp.float32(0)}

    def run_steps(s, n):
        t0 = time.perf_counter()
        for _ in range(n):
            l, s = train_step(s, idx, tgt)
        l = float(l.block_until_ready())
        return time.perf_counter() - t0, l, s

    t1, _, state = run_steps(state, 1)
    print("RESULT gpt_first_step_s %.3f s" % t1)
    t2, _, state = run_steps(state, 1)
    print("RESULT gpt_second_step_s %.3f s" % t2)
    t, l, _ = run_steps(state, STEPS)
    print("RESULT gpt_ms_per_step %.1f ms" % (1000.0 * t / STEPS))
    print("loss %.4f after %d steps" % (l, STEPS + 2))


if __name__ == "__main__":
    main()
