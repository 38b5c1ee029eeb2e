// emit/stablehlo.cpp — tensor IR → StableHLO MLIR generic text (contract in stablehlo.hpp).
// Three layers: literals (types, dense constants), a Writer that prints one generic operation per
// line and the elementwise compositions that give eager semantics (convert, binary, unary), and
// lower_node, one case per IR op.
#include "emit/stablehlo.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "base/error.hpp"
#include "dist/comm.hpp"
#include "ir/composites.hpp"
#include "tensor/shape.hpp"

namespace sheaf::emit {
namespace {

using ir::Op;
using ir::Type;

// ---- types and literals -------------------------------------------------------------------

// The one element type the emitter uses beyond the IR's: packed (key, index) sort keys.
constexpr auto kU64 = static_cast<DType>(0x40);

std::string_view elem_type(DType d) {
  if (d == kU64) return "ui64";
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::U32: return "ui32";
    case DType::Bool: return "i1";
  }
  return "?";
}

std::string tensor_type(const Type& t) {
  std::string s = "tensor<";
  for (int64_t d : t.shape) s += fmt::format("{}x", d);
  return s + std::string(elem_type(t.dtype)) + ">";
}

std::string type_list(const std::vector<Type>& ts, bool parens_for_one) {
  std::vector<std::string> s;
  for (const Type& t : ts) s.push_back(tensor_type(t));
  if (ts.size() == 1 && !parens_for_one) return s[0];
  return fmt::format("({})", fmt::join(s, ", "));
}

std::string i64_array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : fmt::format("array<i64: {}>", fmt::join(v, ", "));
}

std::string i64_list(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// Element i of t as an MLIR literal: floats always with a '.', non-finite floats as bit patterns.
std::string element_literal(const Tensor& t, int64_t i) {
  const std::byte* p = t.bytes() + static_cast<size_t>(i) * dtype_size(t.dtype());
  switch (t.dtype()) {
    case DType::Bool: return t.get(i) != 0 ? "true" : "false";
    case DType::I32: return fmt::format("{}", static_cast<int64_t>(t.get(i)));
    case DType::U32: return fmt::format("{}", static_cast<uint64_t>(t.get(i)));
    default: break;
  }
  auto v = static_cast<float>(t.get(i));
  if (!std::isfinite(v)) {
    if (t.dtype() == DType::F32) return fmt::format("0x{:08X}", std::bit_cast<uint32_t>(v));
    uint16_t h;
    std::memcpy(&h, p, 2);
    return fmt::format("0x{:04X}", h);
  }
  std::string s = fmt::format("{}", v);  // shortest round-trip form of the f32 value
  if (s.find('.') == std::string::npos) {
    size_t e = s.find('e');
    s.insert(e == std::string::npos ? s.size() : e, ".0");
  }
  return s;
}

// Nested list [[a, b], [c, d]] of the elements of t (row-major), from flat index `at`.
void nested_list(const Tensor& t, size_t axis, int64_t& at, std::string& out) {
  if (axis == t.shape().size()) {
    out += element_literal(t, at++);
    return;
  }
  out += '[';
  for (int64_t k = 0; k < t.shape()[axis]; ++k) {
    if (k) out += ", ";
    nested_list(t, axis + 1, at, out);
  }
  out += ']';
}

// `dense<...> : tensor<...>`: a splat when all elements are equal, a hex blob when large.
std::string dense_attr(const Tensor& t) {
  std::string ty = tensor_type({t.dtype(), t.shape()});
  int64_t n = t.numel();
  size_t es = dtype_size(t.dtype());
  bool splat = n > 0;
  for (int64_t i = 1; i < n && splat; ++i) splat = std::memcmp(t.bytes(), t.bytes() + static_cast<size_t>(i) * es, es) == 0;
  if (splat) return fmt::format("dense<{}> : {}", element_literal(t, 0), ty);
  if (n > 16 && t.dtype() != DType::Bool) {
    std::string hex;
    hex.reserve(t.nbytes() * 2);
    for (size_t i = 0; i < t.nbytes(); ++i) hex += fmt::format("{:02X}", static_cast<unsigned>(t.bytes()[i]));
    return fmt::format("dense<\"0x{}\"> : {}", hex, ty);
  }
  std::string body;
  int64_t at = 0;
  nested_list(t, 0, at, body);
  return fmt::format("dense<{}> : {}", body, ty);
}

// A string attribute with MLIR escapes.
std::string mlir_string(std::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\' || u < 0x20 || u >= 0x7F) r += fmt::format("\\{:02X}", u);
    else r += c;
  }
  return r + "\"";
}

// ---- the op writer ------------------------------------------------------------------------

struct Val {
  std::string name;
  Type type;
};

std::string_view compare_type(DType d) {
  if (is_float(d)) return "FLOAT";
  return d == DType::I32 ? "SIGNED" : "UNSIGNED";
}

// Prints generic operations into `out`, one per line at `depth`; result names %0, %1, … come from
// a counter shared with nested regions, so names are unique in the whole function.
class Writer {
 public:
  Writer(std::string& out, int depth, int& counter) : out_(out), pad_(static_cast<size_t>(depth) * 2, ' '), counter_(counter) {}

