// backend/cuda/cublaslt.cpp — cuBLASLt loaded with dlopen, Gemm → cuBLASLt plans, the cached
// per-shape descriptors and algorithms (chosen as lt_tuning.hpp says), and the fallback kernel's
// source (see cublaslt.hpp).
#include "backend/cuda/cublaslt.hpp"

#include "backend/cuda/dynlib.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "backend/cuda/lt_tuning.hpp"

#include "base/error.hpp"

namespace sheaf::cuda {
namespace {

Loaded<CublasLt>& loaded_cublaslt() {
  static Loaded<CublasLt> l;
  static std::once_flag once;
  return load_once<CublasLt>(l, once, {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, true, "cuBLASLt was not found",
                             "cuBLASLt is too old", [](Resolver& need, CublasLt& fns, std::string&) {
    SHEAF_CUDA_CUBLASLT_ENTRY_POINTS(SHEAF_CUDA_RESOLVE)
    return true;
  });
}

void check(cublasStatus_t s, const char* function) {
  if (s != 0)
    throw SheafError(fmt::format("cuBLASLt: {} failed with status {} ({})", function, s, cublas_status_name(s)));
}

int data_type(DType d) {
  switch (d) {
    case DType::F32: return kDataF32;
    case DType::F16: return kDataF16;
    case DType::BF16: return kDataBF16;
    default: throw SheafError(fmt::format("cuBLASLt: no matrix product of {} (f32, f16 or bf16 only)", dtype_name(d)));
  }
}

// X (R × C, element (r, c) at r·rs + c·cs) as cuBLASLt's operand whose op is Xᵀ (C × R): X read
// column-major is Xᵀ when X is row-major (op N), and X itself when X is column-major (op T).
// The ld must keep the columns of the stored matrix apart (ld ≥ its rows); a dimension of
// extent 1 never moves, so its stride may be anything and its ld is the least valid one.
std::optional<LtOperand> as_transposed(int64_t R, int64_t C, int64_t rs, int64_t cs) {
  if ((cs == 1 || C == 1) && (R == 1 || rs >= C)) return LtOperand{false, C, R, R == 1 ? C : rs, 0};
  if ((rs == 1 || R == 1) && (C == 1 || cs >= R)) return LtOperand{true, R, C, C == 1 ? R : cs, 0};
  return std::nullopt;
}

bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

}  // namespace

const CublasLt* cublaslt(std::string* why) {
  return loaded_cublaslt().get(why);
}

std::string cublas_status_name(cublasStatus_t s) {
  switch (s) {  // cublasStatus_t (cublas_api.h)
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown status";
  }
}

std::optional<LtPlan> plan_lt_gemm(const Gemm& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batches <= 0) return std::nullopt;
  if (!fits_i32(g.m) || !fits_i32(g.n) || !fits_i32(g.k) || !fits_i32(g.batches)) return std::nullopt;
  std::optional<LtOperand> a = as_transposed(g.k, g.n, g.b_rs, g.b_cs);  // op(A) = bᵀ (n × k)
  std::optional<LtOperand> b = as_transposed(g.m, g.k, g.a_rs, g.a_cs);  // op(B) = aᵀ (k × m)
  if (!a || !b || !fits_i32(a->ld) || !fits_i32(b->ld)) return std::nullopt;
  if (g.batches > 1) {
    if (g.a_bs < 0 || g.b_bs < 0) return std::nullopt;
    a->batch_stride = g.b_bs;
    b->batch_stride = g.a_bs;
  }
  LtPlan p;
  p.a = *a;
  p.b = *b;
  p.d = LtOperand{false, g.n, g.m, g.n, g.batches > 1 ? g.m * g.n : 0};
  p.m = g.n;
  p.n = g.m;
  p.k = g.k;
  p.batches = static_cast<int32_t>(g.batches);
  return p;
}

uint32_t operand_alignment(DevicePtr p, int64_t batch_stride, int32_t batches, size_t element_bytes) {
  uint64_t bits = p | 256;  // 256 bounds the result
  if (batches > 1) bits |= static_cast<uint64_t>(batch_stride) * element_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

// The descriptors of one Gemm shape and its algorithm (ok), or ok = false when cuBLASLt has none
// for it. Destroys what it created.
struct LtGemm::Prepared {
  const CublasLt& lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  LtMatmulAlgo algo{};
  bool ok = false;

  explicit Prepared(const CublasLt& l) : lt(l) {}
  ~Prepared() {
    if (desc) lt.cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, d})
      if (l) lt.cublasLtMatrixLayoutDestroy(l);
  }
};

