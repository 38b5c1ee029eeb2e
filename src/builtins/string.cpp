// builtins/string.cpp — strings, printing and symbols (SPEC §5.13): `str`, `print` (with the
// format language of builtins/format.hpp), `str-call` (Python string methods by name),
// `gensym` and `symbol?`. Strings are UTF-8; indices and counts are in code points, as in
// Python. Case mapping covers ASCII, Latin-1, Greek and Cyrillic letters.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "builtins/format.hpp"
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/progress.hpp"
#include "eval/utf8.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

// ---- UTF-8 text as code points ----

struct Text {
  std::string_view s;
  // Code point starts, then s.size(); empty for ASCII text, whose code point i is byte i (no
  // index of 8 bytes a character for the common case).
  std::vector<size_t> off;
  explicit Text(std::string_view v) : s(v) {
    if (!std::all_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) off = code_point_offsets(v);
  }
  size_t size() const { return off.empty() ? s.size() : off.size() - 1; }
  size_t offset(size_t i) const { return off.empty() ? i : off[i]; }
  std::string_view at(size_t i) const { return range(i, i + 1); }
  std::string_view range(size_t b, size_t e) const { return s.substr(offset(b), offset(e) - offset(b)); }
  size_t index_of_byte(size_t byte) const {
    if (off.empty()) return byte;
    return static_cast<size_t>(std::lower_bound(off.begin(), off.end(), byte) - off.begin());
  }
  char32_t cp(size_t i) const {
    std::string_view c = at(i);
    auto u = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(c[k])); };
    switch (c.size()) {
      case 2: return (u(0) & 0x1F) << 6 | (u(1) & 0x3F);
      case 3: return (u(0) & 0x0F) << 12 | (u(1) & 0x3F) << 6 | (u(2) & 0x3F);
      case 4: return (u(0) & 0x07) << 18 | (u(1) & 0x3F) << 12 | (u(2) & 0x3F) << 6 | (u(3) & 0x3F);
      default: return u(0);
    }
  }
};

std::string encode(char32_t c) {
  std::string out;
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

bool is_space(char32_t c) {  // Python's str.isspace
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_break(char32_t c) {  // Python's str.splitlines boundaries
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
         c == 0x2029;
}

// One-to-one case mapping of ASCII, Latin-1, basic Greek and Cyrillic letters (no ß → SS,
// no final sigma).
char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F)) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F)) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  for (auto& p : parts) items.push_back(Value::string(std::move(p)));
  return Value::list(std::move(items));
}

// ---- str-call methods: `m.a` is the whole call, the receiver is argument 1 ----

struct MethodCall {
  const CallArgs& a;
  std::string_view name;
  const std::string& s;
  size_t count() const { return a.size() - 2; }
  bool has(size_t k) const { return k < count() && !a[k + 2].is_nil(); }
  const std::string& str(size_t k) const { return arg_string(a, k + 2); }
  int64_t integer(size_t k) const { return arg_int(a, k + 2); }
  [[noreturn]] void error(std::string_view what) const {
    throw SheafError(fmt::format("str-call: {}: {}", name, what), a.site);
  }
};

Value m_replace(const MethodCall& m) {
  const std::string &old = m.str(0), &repl = m.str(1);
  int64_t limit = m.has(2) ? m.integer(2) : -1;
  std::string out;
  int64_t done = 0;
  auto more = [&] { return limit < 0 || done < limit; };
  if (old.empty()) {  // Python inserts `repl` before every code point and at the end
    Text t(m.s);
    for (size_t i = 0; i <= t.size(); ++i) {
      if (more()) {
        out += repl;
        ++done;
      }
      if (i < t.size()) out += t.at(i);
    }
    return Value::string(out);
  }
  size_t pos = 0;
  for (size_t hit; more() && (hit = m.s.find(old, pos)) != std::string::npos; ++done, pos = hit + old.size())
    out += m.s.substr(pos, hit - pos) + repl;
  return Value::string(out + m.s.substr(pos));
}

