// tests/unit/cuda_emulator.hpp — an emulated CUDA device (cuda::Device of backend/cuda/device.hpp)
// for tests on machines without a GPU, and the kernel emulation it shares with cuda_render_test.
//   Kernels   CUDA C++ as cuda::render writes it (extern "C" __global__ kernels, no includes) is
//             compiled by the system C++ compiler (cpu::toolchain) after kEmulationPrelude:
//             __global__ and friends erased, threadIdx/blockIdx thread_local (set before each
//             thread runs or resumes), blockDim/gridDim static (launches run one at a time),
//             __shared__ as static, __syncthreads() as a barrier of the threads of a block.
//             Each kernel gets a launcher taking cuLaunchKernel's arguments (args[j] points at the
//             j-th parameter's value). run_kernel runs the threads of a launch: a block's threads
//             together (one fiber each on one thread a launch, switching at barriers; blocks one
//             after another) when the kernel synchronises, else one thread at a time, the blocks
//             spread over hardware_concurrency workers.
//   Memory    a DevicePtr is a host address returned by allocate (256-byte aligned, filled with 0xff
//             bytes so that reads of unwritten memory show). Every copy, fill and product checks that
//             its bytes lie inside one live allocation; releasing an unknown pointer throws.
//   Products  f32 by sheaf::gemm; f16 and bf16 widened to f32, multiplied with f32 accumulation and
//             rounded back (tf32 is ignored: f32 products are exact f32).
//   atomicAdd (the scatter kernels') is a compare-and-swap loop; all_reduce_sum is the copy of a
//             job of one. Warp collectives (attention kernels, which synchronise, so a block's
//             threads run together): __shfl_xor_sync and mma.sync.m16n8k16 (sh_mma_bf16/f16, with
//             its PTX fragment layouts and f32 accumulation) publish each lane's operands and meet
//             at the block's barrier: every thread of a block calls them alike. The reductions'
//             sh_shfl_xor meets at its warp's barrier instead (the lanes of one warp call it).
//             SHEAF_EMULATION is defined.
//   Attention with `library_attention` set: has_sdpa and prepare_sdpa say yes, and sdpa runs
//             cuDNN's SDPA forward and backward on the host in f32 (cuda_emulator_sdpa.cpp): the
//             Sdpa launches' plumbing is tested without cuDNN.
//   Timing    stamps read the host's steady clock when they are queued (work runs then too).
//   Capture   while `record` runs, launches, products, copies and fills are recorded (with copies of
//             their arguments) instead of run; upload and download throw. replay() runs them in
//             order, on the addresses used while recording.
// Work runs when it is queued (synchronize has nothing to wait for). One caller at a time, as on
// one stream; `counters` count the calls made by that caller (a recorded launch counts when it is
// recorded; a replay counts as one replay, not as the work it runs).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/device.hpp"

