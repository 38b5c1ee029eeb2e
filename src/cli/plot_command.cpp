// cli/plot_command.cpp — `sheaf plot` (see plot_command.hpp). x defaults to the `step` column, or
// the row number when the log has none; y defaults to every numeric column but x. A series keeps
// the rows where both its x and y are finite numbers (a value logged every 100 steps is a curve
// through those steps). The output defaults to the log's name with .png.
#include "cli/plot_command.hpp"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "base/error.hpp"
#include "plot/render.hpp"
#include "plot/table.hpp"

namespace sheaf {
namespace {

struct PlotArgs {
  std::string file, out, x, y;
};

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    size_t end = std::min(list.find(',', start), list.size());
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

const Column& named_column(const Table& t, const std::string& name, const std::string& file, std::string_view flag) {
  if (const Column* c = t.find(name)) {
    if (!c->numeric) throw SheafError(fmt::format("'{}': column '{}' holds text, not numbers", file, name));
    return *c;
  }
  std::vector<std::string> names;
  std::string list;
  for (const Column& c : t.columns) {
    names.push_back(c.name);
    list += (list.empty() ? "" : ", ") + c.name;
  }
  SheafError e(fmt::format("'{}' has no column '{}' (columns: {}); choose with {}", file, name, list, flag));
  if (auto near = suggest_names(name, names); !near.empty()) e.hint = fmt::format("did you mean '{}'?", near[0]);
  throw e;
}

PlotSpec plot_spec(const PlotArgs& args) {
  Table t = read_table(args.file);
  PlotSpec spec{std::filesystem::path(args.file).filename().string(), args.x.empty() ? "step" : args.x, {}};
  std::vector<double> row_numbers(t.rows);
  for (size_t i = 0; i < t.rows; ++i) row_numbers[i] = static_cast<double>(i + 1);
  const std::vector<double>* xs = &row_numbers;
  if (!args.x.empty() || t.find("step")) xs = &named_column(t, spec.x_label, args.file, "--x").values;
  else spec.x_label = "row";
  std::vector<std::string> ys = split_names(args.y);
  if (ys.empty())
    for (const Column& c : t.columns)
      if (c.numeric && c.name != spec.x_label) ys.push_back(c.name);
  for (const std::string& name : ys) {
    const Column& c = named_column(t, name, args.file, "--y");
    Series s{name, {}, {}};
    for (size_t i = 0; i < t.rows; ++i)
      if (std::isfinite((*xs)[i]) && std::isfinite(c.values[i])) {
        s.x.push_back((*xs)[i]);
        s.y.push_back(c.values[i]);
      }
    if (s.x.empty() && !args.y.empty())
      throw SheafError(fmt::format("'{}': column '{}' has no numbers to plot against {}", args.file, name, spec.x_label));
    if (!s.x.empty()) spec.series.push_back(std::move(s));
  }
  if (spec.series.empty()) throw SheafError(fmt::format("'{}': no numeric column to plot against {}", args.file, spec.x_label));
  return spec;
}

}  // namespace

int plot_main(int argc, char** argv) {
  PlotArgs args;
  CLI::App app{"Draw the columns of a metrics log (.jsonl or .csv) against the step, as a PNG or SVG.", "sheaf plot"};
  app.add_option("file", args.file, "Metrics log: JSON lines or CSV with a header (io \"append\", log-metrics)")->required();
  app.add_option("-o,--out", args.out, "Output image, .png or .svg (default: the log's name with .png)")->type_name("OUT");
  app.add_option("--x", args.x, "Column along the x axis (default: step, else the row number)")->type_name("COL");
  app.add_option("--y", args.y, "Columns to draw, comma-separated (default: every numeric column)")->type_name("A,B");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (args.out.empty()) args.out = std::filesystem::path(args.file).replace_extension(".png").string();
  try {
    PlotSpec spec = plot_spec(args);
    render_plot(spec, args.out);
    std::string names;
    for (const Series& s : spec.series) names += (names.empty() ? "" : ", ") + s.name;
    std::cout << fmt::format("wrote {}: {} against {}\n", args.out, names, spec.x_label);
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    if (!e.hint.empty()) std::cerr << "hint: " << e.hint << "\n";
    return 1;
  }
  return 0;
}

}  // namespace sheaf
