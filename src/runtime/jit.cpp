// runtime/jit.cpp — dispatch of pure user functions to cached executables (reference backend).
#include "runtime/jit.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <utility>

#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "base/notice.hpp"
#include "dist/comm.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "io/atomic_write.hpp"
#include "io/scratch_dir.hpp"
#include "obs/session.hpp"
#include "passes/passes.hpp"
#include "runtime/content_hash.hpp"
#include "tensor/blas.hpp"
#include "value/handle.hpp"

namespace sheaf {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

}  // namespace

namespace {

// A file-name-safe spelling of a function name.
std::string file_name(const std::string& name) {
  std::string r = name.empty() ? "fn" : name;
  for (char& ch : r)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return r;
}

// How to get past an untrusted artifact or folder when nothing can rebuild it (SPEC §7.9).
std::string untrusted_hint(const DiskCache& cache, DiskCache::Trouble trouble) {
  if (trouble == DiskCache::Trouble::UnsafeFolder)
    return fmt::format("make {0} yours and writable only by you (chmod go-w {0}); then, if you trust its files, sign "
                       "them with your key: sheaf trust {0}",
                       cache.dir());
  return fmt::format("if you trust the files in {0} (say, a copy of your own build), sign them with your key: sheaf trust {0}", cache.dir());
}

// Compiled code depends on the job's world size (all-reduce :mean divides by it).
std::string world_key() { return dist::world_size() > 1 ? fmt::format("|world {}", dist::world_size()) : ""; }

std::string signature(const ir::Graph& g) {
  std::string r;
  for (int32_t p : g.params) r += (r.empty() ? "" : ", ") + ir::type_str(g.type(p));
  return r;
}

}  // namespace

void Jit::cache_beside(const std::string& dir) {
  cache.emplace((std::filesystem::path(dir) / "__sheaf__").string());
  gpu_options.cache_dir = cache->dir();
}

std::shared_ptr<cuda::Program> Jit::build_gpu(const Value& fn, const Executable& exe) {
  auto t0 = Clock::now();
  try {
    cuda::ProgramOptions o = gpu_options;
    o.name = fn.as<FnObj>().name;
    o.profile = o.profile || std::getenv("SHEAF_CUDA_PROFILE");
    if (const char* u = std::getenv("SHEAF_CUDA_POINTS_PER_THREAD")) o.points_per_thread = std::max(1, std::atoi(u));
    auto p = std::make_shared<cuda::Program>(exe.graph, gpu, o);
    if (const char* dump = std::getenv("SHEAF_DUMP_CUDA"))
      write_file_atomic(fmt::format("{}/{}.cu", dump, file_name(fn.as<FnObj>().name)),
                        p->kernels().source + "\n/* launch table\n" + p->launch_table() + "*/\n");
    ++stats_.gpu_built;
    stats_.gpu_build_s += since(t0);
    return p;
  } catch (const SheafError& e) {
    if (std::getenv("SHEAF_CUDA_STRICT")) throw;
    std::string msg = e.what();
    notice(fmt::format("the cuda backend could not build '{}' ({}); it runs on the reference executor", fn.as<FnObj>().name,
                       msg.substr(0, msg.find('\n'))));
    return nullptr;
  }
}

