// tests/unit/cuda_device_test.cpp — conformance of cuda::Device implementations (device.hpp), each
// case run on every device: "emulated" (cuda_emulator.hpp; skipped without a C++ compiler) and
// "gpu" (cuda::gpu(); skipped, with its reason, where no GPU is found).
//   memory     allocate/upload/download round trips; device copies and fills at offsets
//   kernels    functions traced, optimised, fused, planned and rendered as the CUDA backend does
//              (elementwise, block-per-point reductions, a product), loaded and run through the
//              Device (kernels by Module::launch, Dot steps by Device::gemm) and compared with the
//              reference executor; hand-written kernels with scalar parameters, __shared__ memory
//              and __syncthreads(); compile errors reported with the compiler's log
//   products   gemm of f32 (row-major, transposed lhs, batched with a broadcast operand), f16 and
//              bf16, against a double-precision host loop on the (rounded) inputs: within 1e-4
//              (f32) or 1e-2 (f16, bf16) of Σ|a·b| per element
//   capture    a launch and a product recorded, the input changed by upload, replayed: the output
//              follows the new input; recording runs nothing
//   emulated   counters, range checks, releases of unknown pointers, upload while capturing
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "backend/cpu/toolchain.hpp"
#include "backend/cuda/allocator.hpp"
#include "backend/cuda/device.hpp"
#include "backend/cuda/render.hpp"
#include "backend/ref/executor.hpp"
#include "base/error.hpp"
#include "cuda_emulator.hpp"
#include "eval/interp.hpp"
#include "passes/passes.hpp"
#include "tensor/tensor.hpp"
#include "trace/tracer.hpp"
#include "value_compare.hpp"

namespace sheaf {
namespace {

using cuda::DevicePtr;
using cuda::Launch;
using testing_support::EmulatedDevice;

// ---- devices and buffers --------------------------------------------------------------------------

std::shared_ptr<cuda::Device> device_of(const std::string& kind, std::string* why) {
  if (kind == "gpu") return cuda::gpu(why);
  if (!cpu::toolchain()) {
    *why = "no C++ compiler: kernels cannot be emulated here";
    return nullptr;
  }
  return testing_support::emulated_device();
}

// Device memory released with its owner.
class Buffers {
 public:
  explicit Buffers(cuda::Device& d) : d_(d) {}
  Buffers(const Buffers&) = delete;
  ~Buffers() {
    for (DevicePtr p : owned_) d_.release(p);
  }
  DevicePtr make(size_t bytes) { return owned_.emplace_back(d_.allocate(bytes)); }
  template <typename T>
  DevicePtr of(const std::vector<T>& host) {
    DevicePtr p = make(std::max<size_t>(1, host.size() * sizeof(T)));
    d_.upload(p, host.data(), host.size() * sizeof(T));
    return p;
  }

