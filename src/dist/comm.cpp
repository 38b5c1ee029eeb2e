// dist/comm.cpp — launcher detection, loading libsheaf_mpi.so, the collectives and their
// sequence check (see comm.hpp).
#include "dist/comm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "base/companion.hpp"
#include "base/error.hpp"
#include "base/hash.hpp"
#include "dist/watchdog.hpp"

namespace sheaf::dist {
namespace {

// The shim's C ABI (dist/mpi_shim.c).
struct Shim {
  int (*abi)();
  int (*init)(int*, int*, char*, int);
  int (*allreduce_sum)(void*, int64_t, int, char*, int);
  int (*bcast)(void*, int64_t, int, char*, int);
  int (*allgather)(const void*, int, void*, char*, int);
  void (*abort)(int);
  void (*finalize)();
};
constexpr int kShimAbi = 3;

struct State {
  bool ready = false;
  bool launched = false;  // by an MPI launcher
  int rank = 0, size = 1;
  Shim mpi{};
  uint64_t announced = 0;  // collectives announced so far
  int steps_open = 0;
  std::string step;        // the open Step's description
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
  resolve(lib, "sheaf_mpi_allgather", m.allgather, missing);
  resolve(lib, "sheaf_mpi_abort", m.abort, missing);
  resolve(lib, "sheaf_mpi_finalize", m.finalize, missing);
  if (!missing.empty()) throw SheafError(fmt::format("libsheaf_mpi.so lacks {}: rebuild Sheaf", missing));
  if (m.abi() != kShimAbi) throw SheafError(fmt::format("libsheaf_mpi.so has ABI {}, this binary needs {}: rebuild Sheaf", m.abi(), kShimAbi));
}

// One blocking call of the shim, `call(err, errlen)`, waiting `where_waiting` (dist/watchdog.hpp);
// its error, if any, as a SheafError naming this rank and `what`.
template <typename Call>
void mpi_call(std::string_view what, const std::string& where_waiting, bool timed, const Call& call) {
  char err[512] = {0};
  Wait w(where_waiting, timed);
  if (call(err, static_cast<int>(sizeof err)) != 0) throw SheafError(fmt::format("{}: {} failed in MPI: {}", where(), what, err));
}

// all[r·bytes ...] = rank r's `bytes` bytes at `mine`.
void gather_bytes(std::string_view what, const void* mine, size_t bytes, void* all, const std::string& where_waiting,
                  bool timed) {
  mpi_call(what, where_waiting, timed,
           [&](char* err, int n) { return state().mpi.allgather(mine, static_cast<int>(bytes), all, err, n); });
}

// "rank 1", "ranks 0, 2, 5", "ranks 0, 1, 2, 3, 4, 5, 6, 7 and 9 more".
std::string ranks_text(const std::vector<int>& ranks) {
  constexpr size_t kShown = 8;
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < std::min(ranks.size(), kShown); ++i) s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  if (ranks.size() > kShown) s += fmt::format(" and {} more", ranks.size() - kShown);
  return s;
}

constexpr size_t kDescribed = 512;  // bytes of each rank's description exchanged after a mismatch

// The error for announcements that differ: each distinct one with the ranks that made it, in the
// order of their lowest rank. `texts` holds kDescribed NUL-terminated bytes per rank.
std::string out_of_step(const std::vector<uint64_t>& hashes, const std::vector<char>& texts) {
  std::vector<std::pair<uint64_t, std::vector<int>>> groups;
  for (size_t r = 0; r < hashes.size(); ++r) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& x) { return x.first == hashes[r]; });
    if (g == groups.end()) groups.push_back({hashes[r], {static_cast<int>(r)}});
    else g->second.push_back(static_cast<int>(r));
  }
  std::string parts;
  for (const auto& [hash, ranks] : groups) {
    const char* text = texts.data() + static_cast<size_t>(ranks[0]) * kDescribed;
    parts += fmt::format("{}{} {}", parts.empty() ? "" : "; ", ranks_text(ranks), std::string_view(text, strnlen(text, kDescribed)));
  }
  return fmt::format("{}: the ranks are out of step at collective {} of the job: {}. Every rank must call the same "
                     "collectives in the same order, on trees of the same structure, dtypes and shapes",
                     where(), state().announced, parts);
}

// The sequence check (comm.hpp): `done` is what this rank does ("called barrier"); throws
// SheafError when another rank announced something else.
void announce(const std::string& done, const std::string& where_waiting, bool timed) {
  State& s = state();
  ++s.announced;
  const uint64_t mine = fnv1a64(done);
  std::vector<uint64_t> hashes(static_cast<size_t>(s.size));
  gather_bytes("announcing a collective", &mine, sizeof mine, hashes.data(), where_waiting, timed);
  if (std::all_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h == mine; })) return;
  // Every rank saw the same hashes, so every rank takes this second allgather.
  std::vector<char> text(kDescribed, '\0'), texts(kDescribed * hashes.size());
  std::memcpy(text.data(), done.data(), std::min(done.size(), kDescribed - 1));
  gather_bytes("comparing the collectives", text.data(), kDescribed, texts.data(), where_waiting, timed);
  throw SheafError(out_of_step(hashes, texts));
}

// The Step of a call made outside any Step, announced as `what`; nothing inside one.
struct OwnStep {
  std::optional<Step> step;
  explicit OwnStep(const std::string& what) {
    if (state().steps_open == 0) step.emplace(what);
  }
};

std::string waiting_in() { return "in " + state().step; }

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
  if (s.size > 1) install_stop_report();
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

Step::Step(const std::string& what) {
  State& s = state();
  if (!s.launched) return;
  announce("called " + what, "in " + what, true);
  if (s.steps_open++ == 0) s.step = what;
}

Step::~Step() {
  State& s = state();
  if (s.launched) --s.steps_open;
}

void all_reduce_sum(void* data, int64_t count, Elem e, const char* what) {
  if (!distributed() || count == 0) return;
  constexpr const char* kNames[] = {"f32", "i32", "u32"};
  OwnStep step(fmt::format("{} of {} {} elements", what, count, kNames[static_cast<int>(e)]));
  mpi_call(what, waiting_in(), true,
           [&](char* err, int n) { return state().mpi.allreduce_sum(data, count, static_cast<int>(e), err, n); });
}

void broadcast(void* data, int64_t bytes, int root, const char* what) {
  if (!distributed() || bytes == 0) return;
  OwnStep step(fmt::format("{}: broadcast of {} bytes from rank {}", what, bytes, root));
  mpi_call(what, waiting_in(), true, [&](char* err, int n) { return state().mpi.bcast(data, bytes, root, err, n); });
}

std::vector<uint64_t> all_gather(uint64_t mine, const char* what) {
  if (!distributed()) return {mine};
  OwnStep step(fmt::format("{}: all-gather of 8 bytes", what));
  std::vector<uint64_t> all(static_cast<size_t>(state().size));
  gather_bytes(what, &mine, sizeof mine, all.data(), waiting_in(), true);
  return all;
}

void barrier() {
  if (distributed()) Step step("barrier");
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
  try {
    announce("reached the end of its program", "at the end of its program", false);
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    abort_job(1);
  }
  stop_watchdog();
  s.mpi.finalize();
}

}  // namespace sheaf::dist
