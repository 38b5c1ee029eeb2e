// eval/progress.hpp — the progress bar of long loops (SPEC §10): the outermost `repeat` of ≥ 100
// iterations, once it has run for 1 s, draws on stderr (a terminal only, not with --no-progress)
//    120/2000 [###.......................]  9.8 it/s  ETA 3:12 | loss 1.8423
// with the fields set by `(progress :k v ...)`, redrawn at most 10 times a second and erased when
// the loop ends. Program output clears the bar's line first (ProgressBar::before_output), so
// printed lines are never interleaved with it.
#pragma once
#include <chrono>
#include <cstdint>

namespace sheaf {

class Interp;

class ProgressBar {
 public:
  static constexpr int64_t kMinIterations = 100;
  // Active when bars are enabled for `in`, no other bar is active and total ≥ kMinIterations.
  ProgressBar(Interp& in, int64_t total);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void done(int64_t iterations);  // after each iteration
  // Erases the bar's line if it is drawn (before writing to stdout).
  static void before_output();

 private:
  using Clock = std::chrono::steady_clock;
  Interp& in_;
  int64_t total_;
  bool active_ = false;
  Clock::time_point start_, last_draw_;
};

}  // namespace sheaf
