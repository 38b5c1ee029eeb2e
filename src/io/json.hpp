// io/json.hpp — JSON text parsing shared by the formats that carry JSON (safetensors headers,
// index files, .json/.jsonl): errors name the file and the position; and values as JSON text
// (rows of `io "append"`).
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "value/value.hpp"

namespace sheaf {

// Parses text, refusing nesting deeper than 10000 levels before any tree is built; errors give
// the position and what is wrong but never echo the text.
nlohmann::json parse_json(std::string_view text, const std::string& path);

// The value of a JSON text and the list of a JSONL text's lines (SPEC §7.8); load_json and
// load_jsonl read a file into these. `path` names the source in errors.
Value json_value(std::string_view text, const std::string& path);
Value jsonl_value(std::string_view text, const std::string& path);

// A value as one line of JSON text by the saving rules of SPEC §7.8 (a rank-0 tensor is a
// number); errors name `path`.
std::string json_text(const Value& v, const std::string& path);

}  // namespace sheaf