 private:
  cuda::Device& d_;
  std::vector<DevicePtr> owned_;
};

template <typename T>
std::vector<T> download(cuda::Device& d, DevicePtr p, size_t n) {
  std::vector<T> out(n);
  d.download(out.data(), p, n * sizeof(T));
  return out;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Launches kernel `k` of `m` with the parameter values `values` (each 8 bytes: a DevicePtr, an
// int64 or a float in its low half).
void launch(cuda::Module& m, size_t k, int64_t grid, int64_t block, std::vector<uint64_t> values) {
  std::vector<void*> args;
  for (uint64_t& v : values) args.push_back(&v);
  m.launch(k, grid, block, args.data());
}

uint64_t f32_arg(float x) {
  uint64_t v = 0;
  std::memcpy(&v, &x, sizeof x);
  return v;
}

class CudaDeviceConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = device_of(GetParam(), &why);
    if (!device_) GTEST_SKIP() << why;
  }
  cuda::Device& dev() { return *device_; }
  EmulatedDevice* emulated() { return dynamic_cast<EmulatedDevice*>(device_.get()); }
  std::shared_ptr<cuda::Device> device_;
};

// ---- memory ----------------------------------------------------------------------------------------

TEST_P(CudaDeviceConformance, UploadDownloadRoundTrips) {
  EXPECT_FALSE(dev().describe().empty());
  EXPECT_EQ(dev().arch().rfind("sm_", 0), 0u) << dev().arch();
  Buffers b(dev());
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    std::vector<uint8_t> host(bytes);
    std::mt19937 gen(static_cast<uint32_t>(bytes));
    for (uint8_t& x : host) x = static_cast<uint8_t>(gen());
    DevicePtr p = b.make(bytes);
    EXPECT_EQ(p % 256, 0u) << "allocations are 256-byte aligned";
    dev().upload(p, host.data(), bytes);
    EXPECT_EQ(download<uint8_t>(dev(), p, bytes), host) << bytes << " bytes";
  }
}

TEST_P(CudaDeviceConformance, CopiesAndFillsAtOffsets) {
  Buffers b(dev());
  std::vector<uint8_t> pattern(1000);
  for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 7 + 3);
  DevicePtr src = b.of(pattern), dst = b.make(1000);
  dev().fill(dst, 0x11, 1000);
  dev().copy(dst + 50, src + 100, 500);  // dst[50, 550) = pattern[100, 600)
  dev().fill(dst + 700, 0x5a, 200);      // dst[700, 900) = 0x5a
  std::vector<uint8_t> got = download<uint8_t>(dev(), dst, 1000);
  for (size_t i = 0; i < 1000; ++i) {
    uint8_t want = i >= 50 && i < 550 ? pattern[i + 50] : i >= 700 && i < 900 ? 0x5a : 0x11;
    ASSERT_EQ(got[i], want) << "byte " << i;
  }
}

// ---- hand-written kernels --------------------------------------------------------------------------