namespace sheaf::testing_support {

// ---- kernel emulation -----------------------------------------------------------------------------

// The text every emulation unit starts with (then renderings, then launchers).
extern const char* const kEmulationPrelude;

// `extern "C"` functions `{symbol}(void** args)`, calling `kernel` with cuLaunchKernel's arguments,
// and `{symbol}_sizes()`, its parameter count then each parameter's size in bytes.
std::string emulation_launcher(const std::string& symbol, const std::string& kernel);

// A compiled and loaded emulation unit; `handle` is null when `error` says why.
struct EmulationLibrary {
  std::shared_ptr<void> handle;  // dlclose'd with its last owner
  std::string error;             // the compiler's log (at most 4000 characters) or dlerror()
};

// Compiles `unit` (kEmulationPrelude first) at -O0 into `base`.so (next to `base`.cpp and
// `base`.log; the caller removes them) and loads it. dlopen knows a library by its path: every
// base must be new to the process.
EmulationLibrary compile_emulation(const std::string& unit, const std::filesystem::path& base);

// One kernel's launcher in a loaded unit.
struct EmulatedKernel {
  std::shared_ptr<void> library;                   // keeps the code loaded
  void (*launch)(unsigned, unsigned) = nullptr;    // (gridDim, blockDim) of the library
  void (*at)(unsigned, unsigned) = nullptr;        // (blockIdx, threadIdx) of the calling thread
  void (*call)(void** args) = nullptr;
  const unsigned* sizes = nullptr;  // parameter count, then the size of each
};

// The launcher `symbol` of `lib` (emulation_launcher's); throws SheafError when it is missing.
EmulatedKernel emulated_kernel(const EmulationLibrary& lib, const std::string& symbol);

// Runs grid × block threads of `k`. `together`: the threads of each block run as fibers that meet
// at __syncthreads() (a kernel that synchronises needs it); else they may run one at a
// time. grid ≥ 0, 1 ≤ block ≤ 1024. Launches (on any library) run one at a time.
void run_kernel(const EmulatedKernel& k, int64_t grid, int64_t block, bool together, void** args);

// ---- the device -----------------------------------------------------------------------------------

class EmulatedDevice : public cuda::Device, public std::enable_shared_from_this<EmulatedDevice> {
 public:
  struct Counters {
    size_t allocations = 0, releases = 0, live_bytes = 0;
    size_t uploads = 0, upload_bytes = 0, downloads = 0, download_bytes = 0;
    size_t copies = 0, fills = 0, launches = 0, gemms = 0, captures = 0, replays = 0, collectives = 0;
    size_t tf32_gemms = 0;  // products that were allowed TF32
    size_t bias_gemms = 0;  // products with a bias epilogue (GemmEpilogue::Bias)
    size_t gelu_gemms = 0, gelu_aux_gemms = 0, gelu_grad_gemms = 0;  // GELU epilogues (GemmAct): all, with an aux written, gradients
    size_t row_sum_gemms = 0;  // products that sum an operand's rows (GemmEpilogue::SumA, SumB)
    size_t sdpa_prepared = 0, sdpa_forward = 0, sdpa_backward = 0;
  };
  bool library_attention = false;  // plays cuDNN's fused attention (has_sdpa)
  bool refuse_at_prepare = false;  // … which accepts every problem on sight and then builds no plan for it
  std::vector<cuda::Sdpa> sdpa_problems;  // those prepare_sdpa took, in order
  Counters counters;

  ~EmulatedDevice() override;
  std::string arch_name = "sm_90";  // what arch() says (kernels are emulated all the same)
  std::string describe() const override { return "emulated GPU (" + arch_name + ")"; }
  std::string arch() const override { return arch_name; }

  cuda::DevicePtr allocate(size_t bytes) override;
  void release(cuda::DevicePtr p) override;
  void upload(cuda::DevicePtr dst, const void* src, size_t bytes) override;
  void download(void* dst, cuda::DevicePtr src, size_t bytes) override;
  void copy(cuda::DevicePtr dst, cuda::DevicePtr src, size_t bytes) override;
  void fill(cuda::DevicePtr dst, uint8_t byte, size_t bytes) override;

  // `cache_dir` is ignored: every load compiles.
  std::unique_ptr<cuda::Module> load(const std::string& source, const std::vector<std::string>& names,
                                     const std::string& cache_dir) override;
  void gemm(const cuda::Gemm& g, cuda::DevicePtr a, cuda::DevicePtr b, cuda::DevicePtr c, cuda::DevicePtr bias, cuda::DevicePtr aux) override;
  void synchronize() override {}
  bool keeps_time() const override { return true; }
  void stamp() override;
  std::vector<double> stamps_ms() override;
  std::unique_ptr<cuda::Capture> capture(const std::function<void()>& record) override;
  bool has_sdpa() const override { return library_attention; }
  bool prepare_sdpa(const cuda::Sdpa& a, std::string* why) override;
  void sdpa(const cuda::Sdpa& a, bool backward, const cuda::SdpaBuffers& p) override;
  // A job of one: the sum over ranks is a copy (f32, i32, u32, as NCCL's types); counted in `collectives`.
  bool all_reduce_sum(cuda::DevicePtr in, cuda::DevicePtr out, int64_t count, DType dtype) override;

  // Runs `work` now, or records it while capturing (the queue of one stream).
  void submit(std::function<void()> work);
  // Throws SheafError unless [p, p + bytes) lies inside one live allocation (`what` names the use).
  void check_range(cuda::DevicePtr p, size_t bytes, const char* what) const;

 private:
  mutable std::mutex mu_;                   // guards allocations_
  std::map<cuda::DevicePtr, size_t> allocations_;  // start → bytes asked for
  bool recording_ = false;
  std::vector<std::function<void()>> recorded_;
  std::vector<double> stamps_;  // steady-clock seconds
};

// A new emulated device (its own memory and counters).
std::shared_ptr<EmulatedDevice> emulated_device();

}  // namespace sheaf::testing_support
