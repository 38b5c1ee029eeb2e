// cli/program_words.hpp — which command-line words belong to the program (SPEC §8, §10.1).
// Sheaf's run options may precede or follow FILE; every other word after FILE is the program's,
// kept in order for `(argv)` and `(args ...)`: key=value, but also --key value, --flag and --help,
// which sheaf would otherwise take as (unknown) options of its own. In -c mode the words after
// the expression are the program's.
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace sheaf {

struct CommandWords {
  std::vector<std::string> sheaf;    // for CLI11: options, their values and FILE
  std::vector<std::string> program;  // (argv), in order
};
// `args` (without the program name) split; "--" makes every later word the program's.
CommandWords split_program_words(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace sheaf
