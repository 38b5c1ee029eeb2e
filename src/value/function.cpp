// value/function.cpp — environment lookup and parameter-list description.
#include "value/function.hpp"

#include "value/printer.hpp"

namespace sheaf {

const Value* Env::find(int id) const {
  for (const Env* e = this; e; e = e->parent.get())
    for (auto it = e->vars.rbegin(); it != e->vars.rend(); ++it)
      if (it->first == id) return &it->second;
  return nullptr;
}

std::string Params::describe() const {
  std::string s = "[";
  for (size_t i = 0; i < patterns.size(); ++i) s += (i ? " " : "") + print_value(patterns[i]);
  if (!rest.is_nil()) s += std::string(patterns.empty() ? "" : " ") + "& " + print_value(rest);
  return s + "]";
}

}  // namespace sheaf
