// obs/guards.hpp — runtime guards (SPEC §9.2): the checks, the `--guard` grammar and what a
// breach carries.
//   check   no-nan            no NaN or ±Inf in any tensor or float leaf (dicts and lists recursed)
//           range[lo,hi]      min ≥ lo and max ≤ hi over the non-NaN elements
//           shape[d1,d2,...]  exact shape
//   spec    [scope:]target:check   scope: comma-separated function names (default: all);
//           target: a parameter (checked on entry), a `let` local (checked when bound), a key of a
//           returned dict (checked on return), or * (all arguments and the result);
//           `--guard no-nan` alone means *:no-nan everywhere.
// A check on a traced (symbolic) value cannot be decided while tracing: guard_flag records a
// rank-0 bool "passed" in the trace (trace::record_guard); a compiled call whose flag is false is
// interpreted again, where the check runs on concrete values and reports.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/hooks.hpp"
#include "value/value.hpp"

namespace sheaf::obs {

struct GuardCheck {
  enum class Kind { NoNan, Range, Shape } kind = Kind::NoNan;
  double lo = 0, hi = 0;  // Range
  Shape dims;             // Shape
  std::string_view kind_name() const;  // "NoNan", "Range", "Shape"
};

struct GuardSpec {
  std::vector<std::string> scope;  // empty: every function
  std::string target = "*";
  GuardCheck check;
  std::string text;  // as written
  bool applies_to(std::string_view fn) const;
};

// Parses a --guard argument; throws SheafError with the grammar on a malformed spec.
GuardSpec parse_guard_spec(const std::string& text);
// Parses the check of a `(guard :kind [args] e)` form from its keyword and literal (nil when absent).
GuardCheck guard_form_check(const std::string& kind, const Value& literal, SrcLoc loc);

// The breach message for a concrete value, or nullopt when it passes. Symbolic leaves are skipped.
//   NoNan: "Tensor contains NaN or Inf values: f32[4x1] [min:inf max:-inf]", "Value is NaN";
//          inside containers prefixed by the path: ":l1 -> :W -> ...", "[2] -> ..."
//   Range: "Value range [-2.00e0, 3.00e0] outside allowed [-1.00e0, 1.00e0]"
//   Shape: "Shape mismatch: expected [4, 2], got [2, 4]"
std::optional<std::string> check_value(const GuardCheck& c, const Value& v);

// True when `v` has a symbolic (traced) leaf. For such values `record_traced_check` records the
// check's rank-0 bool into the active trace (shape checks are decided on the static shape: a
// mismatch aborts the trace, so the call is interpreted and reports).
bool has_traced_leaf(const Value& v);
void record_traced_check(const GuardCheck& c, const Value& v);

// Thrown on a breach: the complete report (SPEC §9.2). The command line prints it and exits 1.
struct GuardBreach : ReportedError {
  using ReportedError::ReportedError;
};

}  // namespace sheaf::obs
