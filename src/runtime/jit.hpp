// runtime/jit.hpp — automatic compilation of pure functions (SPEC §6.2–6.4).
// A call of a named user function with tensor arguments looks up an executable for its
// specialization key (argument tree structure, dtypes, shapes, static values); on a miss the
// function is traced, optimised and kept in a per-function LRU of kLruSize entries, so
// alternating shapes never retrace. A trace that aborts (effects, data-dependent control flow)
// is remembered with its reason and the call is interpreted. Int and float arguments are
// traced as weak rank-0 inputs; when a function needs one of them statically (a shape, a loop
// count), it is retraced once with scalars as part of the key, and stays so.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "eval/hooks.hpp"
#include "trace/tracer.hpp"
#include "value/function.hpp"

namespace sheaf {

class Interp;

struct Executable {
  ir::Graph graph;  // optimised
  std::unique_ptr<CompiledGraph> compiled;  // by the JIT's backend (refers to graph, declared before it)
  trace::ResultTree result;
  bool guarded = false;     // the last result is the guard flag (trace::Traced::guarded)
  size_t traced_nodes = 0;  // before optimisation
};

struct JitStats {
  uint64_t calls = 0, hits = 0, misses = 0, traces = 0, fallbacks = 0;
  uint64_t guard_reruns = 0;  // compiled calls whose guard flag failed, interpreted again to report
  uint64_t inputs = 0;  // host tensors passed to executables
  double flatten_s = 0, call_s = 0, output_s = 0, trace_s = 0;  // trace_s: tracing and the IR passes, not the backend's build
  double passes_s = 0;                                          // … of which the IR passes
  std::vector<std::string> fallback_reasons;  // "f: reason" (first occurrence per function and reason)
};

// The interpreter's CallCompiler (eval/hooks.hpp), made for each Interp.
class Jit final : public CallCompiler {
 public:
  static constexpr size_t kLruSize = 8;
  Jit();
  bool profile = false;  // time the phases of every dispatch (--jit-profile)
  // What compiled functions run on: the reference executor until runtime/device_choice.hpp
  // chooses (the CLI, the Python binding), or a test sets one. Set before the first compiled
  // call: compiled graphs count their runs in the backend that made them.
  std::unique_ptr<Backend> backend;
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

  Entry compile(Interp& in, FnCache& c, const Value& fn, std::span<const Value> args, SrcLoc site);
};

// The JIT of an interpreter (the only CallCompiler there is); null with --no-jit.
Jit* jit_of(const Interp& in);

// Makes every interpreter get a Jit (eval_hooks.make_compiler; init_runtime).
void install_jit();

}  // namespace sheaf
