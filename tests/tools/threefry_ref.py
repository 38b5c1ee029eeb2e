#!/usr/bin/env python3
"""Independent reference of SPEC §6.7 (Threefry-2x32-20 and the samplers built on it).

Written from the spec text alone, in plain Python integers and NumPy float32 scalars, to derive
the expected values of tests/lang/random.shf and tests/unit/random_test.cpp. Every float32
operation rounds to f32 as the spec's "f32 arithmetic" says; log and cos are taken in f64 and
rounded once (the correctly rounded f32 result, which glibc's logf/cosf return for these inputs).

    python3 tests/tools/threefry_ref.py        # prints the values used by the tests
"""
import math

import numpy as np

M32 = 0xFFFFFFFF
ROT = [13, 15, 26, 6, 17, 29, 16, 24]
f32 = np.float32


def rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def threefry(k0, k1, c0, c1):
    ks = [k0, k1, k0 ^ k1 ^ 0x1BD11BDA]
    x0, x1 = (c0 + ks[0]) & M32, (c1 + ks[1]) & M32
    for r in range(20):
        x0 = (x0 + x1) & M32
        x1 = rotl(x1, ROT[r % 8]) ^ x0
        if r % 4 == 3:
            s = (r + 1) // 4
            x0 = (x0 + ks[s % 3]) & M32
            x1 = (x1 + ks[(s + 1) % 3] + s) & M32
    return x0, x1


def key_from_seed(seed):
    bits = seed & 0xFFFFFFFFFFFFFFFF
    return bits & M32, bits >> 32


def limbs(key):
    w0, w1 = key
    return [w0 & 0xFFFF, w0 >> 16, w1 & 0xFFFF, w1 >> 16]


def bits(key, n, stream=0):
    return [threefry(key[0], key[1], e, stream) for e in range(n)]


def split(key, n=2):
    return [threefry(key[0], key[1], i, 1) for i in range(n)]


def unit(b):
    return f32(b >> 8) * f32(2.0 ** -24)


def uniform(key, n):
    return np.array([unit(b0) for b0, _ in bits(key, n)], dtype=np.float32)


def normal(key, n):
    out = []
    for b0, b1 in bits(key, n):
        u1 = max(unit(b0), f32(2.0 ** -24))
        u2 = unit(b1)
        r = f32(math.sqrt(f32(f32(math.log(u1)) * f32(-2))))
        c = f32(math.cos(f32(u2 * f32(2 * math.pi))))
        out.append(f32(r * c))
    return np.array(out, dtype=np.float32)


def randint(key, n, low, high):
    lo, hi = f32(low), f32(high)
    span, top = f32(hi - lo), f32(hi - f32(1))
    vals = [min(max(f32(f32(math.floor(f32(unit(b0) * span))) + lo), lo), top) for b0, _ in bits(key, n)]
    return np.array([int(v) for v in vals], dtype=np.int32)


def choice_p(key, n_samples, weights):
    c, s = [], f32(0)
    for w in weights:
        s = f32(s + f32(w))
        c.append(s)
    out = []
    for b0, _ in bits(key, n_samples):
        t = f32(unit(b0) * c[-1])
        out.append(min(len(c) - 1, sum(1 for cj in c if cj <= t)))
    return np.array(out, dtype=np.int32)


def choice_race(key, n, k, weights=None):
    """Without replacement: the k smallest E_j = -ln(u_j)/w_j (builtins/random.cpp)."""
    race = []
    for j, (b0, b1) in enumerate(bits(key, n)):
        w = 1.0 if weights is None else float(f32(weights[j]))
        if w == 0:
            continue
        u = (((b0 << 21) | (b1 >> 11)) + 0.5) * 2.0 ** -53
        race.append((-math.log(u) / w, j))
    race.sort()
    return np.array([j for _, j in race[:k]], dtype=np.int32)


def dropout(key, x, rate):
    x = np.asarray(x, dtype=np.float32)
    u = uniform(key, x.size).reshape(x.shape)
    rate = f32(rate)
    scale = f32(f32(1) / f32(f32(1) - rate))
    return np.where(u >= rate, x * scale, f32(0))


