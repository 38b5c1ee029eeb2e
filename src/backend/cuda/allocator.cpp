// backend/cuda/allocator.cpp — the caching device allocator (see allocator.hpp).
#include "backend/cuda/allocator.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.hpp"
#include "base/error.hpp"

namespace sheaf::cuda {

namespace {
constexpr size_t kSmall = size_t{1} << 20, kSmallRound = 512, kLargeRound = size_t{2} << 20;

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
}  // namespace

// A GPU in an error state (an illegal address: every later call fails) cannot take its memory
// back; the process's end does, and a destructor must not throw.
Allocator::~Allocator() {
  try {
    trim();
  } catch (const SheafError&) {
  }
}

size_t Allocator::rounded(size_t bytes) {
  size_t unit = bytes < kSmall ? kSmallRound : kLargeRound;
  return (std::max<size_t>(bytes, 1) + unit - 1) / unit * unit;
}

DevicePtr Allocator::allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  ++stats_.requests;
  DevicePtr p = 0;
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.cached -= size;
    ++stats_.hits;
  } else {
    const Clock::time_point t0 = Clock::now();
    try {
      p = device_->allocate(size);
    } catch (const SheafError&) {
      if (stats_.cached == 0) throw;
      trim();
      try {
        p = device_->allocate(size);
      } catch (const SheafError& e) {
        throw SheafError(fmt::format("out of GPU memory: {} more needed with {} in use by tensors and buffers ({})", mib(size),
                                     mib(stats_.in_use), e.what()));
      }
    }
    stats_.device_bytes += size;
    ++stats_.device_allocations;
    stats_.device_s += seconds_since(t0);
  }
  stats_.in_use += size;
  stats_.peak_in_use = std::max(stats_.peak_in_use, stats_.in_use);
  return p;
}

void Allocator::release(DevicePtr p, size_t bytes) {
  const size_t size = rounded(bytes);
  free_[size].push_back(p);
  stats_.in_use -= size;
  stats_.cached += size;
}

void Allocator::trim() {
  for (auto& [size, blocks] : free_) {
    for (DevicePtr p : blocks) device_->release(p);
    stats_.device_bytes -= size * blocks.size();
    stats_.cached -= size * blocks.size();
  }
  free_.clear();
}

void DeviceTensor::download(std::byte* dst, size_t bytes) const {
  b_->allocator().device().download(dst, b_->ptr(), std::min(bytes, b_->bytes()));
}

}  // namespace sheaf::cuda
