// cli/repl.cpp — the interactive REPL (SPEC §8): banner, `sheaf> ` / `...    ` prompts, `=> value`
// echo, errors that keep the session alive, and the `:` commands (:help :env :registry :show
// :clear :trace :quit). On a terminal, lines come from libedit (readline API): tab completion
// over commands and names, history in ~/.sheaf_history, Ctrl-C cancels the current input.
// When stdin is not a terminal, lines are read plainly and the prompts are still printed, so
// piped sessions read like interactive ones.
#include "cli/repl.hpp"

// clang-format off
#include <cstdio>  // libedit's header needs FILE declared first
#include <editline/readline.h>
// clang-format on
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/interrupt.hpp"
#include "base/source.hpp"
#include "cli/interrupts.hpp"
#include "eval/interp.hpp"
#include "obs/session.hpp"
#include "reader/reader.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

// ---------------------------------------------------------------------------------------------
// Ctrl-C. The handler may run on any thread (the interpreter runs on its own thread, see
// cli/main), so it never touches the line editor: it wakes the key reader through a pipe.
// While an input is being evaluated, Ctrl-C asks the interpreter to stop ("Interrupted");
// a second Ctrl-C during the same evaluation quits.

Interp* g_interp = nullptr;             // for the completion callbacks and interrupts
int g_wake[2] = {-1, -1};              // SIGINT handler → read_key
std::atomic<bool> g_evaluating{false};  // an input is being evaluated
bool g_cancelled = false;               // read_key saw Ctrl-C (REPL thread only)

extern "C" void on_sigint(int) {
  int saved = errno;
  if (!g_evaluating) {
    char c = 1;
    if (write(g_wake[1], &c, 1) < 0) {}
  } else {
    press_interrupt(g_interp);  // the evaluation stops with "Interrupted" (cli/interrupts.hpp)
  }
  errno = saved;
}

void drain_wake_pipe() {
  char buf[64];
  while (read(g_wake[0], buf, sizeof buf) > 0) {}
}

// libedit's getc hook: one byte of stdin, or EOF with g_cancelled set on Ctrl-C (signal or a
// raw ^C byte). Returning EOF makes readline() return nullptr.
int read_key(FILE*) {
  pollfd fds[2] = {{0, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return EOF;
    }
    if (fds[1].revents & POLLIN) {
      drain_wake_pipe();
      g_cancelled = true;
      return EOF;
    }
    if (!fds[0].revents) continue;
    unsigned char c = 0;
    ssize_t n = read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return EOF;
    if (c == 3) {
      g_cancelled = true;
      return EOF;
    }
    return c;
  }
}

// ---------------------------------------------------------------------------------------------
// Names: completion candidates and lookups shared by the commands.

struct Command {
  std::vector<std::string_view> names;  // first is canonical
  std::string_view args, doc;
  bool (*fn)(Interp&, const std::string& arg);  // false: leave the REPL
};
const std::vector<Command>& commands();

