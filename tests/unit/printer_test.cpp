// tests/unit/printer_test.cpp — the printer (SPEC §2.8): float scalars, host values, and
// tensors in NumPy str() layout. Every tensor expectation below is the output of
// `print(np.array(values, dtype=np.float32).reshape(shape))` under NumPy 2.4 (int32 for integer
// tensors; bools are the one deliberate difference: lowercase and unpadded).
#include "value/printer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// 0, step, 2·step, … (n values): np.arange(n) * step.
std::vector<double> iota(int64_t n, double step = 1.0, double start = 0.0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<double>(i) * step;
  return v;
}

// ---- format_float -----------------------------------------------------------------------

TEST(FormatFloat, PythonReprLayout) {
  EXPECT_EQ(format_float(5.0f), "5.0");
  EXPECT_EQ(format_float(2.718281828f), "2.7182817");
  EXPECT_EQ(format_float(0.1f), "0.1");
  EXPECT_EQ(format_float(-2.5f), "-2.5");
  EXPECT_EQ(format_float(123.456f), "123.456");
  EXPECT_EQ(format_float(0.0f), "0.0");
  EXPECT_EQ(format_float(-0.0f), "-0.0");
  EXPECT_EQ(format_float(1e15f), "1000000000000000.0");
}

TEST(FormatFloat, ExponentOutsidePlainRange) {
  EXPECT_EQ(format_float(1e-5f), "1e-05");
  EXPECT_EQ(format_float(0.0001f), "0.0001");  // plain from 1e-4 …
  EXPECT_EQ(format_float(0.00012345f), "0.00012345");
  EXPECT_EQ(format_float(9.9e-5f), "9.9e-05");
  EXPECT_EQ(format_float(1e16f), "1e+16");  // … up to (not including) 1e16
  EXPECT_EQ(format_float(1.5e20f), "1.5e+20");
  EXPECT_EQ(format_float(-1.5e20f), "-1.5e+20");
  EXPECT_EQ(format_float(3.4028235e38f), "3.4028235e+38");
  EXPECT_EQ(format_float(1e-45f), "1e-45");
}

TEST(FormatFloat, Specials) {
  EXPECT_EQ(format_float(std::numeric_limits<float>::infinity()), "inf");
  EXPECT_EQ(format_float(-std::numeric_limits<float>::infinity()), "-inf");
  EXPECT_EQ(format_float(std::numeric_limits<float>::quiet_NaN()), "nan");
}

TEST(FormatFloat, IntegralValuesBeyondShortestDigits) {
  // 123456789 is not an f32: the nearest one is 123456792, and the shortest decimal that reads
  // back as it is 123456790 (SPEC §2.8: shortest round-trip f32).
  EXPECT_EQ(format_float(123456789.0f), "123456790.0");
}

TEST(FormatFloat, RoundTrips) {
  for (float f : {0.1f, 1.0f / 3.0f, 2.7182817f, 1e-7f, 6.02e23f, 16777217.0f, 0.3f, 1e-38f, -7.25e-3f}) {
    std::string s = format_float(f);
    EXPECT_EQ(std::strtof(s.c_str(), nullptr), f) << s;
  }
}

// ---- host values --------------------------------------------------------------------------

TEST(PrintValue, Scalars) {
  EXPECT_EQ(print_value(Value::nil()), "nil");
  EXPECT_EQ(print_value(Value::boolean(true)), "true");
  EXPECT_EQ(print_value(Value::boolean(false)), "false");
  EXPECT_EQ(print_value(Value::integer(3)), "3");
  EXPECT_EQ(print_value(Value::integer(-7)), "-7");
  EXPECT_EQ(print_value(Value::integer(INT64_MIN)), "-9223372036854775808");
  EXPECT_EQ(print_value(Value::real(5.0f)), "5.0");
  EXPECT_EQ(print_value(Value::keyword("yes")), ":yes");
  EXPECT_EQ(print_value(Value::symbol("char->id")), "char->id");
}

