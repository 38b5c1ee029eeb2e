#!/usr/bin/env python3
"""tests/tools/pickle_interop.py — the Python side of tests/cli/pickle.sh.

Checks Sheaf's restricted pickle loader and its protocol-4 writer against Python's pickle and
NumPy (run it with NumPy 1.x and 2.x: they name their reconstructors numpy.core.* and
numpy._core.*).

    pickle_interop.py write DIR           py_p{2,3,4,5}.pkl (the reference tree) and hostile_*.pkl
    pickle_interop.py check-resaved DIR   Sheaf's re-saves resaved_p*.pkl hold the reference tree
                                          as Sheaf converts it (i8 u8 i16 i64 → i32, f64 → f32, ...)
    pickle_interop.py check-sheaf DIR     sheaf.pkl, written by a Sheaf program, holds the expected tree

Exits 1 with a message naming the first mismatch.
"""
import collections
import os
import pickle
import sys

import numpy as np

PROTOCOLS = (2, 3, 4, 5)


def fail(msg):
    sys.exit(f"pickle_interop.py (NumPy {np.__version__}): {msg}")


class Reduce:
    """An object whose pickle calls `fn(*args)` on load: what a hostile pickle looks like."""

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def reference():
    return {
        "f32": np.array([[1.5, -2], [3, 4]], np.float32),
        "f16": np.array([0.5, -1.25, 65504], np.float16),
        "i32": np.array([1, -2, 2**31 - 1], np.int32),
        "u32": np.array([0, 2**32 - 1], np.uint32),
        "mask": np.array([True, False, True]),
        "i64": np.array([-5, 2**31 - 1], np.int64),
        "i16": np.array([-32768, 7], np.int16),
        "i8": np.array([-128, 127], np.int8),
        "u8": np.array([0, 255], np.uint8),
        "f64": np.array([0.1, -2.5], np.float64),
        "fortran": np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        "cube": np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)),
        "rank0": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "np_f64": np.float64(0.25),
        "np_i64": np.int64(-3),
        "np_bool": np.bool_(True),
        "np_f32": np.float32(1.5),
        "layers": [{"w": np.ones((2, 2), np.float32)}, {"w": np.full((1,), 7, np.int32)}],
        "shared": [np.arange(3, dtype=np.float32)] * 2,
        "pair": (1, "two", None),
        "flags": [True, False],
        "name": "gpt ✓",
        "lr": 0.001,
        "steps": 10**12,
        "neg": -7,
        "od": collections.OrderedDict([("b", 1), ("a", 2)]),
        "int_keys": {1: "one", 2: "two"},
        "bytes": b"ab",
        "nested": {"deep": {"x": [1, [2, [3]]]}},
    }


CONVERTED = {np.dtype(t): np.int32 for t in ("int8", "uint8", "int16", "int64")}
CONVERTED[np.dtype("float64")] = np.float32


