// io/elements.hpp — element types found in files and their decoding into Sheaf tensors
// (SPEC §2.2, §7.4–7.7). f32 f16 bf16 i32 u32 bool are kept; i8 u8 i16 i64 become i32 (an i64
// value outside the i32 range is an error); f64 becomes f32. Bytes are little-endian (IDX swaps
// its big-endian data before decoding).
#pragma once
#include <optional>
#include <span>
#include <string_view>

#include "io/data_file.hpp"
#include "tensor/tensor.hpp"

namespace sheaf {

// The first six coincide with DType, in the same order.
enum class Elem : uint8_t { F32, F16, BF16, I32, U32, Bool, I8, U8, I16, I64, F64 };

size_t elem_size(Elem e);
DType elem_dtype(Elem e);          // the dtype it loads as
std::string_view elem_name(Elem e);  // "i64"
inline Elem elem_of(DType d) { return static_cast<Elem>(d); }

// The element type named by a NumPy type code without its byte-order character ("f4", "i8",
// "b1"); nullopt for the others (strings, objects, complex, records, u2, u8).
std::optional<Elem> numpy_elem(std::string_view code);

// A new tensor of elem_dtype(e) and `shape` from the little-endian bytes at `p` (any alignment).
// `what` names the source in errors: "'w.npy'", "tensor 'l1.w' in 'm.safetensors'".
Tensor decode(Elem e, const Shape& shape, const std::byte* p, std::string_view what);

// `count` elements of type e at byte `offset` of `file`, read and decoded into `dst` (room for
// count elements of elem_dtype(e)): kept types are read straight into it; bool is normalised to 0/1.
void read_elements(Elem e, int64_t count, const DataFile& file, size_t offset, std::byte* dst, std::string_view what);
// A new tensor of elem_dtype(e) and `shape` read from `file` at `offset` (see read_elements).
Tensor read_tensor(Elem e, const Shape& shape, const DataFile& file, size_t offset, std::string_view what);

// Element count of `dims` and its size in bytes, or nullopt when either overflows int64 or the
// product of the nonzero dims does ([0 2^40 2^40] has no elements but no valid strides either).
std::optional<std::pair<int64_t, size_t>> checked_extent(std::span<const int64_t> dims, size_t elem_bytes);

}  // namespace sheaf