TEST(PrintValue, StringsTopLevelAndNested) {
  EXPECT_EQ(print_value(Value::string("hi there")), "hi there");
  EXPECT_EQ(print_value(Value::string("hi"), /*top=*/false), "'hi'");
  EXPECT_EQ(print_value(Value::list({Value::string("a"), Value::string("b")}, ListKind::Bracket)), "['a', 'b']");
  EXPECT_EQ(print_value(Value::list({Value::string("")})), "['']");
  EXPECT_EQ(print_value(Value::list({Value::string("a\nb\t\\")})), "['a\\nb\\t\\\\']");
  EXPECT_EQ(print_value(Value::list({Value::string("it's")})), "[\"it's\"]");  // Python repr quoting
  EXPECT_EQ(print_value(Value::list({Value::string("say \"hi\"")})), "['say \"hi\"']");
  EXPECT_EQ(print_value(Value::list({Value::string("'\"")})), "['\\'\"']");
}

TEST(PrintValue, Lists) {
  EXPECT_EQ(print_value(Value::list({Value::integer(1), Value::integer(2), Value::integer(3)})), "[1, 2, 3]");
  EXPECT_EQ(print_value(Value::list({Value::real(2.0f), Value::real(4.0f)})), "[2.0, 4.0]");
  EXPECT_EQ(print_value(Value::list({})), "[]");
  Value tensor = Value::tensor(make_tensor(DType::F32, {2}, {1, 2}));
  EXPECT_EQ(print_value(Value::list({tensor, Value::string("x"), Value::nil()})), "[[1. 2.], 'x', nil]");
  Value inner = Value::list({Value::integer(1), Value::list({Value::keyword("k")})});
  EXPECT_EQ(print_value(Value::list({inner, Value::boolean(false)})), "[[1, [:k]], false]");
}

TEST(PrintValue, Tuples) {
  EXPECT_EQ(print_value(Value::tuple({Value::integer(1), Value::integer(2)})), "(1, 2)");
  EXPECT_EQ(print_value(Value::tuple({Value::integer(1)})), "(1,)");
  EXPECT_EQ(print_value(Value::tuple({})), "()");
  Value t = Value::tensor(make_tensor(DType::F32, {2}, {6, 0}));
  Value l = Value::list({Value::real(0), Value::real(1), Value::real(3)});
  EXPECT_EQ(print_value(Value::tuple({t, l})), "([6. 0.], [0.0, 1.0, 3.0])");
}

TEST(PrintValue, Dicts) {
  EXPECT_EQ(print_value(make_dict({{"b", Value::integer(2)}, {"a", Value::integer(1)}})), "{:a 1, :b 2}");
  EXPECT_EQ(print_value(make_dict({})), "{}");
  EXPECT_EQ(print_value(make_dict({{"a", Value::integer(1)}, {"a", Value::integer(9)}})), "{:a 9}");  // last wins
  Value nested = make_dict({{"name", Value::string("w")},
                            {"shape", Value::tuple({Value::integer(2), Value::integer(3)})},
                            {"sub", make_dict({{"x", Value::real(0.5f)}})}});
  EXPECT_EQ(print_value(nested), "{:name 'w', :shape (2, 3), :sub {:x 0.5}}");
  EXPECT_EQ(print_value(Value::list({make_dict({{"k", Value::nil()}})})), "[{:k nil}]");
}

TEST(PrintValue, Slices) {
  EXPECT_EQ(print_value(Value::slice(100, 200)), "100:200");
  EXPECT_EQ(print_value(Value::slice(5, std::nullopt)), "5:");
}

TEST(PrintValue, RankZeroTensorsPrintAsScalars) {
  EXPECT_EQ(print_value(Value::tensor(make_tensor(DType::F32, {}, {2.5}))), "2.5");
  EXPECT_EQ(print_value(Value::tensor(make_tensor(DType::F32, {}, {3}))), "3.0");
  EXPECT_EQ(print_value(Value::tensor(make_tensor(DType::I32, {}, {-4}))), "-4");
  EXPECT_EQ(print_value(Value::tensor(make_tensor(DType::Bool, {}, {1}))), "true");
}

// ---- tensors ------------------------------------------------------------------------------

struct TensorCase {
  const char* name;
  DType dtype;
  Shape shape;
  std::vector<double> values;
  const char* numpy;  // str(np.array(values, dtype).reshape(shape))
};

void PrintTo(const TensorCase& c, std::ostream* os) { *os << c.name; }

class PrintTensor : public testing::TestWithParam<TensorCase> {};