  std::vector<Val> ops(std::string_view name, const std::vector<Val>& in, const std::vector<Type>& out, std::string_view attrs = {},
                       const std::vector<std::string>& regions = {}) {
    std::string id = fmt::format("%{}", counter_++);
    std::vector<Val> res;
    if (out.size() == 1) res.push_back({id, out[0]});
    else
      for (size_t k = 0; k < out.size(); ++k) res.push_back({fmt::format("{}#{}", id, k), out[k]});
    std::vector<std::string> names;
    std::vector<Type> in_types;
    for (const Val& v : in) {
      names.push_back(v.name);
      in_types.push_back(v.type);
    }
    out_ += pad_;
    if (out.size() == 1) out_ += id + " = ";
    else if (out.size() > 1) out_ += fmt::format("{}:{} = ", id, out.size());
    out_ += fmt::format("\"{}\"({})", name, fmt::join(names, ", "));
    if (!regions.empty()) out_ += fmt::format(" ({})", fmt::join(regions, ", "));
    if (!attrs.empty()) out_ += fmt::format(" {{{}}}", attrs);
    out_ += fmt::format(" : {} -> {}\n", type_list(in_types, true), type_list(out, false));
    return res;
  }
  Val op(std::string_view name, const std::vector<Val>& in, const Type& out, std::string_view attrs = {},
         const std::vector<std::string>& regions = {}) {
    return ops(name, in, {out}, attrs, regions)[0];
  }
  void ret(std::string_view name, const std::vector<Val>& vals) { ops(name, vals, {}); }

  // A one-block region whose arguments are rank-0 tensors of `args`; `body` gives the values it
  // returns with stablehlo.return.
  using Body = std::function<std::vector<Val>(Writer&, const std::vector<Val>&)>;
  std::string region(const std::vector<DType>& args, const Body& body) {
    std::vector<Type> ts;
    for (DType d : args) ts.push_back(Type{d, {}});
    return typed_region(ts, body);
  }
  // The same with arguments of any type; with none, the block header is left out (case branches).
  std::string typed_region(const std::vector<Type>& args, const Body& body) {
    std::string text = "{\n";
    std::vector<Val> vals;
    std::vector<std::string> decl;
    for (const Type& t : args) {
      vals.push_back({fmt::format("%{}", counter_++), t});
      decl.push_back(vals.back().name + ": " + tensor_type(t));
    }
    if (!args.empty()) text += fmt::format("{}^bb0({}):\n", pad_, fmt::join(decl, ", "));
    Writer inner(text, static_cast<int>(pad_.size() / 2) + 1, counter_);
    inner.ret("stablehlo.return", body(inner, vals));
    return text + pad_ + "}";
  }

  // ---- building blocks
  Val constant(const Tensor& t) { return op("stablehlo.constant", {}, {t.dtype(), t.shape()}, "value = " + dense_attr(t)); }
  Val splat(DType d, const Shape& s, double v) {  // v converted like Tensor::set (saturating)
    return splat_literal(d, s, d == kU64 ? fmt::format("{}", static_cast<uint64_t>(v)) : element_literal(Tensor::scalar(d, v), 0));
  }
  Val splat_literal(DType d, const Shape& s, const std::string& lit) {
    return op("stablehlo.constant", {}, {d, s}, fmt::format("value = dense<{}> : {}", lit, tensor_type({d, s})));
  }
  Val like(const Val& x, double v) { return splat(x.type.dtype, x.type.shape, v); }
  Val un(std::string_view name, const Val& x) { return op(fmt::format("stablehlo.{}", name), {x}, x.type); }
  Val bin(std::string_view name, const Val& a, const Val& b) { return op(fmt::format("stablehlo.{}", name), {a, b}, a.type); }
  Val cmp(const Val& a, const Val& b, std::string_view dir) {
    return op("stablehlo.compare", {a, b}, {DType::Bool, a.type.shape},
              fmt::format("comparison_direction = #stablehlo<comparison_direction {}>, compare_type = #stablehlo<comparison_type {}>", dir,
                          compare_type(a.type.dtype)));
  }
  Val cmp0(const Val& a, std::string_view dir) { return cmp(a, like(a, 0), dir); }
  Val sel(const Val& c, const Val& a, const Val& b) { return op("stablehlo.select", {c, a, b}, a.type); }
  Val is_nan(const Val& x) { return cmp(x, x, "NE"); }
  Val raw_convert(const Val& x, DType to) { return op("stablehlo.convert", {x}, {to, x.type.shape}); }
  Val reshape(const Val& x, const Shape& s) { return op("stablehlo.reshape", {x}, {x.type.dtype, s}); }
  Val iota(DType d, const Shape& s, int64_t axis) { return op("stablehlo.iota", {}, {d, s}, fmt::format("iota_dimension = {} : i64", axis)); }

