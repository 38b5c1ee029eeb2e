// tensor/blas.hpp — matrix-product kernels under dot_general.
//   f32: OpenBLAS's cblas_sgemm, loaded at run time with dlopen (so that OPENBLAS_CORETYPE can be
//        chosen before OpenBLAS reads it), or a portable blocked kernel when OpenBLAS is absent
//   u32: products modulo 2^32 with the portable kernel; this serves i32 too (two's complement)
// Environment: SHEAF_NUM_THREADS sets OpenBLAS's thread count (default: the cores this process
// may use, shared among the ranks on its machine, less those other processes keep busy:
// tensor/blas_threads.hpp);
// OPENBLAS_CORETYPE and OPENBLAS_THREAD_TIMEOUT, when set by the user, are left alone.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sheaf {

// A strided matrix: element (r, c) lives at data[r * rs + c * cs].
template <typename T>
struct MatView {
  T* data;
  int64_t rows, cols;
  int64_t rs, cs;
};

// c = a · b with a: m×k, b: k×n, c: m×n (overwritten; c.cs must be 1). Any operand strides.
void gemm(MatView<const float> a, MatView<const float> b, MatView<float> c);
void gemm(MatView<const uint32_t> a, MatView<const uint32_t> b, MatView<uint32_t> c);

// The portable f32 kernel that stands in for OpenBLAS, exposed for tests.
void gemm_portable(MatView<const float> a, MatView<const float> b, MatView<float> c);

// What f32 products run on: "OpenBLAS 0.3.21 SkylakeX, 1 thread" or "portable kernel".
std::string blas_description();

// The threads the next product gets (SHEAF_NUM_THREADS, or adapted to the load; 1 on the
// portable kernel and while a SerialBlas lives): also the parts a generated loop splits into
// (backend/cpu/parallel.hpp).
int blas_threads();

// While one lives, f32 products run on the thread that asks for them (OpenBLAS at one thread, its
// count not adapted to the load), so that a batch of small products can run in parts on the loop
// threads, side by side, where OpenBLAS's own threads would split each small product at a loss
// (backend/cpu/program.cpp). Open one at a time, on the thread that runs the products, while none
// is running; each element of a product is computed as with any thread count.
class SerialBlas {
 public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;
};

// The variables set for OpenBLAS while it loads, as (name, value), each only where the user has
// not set it: OPENBLAS_CORETYPE for a library that may not know this CPU (not `shipped`, PyPI's
// recent OpenBLAS: SkylakeX with AVX-512, Haswell with AVX2 and FMA), and OPENBLAS_THREAD_TIMEOUT
// 16: idle workers sleep after 2^16 cycles instead of spinning for 2^28 on the cores the generated
// loops run on between products.
std::vector<std::pair<std::string, std::string>> blas_load_environment(bool shipped);

}  // namespace sheaf