// axpy: y = a·x + y (scalar parameters); reverse: each block reverses its `blockDim.x` elements
// through __shared__ memory (wrong unless a block's threads all store before any loads); row_sum:
// one block per row, a __shared__ tree of partial sums.
constexpr const char* kHandKernels = R"(
extern "C" __global__ void axpy(const float* __restrict__ x, float* __restrict__ y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void __launch_bounds__(64) reverse(const float* __restrict__ x, float* __restrict__ y) {
  __shared__ float s[64];
  long base = blockIdx.x * (long)blockDim.x;
  s[threadIdx.x] = x[base + threadIdx.x];
  __syncthreads();
  y[base + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void __launch_bounds__(128) row_sum(const float* __restrict__ x, float* __restrict__ out, long n) {
  __shared__ float part[128];
  const float* row = x + blockIdx.x * n;
  float acc = 0;
  for (long i = threadIdx.x; i < n; i += blockDim.x) acc += row[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
)";

TEST_P(CudaDeviceConformance, RunsHandWrittenKernels) {
  auto m = dev().load(kHandKernels, {"axpy", "reverse", "row_sum"}, "");
  Buffers b(dev());
  const int64_t n = 1000, rows = 5, cols = 3000;
  std::vector<float> x = random_floats(n, 1), y = random_floats(n, 2), big = random_floats(rows * cols, 3);
  DevicePtr px = b.of(x), py = b.of(y), pr = b.make(n * sizeof(float)), pbig = b.of(big), psum = b.make(rows * sizeof(float));

  launch(*m, 0, (n + 127) / 128, 128, {px, py, f32_arg(2.5f), static_cast<uint64_t>(n)});
  launch(*m, 1, 15, 64, {px, pr});  // 15 blocks of 64: the first 960 elements
  launch(*m, 2, rows, 128, {pbig, psum, static_cast<uint64_t>(cols)});
  dev().synchronize();

  std::vector<float> got_y = download<float>(dev(), py, n), got_r = download<float>(dev(), pr, 960),
                     got_s = download<float>(dev(), psum, rows);
  // NVRTC contracts a·x + y into one fused multiply-add (--fmad=true): either rounding is right
  for (int64_t i = 0; i < n; ++i) {
    volatile float product = 2.5f * x[i];  // rounded on its own: no contraction here
    const float unfused = product + y[i], fused = std::fma(2.5f, x[i], y[i]);
    ASSERT_TRUE(got_y[i] == unfused || got_y[i] == fused) << "axpy " << i << ": " << got_y[i] << " vs " << unfused << " or " << fused;
  }
  for (int64_t i = 0; i < 960; ++i) ASSERT_EQ(got_r[i], x[i / 64 * 64 + 63 - i % 64]) << "reverse " << i;
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0, scale = 0;
    for (int64_t c = 0; c < cols; ++c) want += big[r * cols + c], scale += std::fabs(big[r * cols + c]);
    EXPECT_NEAR(got_s[r], want, 1e-5 * scale) << "row_sum " << r;
  }
}

// Stamps (kernel timing): one time per stamp, from 0 and never decreasing, each series forgotten
// once read; a kernel between two stamps takes time.
TEST_P(CudaDeviceConformance, StampsTimeTheWorkBetweenThem) {
  ASSERT_TRUE(dev().keeps_time());
  auto m = dev().load(kHandKernels, {"row_sum"}, "");
  Buffers b(dev());
  const int64_t rows = 64, cols = 1 << 16;
  DevicePtr pbig = b.make(rows * cols * sizeof(float)), psum = b.make(rows * sizeof(float));
  for (int series = 0; series < 2; ++series) {
    dev().stamp();
    launch(*m, 0, rows, 128, {pbig, psum, static_cast<uint64_t>(cols)});
    dev().stamp();
    dev().stamp();
    const std::vector<double> t = dev().stamps_ms();
    ASSERT_EQ(t.size(), 3u) << "series " << series;
    EXPECT_EQ(t[0], 0.0);
    EXPECT_GT(t[1], 0.0) << "the kernel took no time";
    EXPECT_GE(t[2], t[1]);
  }
}

TEST_P(CudaDeviceConformance, ReportsCompileErrorsWithTheLog) {
  try {
    dev().load("extern \"C\" __global__ void broken() { undefined_thing = 1; }", {"broken"}, "");
    FAIL() << "expected a compile error";
  } catch (const SheafError& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
  }
}

// ---- rendered kernels ------------------------------------------------------------------------------

// A traced function planned and rendered as the CUDA backend does, with the inputs of its call.
struct Rendered {
  ir::Graph graph;
  std::vector<Tensor> inputs;
  fusion::Schedule schedule;
  fusion::MemoryPlan memory;
  cuda::Kernels kernels;
};

// `program` defines `f` and the arguments `args` (global names) of the traced call.
Rendered render_call(const std::string& program, const std::vector<std::string>& args) {
  std::ostringstream printed;
  Interp in{printed};
  in.run_text(program, "<cuda-device-test>");
  std::vector<Value> values;
  for (const std::string& a : args) values.push_back(in.global(symbols::intern(a))->value);
  Rendered r;
  std::string key;
  trace::flatten_args(values, false, key, r.inputs);
  trace::Traced t = trace::trace_call(in, in.global(symbols::intern("f"))->value, values, SrcLoc{}, false);
  passes::optimize(t.graph);
  r.graph = passes::lower_composites(t.graph, true).graph;
  r.schedule = fusion::fuse(r.graph);
  r.memory = fusion::plan_memory(r.graph, r.schedule);
  r.kernels = cuda::render(r.graph, r.schedule, r.memory);
  return r;
}

// The results of `r` run through `d`: parameters and constants uploaded, the arena and every
// step's output allocated, kernels launched, Dot steps as gemm (f32, at most one batch dim).
std::vector<Tensor> run_on_device(cuda::Device& d, const Rendered& r) {
  const ir::Graph& g = r.graph;
  const fusion::Schedule& s = r.schedule;
  const fusion::MemoryPlan& m = r.memory;
  Buffers owned(d);
  std::vector<DevicePtr> table(static_cast<size_t>(m.slots), 0);
  auto upload = [&](const Tensor& t) {
    DevicePtr p = owned.make(std::max<size_t>(1, t.nbytes()));
    d.upload(p, t.bytes(), t.nbytes());
    return p;
  };
  DevicePtr arena = owned.make(std::max<size_t>(1, static_cast<size_t>(m.arena_bytes)));
  if (r.kernels.scratch_bytes > 0) table.push_back(owned.make(static_cast<size_t>(r.kernels.scratch_bytes)));  // slot m.slots
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Constant) table[m.slot[n.out]] = upload(n.attrs.value);
  for (size_t i = 0; i < g.params.size(); ++i) table[m.slot[g.params[i]]] = upload(r.inputs[i]);
  for (size_t v = 0; v < m.slot.size(); ++v) {
    if (m.slot[v] < 0 || table[m.slot[v]]) continue;
    const ir::Type& t = g.type(static_cast<int32_t>(v));
    if (m.arena_offset[v] >= 0) table[m.slot[v]] = arena + static_cast<uint64_t>(m.arena_offset[v]);
    else table[m.slot[v]] = owned.make(std::max<size_t>(1, static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype)));
  }
  const std::vector<std::string> names = cuda::kernel_names(r.kernels);
  std::unique_ptr<cuda::Module> module = d.load(r.kernels.source, names, "");
  for (const Launch& l : r.kernels.launches) {
    const fusion::Step& st = s.steps[l.step];
    const ir::Node& n = g.nodes[static_cast<size_t>(st.nodes[0])];
    if (l.kind == Launch::Kind::Kernel) {
      std::vector<uint64_t> values;
      for (int32_t slot : l.slots) values.push_back(table[static_cast<size_t>(slot)]);
      launch(*module, static_cast<size_t>(std::find(names.begin(), names.end(), l.kernel) - names.begin()), l.grid, l.block, values);
    } else if (l.kind == Launch::Kind::Dot) {
      const fusion::DotLayout& dl = st.dot;
      if (dl.batch.size() > 1) throw SheafError("test: a product with more than one batch dim");
      const fusion::View &a = fusion::read_view(s, n.in[0], static_cast<int32_t>(l.step)),
                         &b = fusion::read_view(s, n.in[1], static_cast<int32_t>(l.step));
      cuda::Gemm gm{.dtype = g.type(n.out).dtype, .m = dl.m, .n = dl.n, .k = dl.k, .a_rs = dl.a_rs, .a_cs = dl.a_cs,
                    .b_rs = dl.b_rs, .b_cs = dl.b_cs};
      if (!dl.batch.empty()) gm.batches = dl.batch[0], gm.a_bs = dl.batch_lhs[0], gm.b_bs = dl.batch_rhs[0];
      const uint64_t es = dtype_size(gm.dtype);
      d.gemm(gm, table[static_cast<size_t>(l.slots[0])] + static_cast<uint64_t>(a.offset) * es,
             table[static_cast<size_t>(l.slots[1])] + static_cast<uint64_t>(b.offset) * es, table[static_cast<size_t>(l.slots[2])], 0, 0);
    } else {
      throw SheafError("test: a host step (the device cases use none)");
    }
  }
  d.synchronize();
  std::vector<Tensor> results;
  for (int32_t res : g.results) {
    const ir::Type& t = g.type(res);
    Tensor x = Tensor::empty(t.dtype, t.shape);
    d.download(x.mutable_bytes(), table[m.slot[res]], x.nbytes());
    results.push_back(x);
  }
  return results;
}

struct RenderedCase {
  const char* name;
  const char* program;
  std::vector<std::string> args;
  bool block_per_point;  // some kernel is block per point (with the default thresholds)
};

const RenderedCase kRenderedCases[] = {
    {"elementwise", "(defn f [a b] (+ (* a b) 1)) (def a (random-normal 1 '[3 1000])) (def b (random-normal 2 '[3 1000]))",
     {"a", "b"}, false},
    {"row-reductions", "(defn f [a] (list (sum a :axis 1) (max (exp a) :axis 1) (mean (* a a)))) (def a (random-normal 3 '[4 3000]))",
     {"a"}, true},
    {"product", "(defn f [a b] (tanh (@ a (* b 2)))) (def a (random-normal 4 '[3 9 16])) (def b (random-normal 5 '[3 16 7]))",
     {"a", "b"}, false},
};

TEST_P(CudaDeviceConformance, RenderedKernelsMatchReferenceExecutor) {
  for (const RenderedCase& c : kRenderedCases) {
    Rendered r = render_call(c.program, c.args);
    bool per_block = false, dot = false;
    for (const Launch& l : r.kernels.launches) per_block |= l.block_reduce, dot |= l.kind == Launch::Kind::Dot;
    EXPECT_EQ(per_block, c.block_per_point) << c.name;
    EXPECT_EQ(dot, std::string(c.name) == "product") << c.name;
    std::vector<Tensor> want = ref::run(r.graph, r.inputs), got = run_on_device(dev(), r);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (size_t i = 0; i < want.size(); ++i) {
      std::string d = testing_support::difference(Value::tensor(got[i]), Value::tensor(want[i]), fmt::format("{} result {}", c.name, i), 20);
      EXPECT_TRUE(d.empty()) << d << "\n" << r.kernels.source;
    }
  }
}

// ---- products --------------------------------------------------------------------------------------

// Operand layout of one product case (element strides).
struct GemmCase {
  const char* name;
  cuda::Gemm g;
};

// A strided operand of a product on the host: element (i, r, c) at data[origin + i·bs + r·rs + c·cs].
struct Operand {
  std::vector<float> data;
  int64_t origin = 0;
  float at(int64_t i, int64_t bs, int64_t r, int64_t rs, int64_t c, int64_t cs) const {
    return data[static_cast<size_t>(origin + i * bs + r * rs + c * cs)];
  }
};

// Random elements for every offset the strides reach (they may be negative or zero).
Operand operand(int64_t batches, int64_t bs, int64_t rows, int64_t rs, int64_t cols, int64_t cs, uint32_t seed) {
  int64_t lo = 0, hi = 0;
  for (auto [extent, stride] : {std::pair{batches, bs}, {rows, rs}, {cols, cs}}) (stride < 0 ? lo : hi) += (extent - 1) * stride;
  return {random_floats(static_cast<size_t>(hi - lo + 1), seed), -lo};
}

// c = a·b per batch in double (the reference), and Σ|a·b| per element (the scale of its error).
void naive_gemm(const cuda::Gemm& g, const Operand& a, const Operand& b, std::vector<double>& c, std::vector<double>& scale) {
  c.assign(static_cast<size_t>(g.batches * g.m * g.n), 0);
  scale = c;
  for (int64_t i = 0; i < g.batches; ++i)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.n; ++col)
        for (int64_t p = 0; p < g.k; ++p) {
          double x = double(a.at(i, g.a_bs, r, g.a_rs, p, g.a_cs)) * b.at(i, g.b_bs, p, g.b_rs, col, g.b_cs);
          c[static_cast<size_t>((i * g.m + r) * g.n + col)] += x, scale[static_cast<size_t>((i * g.m + r) * g.n + col)] += std::fabs(x);
        }
}

