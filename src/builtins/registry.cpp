// builtins/registry.cpp — the family tables, named and in table order, installed as the builtin table.
#include "builtins/registry.hpp"

#include "autodiff/builtins.hpp"

namespace sheaf {

void install_builtins() {
  static const BuiltinFamily families[] = {
      {"arithmetic and math", math_builtins()},   {"comparison and logic", compare_builtins()},
      {"lists and sequences", list_builtins()},   {"dicts", dict_builtins()},
      {"strings and printing", string_builtins()}, {"tensor creation", creation_builtins()},
      {"shapes", shape_builtins()},               {"indexing", index_builtins()},
      {"linear algebra", linalg_builtins()},      {"reductions", reduce_builtins()},
      {"activations", activation_builtins()},     {"losses", loss_builtins()},
      {"pytrees", tree_builtins()},               {"random numbers", random_builtins()},
      {"initializers", init_builtins()},          {"learning-rate schedules", schedule_builtins()},
      {"files and data (io)", io_builtins()},     {"convolutions", conv_builtins()},
      {"transforms", transform_builtins()},       {"differentiation", autodiff_builtins()},
      {"differentiation rules", rule_builtins()},  {"data-parallel training", distributed_builtins()},
      {"program arguments", program_args_builtins()}, {"metrics", metrics_builtins()},
      {"interrupts", interrupt_builtins()},
  };
  eval_hooks.builtins = families;
}

}  // namespace sheaf
