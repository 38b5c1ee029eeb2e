// value/printer.cpp — printing of non-tensor values and of float scalars.
#include "value/printer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "value/function.hpp"
#include "value/handle.hpp"

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

static std::string quote_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c == q) out += '\\';
        out += c;
    }
  }
  return out + q;
}

std::string print_value(const Value& v, bool top) {
  switch (v.kind()) {
    case Kind::Nil: return "nil";
    case Kind::Bool: return v.as_bool() ? "true" : "false";
    case Kind::Int: return std::to_string(v.as_int());
    case Kind::Float: return format_float(v.as_float());
    case Kind::Str: return top ? v.as_str() : quote_string(v.as_str());
    case Kind::Keyword: return ":" + v.as_str();
    case Kind::Symbol: return v.as_str();
    case Kind::Tensor: return print_tensor(v.as_tensor());
    case Kind::Slice: {
      const auto& s = v.as_slice();
      return std::to_string(s.start) + ":" + (s.end ? std::to_string(*s.end) : "");
    }
    case Kind::Fn: {
      const auto& f = v.as<FnObj>();
      if (f.is_macro) return "<macro:" + f.name + ">";
      return f.name.empty() ? "<function>" : "<fn:" + f.name + ">";
    }
    case Kind::Builtin: return "<fn:" + std::string(v.as<BuiltinObj>().def->name) + ">";
    case Kind::Recur: return "<recur>";
    case Kind::Handle: return v.as<HandleObj>().describe();
    case Kind::Dict: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, x] : v.as_dict().entries) {
        if (!first) s += ", ";
        first = false;
        s += ":" + k + " " + print_value(x, false);
      }
      return s + "}";
    }
    case Kind::List: {
      const auto& l = v.as_list();
      if (l.kind == ListKind::Brace) {  // a dict form inside code (from quasiquote)
        std::string s = "{";
        for (size_t i = 0; i < l.items.size(); ++i) s += (i ? (i % 2 ? " " : ", ") : "") + print_value(l.items[i], false);
        return s + "}";
      }
      bool tuple = l.kind == ListKind::Tuple;
      std::string s = tuple ? "(" : "[";
      for (size_t i = 0; i < l.items.size(); ++i) s += (i ? ", " : "") + print_value(l.items[i], false);
      if (tuple && l.items.size() == 1) s += ",";
      return s + (tuple ? ")" : "]");
    }
  }
  return "?";
}

}  // namespace sheaf
