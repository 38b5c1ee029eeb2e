// eval/interp.hpp — the evaluator (SPEC §4, §6.1–6.2): global namespace, special-form
// dispatch, calls, recursion and step limits. Top-level forms are read, macro-expanded
// (eval/expander.cpp) and evaluated in order.
#pragma once
#include <atomic>
#include <iosfwd>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/error.hpp"
#include "eval/hooks.hpp"
#include "value/function.hpp"

namespace sheaf {

// A special form receives its unevaluated form. Its table row also feeds `:help`.
struct SpecialForm {
  std::string_view name, signature, doc;
  SpecialFormFn fn;  // null until its layer defines it (eval/hooks.hpp)
};
std::span<const SpecialForm> special_forms();
bool is_reserved_name(std::string_view name);  // special forms (SPEC §4) cannot be shadowed

struct Limits {
  size_t max_depth = 20000;  // nested evaluation depth (runs on a large stack, see cli/main)
  uint64_t max_steps = 0;    // 0 = unlimited; the fuzzer bounds evaluation with this
  int64_t max_elements = int64_t{1} << 31;  // largest tensor or list a builtin may create
  uint64_t max_expansion_forms = 1000000;   // forms macros may build while one form is expanded
};

class Interp {
 public:
  struct Global {
    enum class Type { Def, Defn, Macro, Schema } type;  // Schema: defparams
    Value value;
    std::string module;  // "" for the main program, else the module name
    bool shadowable = false;  // defined by an autoloaded module: a user definition may replace it
  };

  explicit Interp(std::ostream& out, Limits limits = {});
  ~Interp();

  // Registers the text as a source file, then reads, expands and evaluates every form.
  // Returns the value of the last form (nil for an empty text).
  Value run_text(std::string_view text, const std::string& path, bool bundled = false);
  Value run_file(const std::string& path);
  Value eval_toplevel(const Value& form);

  Value eval(const Value& form, const EnvPtr& env);
  Value eval_body(std::span<const Value> body, const EnvPtr& env);  // implicit do
  Value call(const Value& f, std::span<const Value> args, SrcLoc site);
  Value expand(const Value& form);

  // Globals and builtins.
  const Global* global(int id) const;
  // Defines a global. A name already defined is an error ("Redefinition"), except that a user
  // definition replaces one of nn/optim's, and those modules never replace a user's.
  void define(int id, Value v, Global::Type type, SrcLoc loc);
  void check_definable(int id, SrcLoc loc) const;  // the errors define would raise for the name
  Value lookup(const Value& sym, const EnvPtr& env, bool call_position = false);
  const BuiltinDef* builtin_def(std::string_view name) const;
  std::vector<std::string> all_names() const;  // builtins, special forms, user names
  const std::unordered_map<int, Global>& globals() const { return globals_; }
  void clear_user_definitions();
  const SpecialForm* special_form(int id) const {
    return id >= 0 && static_cast<size_t>(id) < special_.size() ? special_[static_cast<size_t>(id)] : nullptr;
  }

  std::ostream& out() { return out_; }
  const Limits& limits() const { return limits_; }
  void check_elements(int64_t n, SrcLoc loc) const;

  // Module loading (eval/modules.cpp).
  void use_module(const std::string& name, SrcLoc loc);
  // Loads the autoloaded module (nn, optim) defining `id` if it is not loaded yet; false when
  // no such module defines it or it is loaded already.
  bool autoload(int id, SrcLoc loc);
  const std::vector<std::string>& loaded_modules() const { return loaded_module_names_; }
  std::string current_dir;  // directory of the file being evaluated (for `use`)
  std::string module_name;  // module whose forms are being evaluated ("" = main program)

  // Fields set by (progress :k v ...) for the progress bar (a dict; nil until set).
  Value progress_fields;
  // Long `repeat` loops draw a progress bar on stderr (eval/progress.hpp); the CLI turns this on
  // when stderr is a terminal and --no-progress is absent.
  bool progress_bars = false;
  // The arguments after the program's file that are not sheaf options: `(argv)`.
  std::vector<std::string> program_args;
  // Where `(log-metrics ...)` writes ("run.jsonl", "run.csv", "tb:DIR"; builtins/metrics.cpp):
  // set by --metrics, which then wins, or by `(log-metrics-to ...)`.
  std::vector<std::string> metric_sinks;
  bool metric_sinks_from_cli = false;

