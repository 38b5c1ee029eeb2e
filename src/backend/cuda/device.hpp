// backend/cuda/device.hpp — what the CUDA backend needs from a GPU, as one interface.
// cuda::Program (program.hpp) runs a compiled function through a Device and nothing else: memory,
// copies, loading the kernels of a rendering, launches, matrix products and whole-call capture.
//   DriverDevice  (driver_device.cpp) the real GPU: CUDA driver API on one stream of device 0's
//                 primary context, kernels compiled by NVRTC to a cubin for the GPU's own arch
//                 (cached in __sheaf__/ keyed by arch and CUDA version), products by cuBLASLt,
//                 capture as CUDA graphs. Everything is loaded with dlopen.
//   emulated      (tests/unit/cuda_emulator.hpp) host memory, the kernels compiled by the system
//                 C++ compiler and run by threads: every path of the backend except the driver
//                 calls is tested on machines without a GPU.
// Work is queued in order on one stream: launches, products and device-to-device copies are
// asynchronous; upload returns once `src` may be reused; download waits for the queued work.
// Errors throw SheafError naming the operation and the driver's error.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/render.hpp"
#include "backend/cuda/sdpa.hpp"
#include "base/error.hpp"
#include "tensor/dtype.hpp"

namespace sheaf::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr; 0 is null

// The kernels of one rendering, loaded; kernel `i` is Kernels::launches' i-th Kernel launch
// (in the order of `names` given to Device::load).
class Module {
 public:
  virtual ~Module() = default;
  // Queues grid × block threads of kernel `kernel`; `args[j]` points at the j-th parameter's
  // value (a DevicePtr), as cuLaunchKernel takes them.
  virtual void launch(size_t kernel, int64_t grid, int64_t block, void** args) = 0;
};

// c[i] (m×n, row-major, contiguous) = a[i] · b[i] for i < batches, element (r, c) of a[i] at
// a + i·a_bs + r·a_rs + c·a_cs (elements; b likewise). Inputs and output of `dtype` (f32, f16 or
// bf16); always f32 accumulation. `tf32`: f32 products may round their inputs to TF32.
// `epilogue` (cuBLASLt's), with a row of `dtype` (16-byte aligned, contiguous):
//   Bias        element (r, col) of every c[i] is the f32 sum plus row[col] (n elements), rounded once;
//   SumA, SumB  the row receives a's sums over k (m of them), or b's (n): f32 sums rounded once (a
//               bias's gradient); one batch only.
// and `act` (cuBLASLt's GELU epilogues, tanh approximation: tensor/gelu.hpp; one batch only; n a
// multiple of 8; `aux` m×n of `dtype`, contiguous, 16-byte aligned):
//   Gelu        c = gelu(the f32 sum [+ row: Bias]), rounded once; with an aux (non-zero) the
//               value before GELU is written there too, rounded to `dtype`;
//   GeluGrad    c = the f32 sum · gelu'(aux), rounded once (aux: GELU's input; no row epilogue).
enum class GemmEpilogue : uint8_t { None, Bias, SumA, SumB };
enum class GemmAct : uint8_t { None, Gelu, GeluGrad };

struct Gemm {
  DType dtype = DType::F32;
  int64_t m = 1, n = 1, k = 1;
  int64_t a_rs = 0, a_cs = 0, b_rs = 0, b_cs = 0;
  int64_t batches = 1, a_bs = 0, b_bs = 0;  // c's batch stride is m·n
  bool tf32 = false;
  GemmEpilogue epilogue = GemmEpilogue::None;
  GemmAct act = GemmAct::None;
};

// The addresses of a Sdpa problem's tensors (their first elements: offsets applied); the
// forward reads q, k, v and writes o (and stats with a backward); the backward reads q, k, v, o,
// stats and d_o and writes dq, dk, dv.
struct SdpaBuffers {
  DevicePtr q = 0, k = 0, v = 0, o = 0, stats = 0, d_o = 0, dq = 0, dk = 0, dv = 0;
};

// How the cuBLASLt algorithms of the products run so far were chosen (cublaslt.hpp's LtGemm):
// `shapes` products (shape, layout, dtype, alignment) with an algorithm, `timed` of them by
// timing the heuristic's candidates, `cached` by the choices file.
struct ProductTuning {
  int64_t shapes = 0, timed = 0, cached = 0;
};

// Queued work recorded once and replayed as one submission (a CUDA graph). Replays read and
// write the very addresses used while recording.
class Capture {
 public:
  virtual ~Capture() = default;
  virtual void replay() = 0;
};

