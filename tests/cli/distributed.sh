#!/usr/bin/env bash
# tests/cli/distributed.sh — data-parallel jobs under OpenMPI's mpirun (SPEC §10, docs/distributed.md):
# 2 ranks keep bit-identical parameters after every step (all-reduce :mean of the gradients inside
# the compiled step, broadcast-tree of rank 0's initial parameters); 2 ranks with batch b follow
# the loss curve of 1 rank with batch 2b; rank 0 writes the checkpoint and the others read it after
# a barrier; a rank that fails, is killed, ends its program early or hangs outside collectives
# ends the job with a non-zero status and messages naming the rank and the collective the others
# waited in, instead of a hang; ranks that call collectives in a different order get an error
# naming each rank's collective; the binary itself does not link MPI.
# Usage: distributed.sh path/to/sheaf — runs every check, then exits 1 if any failed.
set -u

[[ $# -ge 1 && -x $1 ]] || { echo "usage: $0 path/to/sheaf" >&2; exit 2; }
SHEAF=$(realpath "$1")
source "$(dirname "$0")/lib/harness.sh"
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/bootstrap.sh installs openmpi-bin)" >&2; exit 1; }
MPIRUN=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)
# mpirun NP FILE [ARGS...]: like `run`, under mpirun with NP ranks, stopped after $LIMIT s
# (default 120; the exit status is then 124). In a
# sanitizer build, LeakSanitizer is off under mpirun: OpenMPI's own allocations (freed by nobody,
# some in components it has unloaded) would fail every run.
mpi() {
  local np=$1
  shift
  (cd "$TMP" && NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout "${LIMIT:-120}" "${MPIRUN[@]}" \
      -x NO_COLOR -x SHEAF_COLLECTIVE_TIMEOUT -x ASAN_OPTIONS -np "$np" "$SHEAF" "$@" \
      >"$TMP/out" 2>"$TMP/err" </dev/null)
  STATUS=$?
  return $STATUS
}
export SHEAF_COLLECTIVE_TIMEOUT=60

# ---- the binary starts without MPI; a job of one needs no launcher ----
ldd "$SHEAF" | grep -q libmpi && fail 'the sheaf binary links libmpi (it must load it only under a launcher)'
cat >"$TMP/alone.shf" <<'SHF'
(print (rank) (world-size) (all-reduce {:a (ones [2]) :n 3} :mean) (broadcast-tree [1 2.5] 0))
(barrier)
(shard (range 5))
SHF
run alone.shf
status_is 0 'single-process run'
stdout_is '0 1 {:a [1. 1.], :n 3.0} [1.  2.5]
[0 1 2 3 4]' 'without a launcher: rank 0, world 1, collectives are identities'

# ---- the collectives themselves, on rank-dependent values ----
cat >"$TMP/collectives.shf" <<'SHF'
(def r (rank))
(print "rank {}: sum {} mean {} ints {} bf16 {} from-1 {} shard {}" r
       (all-reduce (+ [1 2] r)) (all-reduce {:a (* [2 4] r) :n r} :mean) (all-reduce (+ (cast (tensor [1 2]) :i32) r))
       (all-reduce (cast (+ [0.5 1] r) :bf16)) (broadcast-tree {:t (+ (zeros [2]) r) :n r} 1) (shard (range 5)))
(all-reduce (if (= r 0) (ones [2]) (ones [3])))
SHF
mpi 2 collectives.shf
status_is 1 'collectives.shf ends with a shape mismatch'
stdout_has 'rank 0: sum [3. 5.] mean {:a [1. 2.], :n 0.5} ints [3 5] bf16 [2. 3.] from-1 {:n 1, :t [1. 1.]} shard [0 1]' 'rank 0 sees the sums, means and rank 1 values'
stdout_has 'rank 1: sum [3. 5.] mean {:a [1. 2.], :n 0.5} ints [3 5] bf16 [2. 3.] from-1 {:n 1, :t [1. 1.]} shard [2 3 4]' 'rank 1 sees the same'
# both ranks see the mismatch and report it the same way; the first to report it ends the job
stderr_has 'the ranks are out of step at collective 6 of the job: rank 0 called all-reduce of (f32[2]); rank 1 called all-reduce of (f32[3])' \
  'a shape mismatch between ranks is an error naming both, not corruption'


# ---- the consistency program: 20 Adam steps on a fixed regression problem ----
cat >"$TMP/dp_check.shf" <<'SHF'
(use optim)
(def steps 20)
(def global-batch 32)
(def keys (random-split (random-key 7)))
(def x-all (random-normal (first keys) [(* steps global-batch) 8]))
(def y-all (tanh (@ x-all (random-normal (second keys) [8 1]))))

(defn init [key]
  (let [[k1 k2] (random-split key)]
    {:l1 {:W (* 0.5 (random-normal k1 [8 16])) :b (zeros [16])}
     :l2 {:W (* 0.5 (random-normal k2 [16 1])) :b (zeros [1])}}))
