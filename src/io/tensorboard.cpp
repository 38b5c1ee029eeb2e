// io/tensorboard.cpp — the TensorBoard writer (see tensorboard.hpp): one open event file per
// run directory and process, records framed and checksummed here, Event messages serialized by
// libsheaf_tensorboard.so.
#include "io/tensorboard.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "base/companion.hpp"
#include "base/error.hpp"
#include "io/crc32c.hpp"
#include "io/tensorboard_abi.h"

namespace sheaf {
namespace {

constexpr int kHistogramBuckets = 30;

struct Plugin {
  int (*abi)() = nullptr;
  int64_t (*event)(double, int64_t, const char*, const sheaf_tb_value*, int64_t, char**) = nullptr;
  std::string error;  // why it could not be loaded
};

const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin p;
    std::string tried;
    void* lib = open_companion("libsheaf_tensorboard.so", "SHEAF_TENSORBOARD_LIB", RTLD_NOW | RTLD_LOCAL, tried);
    if (lib) {
      p.abi = reinterpret_cast<int (*)()>(dlsym(lib, "sheaf_tb_abi"));
      p.event = reinterpret_cast<decltype(p.event)>(dlsym(lib, "sheaf_tb_event"));
    }
    if (!lib)
      p.error = fmt::format("libsheaf_tensorboard.so could not be loaded (Sheaf builds it when libprotobuf-dev and "
                            "protobuf-compiler are installed; or set SHEAF_TENSORBOARD_LIB):{}",
                            tried);
    else if (!p.abi || !p.event || p.abi() != SHEAF_TB_ABI)
      p.error = "libsheaf_tensorboard.so does not match this binary: rebuild Sheaf";
    return p;
  }();
  return p;
}

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// One framed record holding the serialized Event.
std::string record(const std::string& dir, double time, int64_t step, const char* file_version,
                   const std::vector<sheaf_tb_value>& values) {
  const Plugin& p = plugin();
  if (!p.error.empty()) throw SheafError(fmt::format("'{}': {}", dir, p.error));
  char* data = nullptr;
  int64_t n = p.event(time, step, file_version, values.data(), static_cast<int64_t>(values.size()), &data);
  if (n < 0) throw SheafError(fmt::format("'{}': the TensorBoard event could not be serialized", dir));
  std::string out;
  put_le(out, static_cast<uint64_t>(n), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(data, static_cast<size_t>(n));
  put_le(out, masked_crc32c(data, static_cast<size_t>(n)), 4);
  std::free(data);
  return out;
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SheafError(fmt::format("'{}': cannot write: {}", path, std::strerror(errno)));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

struct EventFile {
  std::string path;
  int fd = -1;
};

// The open event file of `dir`, created (with its file_version record) at the first call.
EventFile& event_file(const std::string& dir) {
  static std::map<std::string, EventFile> files;  // by absolute directory; open until the process exits
  std::string key = std::filesystem::absolute(dir).lexically_normal().string();
  auto it = files.find(key);
  if (it != files.end()) return it->second;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw SheafError(fmt::format("'{}': cannot create the directory: {}", dir, ec.message()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  double now = wall_time();
  EventFile f;
  f.path = (std::filesystem::path(dir) /
            fmt::format("events.out.tfevents.{:010}.{}.{}.sheaf", static_cast<int64_t>(now), host, ::getpid()))
               .string();
  std::string first = record(dir, now, 0, "brain.Event:2", {});
  f.fd = ::open(f.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (f.fd < 0) throw SheafError(fmt::format("'{}': cannot create the event file: {}", f.path, std::strerror(errno)));
  write_all(f.fd, first, f.path);
  return files.emplace(key, std::move(f)).first->second;
}

struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> limits, counts;
};

Histogram histogram(const Tensor& t) {
  std::vector<double> xs;
  xs.reserve(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    if (double x = t.get(i); std::isfinite(x)) xs.push_back(x);
  Histogram h;
  if (xs.empty()) {  // one empty bucket
    h.limits = h.counts = {0.0};
    return h;
  }
  auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  h.min = *lo;
  h.max = *hi;
  h.num = static_cast<double>(xs.size());
  int buckets = h.max > h.min ? kHistogramBuckets : 1;
  double width = (h.max - h.min) / buckets;
  for (int b = 0; b < buckets; ++b) h.limits.push_back(b + 1 == buckets ? h.max : h.min + width * (b + 1));
  h.counts.assign(static_cast<size_t>(buckets), 0);
  for (double x : xs) {
    h.sum += x;
    h.sum_squares += x * x;
    int b = width > 0 ? std::clamp(static_cast<int>(std::ceil((x - h.min) / width)) - 1, 0, buckets - 1) : 0;
    h.counts[static_cast<size_t>(b)] += 1;
  }
  return h;
}

}  // namespace

void tensorboard_write(const std::string& dir, int64_t step, const Row& values) {
  std::vector<Histogram> histograms;
  histograms.reserve(values.size());  // the values below point into it
  std::vector<sheaf_tb_value> out;
  for (const auto& [tag, v] : values) {
    if (v.is_nil()) continue;  // a value not measured at this step
    sheaf_tb_value o{};
    o.tag = tag.c_str();
    if (v.is_number() || v.is(Kind::Bool)) {
      o.scalar = v.is(Kind::Bool) ? static_cast<float>(v.as_bool()) : static_cast<float>(v.as_double());
    } else if (v.is(Kind::Tensor) && v.as_tensor().shape().empty()) {
      o.scalar = static_cast<float>(v.as_tensor().get(0));
    } else if (v.is(Kind::Tensor)) {
      const Histogram& h = histograms.emplace_back(histogram(v.as_tensor()));
      o = {tag.c_str(), 1, 0, h.min, h.max, h.num, h.sum, h.sum_squares, h.limits.data(), h.counts.data(),
           static_cast<int64_t>(h.limits.size())};
    } else {
      throw SheafError(fmt::format("'{}': the value of '{}' is a {}; TensorBoard takes numbers and tensors (a tensor of "
                                   "rank ≥ 1 is a histogram)",
                                   dir, tag, kind_name(v.kind())));
    }
    out.push_back(o);
  }
  static std::mutex mu;  // one writer per directory and process, shared by threads
  std::lock_guard lock(mu);
  EventFile& f = event_file(dir);
  write_all(f.fd, record(dir, wall_time(), step, nullptr, out), f.path);
}

}  // namespace sheaf
