// io/json.hpp — JSON text parsing shared by the formats that carry JSON (safetensors headers,
// index files, .json/.jsonl): errors name the file and the position.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sheaf {

nlohmann::json parse_json(std::string_view text, const std::string& path);

}  // namespace sheaf
