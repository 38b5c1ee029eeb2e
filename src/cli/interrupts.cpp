// cli/interrupts.cpp — Ctrl-C presses and the end of an interrupted program (see interrupts.hpp).
#include "cli/interrupts.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <iostream>

#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "eval/interp.hpp"
#include "io/scratch_dir.hpp"
#include "obs/guards.hpp"

namespace sheaf {
namespace {

std::atomic<int> g_presses{0};        // during the current evaluation
std::atomic<Interp*> g_target{nullptr};  // the interpreter of InterruptHandler
struct sigaction g_previous {};

extern "C" void on_program_sigint(int) {
  int saved = errno;
  press_interrupt(g_target.load());
  errno = saved;
}

}  // namespace

void press_interrupt(Interp* in) noexcept {
  if (g_presses.fetch_add(1) == 0) {
    if (in) in->interrupt.store(true);  // stops at the next safe point
    return;
  }
  remove_scratch_dir_now();  // _exit skips the atexit removal
  _exit(130);
}

void forget_interrupt_presses() noexcept { g_presses = 0; }

InterruptHandler::InterruptHandler(Interp& in) {
  g_target = &in;
  struct sigaction sa {};
  sa.sa_handler = on_program_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &g_previous);
}

InterruptHandler::~InterruptHandler() {
  sigaction(SIGINT, &g_previous, nullptr);
  g_target = nullptr;
}

int finish_interrupted_program(Interp& in, const Interrupted& stop, bool color) {
  std::cout.flush();
  std::cerr << render_error(SheafError("Interrupted (Ctrl-C)", stop.loc), color) << std::flush;
  Value handler = in.interrupt_handler;
  if (handler.is_nil()) return 130;
  try {
    in.call(handler, {}, stop.loc);  // a second Ctrl-C meanwhile ends the process (press_interrupt)
    std::cout.flush();
  } catch (const SheafError& e) {
    std::cout.flush();
    std::cerr << render_error(e, color);
  } catch (const obs::GuardBreach& b) {
    std::cout.flush();
    std::cerr << b.what();
  } catch (const std::exception& e) {  // out of memory, ...: still a diagnostic, still 130
    std::cout.flush();
    std::cerr << render_error(foreign_error(e, stop.loc), color);
  }
  return 130;
}

}  // namespace sheaf
