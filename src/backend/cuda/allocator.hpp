// backend/cuda/allocator.hpp — a caching allocator of device memory, and the buffers it hands out.
// cuMemAlloc/cuMemFree synchronise the GPU and take tens of microseconds, so released blocks are
// kept, by rounded size, and handed out again: a training loop whose steps allocate the same sizes
// reaches a steady state without device allocations. Sizes round up to 512 bytes below 1 MiB and
// to 2 MiB above, and a request takes only a cached block of exactly its rounded size. When the
// device is full, the cached blocks are given back and the allocation is tried once more.
// Work is ordered on the device's one stream, so a block released while queued work still uses it
// can be handed out at once: whatever next writes it is queued after that work.
#pragma once
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/cuda/device.hpp"
#include "tensor/device_storage.hpp"

namespace sheaf::cuda {

struct AllocatorStats {
  uint64_t requests = 0, hits = 0;  // hits: served from the cache
  size_t in_use = 0, peak_in_use = 0, cached = 0;  // bytes (rounded)
  size_t device_bytes = 0;          // held from the device (in use + cached)
  uint64_t device_allocations = 0;  // requests the device served (the cache could not)
  double device_s = 0;              // host time in those (a stream-ordered pool growing, cuMemAlloc)
};

class Allocator {
 public:
  explicit Allocator(std::shared_ptr<Device> device) : device_(std::move(device)) {}
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  static size_t rounded(size_t bytes);
  DevicePtr allocate(size_t bytes);        // throws SheafError naming the sizes when the GPU is full
  void release(DevicePtr p, size_t bytes); // `bytes` as given to allocate
  void trim();                             // gives every cached block back to the device

  Device& device() const { return *device_; }
  const std::shared_ptr<Device>& device_ptr() const { return device_; }
  const AllocatorStats& stats() const { return stats_; }

 private:
  std::shared_ptr<Device> device_;
  std::unordered_map<size_t, std::vector<DevicePtr>> free_;  // rounded size → cached blocks
  AllocatorStats stats_;
};

// One block of an Allocator, released when the last owner lets go; or (borrowed) memory owned by
// someone else that must outlive it.
class Buffer {
 public:
  Buffer(std::shared_ptr<Allocator> a, size_t bytes) : a_(std::move(a)), bytes_(bytes), ptr_(a_->allocate(bytes)) {}
  struct Borrowed {};
  Buffer(std::shared_ptr<Allocator> a, DevicePtr p, size_t bytes, Borrowed) : a_(std::move(a)), bytes_(bytes), ptr_(p), owned_(false) {}
  ~Buffer() {
    if (owned_) a_->release(ptr_, bytes_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  DevicePtr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Allocator& allocator() const { return *a_; }

 private:
  std::shared_ptr<Allocator> a_;
  size_t bytes_;
  DevicePtr ptr_;
  bool owned_ = true;
};

// The elements of one tensor in a Buffer (a tensor's DeviceStorage): downloaded on the first host
// read. Each tensor gets its own, so that a buffer reused for a later result never shows an
// earlier tensor's host copy.
class DeviceTensor : public DeviceStorage {
 public:
  explicit DeviceTensor(std::shared_ptr<Buffer> b) : b_(std::move(b)) {}
  const Buffer& buffer() const { return *b_; }

 protected:
  void download(std::byte* dst, size_t bytes) const override;

 private:
  std::shared_ptr<Buffer> b_;
};

}  // namespace sheaf::cuda
