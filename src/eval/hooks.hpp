// eval/hooks.hpp — what the evaluator reaches in the layers above it (dependency inversion).
// trace, obs, autodiff, runtime and builtins all call the evaluator; the few calls going the
// other way go through `eval_hooks`, filled once at start-up by sheaf::init_runtime()
// (builtins/init_runtime.hpp), which every entry point calls before its first Interp:
//   builtins  the builtin families (builtins/registry.cpp)
//   trace     the tracing state and the traced forms of if, and/or, while, repeat, loop
//   runtime   the JIT: a CallCompiler made for each Interp (runtime/jit.hpp)
//   obs       the observability session: a CallObserver (obs/session.hpp), and the guard form
//   autodiff  the value-and-grad form
// Special forms that exist to reach an upper layer keep their row in eval's table (the order of
// `:help` and the docs) and get their handler from that layer (define_special_form).
// An Interp built before the hooks are installed is a logic error.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>

#include "value/function.hpp"

namespace sheaf {

class Interp;
struct ListObj;

// A named family of builtins (its rows feed dispatch, `:help`, completion and docs/reference.md).
struct BuiltinFamily {
  std::string_view name;  // "linear algebra"
  std::span<const BuiltinDef> defs;
};

// An error that carries its complete report (a guard breach, SPEC §9.2): the evaluator lets it
// through as it is instead of wrapping it as a foreign error.
struct ReportedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs calls of user functions as compiled code (runtime/jit.hpp).
class CallCompiler {
 public:
  virtual ~CallCompiler() = default;
  // The call's result from compiled code; nullopt when it runs interpreted.
  virtual std::optional<Value> call(Interp& in, const Value& fn, std::span<const Value> args, SrcLoc site) = 0;
  // A global was redefined: compiled code may have read the old value.
  virtual void forget_compiled() = 0;
};

// Observes calls and let-bound locals (obs/session.hpp). The interpreter holds one only while
// some observation is on (a call otherwise costs one pointer test).
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  // A call of builtin or function `f` starts; may throw (an argument breaches a guard).
  virtual void begin_call(const Value& f, std::span<const Value> args) = 0;
  // It returned r: r, or a throw (the result breaches).
  virtual Value end_call(Value r) = 0;
  // It ended by an exception.
  virtual void abandon_call() = 0;
  // The innermost call must run interpreted (its inside is traced).
  virtual bool wants_interior() const = 0;
  // `let` bound the locals of `frame`: bound_locals runs only when checks_locals().
  virtual bool checks_locals() const = 0;
  virtual void bound_locals(const Env& frame) = 0;
  // Keep the recent calls for guard backtraces (a program with guard forms).
  virtual void keep_backtrace() = 0;
  virtual bool keeps_backtrace() const = 0;

  // One observed call: begin_call on construction, end_call by leave(r), abandon_call when the
  // scope is left otherwise.
  class Call {
   public:
    Call(CallObserver& o, const Value& f, std::span<const Value> args) : o_(o) {
      o_.begin_call(f, args);
      open_ = true;
    }
    ~Call() {
      if (open_) o_.abandon_call();
    }
    Value leave(Value r) {
      r = o_.end_call(std::move(r));
      open_ = false;
      return r;
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    CallObserver& o_;
    bool open_ = false;
  };
};

// The trace layer as the evaluator sees it (trace/tracer.hpp documents each function).
struct TraceHooks {
  bool (*tracing)() = nullptr;
  bool (*output_effects_muted)() = nullptr;
  void (*set_site)(SrcLoc loc) = nullptr;
  bool (*in_loop_trace)() = nullptr;
  // Runs the body of a `loop` being traced (a trace::LoopScope alive around it).
  Value (*in_loop_body)(const std::function<Value()>& body) = nullptr;
  Value (*merge_branches)(const Tensor& cond, const Value& then_v, const Value& else_v) = nullptr;
  Value (*merge_loop_exits)(const Tensor& cond, const Value& then_v, const Value& else_v) = nullptr;
  Value (*trace_while)(const Value& init, const std::function<Value(const Value&)>& cond,
                       const std::function<Value(const Value&)>& body, int64_t trip_count) = nullptr;
  Value (*trace_loop)(const Value& vals, const std::function<Value(const Value&)>& body) = nullptr;
  // For obs/guards.cpp, which sits below trace as well.
  void (*record_guard)(const Tensor& passed) = nullptr;
};

struct EvalHooks {
  std::span<const BuiltinFamily> builtins;
  TraceHooks trace;
  std::unique_ptr<CallCompiler> (*make_compiler)() = nullptr;
  std::unique_ptr<CallObserver> (*make_observer)() = nullptr;  // everything off: Interp::observer()
};
inline constinit EvalHooks eval_hooks;  // constant-initialized: installable from any static initializer

// Installs the handler of the special form `name`, whose row eval's table has without one.
using SpecialFormFn = Value (*)(Interp&, const ListObj& form, const EnvPtr& env);
void define_special_form(std::string_view name, SpecialFormFn fn);

// Throws std::logic_error naming what is missing when init_runtime() has not filled the hooks.
void check_hooks_installed();

// The families in table order, and all their builtins in that order.
inline std::span<const BuiltinFamily> builtin_families() { return eval_hooks.builtins; }
const std::vector<const BuiltinDef*>& builtin_table();

}  // namespace sheaf
