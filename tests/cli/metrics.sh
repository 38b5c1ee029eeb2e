#!/usr/bin/env bash
# tests/cli/metrics.sh SHEAF — metrics logs, TensorBoard files, `sheaf plot` and program arguments
# (SPEC §7.2, §8, §10.1):
#   append:      `io "append"` rows are in the file as soon as the call returns (the program reads
#                the log back between appends, and so does a second process while the first
#                waits); CSV: header once, columns in header order, quoting, nan/inf, nil empty;
#                JSONL: dict, list and tensor rows; Python's csv and json modules read them back.
#   tensorboard: scalars and histograms read back by TensorBoard's EventAccumulator with their
#                steps and values; every record's masked CRC-32C checked (tests/tools/check_tensorboard.py).
#   --metrics:   log-metrics writes the same rows to JSONL, CSV and tb:DIR sinks (step first; nil
#                is null, empty, or left out); a program's log-metrics-to is used without
#                --metrics and overridden by it.
#   plot:        y = x drawn as a PNG whose curve pixels lie on the plot area's diagonal
#                (tests/tools/check_plot.py, pypng); an SVG; errors for unknown columns.
#   args:        key=value, --key value, --flag, sheaf's own options after FILE, --help (exit 0,
#                listing the keys with defaults and the program's comment), an unknown key
#                (exit 1, did-you-mean).
set -u
[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
TOOLS=$(realpath "$(dirname "$0")/../tools")
source "$(dirname "$0")/lib/harness.sh"
PY=${PYTHON:-python3}
$PY -c "import tensorboard, png" 2>/dev/null ||
  { echo "FAIL: Python packages tensorboard and pypng are required: run scripts/bootstrap.sh" >&2; exit 1; }
py() { $PY "$@" >"$TMP/py.out" 2>&1 || { echo "FAIL: $(cat "$TMP/py.out")" >&2; FAILED=1; }; }

# ---- io "append": rows readable at once, from this process and another ----
cat >"$TMP/append.shf" <<'SHF'
(io "append" "logs/run.jsonl" {:step 1 :loss (tensor 0.5) :note "warm, up" :ok true :val nil})
(print "rows after 1:" (len (io "load" "logs/run.jsonl")))
(io "append" "logs/run.jsonl" (list 2 "two"))
(io "append" "logs/run.jsonl" [3 4.5])
(print "rows after 3:" (len (io "load" "logs/run.jsonl")))
(io "append" "logs/run.csv" {:step 1 :loss 0.5 :note "a \"b\", c" :ok true :val nil})
(io "append" "logs/run.csv" {:val (/ 0.0 0.0) :ok false :note "" :loss (/ -1.0 0.0) :step (tensor 2 :i32)})
(print "csv lines:" (len (io "lines" "logs/run.csv")))
(io "append" "logs/run.csv" {:step 3 :loss 0.25 :note "x" :ok true :val 1})
;; a second process reads the log while this one waits for it (30 s at most)
(io "save" "ready.txt" "1")
(def t0 (io "clock"))
(while (and (not (io "exists" "seen.txt")) (< (- (io "clock") t0) 30)) [n 0] (inc n))
(print (if (io "exists" "seen.txt") "read while running" "not read"))
SHF
(cd "$TMP" && "$SHEAF" append.shf >"$TMP/append.out" 2>"$TMP/append.err" &
 for _ in $(seq 200); do [[ -f "$TMP/ready.txt" ]] && break; sleep 0.05; done
 wc -l <"$TMP/logs/run.csv" >"$TMP/lines_mid_run"; touch "$TMP/seen.txt"; wait)
grep -qx 'rows after 1: 1' "$TMP/append.out" && grep -qx 'rows after 3: 3' "$TMP/append.out" &&
  grep -qx 'csv lines: 3' "$TMP/append.out" && grep -qx 'read while running' "$TMP/append.out" ||
  { echo "FAIL: append: the program did not read back its rows: $(cat "$TMP/append.out" "$TMP/append.err")" >&2; FAILED=1; }
[[ $(tr -d ' ' <"$TMP/lines_mid_run") == 4 ]] ||
  { echo "FAIL: append: another process saw $(cat "$TMP/lines_mid_run") CSV lines mid-run, expected 4" >&2; FAILED=1; }
py - "$TMP/logs" <<'PY'
import csv, json, math, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(f"{d}/run.jsonl")]
assert rows == [{"loss": 0.5, "note": "warm, up", "ok": True, "step": 1, "val": None}, [2, "two"], [3, 4.5]], rows
text = open(f"{d}/run.csv").read()
assert text.splitlines()[0] == "loss,note,ok,step,val", text
r = list(csv.DictReader(open(f"{d}/run.csv", newline="")))
assert r[0] == {"loss": "0.5", "note": 'a "b", c', "ok": "true", "step": "1", "val": ""}, r[0]
assert r[1]["loss"] == "-inf" and math.isnan(float(r[1]["val"])) and r[1]["step"] == "2" and r[1]["note"] == "", r[1]
assert r[2] == {"loss": "0.25", "note": "x", "ok": "true", "step": "3", "val": "1"}, r[2]
PY

