// tests/unit/cuda_test.cpp — the CUDA backend's loading and kernel compilation, which need no GPU:
// the driver is absent here and must be reported as such (or, on a GPU machine, describe
// device 0); NVRTC (from the CUDA toolkit, when installed) compiles CUDA C++ to PTX and to a cubin
// for an H100/H200 (sm_90) and reports compile errors with its log. Skips with a message where
// NVRTC is not installed.
// The real device (driver_device.cpp) without a GPU: gpu() is null and says why; cuBLASLt loads
// with every entry point (skipped where it is not installed); Gemms become cuBLASLt plans that a
// column-major interpreter of the plan (what cuBLASLt computes) agrees with, and operands without
// a unit stride are left to the fallback kernel, whose source compiles for sm_90; the kernel
// cache's names and files round-trip, damaged files are rejected, and only files this user signed
// (in folders no one else may write; no FIFOs, no links) load; NCCL loads with every entry
// point (skipped where it is not installed), its version codes and dtypes are read as nccl.h says;
// the local rank comes from the launchers' variables and picks the rank's GPU.
// On a GPU machine CudaGpu.* also run memory, kernels, the cache, products of every layout and
// dtype (cuBLASLt and the fallback kernel), capture and the all-reduce of a job of one on the
// process's GPU; they skip without one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/device.hpp"
#include "backend/cuda/driver.hpp"
#include "backend/cuda/driver_device.hpp"
#include "backend/cuda/nccl.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/error.hpp"
#include "io/artifact_trust.hpp"
#include "dist/comm.hpp"
#include "temp_dir.hpp"

namespace sheaf::cuda {
namespace {

constexpr const char* kScale = R"(
extern "C" __global__ void scale(const float* __restrict__ x, float* __restrict__ y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
})";

TEST(CudaDriver, ReportsNoGpuOrDescribesDevice0) {
  std::string why;
  if (!driver(&why)) {
    EXPECT_NE(why.find("no GPU was found"), std::string::npos) << why;
    EXPECT_FALSE(device_info());
    return;
  }
  std::optional<DeviceInfo> info = device_info(&why);
  ASSERT_TRUE(info) << why;
  EXPECT_GE(info->major, 5);
  EXPECT_GT(info->multiprocessors, 0);
  EXPECT_GT(info->memory, size_t{1} << 30);
  EXPECT_FALSE(info->name.empty());
}

TEST(Nvrtc, CompilesPtxAndCubinForSm90) {
  std::string why;
  if (!nvrtc(&why)) GTEST_SKIP() << why;
  EXPECT_EQ(nvrtc_version().rfind("NVRTC ", 0), 0u) << nvrtc_version();
  CompiledKernels ptx = compile_cuda(kScale, "scale.cu", 9, 0, false);
  EXPECT_NE(ptx.ptx.find(".target sm_90"), std::string::npos) << ptx.ptx.substr(0, 400);
  EXPECT_NE(ptx.ptx.find(".entry scale("), std::string::npos);
  CompiledKernels bin = compile_cuda(kScale, "scale.cu", 9, 0, true);
  ASSERT_GE(bin.cubin.size(), 4u);
  EXPECT_EQ(bin.cubin.substr(0, 4), "\x7f" "ELF");
}

TEST(Nvrtc, ReportsCompileErrorsWithTheLog) {
  std::string why;
  if (!nvrtc(&why)) GTEST_SKIP() << why;
  try {
    compile_cuda("extern \"C\" __global__ void f() { undefined_thing = 1; }", "broken.cu", 9, 0, false);
    FAIL() << "expected a compile error";
  } catch (const SheafError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken.cu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("undefined_thing"), std::string::npos) << msg;
  }
}

// ---------------------------------------------------------------- the real device, without a GPU

TEST(CudaDevice, GpuIsNullWithTheReasonWithoutAGpu) {
  std::string why;
  if (driver()) {
    std::shared_ptr<Device> dev = gpu(&why);
    ASSERT_TRUE(dev) << why;
    EXPECT_NE(dev->describe().find(dev->arch()), std::string::npos) << dev->describe();
    EXPECT_EQ(gpu(), dev);  // one per process
    return;
  }
  EXPECT_FALSE(gpu(&why));
  EXPECT_EQ(why.rfind("no GPU was found", 0), 0u) << why;
  std::string again;
  EXPECT_FALSE(gpu(&again));
  EXPECT_EQ(again, why);
}

TEST(CudaDevice, DescribesSizesAndTheDevice) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(size_t{32} << 20), "32.0 MiB");
  EXPECT_EQ(format_bytes(size_t{3} << 29), "1.5 GiB");
  DeviceInfo info;
  info.name = "NVIDIA H100 80GB HBM3";
  info.major = 9;
  info.minor = 0;
  info.multiprocessors = 132;
  info.memory = static_cast<size_t>(79.1 * double(size_t{1} << 30));
  EXPECT_EQ(arch_name(info), "sm_90");
  EXPECT_EQ(describe_device(info), "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)");
}

