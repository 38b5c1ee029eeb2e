// backend/cuda/nvrtc.hpp — CUDA C++ → PTX and cubin with NVRTC, for the GPU's own architecture.
// Options: --gpu-architecture=sm_<major><minor> for a cubin (ELF for exactly that GPU) or
// compute_<major><minor> for PTX (which the driver compiles at load time), -std=c++17,
// -default-device, --fmad=true; no --use_fast_math (IEEE operations and rounding, like the host
// kernels, except that a multiply and an add may contract into one fused multiply-add — nvcc's
// default, which XLA and PyTorch's kernels keep too: a*b+c may then differ from the CPU's result
// by the rounding of a*b).
#pragma once
#include <string>
#include <vector>

namespace sheaf::cuda {

struct CompiledKernels {
  std::string ptx;    // when no cubin was asked for
  std::string cubin;  // when asked for
  std::string log;    // compiler messages (warnings)
};

// Compiles `source` (named `name` in messages); `extra` options follow the usual ones (a tool's
// "--ptxas-options=-v": each kernel's registers in the log). Throws SheafError with NVRTC's log
// when the source does not compile, or naming what is missing when NVRTC cannot be loaded.
CompiledKernels compile_cuda(const std::string& source, const std::string& name, int major, int minor, bool cubin,
                             const std::vector<std::string>& extra = {});

// "NVRTC 13.0" or the reason it is unavailable.
std::string nvrtc_version();

// The version and the options besides the architecture: "NVRTC 13.0 -std=c++17 … --fmad=true".
std::string nvrtc_compiler();

}  // namespace sheaf::cuda
