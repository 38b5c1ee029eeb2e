#!/usr/bin/python3
# tests/python/test_binding.py — the Python binding (`import sheaf`, docs/python.md), run by ctest
# as python.binding with Debian's /usr/bin/python3 and PYTHONPATH=build/python:
#   PYTHONPATH=build/python /usr/bin/python3 tests/python/test_binding.py
# and by scripts/test_wheel.sh in venvs where the wheel is installed (NumPy 2 and NumPy 1.24).
# Programs are written to a temporary directory (their __sheaf__/ JIT cache goes there too).
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

import numpy as np

import sheaf

EXAMPLES = os.environ.get("SHEAF_EXAMPLES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

MODEL = """\
(defn forward [p x]
  (let [h (tanh (+ (@ x (get p :l1 :W)) (get p :l1 :b)))]
    (+ (@ h (get p :l2 :W)) (get p :l2 :b))))

(defn loss [p x y]
  (mean (** (- (forward p x) y) 2)))

(defn grads [p x y] ((value-and-grad loss) p x y))

(defn train-step [p x y]
  (let [[l g] ((value-and-grad loss) p x y)]
    [l (tree-map (fn [w dw] (- w (* 0.1 dw))) p g)]))

(defn ident [x] x)
(defn inc [x] (+ x 1))
(defn double [x] (* x 2.0))
(defn twice [f x] (f (f x)))
(defn adder [n] (fn [x] (+ x n)))
(defn say [x] (print "say {}" x) x)
(defn depth [n] (if (= n 0) 0 (+ 1 (depth (- n 1)))))
(defn spin [n] (loop [i 0] (if (< i n) (recur (+ i 1)) i)))
(defn checked-log [x] (guard :no-nan (log x)))
(defn nest [n] (reduce (fn [acc _] [acc]) nil (range n)))
(defn grid [n] (zeros [n n]))
(defn a_b [] "exact")
(defn a-b [] "kebab")

(def W (tensor [[1.0 2.0] [3.0 4.0]]))
(def config {:lr 0.5 :layers '[2 3] :name "mlp" :sizes [2 3]})
"""


def np_forward(p, x):
    h = np.tanh(x @ p["l1"]["W"] + p["l1"]["b"])
    return h @ p["l2"]["W"] + p["l2"]["b"]


def np_grads(p, x, y):  # d/dp of mean((forward(p, x) - y)^2), by hand
    a = x @ p["l1"]["W"] + p["l1"]["b"]
    h = np.tanh(a)
    out = h @ p["l2"]["W"] + p["l2"]["b"]
    d_out = 2.0 * (out - y) / out.size
    d_a = (d_out @ p["l2"]["W"].T) * (1.0 - h * h)
    return {"l1": {"W": x.T @ d_a, "b": d_a.sum(0)}, "l2": {"W": h.T @ d_out, "b": d_out.sum(0)}}


def params(seed=0):
    r = np.random.default_rng(seed)
    f = lambda *s: r.standard_normal(s).astype(np.float32)
    return {"l1": {"W": f(4, 8), "b": f(8)}, "l2": {"W": f(8, 3), "b": f(3)}}


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sheaf-py-")
        cls.path = cls.write("model.shf", MODEL)
        cls.m = sheaf.load(cls.path)
        cls.x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
        cls.y = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def write(cls, name, text):
        path = os.path.join(cls.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    # -- calls and conversions ------------------------------------------------------------------

    def test_forward_matches_numpy(self):
        p = params()
        out = self.m.forward(p, self.x)
        self.assertIsInstance(out, np.ndarray)
        self.assertEqual((out.dtype, out.shape), (np.float32, (5, 3)))
        np.testing.assert_allclose(out, np_forward(p, self.x), rtol=1e-5, atol=1e-6)

    def test_train_step_round_trips_nested_dicts(self):
        p = params()
        loss, p2 = self.m.train_step(p, self.x, self.y)
        self.assertIsInstance(loss, np.float32)
        np.testing.assert_allclose(loss, np.mean((np_forward(p, self.x) - self.y) ** 2), rtol=1e-5)
        self.assertEqual(sorted(p2), ["l1", "l2"])
        self.assertEqual(sorted(p2["l1"]), ["W", "b"])
        g = np_grads(p, self.x, self.y)
        for layer in ("l1", "l2"):
            for k in ("W", "b"):
                np.testing.assert_allclose(p2[layer][k], p[layer][k] - 0.1 * g[layer][k], rtol=1e-5, atol=1e-6)
        # the result goes back in as it came out
        loss3, _ = self.m.train_step(p2, self.x, self.y)
        self.assertLess(loss3, loss)

    def test_value_and_grad_result(self):
        p = params()
        r = self.m.grads(p, self.x, self.y)
        self.assertIsInstance(r, tuple)  # Sheaf tuples are Python tuples
        value, g = r
        self.assertIsInstance(value, np.float32)  # rank 0 → numpy scalar
        expected = np_grads(p, self.x, self.y)
        for layer in ("l1", "l2"):
            for k in ("W", "b"):
                self.assertEqual(g[layer][k].shape, p[layer][k].shape)
                np.testing.assert_allclose(g[layer][k], expected[layer][k], rtol=1e-4, atol=1e-6)

    def test_snake_case_maps_to_kebab_case(self):
        self.assertEqual(self.m.train_step.name, "train-step")
        self.assertEqual(self.m.a_b(), "exact")  # an exact match wins
        self.assertEqual(self.m["a-b"](), "kebab")
        self.assertIn("train_step", dir(self.m))
        self.assertIn("train_step", self.m)
        self.assertIn("train-step", self.m.names())

    def test_globals_by_name(self):
        c = self.m["config"]
        sizes = c.pop("sizes")  # a bracket literal of numbers is a tensor (SPEC §2.5)
        np.testing.assert_array_equal(sizes, np.array([2, 3], np.float32))
        self.assertEqual(c, {"lr": 0.5, "layers": [2, 3], "name": "mlp"})
        self.assertIsNone(self.m.get("nothing"))
        self.assertEqual(self.m.get("nothing", 7), 7)
        with self.assertRaises(KeyError):
            self.m["nothing"]
        with self.assertRaisesRegex(AttributeError, r"'config' is a value"):
            self.m.config

    def test_python_values_round_trip(self):
        v = {"i": 3, "f": 2.5, "b": True, "n": None, "s": "héllo", "l": [1, [2.0]], "t": (1, "x"), "d": {"k": False}}
        self.assertEqual(self.m.ident(v), v)
        self.assertEqual(self.m.inc(41), 42)
        self.assertIsInstance(self.m.inc(41), int)

    def test_functions_are_values(self):
        add3 = self.m.adder(3)
        self.assertTrue(callable(add3))
        self.assertEqual(add3(4), 7)
        self.assertEqual(self.m.twice(self.m.inc, 1), 3)
        self.assertEqual(self.m.twice(add3, 1), 7)

    # -- zero copy ------------------------------------------------------------------------------

    def test_zero_copy_in(self):
        for jit in (True, False):
            m = self.m if jit else sheaf.load(self.path, jit=False)
            for dtype in (np.float32, np.float16, np.int32, np.uint32, np.bool_):
                x = np.arange(6).reshape(2, 3).astype(dtype)
                self.assertTrue(np.shares_memory(m.ident(x), x), (jit, dtype))
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        strided = x[:, 1]
        r = self.m.ident(strided)  # not C-contiguous: copied
        self.assertFalse(np.shares_memory(r, x))
        np.testing.assert_array_equal(r, strided)

    def test_zero_copy_out(self):
        a, b = self.m["W"], self.m["W"]
        self.assertTrue(np.shares_memory(a, b))
        self.assertEqual(type(a.base).__name__, "PyCapsule")
        self.assertFalse(a.flags.writeable)
        np.testing.assert_array_equal(a, [[1, 2], [3, 4]])
        del a, b
        import gc
        gc.collect()
        np.testing.assert_array_equal(self.m["W"], [[1, 2], [3, 4]])  # still alive in the program

    def test_results_are_not_recycled_under_python(self):
        # compiled functions reuse result buffers of 64 KiB and more once nothing else holds them
        x = np.random.default_rng(3).standard_normal((128, 256)).astype(np.float32)
        results = [self.m.double(x + i) for i in range(6)]
        for i, r in enumerate(results):
            np.testing.assert_array_equal(r, (x + i) * 2)

    def test_inputs_outlive_their_python_references(self):
        x = np.arange(4, dtype=np.float32)
        r = self.m.ident(x)
        del x
        import gc
        gc.collect()
        np.testing.assert_array_equal(r, [0, 1, 2, 3])

    def test_dtype_conversions(self):
        cases = [
            (np.arange(3, dtype=np.float64) / 3, np.float32),
            (np.arange(3, dtype=np.int64), np.int32),
            (np.array([True, False]), np.bool_),
            (np.arange(3, dtype=np.uint8), np.int32),
            (np.arange(3, dtype=np.float16), np.float16),
            (np.arange(3, dtype=">f4"), np.float32),  # byte-swapped: a native copy
            (np.arange(3, dtype=np.int8), np.int32),
            (np.arange(3, dtype=np.int16), np.int32),
            (np.arange(3, dtype=np.uint16), np.int32),
            (np.arange(3, dtype=np.uint64), np.int32),
        ]
        for x, want in cases:
            r = self.m.ident(x)
            self.assertEqual(r.dtype, want, x.dtype)
            np.testing.assert_allclose(r.astype(np.float64), x.astype(want).astype(np.float64))
        self.assertFalse(np.shares_memory(self.m.ident(cases[0][0]), cases[0][0]))
        self.assertIsInstance(self.m.ident(np.float32(1.5)), np.float32)  # numpy scalar → rank 0 → numpy scalar
        with self.assertRaisesRegex(ValueError, "does not fit in i32"):
            self.m.ident(np.array([2**40]))

    # -- errors ---------------------------------------------------------------------------------

    def test_shape_error_is_sheaf_error_with_location(self):
        p = params()
        with self.assertRaises(sheaf.SheafError) as cm:
            self.m.forward(p, np.ones((5, 7), np.float32))
        text = str(cm.exception)
        self.assertIn("model.shf:2:", text)  # the (@ x W) on line 2
        self.assertIn("f32[5x7]", text)
        self.assertIn("f32[4x8]", text)
        self.assertIn("in forward, called from Python", text)
        self.assertEqual((cm.exception.file, cm.exception.line), (self.path, 2))
        self.assertIsInstance(cm.exception.col, int)

    def test_arity_error_points_at_the_definition(self):
        with self.assertRaisesRegex(sheaf.SheafError, r"forward: expected 2 arguments(.|\n)*model\.shf:1:1"):
            self.m.forward(params())

    def test_guard_breach_is_sheaf_error(self):
        np.testing.assert_array_equal(self.m.checked_log(np.ones(2, np.float32)), [0, 0])
        with self.assertRaisesRegex(sheaf.SheafError, r"Guard Breached: NoNan(.|\n)*model\.shf:"):
            self.m.checked_log(np.array([-1.0], np.float32))

    def test_load_errors(self):
        with self.assertRaisesRegex(sheaf.SheafError, "cannot open file.*missing.shf"):
            sheaf.load(os.path.join(self.dir, "missing.shf"))
        bad = self.write("bad.shf", '(def a 1)\n(def b (+ a "x"))\n')
        with self.assertRaises(sheaf.SheafError) as cm:
            sheaf.load(bad)
        self.assertIn("bad.shf:2:8", str(cm.exception))

    def test_device_must_be_cpu_or_ref(self):
        for device, message in [("cuda", "device 'cuda': unknown; available devices: cpu, ref"),
                                ("", "no device named; available devices: cpu, ref")]:
            with self.assertRaises(ValueError) as cm:
                sheaf.load(self.path, device=device)
            self.assertEqual(str(cm.exception), message)
        p = params()
        np.testing.assert_allclose(sheaf.load(self.path, device="ref").forward(p, self.x), np_forward(p, self.x), rtol=1e-5, atol=1e-6)

    def test_unknown_function_is_attribute_error(self):
        with self.assertRaisesRegex(AttributeError, r"no function 'forwad'.*did you mean forward"):
            self.m.forwad
        with self.assertRaisesRegex(AttributeError, r"train-step \(m\.train_step\)"):
            self.m.train_stp
        self.assertFalse(hasattr(self.m, "__array_interface__"))

    def test_unsupported_argument_is_type_error(self):
        with self.assertRaisesRegex(TypeError, r"forward\(\) argument 2: unsupported Python type 'set'"):
            self.m.forward(params(), {1, 2})
        with self.assertRaisesRegex(TypeError, r"argument 1\['l1'\]: unsupported Python type 'object'"):
            self.m.forward({"l1": object()}, self.x)
        with self.assertRaisesRegex(TypeError, "dict key 1 .int. is not a str"):
            self.m.ident({1: 2})
        with self.assertRaisesRegex(TypeError, "complex128"):
            self.m.ident(np.zeros(2, np.complex128))

    # -- runtime --------------------------------------------------------------------------------

    def test_prints_go_to_sys_stdout(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(self.m.say(5), 5)
        self.assertEqual(out.getvalue(), "say 5\n")

    def test_deep_recursion(self):
        self.assertEqual(self.m.depth(4000), 4000)  # 16000 nested evaluations: needs the big stack
        with self.assertRaisesRegex(sheaf.SheafError, "Maximum recursion depth exceeded"):
            self.m.depth(10**6)
        self.assertEqual(self.m.depth(3), 3)

    def run_python(self, code):
        """Runs `code` in a fresh interpreter with `m` loaded: a crash fails the test, not the run."""
        code = f"import resource, sheaf, sys\nm = sheaf.load({self.path!r})\n" + textwrap.dedent(code)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.splitlines()

    def test_deep_result_is_an_error_not_a_crash(self):
        out = self.run_python("""\
            print(m.nest(3))
            try:
                m.nest(10**6)  # converted up to the limit, then freed on this thread's small stack
            except ValueError as e:
                print(e)
            print(m.nest(2))
            """)
        self.assertEqual(out, ["[[[None]]]", "result nested deeper than 500 levels", "[[None]]"])

    def test_out_of_memory_in_a_call_is_sheaf_error(self):
        out = self.run_python("""\
            resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))
            try:
                m.grid(40000)
            except sheaf.SheafError as e:
                print(str(e).splitlines()[0])
            print(m.inc(1))
            """)
        self.assertEqual(out, ["error: zeros: cannot allocate 6.4 GB (6400000000 bytes) for f32[40000x40000]: out of memory", "2"])

    def test_ctrl_c_stops_a_call(self):
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        start = time.time()
        with self.assertRaises(KeyboardInterrupt):
            self.m.spin(5 * 10**7)  # ~15 s uninterrupted
        self.assertLess(time.time() - start, 5)
        self.assertEqual(self.m.spin(10), 10)  # the model is usable afterwards

    def test_calls_from_threads(self):
        p, results = params(), {}

        def work(i):
            x = np.full((2, 4), i, np.float32)
            results[i] = [self.m.forward(p, x) for _ in range(20)]

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(4):
            want = np_forward(p, np.full((2, 4), i, np.float32))
            for r in results[i]:
                np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)

    def test_example_xor(self):
        shutil.copy(os.path.join(EXAMPLES, "xor", "train.shf"), os.path.join(self.dir, "xor.shf"))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            m = sheaf.load(os.path.join(self.dir, "xor.shf"))
        self.assertIn("final loss", out.getvalue())
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "__sheaf__")))  # the JIT cache beside the file
        p, X = m["trained"], m["X"]
        relu = lambda a: np.maximum(a, 0)
        h = relu(X @ p["l1"]["W"] + p["l1"]["b"])
        want = 1 / (1 + np.exp(-(h @ p["l2"]["W"] + p["l2"]["b"])))
        np.testing.assert_allclose(m.forward(p, X), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.round(m.forward(p, X).ravel()), [0, 1, 1, 0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