TEST_P(PrintTensor, MatchesNumpy) {
  const TensorCase& c = GetParam();
  EXPECT_EQ(print_tensor(make_tensor(c.dtype, c.shape, c.values)), c.numpy);
}

const TensorCase kSmall[] = {
    {"integral", DType::F32, {2}, {4, 6}, "[4. 6.]"},
    {"padded", DType::F32, {2}, {8, 15}, "[ 8. 15.]"},
    {"matrix", DType::F32, {2, 2}, {22, 28, 49, 64}, "[[22. 28.]\n [49. 64.]]"},
    {"fractions", DType::F32, {2}, {1.5, 2.25}, "[1.5  2.25]"},
    {"negative", DType::F32, {3}, {-1.5, 2, -3.25}, "[-1.5   2.   -3.25]"},
    {"negative_integral", DType::F32, {3}, {-1, 2, -3}, "[-1.  2. -3.]"},
    {"negative_rows", DType::F32, {2, 2}, {-1, -2, 3, 4}, "[[-1. -2.]\n [ 3.  4.]]"},
    {"tenths", DType::F32, {3}, {0.1, 0.2, 0.3}, "[0.1 0.2 0.3]"},
    {"thirds", DType::F32, {2}, {1.0 / 3, 2.0 / 3}, "[0.33333334 0.6666667 ]"},
    {"precision8", DType::F32, {2}, {0.123456789, 1}, "[0.12345679 1.        ]"},
    {"shortest_digits", DType::F32, {3}, {3.14159265, 2.71828, 1}, "[3.1415927 2.71828   1.       ]"},
    {"zeros", DType::F32, {3}, {0, 0, 0}, "[0. 0. 0.]"},
    {"negative_zero", DType::F32, {2}, {-0.0, 1}, "[-0.  1.]"},
    {"single", DType::F32, {1}, {7}, "[7.]"},
    {"column", DType::F32, {2, 1}, {1, 2}, "[[1.]\n [2.]]"},
    {"row", DType::F32, {1, 4}, {1, 2, 3, 4}, "[[1. 2. 3. 4.]]"},
    {"empty", DType::F32, {0}, {}, "[]"},
    {"ratio_1000_positional", DType::F32, {2}, {1, 1000}, "[   1. 1000.]"},
    {"f32_0_0001_positional", DType::F32, {2}, {0.0001, 0.0002}, "[0.0001 0.0002]"},
    {"f16_as_f32", DType::F16, {3}, {0.1, 1, 2.5}, "[0.09997559 1.         2.5       ]"},
    {"bf16_as_f32", DType::BF16, {2}, {3.140625, -2}, "[ 3.140625 -2.      ]"},
};
INSTANTIATE_TEST_SUITE_P(Small, PrintTensor, testing::ValuesIn(kSmall),
                         [](const auto& info) { return std::string(info.param.name); });

const TensorCase kExponent[] = {
    {"tiny_and_one", DType::F32, {2}, {1e-5, 1}, "[1.e-05 1.e+00]"},
    {"huge_and_one", DType::F32, {2}, {1e8, 1}, "[1.e+08 1.e+00]"},
    {"rounds_to_1e8", DType::F32, {2}, {99999999, 1}, "[1.e+08 1.e+00]"},
    // NumPy ≥ 2.3 switches float32 arrays to exponents from 10**finfo(float32).precision = 1e6.
    {"f32_cutoff_1e6", DType::F32, {2}, {1e6, 2e6}, "[1.e+06 2.e+06]"},
    {"f32_cutoff_single", DType::F32, {1}, {1234567}, "[1.234567e+06]"},
    {"ratio_over_1000", DType::F32, {2}, {0.5, 1000.5}, "[5.0000e-01 1.0005e+03]"},
    {"ratio_just_over_1000", DType::F32, {2}, {1, 1000.5}, "[1.0000e+00 1.0005e+03]"},
    {"f32_0_0001_is_below_1em4", DType::F32, {2}, {0.0001, 1}, "[1.e-04 1.e+00]"},
    {"just_below_1em4", DType::F32, {2}, {0.0000999, 1}, "[9.99e-05 1.00e+00]"},
    {"zero_among_exponents", DType::F32, {2}, {0, 1e-5}, "[0.e+00 1.e-05]"},
    {"signed_exponents", DType::F32, {3}, {1e-10, -3.5e-7, 2}, "[ 1.0e-10 -3.5e-07  2.0e+00]"},
    {"large_exponents", DType::F32, {3}, {1.5e20, -2, 0}, "[ 1.5e+20 -2.0e+00  0.0e+00]"},
    {"max_f32", DType::F32, {2}, {3.4028235e38, 1}, "[3.4028235e+38 1.0000000e+00]"},
    {"matrix", DType::F32, {2, 2}, {1e-5, 1, 123456, -2.5}, "[[ 1.00000e-05  1.00000e+00]\n [ 1.23456e+05 -2.50000e+00]]"},
};
INSTANTIATE_TEST_SUITE_P(Exponent, PrintTensor, testing::ValuesIn(kExponent),
                         [](const auto& info) { return std::string(info.param.name); });