  // Conversion with the eager semantics of tensor/elementwise.cpp `convert`.
  Val convert(const Val& x, DType to) {
    DType from = x.type.dtype;
    if (from == to) return x;
    if (to == DType::Bool) return cmp0(x, "NE");
    if ((is_half(from) || is_half(to)) && from != DType::F32 && to != DType::F32) {
      Val f = convert(x, DType::F32);
      // IREE 3.13 fuses int→f32→bf16 into a call to __truncsfbf2, which it cannot link.
      if (to == DType::BF16 && !is_float(from)) f = op("stablehlo.optimization_barrier", {f}, f.type);
      return convert(f, to);
    }
    if (from == DType::F32 && is_int(to)) {  // truncate toward zero, saturate, NaN/±inf → 0
      bool s = to == DType::I32;
      Val fin = sel(op("stablehlo.is_finite", {x}, {DType::Bool, x.type.shape}), x, like(x, 0));
      // The largest f32 below 2^31 (2^32): the clamp stays exactly convertible; ≥ 2^31 (2^32) saturates.
      Val c = bin("minimum", bin("maximum", fin, like(x, s ? -2147483648.0 : 0.0)), like(x, s ? 2147483520.0 : 4294967040.0));
      Val top = splat(to, x.type.shape, s ? 2147483647.0 : 4294967295.0);
      return sel(cmp(fin, like(x, s ? 2147483648.0 : 4294967296.0), "GE"), top, raw_convert(c, to));
    }
    if (from == DType::I32 && to == DType::U32) return raw_convert(bin("maximum", x, like(x, 0)), to);
    if (from == DType::U32 && to == DType::I32) return raw_convert(bin("minimum", x, like(x, 2147483647.0)), to);
    return raw_convert(x, to);
  }
  Val widen(const Val& x) { return is_half(x.type.dtype) ? convert(x, DType::F32) : x; }

 private:
  std::string& out_;
  std::string pad_;
  int& counter_;
};

// ---- elementwise compositions -------------------------------------------------------------

constexpr std::string_view kUnary[] = {"negate", "abs", "exponential", "log", "sqrt", "rsqrt", "sine", "cosine",
                                       "tan", "tanh", "floor", "ceil", "round_nearest_afz", "sign", "logistic", "not"};
static_assert(std::size(kUnary) == static_cast<size_t>(Unary::Not) + 1, "one spelling per Unary, in enum order");

struct BinarySpelling {
  std::string_view op;   // stablehlo op, "" when composed
  std::string_view dir;  // comparison direction
};
constexpr BinarySpelling kBinary[] = {
    {"add", ""}, {"subtract", ""}, {"multiply", ""}, {"divide", ""}, {"power", ""}, {"maximum", ""}, {"minimum", ""},
    {"", ""} /* rem */, {"", ""} /* floor_div */,
    {"compare", "EQ"}, {"compare", "NE"}, {"compare", "LT"}, {"compare", "LE"}, {"compare", "GT"}, {"compare", "GE"},
    {"and", ""}, {"or", ""}, {"xor", ""}, {"shift_left", ""}, {"shift_right_logical", ""}, {"shift_right_arithmetic", ""}};
static_assert(std::size(kBinary) == static_cast<size_t>(Binary::ShiftRightArithmetic) + 1, "one spelling per Binary, in enum order");

// The StableHLO op each ir::Op lowers to (tensor/ops.def; "" where the attributes decide or none is emitted).
constexpr std::string_view kOpSpelling[] = {
#define SHEAF_IR_OP(Enum, printed, stablehlo) stablehlo,
#include "tensor/ops.def"
};
static_assert(std::size(kOpSpelling) == ir::kOpCount);

[[noreturn]] void no_meaning(std::string_view op, DType d) {
  throw SheafError(fmt::format("StableHLO emission: {} is not defined for {}", op, dtype_name(d)));
}

Val unary(Writer& w, Unary u, const Val& x) {
  DType d = x.type.dtype;
  if (is_half(d)) return w.convert(unary(w, u, w.convert(x, DType::F32)), d);
  std::string_view name = kUnary[static_cast<size_t>(u)];
  if (d == DType::I32 && (u == Unary::Neg || u == Unary::Abs))  // saturate: -INT_MIN = INT_MAX
    return w.un(name, w.bin("maximum", x, w.like(x, -2147483647.0)));
  if (d == DType::U32 && u == Unary::Abs) return x;
  if (d == DType::U32 && u == Unary::Sign) return w.convert(w.cmp0(x, "NE"), d);
  return w.un(name, x);
}

// Integer division rounding toward -inf; x/0 = 0 and INT_MIN/-1 wraps, with no trapping divide.
Val int_floor_div(Writer& w, const Val& x, const Val& y) {
  Val zero = w.like(y, 0), one = w.like(y, 1);
  Val y0 = w.cmp(y, zero, "EQ");
  if (x.type.dtype == DType::U32) return w.sel(y0, zero, w.bin("divide", x, w.sel(y0, one, y)));
  Val ym1 = w.cmp(y, w.like(y, -1), "EQ");
  Val safe = w.sel(w.bin("or", y0, ym1), one, y);
  Val q = w.bin("divide", x, safe), r = w.bin("remainder", x, safe);
  Val off = w.bin("and", w.cmp(r, zero, "NE"), w.bin("xor", w.cmp(r, zero, "LT"), w.cmp(y, zero, "LT")));
  Val floored = w.sel(off, w.bin("subtract", q, one), q);
  return w.sel(y0, zero, w.sel(ym1, w.un("negate", x), floored));
}

