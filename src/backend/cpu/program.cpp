// backend/cpu/program.cpp — running a compiled function (see program.hpp).
#include "backend/cpu/program.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "backend/canonical_dots.hpp"
#include "backend/cpu/lowering.hpp"
#include "backend/merge_dots.hpp"
#include "backend/cpu/parallel.hpp"
#include "backend/ref/executor.hpp"
#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "base/malloc_policy.hpp"
#include "passes/composites.hpp"
#include "tensor/blas.hpp"

namespace sheaf::cpu {

using fusion::StepKind;

const LoopBuffers& Unit::loop(int32_t step) const {
  for (const auto& [st, l] : loops)
    if (st == step) return l;
  throw SheafError("internal: no loop buffers for this step");
}

namespace {

int64_t aligned(int64_t bytes) { return (std::max<int64_t>(bytes, 1) + 63) / 64 * 64; }

// Appends the unit of `g`, then (depth-first) the units of the regions of its While steps.
// `sites`: where g's composites were expanded (the function's own graph; its regions have none).
void add_unit(const ir::Graph& g, Prepared& p, const passes::CompositeSites* sites) {
  const size_t u = p.units.size();
  p.units.emplace_back();
  Unit& unit = p.units.back();
  unit.graph = &g;
  unit.schedule = fusion::fuse(g, {.epilogues = {.bias = true}, .composites = sites});
  unit.memory = fusion::plan_memory(g, unit.schedule);
  unit.table_base = p.slots;
  unit.slots = unit.memory.slots;
  unit.arena_base = p.arena_bytes;
  p.arena_bytes += aligned(unit.memory.arena_bytes);
  for (size_t i = 0; i < unit.schedule.steps.size(); ++i) {
    const fusion::Step& st = unit.schedule.steps[i];
    if (st.kind != StepKind::While) continue;
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    LoopBuffers l;
    l.slot = unit.slots;
    for (int32_t k = 0; k < n.nout; ++k) {
      bool invariant = fusion::loop_invariant(n, static_cast<size_t>(k));
      l.arena_offset.push_back(invariant ? -1 : p.arena_bytes);
      const ir::Type& t = g.type(n.out + k);
      if (!invariant) p.arena_bytes += aligned(shape_numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype)));
      ++unit.slots;
    }
    unit.loops.emplace_back(static_cast<int32_t>(i), std::move(l));
  }
  p.slots += unit.slots;
  for (size_t j = 0; j < p.units[u].loops.size(); ++j) {
    const fusion::Step& st = p.units[u].schedule.steps[static_cast<size_t>(p.units[u].loops[j].first)];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    p.units[u].loops[j].second.cond_unit = static_cast<int32_t>(p.units.size());
    add_unit(*n.attrs.regions[0], p, nullptr);
    p.units[u].loops[j].second.body_unit = static_cast<int32_t>(p.units.size());
    add_unit(*n.attrs.regions[1], p, nullptr);
  }
}

}  // namespace

Prepared prepare(const ir::Graph& g) {
  Prepared p;
  // Composites expand last, so that their sites name the compiled graph's values (attention
  // chains are found around them) — but for a graph whose expansions reduce in f16/bf16, which
  // are widened after them, and whose attention therefore runs unfused.
  passes::Lowered lowered = passes::lower_composites(fusion::canonical_dots(fusion::merge_dots(widen_halves(g))), true);
  const bool halves = reduces_halves(lowered.graph);
  p.graph = std::make_shared<const ir::Graph>(halves ? widen_halves(lowered.graph) : std::move(lowered.graph));
  add_unit(*p.graph, p, halves ? nullptr : &lowered.sites);
  p.source = render(p.units);
  return p;
}

