// tests/unit/blas_test.cpp — dot_general and the gemm kernels against a naive loop.
// Shapes cover plain, transposed and multi-axis contractions, batch dims first, in the middle
// and last (which forces packing), size-1 and empty dims, and every dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/error.hpp"
#include "tensor/blas.hpp"
#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/shape.hpp"

using namespace sheaf;

namespace {

Tensor random_tensor(DType d, const Shape& s, std::mt19937& rng) {
  Tensor t(d, s);
  std::uniform_int_distribution<int> small(-4, 4);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (d == DType::Bool) t.set(i, small(rng) > 0);
    else if (is_int(d)) t.set(i, d == DType::U32 ? small(rng) + 4 : small(rng));
    else t.set(i, real(rng));
  }
  return t;
}

// Σ over contracting indices of lhs·rhs, in double, visiting every output index.
std::vector<double> naive_dot(const Tensor& l, const Tensor& r, const DotDims& dims, Shape& out_shape) {
  auto is_in = [](const std::vector<int64_t>& v, int64_t d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  std::vector<int64_t> lfree, rfree;
  for (int64_t d = 0; d < l.rank(); ++d)
    if (!is_in(dims.lhs_batch, d) && !is_in(dims.lhs_contract, d)) lfree.push_back(d);
  for (int64_t d = 0; d < r.rank(); ++d)
    if (!is_in(dims.rhs_batch, d) && !is_in(dims.rhs_contract, d)) rfree.push_back(d);
  out_shape.clear();
  for (int64_t d : dims.lhs_batch) out_shape.push_back(l.dim(d));
  for (int64_t d : lfree) out_shape.push_back(l.dim(d));
  for (int64_t d : rfree) out_shape.push_back(r.dim(d));
  Shape cshape;
  for (int64_t d : dims.lhs_contract) cshape.push_back(l.dim(d));
  const auto ls = strides_of(l.shape()), rs = strides_of(r.shape()), os = strides_of(out_shape),
             cs = strides_of(cshape);
  std::vector<double> out(static_cast<size_t>(shape_numel(out_shape)));
  for (int64_t o = 0; o < shape_numel(out_shape); ++o) {
    int64_t lbase = 0, rbase = 0;
    size_t pos = 0;
    for (size_t i = 0; i < dims.lhs_batch.size(); ++i, ++pos) {
      int64_t idx = o / os[pos] % out_shape[pos];
      lbase += idx * ls[dims.lhs_batch[i]];
      rbase += idx * rs[dims.rhs_batch[i]];
    }
    for (int64_t d : lfree) lbase += (o / os[pos] % out_shape[pos]) * ls[d], ++pos;
    for (int64_t d : rfree) rbase += (o / os[pos] % out_shape[pos]) * rs[d], ++pos;
    double acc = 0;
    for (int64_t c = 0; c < shape_numel(cshape); ++c) {
      int64_t lo = lbase, ro = rbase;
      for (size_t i = 0; i < cshape.size(); ++i) {
        int64_t idx = c / cs[i] % cshape[i];
        lo += idx * ls[dims.lhs_contract[i]];
        ro += idx * rs[dims.rhs_contract[i]];
      }
      acc += l.get(lo) * r.get(ro);
    }
    out[o] = acc;
  }
  return out;
}

struct Case {
  Shape lhs, rhs;
  DotDims dims;
};

const Case kCases[] = {
    {{5, 7}, {7, 3}, {{}, {}, {1}, {0}}},                         // plain matmul
    {{7, 5}, {7, 3}, {{}, {}, {0}, {0}}},                         // lhs transposed
    {{5, 7}, {3, 7}, {{}, {}, {1}, {1}}},                         // rhs transposed
    {{7, 5}, {3, 7}, {{}, {}, {0}, {1}}},                         // both transposed
    {{130, 300}, {300, 70}, {{}, {}, {1}, {0}}},                  // past the portable kernel's blocks
    {{4, 6, 5}, {4, 5, 3}, {{0}, {0}, {2}, {1}}},                 // batched
    {{6, 4, 5}, {5, 4, 3}, {{1}, {1}, {2}, {0}}},                 // batch in the middle
    {{6, 5, 4}, {5, 3, 4}, {{2}, {2}, {1}, {0}}},                 // batch last: no unit stride
    {{2, 3, 4, 5}, {4, 5, 6}, {{}, {}, {2, 3}, {0, 1}}},          // two contracting dims
    {{2, 3, 4, 5}, {5, 4, 6}, {{}, {}, {2, 3}, {1, 0}}},          // paired in another order
    {{3, 4, 2, 5}, {5, 2, 6}, {{}, {}, {3, 2}, {0, 1}}},          // contracting dims out of order
    {{2, 3, 4, 5}, {2, 5, 4, 3}, {{0, 2}, {0, 2}, {3}, {1}}},     // attention-like: [b,t,h,d]·[b,d,h,s]
    {{4, 3, 2}, {2, 4}, {{}, {}, {0, 2}, {1, 0}}},                // contraction split around a free dim
    {{1, 5, 1}, {1, 3}, {{}, {}, {2}, {0}}},                      // size-1 dims
    {{5}, {5}, {{}, {}, {0}, {0}}},                               // vector dot → scalar
    {{5}, {5, 3}, {{}, {}, {0}, {0}}},                            // vector–matrix
    {{3, 4}, {5}, {{}, {}, {}, {}}},                              // outer product
    {{3, 0}, {0, 4}, {{}, {}, {1}, {0}}},                         // empty contraction → zeros
    {{0, 3}, {3, 4}, {{}, {}, {1}, {0}}},                         // empty result
    {{2, 3, 4}, {2, 4, 3}, {{0, 2}, {0, 1}, {}, {}}},             // batch only
};

void expect_matches(DType d, const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(fmt::format("{} {} · {}", dtype_name(d), shape_str(c.lhs), shape_str(c.rhs)));
  Tensor l = random_tensor(d, c.lhs, rng), r = random_tensor(d, c.rhs, rng);
  Shape want_shape;
  std::vector<double> want = naive_dot(l, r, c.dims, want_shape);
  Tensor got = dot_general(l, r, c.dims);
  ASSERT_EQ(got.dtype(), d);
  ASSERT_EQ(got.shape(), want_shape);
  int64_t k = 1;
  for (int64_t d : c.dims.lhs_contract) k *= c.lhs[d];
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (d == DType::Bool) ASSERT_EQ(got.get(i), want[i] != 0 ? 1 : 0) << "at " << i;
    else if (is_int(d)) ASSERT_EQ(got.get(i), want[i]) << "at " << i;
    else {
      double tol = d == DType::F32 ? 1e-5 * (1 + static_cast<double>(k)) : 2e-2 * (1 + std::abs(want[i]));
      ASSERT_NEAR(got.get(i), want[i], tol) << "at " << i;
    }
  }
}