// Remainder with the sign of the divisor (Python %); for integers x % 0 = 0 (and x % -1 = 0).
Val python_rem(Writer& w, const Val& x, const Val& y) {
  Val zero = w.like(y, 0);
  Val r;
  if (is_float(x.type.dtype)) {
    r = w.bin("remainder", x, y);
  } else {
    Val bad = w.cmp(y, zero, "EQ");
    if (x.type.dtype == DType::I32) bad = w.bin("or", bad, w.cmp(y, w.like(y, -1), "EQ"));
    r = w.bin("remainder", x, w.sel(bad, w.like(y, 1), y));  // r = 0 when bad
    if (x.type.dtype == DType::U32) return r;
  }
  Val off = w.bin("and", w.cmp(r, zero, "NE"), w.bin("xor", w.cmp(r, zero, "LT"), w.cmp(y, zero, "LT")));
  return w.sel(off, w.bin("add", r, y), r);
}

// C pow on f32: |x|^y, negated for a negative base (or -0) and an odd integral y; NaN for a
// finite negative base and a non-integral y; 1 for y = ±0 and for x = 1 (even with a NaN
// operand), which stablehlo.power as lowered by IREE gets wrong.
Val float_pow(Writer& w, const Val& x, const Val& y) {
  Val ax = w.un("abs", x);
  Val one = w.like(x, 1);
  Val unit = w.bin("or", w.cmp0(y, "EQ"), w.cmp(ax, one, "EQ"));
  Val p = w.sel(unit, one, w.bin("power", ax, y));
  Val integral = w.cmp(w.un("floor", y), y, "EQ");
  Val odd = w.bin("and", w.bin("and", integral, w.op("stablehlo.is_finite", {y}, {DType::Bool, y.type.shape})),
                  w.cmp0(w.bin("remainder", y, w.like(y, 2)), "NE"));
  Val signbit = w.cmp0(w.op("stablehlo.bitcast_convert", {x}, {DType::I32, x.type.shape}), "LT");
  Val r = w.sel(w.bin("and", signbit, odd), w.un("negate", p), p);
  Val finite_neg = w.bin("and", w.cmp0(x, "LT"), w.op("stablehlo.is_finite", {x}, {DType::Bool, x.type.shape}));
  Val nan = w.like(x, std::numeric_limits<double>::quiet_NaN());
  return w.sel(w.bin("and", finite_neg, w.un("not", integral)), nan, r);
}

Val binary(Writer& w, Binary b, const Val& x, const Val& y) {
  DType d = x.type.dtype;
  const BinarySpelling& s = kBinary[static_cast<size_t>(b)];
  if (is_comparison(b)) return w.cmp(x, y, s.dir);
  if (d == DType::Bool) {
    switch (b) {
      case Binary::Add: case Binary::Max: case Binary::Or: return w.bin("or", x, y);
      case Binary::Mul: case Binary::Min: case Binary::And: return w.bin("and", x, y);
      case Binary::Xor: return w.bin("xor", x, y);
      default: no_meaning(ir::binary_name(b), d);
    }
  }
  if (is_half(d)) return w.convert(binary(w, b, w.convert(x, DType::F32), w.convert(y, DType::F32)), d);
  bool f = is_float(d);
  switch (b) {
    case Binary::Pow: return f ? float_pow(w, x, y) : w.bin("power", x, y);
    case Binary::Rem: return python_rem(w, x, y);
    case Binary::Div: return f ? w.bin("divide", x, y) : int_floor_div(w, x, y);
    case Binary::FloorDiv: return f ? w.un("floor", w.bin("divide", x, y)) : int_floor_div(w, x, y);
    case Binary::And: case Binary::Or: case Binary::Xor:
    case Binary::ShiftLeft: case Binary::ShiftRightLogical: case Binary::ShiftRightArithmetic:
      if (f) no_meaning(ir::binary_name(b), d);
      if (b == Binary::ShiftRightArithmetic && d == DType::U32) return w.bin("shift_right_logical", x, y);  // as eager: no sign bit
      [[fallthrough]];
    default: return w.bin(s.op, x, y);
  }
}

// ---- structural helpers -------------------------------------------------------------------

// A rank-0 (or any) integer index as i32 no larger than `hi` (u32 values are capped first, so
// values above INT_MAX stay large instead of wrapping negative).
Val index_i32(Writer& w, const Val& v, int64_t hi) {
  if (v.type.dtype == DType::U32) return w.raw_convert(w.bin("minimum", v, w.like(v, static_cast<double>(std::max<int64_t>(hi, 0)))), DType::I32);
  return v;
}

// The offset dims of gather/scatter along `axis` with q index dims: x's dims before the axis keep
// their place, those after it follow the q index dims.
std::vector<int64_t> take_offset_dims(size_t rank, int64_t axis, size_t q) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < axis; ++i) d.push_back(i);
  for (int64_t i = axis + 1; i < static_cast<int64_t>(rank); ++i) d.push_back(i - 1 + static_cast<int64_t>(q));
  return d;
}

double reduce_init(Reduce r, DType d) {
  bool max = r == Reduce::Max;
  switch (r) {
    case Reduce::Sum: return 0;
    case Reduce::Prod: return 1;
    default: break;
  }
  if (d == DType::Bool) return max ? 0 : 1;
  if (is_float(d)) return max ? -INFINITY : INFINITY;
  if (d == DType::I32) return max ? -2147483648.0 : 2147483647.0;
  return max ? 0 : 4294967295.0;
}

