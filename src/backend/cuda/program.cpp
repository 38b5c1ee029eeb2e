// backend/cuda/program.cpp — running a compiled function on a GPU (see program.hpp).
#include "backend/cuda/program.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <future>
#include <tuple>

#include "backend/merge_dots.hpp"
#include "backend/canonical_dots.hpp"
#include "backend/merge_heads.hpp"
#include "backend/recycled_buffers.hpp"
#include "backend/ref/executor.hpp"
#include "passes/composites.hpp"
#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/interrupt.hpp"

namespace sheaf::cuda {

using fusion::StepKind;

// Types of Program::Impl's members keep external linkage (a type from the anonymous namespace in a
// member is GCC's -Wsubobject-linkage when this file is compiled inside a unity batch).
// A host tensor uploaded for one argument position; `host` tells whether that tensor still lives.
struct Upload {
  const std::byte* bytes = nullptr;
  std::weak_ptr<std::byte> host;
  std::shared_ptr<Buffer> buffer;
};

// A whole call captured for one set of buffers (the pointer table).
struct Captured {
  std::vector<DevicePtr> table;
  std::unique_ptr<Capture> capture;
};

namespace {

size_t bytes_of(const ir::Type& t) { return static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype); }

// The bytes a fused attention moves if each tensor crosses memory once: the forward reads q, k, v
// and writes o (and the stats); the backward reads q, k, v, o, d_o and the stats and writes dq,
// dk, dv.
double sdpa_bytes(const Sdpa& a, bool backward) {
  const double h = static_cast<double>(dtype_size(a.dtype)), bh = static_cast<double>(a.b * a.h);
  const double q = bh * static_cast<double>(a.t * a.d) * h, kv = bh * static_cast<double>(a.s * (a.d + a.dv)) * h,
               o = bh * static_cast<double>(a.t * a.dv) * h, stats = a.grad ? bh * static_cast<double>(a.t) * 4.0 : 0.0;
  return backward ? 2.0 * (q + kv) + 2.0 * o + stats : q + kv + o + stats;
}

// The bytes each launch of `k` moves if every element of its buffers moves once: a kernel's
// distinct argument buffers (of the scratch buffer, the part it uses), a copy's both sides, a
// fill's one, a fused attention's tensors (sdpa_bytes); 0 for products, host steps and loops.
std::vector<double> launch_bytes(const ir::Graph& g, const fusion::MemoryPlan& m, const Kernels& k) {
  std::vector<double> slot_bytes(static_cast<size_t>(m.slots), 0);
  for (size_t v = 0; v < m.slot.size(); ++v)
    if (m.slot[v] >= 0) slot_bytes[static_cast<size_t>(m.slot[v])] = static_cast<double>(bytes_of(g.type(static_cast<int32_t>(v))));
  std::vector<double> bytes;
  for (const Launch& l : k.launches) {
    double b = 0;
    if (l.kind == Launch::Kind::Kernel) {
      std::vector<int32_t> slots = l.slots;
      std::sort(slots.begin(), slots.end());
      slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
      for (int32_t slot : slots) b += slot == m.slots ? static_cast<double>(l.scratch) : slot_bytes[static_cast<size_t>(slot)];
    } else if (l.kind == Launch::Kind::Copy || l.kind == Launch::Kind::Fill) {
      b = (l.kind == Launch::Kind::Copy ? 2.0 : 1.0) * static_cast<double>(l.bytes);
    } else if (l.kind == Launch::Kind::Sdpa) {
      b = sdpa_bytes(k.sdpa[static_cast<size_t>(l.sdpa)], l.backward);
    }
    bytes.push_back(b);
  }
  return bytes;
}

// The step's distinct ops, in order: "convert,binary,reduce".
std::string ops_of(const ir::Graph& g, const fusion::Step& st) {
  std::vector<std::string_view> ops;
  for (int32_t n : st.nodes)
    if (std::string_view op = ir::op_name(g.nodes[static_cast<size_t>(n)].op); std::find(ops.begin(), ops.end(), op) == ops.end())
      ops.push_back(op);
  return fmt::format("{}", fmt::join(ops, ","));
}

double dot_flops(const fusion::DotLayout& d) {
  double batches = 1;
  for (int64_t b : d.batch) batches *= static_cast<double>(b);
  return 2.0 * batches * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
}

// The kernels of `g` rendered with `ro`, their names and their module on `device`, with fused
// attention by the device's library where it takes a chain. The render gives the library every
// chain it accepts on sight (Device::sdpa_accepts, which builds nothing); their plans then build
// (prepare_sdpa: cuDNN compiles its kernels, seconds on a machine's first run) while a second
// thread compiles and loads the own kernels (NVRTC), each thread with the GPU's context current
// (Device's entries make it so). A chain whose plans do not build after all — rare — is refused,
// and the function rendered and loaded again without it.
std::tuple<Kernels, std::vector<std::string>, std::unique_ptr<Module>> render_and_load(const ir::Graph& g, const fusion::Schedule& s,
                                                                                        const fusion::MemoryPlan& m, RenderOptions ro,
                                                                                        Device& device, const std::string& cache_dir) {
  std::vector<Sdpa> offered, refused;
  if (device.has_sdpa())
    ro.sdpa = [&](const Sdpa& a) {
      if (std::any_of(refused.begin(), refused.end(), [&](const Sdpa& r) { return same_plan(r, a); }) || !device.sdpa_accepts(a, nullptr))
        return false;
      offered.push_back(a);
      return true;
    };
  Kernels k = render(g, s, m, ro);
  std::vector<std::string> names = kernel_names(k);
  auto load = [&]() -> std::unique_ptr<Module> { return names.empty() ? nullptr : device.load(k.source, names, cache_dir); };
  std::unique_ptr<Module> module;
  if (offered.empty()) {
    module = load();
  } else {
    std::future<std::unique_ptr<Module>> loading = std::async(std::launch::async, load);  // joined before `k` changes or goes
    for (const Sdpa& a : offered)
      if (!device.prepare_sdpa(a, nullptr)) refused.push_back(a);
    module = loading.get();
  }
  if (refused.empty()) return {std::move(k), std::move(names), std::move(module)};
  k = render(g, s, m, ro);  // offers only chains prepared above
  names = kernel_names(k);
  return {std::move(k), std::move(names), load()};
}

// What a Dot step computes beside its product, as the launch table says it: " + bias + GELU (aux)".
std::string epilogue_words(const fusion::DotLayout& d) {
  std::string r = d.bias >= 0 ? " + bias" : d.row_sum >= 0 ? " + row sums" : "";
  if (d.act == fusion::DotLayout::Act::Gelu) r += d.aux >= 0 ? " + GELU (aux)" : " + GELU";
  if (d.act == fusion::DotLayout::Act::GeluGrad) r += " · GELU'(aux)";
  return r;
}

// The least one call of `g` could move: each value that must be in memory crosses it once each
// way — written once where the device computes it, read once where anything reads it. In memory
// must be the inputs, the results and what products read or write (cuBLASLt takes its operands
// from memory and leaves its result there); every other value could live in the registers of a
// fused pass. A view counts as the buffer it views, once.
double floor_bytes(const ir::Graph& g, const fusion::Schedule& s) {
  auto base = [&](int32_t v) {
    const std::optional<fusion::View>& w = s.view[static_cast<size_t>(v)];
    return static_cast<size_t>(w ? w->buffer : v);
  };
  std::vector<bool> read(g.types.size(), false), in_memory(g.types.size(), false);
  for (const ir::Node& n : g.nodes)
    for (int32_t v : n.in) read[base(v)] = true;
  for (int32_t v : g.params) in_memory[base(v)] = true;
  for (int32_t v : g.results) in_memory[base(v)] = true;
  for (const fusion::Step& st : s.steps) {
    if (st.kind != fusion::StepKind::Dot) continue;
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    for (int32_t v : {n.in[0], n.in[1], fusion::dot_result(g, st)}) in_memory[base(v)] = true;
    for (int32_t v : {st.dot.bias, st.dot.row_sum, st.dot.aux})
      if (v >= 0) in_memory[base(v)] = true;
  }
  double bytes = 0;
  for (size_t v = 0; v < in_memory.size(); ++v) {
    if (!in_memory[v]) continue;
    const ir::Op op = g.producer(static_cast<int32_t>(v)).op;
    const bool written = op != ir::Op::Parameter && op != ir::Op::Constant;
    bytes += static_cast<double>(bytes_of(g.type(static_cast<int32_t>(v)))) * ((written ? 1 : 0) + (read[v] ? 1 : 0));
  }
  return bytes;
}

// The work of one run of launch table `k`: kernels and the bytes of their arguments' buffers,
// copies and fills, products with their FLOPs and bytes, and the floor. Host steps and loops
// count when they run.
Work work_of(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, const Kernels& k) {
  std::vector<double> bytes = launch_bytes(g, m, k);
  Work w{.floor_bytes = floor_bytes(g, s)};
  for (size_t i = 0; i < k.launches.size(); ++i) {
    const Launch& l = k.launches[i];
    w.kernel_bytes += bytes[i];
    if (l.kind == Launch::Kind::Kernel || l.kind == Launch::Kind::Sdpa) ++w.kernels;
    if (l.kind != Launch::Kind::Dot) continue;
    const fusion::Step& st = s.steps[l.step];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    ++w.products;
    w.product_flops += dot_flops(st.dot);
    for (int32_t v : {n.in[0], n.in[1], n.out}) w.product_bytes += static_cast<double>(bytes_of(g.type(v)));
    if (st.dot.row_sum >= 0) w.product_bytes += static_cast<double>(bytes_of(g.type(st.dot.row_sum)));
    if (st.dot.bias >= 0) w.product_bytes += static_cast<double>(st.dot.n * dtype_size(g.type(st.dot.bias).dtype));
    if (st.dot.aux >= 0) w.product_bytes += static_cast<double>(bytes_of(g.type(st.dot.aux)));
  }
  return w;
}

// What timing launch i adds to ProgramStats::times (ProgramOptions::profile): its key there and
// one launch of it (ms 0); host steps and loops are not timed (their key is empty).
std::vector<std::pair<std::string, LaunchTime>> launch_kinds(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m,
                                                             const Kernels& k, const std::string& function) {
  const std::vector<double> bytes = launch_bytes(g, m, k);
  std::vector<std::pair<std::string, LaunchTime>> r;
  for (size_t i = 0; i < k.launches.size(); ++i) {
    const Launch& l = k.launches[i];
    const fusion::Step& st = s.steps[l.step];
    LaunchTime t{.kind = l.kind, .launches = 1, .bytes = bytes[i]};
    std::string key;
    switch (l.kind) {
      case Launch::Kind::Kernel:
        key = l.kernel, t.what = l.packs > 1 ? fmt::format("packs {} launches", l.packs) : fmt::format("[{}] {}", fmt::join(st.space, ","), ops_of(g, st));
        break;
      case Launch::Kind::Dot:
        key = fmt::format("product {}{}x{}x{}{}", st.dot.batch.empty() ? "" : fmt::format("[{}] ", fmt::join(st.dot.batch, ",")),
                          st.dot.m, st.dot.n, st.dot.k, epilogue_words(st.dot));  // a GELU and a GELU' product apart
        t.what = std::string(dtype_name(g.type(st.nodes[0]).dtype)),
        t.flops = dot_flops(st.dot);
        break;
      case Launch::Kind::Sdpa: {
        const Sdpa& a = k.sdpa[static_cast<size_t>(l.sdpa)];
        key = fmt::format("attention {} [{},{}] {}x{}x{}", l.backward ? "backward" : "forward", a.b, a.h, a.t, a.s, a.d);
        t.what = fmt::format("cuDNN {}{}", dtype_name(a.dtype), a.causal ? " causal" : ""), t.flops = a.flops(l.backward);
        break;
      }
      case Launch::Kind::Copy: key = "copy"; break;
      case Launch::Kind::Fill: key = "fill"; break;
      case Launch::Kind::Host: break;
    }
    r.emplace_back(key.empty() ? key : function + " " + key, std::move(t));
  }
  return r;
}

}  // namespace