def main():
    np.set_printoptions(precision=8)
    print("known answers")
    for k, c in [((0, 0), (0, 0)), ((M32, M32), (M32, M32)), ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3))]:
        print(" ", [hex(v) for v in threefry(*k, *c)])
    k0, k42 = key_from_seed(0), key_from_seed(42)
    print("key 42", np.array(limbs(k42), dtype=np.float32))
    print("key -1", np.array(limbs(key_from_seed(-1)), dtype=np.float32))
    print("key 2^40+7", np.array(limbs(key_from_seed(2**40 + 7)), dtype=np.float32))
    print("split 42", [np.array(limbs(c), dtype=np.float32) for c in split(k42)])
    print("split 42 3", [np.array(limbs(c), dtype=np.float32) for c in split(k42, 3)])
    print("bits 42 (e=0..3)", [(hex(a), hex(b)) for a, b in bits(k42, 4)])
    print("uniform 42 [2 3]\n", uniform(k42, 6).reshape(2, 3))
    print("uniform 0 [4]", uniform(k0, 4))
    print("uniform 42 []", uniform(k42, 1)[0])
    print("uniform words (1 2) [3]", uniform((1, 2), 3))
    print("normal 42 [2 3]\n", normal(k42, 6).reshape(2, 3))
    print("normal 7 [4]", normal(key_from_seed(7), 4))
    print("normal 42 [3] f16", normal(k42, 3).astype(np.float16).astype(np.float32))
    print("normal 42 [3] bf16 (round-to-nearest-even)", bf16(normal(k42, 3)))
    print("randint 42 [2 5] 0 10\n", randint(k42, 10, 0, 10).reshape(2, 5))
    print("randint 42 [6] -3 3", randint(k42, 6, -3, 3))
    c1, c2 = split(k42)
    print("uniform child1 [3]", uniform(c1, 3), "child2", uniform(c2, 3))
    print("choice 42 5 [6]", randint(k42, 6, 0, 5))
    print("choice 42 3 :p [0.1 0.2 0.7] (one)", choice_p(k42, 1, [0.1, 0.2, 0.7])[0])
    print("choice 42 3 [8] :p [0.1 0.2 0.7]", choice_p(k42, 8, [0.1, 0.2, 0.7]))
    print("choice 42 4 [6] :p [0 1 0 1]", choice_p(k42, 6, [0, 1, 0, 1]))
    print("choice 42 [10 20 30 40] [5]", np.array([10, 20, 30, 40], np.float32)[randint(k42, 5, 0, 4)])
    print("choice 42 6 [6] no replace", choice_race(k42, 6, 6))
    print("choice 42 10 [3] no replace", choice_race(k42, 10, 3))
    print("choice 42 5 [2] no replace :p [1 0 1 0 1]", choice_race(k42, 5, 2, [1, 0, 1, 0, 1]))
    print("choice 42 [[1 2] [3 4] [5 6]] [2]\n", np.array([[1, 2], [3, 4], [5, 6]], np.float32)[randint(k42, 2, 0, 3)])
    print("choice 42 3 (one)", randint(k42, 1, 0, 3)[0])
    print("choice words (1 2) 100 [4]", randint((1, 2), 4, 0, 100))
    print("choice 42 3 [2] no replace :p [0.2 0.3 0.5]", choice_race(k42, 3, 2, [0.2, 0.3, 0.5]))
    print("randint 42 [] 0 1", randint(k42, 1, 0, 1)[0])
    print("normal words (1 2) [3]", normal((1, 2), 3))
    k7 = key_from_seed(7)
    print("dropout 42 [[1 2 3] [4 5 6]] 0.5\n", dropout(k42, [[1, 2, 3], [4, 5, 6]], 0.5))
    print("dropout 7 [1 2 3 4] 0.25", dropout(k7, [1, 2, 3, 4], 0.25))
    print("dropout 7 [1 2 3 4] 1", np.array([1, 2, 3, 4], np.float32) * dropout_all(k7, 4))
    print("dropout 7 [1 2 3 4]:f16 0.25", dropout_f16(k7, [1, 2, 3, 4], 0.25))
    print("dropout 42 3.0 0.5", dropout(k42, 3.0, 0.5))


def dropout_all(key, n):
    """rate 1: u >= 1 never holds, so every element is dropped."""
    return np.where(uniform(key, n) >= f32(1), f32(1), f32(0))


def dropout_f16(key, x, rate):
    """f16 x: the f32 scale rounds to f16, the product is taken in f32 and rounded to f16."""
    x = np.asarray(x, dtype=np.float16)
    rate = f32(rate)
    scale = np.float16(f32(1) / f32(f32(1) - rate))
    kept = (x.astype(np.float32) * np.float32(scale)).astype(np.float16)
    return np.where(uniform(key, x.size) >= rate, kept, np.float16(0)).astype(np.float32)


def bf16(a):
    b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


if __name__ == "__main__":
    main()
