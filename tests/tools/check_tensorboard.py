#!/usr/bin/env python3
"""tests/tools/check_tensorboard.py — the TensorBoard side of tests/cli/metrics.sh.

Reads a run directory written by Sheaf with TensorBoard's own reader (EventAccumulator) and
compares it with the expectation given as JSON:

    check_tensorboard.py DIR '{"scalars": {"loss": [[1, 0.5], [2, 0.25]]},
                               "histograms": {"w": [[5, {"min": 1, "max": 4, "num": 4, "sum": 10}]]}}'

Scalars: every tag's (step, value) pairs, values within f32 rounding; no other scalar tags.
Histograms: step and the listed summary fields; the bucket counts add up to num. Each event
file's name has the tfevents pattern, and every record's length and data checksums (masked
CRC-32C) are recomputed with TensorBoard's implementation. Exits 1 naming the first mismatch.
"""
import glob
import json
import os
import re
import struct
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
except ImportError:
    sys.exit("check_tensorboard.py: the Python package 'tensorboard' is missing: run scripts/bootstrap.sh "
             "(or pip install -r scripts/requirements-test.txt)")


def check_records(path):
    data = open(path, "rb").read()
    pos, count = 0, 0
    while pos < len(data):
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (crc_len,) = struct.unpack("<I", data[pos + 8:pos + 12])
        assert crc_len == masked_crc32c(header), f"{path}: record {count}: bad length checksum"
        body = data[pos + 12:pos + 12 + length]
        (crc_body,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        assert crc_body == masked_crc32c(body), f"{path}: record {count}: bad data checksum"
        pos += 16 + length
        count += 1
    assert pos == len(data), f"{path}: {len(data) - pos} trailing bytes"
    return count


def main():
    run_dir, expected = sys.argv[1], json.loads(sys.argv[2])
    files = glob.glob(os.path.join(run_dir, "*"))
    assert files, f"{run_dir}: no event file"
    for f in files:
        assert re.fullmatch(r"events\.out\.tfevents\.\d{10}\.[^/]+\.\d+\.sheaf", os.path.basename(f)), f
        assert check_records(f) >= 2, f"{f}: expected the file_version record and at least one summary"
    acc = EventAccumulator(run_dir, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    want_scalars = expected.get("scalars", {})
    assert sorted(tags["scalars"]) == sorted(want_scalars), f"scalar tags {tags['scalars']}, expected {list(want_scalars)}"
    for tag, pairs in want_scalars.items():
        got = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert len(got) == len(pairs), f"{tag}: {got}, expected {pairs}"
        for (step, value), (want_step, want_value) in zip(got, pairs):
            assert step == want_step and abs(value - want_value) <= 1e-6 * max(1, abs(want_value)), \
                f"{tag}: {got}, expected {pairs}"
        assert all(e.wall_time > 1.6e9 for e in acc.Scalars(tag)), f"{tag}: wall times are not Unix times"
    want_hists = expected.get("histograms", {})
    assert sorted(tags["histograms"]) == sorted(want_hists), f"histogram tags {tags['histograms']}, expected {list(want_hists)}"
    for tag, events in want_hists.items():
        got = acc.Histograms(tag)
        assert len(got) == len(events), f"{tag}: {len(got)} events, expected {len(events)}"
        for e, (want_step, fields) in zip(got, events):
            h = e.histogram_value
            assert e.step == want_step, f"{tag}: step {e.step}, expected {want_step}"
            for k, v in fields.items():
                assert abs(getattr(h, k) - v) <= 1e-6 * max(1, abs(v)), f"{tag} step {e.step}: {k} = {getattr(h, k)}, expected {v}"
            assert sum(h.bucket) == h.num and len(h.bucket) == len(h.bucket_limit), f"{tag}: buckets {h}"
            assert list(h.bucket_limit) == sorted(h.bucket_limit) and h.bucket_limit[-1] == h.max, f"{tag}: limits {h}"
    print(f"tensorboard: {run_dir} ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"check_tensorboard.py: {e}")