struct Program::Impl {
  passes::Lowered lowered;  // the graph with its products merged (merge_dots) and its composites expanded (a loop body's own Program expands its own)
  const ir::Graph& g;       // lowered.graph
  std::shared_ptr<Allocator> alloc;
  ProgramOptions options;
  fusion::Schedule schedule;
  fusion::MemoryPlan memory;
  std::unique_ptr<Module> module;
  std::vector<size_t> kernel_index;             // launch → its kernel's index in the module
  std::vector<std::shared_ptr<Buffer>> owned;   // the arena, the constants, the split reductions' scratch
  std::vector<DevicePtr> table;                 // slots of constants and arena buffers, filled once
  Work work;                                    // of one run of the launch table (work_of)
  std::vector<std::pair<std::string, LaunchTime>> kinds;  // per launch when profiling (launch_kinds)
  std::vector<size_t> first;                    // result position → first position with the same value
  std::vector<bool> written;                    // result position → written by a Loop/Copy/Dot step
  std::vector<bool> in_place;                   // result position → updated in its argument's buffer (a loop body)
  bool has_host = false;
  uint64_t runs = 0;                            // calls of this program so far
  std::vector<std::vector<Upload>> uploads;     // per parameter, most recently used first
  std::vector<Captured> captures;               // most recently used first
  std::vector<std::vector<DevicePtr>> seen;     // tables run once without capture, most recent first
  // Result buffers of the last 3 calls per result position: a loop feeding results back cycles
  // through a few buffer sets, so its calls repeat the same tables (and replay their captures).
  RecycledBuffers<Buffer> spare;

