// backend/cuda/cublaslt.hpp — matrix products (Device::gemm, device.hpp) on the GPU: cuBLASLt,
// loaded at run time with dlopen like the driver (driver.hpp; no CUDA header is needed to build),
// and the strided kernel that takes the operands cuBLASLt cannot.
//   cublaslt()      libcublasLt.so.13 / libcublasLt.so from the loader path, else $CUDA_HOME/lib64
//                   or /usr/local/cuda/lib64; null with the reason when absent. Loaded once.
//   plan_lt_gemm    a Gemm (row-major semantics) as cuBLASLt's column-major operation, or none
//                   when an operand has no unit stride (then: the fallback kernel)
//   LtGemm          one cuBLASLt handle; matmul() runs a Gemm on a stream with a workspace,
//                   algorithm and descriptors cached per Gemm shape and operand alignment; the
//                   algorithm is the fastest of the heuristic's candidates, timed on the shape's
//                   first run or read from the choices file (lt_tuning.hpp)
//   fallback_gemm_source  CUDA C++ (no headers, for NVRTC) of one kernel per dtype: one thread per
//                   output element, f32 accumulation, any strides
// Errors throw SheafError("cuBLASLt: cublasLtMatmul failed with status 13
// (CUBLAS_STATUS_EXECUTION_FAILED)").
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device.hpp"
#include "backend/cuda/driver.hpp"

namespace sheaf::cuda {

using cublasStatus_t = int;  // 0 = CUBLAS_STATUS_SUCCESS
using cublasLtHandle_t = struct cublasLtContext*;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque_t*;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque_t*;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque_t*;

// cublasLtMatmulAlgo_t: an opaque value filled by the heuristic.
struct LtMatmulAlgo {
  uint64_t data[8];
};
// cublasLtMatmulHeuristicResult_t, field for field (96 bytes).
struct LtHeuristicResult {
  LtMatmulAlgo algo;
  size_t workspace_size;
  cublasStatus_t state;
  float waves_count;
  int reserved[4];
};
static_assert(sizeof(LtHeuristicResult) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

// The entry points used (cublasLt.h), listed by SHEAF_CUDA_CUBLASLT_ENTRY_POINTS (cublaslt.cpp
// resolves them; tests/unit/cuda_abi_test.cpp checks them against cublasLt.h). Enum-typed
// parameters are C enums, passed as int.
struct CublasLt {
  cublasStatus_t (*cublasLtCreate)(cublasLtHandle_t* handle);
  cublasStatus_t (*cublasLtDestroy)(cublasLtHandle_t handle);
  size_t (*cublasLtGetVersion)();
  cublasStatus_t (*cublasLtMatmulDescCreate)(cublasLtMatmulDesc_t* desc, int compute_type, int scale_type);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(cublasLtMatmulDesc_t desc);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, int attr, const void* buf, size_t size);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(cublasLtMatrixLayout_t* layout, int type, uint64_t rows, uint64_t cols,
                                               int64_t ld);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(cublasLtMatrixLayout_t layout);
  cublasStatus_t (*cublasLtMatrixLayoutSetAttribute)(cublasLtMatrixLayout_t layout, int attr, const void* buf,
                                                     size_t size);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(cublasLtMatmulPreference_t* pref);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref, int attr, const void* buf,
                                                         size_t size);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                                   cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                   cublasLtMatmulPreference_t pref, int requested,
                                                   LtHeuristicResult* results, int* returned);
  cublasStatus_t (*cublasLtMatmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                                   const void* a, cublasLtMatrixLayout_t a_layout, const void* b,
                                   cublasLtMatrixLayout_t b_layout, const void* beta, const void* c,
                                   cublasLtMatrixLayout_t c_layout, void* d, cublasLtMatrixLayout_t d_layout,
                                   const LtMatmulAlgo* algo, void* workspace, size_t workspace_bytes,
                                   CUstream stream);
};
#define SHEAF_CUDA_CUBLASLT_ENTRY_POINTS(X) X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
  X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute) \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