TEST(Cublas, LoadsWithEveryEntryPoint) {
  std::string why;
  const CublasLt* lt = cublaslt(&why);
  if (!lt) {
    if (why.rfind("cuBLASLt was not found", 0) == 0) GTEST_SKIP() << why;
    FAIL() << why;  // found but unusable
  }
  const void* fns[] = {
      reinterpret_cast<const void*>(lt->cublasLtCreate),
      reinterpret_cast<const void*>(lt->cublasLtDestroy),
      reinterpret_cast<const void*>(lt->cublasLtGetVersion),
      reinterpret_cast<const void*>(lt->cublasLtMatmulDescCreate),
      reinterpret_cast<const void*>(lt->cublasLtMatmulDescDestroy),
      reinterpret_cast<const void*>(lt->cublasLtMatmulDescSetAttribute),
      reinterpret_cast<const void*>(lt->cublasLtMatrixLayoutCreate),
      reinterpret_cast<const void*>(lt->cublasLtMatrixLayoutDestroy),
      reinterpret_cast<const void*>(lt->cublasLtMatrixLayoutSetAttribute),
      reinterpret_cast<const void*>(lt->cublasLtMatmulPreferenceCreate),
      reinterpret_cast<const void*>(lt->cublasLtMatmulPreferenceDestroy),
      reinterpret_cast<const void*>(lt->cublasLtMatmulPreferenceSetAttribute),
      reinterpret_cast<const void*>(lt->cublasLtMatmulAlgoGetHeuristic),
      reinterpret_cast<const void*>(lt->cublasLtMatmul),
  };
  static_assert(sizeof fns == sizeof(CublasLt), "every entry point is listed");
  for (const void* f : fns) EXPECT_NE(f, nullptr);
  EXPECT_GE(lt->cublasLtGetVersion(), 110000u);  // 130000 and up for CUDA 13
  EXPECT_EQ(cublas_status_name(15), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_EQ(cublas_status_name(13), "CUBLAS_STATUS_EXECUTION_FAILED");
  EXPECT_EQ(cublas_status_name(99), "unknown status");
}

// A row-major contiguous m×k · k×n Gemm.
Gemm row_major(int64_t m, int64_t n, int64_t k) {
  Gemm g;
  g.m = m, g.n = n, g.k = k;
  g.a_rs = k, g.a_cs = 1, g.b_rs = n, g.b_cs = 1;
  return g;
}

void expect_operand(const LtOperand& o, bool transpose, int64_t rows, int64_t cols, int64_t ld, int64_t bs) {
  EXPECT_EQ(o.transpose, transpose);
  EXPECT_EQ(o.rows, rows);
  EXPECT_EQ(o.cols, cols);
  EXPECT_EQ(o.ld, ld);
  EXPECT_EQ(o.batch_stride, bs);
}

TEST(Cublas, PlansRowMajorTransposedBatchedAndSize1Gemms) {
  // c (4×5) = a (4×3) · b (3×5): cᵀ (5×4) = bᵀ · aᵀ, both read as stored (op N).
  std::optional<LtPlan> p = plan_lt_gemm(row_major(4, 5, 3));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->m, 5);
  EXPECT_EQ(p->n, 4);
  EXPECT_EQ(p->k, 3);
  EXPECT_EQ(p->batches, 1);
  expect_operand(p->a, false, 5, 3, 5, 0);  // b read column-major: bᵀ, 5 × 3, ld 5
  expect_operand(p->b, false, 3, 4, 3, 0);  // a read column-major: aᵀ, 3 × 4, ld 3
  expect_operand(p->d, false, 5, 4, 5, 0);

  // Padded rows: the row stride is the ld.
  Gemm g = row_major(4, 5, 3);
  g.a_rs = 8, g.b_rs = 7;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->a, false, 5, 3, 7, 0);
  expect_operand(p->b, false, 3, 4, 8, 0);

  // b a transposed view (of a 5×3 row-major matrix): stored column-major, op T.
  g = row_major(4, 5, 3);
  g.b_rs = 1, g.b_cs = 3;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->a, true, 3, 5, 3, 0);
  // a transposed (a view of a 3×4 matrix).
  g = row_major(4, 5, 3);
  g.a_rs = 1, g.a_cs = 4;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->b, true, 4, 3, 4, 0);

  // Batched, b shared by every batch (batch stride 0).
  g = row_major(4, 5, 3);
  g.batches = 6, g.a_bs = 12, g.b_bs = 0;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->batches, 6);
  EXPECT_EQ(p->a.batch_stride, 0);
  EXPECT_EQ(p->b.batch_stride, 12);
  EXPECT_EQ(p->d.batch_stride, 20);
  // One batch: its strides are irrelevant (even negative ones).
  g.batches = 1, g.a_bs = -5;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->b.batch_stride, 0);

  // Dimensions of extent 1 take any stride: a row vector with a junk row stride, a column of b
  // with a junk column stride, and k = 1 with junk strides along k.
  g = row_major(1, 5, 3);
  g.a_rs = 0;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->b, false, 3, 1, 3, 0);
  g = row_major(4, 1, 3);
  g.b_rs = 1, g.b_cs = 1000;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->a, false, 1, 3, 1, 0);
  g = row_major(4, 5, 1);
  g.a_rs = 1, g.a_cs = 77, g.b_rs = 0, g.b_cs = 1;
  p = plan_lt_gemm(g);
  ASSERT_TRUE(p);
  expect_operand(p->b, false, 1, 4, 1, 0);  // a column of 4: read as a 1 × 4 row with ld 1
  expect_operand(p->a, false, 5, 1, 5, 0);
}

