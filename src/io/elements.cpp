// io/elements.cpp — element decoding for all file formats: one typed loop per source type.
#include "io/elements.hpp"

#include <bit>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"

namespace sheaf {

static_assert(std::endian::native == std::endian::little, "file formats are little-endian; so is the host");

size_t elem_size(Elem e) {
  switch (e) {
    case Elem::F32: case Elem::I32: case Elem::U32: return 4;
    case Elem::F16: case Elem::BF16: case Elem::I16: return 2;
    case Elem::Bool: case Elem::I8: case Elem::U8: return 1;
    case Elem::I64: case Elem::F64: return 8;
  }
  return 1;
}

DType elem_dtype(Elem e) {
  switch (e) {
    case Elem::I8: case Elem::U8: case Elem::I16: case Elem::I64: return DType::I32;
    case Elem::F64: return DType::F32;
    default: return static_cast<DType>(e);
  }
}

std::string_view elem_name(Elem e) {
  switch (e) {
    case Elem::I8: return "i8";
    case Elem::U8: return "u8";
    case Elem::I16: return "i16";
    case Elem::I64: return "i64";
    case Elem::F64: return "f64";
    default: return dtype_name(static_cast<DType>(e));
  }
}

std::optional<Elem> numpy_elem(std::string_view code) {
  static const std::pair<std::string_view, Elem> kTypes[] = {
      {"f4", Elem::F32}, {"f2", Elem::F16}, {"i4", Elem::I32}, {"u4", Elem::U32}, {"b1", Elem::Bool},
      {"i1", Elem::I8},  {"u1", Elem::U8},  {"i2", Elem::I16}, {"i8", Elem::I64}, {"f8", Elem::F64},
  };
  for (auto [name, e] : kTypes)
    if (code == name) return e;
  return std::nullopt;
}

namespace {

// dst[i] = convert(src[i]) for n little-endian elements of type S at any alignment.
template <typename S, typename D, typename F>
void convert_loop(const std::byte* p, D* dst, int64_t n, F convert) {
  for (int64_t i = 0; i < n; ++i) {
    S s;
    std::memcpy(&s, p + i * static_cast<int64_t>(sizeof(S)), sizeof(S));
    dst[i] = convert(s);
  }
}

template <typename S>
void widen_to_i32(const std::byte* p, int32_t* dst, int64_t n) {
  convert_loop<S>(p, dst, n, [](S s) { return static_cast<int32_t>(s); });
}

}  // namespace

Tensor decode(Elem e, const Shape& shape, const std::byte* p, std::string_view what) {
  Tensor t = Tensor::empty(elem_dtype(e), shape);
  int64_t n = t.numel();
  switch (e) {
    case Elem::Bool:
      convert_loop<uint8_t>(p, t.mutable_data<uint8_t>(), n, [](uint8_t b) { return static_cast<uint8_t>(b != 0); });
      break;
    case Elem::I8: widen_to_i32<int8_t>(p, t.mutable_data<int32_t>(), n); break;
    case Elem::U8: widen_to_i32<uint8_t>(p, t.mutable_data<int32_t>(), n); break;
    case Elem::I16: widen_to_i32<int16_t>(p, t.mutable_data<int32_t>(), n); break;
    case Elem::I64: {
      int32_t* dst = t.mutable_data<int32_t>();
      for (int64_t i = 0; i < n; ++i) {
        int64_t v;
        std::memcpy(&v, p + i * 8, 8);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          throw SheafError(fmt::format("{}: i64 value {} at element {} does not fit in i32", what, v, i));
        dst[i] = static_cast<int32_t>(v);
      }
      break;
    }
    case Elem::F64:
      convert_loop<double>(p, t.mutable_data<float>(), n, [](double d) { return static_cast<float>(d); });
      break;
    default:  // kept types: a plain copy
      if (t.nbytes()) std::memcpy(t.mutable_bytes(), p, t.nbytes());
  }
  return t;
}

void read_elements(Elem e, int64_t count, const DataFile& file, size_t offset, std::byte* dst, std::string_view what) {
  const size_t bytes = static_cast<size_t>(count) * elem_size(e);
  if (static_cast<uint8_t>(e) < static_cast<uint8_t>(Elem::Bool)) return file.read(offset, bytes, dst, what);  // kept
  std::vector<std::byte> raw(bytes);
  file.read(offset, bytes, raw.data(), what);
  Tensor t = decode(e, {count}, raw.data(), what);
  if (t.nbytes()) std::memcpy(dst, t.bytes(), t.nbytes());
}

Tensor read_tensor(Elem e, const Shape& shape, const DataFile& file, size_t offset, std::string_view what) {
  Tensor t = Tensor::empty(elem_dtype(e), shape);
  if (t.numel()) read_elements(e, t.numel(), file, offset, t.mutable_bytes(), what);
  return t;
}

std::optional<std::pair<int64_t, size_t>> checked_extent(std::span<const int64_t> dims, size_t elem_bytes) {
  int64_t n = 1, nonzero = 1;
  for (int64_t d : dims)
    if (d < 0 || (d && __builtin_mul_overflow(nonzero, d, &nonzero))) return std::nullopt;
  for (int64_t d : dims) n *= d;  // ≤ nonzero: no overflow
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(elem_bytes), &bytes)) return std::nullopt;
  return std::pair{n, static_cast<size_t>(bytes)};
}

}  // namespace sheaf