namespace {



// rt->gemm.
void gemm_rows(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
               int64_t b_cs, float* c, int64_t c_rs) {
  gemm(MatView<const float>{a, m, k, a_rs, a_cs}, MatView<const float>{b, k, n, b_rs, b_cs}, MatView<float>{c, m, n, c_rs, 1});
}

// rt->sgemm.
void sgemm(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
           int64_t b_cs, float* c) {
  gemm_rows(a, m, k, a_rs, a_cs, b, n, b_rs, b_cs, c, n);
}

// Rows [lo, hi) of c (args = {c, bias, n}) set to bias[0..n).
void fill_rows(void* const* args, int64_t lo, int64_t hi) {
  auto* c = static_cast<float*>(args[0]);
  const auto* bias = static_cast<const float*>(args[1]);
  const int64_t n = *static_cast<const int64_t*>(args[2]);
  for (int64_t i = lo; i < hi; ++i) std::copy_n(bias, n, c + i * n);
}

// rt->sgemm_bias: c's rows set to the bias on the loop threads (in place of the BLAS's own
// zeroing of c), then the product accumulated onto them.
void sgemm_bias(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
                int64_t b_cs, float* c, const float* bias) {
  const void* args[] = {c, bias, &n};
  parallel_for(fill_rows, const_cast<void* const*>(args), m, m * n >= kParallelPoints ? blas_threads() : 1);
  gemm(MatView<const float>{a, m, k, a_rs, a_cs}, MatView<const float>{b, k, n, b_rs, b_cs}, MatView<float>{c, m, n, n, 1}, true);
}

// rt->parallel: a loop's outermost range in as many parts as the products get threads.
void run_parallel(void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) { parallel_for(fn, args, n, blas_threads()); }

// One part [lo, hi) of rt->sgemm_batch's products: args = {a, b, c, layout}; each product in
// blocks for the BLAS's small-matrix kernels (tensor/blas.hpp: small_product_blocks).
void batch_part(void* const* args, int64_t lo, int64_t hi) {
  const auto* a = static_cast<const float*>(args[0]);
  const auto* b = static_cast<const float*>(args[1]);
  auto* c = static_cast<float*>(args[2]);
  const auto* l = static_cast<const int64_t*>(args[3]);
  const int64_t rank = l[kBatchRank], m = l[kBatchM], n = l[kBatchN], k = l[kBatchK];
  const int64_t a_rs = l[kBatchARs], a_cs = l[kBatchACs], b_rs = l[kBatchBRs], b_cs = l[kBatchBCs];
  const int64_t *sizes = l + kBatchSizes, *a_strides = sizes + rank, *b_strides = a_strides + rank;
  const ProductBlocks blocks = small_product_blocks(m, n, k, b_cs != 1, blas_small_macs());
  for (int64_t i = lo; i < hi; ++i) {
    int64_t r = i, at = 0, bt = 0;
    for (int64_t d = rank; d-- > 0;) {
      const int64_t t = r % sizes[d];
      r /= sizes[d];
      at += t * a_strides[d], bt += t * b_strides[d];
    }
    gemm_blocks(MatView<const float>{a + at, m, k, a_rs, a_cs}, MatView<const float>{b + bt, k, n, b_rs, b_cs},
                MatView<float>{c + i * m * n, m, n, n, 1}, blocks);
  }
}

// fn over [0, n) in as many parts as the products get threads, the products it asks for on its
// part's thread (SerialBlas); returns that count.
int run_products(void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) {
  const int threads = blas_threads();  // before SerialBlas, which makes it 1
  SerialBlas serial;
  parallel_for(fn, args, n, threads);
  return threads;
}

// rt->parallel_products.
void parallel_products(void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) { run_products(fn, args, n); }

// The batch in parts, each product on its part's thread; returns their count.
int run_batch(const float* a, const float* b, float* c, const int64_t* layout) {
  const void* args[] = {a, b, c, layout};
  return run_products(batch_part, const_cast<void* const*>(args), layout[kBatchCount]);
}

// rt->sgemm_batch.
void sgemm_batch(const float* a, const float* b, float* c, const int64_t* layout) { run_batch(a, b, c, layout); }

// rt->scratch: the thread's tile, 64-byte aligned, grown to a power of two of floats.
float* scratch(int64_t floats) {
  struct Tile {
    float* data = nullptr;
    int64_t size = 0;
    ~Tile() { ::operator delete(data, std::align_val_t{64}); }
  };
  thread_local Tile tile;
  if (tile.size < floats) {
    ::operator delete(tile.data, std::align_val_t{64});
    tile.size = std::bit_ceil(static_cast<uint64_t>(floats));
    tile.data = static_cast<float*>(::operator new(static_cast<size_t>(tile.size) * sizeof(float), std::align_val_t{64}));
  }
  return tile.data;
}

thread_local RunProfile* profiling = nullptr;  // the running call's profile (Program::run); null on loop threads

// rt->sgemm and rt->sgemm_bias, timed (the bias's rows count as the product's time).
void sgemm_bias_timed(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
                      int64_t b_cs, float* c, const float* bias) {
  const int threads = blas_threads();
  const auto t0 = Clock::now();
  if (bias) sgemm_bias(a, m, k, a_rs, a_cs, b, n, b_rs, b_cs, c, bias);
  else sgemm(a, m, k, a_rs, a_cs, b, n, b_rs, b_cs, c);
  profiling->add_product({1, m, k, n, a_cs != 1, b_cs != 1, threads}, seconds_since(t0));
}
void sgemm_timed(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
                 int64_t b_cs, float* c) {
  sgemm_bias_timed(a, m, k, a_rs, a_cs, b, n, b_rs, b_cs, c, nullptr);
}

// The running call's loop sites (Program::loop_sites_) while it is profiled.
thread_local const LoopSites* profiled_loops = nullptr;

// A loop site's call by `run`, timed as a whole on the calling thread, by its site (every call of
// the generated code has one: render exports the task of each).
// Returns the site and the call's seconds.
std::pair<const LoopSiteInfo&, double> time_site(void (*run)(void (*)(void* const*, int64_t, int64_t), void* const*, int64_t),
                                                 void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) {
  const auto t0 = Clock::now();
  run(fn, args, n);
  const double s = seconds_since(t0);
  const LoopSiteInfo& site = profiled_loops->at({reinterpret_cast<const void*>(fn), n});
  LoopTime& t = profiling->by_loop[site.name];
  ++t.calls;
  t.s += s;
  t.bytes += site.bytes;
  return {site, s};
}
void parallel_timed(void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) { time_site(run_parallel, fn, args, n); }
void parallel_products_timed(void (*fn)(void* const*, int64_t, int64_t), void* const* args, int64_t n) {
  const auto [site, s] = time_site(parallel_products, fn, args, n);
  profiling->attention_flops += site.flops;
  profiling->attention_s += s;
  ++profiling->attention_steps;
}

// A loop site as the profile names it: "s20 f32[32x128x1024] add·mul·tanh" (its function,
// iteration space, the distinct ops of its nodes but broadcasts and reshapes, at most kOps), and
// the bytes of the values it reads from other steps (or parameters; a view at most its buffer's)
// and writes.
LoopSiteInfo describe_loop(const Unit& unit, size_t unit_index, const LoopSite& site) {
  constexpr size_t kOps = 6;
  const ir::Graph& g = *unit.graph;
  const fusion::Step& st = unit.schedule.steps[static_cast<size_t>(site.step)];
  const bool attention = st.kind == fusion::StepKind::Attention || st.kind == fusion::StepKind::AttentionGrad;
  std::vector<std::string_view> ops;
  std::vector<int32_t> read;
  if (attention) {  // its products and softmax, not its nodes; what it reads from other steps
    ops.push_back(st.kind == fusion::StepKind::Attention ? "attention" : "attention gradient");
    read = fusion::attention_reads(st.attention, st.kind == fusion::StepKind::AttentionGrad);
  }
  for (size_t k = 0; !attention && k < st.nodes.size(); ++k) {
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[k])];
    const std::string_view op = n.op == ir::Op::Unary    ? ir::unary_name(n.attrs.unary)
                                : n.op == ir::Op::Binary ? ir::binary_name(n.attrs.binary)
                                : n.op == ir::Op::Reduce ? ir::reduce_name(n.attrs.reduce)
                                                         : ir::op_name(n.op);
    if (n.op != ir::Op::BroadcastInDim && n.op != ir::Op::Reshape && std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    for (int32_t u : n.in)
      if (!fusion::computes(unit.schedule, u, site.step) && std::find(read.begin(), read.end(), u) == read.end()) read.push_back(u);
  }
  auto bytes_of = [&](int32_t v) { return static_cast<double>(shape_numel(g.type(v).shape) * static_cast<int64_t>(dtype_size(g.type(v).dtype))); };
  double bytes = 0;
  for (int32_t v : read) {  // a view (a broadcast row, a slice) reads at most its buffer
    const std::optional<fusion::View>& w = unit.schedule.view[static_cast<size_t>(v)];
    bytes += w ? std::min(bytes_of(v), bytes_of(w->buffer)) : bytes_of(v);
  }
  for (int32_t v : st.outputs) bytes += bytes_of(v);
  std::string what;
  for (size_t k = 0; k < ops.size() && k < kOps; ++k) what += (k ? "·" : "") + std::string(ops[k]);
  if (ops.size() > kOps) what += "…";
  const std::string function = unit_index == 0 ? fmt::format("s{}", site.step) : fmt::format("u{}_s{}", unit_index, site.step);
  const DType dt = st.outputs.empty() ? DType::F32 : g.type(st.outputs[0]).dtype;
  double flops = 0;
  if (attention) {  // the forward's Q·Kᵀ and P·V; the gradient's dO·Vᵀ, Pᵀ·dO, dS·K and dSᵀ·Q
    const fusion::AttentionLayout& a = st.attention;
    const double pairs = static_cast<double>(shape_numel(a.batch) * a.t * a.s);
    flops = 2 * pairs * static_cast<double>(a.d + a.dv) * (st.kind == fusion::StepKind::Attention ? 1 : 2);
  }
  return {fmt::format("{} {} {}", function, ir::type_str(ir::Type{dt, st.space}), what), bytes, flops};
}

