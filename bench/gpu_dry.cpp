// bench/gpu_dry.cpp — what a program asks of a GPU, measured on a machine without one.
// Runs FILE.shf as `sheaf --device cuda FILE.shf -- ARGS` would, on a device that does nothing:
// memory is address ranges that hold nothing (downloads read zeros, uploads are dropped), kernels
// are rendered but neither compiled nor run, products and copies are skipped, captured graphs
// replay nothing. The CUDA backend traces, fuses, plans memory, renders, walks its launch tables
// and captures as on a GPU, so its work counters (cuda::ProgramStats: kernels, bytes of the
// buffers they touch, products and FLOPs, captures and replays) are exact; the values the program
// computes and prints are not.
// Prints, per compiled function, its calls and the work of its last call (a training step's
// function: one step), then the --jit-profile report. --compile: NVRTC also compiles every unit
// to an sm_90 cubin, as the GPU would load it (no GPU needed), and the compile time is printed.
//   build/bench/gpu_dry [--compile] bench/gpt2_gpu.shf -- --steps 1
#include <cstring>
#include <iostream>
#include <map>

#include <chrono>

#include "backend/cuda/allocator.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/error.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

class DryModule : public cuda::Module {
 public:
  void launch(size_t, int64_t, int64_t, void**) override {}
};

// A graph that replays nothing: the backend captures and replays as it would on a GPU, so the
// report's captures and replays say which functions a GPU would run as CUDA graphs.
class DryCapture : public cuda::Capture {
 public:
  void replay() override {}
};

class DryDevice : public cuda::Device {
 public:
  explicit DryDevice(bool compile) : compile_(compile) {}
  std::string describe() const override { return "dry GPU (sm_90, nothing runs)"; }
  std::string arch() const override { return "sm_90"; }
  cuda::DevicePtr allocate(size_t bytes) override {
    cuda::DevicePtr p = next_;
    next_ += (bytes + 255) / 256 * 256 + 256;
    return p;
  }
  void release(cuda::DevicePtr) override {}
  void upload(cuda::DevicePtr, const void*, size_t) override {}
  void download(void* dst, cuda::DevicePtr, size_t bytes) override { std::memset(dst, 0, bytes); }
  void copy(cuda::DevicePtr, cuda::DevicePtr, size_t) override {}
  void fill(cuda::DevicePtr, uint8_t, size_t) override {}
  std::unique_ptr<cuda::Module> load(const std::string& source, const std::vector<std::string>& names, const std::string&) override {
    if (compile_) {
      auto t0 = std::chrono::steady_clock::now();
      cuda::CompiledKernels k = cuda::compile_cuda(source, "unit.cu", 9, 0, true);
      std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
      std::cout << fmt::format("nvrtc: {} kernels, {:.0f} KB of source → {:.0f} KB sm_90 cubin in {:.1f} s\n", names.size(),
                               source.size() / 1e3, k.cubin.size() / 1e3, s.count());
    }
    return std::make_unique<DryModule>();
  }
  void gemm(const cuda::Gemm&, cuda::DevicePtr, cuda::DevicePtr, cuda::DevicePtr) override {}
  void synchronize() override {}
  std::unique_ptr<cuda::Capture> capture(const std::function<void()>& record) override {
    record();
    return std::make_unique<DryCapture>();
  }

 private:
  bool compile_;
  cuda::DevicePtr next_ = cuda::DevicePtr{1} << 40;
};

struct Calls {
  uint64_t calls = 0;
  cuda::Work last;  // the work of the last call
};

int run(int argc, char** argv) {
  const bool compile = argc > 1 && std::strcmp(argv[1], "--compile") == 0;
  const int file = compile ? 2 : 1;
  if (argc <= file || std::strcmp(argv[file], "--help") == 0) {
    std::cerr << "usage: gpu_dry [--compile] FILE.shf [-- ARGS]\n";
    return 2;
  }
  Interp in(std::cout);
  for (int i = file + 1; i < argc; ++i)
    if (i > file + 1 || std::strcmp(argv[i], "--") != 0) in.program_args.push_back(argv[i]);
  in.jit->gpu = std::make_shared<cuda::Allocator>(std::make_shared<DryDevice>(compile));
  in.jit->device = Device::Cuda;

  // The work between two calls reaching the JIT is the earlier call's.
  std::map<std::string, Calls> by_fn;
  std::string running;
  cuda::Work at_start;
  auto close = [&] {
    if (running.empty()) return;
    by_fn[running].last = in.jit->stats().gpu.work - at_start;
  };
  in.jit->observe = [&](const Value& fn, std::span<const Value>) {
    close();
    running = fn.as<FnObj>().name;  // the JIT sees closures only
    ++by_fn[running].calls;
    at_start = in.jit->stats().gpu.work;
  };
  try {
    in.run_file(argv[file]);
  } catch (const SheafError& e) {
    std::cerr << render_error(e, false);
    return 1;
  }
  close();
  std::cout << "\nwork of the last call, per compiled function:\n";
  for (const auto& [name, c] : by_fn)
    std::cout << fmt::format("  {:<24} {:>5} calls  {:>6} kernels {:>9.3f} GB of buffers  {:>5} products {:>10.3f} GFLOP\n",
                             name, c.calls, c.last.kernels, c.last.kernel_bytes / 1e9, c.last.products,
                             c.last.product_flops / 1e9);
  in.jit->report(std::cout);
  return 0;
}

}  // namespace
}  // namespace sheaf

int main(int argc, char** argv) { return sheaf::run(argc, argv); }