const TensorCase kSpecials[] = {
    {"nan_inf", DType::F32, {3}, {1, kNan, kInf}, "[ 1. nan inf]"},
    {"neg_inf_nan", DType::F32, {3}, {-kInf, 0.5, kNan}, "[-inf  0.5  nan]"},
    {"specials_only", DType::F32, {2}, {kNan, kInf}, "[nan inf]"},
    {"nan_narrower_than_column", DType::F32, {2}, {kNan, 1000.5}, "[   nan 1000.5]"},
    {"neg_inf_widens_column", DType::F32, {3}, {-kInf, 1.5, 22.25}, "[ -inf  1.5  22.25]"},
    {"neg_inf_last", DType::F32, {2}, {1.5, -kInf}, "[ 1.5 -inf]"},
    {"nan_matrix", DType::F32, {2, 2}, {kNan, 1, 2, 3}, "[[nan  1.]\n [ 2.  3.]]"},
    {"specials_with_exponents", DType::F32, {3}, {1e-5, kNan, -kInf}, "[1.e-05    nan   -inf]"},
};
INSTANTIATE_TEST_SUITE_P(Specials, PrintTensor, testing::ValuesIn(kSpecials),
                         [](const auto& info) { return std::string(info.param.name); });

const TensorCase kIntAndBool[] = {
    {"i32_range", DType::I32, {5}, {0, 1, 2, 3, 4}, "[0 1 2 3 4]"},
    {"i32_right_aligned", DType::I32, {3}, {1, -20, 300}, "[  1 -20 300]"},
    {"i32_matrix", DType::I32, {2, 2}, {1, 2, 300, -4}, "[[  1   2]\n [300  -4]]"},
    {"u32", DType::U32, {3}, {7, 10, 4000000000}, "[         7         10 4000000000]"},
    {"i32_3d", DType::I32, {2, 3, 2}, iota(12, 1, -5), "[[[-5 -4]\n  [-3 -2]\n  [-1  0]]\n\n [[ 1  2]\n  [ 3  4]\n  [ 5  6]]]"},
    {"bool", DType::Bool, {2}, {1, 0}, "[true false]"},
    {"bool_matrix", DType::Bool, {2, 2}, {1, 0, 0, 1}, "[[true false]\n [false true]]"},
};
INSTANTIATE_TEST_SUITE_P(IntAndBool, PrintTensor, testing::ValuesIn(kIntAndBool),
                         [](const auto& info) { return std::string(info.param.name); });