std::vector<std::string> completions(Interp& in, std::string_view prefix) {
  std::vector<std::string> names;
  if (prefix.starts_with(':')) {
    for (const Command& c : commands())
      for (std::string_view n : c.names) names.emplace_back(n);
  } else {
    names = in.all_names();
  }
  std::erase_if(names, [&](const std::string& n) { return !n.starts_with(prefix); });
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

const FnObj* as_fn(const Value& v) { return v.is(Kind::Fn) ? &v.as<FnObj>() : nullptr; }

const Interp::Global* find_global(Interp& in, const std::string& name) {
  return in.global(symbols::intern(name));
}

// "(f x y & more)" from a function's parameter vector "[x y & more]".
std::string fn_signature(const std::string& name, const FnObj& fn) {
  std::string params = fn.params.describe();
  std::string inner = params.substr(1, params.size() - 2);
  return "(" + name + (inner.empty() ? "" : " ") + inner + ")";
}

std::string_view kind_word(Interp::Global::Type t) {
  switch (t) {
    case Interp::Global::Type::Def: return "def";
    case Interp::Global::Type::Defn: return "defn";
    case Interp::Global::Type::Macro: return "macro";
    case Interp::Global::Type::Schema: return "schema";
  }
  return "def";
}

std::string shape_text(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + "[";
  for (size_t i = 0; i < t.shape().size(); ++i) s += (i ? "x" : "") + std::to_string(t.shape()[i]);
  return s + "]";
}

// What :env shows after the kind: a tensor's dtype and shape, a function's parameters, or
// another value's kind and (shortened) printed form.
std::string describe_value(const Value& v) {
  if (v.is(Kind::Tensor)) return shape_text(v.as_tensor());
  if (const FnObj* fn = as_fn(v)) return fn->params.describe();
  std::string text = print_value(v, false);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return std::string(kind_name(v.kind())) + " = " + text;
}

// Global names defined by `module` ("" = the user's own), sorted.
std::vector<std::string> names_in_module(Interp& in, const std::string& module) {
  std::vector<std::string> names;
  for (const auto& [id, g] : in.globals())
    if (g.module == module) names.push_back(symbols::name(id));
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------------------------
// Commands.

void print_command_list() {
  std::cout << "Commands:\n";
  for (const Command& c : commands()) {
    std::string head;
    for (std::string_view n : c.names) head += (head.empty() ? "" : ", ") + std::string(n);
    if (!c.args.empty()) head += " " + std::string(c.args);
    std::cout << "  " << head << std::string(head.size() < 38 ? 38 - head.size() : 1, ' ') << c.doc << "\n";
  }
  std::cout << "Ctrl-C cancels the current input, Ctrl-D quits, Tab completes names.\n"
               "Type :h NAME for the signature and description of a builtin, special form,\n"
               "macro or function.\n";
}

bool help_special_form(const std::string& name) {
  for (const SpecialForm& sf : special_forms()) {
    if (sf.name != name) continue;
    std::cout << sf.signature << "\n  " << sf.doc << "\n  (special form)\n";
    return true;
  }
  return false;
}

bool help_global(Interp& in, const std::string& name) {
  in.autoload(symbols::intern(name), {});  // a name of nn or optim, whose module is not loaded yet
  const Interp::Global* g = find_global(in, name);
  if (!g) return false;
  std::string origin = g->module.empty() ? "" : ", module " + g->module;
  if (const FnObj* fn = as_fn(g->value)) {
    std::cout << fn_signature(name, *fn) << "\n";
    // its doc string, else the comment above its definition (how lib/*.shf describes functions)
    std::string doc = fn->doc.empty() ? sources::comment_above(fn->loc) : fn->doc;
    for (size_t at = 0; at < doc.size();) {
      size_t nl = std::min(doc.find('\n', at), doc.size());
      std::cout << "  " << std::string_view(doc).substr(at, nl - at) << "\n";
      at = nl + 1;
    }
    std::cout << "  (" << (fn->is_macro ? "macro" : "function") << origin << ")\n";
  } else {
    std::cout << name << " : " << describe_value(g->value) << "\n";
    std::cout << "  (" << kind_word(g->type) << origin << ")\n";
  }
  return true;
}

bool help_builtin(Interp& in, const std::string& name) {
  const BuiltinDef* def = in.builtin_def(name);
  if (!def) return false;
  std::cout << def->signature << "\n  " << def->doc << "\n";
  std::cout << "  (builtin" << (def->effectful ? ", effectful" : "") << ")\n";
  return true;
}

bool help_command(const std::string& name) {
  for (const Command& c : commands()) {
    if (std::find(c.names.begin(), c.names.end(), name) == c.names.end()) continue;
    std::cout << c.names.front() << (c.args.empty() ? "" : " ") << c.args << "\n  " << c.doc << "\n";
    return true;
  }
  return false;
}

bool cmd_help(Interp& in, const std::string& name) {
  if (name.empty()) {
    print_command_list();
  } else if (!help_command(name) && !help_special_form(name) && !help_global(in, name) &&
             !help_builtin(in, name)) {
    std::cout << "No help for '" << name << "'.";
    if (auto s = suggest_names(name, in.all_names()); !s.empty())
      std::cout << " Did you mean " << fmt::format("{}", fmt::join(s, ", ")) << "?";
    std::cout << "\n";
  }
  return true;
}

bool cmd_quit(Interp&, const std::string&) { return false; }

bool cmd_env(Interp& in, const std::string&) {
  std::vector<std::string> names = names_in_module(in, "");
  if (names.empty()) std::cout << "(no user definitions)\n";
  size_t width = 0;
  for (const std::string& n : names) width = std::max(width, n.size());
  for (const std::string& n : names) {
    const Interp::Global* g = find_global(in, n);
    std::cout << "  " << n << std::string(width - n.size() + 2, ' ') << kind_word(g->type)
              << std::string(7 - kind_word(g->type).size(), ' ') << describe_value(g->value) << "\n";
  }
  return true;
}

// "name (N): a b c ..." wrapped at 100 columns.
void print_module(const std::string& module, const std::vector<std::string>& names) {
  std::string line = "  " + module + " (" + std::to_string(names.size()) + "):";
  for (const std::string& n : names) {
    if (line.size() + 1 + n.size() > 100) {
      std::cout << line << "\n";
      line = "     ";
    }
    line += " " + n;
  }
  std::cout << line << "\n";
}

bool cmd_registry(Interp& in, const std::string&) {
  if (in.loaded_modules().empty()) std::cout << "(no modules loaded)\n";
  else std::cout << "Loaded modules:\n";
  for (const std::string& m : in.loaded_modules()) print_module(m, names_in_module(in, m));
  return true;
}

// The text of the form starting at `loc`, as written (comments and layout kept); empty when
// the registered source does not hold a complete form there.
std::string source_text(SrcLoc loc) {
  if (!loc.valid() || loc.col == 0) return "";
  std::string text;
  for (uint32_t line = loc.line; line < loc.line + 10000; ++line) {
    std::string_view t = sources::line_text(loc.file, line);
    if (t.data() == nullptr) return "";
    text += line == loc.line ? (loc.col - 1 <= t.size() ? t.substr(loc.col - 1) : "") : t;
    text += "\n";
    if (!text.starts_with('(')) return "";
    if (read_status(text) == ReadStatus::Complete) break;
  }
  try {
    std::vector<Form> forms = read_forms(text, 0);
    return forms.empty() ? "" : text.substr(forms[0].begin, forms[0].end - forms[0].begin);
  } catch (const SheafError&) {
    return "";
  }
}

void print_source(const FnObj& fn) {
  std::string text = source_text(fn.loc);
  std::cout << (text.empty() ? form_text(fn.source) : text) << "\n";
}

bool cmd_show(Interp& in, const std::string& name) {
  const Interp::Global* g = name.empty() ? nullptr : find_global(in, name);
  const FnObj* fn = g ? as_fn(g->value) : nullptr;
  if (name.empty()) std::cout << "usage: :show name\n";
  else if (fn) print_source(*fn);
  else if (g) std::cout << name << " is a " << kind_word(g->type) << ": " << describe_value(g->value) << "\n";
  else if (in.builtin_def(name) || in.special_form(symbols::intern(name)))
    std::cout << "'" << name << "' is built into the interpreter (no Sheaf source); :h " << name
              << " describes it\n";
  else std::cout << "Nothing named '" << name << "' is defined.\n";
  return true;
}

bool cmd_clear(Interp& in, const std::string&) {
  size_t n = names_in_module(in, "").size();
  in.clear_user_definitions();
  std::cout << "Cleared " << n << " user definition" << (n == 1 ? "" : "s") << ".\n";
  return true;
}

// :trace [on|off|fast|normal|verbose]: trace every call of later inputs on stderr (SPEC §9.1).
bool cmd_trace(Interp& in, const std::string& arg) {
  static const std::vector<std::string> modes = {"", "on", "off", "fast", "normal", "verbose"};
  if (std::find(modes.begin(), modes.end(), arg) == modes.end()) {
    std::cout << "usage: :trace [on|off|fast|normal|verbose]\n";
    return true;
  }
  obs::Level level = arg == "fast" ? obs::Level::Fast : arg == "verbose" ? obs::Level::Verbose : obs::Level::Normal;
  obs::session(in).set_trace(arg != "off", level);
  std::cout << (arg == "off" ? "Tracing off.\n" : "Tracing on (" + std::string(arg.empty() || arg == "on" ? "normal" : arg) + ").\n");
  return true;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {{":help", ":h"}, "[name]", "list commands, or describe a builtin, special form, macro or function", cmd_help},
      {{":quit", ":q", ":exit"}, "", "leave the REPL (also Ctrl-D)", cmd_quit},
      {{":env"}, "", "user definitions with their kind and shape", cmd_env},
      {{":registry", ":reg"}, "", "loaded modules and what they define", cmd_registry},
      {{":show"}, "name", "source of a user function", cmd_show},
      {{":clear"}, "", "forget all user definitions", cmd_clear},
      {{":trace"}, "[on|off|fast|normal|verbose]", "trace every call of later inputs", cmd_trace},
  };
  return table;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

const Command* find_command(const std::string& word) {
  for (const Command& c : commands())
    if (std::find(c.names.begin(), c.names.end(), word) != c.names.end()) return &c;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Line input: libedit on a terminal, std::getline otherwise.

enum class Got { Line, Eof, Cancel };


char* next_completion(const char* text, int state) {
  static std::vector<std::string> matches;
  static size_t next = 0;
  if (state == 0) {
    matches = completions(*g_interp, text);
    next = 0;
  }
  return next < matches.size() ? strdup(matches[next++].c_str()) : nullptr;
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // never fall back to file names
  return rl_completion_matches(text, next_completion);
}

class LineInput {
 public:
  explicit LineInput(Interp& in) : tty_(isatty(0)) {
    if (tty_) start_editor(in);
  }
  ~LineInput() {
    if (tty_) stop_editor();
  }
  bool tty() const { return tty_; }

  Got read(const char* prompt, std::string& line) {
    return tty_ ? read_edited(prompt, line) : read_plain(prompt, line);
  }

 private:
  bool tty_;
  std::string history_;
  struct sigaction old_sigint_ {};

  static Got read_plain(const char* prompt, std::string& line) {
    std::cout << prompt << std::flush;
    return std::getline(std::cin, line) ? Got::Line : Got::Eof;
  }

  Got read_edited(const char* prompt, std::string& line) {
    drain_wake_pipe();  // Ctrl-C pressed during the last evaluation cancels nothing
    g_cancelled = false;
    char* raw = readline(prompt);
    if (!raw) return g_cancelled ? Got::Cancel : Got::Eof;
    line = raw;
    free(raw);
    return Got::Line;
  }

 public:
  // One history entry per command or complete form: the lines of a multi-line form are recalled
  // together (libedit stores the newlines, and its history file escapes them).
  void remember(const std::string& input) {
    if (!tty_ || trim(input).empty()) return;
    std::string entry = input;
    while (!entry.empty() && entry.back() == '\n') entry.pop_back();
    add_history(entry.c_str());
    if (!history_.empty()) write_history(history_.c_str());
  }

 private:

  void start_editor(Interp& in) {
    static char word_breaks[] = " \t\n()[]{}'\"`~@,;";
    g_interp = &in;
    if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) g_wake[0] = g_wake[1] = -1;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_sigint_);
    rl_readline_name = "sheaf";
    rl_catch_signals = 0;
    rl_getc_function = read_key;
    rl_initialize();
    rl_attempted_completion_function = complete;
    rl_basic_word_break_characters = word_breaks;
    rl_completer_word_break_characters = word_breaks;
    const char* home = std::getenv("HOME");
    if (home && *home) history_ = std::string(home) + "/.sheaf_history";
    stifle_history(1000);
    if (!history_.empty()) read_history(history_.c_str());
  }

  void stop_editor() {
    sigaction(SIGINT, &old_sigint_, nullptr);
    for (int& fd : g_wake) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    g_interp = nullptr;
  }
};

// ---------------------------------------------------------------------------------------------
// The loop.

void evaluate(Interp& in, const std::string& text, bool color) {
  forget_interrupt_presses();
  in.interrupt = false;
  g_evaluating = true;
  try {
    Value v = in.run_text(text, "<repl>");
    std::cout << "=> " << print_value(v) << "\n" << std::flush;
  } catch (const SheafError& e) {
    std::cout.flush();
    std::cerr << render_error(e, color) << std::flush;
  } catch (const obs::GuardBreach& b) {  // the report; the session goes on
    std::cout.flush();
    std::cerr << b.what() << std::flush;
  } catch (const Interrupted& stop) {
    std::cout.flush();
    std::cerr << render_error(SheafError(stop.what(), stop.loc), color) << std::flush;
  } catch (const std::exception& e) {  // out of memory, ...: reported, and the session goes on
    std::cout.flush();
    std::cerr << render_error(foreign_error(e), color) << std::flush;
  }
  g_evaluating = false;
}

// Runs `line` as a command when its first word names one: nullopt when it names none, else
// whether the REPL goes on.
std::optional<bool> run_command(Interp& in, const std::string& line) {
  size_t sp = line.find_first_of(" \t");
  const Command* c = line.starts_with(':') ? find_command(line.substr(0, sp)) : nullptr;
  if (!c) return std::nullopt;
  bool go_on = true;
  try {
    go_on = c->fn(in, sp == std::string::npos ? "" : trim(line.substr(sp)));
  } catch (const std::exception& e) {  // a command that fails leaves the session as it was
    std::cout.flush();
    std::cerr << render_error(foreign_error(e), false) << std::flush;
  }
  std::cout.flush();
  return go_on;
}

}  // namespace

int run_repl(Interp& in) {
  if (in.current_dir.empty()) in.current_dir = std::filesystem::current_path().string();
  bool color = isatty(2) && !std::getenv("NO_COLOR");
  LineInput input(in);
  std::cout << "Sheaf " << SHEAF_VERSION << " (:h for help)\n";
  std::string buf, line;
  for (;;) {
    Got got = input.read(buf.empty() ? "sheaf> " : "...    ", line);
    if (got == Got::Cancel) {
      std::cout << "\n";
      buf.clear();
      continue;
    }
    if (got == Got::Eof) {
      if (!trim(buf).empty()) evaluate(in, buf, color);  // reports the unclosed bracket
      if (input.tty()) std::cout << "\n";
      break;
    }
    if (buf.empty()) {
      std::string cmd = trim(line);
      if (cmd.empty()) continue;
      if (std::optional<bool> go_on = run_command(in, cmd)) {
        input.remember(cmd);
        if (!*go_on) break;
        continue;
      }
    }
    buf += line + "\n";
    if (read_status(buf) == ReadStatus::Incomplete) continue;
    input.remember(buf);
    evaluate(in, buf, color);
    buf.clear();
  }
  std::cout << "Bye!\n";
  return 0;
}

}  // namespace sheaf
