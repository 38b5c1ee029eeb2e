// tests/unit/cuda_emulator.cpp — the emulated CUDA device and kernel emulation (cuda_emulator.hpp).
// Kernels: a unit is kEmulationPrelude + CUDA C++ + launchers, compiled at -O0 (units are large and
// their kernels run on small tensors) with -ffp-contract=off (elementwise math rounds as the
// reference executor's does). The prelude's __syncthreads() calls back into block_sync, which
// switches from the calling CUDA thread's fiber back to its block's scheduler (run_block).
#include "cuda_emulator.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>

#include <boost/context/detail/fcontext.hpp>

#include "backend/cpu/toolchain.hpp"
#include "base/error.hpp"
#include "tensor/blas.hpp"
#include "tensor/tensor.hpp"

namespace sheaf::testing_support {

// ---- kernel emulation -----------------------------------------------------------------------------

// blockDim and gridDim are set once per launch (launches do not overlap: run_kernel holds a lock),
// the thread's indices before each call. Parameters arrive as cuLaunchKernel's: a[j] points at the
// j-th value, aligned for its type (a DevicePtr is read as the pointer it holds). Top-level
// qualifiers (const, __restrict__) are not part of a function type's parameters, so P is the
// plain parameter type.
const char* const kEmulationPrelude = R"(#include <math.h>
#include <string.h>
#include <utility>
struct sheaf_dim3 { unsigned x, y, z; };
static thread_local sheaf_dim3 threadIdx, blockIdx;
static sheaf_dim3 blockDim, gridDim;
static void (*sheaf_sync)();
static void (*sheaf_warp_sync)();
extern "C" void sheaf_emu_init(void (*sync)(), void (*warp_sync)()) { sheaf_sync = sync; sheaf_warp_sync = warp_sync; }
extern "C" void sheaf_emu_launch(unsigned grid, unsigned block) { gridDim = {grid, 1, 1}; blockDim = {block, 1, 1}; }
extern "C" void sheaf_emu_at(unsigned b, unsigned t) { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, sizeof f); return f; }
template <class... P, size_t... I> static void sheaf_call(void (*f)(P...), void** a, std::index_sequence<I...>) {
  f(*static_cast<P*>(a[I])...);
}
template <class... P> static void sheaf_call(void (*f)(P...), void** a) { sheaf_call(f, a, std::index_sequence_for<P...>{}); }
template <class... P> static const unsigned* sheaf_sizes(void (*)(P...)) {
  static const unsigned s[] = {unsigned(sizeof...(P)), unsigned(sizeof(P))...};
  return s;
}
#define __global__
#define __device__
#define __noinline__
#define __grid_constant__
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() sheaf_sync()
// Warp collectives (attention kernels): the lanes of a warp publish their operands, meet at the
// block's barrier (every thread of the block calls them alike), read what they need, meet again.
#define SHEAF_EMULATION 1
static unsigned sheaf_lane_words[1024][6];
static float sheaf_lane_value[1024];
static inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  sheaf_lane_value[threadIdx.x] = v;
  sheaf_sync();
  const float r = sheaf_lane_value[threadIdx.x ^ unsigned(lane_mask)];
  sheaf_sync();
  return r;
}
// The reductions' shuffles: the lanes of the calling thread's warp (those of a block smaller than
// a warp) meet at its own barrier; any type of up to 8 bytes. A block's threads run together, its
// blocks one after another, so the lanes' slots are the block's.
static unsigned long long sheaf_lane_bytes[1024];
template <class T> static inline T sh_shfl_xor(T v, int lane_mask, unsigned) {
  static_assert(sizeof(T) <= sizeof(unsigned long long));
  memcpy(&sheaf_lane_bytes[threadIdx.x], &v, sizeof v);
  sheaf_warp_sync();
  T r;
  memcpy(&r, &sheaf_lane_bytes[threadIdx.x ^ unsigned(lane_mask)], sizeof r);
  sheaf_warp_sync();
  return r;
}
static inline float sh_b2f(unsigned short);  // kScalarHelpers' conversions, defined after this prelude
static inline float sh_h2f(unsigned short);
// mma.sync.m16n8k16.row.col with f32 accumulators (fragment layouts: backend/cuda/attention_kernel.cpp).
template <bool Bf16> static inline void sheaf_mma(float* d, const unsigned* a, const unsigned* b) {
  const unsigned t = threadIdx.x, warp = t & ~31u, g = (t & 31) >> 2, c = t & 3;
  for (int i = 0; i < 4; ++i) sheaf_lane_words[t][i] = a[i];
  sheaf_lane_words[t][4] = b[0], sheaf_lane_words[t][5] = b[1];
  sheaf_sync();
  auto half = [](unsigned word, unsigned k) {
    const auto h = static_cast<unsigned short>(word >> (16 * (k & 1)));
    return Bf16 ? sh_b2f(h) : sh_h2f(h);
  };
  float r[4];
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i >> 1), col = 2 * c + (i & 1);
    float acc = d[i];
    for (unsigned k = 0; k < 16; ++k) {
      const float x = half(sheaf_lane_words[warp + (row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k);
      const float y = half(sheaf_lane_words[warp + col * 4 + (k % 8) / 2][4 + (k >= 8)], k);
      acc += x * y;
    }
    r[i] = acc;
  }
  sheaf_sync();
  for (int i = 0; i < 4; ++i) d[i] = r[i];
}
static inline void sh_mma_bf16(float* d, const unsigned* a, const unsigned* b) { sheaf_mma<true>(d, a, b); }
static inline void sh_mma_f16(float* d, const unsigned* a, const unsigned* b) { sheaf_mma<false>(d, a, b); }
static inline float atomicAdd(float* p, float v) {
  float old = *p, want;
  do want = old + v; while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
)";