std::string_view reduce_op(Reduce r, DType d) {
  static constexpr std::string_view numeric[] = {"add", "multiply", "maximum", "minimum"};
  static constexpr std::string_view logical[] = {"or", "and", "or", "and"};
  static_assert(std::size(numeric) == static_cast<size_t>(Reduce::Min) + 1 && std::size(logical) == std::size(numeric));
  return (d == DType::Bool ? logical : numeric)[static_cast<size_t>(r)];
}

// Comparator "a goes before b" on (value, index) pairs of arg_reduce: the larger (smaller) value,
// a NaN before any number, ties to the lower index. The order is total, so the result does not
// rest on the reduction order.
Val before(Writer& w, const Val& a, const Val& b, const Val& ia, const Val& ib, bool larger) {
  Val first = w.cmp(a, b, larger ? "GT" : "LT");
  Val eq = w.cmp(a, b, "EQ");
  if (is_float(a.type.dtype)) {
    Val na = w.is_nan(a), nb = w.is_nan(b);
    first = w.bin("or", first, w.bin("and", na, w.un("not", nb)));
    eq = w.bin("or", eq, w.bin("and", na, nb));
  }
  return w.bin("or", first, w.bin("and", eq, w.cmp(ia, ib, "LT")));
}

// ui32 keys whose unsigned order is the value order of x: -0 equals +0 and every NaN is above
// +inf (tensor/gather.cpp order_key).
Val order_key(Writer& w, const Val& x) {
  switch (x.type.dtype) {
    case DType::Bool: return w.raw_convert(x, DType::U32);
    case DType::U32: return x;
    case DType::I32:
      return w.bin("xor", w.op("stablehlo.bitcast_convert", {x}, {DType::U32, x.type.shape}), w.splat(DType::U32, x.type.shape, 2147483648.0));
    default: break;
  }
  Val f = w.widen(x);
  Val z = w.sel(w.cmp0(f, "EQ"), w.like(f, 0), f);
  Val b = w.op("stablehlo.bitcast_convert", {z}, {DType::U32, f.type.shape});
  Val top = w.like(b, 2147483648.0);
  Val key = w.sel(w.cmp(b, top, "GE"), w.un("not", b), w.bin("or", b, top));
  return w.sel(w.is_nan(f), w.like(b, 4294967295.0), key);
}

// x[..., idx[..., j, ...], ...] along `axis`: idx has x's shape except along the axis.
Val take_along(Writer& w, const Val& x, const Val& idx, int64_t axis) {
  const Shape& s = idx.type.shape;
  size_t r = s.size();
  Shape col = s;
  col.push_back(1);
  std::vector<Val> coords;
  std::vector<int64_t> all;
  for (size_t d = 0; d < r; ++d) {
    coords.push_back(w.reshape(static_cast<int64_t>(d) == axis ? idx : w.iota(DType::I32, s, static_cast<int64_t>(d)), col));
    all.push_back(static_cast<int64_t>(d));
  }
  col.back() = static_cast<int64_t>(r);
  Val at = w.op("stablehlo.concatenate", coords, {DType::I32, col}, fmt::format("dimension = {} : i64", r));
  return w.op("stablehlo.gather", {x, at}, {x.type.dtype, s},
              fmt::format("dimension_numbers = #stablehlo.gather<collapsed_slice_dims = {}, start_index_map = {}, index_vector_dim = {}>, "
                          "indices_are_sorted = false, slice_sizes = {}",
                          i64_list(all), i64_list(all), r, i64_array(std::vector<int64_t>(r, 1))));
}

// Stable sort along `axis` as the eager kernel does it: one ui64 per element, (order key,
// flipped when descending) << 32 | position, sorted as plain integers; the low half gives the
// i32 positions and a gather the values (so -0 and NaN payloads survive). A single-operand sort
// also sidesteps IREE 3.13 miscompiling several multi-operand sorts that share an iota operand.
std::vector<Val> sort_with_indices(Writer& w, const Val& x, int64_t axis, bool descending, int64_t keep) {
  const Shape& s = x.type.shape;
  Val key = order_key(w, x);
  if (descending) key = w.un("not", key);
  Val pos = w.iota(DType::U32, s, axis);
  Val packed = w.bin("or", w.bin("shift_left", w.raw_convert(key, kU64), w.splat(kU64, s, 32)), w.raw_convert(pos, kU64));
  std::string cmp = w.region({kU64, kU64}, [&](Writer& r, const std::vector<Val>& a) { return std::vector<Val>{r.cmp(a[0], a[1], "LT")}; });
  Val sorted = w.op("stablehlo.sort", {packed}, packed.type, fmt::format("dimension = {} : i64, is_stable = true", axis), {cmp});
  if (keep < s[static_cast<size_t>(axis)]) {  // top_k: the first `keep` along the axis
    std::vector<int64_t> zeros(s.size(), 0), limits = s, ones(s.size(), 1);
    limits[static_cast<size_t>(axis)] = keep;
    sorted = w.op("stablehlo.slice", {sorted}, {kU64, limits},
                  fmt::format("start_indices = {}, limit_indices = {}, strides = {}", i64_array(zeros), i64_array(limits), i64_array(ones)));
  }
  Val idx = w.raw_convert(w.bin("and", sorted, w.splat(kU64, sorted.type.shape, 4294967295.0)), DType::I32);
  return {take_along(w, x, idx, axis), idx};
}

