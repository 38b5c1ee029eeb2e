// obs/profiler.cpp — call statistics, the --blame report, Chrome trace events (see profiler.hpp).
#include "obs/profiler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "obs/summary.hpp"

namespace sheaf::obs {
namespace {

constexpr size_t kMaxRows = 20;

std::string calls_str(uint64_t n) { return fmt::format("{} call{}", n, n == 1 ? "" : "s"); }

}  // namespace

std::string_view cat_name(Cat c) {
  switch (c) {
    case Cat::Function: return "function";
    case Cat::Builtin: return "builtin";
    case Cat::Compiled: return "compiled";
    case Cat::Compile: return "compile";
  }
  return "";
}

Profiler::Profiler(Clock::time_point start, bool keep_events) : start_(start), keep_events_(keep_events) {}

void Profiler::enter(const std::string& name, Cat cat, Clock::time_point t0) {
  int parent = open_.empty() ? 0 : open_.back().node;
  int node = -1;
  for (int c : tree_[static_cast<size_t>(parent)].children)
    if (tree_[static_cast<size_t>(c)].name == name) node = c;
  if (node < 0) {
    node = static_cast<int>(tree_.size());
    tree_.push_back(TreeNode{name});
    tree_[static_cast<size_t>(parent)].children.push_back(node);
  }
  ++fns_[name].active;
  open_.push_back(Open{node, name, cat, t0});
}

void Profiler::leave(Clock::time_point t1) {
  Open o = std::move(open_.back());
  open_.pop_back();
  double dur = std::chrono::duration<double>(t1 - o.t0).count();
  FnStat& s = fns_[o.name];
  ++s.calls;
  s.self += std::max(0.0, dur - o.child);
  if (--s.active == 0) s.total += dur;
  TreeNode& n = tree_[static_cast<size_t>(o.node)];
  ++n.calls;
  n.total += dur;
  if (!open_.empty()) open_.back().child += dur;
  if (keep_events_) {
    if (events_.size() < kMaxEvents)
      events_.push_back(Event{std::move(o.name), o.cat, std::chrono::duration<double, std::micro>(o.t0 - start_).count(), dur * 1e6});
    else
      ++dropped_;
  }
}

void Profiler::compiled_run(double seconds) {
  if (open_.empty()) return;
  open_.back().cat = Cat::Compiled;
  FnStat& s = fns_[open_.back().name];
  ++s.compiled_calls;
  s.run += seconds;
}

void Profiler::tree_lines(int node, const std::string& prefix, double wall, std::string& out) const {
  std::vector<int> kids = tree_[static_cast<size_t>(node)].children;
  std::sort(kids.begin(), kids.end(), [&](int a, int b) { return tree_[static_cast<size_t>(a)].total > tree_[static_cast<size_t>(b)].total; });
  std::vector<int> shown;
  uint64_t other_calls = 0;
  double other_time = 0;
  size_t others = 0;
  for (int k : kids) {
    const TreeNode& n = tree_[static_cast<size_t>(k)];
    if (n.total >= 0.01 * wall) {
      shown.push_back(k);
    } else {
      ++others;
      other_calls += n.calls;
      other_time += n.total;
    }
  }
  for (size_t i = 0; i < shown.size(); ++i) {
    const TreeNode& n = tree_[static_cast<size_t>(shown[i])];
    bool last = i + 1 == shown.size() && others == 0;
    out += fmt::format("{}{} {} ({}, {})\n", prefix, last ? "└──" : "├──", n.name, elapsed_str(n.total), calls_str(n.calls));
    tree_lines(shown[i], prefix + (last ? "    " : "│   "), wall, out);
  }
  if (others)
    out += fmt::format("{}└── ... {} other{} ({}, {})\n", prefix, others, others == 1 ? "" : "s", elapsed_str(other_time), calls_str(other_calls));
}

std::string Profiler::report(double wall) const {
  std::string out = fmt::format("Profiler: {} wall\n\n", elapsed_str(wall));
  out += fmt::format("  {:<32}{:>7}{:>11}{:>11}{:>11}\n", "Function", "Calls", "Total", "Self", "Avg/call");
  out += "  " + std::string(72, '-') + "\n";
  std::vector<std::pair<std::string, FnStat>> rows(fns_.begin(), fns_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.self != b.second.self ? a.second.self > b.second.self : a.first < b.first; });
  uint64_t other_calls = 0;
  double other_self = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [name, s] = rows[i];
    if (s.calls == 0) continue;
    if (i < kMaxRows) {
      out += fmt::format("  {:<32}{:>7}{:>11}{:>11}{:>11}\n", name, s.calls, elapsed_str(s.total), elapsed_str(s.self),
                         elapsed_str(s.total / static_cast<double>(s.calls)));
    } else {
      other_calls += s.calls;
      other_self += s.self;
    }
  }
  if (rows.size() > kMaxRows)
    out += fmt::format("  {:<32}{:>7}{:>11}{:>11}\n", fmt::format("... {} others", rows.size() - kMaxRows), other_calls, "",
                       elapsed_str(other_self));
  std::vector<std::pair<std::string, FnStat>> compiled;
  for (const auto& r : rows)
    if (r.second.compiled_calls) compiled.push_back(r);
  if (!compiled.empty()) {
    out += fmt::format("\n  {:<32}{:>7}{:>11}{:>11}{:>11}\n", "Compiled function", "Calls", "Compile", "Run", "Run/call");
    out += "  " + std::string(72, '-') + "\n";
    std::sort(compiled.begin(), compiled.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [name, s] : compiled) {
      auto c = fns_.find("<compile " + name + ">");
      double compile = c == fns_.end() ? 0 : c->second.total;
      out += fmt::format("  {:<32}{:>7}{:>11}{:>11}{:>11}\n", name, s.compiled_calls, elapsed_str(compile), elapsed_str(s.run),
                         elapsed_str(s.run / static_cast<double>(s.compiled_calls)));
    }
  }
  out += "\n  Call tree:\n\n";
  tree_lines(0, "  ", wall, out);
  return out;
}

std::string Profiler::chrome_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_)
    events.push_back({{"name", e.name}, {"cat", cat_name(e.cat)}, {"ph", "X"}, {"ts", e.ts_us}, {"dur", e.dur_us}, {"pid", 1}, {"tid", 1}});
  nlohmann::json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  if (dropped_) doc["metadata"] = {{"dropped_events", dropped_}};
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace sheaf::obs