std::string emulation_launcher(const std::string& symbol, const std::string& kernel) {
  return fmt::format(
      "extern \"C\" void {0}(void** a) {{ sheaf_call({1}, a); }}\n"
      "extern \"C\" const unsigned* {0}_sizes() {{ return sheaf_sizes({1}); }}\n",
      symbol, kernel);
}

namespace {

// A synchronising kernel's block runs as one fiber per CUDA thread on one OS thread (run_kernel
// starts one a launch): each fiber runs until it waits at a barrier (__syncthreads() and the warp
// collectives': its block's; a reduction's shuffle: its warp's) or returns, and a barrier opens
// once every fiber of it that has not returned waits there (a returned thread counts as arrived,
// as on the GPU). A switch is Boost.Context's jump_fcontext (registers only, no system call): no
// OS thread per CUDA thread and nothing spins (OS threads at std::barrier spent ~95 % of a GPT
// step's emulation in sched_yield, glibc's swapcontext ~90 % in its sigprocmask).
namespace fctx = boost::context::detail;
enum class At : uint8_t { Running, Block, Warp, Done };

struct BlockRun {
  const EmulatedKernel* kernel = nullptr;
  void** args = nullptr;
  fctx::fcontext_t scheduler = nullptr;   // where a fiber switches back to
  std::vector<fctx::fcontext_t> fibers;   // each fiber where it stopped
  std::vector<At> at;                     // … and at what
  unsigned current = 0;                   // the fiber running
  const void* scheduler_stack = nullptr;  // ASan: the scheduler's stack, learnt by a fiber's first switch
  size_t scheduler_stack_size = 0;
};
thread_local BlockRun* t_run = nullptr;  // the block being run on this OS thread

constexpr size_t kFiberStack = size_t{256} << 10;  // bytes per fiber, mapped lazily, above a guard page
constexpr size_t kGuard = 4096;

// The lowest address of fiber t's stack (kept for the process; launches run one at a time, under
// run_kernel's lock).
char* fiber_stack(unsigned t) {
  static std::vector<char*> stacks;
  while (stacks.size() <= t) {
    void* p = mmap(nullptr, kGuard + kFiberStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) throw SheafError("internal: no memory for an emulated thread's stack");
    mprotect(p, kGuard, PROT_NONE);
    stacks.push_back(static_cast<char*>(p) + kGuard);
  }
  return stacks[t];
}

// Switches to `to`, whose stack starts at `stack`, and returns the context that switches back
// (AddressSanitizer is told of both ends of the switch).
fctx::fcontext_t switch_to(fctx::fcontext_t to, const void* stack, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, stack, size);
#else
  (void)stack, (void)size;
#endif
  const fctx::transfer_t back = fctx::jump_fcontext(to, nullptr);
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
  return back.fctx;
}

