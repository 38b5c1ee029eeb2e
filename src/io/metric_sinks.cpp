// io/metric_sinks.cpp — metric sinks: parsing and writing one row to each (see metric_sinks.hpp).
#include "io/metric_sinks.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "base/error.hpp"
#include "io/tensorboard.hpp"

namespace sheaf {
namespace {

constexpr std::string_view kTb = "tb:";

bool ends_with_ci(std::string_view s, std::string_view ext) {
  if (s.size() <= ext.size()) return false;
  for (size_t i = 0; i < ext.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[s.size() - ext.size() + i])) != ext[i]) return false;
  return true;
}

}  // namespace

void check_metric_sink(const std::string& sink) {
  if (sink.starts_with(kTb) ? sink.size() > kTb.size() : ends_with_ci(sink, ".jsonl") || ends_with_ci(sink, ".csv")) return;
  throw SheafError(fmt::format("metrics sink '{}': expected FILE.jsonl, FILE.csv or tb:DIR (TensorBoard)", sink));
}

std::vector<std::string> parse_metric_sinks(std::string_view list) {
  std::vector<std::string> sinks;
  for (size_t start = 0; start <= list.size();) {
    size_t end = std::min(list.find(',', start), list.size());
    std::string sink(list.substr(start, end - start));
    if (!sink.empty()) {
      check_metric_sink(sink);
      sinks.push_back(sink);
    }
    start = end + 1;
  }
  return sinks;
}

void write_metrics(const std::vector<std::string>& sinks, int64_t step, const Row& metrics) {
  for (const std::string& sink : sinks) {
    if (sink.starts_with(kTb)) {
      tensorboard_write(sink.substr(kTb.size()), step, metrics);
      continue;
    }
    Row row{{"step", Value::integer(step)}};
    row.insert(row.end(), metrics.begin(), metrics.end());
    append_row(sink, row);
  }
}

}  // namespace sheaf
