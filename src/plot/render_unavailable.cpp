// plot/render_unavailable.cpp — render_plot (plot/render.hpp) of a build made without cairo's
// header: CMakeLists.txt compiles this file instead of render.cpp and cairo_lib.cpp then (e.g.
// after `make demo`, which installs only what the demo needs). `sheaf plot` still reads and
// checks the log, then says what to install.
#include <fmt/format.h>

#include "base/error.hpp"
#include "plot/render.hpp"

namespace sheaf {

void render_plot(const PlotSpec&, const std::string& out_path) {
  throw SheafError(fmt::format("cannot draw '{}': this sheaf was built without cairo's header; install libcairo2-dev "
                               "(scripts/bootstrap.sh does) and rebuild with `make build`",
                               out_path));
}

}  // namespace sheaf