// ---- one case per IR op -------------------------------------------------------------------

std::vector<Val> lower_graph(Writer& w, const ir::Graph& g, const std::vector<Val>& params);

// stablehlo.while: both regions take the carried values as block arguments; cond returns the
// tensor<i1> its graph computes.
std::vector<Val> lower_while(Writer& w, const ir::Attrs& a, const std::vector<Val>& in) {
  std::vector<Type> ts;
  for (const Val& v : in) ts.push_back(v.type);
  std::vector<std::string> regions;
  for (const auto& r : a.regions)
    regions.push_back(w.typed_region(ts, [&](Writer& inner, const std::vector<Val>& args) { return lower_graph(inner, *r, args); }));
  return w.ops("stablehlo.while", in, ts, {}, regions);
}

// stablehlo.case: branches have no block arguments, they read the enclosing operands directly
// (names are unique in the whole function, and case regions are not isolated from above). The
// index is clamped explicitly (out of range → the last branch), not left to the backend.
std::vector<Val> lower_case(Writer& w, const ir::Graph& g, const ir::Node& n, const std::vector<Val>& in) {
  const ir::Attrs& a = n.attrs;
  Val idx = in[0];
  auto last = static_cast<double>(a.regions.size() - 1);
  Val oob = w.bin("or", w.cmp0(idx, "LT"), w.cmp(idx, w.like(idx, last), "GT"));
  idx = w.sel(oob, w.like(idx, last), idx);
  std::vector<Val> xs(in.begin() + 1, in.end());
  std::vector<std::string> regions;
  for (const auto& r : a.regions)
    regions.push_back(w.typed_region({}, [&](Writer& inner, const std::vector<Val>&) { return lower_graph(inner, *r, xs); }));
  std::vector<Type> out(g.types.begin() + n.out, g.types.begin() + n.out + n.nout);
  return w.ops("stablehlo.case", {idx}, out, {}, regions);
}

