// io/safetensors.cpp — safetensors files (SPEC §7.3, §7.4).
// Layout: u64 little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with spaces, then the data
// (offsets relative to its start). Every header field is validated before any tensor byte is
// touched. Loading gives a lazy handle over all shards, held open (io/data_file.hpp: each tensor
// is copied out of its file when it is read); names split at `.`
// make it a read-only nested dict, and views of a name prefix (`(get h :layer1)`) are handles too.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/stack.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "io/json.hpp"
#include "value/handle.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

namespace {

using json = nlohmann::json;

constexpr std::pair<std::string_view, Elem> kDtypes[] = {
    {"F32", Elem::F32}, {"F16", Elem::F16}, {"BF16", Elem::BF16}, {"I32", Elem::I32},
    {"U32", Elem::U32}, {"BOOL", Elem::Bool}, {"I8", Elem::I8},   {"U8", Elem::U8},
    {"I16", Elem::I16}, {"I64", Elem::I64}, {"F64", Elem::F64},
};
constexpr uint64_t kMaxHeader = 100'000'000;  // the reference implementation's limit

struct Entry {
  FilePtr file;
  size_t offset = 0;  // absolute, validated: the whole tensor lies inside the file
  Elem elem = Elem::F32;
  Shape shape;
};
using Table = std::map<std::string, Entry, std::less<>>;

[[noreturn]] void bad_header(const std::string& path, std::string_view msg) {
  throw SheafError(fmt::format("'{}': invalid safetensors header: {}", path, msg));
}

Elem parse_dtype(const json& d, const std::string& path, const std::string& name) {
  if (!d.is_string()) bad_header(path, fmt::format("tensor {} has no dtype string", quote_file_text(name)));
  for (auto [n, e] : kDtypes)
    if (d.get_ref<const std::string&>() == n) return e;
  throw SheafError(fmt::format("'{}': tensor {} has unsupported dtype {} (supported: F32 F16 BF16 I32 U32 BOOL, "
                               "and I8 U8 I16 I64 as i32, F64 as f32)",
                               path, quote_file_text(name), quote_file_text(d.get_ref<const std::string&>())));
}

std::vector<int64_t> parse_uints(const json& a, size_t want, const std::string& path, const std::string& what) {
  if (!a.is_array() || (want && a.size() != want)) bad_header(path, fmt::format("{} must be an array{}", what, want ? " of 2" : ""));
  std::vector<int64_t> out;
  for (const json& x : a) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > (uint64_t{1} << 62))
      bad_header(path, fmt::format("{} must hold non-negative integers", what));
    out.push_back(static_cast<int64_t>(x.get<uint64_t>()));
  }
  return out;
}

