#!/usr/bin/env python3
"""bench/matmul.py — f32 matrix-product throughput of `sheaf` beside NumPy and PyTorch.

For each shape (m×k·k×n) it measures, in one run:
  sheaf    `(@ a b)` in a Sheaf `repeat` loop on each BLAS it can load (SHEAF_BLAS): the OpenBLAS
           shipped beside the binary (scipy-openblas32, its own core detection; the default),
           Debian's OpenBLAS with its own core detection and with sheaf's choice (SkylakeX on
           AVX-512), and Debian's BLIS (libblis4-pthread, its own kernel choice) when installed;
           each at 1 and 2 threads (SHEAF_NUM_THREADS; BLIS_NUM_THREADS for BLIS)
  numpy    `a @ b` with OPENBLAS_NUM_THREADS=1 and 2 (NumPy's bundled OpenBLAS)
  torch    `torch.mm` with torch.set_num_threads(1) and 2, with OpenBLAS's own detection and
           with OPENBLAS_CORETYPE=SkylakeX (Debian's torch calls the system OpenBLAS)
and prints GFLOP/s and the ratios of sheaf's default to each other column's best.

A Sheaf measurement is the program's own clock (`(io "clock")`) around n products in a `repeat`
loop, after one product that warms up. Every column is measured once per round, for
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


def reps_for(shape, seconds):
    """Products in one measurement: about `seconds` of them at 200 GFLOP/s, at least 3."""
    return max(3, int(seconds / (flops(shape) / 200e9)))


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
    reps = reps_for(shape, seconds)
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


def sheaf_seconds(sheaf, shape, threads, blas, seconds):
    """Seconds per product, by the program's own clock around `reps` products after one that warms
    up (OpenBLAS's threads and buffers, the result's pages); blas: {"lib": path or None (the
    default), "core": OPENBLAS_CORETYPE or None}."""
    env = dict(os.environ, SHEAF_NUM_THREADS=str(threads), BLIS_NUM_THREADS=str(threads))
    for var in ("OPENBLAS_CORETYPE", "SHEAF_BLAS"):
        env.pop(var, None)
    if blas["lib"]:
        env["SHEAF_BLAS"] = blas["lib"]
    if blas["core"]:
        env["OPENBLAS_CORETYPE"] = blas["core"]
    reps = reps_for(shape, seconds)
    m, k, n = shape
    prog = (f"(def a (ones [{m} {k}])) (def b (ones [{k} {n}])) (@ a b) "
            f"(let [t0 (io \"clock\") _ (repeat [i {reps}] [c nil] (@ a b))] (print \"{{:.9f}}\" (- (io \"clock\") t0)))")
    out = subprocess.run([sheaf, "-c", prog], env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1]) / reps


SYSTEM_OPENBLAS = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
SYSTEM_BLIS = "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4"


def sheaf_blases(sheaf, core):
    """The BLAS columns of sheaf: (label, {"lib", "core"}); the first is the default."""
    shipped = os.path.join(os.path.dirname(os.path.abspath(sheaf)), "libscipy_openblas.so")
    cols = [("default", {"lib": None, "core": None})]
    if os.path.exists(shipped):
        cols[0] = ("scipy-openblas", {"lib": None, "core": None})
    if os.path.exists(SYSTEM_OPENBLAS):
        cols += [("debian:" + (core or "own"), {"lib": SYSTEM_OPENBLAS, "core": core}),
                 ("debian:SkylakeX" if has_avx512() else "debian:sheaf", {"lib": SYSTEM_OPENBLAS, "core": None})]
    if os.path.exists(SYSTEM_BLIS):
        cols.append(("blis", {"lib": SYSTEM_BLIS, "core": None}))
    return cols


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
    np_py, torch_py = python_with("numpy"), python_with("torch")
    print(f"# Debian's OpenBLAS detects: {core}; numpy: {np_py or 'absent'}; torch: {torch_py or 'absent'}; "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    blases = sheaf_blases(args.sheaf, core)
    cols = [("sheaf", name, t) for name, _ in blases for t in (1, 2)]
    cols += [("numpy", None, 1), ("numpy", None, 2),
             ("torch", None, 1), ("torch", None, 2), ("torch", "SkylakeX", 1), ("torch", "SkylakeX", 2)]
    label = lambda c: f"{c[0]}:{c[1] or 'own'}:{c[2]}t"  # noqa: E731
    print("GFLOP/s (higher is better)")
    print(f"{'shape m×k×n':>16}  " + "  ".join(f"{label(c):>22}" for c in cols))
    for shape in shapes:
        row = {c: None for c in cols}
        for _ in range(args.repeats):  # rounds over every column, so that load changes hit all alike
            for c in cols:
                kind, variant, threads = c
                if kind == "sheaf":
                    s = sheaf_seconds(args.sheaf, shape, threads, dict(blases)[variant], args.seconds)
                else:
                    py = np_py if kind == "numpy" else torch_py
                    extra = {"OPENBLAS_CORETYPE": variant} if variant else {}
                    s = run_worker(py, kind, shape, threads, args.seconds, extra) if py else None
                if s:
                    row[c] = max(row[c] or 0.0, flops(shape) / s / 1e9)
        cells = "  ".join(f"{row[c]:22.1f}" if row[c] else f"{'-':>22}" for c in cols)
        print(f"{'x'.join(map(str, shape)):>16}  {cells}")
        best = lambda kind, pred=lambda c: True: max(  # noqa: E731
            [v for c, v in row.items() if c[0] == kind and v and pred(c)], default=None)
        default = blases[0][0]
        mine = best("sheaf", lambda c: c[1] == default)
        ratios = [f"/{name} {mine / best('sheaf', lambda c, n=name: c[1] == n):.2f}x" for name, _ in blases[1:]
                  if best("sheaf", lambda c, n=name: c[1] == n)]
        for peer in ("numpy", "torch"):
            if best(peer):
                ratios.append(f"/{peer} {mine / best(peer):.2f}x")
        print(f"{'':>16}  sheaf ({default}) {mine:.1f} GFLOP/s, best of 1t/2t; ratios: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
