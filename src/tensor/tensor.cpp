// tensor/tensor.cpp — host tensor storage and element conversion.
#include "tensor/tensor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>

#include "base/error.hpp"
#include "tensor/shape.hpp"

namespace sheaf {

std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::Bool: return "bool";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view n) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::U32, DType::Bool})
    if (dtype_name(d) == n) return d;
  return std::nullopt;
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Bool: return 1;
    default: return 4;
  }
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::numeric_limits<int64_t>::max();
    n *= d;
  }
  return n;
}

static std::atomic<int64_t> g_max_elements{int64_t{1} << 33};

void set_max_tensor_elements(int64_t n) { g_max_elements = n; }

// Small buffers share one allocation with their reference count (malloc's fast path); larger
// ones are 64-byte aligned for vector loads.
static std::shared_ptr<std::byte> allocate(size_t nbytes) {
  if (nbytes <= 1024) {
    std::shared_ptr<std::byte[]> block = std::make_shared_for_overwrite<std::byte[]>(std::max<size_t>(nbytes, 1));
    return std::shared_ptr<std::byte>(block, block.get());
  }
  size_t rounded = (std::max<size_t>(nbytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* b) { std::free(b); });
}

// Zero-filled storage. Large buffers (1 MiB and more) are fresh pages of the kernel's, zero until
// written and not touched here: an optimizer's state of zeros, a gigabyte for GPT-2 small's Adam
// moments, costs no pass over memory when it is made.
static std::shared_ptr<std::byte> allocate_zeroed(size_t nbytes) {
  constexpr size_t kMappedMin = size_t{1} << 20;
  if (nbytes < kMappedMin) {
    std::shared_ptr<std::byte> p = allocate(nbytes);
    std::memset(p.get(), 0, nbytes);
    return p;
  }
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [nbytes](std::byte* b) { munmap(b, nbytes); });
}

Tensor Tensor::of_type(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  return t;
}

// "6.4 GB (6400000000 bytes) for f32[40000x40000]": what an allocation that failed asked for.
static std::string request(DType dtype, const Shape& shape, int64_t n) {
  size_t bytes = static_cast<size_t>(n) * dtype_size(dtype);
  return fmt::format("{:.1f} GB ({} bytes) for {}", static_cast<double>(bytes) / 1e9, bytes, type_str(dtype, shape));
}

// Host storage for dtype[shape], or a SheafError naming the type and the bytes asked for: a
// negative dimension, an element count past 64 bits or past the limit, or memory the system
// refuses (a cap such as `ulimit -v`). Interp::call prefixes the builtin's name and reports the
// call's location: "zeros: cannot allocate 6.4 GB (6400000000 bytes) for f32[40000x40000]: ...".
Tensor Tensor::empty(DType dtype, Shape shape) { return with_storage(dtype, std::move(shape), false); }

Tensor Tensor::with_storage(DType dtype, Shape shape, bool zeroed) {
  for (int64_t d : shape)
    if (d < 0) throw SheafError(fmt::format("cannot allocate {}: negative dimension {}", type_str(dtype, shape), d));
  int64_t n = shape_numel(shape);  // saturated: more than 2^63 - 1
  if (n == std::numeric_limits<int64_t>::max())
    throw SheafError(fmt::format("cannot allocate {}: its element count does not fit in 64 bits", type_str(dtype, shape)));
  if (n > g_max_elements)
    throw SheafError(fmt::format("cannot allocate {}: {} elements, more than the limit of {}", request(dtype, shape, n), n,
                                 g_max_elements.load()));
  Tensor t = of_type(dtype, std::move(shape));
  try {
    t.data_ = zeroed ? allocate_zeroed(t.nbytes()) : allocate(t.nbytes());
  } catch (const std::bad_alloc&) {
    throw SheafError(fmt::format("cannot allocate {}: out of memory", request(dtype, t.shape_, n)));
  }
  return t;
}

Tensor::Tensor(DType dtype, Shape shape) : Tensor(with_storage(dtype, std::move(shape), true)) {}

Tensor Tensor::scalar(DType dtype, double v) {
  Tensor t = empty(dtype, {});
  t.set(0, v);
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, std::shared_ptr<std::byte> data) {
  Tensor t = of_type(dtype, std::move(shape));
  t.data_ = std::move(data);
  return t;
}

Tensor Tensor::on_device(DType dtype, Shape shape, std::shared_ptr<DeviceStorage> device) {
  Tensor t = of_type(dtype, std::move(shape));
  t.device_ = std::move(device);
  return t;
}

const std::shared_ptr<std::byte>& DeviceStorage::host(size_t bytes) const {
  std::call_once(once_, [&] {
    host_ = allocate(bytes);
    if (bytes) download(host_.get(), bytes);
  });
  return host_;
}

Tensor Tensor::symbolic(DType dtype, Shape shape, int32_t id, bool weak, uint32_t trace) {
  Tensor t = of_type(dtype, std::move(shape));
  t.sym_ = id;
  t.trace_ = trace;
  t.weak_ = weak;
  return t;
}

void Tensor::needs_elements() const {
  throw TraceAbort(fmt::format("the value of a traced {} is needed while tracing (data-dependent control flow or shape)",
                               type_str(dtype_, shape_)));
}

Tensor Tensor::reshaped(Shape shape) const {
  if (sym_ >= 0) needs_elements();
  Tensor t = *this;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  return t;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 6.103515625e-05f) {  // subnormal: round a * 2^24 to nearest even
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t ax = std::bit_cast<uint32_t>(a);
  uint32_t exp = (ax >> 23) - 112, man = ax & 0x7fffff;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

float bf16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

double Tensor::get(int64_t i) const {
  const std::byte* p = bytes() + static_cast<size_t>(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return half_to_float(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_float(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Bool: return static_cast<uint8_t>(*p) != 0;
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  std::byte* p = mutable_bytes() + static_cast<size_t>(i) * dtype_size(dtype_);
  switch (dtype_) {
    case DType::F32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
    case DType::F16: { uint16_t h = float_to_half(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DType::BF16: { uint16_t h = float_to_bf16(static_cast<float>(v)); std::memcpy(p, &h, 2); break; }
    case DType::I32: {
      int32_t x = std::isfinite(v) ? static_cast<int32_t>(std::clamp(std::trunc(v), -2147483648.0, 2147483647.0)) : 0;
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::U32: {
      uint32_t x = std::isfinite(v) ? static_cast<uint32_t>(std::clamp(std::trunc(v), 0.0, 4294967295.0)) : 0;
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::Bool: *p = static_cast<std::byte>(v != 0); break;
  }
}

}  // namespace sheaf