# ---- tensorboard: scalars and histograms through TensorBoard's reader ----
cat >"$TMP/tb.shf" <<'SHF'
(tensorboard "runs/a" 1 {:loss 2.5 :lr (tensor 0.001) :w (tensor [1 2 3 4])})
(tensorboard "runs/a" 2 {:loss (tensor 1.25) :w (tensor [[-1 1] [1 1]])})
(tensorboard "runs/a" 3 {:loss 1 :flag true})
SHF
run tb.shf
status_is 0 'tensorboard writes'
py "$TOOLS/check_tensorboard.py" "$TMP/runs/a" '{"scalars": {"loss": [[1, 2.5], [2, 1.25], [3, 1]], "lr": [[1, 0.001]], "flag": [[3, 1]]},
  "histograms": {"w": [[1, {"min": 1, "max": 4, "num": 4, "sum": 10, "sum_squares": 30}],
                       [2, {"min": -1, "max": 1, "num": 4, "sum": 2, "sum_squares": 4}]]}}'

# ---- log-metrics: --metrics sinks, log-metrics-to ----
cat >"$TMP/train.shf" <<'SHF'
(log-metrics-to "program.jsonl")
(repeat [i 3] [loss 1.0]
  (do (log-metrics (inc i) {:loss (tensor loss) :lr 0.01 :val (if (= i 1) 0.75 nil)}) (/ loss 2)))
SHF
run train.shf --metrics m.jsonl,m.csv,tb:runs/m
status_is 0 '--metrics run'
[[ -f $TMP/program.jsonl ]] && fail '--metrics overrides the program'"'"'s log-metrics-to'
py - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
rows = [json.loads(l, object_pairs_hook=list) for l in open(f"{d}/m.jsonl")]
want = [[("step", s), ("loss", l), ("lr", 0.01), ("val", v)] for s, l, v in [(1, 1.0, None), (2, 0.5, 0.75), (3, 0.25, None)]]
assert rows == want, rows
csv = open(f"{d}/m.csv").read()
assert csv == "step,loss,lr,val\n1,1.0,0.01,\n2,0.5,0.01,0.75\n3,0.25,0.01,\n", csv
PY
py "$TOOLS/check_tensorboard.py" "$TMP/runs/m" \
  '{"scalars": {"loss": [[1, 1], [2, 0.5], [3, 0.25]], "lr": [[1, 0.01], [2, 0.01], [3, 0.01]], "val": [[2, 0.75]]}}'
run train.shf
status_is 0 'log-metrics-to run'
[[ $(wc -l <"$TMP/program.jsonl") == 3 ]] || fail 'without --metrics, log-metrics writes to the log-metrics-to sink'
run train.shf --metrics bad.txt
status_is 2 'a bad --metrics sink is a usage error'
stderr_has "metrics sink 'bad.txt': expected FILE.jsonl, FILE.csv or tb:DIR" 'the bad sink is named'

# ---- sheaf plot ----
$PY -c "
import json
with open('$TMP/line.jsonl', 'w') as f:
    for s in range(11): f.write(json.dumps({'step': s, 'y': s, 'note': 'text'}) + '\n')"
run plot line.jsonl -o line.png
status_is 0 'plot a PNG'
stdout_has 'wrote line.png: y against step' 'plot names what it drew'
py "$TOOLS/check_plot.py" "$TMP/line.png"
printf 'step,y\n0,0\n5,5\n10,10\n' >"$TMP/line.csv"
run plot line.csv -o line.svg --y y
status_is 0 'plot a CSV as SVG'
py - "$TMP/line.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag.endswith("svg") and root.get("width", "").startswith("900"), (root.tag, root.attrib)
assert any(e.tag.endswith("path") for e in root.iter()), "no paths"
PY
run plot line.jsonl --y yy
status_is 1 'plot: an unknown column'
stderr_has "'line.jsonl' has no column 'yy' (columns: note, step, y); choose with --y" 'the columns are listed'
stderr_has "did you mean 'y'?" 'a near name is suggested'
run plot line.jsonl --y note
status_is 1 'plot: a text column'
stderr_has "column 'note' holds text, not numbers" 'text columns are refused'
run plot missing.jsonl
status_is 1 'plot: a missing log'
stderr_has "missing.jsonl" 'the missing file is named'

# ---- args ----
cat >"$TMP/cfg.shf" <<'SHF'
;; -*- mode: clojure -*-
;; cfg.shf — prints its configuration.
;;   sheaf cfg.shf steps=3
(print (args {:steps 10 :lr 0.001 :name "run" :log true}))
SHF
run cfg.shf steps=3 --lr 0.5 --no-progress --name=big --log false
status_is 0 'args: key=value, --key value, --key=value, --flag value, a sheaf option among them'
stdout_is "{:log false, :lr 0.5, :name 'big', :steps 3}" 'args: the values are parsed with the defaults'"'"' types'
run --no-progress cfg.shf -- --steps 4 --log
status_is 0 'args after --'
stdout_is "{:log true, :lr 0.001, :name 'run', :steps 4}" 'args: words after -- are the program'"'"'s'
run cfg.shf --help
status_is 0 'args --help'
stdout_has 'cfg.shf — prints its configuration.' '--help shows the program comment'
stdout_has '--steps INT' '--help lists a key with its type'
stdout_has '0.001' '--help lists the defaults'
grep -q -- '-\*-' "$TMP/out" && fail '--help leaves out the mode line'
run cfg.shf --stpes 3
status_is 1 'args: unknown key'
stderr_has "args: unknown key 'stpes' (keys: log, lr, name, steps)" 'the unknown key and the keys'
stderr_has "did you mean 'steps'?" 'args: did-you-mean'
run cfg.shf steps=many
status_is 1 'args: a bad value'
stderr_has 'args: steps=many: expected an integer (the default is 10)' 'the key and its type are named'
run -c '(print (argv))' a --b 3
stdout_is "['a', '--b', '3']" '-c: every word after the expression is the program'"'"'s'

exit $FAILED
