// builtins/interrupt.cpp — (on-interrupt f) (SPEC §10.1): what a program does after Ctrl-C.
// The first Ctrl-C stops the program at its next safe point; then f is called with no arguments
// (to save a checkpoint, say) and the program ends with status 130 (cli/interrupts.hpp).
#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"

namespace sheaf {
namespace {

Value b_on_interrupt(Interp& in, const CallArgs& a) {
  if (!a[0].is_callable() && !a[0].is_nil()) type_error(a, 0, "a function of no arguments, or nil");
  in.interrupt_handler = a[0];
  return Value();
}

const BuiltinDef kInterrupt[] = {
    {"on-interrupt", "(on-interrupt f)",
     "After the first Ctrl-C the program stops at its next safe point, calls f with no arguments (e.g. to save a "
     "checkpoint) and ends with status 130; nil removes f. A second Ctrl-C ends it at once.",
     b_on_interrupt, 1, 1, true},
};

}  // namespace

std::span<const BuiltinDef> interrupt_builtins() { return kInterrupt; }

}  // namespace sheaf
