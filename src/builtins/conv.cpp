// builtins/conv.cpp — channels-first convolutions (SPEC §5.9): conv1d and conv2d.
// Lowered to primitives by im2col: pad x, take one strided window slice per kernel offset,
// stack them into columns, and contract with the weights in one dot_general.
//   x [N C H W], w [O C KH KW] → cols [N, C·KH·KW, OH·OW] → out [N O OH OW]
// conv1d is conv2d with H = KH = 1.
#include "builtins/args.hpp"
#include "builtins/promote.hpp"
#include "builtins/registry.hpp"
#include "builtins/tensor_args.hpp"
#include "tensor/dot.hpp"
#include "tensor/layout.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

struct Window {
  int64_t stride, pad_lo, pad_hi, out;
};

// One spatial axis: size n, kernel k; padding int, :same or :valid.
Window window(const CallArgs& a, int64_t n, int64_t k, int64_t stride, const Value& padding) {
  if (stride < 1) throw SheafError(fmt::format("{}: stride must be ≥ 1, got {}", a.name, stride), a.site);
  Window w{stride, 0, 0, 0};
  if (padding.is(Kind::Keyword) && padding.as_str() == "same") {
    w.out = (n + stride - 1) / stride;
    int64_t total = std::max<int64_t>((w.out - 1) * stride + k - n, 0);
    w.pad_lo = total / 2;
    w.pad_hi = total - w.pad_lo;
    return w;
  }
  if (!(padding.is(Kind::Keyword) && padding.as_str() == "valid")) {
    auto p = number_of(padding);
    if (!p || *p < 0 || *p != static_cast<double>(static_cast<int64_t>(*p)))
      throw SheafError(fmt::format("{}: :padding must be a non-negative integer, :same or :valid", a.name), a.site);
    w.pad_lo = w.pad_hi = static_cast<int64_t>(*p);
  }
  int64_t span = n + w.pad_lo + w.pad_hi - k;
  if (span < 0)
    throw SheafError(fmt::format("{}: kernel of size {} is larger than the padded input of size {}", a.name, k, n + w.pad_lo + w.pad_hi), a.site);
  w.out = span / stride + 1;
  return w;
}

// An int or a 2-list option (stride, padding) for axis i of 2.
Value per_axis(const Value* v, size_t i, Value fallback) {
  if (!v) return fallback;
  if (v->is_list() && v->as_list().items.size() == 2) return v->as_list().items[i];
  if (v->is(Kind::Tensor) && v->as_tensor().rank() == 1 && v->as_tensor().numel() == 2) return scalar_value(v->as_tensor(), static_cast<int64_t>(i));
  return *v;
}

// x [N C H W], w [O C KH KW] (already promoted to one dtype).
Tensor conv2d(const Tensor& x, const Tensor& w, const Window& wh, const Window& ww) {
  int64_t n = x.dim(0), c = x.dim(1), o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  Tensor xp = pad(x, 0, {0, 0, wh.pad_lo, ww.pad_lo}, {0, 0, wh.pad_hi, ww.pad_hi});
  std::vector<Tensor> cols;  // one [N C OH OW] window per kernel offset
  cols.reserve(static_cast<size_t>(kh * kw));
  for (int64_t i = 0; i < kh; ++i)
    for (int64_t j = 0; j < kw; ++j) {
      Tensor s = slice(xp, {0, 0, i, j}, {n, c, i + wh.stride * (wh.out - 1) + 1, j + ww.stride * (ww.out - 1) + 1},
                       {1, 1, wh.stride, ww.stride});
      cols.push_back(reshape(s, {n, c, 1, wh.out * ww.out}));
    }
  Tensor stacked = reshape(concatenate(cols, 2), {n, c * kh * kw, wh.out * ww.out});  // [N, C·K, P]
  Tensor wm = reshape(w, {o, c * kh * kw});                                          // [O, C·K]
  Tensor y = dot_general(stacked, wm, DotDims{{}, {}, {1}, {1}});                      // [N, P, O]
  return reshape(transpose(y, {0, 2, 1}), {n, o, wh.out, ww.out});
}

Value conv(const CallArgs& a, int spatial) {
  Options opt = parse_options(a, {"stride", "padding"});
  if (opt.positional.size() != 2)
    throw SheafError(fmt::format("{}: expected (conv{}d x w [:stride s] [:padding p])", a.name, spatial), a.site);
  auto xo = as_operand(opt.positional[0]), wo = as_operand(opt.positional[1]);
  if (!xo || !wo) throw SheafError(fmt::format("{}: x and w must be tensors", a.name), a.site);
  auto operands = promoted(*xo, *wo, a.name);  // (not a structured binding: captured below)
  const Tensor& x = operands.first;
  const Tensor& w = operands.second;
  int64_t rank = spatial + 2;
  if (x.rank() != rank || w.rank() != rank)
    throw SheafError(fmt::format("{}: expected x [N C {}] and w [O C {}], got {} and {}", a.name, spatial == 1 ? "W" : "H W",
                                 spatial == 1 ? "K" : "KH KW", type_str(x), type_str(w)),
                     a.site);
  if (x.dim(1) != w.dim(1))
    throw SheafError(fmt::format("{}: input has {} channels but the kernel expects {} ({} and {})", a.name, x.dim(1), w.dim(1),
                                 type_str(x), type_str(w)),
                     a.site);
  const Value* stride = opt.get("stride");
  const Value* padding = opt.get("padding");
  auto stride_of = [&](size_t i) {
    auto s = number_of(per_axis(stride, i, Value::integer(1)));
    if (!s) throw SheafError(fmt::format("{}: :stride must be an integer or a 2-list", a.name), a.site);
    return static_cast<int64_t>(*s);
  };
  return run_primitive(a, [&] {
    if (spatial == 1) {
      Window ww = window(a, x.dim(2), w.dim(2), stride_of(0), per_axis(padding, 0, Value::integer(0)));
      Window wh{1, 0, 0, 1};
      Tensor y = conv2d(reshape(x, {x.dim(0), x.dim(1), 1, x.dim(2)}), reshape(w, {w.dim(0), w.dim(1), 1, w.dim(2)}), wh, ww);
      return Value::tensor(reshape(y, {y.dim(0), y.dim(1), y.dim(3)}));
    }
    Window wh = window(a, x.dim(2), w.dim(2), stride_of(0), per_axis(padding, 0, Value::integer(0)));
    Window ww = window(a, x.dim(3), w.dim(3), stride_of(1), per_axis(padding, 1, Value::integer(0)));
    return Value::tensor(conv2d(x, w, wh, ww));
  });
}

Value b_conv1d(Interp&, const CallArgs& a) { return conv(a, 1); }
Value b_conv2d(Interp&, const CallArgs& a) { return conv(a, 2); }

const BuiltinDef kConv[] = {
    {"conv1d", "(conv1d x w [:stride s] [:padding p])",
     "1-D convolution, channels first: x [N C W], w [O C K] → [N O W']; padding an int, :same or :valid.", b_conv1d, 2, 6},
    {"conv2d", "(conv2d x w [:stride s] [:padding p])",
     "2-D convolution, channels first: x [N C H W], w [O C KH KW] → [N O H' W']; stride/padding an int or a 2-list.", b_conv2d, 2, 6},
};

}  // namespace

std::span<const BuiltinDef> conv_builtins() { return kConv; }

}  // namespace sheaf
