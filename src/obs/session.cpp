// obs/session.cpp — call observation: trace lines, guard checks and reports, profiling hooks
// (see session.hpp).
#include "obs/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "eval/interp.hpp"
#include "eval/typed_params.hpp"
#include "io/atomic_write.hpp"
#include "obs/nan_locator.hpp"

namespace sheaf::obs {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string call_name(const Value& f) {
  if (f.is(Kind::Builtin)) return std::string(f.as<BuiltinObj>().def->name);
  const std::string& n = f.as<FnObj>().name;
  return n.empty() ? "<lambda>" : n;
}

// The index of the parameter named `name` (a plain symbol or typed parameter), or -1.
int param_index(const FnObj& fn, const std::string& name) {
  for (size_t i = 0; i < fn.params.patterns.size(); ++i) {
    const Value& p = param_name(fn.params.patterns[i]);
    if (p.is(Kind::Symbol) && p.as_str() == name) return static_cast<int>(i);
  }
  return -1;
}

std::string indent(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "│ ";
  return s;
}

}  // namespace

Session::Session(Options o, std::ostream& err) : o_(std::move(o)), err_(err), start_(Clock::now()) {
  ring_on_ = !o_.guards.empty();
  for (const GuardSpec& g : o_.guards) checks_locals_ = checks_locals_ || g.target != "*";
  if (o_.blame || !o_.profile_out.empty()) profiler_.emplace(start_, !o_.profile_out.empty());
  if (o_.trace && o_.trace_json) {
    trace_path_ = "sheaf_trace.jsonl";
    trace_tmp_ = trace_path_ + ".tmp";
    trace_file_.open(trace_tmp_, std::ios::binary | std::ios::trunc);
    if (!trace_file_) throw SheafError("--trace-out json: cannot write " + std::filesystem::absolute(trace_tmp_).string());
  }
}

Session::~Session() { finish(); }

void Session::keep_backtrace() { ring_on_ = true; }

void Session::set_trace(bool on, Level level) {
  o_.trace = on;
  o_.trace_fns.clear();
  o_.level = level;
}

// Does guard g check the boundaries of frame fr? While tracing, only guards that name functions or
// targets do (unscoped * guards check a compiled call as a whole, at its boundary).
bool Session::checks(const GuardSpec& g, const Frame& fr) {
  return g.applies_to(fr.name) && !(fr.symbolic && g.scope.empty() && g.target == "*");
}

// ---- calls ------------------------------------------------------------------------------------

void Session::begin_call(const Value& f, std::span<const Value> args) {
  enter(f, args);
  try {
    check_arguments(args);  // may breach, or abort a trace
  } catch (...) {
    unwind();  // the caller's scope is not open yet
    throw;
  }
}

void Session::enter(const Value& f, std::span<const Value> args) {
  Frame fr;
  fr.name = call_name(f);
  fr.fn = f.is(Kind::Fn) ? &f.as<FnObj>() : nullptr;
  fr.symbolic = eval_hooks.trace.tracing();
  if (fr.symbolic) {
    frames_.push_back(std::move(fr));
    return;
  }
  const Frame* parent = nullptr;
  for (auto it = frames_.rbegin(); it != frames_.rend() && !parent; ++it)
    if (!it->symbolic) parent = &*it;
  bool named = std::find(o_.trace_fns.begin(), o_.trace_fns.end(), fr.name) != o_.trace_fns.end();
  fr.interior = o_.trace && !o_.trace_fns.empty() && (named || (parent && parent->interior));
  fr.shown = o_.trace && (o_.trace_fns.empty() || fr.interior);
  fr.shown_depth = parent ? parent->shown_depth + (parent->shown ? 1 : 0) : 0;
  fr.t0 = Clock::now();
  if (fr.shown || ring_on_) emit(Line{false, fr.shown ? fr.shown_depth : -1, static_cast<int>(frames_.size()), fr.name,
                                      std::vector<Value>(args.begin(), args.end()), 0, false});
  if (profiler_) profiler_->enter(fr.name, fr.fn ? Cat::Function : Cat::Builtin, fr.t0);
  frames_.push_back(std::move(fr));
}

