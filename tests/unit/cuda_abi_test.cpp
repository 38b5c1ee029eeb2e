// tests/unit/cuda_abi_test.cpp — the CUDA libraries' C ABI as the backend declares it (it builds
// without CUDA headers and loads the libraries with dlopen: driver.hpp, cublaslt.hpp, nccl.hpp)
// against the toolkit's own headers, where they are installed at build time (tests/CMakeLists.txt
// adds their folder to this file alone; elsewhere the test skips with a message).
// Checked at compile time: every entry point of each *_ENTRY_POINTS list is declared by its header
// under that very symbol (so dlsym resolves the ABI the field is written for: cuMemAlloc_v2, not
// the older cuMemAlloc), with the same arity and, parameter by parameter, the same ABI class
// (integers and enums by size, floats, pointers to the same kind of thing, structs by size);
// every field of the structs is in its list; every enum value the backend hard-codes equals the
// header's; the structs passed by value or filled in by the library have the header's layout.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>

#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/driver.hpp"
#include "backend/cuda/nccl.hpp"

#if __has_include(<cuda.h>) && __has_include(<cublasLt.h>) && __has_include(<nvrtc.h>) && __has_include(<nccl.h>)
#define SHEAF_HAVE_CUDA_HEADERS 1
#include <cublasLt.h>
#include <cuda.h>
#include <nccl.h>
#include <nvrtc.h>
#endif

namespace {

#ifdef SHEAF_HAVE_CUDA_HEADERS

// The ABI class of a type: what decides how it is passed and what it points to.
template <size_t N>
struct Int {};  // an integer or enum of N bytes (signedness does not change the C ABI)
template <size_t N>
struct Struct {};  // a complete struct of N bytes
struct Opaque {};  // an incomplete struct (a handle's target)
template <typename T>
struct Ptr {};
template <typename R, typename... A>
struct Fn {};

template <typename T, typename = void>
constexpr bool kComplete = false;
template <typename T>
constexpr bool kComplete<T, std::void_t<decltype(sizeof(T))>> = true;

template <typename T, typename = void>
struct Abi {
  using type = T;  // void, float, double
};
template <typename T>
struct Abi<T, std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>>> {
  using type = Int<sizeof(T)>;
};
template <typename T, bool complete = kComplete<T>>
struct ClassAbi {
  using type = Struct<sizeof(T)>;
};
template <typename T>
struct ClassAbi<T, false> {
  using type = Opaque;
};
template <typename T>
struct Abi<T, std::enable_if_t<std::is_class_v<T>>> {
  using type = typename ClassAbi<T>::type;
};
template <typename T>
struct Abi<T*> {
  using type = Ptr<typename Abi<std::remove_cv_t<T>>::type>;
};
template <typename R, typename... A>
struct Abi<R (*)(A...)> {
  using type = Fn<typename Abi<R>::type, typename Abi<std::remove_cv_t<A>>::type...>;
};
template <typename T>
using abi_t = typename Abi<T>::type;

// Whether ours (A) passes as theirs (B): the same ABI class, except that a handle of ours may
// point to an incomplete struct where the header's points to a complete one (the library's
// memory, which the backend never dereferences).
template <typename A, typename B>
struct Compatible : std::is_same<A, B> {};
template <size_t N>
struct Compatible<Ptr<Opaque>, Ptr<Struct<N>>> : std::true_type {};
template <typename A, typename B>
struct Compatible<Ptr<A>, Ptr<B>> : Compatible<A, B> {};
template <typename R1, typename... A1, typename R2, typename... A2>
struct Compatible<Fn<R1, A1...>, Fn<R2, A2...>> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A1) != sizeof...(A2)) return false;
    else return Compatible<R1, R2>::value && (Compatible<A1, A2>::value && ...);
  }();
};
template <typename Ours, typename Theirs>
constexpr bool kPassesAs = Compatible<abi_t<Ours>, abi_t<Theirs>>::value;

