// cli/repl.cpp — REPL: banner, prompts, => echo, errors that keep the session alive.
#include "cli/repl.hpp"

#include <iostream>
#include <string>

#include "base/error.hpp"
#include "eval/interp.hpp"
#include "reader/reader.hpp"
#include "value/printer.hpp"

namespace sheaf {

int run_repl(Interp& in) {
  std::cout << "Sheaf " << SHEAF_VERSION << " (:h for help)\n";
  std::string buf, line;
  int n = 0;
  for (;;) {
    std::cout << (buf.empty() ? "sheaf> " : "...    ") << std::flush;
    if (!std::getline(std::cin, line)) break;
    if (buf.empty() && (line == ":q" || line == ":quit" || line == ":exit")) break;
    buf += line + "\n";
    if (read_status(buf) == ReadStatus::Incomplete) continue;
    ++n;
    try {
      Value v = in.run_text(buf, "<repl>");
      std::cout << "=> " << print_value(v) << "\n";
    } catch (const SheafError& e) {
      std::cerr << render_error(e, false);
    }
    buf.clear();
  }
  std::cout << "Bye!\n";
  return 0;
}

}  // namespace sheaf
