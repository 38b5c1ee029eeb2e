// tests/unit/cuda_render_test.cpp — the CUDA renderer (backend/cuda/render.hpp), checked without a
// GPU. Every case of cpu_fusion_cases.shf ("fusion"), jit_consistency_cases.shf ("builtins") and
// kExtraCases below ("extra": large reductions, empty ones) runs on the reference executor while
// every call that reaches the JIT is traced and optimised once more here (one graph per function
// and argument key, with the tensors of its first call). Each graph goes through fusion and the
// memory plan, then, per table (one test each, so that ctest's process per test builds one table):
//   Nvrtc     the GPU schedule (FuseOptions::gpu: f16/bf16 reductions and products, scatter-adds,
//             as cuda::Program fuses) rendered with the default options and compiled by NVRTC to
//             a cubin for sm_90 (PTX assembled by ptxas, as DriverDevice loads kernels): an ELF
//             for the CUDA machine naming every kernel of the launch table (skipped without
//             NVRTC). Distinct
//             renderings compile in batches sharing the prelude, kernels renamed apart; those of
//             a failing batch compile alone, so an error names its rendering.
//   Emulated  rendered twice — default thresholds with 32-thread blocks (elementwise threads
//             taking 4 points from grids of 2 blocks on), and every reducing step forced to block
//             per point with blocks of at most 8 threads (every block loop unrolled by 3,
//             elementwise threads taking 3 points) — and compiled by the
//             system C++ compiler after the emulation prelude of cuda_emulator.hpp (__global__
//             and friends erased, threadIdx/blockIdx thread_local, __shared__ as static,
//             __syncthreads() as a std::barrier of the threads of a block, which run concurrently
//             in block-per-point kernels; blocks run one after another). The launch table runs on host buffers (Dot steps by gemm, Host
//             steps by the reference kernels as cpu/program.cpp does; step outputs start as 0xff
//             bytes with room behind, so a point left unwritten or written out of place shows)
//             and the results must match the reference executor within the tolerance of
//             cpu_backend_test.cpp (skipped without a C++ compiler).
#include <unistd.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <regex>
#include <sstream>
#include <thread>

#include "backend/cpu/toolchain.hpp"
#include "backend/cuda/driver.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "backend/cuda/render.hpp"
#include "backend/ref/executor.hpp"
#include "case_file.hpp"
#include "cuda_emulator.hpp"
#include "passes/passes.hpp"
#include "runtime/device_choice.hpp"
#include "tensor/blas.hpp"
#include "trace/tracer.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

using Case = testing_support::CaseSection;
using testing_support::compile_emulation;
using testing_support::emulated_kernel;
using testing_support::emulation_launcher;
using testing_support::EmulationLibrary;
using testing_support::kEmulationPrelude;
using testing_support::run_kernel;
using cuda::Launch;

constexpr double kNativeTolerance = 20;  // as cpu_backend_test.cpp
const cuda::RenderOptions kEmulated{.block = 32, .tile_width = 8, .long_row_block = 64, .points_per_thread_min_grid = 2};
const cuda::RenderOptions kForced{.block = 8, .block_reduce_row_min_extent = 1, .block_reduce_min_extent = 1, .block_reduce_max_kept = int64_t{1} << 40,
                                  .tile_width = 4, .column_tile_max_kept = int64_t{1} << 40, .long_row_block = 16,
                                  .points_per_thread = 3, .points_per_thread_min_grid = 1, .unroll_max_point_bytes = int64_t{1} << 40, .unroll_max_round_bytes = int64_t{1} << 40,
                                  .block_loop_max_rounds = 3};

