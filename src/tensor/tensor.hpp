// tensor/tensor.hpp — tensor: dtype, static shape, refcounted immutable storage.
// Storage is contiguous row-major; sharing a Tensor shares its bytes (copy-free). Elements are
// read and written through typed accessors; f16/bf16 are stored as 16-bit patterns. A tensor
// made by a GPU backend holds its elements on the device (tensor/device_storage.hpp): reading
// them on the host downloads them once.
#pragma once
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "tensor/device_storage.hpp"
#include "tensor/dtype.hpp"

namespace sheaf {

using Shape = std::vector<int64_t>;

// Element count; saturates at INT64_MAX instead of overflowing.
int64_t shape_numel(const Shape& s);

// Largest tensor Tensor::empty will allocate (elements); larger requests throw SheafError.
// The interpreter sets it from its Limits (the fuzzer keeps it small).
void set_max_tensor_elements(int64_t n);

// Thrown when tracing cannot go on: the elements of a symbolic tensor are needed (a
// data-dependent branch, a shape computed from values, printing) or an effect was reached. The
// function is then interpreted for those argument shapes; what() is the recorded reason.
struct TraceAbort : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);                      // zero-filled
  static Tensor empty(DType dtype, Shape shape);         // uninitialised (every byte is written next)
  static Tensor scalar(DType dtype, double v);           // rank 0
  // Shares bytes owned elsewhere (a memory map, a parent tensor); `data` must hold nbytes().
  static Tensor wrap(DType dtype, Shape shape, std::shared_ptr<std::byte> data);
  // Elements held on a device; no host bytes until they are read.
  static Tensor on_device(DType dtype, Shape shape, std::shared_ptr<DeviceStorage> device);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t axis) const { return shape_[static_cast<size_t>(axis)]; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  const std::byte* bytes() const { return concrete(); }
  std::byte* mutable_bytes() { return mutable_concrete(); }  // only on a tensor not yet shared
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(concrete()); }
  template <typename T> T* mutable_data() { return reinterpret_cast<T*>(mutable_concrete()); }
  // The host bytes (downloaded first for a device tensor).
  const std::shared_ptr<std::byte>& storage() const {
    if (device_ && !data_) [[unlikely]] return device_->host(nbytes());
    return data_;
  }
  // The device copy of the elements, or null for a host tensor.
  const std::shared_ptr<DeviceStorage>& device() const { return device_; }

  // Symbolic tensors exist only while a pure function is traced (src/trace): dtype and shape are
  // known, elements are not; `id` is the IR value it stands for. `weak` marks values that stand
  // for host scalars, which keep their weak typing (SPEC §2.3). Reading elements throws TraceAbort.
  // `trace` names the trace (graph) the id belongs to.
  static Tensor symbolic(DType dtype, Shape shape, int32_t id, bool weak = false, uint32_t trace = 0);
  bool is_symbolic() const { return sym_ >= 0; }
  int32_t symbol_id() const { return sym_; }
  uint32_t trace_id() const { return trace_; }
  bool weak() const { return weak_; }
  Tensor as_weak() const {  // the same symbolic value standing for a host scalar
    Tensor t = *this;
    t.weak_ = sym_ >= 0 && shape_.empty();
    return t;
  }

  // Same bytes, another shape with the same element count.
  Tensor reshaped(Shape shape) const;

  // Element access by flat index, converting through double (exact for all dtypes here).
  double get(int64_t i) const;
  void set(int64_t i, double v);

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte> data_;  // 64-byte aligned when allocated here (above 1 KiB); null on a device tensor
  std::shared_ptr<DeviceStorage> device_;
  int32_t sym_ = -1;
  uint32_t trace_ = 0;
  bool weak_ = false;

  std::byte* concrete() const {
    if (sym_ >= 0) [[unlikely]] needs_elements();
    if (device_ && !data_) [[unlikely]] return device_->host(nbytes()).get();
    return data_.get();
  }
  // A write makes the tensor a host tensor (its device copy would be stale).
  std::byte* mutable_concrete() {
    if (device_) [[unlikely]] {
      if (!data_) data_ = device_->host(nbytes());
      device_.reset();
    }
    return concrete();
  }
  [[noreturn]] void needs_elements() const;
  static Tensor of_type(DType dtype, Shape shape);  // no elements yet
  static Tensor with_storage(DType dtype, Shape shape, bool zeroed);  // empty's checks; zeroed or not
};

// f16/bf16 bit conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

}  // namespace sheaf
