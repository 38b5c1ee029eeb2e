// io/json.hpp — JSON text parsing shared by the formats that carry JSON (safetensors headers,
// index files, .json/.jsonl): errors name the file and the position; and values as JSON text
// (rows of `io "append"`).
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sheaf {

class Value;

nlohmann::json parse_json(std::string_view text, const std::string& path);

// A value as one line of JSON text by the saving rules of SPEC §7.8 (a rank-0 tensor is a
// number); errors name `path`.
std::string json_text(const Value& v, const std::string& path);

}  // namespace sheaf