const int64_t kM = 37, kN = 29, kK = 53;
const GemmCase kGemmCases[] = {
    {"row-major", {.m = kM, .n = kN, .k = kK, .a_rs = kK, .a_cs = 1, .b_rs = kN, .b_cs = 1}},
    {"transposed-lhs", {.m = kM, .n = kN, .k = kK, .a_rs = 1, .a_cs = kM, .b_rs = kN, .b_cs = 1}},
    {"transposed-rhs", {.m = kM, .n = kN, .k = kK, .a_rs = kK, .a_cs = 1, .b_rs = 1, .b_cs = kK}},
    {"batched", {.m = kM, .n = kN, .k = kK, .a_rs = kK, .a_cs = 1, .b_rs = kN, .b_cs = 1, .batches = 3, .a_bs = kM * kK, .b_bs = kK * kN}},
    {"batched-broadcast-rhs", {.m = kM, .n = kN, .k = kK, .a_rs = 1, .a_cs = kM, .b_rs = kN, .b_cs = 1, .batches = 4, .a_bs = kM * kK, .b_bs = 0}},
};

// Runs `c` with elements of `dt` (inputs rounded to it) and checks against naive_gemm on the
// rounded inputs within `tolerance` of Σ|a·b|.
void check_gemm(cuda::Device& d, const GemmCase& c, DType dt, double tolerance) {
  cuda::Gemm g = c.g;
  g.dtype = dt;
  Operand a = operand(g.batches, g.a_bs, g.m, g.a_rs, g.k, g.a_cs, 11), b = operand(g.batches, g.b_bs, g.k, g.b_rs, g.n, g.b_cs, 12);
  Buffers buf(d);
  DevicePtr pa, pb, pc = buf.make(static_cast<size_t>(g.batches * g.m * g.n) * dtype_size(dt));
  std::vector<double> want, scale;
  if (dt == DType::F32) {
    pa = buf.of(a.data), pb = buf.of(b.data);
  } else {
    auto round = [dt](std::vector<float>& v) {
      std::vector<uint16_t> bits;
      for (float& x : v) {
        bits.push_back(dt == DType::F16 ? float_to_half(x) : float_to_bf16(x));
        x = dt == DType::F16 ? half_to_float(bits.back()) : bf16_to_float(bits.back());
      }
      return bits;
    };
    pa = buf.of(round(a.data)), pb = buf.of(round(b.data));
  }
  pa += static_cast<uint64_t>(a.origin) * dtype_size(dt), pb += static_cast<uint64_t>(b.origin) * dtype_size(dt);
  naive_gemm(g, a, b, want, scale);
  d.gemm(g, pa, pb, pc, 0, 0);
  std::vector<float> got(want.size());
  if (dt == DType::F32) {
    got = download<float>(d, pc, want.size());
  } else {
    std::vector<uint16_t> bits = download<uint16_t>(d, pc, want.size());
    for (size_t i = 0; i < bits.size(); ++i) got[i] = dt == DType::F16 ? half_to_float(bits[i]) : bf16_to_float(bits[i]);
  }
  size_t bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i)
    if (!(std::fabs(got[i] - want[i]) <= tolerance * scale[i])) {
      ++bad;
      ADD_FAILURE() << c.name << " " << dtype_name(dt) << " element " << i << ": " << got[i] << ", want " << want[i];
    }
}

