// runtime/jit.cpp — dispatch of pure user functions to cached executables, compiled by the JIT's
// backend (backend/backend.hpp).
#include "runtime/jit.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "backend/ref_backend.hpp"
#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "dist/comm.hpp"
#include "eval/constant_calls.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "io/disk_cache.hpp"
#include "obs/session.hpp"
#include "passes/passes.hpp"
#include "runtime/content_hash.hpp"
#include "value/handle.hpp"

namespace sheaf {
namespace {



// SPEC §7.3: a data handle passed to a compiled call is materialized.
Value materialized(const Value& v, SrcLoc site) {
  return map_leaves(v, [&](const Value& leaf) { return leaf.is(Kind::Handle) ? leaf.as<HandleObj>().materialize(site) : leaf; });
}

bool has_scalar_args(std::span<const Value> args) {
  return std::any_of(args.begin(), args.end(), [](const Value& a) { return any_leaf(a, [](const Value& v) { return v.is_number(); }); });
}

void pin_objects(const Value& v, std::vector<Value>& out) {
  if (v.is_list()) {
    for (const Value& x : v.as_list().items) pin_objects(x, out);
  } else if (v.is(Kind::Dict)) {
    for (const auto& [k, x] : v.as_dict().entries) pin_objects(x, out);
  } else if (v.is_callable() || v.is(Kind::Slice)) {
    out.push_back(v);
  }
}

// Compiled code depends on the job's world size (all-reduce :mean divides by it).
std::string world_key() { return dist::world_size() > 1 ? fmt::format("|world {}", dist::world_size()) : ""; }

}  // namespace

Jit::Jit() : backend(std::make_unique<RefBackend>()) {}

Jit::Entry Jit::compile(Interp& in, FnCache& c, const Value& fn, std::span<const Value> args, SrcLoc site) {
  const std::string& name = fn.as<FnObj>().name;
  Entry e;
  for (const Value& a : args) pin_objects(a, e.pinned);
  auto t0 = Clock::now();
  ++stats_.traces;
  struct CompileScope {  // `<compile f>` in the profile
    obs::Session* s;
    CompileScope(obs::Session* session, const std::string& fn) : s(session) {
      if (s) s->compile_begin(fn);
    }
    ~CompileScope() {
      if (s) s->compile_end();
    }
  } scope(obs::session_of(in), name);
  try {
    trace::Traced t = trace::trace_call(in, fn, args, site, c.static_scalars);
    auto exe = std::make_shared<Executable>();
    exe->traced_nodes = t.graph.nodes.size();
    exe->graph = std::move(t.graph);
    const auto traced = Clock::now();
    passes::optimize(exe->graph);  // verifies
    stats_.passes_s += seconds_since(traced);
    if (std::getenv("SHEAF_DUMP_IR")) std::cerr << ir::print(exe->graph, true);
    exe->result = std::move(t.result);
    exe->guarded = t.guarded;
    stats_.trace_s += seconds_since(t0);  // tracing and the IR passes; the backend counts its build
    std::string setting = (in.obs ? obs::session_of(in)->compile_key() : "") + world_key();
    CompileContext context{name, key_, setting, [&] { return content_hash(in, fn); }, [&] { return code_hash(in, fn); }};
    exe->compiled = backend->compile(exe->graph, context);
    e.exe = std::move(exe);
  } catch (UntrustedArtifact& e) {  // not a reason to interpret: the program stops and says how to trust
    if (!e.loc.valid()) e.loc = site;
    throw;
  } catch (const TraceAbort& abort) {
    e.reason = abort.what();
    stats_.trace_s += seconds_since(t0);
  } catch (const SheafError& err) {  // the interpreter reproduces (and reports) real errors
    e.reason = err.what();
    stats_.trace_s += seconds_since(t0);
  }
  // Ctrl-C during the trace or the build (a terminal's also stops the compiler, which fails it): a
  // safe point, and neither an executable nor a reason to interpret this function from now on.
  if (in.interrupt.load(std::memory_order_relaxed)) {
    in.interrupt = false;
    throw Interrupted(site);
  }
  if (!e.exe && !c.static_scalars && has_scalar_args(args) && e.reason.rfind("the value of a traced", 0) == 0) {
    // Maybe a scalar argument is needed statically (a shape, a count): retry with scalars in the key.
    c.static_scalars = true;
    return Entry{};  // the caller recomputes the key and retries
  }
  if (!e.exe) {
    std::string line = name + ": " + e.reason;
    if (std::find(stats_.fallback_reasons.begin(), stats_.fallback_reasons.end(), line) == stats_.fallback_reasons.end())
      stats_.fallback_reasons.push_back(std::move(line));
  }
  return e;
}

std::optional<Value> Jit::call(Interp& in, const Value& fn, std::span<const Value> args, SrcLoc site) {
  // One walk per argument: does the call carry tensors (or data handles, SPEC §7.3: materialized)?
  bool any = false, handles = false;
  for (const Value& a : args)
    any_leaf(a, [&](const Value& v) {
      any = any || v.is(Kind::Tensor) || v.is(Kind::Handle);
      handles = handles || v.is(Kind::Handle);
      return false;
    });
  std::vector<Value> read;
  if (handles) {
    for (const Value& a : args) read.push_back(materialized(a, site));
    args = read;
  }
  if (!any) return std::nullopt;
  if (observe) observe(fn, args);
  ++stats_.calls;
  auto t0 = profile ? Clock::now() : Clock::time_point{};
  FnCache& c = fns_[fn.raw()];
  if (c.fn.is_nil()) c.fn = fn;
  for (int attempt = 0; attempt < 2; ++attempt) {
    key_.clear();
    trace::flatten_args(args, c.static_scalars, key_, inputs_);
    auto it = std::find_if(c.lru.begin(), c.lru.end(), [&](const Entry& e) { return e.key == key_; });
    if (it != c.lru.end()) {
      ++stats_.hits;
      if (it != c.lru.begin()) std::rotate(c.lru.begin(), it, it + 1);
    } else {
      ++stats_.misses;
      bool was_static = c.static_scalars;
      Entry e = compile(in, c, fn, args, site);
      if (profile) t0 = Clock::now();  // tracing is reported on its own line, not as flattening
      if (!was_static && c.static_scalars) continue;  // retry with static scalars
      e.key = key_;
      c.lru.insert(c.lru.begin(), std::move(e));
      if (c.lru.size() > kLruSize) c.lru.pop_back();
    }
    const Entry& e = c.lru.front();
    if (!e.exe) {
      ++stats_.fallbacks;
      return std::nullopt;
    }
    std::shared_ptr<const Executable> exe = e.exe;
    stats_.inputs += inputs_.size();
    auto t1 = profile || in.obs ? Clock::now() : Clock::time_point{};
    if (profile) stats_.flatten_s += std::chrono::duration<double>(t1 - t0).count();
    std::vector<Tensor> results;
    {
      StopFlagScope stop(&in.interrupt);  // compiled loops poll it (Ctrl-C)
      results = exe->compiled->run(inputs_, profile);
    }
    if (in.interrupt.load(std::memory_order_relaxed)) [[unlikely]] {  // a loop may have stopped early: drop the results
      inputs_.clear();
      in.interrupt = false;
      throw Interrupted(site);
    }
    auto t2 = profile || in.obs ? Clock::now() : Clock::time_point{};
    double run_s = std::chrono::duration<double>(t2 - t1).count();
    if (profile) stats_.call_s += run_s;
    if (exe->guarded) {  // a guard traced inside failed: interpreted, the check reports
      bool passed = trace::guards_passed(results.back());
      results.pop_back();
      if (!passed) {
        ++stats_.guard_reruns;
        return std::nullopt;
      }
    }
    if (in.obs) obs::session_of(in)->compiled_run(std::shared_ptr<const ir::Graph>(exe, &exe->graph), inputs_, run_s);
    inputs_.clear();  // holding the arguments until the next call would keep a training loop's previous parameters alive
    Value r = trace::rebuild(exe->result, results);
    if (profile) stats_.output_s += seconds_since(t2);
    return r;
  }
  return std::nullopt;
}

void Jit::report(std::ostream& os) const {
  const JitStats& s = stats_;
  double total = s.flatten_s + s.call_s + s.output_s;
  auto pct = [&](double x) { return total > 0 ? 100.0 * x / total : 0.0; };
  os << fmt::format("Dispatch profile ({} calls, {:.1f}ms total):\n", s.calls, total * 1e3);
  os << fmt::format("  flatten: {:9.1f}ms ({:4.1f}%)\n", s.flatten_s * 1e3, pct(s.flatten_s));
  BufferCounts b = backend->buffers(s.inputs);
  os << fmt::format("  buffers: {:9.1f}ms ({:4.1f}%)  [hits: {}, misses: {}]\n", 0.0, 0.0, b.hits, b.misses);
  os << fmt::format("  call:    {:9.1f}ms ({:4.1f}%)\n", s.call_s * 1e3, pct(s.call_s));
  os << fmt::format("  output:  {:9.1f}ms ({:4.1f}%)\n", s.output_s * 1e3, pct(s.output_s));
  os << fmt::format("  executables: {} hits, {} misses; {} traces ({:.1f}ms: IR passes {:.1f}; {} builtin calls on known arguments reused); {} interpreted calls\n",
                    s.hits, s.misses, s.traces, s.trace_s * 1e3, s.passes_s * 1e3, constant_calls_reused(), s.fallbacks);
  for (const std::string& r : s.fallback_reasons) os << "    interpreted " << r << "\n";
  if (s.guard_reruns) os << fmt::format("  {} compiled calls failed a traced guard and ran again interpreted\n", s.guard_reruns);
  backend->report(os, total);
}

Jit* jit_of(const Interp& in) { return static_cast<Jit*>(in.jit.get()); }

void install_jit() {
  eval_hooks.make_compiler = [] { return std::unique_ptr<CallCompiler>(std::make_unique<Jit>()); };
}

}  // namespace sheaf
