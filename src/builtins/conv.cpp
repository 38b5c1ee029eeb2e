// builtins/conv.cpp — channels-first convolutions (SPEC §5.9): conv1d and conv2d.
// Lowered to primitives by im2col, laid out so that every product is a plain 2-D matrix product
// (a native sgemm in the CPU backend):
//   x [N C H W], w [O C KH KW] → cols [C·KH·KW, N·OH·OW]; y = w [O, C·KH·KW] · cols → [O, N·OH·OW]
//   → [N O OH OW] (a transposed view)
// and so are the products of the gradient: d cols = wᵀ · dy and dw = dy · colsᵀ, with dy as
// [O, N·OH·OW] (one copy of dy).
// conv1d is conv2d with H = KH = 1.
//
// Windows: x is padded and each spatial axis split into stride phases (axis = [rows, s], a view),
// so that the window of kernel offset i reads rows i/s … i/s + out - 1 of phase i % s: every
// window is a stride-1 slice, whose gradient is a pad (never a scatter), whatever the stride.
// Columns, traced: in two elementwise loops, first the KW column shifts of x (each padded to
// [.., 1 of KW, ..] at j and summed), then the KH row shifts of that; each loop sums only KW or
// KH shifted reads along an outer axis, so its inner loop stays a contiguous, vectorised run over
// a row of positions. The gradient is two such loops in reverse order (the slices are free views),
// the last, over the size of x, shifting along its inner axis.
// (A concatenation of the K windows is a host step that copies every window first, and one loop
// summing all K padded windows does not vectorise.) Eagerly, on host tensors, the K windows are
// concatenated: one pass.
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/promote.hpp"
#include "eval/tensor_args.hpp"
#include "tensor/dot.hpp"
#include "tensor/elementwise.hpp"
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

// Rows per stride phase of one padded spatial axis: x after its low padding and every row a
// window reads (the last at s·(out-1) + k-1).
int64_t phase_rows(int64_t n, int64_t k, const Window& win) {
  return std::max((n + win.pad_lo + win.stride - 1) / win.stride, (k - 1) / win.stride + win.out);
}

// x [N C H W], w [O C KH KW] (already promoted to one dtype).
Tensor conv2d(const Tensor& x, const Tensor& w, const Window& wh, const Window& ww) {
  int64_t n = x.dim(0), c = x.dim(1), o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  int64_t oh = wh.out, ow = ww.out, sh = wh.stride, sw = ww.stride;
  int64_t qh = phase_rows(x.dim(2), kh, wh), qw = phase_rows(x.dim(3), kw, ww);
  Tensor xp = pad(x, 0, {0, 0, wh.pad_lo, ww.pad_lo}, {0, 0, qh * sh - x.dim(2) - wh.pad_lo, qw * sw - x.dim(3) - ww.pad_lo});
  // planes [N C SH SW QH QW]: xp[n, c, s_h·r + ph, s_w·q + pw] = planes[n, c, ph, pw, r, q] (a view)
  Tensor planes = transpose(reshape(xp, {n, c, qh, sh, qw, sw}), {0, 1, 3, 5, 2, 4});
  Tensor cols;  // [C KH KW N OH OW]: cols[c, i, j, n, oh, ow] = planes[n, c, i % sh, j % sw, oh + i / sh, ow + j / sw]
  if (x.is_symbolic()) {
    int64_t rows = oh + (kh - 1) / sh;
    Tensor a;  // [C KW N SH ROWS OW]: a[c, j, n, ph, r, ow] = planes[n, c, ph, j % sw, r, ow + j / sw]
    for (int64_t j = 0; j < kw; ++j) {
      Tensor s = slice(planes, {0, 0, 0, j % sw, 0, j / sw}, {n, c, sh, j % sw + 1, rows, j / sw + ow}, {1, 1, 1, 1, 1, 1});
      s = reshape(transpose(reshape(s, {n, c, sh, rows, ow}), {1, 0, 2, 3, 4}), {c, 1, n, sh, rows, ow});
      Tensor t = kw == 1 ? s : pad(s, 0, {0, j, 0, 0, 0, 0}, {0, kw - 1 - j, 0, 0, 0, 0});
      a = j == 0 ? t : binary(Binary::Add, a, t);
    }
    for (int64_t i = 0; i < kh; ++i) {  // cols[c, i, j, n, oh, ow] = a[c, j, n, i % sh, oh + i / sh, ow]
      Tensor s = slice(a, {0, 0, 0, i % sh, i / sh, 0}, {c, kw, n, i % sh + 1, i / sh + oh, ow}, {1, 1, 1, 1, 1, 1});
      s = reshape(s, {c, 1, kw, n, oh, ow});
      Tensor t = kh == 1 ? s : pad(s, 0, {0, i, 0, 0, 0, 0}, {0, kh - 1 - i, 0, 0, 0, 0});
      cols = i == 0 ? t : binary(Binary::Add, cols, t);
    }
  } else {
    std::vector<Tensor> ws;
    ws.reserve(static_cast<size_t>(kh * kw));
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        Tensor s = slice(planes, {0, 0, i % sh, j % sw, i / sh, j / sw}, {n, c, i % sh + 1, j % sw + 1, i / sh + oh, j / sw + ow},
                         {1, 1, 1, 1, 1, 1});
        ws.push_back(reshape(transpose(reshape(s, {n, c, oh, ow}), {1, 0, 2, 3}), {c, 1, n, oh, ow}));
      }
    cols = concatenate(ws, 1);  // [C KH·KW N OH OW]
  }
  int64_t ck = c * kh * kw;
  Tensor y = dot_general(reshape(w, {o, ck}), reshape(cols, {ck, n * oh * ow}), DotDims{{}, {}, {1}, {0}});  // [O, N·OH·OW]
  return transpose(reshape(y, {o, n, oh, ow}), {1, 0, 2, 3});
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
  for (int64_t d = 2; d < rank; ++d)
    if (w.dim(d) == 0) throw SheafError(fmt::format("{}: the kernel {} is empty", a.name, type_str(w)), a.site);
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
