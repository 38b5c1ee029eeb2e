// tests/lang/golden_runner.cpp — runs a golden .shf file (DESIGN §5, SPEC §1.5).
// Every form is evaluated in order in one interpreter. Comments after a form state what it must do:
//   ;; => printed value        the printed value (a multi-line value continues on `;; .. ` lines)
//   ;; !! substring            evaluation fails with a diagnostic containing the substring
//   ;; out: text               the form writes this line to stdout (repeatable, in order)
// A form without expectations is setup and must not fail. Prints "N passed, N failed".
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/error.hpp"
#include "builtins/init_runtime.hpp"
#include "eval/interp.hpp"
#include "reader/reader.hpp"
#include "value/printer.hpp"

using namespace sheaf;

namespace {

struct Expect {
  enum { None, Value, Error } kind = None;
  std::string text;
  std::vector<std::string> out;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Expectations live in the comments between the end of a form and the start of the next.
Expect parse_expect(std::string_view gap) {
  Expect ex;
  std::istringstream lines{std::string(gap)};
  std::string line;
  bool in_value = false;
  while (std::getline(lines, line)) {
    size_t c = line.find(";;");
    if (c == std::string::npos) continue;
    std::string body = line.substr(c + 2);
    std::string t = trim(body);
    if (t.rfind("=>", 0) == 0) {
      ex.kind = Expect::Value;
      ex.text = trim(t.substr(2));
      in_value = true;
    } else if (t.rfind("!!", 0) == 0) {
      ex.kind = Expect::Error;
      ex.text = trim(t.substr(2));
      in_value = false;
    } else if (t.rfind("out:", 0) == 0) {
      std::string o = t.substr(4);
      ex.out.push_back(o.empty() ? o : o.substr(o[0] == ' ' ? 1 : 0));
      in_value = false;
    } else if (in_value && t.rfind("..", 0) == 0) {
      std::string rest = body.substr(body.find("..") + 2);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      ex.text += "\n" + rest;
    } else {
      in_value = false;
    }
  }
  return ex;
}

// Diagnostics quote the offending source line, so `(f) ;; !! text` would find its own comment.
// The interpreter therefore sees a copy with the expectation comments blanked (same offsets).
std::string blank_expectations(std::string text) {
  size_t pos = 0;
  while ((pos = text.find(";;", pos)) != std::string::npos) {
    size_t eol = std::min(text.find('\n', pos), text.size());
    std::string t = trim(text.substr(pos + 2, eol - pos - 2));
    if (t.rfind("=>", 0) == 0 || t.rfind("!!", 0) == 0 || t.rfind("out:", 0) == 0 || t.rfind("..", 0) == 0)
      std::fill(text.begin() + static_cast<std::ptrdiff_t>(pos), text.begin() + static_cast<std::ptrdiff_t>(eol), ' ');
    pos = eol;
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: golden_runner FILE.shf\n";
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) {
    std::cerr << "cannot open " << argv[1] << "\n";
    return 2;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  std::string name = std::filesystem::path(argv[1]).filename().string();
  std::string shown = blank_expectations(text);
  uint32_t file = sources::add(name, shown);
  std::vector<Form> forms;
  try {
    forms = read_forms(shown, file);
  } catch (const SheafError& e) {
    std::cerr << render_error(e, false) << "0 passed, 1 failed\n";
    return 1;
  }
  std::ostringstream out;
  init_runtime();
  Interp in(out);
  in.current_dir = std::filesystem::absolute(argv[1]).parent_path().string();
  int passed = 0, failed = 0;
  for (size_t i = 0; i < forms.size(); ++i) {
    size_t gap_end = i + 1 < forms.size() ? forms[i + 1].begin : text.size();
    Expect ex = parse_expect(std::string_view(text).substr(forms[i].end, gap_end - forms[i].end));
    std::string where = sources::describe(forms[i].value.loc().valid() ? forms[i].value.loc() : SrcLoc{file, 0, 0, 0});
    // Locate the form's line for atoms (which carry no location).
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(forms[i].begin), '\n'));
    where = name + ":" + std::to_string(line);
    out.str("");
    std::string got, err;
    bool ok_eval = true;
    try {
      got = print_value(in.eval_toplevel(forms[i].value));
    } catch (const SheafError& e) {
      ok_eval = false;
      err = render_error(e, false);
    }
    std::vector<std::string> out_lines;
    {
      std::istringstream o(out.str());
      std::string l;
      while (std::getline(o, l)) out_lines.push_back(l);
    }
    std::string problem;
    if (ex.kind == Expect::Error) {
      if (ok_eval) problem = "expected an error containing '" + ex.text + "', got value " + got;
      else if (err.find(ex.text) == std::string::npos) problem = "expected an error containing '" + ex.text + "', got:\n" + err;
    } else if (!ok_eval) {
      problem = "unexpected error:\n" + err;
    } else if (ex.kind == Expect::Value && got != ex.text) {
      problem = "expected:\n" + ex.text + "\ngot:\n" + got;
    }
    if (problem.empty() && !ex.out.empty() && out_lines != ex.out) {
      problem = "expected output:\n";
      for (auto& l : ex.out) problem += "  " + l + "\n";
      problem += "got output:\n";
      for (auto& l : out_lines) problem += "  " + l + "\n";
    }
    if (ex.kind == Expect::None && ex.out.empty() && problem.empty()) continue;  // setup form
    if (problem.empty()) {
      ++passed;
    } else {
      ++failed;
      std::cout << "FAIL " << where << ": " << text.substr(forms[i].begin, std::min<size_t>(forms[i].end - forms[i].begin, 120)) << "\n  "
                << problem << "\n";
    }
  }
  std::cout << name << ": " << passed << " passed, " << failed << " failed\n";
  return failed == 0 && passed > 0 ? 0 : 1;
}
