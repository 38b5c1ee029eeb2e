// eval/progress.cpp — the progress bar of long loops (see progress.hpp).
#include "eval/progress.hpp"

#include <fmt/format.h>

#include <cmath>
#include <iostream>

#include "base/notice.hpp"
#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

bool g_bar_active = false;   // one bar at a time: the outermost loop's

std::string field(const Value& v) {
  if (v.is(Kind::Float)) return fmt::format("{:.4f}", v.as_float());
  if (v.is(Kind::Tensor) && v.as_tensor().numel() == 1 && !v.as_tensor().is_symbolic())
    return fmt::format("{:.4f}", v.as_tensor().get(0));
  return print_value(v, true);
}

std::string clock_str(double s) {
  auto t = static_cast<int64_t>(s);
  return t >= 3600 ? fmt::format("{}:{:02d}:{:02d}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02d}", t / 60, t % 60);
}

}  // namespace

ProgressBar::ProgressBar(Interp& in, int64_t total) : in_(in), total_(total) {
  active_ = in.progress_bars && !g_bar_active && total >= kMinIterations;
  if (active_) {
    g_bar_active = true;
    start_ = last_draw_ = Clock::now();
  }
}

ProgressBar::~ProgressBar() {
  if (!active_) return;
  before_output();
  g_bar_active = false;
}

void ProgressBar::done(int64_t i) {
  if (!active_) return;
  auto now = Clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  if (elapsed < 1.0 || now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * i / std::max<int64_t>(total_, 1));
  double rate = static_cast<double>(i) / elapsed;
  std::string line = fmt::format("{:>{}}/{} [{}{}] {:.1f} it/s  ETA {}", i, fmt::formatted_size("{}", total_), total_,
                                 std::string(static_cast<size_t>(filled), '#'), std::string(static_cast<size_t>(kWidth - filled), '.'),
                                 rate, clock_str(rate > 0 ? static_cast<double>(total_ - i) / rate : 0));
  if (in_.progress_fields.is(Kind::Dict))
    for (const auto& [k, v] : in_.progress_fields.as_dict().entries) line += fmt::format(" | {} {}", k, field(v));
  std::cout.flush();
  std::cerr << "\r\033[K" << line << std::flush;
  set_status_line_drawn(true);
}

void ProgressBar::before_output() { clear_status_line(); }

}  // namespace sheaf
