#!/usr/bin/env python3
"""tests/tools/io_interop.py — the Python side of tests/cli/io_interop.sh.

Checks Sheaf's files against the reference readers and writers: the `safetensors` package (numpy
backend; bf16 through raw bytes, since numpy has no bfloat16), NumPy's .npy code, and NumPy
reading Debian's Fashion-MNIST IDX files.

    io_interop.py write DIR            reference files for Sheaf to load: py.safetensors, py_*.npy
    io_interop.py check-resaved DIR    Sheaf's re-saves of those files hold the same values
    io_interop.py check-sheaf DIR      files written by a Sheaf program hold the expected values
    io_interop.py idx-expect IMAGES LABELS   the lines the Sheaf IDX program must print

Exits 1 with a message naming the first mismatch.
"""
import gzip
import json
import os
import struct
import sys

import numpy as np

try:
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import save_file
except ImportError:
    sys.exit("io_interop.py: the Python package 'safetensors' is missing: run scripts/bootstrap.sh "
             "(or pip install -r scripts/requirements-test.txt)")


def fail(msg):
    sys.exit("io_interop.py: " + msg)


def bf16_bits(values):
    """float32 values → bf16 bit patterns (round to nearest even), as uint16."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


# Arrays written by Python. Sheaf keeps F32 F16 BF16 I32 U32 BOOL and converts the rest.
PY_TENSORS = {
    "f32": np.array([[0.1, -3.5e-8, 1e30], [np.pi, -0.0, 65504.0]], dtype=np.float32),
    "f16": np.array([0.5, -1.25, 65504, 6.1e-5, 0.1], dtype=np.float16),
    "i32": np.array([[-2147483648, 0], [2147483647, 42]], dtype=np.int32),
    "u32": np.array([0, 2**31 + 5, 2**32 - 1], dtype=np.uint32),
    "bool": np.array([True, False, True]),
    "i64": np.array([-7, 2**31 - 1, 5], dtype=np.int64),
    "i16": np.array([-32768, 32767], dtype=np.int16),
    "i8": np.array([-128, 127], dtype=np.int8),
    "u8": np.arange(0, 256, 51, dtype=np.uint8).reshape(2, 3),
    "f64": np.array([0.1, 1e-40, -2.5], dtype=np.float64),
    "scalar": np.array(3.25, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "model.layers.0.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
    "model.layers.1.weight": np.arange(6, 12, dtype=np.float32).reshape(3, 2),
    "model.norm": np.ones(4, dtype=np.float32),
}
BF16 = [1.0, -2.5, 3.140625, 1e-3, 3e38]
# What Sheaf must hold after loading (and so write back): converted dtypes.
CONVERTED = {"i64": np.int32, "i16": np.int32, "i8": np.int32, "u8": np.int32, "f64": np.float32}
ST_DTYPE = {np.float32: "F32", np.float16: "F16", np.int32: "I32", np.uint32: "U32", np.bool_: "BOOL"}
NPY_KEEP = ["f32", "f16", "i32", "u32", "bool", "i64", "i16", "i8", "u8", "f64"]


def serialize_bf16(path, name, bits):
    """Writes one BF16 tensor with the safetensors package, passing raw bytes."""
    bits = np.ascontiguousarray(bits)
    if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.8
        spec = safetensors.TensorSpec(dtype="bfloat16", shape=list(bits.shape), data_ptr=bits.ctypes.data, data_len=bits.nbytes)
        safetensors.serialize_file({name: spec}, path)
    else:
        safetensors.serialize_file({name: {"dtype": "bfloat16", "shape": list(bits.shape), "data": bits.tobytes()}}, path)


def write(d):
    save_file(PY_TENSORS, os.path.join(d, "py.safetensors"), metadata={"source": "numpy"})
    serialize_bf16(os.path.join(d, "py_bf16.safetensors"), "w", bf16_bits(BF16))
    for name in NPY_KEEP:
        np.save(os.path.join(d, "py_%s.npy" % name), PY_TENSORS[name])


def header_of(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    text = data[8:8 + n]
    if n % 8 != 0:
        fail("%s: header length %d is not a multiple of 8" % (path, n))
    header = json.loads(text)
    names = [k for k in header if k != "__metadata__"]
    if names != sorted(names):
        fail("%s: header keys are not sorted: %s" % (path, names))
    if text.rstrip(b" ") != text.rstrip():
        fail("%s: header padding is not spaces" % path)
    return header, data


def expect_equal(where, got, want):
    if got.dtype != want.dtype:
        fail("%s: dtype %s, expected %s" % (where, got.dtype, want.dtype))
    if got.shape != want.shape:
        fail("%s: shape %s, expected %s" % (where, got.shape, want.shape))
    same = np.array_equal(got, want, equal_nan=True) if got.dtype.kind == "f" else np.array_equal(got, want)
    if not same or (got.dtype.kind == "f" and not np.array_equal(np.signbit(got), np.signbit(want))):
        fail("%s: values %s, expected %s" % (where, got, want))


def check_resaved(d):
    path = os.path.join(d, "resaved.safetensors")
    header, _ = header_of(path)
    with safe_open(path, framework="np") as f:
        if sorted(f.keys()) != sorted(PY_TENSORS):
            fail("%s: names %s, expected %s" % (path, sorted(f.keys()), sorted(PY_TENSORS)))
        for name, want in PY_TENSORS.items():
            want = want.astype(CONVERTED.get(name, want.dtype))
            expect_equal("%s[%s]" % (path, name), f.get_tensor(name), want)
    bf = os.path.join(d, "resaved_bf16.safetensors")
    header, data = header_of(bf)
    ((name, info),) = safetensors.deserialize(data)
    if info["dtype"] != "BF16" or list(info["shape"]) != [len(BF16)]:
        fail("%s: expected a BF16 tensor of %d elements, got %s %s" % (bf, len(BF16), info["dtype"], info["shape"]))
    expect_equal(bf, np.frombuffer(bytes(info["data"]), dtype=np.uint16), bf16_bits(BF16))
    for name in NPY_KEEP:
        p = os.path.join(d, "resaved_%s.npy" % name)
        want = PY_TENSORS[name].astype(CONVERTED.get(name, PY_TENSORS[name].dtype))
        expect_equal(p, np.load(p), want)


# What tests/cli/io_interop.sh's Sheaf program saves.
SHEAF_EXPECTED = {
    "f32": np.array([[1.5, -2.0], [3.0, 4.0]], dtype=np.float32),
    "f16": np.array([0.5, -1.25, 65504], dtype=np.float16),
    "i32": np.array([1, -2, 2147483647], dtype=np.int32),
    "u32": np.array([0, 4294967295], dtype=np.uint32),
    "mask": np.array([True, False, True]),
    "step": np.array(7, dtype=np.int32),
    "lr": np.array(0.5, dtype=np.float32),
    "enc.layers.0.w": np.array([1.0, 2.0], dtype=np.float32),
    "enc.layers.1.w": np.array([3.0], dtype=np.float32),
}
SHEAF_BF16 = [1.0, -2.5, 3.140625]


def check_sheaf(d):
    path = os.path.join(d, "sheaf.safetensors")
    header, data = header_of(path)
    want_names = sorted(list(SHEAF_EXPECTED) + ["bf16"])
    if sorted(k for k in header if k != "__metadata__") != want_names:
        fail("%s: names %s, expected %s" % (path, sorted(header), want_names))
    for name, info in safetensors.deserialize(data):
        if name == "bf16":
            if info["dtype"] != "BF16":
                fail("%s[bf16]: dtype %s" % (path, info["dtype"]))
            expect_equal(path + "[bf16]", np.frombuffer(bytes(info["data"]), dtype=np.uint16), bf16_bits(SHEAF_BF16))
            continue
        want = SHEAF_EXPECTED[name]
        if info["dtype"] != ST_DTYPE[want.dtype.type]:
            fail("%s[%s]: dtype %s, expected %s" % (path, name, info["dtype"], ST_DTYPE[want.dtype.type]))
    with safe_open(path, framework="np") as f:
        for name, want in SHEAF_EXPECTED.items():
            expect_equal("%s[%s]" % (path, name), f.get_tensor(name), want)
    for name in ["f32", "f16", "i32", "u32", "mask"]:
        p = os.path.join(d, "sheaf_%s.npy" % name)
        expect_equal(p, np.load(p), SHEAF_EXPECTED[name])


PIXELS = [(0, 10, 13), (0, 27, 27), (1, 14, 14), (12345, 5, 20), (59999, 20, 10)]
LABELS = [0, 1, 2, 12345, 59999]


def idx_expect(images, labels):
    with gzip.open(images, "rb") as f:
        raw = f.read()
    magic, n, rows, cols = struct.unpack(">IIII", raw[:16])
    imgs = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows, cols)
    with gzip.open(labels, "rb") as f:
        lab = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    print("[%d, %d, %d]" % imgs.shape)
    for i, r, c in PIXELS:
        print(int(imgs[i, r, c]))
    print(" ".join(str(int(lab[i])) for i in LABELS))
    print(imgs[7, 14].astype(np.int32))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    {"write": write, "check-resaved": check_resaved, "check-sheaf": check_sheaf, "idx-expect": idx_expect}[cmd](*args)


if __name__ == "__main__":
    main()
