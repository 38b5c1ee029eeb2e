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
#include "value/handle.hpp"

namespace sheaf {

namespace {

using json = nlohmann::json;
constexpr int kMaxDepth = 10000;

[[noreturn]] void too_deep(const std::string& path) {
  throw SheafError(fmt::format("'{}': the data nests deeper than {} levels", path, kMaxDepth));
}

Value to_value(const json& j, const std::string& path, int depth) {
  if (depth > kMaxDepth || stack_exhausted()) too_deep(path);
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
  if (depth > kMaxDepth || stack_exhausted()) too_deep(path);
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
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string msg = e.what();
    if (size_t p = msg.find("] "); p != std::string::npos) msg.erase(0, p + 2);  // drop "[json.exception...]"
    throw SheafError(fmt::format("'{}': invalid JSON: {}", path, msg));
  }
}

std::string json_text(const Value& v, const std::string& path) { return dump(to_json(v, path, 0)); }

Value load_json(const std::string& path) { return to_value(parse_json(read_file(path), path), path, 0); }

Value load_jsonl(const std::string& path) {
  std::string text = read_file(path);
  std::vector<Value> items;
  size_t pos = 0;
  for (int line = 1; pos < text.size(); ++line) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view l = std::string_view(text).substr(pos, eol - pos);
    pos = eol + 1;
    if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    items.push_back(to_value(parse_json(l, fmt::format("{}:{}", path, line)), path, 0));
  }
  return Value::list(std::move(items));
}

void save_json(const std::string& path, const Value& v) { write_file_atomic(path, dump(to_json(v, path, 0)) + "\n"); }

void save_jsonl(const std::string& path, const Value& v) {
  if (!v.is_list()) throw SheafError(fmt::format("'{}': JSONL holds a list (one line per element), got {}", path, kind_name(v.kind())));
  std::string out;
  for (const Value& x : v.as_list().items) out += dump(to_json(x, path, 0)) + "\n";
  write_file_atomic(path, out);
}

}  // namespace sheaf
