// reader/reader.cpp — recursive-descent reader over UTF-8 text with a nesting limit.
#include "reader/reader.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "base/error.hpp"
#include "base/stack.hpp"

namespace sheaf {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; }
bool is_delim(char c) {
  return is_ws(c) || c == '(' || c == ')' || c == '[' || c == ']' || c == '{' || c == '}' ||
         c == '"' || c == '\'' || c == '`' || c == '~' || c == ';';
}
bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}
std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Decimal float syntax: [sign] (digits [. digits?] | . digits) [e [sign] digits]
bool float_syntax(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

float parse_float(std::string_view s) {
  bool neg = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  float v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    // Overflow → inf, underflow → 0 (IEEE rounding of the decimal value).
    double d = 0;
    std::from_chars(s.data(), s.data() + s.size(), d);
    v = std::fabs(d) > 1 ? std::numeric_limits<float>::infinity() : 0.0f;
    if (r.ptr == s.data()) v = 0;
  }
  return neg ? -v : v;
}

// Optional '-' and decimal digits, as an i64; a literal outside the i64 range is an error (it
// would otherwise lose digits silently: write 1e39 for the float).
int64_t integer_literal(std::string_view text, SrcLoc loc) {
  int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size())
    throw SheafError(fmt::format("integer literal out of range: {} does not fit in 64 bits", text), loc,
                     "integers are 64-bit (-9223372036854775808 to 9223372036854775807); a float is written with a point "
                     "or an exponent (1e39)");
  return v;
}

class Reader {
 public:
  Reader(std::string_view t, uint32_t f, ReaderOptions o) : text_(t), file_(f), opts_(o) {}

  std::vector<Form> all() {
    std::vector<Form> forms;
    for (;;) {
      skip_ws();
      if (pos_ >= text_.size()) break;
      size_t begin = pos_;
      Value v = form(0);
      forms.push_back({std::move(v), begin, pos_});
    }
    return forms;
  }

 private:
  std::string_view text_;
  uint32_t file_;
  ReaderOptions opts_;
  size_t pos_ = 0;
  uint32_t line_ = 1, col_ = 1;
  bool no_suffix_ = false;

  SrcLoc here(uint32_t len = 1) const { return {file_, line_, col_, len}; }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else if ((static_cast<unsigned char>(text_[pos_]) & 0xC0) != 0x80) {
      ++col_;  // columns count code points
    }
    ++pos_;
  }

  void skip_ws() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (is_ws(c)) {
        advance();
      } else if (c == ';') {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  Value form(size_t depth) {
    if (depth > opts_.max_depth || stack_exhausted())
      throw SheafError("Nesting too deep (more than " + std::to_string(opts_.max_depth) + " levels)", here());
    SrcLoc loc = here();
    char c = text_[pos_];
    switch (c) {
      case '(': return seq(')', ListKind::Paren, "list", depth);
      case '[': return seq(']', ListKind::Bracket, "vector", depth);
      case '{': return seq('}', ListKind::Brace, "dict", depth);
      case ')':
      case ']':
      case '}': throw SheafError(std::string("Unexpected closing '") + c + "'", loc);
      case '"': return string();
      case '\'': return prefixed("quote", 1, depth);
      case '`': return prefixed("quasiquote", 1, depth);
      case '~':
        if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '@') return prefixed("unquote-splicing", 2, depth);
        return prefixed("unquote", 1, depth);
      default: return atom();
    }
  }

  Value prefixed(const char* head, size_t n, size_t depth) {
    SrcLoc loc = here(static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; ++i) advance();
    skip_ws();
    if (pos_ >= text_.size()) throw SheafError(std::string("Expected a form after ") + head, loc);
    no_suffix_ = true;  // '[0 1] :i32 is quoted data followed by a keyword, not a suffix
    Value inner = form(depth + 1);
    no_suffix_ = false;
    return Value::list({Value::symbol(head, loc), std::move(inner)}, ListKind::Paren, loc);
  }

  Value seq(char close, ListKind kind, const char* what, size_t depth) {
    bool quoted = no_suffix_;
    no_suffix_ = false;
    SrcLoc open = here();
    size_t open_pos = pos_;
    advance();
    std::vector<Value> items;
    for (;;) {
      skip_ws();
      if (pos_ >= text_.size())
        throw SheafError(fmt::format("Unclosed {} (opened at line {})", what, open.line), open);
      char c = text_[pos_];
      if (c == close) {
        advance();
        break;
      }
      if (c == ')' || c == ']' || c == '}')
        throw SheafError(fmt::format("Unexpected closing '{}' (expected '{}' to close the {} opened at line {})", c,
                                     close, what, open.line),
                         here());
      items.push_back(form(depth + 1));
    }
    if (kind == ListKind::Brace && items.size() % 2 != 0)
      throw SheafError("Dict requires even number of elements (key-value pairs)", open);
    if (open.line == line_) open.len = static_cast<uint32_t>(pos_ - open_pos);
    Value v = Value::list(std::move(items), kind, open);
    if (kind == ListKind::Bracket && !quoted) attach_suffix(v);
    return v;
  }

  // `[1 2] :i32` — a dtype keyword right after a bracket literal annotates it.
  void attach_suffix(Value& v) {
    size_t p = pos_;
    while (p < text_.size() && is_ws(text_[p])) ++p;
    if (p >= text_.size() || text_[p] != ':') return;
    size_t e = p + 1;
    while (e < text_.size() && !is_delim(text_[e])) ++e;
    auto dt = dtype_from_name(text_.substr(p + 1, e - p - 1));
    if (!dt) return;
    while (pos_ < e) advance();
    const_cast<ListObj&>(v.as_list()).suffix = dt;  // v is not shared yet
  }

  Value string() {
    SrcLoc loc = here();
    advance();
    std::string s;
    for (;;) {
      if (pos_ >= text_.size()) throw SheafError("Unterminated string", loc);
      char c = text_[pos_];
      if (c == '"') {
        advance();
        break;
      }
      if (c == '\\' && pos_ + 1 < text_.size()) {
        char n = text_[pos_ + 1];
        advance();
        advance();
        switch (n) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '"': s += '"'; break;
          case '\\': s += '\\'; break;
          default: s += '\\'; s += n; break;
        }
        continue;
      }
      s += c;
      advance();
    }
    return Value::string(std::move(s));
  }

  Value atom() {
    SrcLoc loc = here();
    size_t start = pos_;
    while (pos_ < text_.size() && !is_delim(text_[pos_])) advance();
    std::string_view a = text_.substr(start, pos_ - start);
    loc.len = static_cast<uint32_t>(a.size());
    return classify_atom(a, loc);
  }
};

}  // namespace