// All tensors of one file, validated against the file size. Until the header has parsed, the file
// may be anything (an index can name any file in its folder), so errors do not quote its bytes.
std::vector<std::pair<std::string, Entry>> parse_file(const std::string& path) {
  FilePtr m = open_data_file(path);
  uint64_t n;
  m->read(0, 8, &n, "the header length");
  if (n > kMaxHeader)
    bad_header(path, fmt::format("the header length (the first 8 bytes) exceeds the limit of {} bytes", kMaxHeader));
  if (n > m->size - 8)
    bad_header(path, fmt::format("the header length (the first 8 bytes) exceeds the {} bytes that follow it; the file is "
                                 "truncated or not safetensors",
                                 m->size - 8));
  const std::string text = m->read(8, n, "the header");
  json j = parse_json(text, path);
  if (!j.is_object()) bad_header(path, "the header is not a JSON object");
  size_t data_start = 8 + n, data_size = m->size - data_start;
  std::vector<std::pair<std::string, Entry>> out;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) bad_header(path, "__metadata__ must be an object");
      for (const auto& [k, v] : info.items())
        if (!v.is_string()) bad_header(path, fmt::format("__metadata__ value {} must be a string", quote_file_text(k)));
      continue;
    }
    std::string shown = quote_file_text(name);
    if (!info.is_object()) bad_header(path, fmt::format("entry {} is not an object", shown));
    Entry e;
    e.file = m;
    e.elem = parse_dtype(info.contains("dtype") ? info["dtype"] : json(), path, name);
    e.shape = parse_uints(info.contains("shape") ? info["shape"] : json(), 0, path, fmt::format("shape of {}", shown));
    auto off = parse_uints(info.contains("data_offsets") ? info["data_offsets"] : json(), 2, path,
                           fmt::format("data_offsets of {}", shown));
    auto extent = checked_extent(e.shape, elem_size(e.elem));
    if (!extent) bad_header(path, fmt::format("shape of {} is too large", shown));
    uint64_t begin = static_cast<uint64_t>(off[0]), end = static_cast<uint64_t>(off[1]);
    if (begin > end)
      bad_header(path, fmt::format("tensor {} has data_offsets [{}, {}] that end before they begin", shown, begin, end));
    if (end > data_size)
      throw SheafError(fmt::format("'{}': tensor {} has data_offsets [{}, {}] beyond the {} data bytes; the file is "
                                   "truncated or corrupt",
                                   path, shown, begin, end, data_size));
    if (end - begin != extent->second)
      throw SheafError(fmt::format("'{}': tensor {} of shape {} and dtype {} needs {} bytes but data_offsets span {}",
                                   path, shown, json(e.shape).dump(), elem_name(e.elem), extent->second, end - begin));
    e.offset = data_start + begin;
    out.emplace_back(name, std::move(e));
  }
  return out;
}

class SafetensorsHandle : public HandleObj {
 public:
  SafetensorsHandle(std::shared_ptr<const Table> t, std::string prefix) : table_(std::move(t)), prefix_(std::move(prefix)) {}

  std::string describe() const override { return fmt::format("<handle safetensors {} tensors>", under().size()); }

  // The root counts tensors (SPEC §7.3); a prefix view is a nested dict and counts its keys.
  int64_t length() const override {
    return static_cast<int64_t>(prefix_.empty() ? table_->size() : keys().size());
  }

  Value read(const Value& key, SrcLoc loc) const override {
    std::string full = prefix_ + name_of(key, loc);
    if (auto it = table_->find(full); it != table_->end()) return Value::tensor(tensor(it->second, it->first));
    std::string sub = full + ".";
    auto it = table_->lower_bound(sub);
    if (it != table_->end() && it->first.starts_with(sub))
      return Value::object(Kind::Handle, std::make_shared<SafetensorsHandle>(table_, sub));
    return Value();
  }

  std::vector<std::string> keys() const override {
    std::set<std::string> ks;
    for (const auto& [rel, e] : under()) ks.insert(std::string(rel.substr(0, rel.find('.'))));
    return {ks.begin(), ks.end()};
  }

  Value materialize(SrcLoc loc) const override { return build(under(), 0, loc); }

 private:
  // A tensor's name relative to the enclosing level, and its table row (full name, entry).
  using Item = std::pair<std::string_view, const Table::value_type*>;

  static Tensor tensor(const Entry& e, const std::string& name) {
    return read_tensor(e.elem, e.shape, *e.file, e.offset, fmt::format("tensor {} in '{}'", quote_file_text(name), e.file->path));
  }

  static std::string name_of(const Value& key, SrcLoc loc) {
    if (auto k = key_name(key)) return *k;
    auto n = number_of(key);  // list elements were saved by index: `layers.0.w`
    if (n && *n == static_cast<double>(static_cast<int64_t>(*n))) return std::to_string(static_cast<int64_t>(*n));
    throw SheafError(fmt::format("safetensors handle: expected a tensor name (string or keyword), got {}",
                                 kind_name(key.kind())),
                     loc);
  }

  std::vector<Item> under() const {
    std::vector<Item> items;
    for (auto it = table_->lower_bound(prefix_); it != table_->end() && it->first.starts_with(prefix_); ++it)
      items.emplace_back(std::string_view(it->first).substr(prefix_.size()), &*it);
    return items;
  }

