// eval/args.cpp — argument helpers for builtins.
#include "eval/args.hpp"

#include <cmath>

#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {

void type_error(const CallArgs& a, size_t i, std::string_view expected) {
  const Value& v = a[i];
  std::string got = v.is(Kind::Tensor) ? fmt::format("{}[{}] tensor", dtype_name(v.as_tensor().dtype()), fmt::join(v.as_tensor().shape(), "x"))
                                       : std::string(kind_name(v.kind()));
  throw SheafError(fmt::format("{}: argument {} must be {}, got {}", a.name, i + 1, expected, got), a.site);
}

double arg_number(const CallArgs& a, size_t i) {
  if (a[i].is(Kind::Bool)) return a[i].as_bool();
  auto d = number_of(a[i]);
  if (!d) type_error(a, i, "a number");
  return *d;
}

int64_t arg_int(const CallArgs& a, size_t i) {
  if (a[i].is(Kind::Int)) return a[i].as_int();
  auto d = number_of(a[i]);
  if (!d || std::trunc(*d) != *d || std::fabs(*d) > 9.2e18) type_error(a, i, "an integer");
  return static_cast<int64_t>(*d);
}

const std::string& arg_string(const CallArgs& a, size_t i) {
  if (!a[i].is(Kind::Str) && !a[i].is(Kind::Symbol)) type_error(a, i, "a string");
  return a[i].as_str();
}

const Value& arg_callable(const CallArgs& a, size_t i) {
  if (!a[i].is_callable()) type_error(a, i, "a function");
  return a[i];
}

Shape arg_shape(const CallArgs& a, size_t i) {
  const Value& v = a[i];
  Shape s;
  auto dim = [&](std::optional<double> d) {
    if (!d || *d != static_cast<double>(static_cast<int64_t>(*d)) || *d < 0)
      throw SheafError(fmt::format("{}: shape entries must be non-negative integers, got {}", a.name, print_value(v, false)), a.site);
    s.push_back(static_cast<int64_t>(*d));
  };
  if (v.is_list()) {
    for (const Value& x : v.as_list().items) dim(number_of(x));
  } else if (v.is(Kind::Tensor) && v.as_tensor().rank() == 1) {  // integral values, any dtype
    for (int64_t j = 0; j < v.as_tensor().numel(); ++j) dim(v.as_tensor().get(j));
  } else if (v.is(Kind::Int)) {
    dim(static_cast<double>(v.as_int()));
  } else {
    type_error(a, i, "a shape (a list of integers such as '[2 3])");
  }
  return s;
}

DType dtype_value(const Value& v, const CallArgs& a) {
  if (v.is(Kind::Keyword) || v.is(Kind::Str))
    if (auto d = dtype_from_name(v.as_str())) return *d;
  throw SheafError(fmt::format("{}: unsupported dtype {}", a.name, print_value(v, false)), a.site);
}

DType arg_dtype(const CallArgs& a, size_t i) { return dtype_value(a[i], a); }

Options parse_options(const CallArgs& a, std::initializer_list<std::string_view> known) {
  Options o;
  for (size_t i = 0; i < a.size(); ++i) {
    const Value& v = a[i];
    if (!v.is(Kind::Keyword)) {
      o.positional.push_back(v);
      continue;
    }
    const std::string& k = v.as_str();
    bool is_known = false;
    for (auto n : known) is_known = is_known || n == k;
    if (!is_known) {
      o.positional.push_back(v);  // keywords are ordinary values unless declared options
      continue;
    }
    // `:dtype :f16` and `:padding :same` take keyword values; other keywords before a keyword are flags.
    bool keyword_valued = k == "dtype" || k == "padding";
    if (i + 1 >= a.size() || (a[i + 1].is(Kind::Keyword) && !keyword_valued)) {
      o.kw[k] = Value::boolean(true);
    } else {
      o.kw[k] = a[i + 1];
      ++i;
    }
  }
  return o;
}

Value left_fold(Interp& in, const Value& f, std::span<const Value> items, const Value* init, const CallArgs& a,
                std::string_view what) {
  size_t start = 0;
  Value acc;
  if (init) {
    acc = *init;
  } else {
    if (items.empty()) throw SheafError(fmt::format("{}: empty {} and no initial value", a.name, what), a.site);
    acc = items[0];
    start = 1;
  }
  for (size_t i = start; i < items.size(); ++i) {
    Value pair[2] = {acc, items[i]};
    acc = in.call(f, pair, a.site);
  }
  return acc;
}

}  // namespace sheaf