TEST_P(CudaDeviceConformance, GemmF32MatchesNaiveLoop) {
  for (const GemmCase& c : kGemmCases) check_gemm(dev(), c, DType::F32, 1e-4);
}

TEST_P(CudaDeviceConformance, GemmHalfAndBf16MatchNaiveLoopOnRoundedInputs) {
  for (const GemmCase& c : kGemmCases)
    for (DType dt : {DType::F16, DType::BF16}) check_gemm(dev(), c, dt, 1e-2);
}

// Strides a GPU library may refuse (negative, zero within a matrix): the emulated device only.
TEST_P(CudaDeviceConformance, EmulatedGemmTakesAnyStrides) {
  if (!emulated()) GTEST_SKIP() << "negative and zero strides are emulated-only";
  check_gemm(dev(), {"reversed-rows", {.m = kM, .n = kN, .k = kK, .a_rs = -kK, .a_cs = 1, .b_rs = kN, .b_cs = -1}}, DType::F32, 1e-4);
  check_gemm(dev(), {"repeated-column", {.m = kM, .n = kN, .k = kK, .a_rs = kK, .a_cs = 1, .b_rs = 1, .b_cs = 0}}, DType::BF16, 1e-2);
}

// ---- capture ---------------------------------------------------------------------------------------

// y = 2·x (axpy on a zeroed y), c = y · b: recorded once, replayed for two different x.
TEST_P(CudaDeviceConformance, CaptureReplaysOnNewInputs) {
  auto m = dev().load(kHandKernels, {"axpy"}, "");
  Buffers buf(dev());
  const int64_t rows = 8, k = 16, n = 4;
  std::vector<float> b = random_floats(k * n, 21);
  DevicePtr px = buf.make(rows * k * sizeof(float)), py = buf.make(rows * k * sizeof(float)), pb = buf.of(b),
            pc = buf.make(rows * n * sizeof(float));
  dev().fill(pc, 0, rows * n * sizeof(float));
  const cuda::Gemm g{.m = rows, .n = n, .k = k, .a_rs = k, .a_cs = 1, .b_rs = n, .b_cs = 1};
  auto work = [&] {
    dev().fill(py, 0, rows * k * sizeof(float));
    launch(*m, 0, 1, rows * k, {px, py, f32_arg(2), static_cast<uint64_t>(rows * k)});
    dev().gemm(g, py, pb, pc, 0, 0);
  };
  auto expect_product_of = [&](const std::vector<float>& x, const char* when) {
    std::vector<float> c = download<float>(dev(), pc, rows * n);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0, scale = 0;
        for (int64_t p = 0; p < k; ++p) want += 2.0 * x[r * k + p] * b[p * n + j], scale += std::fabs(2.0 * x[r * k + p] * b[p * n + j]);
        ASSERT_NEAR(c[r * n + j], want, 1e-4 * scale) << when << ": c[" << r << "][" << j << "]";
      }
  };
  std::vector<float> x1 = random_floats(rows * k, 22), x2 = random_floats(rows * k, 23);
  dev().upload(px, x1.data(), x1.size() * sizeof(float));
  std::unique_ptr<cuda::Capture> cap = dev().capture(work);
  if (!cap) {
    ASSERT_FALSE(emulated()) << "the emulated device captures";
    expect_product_of(x1, "run instead of recorded");
    GTEST_SKIP() << "this device does not capture";
  }
  dev().synchronize();
  EXPECT_EQ(download<float>(dev(), pc, rows * n), std::vector<float>(rows * n, 0.0f)) << "recording ran the work";
  cap->replay();
  dev().synchronize();
  expect_product_of(x1, "first replay");
  dev().upload(px, x2.data(), x2.size() * sizeof(float));
  cap->replay();
  dev().synchronize();
  expect_product_of(x2, "replay after the upload");
}

