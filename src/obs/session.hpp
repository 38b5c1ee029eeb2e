// obs/session.hpp — runtime observability of one program run (SPEC §9): the call tracer
// (--trace), guards (--guard and guard forms), the profiler (--blame, --profile-out).
// The interpreter holds a Session, as its CallObserver (eval/hooks.hpp), only when one of them is
// on (null otherwise: a call then costs one pointer test) and reports every call of a builtin,
// user function or lambda through a CallObserver::Call scope:
//   enter   trace line `├─ [name] args` (console or sheaf_trace.jsonl), the same event into the
//           ring buffer of the last 100 lines kept for guard backtraces, argument guards, profiler
//   leave   result guards, `└─ ← result (elapsed)`, profiler
// Compiled functions are one call (the JIT reports the run and any compilation, `<compile f>`);
// `--trace f` shows f's inside, so f and what it calls run interpreted (wants_interior).
// While the JIT traces a function (symbolic values) only guards that name functions or targets
// are checked, by recording flags into the trace (obs/guards.hpp); the rest is not observed.
// A breach throws GuardBreach with the report of SPEC §9.2.
#pragma once
#include <deque>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "obs/guards.hpp"
#include "obs/profiler.hpp"
#include "obs/summary.hpp"
#include "value/function.hpp"

namespace sheaf {
class Interp;
namespace ir {
struct Graph;
}
}  // namespace sheaf

namespace sheaf::obs {

struct Options {
  bool trace = false;
  std::vector<std::string> trace_fns;  // empty: every call
  bool trace_json = false;             // JSON lines in sheaf_trace.jsonl instead of console lines
  Level level = Level::Normal;
  std::vector<GuardSpec> guards;
  bool blame = false;
  std::string profile_out;  // Chrome trace-event JSON written at exit
  bool color = false;
};

class Session final : public CallObserver {
 public:
  static constexpr size_t kRingSize = 100;
  Session(Options o, std::ostream& err);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const Options& options() const { return o_; }

  // One observed call: begin_call may throw GuardBreach (an argument breaches); end_call(r)
  // returns r or throws (the result breaches); a call left by an exception unwinds quietly.
  void begin_call(const Value& f, std::span<const Value> args) override;
  Value end_call(Value r) override { return leave(std::move(r)); }
  void abandon_call() override { unwind(); }

  // The innermost call is traced inside (--trace f): it must run interpreted.
  bool wants_interior() const override { return !frames_.empty() && frames_.back().interior; }
  // The JIT ran the innermost call as compiled code: `graph` on `inputs` took `seconds`.
  void compiled_run(std::shared_ptr<const ir::Graph> graph, std::span<const Tensor> inputs, double seconds);
  // Compilation of `fn` (tracing, passes, native build), shown as `<compile fn>`.
  void compile_begin(const std::string& fn);
  void compile_end();

  // `let` bound the locals of `frame`: guards whose target names one of them.
  bool checks_locals() const override { return checks_locals_; }
  void bound_locals(const Env& frame) override;
  // A (guard :check e) form evaluated to v.
  void guard_form(const GuardCheck& c, const Value& v, SrcLoc loc);
  // REPL `:trace`: trace every later call at `level`, or stop tracing.
  void set_trace(bool on, Level level);
  // Keep the ring buffer of recent calls for guard backtraces (on with --guard; guard forms
  // turn it on when the program has them).
  void keep_backtrace() override;
  bool keeps_backtrace() const override { return ring_on_; }
  // Text that must key compiled code because guards change it (their specs).
  std::string compile_key() const;

  // Writes the blame report and the trace/profile files (once; also run by the destructor).
  // False when a file could not be written (reported on the error stream).
  bool finish();

 private:
  struct Frame {
    std::string name;
    const FnObj* fn = nullptr;  // user functions: parameter names
    bool symbolic = false;      // entered while the JIT traces: guards only
    bool shown = false;         // printed by --trace
    bool interior = false;      // inside a function named by --trace f
    bool compiled = false;
    int shown_depth = 0;
    Clock::time_point t0;
    std::shared_ptr<const ir::Graph> graph;  // compiled: what ran, for the first-NaN search
    std::vector<Tensor> inputs;
  };
  struct Line {  // a trace line, formatted when printed (its values are kept alive)
    bool is_return;
    int shown_depth;  // depth printed by --trace; -1: not shown (ring buffer only)
    int depth;        // depth in the ring buffer (every observed call)
    std::string name;
    std::vector<Value> values;
    double elapsed;
    bool compiled;
  };

  Options o_;
  std::ostream& err_;
  Clock::time_point start_;
  std::vector<Frame> frames_;
  std::deque<Line> ring_;
  bool ring_on_ = false;
  bool checks_locals_ = false;
  std::optional<Profiler> profiler_;
  std::string trace_path_, trace_tmp_;
  std::ofstream trace_file_;
  bool finished_ = false;

  void enter(const Value& f, std::span<const Value> args);
  void check_arguments(std::span<const Value> args);
  static bool checks(const GuardSpec& g, const Frame& fr);
  Value leave(Value r);
  void unwind();
  void emit(Line line);
  std::string format(const Line& l, int depth) const;
  void check(const GuardCheck& c, const Value& v, const std::string& what, const std::string& origin);
  [[noreturn]] void breach(const GuardCheck& c, const std::string& message, const std::string& what, const std::string& origin);
  std::string function_name() const;  // innermost user function ("<toplevel>" outside any)
};

// The session of an interpreter (the only CallObserver there is); null when none is on.
Session* session_of(const Interp& in);
// The session, created with everything off when there is none (Interp::observer).
Session& session(Interp& in);

// Installs the session factory and the `guard` special form into the evaluator (init_runtime).
void install_eval_hooks();

}  // namespace sheaf::obs
