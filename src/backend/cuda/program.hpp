// backend/cuda/program.hpp — a compiled function running on a GPU (SPEC §6.4).
// Built from an optimised graph: fusion → memory plan → CUDA rendering (render.hpp), its kernels
// loaded on the Device once. A call:
//   inputs   a tensor already on this GPU (an earlier call's result) is used in place; a host
//            tensor is uploaded, and the upload is kept for its argument position: when the same
//            tensor (the same storage, still alive) comes again at that position its device copy
//            is reused (up to kReuse per position, most recently used first);
//   steps    the launch table in order: kernels, products on Device::gemm, Host steps on the
//            reference kernels over downloaded operands (their outputs uploaded again), except
//            that an all_reduce sums on the device when it can (Device::all_reduce_sum: NCCL)
//            and a while runs its condition and body as programs of their own on the carried
//            device buffers (the condition's bool downloaded per iteration; not at all with a
//            trip count);
//   results  fresh buffers from the caching allocator, returned as device tensors (a host copy
//            happens only when a value is read); results that are parameters or constants are
//            those tensors; a loop body's in-place updates are their arguments.
// Intermediates live in one arena buffer owned by the program (the memory plan of the CPU
// backend). A program without Host steps, called again with the same buffers (a training loop
// alternates between two sets), is captured once per buffer set as a whole-call replay (a CUDA
// graph; up to kCaptures sets) and replayed: one submission instead of a launch per kernel.
// Not re-entrant: one call at a time.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/allocator.hpp"
#include "backend/cuda/render.hpp"
#include "backend/fusion.hpp"
#include "backend/memory.hpp"
#include "tensor/tensor.hpp"

