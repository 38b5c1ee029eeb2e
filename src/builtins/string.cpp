// builtins/string.cpp — strings, printing and symbols (SPEC §5.13).
#include "builtins/args.hpp"
#include "builtins/registry.hpp"
#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

Value b_str(Interp&, const CallArgs& a) {
  std::string s;
  for (const Value& v : a.args) s += print_value(v, true);
  return Value::string(s);
}

Value b_print(Interp& in, const CallArgs& a) {
  std::string s;
  for (size_t i = 0; i < a.size(); ++i) s += (i ? " " : "") + print_value(a[i], true);
  in.out() << s << "\n";
  return Value();
}

const BuiltinDef kString[] = {
    {"str", "(str x ...)", "Concatenation of the printed forms (strings unquoted).", b_str, 0, -1},
    {"print", "(print x ...) / (print fmt args...)", "Write printed forms to stdout; returns nil.", b_print, 0, -1, true},
};

}  // namespace

std::span<const BuiltinDef> string_builtins() { return kString; }

}  // namespace sheaf
