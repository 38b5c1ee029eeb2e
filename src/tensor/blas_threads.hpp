// tensor/blas_threads.hpp — how many threads OpenBLAS gets for the next product.
// By default as many as the cores this process may use (base/placement.hpp), minus the cores other
// processes keep busy: OpenBLAS's threads wait for each other at every product, so a thread whose
// core is taken by another process stalls the whole product (the char GPT step took 4.1 s
// instead of 1.2 s with two threads on a 2-core machine running a test suite, and 0.63 s instead
// of 1.05 s with the other core idle). The load is sampled from /proc/stat at most every
// kSampleSeconds: the busy time of the process's CPUs over the interval, less the process's own
// CPU time and that of its children that ended (own_cpu_seconds: the C++ compiler of the
// generated code, so that the products right after a compile get every core), in cores.
// SHEAF_NUM_THREADS (or OPENBLAS_NUM_THREADS / OMP_NUM_THREADS) fixes the count instead.
// Products can differ in the last bits between thread counts.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace sheaf {

// Busy and total jiffies summed over the "cpuN" lines of /proc/stat text whose N is in `cpus`
// (busy: user, nice, system, irq, softirq, steal; total adds idle and iowait).
struct CpuTimes {
  uint64_t busy = 0, total = 0;
};
CpuTimes cpu_times(std::string_view proc_stat, const std::vector<int>& cpus);

// This process's CPU seconds, with those of its children that ended and were waited for.
double own_cpu_seconds();

// Threads for a process whose share of the machine is `share` cores (default_threads) on `cpus`
// CPUs (its affinity mask) when other processes kept `others` of those busy (in cores, averaged
// over the last interval): the share, or the idle CPUs (rounded to nearest) when fewer, at least 1.
// Other ranks of the job are other processes: each rank keeps its share while they keep theirs.
int threads_beside(int share, int cpus, double others);

// The adaptive count (see above) for a process whose share is `cores` cores: call before each
// product; returns the count to use, sampling the load when kSampleSeconds have passed.
class BlasThreads {
 public:
  static constexpr double kSampleSeconds = 0.2;
  explicit BlasThreads(int cores);
  int next();
  int cores() const { return cores_; }

 private:
  int cores_;
  int current_;
  std::vector<int> cpus_;      // the CPUs of the affinity mask
  double last_wall_ = -1;      // seconds (steady clock) at the last sample
  double last_self_ = 0;       // the process's CPU seconds then
  CpuTimes last_{};
};

}  // namespace sheaf