  // Nested dict of the items, split at the first '.'; keys 0..n-1 make a list (saved lists).
  static Value build(const std::vector<Item>& items, int depth, SrcLoc loc) {
    if (depth > 1000 || stack_exhausted()) throw SheafError("safetensors handle: tensor names nest too deeply", loc);
    std::map<std::string, std::vector<Item>> groups;
    std::map<std::string, const Table::value_type*> leaves;
    for (const auto& [rel, e] : items) {
      size_t dot = rel.find('.');
      if (dot == std::string_view::npos) leaves[std::string(rel)] = e;
      else groups[std::string(rel.substr(0, dot))].emplace_back(rel.substr(dot + 1), e);
    }
    std::vector<std::pair<std::string, Value>> entries;
    for (const auto& [k, e] : leaves) {
      if (groups.count(k))
        throw SheafError(
            fmt::format("safetensors handle: {} is both a tensor and a prefix of other names", quote_file_text(e->first)), loc);
      entries.emplace_back(k, Value::tensor(tensor(e->second, e->first)));
    }
    for (const auto& [k, g] : groups) entries.emplace_back(k, build(g, depth + 1, loc));
    std::vector<Value> as_list(entries.size());
    for (auto& [k, v] : entries) {
      size_t i = 0;
      auto [p, ec] = std::from_chars(k.data(), k.data() + k.size(), i);
      if (ec != std::errc() || p != k.data() + k.size() || i >= as_list.size() || std::to_string(i) != k) return make_dict(std::move(entries));
      as_list[i] = v;
    }
    return entries.empty() ? make_dict({}) : Value::list(std::move(as_list));
  }

  std::shared_ptr<const Table> table_;
  std::string prefix_;  // "" or "layer1."
};

// The shard file an index entry names, with links resolved, inside `folder` (the index's folder,
// canonical). Absolute paths, `..` components, links that lead outside and special files are
// refused: an index must not make Sheaf open, or quote errors about, a file elsewhere, nor block.
std::string shard_path(const std::filesystem::path& folder, const std::string& file, const std::string& index_path,
                       const std::string& name) {
  auto refuse = [&](std::string_view why) {
    throw SheafError(fmt::format("'{}': weight_map entry {} names {}, {}; shard files must lie inside the index's folder",
                                 index_path, quote_file_text(name), quote_file_text(file), why));
  };
  std::filesystem::path rel(file);
  if (file.empty() || file.find('\0') != std::string::npos) refuse("which is not a file name");
  if (rel.is_absolute()) refuse("an absolute path");
  for (const std::filesystem::path& part : rel)
    if (part == "..") refuse("a path with a '..' component");
  std::error_code ec;
  std::filesystem::path real = std::filesystem::weakly_canonical(folder / rel, ec);
  if (ec) throw SheafError(fmt::format("'{}': cannot resolve shard {}: {}", index_path, quote_file_text(file), ec.message()));
  if (std::mismatch(folder.begin(), folder.end(), real.begin(), real.end()).first != folder.end())
    refuse("a link that leads outside the folder");
  auto type = std::filesystem::status(real, ec).type();
  if (type != std::filesystem::file_type::regular && type != std::filesystem::file_type::not_found)
    refuse("which is not a regular file");  // opening a FIFO would wait forever
  return real.string();
}

Value make_handle(Table t) {
  return Value::object(Kind::Handle, std::make_shared<SafetensorsHandle>(std::make_shared<const Table>(std::move(t)), ""));
}

// ---- saving ----

using Named = std::vector<std::pair<std::string, Tensor>>;