const TensorCase kLayout[] = {
    {"wrap_at_75", DType::F32, {30}, iota(30, 1.5),
     "[ 0.   1.5  3.   4.5  6.   7.5  9.  10.5 12.  13.5 15.  16.5 18.  19.5\n"
     " 21.  22.5 24.  25.5 27.  28.5 30.  31.5 33.  34.5 36.  37.5 39.  40.5\n"
     " 42.  43.5]"},
    {"wrap_rows", DType::F32, {2, 20}, iota(40, 1.25),
     "[[ 0.    1.25  2.5   3.75  5.    6.25  7.5   8.75 10.   11.25 12.5  13.75\n"
     "  15.   16.25 17.5  18.75 20.   21.25 22.5  23.75]\n"
     " [25.   26.25 27.5  28.75 30.   31.25 32.5  33.75 35.   36.25 37.5  38.75\n"
     "  40.   41.25 42.5  43.75 45.   46.25 47.5  48.75]]"},
    {"wrap_i32", DType::I32, {40}, iota(40, 1000),
     "[    0  1000  2000  3000  4000  5000  6000  7000  8000  9000 10000 11000\n"
     " 12000 13000 14000 15000 16000 17000 18000 19000 20000 21000 22000 23000\n"
     " 24000 25000 26000 27000 28000 29000 30000 31000 32000 33000 34000 35000\n"
     " 36000 37000 38000 39000]"},
    {"cube", DType::F32, {2, 2, 2}, iota(8), "[[[0. 1.]\n  [2. 3.]]\n\n [[4. 5.]\n  [6. 7.]]]"},
    {"cube_fractions", DType::F32, {2, 2, 2}, {1.5, -2, 3, 4, 5, 6, 7, 8.25},
     "[[[ 1.5  -2.  ]\n  [ 3.    4.  ]]\n\n [[ 5.    6.  ]\n  [ 7.    8.25]]]"},
};
INSTANTIATE_TEST_SUITE_P(Layout, PrintTensor, testing::ValuesIn(kLayout),
                         [](const auto& info) { return std::string(info.param.name); });