// Reductions large enough for block-per-point kernels with the default thresholds (two
// reductions and an elementwise result in one such step too), and reductions over no element.
constexpr const char* kExtraCases = R"(;; --- prelude
(def big (random-normal 60 '[10000]))
(def row (random-normal 61 '[1 5000]))
(def rows (random-normal 62 '[3 4096]))
(def tall (random-normal 63 '[3000 3]))
(def ints (random-randint 64 '[9000] -5 5))
(def rows50 (random-normal 66 '[50 40]))
;; --- block-reduce-sum-10000
(defn f [a] (list (sum a) (max a) (min (exp a)) (mean (* a a)) (sum a :keepdims)))
(defn g [a] (let [e (exp a)] (list (sum e) (max e) (* e 2))))
(list (f big) (g big))
;; --- block-reduce-max-rows-1x5000
(defn f [a] (list (max a :axis 1) (sum (tanh a) :axis -1) (argmax a :axis 1)))
(f row)
;; --- block-reduce-softmax-rows
(defn f [a] (list (softmax a) (log-softmax a :axis 1)))
(f rows)
;; --- long-rows
(def logits (random-normal 73 '[270 8200]))
(def ids (random-randint 74 '[270] 0 8200))
(defn f [a] (list (softmax a) (sparse-cross-entropy a ids)))
(defn g [a] ((grad (fn [a] (sparse-cross-entropy a ids))) a))
(list (f logits) (g logits))
;; --- row-reduce-short-rows
(defn f [a] (list (softmax a) (sum (* a a) :axis 1) (max a :axis -1)))
(f rows50)
;; --- column-reduce
(defn f [a] (list (sum a :axis 0) (max (exp a) :axis 0)))
(f (transpose rows50))
;; --- block-reduce-leading-axis
(defn f [a] (list (sum a :axis 0) (max (* a 2) :axis 0) (mean a :axis 0 :keepdims)))
(f tall)
;; --- column-tiles
(def cols (random-normal 67 '[2100 40]))
(defn f [a] (list (sum a :axis 0) (sum (cast (* a 3) :bf16) :axis 0) (max (exp a) :axis 0 :keepdims)))
(defn g [a] (list (sum a :axis 1) (mean (* a a) :axis 1)))
(list (f cols) (f (slice cols 0 37 :axis 1)) (g (reshape cols '[3 700 40])))
;; --- row-phases
(def xs (random-normal 68 '[300 64]))
(defn ln [x] (let [m (mean x :axis -1 :keepdims) v (mean (* (- x m) (- x m)) :axis -1 :keepdims)] (/ (- x m) (sqrt (+ v 1e-5)))))
(defn f [x] (list (ln x) (sum (* (ln x) x))))
(defn g [x] (let [m (max x :axis 1)] (- x (reshape (flip m) '[300 1]))))
(list (f xs) ((grad (fn [x] (sum (* (softmax x) xs)))) xs) (g xs))
;; --- block-reduce-int-bool
(defn f [a] (list (sum a) (max a) (min a) (product (+ 1 (* 0 a))) (max (> a 3)) (min (> a -6))))
(f ints)
;; --- packed-launches
(defn f [a b c]
  (let [a2 (- a (* 0.1 (sqrt (abs a)))) b2 (* b 3.0) c2 (+ c 1.0) d (* a2 (sum c2))]
    (list a2 b2 c2 d (cast b2 :bf16))))
(f (random-normal 70 '[40]) (random-normal 71 '[7 3]) (random-normal 72 '[100]))
;; --- packed-per-head-updates
(defn step [w] (- w (* 0.01 (/ w (+ (sqrt (abs w)) 1e-8)))))
(defn f [q k v] (list (step q) (step k) (step v)))
(defn g [q k v d] (list (- q (slice d 0 64 :axis 1)) (- k (slice d 64 128 :axis 1)) (- v (slice d 128 192 :axis 1))))
(def qkv (list (random-normal 73 '[768 64]) (random-normal 74 '[768 64]) (random-normal 78 '[768 64])))
(list (apply f qkv) (apply g (concat qkv (list (random-normal 79 '[768 192])))))
;; --- few-bytes-a-point
(def wide (random-normal 75 '[3001 41]))
(defn f [a] (list (cast (* a 3) :bf16) (tanh (cast a :bf16))))
(defn g [a b c] (+ a (* b c)))
(list (f wide) (g wide (* wide 2) (exp wide)))
;; --- loads-first
(def xs3 (random-normal 76 '[300 7]))
(defn f [a b c] (- (/ a (sqrt (+ (* b b) 1e-8))) (* 0.1 c)))
(defn g [a i] (* (/ a 3.0) (get a i)))
(list (f xs3 (* xs3 2) (exp xs3)) (g xs3 (random-randint 77 '[300] 0 300)))
;; --- empty-reductions
(defn f [a] (list (sum a :axis 1) (product a :axis 1) (exp a) (sum a :axis 0)))
(f (random-normal 65 '[3 0]))
)";

// The cases of table `table`: "fusion" (cpu_fusion_cases.shf), "builtins"
// (jit_consistency_cases.shf) or "extra" (kExtraCases).
std::vector<Case> cases_of(const std::string& table) {
  auto dir = testing_support::unit_dir();
  if (table == "fusion") return testing_support::read_case_sections(dir / "cpu_fusion_cases.shf");
  if (table == "builtins") return testing_support::read_case_sections(dir / "jit_consistency_cases.shf");
  auto path = std::filesystem::temp_directory_path() / fmt::format("sheaf-cuda-render-{}.shf", getpid());
  std::ofstream(path) << kExtraCases;
  std::vector<Case> c = testing_support::read_case_sections(path);
  std::filesystem::remove(path);
  return c;
}

// One compiled function of a case: its optimised graph, the inputs of its first call, and the
// schedule, memory plan and renderings.
struct Function {
  std::string name;
  ir::Graph graph;
  std::vector<Tensor> inputs;
  fusion::Schedule schedule, gpu_schedule;  // gpu_schedule: as cuda::Program fuses (FuseOptions::gpu)
  fusion::MemoryPlan memory, gpu_memory;
  cuda::Kernels nvrtc, emulated, forced;   // nvrtc: of the GPU schedule
  cuda::Kernels per_step;                  // nvrtc with no launch packed: each step's kernels as launched alone
};

struct CaseGraphs {
  std::string error;
  std::vector<Function> functions;
};

// Runs `c` on the reference executor and traces every distinct compiled call (as the JIT does:
// scalars join the key once a function needs them statically).
CaseGraphs graphs_of(const Case& c) {
  CaseGraphs out;
  std::ostringstream printed;
  Interp in{printed};
  choose_device(*jit_of(in), "ref");
  std::map<const Obj*, bool> static_scalars;
  std::set<std::string> seen;
  std::vector<Value> pinned;  // keys name functions and objects by address: keep them alive
  jit_of(in)->observe = [&](const Value& fn, std::span<const Value> args) {
    pinned.push_back(fn);
    pinned.insert(pinned.end(), args.begin(), args.end());
    bool& st = static_scalars[fn.raw()];
    for (int attempt = 0; attempt < 2; ++attempt) {
      std::string key = fmt::format("{}|", static_cast<const void*>(fn.raw()));
      std::vector<Tensor> inputs;
      trace::flatten_args(args, st, key, inputs);
      if (!seen.insert(key).second) return;
      try {
        trace::Traced t = trace::trace_call(in, fn, args, SrcLoc{}, st);
        passes::optimize(t.graph);
        out.functions.push_back({fmt::format("{}#{}", fn.as<FnObj>().name, out.functions.size()),
                                 passes::lower_composites(t.graph, true).graph, inputs});
        return;
      } catch (const std::exception& e) {
        if (st || std::string_view(e.what()).rfind("the value of a traced", 0) != 0) return;  // interpreted
        st = true;
      }
    }
  };
  try {
    in.run_text(c.text, "<" + c.name + ">");
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  for (Function& f : out.functions) {
    f.schedule = fusion::fuse(f.graph);
    f.memory = fusion::plan_memory(f.graph, f.schedule);
    f.gpu_schedule = fusion::fuse(f.graph, {.gpu = true});
    f.gpu_memory = fusion::plan_memory(f.graph, f.gpu_schedule);
    f.nvrtc = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory);
    f.per_step = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, {.pack_max_grid = 0});
    f.emulated = cuda::render(f.graph, f.schedule, f.memory, kEmulated);
    f.forced = cuda::render(f.graph, f.schedule, f.memory, kForced);
  }
  return out;
}

// ---- the emulator (prelude, compiling and running kernels: cuda_emulator.hpp) -----------------------

// Every rendering starts with the same prelude and scalar helpers (everything before the first
// kernel): the units below hold it once and the kernels of each distinct rendering after it.
std::string_view head_of(const std::string& source) {
  return std::string_view(source).substr(0, std::min(source.find("extern \"C\" __global__"), source.size()));
}

// Numbers the distinct strings added; `head` is the head_of they share (the first one's).
struct Distinct {
  std::map<std::string, size_t> index;
  std::vector<const std::string*> texts;
  std::string head;
  size_t add(const std::string& text) {
    auto [it, fresh] = index.emplace(text, texts.size());
    if (fresh) texts.push_back(&it->first);
    if (fresh && texts.size() == 1) head = head_of(text);
    return it->second;
  }
  // text without the shared head (the whole text when its head differs)
  std::string_view body(size_t i) const {
    std::string_view t = *texts[i];
    return t.substr(0, head.size()) == head ? t.substr(head.size()) : t;
  }
};

// Runs job(0..n-1) on hardware_concurrency threads.
void parallel(size_t n, const std::function<void(size_t)>& job) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < std::max(1u, std::thread::hardware_concurrency()); ++w)
    workers.emplace_back([&] {
      for (size_t i; (i = next++) < n;) job(i);
    });
  for (std::thread& t : workers) t.join();
}

// The emulated kernels of every Function: distinct renderings k{i} (namespaces, extern "C" dropped,
// each kernel with a launcher emu_k{i}_{kernel}(void**)), spread over hardware_concurrency units
// compiled in parallel.
struct Emulation {
  Distinct sources;
  std::vector<EmulationLibrary> units;
  const EmulationLibrary& unit_of(size_t source) const { return units[source % units.size()]; }
};

// Runs kernel launch `l` of namespace `ns` in `lib` on `buffers` (its arguments' addresses).
void launch(const EmulationLibrary& lib, const std::string& ns, const Launch& l, const std::vector<void*>& buffers) {
  std::vector<uint64_t> values;  // DevicePtrs: the emulated kernels take cuLaunchKernel's arguments
  for (void* b : buffers) values.push_back(reinterpret_cast<uint64_t>(b));
  std::vector<void*> args;
  for (uint64_t& v : values) args.push_back(&v);
  run_kernel(emulated_kernel(lib, fmt::format("emu_{}_{}", ns, l.kernel)), l.grid, l.block, l.block_reduce, args.data());
}

// The results of `f` with the launch table of `k` (namespace `ns` of `lib`).
std::vector<Tensor> run_emulated(const Function& f, const cuda::Kernels& k, const EmulationLibrary& lib, const std::string& ns) {
  const ir::Graph& g = f.graph;
  const fusion::Schedule& s = f.schedule;
  const fusion::MemoryPlan& m = f.memory;
  std::vector<void*> table(static_cast<size_t>(m.slots), nullptr);
  std::vector<std::vector<std::byte>> owned;  // arena and results
  std::vector<Tensor> held;                   // host step outputs
  auto fresh = [&](size_t bytes) {  // with room behind, so that a stray write past the end shows as a wrong value, not a crash
    owned.emplace_back(2 * bytes + 4096, std::byte{0xff});
    return owned.back().data();
  };
  std::byte* arena = fresh(static_cast<size_t>(m.arena_bytes));
  if (k.scratch_bytes > 0) table.push_back(fresh(static_cast<size_t>(k.scratch_bytes)));  // slot m.slots
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Constant) table[m.slot[n.out]] = const_cast<std::byte*>(n.attrs.value.bytes());
  for (size_t i = 0; i < g.params.size(); ++i) table[m.slot[g.params[i]]] = const_cast<std::byte*>(f.inputs[i].bytes());
  for (size_t v = 0; v < m.slot.size(); ++v) {
    if (m.slot[v] < 0 || table[m.slot[v]]) continue;
    int32_t st = s.step_of[v];
    if (m.arena_offset[v] >= 0) table[m.slot[v]] = arena + m.arena_offset[v];
    else if (st >= 0 && s.steps[static_cast<size_t>(st)].kind != fusion::StepKind::Host)
      table[m.slot[v]] = fresh(static_cast<size_t>(shape_numel(g.type(static_cast<int32_t>(v)).shape)) *
                               dtype_size(g.type(static_cast<int32_t>(v)).dtype));
  }
  for (const Launch& l : k.launches) {
    const fusion::Step& st = s.steps[l.step];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    if (l.kind == Launch::Kind::Kernel) {
      std::vector<void*> args;
      for (size_t j = 0; j < l.slots.size(); ++j) args.push_back(static_cast<std::byte*>(table[static_cast<size_t>(l.slots[j])]) + cuda::arg_offset(l, j));
      launch(lib, ns, l, args);
    } else if (l.kind == Launch::Kind::Dot) {
      const fusion::DotLayout& d = st.dot;
      const fusion::View &a = fusion::read_view(s, n.in[0], static_cast<int32_t>(l.step)),
                         &b = fusion::read_view(s, n.in[1], static_cast<int32_t>(l.step));
      auto* pa = static_cast<const float*>(table[static_cast<size_t>(l.slots[0])]) + a.offset;
      auto* pb = static_cast<const float*>(table[static_cast<size_t>(l.slots[1])]) + b.offset;
      auto* pc = static_cast<float*>(table[static_cast<size_t>(l.slots[2])]);
      int64_t batches = 1;
      for (int64_t x : d.batch) batches *= x;
      for (int64_t bi = 0; bi < batches; ++bi) {
        int64_t oa = 0, ob = 0;
        for (size_t j = d.batch.size(), rest = static_cast<size_t>(bi); j-- > 0; rest /= static_cast<size_t>(d.batch[j])) {
          auto idx = static_cast<int64_t>(rest % static_cast<size_t>(d.batch[j]));
          oa += idx * d.batch_lhs[j], ob += idx * d.batch_rhs[j];
        }
        gemm(MatView<const float>{pa + oa, d.m, d.k, d.a_rs, d.a_cs}, MatView<const float>{pb + ob, d.k, d.n, d.b_rs, d.b_cs},
             MatView<float>{pc + bi * d.m * d.n, d.m, d.n, d.n, 1});
      }
    } else if (l.kind == Launch::Kind::Copy) {  // as cuda::Program: skipped when in place
      auto* src = static_cast<std::byte*>(table[static_cast<size_t>(l.slots[0])]) + l.offset;
      auto* dst = static_cast<std::byte*>(table[static_cast<size_t>(l.slots[1])]);
      if (dst != src) std::memcpy(dst, src, static_cast<size_t>(l.bytes));
    } else if (l.kind == Launch::Kind::Fill) {
      std::memset(table[static_cast<size_t>(l.slots[0])], l.byte, static_cast<size_t>(l.bytes));
    } else {  // as cpu::Program::run_host_step
      std::vector<Tensor> in;
      for (size_t j = 0; j < n.in.size(); ++j) {
        const ir::Type& t = g.type(n.in[j]);
        const fusion::View& w = fusion::read_view(s, n.in[j], static_cast<int32_t>(l.step));
        auto* p = static_cast<std::byte*>(table[static_cast<size_t>(l.slots[j])]) + w.offset * static_cast<int64_t>(dtype_size(t.dtype));
        in.push_back(Tensor::wrap(t.dtype, t.shape, std::shared_ptr<std::byte>(p, [](std::byte*) {})));
      }
      std::vector<Tensor> out = ref::run_node(g, n, in);
      for (int32_t r = 0; r < n.nout; ++r) {
        if (l.slots[n.in.size() + r] < 0) continue;  // a loop invariant: a view of its operand
        Tensor copy = Tensor::empty(out[r].dtype(), out[r].shape());
        std::copy_n(out[r].bytes(), out[r].nbytes(), copy.mutable_bytes());
        table[static_cast<size_t>(l.slots[n.in.size() + r])] = copy.mutable_bytes();
        held.push_back(copy);
      }
    }
  }
  std::vector<Tensor> results;
  for (int32_t r : g.results) {
    const ir::Type& t = g.type(r);
    Tensor x = Tensor::empty(t.dtype, t.shape);
    if (x.nbytes()) std::memcpy(x.mutable_bytes(), table[m.slot[r]], x.nbytes());
    results.push_back(x);
  }
  return results;
}

// ---- all graphs, built once ----------------------------------------------------------------------

void build_emulation(Emulation& e, const std::vector<const cuda::Kernels*>& renderings) {
  std::vector<std::vector<const cuda::Kernels*>> of_source;
  for (const cuda::Kernels* k : renderings)
    if (size_t i = e.sources.add(k->source); i == of_source.size()) of_source.push_back({k});
  e.units.resize(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> src(e.units.size(), kEmulationPrelude + e.sources.head);
  for (size_t i = 0; i < e.sources.texts.size(); ++i) {
    std::string body(e.sources.body(i));
    for (size_t at; (at = body.find("extern \"C\" ")) != std::string::npos;) body.erase(at, 11);
    std::string& out = src[i % src.size()];
    out += fmt::format("namespace k{} {{\n{}}}\n", i, body);
    for (const std::string& kernel : cuda::kernel_names(*of_source[i][0]))
      out += emulation_launcher(fmt::format("emu_k{}_{}", i, kernel), fmt::format("k{}::{}", i, kernel));
  }
  static int compiled = 0;  // dlopen knows a library by its path: each compile gets new names
  auto dir = std::filesystem::temp_directory_path() / fmt::format("sheaf-cuda-emulation-{}-{}", getpid(), compiled++);
  std::filesystem::create_directories(dir);
  parallel(e.units.size(), [&](size_t u) { e.units[u] = compile_emulation(src[u], dir / fmt::format("unit{}", u)); });
  std::filesystem::remove_all(dir);
}

// NVRTC output for every distinct default rendering with kernels. Renderings compile in batches
// of kBatch after the shared head, each kernel renamed n{i}_{kernel} (one extern "C" namespace);
// the renderings of a batch that fails compile alone, under their own names.
struct NvrtcResult {
  std::shared_ptr<const std::string> cubin;
  std::string prefix;  // of the kernel names in cubin
  std::string error;
};
struct NvrtcResults {
  Distinct sources;
  std::vector<NvrtcResult> result;
};
constexpr size_t kBatch = 48;

// Per table, built once per process (ctest runs every test in a process of its own, so each
// test builds only its own table).
struct TableGraphs {
  std::vector<std::pair<std::string, CaseGraphs>> cases;
};

const TableGraphs& graphs_of_table(const std::string& table) {
  static std::map<std::string, TableGraphs> built;
  auto [it, fresh] = built.try_emplace(table);
  if (fresh)
    for (const Case& c : cases_of(table)) it->second.cases.emplace_back(c.name, graphs_of(c));
  return it->second;
}

// The functions traced for case `name` of table `table` (none, and a failure, when no case has it).
const std::vector<Function>& functions_of(const std::string& table, const std::string& name) {
  for (const auto& [n, cg] : graphs_of_table(table).cases)
    if (n == name) return cg.functions;
  ADD_FAILURE() << "no case " << name << " in table " << table;
  static const std::vector<Function> none;
  return none;
}

const Emulation& emulation_of(const std::string& table) {
  static std::map<std::string, Emulation> built;
  auto [it, fresh] = built.try_emplace(table);
  if (fresh) {
    std::vector<const cuda::Kernels*> renderings;
    for (const auto& [name, cg] : graphs_of_table(table).cases)
      for (const Function& f : cg.functions) renderings.push_back(&f.emulated), renderings.push_back(&f.forced);
    build_emulation(it->second, renderings);
  }
  return it->second;
}

const NvrtcResults& nvrtc_of(const std::string& table) {
  static std::map<std::string, NvrtcResults> built;
  auto [it, fresh] = built.try_emplace(table);
  if (!fresh) return it->second;
  NvrtcResults& r = it->second;
  for (const auto& [name, cg] : graphs_of_table(table).cases)
    for (const Function& f : cg.functions)
      if (f.nvrtc.source.find("__global__ void") != std::string::npos) r.sources.add(f.nvrtc.source);
  const size_t n = r.sources.texts.size();
  r.result.resize(n);
  parallel((n + kBatch - 1) / kBatch, [&](size_t b) {
    std::string text = r.sources.head;
    for (size_t i = b * kBatch; i < std::min(n, (b + 1) * kBatch); ++i) {
      std::string body(r.sources.body(i));
      for (size_t at = 0; (at = body.find("__launch_bounds__(", at)) != std::string::npos;) {
        at = body.find(") ", at) + 2;
        body.insert(at, fmt::format("n{}_", i));
      }
      text += body;
    }
    try {
      auto cubin = std::make_shared<const std::string>(cuda::compile_cuda(text, fmt::format("cuda-render-batch{}.cu", b), 9, 0, true).cubin);
      for (size_t i = b * kBatch; i < std::min(n, (b + 1) * kBatch); ++i) r.result[i] = {cubin, fmt::format("n{}_", i), ""};
    } catch (const SheafError&) {
      for (size_t i = b * kBatch; i < std::min(n, (b + 1) * kBatch); ++i) try {
          r.result[i].cubin = std::make_shared<const std::string>(cuda::compile_cuda(*r.sources.texts[i], "cuda-render.cu", 9, 0, true).cubin);
        } catch (const SheafError& e) {
          r.result[i].error = e.what();
        }
    }
  });
  return r;
}

// One test per table and check; failures name the case, the function and the result.
class CudaRender : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaRender, NvrtcCompilesEveryKernel) {
  std::string why;
  if (!cuda::nvrtc(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const NvrtcResults& r = nvrtc_of(GetParam());
  for (const auto& [name, cg] : graphs_of_table(GetParam()).cases) {
    EXPECT_EQ(cg.error, "") << name << ": the program fails on the reference executor";
    for (const Function& f : cg.functions) {
      auto it = r.sources.index.find(f.nvrtc.source);
      if (it == r.sources.index.end()) continue;  // no kernels (Dot and Host steps only)
      const NvrtcResult& got = r.result[it->second];
      if (!got.error.empty()) {
        ADD_FAILURE() << name << " " << f.name << ": " << got.error << "\n" << f.nvrtc.source;
        continue;
      }
      // An ELF for the CUDA machine (e_machine 190, EM_CUDA) with each kernel in its symbol names.
      ASSERT_GE(got.cubin->size(), 20u);
      EXPECT_EQ(got.cubin->substr(0, 4), "\x7f" "ELF");
      EXPECT_EQ(static_cast<uint8_t>((*got.cubin)[18]) | static_cast<uint8_t>((*got.cubin)[19]) << 8, 190);
      for (const Launch& l : f.nvrtc.launches) {
        if (l.kind != Launch::Kind::Kernel) continue;
        EXPECT_NE(got.cubin->find(std::string(1, '\0') + got.prefix + l.kernel + '\0'), std::string::npos) << name << " " << f.name << ": no kernel " << l.kernel;
        EXPECT_TRUE(l.grid > 0 && l.block > 0 && l.block <= (l.block_reduce ? 1024 : 256)) << name << " " << f.name << " " << l.kernel;
      }
    }
  }
}

TEST_P(CudaRender, EmulatedKernelsMatchReferenceExecutor) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: the kernels cannot be emulated here";
  const Emulation& e = emulation_of(GetParam());
  size_t with_kernels = 0, cases = 0;
  for (const auto& [name, cg] : graphs_of_table(GetParam()).cases) {
    EXPECT_EQ(cg.error, "") << name << ": the program fails on the reference executor";
    bool kernels = false;
    for (const Function& f : cg.functions) {
      std::vector<Tensor> want = ref::run(f.graph, f.inputs);
      for (const cuda::Kernels* k : {&f.emulated, &f.forced}) {
        size_t i = e.sources.index.at(k->source);
        const EmulationLibrary& lib = e.unit_of(i);
        ASSERT_EQ(lib.error, "") << "the emulated kernels do not compile";
        kernels = kernels || k->source.find("__global__ void") != std::string::npos;
        std::vector<Tensor> got = run_emulated(f, *k, lib, fmt::format("k{}", i));
        ASSERT_EQ(got.size(), want.size());
        for (size_t r = 0; r < want.size(); ++r) {
          std::string d = testing_support::difference(Value::tensor(got[r]), Value::tensor(want[r]),
                                                      fmt::format("{}: {} result {}", name, f.name, r), kNativeTolerance);
          if (d.empty()) continue;
          ADD_FAILURE() << d << "\n" << (k == &f.emulated ? "with default thresholds" : "with block per point forced") << ":\n"
                        << std::string_view(k->source).substr(head_of(k->source).size());
          break;  // one report per rendering
        }
      }
    }
    with_kernels += kernels, ++cases;
  }
  EXPECT_GE(with_kernels * 10, cases * 9) << "nearly every case compiles functions with kernels";
}

// A point loads each value it reads once, however many of its nodes read it (a cross-entropy's
// pick and row max both read the logits): within a kernel's step, no two loads are the same.
TEST_P(CudaRender, AValueReadTwiceIsLoadedOnce) {
  size_t steps = 0;
  for (const auto& [name, cg] : graphs_of_table(GetParam()).cases)
    for (const Function& f : cg.functions) {
      std::istringstream lines(f.per_step.source);
      std::set<std::string> loads;  // of the current step: "type = expression"
      for (std::string l; std::getline(lines, l);) {
        if (l.find("// step ") != std::string::npos || l.find("__global__") != std::string::npos) loads.clear(), ++steps;
        // "const float l7 = p0[i0 * 8200 + i1];" → "float = p0[i0 * 8200 + i1];"
        const size_t decl = l.find("const "), type_end = l.find(' ', decl + 6), at = l.find(" = ");
        if (decl == std::string::npos || type_end == std::string::npos || at == std::string::npos || type_end + 2 >= l.size() || l[type_end + 1] != 'l' ||
            !std::isdigit(static_cast<unsigned char>(l[type_end + 2])))
          continue;
        const std::string load = l.substr(decl + 6, type_end - decl - 6) + l.substr(at);
        EXPECT_TRUE(loads.insert(load).second) << name << " " << f.name << ": loaded twice: " << l << "\n" << f.per_step.source;
      }
    }
  EXPECT_GT(steps, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tables, CudaRender, ::testing::Values("fusion", "builtins", "extra"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The large reductions really take the block-per-point path with the default thresholds, and
// their blocks combine by warp shuffles and one barrier, not a tree of eight.
TEST(CudaRenderTable, LargeReductionsUseBlockPerPoint) {
  for (const auto& [name, cg] : graphs_of_table("extra").cases) {
    if (name.rfind("block-reduce", 0) != 0) continue;
    size_t per_block = 0;
    for (const Function& f : cg.functions) {
      for (const Launch& l : f.per_step.launches) per_block += l.block_reduce && l.block == 256 && !l.kernel.ends_with('f');
      const std::string& src = f.per_step.source;
      if (src.find("__syncthreads") == std::string::npos) continue;
      EXPECT_NE(src.find("for (int o = 16; o > 0; o >>= 1) {"), std::string::npos) << src;
      EXPECT_EQ(src.find("for (unsigned w = 128; w >= 1; w >>= 1)"), std::string::npos) << src;
    }
    EXPECT_GT(per_block, 0u) << name;
  }
}

// Rows of 8192 points or more (a loss over a vocabulary), enough of them not to split, take
// blocks of 1024 threads, two per SM, so that the rows a wave holds stay in L2 while the run's
// phases walk them again; shorter rows keep blocks of 256.
TEST(CudaRenderTable, LongRowsTakeBlocksOf1024Threads) {
  for (const auto& [name, cg] : graphs_of_table("extra").cases) {
    const bool long_rows = name == "long-rows";
    if (!long_rows && name != "block-reduce-softmax-rows") continue;
    size_t rows = 0, big = 0;
    for (const Function& f : cg.functions)
      for (const Launch& l : f.per_step.launches) {
        if (l.kind != Launch::Kind::Kernel || !l.block_reduce) continue;
        ++rows;
        if (l.block != 1024) continue;
        ++big;
        EXPECT_EQ(l.grid, 270) << name << " " << f.name << " " << l.kernel;
        const std::string& src = f.per_step.source;  // unrolled (few bytes loaded a point): at least one block per SM
        EXPECT_TRUE(src.find(fmt::format("__launch_bounds__(1024) {}(", l.kernel)) != std::string::npos ||
                    src.find(fmt::format("__launch_bounds__(1024, 1) {}(", l.kernel)) != std::string::npos)
            << src;
      }
    EXPECT_GT(rows, 0u) << name;
    EXPECT_EQ(big, long_rows ? 2u : 0u) << name;  // f: softmax and the loss's row sums; g: its gradient too
  }
}

// An elementwise thread whose point loads few bytes (an f32 read and a bf16 written: 4 bytes)
// takes 4 points, t, t + 256, …, from a grid still 4 blocks per SM, and its kernel may use up to
// 64 registers (1024 threads per SM) to keep their loads in flight; one loading 12 bytes a point
// has loads enough in flight with a thread a point. NVRTC compiles both (the tables' emulation
// runs such kernels, rendered with blocks of 32 and 8 threads, and checks their results).
TEST(CudaRenderTable, ThreadsLoadingFewBytesTakeSeveralPoints) {
  const cuda::RenderOptions two_sms = cuda::render_options_for(2);  // grids of 8 blocks or more take several points a thread
  ASSERT_EQ(two_sms.points_per_thread, 4);
  size_t several = 0, one = 0;
  for (const Function& f : functions_of("extra", "few-bytes-a-point")) {
    const cuda::Kernels k = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, two_sms);
    for (const Launch& l : k.launches) {
      if (l.kind != Launch::Kind::Kernel) continue;
      const int64_t points = shape_numel(f.gpu_schedule.steps[l.step].space);
      ASSERT_EQ(points, 3001 * 41) << f.name << " " << l.kernel;
      if (f.name.starts_with("f#")) {
        ++several;
        EXPECT_EQ(l.grid, (points + 1023) / 1024) << f.name << " " << l.kernel;
        EXPECT_NE(k.source.find(fmt::format("__launch_bounds__(256, 4) {}(", l.kernel)), std::string::npos) << k.source;
        EXPECT_NE(k.source.find("for (int j = 0; j < 4; ++j) point(j0 + j * 256);"), std::string::npos) << k.source;
      } else {
        ++one;
        EXPECT_EQ(l.grid, (points + 255) / 256) << f.name << " " << l.kernel;
        EXPECT_NE(k.source.find(fmt::format("__launch_bounds__(256) {}(", l.kernel)), std::string::npos) << k.source;
      }
    }
    std::string why;
    if (!cuda::nvrtc(&why)) continue;
    EXPECT_NO_THROW(cuda::compile_cuda(k.source, f.name + ".cu", 9, 0, true)) << k.source;
  }
  EXPECT_GE(several, 1u);
  EXPECT_EQ(one, 1u);
}

// A row run's later phases load, besides the row's elements, values of the whole row (its max,
// its log-sum). The row loop hoists those, so they do not count towards the bytes a point loads:
// every phase of the loss's rows and of their gradient still loads few bytes and is unrolled,
// by block_loop_max_rounds (8 of the 9 rounds of 1024 points):
// f walks its rows three times (the max with the loss's pick, the sum of exponentials, softmax's
// quotients), g three times (the max, the sum, the gradient).
TEST(CudaRenderTable, RowValuesDoNotCountAsBytesAPoint) {
  size_t unrolled = 0;
  const std::string round = "for (int j = 0; j < 8; ++j) point(j0 + j * 1024)";
  for (const Function& f : functions_of("extra", "long-rows")) {
    const std::string& src = f.per_step.source;
    EXPECT_EQ(src.find("r < 8200; r += 1024)"), std::string::npos) << src;  // no row loop left plain
    for (size_t at = src.find(round); at != std::string::npos; at = src.find(round, at + 1)) ++unrolled;
  }
  EXPECT_EQ(unrolled, 6u);
}

// A point's loads at indices that name no value come first in its body, before any division
// (whose slow-path branch ptxas would not hoist them above); a gather's load, whose index is a
// loaded value, stays after that value.
TEST(CudaRenderTable, APointsLoadsComeFirst) {
  size_t checked = 0;
  for (const Function& f : functions_of("extra", "loads-first")) {
    const std::string& src = f.per_step.source;
    // each kernel that divides: no load of a value-free index after its first division
    for (size_t at = src.find("extern \"C\" __global__"); at != std::string::npos; at = src.find("extern \"C\" __global__", at + 1)) {
      const std::string_view kernel = std::string_view(src).substr(at, src.find("\n}\n", at) - at);
      const size_t division = kernel.find(" / ");
      if (division == std::string_view::npos) continue;
      ++checked;
      const size_t gathered = kernel.find("((i64)(l");  // g's rows a[i]: the load naming i's value
      const std::string_view after = kernel.substr(division);
      if (f.name.starts_with("f#")) {
        EXPECT_EQ(after.find("const float l"), std::string_view::npos) << kernel;
      } else {
        ASSERT_NE(gathered, std::string_view::npos) << kernel;
        EXPECT_LT(kernel.find("const i32 l"), division) << kernel;
        EXPECT_LT(kernel.find("const float l0 = p"), division) << kernel;
        EXPECT_GT(gathered, division) << kernel;  // not a direct load: it stays where it was
      }
    }
  }
  EXPECT_EQ(checked, 2u);
}

// Row reductions (the innermost loop reduced) of a warp's worth of points or more take one block
// per row, whose threads read consecutive elements; column reductions over short columns keep a
// thread per point, whose neighbours read consecutive elements.
TEST(CudaRenderTable, RowReductionsUseBlockPerRowColumnsThreadPerPoint) {
  for (const auto& [name, cg] : graphs_of_table("extra").cases) {
    const bool rows = name == "row-reduce-short-rows", columns = name == "column-reduce";
    if (!rows && !columns) continue;
    size_t reducing = 0, per_block = 0;
    for (const Function& f : cg.functions)
      for (const Launch& l : f.per_step.launches) {
        if (l.kind != Launch::Kind::Kernel || !f.gpu_schedule.steps[l.step].reduces) continue;
        ++reducing;
        per_block += l.block_reduce;
      }
    EXPECT_GT(reducing, 0u) << name;
    EXPECT_EQ(per_block, rows ? reducing : 0u) << name;
  }
}

// Long columns (a bias gradient's sums over the tokens) take column tiles with the default
// thresholds: a block of 256 threads takes 32 neighbouring columns, 8 threads per column, so a warp
// reads 32 consecutive elements of a row; its tree stops at 32 and the first 32 threads store.
// Short columns keep a thread per point.
TEST(CudaRenderTable, LongColumnsTakeColumnTiles) {
  size_t tiles = 0, columns = 0;
  for (const Function& f : functions_of("extra", "column-tiles")) {
    for (const Launch& l : f.per_step.launches) {
      if (l.kind != Launch::Kind::Kernel || l.kernel.ends_with('f') || !f.gpu_schedule.steps[l.step].reduces) continue;
      size_t begin = f.per_step.source.find(fmt::format(" {}(", l.kernel)), end = f.per_step.source.find("\nextern", begin);
      const std::string_view text = std::string_view(f.per_step.source).substr(begin, end - begin);
      const bool tile = text.find("t = ") != std::string_view::npos && text.find("* 32 + threadIdx.x % 32") != std::string_view::npos;
      ++columns;
      tiles += tile;
      if (tile) {
        EXPECT_TRUE(l.block_reduce && l.block == 256) << f.name;
        EXPECT_NE(text.find("w >= 32"), std::string_view::npos) << text;
        EXPECT_NE(text.find("if (threadIdx.x < 32"), std::string_view::npos) << text;
      }
    }
  }
  // f's three sums over the rows share a loop (sibling reductions): one on 40 columns, one on 37;
  // g's two sums over its 700 rows too (a thread per point)
  EXPECT_EQ(columns, 3u);
  EXPECT_EQ(tiles, 2u);
}

// Softmax and layer-norm over rows of a warp or more, with rows enough to fill the GPU: their
// loops (max, sum of exponentials, normalisation; sum, mean, variance, its root) run as the
// phases of one kernel of a block per row, a barrier between phases, rather than a kernel each
// reading the rows from memory again. g reads another row's maximum: no phases.
TEST(CudaRenderTable, RowPhasesShareOneKernel) {
  // row-reduce-short-rows: the sum of squares shares the max's loop (a sibling reduction), then
  // the sum of exponentials and the quotients
  const std::map<std::string, size_t> later_phases{{"row-reduce-short-rows f#0", 2}, {"row-phases f#0", 3}, {"row-phases g#1", 0}};
  size_t seen = 0;
  for (const auto& [name, cg] : graphs_of_table("extra").cases) {
    for (const Function& f : cg.functions) {
      auto want = later_phases.find(name + " " + f.name);
      if (want == later_phases.end()) continue;
      ++seen;
      size_t merged = 0;
      for (size_t k = 0; k < f.gpu_schedule.steps.size(); ++k) {
        const bool phase = f.per_step.source.find(fmt::format("{{  // step {}\n", k)) != std::string::npos;
        const bool own = std::any_of(f.per_step.launches.begin(), f.per_step.launches.end(), [&](const Launch& l) { return l.step == k; });
        EXPECT_TRUE(phase || own || f.gpu_schedule.steps[k].kind != fusion::StepKind::Loop) << name << " step " << k << " does not run";
        if (phase && !own) {
          ++merged;
          EXPECT_TRUE(f.gpu_schedule.steps[k].row_phase) << name << " step " << k;
        }
      }
      EXPECT_EQ(merged, want->second) << want->first << ":\n" << f.per_step.source.substr(f.per_step.source.find("extern"));
    }
  }
  EXPECT_EQ(seen, later_phases.size());
}

// A sum over the rows of a run (a layer-norm's gain and shift gradients, the bias gradient of the
// residual under it) is a phase of the run's kernel: its step gets no launch of its own, only a
// finish kernel s{step}f adding the partials of the run's blocks, which walk the rows (600 rows:
// 396 blocks of 256 threads, 3 on each SM, some taking two) keeping their columns' sums in
// registers (render_options_for: 3 blocks per SM of the GPU at hand), their row loops unrolled. dx has no such sum;
// by-column-sums's sum is a phase, but not the loop after it, which reads the sum.
TEST(CudaRenderTable, ColumnSumsArePhasesOfTheirRowKernel) {
  const std::map<std::string, size_t> want{{"vg#0", 3}, {"dx#1", 0}, {"vg#2", 3}, {"by-column-sums#3", 1}};
  size_t seen = 0;
  for (const Function& f : functions_of("fusion", "column-phases")) {
    ASSERT_TRUE(want.contains(f.name)) << f.name;
    ++seen;
    const std::vector<Launch>& ls = f.per_step.launches;
    size_t columns = 0;
    for (size_t k = 0; k < f.gpu_schedule.steps.size(); ++k) {
      auto launched = [&](const std::string& kernel) {
        return std::any_of(ls.begin(), ls.end(), [&](const Launch& l) { return l.step == k && l.kernel == kernel; });
      };
      if (f.per_step.source.find(fmt::format("{{  // step {}\n", k)) == std::string::npos || launched(fmt::format("s{}", k)) ||
          !launched(fmt::format("s{}f", k)))
        continue;
      ++columns;
      EXPECT_TRUE(f.gpu_schedule.steps[k].row_phase) << f.name << " step " << k;
    }
    EXPECT_EQ(columns, want.at(f.name)) << f.name << ":\n" << f.per_step.source.substr(f.per_step.source.find("extern"));
    if (f.name == "vg#2") {
      EXPECT_NE(f.per_step.source.find("__launch_bounds__(256, 3) s0("), std::string::npos);
      EXPECT_NE(f.per_step.source.find("for (i64 t = blockIdx.x; t < 600; t += 396) {"), std::string::npos);
      // every thread holds its row's values in registers: the 4 sums over the row (each combined
      // with one barrier, every thread getting the result) and the 4 phases over one value per
      // row, which every thread computes and thread 0 stores for later kernels. It holds its
      // points' values that a later phase reads too (the gradient before its row mean is
      // subtracted: e{v}[s], set in one phase, read in the last, stored nowhere since no kernel
      // after reads it), and so needs no barrier between phases. The next row's first combine
      // stores into arrays other than those read after the row's last barrier: no barrier ends a row.
      const size_t start = f.per_step.source.find(" s0(");
      const std::string s0 = f.per_step.source.substr(start, f.per_step.source.find("\n}\n", start) - start);
      // its phases walk a row by its thread's two slots, first loading both slots' points into
      // registers (l{n}s[s]), then computing: a thread's loads of a row are in flight together,
      // not one latency after another (a division's slow-path branch would hold the next point's
      // loads back in a loop of unrolled calls)
      EXPECT_EQ(s0.find("r < 300; r += 256) {"), std::string::npos) << s0;
      EXPECT_EQ(s0.find("point(j0"), std::string::npos) << s0;
      static const std::regex slot_load(R"(\n( *)l(\d+)s\[s\] = [^\n]*\n(?:\1l\d+s\[s\] = [^\n]*\n)*\1?\s*\}\n)");
      EXPECT_TRUE(std::regex_search(s0, slot_load)) << s0;
      // with room for fewer loads in flight, each point loads in turn (the held points' phases
      // still walk the row by slots)
      cuda::RenderOptions tight = cuda::render_options_for(132);
      tight.unroll_max_round_bytes = 8;
      const std::string loose = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, tight).source;
      EXPECT_FALSE(std::regex_search(loose, slot_load)) << loose;
      EXPECT_NE(loose.find("[s] = v"), std::string::npos) << loose;
      auto count = [&](const std::string& text) {
        size_t n = 0;
        for (size_t at = s0.find(text); at != std::string::npos; at = s0.find(text, at + 1)) ++n;
        return n;
      };
      EXPECT_EQ(count("// row t's, in every thread"), 8u) << s0;
      EXPECT_EQ(count("; if (threadIdx.x == 0) p"), 4u) << s0;
      EXPECT_EQ(count("__syncthreads();"), 4u) << s0;
      static const std::regex held_set(R"(e(\d+)\[s\] = v\d+;\n)");
      std::smatch held;
      ASSERT_TRUE(std::regex_search(s0, held, held_set)) << s0;
      EXPECT_EQ(count("e" + held[1].str() + "[s] = "), 1u) << s0;
      EXPECT_EQ(count("e" + held[1].str() + "[s] + "), 1u) << s0;
      // 7 phases' points, 5 of them loading first, 2 phases' loads at the row's start, 3 stores of column sums
      EXPECT_EQ(count("for (int s = 0; s < 2; ++s) {"), 7u + 5u + 2u + 3u) << s0;
      // the later phases' loads of what no phase writes and the first phase does not load (the
      // upstream gradient, the gain) are issued at the row's start, before the first phase, into
      // registers f{j}_l{n}s[s] that those phases read
      const size_t first_phase = s0.find("{  // step 0\n");
      EXPECT_LT(s0.find("'s loads\n"), first_phase) << s0;
      EXPECT_EQ(s0.find("'s loads\n", first_phase), std::string::npos) << s0;
      static const std::regex fetched(R"(const float l\d+ = f\d+_l\d+s\[s\];)");
      EXPECT_TRUE(std::regex_search(s0.substr(first_phase), fetched)) << s0;
      EXPECT_EQ(ls[0].grid, 396);
      // on an H100 PCIe's 114 SMs: 342 blocks, one wave still
      const cuda::Kernels pcie = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, cuda::render_options_for(114));
      EXPECT_EQ(pcie.launches[0].grid, 342);
      EXPECT_EQ(cuda::render_options_for(114).split_target_blocks, 456);
    }
  }
  EXPECT_EQ(seen, want.size());
}

// SHEAF_CUDA_RENDER's list sets RenderOptions fields by name, to measure a choice on a GPU
// without a rebuild; a name it does not know or a value that is no integer is an error that
// lists the names. hold_row_values=0 passes a row run's values through memory again: every
// phase after a sum or a value per row reads it after a barrier.
TEST(CudaRenderTable, OptionsOverriddenByName) {
  cuda::RenderOptions o = cuda::render_options_for(132);
  cuda::override_render_options(o, "hold_row_values=0,column_phase_sm_threads=1024,");
  EXPECT_EQ(o.hold_row_values, 0);
  EXPECT_EQ(o.column_phase_sm_threads, 1024);
  EXPECT_EQ(o.block, 256);
  for (const char* bad : {"hold_rows=0", "block=", "block=2x", "block", "=3"}) {
    cuda::RenderOptions b;
    try {
      cuda::override_render_options(b, bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const SheafError& e) {
      EXPECT_NE(std::string(e.what()).find("column_phase_sm_threads"), std::string::npos) << e.what();
    }
  }
  const Function& f = functions_of("fusion", "column-phases")[2];
  ASSERT_EQ(f.name, "vg#2");
  const cuda::Kernels held = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, cuda::render_options_for(132));
  const cuda::Kernels memory = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, o);
  EXPECT_NE(held.source.find("// row t's, in every thread"), std::string::npos);
  EXPECT_EQ(memory.source.find("// row t's, in every thread"), std::string::npos) << memory.source;
  EXPECT_NE(memory.source.find("if (r < 1) {"), std::string::npos) << memory.source;  // thread 0's slot of a value
}

// With prefetch_next_row=1 a block walking rows issues the next row's loads before the row's
// phases compute (a layer norm's backward: its row waits on two barriers, its loads in flight
// meanwhile): registers n{j}_l{n}(s) are filled with the block's first row before the loop, and
// at each row's start hand their values to f{j}_l{n}(s), which the phases read, and load row
// t + grid's, while there is one. The first phase's loads are among them; the gain's, the same
// at every row, are not. Without the option nothing is loaded a row ahead. NVRTC compiles
// it (cuda_program_test runs it on the emulated device).
TEST(CudaRenderTable, NextRowLoadsIssuedARowAhead) {
  const Function& f = functions_of("fusion", "column-phases")[2];
  ASSERT_EQ(f.name, "vg#2");
  cuda::RenderOptions o = cuda::render_options_for(132);
  o.pack_max_grid = 0;
  EXPECT_EQ(cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, o).source.find(" n0_l"), std::string::npos);
  o.prefetch_next_row = 1;
  const std::string src = cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, o).source;
  const size_t start = src.find(" s0(");
  const std::string s0 = src.substr(start, src.find("\n}\n", start) - start);
  const size_t loop = s0.find("for (i64 t = blockIdx.x; t < 600; t += 396) {"), ahead = s0.find("if (t + 396 < 600) {");
  const size_t first_phase = s0.find("{  // step 0\n");
  ASSERT_NE(loop, std::string::npos) << s0;
  ASSERT_NE(ahead, std::string::npos) << s0;
  static const std::regex slot_fill(R"(n0_l\d+s\[s\] = [^\n]*\[i0 \* 300 \+ i1\])");
  static const std::regex handed(R"(f0_l\d+s\[s\] = n0_l\d+s\[s\];)"), read(R"(const float l\d+ = f0_l\d+s\[s\];)");
  EXPECT_NE(s0.find("const i64 i0 = (i64)blockIdx.x;"), std::string::npos) << s0;
  EXPECT_TRUE(std::regex_search(s0.substr(0, loop), slot_fill)) << s0;
  EXPECT_TRUE(std::regex_search(s0.substr(loop, ahead - loop), handed)) << s0;
  EXPECT_TRUE(std::regex_search(s0.substr(ahead, first_phase - ahead), slot_fill)) << s0;
  EXPECT_NE(s0.find("const i64 i0 = (t + 396);", ahead), std::string::npos) << s0;
  EXPECT_LT(ahead, first_phase);
  EXPECT_TRUE(std::regex_search(s0.substr(first_phase), read)) << s0;
  // the phases load no point of the row themselves: each row's points come a row ahead; the
  // shift's and the gain's columns, the same at every row, are loaded where they were
  static const std::regex row_point(R"(= (sh_b2f\()?p\d+\[i0 \* 300 \+ i1\])"), column(R"(l\d+s\[s\] = p\d+\[i1\];)");
  const std::string phases = s0.substr(first_phase);
  EXPECT_FALSE(std::regex_search(phases, row_point)) << phases;
  EXPECT_TRUE(std::regex_search(phases, column)) << phases;
  std::string why;
  if (!cuda::nvrtc(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  EXPECT_FALSE(cuda::compile_cuda(src, "next_row.cu", 9, 0, false).ptx.empty());
}

// A kernel of several phases passes values from one phase to the next through buffers (a row's
// max, stored by thread 0, read by every thread after the barrier; with hold_row_points=0 a value
// at each point): a buffer written and used by more than one phase is not __restrict__, which
// promises that no other thread writes it during the launch, so that NVRTC may load it before the
// barrier (on an H100 by-column-sums's threads then read a stale row max: every column sum but
// thread 0's came out as Σ exp(x)). Read-only buffers, outputs only one phase touches and the
// scratch buffer of the partials keep it. A phase using what an earlier one stored comes after a
// barrier, and a block walking several rows reads no __shared__ array after the last barrier of a
// row that the row's first combine stores into before its own (the emulator would catch neither).
// With the points held in registers (the default), fewer buffers pass values between phases.
TEST(CudaRenderTable, PhasesPassValuesThroughUnrestrictedBuffers) {
  static const std::regex param(R"((const )?(\w+)\*( __restrict__)? (\w+))");
  size_t phased = 0, passing = 0, passing_held = 0, walking = 0, held = 0;
  for (const char* table : {"fusion", "extra"})
    for (const auto& [name, cg] : graphs_of_table(table).cases)
      for (const Function& f : cg.functions)
      for (const bool points_held : {true, false}) {
        const std::string src =
            points_held ? f.per_step.source : cuda::render(f.graph, f.gpu_schedule, f.gpu_memory, {.pack_max_grid = 0, .hold_row_points = 0}).source;
        for (size_t at = src.find("extern \"C\" __global__"); at != std::string::npos; at = src.find("extern \"C\" __global__", at + 1)) {
          const std::string kernel = src.substr(at, src.find("\n}\n", at) - at);
          if (kernel.find("{  // step ") == std::string::npos) continue;  // one phase
          ++phased;
          // a block walking rows reads no __shared__ array after a row's last barrier that the
          // next row's first combine stores into before its barrier
          static const std::regex shared_read(R"(= (h\d+)\[threadIdx\.x)"), shared_store(R"((h\d+)\[threadIdx\.x / 32\] = )");
          if (kernel.find("for (i64 t = blockIdx.x;") != std::string::npos) {
            ++walking;
            const size_t first_barrier = kernel.find("__syncthreads();"), last_barrier = kernel.rfind("__syncthreads();");
            std::set<std::string> first;  // stored before the first barrier
            for (std::sregex_iterator it(kernel.begin(), kernel.end(), shared_store), end; it != end && static_cast<size_t>(it->position()) < first_barrier; ++it)
              first.insert((*it)[1].str());
            for (std::sregex_iterator it(kernel.begin(), kernel.end(), shared_read), end; it != end; ++it)
              EXPECT_FALSE(static_cast<size_t>(it->position()) > last_barrier && first.count((*it)[1].str()))
                  << name << " " << f.name << ": " << (*it)[1] << " read after the last barrier of a row:\n" << kernel;
          }
          held += points_held && kernel.find("[s] = v") != std::string::npos;
          const size_t open = kernel.find(") s") + 2, params = kernel.find('(', open) + 1;
          const std::string list = kernel.substr(params, kernel.find(") {", params) - params);
          std::vector<std::string> scopes;  // each phase's text
          for (size_t s = kernel.find("{  // step "); s != std::string::npos;) {
            const size_t next = kernel.find("{  // step ", s + 1);
            scopes.push_back(kernel.substr(s, next - s));
            s = next;
          }
          std::vector<bool> barrier(scopes.size());  // between scope k − 1 and scope k
          static const std::regex barrier_last(R"(__syncthreads\(\);\n *$)");
          for (size_t k = 1; k < scopes.size(); ++k) barrier[k] = std::regex_search(scopes[k - 1], barrier_last);
          for (std::sregex_iterator it(list.begin(), list.end(), param), end; it != end; ++it) {
            const std::string use = (*it)[4].str() + "[";
            const auto phases = std::count_if(scopes.begin(), scopes.end(), [&](const std::string& t) { return t.find(use) != std::string::npos; });
            const bool written = !(*it)[1].matched, restricted = (*it)[3].matched, scratch = (*it)[4] == "w";
            const bool passes = written && !scratch && phases > 1;
            (points_held ? passing_held : passing) += passes;
            EXPECT_EQ(restricted, !passes) << name << " " << f.name << ": " << (*it)[0] << " in " << phases << " phases of\n" << kernel;
            // a phase using what an earlier one stored (another thread, maybe) comes after a barrier
            const std::regex store((*it)[4].str() + R"(\[[^\]]*\] = )");
            for (size_t a = 0; passes && a < scopes.size(); ++a) {
              if (!std::regex_search(scopes[a], store)) continue;
              for (size_t b = a + 1, fenced = false; b < scopes.size(); ++b) {
                fenced = fenced || barrier[b];
                EXPECT_TRUE(fenced || scopes[b].find(use) == std::string::npos)
                    << name << " " << f.name << ": " << (*it)[4] << " stored by phase " << a << ", used by phase " << b << " of\n" << kernel;
              }
            }
          }
        }
      }
  EXPECT_GE(phased, 20u);
  EXPECT_GE(passing, 5u);
  EXPECT_GE(walking, 6u);
  EXPECT_GE(held, 3u);
  EXPECT_LT(passing_held, passing);
}

// A reduction to a few kept points over a long range (a sum to a scalar, softmax over 3 rows of
// 4096) is split across blocks: its kernel runs several blocks per kept point and a kernel
// s{step}f combines their partials from the scratch buffer. Integer reductions are not split.
// f16/bf16 rounding (sh_rb, sh_rh and the stores' conversions) is the GPU's own cvt instruction on
// sm_80 and later (PTX for sm_90); before that (sm_75) the integer emulation, which still compiles.
TEST(CudaRenderTable, HalfRoundingUsesTheGpusConversions) {
  std::string why;
  if (!cuda::nvrtc(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  bool bf16 = false, f16 = false;
  for (const char* table : {"fusion", "builtins", "extra"})
    for (const auto& [name, cg] : graphs_of_table(table).cases)
      for (const Function& f : cg.functions) {
        const std::string& src = f.nvrtc.source;
        const std::string_view kernels = std::string_view(src).substr(head_of(src).size());
        const bool b = !bf16 && kernels.find("sh_rb(") != std::string::npos, h = !f16 && kernels.find("sh_rh(") != std::string::npos;
        if (!b && !h) continue;
        const std::string sm90 = cuda::compile_cuda(src, "half.cu", 9, 0, false).ptx;
        const std::string sm75 = cuda::compile_cuda(src, "half.cu", 7, 5, false).ptx;
        EXPECT_TRUE(!b || sm90.find("cvt.rn.bf16x2.f32") != std::string::npos) << name << " " << f.name;
        EXPECT_TRUE(!h || sm90.find("cvt.rn.f16.f32") != std::string::npos) << name << " " << f.name;
        EXPECT_EQ(sm75.find("cvt.rn.bf16"), std::string::npos) << name << " " << f.name;
        bf16 = bf16 || b, f16 = f16 || h;
      }
  EXPECT_TRUE(bf16 && f16) << "no case rounds to bf16 (" << bf16 << ") or f16 (" << f16 << ")";
}

// Small launches with nothing between them and each other (a2; b2 with its cast) run as one
// launch whose grid is theirs summed; c2 with its sum (a kernel with __shared__ memory) and d
// (which reads a2 and that sum) run on their own. The emulated tables check every packed
// launch's results.
TEST(CudaRenderTable, SmallIndependentLaunchesArePacked) {
  const std::vector<Function>& functions = functions_of("extra", "packed-launches");
  ASSERT_EQ(functions.size(), 1u);
  const cuda::Kernels& k = functions[0].nvrtc;
  std::string table;
  for (const Launch& l : k.launches) table += fmt::format("{} grid {} packs {}\n", l.kernel, l.grid, l.packs);
  const auto packed = std::find_if(k.launches.begin(), k.launches.end(), [](const Launch& l) { return l.packs > 1; });
  ASSERT_NE(packed, k.launches.end()) << table;
  EXPECT_EQ(packed->packs, 2) << table;
  EXPECT_EQ(packed->grid, 2) << table;  // a block each
  EXPECT_NE(k.source.find("static __noinline__ void"), std::string::npos);
  EXPECT_EQ(std::count_if(k.launches.begin(), k.launches.end(), [](const Launch& l) { return l.kind == Launch::Kind::Kernel; }), 3) << table;
}

// The finishes of a run's column sums (a warp per column, its lanes' partials combined by
// shuffles: whole warps) run as one packed launch after the run; their device functions shuffle,
// so the packed kernel's blocks cooperate (Launch::block_reduce, which the emulation follows).
TEST(CudaRenderTable, ColumnSumFinishesArePacked) {
  const Function& f = functions_of("fusion", "column-phases")[2];
  ASSERT_EQ(f.name, "vg#2");
  auto finishes = [](const cuda::Kernels& k) {
    return std::count_if(k.launches.begin(), k.launches.end(), [](const Launch& l) { return l.kernel.ends_with('f'); });
  };
  std::string table;
  for (const Launch& l : f.nvrtc.launches) table += fmt::format("{} grid {} block {} packs {}\n", l.kernel, l.grid, l.block, l.packs);
  // the run s0, its three finishes in one launch; the loss's sum and its finish (which reads what
  // the sum writes) on their own
  EXPECT_EQ(finishes(f.nvrtc), finishes(f.per_step) - 3) << table;
  ASSERT_GE(f.nvrtc.launches.size(), 2u) << table;
  EXPECT_EQ(f.nvrtc.launches[0].kernel, "s0") << table;
  const Launch& packed = f.nvrtc.launches[1];
  EXPECT_EQ(packed.packs, 3) << table;
  EXPECT_TRUE(packed.block_reduce);
  EXPECT_NE(f.nvrtc.source.find("f_b(const unsigned sh_bx"), std::string::npos) << f.nvrtc.source;
}

// An optimizer's update of per-head weights ([768 64] each: 192 blocks of 256 threads, under four
// blocks an SM of an H100) is packed too: one launch instead of one per weight. The three launches
// of one kernel are one run: one call site, its member found from the block index. Updates by
// per-head slices of one gradient (g) are one kernel too: its argument points at the slice, so its
// text does not name the slice's offset. The emulated tables check the results.
TEST(CudaRenderTable, PerHeadUpdatesArePacked) {
  const std::vector<Function>& functions = functions_of("extra", "packed-per-head-updates");
  ASSERT_EQ(functions.size(), 2u);
  for (const Function& f : functions) {
    const cuda::Kernels& k = f.nvrtc;
    std::string table;
    for (const Launch& l : k.launches) table += fmt::format("{} grid {} packs {} offsets {}\n", l.kernel, l.grid, l.packs, fmt::join(l.arg_offsets, ","));
    ASSERT_EQ(k.launches.size(), 1u) << f.name << "\n" << table;
    EXPECT_EQ(k.launches[0].packs, 3) << table;
    EXPECT_EQ(k.launches[0].grid, 3 * 192) << table;
    size_t calls = 0;
    for (size_t at = 0; (at = k.source.find("_b(b - i * 192,", at)) != std::string::npos; ++at) ++calls;
    EXPECT_EQ(calls, 1u) << k.source;
    const auto& offsets = k.launches[0].arg_offsets;
    EXPECT_EQ(std::count_if(offsets.begin(), offsets.end(), [](int64_t o) { return o > 0; }), f.name.starts_with("g#") ? 2 : 0) << table;
  }
}

TEST(CudaRenderTable, FewKeptPointsSplitTheirReductionAcrossBlocks) {
  for (const auto& [name, cg] : graphs_of_table("extra").cases) {
    const bool floats = name == "block-reduce-sum-10000" || name == "block-reduce-softmax-rows", ints = name == "block-reduce-int-bool";
    if (!floats && !ints) continue;
    size_t split = 0;
    for (const Function& f : cg.functions) {
      const std::vector<Launch>& ls = f.per_step.launches;
      for (size_t i = 0; i + 1 < ls.size(); ++i) {
        if (!ls[i + 1].kernel.ends_with('f') || ls[i + 1].step != ls[i].step) continue;
        ++split;
        EXPECT_TRUE(ls[i].block_reduce) << name;
        EXPECT_GT(ls[i].grid, 1) << name;
        EXPECT_EQ(ls[i].slots.back(), f.gpu_memory.slots) << name << ": the scratch buffer is the last argument";
        EXPECT_EQ(ls[i + 1].slots.back(), f.gpu_memory.slots) << name;
        EXPECT_GT(f.per_step.scratch_bytes, 0) << name;
      }
    }
    EXPECT_EQ(split > 0, floats) << name;
  }
}

// The emulator's barriers (cuda_emulator.cpp's fibers): a thread that returned counts as arrived
// at its block's barrier, and threads of one warp waiting at different barriers (its block's and
// its warp's) are an error, not a hang.
TEST(CudaEmulatorBarriers, ReturnedThreadsArriveAndMismatchedBarriersFail) {
  if (!cpu::toolchain()) GTEST_SKIP() << "no C++ compiler: kernels cannot be emulated here";
  const std::string unit = std::string(kEmulationPrelude) +
                           "extern \"C\" void half_return(float* out) {\n"
                           "  __shared__ float s[64];\n"
                           "  if (threadIdx.x % 2) return;\n"
                           "  s[threadIdx.x] = float(threadIdx.x);\n"
                           "  __syncthreads();\n"
                           "  out[threadIdx.x] = s[(threadIdx.x + 2) % 64];\n"
                           "}\n"
                           "extern \"C\" void mismatched(float* out) {\n"
                           "  if (threadIdx.x == 0) __syncthreads();\n"
                           "  else out[threadIdx.x] = sh_shfl_xor(1.0f, 1, 0xffffffffu);\n"
                           "}\n" +
                           emulation_launcher("emu_half_return", "half_return") + emulation_launcher("emu_mismatched", "mismatched");
  auto dir = std::filesystem::temp_directory_path() / fmt::format("sheaf-emulated-barriers-{}", getpid());
  std::filesystem::create_directories(dir);
  EmulationLibrary lib = compile_emulation(unit, dir / "unit");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(lib.handle) << lib.error;
  std::vector<float> out(64, -1.0f);
  float* p = out.data();
  void* args[] = {&p};
  run_kernel(emulated_kernel(lib, "emu_half_return"), 2, 64, true, args);
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(out[t], t % 2 ? -1.0f : float((t + 2) % 64)) << "thread " << t;
  EXPECT_THROW(run_kernel(emulated_kernel(lib, "emu_mismatched"), 1, 32, true, args), SheafError);
}

}  // namespace
}  // namespace sheaf