LtGemm::LtGemm(const CublasLt& lt, StreamTimer timer) : lt_(lt), timer_(std::move(timer)), tune_(lt_tuning_enabled()) {
  check(lt_.cublasLtCreate(&handle_), "cublasLtCreate");
}

LtGemm::~LtGemm() {
  prepared_.clear();
  if (handle_) lt_.cublasLtDestroy(handle_);
}

void LtGemm::set_cache(const std::string& dir, const std::string& gpu) {
  if (dir.empty()) return;
  std::lock_guard lock(mutex_);
  if (cache_path_.empty())
    cache_path_ = (std::filesystem::path(dir) / lt_choices_name(gpu, lt_.cublasLtGetVersion())).string();
}

ProductTuning LtGemm::tuning() const {
  std::lock_guard lock(mutex_);
  return tuning_;
}

void LtGemm::load_choices() {
  if (loaded_ || cache_path_.empty()) return;
  loaded_ = true;
  std::string why;
  if (std::optional<LtChoices> kept = read_lt_choices(cache_path_, &why))
    choices_.merge(*kept);  // a choice timed here before the file was known stays
  else if (!why.empty())
    fmt::print(stderr, "sheaf: ignoring the cuBLASLt algorithm cache {} ({}); timing the products again\n", cache_path_,
               why);
}

size_t LtGemm::choose(const LtKey& key, const std::vector<LtMatmulAlgo>& candidates,
                      const std::function<bool(const LtMatmulAlgo&)>& run) {
  if (candidates.size() < 2 || !tune_) return 0;
  load_choices();
  if (auto kept = choices_.find(key); kept != choices_.end()) {
    for (size_t i = 0; i < candidates.size(); ++i)
      if (same_algo(candidates[i], kept->second)) {
        ++tuning_.cached;
        return i;
      }
    choices_.erase(kept);  // not one of cuBLASLt's candidates: never run
  }
  std::optional<size_t> best =
      time_candidates(candidates.size(), [&](size_t i) { return run(candidates[i]); }, timer_);
  if (!best) return 0;
  choices_[key] = candidates[*best];
  ++tuning_.timed;
  if (!cache_path_.empty()) write_lt_choices(cache_path_, choices_);  // a failure only loses the file
  return *best;
}

