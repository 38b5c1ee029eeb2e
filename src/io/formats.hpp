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

// idx.cpp: eager load (gzip detected by content); `max_elements` bounds the allocation.
Value load_idx(const std::string& path, int64_t max_elements);

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

}  // namespace sheaf