void fiber_main(fctx::transfer_t from) {
  BlockRun& r = *t_run;
  r.scheduler = from.fctx;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &r.scheduler_stack, &r.scheduler_stack_size);
#endif
  r.kernel->call(r.args);
  r.at[r.current] = At::Done;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(nullptr, r.scheduler_stack, r.scheduler_stack_size);  // this fiber ends
#endif
  fctx::jump_fcontext(r.scheduler, nullptr);  // never resumed
}

void wait_at(At barrier, const char* what) {
  BlockRun* r = t_run;
  if (!r) {  // run_kernel was told the kernel does not synchronise
    std::fprintf(stderr, "internal: %s in an emulated kernel whose threads run one at a time\n", what);
    std::abort();
  }
  r->at[r->current] = barrier;
  r->scheduler = switch_to(r->scheduler, r->scheduler_stack, r->scheduler_stack_size);
}
void block_sync() { wait_at(At::Block, "__syncthreads()"); }
void warp_sync() { wait_at(At::Warp, "a warp shuffle"); }

// Opens `barrier` for the fibers [lo, hi) when every one of them that has not returned waits
// there (and one does); whether it opened.
bool open(BlockRun& r, At barrier, unsigned lo, unsigned hi) {
  bool waiting = false;
  for (unsigned t = lo; t < hi; ++t) {
    if (r.at[t] != barrier && r.at[t] != At::Done) return false;
    waiting |= r.at[t] == barrier;
  }
  if (!waiting) return false;
  for (unsigned t = lo; t < hi; ++t)
    if (r.at[t] == barrier) r.at[t] = At::Running;
  return true;
}

