// tensor/elementwise.cpp — elementwise kernels: contiguous fast paths that the compiler
// vectorises, and a strided loop for broadcasting (innermost axis specialised by stride).
#include "tensor/elementwise.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "base/error.hpp"
#include "tensor/recorder.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// Runs f(out_index, a_offset, b_offset) over a broadcast iteration space, innermost axis last.
template <typename F>
void for_each_broadcast(const Shape& shape, const std::vector<int64_t>& sa, const std::vector<int64_t>& sb, F f) {
  int64_t total = shape_numel(shape);
  if (total == 0) return;
  size_t r = shape.size();
  if (r == 0) {
    f(0, 0, 0, 1, 0, 0);
    return;
  }
  int64_t inner = shape[r - 1], ia = sa[r - 1], ib = sb[r - 1];
  Odometer<2> outer(shape.data(), r - 1, {sa.data(), sb.data()});
  for (int64_t out = 0; out < total; out += inner) {
    f(out, outer[0], outer[1], inner, ia, ib);
    outer.next();
  }
}

template <typename T>
bool apply_compare(Binary op, T x, T y) {
  switch (op) {
    case Binary::Eq: return x == y;
    case Binary::Ne: return x != y;
    case Binary::Lt: return x < y;
    case Binary::Le: return x <= y;
    case Binary::Gt: return x > y;
    case Binary::Ge: return x >= y;
    default: return false;
  }
}

template <typename T, typename R, typename F>
void run_binary(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.mutable_data<R>();
  if (a.shape() == b.shape()) {  // contiguous fast path
    int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  auto sa = broadcast_strides(a.shape(), out.shape()), sb = broadcast_strides(b.shape(), out.shape());
  for_each_broadcast(out.shape(), sa, sb, [&](int64_t o, int64_t oa, int64_t ob, int64_t n, int64_t ia, int64_t ib) {
    R* dst = po + o;
    const T* x = pa + oa;
    const T* y = pb + ob;
    if (ia == 1 && ib == 1) {
      for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i], y[i]);
    } else if (ia == 1 && ib == 0) {
      T yv = *y;
      for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i], yv);
    } else if (ia == 0 && ib == 1) {
      T xv = *x;
      for (int64_t i = 0; i < n; ++i) dst[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = f(x[i * ia], y[i * ib]);
    }
  });
}

// n copies of the element of width sizeof(W) at `src`, written from `dst` on.
template <typename W>
void fill_with(std::byte* dst, const std::byte* src, int64_t n) {
  W v;
  std::memcpy(&v, src, sizeof v);
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<size_t>(i) * sizeof v, &v, sizeof v);
}

// Calls f with a value of the C++ element type of an f32/i32/u32/bool tensor.
template <typename F>
decltype(auto) dispatch(DType d, F f) {
  switch (d) {
    case DType::F32: return f(float{});
    case DType::I32: return f(int32_t{});
    case DType::U32: return f(uint32_t{});
    case DType::Bool: return f(uint8_t{});
    default: throw SheafError("internal: no kernel for " + std::string(dtype_name(d)));
  }
}

float apply_unary(Unary op, float x) {
  switch (op) {
    case Unary::Neg: return -x;
    case Unary::Abs: return std::fabs(x);
    case Unary::Exp: return std::exp(x);
    case Unary::Log: return std::log(x);
    case Unary::Sqrt: return std::sqrt(x);
    case Unary::Rsqrt: return 1.0f / std::sqrt(x);
    case Unary::Sin: return std::sin(x);
    case Unary::Cos: return std::cos(x);
    case Unary::Tan: return std::tan(x);
    case Unary::Tanh: return std::tanh(x);
    case Unary::Floor: return std::floor(x);
    case Unary::Ceil: return std::ceil(x);
    case Unary::Round: return std::round(x);
    case Unary::Sign: return x > 0 ? 1.0f : (x < 0 ? -1.0f : x);
    case Unary::Logistic: return 1.0f / (1.0f + std::exp(-x));
    case Unary::Not: return x == 0;
  }
  return x;
}

// An operand of a recorded elementwise op, broadcast to `shape`. A concrete operand that needs
// broadcasting becomes a constant first (so the graph broadcasts it, not the host); one that
// already has the shape is passed as it is, so that a concrete rank-0 operand still counts as a
// host scalar (weak) for the result's typing.
Tensor broadcast_operand(const Tensor& t, const Shape& shape) {
  return t.shape() == shape ? t : broadcast_to(ir::recorder().lift(t), shape);
}

}  // namespace