  // While steps (by launch index): their condition and body, programs of their own over the same
  // allocator; the carried values stay on the device between iterations.
  struct Loop {
    std::unique_ptr<Program> cond, body;
  };
  std::vector<std::pair<size_t, Loop>> loops;

  // The running call.
  std::vector<DevicePtr> buffers;
  std::vector<std::shared_ptr<Buffer>> held;    // Host step outputs and inputs uploaded for this call only
  std::vector<std::pair<int32_t, Tensor>> host_results;  // Host step outputs by value
  std::vector<DevicePtr> values;                // a launch's arguments (cuLaunchKernel copies them)
  std::vector<void*> args;

  Impl(const ir::Graph& graph, std::shared_ptr<Allocator> a, const ProgramOptions& o)
      : lowered(passes::lower_composites(fusion::canonical_dots(fusion::merge_heads(fusion::merge_dots(graph))), false)), g(lowered.graph),
        alloc(std::move(a)), options(o), spare(graph.results.size(), 3) {}

  DevicePtr at(int32_t slot, int64_t offset_elements, DType t) const {
    return buffers[static_cast<size_t>(slot)] + static_cast<uint64_t>(offset_elements) * dtype_size(t);
  }

  DevicePtr input(size_t position, const Tensor& t, ProgramStats& stats);
  void launch(const Launch& l, size_t index, const Kernels& k);  // queues launch `index` of table k (not a Host step)
  void sdpa(const Launch& l, const Kernels& k);  // a Sdpa launch: the device's fused attention
  void enqueue(const Kernels& k);
  void run_in_order(const Kernels& k, ProgramStats& stats, bool timed);  // the launch table, host steps in between
  void dot(const Launch& l);
  void host(const Launch& l, size_t index, ProgramStats& stats);  // launch `index` of the table
  bool device_all_reduce(const Launch& l, const ir::Node& n, ProgramStats& stats);
  void run_while(const Launch& l, const ir::Node& n, const Loop& loop, ProgramStats& stats);
  const Buffer* resident(const Tensor& t) const;  // t's buffer when it lives on this GPU, else null
  DevicePtr on_device(const Tensor& t);  // t's device address (uploaded into a held buffer if it is on the host)
};

