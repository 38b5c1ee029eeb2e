#!/usr/bin/env python3
"""bench/gpu.py — GPT-2 small and medium bf16 training-step benchmarks on a GPU: sheaf beside PyTorch and JAX.

Builds nothing. In one run, on a machine with an NVIDIA GPU, it runs
  sheaf          bench/gpt2_gpu.shf with --device cuda (from a fresh temporary directory, so no
                 __sheaf__/ cache is reused and the first step includes tracing and compilation);
                 attention by cuDNN where libsheaf_cudnn.so and libcudnn load (its --jit-profile
                 says which ran)
  sheaf own attention  the same with SHEAF_CUDNN=0: Sheaf's own flash-attention kernels (only
                 with --own-attention)
  sheaf per-head the model written with a module per head (gpt2_gpu.shf --per-head 1: per-head q,
                 k, v layers, softmax written out, heads concatenated; only with --per-head)
  sheaf einsum   the model in another common style (gpt2_gpu.shf --einsum 1: einsum projections on
                 [D H Hd] weights, a `where` mask, layer-norm from mean and variance; only with --einsum)
  torch          bench/twins/gpt2_torch_gpu.py --device cuda, eager (explicit bf16 casts as the
                 Sheaf program, fused AdamW where available)
  torch compile  the same with --compile (torch.compile; only with torch ≥ 2)
  jax            bench/twins/gpt2_jax_gpu.py --device cuda (jax.jit of the step), if jax imports
each --rounds times (each figure keeps its best round), and prints one table: first and second
step, ms/step, tokens/s and MFU of every column, and the ratio of sheaf to each peer (> 1: sheaf
better). It writes the table to bench/gpu_results.md with the GPU (nvidia-smi), date and versions.
Models (--models, default both, one table each): GPT-2 small (vocab 50304, d 768, 12 layers,
12 heads, T 1024) and GPT-2 medium (d 1024, 24 layers, 16 heads, the rest alike), batch --B
(default 8); MFU against --peak-tflops (default: from the GPU name, 989 for H100 SXM / H200, else 989).
A missing peer prints `-` and the run goes on; nothing fails on a slow result.
`--tiny` validates everything on the CPU instead: d 64, 2 layers, 2 heads, T 64, B 2, vocab 512,
2 steps, every column with --device cpu (torch.compile skipped), and writes no file unless --out.
usage: python3 bench/gpu.py [--sheaf build/sheaf] [--models small,medium] [--B 8] [--steps 10] [--rounds 1]
                            [--timeout S] [--peak-tflops X] [--no-compile] [--own-attention]
                            [--per-head] [--einsum] [--out bench/gpu_results.md]
       python3 bench/gpu.py --tiny --sheaf build/sheaf
"""
import argparse
import datetime
import math
import os
import subprocess
import sys