// Runs block b of `threads` fibers until every one has returned.
void run_block(BlockRun& r, unsigned b, unsigned threads) {
  for (unsigned t = 0; t < threads; ++t) {
    r.at[t] = At::Running;
    r.fibers[t] = fctx::make_fcontext(fiber_stack(t) + kFiberStack, kFiberStack, fiber_main);
  }
  for (;;) {
    for (unsigned t = 0; t < threads; ++t)
      if (r.at[t] == At::Running) {
        r.current = t;
        r.kernel->at(b, t);  // threadIdx is the OS thread's: set before each resumption
        r.fibers[t] = switch_to(r.fibers[t], fiber_stack(t), kFiberStack);
      }
    if (std::all_of(r.at.begin(), r.at.begin() + threads, [](At a) { return a == At::Done; })) return;
    bool opened = open(r, At::Block, 0, threads);
    for (unsigned w = 0; w < threads; w += 32) opened |= open(r, At::Warp, w, std::min(threads, w + 32));
    if (!opened) throw SheafError(fmt::format("internal: the threads of emulated block {} wait at different barriers", b));
  }
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

EmulationLibrary compile_emulation(const std::string& unit, const std::filesystem::path& base) {
  EmulationLibrary lib;
  if (!cpu::toolchain()) {
    lib.error = "no C++ compiler: kernels cannot be emulated";
    return lib;
  }
  const std::string b = base.string();
  std::ofstream(b + ".cpp") << unit;
  std::string cmd = fmt::format("'{}' -O0 -ffp-contract=off -fPIC -shared -o '{}.so' '{}.cpp' > '{}.log' 2>&1",
                                cpu::toolchain()->compiler, b, b, b);
  if (std::system(cmd.c_str()) != 0) {
    lib.error = read_file(b + ".log").substr(0, 4000);
    return lib;
  }
  void* h = dlopen((b + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    lib.error = dlerror();
    return lib;
  }
  lib.handle = std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
  auto init = reinterpret_cast<void (*)(void (*)(), void (*)())>(dlsym(h, "sheaf_emu_init"));
  if (!init) {
    lib.handle.reset();
    lib.error = "the unit does not start with kEmulationPrelude (no sheaf_emu_init)";
    return lib;
  }
  init(block_sync, warp_sync);
  return lib;
}

EmulatedKernel emulated_kernel(const EmulationLibrary& lib, const std::string& symbol) {
  if (!lib.handle) throw SheafError("internal: the emulated kernels did not compile:\n" + lib.error);
  void* h = lib.handle.get();
  EmulatedKernel k;
  k.library = lib.handle;
  k.launch = reinterpret_cast<void (*)(unsigned, unsigned)>(dlsym(h, "sheaf_emu_launch"));
  k.at = reinterpret_cast<void (*)(unsigned, unsigned)>(dlsym(h, "sheaf_emu_at"));
  k.call = reinterpret_cast<void (*)(void**)>(dlsym(h, symbol.c_str()));
  auto sizes = reinterpret_cast<const unsigned* (*)()>(dlsym(h, (symbol + "_sizes").c_str()));
  if (!k.launch || !k.at || !k.call || !sizes) throw SheafError(fmt::format("internal: no emulated launcher {}", symbol));
  k.sizes = sizes();
  return k;
}

void run_kernel(const EmulatedKernel& k, int64_t grid, int64_t block, bool together, void** args) {
  if (grid < 0 || grid > INT32_MAX || block < 1 || block > 1024)
    throw SheafError(fmt::format("internal: emulated launch of {} blocks of {} threads", grid, block));
  const auto g = static_cast<unsigned>(grid), bl = static_cast<unsigned>(block);
  static std::mutex one_at_a_time;  // blockDim and gridDim are per library, not per thread
  std::lock_guard lock(one_at_a_time);
  k.launch(g, bl);
  if (together) {
    // On a thread of the launch's own, as the unsynchronised kernels run: the kernels' thread_local
    // indices then live in no thread that outlives the launch. (With the fibers on the calling
    // thread, whose dynamic TLS then holds blocks of units dlclose'd since, LeakSanitizer's exit
    // scan faulted once in CI.)
    std::exception_ptr failed;
    std::thread([&] {
      BlockRun r;
      r.kernel = &k, r.args = args;
      r.fibers.resize(bl), r.at.resize(bl);
      t_run = &r;
      try {
        for (unsigned b = 0; b < g; ++b) run_block(r, b, bl);
      } catch (...) {
        failed = std::current_exception();
      }
    }).join();
    if (failed) std::rethrow_exception(failed);
    return;
  }
  std::vector<std::thread> threads;
  const unsigned workers = std::max(1u, std::min(std::thread::hardware_concurrency(), g));
  for (unsigned w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      for (unsigned b = w; b < g; b += workers)
        for (unsigned t = 0; t < bl; ++t) k.at(b, t), k.call(args);
    });
  for (std::thread& t : threads) t.join();
}

// ---- the device -----------------------------------------------------------------------------------

namespace {

constexpr size_t kAlign = 256;

// Whether `header` (a kernel's text before its body) declares a function `name`.
bool declares(std::string_view header, const std::string& name) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = header.find(name); p != std::string_view::npos; p = header.find(name, p + 1)) {
    size_t q = p + name.size();
    while (q < header.size() && std::isspace(static_cast<unsigned char>(header[q]))) ++q;
    if ((p == 0 || !ident(header[p - 1])) && q < header.size() && header[q] == '(') return true;
  }
  return false;
}

// Whether `text` calls __syncthreads() or shuffles a reduction's values between a warp's lanes
// (sh_shfl_xor).
bool waits_for_others(std::string_view text) {
  return text.find("__syncthreads") != std::string_view::npos || text.find("sh_shfl_xor") != std::string_view::npos;
}

// Whether kernel `name` of `source` synchronises (waits_for_others), itself or in a packed
// member's device function it calls (pack_launches.hpp: `static __noinline__ void {k}_b(`, each
// defined before the kernels calling it): a kernel's text runs from its __global__ to the next
// one (or the end of the source), a device function's to the next definition.
bool synchronises(std::string_view source, const std::string& name) {
  for (size_t at = source.find("__global__"); at != std::string_view::npos;) {
    size_t next = source.find("__global__", at + 1);
    std::string_view text = source.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at);
    if (declares(text.substr(0, text.find('{')), name)) {
      static constexpr std::string_view kMember = "static __noinline__ void ";
      const std::string_view own = text.substr(0, text.find(kMember));  // not the device functions after it
      if (waits_for_others(own)) return true;
      for (size_t d = source.find(kMember); d != std::string_view::npos && d < at; d = source.find(kMember, d + 1)) {
        const size_t open = source.find('(', d), end = std::min(source.find(kMember, d + 1), source.find("__global__", d));
        const std::string member(source.substr(d + kMember.size(), open - d - kMember.size()));  // "s12f_b"
        if (own.find(member + "(") != std::string_view::npos && waits_for_others(source.substr(d, end - d))) return true;
      }
      return false;
    }
    at = next;
  }
  throw SheafError(fmt::format("internal: no __global__ kernel {} in the source to load", name));
}