Program::Program(const ir::Graph& graph, std::shared_ptr<Allocator> allocator, const ProgramOptions& o, bool loop_body) {
  Clock::time_point t0 = Clock::now();
  auto lap = [&t0](double& into) {
    into += seconds_since(t0);
    t0 = Clock::now();
  };
  impl_ = std::make_unique<Impl>(graph, std::move(allocator), o);
  lap(times_.passes);
  Impl& p = *impl_;
  const ir::Graph& g = p.g;
  // Attention kernels need bf16 tensor-core products (sm_80+); a loop body's parameters are
  // views of its loop's buffers at any offset.
  // A fused-attention library reads plain operands: no projection bias is folded into them (the
  // projection's product adds it: Gemm::bias).
  Device& device = p.alloc->device();
  p.schedule = fusion::fuse(g, {.gpu = true, .attention = compute_capability(device.arch()) >= 80, .aligned_params = !loop_body,
                                .fold_attention_bias = !device.has_sdpa(), .epilogues = o.epilogues, .composites = &p.lowered.sites});
  p.memory = fusion::plan_memory(g, p.schedule);
  lap(times_.fusion);
  RenderOptions ro = render_options_for(device.multiprocessors());
  override_render_options(ro, o.render);
  std::vector<std::string> names;
  std::tie(kernels_, names, p.module) = render_and_load(g, p.schedule, p.memory, ro, device, o.cache_dir);
  lap(times_.kernels);
  for (const Launch& l : kernels_.launches) {
    p.kernel_index.push_back(static_cast<size_t>(std::find(names.begin(), names.end(), l.kernel) - names.begin()));
    p.has_host = p.has_host || l.kind == Launch::Kind::Host;
  }
  for (size_t i = 0; i < kernels_.launches.size(); ++i) {
    const fusion::Step& st = p.schedule.steps[kernels_.launches[i].step];
    if (st.kind != StepKind::While) continue;
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    ProgramOptions cond = o, body = o;
    cond.name += " (while condition)", body.name += " (while body)";
    p.loops.emplace_back(i, Impl::Loop{std::make_unique<Program>(*n.attrs.regions[0], p.alloc, cond),
                                       std::make_unique<Program>(*n.attrs.regions[1], p.alloc, body, true)});
  }
  p.work = work_of(g, p.schedule, p.memory, kernels_);
  if (o.profile) p.kinds = launch_kinds(g, p.schedule, p.memory, kernels_, o.name);
  p.table.assign(static_cast<size_t>(p.memory.slots) + (kernels_.scratch_bytes > 0), 0);
  if (kernels_.scratch_bytes > 0) {  // split reductions' partials (render.hpp)
    auto scratch = std::make_shared<Buffer>(p.alloc, static_cast<size_t>(kernels_.scratch_bytes));
    p.table.back() = scratch->ptr();
    p.owned.push_back(std::move(scratch));
  }
  if (p.memory.arena_bytes > 0) {
    auto arena = std::make_shared<Buffer>(p.alloc, static_cast<size_t>(p.memory.arena_bytes));
    for (size_t v = 0; v < p.memory.arena_offset.size(); ++v)
      if (p.memory.arena_offset[v] >= 0) p.table[p.memory.slot[v]] = arena->ptr() + static_cast<uint64_t>(p.memory.arena_offset[v]);
    p.owned.push_back(std::move(arena));
  }
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Constant || p.memory.slot[n.out] < 0) continue;
    const Tensor& c = n.attrs.value;
    auto b = std::make_shared<Buffer>(p.alloc, c.nbytes());
    if (c.nbytes()) device.upload(b->ptr(), c.bytes(), c.nbytes());
    p.table[p.memory.slot[n.out]] = b->ptr();
    p.owned.push_back(std::move(b));
  }
  const fusion::Schedule& s = p.schedule;
  p.in_place = loop_body ? fusion::updates_in_place(g, s) : std::vector<bool>(g.results.size());
  for (size_t i = 0; i < g.results.size(); ++i) {
    int32_t r = g.results[i], st = s.step_of[r];
    p.first.push_back(static_cast<size_t>(std::find(g.results.begin(), g.results.end(), r) - g.results.begin()));
    p.written.push_back(st >= 0 && s.steps[static_cast<size_t>(st)].kind != StepKind::Host &&
                        s.steps[static_cast<size_t>(st)].kind != StepKind::While);
  }
  p.uploads.resize(g.params.size());
  lap(times_.setup);
}

Program::~Program() = default;

bool Program::in_place(size_t k) const { return impl_->in_place[k]; }

// The device address of argument `position`: its own buffer when it is on this GPU, else an upload
// (reused while the same host tensor comes again at this position).
DevicePtr Program::Impl::input(size_t position, const Tensor& t, ProgramStats& stats) {
  if (const Buffer* b = resident(t)) {
    ++stats.resident;
    return b->ptr();
  }
  const std::shared_ptr<std::byte>& host = t.storage();
  std::vector<Upload>& list = uploads[position];
  auto same = std::find_if(list.begin(), list.end(), [&](const Upload& u) {
    return u.bytes == host.get() && !u.host.expired() && u.buffer->bytes() == t.nbytes();
  });
  if (same != list.end()) {
    ++stats.reused;
    std::rotate(list.begin(), same, same + 1);
    return list.front().buffer->ptr();
  }
  ++stats.uploaded;
  // The buffer of a dropped value at this position takes the new one (the work queued before
  // reads it first: one stream), so a loop fed new host values each step keeps its buffer tables
  // and replays its captures; fresh memory from the allocator could trade places with other
  // positions' blocks of the same size from step to step.
  auto dropped = std::find_if(list.begin(), list.end(), [&](const Upload& u) {
    return u.host.expired() && u.buffer.use_count() == 1 && u.buffer->bytes() == t.nbytes();
  });
  std::shared_ptr<Buffer> b = dropped != list.end() ? dropped->buffer : std::make_shared<Buffer>(alloc, t.nbytes());
  if (t.nbytes()) alloc->device().upload(b->ptr(), host.get(), t.nbytes());
  std::erase_if(list, [](const Upload& u) { return u.host.expired(); });
  list.insert(list.begin(), Upload{host.get(), host, b});
  if (list.size() > kReuse) list.pop_back();
  return b->ptr();
}

