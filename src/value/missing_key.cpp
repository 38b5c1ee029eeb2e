// value/missing_key.cpp — nils that name the lookup that produced them (see missing_key.hpp).
#include "value/missing_key.hpp"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "value/printer.hpp"

namespace sheaf {
namespace {

constexpr size_t kMaxKeys = 20;  // keys named in the note

struct MissingKeyObj : Obj {
  SrcLoc site;
  std::string fn;
  Value key;
  std::vector<std::string> keys;  // the dict's first kMaxKeys keys
  size_t key_count = 0;
};

std::string describe(const MissingKeyObj& m) {
  std::string_view line = sources::line_text(m.site.file, m.site.line);
  std::string call = m.fn;
  if (m.site.col >= 1 && m.site.col - 1 + m.site.len <= line.size() && m.site.len > 0)
    call = fmt::format("`{}`", line.substr(m.site.col - 1, m.site.len));
  std::string keys = m.keys.empty() ? "the dict is empty" : "keys:";
  for (const std::string& k : m.keys) keys += " :" + k;
  if (m.key_count > m.keys.size()) keys += fmt::format(" ... ({} in all)", m.key_count);
  return fmt::format("the nil here is {} at {}, which found no key {} ({})", call, sources::describe(m.site), print_value(m.key, false), keys);
}

}  // namespace

Value missing_key_nil(const Value& coll, const Value& key, SrcLoc site, std::string_view fn) {
  if (!coll.is(Kind::Dict) || !site.valid()) return Value();
  auto m = std::make_shared<MissingKeyObj>();
  m->site = site;
  m->fn = fn;
  m->key = key;
  const auto& entries = coll.as_dict().entries;
  m->key_count = entries.size();
  for (size_t i = 0; i < entries.size() && i < kMaxKeys; ++i) m->keys.push_back(entries[i].first);
  return Value::object(Kind::Nil, std::move(m));
}

void note_missing_key(SheafError& e, std::span<const Value> args) {
  for (const Value& a : args) {
    if (!a.is_nil() || !a.raw()) continue;
    std::string note = describe(a.as<MissingKeyObj>());
    for (const std::string& n : e.notes)
      if (n == note) return;
    e.notes.push_back(std::move(note));
    return;
  }
}

}  // namespace sheaf
