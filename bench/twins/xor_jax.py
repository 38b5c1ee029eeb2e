#!/usr/bin/env python3
"""bench/twins/xor_jax.py — JAX twin of bench/xor_steps.shf (jax.jit of the whole step, XLA CPU).

XOR 2-8-1 MLP (relu hidden, sigmoid output, MSE), SGD lr 0.7. The jitted step (forward,
value_and_grad, update) is called 500 times from a Python loop; block_until_ready on the last
loss stops the clock. Warm-up 5 steps (compile), then 5 timings, best kept.
usage: python3 bench/twins/xor_jax.py   → RESULT xor_500_steps_ms X ms
"""
import math
import time

import jax
import jax.numpy as jnp

X = jnp.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
Y = jnp.array([[0.0], [1.0], [1.0], [0.0]])


def loss(p, x, y):
    h = jax.nn.relu(x @ p["l1"]["W"] + p["l1"]["b"])
    return jnp.mean((jax.nn.sigmoid(h @ p["l2"]["W"] + p["l2"]["b"]) - y) ** 2)


@jax.jit
def step(p, x, y):
    l, g = jax.value_and_grad(loss)(p, x, y)
    return l, jax.tree_util.tree_map(lambda p, g: p - 0.7 * g, p, g)


def main():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    p0 = {"l1": {"W": jax.random.normal(k1, (2, 8)) * math.sqrt(2.0 / 2), "b": jnp.full((8,), 0.1)},
          "l2": {"W": jax.random.normal(k2, (8, 1)) * math.sqrt(2.0 / 8), "b": jnp.zeros((1,))}}

    def time_steps(n):
        p = p0
        t0 = time.perf_counter()
        for _ in range(n):
            l, p = step(p, X, Y)
        l.block_until_ready()
        return (time.perf_counter() - t0) * 1000.0

    time_steps(5)
    print("RESULT xor_500_steps_ms %.3f ms" % min(time_steps(500) for _ in range(5)))


if __name__ == "__main__":
    main()
