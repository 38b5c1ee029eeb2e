// tests/unit/case_file.hpp — the table format of the table-driven unit tests (JIT consistency,
// gradient check, vmap consistency): a .shf file of `;; --- name` sections. The section named
// `prelude` is not a case: it is prepended to every other one. An unreadable file gives no
// sections (each test's CasesLoad check then fails).
#pragma once
#include <cctype>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

namespace sheaf::testing_support {

// The folder of the unit tests' sources and case tables (tests/unit), absolute: set by
// tests/CMakeLists.txt, since __FILE__ may be relative (ccache with base_dir, for one).
inline std::filesystem::path unit_dir() { return SHEAF_UNIT_TEST_DIR; }

struct CaseSection {
  std::string name;
  std::string body;  // the section as written
  std::string text;  // the program run: prelude + body
};

inline void PrintTo(const CaseSection& c, std::ostream* os) { *os << c.name; }  // gtest's name for a case

inline std::vector<CaseSection> read_case_sections(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<CaseSection> out;
  std::string line, prelude;
  while (std::getline(in, line)) {
    if (line.rfind(";; --- ", 0) == 0) out.push_back({line.substr(7), "", ""});
    else if (!out.empty()) out.back().body += line + "\n";
  }
  for (auto it = out.begin(); it != out.end(); ++it)
    if (it->name == "prelude") {
      prelude = it->body;
      out.erase(it);
      break;
    }
  for (CaseSection& c : out) c.text = prelude + c.body;
  return out;
}

// A case name as a gtest parameter name: every character but letters and digits becomes '_'.
inline std::string gtest_name(const std::string& case_name) {
  std::string n;
  for (char ch : case_name) n += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

// True when the section has the line `line` (a per-case directive such as ";; expect: unrolled").
inline bool has_line(const std::string& body, const std::string& line) {
  return body.rfind(line + "\n", 0) == 0 || body.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace sheaf::testing_support
