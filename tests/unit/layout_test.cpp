// tests/unit/layout_test.cpp — structural primitives (tensor/layout.hpp, tensor/gather.hpp)
// against naive index arithmetic, for every element size (f32, f16, bool) and with the edge
// cases the builtins rely on: clamped gathers and dynamic starts, skipped scatter indices,
// repeated scatter-add indices, stable sorting with ties, -0 and NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "base/error.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/gather.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

Tensor counting(DType d, Shape s) {  // 0, 1, 2, … (mod 2 for bool)
  Tensor t(d, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, d == DType::Bool ? static_cast<double>(i % 3 == 0) : static_cast<double>(i % 500));
  return t;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

// Flat index of a multi-index in a row-major shape.
int64_t flat(const Shape& s, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

// Calls fn(multi-index) for every element of shape s, in row-major order.
template <typename F>
void each_index(const Shape& s, F fn) {
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t n = 0; n < shape_numel(s); ++n) {
    fn(idx);
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

class EveryElementSize : public testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Structural, EveryElementSize, testing::Values(DType::F32, DType::F16, DType::Bool));

TEST_P(EveryElementSize, TransposeMatchesIndexArithmetic) {
  Shape s{3, 40, 5, 37};
  Tensor x = counting(GetParam(), s);
  for (std::vector<int64_t> perm : {std::vector<int64_t>{3, 2, 1, 0}, {0, 2, 1, 3}, {1, 3, 0, 2}, {0, 1, 3, 2}}) {
    Tensor y = transpose(x, perm);
    Shape ys;
    for (int64_t p : perm) ys.push_back(s[static_cast<size_t>(p)]);
    ASSERT_EQ(y.shape(), ys);
    each_index(ys, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> src(4);
      for (size_t d = 0; d < 4; ++d) src[static_cast<size_t>(perm[d])] = i[d];
      ASSERT_EQ(y.get(flat(ys, i)), x.get(flat(s, src)));
    });
  }
}

TEST_P(EveryElementSize, StridedSliceAndReverse) {
  Shape s{7, 9};
  Tensor x = counting(GetParam(), s);
  Tensor y = slice(x, {1, 2}, {7, 9}, {2, 3});  // rows 1,3,5; cols 2,5,8
  ASSERT_EQ(y.shape(), (Shape{3, 3}));
  each_index(y.shape(), [&](const std::vector<int64_t>& i) {
    ASSERT_EQ(y.get(flat(y.shape(), i)), x.get(flat(s, {1 + 2 * i[0], 2 + 3 * i[1]})));
  });
  Tensor r = reverse(x, {1});
  each_index(s, [&](const std::vector<int64_t>& i) { ASSERT_EQ(r.get(flat(s, i)), x.get(flat(s, {i[0], 8 - i[1]}))); });
}

TEST_P(EveryElementSize, ConcatenateAlongMiddleAxis) {
  Tensor a = counting(GetParam(), {2, 3, 4}), b = counting(GetParam(), {2, 1, 4});
  Tensor c = concatenate({a, b, a}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 7, 4}));
  each_index(c.shape(), [&](const std::vector<int64_t>& i) {
    int64_t j = i[1];
    double want = j < 3 ? a.get(flat(a.shape(), {i[0], j, i[2]}))
                : j < 4 ? b.get(flat(b.shape(), {i[0], 0, i[2]}))
                        : a.get(flat(a.shape(), {i[0], j - 4, i[2]}));
    ASSERT_EQ(c.get(flat(c.shape(), i)), want);
  });
}

TEST(Structural, PadOverwriteIota) {
  Tensor x = counting(DType::I32, {2, 2});
  EXPECT_EQ(values(pad(x, -1, {1, 0}, {0, 2})), (std::vector<double>{-1, -1, -1, -1, 0, 1, -1, -1, 2, 3, -1, -1}));
  EXPECT_EQ(values(overwrite(counting(DType::I32, {3, 3}), Tensor(DType::I32, {1, 2}), {2, 1})),
            (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 0, 0}));
  EXPECT_THROW(overwrite(x, Tensor(DType::I32, {1, 2}), {2, 0}), SheafError);
  EXPECT_EQ(values(iota(DType::I32, {2, 3}, 1)), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(iota(DType::F32, {2, 3}, 0)), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_THROW(reshape(x, {3}), SheafError);
  EXPECT_EQ(reshape(x, {4}).storage(), x.storage());  // shares bytes
}

TEST(Gather, TakeClampsAndKeepsIndexShape) {
  Tensor x = counting(DType::F32, {4, 3});
  Tensor idx = make_tensor(DType::I32, {2, 2}, {3, -5, 1, 99});
  Tensor y = take(x, idx, 0);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{9, 10, 11, 0, 1, 2, 3, 4, 5, 9, 10, 11}));
  Tensor col = take(x, make_tensor(DType::I32, {}, {2}), 1);
  EXPECT_EQ(col.shape(), (Shape{4}));
  EXPECT_EQ(values(col), (std::vector<double>{2, 5, 8, 11}));
  EXPECT_THROW(take(x, make_tensor(DType::F32, {1}, {0}), 0), SheafError);
}