// The compute capability of an arch name: "sm_90" → 90, "sm_90a" → 90, "sm_75" → 75; 0 for
// anything else.
inline int compute_capability(const std::string& arch) {
  int n = 0;
  for (size_t i = 3; arch.starts_with("sm_") && i < arch.size() && arch[i] >= '0' && arch[i] <= '9' && n < 10000; ++i)
    n = n * 10 + (arch[i] - '0');
  return n;
}

class Device {
 public:
  virtual ~Device() = default;
  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
  virtual std::string describe() const = 0;
  // The architecture kernels are built for ("sm_90"): part of every specialization key.
  virtual std::string arch() const = 0;
  // Streaming multiprocessors, which kernels size their grids by (render_options_for).
  virtual int64_t multiprocessors() const { return 132; }  // an H100's

  // Raw device memory (Allocator caches it). allocate throws SheafError when the GPU is full.
  virtual DevicePtr allocate(size_t bytes) = 0;
  virtual void release(DevicePtr p) = 0;
  virtual void upload(DevicePtr dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, DevicePtr src, size_t bytes) = 0;
  virtual void copy(DevicePtr dst, DevicePtr src, size_t bytes) = 0;
  virtual void fill(DevicePtr dst, uint8_t byte, size_t bytes) = 0;

  // Compiles (or finds in `cache_dir`, when not empty) and loads the kernels `names` of `source`.
  virtual std::unique_ptr<Module> load(const std::string& source, const std::vector<std::string>& names,
                                       const std::string& cache_dir) = 0;
  // Queues c = a · b (Gemm's semantics; `row`, the epilogue's, ignored without one; `aux`, the
  // GELU epilogue's, 0 without one).
  virtual void gemm(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr row, DevicePtr aux) = 0;
  // Waits for every queued operation.
  virtual void synchronize() = 0;

  // Queues out = Σ over the ranks of the data-parallel job (dist/comm.hpp) of `count` elements of
  // `dtype` at `in` (out may equal in), every rank calling with the same count and dtype; false
  // when this device has no collective library for it (the caller then sums on the host).
  virtual bool all_reduce_sum(DevicePtr in, DevicePtr out, int64_t count, DType dtype) {
    (void)in, (void)out, (void)count, (void)dtype;
    return false;
  }

  // Timing (SHEAF_CUDA_PROFILE). stamp() queues a timestamp after the work queued so far;
  // stamps_ms() waits for the queue and returns every stamp's time in milliseconds after the first,
  // forgetting them. A device that keeps no time (keeps_time() false) ignores stamps.
  virtual bool keeps_time() const { return false; }
  virtual void stamp() {}
  virtual std::vector<double> stamps_ms() { return {}; }

  // Fused attention by the GPU's library (cuDNN's SDPA, sdpa.hpp). has_sdpa: whether a library is
  // there, so that fusion leaves projection biases unfolded (the library reads plain operands).
  // sdpa_accepts: whether the library takes problem `a` on sight (its shapes, strides and options;
  // it builds nothing, so that the render may ask while kernels compile). prepare_sdpa builds what
  // an accepted problem needs (its forward, and its backward when a.grad) now, outside any
  // capture; false with `why` when the library does not take it after all (its steps then run the
  // own kernels). sdpa queues the forward or the backward of a prepared problem.
  virtual bool has_sdpa() const { return false; }
  virtual bool sdpa_accepts(const Sdpa& a, std::string* why) {  // here: a library that is there takes them all
    (void)a;
    if (!has_sdpa() && why) *why = "this device has no fused-attention library";
    return has_sdpa();
  }
  virtual bool prepare_sdpa(const Sdpa& a, std::string* why) {
    (void)a;
    if (why) *why = "this device has no fused-attention library";
    return false;
  }
  // One line for --jit-profile: which attention ran ("attention: cuDNN 9.14.0 runs 12 of 12
  // chains"); empty when no chain was offered.
  virtual std::string describe_sdpa() const { return {}; }
  virtual void sdpa(const Sdpa& a, bool backward, const SdpaBuffers& p) {
    (void)backward, (void)p;
    throw SheafError("internal: attention " + sdpa_key(a) + " was given to a device without a fused-attention library");
  }

  // How the products' algorithms were chosen (zeros: this device does not choose).
  virtual ProductTuning product_tuning() const { return {}; }

  // Records the work `record` queues (launches, products, device copies; no upload or download)
  // into a Capture; nullptr when this device cannot capture (record then has run normally).
  virtual std::unique_ptr<Capture> capture(const std::function<void()>& record) = 0;
};

// The GPU of this process (GPU <local rank mod GPUs>, see driver_device.hpp) through the CUDA
// driver, or null with `why` ("no GPU was found: ...").
// One per process, created on first use.
std::shared_ptr<Device> gpu(std::string* why = nullptr);

}  // namespace sheaf::cuda
