#!/usr/bin/env python3
"""tests/tools/make_io_fixtures.py — writes the tiny binary fixtures of tests/lang/io.shf into
tests/lang/fixtures/io/: well-formed files with converted element types, and malformed files
(bad headers, offsets beyond the file, size mismatches, truncation) that must give clear errors.
Uses only the standard library, so the fixtures are reproducible anywhere:
    python3 tests/tools/make_io_fixtures.py
"""
import gzip
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lang", "fixtures", "io")


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def safetensors(tensors, header_extra=None, raw_header=None, data_override=None):
    """tensors: list of (name, dtype, shape, bytes). Offsets are laid out contiguously."""
    header, data = {}, b""
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if header_extra:
        header.update(header_extra)
    text = raw_header if raw_header is not None else json.dumps(header, sort_keys=True).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + (data if data_override is None else data_override)


def npy(descr, shape, payload, version=(1, 0), fortran=False):
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %r, }" % (descr, fortran, tuple(shape))
    pre = 10 if version[0] == 1 else 12
    header += " " * (-(pre + len(header) + 1) % 64) + "\n"
    length = struct.pack("<H", len(header)) if version[0] == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes(version) + length + header.encode() + payload


def idx(type_code, shape, payload):
    return bytes([0, 0, type_code, len(shape)]) + b"".join(struct.pack(">I", d) for d in shape) + payload


def main():
    os.makedirs(OUT, exist_ok=True)
    # safetensors: converted element types (I8 U8 I16 I64 → i32, F64 → f32) and metadata.
    write("convert.safetensors", safetensors([
        ("f64", "F64", [2], struct.pack("<2d", 0.5, -1.25)),
        ("i64", "I64", [3], struct.pack("<3q", -7, 2**31 - 1, 5)),
        ("i16", "I16", [2], struct.pack("<2h", -300, 300)),
        ("i8", "I8", [2], struct.pack("<2b", -128, 127)),
        ("u8", "U8", [2, 2], bytes([0, 1, 254, 255])),
        ("b", "BOOL", [3], bytes([1, 0, 2])),
    ], header_extra={"__metadata__": {"format": "pt"}}))
    # Written by another tool without alignment: the f32 tensor starts 3 bytes into the data.
    write("unaligned.safetensors", safetensors([
        ("a", "BOOL", [3], bytes([1, 0, 1])),
        ("b", "F32", [2], struct.pack("<2f", 1.5, -2)),
        ("c", "F16", [1], struct.pack("<e", 0.5)),
    ]))
    write("i64_overflow.safetensors", safetensors([("big", "I64", [2], struct.pack("<2q", 1, 2**40))]))
    write("bad_json.safetensors", safetensors([], raw_header=b"{not json"))
    write("not_object.safetensors", safetensors([], raw_header=b"[1, 2]"))
    write("header_too_long.safetensors", struct.pack("<Q", 1000) + b'{"a": 1}')
    write("short.safetensors", b"\x10\x00\x00")
    write("offsets_beyond.safetensors", safetensors([("w", "F32", [100], b"\0" * 400)], data_override=b"\0" * 8))
    write("size_mismatch.safetensors", safetensors([("w", "F32", [3], b"\0" * 8)]))
    write("bad_dtype.safetensors", safetensors([("w", "C64", [1], b"\0" * 8)]))
    write("huge_shape.safetensors", safetensors([("w", "F32", [2**40, 2**40], b"")]))
    write("bad_offsets.safetensors", safetensors([], raw_header=b'{"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}', data_override=b"\0" * 4))
    write("no_shape.safetensors", safetensors([], raw_header=b'{"w": {"dtype": "F32", "data_offsets": [0, 4]}}', data_override=b"\0" * 4))
    # npy: version 3.0, converted types, and malformed files.
    write("v3.npy", npy("<i2", [2, 2], struct.pack("<4h", 1, -2, 3, -4), version=(3, 0)))
    write("u1.npy", npy("|u1", [3], bytes([0, 128, 255])))
    write("truncated.npy", npy("<f4", [100], struct.pack("<2f", 1, 2)))
    write("bad_magic.npy", b"\x93NUMPZ\x01\x00" + b"\0" * 64)
    write("bad_header.npy", npy("<f4", [3], b"").replace(b"(3,)", b"(3,x"))
    write("bad_version.npy", b"\x93NUMPY\x07\x00" + b"\0" * 64)
    write("big_endian.npy", npy(">f4", [1], struct.pack(">f", 1)))
    write("fortran.npy", npy("<f4", [1, 1], struct.pack("<f", 1), fortran=True))
    write("u2.npy", npy("<u2", [1], b"\0\0"))
    write("header_len.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'")
    # IDX: the MNIST family's layout, plain and gzip, every element type, and malformed files.
    write("tiny-idx2-ubyte", idx(0x08, [2, 3], bytes([0, 1, 2, 253, 254, 255])))
    write("tiny-idx2-ubyte.gz", gzip.compress(idx(0x08, [2, 3], bytes([0, 1, 2, 253, 254, 255])), mtime=0))
    write("i16.idx", idx(0x0B, [3], struct.pack(">3h", -2, 0, 513)))
    write("i8.idx", idx(0x09, [2], struct.pack(">2b", -1, 5)))
    write("i32.idx", idx(0x0C, [2], struct.pack(">2i", -70000, 70000)))
    write("f32.idx", idx(0x0D, [2], struct.pack(">2f", 0.25, -3)))
    write("f64.idx", idx(0x0E, [1, 2], struct.pack(">2d", 0.1, 1e3)))
    write("truncated.idx", idx(0x08, [10, 10], bytes(5)))
    write("bad_magic.idx", b"\x01\x02\x08\x01" + struct.pack(">I", 1) + b"\0")
    write("huge.idx", idx(0x08, [2**31, 2**31], b""))
    gz = bytearray(gzip.compress(idx(0x08, [4], bytes([1, 2, 3, 4])), mtime=0))
    gz[-8] ^= 0xFF  # CRC-32 of the content
    write("bad_crc-idx1-ubyte.gz", bytes(gz))
    write("truncated-idx1-ubyte.gz", gzip.compress(idx(0x08, [400], bytes(range(200)) * 2), mtime=0)[:30])
    write("notidx.json.gz", gzip.compress(b'{"a": 1}', mtime=0))


if __name__ == "__main__":
    main()
