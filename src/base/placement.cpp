// base/placement.cpp — the cores this process may use and its place among its machine's ranks.
#include "base/placement.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <string>

namespace sheaf {
namespace {

// The first of `vars` that holds an integer ≥ `least`; `otherwise` when none does.
int first_env_int(std::initializer_list<const char*> vars, long least, int otherwise) {
  for (const char* var : vars) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno == 0 && *end == '\0' && n >= least && n <= INT_MAX) return static_cast<int>(n);
  }
  return otherwise;
}

// A positive integer spelled by the whole of `s` (surrounding whitespace allowed), else 0.
long long positive(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  long long n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc() && end == s.data() + s.size() && n > 0 ? n : 0;
}

std::string first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The cgroup's quota in cores: v2's "<quota|max> <period>", else v1's two files; 0 when none.
int cgroup_quota_cores() {
  const std::string v2 = first_line("/sys/fs/cgroup/cpu.max");
  if (size_t sp = v2.find(' '); sp != std::string::npos)
    return quota_cores(std::string_view(v2).substr(0, sp), std::string_view(v2).substr(sp + 1));
  for (const char* dir : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
    const std::string quota = first_line((std::string(dir) + "/cpu.cfs_quota_us").c_str());
    if (!quota.empty()) return quota_cores(quota, first_line((std::string(dir) + "/cpu.cfs_period_us").c_str()));
  }
  return 0;
}

}  // namespace

int local_rank() { return first_env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, 0, 0); }

int local_ranks() {
  return first_env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}, 1, 1);
}

int quota_cores(std::string_view quota, std::string_view period) {
  const long long q = positive(quota), p = positive(period);
  if (q == 0 || p == 0) return 0;
  return static_cast<int>(std::min<long long>((q + p - 1) / p, INT_MAX));
}

int share_cores(int mask, int online, int quota, int ranks) {
  int cores = std::max(1, mask);
  if (quota > 0) cores = std::min(cores, quota);
  if (mask >= online && ranks > 1) cores /= ranks;
  return std::max(1, cores);
}

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

int default_threads() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const std::vector<int> cpus = affinity_cpus();
  const int mask = cpus.empty() ? static_cast<int>(online) : static_cast<int>(cpus.size());
  return share_cores(mask, static_cast<int>(std::max(1L, online)), cgroup_quota_cores(), local_ranks());
}

}  // namespace sheaf
