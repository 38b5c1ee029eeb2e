// backend/cuda/render.hpp — a fused schedule as one CUDA C++ translation unit plus a launch table.
// The unit includes no headers; NVRTC compiles it with -default-device (nvrtc.hpp), so the
// scalar helpers of loop_code.hpp become device functions (a prelude of #defines maps the
// GCC builtins they call to CUDA's math functions). Every Loop/Copy step whose kept points
// (the points of its non-reduced dims) are not empty becomes one kernel
//   extern "C" __global__ void __launch_bounds__(block) s{step}(T* __restrict__ p{slot}, ...)
// with one parameter per buffer the step touches (loop_code::LoopBody::buffers order; const
// when only read); the launch table lists, in step order, each kernel with its grid, block and
// argument slots, and every Dot and Host step (run by the caller: cuBLASLt, host copies). A
// Scatter step is a Copy (x into the result, by the caller; a Fill when x is a splat, as for an
// Update step) and a kernel of one thread per update point adding it at its index with atomicAdd
// (indices outside [0, n) are skipped, as the host kernel does). A TopK step (top_k; arg_reduce is its k = 1) is a kernel of a block per row: k
// passes, each finding the first element in arg_reduce's order after the previous pass's pick —
// its threads stride over the row, then combine their (value, index) candidates in __shared__
// memory. An Attention step is the flash-attention kernel of attention_kernel.hpp (its helpers
// join the unit's prelude) — or, when RenderOptions::sdpa takes its chain (sdpa.hpp), a Sdpa
// launch: the device's library runs it, the Attention step's as the forward, its AttentionGrad
// step's as the backward, and the unit has no kernel for either. Kernels are shared: a step whose kernel has the same code as an earlier one's, but
// for the slots and value ids in its names (canonical in render.cpp; a model's repeated layers),
// launches that earlier kernel with its own arguments, and the unit holds the code once.
// Three strategies, per step:
//   thread per point  one thread per kept point: the linear thread index is split into the kept
//                     loop indices (i64, innermost fastest); reduced dims, wherever they sit in
//                     the nest, run as serial loops in the thread with scalar accumulators a{v}
//                     stored at the end. block = min(options.block, points), grid = ⌈points/block⌉;
//                     a step without reduced dims and with points enough takes points_per_thread
//                     = u points a thread (thread x of block b: b·block·u + x + j·block, j < u),
//                     grid = ⌈points/(block·u)⌉.
//   block per point   (a reducing step whose innermost loop is reduced — a row reduction such as
//                     softmax, layer-norm or a loss over the vocabulary — with ≥
//                     block_reduce_row_min_extent reduced points per kept point, or any reducing
//                     step with ≥ block_reduce_min_extent reduced points per kept point and
//                     < block_reduce_max_kept kept points) one block per kept point:
//                     its threads stride over the reduced points with scalar accumulators, then
//                     combine them (loop_code::combine_expr): each warp by a butterfly of
//                     shuffles (sh_shfl_xor), the warps' results through __shared__ memory by the
//                     first warp the same way (one barrier); thread 0 stores. block is a power of
//                     two.
//   column tile       (a reducing step whose innermost loop is kept, at least tile_width wide —
//                     a column sum such as a bias gradient over [tokens, features] — with ≥
//                     block_reduce_min_extent reduced points per kept point and <
//                     column_tile_max_kept kept points) one block per tile_width consecutive kept
//                     points: thread x of a block takes kept point tile·width + x % width and
//                     reduced points x / width, x / width + block / width, …, so a warp reads
//                     consecutive elements of a row; the accumulators of a kept point are combined
//                     in __shared__ memory by a tree (half the threads fold the other half in,
//                     down to `width`, a barrier each time), the first `width` threads store.
//                     block = options.block.
// A block-per-point or tile step with too few blocks to fill the GPU (fewer than
// split_target_blocks / 2: a loss summed to a scalar, a norm) and a long reduced range is split:
// each kept point's reduced points are dealt to `chunks` blocks (block c of point t takes points
// c·lanes + its lane, stepping chunks·lanes, where lanes are the threads sharing a kept point:
// the block, or block / width in a tile), each block writes its f32 partial results to the
// scratch buffer, and a second kernel s{step}f (a thread per kept point) combines a point's
// partials in chunk order and stores the result — two launches, deterministic, no atomics.
// Only steps whose reductions all accumulate in float are split.
// Row phases (fusion.hpp): a block-per-row step that is not split, followed by steps marked
// row_phase, is one kernel s{step} when those steps walk the same rows (or compute one value per
// row): each step's statements run in a scope of their own ("{  // step k"), the block's threads
// striding over the row (a value per row: thread 0 alone), with __syncthreads() between phases so
// that a phase reads what the previous ones stored for its row; the later steps get no launch.
// A column phase (a row phase whose reductions fold the rows themselves: a column sum over the
// run's rows) makes the run's kernel walk rows: blocks of `block` threads, at least
// m = column_phase_sm_threads / block of them resident per SM (__launch_bounds__(block, m)),
// grid = min(rows, m · column_phase_sms: the GPU's SMs, render_options_for) — one wave —; block
// b takes rows b, b + grid, … (all phases of one row, then a barrier, then the next), and its
// thread x keeps the sums of columns x, x + block, … in registers k{v}[s] (at most
// column_phase_max_sums per thread; f32 accumulators only). After the last row each block writes
// its partial sums to the scratch buffer (per sum: [columns, grid]) and a finish kernel s{step}f
// per column phase (a thread per column) adds them in block order — deterministic, no atomics.
// The memory plan keeps every buffer of the run alive to its end, so that blocks still in an
// early phase never see a later phase's writes.
// Every phase of a run gives thread x of the block the points x, x + block, … of each row (slot s:
// x + s·block), so a value over the points that one phase computes and later phases read (a layer
// norm's backward: the gradient before its row mean is subtracted) is held in registers
// e{v}[s] (loop_code::Addressing::held_points) — those phases loop over the slots, unrolled — and
// stored only when a kernel after the run or a graph result reads it: no pass through memory,
// no barrier, no load a row latency later. Held points share column_phase_max_sums (registers) with the
// column sums, ⌈row / block⌉ each.
// Fusion never consumes a reduction result in the step computing it (fusion.cpp), so the
// elementwise statements of a reducing step are independent per point: every strategy computes
// each point of the space exactly once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/sdpa.hpp"
#include "backend/memory.hpp"

