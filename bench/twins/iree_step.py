#!/usr/bin/env python3
"""bench/twins/iree_step.py — the Sheaf train steps of bench/*.shf compiled by IREE (llvm-cpu).

For each benchmark, `sheaf build ... -S` emits the training step as StableHLO: XOR and MLP with
`--config` (argument shapes); GPT with `--trace-with` on a copy of bench/gpt_step.shf cut at its
"---- measurement" line that calls train-step once (--config has no syntax for the list of layer
dicts). `iree-compile --iree-hal-target-backends=llvm-cpu --iree-llvmcpu-target-cpu=host`
compiles it and `iree-benchmark-module` times a call of the step on fixed random inputs (.npy
files made from the function's signature in the module: f32 small positive values, i32 in
0..9), on `local-sync` (one thread) and `local-task` (a thread per core); the faster is kept.
Prints RESULT lines in the units of the Sheaf programs (XOR: 500 calls; MLP: calls per second;
GPT: ms per call, plus `gpt_compile_s`, the seconds of sheaf build + iree-compile).
usage: python3 bench/twins/iree_step.py [--sheaf build/sheaf] [xor mlp gpt]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def linear(n_in, n_out):
    return {"W": [n_in, n_out], "b": [n_out]}


MLP_P = {"l1": linear(784, 256), "l2": linear(256, 10)}
I32 = {"shape": [], "dtype": "i32"}

# name: (program, function, --config or None for --trace-with, RESULT line from seconds per call)
CASES = {
    "xor": ("xor_steps.shf", "step", {"p": {"l1": linear(2, 8), "l2": linear(8, 1)}, "x": [4, 2], "y": [4, 1]},
            lambda s: "RESULT xor_500_steps_ms %.3f ms" % (500 * 1000.0 * s)),
    "mlp": ("mlp_steps.shf", "train-step",
            {"s": {"m": MLP_P, "params": MLP_P, "t": I32, "v": MLP_P}, "x": [128, 784],
             "y": {"shape": [128], "dtype": "i32"}},
            lambda s: "RESULT mlp_steps_per_s %.1f steps/s" % (1.0 / s)),
    "gpt": ("gpt_step.shf", "train-step", None, lambda s: "RESULT gpt_ms_per_step %.1f ms" % (1000.0 * s)),
}
NP = {"f32": np.float32, "i32": np.int32, "ui32": np.uint32, "i1": np.bool_}


def signature(mlir_text, fn):
    """Argument types [(shape, dtype)] of func `fn` in a generic-form MLIR module."""
    for m in re.finditer(r"function_type = \((.*?)\) ->.*?sym_name = \"([^\"]+)\"", mlir_text):
        if m.group(2) == fn:
            args = re.findall(r"tensor<([0-9x]*?)x?(f32|i32|ui32|i1)>", m.group(1))
            return [([int(d) for d in dims.split("x") if d], dt) for dims, dt in args]
    return None


def make_input(shape, dtype, rng):
    if dtype == "f32":
        return (np.abs(rng.standard_normal(shape)) * 0.05).astype(np.float32)  # Adam's v ≥ 0
    return rng.integers(0, 10, size=shape).astype(NP[dtype])


def build_module(sheaf, name, work):
    program, fn, config, _ = CASES[name]
    mlir = os.path.join(work, name + ".mlir")
    src = os.path.join(BENCH, program)
    if config is not None:
        cmd = [sheaf, "build", src, "-S", "-o", mlir, "--config", json.dumps(config)]
    else:
        text = open(src).read().split(";; ---- measurement")[0]
        src = os.path.join(work, name + "_driver.shf")
        with open(src, "w") as f:
            f.write(text + "\n(first (train-step state0 idx tgt))\n")
        cmd = [sheaf, "build", src, "--trace-with", "-S", "-o", mlir]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("sheaf build failed: " + out.stderr.strip()[-2000:])
    return mlir


def bench_case(sheaf, name, work):
    _, fn, _, result = CASES[name]
    t0 = time.perf_counter()
    mlir = build_module(sheaf, name, work)
    vmfb = os.path.join(work, name + ".vmfb")
    comp = subprocess.run(["iree-compile", "--iree-hal-target-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                           mlir, "-o", vmfb], capture_output=True, text=True)
    if comp.returncode != 0:
        raise RuntimeError("iree-compile failed: " + comp.stderr.strip()[-2000:])
    compile_s = time.perf_counter() - t0
    sig = signature(open(mlir).read(), fn)
    if sig is None:
        raise RuntimeError("no function %s in the module" % fn)
    rng = np.random.default_rng(0)
    inputs = []
    for i, (shape, dtype) in enumerate(sig):
        inputs.append(os.path.join(work, "%s_in%d.npy" % (name, i)))
        np.save(inputs[-1], make_input(shape, dtype, rng))
    best = None
    for device in ("local-sync", "local-task"):
        cmd = ["iree-benchmark-module", "--module=" + vmfb, "--function=" + fn, "--device=" + device,
               "--benchmark_format=json", "--benchmark_min_time=" + ("3x" if name == "gpt" else "1s")]
        run = subprocess.run(cmd + ["--input=@" + f for f in inputs], capture_output=True, text=True)
        if run.returncode != 0:
            print("iree %s (%s): iree-benchmark-module failed: %s" % (name, device, run.stderr.strip()[-2000:]), file=sys.stderr)
            continue
        bm = json.loads(run.stdout)["benchmarks"][0]
        seconds = bm["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bm["time_unit"]]
        print("iree %s %s: %.3f ms per call" % (name, device, seconds * 1e3), file=sys.stderr)
        best = seconds if best is None else min(best, seconds)
    if best is not None:
        print(result(best))
        if name == "gpt":
            print("RESULT gpt_compile_s %.3f s" % compile_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sheaf", default=os.path.join(BENCH, "..", "build", "sheaf"))
    ap.add_argument("cases", nargs="*", default=list(CASES))
    args = ap.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as work:
        for name in args.cases:
            try:
                bench_case(os.path.abspath(args.sheaf), name, work)
            except RuntimeError as e:
                print("iree %s: %s" % (name, e), file=sys.stderr)
                failed = True
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