// Enum values of cublas_api.h, cublasLt.h and library_types.h used by cublaslt.cpp (attribute values' C
// types in brackets).
constexpr int kComputeF32 = 68;          // cublasComputeType_t: CUBLAS_COMPUTE_32F
constexpr int kComputeF32FastTf32 = 77;  // cublasComputeType_t: CUBLAS_COMPUTE_32F_FAST_TF32
constexpr int kDataF32 = 0;              // cudaDataType: CUDA_R_32F
constexpr int kDataF16 = 2;              // cudaDataType: CUDA_R_16F
constexpr int kDataBF16 = 14;            // cudaDataType: CUDA_R_16BF
constexpr int32_t kOpN = 0;              // cublasOperation_t: CUBLAS_OP_N
constexpr int32_t kOpT = 1;              // cublasOperation_t: CUBLAS_OP_T
// cublasLtMatmulDescAttributes_t
constexpr int kDescTransA = 3;  // CUBLASLT_MATMUL_DESC_TRANSA [int32_t]
constexpr int kDescTransB = 4;  // CUBLASLT_MATMUL_DESC_TRANSB [int32_t]
constexpr int kDescEpilogue = 7;     // CUBLASLT_MATMUL_DESC_EPILOGUE [int32_t: cublasLtEpilogue_t]
constexpr int kDescBiasPointer = 8;  // CUBLASLT_MATMUL_DESC_BIAS_POINTER [const void*]
constexpr int kDescAuxPointer = 11;  // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER [void*]
constexpr int kDescAuxLd = 12;       // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD [int64_t]
constexpr int32_t kEpilogueBias = 4;  // cublasLtEpilogue_t: CUBLASLT_EPILOGUE_BIAS
constexpr int32_t kEpilogueBgradA = 256;  // cublasLtEpilogue_t: CUBLASLT_EPILOGUE_BGRADA (sums of A over k)
constexpr int32_t kEpilogueBgradB = 512;  // cublasLtEpilogue_t: CUBLASLT_EPILOGUE_BGRADB (sums of B over k)
constexpr int32_t kEpilogueGelu = 32;     // cublasLtEpilogue_t: CUBLASLT_EPILOGUE_GELU (| BIAS: GELU_BIAS)
constexpr int32_t kEpilogueAux = 128;     // the flag of CUBLASLT_EPILOGUE_GELU_AUX(_BIAS): GELU's input written
constexpr int32_t kEpilogueDgelu = 192;   // cublasLtEpilogue_t: CUBLASLT_EPILOGUE_DGELU

// cuBLASLt's epilogue for a Gemm's (SumB: cuBLASLt's A is our b, SumA: its B is our a), 0: none.
int32_t lt_epilogue(GemmEpilogue e);
// The same with g's GELU (GemmAct), `aux` saying whether GELU's input is written (Gelu).
int32_t lt_epilogue(const Gemm& g, bool aux);
// cublasLtMatrixLayoutAttribute_t
constexpr int kLayoutBatchCount = 5;   // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT [int32_t]
constexpr int kLayoutBatchStride = 6;  // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET [int64_t]
// cublasLtMatmulPreferenceAttributes_t
constexpr int kPrefMaxWorkspace = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES [uint64_t]
constexpr int kPrefAlignA = 5;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES [uint32_t]
constexpr int kPrefAlignB = 6;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES [uint32_t]
constexpr int kPrefAlignC = 7;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES [uint32_t]
constexpr int kPrefAlignD = 8;        // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES [uint32_t]
constexpr cublasStatus_t kStatusNotSupported = 15;  // cublasStatus_t: CUBLAS_STATUS_NOT_SUPPORTED

// The loaded library with every entry point, or null; `why` (if given) then says what is missing.
const CublasLt* cublaslt(std::string* why = nullptr);