// c = a · b (+ its bias row, or with its row sums) for a Dot step: the batch dims that are evenly spaced in both operands (innermost
// first) become one strided batch of a Gemm; the others are looped over here.
void Program::Impl::dot(const Launch& l) {
  const fusion::Step& st = schedule.steps[l.step];
  const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
  const fusion::DotLayout& d = st.dot;
  const DType t = g.type(n.in[0]).dtype;
  const auto step = static_cast<int32_t>(l.step);
  DevicePtr a = at(l.slots[0], fusion::read_view(schedule, n.in[0], step).offset, t);
  DevicePtr b = at(l.slots[1], fusion::read_view(schedule, n.in[1], step).offset, t);
  DevicePtr c = at(l.slots[2], 0, g.type(n.out).dtype);
  const DevicePtr row = d.bias >= 0 ? at(l.slots[3], fusion::read_view(schedule, d.bias, step).offset, t)
                       : d.row_sum >= 0 ? at(l.slots[3], 0, t) : 0;
  const DevicePtr aux = d.aux >= 0 ? at(l.slots.back(), fusion::read_view(schedule, d.aux, step).offset, t) : 0;
  struct Dim {
    int64_t size, a, b, c;
  };
  std::vector<Dim> dims;  // batch dims of size > 1, outermost first; c strides in elements
  int64_t c_stride = d.m * d.n;
  for (size_t j = d.batch.size(); j-- > 0;) {
    if (d.batch[j] != 1) dims.insert(dims.begin(), Dim{d.batch[j], d.batch_lhs[j], d.batch_rhs[j], c_stride});
    c_stride *= d.batch[j];
  }
  Gemm gm{.dtype = t, .m = d.m, .n = d.n, .k = d.k, .a_rs = d.a_rs, .a_cs = d.a_cs, .b_rs = d.b_rs, .b_cs = d.b_cs,
          .tf32 = options.tf32 && t == DType::F32,
          .epilogue = d.bias >= 0      ? GemmEpilogue::Bias
                      : d.row_sum < 0  ? GemmEpilogue::None
                      : d.row_sum_of_a ? GemmEpilogue::SumA
                                       : GemmEpilogue::SumB,
          .act = d.act == fusion::DotLayout::Act::Gelu       ? GemmAct::Gelu
                 : d.act == fusion::DotLayout::Act::GeluGrad ? GemmAct::GeluGrad
                                                             : GemmAct::None};
  size_t inner = dims.size();  // dims[inner..] form the strided batch (c's innermost batch stride is m·n)
  if (!dims.empty()) {
    --inner;
    while (inner > 0 && dims[inner - 1].a == dims[inner].a * dims[inner].size && dims[inner - 1].b == dims[inner].b * dims[inner].size &&
           dims[inner - 1].c == dims[inner].c * dims[inner].size)
      --inner;
    gm.a_bs = dims.back().a, gm.b_bs = dims.back().b;
    for (size_t j = inner; j < dims.size(); ++j) gm.batches *= dims[j].size;
  }
  int64_t outer = 1;
  for (size_t j = 0; j < inner; ++j) outer *= dims[j].size;
  const size_t es = dtype_size(t), cs = dtype_size(g.type(n.out).dtype);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (size_t j = inner, rest = static_cast<size_t>(o); j-- > 0; rest /= static_cast<size_t>(dims[j].size)) {
      auto idx = static_cast<int64_t>(rest % static_cast<size_t>(dims[j].size));
      oa += idx * dims[j].a, ob += idx * dims[j].b, oc += idx * dims[j].c;
    }
    alloc->device().gemm(gm, a + static_cast<uint64_t>(oa) * es, b + static_cast<uint64_t>(ob) * es, c + static_cast<uint64_t>(oc) * cs,
                         row, aux);
  }
}

// An all_reduce node summed on the device (NCCL) into fresh buffers; false (nothing done) when
// the device cannot sum one of its operand types.
bool Program::Impl::device_all_reduce(const Launch& l, const ir::Node& n, ProgramStats& stats) {
  for (int32_t u : n.in)
    if (DType t = g.type(u).dtype; t != DType::F32 && t != DType::I32 && t != DType::U32) return false;
  for (int32_t k = 0; k < n.nout; ++k) {
    const ir::Type& t = g.type(n.out + k);
    auto b = std::make_shared<Buffer>(alloc, bytes_of(t));
    const auto j = static_cast<size_t>(k);
    DevicePtr in = at(l.slots[j], fusion::read_view(schedule, n.in[j], static_cast<int32_t>(l.step)).offset, t.dtype);
    if (!alloc->device().all_reduce_sum(in, b->ptr(), shape_numel(t.shape), t.dtype)) {
      if (k == 0) return false;  // the same answer for every operand type it accepts
      throw SheafError("internal: the device summed some operands of an all_reduce and not the others");
    }
    buffers[static_cast<size_t>(l.slots[n.in.size() + j])] = b->ptr();
    host_results.emplace_back(n.out + k, Tensor::on_device(t.dtype, t.shape, std::make_shared<DeviceTensor>(b)));
    held.push_back(std::move(b));
  }
  ++stats.collectives;
  return true;
}

const Buffer* Program::Impl::resident(const Tensor& t) const {
  auto* d = dynamic_cast<const DeviceTensor*>(t.device().get());
  return d && &d->buffer().allocator() == alloc.get() ? &d->buffer() : nullptr;
}

