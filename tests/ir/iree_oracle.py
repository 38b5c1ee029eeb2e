#!/usr/bin/env python3
"""tests/ir/iree_oracle.py — IREE as an outside oracle for the compiler spine.

For every `;; ORACLE: <function> <config-json>` line in tests/ir/*.shf: random inputs of the
configured shapes are written as .npy files; `sheaf` runs the function compiled just in time
(traced, reference executor — the run must not fall back to the interpreter) on those inputs and
saves the result; `sheaf build -o F.vmfb` compiles the same function through StableHLO with
iree-compile (llvm-cpu), and iree-run-module runs it on the same inputs. Every result leaf (a
function may return a pytree: a loss and updated parameters) must agree (rtol 1e-5, atol 1e-6;
exact for integers). A config leaf with "limbs": true gets random
16-bit integers (a PRNG key, SPEC §6.7). Usage: iree_oracle.py SHEAF [TEST_DIR]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {"f32": np.float32, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}


def leaves(cfg, path=()):
    """Config leaves in the compiled ABI's order: depth first, dict keys sorted (SPEC §6.5)."""
    if isinstance(cfg, list) or (isinstance(cfg, dict) and "shape" in cfg):
        yield path, cfg
        return
    for k in sorted(cfg):
        yield from leaves(cfg[k], path + (k,))


def make_input(leaf, rng):
    shape = leaf if isinstance(leaf, list) else leaf["shape"]
    dtype = "f32" if isinstance(leaf, list) else leaf.get("dtype", "f32")
    if isinstance(leaf, dict) and leaf.get("limbs"):
        return rng.integers(0, 65536, size=shape).astype(np.float32)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("i32", "u32"):
        return rng.integers(0, leaf.get("high", 10), size=shape).astype(DTYPES[dtype])
    return rng.standard_normal(shape).astype(np.float32)


def sheaf_tree(cfg, files, path=()):
    """Sheaf expression building the argument from the saved .npy files."""
    if isinstance(cfg, list) or (isinstance(cfg, dict) and "shape" in cfg):
        return '(io "load" "%s")' % files[path]
    return "{" + " ".join(":%s %s" % (k, sheaf_tree(cfg[k], files, path + (k,))) for k in sorted(cfg)) + "}"


def check(sheaf, shf, fn, config, work):
    rng = np.random.default_rng(0)
    files, inputs = {}, []
    # Top-level keys are the parameters in call order (write them so in ORACLE lines); nested
    # dicts flatten with sorted keys.
    for params_path, leaf in ((p + q, l) for name in config for p in [(name,)] for q, l in leaves(config[name])):
        arr = make_input(leaf, rng)
        f = os.path.join(work, "in%d.npy" % len(inputs))
        np.save(f, arr)
        files[params_path] = f
        inputs.append(f)
    args = " ".join(sheaf_tree(config[name], files, (name,)) for name in config)
    driver = os.path.join(work, "driver.shf")
    with open(shf) as src, open(driver, "w") as d:
        d.write(src.read())
        callee = "(value-and-grad %s)" % fn[:-4] if fn.endswith("-vag") else fn  # the module names it f-vag
        d.write('\n(let [[leaves _] (flatten (%s %s))]\n' % (callee, args))
        d.write('  (repeat [i (len leaves)] (io "save" (str "%s/ref" i ".npy") (nth leaves i))))\n' % work)
    run = subprocess.run([sheaf, driver, "--jit-profile"], capture_output=True, text=True)
    if run.returncode != 0:
        return "sheaf failed:\n" + run.stderr
    if "; 0 interpreted calls" not in run.stderr:
        return "the function was not compiled:\n" + run.stderr
    vmfb = os.path.join(work, fn + ".vmfb")
    build = subprocess.run([sheaf, "build", shf, "-o", vmfb, "--config", json.dumps(config)], capture_output=True, text=True)
    if build.returncode != 0:
        return "sheaf build failed:\n" + build.stderr
    n_out = len([f for f in os.listdir(work) if re.match(r"ref\d+\.npy$", f)])
    cmd = ["iree-run-module", "--module=" + vmfb, "--function=" + fn, "--device=local-task"]
    cmd += ["--output=@" + os.path.join(work, "iree%d.npy" % i) for i in range(n_out)]
    cmd += ["--input=@" + f for f in inputs]
    iree = subprocess.run(cmd, capture_output=True, text=True)
    if iree.returncode != 0:
        return "iree-run-module failed:\n" + iree.stderr
    for i in range(n_out):
        want, got = np.load(os.path.join(work, "ref%d.npy" % i)), np.load(os.path.join(work, "iree%d.npy" % i))
        if want.shape != got.shape or want.dtype != got.dtype:
            return "result %d: %s %s from sheaf, %s %s from IREE" % (i, want.dtype, want.shape, got.dtype, got.shape)
        if want.dtype.kind in "iub":
            ok = np.array_equal(want, got)
        else:
            ok = np.allclose(want, got, rtol=1e-5, atol=1e-6, equal_nan=True)
        if not ok:
            return "result %d differs (max abs diff %g):\nsheaf %s\nIREE  %s" % (i, np.max(np.abs(want - got)), want, got)
    return None


def main():
    sheaf = os.path.abspath(sys.argv[1])
    test_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    cases = []
    for name in sorted(os.listdir(test_dir)):
        if name.endswith(".shf"):
            for line in open(os.path.join(test_dir, name)):
                m = re.match(r";; ORACLE: (\S+) (.*)$", line)
                if m:
                    cases.append((os.path.join(test_dir, name), m.group(1), json.loads(m.group(2))))
    if not cases:
        print("no ORACLE lines found")
        return 1
    failures = 0
    for shf, fn, config in cases:
        with tempfile.TemporaryDirectory() as work:
            err = check(sheaf, shf, fn, config, work)
        print("%s %s:%s%s" % ("FAIL" if err else "ok  ", os.path.basename(shf), fn, "\n" + err if err else ""))
        failures += bool(err)
    print("%d of %d programs agree with IREE" % (len(cases) - failures, len(cases)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