Value classify_atom(std::string_view a, SrcLoc loc) {
  if (a.empty()) throw SheafError("empty atom", loc);
  if (a == "true") return Value::boolean(true);
  if (a == "false") return Value::boolean(false);
  if (a == "nil") return Value::nil();
  if (a[0] == ':') {
    if (a.size() == 1) throw SheafError("Invalid keyword ':' (a keyword needs a name)", loc);
    return Value::keyword(a.substr(1));
  }
  // Slice atom A:B or A: (integers), meaningful when calling a data handle.
  if (size_t colon = a.find(':'); colon != std::string_view::npos && colon > 0) {
    std::string_view lhs = a.substr(0, colon), rhs = a.substr(colon + 1);
    auto int_like = [](std::string_view s) { return all_digits(s[0] == '-' ? s.substr(1) : s); };
    if (int_like(lhs) && (rhs.empty() || int_like(rhs))) {
      int64_t s = integer_literal(lhs, loc);
      if (rhs.empty()) return Value::slice(s, std::nullopt);
      return Value::slice(s, integer_literal(rhs, loc));
    }
  }
  std::string_view digits = (a[0] == '+' || a[0] == '-') ? a.substr(1) : a;
  if (all_digits(digits)) return Value::integer(integer_literal(a[0] == '+' ? a.substr(1) : a, loc));
  if (float_syntax(a)) return Value::real(parse_float(a));
  std::string l = lower(digits);
  if (l == "inf" || l == "infinity" || l == "nan") {
    float v = l == "nan" ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    return Value::real(a[0] == '-' ? -v : v);
  }
  return Value::symbol(a, loc);
}

std::vector<Form> read_forms(std::string_view text, uint32_t file, ReaderOptions opts) {
  return Reader(text, file, opts).all();
}

std::vector<Value> read_all(std::string_view text, uint32_t file, ReaderOptions opts) {
  std::vector<Value> out;
  for (auto& f : read_forms(text, file, opts)) out.push_back(std::move(f.value));
  return out;
}

ReadStatus read_status(std::string_view text) {
  try {
    read_forms(text, 0);
    return ReadStatus::Complete;
  } catch (const SheafError& e) {
    std::string_view m = e.what();
    if (m.rfind("Unclosed", 0) == 0 || m.rfind("Unterminated string", 0) == 0 || m.rfind("Expected a form after", 0) == 0)
      return ReadStatus::Incomplete;
    return ReadStatus::Error;
  }
}

}  // namespace sheaf