void Session::check_arguments(std::span<const Value> args) {
  const Frame& fr = frames_.back();
  for (const GuardSpec& g : o_.guards) {
    if (!checks(g, fr)) continue;
    if (g.target == "*") {
      for (size_t i = 0; i < args.size(); ++i) check(g.check, args[i], fmt::format("argument {}", i + 1), "--guard " + g.text);
    } else if (fr.fn) {
      int i = param_index(*fr.fn, g.target);
      if (i >= 0 && static_cast<size_t>(i) < args.size())
        check(g.check, args[static_cast<size_t>(i)], "argument '" + g.target + "'", "--guard " + g.text);
    }
  }
}

Value Session::leave(Value r) {
  Frame& fr = frames_.back();
  if (!fr.symbolic) {
    double dur = seconds_between(fr.t0, Clock::now());
    if (fr.shown || ring_on_)
      emit(Line{true, fr.shown ? fr.shown_depth : -1, static_cast<int>(frames_.size()) - 1, fr.name, {r}, dur, fr.compiled});
  }
  for (const GuardSpec& g : o_.guards) {
    if (!checks(g, fr)) continue;
    if (g.target == "*") {
      check(g.check, r, "result", "--guard " + g.text);
    } else if (fr.fn && r.is(Kind::Dict)) {
      if (const Value* v = r.as_dict().find(g.target)) check(g.check, *v, "result key :" + g.target, "--guard " + g.text);
    }
  }
  unwind();
  return r;
}

void Session::unwind() {
  if (!frames_.back().symbolic && profiler_) profiler_->leave(Clock::now());
  frames_.pop_back();
}

// ---- trace lines ------------------------------------------------------------------------------

std::string Session::format(const Line& l, int depth) const {
  if (l.is_return)
    return fmt::format("{}└─ ← {} ({}){}", indent(depth), summarize(l.values[0], o_.level, o_.color), elapsed_str(l.elapsed),
                       l.compiled ? " [compiled]" : "");
  std::string args = summarize_all(l.values, o_.level, o_.color);
  return fmt::format("{}├─ [{}]{}{}", indent(depth), l.name, args.empty() ? "" : " ", args);
}

void Session::emit(Line l) {
  if (l.shown_depth >= 0) {
    if (trace_file_.is_open()) {
      nlohmann::json j = {{"type", l.is_return ? "return" : "call"}, {"op", l.name}, {"level", l.shown_depth},
                          {"timestamp", seconds_between(start_, Clock::now())}};
      if (l.is_return) {
        j["data"] = summarize(l.values[0], o_.level);
        j["elapsed_us"] = l.elapsed * 1e6;
      } else {
        nlohmann::json data = nlohmann::json::array();
        for (const Value& v : l.values) data.push_back(summarize(v, o_.level));
        j["data"] = std::move(data);
      }
      trace_file_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      err_ << format(l, l.shown_depth) << "\n";
    }
  }
  if (ring_on_) {
    ring_.push_back(std::move(l));
    if (ring_.size() > kRingSize) ring_.pop_front();
  }
}

// ---- JIT hooks --------------------------------------------------------------------------------

void Session::compiled_run(std::shared_ptr<const ir::Graph> graph, std::span<const Tensor> inputs, double seconds) {
  if (frames_.empty() || frames_.back().symbolic) return;
  Frame& fr = frames_.back();
  fr.compiled = true;
  if (ring_on_) {  // kept for the first-NaN search of a breach on the result
    fr.graph = std::move(graph);
    fr.inputs.assign(inputs.begin(), inputs.end());
  }
  if (profiler_) profiler_->compiled_run(seconds);
  if (trace_file_.is_open() && fr.shown) {
    nlohmann::json j = {{"type", "jit_call"}, {"op", fr.name}, {"level", fr.shown_depth},
                        {"timestamp", seconds_between(start_, Clock::now())}, {"data", {{"run_us", seconds * 1e6}}}};
    trace_file_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
}

void Session::compile_begin(const std::string& fn) {
  if (profiler_) profiler_->enter("<compile " + fn + ">", Cat::Compile, Clock::now());
}

void Session::compile_end() {
  if (profiler_) profiler_->leave(Clock::now());
}

// ---- guards -----------------------------------------------------------------------------------

std::string Session::function_name() const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it)
    if (it->fn) return it->name;
  return "<toplevel>";
}

