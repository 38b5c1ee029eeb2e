// builtins/conv.cpp — channels-first convolutions (SPEC §5.9): conv1d and conv2d.
// Lowered to primitives by im2col, laid out so that every product is a plain 2-D matrix
// product (a native one in the CPU backend):
//   x [N C H W], w [O C KH KW] → cols [N·OH·OW, C·KH·KW] · w [O, C·KH·KW]ᵀ → [N·OH·OW, O]
//   → reshape/transpose → [N O OH OW]
// The gradients are products of the same kind: d cols = dy [N·P, O] · w, dw = dyᵀ · cols.
// conv1d is conv2d with H = KH = 1.
//
// Windows: x is padded, then each spatial axis is split into stride phases ([q, s]); window
// offset i of an axis reads rows i/s … i/s + out - 1 of phase i%s. Every window is then a
// stride-1 slice (a view), whose gradient is a pad: no scatter, whatever the stride.
// Columns: in a trace, the window of offset (i, j) is padded along the kernel axes to [.., 1, 1]
// at (i, j) and the K windows are summed, an elementwise loop (and its gradient slices, free
// views); on host tensors they are concatenated, one pass.
#include "builtins/args.hpp"
#include "builtins/promote.hpp"
#include "builtins/registry.hpp"
#include "builtins/tensor_args.hpp"
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

// Rows q·s of one padded spatial axis (q per stride phase): x after its low padding, and every
// row a window reads (the last at s·(out-1) + k-1). Rows past the requested padding read by no
// window are dropped; padding beyond it, when x's last rows fill no phase, only completes q·s.
int64_t phase_rows(int64_t n, int64_t k, const Window& win) {
  return std::max((n + win.pad_lo + win.stride - 1) / win.stride, (k - 1) / win.stride + win.out);
}

// x [N C H W], w [O C KH KW] (already promoted to one dtype).
Tensor conv2d(const Tensor& x, const Tensor& w, const Window& wh, const Window& ww) {
  int64_t n = x.dim(0), c = x.dim(1), o = w.dim(0), kh = w.dim(2), kw = w.dim(3);
  int64_t oh = wh.out, ow = ww.out, sh = wh.stride, sw = ww.stride;
  int64_t qh = phase_rows(x.dim(2), kh, wh), qw = phase_rows(x.dim(3), kw, ww);
  Tensor xp = pad(x, 0, {0, 0, wh.pad_lo, ww.pad_lo}, {0, 0, qh * sh - x.dim(2) - wh.pad_lo, qw * sw - x.dim(3) - ww.pad_lo});
  Tensor phases = reshape(xp, {n, c, qh, sh, qw, sw});
  // The window of kernel offset (i, j) as [C N OH OW] (a view of xp).
  auto window_at = [&](int64_t i, int64_t j) {
    Tensor s = slice(phases, {0, 0, i / sh, i % sh, j / sw, j % sw}, {n, c, i / sh + oh, i % sh + 1, j / sw + ow, j % sw + 1},
                     {1, 1, 1, 1, 1, 1});
    return transpose(reshape(s, {n, c, oh, ow}), {1, 0, 2, 3});
  };
  Tensor cols;  // [C KH KW N OH OW]
  if (x.is_symbolic() && !getenv("CONV_CAT")) {
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) {
        Tensor t = pad(reshape(window_at(i, j), {c, 1, 1, n, oh, ow}), 0, {0, i, j, 0, 0, 0}, {0, kh - 1 - i, kw - 1 - j, 0, 0, 0});
        cols = i + j == 0 ? t : binary(Binary::Add, cols, t);
      }
  } else {
    std::vector<Tensor> ws;
    ws.reserve(static_cast<size_t>(kh * kw));
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) ws.push_back(reshape(window_at(i, j), {c, 1, n, oh, ow}));
    cols = concatenate(ws, 1);  // [C K N OH OW]
  }
  int64_t ck = c * kh * kw;
  Tensor y = dot_general(reshape(w, {o, ck}), reshape(cols, {ck, n * oh * ow}), DotDims{{}, {}, {1}, {0}});  // [O, N·P]
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
