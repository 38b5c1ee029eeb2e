// plot/render.cpp — panels, ticks, curves and legends drawn with cairo (see render.hpp).
#include "plot/render.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/atomic_write.hpp"
#include "plot/cairo_lib.hpp"

namespace sheaf {
namespace {

// Pixel layout.
constexpr double kWidth = 900, kLeft = 80, kRight = 30, kTitle = 34, kLegend = 26, kArea = 230, kTicks = 30,
                 kXLabel = 30;
constexpr double kGroupRatio = 20;  // series whose largest |y| are within this factor share a panel
constexpr size_t kMaxDots = 60;

struct Rgb {
  double r, g, b;
};
// Matplotlib's "tab10" without its grey: distinct hues that stay apart from the grey axes.
constexpr Rgb kColours[] = {{0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173},
                            {0.839, 0.153, 0.157}, {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294},
                            {0.890, 0.467, 0.761}, {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};

struct Axis {
  double lo, hi, step;
  double frac(double v) const { return (v - lo) / (hi - lo); }
};

// Limits rounded out to multiples of a step of 1, 2 or 5 times a power of ten (about 5 steps).
Axis nice_axis(double lo, double hi) {
  if (!(hi > lo)) {
    double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / 5, mag = std::pow(10.0, std::floor(std::log10(raw))), norm = raw / mag;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

std::string tick_label(double v, const Axis& a) {
  if (std::fabs(v) < a.step * 1e-6) v = 0;
  double big = std::max(std::fabs(a.lo), std::fabs(a.hi));
  if (big >= 1e6 || a.step < 1e-4) return fmt::format("{:g}", v);
  int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(a.step) + 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}

double largest_abs(const Series& s) {
  double m = 0;
  for (double y : s.y) m = std::max(m, std::fabs(y));
  return m;
}

// Indices of the series of each panel, panels in the order of their first series.
std::vector<std::vector<size_t>> panels(const std::vector<Series>& series) {
  std::vector<size_t> order(series.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return largest_abs(series[a]) > largest_abs(series[b]); });
  std::vector<std::vector<size_t>> groups;
  double top = 0;
  for (size_t i : order) {
    double m = largest_abs(series[i]);
    if (groups.empty() || m * kGroupRatio < top) {
      groups.emplace_back();
      top = m;
    }
    groups.back().push_back(i);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

class Canvas {
 public:
  Canvas(const Cairo& c, cairo_t* cr) : c_(c), cr_(cr) {}
  void colour(Rgb k) { c_.cairo_set_source_rgb(cr_, k.r, k.g, k.b); }
  void grey(double v) { c_.cairo_set_source_rgb(cr_, v, v, v); }
  void line(double x0, double y0, double x1, double y1, double width) {
    c_.cairo_set_line_width(cr_, width);
    c_.cairo_move_to(cr_, x0, y0);
    c_.cairo_line_to(cr_, x1, y1);
    c_.cairo_stroke(cr_);
  }
  double text_width(const std::string& s) {
    cairo_text_extents_t e;
    c_.cairo_text_extents(cr_, s.c_str(), &e);
    return e.x_advance;
  }
  // `align`: 0 left, 0.5 centred, 1 right of x; y is the baseline.
  void text(const std::string& s, double x, double y, double align, double size = 12) {
    c_.cairo_set_font_size(cr_, size);
    c_.cairo_move_to(cr_, x - align * text_width(s), y);
    c_.cairo_show_text(cr_, s.c_str());
  }
  const Cairo& c_;
  cairo_t* cr_;
};

struct Area {
  double x, y, w, h;  // pixels: top-left corner and size
};

void draw_grid(Canvas& cv, const Area& a, const Axis& xa, const Axis& ya) {
  for (double v = ya.lo; v <= ya.hi + ya.step * 1e-6; v += ya.step) {
    double py = std::round(a.y + a.h - ya.frac(v) * a.h) + 0.5;
    cv.grey(0.9);
    cv.line(a.x, py, a.x + a.w, py, 1);
    cv.grey(0.2);
    cv.text(tick_label(v, ya), a.x - 8, py + 4, 1);
  }
  for (double v = xa.lo; v <= xa.hi + xa.step * 1e-6; v += xa.step) {
    double px = std::round(a.x + xa.frac(v) * a.w) + 0.5;
    cv.grey(0.9);
    cv.line(px, a.y, px, a.y + a.h, 1);
    cv.grey(0.2);
    cv.text(tick_label(v, xa), px, a.y + a.h + 18, 0.5);
  }
  cv.grey(0.3);
  cv.c_.cairo_set_line_width(cv.cr_, 1);
  cv.c_.cairo_rectangle(cv.cr_, std::round(a.x) + 0.5, std::round(a.y) + 0.5, std::round(a.w), std::round(a.h));
  cv.c_.cairo_stroke(cv.cr_);
}

void draw_series(Canvas& cv, const Area& a, const Axis& xa, const Axis& ya, const Series& s, Rgb colour) {
  const Cairo& c = cv.c_;
  c.cairo_save(cv.cr_);
  c.cairo_rectangle(cv.cr_, a.x, a.y, a.w, a.h);
  c.cairo_clip(cv.cr_);
  cv.colour(colour);
  auto px = [&](size_t i) { return a.x + xa.frac(s.x[i]) * a.w; };
  auto py = [&](size_t i) { return a.y + a.h - ya.frac(s.y[i]) * a.h; };
  c.cairo_new_path(cv.cr_);
  for (size_t i = 0; i < s.x.size(); ++i) (i == 0 ? c.cairo_move_to : c.cairo_line_to)(cv.cr_, px(i), py(i));
  c.cairo_set_line_width(cv.cr_, 1.8);
  c.cairo_set_line_join(cv.cr_, CAIRO_LINE_JOIN_ROUND);
  c.cairo_stroke(cv.cr_);
  if (s.x.size() <= kMaxDots) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      c.cairo_new_sub_path(cv.cr_);
      c.cairo_arc(cv.cr_, px(i), py(i), 2.8, 0, 2 * M_PI);
    }
    c.cairo_fill(cv.cr_);
  }
  c.cairo_restore(cv.cr_);
}

void draw_legend(Canvas& cv, const Area& a, const std::vector<Series>& series, const std::vector<size_t>& group) {
  double x = a.x, y = a.y - 10;
  for (size_t i : group) {
    cv.colour(kColours[i % std::size(kColours)]);
    cv.line(x, y - 4, x + 22, y - 4, 2.5);
    cv.grey(0.15);
    cv.text(series[i].name, x + 28, y, 0);
    x += 28 + cv.text_width(series[i].name) + 24;
  }
}

void draw(const Cairo& c, cairo_t* cr, const PlotSpec& spec, double height) {
  Canvas cv(c, cr);
  c.cairo_set_source_rgb(cr, 1, 1, 1);
  c.cairo_paint(cr);
  c.cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cv.grey(0.1);
  cv.text(spec.title, kLeft, 22, 0, 14);
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  for (const Series& s : spec.series)
    for (double x : s.x) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
  Axis xa = nice_axis(xmin, xmax);
  double top = kTitle;
  for (const std::vector<size_t>& group : panels(spec.series)) {
    double ymin = std::numeric_limits<double>::infinity(), ymax = -ymin;
    for (size_t i : group)
      for (double y : spec.series[i].y) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
    Axis ya = nice_axis(ymin, ymax);
    Area a{kLeft, top + kLegend, kWidth - kLeft - kRight, kArea};
    draw_grid(cv, a, xa, ya);
    for (size_t i : group) draw_series(cv, a, xa, ya, spec.series[i], kColours[i % std::size(kColours)]);
    draw_legend(cv, a, spec.series, group);
    top += kLegend + kArea + kTicks;
  }
  cv.grey(0.1);
  cv.text(spec.x_label, kLeft + (kWidth - kLeft - kRight) / 2, height - 10, 0.5, 13);
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int n) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), n);
  return CAIRO_STATUS_SUCCESS;
}

}  // namespace