// The emulated kernels of one load; launches are submitted to the device (run or recorded).
class EmulatedModule : public cuda::Module {
 public:
  struct Kernel {
    std::string name;
    EmulatedKernel code;
    bool together = false;  // synchronises: a block's threads run concurrently
  };
  EmulatedModule(std::shared_ptr<EmulatedDevice> device, std::vector<Kernel> kernels)
      : device_(std::move(device)), kernels_(std::move(kernels)) {}

  void launch(size_t kernel, int64_t grid, int64_t block, void** args) override {
    if (kernel >= kernels_.size())
      throw SheafError(fmt::format("internal: launch of kernel {} of a module of {}", kernel, kernels_.size()));
    const Kernel& k = kernels_[kernel];
    if (grid < 1 || grid > INT32_MAX || block < 1 || block > 1024)
      throw SheafError(fmt::format("internal: launch of {} with {} blocks of {} threads", k.name, grid, block));
    // the argument values, copied (a recorded launch outlives `args`)
    std::vector<std::byte> values;
    std::vector<size_t> offsets;
    for (unsigned j = 0; j < k.code.sizes[0]; ++j) {
      offsets.push_back(values.size());
      auto* p = static_cast<const std::byte*>(args[j]);
      values.insert(values.end(), p, p + k.code.sizes[j + 1]);
      values.resize((values.size() + 7) / 8 * 8);
    }
    ++device_->counters.launches;
    device_->submit([code = k.code, together = k.together, grid, block, values = std::move(values), offsets]() mutable {
      std::vector<void*> a;
      for (size_t o : offsets) a.push_back(values.data() + o);
      run_kernel(code, grid, block, together, a.data());
    });
  }

 private:
  std::shared_ptr<EmulatedDevice> device_;
  std::vector<Kernel> kernels_;
};

class EmulatedCapture : public cuda::Capture {
 public:
  EmulatedCapture(std::shared_ptr<EmulatedDevice> device, std::vector<std::function<void()>> work)
      : device_(std::move(device)), work_(std::make_shared<const std::vector<std::function<void()>>>(std::move(work))) {}
  void replay() override {
    ++device_->counters.replays;
    device_->submit([work = work_] {
      for (const auto& w : *work) w();
    });
  }

 private:
  std::shared_ptr<EmulatedDevice> device_;
  std::shared_ptr<const std::vector<std::function<void()>>> work_;
};

// The lowest and highest element offsets of a strided operand (dims of extent ≥ 1).
std::pair<int64_t, int64_t> offset_range(std::initializer_list<std::pair<int64_t, int64_t>> extent_stride) {
  int64_t lo = 0, hi = 0;
  for (auto [extent, stride] : extent_stride) (stride < 0 ? lo : hi) += (extent - 1) * stride;
  return {lo, hi};
}

// A strided operand of a product (f32, f16 or bf16; element (r, c) at element r·rs + c·cs of p)
// as f32, row-major rows × cols.
std::vector<float> widen(DType t, cuda::DevicePtr p, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t e = r * rs + c * cs;
      const uint16_t h = t == DType::F32 ? 0 : reinterpret_cast<const uint16_t*>(p)[e];
      out[static_cast<size_t>(r * cols + c)] =
          t == DType::F32 ? reinterpret_cast<const float*>(p)[e] : t == DType::F16 ? half_to_float(h) : bf16_to_float(h);
    }
  return out;
}

// f32 values stored contiguously at p as type t (rounded to nearest even).
void narrow(DType t, const std::vector<float>& x, cuda::DevicePtr p) {
  for (size_t j = 0; j < x.size(); ++j)
    if (t == DType::F32) reinterpret_cast<float*>(p)[j] = x[j];
    else reinterpret_cast<uint16_t*>(p)[j] = t == DType::F16 ? float_to_half(x[j]) : float_to_bf16(x[j]);
}

