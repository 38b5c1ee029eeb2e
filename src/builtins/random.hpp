// builtins/random.hpp — the samplers of random.cpp that other builtin families draw from
// (the initializers of init.cpp): the same bits as random-uniform and random-normal.
#pragma once
#include "value/function.hpp"

namespace sheaf {

// f32 samples of `shape` from the key in argument `key_index` (a key, a seed or two words;
// traced keys record IR): uniform in [0, 1) as random-uniform, standard normal as random-normal.
Tensor uniform_sample(Interp& in, const CallArgs& a, size_t key_index, const Shape& shape);
Tensor normal_sample(Interp& in, const CallArgs& a, size_t key_index, const Shape& shape);

}  // namespace sheaf