void render_plot(const PlotSpec& spec, const std::string& out_path) {
  std::string ext = out_path.size() >= 4 ? out_path.substr(out_path.size() - 4) : "";
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext != ".png" && ext != ".svg")
    throw SheafError(fmt::format("'{}': sheaf plot writes .png or .svg files", out_path));
  const Cairo& c = cairo();
  double height = kTitle + static_cast<double>(panels(spec.series).size()) * (kLegend + kArea + kTicks) + kXLabel;
  std::string bytes;
  cairo_surface_t* surface =
      ext == ".svg" ? c.cairo_svg_surface_create_for_stream(append_bytes, &bytes, kWidth, height)
                    : c.cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(kWidth), static_cast<int>(height));
  cairo_t* cr = c.cairo_create(surface);
  draw(c, cr, spec, height);
  cairo_status_t status = c.cairo_status(cr);
  c.cairo_destroy(cr);
  if (status == CAIRO_STATUS_SUCCESS && ext == ".png") status = c.cairo_surface_write_to_png_stream(surface, append_bytes, &bytes);
  c.cairo_surface_finish(surface);  // an SVG surface writes its document here
  if (status == CAIRO_STATUS_SUCCESS) status = c.cairo_surface_status(surface);
  c.cairo_surface_destroy(surface);
  if (status != CAIRO_STATUS_SUCCESS) throw SheafError(fmt::format("'{}': cairo: {}", out_path, c.cairo_status_to_string(status)));
  write_file_atomic(out_path, bytes);
}

}  // namespace sheaf
