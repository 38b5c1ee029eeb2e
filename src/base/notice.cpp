// base/notice.cpp — notices above the status line (see notice.hpp).
#include "base/notice.hpp"

#include <iostream>

namespace sheaf {
namespace {

bool g_drawn = false;  // the status line is on the terminal (stderr is one when it is drawn)

}  // namespace

void set_status_line_drawn(bool drawn) { g_drawn = drawn; }

void clear_status_line() {
  if (!g_drawn) return;
  std::cerr << "\r\033[K" << std::flush;
  g_drawn = false;
}

void notice(std::string_view text) {
  clear_status_line();
  std::cout.flush();
  std::cerr << "sheaf: " << text << '\n' << std::flush;
}

}  // namespace sheaf
