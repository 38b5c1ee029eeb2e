// dist/comm.cpp — launcher detection, loading libsheaf_mpi.so, the collective watchdog (see
// comm.hpp).
#include "dist/comm.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "base/companion.hpp"
#include "base/error.hpp"

namespace sheaf::dist {
namespace {

// The shim's C ABI (dist/mpi_shim.c).
struct Shim {
  int (*abi)();
  int (*init)(int*, int*, char*, int);
  int (*allreduce_sum)(void*, int64_t, int, char*, int);
  int (*bcast)(void*, int64_t, int, char*, int);
  int (*allgather_u64)(uint64_t, uint64_t*, char*, int);
  int (*barrier)(char*, int);
  void (*abort)(int);
  void (*finalize)();
};
constexpr int kShimAbi = 2;

struct State {
  bool ready = false;
  bool launched = false;  // by an MPI launcher
  int rank = 0, size = 1;
  Shim mpi{};
};
State& state() {
  static State s;
  return s;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return std::getenv("SLURM_PROCID") && std::getenv("SLURM_STEP_NUM_TASKS");  // a task of an srun step
}

template <typename F>
void resolve(void* lib, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn && missing.empty()) missing = name;
}

void load_shim(State& s) {
  std::string tried;
  // RTLD_GLOBAL: OpenMPI's components resolve libmpi's symbols from the global scope.
  void* lib = open_companion("libsheaf_mpi.so", "SHEAF_MPI_LIB", RTLD_NOW | RTLD_GLOBAL, tried);
  if (!lib)
    throw SheafError(fmt::format("started by an MPI launcher, but libsheaf_mpi.so could not be loaded (build Sheaf with MPI "
                                 "installed: apt-get install libopenmpi-dev; or set SHEAF_MPI_LIB):{}",
                                 tried));
  std::string missing;
  Shim& m = s.mpi;
  resolve(lib, "sheaf_mpi_abi", m.abi, missing);
  resolve(lib, "sheaf_mpi_init", m.init, missing);
  resolve(lib, "sheaf_mpi_allreduce_sum", m.allreduce_sum, missing);
  resolve(lib, "sheaf_mpi_bcast", m.bcast, missing);
  resolve(lib, "sheaf_mpi_allgather_u64", m.allgather_u64, missing);
  resolve(lib, "sheaf_mpi_barrier", m.barrier, missing);
  resolve(lib, "sheaf_mpi_abort", m.abort, missing);
  resolve(lib, "sheaf_mpi_finalize", m.finalize, missing);
  if (!missing.empty()) throw SheafError(fmt::format("libsheaf_mpi.so lacks {}: rebuild Sheaf", missing));
  if (m.abi() != kShimAbi) throw SheafError(fmt::format("libsheaf_mpi.so has ABI {}, this binary needs {}: rebuild Sheaf", m.abi(), kShimAbi));
}

// The watchdog: one thread, started with the first collective, watching the one in progress.
class Watchdog {
 public:
  static Watchdog& get() {
    static auto* w = new Watchdog;  // never destroyed: it may be watching while the process exits
    return *w;
  }
  void enter(const char* what) {
    if (timeout_ <= 0) return;
    std::lock_guard lock(mu_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_));
    busy_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
    cv_.notify_one();
  }
  void leave() {
    if (timeout_ <= 0) return;
    std::lock_guard lock(mu_);
    busy_ = false;
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  Watchdog() {
    const char* t = std::getenv("SHEAF_COLLECTIVE_TIMEOUT");
    timeout_ = t ? std::atof(t) : 600.0;
  }
  void watch() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      if (!busy_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && busy_ && std::chrono::steady_clock::now() >= deadline_) {
        std::cerr << fmt::format("error: {}: {} waited more than {:g} s for the other ranks (one may have died or skipped "
                                 "this collective); ending the job (SHEAF_COLLECTIVE_TIMEOUT sets the limit)\n",
                                 where(), what_, timeout_)
                  << std::flush;
        std::_Exit(1);  // the launcher sees a failed rank and stops the others
      }
    }
  }
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool busy_ = false, stopping_ = false;
  const char* what_ = "";
  std::chrono::steady_clock::time_point deadline_;
};

struct Watch {
  explicit Watch(const char* what) { Watchdog::get().enter(what); }
  ~Watch() { Watchdog::get().leave(); }
};

// Runs one blocking call of the shim, `call(err, errlen)`, under the watchdog; its error, if any,
// as a SheafError naming this rank and `what`.
template <typename Call>
void collective(const char* what, const Call& call) {
  char err[512] = {0};
  Watch w(what);
  if (call(err, static_cast<int>(sizeof err)) != 0) throw SheafError(fmt::format("{}: {} failed in MPI: {}", where(), what, err));
}

}  // namespace

void init() {
  State& s = state();
  if (s.ready) return;
  s.ready = true;
  if (!launched_by_mpi()) return;
  s.launched = true;
  load_shim(s);
  char err[512] = {0};
  if (s.mpi.init(&s.rank, &s.size, err, sizeof err) != 0) throw SheafError(fmt::format("MPI_Init failed: {}", err));
}

int rank() {
  init();
  return state().rank;
}
int world_size() {
  init();
  return state().size;
}
bool distributed() {
  init();
  return state().launched;
}
std::string where() {
  const State& s = state();
  return s.launched ? fmt::format("rank {} of {}", s.rank, s.size) : "";
}
void all_reduce_sum(void* data, int64_t count, Elem e, const char* what) {
  if (!distributed() || count == 0) return;
  collective(what, [&](char* err, int n) { return state().mpi.allreduce_sum(data, count, static_cast<int>(e), err, n); });
}

void broadcast(void* data, int64_t bytes, int root, const char* what) {
  if (!distributed() || bytes == 0) return;
  collective(what, [&](char* err, int n) { return state().mpi.bcast(data, bytes, root, err, n); });
}

std::vector<uint64_t> all_gather(uint64_t mine, const char* what) {
  if (!distributed()) return {mine};
  std::vector<uint64_t> all(static_cast<size_t>(state().size));
  collective(what, [&](char* err, int n) { return state().mpi.allgather_u64(mine, all.data(), err, n); });
  return all;
}

void barrier() {
  if (!distributed()) return;
  collective("barrier", [&](char* err, int n) { return state().mpi.barrier(err, n); });
}

void abort_job(int code) {
  std::cout.flush();
  std::cerr.flush();
  const State& s = state();
  if (s.launched && s.size > 1) s.mpi.abort(code);
  std::_Exit(code);
}

void finalize() {
  const State& s = state();
  if (!s.launched) return;
  Watchdog::get().stop();
  s.mpi.finalize();
}

}  // namespace sheaf::dist