// The batch timed as a whole on the calling thread.
void sgemm_batch_timed(const float* a, const float* b, float* c, const int64_t* layout) {
  const auto t0 = Clock::now();
  const int threads = run_batch(a, b, c, layout);
  profiling->add_product(
      {layout[kBatchCount], layout[kBatchM], layout[kBatchK], layout[kBatchN], layout[kBatchACs] != 1, layout[kBatchBCs] != 1, threads},
      seconds_since(t0));
}

std::byte* allocate_arena(int64_t bytes) {
  return static_cast<std::byte*>(::operator new(static_cast<size_t>(std::max<int64_t>(bytes, 64)), std::align_val_t{64}));
}
void free_arena(std::byte* p) { ::operator delete(p, std::align_val_t{64}); }

}  // namespace

void RunProfile::add_product(const ProductShape& shape, double seconds) {
  const double flops = 2.0 * static_cast<double>(shape.batch * shape.m * shape.n * shape.k);
  products += static_cast<uint64_t>(shape.batch);
  product_s += seconds;
  product_flops += flops;
  ProductTime& t = by_shape[shape];
  ++t.calls;
  t.s += seconds;
  t.flops += flops;
}

Program::Program(Prepared p, Loaded lib)
    : p_(std::move(p)), g_(*p_.graph), lib_(lib), arena_(allocate_arena(p_.arena_bytes), free_arena), spare_(g_.results.size(), 3) {
  keep_freed_memory();
  rt_ = Runtime{sgemm, host_step, this, run_parallel, nullptr, sgemm_batch, sgemm_bias, parallel_products, gemm_rows, scratch};
  table_.assign(static_cast<size_t>(p_.slots), nullptr);
  for (const Unit& u : p_.units) {
    void** t = table_.data() + u.table_base;
    std::byte* arena = arena_.get() + u.arena_base;
    const fusion::MemoryPlan& m = u.memory;
    for (const ir::Node& n : u.graph->nodes)
      if (n.op == ir::Op::Constant) t[m.slot[n.out]] = const_cast<std::byte*>(n.attrs.value.bytes());
    for (size_t v = 0; v < m.arena_offset.size(); ++v)
      if (m.arena_offset[v] >= 0) t[m.slot[v]] = arena + m.arena_offset[v];
    for (const auto& [step, l] : u.loops)
      for (size_t k = 0; k < l.arena_offset.size(); ++k)
        if (l.arena_offset[k] >= 0) t[l.slot + static_cast<int32_t>(k)] = arena_.get() + l.arena_offset[k];
  }
  const fusion::Schedule& s = p_.units[0].schedule;
  for (size_t i = 0; i < g_.results.size(); ++i) {
    int32_t r = g_.results[i], st = s.step_of[r];
    first_.push_back(static_cast<size_t>(std::find(g_.results.begin(), g_.results.end(), r) - g_.results.begin()));
    written_.push_back(st >= 0 && s.steps[static_cast<size_t>(st)].kind != StepKind::Host);
  }
}