TEST(DotGeneral, MatchesNaiveLoopForEveryDtype) {
  std::mt19937 rng(42);
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Bool})
    for (const Case& c : kCases) expect_matches(d, c, rng);
}

TEST(DotGeneral, IntegerProductsWrap) {
  Tensor a = Tensor::scalar(DType::I32, 65536).reshaped({1});
  Tensor r = dot_general(a, a, {{}, {}, {0}, {0}});  // 2^32 wraps to 0
  EXPECT_EQ(r.get(0), 0);
  Tensor b = Tensor::scalar(DType::I32, -3).reshaped({1, 1});
  EXPECT_EQ(dot_general(b, b, {{}, {}, {1}, {0}}).get(0), 9);
}

TEST(DotGeneral, RejectsMismatchedOperands) {
  Tensor a(DType::F32, {2, 3}), b(DType::F32, {4, 5}), c(DType::I32, {3, 5});
  EXPECT_THROW(dot_general(a, b, {{}, {}, {1}, {0}}), SheafError);  // 3 vs 4
  EXPECT_THROW(dot_general(a, c, {{}, {}, {1}, {0}}), SheafError);  // dtypes
  EXPECT_THROW(dot_general(a, b, {{}, {}, {2}, {0}}), SheafError);  // out of range
  EXPECT_THROW(dot_general(a, a, {{0}, {0}, {0}, {0}}), SheafError);  // repeated
}

