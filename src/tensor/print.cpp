// tensor/print.cpp — NumPy str() layout for tensors and the repr of floats (SPEC §2.8).
// Mirrors numpy.core.arrayprint with its defaults: precision 8, floatmode 'maxprec',
// linewidth 75, threshold 1000 elements, 3 edge items, separator ' '. Float columns share
// pad_left/pad_right so that they align; exponent notation is chosen for the whole array when
// max ≥ 1e6 (NumPy 2 for f32), min < 1e-4 or max/min > 1000 (non-zero finite absolute values).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "tensor/print.hpp"

namespace sheaf {

std::string format_float(float f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. "-2.7182817e+00"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exp >= -4 && exp < 16) {  // Python repr: plain notation when 1e-4 <= |x| < 1e16
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  }
  return neg ? "-" + out : out;
}
namespace {

constexpr int kPrecision = 8;
constexpr size_t kLineWidth = 75;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdge = 3;

// Positional digits of |x| with at most kPrecision fractional digits, shortest unique for f32,
// trailing zeros trimmed but the point kept: 4. 0.5 3.14159274 → split into int and frac parts.
std::pair<std::string, std::string> positional(float x) {
  char buf[128];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::fixed);
  std::string s(buf, r.ptr);
  size_t dot = s.find('.');
  std::string ip = dot == std::string::npos ? s : s.substr(0, dot);
  std::string fp = dot == std::string::npos ? "" : s.substr(dot + 1);
  if (fp.size() > static_cast<size_t>(kPrecision)) {
    s = fmt::format("{:.{}f}", static_cast<double>(std::fabs(x)), kPrecision);
    dot = s.find('.');
    ip = s.substr(0, dot);
    fp = s.substr(dot + 1);
    while (!fp.empty() && fp.back() == '0') fp.pop_back();
  }
  if (std::signbit(x)) ip = "-" + ip;
  return {ip, fp};
}

struct Sci {
  std::string ip, fp;
  int exp;
};
// Scientific digits with at most kPrecision mantissa fractional digits, shortest unique.
Sci scientific(float x) {
  char buf[128];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::scientific);
  std::string s(buf, r.ptr);
  size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  int exp = std::stoi(s.substr(e + 1));
  size_t dot = mant.find('.');
  std::string fp = dot == std::string::npos ? "" : mant.substr(dot + 1);
  if (fp.size() > static_cast<size_t>(kPrecision)) {
    s = fmt::format("{:.{}e}", static_cast<double>(std::fabs(x)), kPrecision);
    e = s.find('e');
    mant = s.substr(0, e);
    exp = std::stoi(s.substr(e + 1));
    fp = mant.substr(mant.find('.') + 1);
    while (!fp.empty() && fp.back() == '0') fp.pop_back();
  }
  std::string ip = mant.substr(0, 1);
  if (std::signbit(x)) ip = "-" + ip;
  return {ip, fp, exp};
}

using ElemFormat = std::function<std::string(int64_t)>;

ElemFormat float_format(const Tensor& t, const std::vector<int64_t>& shown) {
  std::vector<float> finite;
  bool any_nonfinite = false, neg_inf = false;
  for (int64_t i : shown) {
    float v = static_cast<float>(t.get(i));
    if (std::isfinite(v)) finite.push_back(v);
    else any_nonfinite = true, neg_inf = neg_inf || (std::isinf(v) && v < 0);
  }
  // NumPy ≥ 2: exponent notation when max ≥ 10^min(8, precision of the dtype) — 1e6 for f32.
  bool exp_format = false;
  float maxv = 0, minv = INFINITY;
  for (float v : finite)
    if (v != 0) maxv = std::max(maxv, std::fabs(v)), minv = std::min(minv, std::fabs(v));
  if (maxv > 0 && (maxv >= 1e6f || minv < 0.0001f || maxv / minv > 1000.f)) exp_format = true;

  size_t pad_left = 0, pad_right = 0, precision = 0, exp_size = 0;
  if (!finite.empty() && !exp_format) {
    for (float v : finite) {
      auto [ip, fp] = positional(v);
      pad_left = std::max(pad_left, ip.size());
      pad_right = std::max(pad_right, fp.size());
    }
  } else if (!finite.empty()) {
    for (float v : finite) {
      Sci s = scientific(v);
      pad_left = std::max(pad_left, s.ip.size());
      precision = std::max(precision, s.fp.size());
      exp_size = std::max(exp_size, std::to_string(std::abs(s.exp)).size());
    }
    exp_size = std::max<size_t>(exp_size, 2);
    pad_right = exp_size + 2 + precision;
  }
  if (any_nonfinite) {  // nan/inf (and the sign of -inf) must fit the column
    size_t offset = pad_right + 1;
    size_t inf_width = neg_inf ? 4 : 3;
    pad_left = std::max({pad_left, offset < 3 ? 3 - offset : 0, offset < inf_width ? inf_width - offset : 0});
  }
  size_t width = pad_left + pad_right + 1;
  return [&t, exp_format, pad_left, pad_right, precision, exp_size, width](int64_t i) {
    float v = static_cast<float>(t.get(i));
    if (!std::isfinite(v)) return fmt::format("{:>{}}", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"), width);
    if (!exp_format) {
      auto [ip, fp] = positional(v);
      return fmt::format("{:>{}}.{:<{}}", ip, pad_left, fp, pad_right);
    }
    std::string s = fmt::format("{:.{}e}", static_cast<double>(v), precision);
    size_t e = s.find('e');
    std::string mant = s.substr(0, e);
    int exp = std::stoi(s.substr(e + 1));
    if (precision == 0) mant += ".";
    return fmt::format("{:>{}}", fmt::format("{}e{}{:0{}d}", mant, exp < 0 ? '-' : '+', std::abs(exp), exp_size), width);
  };
}

ElemFormat int_format(const Tensor& t, const std::vector<int64_t>& shown) {
  size_t width = 0;
  for (int64_t i : shown) width = std::max(width, fmt::format("{}", static_cast<int64_t>(t.get(i))).size());
  return [&t, width](int64_t i) { return fmt::format("{:>{}}", static_cast<int64_t>(t.get(i)), width); };
}

// Row-major flat indices of the elements that will be shown (edges only when summarizing).
void collect_shown(const Shape& shape, bool summary, size_t axis, int64_t base, std::vector<int64_t>& out) {
  if (axis == shape.size()) {
    out.push_back(base);
    return;
  }
  int64_t stride = 1;
  for (size_t a = axis + 1; a < shape.size(); ++a) stride *= shape[a];
  int64_t n = shape[axis];
  for (int64_t i = 0; i < n; ++i) {
    if (summary && n > 2 * kEdge && i == kEdge) i = n - kEdge;
    collect_shown(shape, summary, axis + 1, base + i * stride, out);
  }
}

void extend_line(std::string& s, std::string& line, const std::string& word, size_t width, const std::string& prefix) {
  bool wrap = line.size() + word.size() > width && line.size() > prefix.size();
  if (wrap) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
    line = prefix;
  }
  line += word;
}

