// runtime/jit.hpp — automatic compilation of pure functions (SPEC §6.2–6.4).
// A call of a named user function with tensor arguments looks up an executable for its
// specialization key (argument tree structure, dtypes, shapes, static values); on a miss the
// function is traced, optimised and kept in a per-function LRU of kLruSize entries, so
// alternating shapes never retrace. A trace that aborts (effects, data-dependent control flow)
// is remembered with its reason and the call is interpreted. Int and float arguments are
// traced as weak rank-0 inputs; when a function needs one of them statically (a shape, a loop
// count), it is retraced once with scalars as part of the key, and stays so.
#pragma once
#include <chrono>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cpu/program.hpp"
#include "backend/cuda/program.hpp"
#include "backend/ref/executor.hpp"
#include "eval/hooks.hpp"
#include "io/disk_cache.hpp"
#include "trace/tracer.hpp"
#include "value/function.hpp"

namespace sheaf {

class Interp;

// Where compiled functions run: the reference executor, native code from the CPU backend, or
// kernels on a GPU (Jit::gpu) from the CUDA backend.
enum class Device { Ref, Cpu, Cuda };

struct Executable {
  ir::Graph graph;  // optimised
  ref::Plan plan;
  std::shared_ptr<cpu::Program> native;  // the CPU backend's build; null: runs on the reference executor
  std::shared_ptr<cuda::Program> gpu;    // the CUDA backend's build (instead of native)
  trace::ResultTree result;
  bool guarded = false;     // the last result is the guard flag (trace::Traced::guarded)
  size_t traced_nodes = 0;  // before optimisation
};

struct JitStats {
  uint64_t calls = 0, hits = 0, misses = 0, traces = 0, fallbacks = 0;
  uint64_t guard_reruns = 0;  // compiled calls whose guard flag failed, interpreted again to report
  uint64_t inputs = 0;  // host tensors passed to executables (no copy on the host backend)
  double flatten_s = 0, call_s = 0, output_s = 0, trace_s = 0;
  uint64_t built = 0, loaded = 0, ref_runs = 0;   // CPU backend: compiled now, from __sheaf__, on ref instead
  double prepare_s = 0, compile_s = 0, load_s = 0;  // fusion + rendering, the C++ compiler, cache checks + dlopen
  std::vector<std::string> fallback_reasons;  // "f: reason" (first occurrence per function and reason)
  cpu::RunProfile cpu;     // CPU backend: where its calls' time went (with `profile`)
  cuda::ProgramStats gpu;  // CUDA backend: what its programs did
  uint64_t gpu_built = 0;
  double gpu_build_s = 0;
};

// The interpreter's CallCompiler (eval/hooks.hpp), made for each Interp.
class Jit final : public CallCompiler {
 public:
  static constexpr size_t kLruSize = 8;
  bool profile = false;  // time the phases of every dispatch (--jit-profile)
  Device device = Device::Ref;
  std::shared_ptr<cuda::Allocator> gpu;  // Device::Cuda: the GPU's memory (and through it the GPU)
  cuda::ProgramOptions gpu_options;      // cache_dir is set by cache_beside
  // Set when no device was asked for: the first compile calls it once, and a GPU it returns
  // makes the device Device::Cuda (SPEC §8: cuda when usable); null leaves the device as it is.
  std::function<std::shared_ptr<cuda::Allocator>()> find_gpu;
  std::optional<DiskCache> cache;  // __sheaf__/ beside the entry file (CPU backend); none: nothing is cached
  // Caches compiled code in `dir`/__sheaf__/ (SPEC §7.9): the entry file's directory.
  void cache_beside(const std::string& dir);
  // Sees every call that reaches the JIT before dispatch (`sheaf build --trace-with`).
  std::function<void(const Value& fn, std::span<const Value> args)> observe;

  // The result of `fn` on `args` through compiled code, or nullopt when the call must be
  // interpreted (no tensor argument, or tracing failed for this key).
  std::optional<Value> call(Interp& in, const Value& fn, std::span<const Value> args, SrcLoc site) override;

  // Drops every compiled specialization: a global they inlined was redefined (a user function
  // replacing a builtin or one of nn/optim's).
  void forget_compiled() override { fns_.clear(); }

  const JitStats& stats() const { return stats_; }
  void report(std::ostream& os) const;  // the --jit-profile text (SPEC §9.5)

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const Executable> exe;  // null: interpreted, see reason
    std::string reason;
    std::vector<Value> pinned;  // objects the key refers to by identity (kept alive)
  };
  struct FnCache {
    Value fn;  // keeps the function alive while it is cached
    bool static_scalars = false;
    std::vector<Entry> lru;  // most recently used first
  };
  std::unordered_map<const Obj*, FnCache> fns_;
  JitStats stats_;
  std::string key_;               // scratch buffers reused between calls
  std::vector<Tensor> inputs_;

  bool warned_no_compiler_ = false;

  Entry compile(Interp& in, FnCache& c, const Value& fn, std::span<const Value> args, SrcLoc site);
  // The CPU backend's program for `exe` (from __sheaf__/ or compiled now); null when it cannot be
  // had (no compiler and no cache), after a one-line notice.
  std::shared_ptr<cpu::Program> build_native(const Interp& in, const Value& fn, const Executable& exe);
  // The CUDA backend's program for `exe`; null (after a one-line notice) when it cannot be built.
  std::shared_ptr<cuda::Program> build_gpu(const Value& fn, const Executable& exe);
};

// The JIT of an interpreter (the only CallCompiler there is); null with --no-jit.
Jit* jit_of(const Interp& in);

// Makes every interpreter get a Jit (eval_hooks.make_compiler; init_runtime).
void install_jit();

}  // namespace sheaf
