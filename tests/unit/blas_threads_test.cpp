// tests/unit/blas_threads_test.cpp — tensor/blas_threads: /proc/stat parsing, the count beside
// other processes' load, and a busy process on one of the cores taking a BLAS thread away.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "base/placement.hpp"
#include "tensor/blas_threads.hpp"

using namespace sheaf;

namespace {

constexpr const char* kProcStat =
    "cpu  5064845 0 2014392 4241015 59349 0 4420 4886 0 0\n"
    "cpu0 100 1 20 1000 50 3 4 5 0 0\n"
    "cpu1 200 0 40 2000 0 0 0 0 7 0\n"
    "cpu12 7 0 0 3 0 0 0 0 0 0\n"
    "intr 1 2 3\n"
    "ctxt 123\n";

TEST(BlasThreads, ReadsTheLinesOfTheGivenCpus) {
  CpuTimes t = cpu_times(kProcStat, {0});
  EXPECT_EQ(t.busy, 100u + 1 + 20 + 3 + 4 + 5);  // user nice system irq softirq steal
  EXPECT_EQ(t.total, t.busy + 1000 + 50);       // + idle iowait
  t = cpu_times(kProcStat, {0, 1});
  EXPECT_EQ(t.busy, 133u + 240);
  EXPECT_EQ(t.total, 133u + 1050 + 240 + 2000);
  t = cpu_times(kProcStat, {1});  // "cpu12" is not cpu 1, the aggregate "cpu " line is no CPU
  EXPECT_EQ(t.busy, 240u);
  t = cpu_times(kProcStat, {12});
  EXPECT_EQ(t.total, 10u);
  t = cpu_times(kProcStat, {5});
  EXPECT_EQ(t.total, 0u);
  t = cpu_times("cpu0 1 2\ncpu1", {0, 1});  // short or cut lines: what is there
  EXPECT_EQ(t.busy, 3u);
}

TEST(BlasThreads, CountBesideOtherProcesses) {
  EXPECT_EQ(threads_beside(2, 2, 0.0), 2);
  EXPECT_EQ(threads_beside(2, 2, 0.3), 2);
  EXPECT_EQ(threads_beside(2, 2, 0.7), 1);  // another process holds most of a core
  EXPECT_EQ(threads_beside(2, 2, 1.0), 1);
  EXPECT_EQ(threads_beside(2, 2, 5.0), 1);  // never 0
  EXPECT_EQ(threads_beside(16, 16, 3.2), 13);
  EXPECT_EQ(threads_beside(16, 16, -0.1), 16);  // sampling noise below 0
  EXPECT_EQ(threads_beside(1, 1, 0.0), 1);
  EXPECT_EQ(threads_beside(4, 16, 12.0), 4);  // mpirun -np 4 unbound: the other ranks keep theirs
  EXPECT_EQ(threads_beside(4, 16, 14.0), 2);  // and something else takes two more
  EXPECT_EQ(threads_beside(2, 16, 0.0), 2);   // a cgroup quota of 2 cores on 16 CPUs
}

TEST(BlasThreads, ABusyProcessOnACoreTakesAThreadAway) {
  const std::vector<int> cpus = affinity_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: nothing to share";
  BlasThreads threads(static_cast<int>(cpus.size()));
  EXPECT_EQ(threads.next(), static_cast<int>(cpus.size()));  // no sample yet: every core
  const pid_t busy = fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {  // spins on one CPU of the mask until killed
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus.back(), &one);
    sched_setaffinity(0, sizeof one, &one);
    for (;;) asm volatile("" ::: "memory");
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(BlasThreads::kSampleSeconds * 1.5));
  const int during = threads.next();  // the sample covers the busy interval
  kill(busy, SIGKILL);
  waitpid(busy, nullptr, 0);
  EXPECT_LT(during, static_cast<int>(cpus.size()));
  EXPECT_GE(during, 1);
}

// The C++ compiler's CPU time is the process's own once the compiler has ended: the products
// right after a compile keep every core. A child that used 0.3 s of CPU (by its own clock, however
// busy the machine) adds at least that much once waited for.
TEST(BlasThreads, AChildThatEndedCountsAsTheProcesssOwn) {
  auto cpu = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  const double before = own_cpu_seconds();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    while (cpu() < 0.3) asm volatile("" ::: "memory");
    _exit(0);
  }
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_GE(own_cpu_seconds() - before, 0.3);
}

}  // namespace
