// builtins/format.cpp — format strings and format specs (SPEC §5.13), after Python's
// str.format: a spec is parsed into Spec, a number is rendered to sign + digits, and one
// padding routine applies fill, alignment and width (counted in code points).
// Floats are f32 values formatted through their exact double, so `{:.10f}` of 0.1 shows the
// f32 error exactly as Python shows it for float(numpy.float32(0.1)).
#include "builtins/format.hpp"

#include <charconv>
#include <cmath>

#include "base/error.hpp"
#include "builtins/scalar.hpp"
#include "eval/utf8.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

struct Spec {
  std::string_view text;    // as written, for messages
  std::string fill = " ";   // one code point
  bool has_fill = false;
  char align = 0;           // '<' '>' '^' '=' or 0 for the default of the value
  char sign = 0;            // '+' '-' ' ' or 0
  bool zero = false;        // the `0` flag before the width
  size_t width = 0;
  int precision = -1;       // -1: not given
  char type = 0;            // d f e g s % or 0
  bool numeric() const { return sign || align == '=' || (type && type != 's'); }
};

bool is_align(char c) { return c == '<' || c == '>' || c == '^' || c == '='; }

size_t parse_count(std::string_view spec, size_t& i, std::string_view who, SrcLoc site) {
  size_t n = 0;
  for (; i < spec.size() && spec[i] >= '0' && spec[i] <= '9'; ++i) {
    n = n * 10 + static_cast<size_t>(spec[i] - '0');
    if (n > 1'000'000) fail(site, "{}: width or precision too large in format spec '{}'", who, spec);
  }
  return n;
}

Spec parse_spec(std::string_view spec, std::string_view who, SrcLoc site) {
  Spec s;
  s.text = spec;
  size_t i = 0;
  size_t lead = spec.empty() ? 0 : std::min(utf8_length(static_cast<unsigned char>(spec[0])), spec.size());
  if (lead < spec.size() && is_align(spec[lead])) {
    s.fill = std::string(spec.substr(0, lead));
    s.has_fill = true;
    s.align = spec[lead];
    i = lead + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    s.align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) s.sign = spec[i++];
  if (!s.has_fill && i < spec.size() && spec[i] == '0') {
    s.zero = true;
    ++i;
  }
  s.width = parse_count(spec, i, who, site);
  if (i < spec.size() && spec[i] == '.') {
    size_t start = ++i;
    s.precision = static_cast<int>(parse_count(spec, i, who, site));
    if (i == start) fail(site, "{}: format spec '{}' is missing the precision after '.'", who, spec);
  }
  if (i < spec.size()) {
    std::string_view types = "dfegs%";
    if (types.find(spec[i]) == std::string_view::npos || i + 1 != spec.size())
      fail(site, "{}: invalid format spec '{}' (expected [[fill]align][sign][width][.precision][type] with type d, f, e, g, s or %)", who, spec);
    s.type = spec[i];
  }
  return s;
}

// fill/align/width around `sign` + `body`; `numeric` values default to right alignment and
// the `0` flag pads between sign and digits.
std::string pad(std::string_view sign, std::string_view body, const Spec& s, bool numeric) {
  std::string fill = s.fill;
  char align = s.align ? s.align : (numeric ? '>' : '<');
  if (s.zero) {
    fill = "0";
    if (!s.align && numeric) align = '=';
  }
  size_t n = code_point_count(sign) + code_point_count(body);
  if (s.width <= n) return std::string(sign) + std::string(body);
  size_t total = s.width - n, left = 0;
  if (align == '>') left = total;
  if (align == '^') left = total / 2;
  auto repeat = [&](size_t k) {
    std::string r;
    for (size_t j = 0; j < k; ++j) r += fill;
    return r;
  };
  if (align == '=') return std::string(sign) + repeat(total) + std::string(body);
  return repeat(left) + std::string(sign) + std::string(body) + repeat(total - left);
}

std::string fixed(double x, int precision) {
  std::string buf(static_cast<size_t>(precision) + 400, '\0');
  auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::fixed, precision);
  return std::string(buf.data(), r.ptr);
}

std::string scientific(double x, int precision) {
  std::string buf(static_cast<size_t>(precision) + 64, '\0');
  auto r = std::to_chars(buf.data(), buf.data() + buf.size(), x, std::chars_format::scientific, precision);
  return std::string(buf.data(), r.ptr);
}

void strip_fraction_zeros(std::string& digits) {
  if (digits.find('.') == std::string::npos) return;
  digits.erase(digits.find_last_not_of('0') + 1);
  if (digits.back() == '.') digits.pop_back();
}

// Python's 'g' (and, with `repr_like`, the no-type-with-precision form, which switches to
// scientific one exponent earlier and keeps a ".0" on fixed-point results).
std::string general(double x, int precision, bool repr_like) {
  int p = std::max(precision, 1);
  std::string sci = scientific(x, p - 1);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  if (exp >= -4 && exp < (repr_like ? p - 1 : p)) {
    std::string out = fixed(x, p - 1 - exp);
    strip_fraction_zeros(out);
    if (repr_like && out.find('.') == std::string::npos) out += ".0";
    return out;
  }
  std::string mantissa = sci.substr(0, e);
  strip_fraction_zeros(mantissa);
  return mantissa + sci.substr(e);
}

