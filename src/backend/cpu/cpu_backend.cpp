// backend/cpu/cpu_backend.cpp — the CPU backend's builds, runs and --jit-profile lines
// (cpu_backend.hpp).
#include "backend/cpu/cpu_backend.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "backend/ref_backend.hpp"
#include "base/clock.hpp"
#include "base/notice.hpp"
#include "io/atomic_write.hpp"
#include "io/scratch_dir.hpp"

namespace sheaf::cpu {
namespace {

// A program bound to its shared object; its runs are timed into the backend's profile on request.
class OnCpu final : public CompiledGraph {
 public:
  OnCpu(Prepared p, const Loaded& lib, RunProfile& profile) : program_(std::move(p), lib), profile_(profile) {}
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool profile) override {
    return program_.run(inputs, profile ? &profile_ : nullptr);
  }

 private:
  Program program_;
  RunProfile& profile_;
};

// How to get past an untrusted artifact or folder when nothing can rebuild it (SPEC §7.9).
std::string untrusted_hint(const DiskCache& cache, DiskCache::Trouble trouble) {
  if (trouble == DiskCache::Trouble::UnsafeFolder)
    return fmt::format("make {0} yours and writable only by you (chmod go-w {0}); then, if you trust its files, sign "
                       "them with your key: sheaf trust {0}",
                       cache.dir());
  return fmt::format("if you trust the files in {0} (say, a copy of your own build), sign them with your key: sheaf trust {0}", cache.dir());
}

// The parameter types, "f32[4x2], f32[2x8]" (the manifest's readable signature).
std::string signature(const ir::Graph& g) {
  std::string r;
  for (int32_t p : g.params) r += (r.empty() ? "" : ", ") + ir::type_str(g.type(p));
  return r;
}

}  // namespace

CpuBackend::CpuBackend(const std::string& cache_dir) {
  if (!cache_dir.empty()) cache_.emplace(cache_dir);
}

std::unique_ptr<CompiledGraph> CpuBackend::compile(const ir::Graph& g, const CompileContext& c) {
  auto t0 = Clock::now();
  Prepared p = prepare(g);
  stats_.prepare_s += seconds_since(t0);
  for (const Unit& u : p.units)
    stats_.attention_steps += static_cast<uint64_t>(std::count_if(u.schedule.steps.begin(), u.schedule.steps.end(), [](const fusion::Step& st) {
      return st.kind == fusion::StepKind::Attention || st.kind == fusion::StepKind::AttentionGrad;
    }));
  if (const char* dump = std::getenv("SHEAF_DUMP_CPP"))
    write_file_atomic(fmt::format("{}/{}.cpp", dump, file_safe_name(c.name)), p.source.text);
  ArtifactId id{file_safe_name(c.name), digest_of(c.cache_key("cpu|" + isa_fingerprint())), "cpu", "so", c.content_hash(),
                c.code_hash(), p.source.digest, signature(g)};
  const auto& tc = toolchain();
  std::string compiler = tc ? tc->identity : "";
  std::string problem;
  DiskCache::Trouble trouble = DiskCache::Trouble::None;
  if (cache_) {
    auto t1 = Clock::now();
    DiskCache::Found f = cache_->find(id, compiler);
    if (!f.bytes.empty()) {
      Loaded lib = load_verified_bytes(f.bytes, p.source.digest);
      stats_.load_s += seconds_since(t1);
      if (lib.entry) {
        ++stats_.loaded;
        return std::make_unique<OnCpu>(std::move(p), lib, stats_.run);
      }
      problem = cache_->path_of(id) + " " + lib.problem;
    } else {
      problem = f.problem;
      trouble = f.trouble;
      stats_.load_s += seconds_since(t1);
    }
  }
  if (!tc) return without_compiler(g, c.name, problem, trouble);
  if (!problem.empty()) notice(problem + "; recompiling");
  auto t2 = Clock::now();
  std::string built;
  try {
    built = scratch_path(".so");
    compile_shared_object(*tc, p.source.text, built);
  } catch (const SheafError& e) {
    if (std::getenv("SHEAF_CPU_STRICT")) throw;
    ++stats_.ref_runs;
    return reference_fallback("cpu", c.name, e, g);
  }
  stats_.compile_s += seconds_since(t2);
  ++stats_.built;
  Loaded lib = load_shared_object(built, p.source.digest);
  if (!lib.entry) throw SheafError(fmt::format("internal: the build of '{}' {}", c.name, lib.problem));
  if (cache_ && trouble != DiskCache::Trouble::UnsafeFolder) {  // find() said why nothing is stored there
    std::string err = cache_->store(id, compiler, built);
    if (!err.empty()) notice(fmt::format("cannot write the build of '{}' to {}: {}", c.name, cache_->dir(), err));
  }
  std::filesystem::remove(built);
  return std::make_unique<OnCpu>(std::move(p), lib, stats_.run);
}

std::unique_ptr<CompiledGraph> CpuBackend::without_compiler(const ir::Graph& g, const std::string& name, const std::string& problem,
                                                            DiskCache::Trouble trouble) {
  if (trouble == DiskCache::Trouble::Untrusted || trouble == DiskCache::Trouble::UnsafeFolder)
    throw UntrustedArtifact(fmt::format("{}, and no C++ compiler was found to rebuild '{}'", problem, name), {},
                            untrusted_hint(*cache_, trouble));
  ++stats_.ref_runs;
  if (!problem.empty())
    notice(fmt::format("{}, and no C++ compiler was found: '{}' runs on the reference executor", problem, name));
  else if (!warned_no_compiler_)
    notice("no C++ compiler found (PATH, or SHEAF_CXX) and no cached build in __sheaf__/: compiled functions run on the "
           "reference executor");
  warned_no_compiler_ = true;
  return on_reference(g);
}

