// cli/repl.hpp — the interactive REPL (SPEC §8).
#pragma once

namespace sheaf {
class Interp;
// Runs the REPL on stdin/stdout until :quit or end of input; returns the exit status.
int run_repl(Interp& in);
}  // namespace sheaf
