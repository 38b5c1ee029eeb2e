// eval/typed_params.cpp — parameter schemas and typed parameter lists (SPEC §1.4, §4.1).
//   (defparams Linear {:W [in out] :b [out]})     a schema: a global dict whose leaves are shape
//                                                 specs, nested {...} groups, or the name of
//                                                 another schema ({:l1 Linear :l2 {:W [8 2]}})
//   (defn f [(x [4 2]) (p :as Linear) y] ...)     x must be a tensor of shape [4 2]; p a dict
//                                                 with Linear's keys and leaf shapes
// A shape spec [d ...] lists sizes: an integer must match, `_` accepts any size, and a symbol
// accepts any size but the same size wherever that symbol appears again in the same scope. The
// shape specs of one parameter vector form one scope; each use of a schema (a `:as` parameter or
// a schema named inside another) forms its own, so a schema's symbols relate its own leaves only.
// A dtype suffix on a spec ([4 2] :bf16) also requires that dtype. A data handle (a loaded
// safetensors or npy file) is checked by its content. Checks run when the function
// is called (for a compiled function: when it is traced, since shapes are static in a trace); a
// mismatch names the function, the parameter, and the expected and actual shapes.
#include "eval/typed_params.hpp"

#include <map>

#include "eval/interp.hpp"
#include "value/handle.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {
namespace {

bool is_bracket(const Value& v) { return v.is_list() && v.as_list().kind == ListKind::Bracket; }
bool is_keyword(const Value& v, std::string_view k) { return v.is(Kind::Keyword) && v.as_str() == k; }

// "[n 2]" or "[n 2] :bf16", as written.
std::string spec_text(const Value& spec) {
  const ListObj& l = spec.as_list();
  std::string s = "[";
  for (size_t i = 0; i < l.items.size(); ++i) s += (i ? " " : "") + print_value(l.items[i], false);
  s += "]";
  if (l.suffix) s += " :" + std::string(dtype_name(*l.suffix));
  return s;
}

// Validates a shape spec [d ...] at definition time; `what` names its place for the error.
void check_spec(const Value& spec, const std::string& what, SrcLoc loc) {
  for (const Value& d : spec.as_list().items) {
    bool ok = (d.is(Kind::Int) && d.as_int() >= 0) || (d.is(Kind::Symbol) && !is_reserved_name(d.as_str()));
    if (!ok)
      throw SheafError(what + ": a shape lists sizes (non-negative integers, `_` or a name), got " + print_value(d, false),
                       d.loc().valid() ? d.loc() : loc);
  }
}

bool is_schema(const Interp& in, const Value& name) {
  const Interp::Global* g = name.is(Kind::Symbol) ? in.global(name.symbol()) : nullptr;
  return g && g->type == Interp::Global::Type::Schema;
}

void need_schema(const Interp& in, const Value& name, const std::string& what, SrcLoc loc) {
  if (is_schema(in, name)) return;
  throw SheafError(what + ": '" + print_value(name, false) + "' is not a parameter schema", name.loc().valid() ? name.loc() : loc,
                   "declare it before this use: (defparams " + print_value(name, false) + " {:W [4 8] :b [8]})");
}

// The schema value of a defparams body form: a dict of specs, groups and schema names.
Value schema_value(const Interp& in, const Value& form, const std::string& what, SrcLoc loc) {
  if (is_bracket(form)) {
    check_spec(form, what, loc);
    return form;
  }
  if (form.is(Kind::Symbol)) {
    need_schema(in, form, what, loc);
    return form;
  }
  if (!form.is_list() || form.as_list().kind != ListKind::Brace)
    throw SheafError(what + ": expected a shape [d ...], a group {:k ...} or the name of a schema, got " + print_value(form, false),
                     form.loc().valid() ? form.loc() : loc);
  const auto& items = form.as_list().items;
  if (items.size() % 2) throw SheafError(what + ": a group needs key/value pairs", form.loc().valid() ? form.loc() : loc);
  std::vector<std::pair<std::string, Value>> entries;
  for (size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is(Kind::Keyword))
      throw SheafError(what + ": schema keys are keywords, got " + print_value(items[i], false), form.loc().valid() ? form.loc() : loc);
    entries.emplace_back(items[i].as_str(), schema_value(in, items[i + 1], what + " :" + items[i].as_str(), loc));
  }
  return make_dict(std::move(entries));
}

// Size bindings of the dimension symbols of one scope: symbol → (size, where it was bound).
using DimScope = std::map<int, std::pair<int64_t, std::string>>;

// Checks one typed call; every message starts with "f: parameter p".
class Checker {
 public:
  Checker(const Interp& in, std::string prefix, SrcLoc site) : in_(in), prefix_(std::move(prefix)), site_(site) {}

  // `where` names the leaf ("" for a plain typed parameter, " :attn :W" inside a schema).
  void shape(const Value& spec, const Value& v, const std::string& where, DimScope& scope) {
    if (v.is(Kind::Handle)) return shape(spec, v.as<HandleObj>().materialize(site_), where, scope);  // a file-backed tensor
    const ListObj& l = spec.as_list();
    auto expected = [&] { return "expects" + (where.empty() ? "" : where + " of") + " shape " + spec_text(spec); };
    if (!v.is(Kind::Tensor) && !(v.is_number() && l.items.empty())) fail(expected() + ", got " + describe(v));
    Shape s = v.is(Kind::Tensor) ? v.as_tensor().shape() : Shape{};
    if (l.suffix && (!v.is(Kind::Tensor) || v.as_tensor().dtype() != *l.suffix)) fail(expected() + ", got " + describe(v));
    if (s.size() != l.items.size()) fail(expected() + ", got " + shape_text(s));
    for (size_t i = 0; i < s.size(); ++i) {
      const Value& d = l.items[i];
      if (d.is(Kind::Int)) {
        if (d.as_int() != s[i]) fail(expected() + ", got " + shape_text(s));
        continue;
      }
      if (d.as_str() == "_") continue;
      auto [it, fresh] = scope.try_emplace(d.symbol(), s[i], param_ + where);
      if (!fresh && it->second.first != s[i]) {
        std::string from = it->second.second == param_ + where ? "" : " (from " + it->second.second + ")";
        fail(fmt::format("{} with {} = {}{}, got {}", expected(), d.as_str(), it->second.first, from, shape_text(s)));
      }
    }
  }

