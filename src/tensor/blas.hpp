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

// c = a · b with a: m×k, b: k×n, c: m×n (overwritten; c.cs must be 1), or c += a · b when
// `accumulate` (BLAS's beta = 1: a bias written into c first costs no pass of its own). Any
// operand strides.
void gemm(MatView<const float> a, MatView<const float> b, MatView<float> c, bool accumulate = false);
void gemm(MatView<const uint32_t> a, MatView<const uint32_t> b, MatView<uint32_t> c);

// The portable f32 kernel that stands in for OpenBLAS, exposed for tests.
void gemm_portable(MatView<const float> a, MatView<const float> b, MatView<float> c, bool accumulate = false);

// What f32 products run on: "OpenBLAS 0.3.21 SkylakeX, 1 thread" or "portable kernel".
std::string blas_description();

// The most multiply-adds of a product that the BLAS runs with its small-matrix kernels when b
// is not transposed (OpenBLAS's AVX-512 cores: they neither pack the operands nor zero c first);
// 0 where it has none.
int64_t blas_small_macs();

// The blocks that a product c = a · b (m×n, k multiply-adds per element) of a batch of small
// products runs as, so that each fits the small-matrix kernels (`bound`: blas_small_macs): its
// columns in `cols` equal parts, then its rows in `rows`, halving while a block is above the
// bound, the columns while a part keeps 64, the rows while one keeps 16. One block when b is
// transposed (those kernels are slower there than the packed ones), when the bound cannot be
// reached that way, or when it is 0. On one thread (OpenBLAS 0.3.34 SkylakeX) 128×64 · 64×128
// runs at 120 GFLOP/s and its halves 128×64 · 64×64 at 182; 128×128 · 128×64 at 126 and its
// halves 64×128 · 128×64 at 155. Every element is still one block's sum over all of k: on that
// library the results are the unsplit product's, bit for bit.
struct ProductBlocks {
  int64_t rows = 1, cols = 1;
};
ProductBlocks small_product_blocks(int64_t m, int64_t n, int64_t k, bool b_transposed, int64_t bound);

// c = a · b as gemm, one product per block of `blocks` (which divide c's rows and columns).
void gemm_blocks(MatView<const float> a, MatView<const float> b, MatView<float> c, ProductBlocks blocks);

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
