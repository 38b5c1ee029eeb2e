// builtins/registry.hpp — the families of the one builtin table (name, signature, doc,
// function, arity), which the evaluator owns (eval/hooks.hpp: builtin_families, builtin_table).
// It feeds dispatch, REPL `:help` and completion, `sheaf init-ai` and docs/reference.md.
// Each family file (math, compare, list, dict, string, …) contributes one static array; the
// transforms of autodiff/ contribute theirs (autodiff/builtins.hpp).
#pragma once
#include <span>

#include "eval/hooks.hpp"

namespace sheaf {

std::span<const BuiltinDef> math_builtins();
std::span<const BuiltinDef> compare_builtins();
std::span<const BuiltinDef> list_builtins();
std::span<const BuiltinDef> dict_builtins();
std::span<const BuiltinDef> string_builtins();
std::span<const BuiltinDef> creation_builtins();    // zeros ones eye one-hot tensor cast
std::span<const BuiltinDef> shape_builtins();       // shape ndim reshape transpose slice concat stack …
std::span<const BuiltinDef> index_builtins();       // index-update dynamic-slice top_k …
std::span<const BuiltinDef> linalg_builtins();      // @ einsum
std::span<const BuiltinDef> reduce_builtins();      // sum mean product min max var argmax argmin normalize
std::span<const BuiltinDef> activation_builtins();  // relu … softmax log-softmax
std::span<const BuiltinDef> loss_builtins();        // sparse-cross-entropy
std::span<const BuiltinDef> tree_builtins();        // tree-map tree-map-zeros tree-reduce flatten scan
std::span<const BuiltinDef> random_builtins();      // random-key random-split … choice dropout
std::span<const BuiltinDef> init_builtins();        // init-zeros … init-orthogonal
std::span<const BuiltinDef> schedule_builtins();    // linear-warmup … cosine-decay
std::span<const BuiltinDef> io_builtins();          // io
std::span<const BuiltinDef> conv_builtins();        // conv1d conv2d
std::span<const BuiltinDef> transform_builtins();   // vmap
std::span<const BuiltinDef> distributed_builtins();  // rank world-size all-reduce broadcast-tree barrier shard
std::span<const BuiltinDef> program_args_builtins();  // args
std::span<const BuiltinDef> metrics_builtins();       // log-metrics log-metrics-to tensorboard
std::span<const BuiltinDef> interrupt_builtins();     // on-interrupt

// Installs the families, in table order, as the evaluator's builtin table (init_runtime).
void install_builtins();

}  // namespace sheaf
