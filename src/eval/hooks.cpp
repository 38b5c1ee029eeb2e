// eval/hooks.cpp — the check that init_runtime() filled the hooks, and the builtin table.
#include "eval/hooks.hpp"

#include <string>

#include "eval/interp.hpp"

namespace sheaf {

void check_hooks_installed() {
  std::string missing;
  auto need = [&](bool ok, const char* what) {
    if (!ok) missing += missing.empty() ? what : std::string(", ") + what;
  };
  const TraceHooks& t = eval_hooks.trace;
  need(!eval_hooks.builtins.empty(), "builtins");
  need(t.tracing && t.output_effects_muted && t.set_site && t.in_loop_trace && t.in_loop_body && t.merge_branches &&
           t.merge_loop_exits && t.trace_while && t.trace_loop && t.record_guard,
       "trace");
  need(eval_hooks.make_compiler, "jit");
  need(eval_hooks.make_observer, "observability");
  for (const SpecialForm& sf : special_forms()) need(sf.fn, std::string(sf.name).c_str());
  if (!missing.empty())
    throw std::logic_error("sheaf::init_runtime() must run before the first interpreter (missing: " + missing + ")");
}

const std::vector<const BuiltinDef*>& builtin_table() {
  static const std::vector<const BuiltinDef*> table = [] {
    check_hooks_installed();
    std::vector<const BuiltinDef*> t;
    for (const BuiltinFamily& family : builtin_families())
      for (const BuiltinDef& d : family.defs) t.push_back(&d);
    return t;
  }();
  return table;
}

}  // namespace sheaf