namespace sheaf::cuda {

struct Launch {
  enum class Kind { Kernel, Dot, Host, Copy, Fill, Sdpa } kind = Kind::Kernel;
  size_t step = 0;
  std::string kernel;              // Kernel: "s{step}" ("s{step}f": a split's finish), or an
                                   // earlier step's kernel with the same code (shared kernels)
  int64_t grid = 0, block = 0;     // Kernel: blocks and threads per block (x only)
  bool block_reduce = false;       // Kernel: block per point (threads of a block cooperate)
  std::vector<int32_t> slots;      // Kernel: the arguments' slots, in order; Dot: lhs, rhs, out (and its bias row or row sums)
                                   // buffers; Host: the operands' buffers, then the outputs
                                   // (-1: a loop invariant of a while, a view of its operand);
                                   // Copy: source, destination (a Scatter step's x → its result);
                                   // Fill: destination
  std::vector<int64_t> arg_offsets;  // Kernel: per slot from the first, bytes from its buffer's start to the argument (the rest: 0)
  int64_t offset = 0, bytes = 0;   // Copy: where in the source (bytes), how many; Fill: how many
  int64_t scratch = 0;             // Kernel: the bytes of the scratch buffer (Kernels) it writes or reads
  uint8_t byte = 0;                // Fill: every byte's value (x a splat: fusion::splat_byte)
  int64_t packs = 1;               // Kernel: the launches it runs (pack_launches.hpp)
  int64_t sdpa = -1;               // Sdpa: its problem in Kernels::sdpa (slots and offsets there)
  bool backward = false;           // Sdpa: the problem's backward (an AttentionGrad step)
  bool sums_rows = false;          // Dot: slots[3] is the row sums it writes (else the bias row it reads)
};

// Bytes from the buffer of slot j of kernel launch `l` to its argument.
inline int64_t arg_offset(const Launch& l, size_t j) { return j < l.arg_offsets.size() ? l.arg_offsets[j] : 0; }

struct Kernels {
  std::string source;
  std::vector<Launch> launches;  // in step order
  // Split reductions' and column phases' partial results: the caller puts a device buffer of this
  // many bytes at slot MemoryPlan::slots (one past the plan's slots) when it is not 0.
  int64_t scratch_bytes = 0;
  std::vector<Sdpa> sdpa;  // the problems of the Sdpa launches
};

// Block per point pays (1) for row reductions: a thread per point would walk its own row, so the
// threads of a warp would read 32 rows at once (uncoalesced) while the threads of a block read
// consecutive elements of one row; and (2) when a thread per point would leave the GPU mostly idle
// (fewer kept points than an H100's 132 SMs × 2048 resident threads, by a wide margin) while each
// thread walks a long serial loop. A column reduction (kept points innermost) takes column tiles
// when its columns are long and there are too few of them for a thread each to fill the GPU (a
// bias gradient: 768 to 3072 columns of 8192 rows), and a thread per point otherwise: its
// threads read consecutive elements too. Tests lower `block` and `tile_width` (and force block
// per point) to emulate the kernels on a CPU.
// Long rows (a loss over a vocabulary: 50304 bf16 logits, 100 KB a row) take blocks of
// long_row_block threads: at most two such blocks are resident per SM (2048 threads), so the rows
// in flight (264 on an H100, 26 MB) stay in the L2 cache (50 MB) while a run of row phases walks
// them again — with 256-thread blocks, 8 per SM, the 106 MB of rows in flight would be read from
// memory by every phase.
// Loads in flight: a thread that loads one bf16 element, computes and stores has 64 bytes a warp
// in flight; 64 warps per SM hold 4 KB, a fifth of what an H100 needs in flight per SM to stream
// from memory at full rate (3.35 TB/s × ~0.7 µs / 132 SMs ≈ 18 KB). So where a point loads few
// bytes (≤ unroll_max_point_bytes: a bf16 cast, bias + GELU, a loss over bf16 logits; an Adam
// update loading 14 bytes a point has enough in flight), an elementwise thread computes
// points_per_thread points (t, t + block, …: a warp's loads stay consecutive). A block's loop over
// reduced points is unrolled by as much while a round loads at most unroll_max_round_bytes a
// thread: a row run is latency-bound, not bandwidth-bound, when its rows are short (a layer norm's
// backward over 768 columns: 3 rounds of 256 threads, a few blocks per SM for its column sums), and
// a loop whose rounds wait for memory one after another takes as many latencies a row as rounds.
// Each unrolled body is a lambda called for every point, and
// ptxas issues the loads of the unrolled calls together when no bounds check lies between them —
// the calls of a block whose points are all in range (or an unrolled loop's full rounds) run
// unchecked, the rest one at a time — and when it may use the registers: such a kernel's
// __launch_bounds__ ask for unrolled_sm_threads resident threads per SM, not the full 2048 (at
// which ptxas keeps to 32 registers and issues each call's loads after the previous call's math).
// Within a point, its loads at indices that name no value come first (LoopBody::Load::direct):
// ptxas keeps a load below a branch such as an IEEE division's slow path. For the same reason the
// phases of a row run walk a row by slots when their loads fit (at most block_loop_max_rounds
// slots loading at most unroll_max_round_bytes a thread): every slot's direct loads first, into
// registers, then every slot's statements — the unrolled calls of a block loop would issue the
// next point's loads only after this point's division, one memory latency per point. A later
// phase's loads of buffers the run does not write (a residual's gradient that only the last
// phase adds) are issued at the row's start, beside the first phase's, into registers
// f{phase}_l{n}(s) (at most prefetch_row_registers a thread): a row then waits for memory once.
// With prefetch_next_row a block walking rows (a run with column phases) does not wait even
// then: the first phase's loads join those, registers n{phase}_l{n}(s) take the block's first
// row's before its loop, and at each row's start they hand their values to f… and load row
// t + grid's, in flight while row t computes and waits at its barriers. Loads the same at every
// row (a column's gain) are left where they are, in the cache.
struct RenderOptions {
  int64_t block = 256;                        // most threads per block; a power of two, at most 1024
  int64_t block_reduce_row_min_extent = 32;   // row reductions: reduced points per kept point, at least (a warp)
  int64_t block_reduce_min_extent = 2048;     // other reductions: reduced points per kept point, at least
  int64_t block_reduce_max_kept = 4096;       // other reductions: kept points, fewer than
  int64_t tile_width = 32;                    // column tiles: kept points per block (a warp); a power of two
  int64_t column_tile_max_kept = 65536;       // column tiles: kept points, fewer than (a thread each: 15 warps per SM)
  int64_t split_target_blocks = 528;          // blocks a split reduction aims at (4 per SM of an H100)
  int64_t split_min_per_thread = 4;           // reduced points per thread of a split block, at least
  int64_t column_phase_sm_threads = 768;      // row runs with column phases: threads per SM (__launch_bounds__: ≤ 80 registers)
  int64_t column_phase_sms = 132;             // row runs with column phases: the grid fills this many SMs once (an H100's)
  int64_t column_phase_max_sums = 16;         // row runs with column phases: column sums per thread, at most (registers)
  int64_t long_row_block = 1024;              // row reductions over long rows: threads per block, at most (see below)
  int64_t long_row_min_extent = 8192;         // … over at least this many points a row
  int64_t pack_max_grid = 528;                // launches of at most this many blocks (under 4 per SM of an H100) are packed (pack_launches.hpp; 0: none)
  int64_t points_per_thread = 4;              // points an elementwise thread computes, a block's loop unrolled by (1: neither)
  int64_t points_per_thread_min_grid = 528;   // … elementwise: when the grid keeps this many blocks (4 per SM of an H100)
  int64_t unroll_max_point_bytes = 8;         // … elementwise: when a point loads at most this many bytes (LoopBody::point_bytes)
  int64_t unroll_max_round_bytes = 64;        // … a block's loop: rounds that load at most this many bytes a thread (16 registers)
  int64_t block_loop_max_rounds = 8;          // … a block's loop: rounds unrolled, at most (GPT-2's loss rows of bf16: 16 bytes a thread in flight, 32 registers)
  int64_t unrolled_sm_threads = 1024;         // kernels with unrolled calls: threads per SM (__launch_bounds__: ≤ 64 registers)
  int64_t hold_row_values = 1;                // row runs: every thread holds its row's values in registers (0: they pass through memory)
  int64_t hold_row_points = 1;                // row runs: values over the points that later phases read stay in registers (0: memory)
  int64_t prefetch_row_registers = 16;        // row runs: registers a thread may fill at a row's start with later phases' loads (0: none)
  int64_t row_slot_loads_first = 1;           // row runs: phases load every slot's points before computing any (0: each point's in turn)
  int64_t prefetch_next_row = 0;              // row runs walking rows (column phases): those registers take the next row's loads (0: this row's)
  // Whether the device's fused-attention library runs an attention chain that maps (sdpa.hpp);
  // unset, or false for the problem: the own kernels (attention_kernel.hpp).
  std::function<bool(const Sdpa&)> sdpa;
};

// Sets the fields of `o` that `list` names ("field=integer,…", the field names above): the
// SHEAF_CUDA_RENDER switch, to measure a choice on a GPU without a rebuild. Throws SheafError for
// a name it does not know or a value that is no integer.
void override_render_options(RenderOptions& o, const std::string& list);

// The options for a GPU of `sms` multiprocessors: split reductions aim at 4 blocks per SM,
// elementwise kernels keep that many when their threads take several points, and the grid of a
// row run with column phases fills each SM once (the defaults are an H100's 132).
RenderOptions render_options_for(int64_t sms);

Kernels render(const ir::Graph& g, const fusion::Schedule& s, const fusion::MemoryPlan& m, const RenderOptions& o = {});

// The kernels of `k`, each once, in the order of their first launch: what Device::load takes.
std::vector<std::string> kernel_names(const Kernels& k);

}  // namespace sheaf::cuda
