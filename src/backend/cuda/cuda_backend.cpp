// backend/cuda/cuda_backend.cpp — the CUDA backend's builds, runs and --jit-profile lines
// (cuda_backend.hpp).
#include "backend/cuda/cuda_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <ostream>

#include <fmt/format.h>

#include "backend/cuda/lt_tuning.hpp"
#include "backend/ref_backend.hpp"
#include "base/clock.hpp"
#include "base/error.hpp"
#include "io/atomic_write.hpp"

namespace sheaf::cuda {
namespace {

// A program on the GPU; its runs are counted in the backend's statistics.
class OnGpu final : public CompiledGraph {
 public:
  OnGpu(const ir::Graph& g, std::shared_ptr<Allocator> gpu, const ProgramOptions& o, ProgramStats& stats)
      : program_(g, std::move(gpu), o), stats_(stats) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool) override { return program_.run(inputs, stats_); }
  const Program& program() const { return program_; }

 private:
  Program program_;
  ProgramStats& stats_;
};

}  // namespace

// The switches of docs/cli.md, read once: SHEAF_CUDA_RENDER (checked here: a bad list is an
// error, not a fallback), SHEAF_CUDA_CAPTURE, SHEAF_CUDA_PROFILE and SHEAF_CUDA_EPILOGUES.
CudaBackend::CudaBackend(std::shared_ptr<Allocator> gpu, ProgramOptions o) : gpu_(std::move(gpu)), options_(std::move(o)) {
  if (const char* r = std::getenv("SHEAF_CUDA_RENDER")) {
    RenderOptions checked;
    override_render_options(checked, options_.render = r);
  }
  if (const char* c = std::getenv("SHEAF_CUDA_CAPTURE")) {
    const std::string_view at(c);
    if (at != "0" && at != "1" && at != "2") throw SheafError(fmt::format("SHEAF_CUDA_CAPTURE: '{}' is not 0, 1 or 2", at));
    options_.capture_at = at[0] - '0';
  }
  options_.profile = options_.profile || std::getenv("SHEAF_CUDA_PROFILE");
  if (const char* e = std::getenv("SHEAF_CUDA_EPILOGUES")) {
    const std::string list = fmt::format(",{},", e);
    auto has = [&](const char* word) { return list.find(fmt::format(",{},", word)) != std::string::npos; };
    options_.epilogues = {.bias = has("bias"), .row_sums = has("row-sums"), .gelu = has("gelu")};
  }
}

std::unique_ptr<CompiledGraph> CudaBackend::compile(const ir::Graph& g, const CompileContext& c) {
  auto t0 = Clock::now();
  try {
    ProgramOptions o = options_;
    o.name = c.name;
    auto p = std::make_unique<OnGpu>(g, gpu_, o, stats_.run);
    if (const char* dump = std::getenv("SHEAF_DUMP_CUDA"))
      write_file_atomic(fmt::format("{}/{}.cu", dump, file_safe_name(c.name)),
                        p->program().kernels().source + "\n/* launch table\n" + p->program().launch_table() + "*/\n");
    ++stats_.built;
    stats_.build_s += seconds_since(t0);
    stats_.build += p->program().build_times();
    return p;
  } catch (const SheafError& e) {
    if (std::getenv("SHEAF_CUDA_STRICT")) throw;
    return reference_fallback("cuda", c.name, e, g);
  }
}

BufferCounts CudaBackend::buffers(uint64_t) const { return {stats_.run.resident + stats_.run.reused, stats_.run.uploaded}; }

void CudaBackend::report(std::ostream& os, double) const {
  const ProgramStats& r = stats_.run;
  const AllocatorStats& m = gpu_->stats();
  std::string tuning = describe_product_tuning(gpu_->device().product_tuning());
  if (const std::string a = gpu_->device().describe_sdpa(); !a.empty()) tuning += (tuning.empty() ? "" : "; ") + a;
  const BuildTimes& b = stats_.build;
  os << fmt::format("  cuda backend: {}; {} built ({:.1f}ms: passes {:.1f}, fusion {:.1f}, kernels {:.1f}, buffers {:.1f}); "
                    "first calls {:.1f}ms on the host; inputs {} on the GPU, {} reused, {} uploaded; {} captures ({:.1f}ms on the host), {} replays, "
                    "{} later calls launch by launch ({:.1f}ms on the host); "
                    "{} host steps; {} in-place loop updates; memory {:.1f} MiB in use (peak {:.1f}), {:.1f} MiB cached, "
                    "{} device allocations ({:.1f}ms){}{}\n",
                    gpu_->device().describe(), stats_.built, stats_.build_s * 1e3, b.passes * 1e3, b.fusion * 1e3, b.kernels * 1e3,
                    b.setup * 1e3, r.first_calls_s * 1e3, r.resident, r.reused, r.uploaded, r.captured, r.capture_s * 1e3, r.replayed,
                    r.queued, r.queue_s * 1e3, r.host_steps,
                    r.in_place, m.in_use / 1048576.0, m.peak_in_use / 1048576.0, m.cached / 1048576.0, m.device_allocations,
                    m.device_s * 1e3, tuning.empty() ? "" : "; ", tuning);
  os << fmt::format("  cuda work: {} kernels touching {:.3f} GB of buffers, {} products of {:.3f} TFLOP and {:.3f} GB; "
                    "moved {:.3f} GB against a floor of {:.3f} GB ({:.2f}x: inputs, results and products' operands "
                    "crossing memory once)\n",
                    r.work.kernels, r.work.kernel_bytes / 1e9, r.work.products, r.work.product_flops / 1e12,
                    r.work.product_bytes / 1e9, r.work.moved_bytes() / 1e9, r.work.floor_bytes / 1e9,
                    r.work.floor_bytes > 0 ? r.work.moved_bytes() / r.work.floor_bytes : 0.0);
  if (!r.times.empty()) os << launch_time_report(r.times);
}

}  // namespace sheaf::cuda