// The portable kernel (OpenBLAS's stand-in) and gemm on strided views, against a naive product:
// overwriting c, and (accumulate) adding onto what c holds.
TEST(Gemm, PortableKernelMatchesNaiveLoop) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  auto start = [](int i, int j) { return 0.5f * static_cast<float>(i) - 0.25f * static_cast<float>(j); };
  for (auto [m, k, n] : {std::tuple{1, 1, 1}, {3, 5, 2}, {4, 128, 64}, {9, 129, 257}, {67, 300, 65}}) {
    for (int mode = 0; mode < 8; ++mode) {
      const bool ta = mode & 1, tb = mode & 2, accumulate = mode & 4;
      SCOPED_TRACE(fmt::format("{}x{}x{} ta={} tb={} accumulate={}", m, k, n, ta, tb, accumulate));
      std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n), 7.0f);
      for (float& x : a) x = real(rng);
      for (float& x : b) x = real(rng);
      if (accumulate)
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) c[i * n + j] = start(i, j);
      MatView<const float> av{a.data(), m, k, ta ? 1 : k, ta ? m : 1}, bv{b.data(), k, n, tb ? 1 : n, tb ? k : 1};
      std::vector<float> c2 = c;
      gemm_portable(av, bv, {c.data(), m, n, n, 1}, accumulate);
      gemm(av, bv, {c2.data(), m, n, n, 1}, accumulate);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double want = accumulate ? start(i, j) : 0.0;
          for (int p = 0; p < k; ++p) want += av.data[i * av.rs + p * av.cs] * bv.data[p * bv.rs + j * bv.cs];
          ASSERT_NEAR(c[i * n + j], want, 1e-5 * (1 + k));
          ASSERT_NEAR(c2[i * n + j], want, 1e-5 * (1 + k));
        }
    }
  }
}

TEST(Gemm, DescribesItsBackend) { EXPECT_FALSE(blas_description().empty()); }

// A batch's product splits into blocks under the small-matrix kernels' bound: columns first
// while a part keeps 64, then rows while one keeps 16; never with b transposed, without a bound,
// or when the blocks cannot get under it.
TEST(Gemm, SmallProductBlocks) {
  auto blocks = [](int64_t m, int64_t n, int64_t k, bool bt, int64_t bound) {
    ProductBlocks p = small_product_blocks(m, n, k, bt, bound);
    return std::pair{p.rows, p.cols};
  };
  using Pair = std::pair<int64_t, int64_t>;
  constexpr int64_t kBound = 1000000;
  EXPECT_EQ(blocks(128, 128, 64, false, kBound), Pair(1, 2));  // P·V: columns 64 + 64
  EXPECT_EQ(blocks(128, 64, 128, false, kBound), Pair(2, 1));  // dS·K: rows 64 + 64
  EXPECT_EQ(blocks(256, 64, 128, false, kBound), Pair(4, 1));
  EXPECT_EQ(blocks(100, 100, 100, false, kBound), Pair(1, 1));  // under the bound already
  EXPECT_EQ(blocks(128, 128, 64, true, kBound), Pair(1, 1));   // QKᵀ: b transposed
  EXPECT_EQ(blocks(128, 128, 64, false, 0), Pair(1, 1));       // no small kernels
  EXPECT_EQ(blocks(16, 64, 4096, false, kBound), Pair(1, 1));  // no block gets under it
  EXPECT_EQ(blocks(127, 128, 64, false, kBound), Pair(1, 2));  // odd rows: columns only
}

