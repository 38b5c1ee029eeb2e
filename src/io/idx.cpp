// io/idx.cpp — IDX files, the MNIST family's format (SPEC §7.7).
// Layout: magic bytes 0 0 T D, D big-endian u32 dimensions, then big-endian data of type T:
// 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32 (all loaded as i32), 0x0D f32, 0x0E f64 (as f32).
// A gzip file (detected by its content, 1f 8b) is inflated on the fly. The header's claim is never
// trusted for an allocation: its element count must be within the interpreter's limit, and the
// data is read in pieces into a buffer that grows with the bytes that actually arrive, so a
// 24-byte file (or a small gzip) that claims gigabytes costs no more than its real content.
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/formats.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

namespace {

// Sequential reads from the file's bytes, inflating them when they are gzip.
class Source {
 public:
  Source(std::string data, const std::string& path) : data_(std::move(data)), path_(path) {
    gz_ = data_.size() >= 2 && static_cast<unsigned char>(data_[0]) == 0x1f && static_cast<unsigned char>(data_[1]) == 0x8b;
    if (gz_ && inflateInit2(&zs_, 15 + 32) != Z_OK) throw SheafError(fmt::format("'{}': cannot start gzip decoding", path_));
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (gz_) inflateEnd(&zs_);
  }

  // Reads up to n bytes; fewer only at the end of the (decompressed) data.
  size_t read(std::byte* dst, size_t n) {
    if (!gz_) {
      size_t k = std::min(n, data_.size() - pos_);
      if (k) std::memcpy(dst, data_.data() + pos_, k);
      pos_ += k;
      return k;
    }
    size_t got = 0;
    constexpr size_t kChunk = size_t{1} << 30;  // z_stream counts are 32-bit
    while (got < n && !done_) {
      if (zs_.avail_in == 0) {
        size_t k = std::min(kChunk, data_.size() - pos_);
        zs_.next_in = reinterpret_cast<Bytef*>(data_.data() + pos_);
        zs_.avail_in = static_cast<uInt>(k);
        pos_ += k;
      }
      zs_.next_out = reinterpret_cast<Bytef*>(dst + got);
      zs_.avail_out = static_cast<uInt>(std::min(kChunk, n - got));
      uInt before = zs_.avail_out;
      int r = inflate(&zs_, Z_NO_FLUSH);
      got += before - zs_.avail_out;
      if (r == Z_STREAM_END) done_ = true;
      else if (r == Z_BUF_ERROR && zs_.avail_in == 0 && pos_ == data_.size()) done_ = true;  // truncated
      else if (r != Z_OK && r != Z_BUF_ERROR)
        throw SheafError(fmt::format("'{}': corrupt gzip data: {}", path_, zs_.msg ? zs_.msg : "inflate failed"));
    }
    return got;
  }

  void read_exactly(std::byte* dst, size_t n, std::string_view what) {
    if (read(dst, n) != n) throw SheafError(fmt::format("'{}': truncated IDX file: {} ends early", path_, what));
  }

  // n bytes, or an error naming `what` and how many bytes there were. Plain data is checked
  // against the file size first; gzip data is inflated into a buffer that at most doubles what
  // has arrived, so the allocation follows the real content, not the claim.
  std::vector<std::byte> read_growing(size_t n, std::string_view what) {
    auto ends_early = [&](size_t have) {
      return SheafError(fmt::format("'{}': truncated IDX file: {} ends early: the header claims {} bytes but {} {}", path_,
                                    what, n, gz_ ? "the gzip data inflates to" : "the file holds", have));
    };
    if (!gz_ && n > data_.size() - pos_) throw ends_early(data_.size() - pos_);
    std::vector<std::byte> out;
    while (out.size() < n) {
      size_t have = out.size(), want = std::min(n - have, std::max(have, size_t{1} << 16));
      out.resize(have + want);
      size_t got = read(out.data() + have, want);
      if (got < want) throw ends_early(have + got);
    }
    return out;
  }

 private:
  std::string data_;
  const std::string& path_;
  size_t pos_ = 0;
  bool gz_ = false, done_ = false;
  z_stream zs_{};
};

std::optional<Elem> idx_type(uint8_t t) {
  switch (t) {
    case 0x08: return Elem::U8;
    case 0x09: return Elem::I8;
    case 0x0B: return Elem::I16;
    case 0x0C: return Elem::I32;
    case 0x0D: return Elem::F32;
    case 0x0E: return Elem::F64;
    default: return std::nullopt;
  }
}

uint32_t be32(const std::byte* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

Value load_idx_bytes(std::string bytes, const std::string& path, int64_t max_elements) {
  Source src(std::move(bytes), path);
  std::byte magic[4];
  src.read_exactly(magic, 4, "the magic number");
  auto elem = idx_type(static_cast<uint8_t>(magic[2]));
  if (magic[0] != std::byte{0} || magic[1] != std::byte{0} || !elem)
    throw SheafError(fmt::format("'{}': not an IDX file: it does not start with 00 00, a type byte (08 09 0b 0c 0d 0e) and "
                                 "the rank",
                                 path));
  size_t rank = static_cast<size_t>(magic[3]);
  std::vector<std::byte> dims_raw(4 * rank);
  src.read_exactly(dims_raw.data(), dims_raw.size(), "the dimension list");
  Shape shape;
  for (size_t i = 0; i < rank; ++i) shape.push_back(be32(&dims_raw[4 * i]));
  size_t es = elem_size(*elem);
  auto extent = checked_extent(shape, es);
  if (!extent || extent->first > max_elements)
    throw SheafError(
        fmt::format("'{}': IDX shape [{}] is too large (limit {} elements)", path, fmt::join(shape, " "), max_elements));
  std::vector<std::byte> data =
      src.read_growing(extent->second, fmt::format("the {} data of shape [{}]", elem_name(*elem), fmt::join(shape, " ")));
  std::byte rest;
  src.read(&rest, 1);  // runs a gzip stream to its end, so that its checksum is verified
  for (size_t i = 0; es > 1 && i < data.size(); i += es) std::reverse(data.begin() + i, data.begin() + i + es);  // to little-endian
  return Value::tensor(decode(*elem, shape, data.data(), path));
}

Value load_idx(const std::string& path, int64_t max_elements) { return load_idx_bytes(read_file(path), path, max_elements); }

}  // namespace sheaf