struct Layout {
  const Shape& shape;
  const ElemFormat& fmt_elem;
  bool summary;

  std::string rec(size_t axis, int64_t base, const std::string& hang, size_t width) const {
    if (axis == shape.size()) return fmt_elem(base);
    std::string next_hang = hang + " ";
    size_t next_width = width - 1;
    int64_t n = shape[axis];
    int64_t stride = 1;
    for (size_t a = axis + 1; a < shape.size(); ++a) stride *= shape[a];
    bool show_summary = summary && 2 * kEdge < n;
    int64_t lead = show_summary ? kEdge : 0, trail = show_summary ? kEdge : n;
    std::string s;
    size_t left = shape.size() - axis;
    if (left == 1) {
      size_t elem_width = width - 1;
      std::string line = hang;
      for (int64_t i = 0; i < lead; ++i) {
        extend_line(s, line, rec(axis + 1, base + i * stride, next_hang, next_width), elem_width, hang);
        line += " ";
      }
      if (show_summary) {
        extend_line(s, line, "...", elem_width, hang);
        line += " ";
      }
      for (int64_t i = trail; i > 1; --i) {
        extend_line(s, line, rec(axis + 1, base + (n - i) * stride, next_hang, next_width), elem_width, hang);
        line += " ";
      }
      if (n > 0) extend_line(s, line, rec(axis + 1, base + (n - 1) * stride, next_hang, next_width), elem_width, hang);
      s += line;
    } else {
      std::string sep = std::string(left - 1, '\n');
      for (int64_t i = 0; i < lead; ++i) s += hang + rec(axis + 1, base + i * stride, next_hang, next_width) + sep;
      if (show_summary) s += hang + "..." + sep;
      for (int64_t i = trail; i > 1; --i) s += hang + rec(axis + 1, base + (n - i) * stride, next_hang, next_width) + sep;
      if (n > 0) s += hang + rec(axis + 1, base + (n - 1) * stride, next_hang, next_width);
    }
    return "[" + s.substr(std::min(s.size(), hang.size())) + "]";
  }
};

}  // namespace

std::string print_tensor(const Tensor& t) {
  if (t.rank() == 0) {
    double v = t.get(0);
    if (is_float(t.dtype())) return format_float(static_cast<float>(v));
    if (t.dtype() == DType::Bool) return v != 0 ? "true" : "false";
    return std::to_string(static_cast<int64_t>(v));
  }
  if (t.numel() == 0) return "[]";  // whatever the dims: f32[2^62x0] must not walk 2^62 rows
  bool summary = t.numel() > kThreshold;
  std::vector<int64_t> shown;
  collect_shown(t.shape(), summary, 0, 0, shown);
  ElemFormat f;
  if (is_float(t.dtype()))
    f = float_format(t, shown);
  else if (t.dtype() == DType::Bool)
    f = [&t](int64_t i) { return std::string(t.get(i) != 0 ? "true" : "false"); };
  else
    f = int_format(t, shown);
  Layout layout{t.shape(), f, summary};
  return layout.rec(0, 0, " ", kLineWidth);
}

}  // namespace sheaf
