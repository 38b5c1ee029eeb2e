#!/usr/bin/env python3
"""tests/obs/check_profile.py — checks of the observability outputs that are not exact text
(SPEC §9.1, §9.3, §9.4); used by check_outputs.sh. Standard library only.

  check_profile.py blame STDERR [--fn NAME=CALLS]... [--compiled NAME=CALLS]...
                                [--tree 'A :: B :: C=CALLS']... [--distinct N] [--total-calls N]
                                [--root-calls N]
      The --blame report in STDERR (it may be preceded or followed by other lines): header
      `Profiler: <T> wall`, the column header and 72-dash rule, rows sorted by Self with
      Avg/call = Total/Calls and Self <= Total; every --fn row with exactly CALLS calls (never
      folded); the `Compiled function` table with a --compiled row; the call tree well formed
      (connectors, indentation) with each --tree path present (nesting as given, CALLS calls on
      its last node). --distinct N: N profiled names, so at most 20 rows and `... N-20 others`;
      --total-calls: rows plus `... others` add up to N calls; --root-calls: the top-level nodes
      of the tree (with their `... others`) add up to N calls.
  check_profile.py chrome FILE [--count NAME=N]... [--cat NAME=CAT]... [--inside CHILD=PARENT]...
      FILE is {"traceEvents": [...]} of complete events (name, cat in function|builtin|compiled|
      compile, ph X, numeric ts/dur >= 0, pid 1, tid 1) whose intervals form a proper forest
      (each lies inside its parent's or is disjoint). --count: events named NAME; --cat: every
      event named NAME has that cat; --inside: every CHILD event's innermost enclosing event has
      a name matching the regular expression PARENT.
  check_profile.py jsonl FILE [--count TYPE:OP=N]... [--level OP=L]...
      sheaf_trace.jsonl: one JSON object per line, type call|return|jit_call, op, level,
      timestamp (non-decreasing, seconds), data (a list of strings for calls, a string for
      returns, {"run_us": x} for jit_call); returns carry elapsed_us >= 0; levels nest (a call
      at level L opens L+1, its return closes it, a jit_call belongs to the open call).
      --count: lines of that type and op; --level: every call of OP is at level L.
Exits 1 with one line per failed check.
"""
import json
import math
import re
import sys

FAILS = []


def fail(msg):
    FAILS.append(msg)


T_RE = r"[0-9]+\.[0-9]+(?:μs|ms|s)"