Value m_split(const MethodCall& m) {
  int64_t limit = m.has(1) ? m.integer(1) : -1;
  std::vector<std::string> parts;
  if (m.has(0)) {
    const std::string& sep = m.str(0);
    if (sep.empty()) m.error("empty separator");
    size_t pos = 0;
    for (size_t hit; (limit < 0 || static_cast<int64_t>(parts.size()) < limit) && (hit = m.s.find(sep, pos)) != std::string::npos;
         pos = hit + sep.size())
      parts.push_back(m.s.substr(pos, hit - pos));
    parts.push_back(m.s.substr(pos));
    return string_list(std::move(parts));
  }
  Text t(m.s);  // runs of whitespace; leading and trailing whitespace gives no empty parts
  size_t i = 0, n = t.size();
  auto skip_space = [&] { while (i < n && is_space(t.cp(i))) ++i; };
  for (skip_space(); i < n; skip_space()) {
    if (limit >= 0 && static_cast<int64_t>(parts.size()) >= limit) {
      parts.emplace_back(t.range(i, n));
      break;
    }
    size_t start = i;
    while (i < n && !is_space(t.cp(i))) ++i;
    parts.emplace_back(t.range(start, i));
  }
  return string_list(std::move(parts));
}

Value m_splitlines(const MethodCall& m) {
  bool keep = m.count() > 0 && m.a[2].truthy();
  Text t(m.s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!is_line_break(t.cp(i))) continue;
    size_t end = i + (t.cp(i) == '\r' && i + 1 < t.size() && t.cp(i + 1) == '\n' ? 2 : 1);
    lines.emplace_back(t.range(start, keep ? end : i));
    start = end;
    i = end - 1;
  }
  if (start < t.size()) lines.emplace_back(t.range(start, t.size()));
  return string_list(std::move(lines));
}

