// io/io.cpp — format detection and dispatch for `io "load"` and `io "save"` (SPEC §7.2).
// The extension decides unless a hint keyword is given; `*.safetensors.index.json` is checked
// before `.json`; IDX is recognised by `.idx`, a `-idx<D>-ubyte` name or `.gz`. A path with glob
// characters names a sharded set (safetensors, npy, bin), ordered by file name.
#include "io/io.hpp"

#include <glob.h>
#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/formats.hpp"
#include "io/pickle.hpp"
#include "value/handle.hpp"

namespace sheaf {

namespace {

enum class Format { Safetensors, SafetensorsIndex, Npy, Bin, Idx, Json, Jsonl, Txt, Pickle };

struct Choice {
  Format format;
  std::optional<Elem> elem;  // raw binary dtype flag
};

constexpr std::string_view kLoadFormats =
    ".safetensors, .safetensors.index.json, .npy, .bin with a dtype, IDX .idx/.gz, .json, .jsonl, .txt, .pkl/.pickle";
constexpr std::string_view kSaveFormats = ".safetensors, .npy, .bin, .json, .jsonl, .txt, .pkl/.pickle";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string file_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return lower(slash == std::string::npos ? path : path.substr(slash + 1));
}

// "train-images-idx3-ubyte": "-idx", one or more digits, "-ubyte".
bool idx_name(const std::string& name) {
  for (size_t p = name.find("-idx"); p != std::string::npos; p = name.find("-idx", p + 1)) {
    size_t d = p + 4;
    while (d < name.size() && std::isdigit(static_cast<unsigned char>(name[d]))) ++d;
    if (d > p + 4 && name.compare(d, 6, "-ubyte") == 0) return true;
  }
  return false;
}

std::optional<Elem> dtype_flag(std::string_view k) {
  static const std::pair<std::string_view, Elem> kFlags[] = {
      {"f32", Elem::F32}, {"f16", Elem::F16}, {"bf16", Elem::BF16}, {"i32", Elem::I32},
      {"i16", Elem::I16}, {"u32", Elem::U32}, {"bool", Elem::Bool},
  };
  for (auto [n, e] : kFlags)
    if (k == n) return e;
  return std::nullopt;
}

Choice choose(const std::string& path, const Value& hint, bool saving) {
  if (!hint.is_nil()) {
    if (!hint.is(Kind::Keyword))
      throw SheafError(fmt::format("'{}': the format hint must be a keyword such as :json, got {}", path, kind_name(hint.kind())));
    const std::string& h = hint.as_str();
    static const std::pair<std::string_view, Format> kHints[] = {
        {"safetensors", Format::Safetensors}, {"npy", Format::Npy}, {"json", Format::Json},
        {"jsonl", Format::Jsonl},             {"txt", Format::Txt}, {"idx", Format::Idx},
        {"pickle", Format::Pickle},
    };
    for (auto [n, f] : kHints)
      if (h == n) return {f, std::nullopt};
    if (auto e = dtype_flag(h)) return {Format::Bin, e};
    throw SheafError(fmt::format("'{}': unknown format hint :{} (formats: :safetensors :npy :json :jsonl :txt :idx :pickle; raw "
                                 "binary dtypes: :f32 :f16 :bf16 :i32 :i16 :u32 :bool)",
                                 path, h));
  }
  std::string name = file_name(path);
  auto ends = [&](std::string_view ext) { return name.size() > ext.size() && name.ends_with(ext); };
  if (ends(".safetensors.index.json")) return {Format::SafetensorsIndex, {}};
  if (ends(".safetensors")) return {Format::Safetensors, {}};
  if (ends(".npy")) return {Format::Npy, {}};
  if (ends(".jsonl")) return {Format::Jsonl, {}};
  if (ends(".json")) return {Format::Json, {}};
  if (ends(".txt")) return {Format::Txt, {}};
  if (ends(".pkl") || ends(".pickle")) return {Format::Pickle, {}};
  if (ends(".bin")) {
    if (saving) return {Format::Bin, {}};
    throw SheafError(fmt::format("'{}' is raw binary: give its dtype, e.g. (io \"load\" \"{}\" :i32) (dtypes: :f32 :f16 "
                                 ":bf16 :i32 :i16 :u32 :bool)",
                                 path, path));
  }
  if (ends(".idx") || ends(".gz") || idx_name(name)) return {Format::Idx, {}};
  size_t dot = name.find_last_of('.');
  std::string ext = dot == std::string::npos ? "" : name.substr(dot);
  std::string msg = ext.empty()
      ? fmt::format("'{}' has no extension: give a format hint such as :json (supported: {})", path, saving ? kSaveFormats : kLoadFormats)
      : fmt::format("unsupported format '{}' (supported: {})", ext, saving ? kSaveFormats : kLoadFormats);
  throw SheafError(msg);
}

bool is_glob(const std::string& path) { return path.find_first_of("*?[") != std::string::npos; }

// The files a (possibly globbed) path names, sorted by name.
std::vector<std::string> expand(const std::string& path, Format f) {
  if (!is_glob(path)) return {path};
  if (f != Format::Safetensors && f != Format::Npy && f != Format::Bin)
    throw SheafError(fmt::format("'{}': glob patterns name shard sets of .safetensors, .npy or .bin files", path));
  glob_t g{};
  int r = ::glob(path.c_str(), GLOB_NOSORT, nullptr, &g);
  std::vector<std::string> files(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  if (r == GLOB_NOMATCH || files.empty()) throw SheafError(fmt::format("'{}': no files match", path));
  if (r != 0) throw SheafError(fmt::format("'{}': cannot expand the pattern", path));
  std::sort(files.begin(), files.end());
  return files;
}

// Length of the UTF-8 sequence at the start of s that encodes a printable character outside
// ASCII, or 0 (an invalid sequence, or a C1 control U+0080–U+009F: C2 80..C2 9F).
size_t printable_utf8(std::string_view s) {
  auto byte = [&](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  unsigned lead = byte(0);
  size_t n = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
  for (size_t i = 1; i < n; ++i)
    if ((byte(i) & 0xC0) != 0x80) return 0;
  return lead == 0xC2 && byte(1) < 0xA0 ? 0 : n;
}

}  // namespace

std::string quote_file_text(std::string_view untrusted) {
  constexpr size_t kMax = 96;
  std::string out = "'";
  size_t i = 0;
  while (i < untrusted.size() && i < kMax) {
    unsigned char c = static_cast<unsigned char>(untrusted[i]);
    size_t n = c >= 0x20 && c < 0x7F ? 1 : printable_utf8(untrusted.substr(i));
    if (n) out.append(untrusted.substr(i, n));
    else out += fmt::format("\\x{:02x}", c);
    i += n ? n : 1;
  }
  if (i < untrusted.size()) out += "...";
  return out + "'";
}

Tensor tensor_to_save(const Value& v, std::string_view path, std::string_view format) {
  switch (v.kind()) {
    case Kind::Tensor: return v.as_tensor();
    case Kind::Float: return Tensor::scalar(DType::F32, v.as_float());
    case Kind::Bool: return Tensor::scalar(DType::Bool, v.as_bool());
    case Kind::Int:
      if (v.as_int() < std::numeric_limits<int32_t>::min() || v.as_int() > std::numeric_limits<int32_t>::max())
        throw SheafError(fmt::format("'{}': integer {} does not fit in i32", path, v.as_int()));
      return Tensor::scalar(DType::I32, static_cast<double>(v.as_int()));
    case Kind::Handle: {
      Value m = v.as<HandleObj>().materialize({});
      if (m.is(Kind::Tensor)) return m.as_tensor();
      break;
    }
    default: break;
  }
  throw SheafError(fmt::format("'{}': {} holds one tensor, got {}", path, format, kind_name(v.kind())));
}

Value io_load(const std::string& path, const Value& hint, int64_t max_elements) {
  Choice c = choose(path, hint, false);
  std::vector<std::string> files = expand(path, c.format);
  switch (c.format) {
    case Format::Safetensors: return load_safetensors(files);
    case Format::SafetensorsIndex: return load_safetensors_index(path);
    case Format::Npy: return load_npy(files);
    case Format::Bin: return load_bin(files, *c.elem);
    case Format::Idx: return load_idx(path, max_elements);
    case Format::Json: return load_json(path);
    case Format::Jsonl: return load_jsonl(path);
    case Format::Txt: return load_text(path);
    case Format::Pickle: return load_pickle(path);
  }
  return Value();
}

void io_save(const std::string& path, const Value& value, const Value& hint) {
  Choice c = choose(path, hint, true);
  if (is_glob(path)) throw SheafError(fmt::format("'{}': cannot save to a glob pattern", path));
  switch (c.format) {
    case Format::Safetensors: return save_safetensors(path, value);
    case Format::Npy: return save_npy(path, value);
    case Format::Bin: return save_bin(path, value, c.elem);
    case Format::Json:
    case Format::SafetensorsIndex: return save_json(path, value);  // an index file is plain JSON
    case Format::Jsonl: return save_jsonl(path, value);
    case Format::Txt: return save_text(path, value);
    case Format::Pickle: return save_pickle(path, value);
    case Format::Idx: break;
  }
  throw SheafError(fmt::format("'{}': this format is read-only here (save supports: {})", path, kSaveFormats));
}

int64_t os_entropy(int n) {
  unsigned char buf[8] = {};
  size_t got = 0;
  while (got < static_cast<size_t>(n)) {
    ssize_t r = ::getrandom(buf + got, static_cast<size_t>(n) - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw SheafError(fmt::format("cannot read the OS random source: {}", std::strerror(errno)));
    got += static_cast<size_t>(r);
  }
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{buf[i]} << (8 * i);
  return static_cast<int64_t>(n == 8 ? v >> 1 : v);
}

}  // namespace sheaf