DevicePtr Program::Impl::on_device(const Tensor& t) {
  if (const Buffer* b = resident(t)) return b->ptr();
  auto b = std::make_shared<Buffer>(alloc, t.nbytes());
  if (t.nbytes()) alloc->device().upload(b->ptr(), t.bytes(), t.nbytes());
  held.push_back(b);
  return b->ptr();
}

// A while: the carried values start as views of the operands' buffers (a value the body updates
// in place as a copy of its own); each iteration runs the condition (its bool downloaded; skipped
// for a loop with a trip count) and the body on them.
// Results that are still an operand's memory are copied (the table's buffers are reused).
void Program::Impl::run_while(const Launch& l, const ir::Node& n, const Loop& loop, ProgramStats& stats) {
  std::vector<Tensor> state, start;
  for (size_t j = 0; j < n.in.size(); ++j) {
    const ir::Type& t = g.type(n.in[j]);
    DevicePtr p = at(l.slots[j], fusion::read_view(schedule, n.in[j], static_cast<int32_t>(l.step)).offset, t.dtype);
    auto view = std::make_shared<Buffer>(alloc, p, bytes_of(t), Buffer::Borrowed{});
    state.push_back(Tensor::on_device(t.dtype, t.shape, std::make_shared<DeviceTensor>(std::move(view))));
  }
  start = state;
  Device& d = alloc->device();
  for (size_t j = 0; j < state.size(); ++j) {
    if (!loop.body->in_place(j)) continue;  // updated in place: in a buffer of the loop's own, not the operand's
    auto b = std::make_shared<Buffer>(alloc, state[j].nbytes());
    if (state[j].nbytes()) d.copy(b->ptr(), on_device(state[j]), state[j].nbytes());
    state[j] = Tensor::on_device(state[j].dtype(), state[j].shape(), std::make_shared<DeviceTensor>(std::move(b)));
  }
  ProgramStats inner;
  for (int64_t i = 0; n.attrs.k > 0 ? i < n.attrs.k : true; ++i) {
    if (stop_requested()) break;  // Ctrl-C: the caller drops the results (base/interrupt.hpp)
    if (n.attrs.k <= 0 && loop.cond->run(state, inner)[0].get(0) == 0) break;
    state = loop.body->run(state, inner);
  }
  stats.host_steps += inner.host_steps;
  stats.collectives += inner.collectives;
  stats.uploaded += inner.uploaded;
  stats.in_place += inner.in_place;
  stats.work += inner.work;
  for (const auto& [key, t] : inner.times) stats.times[key] += t;
  for (int32_t k = 0; k < n.nout; ++k) {
    const auto j = static_cast<size_t>(k);
    const int32_t slot = l.slots[n.in.size() + j];
    if (slot < 0) continue;  // a loop invariant: a view of its operand
    Tensor r = state[j];
    if (std::any_of(start.begin(), start.end(), [&](const Tensor& s) { return s.device() == r.device(); })) {
      auto b = std::make_shared<Buffer>(alloc, r.nbytes());
      d.copy(b->ptr(), on_device(r), r.nbytes());
      r = Tensor::on_device(r.dtype(), r.shape(), std::make_shared<DeviceTensor>(std::move(b)));
    }
    buffers[static_cast<size_t>(slot)] = on_device(r);
    host_results.emplace_back(n.out + k, std::move(r));
  }
}

// A Host step: operands downloaded, the reference kernels run, results uploaded into buffers held
// for the call. An all_reduce is summed on the device where it can be; a while runs its regions.
void Program::Impl::host(const Launch& l, size_t index, ProgramStats& stats) {
  const ir::Node& n = g.nodes[static_cast<size_t>(schedule.steps[l.step].nodes[0])];
  if (n.op == ir::Op::AllReduce && device_all_reduce(l, n, stats)) return;
  for (const auto& [i, loop] : loops)
    if (i == index) return run_while(l, n, loop, stats);
  ++stats.host_steps;
  Device& d = alloc->device();
  std::vector<Tensor> in;
  for (size_t j = 0; j < n.in.size(); ++j) {
    const ir::Type& t = g.type(n.in[j]);
    Tensor x = Tensor::empty(t.dtype, t.shape);
    if (x.nbytes()) d.download(x.mutable_bytes(), at(l.slots[j], fusion::read_view(schedule, n.in[j], static_cast<int32_t>(l.step)).offset, t.dtype), x.nbytes());
    in.push_back(std::move(x));
  }
  std::vector<Tensor> out = ref::run_node(g, n, in);
  for (int32_t k = 0; k < n.nout; ++k) {
    int32_t slot = l.slots[n.in.size() + static_cast<size_t>(k)];
    if (slot < 0) continue;  // a loop invariant: a view of its operand
    buffers[static_cast<size_t>(slot)] = on_device(out[static_cast<size_t>(k)]);
    host_results.emplace_back(n.out + k, out[static_cast<size_t>(k)]);
  }
}

void Program::Impl::launch(const Launch& l, size_t index, const Kernels& k) {
  if (l.kind == Launch::Kind::Dot) return dot(l);
  if (l.kind == Launch::Kind::Copy) {
    const DevicePtr dst = buffers[static_cast<size_t>(l.slots[1])], src = buffers[static_cast<size_t>(l.slots[0])] + static_cast<uint64_t>(l.offset);
    if (dst != src) alloc->device().copy(dst, src, static_cast<size_t>(l.bytes));  // equal: updated in place
    return;
  }
  if (l.kind == Launch::Kind::Fill) return alloc->device().fill(buffers[static_cast<size_t>(l.slots[0])], l.byte, static_cast<size_t>(l.bytes));
  if (l.kind == Launch::Kind::Sdpa) return sdpa(l, k);
  values.resize(l.slots.size());
  args.resize(l.slots.size());
  for (size_t j = 0; j < l.slots.size(); ++j)
    values[j] = buffers[static_cast<size_t>(l.slots[j])] + static_cast<uint64_t>(arg_offset(l, j)), args[j] = &values[j];
  module->launch(kernel_index[index], l.grid, l.block, args.data());
}