from run import keep_best, lower_is_better, machine_line, python_with, results, run_sheaf, version  # bench/ is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "gpt2_gpu.shf")
TORCH_TWIN = os.path.join(HERE, "twins", "gpt2_torch_gpu.py")
JAX_TWIN = os.path.join(HERE, "twins", "gpt2_jax_gpu.py")
COLUMNS = ["sheaf", "sheaf own attention", "sheaf per-head", "sheaf einsum", "torch", "torch compile", "jax"]
FIGURES = ["gpt2_first_step_s", "gpt2_second_step_s", "gpt2_ms_per_step", "gpt2_tokens_per_s", "gpt2_mfu"]
# name → (--d, --layers, --heads); vocab 50304 and T 1024 are the programs' defaults
MODELS = {"small": (768, 12, 12), "medium": (1024, 24, 16)}
TINY = ["--d", "64", "--layers", "2", "--heads", "2", "--T", "64", "--B", "2", "--vocab", "512", "--steps", "2"]
# dense bf16 tensor-core peak, TFLOP/s (without sparsity), by a substring of nvidia-smi's name; first match wins
PEAKS = [("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("H200", 989.0), ("H800", 989.0),
         ("GH200", 989.0), ("B200", 2250.0), ("A100", 312.0), ("L40S", 362.0), ("A10G", 70.0)]
TIMEOUT = 1800


def gpu_name():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def loss_lines(column, losses):
    """An on_line for run.results: `loss X after N step(s)` lines go to losses[column]."""
    def take(parts):
        if len(parts) >= 5 and parts[0] == "loss" and parts[2] == "after":
            losses.setdefault(column, {})["after %s" % ("1 step" if parts[3] == "1" else "%s steps" % parts[3])] = parts[1]
    return take


def fmt(cell):
    if cell is None:
        return "-"
    value = cell[0]
    return ("%.3f" % value) if value < 100 else ("%.1f" % value)


def render(table, losses, title, vocab):
    lines = ["### " + title, "",
             "| figure | " + " | ".join(COLUMNS) + " | " + " | ".join("sheaf vs " + c for c in COLUMNS[1:]) + " |",
             "|---|" + "---|" * (2 * len(COLUMNS) - 1)]
    for fig in FIGURES:
        row = table.get(fig)
        if row is None:
            lines.append("| %s | " % fig + " | ".join(["-"] * (2 * len(COLUMNS) - 1)) + " |")
            continue
        unit = row["unit"]
        mine = row.get("sheaf")
        ratios = []
        for c in COLUMNS[1:]:
            peer = row.get(c)
            if mine is None or peer is None or mine[0] <= 0 or peer[0] <= 0:
                ratios.append("-")
            else:
                ratios.append("%.2f×" % (peer[0] / mine[0] if lower_is_better(unit) else mine[0] / peer[0]))
        better = "lower is better" if lower_is_better(unit) else "higher is better"
        lines.append("| %s (%s, %s) | " % (fig, unit, better) + " | ".join(fmt(row.get(c)) for c in COLUMNS)
                     + " | " + " | ".join(ratios) + " |")
    for which in sorted({w for col in losses.values() for w in col}, key=lambda w: (len(w), w)):
        lines.append("| loss %s (last round; ln vocab = %.4f) | " % (which, math.log(vocab))
                     + " | ".join(losses.get(c, {}).get(which, "-") for c in COLUMNS)
                     + " | " + " | ".join(["-"] * (len(COLUMNS) - 1)) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sheaf", default=os.path.join(HERE, "..", "build", "sheaf"))
    ap.add_argument("--tiny", action="store_true", help="the tiny config on the CPU (validation)")
    ap.add_argument("--models", default="small,medium", help="comma-separated: %s" % ", ".join(MODELS))
    ap.add_argument("--B", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1, help="rounds; each figure keeps its best round")
    ap.add_argument("--peak-tflops", type=float, default=None, help="bf16 dense peak (default: from the GPU name)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds for each column's run (default %(default)s)")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    ap.add_argument("--per-head", action="store_true",
                    help="also a sheaf column for the model written with a module per head (gpt2_gpu.shf --per-head 1)")
    ap.add_argument("--einsum", action="store_true",
                    help="also a sheaf column for the model written with einsum projections (gpt2_gpu.shf --einsum 1)")
    ap.add_argument("--own-attention", action="store_true",
                    help="also run sheaf with SHEAF_CUDNN=0 (its own attention kernels instead of cuDNN's)")
    ap.add_argument("--out", default=None, help="default bench/gpu_results.md (none with --tiny)")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    if args.tiny:
        models = ["tiny"]
    elif not models or any(m not in MODELS for m in models):
        print("gpu.py: --models takes a comma-separated list of %s" % ", ".join(MODELS), file=sys.stderr)
        return 2
    args.sheaf = os.path.abspath(args.sheaf)
    if not os.path.exists(args.sheaf):
        print("gpu.py: no sheaf binary at %s (run 'make build' first)" % args.sheaf, file=sys.stderr)
        return 2
    device = "cpu" if args.tiny else "cuda"
    gpu = None if args.tiny else gpu_name()
    if not args.tiny and gpu is None:
        print("gpu.py: nvidia-smi finds no GPU (use --tiny for the CPU check)", file=sys.stderr)
    peak = args.peak_tflops
    if peak is None:
        peak = next((p for key, p in PEAKS if gpu and key in gpu), 989.0)
    common = ["--peak-tflops", "%g" % peak] + ([] if args.tiny else ["--B", str(args.B), "--steps", str(args.steps)])
    out = args.out or (None if args.tiny else os.path.join(HERE, "gpu_results.md"))

    py_torch, py_jax = python_with("torch"), python_with("jax")
    compile_ok = False
    if py_torch and not args.tiny and not args.no_compile:
        compile_ok = subprocess.run([py_torch, "-c", "import torch, sys; sys.exit(0 if hasattr(torch, 'compile') else 1)"],
                                    capture_output=True).returncode == 0
    torch_ver = version([py_torch, "-c", "import torch; print(torch.__version__, 'CUDA', torch.version.cuda)"]) if py_torch else "absent"
    jax_ver = version([py_jax, "-c", "import jax, jaxlib; print(jax.__version__, 'jaxlib', jaxlib.__version__)"]) if py_jax else "absent"
    head = [machine_line(),
            "- GPU: %s" % (gpu or ("none (--tiny: every column on the CPU)" if args.tiny else "not found")),
            "- date: %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "- sheaf: %s (%s, --device %s)" % (version([args.sheaf, "--version"]), args.sheaf, device),
            "- torch %s (%s), jax %s (%s)" % (torch_ver, py_torch or "-", jax_ver, py_jax or "-"),
            "- model args: %s" % " ".join(TINY + common if args.tiny else common)]
    print("\n".join(head) + "\n")
    sys.stdout.flush()

    # the columns that run, each as (name, its command without the model arguments)
    peers = [("sheaf own attention", None)] if args.own_attention else []
    if args.per_head:
        peers.append(("sheaf per-head", None))
    if args.einsum:
        peers.append(("sheaf einsum", None))
    if py_torch:
        peers.append(("torch", [py_torch, TORCH_TWIN, "--device", device]))
        if compile_ok:
            peers.append(("torch compile", [py_torch, TORCH_TWIN, "--device", device, "--compile"]))
    if py_jax:
        peers.append(("jax", [py_jax, JAX_TWIN, "--device", device]))
    sections = []
    for model in models:
        if model == "tiny":
            model_args = TINY + common
            title = "tiny GPT-2 config on the CPU (validation only; MFU meaningless)"
        else:
            d, layers, heads = MODELS[model]
            model_args = ["--d", str(d), "--layers", str(layers), "--heads", str(heads)] + common
            title = ("GPT-2 %s bf16 training step (vocab 50304, d %d, %d layers, %d heads, T 1024, B %d), peak %g TFLOP/s"
                     % (model, d, layers, heads, args.B, peak))
        table, losses = {}, {}
        for r in range(args.rounds):
            for column, cmd in [("sheaf", None)] + peers:
                print("%s, round %d of %d: %s" % (model, r + 1, args.rounds, column), file=sys.stderr)
                on_line = loss_lines(column, losses)
                env = dict(os.environ, SHEAF_CUDNN="0") if column == "sheaf own attention" else None
                style = {"sheaf per-head": ["--per-head", "1"], "sheaf einsum": ["--einsum", "1"]}.get(column, [])
                found = (run_sheaf(args.sheaf, PROGRAM, device, ["--"] + model_args + style, timeout=args.timeout, on_line=on_line, env=env)
                         if cmd is None else results(cmd + model_args, timeout=args.timeout, on_line=on_line))
                print("  %s: %s" % (column, ", ".join("%s %g %s" % (k, v, u) for k, (v, u) in sorted(found.items())) or "no results"),
                      file=sys.stderr)  # as soon as the column ends: a later one may time out
                keep_best(table, column, found)
        sections.append(render(table, losses, title, 512 if args.tiny else 50304))
        print(sections[-1])
        sys.stdout.flush()
    section = "\n".join(sections)
    notes = ("Best of %d rounds. Each program reads its own clock around its steps and reads the last loss on "
             "the host before the clock stops (torch also synchronizes). first step = trace/compile + one "
             "step; ms/step = the mean of the steps after the second. MFU = (6·N + 12·layers·T·d)·tokens / "
             "step time / peak, N = parameters without the position embedding (tied head once). "
             "torch: explicit bf16 casts as the Sheaf program, fused AdamW on CUDA; `torch compile` = "
             "torch.compile of forward + loss. `-`: peer absent or failed (its stderr is printed above)."
             % args.rounds)
    if out:
        with open(out, "w") as f:
            f.write("# GPT-2 bf16 training steps on a GPU (bench/gpu.py)\n\n" + "\n".join(head) + "\n\n"
                    + notes + "\n\n" + section)
        print("wrote " + out)
    else:
        print("(--tiny: no results file written; --out FILE writes one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