(defn forward [p x] (+ (@ (tanh (+ (@ x (get p :l1 :W)) (get p :l1 :b))) (get p :l2 :W)) (get p :l2 :b)))
(defn loss [p x y] (let [d (- (forward p x) y)] (mean (* d d))))
(defn train-step [s x y]
  (let [[l g] ((value-and-grad loss) (get s :params) x y)
        [p m v t] (adam-step (get s :params) (all-reduce g :mean) (get s :m) (get s :v) (get s :t) 0.01)]
    [(all-reduce l :mean) {:params p :m m :v v :t t}]))

(defn largest-difference [a b] (tree-reduce max (tree-map (fn [x y] (max (abs (- x y)))) a b)))

;; Every rank draws different initial parameters; rank 0's are broadcast.
(def params (broadcast-tree (init (random-key (+ 100 (rank)))) 0))
(def run
  (repeat [i steps] [[s worst] [{:params params :m (tree-map-zeros params) :v (tree-map-zeros params) :t 0} 0.0]]
    (let [rows (fn [a] (shard (slice a (* i global-batch) (* (inc i) global-batch))))
          [l s] (train-step s (rows x-all) (rows y-all))
          p (get s :params)]
      (when (= (rank) 0) (print "step {} loss {:.7f}" i l))
      [s (max worst (largest-difference p (broadcast-tree p 0)))])))
(def trained (get (first run) :params))
(print "rank {} of {}: largest difference from rank 0's parameters over {} steps: {}" (rank) (world-size) steps (second run))

(when (= (rank) 0) (io "save" "dp-check.safetensors" trained))
(barrier)
(print "rank {}: largest difference from the checkpoint: {}" (rank) (largest-difference trained (io "load" "dp-check.safetensors")))
SHF
run dp_check.shf
status_is 0 'dp_check on one process'
grep '^step' "$TMP/out" >"$TMP/one.losses"
stdout_has 'rank 0 of 1: largest difference from rank 0' 'one process reports'

mpi 2 dp_check.shf --jit-profile
status_is 0 'dp_check under mpirun -np 2'
grep '^step' "$TMP/out" >"$TMP/two.losses"
for r in 0 1; do
  stdout_has "rank $r of 2: largest difference from rank 0's parameters over 20 steps: 0.0" "rank $r: parameters bit-identical after every step"
  stdout_has "rank $r: largest difference from the checkpoint: 0.0" "rank $r reads rank 0's checkpoint after the barrier"
done
[[ $(grep -c '^step' "$TMP/two.losses") == 20 ]] || fail 'rank 0 prints 20 losses (and rank 1 none)'
grep -q 'interpreted train-step' "$TMP/err" && fail 'the training step with all-reduce inside is compiled'
python3 - "$TMP/one.losses" "$TMP/two.losses" <<'PY' || fail '2 ranks × batch 16 follow the loss curve of 1 rank × batch 32'
import sys
one, two = ([float(l.split()[-1]) for l in open(f)] for f in sys.argv[1:])
assert len(one) == len(two) == 20, (len(one), len(two))
worst = max(abs(a - b) / max(abs(a), 1e-6) for a, b in zip(one, two))
assert worst < 1e-4, f"relative loss difference {worst}"
assert one[-1] < one[0] / 4, "the loss falls"
PY

# ---- examples/mlp/train_dp.shf: 2 ranks train Fashion-MNIST like one ----
mpi 2 "$(realpath "$(dirname "$0")/../../examples/mlp/train_dp.shf")"
status_is 0 'train_dp.shf under mpirun -np 2'
stdout_has 'epoch 2 | train loss' 'rank 0 prints the epochs'
[[ $(grep -c '^epoch 2' "$TMP/out") == 1 ]] || fail 'only rank 0 prints'
python3 -c "import sys; a = float(open(sys.argv[1]).read().split()[-1]); assert a >= 0.85, a" "$TMP/out" || fail 'train_dp reaches 85 % test accuracy'
[[ -s $TMP/mlp-dp-checkpoint.safetensors ]] || fail 'rank 0 wrote the checkpoint'

# ---- a rank that ends, fails or is killed while another waits: the job ends at once ----
# With no collective timeout (SHEAF_COLLECTIVE_TIMEOUT empty: wait forever) and under `timeout 60`:
# a job still running after 60 s hangs (status 124). Rank 0 writes `waiting.txt` just before its
# all-reduce; the rank that fails or is killed waits 2 s more, so that rank 0 is inside the
# all-reduce (not still on its way there) when the job ends, however loaded the machine.
cat >"$TMP/ends.shf" <<'SHF'
(when (= (rank) 0) (io "save" "waiting.txt" "") (print (all-reduce (ones [2]))))
SHF
cat >"$TMP/fails.shf" <<'SHF'
(when (= (rank) 0) (io "save" "waiting.txt" "") (print (all-reduce (ones [2]))))
(when (= (rank) 1)
  (while (not (io "exists" "waiting.txt")) [n 0] (inc n))
  (def until (+ (io "clock") 2))
  (while (< (io "clock") until) 0 0)
  (io "load" "missing.npy"))
