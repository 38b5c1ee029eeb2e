#!/usr/bin/env python3
"""bench/run.py — training-step benchmarks of sheaf beside PyTorch, JAX and IREE (`make bench`).

Builds nothing. For each benchmark (xor, mlp, cnn, gpt) it runs, in one run:
  sheaf cpu   bench/<name>.shf with --device cpu (the native backend)
  sheaf ref   the same with --device ref (the IR's reference interpreter), a reference column
  torch       bench/twins/<name>_torch.py, eager, with 1 thread, 1 thread and 2 BLAS threads, and
              2 threads (torch.set_num_threads for its own loops, OPENBLAS_NUM_THREADS for the
              OpenBLAS its products run on), the best kept; under the
              interpreter that imports torch (Debian's /usr/bin/python3 for python3-torch), with
              OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs as sheaf selects for itself
  jax         bench/twins/<name>_jax.py, jax.jit of the whole step (XLA CPU, its default threads)
  iree        bench/twins/iree_step.py: the Sheaf step emitted as StableHLO, iree-compile
              (llvm-cpu, host CPU), iree-benchmark-module (its own repetitions; run once)
A benchmark without a twin for a peer (cnn: no JAX twin, no IREE case) prints `-` there.
Every program prints `RESULT name value unit` lines. Each column runs once per round, --rounds
rounds, and the best value of each figure is kept (lowest time, highest rate). Sheaf programs
run from a fresh temporary directory each time, so no `__sheaf__/` cache carries over and the
GPT first step always includes tracing and compilation. Then build/bench/dispatch_bench (Google
Benchmark; beside the sheaf binary) runs if it was built. Prints a table per benchmark with every
figure and the ratio of sheaf cpu to each other column (> 1: sheaf faster), and writes the same
tables with the machine (CPU model, cores, date, versions) to bench/results.md. A missing peer
prints `-` and the run goes on. Nothing fails on a slow result.
The GPT step also runs in three other styles (gpt-style2, gpt-style3, gpt-style4: sheaf only), each compared with
gpt_step.shf run right after it in the same rounds (a shared machine's load drifts over minutes), and
its products' GFLOP (--jit-profile) over its time is compared with the machine's sgemm rate.
usage: bench/run.py [--sheaf build/sheaf] [--rounds 3] [--only xor,mlp,cnn,gpt,gpt-style2,gpt-style3,gpt-style4] [--out bench/results.md]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

from matmul import has_avx512  # bench/ is on sys.path when run as a script

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHES = {
    "xor": ("xor_steps.shf", "XOR 2-8-1 MLP, SGD: 500 compiled train steps called from an interpreted loop"),
    "mlp": ("mlp_steps.shf", "784-256-10 MLP, Adam, batch 128: train steps per second"),
    "cnn": ("cnn_steps.shf", "CNN (conv 3×3 16, pool, conv 3×3 32, pool, 1568-128-10), Adam, batch 64: train steps per second"),
    "gpt": ("gpt_step.shf", "char GPT (d 256, 4 layers, 4 heads, T 128, B 32), Adam: one train step"),
    "gpt-style2": ("gpt_step_style2.shf", "the same GPT step in another style (einsum head projections on [D H Hd] weights, "
                   "== / where mask, explicit mean/var layer-norm, [out probs] attention, get/range embeddings); sheaf only"),
    "gpt-style3": ("gpt_step_style3.shf", "the same GPT step in a third style (per-head modules mapped and concatenated, "
                   "additive mask, softmax and GELU written out, one-hot embedding product, loop/recur over layers); sheaf only"),
    "gpt-style4": ("gpt_step_style4.shf", "the same GPT step in a fourth style (one sequence's model vmapped over the batch, "
                   "[out in] weights used transposed, separate q/k/v, heads by reshape/transpose, -inf mask); sheaf only"),
}
STYLE_TWINS = ("gpt-style2", "gpt-style3", "gpt-style4")  # compared with gpt's sheaf cpu step
COLUMNS = ["sheaf cpu", "sheaf ref", "torch", "jax", "iree"]
IREE_CASES = ("xor", "mlp", "gpt")  # the CASES of bench/twins/iree_step.py
TIMEOUT = 1200


def python_with(module):
    """An interpreter that can import `module` (this one, python3 on PATH, or Debian's)."""
    for py in [sys.executable, shutil.which("python3"), "/usr/bin/python3"]:
        if py and os.path.exists(py):
            if subprocess.run([py, "-c", "import " + module], capture_output=True).returncode == 0:
                return py
    return None


def results(cmd, env=None, cwd=None, stderr=subprocess.PIPE, timeout=TIMEOUT, on_line=None):
    """{name: (value, unit)} from the RESULT lines of a command; {} if it fails or times out.
    stderr=subprocess.DEVNULL drops a large stderr (bench/obs_overhead.py's --trace column);
    on_line(words) sees every other line of the output."""
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=cwd, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("  %s: %s" % (" ".join(cmd), e), file=sys.stderr)
        return {}
    if out.returncode != 0:
        print("  %s failed (%d): %s" % (" ".join(cmd), out.returncode, (out.stderr or "").strip()[-500:]), file=sys.stderr)
    found = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "RESULT":
            found[parts[1]] = (float(parts[2]), parts[3])
        elif on_line:
            on_line(parts)
    return found


def lower_is_better(unit):
    return unit in ("ms", "s", "us", "ns")


def keep_best(table, column, found, note=None):
    for name, (value, unit) in found.items():
        old = table.setdefault(name, {"unit": unit}).get(column)
        better = old is None or (value < old[0] if lower_is_better(unit) else value > old[0])
        if better:
            table[name][column] = (value, note)


def run_sheaf(sheaf, program, device, flags=(), **kw):
    """RESULT lines of `sheaf PROGRAM --device DEVICE FLAGS…` (kw: stderr, timeout, as results())."""
    with tempfile.TemporaryDirectory() as work:  # no __sheaf__/ cache from an earlier run
        copy = os.path.join(work, os.path.basename(program))
        shutil.copy(program, copy)
        return results([sheaf, copy, "--device", device] + list(flags), cwd=work, **kw)


def measure(name, args, pythons, table, paired=None):
    """Fills table[figure][column] with each column's best round; paired (a style twin's): gpt_step.shf's
    sheaf cpu figures, run right after the twin in each round, so that their ratio sees the same load."""
    program = os.path.join(HERE, BENCHES[name][0])
    torch_env = dict(os.environ)
    if has_avx512() and "OPENBLAS_CORETYPE" not in torch_env:
        torch_env["OPENBLAS_CORETYPE"] = "SkylakeX"  # Debian's OpenBLAS 0.3.21 falls back to Prescott
    torch_twin, jax_twin = (os.path.join(HERE, "twins", "%s_%s.py" % (name, peer)) for peer in ("torch", "jax"))
    for r in range(args.rounds):
        print("%s: round %d of %d" % (name, r + 1, args.rounds), file=sys.stderr)
        keep_best(table, "sheaf cpu", run_sheaf(args.sheaf, program, "cpu"))
        if paired is not None:
            keep_best(paired, "sheaf cpu", run_sheaf(args.sheaf, os.path.join(HERE, BENCHES["gpt"][0]), "cpu"))
        if not args.no_ref:
            keep_best(table, "sheaf ref", run_sheaf(args.sheaf, program, "ref"))
        if pythons["torch"] and os.path.exists(torch_twin):
            # torch.set_num_threads (its own loops) does not reach the OpenBLAS under its products,
            # which follows OPENBLAS_NUM_THREADS: torch threads / BLAS threads
            for threads, blas in ((1, 1), (1, 2), (2, 2)):
                env = dict(torch_env, OPENBLAS_NUM_THREADS=str(blas))
                keep_best(table, "torch", results([pythons["torch"], torch_twin, "--threads", str(threads)], env=env),
                          "%dt" % threads if threads == blas else "%dt, BLAS %dt" % (threads, blas))
        if pythons["jax"] and os.path.exists(jax_twin):
            keep_best(table, "jax", results([pythons["jax"], jax_twin]))
    if pythons["iree"] and name in IREE_CASES:
        keep_best(table, "iree", results([pythons["iree"], os.path.join(HERE, "twins", "iree_step.py"),
                                          "--sheaf", args.sheaf, name]))


def step_gflop(sheaf):
    """GFLOP of the GPT step's products, from --jit-profile (products and attention steps of its 7 train-step calls)."""
    found = {}
    with tempfile.TemporaryDirectory() as work:
        shutil.copy(os.path.join(HERE, BENCHES["gpt"][0]), work)
        out = subprocess.run([sheaf, BENCHES["gpt"][0], "--jit-profile"], cwd=work, capture_output=True, text=True, timeout=TIMEOUT)
    for line in out.stderr.splitlines():
        if "sgemm," in line and "GFLOP" in line:  # "... products Xms (N%; K sgemm, G GFLOP, R GFLOP/s) + attention Yms (M%; S steps, A GFLOP) ..."
            found["gflop"] = float(line.split("sgemm,")[1].split("GFLOP")[0])
            if " steps, " in line:
                found["gflop"] += float(line.split(" steps, ")[1].split("GFLOP")[0])
    return found["gflop"] / 7 if "gflop" in found else None


def sgemm_rate(sheaf, rounds):
    """The machine's sgemm rate in GFLOP/s: sheaf's (@ a b) at 4096x256x1024, best of 1 and 2 threads and of the rounds
    (bench/matmul.py's measurement)."""
    from matmul import flops, sheaf_blases, sheaf_seconds
    shape, best = (4096, 256, 1024), 0.0
    default = sheaf_blases(sheaf, None)[0][1]
    for _ in range(rounds):
        for threads in (1, 2):
            best = max(best, flops(shape) / sheaf_seconds(sheaf, shape, threads, default, 0.4) / 1e9)
    return best


def fmt(cell):
    if cell is None:
        return "-"
    value, note = cell
    text = ("%.3f" % value) if value < 100 else ("%.1f" % value)
    return text + (" (%s)" % note if note else "")


def render(name, table):
    lines = ["### %s — %s" % (name, BENCHES[name][1]), "",
             "| figure | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for fig, row in table.items():
        unit = row["unit"]
        better = "lower is better" if lower_is_better(unit) else "higher is better"
        lines.append("| %s (%s, %s) | " % (fig, unit, better) + " | ".join(fmt(row.get(c)) for c in COLUMNS) + " |")
        mine = row.get("sheaf cpu")
        ratios = []
        for c in COLUMNS:
            peer = row.get(c)
            if c == "sheaf cpu" or mine is None or peer is None or mine[0] <= 0 or peer[0] <= 0:
                ratios.append("-" if c != "sheaf cpu" else "")
            else:
                ratio = peer[0] / mine[0] if lower_is_better(unit) else mine[0] / peer[0]
                ratios.append("%.2f×" % ratio)
        lines.append("| sheaf cpu vs column (> 1: sheaf faster) | " + " | ".join(ratios) + " |")
    return "\n".join(lines) + "\n"


def dispatch_bench(sheaf):
    exe = os.path.join(os.path.dirname(os.path.abspath(sheaf)), "bench", "dispatch_bench")
    lines = ["### dispatch_bench — host overhead of a cached compiled call (XOR forward, f32[4x2])", ""]
    if not os.path.exists(exe):
        return "\n".join(lines + ["- (%s not built)" % exe]) + "\n"
    try:
        out = subprocess.run([exe, "--benchmark_format=json"], capture_output=True, text=True, timeout=TIMEOUT)
        rows = json.loads(out.stdout)["benchmarks"]
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired) as e:
        return "\n".join(lines + ["- (dispatch_bench failed: %s)" % e]) + "\n"
    lines += ["| benchmark | real time | CPU time |", "|---|---|---|"]
    for b in rows:
        lines.append("| %s | %.2f %s | %.2f %s |" % (b["name"], b["real_time"], b["time_unit"], b["cpu_time"], b["time_unit"]))
    return "\n".join(lines) + "\n"


def version(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "-"
    except (OSError, subprocess.TimeoutExpired):
        return "-"


def machine_line():
    """'- machine: CPU model, N cores (arch), load L at the start' (also bench/obs_overhead.py)."""
    model = "-"
    try:
        model = next(l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
                     if l.startswith("Model name"))
    except (OSError, StopIteration):
        pass
    return "- machine: %s, %d cores (%s), load %.2f at the start" % (model, os.cpu_count(), platform.machine(), os.getloadavg()[0])


def blas_line(sheaf):
    """'- OpenBLAS: what sheaf's products run on (--jit-profile); OPENBLAS_* set in the environment':
    a machine may set OPENBLAS_CORETYPE for every process, which then decides every column's kernel."""
    products = "-"
    try:  # one eager product: nothing is compiled or cached
        out = subprocess.run([sheaf, "--jit-profile", "-c", "(@ (ones [64 64]) (ones [64 64]))"], capture_output=True,
                             text=True, timeout=60)
        products = next((l.split(":", 1)[1].strip() for l in out.stderr.splitlines() if l.strip().startswith("f32 products:")), "-")
    except (OSError, subprocess.TimeoutExpired):
        pass
    env = ", ".join("%s=%s" % (k, v) for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")) or "none"
    return "- OpenBLAS: sheaf's products on %s; OPENBLAS_* in the environment: %s" % (products, env)


def machine(sheaf, pythons):
    py_ver = lambda py, mod: version([py, "-c", "import %s; print(%s.__version__)" % (mod, mod)]) if py else "-"  # noqa: E731
    iree = "-"
    if shutil.which("iree-compile"):  # "IREE (https://iree.dev):" then "  IREE compiler version 3.13.0rc… @ hash"
        out = subprocess.run(["iree-compile", "--version"], capture_output=True, text=True).stdout
        iree = next((l.split("version", 1)[1].split("@")[0].strip() for l in out.splitlines() if "compiler version" in l), "-")
    return [machine_line(),
            "- date: %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "- sheaf: %s (%s)" % (version([sheaf, "--version"]), sheaf),
            blas_line(sheaf),
            "- torch %s (%s), jax %s (%s), IREE %s" % (py_ver(pythons["torch"], "torch"), pythons["torch"] or "absent",
                                                     py_ver(pythons["jax"], "jax"), pythons["jax"] or "absent", iree)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sheaf", default=os.path.join(HERE, "..", "build", "sheaf"))
    ap.add_argument("--rounds", type=int, default=3, help="rounds; each figure keeps its best round")
    ap.add_argument("--only", default=",".join(BENCHES), help="comma-separated subset of " + ",".join(BENCHES))
    ap.add_argument("--no-ref", action="store_true", help="skip the --device ref column")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = ap.parse_args()
    args.sheaf = os.path.abspath(args.sheaf)
    if not os.path.exists(args.sheaf):
        print("run.py: no sheaf binary at %s (run 'make build' first)" % args.sheaf, file=sys.stderr)
        return 2
    pythons = {"torch": python_with("torch"), "jax": python_with("jax"),
               "iree": python_with("numpy") if shutil.which("iree-compile") and shutil.which("iree-benchmark-module") else None}
    head = machine(args.sheaf, pythons)
    print("\n".join(head) + "\n")
    sections, tables, pairs = [], {}, {}
    for name in args.only.split(","):
        table = tables.setdefault(name, {})
        measure(name, args, pythons, table, pairs.setdefault(name, {}) if name in STYLE_TWINS else None)
        sections.append(render(name, table))
        print(sections[-1])
        sys.stdout.flush()
    gpt = tables.get("gpt", {}).get("gpt_ms_per_step", {}).get("sheaf cpu")
    lines = []
    for name in STYLE_TWINS:
        twin = tables.get(name, {}).get("gpt_ms_per_step", {}).get("sheaf cpu")
        base = pairs.get(name, {}).get("gpt_ms_per_step", {}).get("sheaf cpu")
        if twin and base:
            lines.append("- %s: %.1f ms a step, %.2f× gpt_step.shf's %.1f ms in the same rounds (goal: at most 1.15×)"
                         % (name, twin[0], twin[0] / base[0], base[0]))
    gflop, rate = (step_gflop(args.sheaf), sgemm_rate(args.sheaf, args.rounds)) if gpt else (None, None)
    if gflop and rate:
        achieved = gflop / (gpt[0] / 1000.0)
        lines.append("- gpt step: %.1f GFLOP of products in %.1f ms = %.1f GFLOP/s, %.0f %% of the machine's sgemm rate "
                     "(%.1f GFLOP/s: sheaf's `(@ a b)` at 4096x256x1024, best of 1 and 2 threads; goal: at least 60 %%)"
                     % (gflop, gpt[0], achieved, 100.0 * achieved / rate, rate))
    if lines:
        sections.append("\n".join(["### gpt step: style twins and the sgemm rate", ""] + lines) + "\n")
        print(sections[-1])
    sections.append(dispatch_bench(args.sheaf))
    print(sections[-1])
    notes = ("Best of %d rounds (IREE: one iree-benchmark-module run). torch: best of 1 thread, 1 thread with 2 BLAS "
             "threads and 2 threads, the configuration in parentheses; OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs. jax: XLA's default threads. "
             "iree: local-sync (1 thread) or local-task, the faster; gpt_compile_s = sheaf build + iree-compile. "
             "sheaf: SHEAF_NUM_THREADS unset (one BLAS thread per usable core)." % args.rounds)
    head.append("- load at the end: %.2f (1-minute average; other work on the machine disturbs every column)" % os.getloadavg()[0])
    with open(args.out, "w") as f:
        f.write("# Training-step benchmarks (bench/run.py)\n\n" + "\n".join(head) + "\n\n" + notes + "\n\n" + "\n".join(sections))
    print("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