// "CUBLAS_STATUS_NOT_SUPPORTED" for a cublasStatus_t ("unknown status" for others).
std::string cublas_status_name(cublasStatus_t s);

// One operand as cuBLASLt stores it: a column-major rows × cols matrix (element (i, j) at
// i + j·ld, ld ≥ rows), used as is or transposed; batch_stride elements between batches.
struct LtOperand {
  bool transpose = false;
  int64_t rows = 0, cols = 0, ld = 0, batch_stride = 0;
};

// A row-major Gemm as cuBLASLt's column-major D (m × n) = op(A) · op(B): cᵀ = bᵀ · aᵀ, so
// cuBLASLt's A is our b (op(A) = bᵀ, n × k), its B our a (op(B) = aᵀ, k × m), m = g.n, n = g.m,
// and D is c read column-major (n rows, ld n). A row-major operand (unit column stride) is, read
// column-major, already its transpose (op N, ld = its row stride); a column-major one (unit row
// stride) is transposed by the operation (op T, ld = its column stride). A dimension of extent 1
// has no stride that matters: its ld is set to the least valid value.
struct LtPlan {
  LtOperand a, b, d;  // cuBLASLt's operands: a ← g's b, b ← g's a, d ← c
  int64_t m = 0, n = 0, k = 0;
  int32_t batches = 1;
};

// The plan, or nullopt when some operand has no unit stride (both strides of a dimension of
// extent > 1 differ from 1), overlapping or negative strides, a negative batch stride, or
// extents and lds beyond 32 bits (which cuBLASLt does not promise to take): the fallback kernel
// computes those. Also nullopt for empty products (m, n, k or batches 0), which the caller
// handles (nothing to do, or zeros when k is 0).
std::optional<LtPlan> plan_lt_gemm(const Gemm& g);

// The largest power of two, at most 256, dividing the byte address of every batch of an operand
// (cuBLASLt's heuristic assumes 256 unless told: a smaller alignment must be declared).
uint32_t operand_alignment(DevicePtr p, int64_t batch_stride, int32_t batches, size_t element_bytes);

// Times work on the stream the products run on: calls `enqueue` (which queues work there), waits
// for it and returns the milliseconds it took; nullopt, without calling `enqueue`, when it cannot
// time now (the stream is being captured into a graph, the driver has no event timing). It may
// also return nullopt after `enqueue` ran when reading the time fails.
using StreamTimer = std::function<std::optional<double>(const std::function<void()>& enqueue)>;

// What identifies a product for cuBLASLt (LtGemm::matmul: dtype, TF32, shape, strides, operand
// alignments, workspace) and the algorithm chosen for each.
using LtKey = std::vector<int64_t>;
using LtChoices = std::map<LtKey, LtMatmulAlgo>;

