// obs/summary.cpp — value summaries (see summary.hpp).
#include "obs/summary.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "tensor/shape.hpp"
#include "value/function.hpp"

namespace sheaf::obs {

TensorStats tensor_stats(const Tensor& t) {
  TensorStats s;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -s.min;
  double sum = 0;
  int64_t counted = 0;
  auto add = [&](double x) {
    if (std::isnan(x)) {
      s.nonfinite = true;
      return;
    }
    if (std::isinf(x)) s.nonfinite = true;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    sum += x;
    ++counted;
  };
  if (t.dtype() == DType::F32) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) add(p[i]);
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) add(t.get(i));
  }
  s.mean = counted ? sum / static_cast<double>(counted) : std::nan("");
  return s;
}

bool has_nonfinite(const Tensor& t) {
  if (!is_float(t.dtype())) return false;
  if (t.dtype() != DType::F32) return tensor_stats(t).nonfinite;
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(t.data<float>());
  uint32_t any = 0;
  for (int64_t i = 0; i < t.numel(); ++i) any |= (bits[i] & 0x7f800000u) == 0x7f800000u;  // exponent all ones
  return any != 0;
}

std::string sci(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{:.2e}", x);  // 4.86e-01
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  return s.substr(0, e + 1) + std::to_string(exp);
}

std::string bytes_str(uint64_t n) {
  if (n < 1024) return fmt::format("{}B", n);
  if (n < 1024 * 1024) return fmt::format("{:.2f}KB", static_cast<double>(n) / 1024.0);
  return fmt::format("{:.2f}MB", static_cast<double>(n) / (1024.0 * 1024.0));
}

std::string elapsed_str(double seconds) {
  if (seconds < 1e-3) return fmt::format("{:.1f}μs", seconds * 1e6);
  if (seconds < 1.0) return fmt::format("{:.2f}ms", seconds * 1e3);
  return fmt::format("{:.2f}s", seconds);
}

std::string tensor_brief(const Tensor& t) {
  TensorStats s = tensor_stats(t);
  return fmt::format("{} [min:{} max:{}]", type_str(t), sci(s.min), sci(s.max));
}

namespace {

std::string tensor_summary(const Tensor& t, Level level, bool color) {
  if (t.is_symbolic()) return type_str(t) + " (traced)";
  TensorStats s = tensor_stats(t);
  std::string r = type_str(t);
  if (level == Level::Verbose) r += fmt::format(" [mean:{} min:{} max:{}]", sci(s.mean), sci(s.min), sci(s.max));
  else if (level == Level::Normal) r += fmt::format(" [min:{} max:{}]", sci(s.min), sci(s.max));
  if (s.nonfinite) return r + (color ? " \033[31m[NaN DETECTED]\033[0m" : " [NaN DETECTED]");
  return r + " (" + bytes_str(t.nbytes()) + ")";
}

}  // namespace

std::string summarize(const Value& v, Level level, bool color) {
  switch (v.kind()) {
    case Kind::Tensor: return tensor_summary(v.as_tensor(), level, color);
    case Kind::Dict: {
      std::string keys;
      for (const auto& [k, x] : v.as_dict().entries) keys += fmt::format("{}\"{}\"", keys.empty() ? "" : ", ", k);
      return "dict(keys:[" + keys + "])";
    }
    case Kind::List:
      return fmt::format("{}(len:{})", v.as_list().kind == ListKind::Tuple ? "tuple" : "list", v.as_list().items.size());
    case Kind::Float:
      return std::isfinite(v.as_float()) ? fmt::format("{:.6f}", v.as_float()) : sci(v.as_float());  // nan, inf, -inf
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Bool: return v.as_bool() ? "true" : "false";
    case Kind::Nil: return "nil";
    case Kind::Str: {
      const std::string& s = v.as_str();
      return s.size() > 50 ? "\"" + s.substr(0, 50) + "...\"" : "\"" + s + "\"";
    }
    case Kind::Keyword: return ":" + v.as_str();
    case Kind::Fn: return "<fn:" + (v.as<FnObj>().name.empty() ? std::string("lambda") : v.as<FnObj>().name) + ">";
    case Kind::Builtin: return "<builtin:" + std::string(v.as<BuiltinObj>().def->name) + ">";
    default: return std::string(kind_name(v.kind()));
  }
}

std::string summarize_all(std::span<const Value> vs, Level level, bool color) {
  std::string r;
  for (const Value& v : vs) r += (r.empty() ? "" : ", ") + summarize(v, level, color);
  return r;
}

}  // namespace sheaf::obs
