// io/pickle.hpp — Python pickles of plain data and NumPy arrays (SPEC §1.4, §7.2), read by a
// restricted pickle machine that never imports or calls anything (pickle_load.cpp) and written
// as protocol 4 that Python's pickle.load with NumPy reads back (pickle_save.cpp).
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "value/value.hpp"

namespace sheaf {

// The value a pickle holds: dicts, lists, tuples, strings, numbers, booleans, None and NumPy
// arrays (converted as for .npy). `what` names the source in errors ("'w.pkl'").
Value parse_pickle(std::span<const std::byte> bytes, std::string_view what);
Value load_pickle(const std::string& path);

// Protocol 4: dicts (string keys), lists, tuples, strings, numbers, booleans, nil and tensors
// (NumPy arrays of their dtype; bf16 has no NumPy dtype and is an error naming the leaf).
void save_pickle(const std::string& path, const Value& tree);

}  // namespace sheaf
