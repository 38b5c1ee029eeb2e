// backend/cuda/driver_device.hpp — the pure parts of DriverDevice (driver_device.cpp, the real
// GPU behind cuda::gpu()), declared apart so that they are tested without a GPU: the kernel
// cache's file names and format, how sizes and the device are written in messages, and which GPU
// a rank of a data-parallel job uses.
//
// Cache files (one per rendering and GPU architecture, in the cache_dir given to Device::load):
//   name     cuda-<16 hex digits>.<arch>.cubin, the digits the FNV-1a 64 hash of the CUDA source,
//            the arch ("sm_90") and the NVRTC version ("NVRTC 13.0"), each followed by a NUL
//   content  "SHEAFCUBIN2\n" (12 bytes), the payload's size (8 bytes, little-endian), the
//            HMAC-SHA-256 of the payload under this user's key (64 hex digits), the payload (the
//            cubin NVRTC produced)
// A cubin is trusted like a CPU artifact (io/artifact_trust.hpp): it is loaded only from a regular
// file and folder owned by this user and writable by no one else, when its MAC matches — checked
// on the bytes read once, which are the bytes cuModuleLoadData gets. A file that fails these checks
// is ignored (with a one-line notice) and rewritten, never into a folder that fails them; files are
// written to a temporary name in the same directory and renamed, so readers never see half a file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/cuda/driver.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/hash.hpp"
#include "io/artifact_trust.hpp"

namespace sheaf::cuda {

// "cuda-0123456789abcdef.sm_90.cubin"; `compiler` names NVRTC and its options (a cubin of
// another version or other options is another file).
std::string cubin_cache_name(const std::string& source, const std::string& arch, const std::string& compiler = nvrtc_compiler());

constexpr size_t kCubinHeaderBytes = 84;
// The cache file's bytes for `cubin` with its MAC (64 hex digits).
std::string pack_cubin(const std::string& cubin, const std::string& mac);
struct CubinFile {
  std::string cubin, mac;
};
// The cubin and the MAC in a cache file's bytes, or nullopt with `why` ("not a Sheaf cubin cache
// file", "truncated: 100 of 4096 payload bytes", ...). The MAC is not checked here.
std::optional<CubinFile> unpack_cubin(const std::string& file, std::string* why = nullptr);

// The cubin cached at `path`: nullopt with `why` empty when there is no such file, with `why`
// saying what is wrong when the file or its folder fails the checks above ("it is a FIFO", "it
// is not signed with this user's key (...)", "its folder is writable by group or others ...").
std::optional<std::string> read_cached_cubin(const std::string& path, std::string* why = nullptr);
// Writes `cubin` to `path` atomically with this user's MAC (creating its folder); false when it
// could not (the cache is then only lost).
bool write_cached_cubin(const std::string& path, const std::string& cubin);
// The cache files' checks, shared with the cuBLASLt choices file (lt_tuning.hpp):
// read_cache_file gives the bytes of the file at `path` (at most `limit`) when it and its folder
// pass the file checks above; nullopt with `why` empty when there is no such file, else with `why`
// ("its folder is writable by group or others ...", "it is a FIFO"). write_cache_file writes
// pack(payload, the payload's MAC under this user's key) there atomically, creating the folder,
// never into a folder that fails the checks; false when it could not (only the cache is lost).
std::optional<std::string> read_cache_file(const std::string& path, std::string* why,
                                           size_t limit = trust::kMaxArtifactBytes);
bool write_cache_file(const std::string& path, const std::string& payload,
                      std::string (*pack)(const std::string& payload, const std::string& mac));
// `sheaf trust`: rewrites the cache file at `path` with this user's MAC when it passes the file
// checks and parses; the cubin's size, or nullopt with `why`. Throws SheafError when it cannot write.
std::optional<size_t> resign_cached_cubin(const std::string& path, std::string* why);

// "512 B", "32.0 MiB", "1.5 GiB"
std::string format_bytes(size_t bytes);
// "sm_90"
std::string arch_name(const DeviceInfo& info);
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)"
std::string describe_device(const DeviceInfo& info);

// The GPU of the rank `local_rank` (base/placement.hpp) of its machine, which sees `device_count`
// GPUs: local_rank mod device_count, so the ranks of a node use distinct GPUs while there are enough
// (mpirun -np 8 on an 8-GPU node), and a launcher that shows each rank one GPU
// (srun --gpus-per-task=1) gets 0.
// 0 when device_count ≤ 0.
int gpu_ordinal(int local_rank, int device_count);

}  // namespace sheaf::cuda