TEST(Cublas, LeavesOperandsWithoutAUnitStrideToTheFallback) {
  Gemm g = row_major(4, 5, 3);
  g.a_rs = 6, g.a_cs = 2;  // every other column of every other row
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.b_rs = 2, g.b_cs = 6;
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.a_rs = 0;  // one row broadcast to 4: rows overlap, no valid ld
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.b_rs = 1, g.b_cs = 2;  // column-major with columns overlapping (ld 2 < 3 rows)
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.a_cs = -1, g.a_rs = 3;
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.batches = 2, g.a_bs = -12;
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(int64_t{1} << 31, 5, 3);  // beyond cuBLASLt's 32-bit extents
  EXPECT_FALSE(plan_lt_gemm(g));
  g = row_major(4, 5, 3);
  g.a_rs = int64_t{1} << 32;
  EXPECT_FALSE(plan_lt_gemm(g));
  EXPECT_FALSE(plan_lt_gemm(row_major(4, 5, 0)));  // empty products are the caller's
  EXPECT_FALSE(plan_lt_gemm(row_major(0, 5, 3)));
}

// What cuBLASLt computes for plan `p` (column-major, op per operand) on the flat buffers of the
// Gemm's a and b (cuBLASLt's A is b, its B is a): c, checking that every stored index the plan
// reads is inside its matrix and its buffer.
std::vector<double> run_plan(const LtPlan& p, const std::vector<double>& a, const std::vector<double>& b) {
  auto at = [](const LtOperand& o, const std::vector<double>& buf, int64_t batch, int64_t i, int64_t j) {
    if (o.transpose) std::swap(i, j);
    EXPECT_TRUE(i >= 0 && i < o.rows && j >= 0 && j < o.cols);
    EXPECT_GE(o.ld, o.rows);
    int64_t idx = batch * o.batch_stride + i + j * o.ld;
    EXPECT_TRUE(idx >= 0 && idx < int64_t(buf.size())) << idx;
    return idx >= 0 && idx < int64_t(buf.size()) ? buf[idx] : NAN;
  };
  EXPECT_EQ(p.a.transpose ? p.a.cols : p.a.rows, p.m);
  EXPECT_EQ(p.a.transpose ? p.a.rows : p.a.cols, p.k);
  EXPECT_EQ(p.b.transpose ? p.b.cols : p.b.rows, p.k);
  EXPECT_EQ(p.b.transpose ? p.b.rows : p.b.cols, p.n);
  EXPECT_FALSE(p.d.transpose);
  EXPECT_EQ(p.d.rows, p.m);
  EXPECT_EQ(p.d.cols, p.n);
  std::vector<double> d(p.batches * p.m * p.n, NAN);
  for (int64_t t = 0; t < p.batches; ++t)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < p.k; ++q) s += at(p.a, b, t, i, q) * at(p.b, a, t, q, j);
        d.at(t * p.d.batch_stride + i + j * p.d.ld) = s;
      }
  return d;
}

std::vector<double> reference_gemm(const Gemm& g, const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c(g.batches * g.m * g.n);
  for (int64_t t = 0; t < g.batches; ++t)
    for (int64_t r = 0; r < g.m; ++r)
      for (int64_t col = 0; col < g.n; ++col) {
        double s = 0;
        for (int64_t q = 0; q < g.k; ++q)
          s += a.at(t * g.a_bs + r * g.a_rs + q * g.a_cs) * b.at(t * g.b_bs + q * g.b_rs + col * g.b_cs);
        c[(t * g.m + r) * g.n + col] = s;
      }
  return c;
}

// Strides of an R×C operand with a unit stride somewhere: row- or column-major, padded or not;
// a dimension of extent 1 gets a random stride.
void random_strides(std::mt19937& rng, int64_t R, int64_t C, int64_t& rs, int64_t& cs) {
  const int64_t pad = rng() % 3 == 0 ? int64_t(rng() % 4) : 0;
  if (rng() % 2) rs = C + pad, cs = 1;
  else rs = 1, cs = R + pad;
  if (R == 1 && rng() % 2) rs = int64_t(rng() % 9);
  if (C == 1 && rng() % 2) cs = int64_t(rng() % 9);
}