Program::~Program() {
  if (lib_.handle) dlclose(lib_.handle);
}

void Program::host_step(void* self, int32_t unit, int32_t step, void** buffers) {
  const auto t0 = Clock::now();
  static_cast<Program*>(self)->run_host_step(unit, step, buffers);
  if (profiling) {
    profiling->host_s += seconds_since(t0);
    ++profiling->host_steps;
  }
}

// The node's operands as tensors over the buffers (no copy), its results from the reference
// kernels; a result that shares an operand's memory is copied (the buffer may be reused). Inside a
// loop region the outputs of the previous iteration are released.
void Program::run_host_step(int32_t unit_index, int32_t step, void** buffers) {
  const Unit& unit = p_.units[static_cast<size_t>(unit_index)];
  const ir::Graph& g = *unit.graph;
  const fusion::Schedule& s = unit.schedule;
  const ir::Node& n = g.nodes[static_cast<size_t>(s.steps[static_cast<size_t>(step)].nodes[0])];
  std::vector<Tensor> in;
  for (int32_t u : n.in) {
    const fusion::View& w = fusion::read_view(s, u, step);
    const ir::Type& t = g.type(u);
    auto* p = static_cast<std::byte*>(buffers[unit.memory.slot[w.buffer]]) + w.offset * static_cast<int64_t>(dtype_size(t.dtype));
    in.push_back(Tensor::wrap(t.dtype, t.shape, std::shared_ptr<std::byte>(p, [](std::byte*) {})));
  }
  std::vector<Tensor> out = ref::run_node(g, n, in);
  for (int32_t k = 0; k < n.nout; ++k) {
    Tensor& r = out[static_cast<size_t>(k)];
    for (const Tensor& x : in)
      if (r.nbytes() && r.bytes() < x.bytes() + x.nbytes() && x.bytes() < r.bytes() + r.nbytes()) {
        Tensor copy = Tensor::empty(r.dtype(), r.shape());
        std::copy_n(r.bytes(), r.nbytes(), copy.mutable_bytes());
        r = copy;
        break;
      }
    buffers[unit.memory.slot[n.out + k]] = r.mutable_bytes();
    auto same = std::find_if(held_.begin(), held_.end(), [&](const Held& h) { return h.unit == unit_index && h.value == n.out + k; });
    if (same != held_.end()) same->t = std::move(r);
    else held_.push_back({unit_index, n.out + k, std::move(r)});
  }
}

