// plot/render.hpp — drawing curves with cairo (plot/cairo_lib.hpp) for `sheaf plot`.
// Layout: a title line (the log's name), then one panel per group of series of similar
// magnitude (the largest |y| of each series in a panel within a factor of 20 of the others, so
// loss and val share a panel and a learning rate gets its own), stacked with a shared x axis.
// Each panel: a legend above its plot area, grid lines and labels at "nice" ticks (1, 2 or 5
// times a power of ten), the axis limits rounded out to ticks. Curves join a series' points in
// row order, with a dot at each point when a series has at most 60. 900 px wide.
#pragma once
#include <string>
#include <vector>

namespace sheaf {

struct Series {
  std::string name;
  std::vector<double> x, y;  // finite points only
};

struct PlotSpec {
  std::string title, x_label;
  std::vector<Series> series;  // at least one, each with at least one point
};

// A .png or .svg (by the extension), written atomically; errors name the file.
void render_plot(const PlotSpec& spec, const std::string& out_path);

}  // namespace sheaf