int64_t extent(int64_t batches, int64_t bs, int64_t R, int64_t rs, int64_t C, int64_t cs) {
  return (batches - 1) * bs + (R - 1) * rs + (C - 1) * cs + 1;
}

TEST(Cublas, PlansComputeTheGemmsTheyStandFor) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 3000; ++iter) {
    Gemm g;
    g.m = 1 + rng() % 5, g.n = 1 + rng() % 5, g.k = 1 + rng() % 5, g.batches = 1 + rng() % 3;
    random_strides(rng, g.m, g.k, g.a_rs, g.a_cs);
    random_strides(rng, g.k, g.n, g.b_rs, g.b_cs);
    const int64_t a_size = extent(1, 0, g.m, g.a_rs, g.k, g.a_cs), b_size = extent(1, 0, g.k, g.b_rs, g.n, g.b_cs);
    g.a_bs = rng() % 4 == 0 ? 0 : a_size + int64_t(rng() % 3);
    g.b_bs = rng() % 4 == 0 ? 0 : b_size + int64_t(rng() % 3);
    std::vector<double> a(extent(g.batches, g.a_bs, g.m, g.a_rs, g.k, g.a_cs) + 2);
    std::vector<double> b(extent(g.batches, g.b_bs, g.k, g.b_rs, g.n, g.b_cs) + 2);
    for (double& x : a) x = int(rng() % 7) - 3;
    for (double& x : b) x = int(rng() % 7) - 3;
    std::optional<LtPlan> p = plan_lt_gemm(g);
    std::string what = fmt::format("m {} n {} k {} a {}/{} b {}/{} batches {} ({} {})", g.m, g.n, g.k, g.a_rs, g.a_cs,
                                    g.b_rs, g.b_cs, g.batches, g.a_bs, g.b_bs);
    ASSERT_TRUE(p) << what;
    ASSERT_EQ(run_plan(*p, a, b), reference_gemm(g, a, b)) << what;
  }
}

TEST(Cublas, OperandAlignmentIsTheLargestCommonPowerOfTwo) {
  EXPECT_EQ(operand_alignment(0x7f0000001000, 0, 1, 4), 256u);
  EXPECT_EQ(operand_alignment(0x7f0000001004, 0, 1, 4), 4u);
  EXPECT_EQ(operand_alignment(0x7f0000001002, 0, 1, 2), 2u);
  EXPECT_EQ(operand_alignment(0x7f0000001000, 6, 2, 2), 4u);   // batch i at +12·i bytes
  EXPECT_EQ(operand_alignment(0x7f0000001000, 6, 1, 2), 256u);  // one batch: its stride is unused
  EXPECT_EQ(operand_alignment(0x7f0000001040, 0, 3, 4), 64u);
}

TEST(Cublas, FallbackKernelsCompileForSm90) {
  std::string why;
  if (!nvrtc(&why)) GTEST_SKIP() << why;
  CompiledKernels ptx = compile_cuda(fallback_gemm_source(), "fallback_gemm.cu", 9, 0, false);
  for (FallbackKernel k : {FallbackKernel::Gemm, FallbackKernel::AddRow, FallbackKernel::SumRows})
    for (DType t : {DType::F32, DType::F16, DType::BF16})
      EXPECT_NE(ptx.ptx.find(fmt::format(".entry {}(", fallback_gemm_kernel(t, k))), std::string::npos)
          << fallback_gemm_kernel(t, k) << "\n"
          << ptx.ptx.substr(0, 2000);
  CompiledKernels bin = compile_cuda(fallback_gemm_source(), "fallback_gemm.cu", 9, 0, true);
  EXPECT_EQ(bin.cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_THROW(fallback_gemm_kernel(DType::I32), SheafError);
  EXPECT_EQ(fallback_gemm_source().find("#include"), std::string::npos);
}

// ---------------------------------------------------------------- the kernel cache

TEST(CudaCache, NamesFilesByHashOfSourceArchAndNvrtcWithItsOptions) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  std::string name = cubin_cache_name("source", "sm_90", "NVRTC 13.0");
  EXPECT_TRUE(std::regex_match(name, std::regex("cuda-[0-9a-f]{16}\\.sm_90\\.cubin"))) << name;
  EXPECT_EQ(name, cubin_cache_name("source", "sm_90", "NVRTC 13.0"));
  EXPECT_NE(name, cubin_cache_name("source ", "sm_90", "NVRTC 13.0"));
  EXPECT_NE(name, cubin_cache_name("source", "sm_90", "NVRTC 13.1"));
  // the compiler's options are part of its name: a cubin built with others is another file
  EXPECT_NE(name, cubin_cache_name("source", "sm_90", "NVRTC 13.0 --fmad=false"));
  // by default, the NVRTC at hand with the options compile_cuda passes
  EXPECT_EQ(nvrtc_compiler().rfind(nvrtc_version() + " ", 0), 0u) << nvrtc_compiler();
  EXPECT_NE(nvrtc_compiler().find("--fmad=true"), std::string::npos) << nvrtc_compiler();
  EXPECT_EQ(cubin_cache_name("source", "sm_90"), cubin_cache_name("source", "sm_90", nvrtc_compiler()));
  EXPECT_NE(cubin_cache_name("source", "sm_90"), cubin_cache_name("source", "sm_90", nvrtc_version()));
  EXPECT_NE(cubin_cache_name("source", "sm_80", "NVRTC 13.0").substr(0, 21), name.substr(0, 21));
  // The parts are delimited: moving a character from one to the next changes the hash.
  EXPECT_NE(cubin_cache_name("ab", "c", "v").substr(0, 21), cubin_cache_name("a", "bc", "v").substr(0, 21));
}