bool is_comparison(Binary op) { return op >= Binary::Eq && op <= Binary::Ge; }

Tensor convert(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  if (x.is_symbolic()) return ir::record1(ir::Op::Convert, {x}, {.dtype = to});
  Tensor out = Tensor::empty(to, x.shape());
  int64_t n = x.numel();
  if (x.dtype() == DType::F32 && to == DType::BF16) {
    const float* s = x.data<float>();
    uint16_t* d = out.mutable_data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) d[i] = float_to_bf16(s[i]);
  } else if (x.dtype() == DType::BF16 && to == DType::F32) {
    const uint16_t* s = x.data<uint16_t>();
    float* d = out.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_float(s[i]);
  } else if (x.dtype() == DType::I32 && to == DType::F32) {
    const int32_t* s = x.data<int32_t>();
    float* d = out.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
  } else if (x.dtype() == DType::U32 && to == DType::F32) {
    const uint32_t* s = x.data<uint32_t>();
    float* d = out.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
  } else if (x.dtype() == DType::Bool && to == DType::F32) {
    const uint8_t* s = x.data<uint8_t>();
    float* d = out.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) d[i] = s[i] ? 1.0f : 0.0f;
  } else {
    for (int64_t i = 0; i < n; ++i) out.set(i, x.get(i));
  }
  return out;
}

Tensor unary(Unary op, const Tensor& x) {
  if (x.is_symbolic()) return ir::record1(ir::Op::Unary, {x}, {.unary = op});
  if (is_half(x.dtype())) return convert(unary(op, convert(x, DType::F32)), x.dtype());
  Tensor out = Tensor::empty(x.dtype(), x.shape());
  int64_t n = x.numel();
  if (x.dtype() == DType::F32) {
    const float* s = x.data<float>();
    float* d = out.mutable_data<float>();
    switch (op) {  // the common ones as plain loops so they vectorise
      case Unary::Neg: for (int64_t i = 0; i < n; ++i) d[i] = -s[i]; break;
      case Unary::Abs: for (int64_t i = 0; i < n; ++i) d[i] = std::fabs(s[i]); break;
      case Unary::Exp: for (int64_t i = 0; i < n; ++i) d[i] = std::exp(s[i]); break;
      case Unary::Sqrt: for (int64_t i = 0; i < n; ++i) d[i] = std::sqrt(s[i]); break;
      default: for (int64_t i = 0; i < n; ++i) d[i] = apply_unary(op, s[i]);
    }
    return out;
  }
  if (op == Unary::Not) {
    for (int64_t i = 0; i < n; ++i) {
      double v = x.get(i);
      out.set(i, x.dtype() == DType::Bool  ? v == 0
                 : x.dtype() == DType::U32 ? static_cast<double>(~static_cast<uint32_t>(v))
                                           : static_cast<double>(~static_cast<int32_t>(v)));
    }
    return out;
  }
  for (int64_t i = 0; i < n; ++i) {
    double v = x.get(i);
    switch (op) {
      case Unary::Neg: out.set(i, x.dtype() == DType::U32 ? static_cast<double>(static_cast<uint32_t>(-static_cast<int64_t>(v))) : -v); break;
      case Unary::Abs: out.set(i, std::fabs(v)); break;
      case Unary::Sign: out.set(i, v > 0 ? 1 : (v < 0 ? -1 : 0)); break;
      case Unary::Floor: case Unary::Ceil: case Unary::Round: out.set(i, v); break;
      default: out.set(i, apply_unary(op, static_cast<float>(v)));
    }
  }
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b) {
  if (a.is_symbolic() || b.is_symbolic()) {
    auto shape = broadcast_shapes(a.shape(), b.shape());
    if (!shape) throw SheafError(fmt::format("cannot broadcast {} and {}", type_str(a), type_str(b)));
    return ir::record1(ir::Op::Binary, {broadcast_operand(a, *shape), broadcast_operand(b, *shape)}, {.binary = op});
  }
  if (a.dtype() != b.dtype())
    throw SheafError(fmt::format("internal: binary op on {} and {}", dtype_name(a.dtype()), dtype_name(b.dtype())));
  auto shape = broadcast_shapes(a.shape(), b.shape());
  if (!shape) throw SheafError(fmt::format("cannot broadcast {} with {}", type_str(a), type_str(b)));
  if (is_half(a.dtype())) {
    Tensor r = binary(op, convert(a, DType::F32), convert(b, DType::F32));
    return is_comparison(op) ? r : convert(r, a.dtype());
  }
  bool cmp = is_comparison(op);
  Tensor out = Tensor::empty(cmp ? DType::Bool : a.dtype(), *shape);
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (cmp) {
      run_binary<T, uint8_t>(a, b, out, [op](T x, T y) { return static_cast<uint8_t>(apply_compare(op, x, y)); });
    } else if (a.dtype() == DType::Bool) {
      run_binary<T, uint8_t>(a, b, out, [op](T x, T y) {
        switch (op) {
          case Binary::And: case Binary::Mul: case Binary::Min: return static_cast<uint8_t>(x && y);
          case Binary::Or: case Binary::Add: case Binary::Max: return static_cast<uint8_t>(x || y);
          case Binary::Xor: case Binary::Ne: return static_cast<uint8_t>(x != y);
          default: return static_cast<uint8_t>(0);
        }
      });
    } else if (op == Binary::Add) {
      run_binary<T, T>(a, b, out, [](T x, T y) { return apply_binary(Binary::Add, x, y); });
    } else if (op == Binary::Mul) {
      run_binary<T, T>(a, b, out, [](T x, T y) { return apply_binary(Binary::Mul, x, y); });
    } else if (op == Binary::Sub) {
      run_binary<T, T>(a, b, out, [](T x, T y) { return apply_binary(Binary::Sub, x, y); });
    } else {
      run_binary<T, T>(a, b, out, [op](T x, T y) { return apply_binary(op, x, y); });
    }
  });
  return out;
}