const TensorCase kSummarized[] = {
    {"f32_1001", DType::F32, {1001}, iota(1001), "[   0.    1.    2. ...  998.  999. 1000.]"},
    {"f32_1001_negative", DType::F32, {1001}, iota(1001, -1, -0.0), "[   -0.    -1.    -2. ...  -998.  -999. -1000.]"},
    {"i32_1100", DType::I32, {1100}, iota(1100), "[   0    1    2 ... 1097 1098 1099]"},
    {"i32_rows", DType::I32, {2, 600}, iota(1200, 1, -600),
     "[[-600 -599 -598 ...   -3   -2   -1]\n [   0    1    2 ...  597  598  599]]"},
    {"f32_40x50", DType::F32, {40, 50}, iota(2000),
     "[[0.000e+00 1.000e+00 2.000e+00 ... 4.700e+01 4.800e+01 4.900e+01]\n"
     " [5.000e+01 5.100e+01 5.200e+01 ... 9.700e+01 9.800e+01 9.900e+01]\n"
     " [1.000e+02 1.010e+02 1.020e+02 ... 1.470e+02 1.480e+02 1.490e+02]\n"
     " ...\n"
     " [1.850e+03 1.851e+03 1.852e+03 ... 1.897e+03 1.898e+03 1.899e+03]\n"
     " [1.900e+03 1.901e+03 1.902e+03 ... 1.947e+03 1.948e+03 1.949e+03]\n"
     " [1.950e+03 1.951e+03 1.952e+03 ... 1.997e+03 1.998e+03 1.999e+03]]"},
    {"f32_11x10x10", DType::F32, {11, 10, 10}, iota(1100),
     "[[[0.000e+00 1.000e+00 2.000e+00 ... 7.000e+00 8.000e+00 9.000e+00]\n"
     "  [1.000e+01 1.100e+01 1.200e+01 ... 1.700e+01 1.800e+01 1.900e+01]\n"
     "  [2.000e+01 2.100e+01 2.200e+01 ... 2.700e+01 2.800e+01 2.900e+01]\n"
     "  ...\n"
     "  [7.000e+01 7.100e+01 7.200e+01 ... 7.700e+01 7.800e+01 7.900e+01]\n"
     "  [8.000e+01 8.100e+01 8.200e+01 ... 8.700e+01 8.800e+01 8.900e+01]\n"
     "  [9.000e+01 9.100e+01 9.200e+01 ... 9.700e+01 9.800e+01 9.900e+01]]\n"
     "\n"
     " [[1.000e+02 1.010e+02 1.020e+02 ... 1.070e+02 1.080e+02 1.090e+02]\n"
     "  [1.100e+02 1.110e+02 1.120e+02 ... 1.170e+02 1.180e+02 1.190e+02]\n"
     "  [1.200e+02 1.210e+02 1.220e+02 ... 1.270e+02 1.280e+02 1.290e+02]\n"
     "  ...\n"
     "  [1.700e+02 1.710e+02 1.720e+02 ... 1.770e+02 1.780e+02 1.790e+02]\n"
     "  [1.800e+02 1.810e+02 1.820e+02 ... 1.870e+02 1.880e+02 1.890e+02]\n"
     "  [1.900e+02 1.910e+02 1.920e+02 ... 1.970e+02 1.980e+02 1.990e+02]]\n"
     "\n"
     " [[2.000e+02 2.010e+02 2.020e+02 ... 2.070e+02 2.080e+02 2.090e+02]\n"
     "  [2.100e+02 2.110e+02 2.120e+02 ... 2.170e+02 2.180e+02 2.190e+02]\n"
     "  [2.200e+02 2.210e+02 2.220e+02 ... 2.270e+02 2.280e+02 2.290e+02]\n"
     "  ...\n"
     "  [2.700e+02 2.710e+02 2.720e+02 ... 2.770e+02 2.780e+02 2.790e+02]\n"
     "  [2.800e+02 2.810e+02 2.820e+02 ... 2.870e+02 2.880e+02 2.890e+02]\n"
     "  [2.900e+02 2.910e+02 2.920e+02 ... 2.970e+02 2.980e+02 2.990e+02]]\n"
     "\n"
     " ...\n"
     "\n"
     " [[8.000e+02 8.010e+02 8.020e+02 ... 8.070e+02 8.080e+02 8.090e+02]\n"
     "  [8.100e+02 8.110e+02 8.120e+02 ... 8.170e+02 8.180e+02 8.190e+02]\n"
     "  [8.200e+02 8.210e+02 8.220e+02 ... 8.270e+02 8.280e+02 8.290e+02]\n"
     "  ...\n"
     "  [8.700e+02 8.710e+02 8.720e+02 ... 8.770e+02 8.780e+02 8.790e+02]\n"
     "  [8.800e+02 8.810e+02 8.820e+02 ... 8.870e+02 8.880e+02 8.890e+02]\n"
     "  [8.900e+02 8.910e+02 8.920e+02 ... 8.970e+02 8.980e+02 8.990e+02]]\n"
     "\n"
     " [[9.000e+02 9.010e+02 9.020e+02 ... 9.070e+02 9.080e+02 9.090e+02]\n"
     "  [9.100e+02 9.110e+02 9.120e+02 ... 9.170e+02 9.180e+02 9.190e+02]\n"
     "  [9.200e+02 9.210e+02 9.220e+02 ... 9.270e+02 9.280e+02 9.290e+02]\n"
     "  ...\n"
     "  [9.700e+02 9.710e+02 9.720e+02 ... 9.770e+02 9.780e+02 9.790e+02]\n"
     "  [9.800e+02 9.810e+02 9.820e+02 ... 9.870e+02 9.880e+02 9.890e+02]\n"
     "  [9.900e+02 9.910e+02 9.920e+02 ... 9.970e+02 9.980e+02 9.990e+02]]\n"
     "\n"
     " [[1.000e+03 1.001e+03 1.002e+03 ... 1.007e+03 1.008e+03 1.009e+03]\n"
     "  [1.010e+03 1.011e+03 1.012e+03 ... 1.017e+03 1.018e+03 1.019e+03]\n"
     "  [1.020e+03 1.021e+03 1.022e+03 ... 1.027e+03 1.028e+03 1.029e+03]\n"
     "  ...\n"
     "  [1.070e+03 1.071e+03 1.072e+03 ... 1.077e+03 1.078e+03 1.079e+03]\n"
     "  [1.080e+03 1.081e+03 1.082e+03 ... 1.087e+03 1.088e+03 1.089e+03]\n"
     "  [1.090e+03 1.091e+03 1.092e+03 ... 1.097e+03 1.098e+03 1.099e+03]]]"},
};
INSTANTIATE_TEST_SUITE_P(Summarized, PrintTensor, testing::ValuesIn(kSummarized),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(PrintTensorDirect, ThousandElementsAreNotSummarized) {
  std::string s = print_tensor(make_tensor(DType::I32, {1000}, iota(1000)));
  EXPECT_EQ(s.find("..."), std::string::npos);
  EXPECT_EQ(s.substr(0, 12), "[  0   1   2");
  EXPECT_EQ(s.substr(s.size() - 9), " 998 999]");
}

}  // namespace
}  // namespace sheaf