  // Automatic compilation of pure functions (runtime/jit.hpp: jit_of); null with --no-jit.
  std::unique_ptr<CallCompiler> jit;
  // Tracer, guards, profiler (obs/session.hpp: session_of); null when none is on: calls are not
  // observed.
  std::unique_ptr<CallObserver> obs;
  CallObserver& observer();  // creates a session with everything off when there is none

  // REPL-wide flags.
  bool warned_lambda = false;
  // Set asynchronously (Ctrl-C); the evaluation stops with Interrupted at its next safe point
  // (base/interrupt.hpp). `(on-interrupt f)` sets the function a program calls then, before it ends.
  std::atomic<bool> interrupt{false};
  Value interrupt_handler;

  // The outermost macro expansion in progress (eval/expander.cpp): the forms its macros may
  // still build (Limits::max_expansion_forms), and the nodes of every macro's argument forms,
  // which keep their own locations (held, so no node built later can take one's address).
  struct Expansion {
    uint64_t left = 0;
    std::unordered_set<const Obj*> arg_nodes;
    std::vector<std::shared_ptr<Obj>> keep;
  };

 private:
  friend struct DepthGuard;
  std::ostream& out_;
  Limits limits_;
  size_t depth_ = 0;
  uint64_t steps_ = 0;
  int expanding_ = 0;     // nesting of expand() calls
  Expansion expansion_;  // of the outermost one
  std::unordered_map<int, Global> globals_;
  std::unordered_map<int, Value> builtins_;
  std::vector<const SpecialForm*> special_;
  std::set<std::string> loaded_paths_;
  std::vector<std::string> loaded_module_names_;
  EnvPtr module_env_;  // while nn/optim load: the frame their definitions are bound in
  std::vector<std::pair<std::string, EnvPtr>> autoloaded_envs_;  // each loaded nn/optim and its frame
  mutable std::unordered_map<int, std::string> autoload_names_;  // see autoload_index

  void load_module(const std::string& name, const std::string& text, const std::string& path, const std::string& dir,
                   bool bundled);
  // The names nn and optim define → the module's name (read from their texts, not evaluated,
  // the first time a name is not found).
  const std::unordered_map<int, std::string>& autoload_index() const;

  Value run_source(uint32_t file);
  Value eval_call(const ListObj& l, const EnvPtr& env);
  Value call_unobserved(const Value& f, std::span<const Value> args, SrcLoc site);
  Value eval_vector(const ListObj& l, const EnvPtr& env);
  Value call_fn(const Value& f, std::span<const Value> args, SrcLoc site, bool allow_macro = false);
  Value expand_qq(const Value& form, int level);
};

// RAII nesting counter: errors when the evaluation depth limit is exceeded.
struct DepthGuard {
  Interp& in;
  DepthGuard(Interp& i, SrcLoc loc);
  ~DepthGuard() { --in.depth_; }
};

// Binds a destructuring pattern (symbol, [a [b c] & r], {:keys [h c]}) to a value.
void bind_pattern(Interp& in, Env& env, const Value& pattern, const Value& v, SrcLoc loc);
// Validates a parameter/binding pattern at definition time (no special-form names).
void check_pattern(const Value& pattern, SrcLoc loc);
// A parameter vector; `typed` admits typed parameters (x [4 2]), (p :as Schema) (eval/typed_params.hpp).
Params parse_params(const Interp& in, const Value& vec, SrcLoc loc, bool typed);

// Quasiquote template evaluation (eval/quasiquote.cpp).
Value eval_quasiquote(Interp& in, const Value& tmpl, const EnvPtr& env);
// Quote: forms as data ({…} forms become dicts).
Value quote_data(const Value& form);

// The i-th element of a sequence (list/tuple/tensor axis 0); used by destructuring and builtins.
std::vector<Value> seq_elements(const Value& v, SrcLoc loc, std::string_view who);

}  // namespace sheaf