TEST(CudaCache, FilesRoundTripAndDamagedOnesAreRejected) {
  const std::string cubin = std::string("\x7f" "ELF\0\1\2", 7) + std::string(300, '\xab');
  const std::string mac(64, 'c');
  const std::string file = pack_cubin(cubin, mac);
  ASSERT_EQ(file.size(), kCubinHeaderBytes + cubin.size());
  EXPECT_EQ(file.substr(0, 11), "SHEAFCUBIN2");
  std::string why;
  std::optional<CubinFile> back = unpack_cubin(file, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->cubin, cubin);
  EXPECT_EQ(back->mac, mac);

  EXPECT_FALSE(unpack_cubin(file.substr(0, file.size() - 1), &why));
  EXPECT_NE(why.find("truncated: 306 of 307"), std::string::npos) << why;
  EXPECT_FALSE(unpack_cubin(file + "x", &why));
  EXPECT_NE(why.find("past"), std::string::npos) << why;
  std::string magic = file;
  magic[3] = 'X';
  EXPECT_FALSE(unpack_cubin(magic, &why));
  EXPECT_NE(why.find("not a Sheaf cubin"), std::string::npos) << why;
  std::string old_format = file;
  old_format[10] = '1';  // SHEAFCUBIN1: an unkeyed checksum, never loaded
  EXPECT_FALSE(unpack_cubin(old_format, &why));
  EXPECT_FALSE(unpack_cubin(file.substr(0, 20), &why));
  EXPECT_NE(why.find("not a Sheaf cubin"), std::string::npos) << why;
  EXPECT_FALSE(unpack_cubin(pack_cubin("", mac), &why));
}

// A fresh cache folder of mode 0700, removed with the test.
struct CacheDir : testing_support::TempDir {
  CacheDir() : TempDir("sheaf-cuda-cache") {}
};

void put_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CudaCache, WritesAtomicallyAndReadsBack) {
  namespace fs = std::filesystem;
  CacheDir dir;
  const std::string path = (dir.path / "sub" / cubin_cache_name("k", "sm_90", "NVRTC 13.0")).string();
  std::string why = "stale";
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_EQ(why, "");  // absent, not damaged
  const std::string cubin(1000, '\x42');
  ASSERT_TRUE(write_cached_cubin(path, cubin));
  std::optional<std::string> back = read_cached_cubin(path, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, cubin);
  ASSERT_TRUE(write_cached_cubin(path, cubin + "!"));  // replaces
  back = read_cached_cubin(path, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, cubin + "!");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "sub")) {
    ++files;
    EXPECT_EQ(e.path().string(), path);  // no temporary left behind
  }
  EXPECT_EQ(files, 1);
  put_file(path, pack_cubin(cubin, trust::sign(cubin)).substr(0, 500));  // a torn write
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_NE(why.find("truncated"), std::string::npos) << why;
  // A directory that cannot be made (a file is in the way): only the cache is lost.
  EXPECT_FALSE(write_cached_cubin((dir.path / "sub" / fs::path(path).filename() / "x.cubin").string(), cubin));
}

