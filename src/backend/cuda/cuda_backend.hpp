// backend/cuda/cuda_backend.hpp — the CUDA backend behind the Backend interface (--device cuda,
// and the default where a GPU is usable): a graph becomes a Program on one GPU (program.hpp),
// whose kernels the Device compiles (NVRTC, cubins cached in ProgramOptions::cache_dir). A graph
// it cannot build runs on the reference executor after a notice (an error with SHEAF_CUDA_STRICT).
// SHEAF_CUDA_PROFILE times every launch; SHEAF_CUDA_RENDER=field=value,… overrides RenderOptions
// (render.hpp); SHEAF_CUDA_CAPTURE=0|1|2 sets ProgramOptions::capture_at; SHEAF_DUMP_CUDA=dir
// writes each function's source and launch table there.
#pragma once
#include <memory>

#include "backend/backend.hpp"
#include "backend/cuda/program.hpp"

namespace sheaf::cuda {

struct CudaStats {
  uint64_t built = 0;  // programs built
  double build_s = 0;
  BuildTimes build;    // where build_s went
  ProgramStats run;    // what the programs did
};

class CudaBackend final : public Backend {
 public:
  // Compiles for the GPU behind `gpu` (its memory), with `o` (its name is each function's).
  explicit CudaBackend(std::shared_ptr<Allocator> gpu, ProgramOptions o = {});

  std::string_view name() const override { return "cuda"; }
  std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) override;
  // Hits: inputs on the GPU already or reused uploads; misses: fresh uploads.
  BufferCounts buffers(uint64_t host_inputs) const override;
  void report(std::ostream& os, double dispatch_s) const override;

  const CudaStats& stats() const { return stats_; }

 private:
  std::shared_ptr<Allocator> gpu_;
  ProgramOptions options_;
  CudaStats stats_;
};

}  // namespace sheaf::cuda
