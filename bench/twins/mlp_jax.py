#!/usr/bin/env python3
"""bench/twins/mlp_jax.py — JAX twin of bench/mlp_steps.shf (jax.jit of the whole train step).

784-256-10 MLP (relu), sparse cross-entropy, Adam lr 1e-3 written as in lib/optim.shf, batch
128, fixed random batch. Warm-up 5 steps (compile), then 3 timings of 200 steps, best kept.
usage: python3 bench/twins/mlp_jax.py   → RESULT mlp_steps_per_s X steps/s
"""
import math
import time

import jax
import jax.numpy as jnp

STEPS, LR, B1, B2, EPS = 200, 1e-3, 0.9, 0.999, 1e-8


def loss(p, x, y):
    h = jax.nn.relu(x @ p["l1"]["W"] + p["l1"]["b"])
    logits = h @ p["l2"]["W"] + p["l2"]["b"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def adam(p, g, m, v, t):
    t = t + 1
    m = jax.tree_util.tree_map(lambda m, g: B1 * m + (1 - B1) * g, m, g)
    v = jax.tree_util.tree_map(lambda v, g: B2 * v + (1 - B2) * g * g, v, g)
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    p = jax.tree_util.tree_map(lambda p, m, v: p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS), p, m, v)
    return p, m, v, t


@jax.jit
def train_step(s, x, y):
    l, g = jax.value_and_grad(loss)(s["params"], x, y)
    p, m, v, t = adam(s["params"], g, s["m"], s["v"], s["t"])
    return l, {"params": p, "m": m, "v": v, "t": t}


def main():
    kx, ky, k1, k2 = jax.random.split(jax.random.PRNGKey(0), 4)
    x = jax.random.normal(kx, (128, 784))
    y = jax.random.randint(ky, (128,), 0, 10)
    params = {"l1": {"W": jax.random.normal(k1, (784, 256)) * math.sqrt(2.0 / 784), "b": jnp.zeros(256)},
              "l2": {"W": jax.random.normal(k2, (256, 10)) * math.sqrt(2.0 / 256), "b": jnp.zeros(10)}}
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": zeros, "t": jnp.float32(0)}

    def run_steps(s, n):
        t0 = time.perf_counter()
        for _ in range(n):
            l, s = train_step(s, x, y)
        l.block_until_ready()
        return time.perf_counter() - t0, s

    _, state = run_steps(state, 5)
    best = min(run_steps(state, STEPS)[0] for _ in range(3))
    print("RESULT mlp_steps_per_s %.1f steps/s" % (STEPS / best))


if __name__ == "__main__":
    main()
