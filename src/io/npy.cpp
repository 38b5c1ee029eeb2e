// io/npy.cpp — NumPy .npy files (SPEC §7.5).
// Layout: "\x93NUMPY", version byte pair (1.0: u16 header length; 2.0/3.0: u32), then a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with spaces
// and '\n', then the C-order data. Loading gives a row handle over the open file; saving
// writes version 1.0 (2.0 when the header is too long) with the header padded to 64 bytes.
#include <cctype>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "io/row_handle.hpp"
#include "tensor/shape.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct NpyHeader {
  Elem elem = Elem::F32;
  Shape shape;
  size_t data_offset = 0;
};

// Parser for the header dict: string keys; values are strings, True/False or tuples of ints.
class DictParser {
 public:
  DictParser(std::string_view s, const std::string& path) : s_(s), path_(path) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = string_lit();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') fail("structured (record) dtypes are not supported");
        h.elem = descr(string_lit());
        have_descr = true;
      } else if (key == "fortran_order") {
        if (word() != "False") fail("Fortran-order arrays are not supported; save the array in C order");
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        fail(fmt::format("unexpected header key {}", quote_file_text(key)));
      }
      skip_ws();
      if (peek() == ',') ++i_;
    }
    if (!have_descr || !have_order || !have_shape) fail("header lacks 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(std::string_view msg) const {
    throw SheafError(fmt::format("'{}': invalid npy header: {}", path_, msg));
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(fmt::format("expected '{}' at offset {}", c, i_));
    ++i_;
  }
  std::string string_lit() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') fail(fmt::format("expected a quoted string at offset {}", i_));
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  std::string word() {
    size_t b = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return std::string(s_.substr(b, i_ - b));
  }
  Shape tuple() {
    Shape dims;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      int64_t d = 0;
      size_t b = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (__builtin_mul_overflow(d, int64_t{10}, &d) || __builtin_add_overflow(d, s_[i_] - '0', &d))
          fail("dimension too large");
        ++i_;
      }
      if (i_ == b) fail(fmt::format("expected a dimension at offset {}", i_));
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      dims.push_back(d);
      skip_ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail(fmt::format("expected ',' or ')' at offset {}", i_));
    }
    ++i_;
    return dims;
  }
  Elem descr(const std::string& d) const {
    char order = d.empty() ? '?' : d[0];
    std::string_view code = std::string_view(d).substr(d.empty() ? 0 : 1);
    if (auto e = numpy_elem(code); e && (order == '<' || order == '|' || order == '=' || order == '>')) {
      if (order == '>' && elem_size(*e) > 1)
        throw SheafError(fmt::format("'{}': big-endian npy data ({}) is not supported; convert it with "
                                     "arr.astype(arr.dtype.newbyteorder('<'))",
                                     path_, quote_file_text(d)));
      return *e;
    }
    throw SheafError(fmt::format("'{}': unsupported npy dtype {} (supported: <f4 <f2 <i4 <u4 |b1, and |i1 |u1 "
                                 "<i2 <i8 as i32, <f8 as f32)",
                                 path_, quote_file_text(d)));
  }

  std::string_view s_;
  const std::string& path_;
  size_t i_ = 0;
};

NpyHeader read_header(const DataFile& m) {
  const std::string pre = m.read(0, 10, "the npy preamble");
  if (std::memcmp(pre.data(), kMagic, 6) != 0) throw SheafError(fmt::format("'{}': not an npy file (bad magic)", m.path));
  int major = static_cast<unsigned char>(pre[6]);
  if (major < 1 || major > 3)
    throw SheafError(fmt::format("'{}': unsupported npy version {}.{}", m.path, major, static_cast<unsigned char>(pre[7])));
  size_t len_bytes = major == 1 ? 2 : 4;
  const std::string lp = m.read(8, len_bytes, "the npy header length");
  size_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i) hlen |= static_cast<size_t>(static_cast<unsigned char>(lp[i])) << (8 * i);
  size_t start = 8 + len_bytes;
  const std::string text = m.read(start, hlen, "the npy header");
  NpyHeader h = DictParser(text, m.path).parse();
  h.data_offset = start + hlen;
  return h;
}

std::string descr_of(DType d, std::string_view path) {
  switch (d) {
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I32: return "<i4";
    case DType::U32: return "<u4";
    case DType::Bool: return "|b1";
    case DType::BF16: break;
  }
  throw SheafError(fmt::format("'{}': npy has no bf16 dtype; cast to f32 or save as .safetensors", path));
}

}  // namespace

Value load_npy(const std::vector<std::string>& paths) {
  std::vector<RowShard> shards;
  Elem elem = Elem::F32;
  Shape row_shape;
  for (size_t k = 0; k < paths.size(); ++k) {
    FilePtr m = open_data_file(paths[k]);
    NpyHeader h = read_header(*m);
    auto extent = checked_extent(h.shape, elem_size(h.elem));
    if (!extent) throw SheafError(fmt::format("'{}': npy shape is too large", m->path));
    m->check_range(h.data_offset, extent->second, fmt::format("the {}[{}] data", elem_name(h.elem), shape_str(h.shape)));
    if (h.shape.empty()) {
      if (paths.size() > 1) throw SheafError(fmt::format("'{}': a rank-0 array cannot be a shard", m->path));
      return scalar_value(read_tensor(h.elem, {}, *m, h.data_offset, m->path));
    }
    Shape rs(h.shape.begin() + 1, h.shape.end());
    if (k == 0) {
      elem = h.elem;
      row_shape = rs;
    } else if (h.elem != elem || rs != row_shape) {
      throw SheafError(fmt::format("'{}': shard holds rows of {} but '{}' holds rows of {}", m->path,
                                   type_str(elem_dtype(h.elem), rs), paths[0], type_str(elem_dtype(elem), row_shape)));
    }
    shards.push_back({m, h.data_offset, h.shape[0]});
  }
  return Value::object(Kind::Handle, std::make_shared<RowHandle>("npy", elem, row_shape, std::move(shards)));
}

void save_npy(const std::string& path, const Value& v) {
  Tensor t = tensor_to_save(v, path, "npy");
  std::string dims;
  for (int64_t d : t.shape()) dims += fmt::format("{}, ", d);
  if (t.rank() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (2, 3) does not
  else if (t.rank() == 1) dims.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   descr_of(t.dtype(), path), dims);
  bool v2 = header.size() + 1 + 10 > 65535;
  size_t pre = v2 ? 12 : 10;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  AtomicFile f(path);
  f.write(out);
  f.write(t.bytes(), t.nbytes());
  f.commit();
}

}  // namespace sheaf
