// cli/docs_commands.cpp — `sheaf reference [-o FILE]` and `sheaf init-ai [DIR]` (docs/reference.hpp).
#include "cli/docs_commands.hpp"

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "base/error.hpp"
#include "builtins/registry.hpp"
#include "docs/reference.hpp"
#include "io/atomic_write.hpp"

namespace sheaf {

int reference_main(int argc, char** argv) {
  std::string usage = "usage: sheaf reference [-o FILE]\n";
  if (argc == 1) {
    std::cout << reference_markdown();
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "-o") {
    try {
      write_file_atomic(argv[2], reference_markdown());
    } catch (const SheafError& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  std::cerr << usage;
  return 2;
}

int init_ai_main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && std::string_view(argv[1]).rfind('-', 0) == 0)) {
    std::cerr << "usage: sheaf init-ai [DIR]   (writes DIR/sheaf-context.md; DIR defaults to the current directory)\n";
    return 2;
  }
  std::filesystem::path path = std::filesystem::path(argc == 2 ? argv[1] : ".") / "sheaf-context.md";
  if (std::filesystem::exists(path)) {
    std::cerr << "error: " << path.string() << " already exists; remove it first to write a fresh one\n";
    return 1;
  }
  std::string text = ai_context();
  try {
    write_file_atomic(path.string(), text);
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  std::cout << fmt::format("wrote {} ({} bytes): a guide to Sheaf and the reference of {} builtins\n", path.string(), text.size(),
                           builtin_table().size());
  return 0;
}

}  // namespace sheaf
