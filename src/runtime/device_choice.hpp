// runtime/device_choice.hpp — the one place that turns a device name into the JIT's backend
// (backend/backend.hpp). The CLI (--device) and the Python binding (load(device=...)) both call
// choose_device; the JIT then compiles for what it was given (runtime/jit.cpp).
//   ""      no device asked for (SPEC §8): the CPU, and at the first compile a usable GPU instead
//           (GPU 0 with NVRTC and cuBLASLt; never in a data-parallel job, whose NCCL all-reduce
//           has not run on GPUs)
//   "cpu"   generated C++ with OpenBLAS products
//   "ref"   the reference executor, op by op
//   "cuda"  GPU 0; an error naming why when there is none
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sheaf {

class Backend;
class Jit;

// The device names a caller accepts, in the order its messages list them, and whether it accepts
// none ("": the CPU, or a usable GPU).
struct DeviceNames {
  std::vector<std::string_view> names;
  bool none = true;
};
inline const DeviceNames kAllDevices{{"cpu", "ref", "cuda"}};

// What the backends are built with.
struct BackendOptions {
  std::string cache_dir;  // compiled code is cached there (cache_beside); empty: nothing is cached
  bool tf32 = false;      // f32 products on a GPU may use TF32 (--tf32)
};
// `dir`/__sheaf__: the cache of an entry file in `dir` (SPEC §7.9).
std::string cache_beside(const std::string& dir);

// A name outside `allowed` is a SheafError: "device 'x': unknown; available devices: cpu, ref",
// or, for "" where no name is not allowed, "no device named; available devices: cpu, ref"
// (callers that must fail before any work starts check first).
void check_device_name(std::string_view name, const DeviceNames& allowed = kAllDevices);
// Gives `jit` the backend `name` names; the errors of check_device_name, and "cuda" without a
// GPU: "device 'cuda': no GPU was found: <why>; available devices: cpu, ref".
void choose_device(Jit& jit, std::string_view name, const DeviceNames& allowed = kAllDevices, const BackendOptions& o = {});

// The backend of no device asked for: `first` until the first compile, which asks `find` once;
// the backend it returns, if any, compiles everything from then on (the CPU backend, and
// `find` a CUDA backend when a GPU is usable).
std::unique_ptr<Backend> switching_once(std::unique_ptr<Backend> first, std::function<std::unique_ptr<Backend>()> find);

}  // namespace sheaf
