// builtins/metrics.cpp — metrics logs (SPEC §10.1): (log-metrics step {:k v ...}) writes one row
// to the sinks of `--metrics` or `(log-metrics-to sink ...)` (io/metric_sinks.hpp; --metrics,
// when given, wins); (tensorboard dir step {:k v ...}) writes TensorBoard records directly
// (io/tensorboard.hpp), scalars and histograms of tensors. Errors from src/io name the file and
// are prefixed here with the builtin's name.
#include "builtins/registry.hpp"
#include "builtins/scalar.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "io/metric_sinks.hpp"
#include "io/tensorboard.hpp"
#include "tensor/shape.hpp"

namespace sheaf {
namespace {

// Runs f; a SheafError from it is reported as "<builtin>: <message>" at the call site.
template <typename F>
Value prefixed(const CallArgs& a, F&& f) {
  try {
    f();
    return Value();
  } catch (SheafError& e) {
    SheafError wrapped(fmt::format("{}: {}", a.name, e.what()), e.loc.valid() ? e.loc : a.site, e.hint);
    wrapped.notes = e.notes;
    throw wrapped;
  }
}

const DictObj& arg_dict(const CallArgs& a, size_t i) {
  if (!a[i].is(Kind::Dict)) type_error(a, i, "a dict of metrics such as {:loss l}");
  return a[i].as_dict();
}

// (log-metrics step {:k v ...}): host numbers and rank-0 tensors, read to the host once, or nil
// for a value not measured at this step (rows keep the same keys, as CSV needs).
Value b_log_metrics(Interp& in, const CallArgs& a) {
  int64_t step = arg_int(a, 0);
  const DictObj& d = arg_dict(a, 1);
  if (in.metric_sinks.empty()) return Value();
  Row row;
  for (const auto& [k, v] : d.entries) {
    if (k == "step") throw SheafError("log-metrics: the metrics hold :step, which is the first argument", a.site);
    if (v.is_nil()) {  // not measured at this step: null in JSONL, empty in CSV, absent in TensorBoard
      row.emplace_back(k, v);
      continue;
    }
    std::optional<Num> n = to_num(v);
    if (!n) {
      std::string what = v.is(Kind::Tensor) ? fmt::format("a {} tensor", type_str(v.as_tensor())) : fmt::format("a {}", kind_name(v.kind()));
      throw SheafError(fmt::format("log-metrics: the value of :{} is {}; metrics are numbers, rank-0 tensors or nil", k, what), a.site);
    }
    row.emplace_back(k, n->value());
  }
  return prefixed(a, [&] { write_metrics(in.metric_sinks, step, row); });
}

// (log-metrics-to sink ...): the sinks of later log-metrics calls; none turns logging off.
Value b_log_metrics_to(Interp& in, const CallArgs& a) {
  std::vector<std::string> sinks;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is(Kind::Str)) type_error(a, i, "a sink string (\"run.jsonl\", \"run.csv\" or \"tb:DIR\")");
    prefixed(a, [&] { check_metric_sink(a[i].as_str()); });
    sinks.push_back(a[i].as_str());
  }
  if (!in.metric_sinks_from_cli) in.metric_sinks = std::move(sinks);
  return Value();
}

Value b_tensorboard(Interp&, const CallArgs& a) {
  if (!a[0].is(Kind::Str)) type_error(a, 0, "a directory string");
  int64_t step = arg_int(a, 1);
  const DictObj& d = arg_dict(a, 2);
  return prefixed(a, [&] { tensorboard_write(a[0].as_str(), step, d.entries); });
}

const BuiltinDef kMetrics[] = {
    {"log-metrics", "(log-metrics step {:k v ...})",
     "Append one row (step and the values: numbers, rank-0 tensors, nil) to the --metrics / log-metrics-to sinks; returns nil.",
     b_log_metrics, 2, 2, true},
    {"log-metrics-to", "(log-metrics-to sink ...)",
     "Where log-metrics writes: \"FILE.jsonl\", \"FILE.csv\", \"tb:DIR\" (none: off); --metrics on the command line wins.",
     b_log_metrics_to, 0, -1, true},
    {"tensorboard", "(tensorboard dir step {:k v ...})",
     "Write TensorBoard records to run directory dir: scalars, and histograms of tensors of rank >= 1; returns nil.",
     b_tensorboard, 3, 3, true},
};

}  // namespace

std::span<const BuiltinDef> metrics_builtins() { return kMetrics; }

}  // namespace sheaf
