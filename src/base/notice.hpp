// base/notice.hpp — one-line notices of the runtime on stderr ("sheaf: <text>"), and the
// terminal's status line they must not write into. While the progress bar (eval/progress.cpp)
// is drawn, the cursor stays at the end of its line; a notice erases that line first, so it is
// printed above the bar, which is drawn again at its next update.
#pragma once
#include <string_view>

namespace sheaf {

void notice(std::string_view text);     // "sheaf: <text>\n" on stderr, never inside the bar's line
void set_status_line_drawn(bool drawn);  // the bar: its line is (not) on the terminal now
void clear_status_line();                // erases the status line if it is drawn

}  // namespace sheaf
