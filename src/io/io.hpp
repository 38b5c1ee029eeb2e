// io/io.hpp — what the `io` builtin calls (SPEC §7.2): format detection from the path or a hint
// keyword, glob expansion for sharded sets, and dispatch to the format files. Errors name the
// file; the builtin prefixes them with "io <verb>: ".
#pragma once
#include <string>

#include "value/value.hpp"

namespace sheaf {

// `hint` is nil or a keyword (:safetensors :npy :json :jsonl :txt :idx, or a dtype flag for raw
// binary). `max_elements` bounds eager allocations (IDX).
Value io_load(const std::string& path, const Value& hint, int64_t max_elements);
void io_save(const std::string& path, const Value& value, const Value& hint);

// n bytes (1–8) from the OS random source as a non-negative integer (8 bytes keep 63 bits).
int64_t os_entropy(int n);

}  // namespace sheaf