// The field's type (ours) and the header's declaration of the symbol it is named by.
#define SHEAF_SAME_ABI(Lib, name)                                                 \
  static_assert(kPassesAs<decltype(sheaf::cuda::Lib::name), decltype(&::name)>, \
                #Lib "::" #name " does not have the C ABI of " #name " in the CUDA headers");
#define SHEAF_DRIVER(name) SHEAF_SAME_ABI(Driver, name)
#define SHEAF_NVRTC(name) SHEAF_SAME_ABI(Nvrtc, name)
#define SHEAF_CUBLASLT(name) SHEAF_SAME_ABI(CublasLt, name)
#define SHEAF_NCCL(name) SHEAF_SAME_ABI(Nccl, name)
SHEAF_CUDA_DRIVER_ENTRY_POINTS(SHEAF_DRIVER)
SHEAF_CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(SHEAF_DRIVER)
SHEAF_CUDA_NVRTC_ENTRY_POINTS(SHEAF_NVRTC)
SHEAF_CUDA_CUBLASLT_ENTRY_POINTS(SHEAF_CUBLASLT)
SHEAF_CUDA_NCCL_ENTRY_POINTS(SHEAF_NCCL)

// Every field is in its list (a struct of function pointers only: one pointer per entry).
#define SHEAF_COUNT(name) +1
static_assert(sizeof(sheaf::cuda::Driver) ==
              (0 SHEAF_CUDA_DRIVER_ENTRY_POINTS(SHEAF_COUNT) SHEAF_CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(SHEAF_COUNT)) * sizeof(void*));
static_assert(sizeof(sheaf::cuda::Nvrtc) == (0 SHEAF_CUDA_NVRTC_ENTRY_POINTS(SHEAF_COUNT)) * sizeof(void*));
static_assert(sizeof(sheaf::cuda::CublasLt) == (0 SHEAF_CUDA_CUBLASLT_ENTRY_POINTS(SHEAF_COUNT)) * sizeof(void*));
static_assert(sizeof(sheaf::cuda::Nccl) == (0 SHEAF_CUDA_NCCL_ENTRY_POINTS(SHEAF_COUNT)) * sizeof(void*));

// The types standing in for the headers' typedefs.
static_assert(kPassesAs<sheaf::cuda::CUdeviceptr, ::CUdeviceptr>);
static_assert(kPassesAs<sheaf::cuda::CUresult, ::CUresult>);
static_assert(kPassesAs<sheaf::cuda::cublasStatus_t, ::cublasStatus_t>);
static_assert(kPassesAs<sheaf::cuda::ncclResult_t, ::ncclResult_t>);

// Enum values (driver.hpp).
static_assert(sheaf::cuda::kStreamNonBlocking == CU_STREAM_NON_BLOCKING);
static_assert(sheaf::cuda::kCaptureModeThreadLocal == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(sheaf::cuda::kCaptureStatusNone == CU_STREAM_CAPTURE_STATUS_NONE);
static_assert(sheaf::cuda::kErrorOutOfMemory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(sheaf::cuda::kAttrMultiprocessors == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(sheaf::cuda::kAttrMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(sheaf::cuda::kAttrMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);

// Enum values (cublaslt.hpp) and the attribute values' C types (the sizes cublaslt.cpp passes).
static_assert(sheaf::cuda::kComputeF32 == CUBLAS_COMPUTE_32F);
static_assert(sheaf::cuda::kComputeF32FastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32);
static_assert(sheaf::cuda::kDataF32 == CUDA_R_32F);
static_assert(sheaf::cuda::kDataF16 == CUDA_R_16F);
static_assert(sheaf::cuda::kDataBF16 == CUDA_R_16BF);
static_assert(sheaf::cuda::kOpN == CUBLAS_OP_N && sheaf::cuda::kOpT == CUBLAS_OP_T);
static_assert(sizeof(cublasOperation_t) == sizeof(int32_t));
static_assert(sheaf::cuda::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(sheaf::cuda::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(sheaf::cuda::kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE);
static_assert(sheaf::cuda::kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(sheaf::cuda::kEpilogueBias == CUBLASLT_EPILOGUE_BIAS);
static_assert(sheaf::cuda::kEpilogueBgradA == CUBLASLT_EPILOGUE_BGRADA);
static_assert(sheaf::cuda::kEpilogueBgradB == CUBLASLT_EPILOGUE_BGRADB);
static_assert(sizeof(cublasLtEpilogue_t) == sizeof(int32_t));
static_assert(sheaf::cuda::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
static_assert(sheaf::cuda::kLayoutBatchStride == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(sheaf::cuda::kPrefMaxWorkspace == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(sheaf::cuda::kPrefAlignA == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
static_assert(sheaf::cuda::kPrefAlignB == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(sheaf::cuda::kPrefAlignC == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
static_assert(sheaf::cuda::kPrefAlignD == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sheaf::cuda::kStatusNotSupported == CUBLAS_STATUS_NOT_SUPPORTED);

// Structs cuBLASLt fills in, field by field.
using Ours = sheaf::cuda::LtHeuristicResult;
using Theirs = cublasLtMatmulHeuristicResult_t;
static_assert(sizeof(sheaf::cuda::LtMatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(Ours) == sizeof(Theirs));
static_assert(offsetof(Ours, algo) == offsetof(Theirs, algo));
static_assert(offsetof(Ours, workspace_size) == offsetof(Theirs, workspaceSize));
static_assert(offsetof(Ours, state) == offsetof(Theirs, state));
static_assert(offsetof(Ours, waves_count) == offsetof(Theirs, wavesCount));

// NCCL (nccl.hpp): the id passed by value, the reduction and the element types.
static_assert(sizeof(sheaf::cuda::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(sheaf::cuda::kNcclUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sheaf::cuda::kNcclSum == ncclSum);
static_assert(sheaf::cuda::kNcclInt32 == ncclInt32);
static_assert(sheaf::cuda::kNcclUint32 == ncclUint32);
static_assert(sheaf::cuda::kNcclFloat32 == ncclFloat32);

// The checker tells ABIs apart (else every assertion above would hold vacuously).
struct Handle;
struct Filled {
  char bytes[96];
};
static_assert(!kPassesAs<int (*)(int), int (*)(long)>);
static_assert(!kPassesAs<int (*)(int*), int (*)(int)>);
static_assert(!kPassesAs<int (*)(int, int), int (*)(int)>);
static_assert(!kPassesAs<int (*)(size_t*), int (*)(unsigned*)>);
static_assert(!kPassesAs<int (*)(float), int (*)(int)>);
static_assert(!kPassesAs<int (*)(Filled*), int (*)(Handle*)>);  // we fill it: the size must be the header's
static_assert(kPassesAs<int (*)(Handle*), int (*)(Filled*)>);
static_assert(kPassesAs<int (*)(const void*, unsigned long long), int (*)(void*, size_t)>);

#endif

TEST(CudaAbi, DeclarationsMatchTheToolkitHeaders) {
#ifdef SHEAF_HAVE_CUDA_HEADERS
  // The checks are static_asserts above: reaching here means they held. Report what was checked.
  constexpr int entry_points = 0 SHEAF_CUDA_DRIVER_ENTRY_POINTS(SHEAF_COUNT) SHEAF_CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(SHEAF_COUNT) SHEAF_CUDA_NVRTC_ENTRY_POINTS(SHEAF_COUNT)
      SHEAF_CUDA_CUBLASLT_ENTRY_POINTS(SHEAF_COUNT) SHEAF_CUDA_NCCL_ENTRY_POINTS(SHEAF_COUNT);
  std::printf("checked %d entry points against CUDA %d.%d's headers (NCCL %d.%d)\n", entry_points, CUDA_VERSION / 1000,
              CUDA_VERSION % 1000 / 10, NCCL_MAJOR, NCCL_MINOR);
#else
  GTEST_SKIP() << "the CUDA toolkit's headers (cuda.h, cublasLt.h, nvrtc.h, nccl.h) were not found at build time";
#endif
}

}  // namespace
