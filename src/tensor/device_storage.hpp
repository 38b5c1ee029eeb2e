// tensor/device_storage.hpp — the elements of a tensor that live on an accelerator (SPEC §6.4).
// Results of compiled calls on a GPU stay there: the Tensor holds a DeviceStorage and no host
// bytes. The first read of its elements on the host (printing, saving, an interpreted builtin)
// downloads them once; every copy of the Tensor then shares that host copy. The device bytes are
// immutable, like a host tensor's: the backend that made them never writes them again.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>

namespace sheaf {

class DeviceStorage {
 public:
  virtual ~DeviceStorage() = default;
  // The elements (`bytes` of them) in host memory, downloaded on the first call.
  const std::shared_ptr<std::byte>& host(size_t bytes) const;

 protected:
  // Copies the device bytes to `dst` (waiting for the work that writes them).
  virtual void download(std::byte* dst, size_t bytes) const = 0;

 private:
  mutable std::once_flag once_;
  mutable std::shared_ptr<std::byte> host_;
};

}  // namespace sheaf