namespace sheaf::cuda {

// The work launch tables asked for: kernels launched and the bytes of the buffers they touch (each
// counted once a launch: the memory traffic if every element moves once; copies count both sides,
// fills one), products, their FLOPs (2·m·n·k each) and bytes (both operands read once, the result
// written once), and `floor_bytes`, the least the same calls could move (floor_bytes in
// program.cpp): kernel_bytes + product_bytes against it says how much traffic the fusion left.
struct Work {
  uint64_t kernels = 0, products = 0;
  double kernel_bytes = 0, product_flops = 0, product_bytes = 0, floor_bytes = 0;
  Work& operator+=(const Work& w) {
    kernels += w.kernels, products += w.products, kernel_bytes += w.kernel_bytes, product_flops += w.product_flops;
    product_bytes += w.product_bytes, floor_bytes += w.floor_bytes;
    return *this;
  }
  Work operator-(const Work& w) const {
    return {kernels - w.kernels, products - w.products, kernel_bytes - w.kernel_bytes, product_flops - w.product_flops,
            product_bytes - w.product_bytes, floor_bytes - w.floor_bytes};
  }
  double moved_bytes() const { return kernel_bytes + product_bytes; }
};

// The launches of one kind timed on the GPU (ProgramOptions::profile): a function's kernel (every
// step that shares it), its products of one shape, its copies or its fills.
struct LaunchTime {
  Launch::Kind kind = Launch::Kind::Kernel;  // Kernel, Dot, Copy or Fill
  std::string what;  // a kernel's space and ops ("[8,1024,768] binary,reduce"), a product's dtype
  uint64_t launches = 0;
  double ms = 0, bytes = 0, flops = 0;  // summed over the launches (bytes as Work counts them)
  LaunchTime& operator+=(const LaunchTime& t) {
    if (launches == 0) kind = t.kind, what = t.what;
    launches += t.launches, ms += t.ms, bytes += t.bytes, flops += t.flops;
    return *this;
  }
};

// Where a program's build went (seconds): the passes before fusion (merge_dots .. composites
// lowered), fusion and the memory plan, rendering and loading the kernels (NVRTC or the cubin
// cache, and cuDNN's plans beside them), and the rest (buffers and constants, and the builds of
// its while loops' programs).
struct BuildTimes {
  double passes = 0, fusion = 0, kernels = 0, setup = 0;
  BuildTimes& operator+=(const BuildTimes& t) {
    passes += t.passes, fusion += t.fusion, kernels += t.kernels, setup += t.setup;
    return *this;
  }
};

struct ProgramStats {
  uint64_t calls = 0;                                // calls of a program
  double first_calls_s = 0;                          // host time of each program's first call (allocations, uploads, launches)
  uint64_t reused = 0, uploaded = 0, resident = 0;  // inputs: reused upload, fresh upload, already on the GPU
  uint64_t captured = 0, replayed = 0;               // whole-call captures made and replayed
  double capture_s = 0;                              // host time recording and instantiating the captures
  uint64_t queued = 0;                               // later calls run launch by launch (a buffer table's first sight)
  double queue_s = 0;                                // … their host time queuing the launches
  uint64_t host_steps = 0;                           // Host steps run (each downloads and uploads)
  uint64_t collectives = 0;                          // all_reduce nodes summed on the device (NCCL)
  uint64_t in_place = 0;                             // loop iterations' updates of a carried value in its own buffer
  Work work;                                         // asked of the device by the launch tables run
  // Timed launches by "<function> <kernel>", "<function> product <batch>m×n×k", "<function> copy"
  // and "<function> fill" (ProgramOptions::profile).
  std::map<std::string, LaunchTime> times;
};

// The --jit-profile lines of `times`: the total, products against kernels against copies and fills,
// then the kinds of launch by time (the first `rows`; the rest summed on one line), each with its
// share, launches, mean time, achieved bandwidth (Work's bytes) and FLOP/s.
std::string launch_time_report(const std::map<std::string, LaunchTime>& times, size_t rows = 25);

struct ProgramOptions {
  bool tf32 = false;       // f32 products may use TF32 (--tf32)
  // Repeated calls replay one capture of the call for their buffer table: captured the
  // capture_at-th time the table is seen (2; 1: at once, after the program's first call; 0: never;
  // SHEAF_CUDA_CAPTURE). A capture's call pays its recording and instantiation; a table run
  // directly the first time costs nothing more when it never comes again.
  int64_t capture_at = 2;
  std::string cache_dir;   // cubins: __sheaf__/ beside the entry file; empty: not cached
  // Time every launch between two stamps (Device::stamp) into ProgramStats::times, on a device that
  // keeps time; such calls are not captured (SHEAF_CUDA_PROFILE).
  bool profile = false;
  std::string name;        // the function, for ProgramStats::times
  // RenderOptions fields to override (override_render_options; SHEAF_CUDA_RENDER, to measure a
  // choice: "points_per_thread=1" renders a thread per point and no unrolled loops)
  std::string render;
  // The products' cuBLASLt epilogues the schedule may use (SHEAF_CUDA_EPILOGUES, a comma list of
  // bias, row-sums and gelu, or none: to measure what each brings)
  fusion::Epilogues epilogues = fusion::Epilogues::all();
};

class Program {
 public:
  static constexpr size_t kReuse = 8, kCaptures = 4;

  // `g` must outlive the program (the executable owns both). A `loop_body` (a while's body,
  // called with the loop's own buffers) writes each result that fusion::updates_in_place allows into
  // its argument's buffer when that argument is on this GPU, and returns that argument.
  Program(const ir::Graph& g, std::shared_ptr<Allocator> allocator, const ProgramOptions& o = {}, bool loop_body = false);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Results in g.results order; `args` in parameter order. Counts what it did in `stats`.
  std::vector<Tensor> run(std::span<const Tensor> args, ProgramStats& stats);

  const Kernels& kernels() const { return kernels_; }
  const BuildTimes& build_times() const { return times_; }
  // The launch table, a line per launch and its step: a kernel's name (shared kernels: an earlier
  // step's), grid, block, the bytes of its buffers, its step's space and ops; a product's batch,
  // m×n×k, FLOPs and dtype; copies and host steps.
  std::string launch_table() const;
  // Whether result k is updated in its argument's buffer (loop bodies only).
  bool in_place(size_t k) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Kernels kernels_;
  BuildTimes times_;
};

}  // namespace sheaf::cuda