std::vector<LtMatmulAlgo> LtGemm::prepare(Prepared& p, const LtPlan& plan, int type, bool tf32, uint32_t align_a,
                                          uint32_t align_b, uint32_t align_d, int32_t epilogue, const void* const* row,
                                          const void* const* aux, int64_t aux_ld, size_t workspace_bytes) {
  check(lt_.cublasLtMatmulDescCreate(&p.desc, tf32 ? kComputeF32FastTf32 : kComputeF32, kDataF32),
        "cublasLtMatmulDescCreate");
  const int32_t trans_a = plan.a.transpose ? kOpT : kOpN, trans_b = plan.b.transpose ? kOpT : kOpN;
  check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescTransA, &trans_a, sizeof trans_a),
        "cublasLtMatmulDescSetAttribute");
  check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescTransB, &trans_b, sizeof trans_b),
        "cublasLtMatmulDescSetAttribute");
  if (epilogue) {  // the heuristic reads the row pointer's alignment
    check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescEpilogue, &epilogue, sizeof epilogue), "cublasLtMatmulDescSetAttribute");
    check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescBiasPointer, row, sizeof *row), "cublasLtMatmulDescSetAttribute");
  }
  if (aux_ld > 0) {  // likewise the aux's
    check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescAuxPointer, aux, sizeof *aux), "cublasLtMatmulDescSetAttribute");
    check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescAuxLd, &aux_ld, sizeof aux_ld), "cublasLtMatmulDescSetAttribute");
  }
  auto layout = [&](cublasLtMatrixLayout_t& l, const LtOperand& o) {
    check(lt_.cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(o.rows), static_cast<uint64_t>(o.cols), o.ld),
          "cublasLtMatrixLayoutCreate");
    if (plan.batches > 1) {
      const int32_t count = plan.batches;
      const int64_t stride = o.batch_stride;
      check(lt_.cublasLtMatrixLayoutSetAttribute(l, kLayoutBatchCount, &count, sizeof count),
            "cublasLtMatrixLayoutSetAttribute");
      check(lt_.cublasLtMatrixLayoutSetAttribute(l, kLayoutBatchStride, &stride, sizeof stride),
            "cublasLtMatrixLayoutSetAttribute");
    }
  };
  layout(p.a, plan.a);
  layout(p.b, plan.b);
  layout(p.d, plan.d);

  cublasLtMatmulPreference_t pref = nullptr;
  check(lt_.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  struct DestroyPref {
    const CublasLt& lt;
    cublasLtMatmulPreference_t p;
    ~DestroyPref() { lt.cublasLtMatmulPreferenceDestroy(p); }
  } destroy_pref{lt_, pref};
  const uint64_t max_workspace = workspace_bytes;
  check(lt_.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &max_workspace, sizeof max_workspace),
        "cublasLtMatmulPreferenceSetAttribute");
  for (auto [attr, value] : {std::pair{kPrefAlignA, align_a}, std::pair{kPrefAlignB, align_b},
                             std::pair{kPrefAlignC, align_d}, std::pair{kPrefAlignD, align_d}})
    check(lt_.cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value),
          "cublasLtMatmulPreferenceSetAttribute");

  std::vector<LtHeuristicResult> results(kLtCandidates);
  int returned = 0;
  cublasStatus_t s = lt_.cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, kLtCandidates,
                                                        results.data(), &returned);
  if (s == kStatusNotSupported) return {};
  check(s, "cublasLtMatmulAlgoGetHeuristic");
  return usable_candidates(results, returned);
}

int32_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::None: return 0;
    case GemmEpilogue::Bias: return kEpilogueBias;
    case GemmEpilogue::SumA: return kEpilogueBgradB;
    case GemmEpilogue::SumB: return kEpilogueBgradA;
  }
  return 0;
}

int32_t lt_epilogue(const Gemm& g, bool aux) {
  switch (g.act) {
    case GemmAct::None: return lt_epilogue(g.epilogue);
    case GemmAct::Gelu: return kEpilogueGelu | (g.epilogue == GemmEpilogue::Bias ? kEpilogueBias : 0) | (aux ? kEpilogueAux : 0);
    case GemmAct::GeluGrad: return kEpilogueDgelu;
  }
  return 0;
}