def as_sheaf(v):
    """The reference value as Sheaf holds it, written back as Sheaf writes it."""
    if isinstance(v, np.ndarray):
        return np.array(v.astype(CONVERTED.get(v.dtype, v.dtype)), order="C")
    if isinstance(v, (np.floating, float)) and not isinstance(v, np.bool_):
        return float(np.float32(v))
    if isinstance(v, (np.bool_, bool)):
        return bool(v)
    if isinstance(v, (np.integer, int)):
        return int(v)
    if isinstance(v, bytes):
        return v.decode("latin1")
    if isinstance(v, dict):
        return {str(k): as_sheaf(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_sheaf(x) for x in v]
    if isinstance(v, tuple):
        return tuple(as_sheaf(x) for x in v)
    return v


def same(got, want, where):
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            fail(f"{where}: expected an ndarray, got {type(got).__name__}")
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            fail(f"{where}: expected {want.dtype}{list(want.shape)} {want.tolist()}, got {got.dtype}{list(got.shape)} {got.tolist()}")
        got[...] = got  # writable, as NumPy's own unpickled arrays are
        return
    if type(got) is not type(want):
        fail(f"{where}: expected a {type(want).__name__} ({want!r}), got a {type(got).__name__} ({got!r})")
    if isinstance(want, dict):
        if sorted(got) != sorted(want):
            fail(f"{where}: keys {sorted(got)} != {sorted(want)}")
        for k in want:
            same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        if len(got) != len(want):
            fail(f"{where}: {len(got)} items, expected {len(want)}")
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{where}[{i}]")
    elif got != want:
        fail(f"{where}: {got!r} != {want!r}")


def deep_lists(n):
    """n nested lists: [[[...]]] — pushed innermost last, then appended outward."""
    return b"\x80\x04" + b"]" * n + b"a" * (n - 1) + b"."


def write(d):
    tree = reference()
    for p in PROTOCOLS:
        with open(os.path.join(d, f"py_p{p}.pkl"), "wb") as f:
            pickle.dump(tree, f, protocol=p)
    with open(os.path.join(d, "py.pickle"), "wb") as f:
        pickle.dump([np.arange(4, dtype=np.int32), "x"], f, protocol=4)
    cyclic = []
    cyclic.append(cyclic)
    valid = pickle.dumps(tree, protocol=4)
    hostile = {
        "system": pickle.dumps(Reduce(os.system, "touch pwned"), protocol=4),
        "system_p2": pickle.dumps(Reduce(os.system, "touch pwned"), protocol=2),
        "eval": pickle.dumps(Reduce(eval, "__import__('os').system('touch pwned')"), protocol=4),
        "nested_system": pickle.dumps({"w": np.ones(2, np.float32), "x": [Reduce(os.system, "touch pwned")]}, protocol=4),
        "deep": deep_lists(20000),
        "huge_str": b"\x80\x04\x8d" + (2**62).to_bytes(8, "little") + b"abc.",
        "huge_array": valid.replace(b"K\x02K\x02\x86", b"J\x00\xca\x9a;J\x00\xca\x9a;\x86", 1),
        "truncated": valid[: len(valid) // 2],
        "cycle": pickle.dumps(cyclic, protocol=4),
        "object_array": pickle.dumps(np.array([1, "x"], dtype=object), protocol=4),
        "two_pickles": pickle.dumps(1, protocol=4) + pickle.dumps(2, protocol=4),
        "missing_memo": b"\x80\x04h\x07.",
    }
    if hostile["huge_array"] == valid:
        fail("the (2, 2) shape to enlarge was not found in the reference pickle")
    for name, data in hostile.items():
        with open(os.path.join(d, f"hostile_{name}.pkl"), "wb") as f:
            f.write(data)


def check_resaved(d):
    want = as_sheaf(reference())
    for p in PROTOCOLS:
        with open(os.path.join(d, f"resaved_p{p}.pkl"), "rb") as f:
            same(pickle.load(f), want, f"resaved_p{p}.pkl")


def check_sheaf(d):
    with open(os.path.join(d, "sheaf.pkl"), "rb") as f:
        got = pickle.load(f)
    want = {
        "f32": np.array([[1.5, -2], [3, 4]], np.float32),
        "f16": np.array([0.5, -1.25, 65504], np.float16),
        "i32": np.array([1, -2, 2**31 - 1], np.int32),
        "u32": np.array([0, 2**32 - 1], np.uint32),
        "mask": np.array([True, False, True]),
        "rank0": np.array(2.5, np.float32),
        "empty": np.zeros((0,), np.float32),
        "enc": {"layers": [{"w": np.array([1, 2], np.float32)}, {"w": np.array([3], np.float32)}]},
        "top2": (np.array([3, 2], np.float32), np.array([0, 2], np.int32)),
        "step": 7,
        "big": 2**40,
        "lr": 0.5,
        "on": True,
        "none": None,
        "kw": "relu",
        "names": ["a", "b"],
        "empty_list": [],
        "empty_dict": {},
    }
    same(got, want, "sheaf.pkl")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check-resaved", "check-sheaf"):
        sys.exit(__doc__)
    {"write": write, "check-resaved": check_resaved, "check-sheaf": check_sheaf}[sys.argv[1]](sys.argv[2])
