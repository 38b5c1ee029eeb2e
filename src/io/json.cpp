// io/json.cpp — JSON and JSONL (SPEC §7.8). Objects load as dicts, arrays as lists, integers as
// ints, other numbers as floats (f32), true/false/null as booleans and nil. Saving writes dicts
// with their key names, lists and tensors as (nested) arrays, keywords and symbols as strings,
// nil as null; floats use the shortest text that reads back as the same f32 (non-finite → null).
#include "io/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/stack.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "tensor/shape.hpp"
#include "value/handle.hpp"

namespace sheaf {

namespace {

using json = nlohmann::json;

[[noreturn]] void too_deep(const std::string& path) {
  throw SheafError(fmt::format("'{}': the data nests deeper than {} levels", path, kMaxDataNesting));
}

// Rejects text whose arrays and objects nest deeper than kMaxDataNesting before a tree is built of it
// (a file of 100 MB of '[' would otherwise cost gigabytes); brackets inside strings do not count.
// Unbalanced brackets are left to the parser.
void check_depth(std::string_view text, const std::string& path) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDataNesting) too_deep(path);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

// nlohmann's message without its "[json.exception...] " tag and without the "; last read: '...'"
// excerpt, which would echo bytes of a file that is not valid JSON (or not JSON at all).
std::string parse_message(std::string msg) {
  if (size_t p = msg.find("] "); p != std::string::npos) msg.erase(0, p + 2);
  if (size_t p = msg.find("; last read: '"); p != std::string::npos) {
    size_t q = msg.rfind("'; expected ");
    msg.erase(p, q != std::string::npos && q > p ? q + 1 - p : std::string::npos);
  }
  return msg;
}

Value to_value(const json& j, const std::string& path, int depth) {
  if (depth > kMaxDataNesting || stack_exhausted()) too_deep(path);
  switch (j.type()) {
    case json::value_t::null: return Value();
    case json::value_t::boolean: return Value::boolean(j.get<bool>());
    case json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value::integer(static_cast<int64_t>(u));
      return Value::real(static_cast<float>(u));
    }
    case json::value_t::number_float: return Value::real(static_cast<float>(j.get<double>()));
    case json::value_t::string: return Value::string(j.get<std::string>());
    case json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const json& x : j) items.push_back(to_value(x, path, depth + 1));
      return Value::list(std::move(items));
    }
    case json::value_t::object: {
      std::vector<std::pair<std::string, Value>> entries;
      for (const auto& [k, x] : j.items()) entries.emplace_back(k, to_value(x, path, depth + 1));
      return make_dict(std::move(entries));
    }
    default: throw SheafError(fmt::format("'{}': unsupported JSON value", path));
  }
}

json float_json(double f) {
  if (!std::isfinite(f)) return nullptr;
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(f));  // shortest f32 text
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// JSON spells a tensor without elements as nested empty arrays, one for each index before its
// first zero dim: f32[2^62x0] would be 2^62 of them. More than 2^20 is an error.
void check_empty_arrays(const Tensor& t, const std::string& path) {
  constexpr int64_t kMaxEmptyArrays = int64_t{1} << 20;
  if (t.numel() != 0) return;
  int64_t arrays = 1;
  for (int64_t d : t.shape()) {
    if (d == 0) return;
    if (__builtin_mul_overflow(arrays, d, &arrays) || arrays > kMaxEmptyArrays)
      throw SheafError(fmt::format("'{}': cannot write {} as JSON: it has no elements but more than {} empty arrays", path,
                                   type_str(t.dtype(), t.shape()), kMaxEmptyArrays));
  }
}

// Elements [flat, flat + prod(shape[axis:])) of t as nested arrays.
json tensor_json(const Tensor& t, size_t axis, int64_t& flat) {
  if (axis == t.shape().size()) {
    double x = t.get(flat++);
    if (is_float(t.dtype())) return float_json(x);
    if (t.dtype() == DType::Bool) return x != 0;
    return static_cast<int64_t>(x);
  }
  json a = json::array();
  for (int64_t i = 0; i < t.shape()[axis]; ++i) a.push_back(tensor_json(t, axis + 1, flat));
  return a;
}

json to_json(const Value& v, const std::string& path, int depth) {
  if (depth > kMaxDataNesting || stack_exhausted()) too_deep(path);
  switch (v.kind()) {
    case Kind::Nil: return nullptr;
    case Kind::Bool: return v.as_bool();
    case Kind::Int: return v.as_int();
    case Kind::Float: return float_json(v.as_float());
    case Kind::Str: case Kind::Keyword: case Kind::Symbol: return v.as_str();
    case Kind::List: {
      json a = json::array();
      for (const Value& x : v.as_list().items) a.push_back(to_json(x, path, depth + 1));
      return a;
    }
    case Kind::Dict: {
      json o = json::object();
      for (const auto& [k, x] : v.as_dict().entries) o[k] = to_json(x, path, depth + 1);
      return o;
    }
    case Kind::Tensor: {
      check_empty_arrays(v.as_tensor(), path);
      int64_t flat = 0;
      return tensor_json(v.as_tensor(), 0, flat);
    }
    case Kind::Handle: return to_json(v.as<HandleObj>().materialize({}), path, depth + 1);
    default: throw SheafError(fmt::format("'{}': cannot write a {} as JSON", path, kind_name(v.kind())));
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

json parse_json(std::string_view text, const std::string& path) {
  check_depth(text, path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw SheafError(fmt::format("'{}': invalid JSON: {}", path, parse_message(e.what())));
  }
}

Value json_value(std::string_view text, const std::string& path) { return to_value(parse_json(text, path), path, 0); }

std::string json_text(const Value& v, const std::string& path) { return dump(to_json(v, path, 0)); }

Value jsonl_value(std::string_view text, const std::string& path) {
  std::vector<Value> items;
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view l = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    items.push_back(json_value(l, fmt::format("{}:{}", path, line)));
  }
  return Value::list(std::move(items));
}

Value load_json(const std::string& path) { return json_value(read_file(path), path); }

Value load_jsonl(const std::string& path) { return jsonl_value(read_file(path), path); }

void save_json(const std::string& path, const Value& v) { write_file_atomic(path, dump(to_json(v, path, 0)) + "\n"); }

void save_jsonl(const std::string& path, const Value& v) {
  if (!v.is_list()) throw SheafError(fmt::format("'{}': JSONL holds a list (one line per element), got {}", path, kind_name(v.kind())));
  std::string out;
  for (const Value& x : v.as_list().items) out += dump(to_json(x, path, 0)) + "\n";
  write_file_atomic(path, out);
}

}  // namespace sheaf