SHF
ended() {  # NAME FILE: runs FILE under `timeout 60 mpirun -np 2`, expecting an early end
  rm -f "$TMP/waiting.txt"
  SHEAF_COLLECTIVE_TIMEOUT= LIMIT=60 mpi 2 "$2"
  [[ $STATUS -ne 0 && $STATUS -ne 124 ]] || fail "$1: the job ends with an error, not a hang (status $STATUS)"
}
ended 'rank 1 ends its program early' ends.shf
stderr_has 'the ranks are out of step at collective 1 of the job: rank 0 called all-reduce of (f32[2]); rank 1 reached the end of its program' \
  'the early end names the rank that ended and the collective of the one that waits'

ended 'rank 1 fails' fails.shf
stderr_has "'missing.npy': No such file or directory" 'the failing rank reports its error'
stderr_has 'rank 1 of 2 failed (exit status 1); ending the job' 'the failing rank names itself'
stderr_has 'rank 0 of 2: the job was ended while this rank waited for the other ranks in all-reduce of (f32[2])' \
  'the waiting rank names its collective'

# ---- a rank killed by a signal while the other waits in a collective ----
cat >"$TMP/killed.shf" <<'SHF'
(when (= (rank) 0) (io "save" "waiting.txt" "") (print (all-reduce (ones [2]))))
(when (= (rank) 1)
  (def until (+ (io "clock") 60))
  (while (< (io "clock") until) 0 0))
SHF
rm -f "$TMP/waiting.txt"
SHEAF_COLLECTIVE_TIMEOUT= LIMIT=60 mpi 2 killed.shf &
job=$!
victim=
for _ in $(seq 100); do
  [[ -e $TMP/waiting.txt ]] &&
    victim=$(for p in $(pgrep -f "$SHEAF killed.shf"); do grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/$p/environ 2>/dev/null && echo $p; done)
  [[ -n $victim ]] && break
  sleep 0.2
done
[[ -n $victim ]] && sleep 2 && kill -9 $victim
wait $job
STATUS=$?
[[ -n $victim ]] || fail 'found rank 1 of killed.shf once rank 0 waited'
[[ $STATUS -ne 0 && $STATUS -ne 124 ]] || fail "a killed rank: non-zero exit, no hang (status $STATUS)"
stderr_has 'rank 0 of 2: the job was ended while this rank waited for the other ranks in all-reduce of (f32[2])' \
  'the killed rank: the waiting one names its collective'

# ---- collectives called in a different order: an error naming each rank's, never a hang ----
cat >"$TMP/order.shf" <<'SHF'
(print (if (= (rank) 0) (all-reduce (ones [2])) (broadcast-tree (ones [2]) 0)))
SHF
SHEAF_COLLECTIVE_TIMEOUT= LIMIT=60 mpi 2 order.shf
[[ $STATUS -ne 0 && $STATUS -ne 124 ]] || fail "all-reduce against broadcast-tree: an error, not a hang (status $STATUS)"
stderr_has 'rank 0 called all-reduce of (f32[2]); rank 1 called broadcast-tree from rank 0 of (f32[2])' \
  'all-reduce against broadcast-tree of the same tree is named'
cat >"$TMP/order2.shf" <<'SHF'
(if (= (rank) 0) (do (barrier) (all-reduce [1 2])) (do (all-reduce {:a [1 2]}) (barrier)))
SHF
SHEAF_COLLECTIVE_TIMEOUT= LIMIT=60 mpi 2 order2.shf
[[ $STATUS -ne 0 && $STATUS -ne 124 ]] || fail "barrier against all-reduce: an error, not a hang (status $STATUS)"
stderr_has 'the ranks are out of step at collective 1 of the job: rank 0 called barrier; rank 1 called all-reduce of (f32[2])' \
  'barrier against all-reduce is named'
stderr_has 'Every rank must call the same collectives in the same order' 'the error says what is expected'

# ---- a rank that hangs outside collectives: the other gives up after SHEAF_COLLECTIVE_TIMEOUT ----
cat >"$TMP/hangs.shf" <<'SHF'
(when (= (rank) 1)
  (def until (+ (io "clock") 60))
  (while (< (io "clock") until) 0 0))
(print (all-reduce (ones [2])))
SHF
SHEAF_COLLECTIVE_TIMEOUT=2 LIMIT=60 mpi 2 hangs.shf
[[ $STATUS -ne 0 && $STATUS -ne 124 ]] || fail "a rank that hangs: non-zero exit within the timeout (status $STATUS)"
stderr_has 'rank 0 of 2: waited more than 2 s for the other ranks in all-reduce of (f32[2])' 'the waiting rank explains'

# ---- a launcher but no libsheaf_mpi.so: a clear error ----
mkdir -p "$TMP/bin" && cp "$SHEAF" "$TMP/bin/sheaf"
(cd "$TMP" && ASAN_OPTIONS=detect_leaks=0 timeout 60 "${MPIRUN[@]}" -x ASAN_OPTIONS -np 1 "$TMP/bin/sheaf" alone.shf >"$TMP/out" 2>"$TMP/err" </dev/null)
STATUS=$?
status_is 1 'launched without libsheaf_mpi.so'
stderr_has 'started by an MPI launcher, but libsheaf_mpi.so could not be loaded' 'names the missing library'

exit $FAILED
