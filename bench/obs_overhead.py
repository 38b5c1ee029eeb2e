#!/usr/bin/env python3
"""bench/obs_overhead.py — what the observability hook costs (`make bench-obs`).

Every interpreted call (Interp::call) tests whether --trace/--guard/--blame observe it; the
CMake option -DSHEAF_OBSERVABILITY=OFF compiles that test out. For XOR (bench/xor_steps.shf,
xor_500_steps_ms) and MLP (bench/mlp_steps.shf, mlp_steps_per_s) this runs, --rounds rounds:
  off build        the binary built with -DSHEAF_OBSERVABILITY=OFF, no flags
  on build         the default binary (hook compiled in), no flags
the two alternating (the order swaps every round), best round of each kept; their ratio is the
cost of the hook when every flag is off (1.00: none; < 1: the on build is slower). Then, for
information, the on build with --blame, with --guard no-nan and with --trace (stderr to
/dev/null; a figure whose --trace run takes more than 60 s gets no more --trace runs).
Each run starts in a fresh temporary directory (bench/run.py's run_sheaf: no __sheaf__/ cache).
Prints a table and writes it to --out with the machine line. Nothing fails on a slow result.
usage: bench/obs_overhead.py --on build/sheaf --off build-noobs/sheaf [--rounds 5] [--only xor,mlp]
                             [--out bench/obs_results.md]
"""
import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

from run import BENCHES, fmt, lower_is_better, machine_line, run_sheaf, version  # bench/ is on sys.path

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ["xor", "mlp"]
TRACE_LIMIT = 60  # seconds; a slower --trace run is not repeated
FLAGGED = [("--blame", ["--blame"]), ("--guard no-nan", ["--guard", "no-nan"]), ("--trace", ["--trace"])]


def speed(value, unit):
    """Higher is faster, whatever the unit."""
    return 1.0 / value if lower_is_better(unit) else value


def ratio(a, b, unit):
    """Speed of a relative to b (> 1: a faster); None if either is missing."""
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return speed(a, unit) / speed(b, unit)


def best(values, unit):
    if not values:
        return None
    return min(values) if lower_is_better(unit) else max(values)


def measure(name, args):
    """{figure: {"unit": u, column: [values…]}} and the columns skipped, with why."""
    program = os.path.join(HERE, BENCHES[name][0])
    samples, skipped = {}, {}

    def add(column, found):
        for fig, (value, unit) in found.items():
            samples.setdefault(fig, {"unit": unit}).setdefault(column, []).append(value)

    for r in range(args.rounds):
        print("%s: round %d of %d" % (name, r + 1, args.rounds), file=sys.stderr)
        pair = [("off", args.off), ("on", args.on)]
        for column, sheaf in (pair if r % 2 == 0 else pair[::-1]):
            add(column, run_sheaf(sheaf, program, "cpu"))
        for column, flags in FLAGGED:
            if column in skipped:
                continue
            tracing = column == "--trace"
            start = time.monotonic()
            found = run_sheaf(args.on, program, "cpu", flags,
                              **({"stderr": subprocess.DEVNULL, "timeout": TRACE_LIMIT} if tracing else {}))
            if tracing and time.monotonic() - start >= TRACE_LIMIT:
                skipped[column] = "> %d s" % TRACE_LIMIT
            add(column, found)
    return samples, skipped


def render(name, samples, skipped):
    flag_cols = [c for c, _ in FLAGGED]
    head = ["figure", "off build (hook compiled out)", "on build, flags off", "on / off speed",
            "on / off, medians"] + ["on build %s (vs off)" % c for c in flag_cols]
    lines = ["### %s — %s" % (name, BENCHES[name][1]), "",
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for fig, row in samples.items():
        unit = row["unit"]
        off, on = best(row.get("off", []), unit), best(row.get("on", []), unit)
        r = ratio(on, off, unit)
        med = (ratio(statistics.median(row["on"]), statistics.median(row["off"]), unit)
               if row.get("on") and row.get("off") else None)
        cells = ["%s (%s, %s is better)" % (fig, unit, "lower" if lower_is_better(unit) else "higher"),
                 fmt((off, None) if off is not None else None), fmt((on, None) if on is not None else None),
                 "%.3f×" % r if r is not None else "-", "%.3f×" % med if med is not None else "-"]
        for c in flag_cols:
            v = best(row.get(c, []), unit)
            if v is None:
                cells.append("skipped (%s)" % skipped[c] if c in skipped else "-")
            else:
                rv = ratio(v, off, unit)
                cells.append(fmt((v, "%.2f×" % rv if rv is not None else None)) +
                             (" (1 run: later skipped, %s)" % skipped[c] if c in skipped else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description="cost of the observability hook (see the module doc)")
    ap.add_argument("--on", default=os.path.join(HERE, "..", "build", "sheaf"), help="sheaf built with the hook (default)")
    ap.add_argument("--off", default=os.path.join(HERE, "..", "build-noobs", "sheaf"),
                    help="sheaf built with -DSHEAF_OBSERVABILITY=OFF")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; each column keeps its best round")
    ap.add_argument("--only", default=",".join(FIGURES), help="comma-separated subset of " + ",".join(FIGURES))
    ap.add_argument("--out", default=os.path.join(HERE, "obs_results.md"))
    args = ap.parse_args()
    args.on, args.off = os.path.abspath(args.on), os.path.abspath(args.off)
    for flag, path in (("--on", args.on), ("--off", args.off)):
        if not os.path.exists(path):
            print("obs_overhead.py: no sheaf binary at %s (%s; `make bench-obs` builds both)" % (path, flag), file=sys.stderr)
            return 2
    head = [machine_line(),
            "- date: %s" % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "- on build: %s (%s)" % (version([args.on, "--version"]), args.on),
            "- off build: %s (%s, -DSHEAF_OBSERVABILITY=OFF)" % (version([args.off, "--version"]), args.off)]
    print("\n".join(head) + "\n")
    sections = []
    for name in args.only.split(","):
        sections.append(render(name, *measure(name, args)))
        print(sections[-1])
        sys.stdout.flush()
    notes = ("Best of %d rounds; the off and on builds alternate (order swapped every round), then the on build "
             "with each flag. Ratios are speeds (for ms, the inverse): on / off = 1.00 means the hook costs nothing "
             "when every flag is off, < 1 that the on build is slower; 'medians' is the same ratio of the rounds' "
             "medians, a check on the noise of a best-of. Flag columns: the on build's best and its speed relative "
             "to the off build. --trace writes to stderr, sent to /dev/null. --device cpu, 1 BLAS thread." % args.rounds)
    head.append("- load at the end: %.2f (1-minute average; other work on the machine disturbs every column)" % os.getloadavg()[0])
    with open(args.out, "w") as f:
        f.write("# Cost of the observability hook (bench/obs_overhead.py)\n\n" + "\n".join(head) + "\n\n" + notes +
                "\n\n" + "\n".join(sections))
    print("wrote " + args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
