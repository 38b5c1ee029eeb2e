// builtins/registry.cpp — concatenates the family tables into the builtin table.
#include "builtins/registry.hpp"

namespace sheaf {

const std::vector<const BuiltinDef*>& builtin_table() {
  static const std::vector<const BuiltinDef*> table = [] {
    std::vector<const BuiltinDef*> t;
    for (auto family : {math_builtins(), compare_builtins(), list_builtins(), dict_builtins(), string_builtins(),
                        creation_builtins(), shape_builtins(), index_builtins(), linalg_builtins(), reduce_builtins(),
                        activation_builtins(), loss_builtins(), tree_builtins(), random_builtins(), io_builtins(), conv_builtins(),
                        transform_builtins(), autodiff_builtins(), distributed_builtins()})
      for (const BuiltinDef& d : family) t.push_back(&d);
    return t;
  }();
  return table;
}

}  // namespace sheaf
