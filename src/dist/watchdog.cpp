// dist/watchdog.cpp — the collective watchdog thread and the SIGTERM report (see watchdog.hpp).
#include "dist/watchdog.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "dist/comm.hpp"

namespace sheaf::dist {
namespace {

// One thread, started with the first timed Wait, watching the one in progress.
class Watchdog {
 public:
  static Watchdog& get() {
    static auto* w = new Watchdog;  // never destroyed: it may be watching while the process exits
    return *w;
  }
  void enter(const std::string& where_waiting) {
    if (timeout_ <= 0) return;
    std::lock_guard lock(mu_);
    what_ = where_waiting;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_));
    busy_ = true;
    if (!thread_.joinable()) thread_ = std::thread([this] { watch(); });
    cv_.notify_one();
  }
  void leave() {
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
        std::cerr << fmt::format("error: {}: waited more than {:g} s for the other ranks {} (one may hang, or compute "
                                 "for longer than that outside collectives); ending the job (SHEAF_COLLECTIVE_TIMEOUT "
                                 "sets the limit)\n",
                                 where(), timeout_, what_)
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
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
};

// What a SIGTERM prints: two buffers, so that the handler (on any thread) always reads a
// complete message while the next one is written into the other.
struct StopReport {
  char text[2][640];
  size_t length[2] = {0, 0};
  std::atomic<int> shown{-1};  // the buffer to print, -1 outside collectives
  int last = 0;
  struct sigaction previous {};
};
StopReport& report() {
  static auto* r = new StopReport;  // never destroyed: a signal may arrive during exit
  return *r;
}

void on_sigterm(int sig) {
  StopReport& r = report();
  int i = r.shown.load(std::memory_order_acquire);
  if (i >= 0) {
    ssize_t ignored = ::write(STDERR_FILENO, r.text[i], r.length[i]);
    (void)ignored;
  }
  ::sigaction(sig, &r.previous, nullptr);
  ::raise(sig);  // delivered when the handler returns, with the previous disposition
}

void show(const std::string& where_waiting) {
  StopReport& r = report();
  int i = r.last ^ 1;
  std::string msg = fmt::format("error: {}: the job was ended while this rank waited for the other ranks {} (another "
                                "rank failed or was killed, or the job was stopped)\n",
                                where(), where_waiting);
  r.length[i] = std::min(msg.size(), sizeof r.text[i]);
  std::memcpy(r.text[i], msg.data(), r.length[i]);
  r.shown.store(i, std::memory_order_release);
  r.last = i;
}

}  // namespace

Wait::Wait(const std::string& where_waiting, bool timed) {
  show(where_waiting);
  if (timed) Watchdog::get().enter(where_waiting);
}

Wait::~Wait() {
  report().shown.store(-1, std::memory_order_release);
  Watchdog::get().leave();
}

void install_stop_report() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &report().previous);
}

void stop_watchdog() { Watchdog::get().stop(); }

}  // namespace sheaf::dist