void Program::Impl::sdpa(const Launch& l, const Kernels& k) {
  const Sdpa& a = k.sdpa[static_cast<size_t>(l.sdpa)];
  auto ptr = [&](const SdpaTensor& x, DType t) { return x.slot < 0 ? DevicePtr{0} : at(x.slot, x.offset, t); };
  const SdpaBuffers b{.q = ptr(a.q, a.dtype), .k = ptr(a.k, a.dtype), .v = ptr(a.v, a.dtype), .o = ptr(a.o, a.dtype),
                      .stats = ptr(a.stats, DType::F32), .d_o = ptr(a.d_o, a.dtype), .dq = ptr(a.dq, a.dtype),
                      .dk = ptr(a.dk, a.dtype), .dv = ptr(a.dv_, a.dtype)};
  alloc->device().sdpa(a, l.backward, b);
}

void Program::Impl::enqueue(const Kernels& k) {
  for (size_t i = 0; i < k.launches.size(); ++i) launch(k.launches[i], i, k);
}

// The launches in order, the host steps in between. `timed`: each launch between two stamps, the
// times read before each host step (whose downloads wait for the queue anyway, and whose loops
// time their own launches) and at the end.
void Program::Impl::run_in_order(const Kernels& k, ProgramStats& stats, bool timed) {
  Device& d = alloc->device();
  std::vector<size_t> pending;  // launch pending[j] ran between stamps 2j and 2j + 1
  auto collect = [&] {
    if (pending.empty()) return;
    const std::vector<double> t = d.stamps_ms();
    for (size_t j = 0; j < pending.size(); ++j) {
      LaunchTime one = kinds[pending[j]].second;
      one.ms = t[2 * j + 1] - t[2 * j];
      stats.times[kinds[pending[j]].first] += one;
    }
    pending.clear();
  };
  for (size_t i = 0; i < k.launches.size(); ++i) {
    const Launch& l = k.launches[i];
    if (l.kind == Launch::Kind::Host) {
      collect();
      host(l, i, stats);
      continue;
    }
    if (!timed) {
      launch(l, i, k);
      continue;
    }
    d.stamp();
    launch(l, i, k);
    d.stamp();
    pending.push_back(i);
  }
  collect();
}

std::string Program::launch_table() const {
  const Impl& p = *impl_;
  std::vector<double> bytes = launch_bytes(p.g, p.memory, kernels_);
  std::string r;
  for (size_t i = 0; i < kernels_.launches.size(); ++i) {
    const Launch& l = kernels_.launches[i];
    const fusion::Step& st = p.schedule.steps[l.step];
    const std::string ops = ops_of(p.g, st);
    switch (l.kind) {
      case Launch::Kind::Kernel:
        r += fmt::format("step {:<3} kernel {} grid {} block {}{}{}  {:.3f} MB  [{}] {}\n", l.step, l.kernel, l.grid, l.block,
                         l.block_reduce ? " (threads share points)" : "", l.packs > 1 ? fmt::format(" (packs {} launches)", l.packs) : "",
                         bytes[i] / 1e6, fmt::join(st.space, ","), ops);
        break;
      case Launch::Kind::Dot: {
        const fusion::DotLayout& d = st.dot;
        r += fmt::format("step {:<3} product [{}] {}x{}x{}  {:.6g} GFLOP  {}  a strides {},{} b strides {},{}{}\n", l.step,
                         fmt::join(d.batch, ","), d.m, d.n, d.k, dot_flops(d) / 1e9, dtype_name(p.g.type(st.nodes[0]).dtype),
                         d.a_rs, d.a_cs, d.b_rs, d.b_cs, epilogue_words(d));
        break;
      }
      case Launch::Kind::Copy:
      case Launch::Kind::Fill:
        r += fmt::format("step {:<3} {}  {:.3f} MB\n", l.step, l.kind == Launch::Kind::Copy ? "copy" : "fill", bytes[i] / 1e6);
        break;
      case Launch::Kind::Host:
        r += fmt::format("step {:<3} host  {}\n", l.step, ops);
        break;
      case Launch::Kind::Sdpa:
        r += fmt::format("step {:<3} attention {} by cuDNN  {:.6g} GFLOP  {:.3f} MB  {}\n", l.step, l.backward ? "backward" : "forward",
                         kernels_.sdpa[static_cast<size_t>(l.sdpa)].flops(l.backward) / 1e9, bytes[i] / 1e6,
                         sdpa_key(kernels_.sdpa[static_cast<size_t>(l.sdpa)]));
        break;
    }
  }
  return r;
}

