// cli/program_words.cpp — splitting sheaf's options from the program's words (see
// program_words.hpp). CLI11 sees only sheaf's words. A word is sheaf's when it names one of the app's options (up to an '=');
// an option that takes a value also takes the next word unless it was written --opt=value.
// -h/--help and --version after FILE are the program's.
#include "cli/program_words.hpp"

#include <CLI/CLI.hpp>

namespace sheaf {
namespace {

// The sheaf option a word names (nullptr for a program word or a positional).
const CLI::Option* sheaf_option(const CLI::App& app, const std::string& w, bool after_file) {
  if (w.size() < 2 || w[0] != '-' || w == "--") return nullptr;
  std::string name = w.substr(0, w.find('='));
  if (after_file && (name == "-h" || name == "--help" || name == "--version")) return nullptr;
  return app.get_option_no_throw(name);
}

bool takes_value(const CLI::Option* o, const std::string& w) {
  return o->get_items_expected_min() > 0 && w.find('=') == std::string::npos && w.size() > 2 && w[1] == '-';
}

}  // namespace

CommandWords split_program_words(const CLI::App& app, const std::vector<std::string>& args) {
  CommandWords out;
  bool started = false;  // past FILE, or past -c EXPR
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--") {
      out.program.insert(out.program.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    const CLI::Option* o = sheaf_option(app, w, started);
    if (o) {
      out.sheaf.push_back(w);
      bool short_with_value = w.size() == 2 && o->get_items_expected_min() > 0;  // -c EXPR
      if ((takes_value(o, w) || short_with_value) && i + 1 < args.size()) out.sheaf.push_back(args[++i]);
      if (short_with_value) started = true;
    } else if (started) {
      out.program.push_back(w);
    } else {
      out.sheaf.push_back(w);  // FILE, or an unknown option for CLI11 to report
      started = w.empty() || w[0] != '-';
    }
  }
  return out;
}

}  // namespace sheaf
