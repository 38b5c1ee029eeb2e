// io/metric_sinks.hpp — where `(log-metrics step {...})` writes (SPEC §10.1): a sink is
// "FILE.jsonl" or "FILE.csv" (a row {step, k...} appended per call, io/append.hpp) or "tb:DIR"
// (TensorBoard scalars at that step, io/tensorboard.hpp). The sinks come from `--metrics`
// (a comma-separated list) or `(log-metrics-to ...)`.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "io/append.hpp"

namespace sheaf {

// "run.jsonl,tb:runs/a" → {"run.jsonl", "tb:runs/a"}; an empty list is no sink. A malformed
// sink is an error naming it and the accepted forms.
std::vector<std::string> parse_metric_sinks(std::string_view list);
void check_metric_sink(const std::string& sink);

// One row to every sink: `metrics` holds host numbers (rank-0 tensors already read).
void write_metrics(const std::vector<std::string>& sinks, int64_t step, const Row& metrics);

}  // namespace sheaf