// SPEC §7.9: a cubin loads only when this user's key signed its exact bytes and it is a regular
// file in a folder of this user that no one else may write; `sheaf trust` re-signs a copied one.
TEST(CudaCache, LoadsOnlyWhatThisUserSigned) {
  namespace fs = std::filesystem;
  CacheDir dir;
  const std::string path = (dir.path / cubin_cache_name("k", "sm_90", "NVRTC 13.0")).string();
  const std::string cubin(400, '\x17');
  std::string why;
  // Planted with an unkeyed or foreign MAC (another user's key): refused, until trusted.
  put_file(path, pack_cubin(cubin, trust::hmac_sha256_hex(std::string(32, 'k'), cubin)));
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_NE(why.find("not signed with this user's key"), std::string::npos) << why;
  std::optional<size_t> size = resign_cached_cubin(path, &why);
  ASSERT_TRUE(size) << why;
  EXPECT_EQ(*size, cubin.size());
  std::optional<std::string> back = read_cached_cubin(path, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(*back, cubin);
  // Same size, other bytes: the MAC no longer matches.
  std::string file = pack_cubin(cubin, trust::sign(cubin));
  file[kCubinHeaderBytes + 7] ^= 1;
  put_file(path, file);
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_NE(why.find("not signed with this user's key"), std::string::npos) << why;
  ASSERT_TRUE(write_cached_cubin(path, cubin));
  // A file others may write, a folder others may write (nothing is written there either).
  fs::permissions(path, fs::perms::others_write, fs::perm_options::add);
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_NE(why.find("it is writable by group or others"), std::string::npos) << why;
  fs::permissions(path, fs::perms::others_write, fs::perm_options::remove);
  fs::permissions(dir.path, fs::perms::all);
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_NE(why.find("its folder is writable by group or others (mode 0777)"), std::string::npos) << why;
  const std::string other = (dir.path / cubin_cache_name("other", "sm_90", "NVRTC 13.0")).string();
  EXPECT_FALSE(write_cached_cubin(other, cubin));
  EXPECT_FALSE(fs::exists(other));
  fs::permissions(dir.path, fs::perms::owner_all);
  // A FIFO is refused without blocking on it; a symbolic link is not followed.
  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_EQ(why, "it is a FIFO");
  EXPECT_FALSE(resign_cached_cubin(path, &why));
  fs::remove(path);
  ASSERT_TRUE(write_cached_cubin(other, cubin));
  fs::create_symlink(other, path);
  EXPECT_FALSE(read_cached_cubin(path, &why));
  EXPECT_EQ(why, "it is a symbolic link");
}

// ---------------------------------------------------------------- NCCL and the rank's GPU

TEST(Nccl, LoadsWithEveryEntryPoint) {
  std::string why;
  const Nccl* n = nccl(&why);
  if (!n) {
    if (why.rfind("NCCL was not found", 0) == 0) GTEST_SKIP() << why;
    FAIL() << why;  // found but unusable
  }
  const void* fns[] = {
      reinterpret_cast<const void*>(n->ncclGetVersion),   reinterpret_cast<const void*>(n->ncclGetUniqueId),
      reinterpret_cast<const void*>(n->ncclCommInitRank), reinterpret_cast<const void*>(n->ncclAllReduce),
      reinterpret_cast<const void*>(n->ncclCommDestroy),  reinterpret_cast<const void*>(n->ncclCommAbort),
      reinterpret_cast<const void*>(n->ncclGetErrorString),
  };
  static_assert(sizeof fns == sizeof(Nccl), "every entry point is listed");
  for (const void* f : fns) EXPECT_NE(f, nullptr);
  const std::string version = nccl_version();
  EXPECT_EQ(version.rfind("NCCL 2.", 0), 0u) << version;
  std::printf("%s\n", version.c_str());
  EXPECT_EQ(nccl_error(*n, 4), std::string(n->ncclGetErrorString(4)) + " (4)");  // ncclInvalidArgument
  EXPECT_NE(nccl_error(*n, 4).find("invalid"), std::string::npos) << nccl_error(*n, 4);
}

TEST(Nccl, VersionCodesAndElementTypes) {
  EXPECT_EQ(nccl_version_name(22809), "NCCL 2.28.9");  // 2.9 and later: major·10000 + minor·100 + patch
  EXPECT_EQ(nccl_version_name(21003), "NCCL 2.10.3");
  EXPECT_EQ(nccl_version_name(2708), "NCCL 2.7.8");  // before 2.9: major·1000 + minor·100 + patch
  EXPECT_EQ(nccl_type(DType::F32), std::optional<ncclDataType_t>(7));  // ncclFloat32
  EXPECT_EQ(nccl_type(DType::I32), std::optional<ncclDataType_t>(2));  // ncclInt32
  EXPECT_EQ(nccl_type(DType::U32), std::optional<ncclDataType_t>(3));  // ncclUint32
  for (DType t : {DType::F16, DType::BF16, DType::Bool}) EXPECT_FALSE(nccl_type(t)) << dtype_name(t);
}

TEST(CudaGpuChoice, OneGpuPerLocalRank) {
  for (int r = 0; r < 8; ++r) EXPECT_EQ(gpu_ordinal(r, 8), r);  // mpirun -np 8 on an 8-GPU node
  EXPECT_EQ(gpu_ordinal(9, 8), 1);                               // more ranks than GPUs: shared
  for (int r = 0; r < 4; ++r) EXPECT_EQ(gpu_ordinal(r, 1), 0);   // srun --gpus-per-task=1: one visible
  EXPECT_EQ(gpu_ordinal(3, 0), 0);
  EXPECT_EQ(gpu_ordinal(-2, 4), 0);
}

// ---------------------------------------------------------------- on a GPU (skipped without one)

// Small integers as f16 / bf16 bit patterns and back (exact for them; normals only).
uint16_t to_bits16(float f, DType t) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (t == DType::BF16) return static_cast<uint16_t>(u >> 16);
  if (f == 0) return static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t exponent = ((u >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(((u >> 16) & 0x8000) | (exponent << 10) | ((u >> 13) & 0x3ff));
}
float from_bits16(uint16_t h, DType t) {
  uint32_t u;
  if (t == DType::BF16) {
    u = uint32_t(h) << 16;
  } else {
    const uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    u = exponent == 0 && mantissa == 0 ? sign : sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Uploads `values` as `t` elements.
DevicePtr upload_as(Device& dev, const std::vector<double>& values, DType t) {
  const size_t es = dtype_size(t);
  std::vector<char> bytes(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == DType::F32) {
      float f = float(values[i]);
      std::memcpy(&bytes[i * 4], &f, 4);
    } else {
      uint16_t h = to_bits16(float(values[i]), t);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  DevicePtr p = dev.allocate(bytes.size() + 16);
  dev.upload(p, bytes.data(), bytes.size());
  return p;
}
std::vector<double> download_as(Device& dev, DevicePtr p, size_t n, DType t) {
  const size_t es = dtype_size(t);
  std::vector<char> bytes(n * es);
  dev.download(bytes.data(), p, bytes.size());
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == DType::F32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = from_bits16(h, t);
    }
  }
  return out;
}

std::shared_ptr<Device> the_gpu() {
  std::string why;
  if (!driver(&why)) return nullptr;
  std::shared_ptr<Device> dev = gpu(&why);
  EXPECT_TRUE(dev) << why;
  return dev;
}

TEST(CudaGpu, MemoryKernelsAndTheirCache) {
  std::shared_ptr<Device> dev = the_gpu();
  if (!dev) GTEST_SKIP() << "no GPU";
  std::printf("%s\n", dev->describe().c_str());
  const int64_t n = 1000;
  std::vector<float> x(n), y(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = float(i);
  DevicePtr dx = dev->allocate(n * 4), dy = dev->allocate(n * 4);
  dev->upload(dx, x.data(), n * 4);
  dev->fill(dy, 0, n * 4);
  dev->download(y.data(), dy, n * 4);
  EXPECT_EQ(y, std::vector<float>(n, 0.0f));
  dev->copy(dy, dx, n * 4);
  dev->download(y.data(), dy, n * 4);
  EXPECT_EQ(y, x);

  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("sheaf-gpu-cache-{}", getpid());
  fs::remove_all(dir);
  auto run_scale = [&](Module& m, float a) {
    int64_t count = n;
    void* args[] = {&dx, &dy, &a, &count};
    m.launch(0, (n + 127) / 128, 128, args);
    dev->download(y.data(), dy, n * 4);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], a * x[i]) << i;
  };
  std::unique_ptr<Module> m = dev->load(kScale, {"scale"}, dir.string());
  run_scale(*m, 2.0f);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string(), cubin_cache_name(kScale, dev->arch()));
  std::string why;
  EXPECT_TRUE(read_cached_cubin(files[0].string(), &why)) << why;
  run_scale(*dev->load(kScale, {"scale"}, dir.string()), 3.0f);  // from the cache
  fs::resize_file(files[0], 100);                                  // damaged: rebuilt and rewritten
  run_scale(*dev->load(kScale, {"scale"}, dir.string()), 4.0f);
  EXPECT_TRUE(read_cached_cubin(files[0].string(), &why)) << why;
  EXPECT_THROW(dev->load(kScale, {"no_such_kernel"}, ""), SheafError);
  EXPECT_THROW(m->launch(1, 1, 1, nullptr), SheafError);

  // Capture: recorded work runs only when replayed, on the addresses used while recording.
  DevicePtr dz = dev->allocate(n * 4);
  dev->fill(dz, 0, n * 4);
  dev->synchronize();
  float three = 3.0f;
  int64_t count = n;
  void* args[] = {&dy, &dz, &three, &count};
  std::unique_ptr<Capture> cap = dev->capture([&] {
    dev->copy(dy, dx, n * 4);
    m->launch(0, (n + 127) / 128, 128, args);
  });
  std::vector<float> z(n);
  if (cap) {
    dev->download(z.data(), dz, n * 4);
    EXPECT_EQ(z, std::vector<float>(n, 0.0f));  // not run yet
    cap->replay();
    for (float& v : x) v += 1;
    dev->download(z.data(), dz, n * 4);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(z[i], 3.0f * (x[i] - 1)) << i;
    dev->upload(dx, x.data(), n * 4);
    cap->replay();
  }
  dev->download(z.data(), dz, n * 4);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(z[i], 3.0f * x[i]) << i;
  EXPECT_TRUE(cap) << "this GPU could not capture";

  try {
    dev->allocate(size_t{1} << 50);
    ADD_FAILURE() << "a 1 PiB allocation succeeded";
  } catch (const SheafError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA: cuMemAlloc of 1024.0 TiB failed with CUDA_ERROR_"), std::string::npos) << msg;
    std::printf("%s\n", msg.c_str());
  }
  for (DevicePtr p : {dx, dy, dz}) dev->release(p);
  fs::remove_all(dir);
}

TEST(CudaGpu, ProductsOfEveryLayoutAndDtype) {
  std::shared_ptr<Device> dev = the_gpu();
  if (!dev) GTEST_SKIP() << "no GPU";
  std::mt19937 rng(7);
  struct Case {
    const char* name;
    Gemm g;
    int64_t a_offset = 0;  // elements: misaligned operands
  };
  auto base = [](int64_t m, int64_t n, int64_t k) { return row_major(m, n, k); };
  std::vector<Case> cases;
  cases.push_back({"row-major", base(33, 17, 16)});
  {
    Gemm g = base(33, 17, 16);
    g.a_rs = 1, g.a_cs = 33;
    cases.push_back({"a transposed", g});
    g = base(33, 17, 16);
    g.b_rs = 1, g.b_cs = 16;
    cases.push_back({"b transposed", g});
    g = base(33, 17, 16);
    g.a_rs = 21;
    cases.push_back({"a padded", g});
    g = base(33, 17, 16);
    g.batches = 3, g.a_bs = 33 * 16, g.b_bs = 0;
    cases.push_back({"batched, b shared", g});
    g = base(33, 17, 16);
    g.a_rs = 32, g.a_cs = 2;
    cases.push_back({"fallback (no unit stride)", g});
    g = base(9, 5, 7);
    g.batches = 2, g.a_bs = 200, g.b_bs = 100, g.b_rs = 10, g.b_cs = 2;
    cases.push_back({"fallback batched", g});
    g = base(1, 17, 16);
    cases.push_back({"one row", g});
    g = base(33, 1, 16);
    cases.push_back({"one column", g});
    cases.push_back({"misaligned a", base(33, 17, 16), 1});
    g = base(256, 192, 128);
    cases.push_back({"large", g});
  }
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (const Case& c : cases) {
      Gemm g = c.g;
      g.dtype = t;
      std::vector<double> a(c.a_offset + extent(g.batches, g.a_bs, g.m, g.a_rs, g.k, g.a_cs));
      std::vector<double> b(extent(g.batches, g.b_bs, g.k, g.b_rs, g.n, g.b_cs));
      // |a| ≤ 2, |b| ≤ 1, k ≤ 128: every partial sum is an integer of at most 256, exact in bf16 too.
      for (double& v : a) v = int(rng() % 5) - 2;
      for (double& v : b) v = int(rng() % 3) - 1;
      std::vector<double> a_view(a.begin() + c.a_offset, a.end());
      std::vector<double> want = reference_gemm(g, a_view, b);
      DevicePtr da = upload_as(*dev, a, t), db = upload_as(*dev, b, t);
      DevicePtr dc = dev->allocate(want.size() * dtype_size(t));
      dev->fill(dc, 0xff, want.size() * dtype_size(t));
      dev->gemm(g, da + c.a_offset * dtype_size(t), db, dc, 0, 0);
      std::vector<double> got = download_as(*dev, dc, want.size(), t);
      EXPECT_EQ(got, want) << c.name << " " << dtype_name(t);
      for (DevicePtr p : {da, db, dc}) dev->release(p);
    }
  // k = 0: zeros.
  Gemm g = base(4, 3, 0);
  DevicePtr dc = dev->allocate(12 * 4);
  dev->fill(dc, 0xff, 12 * 4);
  dev->gemm(g, dc, dc, dc, 0, 0);
  EXPECT_EQ(download_as(*dev, dc, 12, DType::F32), std::vector<double>(12, 0.0));
  dev->release(dc);
}

TEST(CudaGpu, AllReduceInAJobOfOneCopies) {
  std::shared_ptr<Device> dev = the_gpu();
  if (!dev) GTEST_SKIP() << "no GPU";
  if (dist::world_size() != 1) GTEST_SKIP() << "run as a job of one";
  const int64_t n = 1000;
  std::vector<float> x(n), y(n, -1.0f);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * float(i) - 7;
  DevicePtr dx = dev->allocate(n * 4), dy = dev->allocate(n * 4);
  dev->upload(dx, x.data(), n * 4);
  dev->fill(dy, 0xff, n * 4);
  for (DType t : {DType::F32, DType::I32, DType::U32, DType::F16}) {  // any dtype: the sum of one rank
    const int64_t count = n * 4 / static_cast<int64_t>(dtype_size(t));
    dev->fill(dy, 0xff, n * 4);
    ASSERT_TRUE(dev->all_reduce_sum(dx, dy, count, t)) << dtype_name(t);
    dev->download(y.data(), dy, n * 4);
    EXPECT_EQ(y, x) << dtype_name(t);
  }
  ASSERT_TRUE(dev->all_reduce_sum(dx, dx, n, DType::F32));  // in place: unchanged
  dev->download(y.data(), dx, n * 4);
  EXPECT_EQ(y, x);
  for (DevicePtr p : {dx, dy}) dev->release(p);
}

}  // namespace
}  // namespace sheaf::cuda
