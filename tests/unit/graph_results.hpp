// tests/unit/graph_results.hpp — two graphs that must compute the same results (a pass's input
// and output), run on the reference executor with the same random arguments.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/ref/executor.hpp"
#include "ir/ir.hpp"
#include "tensor/shape.hpp"

namespace sheaf::testing_support {

// Normal random arguments for g's parameters (the same for every call).
inline std::vector<Tensor> random_args(const ir::Graph& g) {
  std::mt19937 rng(99);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<Tensor> args;
  for (int32_t p : g.params) {
    Tensor x(g.type(p).dtype, g.type(p).shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, normal(rng));
    args.push_back(x);
  }
  return args;
}

// Both graphs on the same normal inputs: `after` verifies, and its results are within `tol`
// (relative to the largest magnitude of each result) of `before`'s — 0: the same values.
inline void expect_close_results(const ir::Graph& before, const ir::Graph& after, double tol = 1e-5) {
  ASSERT_NO_THROW(ir::verify(after)) << ir::print(after);
  const std::vector<Tensor> args = random_args(before);
  std::vector<Tensor> x = ref::run(before, args), y = ref::run(after, args);
  ASSERT_EQ(x.size(), y.size());
  for (size_t r = 0; r < x.size(); ++r) {
    ASSERT_EQ(type_str(x[r]), type_str(y[r])) << "result " << r;
    double scale = 0;
    for (int64_t i = 0; i < x[r].numel(); ++i) scale = std::max(scale, std::abs(x[r].get(i)));
    for (int64_t i = 0; i < x[r].numel(); ++i)
      ASSERT_NEAR(x[r].get(i), y[r].get(i), tol * scale) << "result " << r << " element " << i;
  }
}

}  // namespace sheaf::testing_support
