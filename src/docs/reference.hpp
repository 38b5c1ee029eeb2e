// docs/reference.hpp — the language reference generated from the tables the interpreter runs on:
// the special forms (eval/special_forms.cpp), the builtins by family (builtins/registry.hpp) and
// the functions and macros of the bundled modules (lib/*.shf, with the comment above each).
// `sheaf reference` prints it (docs/reference.md is its output, checked fresh by a test);
// `sheaf init-ai` writes ai_context(): the guide of src/docs/ai_guide.md, then the reference.
#pragma once
#include <string>

namespace sheaf {

// Markdown: one line per entry, "- `(signature)` — doc", under ## / ### headings.
std::string reference_markdown();
// The text of sheaf-context.md: the guide, then "## REFERENCE" and the reference's sections.
std::string ai_context();

}  // namespace sheaf