// ---- the emulated device only ----------------------------------------------------------------------

// A GPU in an error state fails every call, releases too: the allocator's destructor gives its
// cached blocks back as it can and does not throw (which would stop the process).
TEST(CudaAllocator, ADeviceThatFailsToReleaseDoesNotStopTheProcess) {
  std::shared_ptr<EmulatedDevice> e = testing_support::emulated_device();
  auto a = std::make_shared<cuda::Allocator>(e);
  DevicePtr p = 0;
  {
    cuda::Buffer b(a, 1000);
    p = b.ptr();
  }  // cached by the allocator
  e->release(p);  // gone from the device: the allocator's release of it fails
  EXPECT_THROW(e->release(p), SheafError);
  EXPECT_NO_THROW(a.reset());
}

TEST_P(CudaDeviceConformance, EmulatedCountsAndChecks) {
  EmulatedDevice* e = emulated();
  if (!e) GTEST_SKIP() << "counters and range checks are the emulated device's";
  EXPECT_EQ(e->describe(), "emulated GPU (sm_90)");
  EXPECT_EQ(e->arch(), "sm_90");
  DevicePtr p = e->allocate(100), q = e->allocate(300);
  EXPECT_EQ(download<uint8_t>(*e, p, 100), std::vector<uint8_t>(100, 0xff)) << "fresh memory is 0xff bytes";
  EXPECT_EQ(e->counters.allocations, 2u);
  EXPECT_EQ(e->counters.live_bytes, 400u);
  std::vector<uint8_t> host(100, 7);
  e->upload(p, host.data(), 100);
  e->upload(q + 200, host.data(), 100);
  e->copy(q, p, 50);
  e->fill(p, 0, 10);
  EXPECT_EQ(e->counters.uploads, 2u);
  EXPECT_EQ(e->counters.upload_bytes, 200u);
  EXPECT_EQ(e->counters.downloads, 1u);
  EXPECT_EQ(e->counters.download_bytes, 100u);
  EXPECT_EQ(e->counters.copies, 1u);
  EXPECT_EQ(e->counters.fills, 1u);

  EXPECT_THROW(e->upload(p + 1, host.data(), 100), SheafError) << "past the end of an allocation";
  EXPECT_THROW(e->copy(q + 290, p, 20), SheafError);
  EXPECT_THROW(e->download(host.data(), p - 16, 20), SheafError) << "before an allocation";
  EXPECT_THROW(e->gemm({.m = 10, .n = 10, .k = 10, .a_rs = 10, .a_cs = 1, .b_rs = 10, .b_cs = 1}, p, q, q, 0, 0), SheafError)
      << "a 10×10 f32 lhs does not fit in 100 bytes";
  try {
    e->release(p + 8);
    ADD_FAILURE() << "released an unknown pointer";
  } catch (const SheafError& err) {
    EXPECT_EQ(std::string(err.what()).rfind("internal: ", 0), 0u) << err.what();
  }

  auto m = e->load(kHandKernels, {"axpy", "row_sum"}, "");
  std::vector<float> x = random_floats(25, 31);
  DevicePtr px = e->allocate(100), py = e->allocate(100), pc = e->allocate(400);
  e->upload(px, x.data(), 100);
  e->fill(py, 0, 100);
  const cuda::Gemm g{.m = 5, .n = 5, .k = 5, .a_rs = 5, .a_cs = 1, .b_rs = 5, .b_cs = 1, .batches = 4, .b_bs = 0};
  auto cap = e->capture([&] {
    launch(*m, 0, 1, 32, {px, py, f32_arg(1), 25});
    e->gemm(g, px, py, pc, 0, 0);
    EXPECT_THROW(e->upload(px, x.data(), 100), SheafError) << "upload while capturing";
    EXPECT_THROW(e->download(x.data(), px, 100), SheafError) << "download while capturing";
  });
  ASSERT_TRUE(cap);
  EXPECT_EQ(download<uint8_t>(*e, pc, 400), std::vector<uint8_t>(400, 0xff)) << "recording ran the product";
  cap->replay();
  cap->replay();
  EXPECT_EQ(e->counters.launches, 1u);
  EXPECT_EQ(e->counters.gemms, 1u);
  EXPECT_EQ(e->counters.captures, 1u);
  EXPECT_EQ(e->counters.replays, 2u);
  std::vector<float> c = download<float>(*e, pc, 100);  // y = 2x after two replays: each batch of c is X·2X
  for (int64_t i = 0; i < 100; ++i) {
    const int64_t r = i % 25 / 5, col = i % 5;
    double want = 0;
    for (int64_t p2 = 0; p2 < 5; ++p2) want += x[r * 5 + p2] * 2.0 * x[p2 * 5 + col];
    EXPECT_NEAR(c[i], want, 1e-4 * (1 + std::fabs(want))) << "c[" << i << "]";
  }

  for (DevicePtr d : {p, q, px, py, pc}) e->release(d);
  EXPECT_EQ(e->counters.releases, 5u);
  EXPECT_EQ(e->counters.live_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(, CudaDeviceConformance, ::testing::Values("emulated", "gpu"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace sheaf
