#!/usr/bin/env python3
"""bench/eager_ops.py — per-call overhead of small eager ops in the sheaf interpreter.

Each op runs n times in a Sheaf `repeat` loop (`sheaf -c`); the same loop whose body only returns
its accumulator is the baseline, so the difference is what one call of the op costs: argument
evaluation, builtin dispatch, dtype promotion, allocation of the result, the kernel. Times are the
child's CPU time (user + sys, from wait4), which a busy machine disturbs less than wall time.
NumPy and PyTorch run the same op in a Python loop for reference (their loop overhead
subtracted the same way). The goal for `(+ x y)` on f32[4] is ≤ 1 µs.

usage: bench/eager_ops.py [--sheaf build/sheaf] [--n 1000000]
"""
import argparse
import os
import shutil
import subprocess
import sys

SETUP = "(def x [1 2 3 4]) (def y [5 6 7 8]) (def m [[1 2] [3 4]]) (def s 0.5)"
# name: (sheaf loop body over accumulator `acc` starting at the init, init, python body)
OPS = {
    "(+ x y) f32[4]": ("(+ x y)", "x", "x + y"),
    "(+ acc y) chained": ("(+ acc y)", "x", "acc + y"),
    "(* x s) scalar": ("(* x s)", "x", "x * s"),
    "(@ m m) f32[2x2]": ("(@ m m)", "m", "m @ m"),
    "(+ 1 2) host ints": ("(+ 1 2)", "0", "1 + 2"),
}


def cpu_seconds(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"eager_ops: {' '.join(cmd)} failed")
    return ru.ru_utime + ru.ru_stime


def sheaf_loop(sheaf, body, init, n, repeats):
    prog = f"{SETUP} (repeat [i {n}] [acc {init}] {body}) nil"
    return min(cpu_seconds([sheaf, "-c", prog]) for _ in range(repeats))


PY_WORKER = r"""
import sys, time, resource
kind, n = sys.argv[1], int(sys.argv[2])
if kind == "numpy":
    import numpy as lib
    arr = lambda v: lib.array(v, dtype=lib.float32)
else:
    import torch as lib
    torch = lib; torch.set_num_threads(1)
    arr = lambda v: torch.tensor(v, dtype=torch.float32)
x, y, m, s = arr([1, 2, 3, 4]), arr([5, 6, 7, 8]), arr([[1, 2], [3, 4]]), 0.5
def cpu(): r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
def timed(body, init):
    code = f"def f(x, y, m, s, acc):\n    for _ in range({n}):\n        acc = {body}\n    return acc"
    ns = {}; exec(code, ns)
    best = float("inf")
    for _ in range(3):
        t0 = cpu(); ns["f"](x, y, m, s, eval(init)); best = min(best, cpu() - t0)
    return best
base = timed("acc", "x")
for line in sys.stdin:
    body, init = line.rstrip("\n").split("\t")
    print((timed(body, init) - base) / n * 1e6, flush=True)
"""


def python_peer(kind, n):
    for py in [sys.executable, shutil.which("python3"), "/usr/bin/python3"]:
        if py and subprocess.run([py, "-c", f"import {kind}"], capture_output=True).returncode == 0:
            lines = "".join(f"{py_body}\t{init}\n" for _, init, py_body in OPS.values())
            out = subprocess.run([py, "-c", PY_WORKER, kind, str(n)], input=lines, capture_output=True, text=True)
            if out.returncode == 0:
                return [float(v) for v in out.stdout.split()]
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sheaf", default=os.path.join(os.path.dirname(__file__), "..", "build", "sheaf"))
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    n = args.n
    base = sheaf_loop(args.sheaf, "acc", "x", n, args.repeats)
    empty = sheaf_loop(args.sheaf, "acc", "x", 0, args.repeats)
    peers = {k: python_peer(k, n // 10) for k in ("numpy", "torch")}
    print(f"# n = {n}; load {os.getloadavg()[0]:.2f}; sheaf loop iteration alone: {(base - empty) / n * 1e6:.3f} µs")
    print(f"{'op':<22} {'sheaf µs/call':>14} {'numpy':>8} {'torch':>8}")
    for i, (name, (body, init, _)) in enumerate(OPS.items()):
        t = (sheaf_loop(args.sheaf, body, init, n, args.repeats) - base) / n * 1e6
        cells = [f"{peers[k][i]:8.3f}" if peers[k] else f"{'-':>8}" for k in ("numpy", "torch")]
        print(f"{name:<22} {t:14.3f} {cells[0]} {cells[1]}")


if __name__ == "__main__":
    main()
