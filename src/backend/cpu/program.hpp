// backend/cpu/program.hpp — a compiled function ready to run on the CPU backend.
// Built from an optimised graph: f16/bf16 products and reductions widened to f32
// (cpu::widen_halves) → fusion → memory plan → C++ source (Prepared), then bound to
// the shared object compiled from that source (Program). A call fills the pointer table
// (parameters, constants, arena buffers, fresh result tensors), runs the generated entry, and
// answers its Host steps with the reference kernels. Not re-entrant: one call at a time.
// The regions of a `while` are units of their own (fused and planned like the function, rendered
// as functions of the same source): unit 0 is the function, then the regions depth-first. Every
// unit owns a range of the one pointer table and of the one arena.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/render.hpp"
#include "backend/cpu/toolchain.hpp"
#include "backend/memory.hpp"
#include "backend/recycled_buffers.hpp"

namespace sheaf::cpu {

struct Prepared {
  std::shared_ptr<const ir::Graph> graph;  // the function as compiled (widened); units point into it
  std::vector<Unit> units;  // units[0]: the function
  int32_t slots = 0;        // Σ unit slots
  int64_t arena_bytes = 0;  // Σ unit arenas and loop buffers
  Source source;
  const fusion::MemoryPlan& memory() const { return units[0].memory; }
};
Prepared prepare(const ir::Graph& g);

// A product's shape in the profile: `batch` products (1: one rt->sgemm call) of m×k · k×n, each
// operand read transposed (its rows strided, its columns not) or not, on `threads` threads (a
// batch: its parts, each product on one).
struct ProductShape {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  bool a_transposed = false, b_transposed = false;
  int threads = 1;
  auto operator<=>(const ProductShape&) const = default;
};
struct ProductTime {
  uint64_t calls = 0;
  double s = 0, flops = 0;
};
// A loop function's calls on the loop threads, by the step they run (render.hpp: LoopSite):
// "s20 f32[32x128x1024] add·mul·tanh"; `bytes`: the step's operands and results, as
// many bytes as one pass over them moves.
struct LoopTime {
  uint64_t calls = 0;
  double s = 0, bytes = 0;
};

// Where a compiled call's time went (--jit-profile): its products (rt->sgemm and rt->sgemm_batch
// calls, timed, also by shape; their FLOPs 2·m·n·k), host steps (timed), attention steps
// (rt->parallel_products calls, timed: their products and softmax), the loops run on the loop
// threads (rt->parallel calls and the attention steps, timed by step) and the whole generated
// entry (so the fused loops, copies and inline small products are entry − products − attention
// − host steps).
struct RunProfile {
  uint64_t calls = 0, products = 0, host_steps = 0, attention_steps = 0;
  double entry_s = 0, product_s = 0, product_flops = 0, host_s = 0, attention_s = 0, attention_flops = 0;
  std::map<ProductShape, ProductTime> by_shape;
  std::map<std::string, LoopTime> by_loop;
  void add_product(const ProductShape& shape, double seconds);
};

// What --jit-profile calls a loop site: its function, iteration space and ops, and the bytes of
// the step's operands and results; by (task, range), the arguments of its rt->parallel call.
struct LoopSiteInfo {
  std::string name;
  double bytes = 0;
  double flops = 0;  // an attention step: its products' multiply-adds ×2 as the graph writes them (none skipped)
};
using LoopSites = std::map<std::pair<const void*, int64_t>, LoopSiteInfo>;

class Program {
 public:
  Program(Prepared p, Loaded lib);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Results in the graph's result order; `args` in parameter order (those of the graph prepared).
  // With `profile`, the call's time is added to it.
  std::vector<Tensor> run(std::span<const Tensor> args, RunProfile* profile = nullptr);

  const Prepared& prepared() const { return p_; }

 private:
  Prepared p_;
  const ir::Graph& g_;  // *p_.graph
  Loaded lib_;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> arena_;
  std::vector<void*> table_;     // slots of constants and arena buffers, filled once
  std::vector<size_t> first_;    // result position → first position holding the same value
  std::vector<bool> written_;    // result position → written by a Loop/Copy/Dot step (else a parameter, constant or host output)
  std::vector<void*> buffers_;   // the table of the running call
  struct Held {
    int32_t unit, value;
    Tensor t;
  };
  std::vector<Held> held_;  // host step outputs of the running call (a loop's: of its last iteration)
  RecycledBuffers<std::byte> spare_;  // large result buffers of earlier calls
  LoopSites loop_sites_;  // filled by the first profiled call (loop_sites)
  const LoopSites& loop_sites();
  Tensor result_buffer(size_t position, const ir::Type& t);
  Runtime rt_;

  static void host_step(void* self, int32_t unit, int32_t step, void** buffers);
  void run_host_step(int32_t unit, int32_t step, void** buffers);
};

}  // namespace sheaf::cpu
