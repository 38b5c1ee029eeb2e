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
// to an sm_90 cubin, as the GPU would load it (no GPU needed): the compile time is printed, and
// each kernel's registers, spills, shared memory and resident threads per SM (print_occupancy).
// --cubins DIR: --compile, and each unit's cubin written to DIR/unit{N}.sm_90.cubin (for nvdisasm).
// --cudnn: the device has cuDNN's fused attention (a GPU where libcudnn loads): attention chains
// that map (cuda/sdpa.hpp) become cuDNN launches, each problem checked by cudnn-frontend's own
// validation when libsheaf_cudnn.so and libcudnn load here (CudnnSdpa::validate), refused if it fails.
//   build/bench/gpu_dry [--compile | --cubins DIR] [--cudnn] bench/gpt2_gpu.shf -- --steps 1
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include <chrono>

#include "backend/cuda/allocator.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cudnn_sdpa.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/error.hpp"
#include "base/malloc_policy.hpp"
#include "io/atomic_write.hpp"
#include "builtins/init_runtime.hpp"
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

// Per kernel, from ptxas's report (NVRTC's log with --ptxas-options=-v): registers, bytes
// spilled, bytes of stack frame (local memory: spills, and register arrays such as a row run's
// column sums or held points when indexed at run time), static shared memory, and the threads an H100 SM holds at once by its
// __launch_bounds__ block (registers: 64K per SM, allocated 8 a thread; shared: 228 KB; at
// most 2048 threads, 32 blocks). A kernel that spills or holds few threads shows here first.
void print_occupancy(const std::string& source, const std::string& log) {
  std::cout << "  kernel        block  registers  spilled  stack  shared  threads/SM\n";
  std::istringstream lines(log);
  std::string kernel;
  int64_t spilled = 0, stack = 0;
  for (std::string l; std::getline(lines, l);) {
    if (size_t at = l.find("Compiling entry function '"); at != std::string::npos) {
      kernel = l.substr(at + 26, l.find('\'', at + 26) - at - 26);
      spilled = stack = 0;
    } else if (size_t sp = l.find(" bytes spill stores"); sp != std::string::npos) {
      spilled = std::atoll(l.c_str() + l.rfind(", ", sp) + 2);
      const size_t frame = l.find(" bytes stack frame");
      if (frame != std::string::npos) stack = std::atoll(l.c_str() + l.find_last_not_of("0123456789", frame - 1) + 1);
    } else if (size_t used = l.find("Used "); used != std::string::npos && !kernel.empty()) {
      const int64_t regs = std::atoll(l.c_str() + used + 5);
      const size_t sm = l.find(" bytes smem");
      const int64_t shared = sm == std::string::npos ? 0 : std::atoll(l.c_str() + l.rfind(", ", sm) + 2);
      const size_t lb = source.find(") " + kernel + "(");
      const size_t open = source.rfind("__launch_bounds__(", lb);
      const int64_t block = lb == std::string::npos || open == std::string::npos ? 0 : std::atoll(source.c_str() + open + 18);
      int64_t blocks = 0;
      if (block > 0) {
        blocks = std::min<int64_t>(32, 2048 / block);
        if (regs > 0) blocks = std::min(blocks, 65536 / ((regs + 7) / 8 * 8 * block));
        if (shared > 0) blocks = std::min<int64_t>(blocks, 228 * 1024 / (shared + 1024));
      }
      std::cout << fmt::format("  {:<12} {:>6} {:>10} {:>8} {:>6} {:>7} {:>11}\n", kernel, block, regs, spilled, stack, shared, blocks * block);
      kernel.clear();
    }
  }
}

