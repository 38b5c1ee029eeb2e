// value/printer.cpp — printing of non-tensor values and of float scalars.
#include "value/printer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "value/function.hpp"
#include "value/handle.hpp"

namespace sheaf {

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

// Appends the printed form of a value that holds no elements (all but lists and dicts).
static void print_atom(std::string& out, const Value& v, bool top) {
  switch (v.kind()) {
    case Kind::Nil: out += "nil"; return;
    case Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.as_int()); return;
    case Kind::Float: out += format_float(v.as_float()); return;
    case Kind::Str: out += top ? v.as_str() : quote_string(v.as_str()); return;
    case Kind::Keyword: out += ":" + v.as_str(); return;
    case Kind::Symbol: out += v.as_str(); return;
    case Kind::Tensor: out += print_tensor(v.as_tensor()); return;
    case Kind::Slice: {
      const auto& s = v.as_slice();
      out += std::to_string(s.start) + ":" + (s.end ? std::to_string(*s.end) : "");
      return;
    }
    case Kind::Fn: {
      const auto& f = v.as<FnObj>();
      out += f.is_macro ? "<macro:" + f.name + ">" : f.name.empty() ? "<function>" : "<fn:" + f.name + ">";
      return;
    }
    case Kind::Builtin: out += "<fn:" + std::string(v.as<BuiltinObj>().def->name) + ">"; return;
    case Kind::Recur: out += "<recur>"; return;
    case Kind::Handle: out += v.as<HandleObj>().describe(); return;
    case Kind::List:
    case Kind::Dict: return;  // print_value_to writes these
  }
}

// A list or dict being printed: `next` is the index of its next element.
struct Open {
  const Value* v;
  size_t next = 0;
  size_t size() const { return v->is(Kind::Dict) ? v->as_dict().entries.size() : v->as_list().items.size(); }
};

// What comes before element i: the separator, and a dict entry's key. Dicts print as
// {:a 1, :b 2}, dict forms in code as {:a 1, :b 2} from their flat items, lists as [1, 2] and
// tuples as (1, 2) or (1,).
static const Value& element(std::string& out, const Value& v, size_t i) {
  if (v.is(Kind::Dict)) {
    const auto& [k, x] = v.as_dict().entries[i];
    out += i == 0 ? ":" : ", :";
    out += k;
    out += " ";
    return x;
  }
  const ListObj& l = v.as_list();
  if (l.kind == ListKind::Brace) out += i == 0 ? "" : (i % 2 ? " " : ", ");
  else if (i) out += ", ";
  return l.items[i];
}

static const char* opener(const Value& v) {
  if (v.is(Kind::Dict) || v.as_list().kind == ListKind::Brace) return "{";
  return v.as_list().kind == ListKind::Tuple ? "(" : "[";
}

static const char* closer(const Value& v) {
  if (v.is(Kind::Dict) || v.as_list().kind == ListKind::Brace) return "}";
  if (v.as_list().kind != ListKind::Tuple) return "]";
  return v.as_list().items.size() == 1 ? ",)" : ")";
}

// Linear in the size of the output; the nesting of lists and dicts lives on an explicit stack
// (a 12M-deep list prints like a long one).
void print_value_to(std::string& out, const Value& v, bool top) {
  if (!v.is_list() && !v.is(Kind::Dict)) return print_atom(out, v, top);
  std::vector<Open> stack{{&v}};
  out += opener(v);
  while (!stack.empty()) {
    Open& o = stack.back();
    if (o.next == o.size()) {
      out += closer(*o.v);
      stack.pop_back();
      continue;
    }
    const Value& x = element(out, *o.v, o.next++);
    if (x.is_list() || x.is(Kind::Dict)) {
      out += opener(x);
      stack.push_back({&x});  // `o` is not used past this point
    } else {
      print_atom(out, x, false);
    }
  }
}

std::string print_value(const Value& v, bool top) {
  std::string out;
  print_value_to(out, v, top);
  return out;
}

}  // namespace sheaf