std::vector<Val> lower_node(Writer& w, const ir::Graph& g, const ir::Node& n, const std::vector<Val>& in) {
  const ir::Attrs& a = n.attrs;
  const Type& out = g.type(n.out);
  switch (n.op) {
    case Op::Parameter: break;
    case Op::Constant: return {w.constant(a.value)};
    case Op::Iota: {
      DType via = is_half(out.dtype) ? DType::F32 : out.dtype == DType::Bool ? DType::I32 : out.dtype;
      return {w.convert(w.iota(via, out.shape, a.axis), out.dtype)};
    }
    case Op::Unary: return {unary(w, a.unary, in[0])};
    case Op::Binary: return {binary(w, a.binary, in[0], in[1])};
    case Op::Convert: return {w.convert(in[0], a.dtype)};
    case Op::Select: return {w.sel(in[0], in[1], in[2])};
    case Op::BroadcastInDim: return {w.op("stablehlo.broadcast_in_dim", {in[0]}, out, "broadcast_dimensions = " + i64_array(a.dims))};
    case Op::Reshape: return {w.reshape(in[0], out.shape)};
    case Op::Transpose: return {w.op("stablehlo.transpose", {in[0]}, out, "permutation = " + i64_array(a.dims))};
    case Op::Slice:
      return {w.op("stablehlo.slice", {in[0]}, out,
                   fmt::format("start_indices = {}, limit_indices = {}, strides = {}", i64_array(a.starts), i64_array(a.limits),
                               i64_array(a.strides)))};
    case Op::Reverse: return {w.op("stablehlo.reverse", {in[0]}, out, "dimensions = " + i64_array(a.dims))};
    case Op::Concatenate: return {w.op("stablehlo.concatenate", in, out, fmt::format("dimension = {} : i64", a.axis))};
    case Op::Pad: {
      Val value = w.splat(out.dtype, {}, a.scalar);
      std::vector<int64_t> interior(a.lo.size(), 0);
      return {w.op("stablehlo.pad", {in[0], value}, out,
                   fmt::format("edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}", i64_array(a.lo), i64_array(a.hi),
                               i64_array(interior)))};
    }
    case Op::DynamicSlice:
    case Op::DynamicUpdateSlice: {
      bool update = n.op == Op::DynamicUpdateSlice;
      size_t first = update ? 2 : 1;
      const Shape& box = update ? in[1].type.shape : a.sizes;
      std::vector<Val> ops(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(first));
      for (size_t i = first; i < in.size(); ++i) ops.push_back(index_i32(w, in[i], in[0].type.shape[i - first] - box[i - first]));
      if (update) return {w.op("stablehlo.dynamic_update_slice", ops, out)};
      return {w.op("stablehlo.dynamic_slice", ops, out, "slice_sizes = " + i64_array(a.sizes))};
    }
    case Op::Reduce: {
      Val x = w.widen(in[0]);
      DType d = x.type.dtype;
      Val init = w.splat(d, {}, reduce_init(a.reduce, d));
      std::string body = w.region({d, d}, [&](Writer& r, const std::vector<Val>& v) {
        return std::vector<Val>{r.bin(reduce_op(a.reduce, d), v[0], v[1])};
      });
      Val red = w.op("stablehlo.reduce", {x, init}, {d, out.shape}, "dimensions = " + i64_array(a.dims), {body});
      return {w.convert(red, out.dtype)};
    }
    case Op::ArgReduce: {
      const Val& x = in[0];
      DType d = x.type.dtype;
      bool max = a.reduce == Reduce::Max;
      Val idx = w.iota(DType::I32, x.type.shape, a.axis);
      Val init = w.splat(d, {}, reduce_init(a.reduce, d)), init_i = w.splat(DType::I32, {}, 2147483647.0);
      std::string body = w.region({d, DType::I32, d, DType::I32}, [&](Writer& r, const std::vector<Val>& v) {
        Val take_a = before(r, v[0], v[2], v[1], v[3], max);
        return std::vector<Val>{r.sel(take_a, v[0], v[2]), r.sel(take_a, v[1], v[3])};
      });
      return {w.ops("stablehlo.reduce", {x, idx, init, init_i}, {{d, out.shape}, out}, fmt::format("dimensions = array<i64: {}>", a.axis), {body})[1]};
    }
    case Op::DotGeneral: {
      DType d = out.dtype, via = is_half(d) ? DType::F32 : d == DType::Bool ? DType::I32 : d;
      const DotDims& dd = a.dot;
      Val dot = w.op("stablehlo.dot_general", {w.convert(in[0], via), w.convert(in[1], via)}, {via, out.shape},
                     fmt::format("dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {}, rhs_batching_dimensions = {}, "
                                 "lhs_contracting_dimensions = {}, rhs_contracting_dimensions = {}>",
                                 i64_list(dd.lhs_batch), i64_list(dd.rhs_batch), i64_list(dd.lhs_contract), i64_list(dd.rhs_contract)));
      return {w.convert(dot, d)};  // bool: OR of ANDs = (count of true products) != 0
    }
    case Op::Gather:
    case Op::Scatter: {
      const Shape& xs = in[0].type.shape;
      const Shape& is = in[1].type.shape;
      size_t ax = static_cast<size_t>(a.axis);
      int64_t dim = xs[ax];
      bool gather = n.op == Op::Gather;
      // i32 start indices [..., 1]. Gather clamps them into [0, dim). Scatter sends every
      // out-of-range index to an extra slot `dim` that is sliced off afterwards (IREE 3.13 fails
      // at run time on out-of-range scatter indices instead of skipping them).
      Val idx = index_i32(w, in[1], dim);
      if (gather) {
        idx = w.bin("minimum", w.bin("maximum", idx, w.like(idx, 0)), w.like(idx, static_cast<double>(std::max<int64_t>(dim - 1, 0))));
      } else if (in[1].type.dtype == DType::I32) {
        Val oob = w.bin("or", w.cmp0(idx, "LT"), w.cmp(idx, w.like(idx, static_cast<double>(dim)), "GE"));
        idx = w.sel(oob, w.like(idx, static_cast<double>(dim)), idx);
      }
      Shape starts_shape = is;
      starts_shape.push_back(1);
      Val starts = w.reshape(idx, starts_shape);
      std::string offset = i64_list(take_offset_dims(xs.size(), a.axis, is.size()));
      std::string axis = fmt::format("[{}]", a.axis);
      if (gather) {
        Shape sizes = xs;
        sizes[ax] = 1;
        return {w.op("stablehlo.gather", {in[0], starts}, out,
                     fmt::format("dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = {}, start_index_map = {}, "
                                 "index_vector_dim = {}>, indices_are_sorted = false, slice_sizes = {}",
                                 offset, axis, axis, is.size(), i64_array(sizes)))};
      }
      bool add = a.scatter == ScatterMode::Add;
      Val x = add ? w.widen(in[0]) : in[0], upd = add ? w.widen(in[2]) : in[2];
      DType d = x.type.dtype;
      std::vector<int64_t> zeros(xs.size(), 0), hi(xs.size(), 0), strides(xs.size(), 1);
      hi[ax] = 1;
      Shape padded = xs;
      padded[ax] += 1;
      Val xp = w.op("stablehlo.pad", {x, w.splat(d, {}, 0)}, {d, padded},
                    fmt::format("edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}", i64_array(zeros), i64_array(hi),
                                i64_array(zeros)));
      std::string body = w.region({d, d}, [&](Writer& r, const std::vector<Val>& v) {
        return std::vector<Val>{add ? r.bin(d == DType::Bool ? "or" : "add", v[0], v[1]) : v[1]};
      });
      Val sc = w.op("stablehlo.scatter", {xp, starts, upd}, xp.type,
                    fmt::format("indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = {}, "
                                "inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = {}>, unique_indices = false",
                                offset, axis, axis, is.size()),
                    {body});
      Val back = w.op("stablehlo.slice", {sc}, x.type,
                      fmt::format("start_indices = {}, limit_indices = {}, strides = {}", i64_array(zeros), i64_array(xs), i64_array(strides)));
      return {w.convert(back, out.dtype)};
    }
    case Op::Sort: return sort_with_indices(w, in[0], a.axis, a.descending, in[0].type.shape[static_cast<size_t>(a.axis)]);
    case Op::TopK: return sort_with_indices(w, in[0], static_cast<int64_t>(in[0].type.shape.size()) - 1, true, a.k);
    case Op::While: return lower_while(w, a, in);
    case Op::Case: return lower_case(w, g, n, in);
    case Op::OptimizationBarrier: {
      std::vector<Type> ts;
      for (const Val& v : in) ts.push_back(v.type);
      return w.ops("stablehlo.optimization_barrier", in, ts);
    }
    case Op::Call: return lower_graph(w, *a.regions[0], in);  // a finished trace has none (inlined); a hand-built graph may
    case Op::Softmax: case Op::SoftmaxGrad: case Op::Gelu: case Op::GeluGrad: {  // composites: their expansion into the ops above
      std::vector<Type> types;
      for (const Val& v : in) types.push_back(v.type);
      return lower_graph(w, ir::expand(n, types).graph, in);
    }
    case Op::AllReduce: {  // one cross-replica sum per operand; the ranks of this job are the replicas
      std::vector<std::string> ranks;
      for (int r = 0; r < dist::world_size(); ++r) ranks.push_back(std::to_string(r));
      std::string groups = fmt::format("replica_groups = dense<[[{}]]> : tensor<1x{}xi64>", fmt::join(ranks, ", "), ranks.size());
      std::vector<Val> r;
      for (const Val& x : in) {
        DType d = x.type.dtype;
        std::string body = w.region({d, d}, [&](Writer& b, const std::vector<Val>& v) { return std::vector<Val>{b.bin("add", v[0], v[1])}; });
        r.push_back(w.op("stablehlo.all_reduce", {x}, x.type, groups, {body}));
      }
      return r;
    }
  }
  throw SheafError(fmt::format("internal: StableHLO emission of {}", ir::op_name(n.op)));
}