std::string launch_time_report(const std::map<std::string, LaunchTime>& times, size_t rows) {
  std::vector<std::pair<std::string, LaunchTime>> sorted(times.begin(), times.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  LaunchTime total, products, kernels, moves;  // moves: copies and fills
  for (const auto& [key, t] : sorted) {
    total += t;
    (t.kind == Launch::Kind::Dot ? products : t.kind == Launch::Kind::Kernel || t.kind == Launch::Kind::Sdpa ? kernels : moves) += t;
  }
  auto pct = [&](double ms) { return total.ms > 0 ? 100.0 * ms / total.ms : 0.0; };
  std::string r = fmt::format("  cuda launch times (SHEAF_CUDA_PROFILE: each launch between two CUDA events; each program's calls after "
                              "its first, not captured): "
                              "{} launches, {:.3f} ms on the GPU\n", total.launches, total.ms);
  r += fmt::format("    products {:.3f} ms ({:.1f}%), kernels {:.3f} ms ({:.1f}%), copies and fills {:.3f} ms ({:.1f}%)\n", products.ms,
                   pct(products.ms), kernels.ms, pct(kernels.ms), moves.ms, pct(moves.ms));
  r += "           ms       %  launches  us/launch     GB/s  TFLOP/s  launch\n";
  auto rate = [](double amount, double ms, double unit) {
    return amount > 0 && ms > 0 ? fmt::format("{:.1f}", amount / (ms * 1e-3) / unit) : std::string("-");
  };
  LaunchTime rest;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [key, t] = sorted[i];
    if (i >= rows) {
      rest += t;
      continue;
    }
    r += fmt::format("    {:9.3f} {:6.1f}% {:9} {:10.1f} {:>8} {:>8}  {}{}\n", t.ms, pct(t.ms), t.launches, 1e3 * t.ms / static_cast<double>(t.launches),
                     rate(t.bytes, t.ms, 1e9), rate(t.flops, t.ms, 1e12), key, t.what.empty() ? "" : " " + t.what);
  }
  if (rest.launches)
    r += fmt::format("    {:9.3f} {:6.1f}% {:9}  ... {} others\n", rest.ms, pct(rest.ms), rest.launches, sorted.size() - rows);
  return r;
}

std::vector<Tensor> Program::run(std::span<const Tensor> args, ProgramStats& stats) {
  Impl& p = *impl_;
  const ir::Graph& g = p.g;
  const fusion::MemoryPlan& m = p.memory;
  const bool first = p.runs == 0;
  const Clock::time_point start = first ? Clock::now() : Clock::time_point{};  // no clock read on later calls (replays)
  ++stats.calls;
  stats.work += p.work;
  p.buffers = p.table;
  for (size_t i = 0; i < g.params.size(); ++i) p.buffers[m.slot[g.params[i]]] = p.input(i, args[i], stats);
  std::vector<Tensor> results(g.results.size());
  for (size_t i = 0; i < g.results.size(); ++i) {
    if (!p.written[i] || p.first[i] != i) continue;
    if (p.in_place[i] && p.resident(args[i])) {  // the loop's own buffer, updated where it is
      p.buffers[m.slot[g.results[i]]] = p.buffers[m.slot[g.params[i]]];
      results[i] = args[i];
      ++stats.in_place;
      continue;
    }
    const ir::Type& t = g.type(g.results[i]);
    std::shared_ptr<Buffer> b = p.spare.take(i, [&] { return std::make_shared<Buffer>(p.alloc, bytes_of(t)); });
    p.buffers[m.slot[g.results[i]]] = b->ptr();
    results[i] = Tensor::on_device(t.dtype, t.shape, std::make_shared<DeviceTensor>(std::move(b)));
  }
  // Profiling times the calls after a program's first, whose products choose their algorithms and
  // whose first launches load what they need: the table then says what a step costs.
  ++p.runs;
  if (const bool timed = p.options.profile && !first && p.alloc->device().keeps_time(); timed || p.has_host) {
    p.run_in_order(kernels_, stats, timed);
  } else {
    auto hit = std::find_if(p.captures.begin(), p.captures.end(), [&](const Captured& c) { return c.table == p.buffers; });
    if (hit != p.captures.end()) {
      std::rotate(p.captures.begin(), hit, hit + 1);
      p.captures.front().capture->replay();
      ++stats.replayed;
    } else if (p.options.capture_at > 0 && !first &&
               (p.options.capture_at == 1 || std::find(p.seen.begin(), p.seen.end(), p.buffers) != p.seen.end())) {
      const Clock::time_point t0 = Clock::now();
      std::unique_ptr<Capture> c = p.alloc->device().capture([&] { p.enqueue(kernels_); });
      stats.capture_s += seconds_since(t0);
      if (c) {
        c->replay();
        ++stats.captured;
        p.captures.insert(p.captures.begin(), Captured{p.buffers, std::move(c)});
        if (p.captures.size() > kCaptures) p.captures.pop_back();
      }
    } else {
      const Clock::time_point t0 = Clock::now();
      p.enqueue(kernels_);
      if (!first) ++stats.queued, stats.queue_s += seconds_since(t0);
      p.seen.insert(p.seen.begin(), p.buffers);
      if (p.seen.size() > kCaptures) p.seen.pop_back();
    }
  }
  for (size_t i = 0; i < g.results.size(); ++i) {
    int32_t r = g.results[i];
    if (p.first[i] != i) {
      results[i] = results[p.first[i]];
    } else if (!p.written[i]) {
      const ir::Node& n = g.producer(r);
      if (n.op == ir::Op::Parameter) results[i] = args[static_cast<size_t>(n.attrs.index)];
      else if (n.op == ir::Op::Constant) results[i] = n.attrs.value;
      else
        for (const auto& [v, t] : p.host_results)
          if (v == r) results[i] = t;
    }
  }
  p.held.clear();
  p.host_results.clear();
  if (first) stats.first_calls_s += seconds_since(start);
  return results;
}

}  // namespace sheaf::cuda
