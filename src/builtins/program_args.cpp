// builtins/program_args.cpp — `(args defaults [words])` (SPEC §10.1): the program's command-line
// words (default: (argv)) read against a dict of defaults, whose values give each key's type.
//   key=value, --key value, --key=value   set key (int, float, string, keyword or boolean)
//   --flag, flag (a boolean key alone)     set it true; --no-flag sets it false; --flag false too
//   --help, -h                             print the keys with their defaults (and the program's
//                                          first comment block) on stdout and exit with status 0
// An unknown key is an error with a did-you-mean; a value that does not parse names the key and
// the type it needs. Keys whose default is a list, dict or tensor cannot be set.
#include <charconv>
#include <cstdlib>
#include <iostream>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "value/printer.hpp"

namespace sheaf {
namespace {

// The type a key's default gives it, as help and errors name it; "" when it cannot be set.
std::string_view type_name(const Value& d) {
  switch (d.kind()) {
    case Kind::Int: return "INT";
    case Kind::Float: return "FLOAT";
    case Kind::Bool: return "BOOL";
    case Kind::Keyword: return "KEYWORD";
    case Kind::Str: case Kind::Nil: return "STRING";
    default: return "";
  }
}

std::optional<bool> parse_bool(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  return std::nullopt;
}

Value parse_value(const std::string& key, const Value& d, const std::string& text, SrcLoc site) {
  auto bad = [&](std::string_view expected) -> SheafError {
    return SheafError(fmt::format("args: {}={}: expected {} (the default is {})", key, text, expected, print_value(d)), site);
  };
  switch (d.kind()) {
    case Kind::Int: {
      int64_t i = 0;
      auto r = std::from_chars(text.data(), text.data() + text.size(), i);
      if (r.ec != std::errc() || r.ptr != text.data() + text.size()) throw bad("an integer");
      return Value::integer(i);
    }
    case Kind::Float: {
      char* end = nullptr;
      double x = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size()) throw bad("a number");
      return Value::real(static_cast<float>(x));
    }
    case Kind::Bool: {
      std::optional<bool> b = parse_bool(text);
      if (!b) throw bad("true or false");
      return Value::boolean(*b);
    }
    case Kind::Keyword: return Value::keyword(text.starts_with(':') ? text.substr(1) : text);
    case Kind::Str: case Kind::Nil: return Value::string(text);
    default:
      throw SheafError(fmt::format("args: '{}' has a {} default, which cannot be set from the command line", key,
                                   kind_name(d.kind())),
                       site);
  }
}

// The leading ';;' comment block of the program (without a `-*- mode -*-` line), for --help.
std::string leading_comment(uint32_t file) {
  std::string out;
  for (uint32_t line = 1;; ++line) {
    std::string_view t = sources::line_text(file, line);
    if (!t.starts_with(";")) break;
    t.remove_prefix(t.find_first_not_of(';'));
    if (t.starts_with(" ")) t.remove_prefix(1);
    if (t.find("-*-") != std::string_view::npos) continue;
    out += std::string(t) + "\n";
  }
  return out;
}

[[noreturn]] void print_help(Interp& in, const DictObj& defaults, SrcLoc site) {
  std::ostream& out = in.out();
  if (std::string c = leading_comment(site.file); !c.empty()) out << c << "\n";
  const std::string& file = sources::path(site.file);
  out << "usage: sheaf " << (file.starts_with("<") ? "-c EXPR" : file) << " [key=value | --key value | --flag] ...\n\n"
      << "keys (defaults):\n";
  for (const auto& [k, d] : defaults.entries) {
    std::string_view type = type_name(d);
    std::string key = d.is(Kind::Bool) ? "--" + k : fmt::format("--{} {}", k, type.empty() ? "(fixed)" : type);
    out << fmt::format("  {:<24} {}\n", key, print_value(d));
  }
  out.flush();
  std::cout.flush();
  std::exit(0);
}

[[noreturn]] void unknown_key(const std::string& key, const DictObj& defaults, SrcLoc site) {
  std::vector<std::string> keys;
  std::string list;
  for (const auto& [k, d] : defaults.entries) {
    keys.push_back(k);
    list += (list.empty() ? "" : ", ") + k;
  }
  SheafError e(fmt::format("args: unknown key '{}' (keys: {})", key, list.empty() ? "none" : list), site);
  std::vector<std::string> near = suggest_names(key, keys);
  if (!near.empty()) e.hint = fmt::format("did you mean '{}'?", near[0]);
  throw e;
}

Value b_args(Interp& in, const CallArgs& a) {
  if (!a[0].is(Kind::Dict)) type_error(a, 0, "a dict of defaults such as {:steps 100 :lr 0.001}");
  const DictObj& defaults = a[0].as_dict();
  std::vector<std::string> words;
  if (a.size() > 1) {
    if (!a[1].is_list()) type_error(a, 1, "a list of strings");
    for (const Value& w : a[1].as_list().items) {
      if (!w.is(Kind::Str)) type_error(a, 1, "a list of strings");
      words.push_back(w.as_str());
    }
  } else {
    words = in.program_args;
  }
  for (const std::string& w : words)
    if (w == "--help" || w == "-h") print_help(in, defaults, a.site);
  std::vector<std::pair<std::string, Value>> result = defaults.entries;
  auto set = [&](const std::string& key, const std::string& text) {
    const Value* d = defaults.find(key);
    if (!d) unknown_key(key, defaults, a.site);
    Value v = parse_value(key, *d, text, a.site);
    for (auto& [k, x] : result)
      if (k == key) x = v;
  };
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    size_t eq = w.find('=');
    bool dashed = w.starts_with("--") && w.size() > 2;
    std::string key = w.substr(dashed ? 2 : 0, eq == std::string::npos ? std::string::npos : eq - (dashed ? 2 : 0));
    if (eq != std::string::npos) {
      set(key, w.substr(eq + 1));
      continue;
    }
    const Value* d = defaults.find(key);
    if (!d && dashed && key.starts_with("no-") && defaults.find(key.substr(3)) && defaults.find(key.substr(3))->is(Kind::Bool)) {
      set(key.substr(3), "false");
    } else if (d && d->is(Kind::Bool)) {  // a flag, or --flag true|false
      bool valued = dashed && i + 1 < words.size() && parse_bool(words[i + 1]);
      set(key, valued ? words[++i] : "true");
    } else if (dashed && d) {
      if (i + 1 >= words.size())
        throw SheafError(fmt::format("args: --{} needs a value ({})", key, type_name(*d).empty() ? "fixed" : type_name(*d)), a.site);
      set(key, words[++i]);
    } else if (d) {
      throw SheafError(fmt::format("args: '{}' needs a value: {}=VALUE or --{} VALUE", key, key, key), a.site);
    } else {
      unknown_key(key, defaults, a.site);
    }
  }
  return make_dict(std::move(result));
}

const BuiltinDef kProgramArgs[] = {
    {"args", "(args defaults [words])",
     "The command line (after FILE; default (argv)) read against defaults: key=value, --key value, --flag; --help lists the keys.",
     b_args, 1, 2, true},
};

}  // namespace

std::span<const BuiltinDef> program_args_builtins() { return kProgramArgs; }

}  // namespace sheaf
