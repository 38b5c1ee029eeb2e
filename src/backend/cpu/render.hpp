// backend/cpu/render.hpp — a fused schedule as one C++ translation unit.
// The unit includes no headers (it compiles in a fraction of a second) and exports:
//   extern "C" const int  sheaf_abi;           kAbiVersion
//   extern "C" const char sheaf_digest[];      16 hex digits: hash of the rest of the source
//   extern "C" void sheaf_entry(const Runtime* rt, void** b);
//   extern "C" void* const sheaf_loop_tasks[];  the task of each Source::loop_sites entry
// `b` is the pointer table of MemoryPlan slots (parameters, constants, arena buffers, results
// filled by the host before the call; Host steps fill their outputs' slots). Loop and Copy steps
// become loop nests (adjacent dims merge when every access allows it; reductions over trailing
// dims keep scalar accumulators, vectorised with `omp simd`), one function per step (a nest over
// kept outer points as a range function s<i>(lo, hi, buffers..), called on its whole range or,
// when large, through its task s<i>(args, lo, hi), run in parts by rt->parallel:
// kParallelPoints), except that steps whose functions have the same code up to their slot and
// value numbers and their outermost range (a model's repeated layers, an optimizer's update of
// each parameter; loop_code::canonical) call one function; Dot steps call rt->sgemm per
// batch (a batch of small products rt->sgemm_batch with its layout: kPartsMinBatch), Host steps
// call rt->host with their unit and step index, Attention and AttentionGrad steps a task per
// batch index on rt->parallel_products (attention_code.hpp). A While step runs its regions'
// entries (u<k>_entry, over the region's range of the table) in a C++ loop: the carried values
// alternate between the node's result buffers and a second set (the unit's loop-buffer slots),
// reading the operands themselves in the first iteration; loop invariants are passed through
// untouched. Each iteration first reads *rt->stop (the stop request, base/interrupt.hpp): when it
// is set the entry returns at once, leaving its results unfinished for the caller to drop.
// Defining SHEAF_PART as 0 or 1 compiles
// one half of the loop functions, as 2 the entries and the exported constants, so that a large
// unit can be built as three objects in parallel and linked (toolchain.hpp).
#pragma once
#include <cstdint>
#include <string>

#include <vector>

#include "backend/memory.hpp"

namespace sheaf::cpu {

inline constexpr int kAbiVersion = 8;

// Host functions handed to the generated code (same layout as `sheaf_rt` in the prelude).
struct Runtime {
  // c (m×n, row-major, contiguous) = a · b; a's element (r, c) at a[r·a_rs + c·a_cs], b likewise.
  void (*sgemm)(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n,
                int64_t b_rs, int64_t b_cs, float* c);
  void (*host)(void* self, int32_t unit, int32_t step, void** buffers);
  void* self;
  // fn(args, lo, hi) over parts of [0, n), at once on the loop threads (parallel.hpp).
  void (*parallel)(void (*fn)(void* const* args, int64_t lo, int64_t hi), void* const* args, int64_t n);
  const bool* stop;  // polled once per loop iteration: true asks the entry to return early
  // A batch of products c[i] = a[i] · b[i] of one layout (kBatchLayout), in parts on the loop
  // threads, each product on the thread of its part (tensor/blas.hpp: SerialBlas).
  void (*sgemm_batch)(const float* a, const float* b, float* c, const int64_t* layout);
  // sgemm plus a bias: c's rows are written with bias[0..n) (on the loop threads), then the
  // product accumulates onto them (fusion.hpp: DotLayout::bias).
  void (*sgemm_bias)(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n,
                     int64_t b_rs, int64_t b_cs, float* c, const float* bias);
  // fn(args, lo, hi) over parts of [0, n) on the loop threads, as `parallel`, with the products
  // it asks for by `gemm` on its own thread (tensor/blas.hpp: SerialBlas): an attention step.
  void (*parallel_products)(void (*fn)(void* const* args, int64_t lo, int64_t hi), void* const* args, int64_t n);
  // As sgemm, c's rows c_rs apart.
  void (*gemm)(const float* a, int64_t m, int64_t k, int64_t a_rs, int64_t a_cs, const float* b, int64_t n, int64_t b_rs,
               int64_t b_cs, float* c, int64_t c_rs);
  // At least `floats` floats of scratch of the calling thread's own, 64-byte aligned; the same
  // memory at each call (grown when too small) until the thread ends.
  float* (*scratch)(int64_t floats);
};

// rt->sgemm_batch's layout: {count, m, k, a_rs, a_cs, n, b_rs, b_cs, rank, sizes[rank],
// a_strides[rank], b_strides[rank]}. Product i (row-major over `sizes`, its indices t) reads
// a + Σ t·a_strides and b + Σ t·b_strides as rt->sgemm does, and writes c + i·m·n.
enum BatchLayout : int { kBatchCount, kBatchM, kBatchK, kBatchARs, kBatchACs, kBatchN, kBatchBRs, kBatchBCs, kBatchRank, kBatchSizes };

// A batched product of at least kPartsMinBatch products of at most kPartsMaxMacs multiply-adds
// each runs its batch in parts on the loop threads (rt->sgemm_batch), each product on one
// thread: OpenBLAS splits a small product between its threads at a loss. A batch of 128
// attention-head products 128×128×64 (bench/gpt_step.shf's) takes 1.45 ms in parts, 3.1 ms with
// OpenBLAS's two threads on each and 2.7 ms on one thread (2 cores).
inline constexpr int64_t kPartsMinBatch = 8, kPartsMaxMacs = int64_t{1} << 22;

// Loop nests of at least this many points whose outermost loop keeps its points (not a reduced
// dim) run their outermost range in parts on the loop threads (rt->parallel), and so do those
// whose reduced dims all come before their kept ones with outputs accumulating in place (column
// sums), over their first kept dim; smaller ones run on the calling thread.
inline constexpr int64_t kParallelPoints = 32768;

// A While step of a unit: its region units and its second set of carried buffers.
struct LoopBuffers {
  int32_t cond_unit = -1, body_unit = -1;
  int32_t slot = 0;                    // first slot (of the unit's table) of the second set
  std::vector<int64_t> arena_offset;   // per carried value: its second buffer (-1: loop invariant)
};

// One graph of a compiled function: the function itself or a loop region.
struct Unit {
  const ir::Graph* graph = nullptr;
  fusion::Schedule schedule;
  fusion::MemoryPlan memory;
  int32_t table_base = 0;  // the unit's first slot in the pointer table
  int32_t slots = 0;       // memory.slots + the loop-buffer slots
  int64_t arena_base = 0;  // the unit's arena inside the program's arena
  std::vector<std::pair<int32_t, LoopBuffers>> loops;  // (step, buffers) of its While steps
  const LoopBuffers& loop(int32_t step) const;
};

// A call of a loop function on rt->parallel: the step of the unit it runs, its range. The
// source exports the task of each site, in this order, as `sheaf_loop_tasks` (--jit-profile
// times each: backend/cpu/program.hpp, RunProfile::by_loop).
struct LoopSite {
  int32_t unit = 0, step = 0;
  int64_t outer = 0;
};

struct Source {
  std::string text;
  std::string digest;  // 16 hex digits, also embedded as sheaf_digest
  std::vector<LoopSite> loop_sites;
};

Source render(const std::vector<Unit>& units);

// FNV-1a 64 of `text` as 16 hex digits.
std::string digest_of(std::string_view text);

}  // namespace sheaf::cpu