Value m_join(const MethodCall& m) {
  const Value& coll = m.a[2];
  std::string out;
  if (coll.is(Kind::Str)) {  // its characters, without a string object for each
    Text t(coll.as_str());
    for (size_t i = 0; i < t.size(); ++i) {
      if (i) out += m.s;
      out += t.at(i);
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  if (coll.is_list()) {
    items = coll.as_list().items;
  } else if (coll.is(Kind::Tensor) && coll.as_tensor().rank() > 0) {
    for (int64_t i = 0; i < coll.as_tensor().shape()[0]; ++i) items.push_back(row_value(coll.as_tensor(), i));
  } else {
    type_error(m.a, 2, "a list, tensor or string");
  }
  for (size_t i = 0; i < items.size(); ++i) out += (i ? m.s : "") + print_value(items[i], true);
  return Value::string(std::move(out));
}

Value m_format(const MethodCall& m) {
  return Value::string(format_string(m.s, m.a.args.subspan(2), "str-call: format", m.a.site));
}

template <char32_t (*F)(char32_t)>
Value m_case(const MethodCall& m) {
  Text t(m.s);
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    char32_t c = t.cp(i), d = F(c);
    out += d == c ? std::string(t.at(i)) : encode(d);
  }
  return Value::string(out);
}

// strip / lstrip / rstrip: `Left`, `Right` say which ends; an optional string names the
// code points to remove (default: whitespace).
template <bool Left, bool Right>
Value m_strip(const MethodCall& m) {
  Text t(m.s);
  std::vector<char32_t> set;
  if (m.has(0)) {
    Text chars(m.str(0));
    for (size_t i = 0; i < chars.size(); ++i) set.push_back(chars.cp(i));
  }
  auto strip = [&](size_t i) {
    char32_t c = t.cp(i);
    return m.has(0) ? std::find(set.begin(), set.end(), c) != set.end() : is_space(c);
  };
  size_t b = 0, e = t.size();
  while (Left && b < e && strip(b)) ++b;
  while (Right && e > b && strip(e - 1)) --e;
  return Value::string(std::string(t.range(b, e)));
}

// startswith / endswith: the argument is a string or a list of strings (any of them).
template <bool End>
Value m_affix(const MethodCall& m) {
  std::vector<std::string> affixes;
  if (m.a[2].is_list()) {
    for (const Value& v : m.a[2].as_list().items) {
      if (!v.is(Kind::Str)) m.error(fmt::format("expected strings in the list, got {}", kind_name(v.kind())));
      affixes.push_back(v.as_str());
    }
  } else {
    affixes.push_back(m.str(0));
  }
  for (const std::string& x : affixes) {
    bool hit = x.size() <= m.s.size() && (End ? m.s.compare(m.s.size() - x.size(), x.size(), x) == 0 : m.s.compare(0, x.size(), x) == 0);
    if (hit) return Value::boolean(true);
  }
  return Value::boolean(false);
}

// The code-point window [start, end) of find/count, clamped like a Python slice; nullopt when
// the window cannot hold `sub`.
struct Window {
  size_t begin, end;
};
std::optional<Window> window(const MethodCall& m, const Text& t, const Text& sub) {
  auto n = static_cast<int64_t>(t.size());
  auto clamp = [n](int64_t i) { return i < 0 ? std::max<int64_t>(i + n, 0) : std::min(i, n); };
  int64_t b = m.has(1) ? m.integer(1) : 0, e = m.has(2) ? clamp(m.integer(2)) : n;
  if (b < 0) b = clamp(b);
  if (e - b < static_cast<int64_t>(sub.size())) return std::nullopt;
  return Window{static_cast<size_t>(b), static_cast<size_t>(e)};
}

Value m_find(const MethodCall& m) {
  Text t(m.s), sub(m.str(0));
  auto w = window(m, t, sub);
  if (!w) return Value::integer(-1);
  size_t hit = t.range(w->begin, w->end).find(sub.s);
  if (hit == std::string::npos) return Value::integer(-1);
  return Value::integer(static_cast<int64_t>(t.index_of_byte(t.offset(w->begin) + hit)));
}

Value m_count(const MethodCall& m) {
  Text t(m.s), sub(m.str(0));
  auto w = window(m, t, sub);
  if (!w) return Value::integer(0);
  if (sub.s.empty()) return Value::integer(static_cast<int64_t>(w->end - w->begin + 1));
  std::string_view hay = t.range(w->begin, w->end);
  int64_t n = 0;
  for (size_t pos = hay.find(sub.s); pos != std::string_view::npos; pos = hay.find(sub.s, pos + sub.s.size())) ++n;
  return Value::integer(n);
}

Value m_isdigit(const MethodCall& m) {
  return Value::boolean(!m.s.empty() && std::all_of(m.s.begin(), m.s.end(), [](char c) { return c >= '0' && c <= '9'; }));
}

struct Method {
  std::string_view name;
  size_t min_args, max_args;  // after the receiver string
  Value (*fn)(const MethodCall&);
};

const Method kMethods[] = {
    {"replace", 2, 3, m_replace},
    {"split", 0, 2, m_split},
    {"splitlines", 0, 1, m_splitlines},
    {"join", 1, 1, m_join},
    {"format", 0, SIZE_MAX, m_format},
    {"upper", 0, 0, m_case<to_upper>},
    {"lower", 0, 0, m_case<to_lower>},
    {"strip", 0, 1, m_strip<true, true>},
    {"lstrip", 0, 1, m_strip<true, false>},
    {"rstrip", 0, 1, m_strip<false, true>},
    {"startswith", 1, 1, m_affix<false>},
    {"endswith", 1, 1, m_affix<true>},
    {"find", 1, 3, m_find},
    {"count", 1, 3, m_count},
    {"isdigit", 0, 0, m_isdigit},
};

Value b_str_call(Interp&, const CallArgs& a) {
  const std::string& name = arg_string(a, 0);
  const std::string& s = arg_string(a, 1);
  std::vector<std::string> names;
  for (const Method& md : kMethods) {
    names.emplace_back(md.name);
    if (md.name != name) continue;
    MethodCall m{a, md.name, s};
    if (m.count() < md.min_args || m.count() > md.max_args) {
      std::string range = md.min_args == md.max_args ? std::to_string(md.min_args)
                          : md.max_args == SIZE_MAX   ? fmt::format("at least {}", md.min_args)
                                                      : fmt::format("{} to {}", md.min_args, md.max_args);
      m.error(fmt::format("expected {} argument{} after the string, got {}", range, md.max_args == 1 ? "" : "s", m.count()));
    }
    return md.fn(m);
  }
  auto close = suggest_names(name, names);
  throw SheafError(fmt::format("str-call: unknown method '{}'; methods: {}", name, fmt::join(names, ", ")), a.site,
                   close.empty() ? "" : fmt::format("did you mean '{}'?", close[0]));
}

// ---- str, print, symbols ----

Value b_str(Interp&, const CallArgs& a) {
  std::string s;
  for (const Value& v : a.args) print_value_to(s, v, true);
  return Value::string(std::move(s));
}

Value b_print(Interp& in, const CallArgs& a) {
  Options o = parse_options(a, {"end"});
  std::string end = "\n";
  if (const Value* e = o.get("end")) {
    if (!e->is(Kind::Str)) throw SheafError(fmt::format("print: :end must be a string, got {}", kind_name(e->kind())), a.site);
    end = e->as_str();
  }
  const std::vector<Value>& p = o.positional;
  std::string s;
  if (!p.empty() && p[0].is(Kind::Str) && is_format_string(p[0].as_str())) {
    s = format_string(p[0].as_str(), std::span(p).subspan(1), "print", a.site);
  } else {
    for (size_t i = 0; i < p.size(); ++i) {
      if (i) s += ' ';
      print_value_to(s, p[i], true);
    }
  }
  ProgressBar::before_output();
  in.out() << s << end;
  in.out().flush();  // a log line or a streamed character (:end "") appears now, also in a file or pipe
  return Value();
}

Value b_gensym(Interp&, const CallArgs& a) {
  static std::atomic<uint64_t> counter{0};
  std::string prefix = a.size() > 0 ? arg_string(a, 0) : "G__";
  return Value::symbol(fmt::format("{}{:08x}", prefix, ++counter));
}

Value b_symbol_p(Interp&, const CallArgs& a) { return Value::boolean(a[0].is(Kind::Symbol)); }

// (progress :k v ...): fields shown on the active progress bar (SPEC §10); merged into the
// interpreter's progress fields, which the bar of the outermost long loop displays.
Value b_progress(Interp& in, const CallArgs& a) {
  if (a.size() % 2 != 0) throw SheafError("progress: expected :key value pairs", a.site);
  for (size_t i = 0; i < a.size(); i += 2) {
    if (!a[i].is(Kind::Keyword)) type_error(a, i, "a keyword");
    in.progress_fields = dict_assoc(in.progress_fields, a[i].as_str(), a[i + 1]);
  }
  return Value();
}

// (argv): the program's command-line arguments (those after FILE that are not sheaf options).
Value b_argv(Interp& in, const CallArgs&) {
  std::vector<Value> items;
  for (const std::string& s : in.program_args) items.push_back(Value::string(s));
  return Value::list(std::move(items), ListKind::Bracket);
}

const BuiltinDef kString[] = {
    {"str", "(str x ...)", "Concatenation of the printed forms (strings unquoted).", b_str, 0, -1},
    {"str-call", "(str-call \"method\" s args...)", "Python string method by name: replace, split, join, format, strip, find, ...", b_str_call, 2, -1},
    {"argv", "(argv)", "The program's command-line arguments after FILE (not sheaf options), as strings.", b_argv, 0, 0, true},
    {"print", "(print x ...) / (print fmt args...) [:end s]", "Write printed forms, or a {}-format, to stdout; returns nil.", b_print, 0, -1, true},
    {"gensym", "(gensym [prefix])", "Fresh symbol: prefix (default G__) + 8 hex digits.", b_gensym, 0, 1, true},
    {"symbol?", "(symbol? x)", "True for symbol values.", b_symbol_p, 1, 1},
    {"progress", "(progress :k v ...)", "Set fields (e.g. :loss) shown on the active progress bar; returns nil.", b_progress, 0, -1, true},
};

}  // namespace

std::span<const BuiltinDef> string_builtins() { return kString; }

}  // namespace sheaf