// Lowers the nodes of `g` (a function body or a region) with its parameters bound to `params`;
// returns the values of `g.results`.
std::vector<Val> lower_graph(Writer& w, const ir::Graph& g, const std::vector<Val>& params) {
  std::vector<Val> vals(g.types.size());
  for (size_t i = 0; i < g.params.size(); ++i) vals[static_cast<size_t>(g.params[i])] = params[i];
  for (const ir::Node& n : g.nodes) {
    if (n.op == Op::Parameter) continue;
    std::vector<Val> in;
    for (int32_t v : n.in) in.push_back(vals[static_cast<size_t>(v)]);
    std::vector<Val> res = lower_node(w, g, n, in);
    for (int32_t k = 0; k < n.nout; ++k) vals[static_cast<size_t>(n.out + k)] = res[static_cast<size_t>(k)];
  }
  std::vector<Val> rets;
  for (int32_t r : g.results) rets.push_back(vals[static_cast<size_t>(r)]);
  return rets;
}

void emit_function(const ir::Graph& g, std::string& out) {
  ir::verify(g);
  std::vector<Val> args;
  std::vector<Type> params, results;
  std::vector<std::string> decl;
  for (size_t i = 0; i < g.params.size(); ++i) {
    int32_t v = g.params[i];
    args.push_back({fmt::format("%arg{}", i), g.type(v)});
    params.push_back(g.type(v));
    decl.push_back(fmt::format("%arg{}: {}", i, tensor_type(g.type(v))));
  }
  for (int32_t r : g.results) results.push_back(g.type(r));
  std::string body;
  int counter = 0;
  Writer w(body, 2, counter);
  w.ret("func.return", lower_graph(w, g, args));
  out += "  \"func.func\"() ({\n";
  if (!decl.empty()) out += fmt::format("  ^bb0({}):\n", fmt::join(decl, ", "));
  out += body;
  out += fmt::format("  }}) {{function_type = {} -> {}, sym_name = {}}} : () -> ()\n", type_list(params, true), type_list(results, false),
                     mlir_string(g.name));
}

}  // namespace

std::string emit_stablehlo(const std::vector<const ir::Graph*>& fns) {
  std::set<std::string> names;
  std::string out = "\"builtin.module\"() ({\n";
  for (const ir::Graph* g : fns) {
    if (!names.insert(g->name).second) throw SheafError(fmt::format("StableHLO emission: two functions are named '{}'", g->name));
    emit_function(*g, out);
  }
  return out + "}) : () -> ()\n";
}

std::string stablehlo_name(const ir::Node& n) {
  switch (n.op) {
    case ir::Op::Unary: return fmt::format("stablehlo.{}", kUnary[static_cast<size_t>(n.attrs.unary)]);
    case ir::Op::Binary: {
      const BinarySpelling& b = kBinary[static_cast<size_t>(n.attrs.binary)];
      if (!b.dir.empty()) return fmt::format("stablehlo.compare ({})", b.dir);
      if (!b.op.empty()) return fmt::format("stablehlo.{}", b.op);
      return n.attrs.binary == Binary::Rem ? "stablehlo.remainder" : "stablehlo.divide (floor)";
    }
    case ir::Op::Reduce: return fmt::format("stablehlo.reduce ({})", ir::reduce_name(n.attrs.reduce));
    case ir::Op::Parameter: return "an argument";
    default: {
      std::string_view s = kOpSpelling[static_cast<size_t>(n.op)];
      return s.empty() ? std::string(ir::op_name(n.op)) : fmt::format("stablehlo.{}", s);
    }
  }
}

}  // namespace sheaf::emit