bool LtGemm::matmul(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr row, DevicePtr aux, CUstream stream,
                    DevicePtr workspace, size_t workspace_bytes) {
  const int type = data_type(g.dtype);
  std::optional<LtPlan> plan = plan_lt_gemm(g);
  if (!plan) return false;
  const size_t es = dtype_size(g.dtype);
  // cuBLASLt's A is our b, its B our a (plan_lt_gemm); C and D are both c.
  const uint32_t align_a = operand_alignment(b, plan->a.batch_stride, plan->batches, es);
  const uint32_t align_b = operand_alignment(a, plan->b.batch_stride, plan->batches, es);
  const uint32_t align_d = operand_alignment(c, plan->d.batch_stride, plan->batches, es);
  const bool tf32 = g.tf32 && g.dtype == DType::F32;
  const int32_t epilogue = lt_epilogue(g, aux != 0);
  const bool with_row = g.epilogue != GemmEpilogue::None;
  const int64_t aux_ld = aux ? g.n : 0;
  LtKey key = {static_cast<int64_t>(g.dtype), tf32, g.m, g.n, g.k, g.a_rs, g.a_cs, g.b_rs, g.b_cs, g.batches,
               g.batches > 1 ? g.a_bs : 0, g.batches > 1 ? g.b_bs : 0, align_a, align_b, align_d,
               static_cast<int64_t>(workspace_bytes)};
  if (epilogue) key.insert(key.end(), {epilogue, operand_alignment(row, 0, 1, es)});  // plain keys stay those of older files
  if (aux) key.push_back(operand_alignment(aux, 0, 1, es));
  const float alpha = 1.0f, beta = 0.0f;  // CUBLASLT_POINTER_MODE_HOST (the default): host scalars
  auto ptr = [](DevicePtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); };
  // Queues c = a · b with `algo`; beta 0: c is only written, so any number of runs leave the product.
  auto launch = [&](const Prepared& p, const LtMatmulAlgo& algo) {
    return lt_.cublasLtMatmul(handle_, p.desc, &alpha, ptr(b), p.a, ptr(a), p.b, &beta, ptr(c), p.d, ptr(c), p.d,
                              &algo, ptr(workspace), workspace_bytes, stream);
  };
  // The bias epilogue adds the row along cuBLASLt's m (our n) before D is rounded; the gradient
  // epilogues write A's sums (m of them: our b's) or B's (n: our a's) there. The row's address
  // is an attribute of the descriptor, set before each run (under the lock).
  // GELU's input (aux) likewise: written by the forward, read by the backward, m·n elements with
  // cuBLASLt's leading dim m (our n).
  const void* row_ptr = ptr(row);
  const void* aux_ptr = ptr(aux);
  auto set_row = [&](const Prepared& p) {
    if (with_row) check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescBiasPointer, &row_ptr, sizeof row_ptr), "cublasLtMatmulDescSetAttribute");
    if (aux) check(lt_.cublasLtMatmulDescSetAttribute(p.desc, kDescAuxPointer, &aux_ptr, sizeof aux_ptr), "cublasLtMatmulDescSetAttribute");
  };

  std::lock_guard lock(mutex_);
  std::unique_ptr<Prepared>& slot = prepared_[key];
  if (!slot) {  // left null when this throws: the next call prepares again
    auto p = std::make_unique<Prepared>(lt_);
    std::vector<LtMatmulAlgo> candidates =
        prepare(*p, *plan, type, tf32, align_a, align_b, align_d, epilogue, &row_ptr, &aux_ptr, aux_ld, workspace_bytes);
    if (!candidates.empty()) {
      p->algo = candidates[choose(key, candidates, [&](const LtMatmulAlgo& algo) { return launch(*p, algo) == 0; })];
      p->ok = true;
      ++tuning_.shapes;
    }
    slot = std::move(p);
  }
  if (!slot->ok) return false;
  if (epilogue) set_row(*slot);
  check(launch(*slot, slot->algo), "cublasLtMatmul");
  return true;
}