// GELU's tanh approximation and its derivative in f32, as cuBLASLt's epilogues compute them.
float gelu_f32(float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
float gelu_grad_f32(float x) {
  const float t = std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}

// Throws unless every element a product reads or writes lies inside a live allocation.
// A bias row or row sums must be 16-byte aligned, as cuBLASLt's epilogues may assume, and a GELU
// epilogue's aux too (m×n, one batch, n a multiple of 8; required by a gradient).
void check_gemm(const EmulatedDevice& d, const cuda::Gemm& g, cuda::DevicePtr a, cuda::DevicePtr b, cuda::DevicePtr c,
                cuda::DevicePtr bias, cuda::DevicePtr aux) {
  if (g.m == 0 || g.n == 0 || g.batches == 0) return;
  const auto es = static_cast<int64_t>(dtype_size(g.dtype));
  auto check = [&](cuda::DevicePtr p, std::pair<int64_t, int64_t> range, const char* what) {
    d.check_range(p + static_cast<uint64_t>(range.first * es), static_cast<size_t>((range.second - range.first + 1) * es), what);
  };
  check(c, {0, g.batches * g.m * g.n - 1}, "product output");
  if (g.epilogue != cuda::GemmEpilogue::None) {
    if (bias % 16 != 0) throw SheafError(fmt::format("internal: a product's row at {:#x} is not 16-byte aligned", bias));
    if (g.epilogue != cuda::GemmEpilogue::Bias && g.batches != 1) throw SheafError("internal: row sums of a batched product");
    check(bias, {0, (g.epilogue == cuda::GemmEpilogue::SumA ? g.m : g.n) - 1}, "product row");
  }
  if (g.act != cuda::GemmAct::None) {
    if (g.batches != 1 || g.n % 8 != 0 || aux % 16 != 0 || (g.act == cuda::GemmAct::GeluGrad && (!aux || g.epilogue != cuda::GemmEpilogue::None)))
      throw SheafError(fmt::format("internal: a GELU epilogue on {} batches of {}x{} (aux at {:#x})", g.batches, g.m, g.n, aux));
    if (aux) check(aux, {0, g.m * g.n - 1}, "GELU's input");
  }
  if (g.k == 0) return;
  check(a, offset_range({{g.batches, g.a_bs}, {g.m, g.a_rs}, {g.k, g.a_cs}}), "product lhs");
  check(b, offset_range({{g.batches, g.b_bs}, {g.k, g.b_rs}, {g.n, g.b_cs}}), "product rhs");
}

}  // namespace

EmulatedDevice::~EmulatedDevice() {
  for (auto& [p, bytes] : allocations_) std::free(reinterpret_cast<void*>(p));
}

cuda::DevicePtr EmulatedDevice::allocate(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) throw SheafError(fmt::format("out of emulated device memory: {} bytes", bytes));
  std::memset(p, 0xff, rounded);
  std::lock_guard lock(mu_);
  allocations_[reinterpret_cast<cuda::DevicePtr>(p)] = bytes;
  ++counters.allocations;
  counters.live_bytes += bytes;
  return reinterpret_cast<cuda::DevicePtr>(p);
}

void EmulatedDevice::release(cuda::DevicePtr p) {
  std::lock_guard lock(mu_);
  auto it = allocations_.find(p);
  if (it == allocations_.end()) throw SheafError(fmt::format("internal: release of 0x{:x}, which is not a live allocation", p));
  ++counters.releases;
  counters.live_bytes -= it->second;
  allocations_.erase(it);
  std::free(reinterpret_cast<void*>(p));
}

void EmulatedDevice::check_range(cuda::DevicePtr p, size_t bytes, const char* what) const {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  auto it = allocations_.upper_bound(p);
  if (it != allocations_.begin() && p + bytes <= std::prev(it)->first + std::prev(it)->second && p + bytes > p) return;
  throw SheafError(fmt::format("internal: {} of {} bytes at 0x{:x} is outside every live allocation", what, bytes, p));
}

void EmulatedDevice::submit(std::function<void()> work) {
  if (recording_) recorded_.push_back(std::move(work));
  else work();
}

