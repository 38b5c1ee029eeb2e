// backend/backend.hpp — what the JIT compiles for: one Backend interface, implemented by the
// reference executor (backend/ref_backend.hpp), the CPU backend (backend/cpu/cpu_backend.hpp) and
// the CUDA backend (backend/cuda/cuda_backend.hpp). runtime/device_choice.cpp makes the one a
// device name asks for; the JIT (runtime/jit.cpp) holds it and knows no backend by name.
//   compile  an optimised graph → a CompiledGraph; a native backend that cannot build it says so
//            in a one-line notice and returns the graph on the reference executor instead
//   run      CompiledGraph::run, once per compiled call (the hot path: one virtual call)
//   report   the backend's lines of --jit-profile, from the statistics it kept
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ir.hpp"
#include "tensor/tensor.hpp"

namespace sheaf {

// A graph compiled by a backend, ready to run. It may refer to the graph it was compiled from,
// which must outlive it, and counts its runs in its backend's statistics (the backend outlives
// it too). Not re-entrant: one run at a time.
class CompiledGraph {
 public:
  virtual ~CompiledGraph() = default;
  // Results in the graph's result order; `inputs` in parameter order. With `profile`
  // (--jit-profile) a backend may also time the run.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs, bool profile) = 0;
};

// What the JIT tells a backend about the function whose graph it compiles.
struct CompileContext {
  const std::string& name;  // the function ("loss-vag")
  // Its specialization key (argument structure, dtypes, shapes, static scalars), and what else
  // its compiled code depends on (guards, the job's world size): an artifact cached on disk is
  // keyed by cache_key(the backend's own part).
  std::string_view key, setting;
  // The function's content hash and code hash (runtime/content_hash.hpp), asked only by backends
  // that cache artifacts on disk.
  std::function<std::string()> content_hash, code_hash;

  std::string cache_key(std::string_view backend_part) const {
    return std::string(key).append("|").append(backend_part).append(setting);
  }
};

// Inputs of the compiled calls, as the dispatch profile's "buffers" line counts them: a hit needed
// no copy (a host tensor on a host backend, a tensor already on the GPU, a reused upload).
struct BufferCounts {
  uint64_t hits = 0, misses = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;  // "ref", "cpu", "cuda": the device name that asks for it
  // `g` (optimised; it outlives the result) compiled for this backend. Throws SheafError only when
  // the program must stop (or when a *_STRICT variable asks a failed build to be an error).
  virtual std::unique_ptr<CompiledGraph> compile(const ir::Graph& g, const CompileContext& c) = 0;
  // `host_inputs` host tensors were passed to compiled calls in all.
  virtual BufferCounts buffers(uint64_t host_inputs) const { return {host_inputs, 0}; }
  // The backend's lines of the --jit-profile text, after the JIT's; `dispatch_s` is the JIT's
  // time in compiled calls, flattening and results included.
  virtual void report(std::ostream& os, double dispatch_s) const = 0;
};

// A file-name-safe spelling of a function name (dumps and cached artifacts).
std::string file_safe_name(const std::string& name);

}  // namespace sheaf
