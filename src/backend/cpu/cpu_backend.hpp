// backend/cpu/cpu_backend.hpp — the CPU backend behind the Backend interface (--device cpu, and
// the default without a usable GPU). A graph is prepared (fusion, memory plan, C++ source:
// program.hpp), then its shared object is taken from the `__sheaf__/` cache (io/disk_cache.hpp)
// when a trusted, current one is there, else compiled by the system compiler and stored there.
// Without a compiler and without a cached build the graph runs on the reference executor, after a
// notice (once per process for the plain case); an untrusted artifact that nothing can rebuild
// stops the program (UntrustedArtifact, with a hint how to trust it).
#pragma once
#include <optional>
#include <string>

#include "backend/backend.hpp"
#include "backend/cpu/program.hpp"
#include "io/disk_cache.hpp"

namespace sheaf::cpu {

struct CpuStats {
  uint64_t built = 0, loaded = 0, ref_runs = 0;     // compiled now, from __sheaf__/, on the reference executor instead
  double prepare_s = 0, compile_s = 0, load_s = 0;  // fusion + rendering, the C++ compiler, cache checks + dlopen
  uint64_t attention_steps = 0;                     // Attention and AttentionGrad steps of the programs prepared
  RunProfile run;                                   // where the compiled calls' time went (with --jit-profile)
};

class CpuBackend final : public Backend {
 public:
  // Caches builds in `cache_dir` (`__sheaf__/` beside the entry file); empty: nothing is cached.
  explicit CpuBackend(const std::string& cache_dir = "");

  std::string_view name() const override { return "cpu"; }
  std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) override;
  void report(std::ostream& os, double dispatch_s) const override;

  const CpuStats& stats() const { return stats_; }

 private:
  std::optional<DiskCache> cache_;
  CpuStats stats_;
  bool warned_no_compiler_ = false;

  // No compiler, and `problem` (if any) why no cached build could be used: a notice, and the
  // reference executor.
  std::unique_ptr<CompiledGraph> without_compiler(const ir::Graph& g, const std::string& name, const std::string& problem,
                                                  DiskCache::Trouble trouble);
};

}  // namespace sheaf::cpu
