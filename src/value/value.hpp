// value/value.hpp — the Value of the language (SPEC §2.1).
// A Value is a tag plus either an immediate (bool, i64, f32) or a shared immutable object.
// Syntax is data: the reader produces Values (lists, symbols, …) that carry source locations,
// macros receive and return them, and the evaluator walks them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/source.hpp"
#include "tensor/tensor.hpp"

namespace sheaf {

enum class Kind : uint8_t {
  Nil, Bool, Int, Float, Str, Keyword, Symbol, List, Dict, Fn, Builtin, Tensor, Slice, Recur, Handle,
};
std::string_view kind_name(Kind k);  // "int", "float", "list", "function", …

// How a list was written: (…) call form, […] vector, {…} dict form (code), or a tuple value.
enum class ListKind : uint8_t { Paren, Bracket, Brace, Tuple };

struct Obj {
  virtual ~Obj() = default;
};

class Value {
 public:
  Value() : i_(0) {}
  static Value nil() { return Value(); }
  static Value boolean(bool b) { Value v(Kind::Bool); v.b_ = b; return v; }
  static Value integer(int64_t i) { Value v(Kind::Int); v.i_ = i; return v; }
  static Value real(float f) { Value v(Kind::Float); v.f_ = f; return v; }
  static Value string(std::string s);
  static Value keyword(std::string_view name);  // without the colon
  static Value symbol(std::string_view name, SrcLoc loc = {});
  static Value symbol_id(int id, SrcLoc loc = {});
  static Value list(std::vector<Value> items, ListKind k = ListKind::Paren, SrcLoc loc = {});
  static Value tuple(std::vector<Value> items) { return list(std::move(items), ListKind::Tuple); }
  static Value tensor(Tensor t);
  static Value slice(int64_t start, std::optional<int64_t> end);
  static Value object(Kind k, std::shared_ptr<Obj> o) { Value v(k); v.obj_ = std::move(o); return v; }

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_nil() const { return kind_ == Kind::Nil; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float; }
  bool is_list() const { return kind_ == Kind::List; }  // includes tuples and code forms
  bool is_callable() const { return kind_ == Kind::Fn || kind_ == Kind::Builtin; }
  bool truthy() const;

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  float as_float() const { return f_; }
  double as_double() const { return kind_ == Kind::Int ? static_cast<double>(i_) : f_; }
  const std::string& as_str() const;  // Str, Keyword (name) or Symbol (name)
  int symbol() const;                 // interned id of a Symbol
  const struct ListObj& as_list() const;
  const struct DictObj& as_dict() const;
  const Tensor& as_tensor() const;
  const struct SliceObj& as_slice() const;
  template <typename T> const T& as() const { return static_cast<const T&>(*obj_); }
  const Obj* raw() const { return obj_.get(); }
  const std::shared_ptr<Obj>& shared() const { return obj_; }

  // Source location of a form: lists and symbols carry one; other values return {}.
  SrcLoc loc() const;

 private:
  friend struct Teardown;
  explicit Value(Kind k) : kind_(k), i_(0) {}
  Kind kind_ = Kind::Nil;
  union {
    bool b_;
    int64_t i_;
    float f_;
  };
  std::shared_ptr<Obj> obj_;
};

struct StrObj : Obj {
  std::string s;
  explicit StrObj(std::string v) : s(std::move(v)) {}
};

struct SymObj : Obj {
  int id;
  SrcLoc loc;
  SymObj(int i, SrcLoc l) : id(i), loc(l) {}
};

// Lists and dicts release their elements without recursing on the depth of the data: a chain
// of 25M nested lists is destroyed in a loop (value.cpp, Teardown), not in 25M nested frames.
struct ListObj : Obj {
  ~ListObj() override;
  std::vector<Value> items;
  ListKind kind = ListKind::Paren;
  SrcLoc loc;
  std::optional<DType> suffix;  // `[..] :i32` dtype suffix on a bracket literal
};

// Dict: keys are names (keyword and string keys coincide, SPEC §2.6), sorted by code point.
struct DictObj : Obj {
  ~DictObj() override;
  std::vector<std::pair<std::string, Value>> entries;  // sorted, unique keys
  const Value* find(std::string_view key) const;
};
Value make_dict(std::vector<std::pair<std::string, Value>> entries);  // sorts; last key wins
Value dict_assoc(const Value& d, std::string key, Value v);

struct TensorObj : Obj {
  Tensor t;
  explicit TensorObj(Tensor x) : t(std::move(x)) {}
};

struct SliceObj : Obj {
  int64_t start;
  std::optional<int64_t> end;
};

// A pending `recur`: produced only in tail position of a `loop` body.
struct RecurObj : Obj {
  std::vector<Value> args;
  // A decision made at run time inside a compiled loop (trace::trace_loop): the loop goes on
  // with `args` where the traced bool `go` is true, and ends with `result` where it is false.
  // Either may be missing (has_args / has_result) when no branch produced it. Unset `go`: a
  // plain recur.
  std::optional<Tensor> go;
  bool has_args = true;
  Value result;
  bool has_result = false;
};

// Symbol interning: symbols compare by id.
namespace symbols {
int intern(std::string_view name);
const std::string& name(int id);
}  // namespace symbols

// The dict key named by a keyword, string or symbol value; empty optional otherwise.
std::optional<std::string> key_name(const Value& v);

// Structural equality (SPEC §5.2 `=`): numbers by value, lists element-wise, dicts by entries.
bool equal(const Value& a, const Value& b);

}  // namespace sheaf