void EmulatedDevice::upload(cuda::DevicePtr dst, const void* src, size_t bytes) {
  if (recording_) throw SheafError(fmt::format("cannot upload/download while capturing: upload of {} bytes", bytes));
  check_range(dst, bytes, "upload");
  ++counters.uploads;
  counters.upload_bytes += bytes;
  if (bytes) std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
}

void EmulatedDevice::download(void* dst, cuda::DevicePtr src, size_t bytes) {
  if (recording_) throw SheafError(fmt::format("cannot upload/download while capturing: download of {} bytes", bytes));
  check_range(src, bytes, "download");
  ++counters.downloads;
  counters.download_bytes += bytes;
  if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
}

void EmulatedDevice::copy(cuda::DevicePtr dst, cuda::DevicePtr src, size_t bytes) {
  check_range(dst, bytes, "copy to");
  check_range(src, bytes, "copy from");
  ++counters.copies;
  submit([this, dst, src, bytes] {
    check_range(dst, bytes, "copy to");
    check_range(src, bytes, "copy from");
    if (bytes) std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
}

void EmulatedDevice::fill(cuda::DevicePtr dst, uint8_t byte, size_t bytes) {
  check_range(dst, bytes, "fill");
  ++counters.fills;
  submit([this, dst, byte, bytes] {
    check_range(dst, bytes, "fill");
    if (bytes) std::memset(reinterpret_cast<void*>(dst), byte, bytes);
  });
}

void EmulatedDevice::stamp() {
  if (recording_) throw SheafError("emulated CUDA: a timestamp queued while capturing");
  stamps_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::vector<double> EmulatedDevice::stamps_ms() {
  std::vector<double> t;
  for (double s : stamps_) t.push_back((s - stamps_.front()) * 1e3);
  stamps_.clear();
  return t;
}

bool EmulatedDevice::all_reduce_sum(cuda::DevicePtr in, cuda::DevicePtr out, int64_t count, DType dtype) {
  if (dtype != DType::F32 && dtype != DType::I32 && dtype != DType::U32) return false;
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  check_range(in, bytes, "all_reduce_sum");
  check_range(out, bytes, "all_reduce_sum");
  ++counters.collectives;
  submit([in, out, bytes] {
    if (bytes && in != out) std::memmove(reinterpret_cast<void*>(out), reinterpret_cast<const void*>(in), bytes);
  });
  return true;
}

std::unique_ptr<cuda::Module> EmulatedDevice::load(const std::string& source, const std::vector<std::string>& names,
                                                   const std::string& /*cache_dir*/) {
  if (!cpu::toolchain()) throw SheafError("no C++ compiler: the emulated device cannot load kernels");
  std::string unit = std::string(kEmulationPrelude) + source + "\n";
  std::vector<bool> together;
  for (const std::string& n : names) {
    together.push_back(synchronises(source, n));
    unit += emulation_launcher("sheaf_emu_" + n, n);
  }
  static std::atomic<int> loads{0};  // dlopen knows a library by its path: each load gets a new one
  auto dir = std::filesystem::temp_directory_path() / fmt::format("sheaf-emulated-device-{}-{}", getpid(), loads++);
  std::filesystem::create_directories(dir);
  EmulationLibrary lib = compile_emulation(unit, dir / "kernels");
  std::filesystem::remove_all(dir);
  if (!lib.handle) throw SheafError("the emulated kernels do not compile:\n" + lib.error);
  std::vector<EmulatedModule::Kernel> kernels;
  for (size_t i = 0; i < names.size(); ++i) kernels.push_back({names[i], emulated_kernel(lib, "sheaf_emu_" + names[i]), together[i]});
  return std::make_unique<EmulatedModule>(shared_from_this(), std::move(kernels));
}

void EmulatedDevice::gemm(const cuda::Gemm& g, cuda::DevicePtr a, cuda::DevicePtr b, cuda::DevicePtr c, cuda::DevicePtr bias,
                          cuda::DevicePtr aux) {
  if (g.dtype != DType::F32 && g.dtype != DType::F16 && g.dtype != DType::BF16)
    throw SheafError(fmt::format("internal: matrix product of {} on the emulated device", dtype_name(g.dtype)));
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batches < 0)
    throw SheafError(fmt::format("internal: matrix product of {}×{}·{}×{} in {} batches", g.m, g.k, g.k, g.n, g.batches));
  auto check_all = [this, g, a, b, c, bias, aux] { check_gemm(*this, g, a, b, c, bias, aux); };
  check_all();
  ++counters.gemms;
  counters.tf32_gemms += g.tf32;
  counters.bias_gemms += g.epilogue == cuda::GemmEpilogue::Bias;
  counters.row_sum_gemms += g.epilogue == cuda::GemmEpilogue::SumA || g.epilogue == cuda::GemmEpilogue::SumB;
  counters.gelu_gemms += g.act != cuda::GemmAct::None;
  counters.gelu_aux_gemms += g.act == cuda::GemmAct::Gelu && aux != 0;
  counters.gelu_grad_gemms += g.act == cuda::GemmAct::GeluGrad;
  submit([check_all, g, a, b, c, bias, aux] {
    check_all();
    if (g.m == 0 || g.n == 0) return;
    const auto es = static_cast<uint64_t>(dtype_size(g.dtype));
    const bool with_bias = g.epilogue == cuda::GemmEpilogue::Bias;
    const std::vector<float> row = with_bias ? widen(g.dtype, bias, 1, g.n, g.n, 1) : std::vector<float>{};
    for (int64_t i = 0; i < g.batches; ++i) {
      const std::vector<float> wa = widen(g.dtype, a + static_cast<uint64_t>(i * g.a_bs) * es, g.m, g.k, g.a_rs, g.a_cs);
      const std::vector<float> wb = widen(g.dtype, b + static_cast<uint64_t>(i * g.b_bs) * es, g.k, g.n, g.b_rs, g.b_cs);
      std::vector<float> wc(static_cast<size_t>(g.m * g.n));
      sheaf::gemm(MatView<const float>{wa.data(), g.m, g.k, g.k, 1}, MatView<const float>{wb.data(), g.k, g.n, g.n, 1},
                  MatView<float>{wc.data(), g.m, g.n, g.n, 1});
      if (with_bias)  // the f32 sum plus the row, rounded once
        for (size_t j = 0; j < wc.size(); ++j) wc[j] += row[j % static_cast<size_t>(g.n)];
      if (g.act == cuda::GemmAct::Gelu) {  // GELU's input (rounded) to aux, GELU of the f32 value rounded once to c
        if (aux) narrow(g.dtype, wc, aux);
        for (float& v : wc) v = gelu_f32(v);
      } else if (g.act == cuda::GemmAct::GeluGrad) {  // the f32 sum times gelu'(aux), rounded once
        const std::vector<float> x = widen(g.dtype, aux, g.m, g.n, g.n, 1);
        for (size_t j = 0; j < wc.size(); ++j) wc[j] *= gelu_grad_f32(x[j]);
      }
      narrow(g.dtype, wc, c + static_cast<uint64_t>(i * g.m * g.n) * es);
    }
    if (g.epilogue == cuda::GemmEpilogue::SumA || g.epilogue == cuda::GemmEpilogue::SumB) {  // f32 sums, rounded once
      const bool of_a = g.epilogue == cuda::GemmEpilogue::SumA;
      const int64_t count = of_a ? g.m : g.n;  // a's rows, or b's columns, each of k elements
      const std::vector<float> x = of_a ? widen(g.dtype, a, g.m, g.k, g.a_rs, g.a_cs) : widen(g.dtype, b, g.n, g.k, g.b_cs, g.b_rs);
      std::vector<float> sums(static_cast<size_t>(count), 0.0f);
      for (int64_t i = 0; i < count; ++i)
        for (int64_t p = 0; p < g.k; ++p) sums[static_cast<size_t>(i)] += x[static_cast<size_t>(i * g.k + p)];
      narrow(g.dtype, sums, bias);
    }
  });
}

std::unique_ptr<cuda::Capture> EmulatedDevice::capture(const std::function<void()>& record) {
  if (recording_) throw SheafError("internal: capture while capturing");
  recording_ = true;
  try {
    record();
  } catch (...) {
    recording_ = false;
    recorded_.clear();
    throw;
  }
  recording_ = false;
  ++counters.captures;
  return std::make_unique<EmulatedCapture>(shared_from_this(), std::exchange(recorded_, {}));
}

std::shared_ptr<EmulatedDevice> emulated_device() { return std::make_shared<EmulatedDevice>(); }

}  // namespace sheaf::testing_support