  // A dict matching `schema` (a schema's name, or a group of it) with its own dimension scope.
  void schema(const Value& s, const Value& v, const std::string& where, DimScope& scope) {
    if (s.is(Kind::Symbol)) {
      DimScope own;
      return schema(in_.global(s.symbol())->value, v, where, own);
    }
    if (v.is(Kind::Handle)) return schema(s, v.as<HandleObj>().materialize(site_), where, scope);  // a loaded safetensors file
    if (!v.is(Kind::Dict)) fail("expects" + (where.empty() ? " a dict" : where + " to be a dict") + ", got " + describe(v));
    for (const auto& [k, sub] : s.as_dict().entries) {
      const Value* got = v.as_dict().find(k);
      if (!got) fail("has no key :" + k + (where.empty() ? "" : " in" + where));
      std::string path = where + " :" + k;
      if (is_bracket(sub)) shape(sub, *got, path, scope);
      else schema(sub, *got, path, scope);
    }
    for (const auto& [k, x] : v.as_dict().entries)
      if (!s.as_dict().find(k)) fail("has an unexpected key :" + k + (where.empty() ? "" : " in" + where));
  }

  void param(const std::string& name) { param_ = "parameter " + name; }
  void label(const std::string& schema) { label_ = schema.empty() ? "" : " (" + schema + ")"; }

 private:
  const Interp& in_;
  std::string prefix_, param_, label_;
  SrcLoc site_;

  [[noreturn]] void fail(const std::string& what) const { throw SheafError(prefix_ + ": " + param_ + label_ + " " + what); }

  static std::string shape_text(const Shape& s) { return fmt::format("[{}]", fmt::join(s, " ")); }
  static std::string describe(const Value& v) {
    if (v.is(Kind::Tensor)) return fmt::format("{} {}", dtype_name(v.as_tensor().dtype()), shape_text(v.as_tensor().shape()));
    if (v.is_number()) return "the number " + print_value(v, false);
    return std::string(kind_name(v.kind()));
  }
};

}  // namespace

bool is_typed_param(const Value& pattern) { return pattern.is_list() && pattern.as_list().kind == ListKind::Paren; }

const Value& param_name(const Value& pattern) { return is_typed_param(pattern) ? pattern.as_list().items[0] : pattern; }

void check_typed_param(const Interp& in, const Value& pattern, SrcLoc loc) {
  const ListObj& l = pattern.as_list();
  SrcLoc at = l.loc.valid() ? l.loc : loc;
  bool shape = l.items.size() == 2 && is_bracket(l.items[1]);
  bool as = l.items.size() == 3 && is_keyword(l.items[1], "as");
  if (l.items.empty() || !l.items[0].is(Kind::Symbol) || (!shape && !as))
    throw SheafError("invalid parameter " + form_text(pattern), at,
                     "a typed parameter is (x [4 2]) for a tensor of that shape or (p :as Schema) for a dict declared "
                     "with defparams; other patterns use square brackets: [a b]");
  check_pattern(l.items[0], loc);
  std::string what = "parameter " + l.items[0].as_str();
  if (shape) check_spec(l.items[1], what, at);
  else need_schema(in, l.items[2], what, at);
}

void check_typed_args(const Interp& in, const std::string& fn_name, const Params& params, std::span<const Value> args,
                      SrcLoc site) {
  Checker check(in, fn_name.empty() ? "<lambda>" : fn_name, site);
  DimScope scope;
  try {
    for (size_t i = 0; i < params.patterns.size(); ++i) {
      const Value& p = params.patterns[i];
      if (!is_typed_param(p)) continue;
      const auto& items = p.as_list().items;
      check.param(items[0].as_str());
      if (items.size() == 2) {
        check.label("");
        check.shape(items[1], args[i], "", scope);
      } else {
        check.label(items[2].as_str());
        check.schema(items[2], args[i], "", scope);
      }
    }
  } catch (SheafError& e) {
    e.loc = site;
    throw;
  }
}

Value sf_defparams(Interp& in, const ListObj& f, const EnvPtr&) {
  if (f.items.size() != 3 || !f.items[1].is(Kind::Symbol))
    throw SheafError("defparams: expected (defparams Name {:k [shape] ...})", f.loc);
  const Value& name = f.items[1];
  SrcLoc at = name.loc().valid() ? name.loc() : f.loc;
  in.check_definable(name.symbol(), at);
  const Value& body = f.items[2];
  if (!body.is_list() || body.as_list().kind != ListKind::Brace)
    throw SheafError("defparams " + name.as_str() + ": expected a dict of shapes {:k [shape] ...}, got " + print_value(body, false),
                     body.loc().valid() ? body.loc() : f.loc);
  Value schema = schema_value(in, body, "defparams " + name.as_str(), f.loc);
  in.define(name.symbol(), schema, Interp::Global::Type::Schema, at);
  return schema;
}

}  // namespace sheaf