void Session::bound_locals(const Env& frame) {
  std::string fn = function_name();
  for (const auto& [id, v] : frame.vars) {
    const std::string& name = symbols::name(id);
    for (const GuardSpec& g : o_.guards)
      if (g.target == name && g.applies_to(fn)) check(g.check, v, "local '" + name + "'", "--guard " + g.text);
  }
}

void Session::guard_form(const GuardCheck& c, const Value& v, SrcLoc loc) {
  check(c, v, "guard form at " + sources::describe(loc), "");
}

std::string Session::compile_key() const {
  std::string k;
  for (const GuardSpec& g : o_.guards)
    if (!g.scope.empty() || g.target != "*") k += "|guard " + g.text;
  return k;
}

void Session::check(const GuardCheck& c, const Value& v, const std::string& what, const std::string& origin) {
  if (has_traced_leaf(v)) record_traced_check(c, v);
  if (auto m = check_value(c, v)) breach(c, *m, what, origin);
}

void Session::breach(const GuardCheck& c, const std::string& message, const std::string& what, const std::string& origin) {
  std::string fn = frames_.empty() ? "<toplevel>" : frames_.back().name;
  if (origin.empty() || what.rfind("local ", 0) == 0) fn = function_name();  // guard forms and locals: the enclosing function
  std::string r = fmt::format("/!\\ Guard Breached: {}\nFunction: {}\nChecked: {}{}\n{}\n", c.kind_name(), fn, what,
                              origin.empty() ? "" : " (" + origin + ")", message);
  if (!frames_.empty() && frames_.back().graph && c.kind == GuardCheck::Kind::NoNan && what.starts_with("result"))
    if (auto first = first_nonfinite(*frames_.back().graph, frames_.back().inputs)) r += "First NaN: " + *first + "\n";
  r += fmt::format("\nBacktrace (last {} operations):\n\n", ring_.size());
  for (const Line& l : ring_) r += format(l, l.depth) + "\n";
  r += "--- End of Backtrace ---\n";
  throw GuardBreach(r);
}

// ---- exit -------------------------------------------------------------------------------------

bool Session::finish() {
  if (finished_) return true;
  finished_ = true;
  double wall = seconds_between(start_, Clock::now());
  if (profiler_ && o_.blame) err_ << profiler_->report(wall);
  bool ok = true;
  try {
    if (profiler_ && !o_.profile_out.empty()) write_file_atomic(o_.profile_out, profiler_->chrome_json());
  } catch (const std::exception& e) {
    err_ << "error: --profile-out: " << e.what() << "\n";
    ok = false;
  }
  if (trace_file_.is_open()) {
    trace_file_.close();
    std::error_code ec;
    std::filesystem::rename(trace_tmp_, trace_path_, ec);
    if (ec) {
      err_ << "error: --trace-out json: cannot write " << trace_path_ << ": " << ec.message() << "\n";
      ok = false;
    }
  }
  return ok;
}

// ---- the evaluator's hooks -------------------------------------------------------------------

Session* session_of(const Interp& in) { return static_cast<Session*>(in.obs.get()); }

Session& session(Interp& in) { return static_cast<Session&>(in.observer()); }

namespace {

// (guard :no-nan e), (guard :range [lo hi] e), (guard :shape [d...] e): e, checked (obs/guards.hpp).
Value sf_guard(Interp& in, const ListObj& f, const EnvPtr& env) {
  const char* usage = "guard: expected (guard :no-nan e), (guard :range [lo hi] e) or (guard :shape [d...] e)";
  if (f.items.size() < 3 || !f.items[1].is(Kind::Keyword)) throw SheafError(usage, f.loc);
  const std::string& kind = f.items[1].as_str();
  bool has_literal = kind != "no-nan";
  if (f.items.size() != (has_literal ? 4u : 3u)) throw SheafError(usage, f.loc);
  SrcLoc at = f.items[2].loc().valid() ? f.items[2].loc() : f.loc;
  GuardCheck check = guard_form_check(kind, has_literal ? f.items[2] : Value(), at);
  Value v = in.eval(f.items.back(), env);
  session(in).guard_form(check, v, f.loc);
  return v;
}

}  // namespace

void install_eval_hooks() {
  eval_hooks.make_observer = [] { return std::unique_ptr<CallObserver>(std::make_unique<Session>(Options{}, std::cerr)); };
  define_special_form("guard", sf_guard);
}

}  // namespace sheaf::obs