std::shared_ptr<cpu::Program> Jit::build_native(const Interp& in, const Value& fn, const Executable& exe) {
  const std::string& name = fn.as<FnObj>().name;
  auto t0 = Clock::now();
  cpu::Prepared p = cpu::prepare(exe.graph);
  stats_.prepare_s += since(t0);
  if (const char* dump = std::getenv("SHEAF_DUMP_CPP")) write_file_atomic(fmt::format("{}/{}.cpp", dump, file_name(name)), p.source.text);
  std::string guards = in.obs ? obs::session_of(in)->compile_key() : "";
  ArtifactId id{file_name(name), cpu::digest_of(key_ + "|cpu|" + cpu::isa_fingerprint() + guards + world_key()), "cpu", "so", content_hash(in, fn),
                code_hash(in, fn), p.source.digest, signature(exe.graph)};
  const auto& tc = cpu::toolchain();
  std::string compiler = tc ? tc->identity : "";
  std::string problem;
  DiskCache::Trouble trouble = DiskCache::Trouble::None;
  if (cache) {
    auto t1 = Clock::now();
    DiskCache::Found f = cache->find(id, compiler);
    if (!f.bytes.empty()) {
      cpu::Loaded lib = cpu::load_verified_bytes(f.bytes, p.source.digest);
      stats_.load_s += since(t1);
      if (lib.entry) {
        ++stats_.loaded;
        return std::make_shared<cpu::Program>(std::move(p), lib);
      }
      problem = cache->path_of(id) + " " + lib.problem;
    } else {
      problem = f.problem;
      trouble = f.trouble;
      stats_.load_s += since(t1);
    }
  }
  if (!tc) {
    if (trouble == DiskCache::Trouble::Untrusted || trouble == DiskCache::Trouble::UnsafeFolder)
      throw UntrustedArtifact(fmt::format("{}, and no C++ compiler was found to rebuild '{}'", problem, name), {}, untrusted_hint(*cache, trouble));
    ++stats_.ref_runs;
    if (!problem.empty())
      notice(fmt::format("{}, and no C++ compiler was found: '{}' runs on the reference executor", problem, name));
    else if (!warned_no_compiler_)
      notice("no C++ compiler found (PATH, or SHEAF_CXX) and no cached build in __sheaf__/: compiled functions run on the "
             "reference executor");
    warned_no_compiler_ = true;
    return nullptr;
  }
  if (!problem.empty()) notice(problem + "; recompiling");
  auto t2 = Clock::now();
  std::string built;
  try {
    built = scratch_path(".so");
    cpu::compile_shared_object(*tc, p.source.text, built);
  } catch (const SheafError& e) {
    if (std::getenv("SHEAF_CPU_STRICT")) throw;
    ++stats_.ref_runs;
    std::string msg = e.what();
    notice(fmt::format("the cpu backend could not build '{}' ({}); it runs on the reference executor", name,
                       msg.substr(0, msg.find('\n'))));
    return nullptr;
  }
  stats_.compile_s += since(t2);
  ++stats_.built;
  cpu::Loaded lib = cpu::load_shared_object(built, p.source.digest);
  if (!lib.entry) throw SheafError(fmt::format("internal: the build of '{}' {}", name, lib.problem));
  if (cache && trouble != DiskCache::Trouble::UnsafeFolder) {  // find() said why nothing is stored there
    std::string err = cache->store(id, compiler, built);
    if (!err.empty()) notice(fmt::format("cannot write the build of '{}' to {}: {}", name, cache->dir(), err));
  }
  std::filesystem::remove(built);
  return std::make_shared<cpu::Program>(std::move(p), lib);
}

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
    passes::optimize(exe->graph);  // verifies
    exe->plan = ref::plan(exe->graph);
    if (std::getenv("SHEAF_DUMP_IR")) std::cerr << ir::print(exe->graph, true);
    exe->result = std::move(t.result);
    exe->guarded = t.guarded;
    stats_.trace_s += since(t0);  // tracing and the IR passes; the native build is counted apart
    t0 = Clock::now();
    if (find_gpu)
      if (std::shared_ptr<cuda::Allocator> found = std::exchange(find_gpu, nullptr)())
        gpu = std::move(found), device = Device::Cuda;
    if (device == Device::Cpu) exe->native = build_native(in, fn, *exe);
    if (device == Device::Cuda) exe->gpu = build_gpu(fn, *exe);
    e.exe = std::move(exe);
  } catch (UntrustedArtifact& e) {  // not a reason to interpret: the program stops and says how to trust
    if (!e.loc.valid()) e.loc = site;
    throw;
  } catch (const TraceAbort& abort) {
    e.reason = abort.what();
    stats_.trace_s += since(t0);
  } catch (const SheafError& err) {  // the interpreter reproduces (and reports) real errors
    e.reason = err.what();
    stats_.trace_s += since(t0);
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
      if (exe->gpu) results = exe->gpu->run(inputs_, stats_.gpu);
      else results = exe->native ? exe->native->run(inputs_, profile ? &stats_.cpu : nullptr) : ref::run(exe->graph, exe->plan, inputs_);
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
    if (profile) stats_.output_s += since(t2);
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
  if (device == Device::Cuda)  // inputs on the GPU already or reused uploads, against fresh uploads
    os << fmt::format("  buffers: {:9.1f}ms ({:4.1f}%)  [hits: {}, misses: {}]\n", 0.0, 0.0, s.gpu.resident + s.gpu.reused, s.gpu.uploaded);
  else
    os << fmt::format("  buffers: {:9.1f}ms ({:4.1f}%)  [hits: {}, misses: 0]\n", 0.0, 0.0, s.inputs);
  os << fmt::format("  call:    {:9.1f}ms ({:4.1f}%)\n", s.call_s * 1e3, pct(s.call_s));
  os << fmt::format("  output:  {:9.1f}ms ({:4.1f}%)\n", s.output_s * 1e3, pct(s.output_s));
  os << fmt::format("  executables: {} hits, {} misses; {} traces ({:.1f}ms); {} interpreted calls\n", s.hits, s.misses, s.traces,
                    s.trace_s * 1e3, s.fallbacks);
  for (const std::string& r : s.fallback_reasons) os << "    interpreted " << r << "\n";
  if (s.guard_reruns) os << fmt::format("  {} compiled calls failed a traced guard and ran again interpreted\n", s.guard_reruns);
  if (device == Device::Cpu)
    os << fmt::format("  cpu backend: {} built ({:.1f}ms fusion+codegen, {:.1f}ms C++ compiler), {} loaded from {} ({:.1f}ms), {} on the reference executor\n",
                      s.built, s.prepare_s * 1e3, s.compile_s * 1e3, s.loaded, cache ? cache->dir() : "-", s.load_s * 1e3, s.ref_runs);
  if (device != Device::Cuda) os << fmt::format("  f32 products: {}\n", blas_description());
  if (device == Device::Cpu) {
    const auto& tc = cpu::toolchain();
    os << fmt::format("  generated code: {} {}\n", tc ? tc->identity : "no compiler", cpu::compile_flags());
  }
  if (const cpu::RunProfile& c = s.cpu; c.calls) {
    const double loops = std::max(0.0, c.entry_s - c.product_s - c.host_s);
    auto share = [&](double x) { return c.entry_s > 0 ? 100.0 * x / c.entry_s : 0.0; };
    os << fmt::format("  cpu time in {} compiled calls: {:.1f}ms = products {:.1f}ms ({:.0f}%; {} sgemm, {:.2f} GFLOP, {:.1f} GFLOP/s)"
                      " + loops and copies {:.1f}ms ({:.0f}%) + host steps {:.1f}ms ({:.0f}%; {}); dispatch around them {:.1f}ms\n",
                      c.calls, c.entry_s * 1e3, c.product_s * 1e3, share(c.product_s), c.products, c.product_flops / 1e9,
                      c.product_s > 0 ? c.product_flops / c.product_s / 1e9 : 0.0, loops * 1e3, share(loops), c.host_s * 1e3,
                      share(c.host_s), c.host_steps, std::max(0.0, total - c.entry_s) * 1e3);
  }
  if (device == Device::Cuda && gpu) {
    os << fmt::format("  cuda backend: {}; {} built ({:.1f}ms); inputs {} on the GPU, {} reused, {} uploaded; {} captures, {} replays; "
                      "{} host steps; {} in-place loop updates; memory {:.1f} MiB in use (peak {:.1f}), {:.1f} MiB cached\n",
                      gpu->device().describe(), s.gpu_built, s.gpu_build_s * 1e3, s.gpu.resident, s.gpu.reused, s.gpu.uploaded,
                      s.gpu.captured, s.gpu.replayed, s.gpu.host_steps, s.gpu.in_place, gpu->stats().in_use / 1048576.0,
                      gpu->stats().peak_in_use / 1048576.0, gpu->stats().cached / 1048576.0);
    os << fmt::format("  cuda work: {} kernels touching {:.3f} GB of buffers, {} products of {:.3f} TFLOP\n", s.gpu.work.kernels,
                      s.gpu.work.kernel_bytes / 1e9, s.gpu.work.products, s.gpu.work.product_flops / 1e12);
    if (!s.gpu.times.empty()) os << cuda::launch_time_report(s.gpu.times);
  }
}

Jit* jit_of(const Interp& in) { return static_cast<Jit*>(in.jit.get()); }

void install_jit() {
  eval_hooks.make_compiler = [] { return std::unique_ptr<CallCompiler>(std::make_unique<Jit>()); };
}

}  // namespace sheaf
