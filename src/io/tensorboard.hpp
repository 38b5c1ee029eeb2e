// io/tensorboard.hpp — TensorBoard event files (SPEC §10.1, `(tensorboard dir step {...})`).
// A run directory gets one file per process, events.out.tfevents.<unix time>.<host>.<pid>.sheaf,
// opened at the first record and kept open; it starts with the file_version event
// "brain.Event:2". Each call appends one Event (wall time, step, a Summary of all its values) as
// one record — [u64 length][u32 masked CRC-32C of the length][data][u32 masked CRC-32C of the
// data], little-endian — with one write(2), so TensorBoard sees it while the program runs. The
// messages are serialized by libsheaf_tensorboard.so (protobuf-lite, io/tensorboard_plugin.cpp),
// loaded at the first record.
#pragma once
#include <string>

#include "io/append.hpp"

namespace sheaf {

// Numbers, booleans and rank-0 tensors are scalars; a tensor of rank ≥ 1 is a histogram of its
// finite elements (30 equal-width buckets from min to max); nil is left out. Errors name the
// directory and key.
void tensorboard_write(const std::string& dir, int64_t step, const Row& values);

}  // namespace sheaf