def seconds(t):
    m = re.fullmatch(r"([0-9]+\.[0-9]+)(μs|ms|s)", t)
    if not m:
        raise ValueError(f"not a time: {t!r}")
    return float(m.group(1)) * {"μs": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def resolution(t):  # half a unit of the last printed digit
    m = re.fullmatch(r"[0-9]+\.([0-9]+)(μs|ms|s)", t)
    return 0.5 * 10 ** -len(m.group(1)) * {"μs": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]


def pairs(values, sep="="):
    out = []
    for v in values:
        k, _, n = v.rpartition(sep)
        out.append((k, n))
    return out


def parse_args(argv, options):
    got = {o: [] for o in options}
    pos = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in got:
            if i + 1 >= len(argv):
                sys.exit(f"check_profile.py: {a} needs a value")
            got[a].append(argv[i + 1])
            i += 2
        else:
            pos.append(a)
            i += 1
    return pos, got


# ---- --blame -----------------------------------------------------------------------------------

HEADER = "  {:<32}{:>7}{:>11}{:>11}{:>11}".format("Function", "Calls", "Total", "Self", "Avg/call")
CHEADER = "  {:<32}{:>7}{:>11}{:>11}{:>11}".format("Compiled function", "Calls", "Compile", "Run", "Run/call")
RULE = "  " + "-" * 72


def parse_row(line, ncols):
    """`  name(32) calls t t t` → (name, calls, [times]) or None."""
    if not line.startswith("  ") or len(line) < 34:
        return None
    name = line[2:34].rstrip()
    rest = line[34:].split()
    if len(rest) != ncols or not rest[0].isdigit():
        return None
    if not all(re.fullmatch(T_RE, t) for t in rest[1:]):
        return None
    return name, int(rest[0]), rest[1:]


def check_blame(path, argv):
    _, o = parse_args(argv, ["--fn", "--compiled", "--tree", "--distinct", "--total-calls", "--root-calls"])
    lines = open(path, encoding="utf-8").read().split("\n")
    starts = [i for i, l in enumerate(lines) if re.fullmatch(r"Profiler: " + T_RE + " wall", l)]
    if len(starts) != 1:
        fail(f"blame: expected one 'Profiler: <T> wall' line, found {len(starts)}")
        return
    i = starts[0] + 1
    if lines[i] != "" or lines[i + 1] != HEADER or lines[i + 2] != RULE:
        fail(f"blame: header lines differ: {lines[i:i + 3]!r}")
        return
    i += 3
    rows, others = {}, None
    order = []
    while i < len(lines) and lines[i] != "":
        l = lines[i]
        m = re.fullmatch(r"  (\.\.\. (\d+) others)\s+(\d+)\s+(" + T_RE + ")", l)
        if m and len(m.group(1)) <= 32:
            if others is not None:
                fail("blame: two '... others' rows")
            others = (int(m.group(2)), int(m.group(3)), m.group(4))
        else:
            r = parse_row(l, 4)
            if r is None:
                fail(f"blame: malformed row {l!r}")
            else:
                name, calls, (total, self_, avg) = r
                if others is not None:
                    fail(f"blame: row {name!r} after the '... others' row")
                if name in rows:
                    fail(f"blame: duplicate row {name!r}")
                rows[name] = (calls, total, self_, avg)
                order.append(name)
                if calls <= 0:
                    fail(f"blame: {name}: {calls} calls")
                if seconds(self_) > seconds(total) + resolution(self_) + resolution(total):
                    fail(f"blame: {name}: Self {self_} > Total {total}")
                want = seconds(total) / calls
                if abs(seconds(avg) - want) > resolution(avg) + resolution(total) / calls + 1e-12:
                    fail(f"blame: {name}: Avg/call {avg} is not Total/Calls ({total}/{calls})")
        i += 1
    if not rows:
        fail("blame: no rows")
    if len(rows) > 20:
        fail(f"blame: {len(rows)} rows (at most 20)")
    for a, b in zip(order, order[1:]):
        sa, sb = rows[a][2], rows[b][2]
        if seconds(sa) + resolution(sa) + resolution(sb) < seconds(sb):
            fail(f"blame: rows not sorted by Self: {a} ({sa}) before {b} ({sb})")
    for name, n in pairs(o["--fn"]):
        if name not in rows:
            fail(f"blame: no row for {name!r} (rows: {order})")
        elif rows[name][0] != int(n):
            fail(f"blame: {name!r}: {rows[name][0]} calls, expected {n}")
    for d in o["--distinct"]:
        d = int(d)
        if d > 20:
            if len(rows) != 20 or others is None or others[0] != d - 20:
                fail(f"blame: {d} functions: expected 20 rows and '... {d - 20} others', got {len(rows)} rows, others {others}")
        elif others is not None or len(rows) != d:
            fail(f"blame: expected {d} rows and no '... others', got {len(rows)} rows, others {others}")
    for t in o["--total-calls"]:
        total = sum(r[0] for r in rows.values()) + (others[1] if others else 0)
        if total != int(t):
            fail(f"blame: rows and '... others' add up to {total} calls, expected {t}")
    # Compiled function table.
    i += 1
    compiled = {}
    if i < len(lines) and lines[i] == CHEADER:
        if lines[i + 1] != RULE:
            fail("blame: no rule under the Compiled function header")
        i += 2
        while i < len(lines) and lines[i] != "":
            r = parse_row(lines[i], 4)
            if r is None:
                fail(f"blame: malformed compiled row {lines[i]!r}")
            else:
                name, calls, (comp, run, per) = r
                compiled[name] = calls
                if abs(seconds(per) - seconds(run) / calls) > resolution(per) + resolution(run) / calls + 1e-12:
                    fail(f"blame: compiled {name}: Run/call {per} is not Run/Calls ({run}/{calls})")
                if name not in rows and others is None:
                    fail(f"blame: compiled {name!r} has no row in the function table")
            i += 1
        i += 1
        names = list(compiled)
        if names != sorted(names):
            fail(f"blame: compiled rows not sorted by name: {names}")
    for name, n in pairs(o["--compiled"]):
        if compiled.get(name) != int(n):
            fail(f"blame: compiled table: {name!r} has {compiled.get(name)} calls, expected {n} (table: {compiled})")
    # Call tree.
    if i + 1 >= len(lines) or lines[i] != "  Call tree:" or lines[i + 1] != "":
        fail(f"blame: no 'Call tree:' section where expected: {lines[i:i + 2]!r}")
        return
    i += 2
    nodes = []  # (depth, name, calls, is_others)
    tree_lines = []
    while i < len(lines) and lines[i] != "":
        tree_lines.append(lines[i])
        i += 1
    for l in tree_lines:
        m = re.fullmatch(r"  ((?:│   |    )*)(├──|└──) (.*) \((" + T_RE + r"), (\d+) calls?\)", l)
        if not m:
            fail(f"blame: malformed call-tree line {l!r}")
            continue
        depth = len(m.group(1)) // 4
        calls = int(m.group(5))
        if (calls == 1) != l.endswith(" call)"):
            fail(f"blame: call-tree line {l!r}: singular/plural")
        name = m.group(3)
        is_others = re.fullmatch(r"\.\.\. \d+ others?", name) is not None
        nodes.append({"depth": depth, "name": name, "calls": calls, "last": m.group(2) == "└──",
                      "prefix": m.group(1), "others": is_others, "time": m.group(4)})
    # Structure: depths grow by at most one; the prefix of a child repeats its ancestors'
    # "last" flags; the last child of each parent uses └── and others follow no sibling.
    for k, n in enumerate(nodes):
        if k == 0 and n["depth"] != 0:
            fail("blame: the call tree does not start at depth 0")
        if k > 0 and n["depth"] > nodes[k - 1]["depth"] + 1:
            fail(f"blame: call-tree line {k} jumps in depth")
        # the next node at depth <= this depth: a sibling iff same depth
        nxt = next((m for m in nodes[k + 1:] if m["depth"] <= n["depth"]), None)
        has_sibling_after = nxt is not None and nxt["depth"] == n["depth"]
        if n["last"] == has_sibling_after:
            fail(f"blame: call-tree node {n['name']!r}: connector {'└──' if n['last'] else '├──'} but "
                 f"{'a' if has_sibling_after else 'no'} later sibling")
        if n["others"] and has_sibling_after:
            fail(f"blame: call-tree '... others' is not the last child")
    paths = []
    stack = []  # (name, last) of the ancestors and the node
    for n in nodes:
        del stack[n["depth"]:]
        want_prefix = "".join("    " if last else "│   " for _, last in stack)
        if n["prefix"] != want_prefix:
            fail(f"blame: call-tree node {n['name']!r}: indentation {n['prefix']!r}, expected {want_prefix!r}")
        stack.append((n["name"], n["last"]))
        paths.append((tuple(s for s, _ in stack), n["calls"]))
    for spec, n in pairs(o["--tree"]):
        want = tuple(s.strip() for s in spec.split(" :: "))
        hits = [c for p, c in paths if p == want]
        if not hits:
            fail(f"blame: call tree lacks {' > '.join(want)}; tree:\n" + "\n".join(tree_lines))
        elif hits[0] != int(n):
            fail(f"blame: call tree {' > '.join(want)}: {hits[0]} calls, expected {n}")
    for n in o["--root-calls"]:
        got = sum(x["calls"] for x in nodes if x["depth"] == 0)
        if got != int(n):
            fail(f"blame: top-level call-tree nodes add up to {got} calls, expected {n}")


# ---- Chrome trace events -----------------------------------------------------------------------

CATS = {"function", "builtin", "compiled", "compile"}


def check_chrome(path, argv):
    _, o = parse_args(argv, ["--count", "--cat", "--inside"])
    try:
        doc = json.load(open(path, encoding="utf-8"))
    except Exception as e:  # noqa: BLE001
        fail(f"chrome: {path} is not JSON: {e}")
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail('chrome: not {"traceEvents": [...]}')
        return
    ev = doc["traceEvents"]
    if not ev:
        fail("chrome: no events")
    good = []
    for k, e in enumerate(ev):
        if not isinstance(e, dict):
            fail(f"chrome: event {k} is not an object")
            continue
        missing = [f for f in ("name", "cat", "ph", "ts", "dur", "pid", "tid") if f not in e]
        if missing:
            fail(f"chrome: event {k} lacks {missing}: {e}")
            continue
        if not isinstance(e["name"], str) or e["cat"] not in CATS or e["ph"] != "X" or e["pid"] != 1 or e["tid"] != 1:
            fail(f"chrome: event {k} malformed: {e}")
            continue
        if not all(isinstance(e[f], (int, float)) and not isinstance(e[f], bool) and math.isfinite(e[f]) and e[f] >= 0
                   for f in ("ts", "dur")):
            fail(f"chrome: event {k}: ts/dur not numbers >= 0: {e}")
            continue
        good.append(e)
    # A proper forest: sorted by start (longest first on ties), each event lies inside the
    # innermost open one or starts after it ends.
    eps = 1e-3  # microseconds; ts and dur are differences of the same clock readings
    parent_of = {}
    stack = []
    for k, e in sorted(enumerate(good), key=lambda p: (p[1]["ts"], -p[1]["dur"])):
        while stack and good[stack[-1]]["ts"] + good[stack[-1]]["dur"] <= e["ts"] + eps:
            stack.pop()
        if stack:
            top = good[stack[-1]]
            if e["ts"] + e["dur"] > top["ts"] + top["dur"] + eps:
                fail(f"chrome: events overlap without nesting: {top} and {e}")
            parent_of[k] = stack[-1]
        stack.append(k)
    counts = {}
    for e in good:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
    for name, n in pairs(o["--count"]):
        if counts.get(name, 0) != int(n):
            fail(f"chrome: {counts.get(name, 0)} events named {name!r}, expected {n}")
    for name, cat in pairs(o["--cat"]):
        cats = {e["cat"] for e in good if e["name"] == name}
        if cats != {cat}:
            fail(f"chrome: events named {name!r} have cat {sorted(cats)}, expected {cat}")
    for child, parent in pairs(o["--inside"]):
        ks = [k for k, e in enumerate(good) if e["name"] == child]
        if not ks:
            fail(f"chrome: no event named {child!r}")
        for k in ks:
            p = parent_of.get(k)
            if p is None or not re.fullmatch(parent, good[p]["name"]):
                fail(f"chrome: {child!r} at ts {good[k]['ts']} lies in {good[p]['name'] if p is not None else 'nothing'!r}, expected {parent!r}")


# ---- sheaf_trace.jsonl -------------------------------------------------------------------------

def check_jsonl(path, argv):
    _, o = parse_args(argv, ["--count", "--level"])
    text = open(path, encoding="utf-8").read()
    if not text.endswith("\n"):
        fail("jsonl: the file does not end in a newline")
    stack = []
    last_ts = -1.0
    counts = {}
    levels = {}
    for k, line in enumerate(text.splitlines(), 1):
        try:
            j = json.loads(line)
        except Exception as e:  # noqa: BLE001
            fail(f"jsonl: line {k} is not JSON: {e}: {line!r}")
            continue
        if not isinstance(j, dict):
            fail(f"jsonl: line {k} is not an object")
            continue
        keys = {"type", "op", "level", "timestamp", "data"} | ({"elapsed_us"} if j.get("type") == "return" else set())
        if set(j) != keys:
            fail(f"jsonl: line {k}: keys {sorted(j)}, expected {sorted(keys)}")
            continue
        t, op, lv, ts, data = j["type"], j["op"], j["level"], j["timestamp"], j["data"]
        if t not in ("call", "return", "jit_call") or not isinstance(op, str) or not isinstance(lv, int) or isinstance(lv, bool):
            fail(f"jsonl: line {k} malformed: {line}")
            continue
        if not isinstance(ts, (int, float)) or ts < last_ts:
            fail(f"jsonl: line {k}: timestamp {ts} not a number >= the previous {last_ts}")
        else:
            last_ts = ts
        counts[(t, op)] = counts.get((t, op), 0) + 1
        if t == "call":
            if not (isinstance(data, list) and all(isinstance(x, str) for x in data)):
                fail(f"jsonl: line {k}: call data is not a list of strings")
            if lv != len(stack):
                fail(f"jsonl: line {k}: call of {op} at level {lv}, expected {len(stack)}")
            levels.setdefault(op, set()).add(lv)
            stack.append(op)
        elif t == "return":
            if not isinstance(data, str):
                fail(f"jsonl: line {k}: return data is not a string")
            el = j["elapsed_us"]
            if not isinstance(el, (int, float)) or el < 0:
                fail(f"jsonl: line {k}: elapsed_us {el!r}")
            if not stack or stack[-1] != op or lv != len(stack) - 1:
                fail(f"jsonl: line {k}: return of {op} at level {lv} does not close the open call {stack[-1:] or None}")
            else:
                stack.pop()
        else:
            if not (isinstance(data, dict) and isinstance(data.get("run_us"), (int, float)) and data["run_us"] >= 0):
                fail(f"jsonl: line {k}: jit_call data is not {{\"run_us\": x}}")
            if not stack or stack[-1] != op or lv != len(stack) - 1:
                fail(f"jsonl: line {k}: jit_call of {op} at level {lv} outside its call")
    if stack:
        fail(f"jsonl: calls never returned: {stack}")
    for spec, n in pairs(o["--count"]):
        t, _, op = spec.partition(":")
        if counts.get((t, op), 0) != int(n):
            fail(f"jsonl: {counts.get((t, op), 0)} {t} lines for {op!r}, expected {n}")
    for op, lv in pairs(o["--level"]):
        if levels.get(op) != {int(lv)}:
            fail(f"jsonl: calls of {op!r} at levels {sorted(levels.get(op, []))}, expected {lv}")


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("blame", "chrome", "jsonl"):
        sys.exit(__doc__)
    {"blame": check_blame, "chrome": check_chrome, "jsonl": check_jsonl}[sys.argv[1]](sys.argv[2], sys.argv[3:])
    for f in FAILS:
        print(f"FAIL: {f}")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
