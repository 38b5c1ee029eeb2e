// builtins/io.cpp — `io`, the single side-effect entry point for files and the OS (SPEC §7.2).
// (io "load" path [hint]), (io "save" path value [hint]), (io "read" path), (io "lines" path),
// (io "exists" path), (io "append" path row) (a row added to a .jsonl/.csv log, io/append.hpp),
// (io "entropy" [n]), (io "clock") — seconds on a monotonic clock since its first reading, as a
// float, for timing epochs and steps (an extension: Sheaf 2.x had no clock). Formats live in
// src/io; errors there name the file and are prefixed here with "io <verb>: ". `lines` returns a
// list of strings (not yet lazy).
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "io/append.hpp"
#include "io/formats.hpp"
#include "io/io.hpp"

namespace sheaf {
namespace {

constexpr std::string_view kVerbs[] = {"load", "save", "read", "lines", "exists", "append", "entropy", "clock"};

// Arity of each verb, counting the verb: {min, max}.
std::pair<size_t, size_t> verb_arity(std::string_view v) {
  if (v == "load") return {2, 3};
  if (v == "save") return {3, 4};
  if (v == "append") return {3, 3};
  if (v == "entropy") return {1, 2};
  if (v == "clock") return {1, 1};
  return {2, 2};
}

std::string_view verb_usage(std::string_view v) {
  if (v == "load") return "(io \"load\" path [hint])";
  if (v == "save") return "(io \"save\" path value [hint])";
  if (v == "append") return "(io \"append\" path row)";
  if (v == "entropy") return "(io \"entropy\" [n])";
  if (v == "clock") return "(io \"clock\")";
  if (v == "read") return "(io \"read\" path)";
  if (v == "lines") return "(io \"lines\" path)";
  return "(io \"exists\" path)";
}

Value run_verb(Interp& in, const CallArgs& a, const std::string& verb) {
  if (verb == "clock") {  // relative to the first reading: f32 keeps 0.25 ms resolution for an hour
    static const auto start = std::chrono::steady_clock::now();
    return Value::real(static_cast<float>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  }
  if (verb == "entropy") {
    int64_t n = a.size() > 1 ? arg_int(a, 1) : 4;
    if (n < 1 || n > 8) throw SheafError(fmt::format("n must be 1 to 8 bytes, got {}", n), a.site);
    return Value::integer(os_entropy(static_cast<int>(n)));
  }
  if (!a[1].is(Kind::Str)) type_error(a, 1, "a path string");
  const std::string& path = a[1].as_str();
  if (verb == "load") return io_load(path, a.size() > 2 ? a[2] : Value(), in.limits().max_elements);
  if (verb == "save") {
    io_save(path, a[2], a.size() > 3 ? a[3] : Value());
    return Value();
  }
  if (verb == "append") {
    io_append(path, a[2]);
    return Value();
  }
  if (verb == "read") return load_text(path);
  if (verb == "lines") return load_lines(path);
  std::error_code ec;
  return Value::boolean(std::filesystem::exists(path, ec));
}

Value b_io(Interp& in, const CallArgs& a) {
  auto verb = key_name(a[0]);
  if (!verb) type_error(a, 0, "a verb string (\"load\", \"save\", ...)");
  if (std::find(std::begin(kVerbs), std::end(kVerbs), std::string_view(*verb)) == std::end(kVerbs)) {
    SheafError e(fmt::format("io: unknown verb '{}' (verbs: load, save, read, lines, exists, append, entropy, clock)", *verb), a.site);
    auto near = suggest_names(*verb, {std::begin(kVerbs), std::end(kVerbs)});
    if (!near.empty()) e.hint = fmt::format("did you mean \"{}\"?", near[0]);
    throw e;
  }
  auto [lo, hi] = verb_arity(*verb);
  if (a.size() < lo || a.size() > hi)
    throw SheafError(fmt::format("io {}: expected {}", *verb, verb_usage(*verb)), a.site);
  try {
    return run_verb(in, a, *verb);
  } catch (SheafError& e) {
    SheafError wrapped(fmt::format("io {}: {}", *verb, e.what()), e.loc.valid() ? e.loc : a.site, e.hint);
    wrapped.notes = e.notes;
    throw wrapped;
  }
}

const BuiltinDef kIo[] = {
    {"io", "(io verb [path] [value] [hint])",
     "Files and the OS: \"load\"/\"save\" safetensors, npy, .bin, IDX, JSON, JSONL, text, pickle (restricted); \"read\", "
     "\"lines\", \"exists\"; \"append\" a row to a .jsonl or .csv log; \"entropy\", \"clock\".",
     b_io, 1, 4, true},
};

}  // namespace

std::span<const BuiltinDef> io_builtins() { return kIo; }

}  // namespace sheaf
