// backend/cpu/parallel.cpp — the worker pool of parallel_for (see parallel.hpp).
#include "backend/cpu/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sheaf::cpu {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until `a` differs from `old`: spinning for about kSpin first (the next loop of a step
// usually comes within microseconds), then sleeping on a futex (std::atomic::wait).
template <typename T>
void await_change(const std::atomic<T>& a, T old) {
  constexpr auto kSpin = std::chrono::microseconds(50);
  const auto start = Clock::now();
  for (int i = 0;; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    __builtin_ia32_pause();
    if ((i & 63) == 63 && Clock::now() - start > kSpin) break;
  }
  a.wait(old, std::memory_order_acquire);
}

class Pool {
 public:
  ~Pool() {
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void run(RangeFn fn, void* const* args, int64_t n, int parts) {
    while (static_cast<int>(workers_.size()) < parts - 1) {
      const int index = static_cast<int>(workers_.size());
      const uint32_t now = generation_.load(std::memory_order_relaxed);  // it waits for the next job
      workers_.emplace_back([this, index, now] { work(index, now); });
    }
    fn_ = fn, args_ = args, n_ = n, parts_ = parts;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    fn(args, 0, n / parts);
    for (int left; (left = pending_.load(std::memory_order_acquire)) != 0;) await_change(pending_, left);
  }

 private:
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  RangeFn fn_ = nullptr;
  void* const* args_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 1;

  // Worker `index` runs part index + 1 of each job after generation `seen` that has one.
  void work(int index, uint32_t seen) {
    for (;;) {
      await_change(generation_, seen);
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      if (const int part = index + 1; part < parts_) fn_(args_, n_ * part / parts_, n_ * (part + 1) / parts_);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }
};

}  // namespace

void parallel_for(RangeFn fn, void* const* args, int64_t n, int threads) {
  const int parts = static_cast<int>(std::min<int64_t>(threads, n));
  if (parts <= 1) return fn(args, 0, n);
  static Pool pool;
  pool.run(fn, args, n, parts);
}

}  // namespace sheaf::cpu
