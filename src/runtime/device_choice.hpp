// runtime/device_choice.hpp — the one place that turns a device name into the JIT's backend.
// The CLI (--device) and the Python binding (load(device=...)) both call choose_device; the JIT
// then compiles for what it was given (runtime/jit.cpp).
//   ""      no device asked for (SPEC §8): the CPU, and at the first compile a usable GPU instead
//           (GPU 0 with NVRTC and cuBLASLt; never in a data-parallel job, whose NCCL all-reduce
//           has not run on GPUs)
//   "cpu"   generated C++ with OpenBLAS products
//   "ref"   the reference executor, op by op
//   "cuda"  GPU 0; an error naming why when there is none
#pragma once
#include <string_view>
#include <vector>

namespace sheaf {

class Jit;

// The device names a caller accepts, in the order its messages list them.
using DeviceNames = std::vector<std::string_view>;
inline const DeviceNames kAllDevices{"cpu", "ref", "cuda"};

// A name outside `allowed` is a SheafError: "device 'x': unknown; available devices: cpu, ref"
// (callers that must fail before any work starts check first).
void check_device_name(std::string_view name, const DeviceNames& allowed = kAllDevices);
// Points `jit` at the device `name` names; the errors of check_device_name, and "cuda" without a
// GPU: "device 'cuda': no GPU was found: <why>; available devices: cpu, ref".
void choose_device(Jit& jit, std::string_view name, const DeviceNames& allowed = kAllDevices);

}  // namespace sheaf