class DryDevice : public cuda::Device {
 public:
  DryDevice(bool compile, std::string cubins, bool cudnn) : compile_(compile), cubins_(std::move(cubins)), cudnn_(cudnn) {}
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
      cuda::CompiledKernels k = cuda::compile_cuda(source, "unit.cu", 9, 0, true, {"--ptxas-options=-v"});
      std::chrono::duration<double> s = std::chrono::steady_clock::now() - t0;
      std::cout << fmt::format("nvrtc: {} kernels, {:.0f} KB of source → {:.0f} KB sm_90 cubin in {:.1f} s\n", names.size(),
                               source.size() / 1e3, k.cubin.size() / 1e3, s.count());
      print_occupancy(source, k.log);
      if (!cubins_.empty()) write_file_atomic(fmt::format("{}/unit{}.sm_90.cubin", cubins_, units_++), k.cubin);
    }
    return std::make_unique<DryModule>();
  }
  void gemm(const cuda::Gemm&, cuda::DevicePtr, cuda::DevicePtr, cuda::DevicePtr, cuda::DevicePtr, cuda::DevicePtr) override {}
  void synchronize() override {}
  bool has_sdpa() const override { return cudnn_; }
  bool prepare_sdpa(const cuda::Sdpa&, std::string*) override { return true; }  // what sdpa_accepts took
  bool sdpa_accepts(const cuda::Sdpa& a, std::string* why) override {
    std::string w;
    const bool checked = cuda::CudnnSdpa::available(&w);
    const bool ok = cudnn_ && (!checked || cuda::CudnnSdpa::validate(a, 90, w));
    ++(ok ? taken_ : refused_);
    if (checked) ++validated_;
    if (!ok) last_refusal_ = w;
    if (why) *why = w;
    return ok;
  }
  std::string describe_sdpa() const override {
    if (taken_ + refused_ == 0) return {};
    return fmt::format("attention: dry cuDNN takes {} of {} chains ({} checked by cudnn-frontend{}){}", taken_, taken_ + refused_,
                       validated_, validated_ ? "" : ": libsheaf_cudnn.so or libcudnn did not load",
                       refused_ ? "; last refusal: " + last_refusal_ : "");
  }
  void sdpa(const cuda::Sdpa&, bool, const cuda::SdpaBuffers&) override {}
  std::unique_ptr<cuda::Capture> capture(const std::function<void()>& record) override {
    record();
    return std::make_unique<DryCapture>();
  }

 private:
  bool compile_;
  std::string cubins_;
  size_t units_ = 0;
  bool cudnn_;
  size_t taken_ = 0, refused_ = 0, validated_ = 0;
  std::string last_refusal_;
  cuda::DevicePtr next_ = cuda::DevicePtr{1} << 40;
};

struct Calls {
  uint64_t calls = 0;
  cuda::Work last;  // the work of the last call
};

int run(int argc, char** argv) {
  bool compile = false, cudnn = false;
  std::string cubins;
  int file = 1;
  for (; file < argc; ++file) {
    if (std::strcmp(argv[file], "--compile") == 0) compile = true;
    else if (std::strcmp(argv[file], "--cudnn") == 0) cudnn = true;
    else if (std::strcmp(argv[file], "--cubins") == 0 && file + 1 < argc) compile = true, cubins = argv[++file];
    else break;
  }
  if (argc <= file || std::strcmp(argv[file], "--help") == 0) {
    std::cerr << "usage: gpu_dry [--compile | --cubins DIR] [--cudnn] FILE.shf [-- ARGS]\n";
    return 2;
  }
  init_runtime();
  Interp in(std::cout);
  for (int i = file + 1; i < argc; ++i)
    if (i > file + 1 || std::strcmp(argv[i], "--") != 0) in.program_args.push_back(argv[i]);
  auto backend = std::make_unique<cuda::CudaBackend>(std::make_shared<cuda::Allocator>(std::make_shared<DryDevice>(compile, cubins, cudnn)));
  const cuda::CudaStats& stats = backend->stats();
  jit_of(in)->backend = std::move(backend);

  // The work between two calls reaching the JIT is the earlier call's.
  std::map<std::string, Calls> by_fn;
  std::string running;
  cuda::Work at_start;
  auto close = [&] {
    if (running.empty()) return;
    by_fn[running].last = stats.run.work - at_start;
  };
  jit_of(in)->observe = [&](const Value& fn, std::span<const Value>) {
    close();
    running = fn.as<FnObj>().name;  // the JIT sees closures only
    ++by_fn[running].calls;
    at_start = stats.run.work;
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
    std::cout << fmt::format("  {:<24} {:>5} calls  {:>6} kernels {:>9.3f} GB of buffers  {:>5} products {:>10.3f} GFLOP "
                             "{:>7.3f} GB   moved {:>7.3f} GB, floor {:>7.3f} GB\n",
                             name, c.calls, c.last.kernels, c.last.kernel_bytes / 1e9, c.last.products,
                             c.last.product_flops / 1e9, c.last.product_bytes / 1e9, c.last.moved_bytes() / 1e9,
                             c.last.floor_bytes / 1e9);
  jit_of(in)->report(std::cout);
  return 0;
}

}  // namespace
}  // namespace sheaf

int main(int argc, char** argv) {
  sheaf::set_process_malloc_policy();  // as the CLI: the host-side compile measured as the CLI runs it
  try {
    return sheaf::run(argc, argv);
  } catch (const sheaf::SheafError& e) {  // before the program runs: SHEAF_CUDA_RENDER
    std::cerr << "gpu_dry: " << e.what() << "\n";
    return 1;
  }
}