namespace {

// The entries of `by` (a map to times with a field `s`), the slowest first, as many as take
// `share` of their time and at least `at_least`.
template <typename Map>
std::vector<std::pair<typename Map::key_type, typename Map::mapped_type>> slowest(const Map& by, double share, size_t at_least) {
  std::vector<std::pair<typename Map::key_type, typename Map::mapped_type>> all(by.begin(), by.end());
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.second.s > y.second.s; });
  double total = 0, shown = 0;
  for (const auto& e : all) total += e.second.s;
  size_t count = 0;
  while (count < all.size() && (count < at_least || shown < share * total)) shown += all[count++].second.s;
  all.resize(count);
  return all;
}

// The products' time by shape, the slowest first, as many as take 95 % of the products' time
// and at least the 8 slowest: "  128×(128×64 · (128×64)ᵀ) 2 threads 84 calls 194.7ms 115.8
// GFLOP/s" (batch×, then a · b, ᵀ where an operand is read transposed; the threads it ran on).
void report_product_shapes(std::ostream& os, const RunProfile& r) {
  const auto shapes = slowest(r.by_shape, 0.95, 8);
  if (!shapes.empty()) os << fmt::format("  products by shape ({} of {}, by time):\n", shapes.size(), r.by_shape.size());
  for (const auto& [p, t] : shapes) {
    auto operand = [](int64_t rows, int64_t cols, bool transposed) {
      return transposed ? fmt::format("({}×{})ᵀ", cols, rows) : fmt::format("{}×{}", rows, cols);
    };
    std::string product = operand(p.m, p.k, p.a_transposed) + " · " + operand(p.k, p.n, p.b_transposed);
    if (p.batch > 1) product = fmt::format("{}×({})", p.batch, product);
    os << fmt::format("    {:<32} {:>3} thread{} {:>6} calls {:>9.1f}ms {:>7.1f} GFLOP/s\n", product, p.threads, p.threads == 1 ? " " : "s",
                      t.calls, t.s * 1e3, t.s > 0 ? t.flops / t.s / 1e9 : 0.0);
  }
}

// The loops run on the loop threads by time, the slowest first, as many as take 90 % of their
// time and at least 8: "  s20 f32[32x128x1024] add·mul·tanh  28 calls  67.4ms
// 13.9 GB/s over 33.6 MB" (its step's function, space and ops; GB/s: one pass over the step's
// operands and results in the time, and those bytes: near the rate of a copy of as many bytes
// — in cache or not — a loop is bound by memory).
void report_loops(std::ostream& os, const RunProfile& r) {
  const auto loops = slowest(r.by_loop, 0.9, 8);
  if (loops.empty()) return;
  double total = 0;
  for (const auto& [name, t] : r.by_loop) total += t.s;
  os << fmt::format("  loops on the loop threads: {:.1f}ms; by time ({} of {}):\n", total * 1e3, loops.size(), r.by_loop.size());
  for (const auto& [name, t] : loops)
    os << fmt::format("    {:<56} {:>6} calls {:>9.1f}ms {:>7.1f} GB/s over {:.1f} MB\n", name, t.calls, t.s * 1e3,
                      t.s > 0 ? t.bytes / t.s / 1e9 : 0.0, t.calls > 0 ? t.bytes / static_cast<double>(t.calls) / 1e6 : 0.0);
}

}  // namespace

void CpuBackend::report(std::ostream& os, double dispatch_s) const {
  const CpuStats& s = stats_;
  os << fmt::format("  cpu backend: {} built ({:.1f}ms fusion+codegen, {:.1f}ms C++ compiler), {} loaded from {} ({:.1f}ms), {} on the reference executor\n",
                    s.built, s.prepare_s * 1e3, s.compile_s * 1e3, s.loaded, cache_ ? cache_->dir() : "-", s.load_s * 1e3, s.ref_runs);
  report_host_products(os);
  const auto& tc = toolchain();
  os << fmt::format("  generated code: {} {}\n", tc ? tc->identity : "no compiler", compile_flags());
  if (const RunProfile& r = s.run; r.calls) {
    const double loops = std::max(0.0, r.entry_s - r.product_s - r.attention_s - r.host_s);
    auto share = [&](double x) { return r.entry_s > 0 ? 100.0 * x / r.entry_s : 0.0; };
    const std::string attention =
        r.attention_steps ? fmt::format(" + attention {:.1f}ms ({:.0f}%; {} steps, {:.2f} GFLOP)", r.attention_s * 1e3, share(r.attention_s),
                                        r.attention_steps, r.attention_flops / 1e9)
                          : "";
    os << fmt::format("  cpu time in {} compiled calls: {:.1f}ms = products {:.1f}ms ({:.0f}%; {} sgemm, {:.2f} GFLOP, {:.1f} GFLOP/s){}"
                      " + loops and copies {:.1f}ms ({:.0f}%) + host steps {:.1f}ms ({:.0f}%; {}); dispatch around them {:.1f}ms\n",
                      r.calls, r.entry_s * 1e3, r.product_s * 1e3, share(r.product_s), r.products, r.product_flops / 1e9,
                      r.product_s > 0 ? r.product_flops / r.product_s / 1e9 : 0.0, attention, loops * 1e3, share(loops), r.host_s * 1e3,
                      share(r.host_s), r.host_steps, std::max(0.0, dispatch_s - r.entry_s) * 1e3);
    report_product_shapes(os, r);
    report_loops(os, r);
  }
}

}  // namespace sheaf::cpu