TEST(Gather, ScatterSetSkipsOutOfRangeAndAddAccumulates) {
  Tensor x(DType::F32, {3, 2});
  Tensor idx = make_tensor(DType::I32, {3}, {2, 7, 2});
  Tensor upd = make_tensor(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values(scatter(x, idx, upd, 0, ScatterMode::Set)), (std::vector<double>{0, 0, 0, 0, 5, 6}));
  EXPECT_EQ(values(scatter(x, idx, upd, 0, ScatterMode::Add)), (std::vector<double>{0, 0, 0, 0, 6, 8}));
  Tensor h = convert(x, DType::BF16);
  Tensor hs = scatter(h, idx, convert(upd, DType::BF16), 0, ScatterMode::Add);
  EXPECT_EQ(hs.dtype(), DType::BF16);
  EXPECT_EQ(values(hs), (std::vector<double>{0, 0, 0, 0, 6, 8}));
  Tensor xi = counting(DType::I32, {2, 3});
  Tensor along1 = scatter(xi, make_tensor(DType::I32, {2}, {0, 0}), make_tensor(DType::I32, {2, 2}, {10, 20, 30, 40}), 1, ScatterMode::Add);
  EXPECT_EQ(values(along1), (std::vector<double>{30, 1, 2, 73, 4, 5}));
  EXPECT_THROW(scatter(x, idx, make_tensor(DType::F32, {2, 2}, {0, 0, 0, 0}), 0, ScatterMode::Set), SheafError);
}

TEST(Gather, DynamicStartsAreClamped) {
  Tensor x = counting(DType::I32, {4, 5});
  EXPECT_EQ(values(dynamic_slice(x, {3, -2}, {2, 2})), (std::vector<double>{10, 11, 15, 16}));
  EXPECT_THROW(dynamic_slice(x, {0, 0}, {5, 1}), SheafError);
  Tensor u = make_tensor(DType::I32, {1, 2}, {-1, -2});
  EXPECT_EQ(values(dynamic_update_slice(x, u, {9, 9})).back(), -2);
  EXPECT_EQ(values(dynamic_update_slice(x, u, {9, 9}))[18], -1);
}

// The reference order: a stable sort of (value, index) under NumPy's order (NaN last, -0 == 0).
std::vector<int32_t> reference_order(const std::vector<float>& v, bool desc) {
  std::vector<int32_t> o(v.size());
  std::iota(o.begin(), o.end(), 0);
  auto less = [](float a, float b) { return a < b || (!std::isnan(a) && std::isnan(b)); };
  std::stable_sort(o.begin(), o.end(), [&](int32_t i, int32_t j) { return desc ? less(v[j], v[i]) : less(v[i], v[j]); });
  return o;
}

TEST(Sort, StableWithTiesNegativeZeroAndNaN) {
  std::mt19937 rng(7);
  std::vector<float> v(2000);
  for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 50) - 25) * 0.5f;
  v[3] = -0.0f;
  v[10] = std::numeric_limits<float>::quiet_NaN();
  v[11] = -std::numeric_limits<float>::infinity();
  v[12] = std::numeric_limits<float>::infinity();
  std::vector<double> dv(v.begin(), v.end());
  Tensor x = make_tensor(DType::F32, {2, 1000}, dv);
  for (bool desc : {false, true}) {
    Sorted s = sort(x, 1, desc);
    for (int row = 0; row < 2; ++row) {
      std::vector<float> line(v.begin() + row * 1000, v.begin() + (row + 1) * 1000);
      std::vector<int32_t> want = reference_order(line, desc);
      for (int i = 0; i < 1000; ++i) ASSERT_EQ(s.indices.data<int32_t>()[row * 1000 + i], want[static_cast<size_t>(i)]) << desc << " " << i;
    }
    Sorted k = top_k(x, 17);
    Sorted full = sort(x, 1, true);
    for (int row = 0; row < 2; ++row)
      for (int i = 0; i < 17; ++i) ASSERT_EQ(k.indices.data<int32_t>()[row * 17 + i], full.indices.data<int32_t>()[row * 1000 + i]);
  }
}

TEST(Sort, AlongLeadingAxisAndOtherDtypes) {
  Tensor x = make_tensor(DType::I32, {3, 2}, {5, -1, -7, 4, 0, 4});
  Sorted s = sort(x, 0, false);
  EXPECT_EQ(values(s.values), (std::vector<double>{-7, -1, 0, 4, 5, 4}));
  EXPECT_EQ(values(s.indices), (std::vector<double>{1, 0, 2, 1, 0, 2}));
  Tensor h = convert(make_tensor(DType::F32, {4}, {2.5, -1, 2.5, 0}), DType::F16);
  Sorted hs = sort(h, 0, true);
  EXPECT_EQ(hs.values.dtype(), DType::F16);
  EXPECT_EQ(values(hs.values), (std::vector<double>{2.5, 2.5, 0, -1}));
  EXPECT_EQ(values(hs.indices), (std::vector<double>{0, 2, 3, 1}));
  Tensor u = make_tensor(DType::U32, {3}, {4000000000.0, 1, 7});
  EXPECT_EQ(values(sort(u, 0, false).values), (std::vector<double>{1, 7, 4000000000.0}));
}

}  // namespace
}  // namespace sheaf
