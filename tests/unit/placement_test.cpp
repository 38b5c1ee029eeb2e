// tests/unit/placement_test.cpp — base/placement: the launchers' local rank and local size
// variables, cgroup quotas, and how cores are shared into a thread count.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/placement.hpp"

using namespace sheaf;

namespace {

// Unsets the launchers' variables for the test's lifetime; set() gives one a value (or unsets it).
class LauncherEnv {
 public:
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",   "SLURM_LOCALID",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"};
  LauncherEnv() {
    for (const char* v : kVars) {
      const char* was = std::getenv(v);
      saved_.emplace_back(v, was ? std::optional<std::string>(was) : std::nullopt);
      unsetenv(v);
    }
  }
  ~LauncherEnv() {
    for (const auto& [v, was] : saved_) set(v, was ? was->c_str() : nullptr);
  }
  void set(const char* var, const char* value) {
    if (value)
      setenv(var, value, 1);
    else
      unsetenv(var);
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST(Placement, LocalRankFromTheLaunchersVariables) {
  LauncherEnv env;
  EXPECT_EQ(local_rank(), 0);  // no launcher
  env.set("SLURM_LOCALID", "3");
  EXPECT_EQ(local_rank(), 3);
  env.set("MPI_LOCALRANKID", "5");  // Hydra's before srun's
  EXPECT_EQ(local_rank(), 5);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "6");  // OpenMPI's before both
  EXPECT_EQ(local_rank(), 6);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "seven");  // not an integer: the next variable
  EXPECT_EQ(local_rank(), 5);
  env.set("MPI_LOCALRANKID", "-1");  // negative: the next
  EXPECT_EQ(local_rank(), 3);
  env.set("SLURM_LOCALID", "");
  EXPECT_EQ(local_rank(), 0);
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "12");
  EXPECT_EQ(local_rank(), 12);
}

TEST(Placement, LocalRanksFromTheLaunchersVariables) {
  LauncherEnv env;
  EXPECT_EQ(local_ranks(), 1);  // no launcher: a job of one
  env.set("SLURM_NTASKS_PER_NODE", "4");
  EXPECT_EQ(local_ranks(), 4);
  env.set("MPI_LOCALNRANKS", "3");
  EXPECT_EQ(local_ranks(), 3);
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  EXPECT_EQ(local_ranks(), 2);
  env.set("OMPI_COMM_WORLD_LOCAL_SIZE", "0");  // not positive: the next variable
  EXPECT_EQ(local_ranks(), 3);
  env.set("MPI_LOCALNRANKS", "2x");
  EXPECT_EQ(local_ranks(), 4);
}

TEST(Placement, QuotaCores) {
  EXPECT_EQ(quota_cores("200000", "100000"), 2);   // docker --cpus 2 (cgroup v2 cpu.max "200000 100000")
  EXPECT_EQ(quota_cores("150000", "100000"), 2);   // 1.5 cores: a second thread still has half a core
  EXPECT_EQ(quota_cores("50000", "100000"), 1);    // less than one core: one
  EXPECT_EQ(quota_cores("max", "100000"), 0);      // v2: no quota
  EXPECT_EQ(quota_cores("-1", "100000"), 0);       // v1: no quota
  EXPECT_EQ(quota_cores("400000\n", " 100000 "), 4);  // file text
  EXPECT_EQ(quota_cores("", ""), 0);               // no such file
  EXPECT_EQ(quota_cores("100000", "0"), 0);
  EXPECT_EQ(quota_cores("1e5", "100000"), 0);
}

TEST(Placement, SharingCores) {
  EXPECT_EQ(share_cores(2, 2, 0, 1), 2);    // the whole machine, one process
  EXPECT_EQ(share_cores(16, 16, 4, 1), 4);  // capped by the quota
  EXPECT_EQ(share_cores(16, 16, 0, 4), 4);  // mpirun -np 4, unbound: a quarter each
  EXPECT_EQ(share_cores(16, 16, 0, 32), 1); // more ranks than cores: one each
  EXPECT_EQ(share_cores(4, 16, 0, 4), 4);   // bound to 4 CPUs by the launcher: those 4
  EXPECT_EQ(share_cores(1, 2, 0, 2), 1);    // mpirun -np 2 binds a core each
  EXPECT_EQ(share_cores(0, 2, 0, 1), 1);    // never 0
}

TEST(Placement, DefaultThreadsFollowTheAffinityMask) {
  LauncherEnv env;
  cpu_set_t whole;
  ASSERT_EQ(sched_getaffinity(0, sizeof whole, &whole), 0);
  EXPECT_GE(default_threads(), 1);
  EXPECT_LE(default_threads(), CPU_COUNT(&whole));
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &whole)) {
      CPU_SET(c, &one);
      break;
    }
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // taskset -c <one CPU>
  const int bound = default_threads();
  ASSERT_EQ(sched_setaffinity(0, sizeof whole, &whole), 0);
  EXPECT_EQ(bound, 1);
}

}  // namespace