// gemm_blocks gives the unsplit product's values (here: OpenBLAS or the portable kernel, one
// thread), each element being one block's sum over all of k.
TEST(Gemm, SmallProductBlocksGiveTheWholeProduct) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  SerialBlas serial;
  for (auto [m, k, n, ta] : {std::tuple{128, 128, 64, false}, {128, 128, 64, true}, {128, 64, 128, false}, {256, 64, 128, true}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{} ta={}", m, k, n, ta));
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), whole(static_cast<size_t>(m * n)), split(whole.size());
    for (float& x : a) x = real(rng);
    for (float& x : b) x = real(rng);
    const int64_t a_rs = ta ? 1 : k, a_cs = ta ? m : 1;
    gemm(MatView<const float>{a.data(), m, k, a_rs, a_cs}, MatView<const float>{b.data(), k, n, n, 1}, MatView<float>{whole.data(), m, n, n, 1});
    const ProductBlocks p = small_product_blocks(m, n, k, false, 1000000);
    ASSERT_GT(p.rows * p.cols, 1);
    gemm_blocks(MatView<const float>{a.data(), m, k, a_rs, a_cs}, MatView<const float>{b.data(), k, n, n, 1},
                MatView<float>{split.data(), m, n, n, 1}, p);
    for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(split[i], whole[i], 1e-5f * static_cast<float>(k)) << i;
  }
}

}  // namespace

// OpenBLAS's idle workers must not spin for 2^28 cycles on the cores the generated loops share:
// sheaf asks for 2^16 while OpenBLAS loads, and asks for a core only where the library may not
// know this CPU — never over what the user set.
TEST(Gemm, LoadEnvironmentShortensTheWorkersSpinUnlessTheUserChose) {
  auto value = [](const std::vector<std::pair<std::string, std::string>>& vars, const std::string& name) {
    for (const auto& [n, v] : vars)
      if (n == name) return v;
    return std::string("(unset)");
  };
  const char* user_timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  const char* user_core = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved_timeout = user_timeout ? user_timeout : "", saved_core = user_core ? user_core : "";
  unsetenv("OPENBLAS_THREAD_TIMEOUT");
  unsetenv("OPENBLAS_CORETYPE");
  EXPECT_EQ(value(blas_load_environment(true), "OPENBLAS_THREAD_TIMEOUT"), "16");
  EXPECT_EQ(value(blas_load_environment(false), "OPENBLAS_THREAD_TIMEOUT"), "16");
  EXPECT_EQ(value(blas_load_environment(true), "OPENBLAS_CORETYPE"), "(unset)");  // the shipped one detects the CPU
  setenv("OPENBLAS_THREAD_TIMEOUT", "20", 1);
  setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  EXPECT_EQ(value(blas_load_environment(false), "OPENBLAS_THREAD_TIMEOUT"), "(unset)");
  EXPECT_EQ(value(blas_load_environment(false), "OPENBLAS_CORETYPE"), "(unset)");
  user_timeout ? setenv("OPENBLAS_THREAD_TIMEOUT", saved_timeout.c_str(), 1) : unsetenv("OPENBLAS_THREAD_TIMEOUT");
  user_core ? setenv("OPENBLAS_CORETYPE", saved_core.c_str(), 1) : unsetenv("OPENBLAS_CORETYPE");
}

// While a SerialBlas lives, OpenBLAS runs each product on its calling thread (the loop threads
// then run a batch of small products side by side); afterwards it has its count back.
TEST(Gemm, SerialBlasRunsProductsOnOneThreadAndRestoresTheCount) {
  const int before = blas_threads();
  {
    SerialBlas serial;
    EXPECT_EQ(blas_threads(), 1);
    std::vector<float> a(64 * 64, 1.0f), c(64 * 64);
    gemm(MatView<const float>{a.data(), 64, 64, 64, 1}, MatView<const float>{a.data(), 64, 64, 64, 1}, MatView<float>{c.data(), 64, 64, 64, 1});
    EXPECT_EQ(c[0], 64.0f);
    EXPECT_EQ(blas_threads(), 1);  // a product inside does not adapt the count back up
  }
  EXPECT_EQ(blas_threads(), before);
}