const std::string& fallback_gemm_source() {
  // Half-precision values travel as their 16-bit patterns (unsigned short): f16 converts with
  // PTX's cvt (every architecture has it), bf16 by hand (the upper half of an f32; stores round
  // to nearest even, NaNs stay quiet NaNs).
  static const std::string source = R"(// Sheaf: strided matrix products that cuBLASLt cannot take.
__device__ __forceinline__ float sheaf_load(float x) { return x; }
__device__ __forceinline__ float sheaf_store_f32(float x) { return x; }
__device__ __forceinline__ float sheaf_f16(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short sheaf_store_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float sheaf_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short sheaf_store_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// GELU's tanh approximation and its derivative (tensor/gelu.hpp).
__device__ __forceinline__ float sheaf_gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float sheaf_gelu_grad(float x) {
  const float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
}

#define SHEAF_GEMM(NAME, T, LOAD, STORE)                                                              \
  extern "C" __global__ void NAME(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, \
                                  long long m, long long n, long long k, long long a_rs, long long a_cs, \
                                  long long b_rs, long long b_cs, long long batches, long long a_bs,     \
                                  long long b_bs) {                                                     \
    const long long total = batches * m * n;                                                            \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;                      \
         i += (long long)gridDim.x * blockDim.x) {                                                      \
      const long long col = i % n, row = (i / n) % m, batch = i / (m * n);                              \
      const T* pa = a + batch * a_bs + row * a_rs;                                                      \
      const T* pb = b + batch * b_bs + col * b_cs;                                                      \
      float acc = 0.0f;                                                                                 \
      for (long long p = 0; p < k; ++p) acc += LOAD(pa[p * a_cs]) * LOAD(pb[p * b_rs]);                 \
      c[i] = STORE(acc);                                                                                \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void NAME##_add_row(T* __restrict__ c, const T* __restrict__ bias,              \
                                            long long total, long long n) {                             \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;                      \
         i += (long long)gridDim.x * blockDim.x)                                                        \
      c[i] = STORE(LOAD(c[i]) + LOAD(bias[i % n]));                                                     \
  }                                                                                                     \
  extern "C" __global__ void NAME##_sum_rows(const T* __restrict__ x, T* __restrict__ sums,              \
                                             long long count, long long k, long long across,            \
                                             long long along) {                                         \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;                      \
         i += (long long)gridDim.x * blockDim.x) {                                                      \
      float acc = 0.0f;                                                                                 \
      for (long long p = 0; p < k; ++p) acc += LOAD(x[i * across + p * along]);                          \
      sums[i] = STORE(acc);                                                                             \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void NAME##_gelu(T* __restrict__ c, T* __restrict__ aux, long long total) {     \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;                      \
         i += (long long)gridDim.x * blockDim.x) {                                                      \
      const float x = LOAD(c[i]);                                                                       \
      if (aux) aux[i] = c[i];                                                                           \
      c[i] = STORE(sheaf_gelu(x));                                                                      \
    }                                                                                                   \
  }                                                                                                     \
  extern "C" __global__ void NAME##_gelu_grad(T* __restrict__ c, const T* __restrict__ aux,             \
                                              long long total) {                                        \
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;                      \
         i += (long long)gridDim.x * blockDim.x)                                                        \
      c[i] = STORE(LOAD(c[i]) * sheaf_gelu_grad(LOAD(aux[i])));                                         \
  }

SHEAF_GEMM(sheaf_gemm_f32, float, sheaf_load, sheaf_store_f32)
SHEAF_GEMM(sheaf_gemm_f16, unsigned short, sheaf_f16, sheaf_store_f16)
SHEAF_GEMM(sheaf_gemm_bf16, unsigned short, sheaf_bf16, sheaf_store_bf16)
)";
  return source;
}

std::string fallback_gemm_kernel(DType dtype, FallbackKernel kind) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw SheafError(fmt::format("no matrix product kernel for {} (f32, f16 or bf16 only)", dtype_name(dtype)));
  static constexpr const char* kSuffix[] = {"", "_add_row", "_sum_rows", "_gelu", "_gelu_grad"};
  return fmt::format("sheaf_gemm_{}{}", dtype_name(dtype), kSuffix[static_cast<size_t>(kind)]);
}

}  // namespace sheaf::cuda
