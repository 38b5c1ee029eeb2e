// obs/profiler.hpp — the `--blame` profiler and the Chrome trace-event export (SPEC §9.3, §9.4).
// Every observed call (user functions, lambdas, builtins, compiled calls and compilations, which
// appear as `<compile f>`) is one enter/leave pair. Per function: calls, inclusive time (a
// recursive function counts its outermost calls only), exclusive time; a call tree of inclusive
// times and call counts; compiled functions add their compile and run times. The export is one
// complete event per call ({"name","cat","ph":"X","ts","dur","pid":1,"tid":1}, microseconds),
// capped at kMaxEvents (the rest are counted in the metadata, not written).
#pragma once
#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

namespace sheaf::obs {

using Clock = std::chrono::steady_clock;

enum class Cat : uint8_t { Function, Builtin, Compiled, Compile };
std::string_view cat_name(Cat c);  // "function", "builtin", "compiled", "compile"

class Profiler {
 public:
  static constexpr size_t kMaxEvents = 1000000;
  Profiler(Clock::time_point start, bool keep_events);

  void enter(const std::string& name, Cat cat, Clock::time_point t0);
  void leave(Clock::time_point t1);
  // The innermost call ran as compiled code for `seconds` (its category becomes `compiled`).
  void compiled_run(double seconds);

  std::string report(double wall_seconds) const;  // the --blame text
  std::string chrome_json() const;                // {"traceEvents": [...]}

 private:
  struct FnStat {
    uint64_t calls = 0;
    double total = 0, self = 0;
    int active = 0;  // open calls (recursion)
    uint64_t compiled_calls = 0;
    double run = 0;  // compiled execution
  };
  struct TreeNode {
    std::string name;
    uint64_t calls = 0;
    double total = 0;
    std::vector<int> children;
  };
  struct Open {
    int node;
    std::string name;
    Cat cat;
    Clock::time_point t0;
    double child = 0;
  };
  struct Event {
    std::string name;
    Cat cat;
    double ts_us, dur_us;
  };
  Clock::time_point start_;
  bool keep_events_;
  std::unordered_map<std::string, FnStat> fns_;
  std::vector<TreeNode> tree_{TreeNode{"<root>"}};
  std::vector<Open> open_;
  std::vector<Event> events_;
  uint64_t dropped_ = 0;

  void tree_lines(int node, const std::string& prefix, double wall, std::string& out) const;
};

}  // namespace sheaf::obs