// Digits of x ≥ 0 (or NaN) for a float type; with no type and no precision, the printer's
// shortest form of the f32 `f32`.
std::string float_body(double x, const Spec& s, float f32) {
  int p = s.precision < 0 ? 6 : s.precision;
  std::string pct = s.type == '%' ? "%" : "";
  if (std::isnan(x)) return "nan" + pct;
  if (std::isinf(x)) return "inf" + pct;
  switch (s.type) {
    case 'f': return fixed(x, p);
    case '%': return fixed(x * 100, p) + pct;
    case 'e': return scientific(x, p);
    case 'g': return general(x, p, false);
    default: return s.precision < 0 ? format_float(std::fabs(f32)) : general(x, s.precision, true);
  }
}

std::string format_number(const Num& n, const Spec& s, std::string_view who, SrcLoc site) {
  bool negative;
  std::string body;
  if (n.is_int && (s.type == 0 || s.type == 'd')) {
    if (s.precision >= 0) fail(site, "{}: precision not allowed in integer format spec '{}'", who, s.text);
    negative = n.i < 0;
    uint64_t mag = negative ? 0 - static_cast<uint64_t>(n.i) : static_cast<uint64_t>(n.i);
    body = std::to_string(mag);
  } else {
    if (s.type == 'd') fail(site, "{}: format code 'd' needs an integer, got float {}", who, format_float(n.f));
    double x = n.d();
    negative = std::signbit(x) && !std::isnan(x);
    body = float_body(std::fabs(x), s, n.f);
  }
  std::string_view sign = negative ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  return pad(sign, body, s, true);
}

std::string describe(const Value& v) {
  if (!v.is(Kind::Tensor)) return std::string(kind_name(v.kind()));
  const Tensor& t = v.as_tensor();
  return fmt::format("{}[{}] tensor", dtype_name(t.dtype()), fmt::join(t.shape(), "x"));
}

}  // namespace

bool is_format_string(std::string_view s) {
  size_t open = s.find('{');
  return open != std::string_view::npos && s.find('}', open) != std::string_view::npos;
}

std::string format_value(const Value& v, std::string_view spec_text, std::string_view who, SrcLoc site) {
  if (spec_text.empty()) return print_value(v, true);
  Spec s = parse_spec(spec_text, who, site);
  auto num = to_num(v);
  if (num && s.type != 's') return format_number(*num, s, who, site);
  bool array = v.is(Kind::Tensor) && v.as_tensor().rank() > 0;
  if (array && (s.numeric() || s.precision >= 0))
    fail(site, "{}: numeric format spec '{}' needs a scalar, got {}", who, spec_text, describe(v));
  if (!num && s.type && s.type != 's') fail(site, "{}: format code '{}' needs a number, got {}", who, s.type, describe(v));
  if (s.sign) fail(site, "{}: sign not allowed in format spec '{}' for a {}", who, spec_text, describe(v));
  if (s.align == '=') fail(site, "{}: '=' alignment not allowed in format spec '{}' for a {}", who, spec_text, describe(v));
  std::string text = print_value(v, true);
  if (s.precision >= 0) {
    auto off = code_point_offsets(text);
    if (static_cast<size_t>(s.precision) + 1 < off.size()) text.resize(off[static_cast<size_t>(s.precision)]);
  }
  return pad("", text, s, false);
}

std::string format_string(std::string_view fmt, std::span<const Value> args, std::string_view who, SrcLoc site) {
  // Pass 1: literal text (escapes resolved) and the specs of the fields, in order.
  std::vector<std::string> literals(1);
  std::vector<std::string_view> specs;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 >= fmt.size() || fmt[i + 1] != '}') fail(site, "{}: single '}}' in format string \"{}\" (write '}}}}' for a brace)", who, fmt);
      literals.back() += '}';
      ++i;
    } else if (c != '{') {
      literals.back() += c;
    } else if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      literals.back() += '{';
      ++i;
    } else {
      size_t close = fmt.find('}', i);
      if (close == std::string_view::npos) fail(site, "{}: single '{{' in format string \"{}\" (write '{{{{' for a brace)", who, fmt);
      std::string_view field = fmt.substr(i + 1, close - i - 1);
      if (!field.empty() && (field[0] != ':' || field.find('{') != std::string_view::npos))
        fail(site, "{}: unsupported format field '{{{}}}' in \"{}\" (use {{}} or {{:spec}})", who, field, fmt);
      specs.push_back(field.empty() ? field : field.substr(1));
      literals.emplace_back();
      i = close;
    }
  }
  if (specs.size() > args.size())
    fail(site, "{}: too few arguments for format string \"{}\" ({} field{}, {} argument{})", who, fmt, specs.size(),
         specs.size() == 1 ? "" : "s", args.size(), args.size() == 1 ? "" : "s");
  // Pass 2: interleave.
  std::string out = literals[0];
  for (size_t k = 0; k < specs.size(); ++k) out += format_value(args[k], specs[k], who, site) + literals[k + 1];
  return out;
}

}  // namespace sheaf
