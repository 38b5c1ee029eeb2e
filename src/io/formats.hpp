// io/formats.hpp — the file formats of SPEC §7.4–7.8, one loader/saver pair per format file.
// Paths arrive resolved and format-checked (io/io.cpp); errors name the file ("'x.npy': ...")
// and the `io` builtin prefixes them with the verb.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "io/elements.hpp"
#include "value/value.hpp"

namespace sheaf {

// safetensors.cpp: one lazy handle over all shards (names unique across shards).
Value load_safetensors(const std::vector<std::string>& shards);
Value load_safetensors_index(const std::string& index_path);
void save_safetensors(const std::string& path, const Value& tree);

// npy.cpp: one row handle over all shards (same dtype and row shape); a rank-0
// array loads as a scalar.
Value load_npy(const std::vector<std::string>& shards);
void save_npy(const std::string& path, const Value& tensor);

// raw_bin.cpp: headerless little-endian 1-D data; all shards form one virtual 1-D tensor.
Value load_bin(const std::vector<std::string>& shards, Elem elem);
void save_bin(const std::string& path, const Value& tensor, std::optional<Elem> elem);

// idx.cpp: eager load (gzip detected by content); `max_elements` bounds the element count, and
// the buffer grows only with the data that is really there. load_idx_bytes is the same over a
// file's bytes (`path` names them in errors).
Value load_idx(const std::string& path, int64_t max_elements);
Value load_idx_bytes(std::string bytes, const std::string& path, int64_t max_elements);

// json.cpp
Value load_json(const std::string& path);
Value load_jsonl(const std::string& path);
void save_json(const std::string& path, const Value& v);
void save_jsonl(const std::string& path, const Value& list);

// text.cpp
Value load_text(const std::string& path);
Value load_lines(const std::string& path);  // list of strings, newlines (and \r) removed
void save_text(const std::string& path, const Value& v);

// A tensor to save: a tensor value, a number (rank 0) or a handle (materialized).
Tensor tensor_to_save(const Value& v, std::string_view path, std::string_view format);

// Text taken from a file (a tensor name, a dtype, a header key) quoted for an error message:
// at most 96 bytes, with control bytes, C1 controls and invalid UTF-8 escaped as \xNN, so that a
// hostile file can neither fill the message nor send escape sequences to the terminal.
std::string quote_file_text(std::string_view untrusted);

}  // namespace sheaf