const LoopSites& Program::loop_sites() {
  if (loop_sites_.empty() && lib_.loop_tasks)
    for (size_t k = 0; k < p_.source.loop_sites.size(); ++k) {
      const LoopSite& site = p_.source.loop_sites[k];
      const auto u = static_cast<size_t>(site.unit);
      loop_sites_.try_emplace({lib_.loop_tasks[k], site.outer}, describe_loop(p_.units[u], u, site));
    }
  return loop_sites_;
}

Tensor Program::result_buffer(size_t position, const ir::Type& t) {
  constexpr size_t kRecycleBytes = 64 * 1024;  // smaller ones come from malloc's fast path
  const auto bytes = static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
  return Tensor::wrap(t.dtype, t.shape,
                      spare_.take(position, [&] { return Tensor::empty(t.dtype, t.shape).storage(); }, bytes >= kRecycleBytes));
}

std::vector<Tensor> Program::run(std::span<const Tensor> args, RunProfile* profile) {
  const fusion::MemoryPlan& m = p_.memory();
  static_assert(sizeof(std::atomic<bool>) == sizeof(bool) && std::atomic<bool>::is_always_lock_free);
  rt_.stop = reinterpret_cast<const bool*>(&stop_flag());  // read with __atomic_load_n by the generated code
  buffers_ = table_;
  held_.clear();
  for (size_t i = 0; i < g_.params.size(); ++i)
    buffers_[m.slot[g_.params[i]]] = const_cast<std::byte*>(args[i].bytes());
  std::vector<Tensor> results(g_.results.size());
  for (size_t i = 0; i < g_.results.size(); ++i) {
    if (!written_[i] || first_[i] != i) continue;
    int32_t r = g_.results[i];
    results[i] = result_buffer(i, g_.type(r));
    buffers_[m.slot[r]] = results[i].mutable_bytes();
  }
  if (profile) {
    profiling = profile;
    Runtime timed = rt_;
    timed.sgemm = sgemm_timed;
    timed.sgemm_batch = sgemm_batch_timed;
    timed.sgemm_bias = sgemm_bias_timed;
    timed.parallel = parallel_timed;
    timed.parallel_products = parallel_products_timed;
    profiled_loops = &loop_sites();
    const auto t0 = Clock::now();
    lib_.entry(&timed, buffers_.data());
    profile->entry_s += seconds_since(t0);
    ++profile->calls;
    profiling = nullptr;
    profiled_loops = nullptr;
  } else {
    lib_.entry(&rt_, buffers_.data());
  }
  for (size_t i = 0; i < g_.results.size(); ++i) {
    int32_t r = g_.results[i];
    if (first_[i] != i) {
      results[i] = results[first_[i]];
    } else if (!written_[i]) {
      const ir::Node& n = g_.producer(r);
      if (n.op == ir::Op::Parameter) results[i] = args[static_cast<size_t>(n.attrs.index)];
      else if (n.op == ir::Op::Constant) results[i] = n.attrs.value;
      else
        for (const Held& h : held_)
          if (h.unit == 0 && h.value == r) results[i] = h.t;
    }
  }
  held_.clear();
  return results;
}

}  // namespace sheaf::cpu
