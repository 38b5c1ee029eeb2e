// cli/interrupts.hpp — Ctrl-C while Sheaf code runs (SPEC §8, §10.1 on-interrupt).
// The first press asks the interpreter to stop at its next safe point (Interp::interrupt, see
// base/interrupt.hpp): an interpreted call or loop step, or an iteration of a compiled loop. A
// second press during the same evaluation ends the process at once with status 130. A program
// that stops this way calls the function given to `(on-interrupt f)`, then ends with status 130;
// the REPL reports "Interrupted" and goes on.
#pragma once

namespace sheaf {

class Interp;
struct Interrupted;

// For a SIGINT handler (async-signal-safe): a press during an evaluation of `in`.
void press_interrupt(Interp* in) noexcept;
// A new evaluation starts: earlier presses are forgotten.
void forget_interrupt_presses() noexcept;

// While it lives, SIGINT presses interrupt `in`'s evaluations (the REPL's line editor installs a
// handler of its own on top, and restores this one).
class InterruptHandler {
 public:
  explicit InterruptHandler(Interp& in);
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler&) = delete;
  InterruptHandler& operator=(const InterruptHandler&) = delete;
};

// A program stopped by Ctrl-C: reports where, runs the on-interrupt function (its errors are
// reported too) and returns the exit status, 130.
int finish_interrupted_program(Interp& in, const Interrupted& stop, bool color);

}  // namespace sheaf
