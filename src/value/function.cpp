// value/function.cpp — environment lookup, parameter-list description, forms as source text.
#include "value/function.hpp"

#include "value/printer.hpp"

namespace sheaf {

const Value* Env::find(int id) const {
  for (const Env* e = this; e; e = e->parent.get())
    for (auto it = e->vars.rbegin(); it != e->vars.rend(); ++it)
      if (it->first == id) return &it->second;
  return nullptr;
}

std::string form_text(const Value& v) {
  if (!v.is_list() || v.as_list().kind == ListKind::Tuple) return print_value(v, false);
  const ListObj& l = v.as_list();
  const char* brackets = l.kind == ListKind::Bracket ? "[]" : l.kind == ListKind::Brace ? "{}" : "()";
  std::string s(1, brackets[0]);
  for (size_t i = 0; i < l.items.size(); ++i) s += (i ? " " : "") + form_text(l.items[i]);
  return s + brackets[1];
}

std::string Params::describe() const {
  std::string s = "[";
  for (size_t i = 0; i < patterns.size(); ++i) s += (i ? " " : "") + form_text(patterns[i]);
  if (!rest.is_nil()) s += std::string(patterns.empty() ? "" : " ") + "& " + form_text(rest);
  return s + "]";
}

}  // namespace sheaf