// One cuBLASLt handle (created on the thread the caller made the context current on) and the
// descriptors and algorithm of every Gemm shape it has run. Thread-safe.
// The algorithm of a shape is decided on its first run (lt_tuning.hpp): the heuristic's only
// candidate; else, unless SHEAF_CUBLASLT_TUNE=0, the choice kept in the choices file when it is
// one of the candidates, else the fastest candidate timed with `timer` there and then (kept in
// the file); else (no timer, the timer cannot time now, tuning off) the heuristic's first.
class LtGemm {
 public:
  explicit LtGemm(const CublasLt& lt, StreamTimer timer = {});
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Keeps the choices in `dir` (the kernel cache's folder), in the file of the GPU `gpu`
  // ("NVIDIA H100 80GB HBM3 (sm_90)") and this cuBLASLt (lt_choices_name). The first call with a
  // non-empty `dir` decides; later calls change nothing. Without one, choices are not kept.
  void set_cache(const std::string& dir, const std::string& gpu);

  // Queues c = a · b (Gemm's semantics; `row`: the bias added, or the sums written, by cuBLASLt's
  // epilogue, lt_epilogue; `aux`: GELU's input, written or read, 0: none) on `stream`, the algorithm allowed `workspace_bytes` of scratch at
  // `workspace`. False (nothing queued) when plan_lt_gemm finds no plan or cuBLASLt has no
  // algorithm for it (with that epilogue): the caller runs the fallback kernel. Throws SheafError
  // on errors. A shape's first run may run its candidates on these operands first (c and the sums
  // are overwritten, a, b and a bias only read) and waits for them.
  bool matmul(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr row, DevicePtr aux, CUstream stream,
              DevicePtr workspace, size_t workspace_bytes);

  // The shapes prepared with an algorithm, how many were decided by timing and how many by the
  // choices file.
  ProductTuning tuning() const;

 private:
  struct Prepared;  // descriptors and algorithm of one shape (absent: no algorithm)
  // Creates p's descriptors for `plan` (cuBLASLt's operands aligned to align_a, align_b and
  // align_d bytes; `epilogue` (0: none) with its row at *row and its aux at *aux, aux_ld elements
  // a row (0: none)) and returns the heuristic's usable candidates (none: cuBLASLt has no
  // algorithm).
  std::vector<LtMatmulAlgo> prepare(Prepared& p, const LtPlan& plan, int type, bool tf32, uint32_t align_a,
                                    uint32_t align_b, uint32_t align_d, int32_t epilogue, const void* const* row,
                                    const void* const* aux, int64_t aux_ld, size_t workspace_bytes);
  // The candidates' index to run (the first, the file's choice or the fastest); may run them.
  size_t choose(const LtKey& key, const std::vector<LtMatmulAlgo>& candidates,
                const std::function<bool(const LtMatmulAlgo&)>& run);
  void load_choices();  // once the cache file is known: its choices join choices_
  const CublasLt& lt_;
  const StreamTimer timer_;
  const bool tune_;  // SHEAF_CUBLASLT_TUNE is not 0
  cublasLtHandle_t handle_ = nullptr;
  mutable std::mutex mutex_;
  std::map<LtKey, std::unique_ptr<Prepared>> prepared_;
  LtChoices choices_;       // timed here or read from the file
  std::string cache_path_;  // the choices file; empty: not kept
  bool loaded_ = false;     // cache_path_ was read
  ProductTuning tuning_;
};

// The fallback kernels: `fallback_gemm_kernel(dtype)` of `fallback_gemm_source()` computes
//   c[i·m·n + r·n + col] = Σ_p a[i·a_bs + r·a_rs + p·a_cs] · b[i·b_bs + p·b_rs + col·b_cs]
// with parameters (const T* a, const T* b, T* c, then as long long: m, n, k, a_rs, a_cs, b_rs,
// b_cs, batches, a_bs, b_bs), one thread per element of c (a grid-stride loop: any grid works),
// f32 accumulation, f16/bf16 stored rounded to nearest even.
// The others do what a product cuBLASLt made without its epilogue leaves: AddRow adds the bias
// row, c[i] = c[i] + bias[i mod n], parameters (T* c, const T* bias, long long total, long long
// n); SumRows writes sums[i] = Σ_p x[i·across + p·along] for i < count, parameters (const T* x,
// T* sums, long long count, k, across, along); Gelu applies GELU to c in place, c[i] =
// gelu(c[i]), first copying c[i] to aux[i] when aux is not null, parameters (T* c, T* aux, long
// long total); GeluGrad multiplies c by GELU's derivative at aux, c[i] = c[i] · gelu'(aux[i]),
// parameters (T* c, const T* aux, long long total). F32, F16 or BF16.
enum class FallbackKernel { Gemm, AddRow, SumRows, Gelu, GeluGrad };
const std::string& fallback_gemm_source();
std::string fallback_gemm_kernel(DType dtype, FallbackKernel kind = FallbackKernel::Gemm);
constexpr int64_t kFallbackGemmBlock = 256;

}  // namespace sheaf::cuda
