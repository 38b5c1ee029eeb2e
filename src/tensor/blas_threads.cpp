// tensor/blas_threads.cpp — OpenBLAS's thread count from the cores other processes leave idle.
#include "tensor/blas_threads.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>

#include "base/placement.hpp"

namespace sheaf {
namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string read_proc_stat() {
  std::ifstream f("/proc/stat");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

double own_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  rusage children{};
  getrusage(RUSAGE_CHILDREN, &children);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9 + seconds(children.ru_utime) + seconds(children.ru_stime);
}

CpuTimes cpu_times(std::string_view text, const std::vector<int>& cpus) {
  CpuTimes t;
  while (!text.empty()) {
    const size_t eol = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(std::min(eol + 1, text.size()));
    if (!line.starts_with("cpu")) continue;
    const char* end = line.data() + line.size();
    int cpu = -1;  // the aggregate "cpu " line has no number
    auto [p, ec] = std::from_chars(line.data() + 3, end, cpu);
    if (ec != std::errc() || std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal (guest time is already in user); a field
    // that does not parse, and those after it, count 0
    uint64_t field[8] = {};
    for (uint64_t& f : field) {
      while (p < end && *p == ' ') ++p;
      p = std::from_chars(p, end, f).ptr;
    }
    const uint64_t idle = field[3] + field[4];
    const uint64_t busy = field[0] + field[1] + field[2] + field[5] + field[6] + field[7];
    t.busy += busy;
    t.total += busy + idle;
  }
  return t;
}

int threads_beside(int share, int cpus, double others) {
  const long idle = std::lround(static_cast<double>(cpus) - std::max(0.0, others));
  return static_cast<int>(std::clamp<long>(idle, 1, std::max(1, share)));
}

BlasThreads::BlasThreads(int cores) : cores_(std::max(1, cores)), current_(cores_), cpus_(affinity_cpus()) {}

int BlasThreads::next() {
  if (cores_ == 1 || cpus_.empty()) return current_;
  const double now = wall_seconds();
  if (last_wall_ >= 0 && now - last_wall_ < kSampleSeconds) return current_;
  const CpuTimes times = cpu_times(read_proc_stat(), cpus_);
  const double self = own_cpu_seconds();
  if (last_wall_ >= 0 && times.total > last_.total && times.busy >= last_.busy) {
    static const double tick = static_cast<double>(std::max(1L, sysconf(_SC_CLK_TCK)));
    const double busy = static_cast<double>(times.busy - last_.busy) / tick;
    const double others = (busy - (self - last_self_)) / (now - last_wall_);
    current_ = threads_beside(cores_, static_cast<int>(cpus_.size()), others);
  }
  last_wall_ = now;
  last_self_ = self;
  last_ = times;
  return current_;
}

}  // namespace sheaf
