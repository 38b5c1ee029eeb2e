#!/usr/bin/env python3
"""bench/matmul.py — f32 matrix-product throughput of `sheaf` beside NumPy and PyTorch.

For each shape (m×k·k×n) it measures, in one run:
  sheaf    `(@ a b)` in a Sheaf `repeat` loop, with OpenBLAS's own core detection
           (OPENBLAS_CORETYPE preset to what OpenBLAS detects by itself) and with sheaf's
           SkylakeX selection (variable unset), each at 1 and 2 threads (SHEAF_NUM_THREADS)
  numpy    `a @ b` with OPENBLAS_NUM_THREADS=1 and 2 (NumPy's bundled OpenBLAS)
  torch    `torch.mm` with torch.set_num_threads(1) and 2, with OpenBLAS's own detection and
           with OPENBLAS_CORETYPE=SkylakeX (Debian's torch calls the system OpenBLAS)
and prints GFLOP/s and the ratios of sheaf's best to each peer's best.

Sheaf has no clock, so a Sheaf measurement is the wall time of `sheaf -c` running the loop n
times minus the same program with 0 iterations. Every column is measured once per round, for
--repeats rounds, and the best round is kept. Benchmarks are not
tests: nothing here fails on a slow result.

usage: bench/matmul.py [--sheaf build/sheaf] [--shapes 128x784x256,512x512x512] [--seconds 0.4]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

DEFAULT_SHAPES = "128x784x256,512x512x512,4096x256x1024"


def parse_shapes(text):
    return [tuple(int(d) for d in s.split("x")) for s in text.split(",")]


def flops(shape):
    m, k, n = shape
    return 2.0 * m * k * n


# ---- workers (run in a child interpreter so that thread and core variables apply at load) ----


def worker(kind, shape, threads, seconds):
    m, k, n = shape
    if kind == "numpy":
        import numpy as np

        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        run = lambda: a @ b  # noqa: E731
    else:
        import torch

        torch.set_num_threads(threads)
        a, b = torch.rand(m, k), torch.rand(k, n)
        run = lambda: torch.mm(a, b)  # noqa: E731
    run()
    reps = max(3, int(seconds / (flops(shape) / 50e9)))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            run()
        best = min(best, (time.perf_counter() - t0) / reps)
    print(json.dumps({"seconds": best}))


def run_worker(python, kind, shape, threads, seconds, env_extra):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), **env_extra)
    cmd = [python, os.path.abspath(__file__), "--worker", kind, "--shapes", "x".join(map(str, shape)),
           "--threads", str(threads), "--seconds", str(seconds)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def python_with(module):
    """An interpreter that can import `module` (this one, or Debian's for python3-torch)."""
    for py in [sys.executable, shutil.which("python3"), "/usr/bin/python3"]:
        if py and os.path.exists(py):
            if subprocess.run([py, "-c", f"import {module}"], capture_output=True).returncode == 0:
                return py
    return None


# ---- sheaf ----


def sheaf_wall(sheaf, shape, reps, env):
    m, k, n = shape
    prog = f"(def a (ones [{m} {k}])) (def b (ones [{k} {n}])) (repeat [i {reps}] [c nil] (@ a b)) nil"
    t0 = time.perf_counter()
    subprocess.run([sheaf, "-c", prog], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def sheaf_seconds(sheaf, shape, threads, coretype, seconds):
    env = dict(os.environ, SHEAF_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    reps = max(3, int(seconds / (flops(shape) / 50e9)))
    base = sheaf_wall(sheaf, shape, 0, env)
    full = sheaf_wall(sheaf, shape, reps, env)
    return max(full - base, 1e-9) / reps


def openblas_default_core():
    """The core OpenBLAS picks by itself on this CPU (what sheaf overrides)."""
    probe = ("import ctypes; l = ctypes.CDLL('libopenblas.so.0'); "
             "l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())")
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    return out.stdout.strip() or None


def has_avx512():
    try:
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return all(f in flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sheaf", default=os.path.join(os.path.dirname(__file__), "..", "build", "sheaf"))
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--seconds", type=float, default=0.4, help="target time per measurement")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the best of each column is kept")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes)
    if args.worker:
        return worker(args.worker, shapes[0], args.threads, args.seconds)

    core = openblas_default_core()
    auto = "SkylakeX" if has_avx512() else core  # what sheaf selects (src/tensor/blas.cpp)
    np_py, torch_py = python_with("numpy"), python_with("torch")
    print(f"# OpenBLAS detects: {core}; numpy: {np_py or 'absent'}; torch: {torch_py or 'absent'}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    cols = [("sheaf", core, 1), ("sheaf", core, 2), ("sheaf", None, 1), ("sheaf", None, 2),
            ("numpy", None, 1), ("numpy", None, 2),
            ("torch", None, 1), ("torch", None, 2), ("torch", "SkylakeX", 1), ("torch", "SkylakeX", 2)]
    label = lambda c: f"{c[0]}:{c[1] or (auto if c[0] == 'sheaf' else 'own')}:{c[2]}t"  # noqa: E731
    print("GFLOP/s (higher is better)")
    print(f"{'shape m×k×n':>16}  " + "  ".join(f"{label(c):>18}" for c in cols))
    for shape in shapes:
        row = {c: None for c in cols}
        for _ in range(args.repeats):  # rounds over every column, so that load changes hit all alike
            for c in cols:
                kind, coretype, threads = c
                if kind == "sheaf":
                    s = sheaf_seconds(args.sheaf, shape, threads, coretype, args.seconds)
                else:
                    py = np_py if kind == "numpy" else torch_py
                    extra = {"OPENBLAS_CORETYPE": coretype} if coretype else {}
                    s = run_worker(py, kind, shape, threads, args.seconds, extra) if py else None
                if s:
                    row[c] = max(row[c] or 0.0, flops(shape) / s / 1e9)
        cells = "  ".join(f"{row[c]:18.1f}" if row[c] else f"{'-':>18}" for c in cols)
        print(f"{'x'.join(map(str, shape)):>16}  {cells}")
        best = lambda kind, pred=lambda c: True: max(  # noqa: E731
            [v for c, v in row.items() if c[0] == kind and v and pred(c)], default=None)
        sheaf_best = best("sheaf", lambda c: c[1] is None)
        ratios = [f"{auto}/{core} {sheaf_best / best('sheaf', lambda c: c[1] is not None):.2f}x"]
        for peer in ("numpy", "torch"):
            if best(peer):
                ratios.append(f"sheaf/{peer} {sheaf_best / best(peer):.2f}x")
        print(f"{'':>16}  best sheaf ({auto}) {sheaf_best:.1f} GFLOP/s; " + ", ".join(ratios))


if __name__ == "__main__":
    main()