void flatten(const Value& v, const std::string& name, const std::string& path, Named& out, int depth) {
  if (depth > 256 || stack_exhausted()) throw SheafError(fmt::format("'{}': the value nests too deeply", path));
  auto join = [&](std::string_view k) { return name.empty() ? std::string(k) : name + "." + std::string(k); };
  switch (v.kind()) {
    case Kind::Dict:
      for (const auto& [k, x] : v.as_dict().entries) flatten(x, join(k), path, out, depth + 1);
      return;
    case Kind::List:
      for (size_t i = 0; i < v.as_list().items.size(); ++i) flatten(v.as_list().items[i], join(std::to_string(i)), path, out, depth + 1);
      return;
    case Kind::Handle: flatten(v.as<HandleObj>().materialize({}), name, path, out, depth + 1); return;
    case Kind::Tensor: case Kind::Int: case Kind::Float: case Kind::Bool:
      if (name.empty())
        throw SheafError(fmt::format("'{}': safetensors holds named tensors: save a dict such as {{:w t}}, not a bare {}",
                                     path, kind_name(v.kind())));
      out.emplace_back(name, tensor_to_save(v, path, "safetensors"));
      return;
    default:
      throw SheafError(fmt::format("'{}': cannot save a {} at '{}' in safetensors (only tensors and numbers)", path,
                                   kind_name(v.kind()), name));
  }
}

std::string_view dtype_tag(DType d) {
  for (auto [n, e] : kDtypes)
    if (e == elem_of(d)) return n;
  return "F32";
}

}  // namespace

Value load_safetensors(const std::vector<std::string>& shards) {
  Table t;
  for (const std::string& s : shards)
    for (auto& [name, e] : parse_file(s)) {
      auto [it, fresh] = t.emplace(name, e);
      if (!fresh)
        throw SheafError(fmt::format("'{}': tensor {} is also in '{}'", s, quote_file_text(name), it->second.file->path));
    }
  return make_handle(std::move(t));
}

Value load_safetensors_index(const std::string& index_path) {
  json j = parse_json(read_file(index_path), index_path);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw SheafError(fmt::format("'{}': a safetensors index needs a \"weight_map\" object", index_path));
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(index_path).parent_path();
  std::filesystem::path folder = std::filesystem::canonical(parent.empty() ? "." : parent, ec);
  if (ec) throw SheafError(fmt::format("'{}': cannot resolve the index's folder: {}", index_path, ec.message()));
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string())
      throw SheafError(fmt::format("'{}': weight_map entry {} is not a file name", index_path, quote_file_text(name)));
    by_shard[shard_path(folder, file.get_ref<const std::string&>(), index_path, name)].push_back(name);
  }
  Table t;
  for (const auto& [shard, names] : by_shard) {
    std::map<std::string, Entry> entries;
    for (auto& [n, e] : parse_file(shard)) entries.emplace(n, e);
    for (const std::string& n : names) {
      auto it = entries.find(n);
      if (it == entries.end())
        throw SheafError(fmt::format("'{}': tensor {} is mapped to '{}', which does not hold it", index_path, quote_file_text(n), shard));
      t.emplace(n, it->second);
    }
  }
  return make_handle(std::move(t));
}

void save_safetensors(const std::string& path, const Value& tree) {
  Named named;
  flatten(tree, "", path, named, 0);
  std::sort(named.begin(), named.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < named.size(); ++i) {
    if (named[i].first == "__metadata__") throw SheafError(fmt::format("'{}': the name __metadata__ is reserved", path));
    if (i && named[i].first == named[i - 1].first)
      throw SheafError(fmt::format("'{}': two tensors flatten to the name '{}'", path, named[i].first));
  }
  // Data order: wider elements first, so that every tensor stays aligned for zero-copy loads.
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& n : named) order.push_back(&n);
  std::stable_sort(order.begin(), order.end(),
                   [](auto* a, auto* b) { return dtype_size(a->second.dtype()) > dtype_size(b->second.dtype()); });
  json header = json::object();
  size_t offset = 0;
  for (const auto* n : order) {
    const Tensor& t = n->second;
    header[n->first] = {{"dtype", std::string(dtype_tag(t.dtype()))}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t n = text.size();
  AtomicFile f(path);
  f.write(&n, 8);
  f.write(text);
  for (const auto* nt : order) f.write(nt->second.bytes(), nt->second.nbytes());
  f.commit();
}

}  // namespace sheaf
