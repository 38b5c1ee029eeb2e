// runtime/content_hash.cpp — canonical serialization of functions and constants, FNV-1a-64 ×2.
#include "runtime/content_hash.hpp"

#include "base/hash.hpp"

#include <cstring>
#include <set>
#include <variant>

#include "eval/interp.hpp"
#include "tensor/random.hpp"
#include "value/function.hpp"

namespace sheaf {
namespace {

class Serializer {
 public:
  explicit Serializer(const Interp& in) : in_(in) {}
  std::string out;
  bool with_values = true;  // false: constants count by name only (code_hash)

  void function(const FnObj& fn) {
    tag('L');
    size(fn.body.size() + 1);
    form(Value::list(fn.params.patterns, ListKind::Bracket));
    if (!fn.params.rest.is_nil()) form(fn.params.rest);
    for (const Value& f : fn.body) form(f);
  }

  // Hashes of the globals a form refers to, appended after the form itself.
  void dependencies() {
    for (size_t i = 0; i < pending_.size(); ++i) {  // grows while dependencies are walked
      int id = pending_[i];
      const Interp::Global* g = in_.global(id);
      if (!g) continue;
      text('G', symbols::name(id));
      if (g->value.is(Kind::Fn)) function(g->value.as<FnObj>());
      else if (with_values) constant(g->value);
    }
  }

 private:
  const Interp& in_;
  std::vector<int> pending_;
  std::set<int> seen_;

  void tag(char c) { out.push_back(c); }
  void size(uint64_t n) { out.append(reinterpret_cast<const char*>(&n), sizeof n); }
  void text(char t, const std::string& s) {
    tag(t);
    size(s.size());
    out += s;
  }

  void form(const Value& v) {
    switch (v.kind()) {
      case Kind::Symbol: {
        int id = v.symbol();
        text('S', symbols::name(id));
        if (in_.global(id) && seen_.insert(id).second) pending_.push_back(id);
        return;
      }
      case Kind::Keyword: text('K', v.as_str()); return;
      case Kind::Str: text('T', v.as_str()); return;
      case Kind::Int: tag('I'); size(static_cast<uint64_t>(v.as_int())); return;
      case Kind::Float: {
        float f = v.as_float();
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        tag('F');
        size(bits);
        return;
      }
      case Kind::Bool: tag('B'); tag(v.as_bool() ? '1' : '0'); return;
      case Kind::Nil: tag('N'); return;
      case Kind::List: {
        const ListObj& l = v.as_list();
        bool quote = l.kind == ListKind::Paren && !l.items.empty() && l.items[0].is(Kind::Symbol) &&
                     symbols::name(l.items[0].symbol()) == "quote";
        tag(quote ? 'Q' : l.kind == ListKind::Bracket ? 'V' : l.kind == ListKind::Brace ? 'D' : 'L');
        size(l.items.size());
        if (l.suffix) tag(static_cast<char>('0' + static_cast<int>(*l.suffix)));
        for (const Value& x : l.items) form(x);
        return;
      }
      default: constant(v); return;
    }
  }

  // A `def` constant may be data nested millions deep: walked with an explicit stack (a key of
  // a dict entry, or a value), in the order a recursive walk would write.
  void constant(const Value& root) {
    std::vector<std::variant<const Value*, const std::string*>> todo{&root};
    while (!todo.empty()) {
      auto next = todo.back();
      todo.pop_back();
      if (const std::string** key = std::get_if<const std::string*>(&next)) {
        text('K', **key);
        continue;
      }
      const Value& v = *std::get<const Value*>(next);
      switch (v.kind()) {
        case Kind::Tensor: {
          const Tensor& t = v.as_tensor();
          tag('X');
          tag(static_cast<char>(t.dtype()));
          size(t.shape().size());
          for (int64_t d : t.shape()) size(static_cast<uint64_t>(d));
          if (!t.is_symbolic()) out.append(reinterpret_cast<const char*>(t.bytes()), t.nbytes());
          break;
        }
        case Kind::Dict: {
          const auto& entries = v.as_dict().entries;
          tag('D');
          size(entries.size());
          for (size_t i = entries.size(); i-- > 0;) {
            todo.emplace_back(&entries[i].second);
            todo.emplace_back(&entries[i].first);
          }
          break;
        }
        case Kind::List: {
          const auto& items = v.as_list().items;
          tag('L');
          size(items.size());
          for (size_t i = items.size(); i-- > 0;) todo.emplace_back(&items[i]);
          break;
        }
        case Kind::Fn: function(v.as<FnObj>()); break;
        case Kind::Builtin: text('S', std::string(v.as<BuiltinObj>().def->name)); break;
        default: form(v); break;
      }
    }
  }
};

}  // namespace

namespace {

std::string hash_of(const Interp& in, const Value& fn, bool with_values) {
  Serializer s(in);
  s.with_values = with_values;
  s.out = std::string("sheaf ") + SHEAF_VERSION + "|" + std::string(kRandomVersion) + "|";
  s.function(fn.as<FnObj>());
  s.dependencies();
  return fmt::format("{:016x}{:016x}", fnv1a64(s.out), fnv1a64(s.out, 0x84222325cbf29ce4ull));
}

}  // namespace

std::string content_hash(const Interp& in, const Value& fn) { return hash_of(in, fn, true); }
std::string code_hash(const Interp& in, const Value& fn) { return hash_of(in, fn, false); }

}  // namespace sheaf