Tensor select(const Tensor& cond, const Tensor& a, const Tensor& b) {
  auto ab = broadcast_shapes(a.shape(), b.shape());
  auto shape = ab ? broadcast_shapes(cond.shape(), *ab) : std::nullopt;
  if (!shape) throw SheafError(fmt::format("cannot broadcast {}, {} and {}", type_str(cond), type_str(a), type_str(b)));
  if (cond.is_symbolic() || a.is_symbolic() || b.is_symbolic()) {
    return ir::record1(ir::Op::Select, {broadcast_operand(convert(cond, DType::Bool), *shape), broadcast_operand(a, *shape),
                                        broadcast_operand(b, *shape)}, {});
  }
  Tensor c = convert(cond, DType::Bool);
  Tensor x = broadcast_to(a, *shape), y = broadcast_to(b, *shape), cc = broadcast_to(c, *shape);
  Tensor out = Tensor::empty(a.dtype(), *shape);
  const uint8_t* pc = cc.data<uint8_t>();
  auto pick = [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.mutable_data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = pc[i] ? px[i] : py[i];
  };
  switch (dtype_size(a.dtype())) {  // select moves bits: only the element size matters
    case 1: pick(uint8_t{}); break;
    case 2: pick(uint16_t{}); break;
    default: pick(uint32_t{}); break;
  }
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  auto b = broadcast_shapes(x.shape(), shape);
  if (!b || *b != shape) throw SheafError(fmt::format("cannot broadcast {} to [{}]", type_str(x), shape_str(shape)));
  if (x.is_symbolic()) {
    ir::Attrs a;
    for (int64_t i = 0; i < x.rank(); ++i) a.dims.push_back(static_cast<int64_t>(shape.size()) - x.rank() + i);
    ir::Type t{x.dtype(), shape};
    return ir::record1(ir::Op::BroadcastInDim, {x}, a, &t);
  }
  Tensor out = Tensor::empty(x.dtype(), shape);
  size_t es = dtype_size(x.dtype());
  auto sx = broadcast_strides(x.shape(), shape);
  std::vector<int64_t> zero(shape.size(), 0);
  for_each_broadcast(shape, sx, zero, [&](int64_t o, int64_t ox, int64_t, int64_t n, int64_t ix, int64_t) {
    std::byte* dst = out.mutable_bytes() + static_cast<size_t>(o) * es;
    const std::byte* src = x.bytes() + static_cast<size_t>(ox) * es;
    if (ix == 1) {
      std::memcpy(dst, src, static_cast<size_t>(n) * es);
    } else {  // one element repeated n times (a scalar, or a column): a fill of its width
      switch (es) {
        case 1: fill_with<uint8_t>(dst, src, n); break;
        case 2: fill_with<uint16_t>(dst, src, n); break;
        case 4: fill_with<uint32_t>(dst, src, n); break;
        case 8: fill_with<uint64_t>(dst, src, n); break;
        default:
          for (int64_t i = 0; i < n; ++i) std::memcpy(dst + static_cast<size_t>(i) * es, src, es);
      }
    }
  });
  return out;
}

}  // namespace sheaf
