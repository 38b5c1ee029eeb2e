// backend/cuda/cudnn_sdpa.hpp — cuDNN's fused scaled-dot-product attention for the problems of
// sdpa.hpp, the engine PyTorch and JAX use on Hopper. Two libraries are opened with dlopen when the
// first problem is prepared: libcudnn.so.9 (on the loader path, then the CUDA toolkit's, as
// dynlib.hpp opens the CUDA libraries) and libsheaf_cudnn.so, built with Sheaf from NVIDIA's
// header-only cudnn-frontend (cudnn_plugin.cpp, its C interface cudnn_abi.h; found like the other
// companions, base/companion.hpp, or at $SHEAF_CUDNN_LIB), which builds the frontend's graphs.
// Each problem's plans are built and their workspaces allocated (once per distinct problem) when
// it is prepared — never while the stream is captured —; run() only queues a plan on the stream.
// SHEAF_CUDNN=0 turns cuDNN off: the own attention kernels run (attention_kernel.hpp).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device.hpp"

namespace sheaf::cuda {

class CudnnSdpa {
 public:
  // The device's memory for the plans' workspaces and trial runs: allocate(bytes), release(ptr),
  // zero(ptr, bytes) (queued), synchronize() (waits for the queue; throws SheafError on a failure).
  struct Memory {
    std::function<DevicePtr(size_t)> allocate;
    std::function<void(DevicePtr)> release;
    std::function<void(DevicePtr, size_t)> zero;
    std::function<void()> synchronize;
  };

  // Whether cuDNN may run here, decided once and cheaply: SHEAF_CUDNN is not 0 and both libraries
  // open (`why` says what failed).
  static bool available(std::string* why = nullptr);
  // Whether the frontend accepts problem a's graphs for a GPU of compute capability `cc` (their
  // shapes, strides and options; no GPU needed); false with `why`.
  static bool validate(const Sdpa& a, int cc, std::string& why);
  // cuDNN on `stream` (a CUstream) of the context current on this thread, for a GPU of compute
  // capability `cc` (90 for sm_90); null with `why` when it is not available or does not start.
  static std::unique_ptr<CudnnSdpa> open(void* stream, int cc, Memory memory, std::string& why);
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // Builds problem a's plans (once per distinct problem) and runs them once on zeroed scratch tensors of its
  // strides, so that a plan that builds but does not run is refused here rather than in the middle
  // of a step; false with `why` when cuDNN does not take it.
  bool prepare(const Sdpa& a, std::string& why);
  // Queues the forward or the backward of a prepared problem; throws SheafError when cuDNN fails.
  void run(const Sdpa& a, bool backward, const SdpaBuffers& p);
  // "cuDNN 9.14.0"
  std::string version() const;
  // "plans of 1 problem built in 812 ms, tried in 40 ms" (--jit-profile: what cuDNN adds to a first
  // step; it compiles its attention kernels at run time, over a second on a machine's first run)
  std::string describe_preparation() const;

 private:
  struct Prepared {
    Sdpa problem;
    int64_t plan = -1;  // the library's index of its plans
    DevicePtr forward = 0, backward = 0;  // their workspaces
  };
  CudnnSdpa(void* ctx, Memory memory) : ctx_(ctx), memory_(std::move(memory)) {}
  const Prepared* find(const Sdpa& a) const;
  void release(const Prepared& p);
  void trial(const Sdpa& a);  // runs a prepared problem once on scratch tensors (throws SheafError)
  void* ctx_;
  Memory memory_;
  double plans_s_ = 0, trials_s_ = 0;  // prepare's time in the library's plan builds and in trial()
  std::vector<Prepared> prepared_;  // a model's few distinct problems (same_plan)
};

}  // namespace sheaf::cuda
