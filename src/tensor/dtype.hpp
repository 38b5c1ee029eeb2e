// tensor/dtype.hpp — tensor element types (SPEC §2.2) and their names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sheaf {

enum class DType : uint8_t { F32, F16, BF16, I32, U32, Bool };

std::string_view dtype_name(DType d);                    // "f32"
std::optional<DType> dtype_from_name(std::string_view);  // "f32" → F32 (no colon)
size_t dtype_size(DType d);
inline bool is_float(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }
inline bool is_half(DType d) { return d == DType::F16 || d == DType::BF16; }  // stored in 16 bits, computed in f32
inline bool is_int(DType d) { return d == DType::I32 || d == DType::U32; }

}  // namespace sheaf
