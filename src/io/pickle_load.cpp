// io/pickle_load.cpp — the restricted pickle loader (SPEC §1.4): a pickle machine for the
// opcodes of protocols 2–5 that plain data and in-band NumPy arrays use. It never imports or
// calls anything: GLOBAL and STACK_GLOBAL resolve against an allowlist of reconstructors
// (below), each implemented here by building the data it would build, and any other global is
// refused at once with an error naming it ('posix.system', 'builtins.eval').
//
// The machine's objects live in one arena and are referred to by index (the stack, the memo
// and containers hold indices), so shared and even cyclic references cost no copies and free
// nothing twice; the result is converted to Sheaf values once per object it reaches (shared
// objects stay shared; a cycle is an error). Every operand is checked against the bytes left
// before it is read; strings and array data are views of the pickle's bytes until they become
// values, and an object takes 32 bytes, so memory stays within a small multiple of the file size
// (15 MB of 5 million tiny objects: 180 MB); the stack, the memo and the arena have fixed limits.
//
// Allowed globals and what they build:
//   numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') — an empty array that BUILD
//       fills with (version, shape, dtype, is_fortran, rawdata);
//   numpy.core.numeric._frombuffer(buffer, dtype, shape, order) — protocol 5, in-band buffers;
//   numpy.dtype(code, align, copy) — BUILD gives its byte order (version, '<', ...);
//   numpy.core.multiarray.scalar(dtype, bytes) — a NumPy scalar, loaded as a host number;
//   _codecs.encode(str, 'latin1') and builtins.bytes() — how protocol 2 writes bytes (empty
//       ones by the latter, as __builtin__.bytes);
//   collections.OrderedDict() — a dict;
// with numpy._core.* for numpy.core.* (NumPy 2 writes those names).
#include <cstring>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/stack.hpp"
#include "io/elements.hpp"
#include "io/data_file.hpp"
#include "io/pickle.hpp"
#include "tensor/layout.hpp"
#include "value/tensor_value.hpp"

namespace sheaf {

namespace {

constexpr size_t kMaxStack = size_t{1} << 20;    // entries on the stack (and marks)
constexpr size_t kMaxMemo = size_t{1} << 20;     // memo entries
constexpr size_t kMaxObjects = size_t{1} << 24;  // objects built (a real weights file has a few per array)

enum class Global : uint8_t { Reconstruct, Ndarray, FromBuffer, Dtype, Scalar, Encode, EmptyBytes, OrderedDict };

struct Allowed {
  std::string_view module, name;
  Global g;
};
constexpr Allowed kAllowed[] = {
    {"numpy.core.multiarray", "_reconstruct", Global::Reconstruct}, {"numpy._core.multiarray", "_reconstruct", Global::Reconstruct},
    {"numpy.core.numeric", "_frombuffer", Global::FromBuffer},      {"numpy._core.numeric", "_frombuffer", Global::FromBuffer},
    {"numpy.core.multiarray", "scalar", Global::Scalar},            {"numpy._core.multiarray", "scalar", Global::Scalar},
    {"numpy", "ndarray", Global::Ndarray},                          {"numpy", "dtype", Global::Dtype},
    {"_codecs", "encode", Global::Encode},                          {"collections", "OrderedDict", Global::OrderedDict},
    {"builtins", "bytes", Global::EmptyBytes},                      {"__builtin__", "bytes", Global::EmptyBytes},
};

enum class T : uint8_t { None, Bool, Int, Float, Str, Bytes, List, Tuple, Dict, Global, Dtype, Array };

std::string_view type_name(T t) {
  constexpr std::string_view kNames[] = {"None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "global", "dtype", "ndarray"};
  return kNames[static_cast<size_t>(t)];
}

// One object of the machine (32 bytes). The elements of containers (arena indices; a dict's are
// key, value, key, value, ...), text (a str's UTF-8, bytes, a global's "module.name", a dtype's
// code) and tensors live in side tables that `ref` indexes.
struct PyObj {
  T t = T::None;
  bool b = false;            // bool; array: a NumPy scalar (loaded as a host number)
  Global g{};                // global
  char order = '=';          // dtype: byte order ('<', '>', '|', '=')
  std::optional<Elem> elem;  // dtype: element type (none: not one Sheaf reads)
  bool built = false;        // array: its tensor exists
  uint32_t ref = 0;          // list, tuple, dict: seqs_[ref]; str, bytes, global, dtype: texts_[ref];
                             // built array: tensors_[ref]
  int64_t i = 0;
  double f = 0;
};
static_assert(sizeof(PyObj) <= 32);

class Machine {
 public:
  Machine(std::span<const std::byte> bytes, std::string_view what) : p_(bytes), what_(what) {
    heap_ = {PyObj{.t = T::None}, PyObj{.t = T::Bool, .b = true}, PyObj{.t = T::Bool, .b = false}};  // kNone, kTrue, kFalse
  }

  Value run() {
    for (;;) {
      op_at_ = pos_;
      auto op = static_cast<uint8_t>(u(1));
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.empty()) fail("STOP with an empty stack");
    if (pos_ != p_.size())
      fail(fmt::format("{} bytes follow the end of the pickle (several pickles in one file are not supported)", p_.size() - pos_));
    return to_value(stack_.back(), 0);
  }

 private:
  [[noreturn]] void fail(std::string_view msg) const {
    throw SheafError(fmt::format("{}: at byte {} of the pickle: {}", what_, op_at_, msg));
  }
  [[noreturn]] void not_data(std::string_view msg) const {  // the finished result cannot be loaded
    throw SheafError(fmt::format("{}: cannot load the pickle: {}", what_, msg));
  }

  // ---- operands: every read is checked against the bytes left ------------------------------
  const std::byte* take(uint64_t n) {
    if (n > p_.size() - pos_) fail(fmt::format("truncated: an operand of {} bytes, {} left", n, p_.size() - pos_));
    const std::byte* q = p_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return q;
  }
  uint64_t u(size_t n) {  // little-endian unsigned of n ≤ 8 bytes
    const std::byte* q = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(q[k]) << (8 * k);
    return v;
  }
  std::string_view text(uint64_t n) {  // a view of the pickle's bytes: no copy
    const std::byte* q = take(n);
    return std::string_view(reinterpret_cast<const char*>(q), static_cast<size_t>(n));
  }
  std::string_view line() {  // GLOBAL's operands: "module\n", "name\n"
    size_t start = pos_;
    while (pos_ < p_.size() && p_[pos_] != std::byte{'\n'}) ++pos_;
    if (pos_ == p_.size()) fail("truncated: GLOBAL needs 'module\\nname\\n'");
    return std::string_view(reinterpret_cast<const char*>(p_.data() + start), pos_++ - start);
  }
  int64_t long_bytes(uint64_t n) {  // LONG1/LONG4: two's complement, little-endian
    const std::byte* q = take(n);
    if (n > 8) fail(fmt::format("an integer of {} bytes does not fit in 64 bits", n));
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(q[k]) << (8 * k);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(q[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(v);
  }

  // ---- the arena, the stack and the memo ------------------------------------------------------
  uint32_t make(PyObj o) {
    if (heap_.size() >= kMaxObjects) fail(fmt::format("more than {} objects", kMaxObjects));
    heap_.push_back(std::move(o));
    return static_cast<uint32_t>(heap_.size() - 1);
  }
  void push(uint32_t i) {
    if (stack_.size() >= kMaxStack) fail(fmt::format("the stack grows beyond {} entries", kMaxStack));
    stack_.push_back(i);
  }
  void push(PyObj o) { push(make(std::move(o))); }
  uint32_t pop() {
    if (stack_.size() <= floor()) fail("pop from an empty stack");
    uint32_t i = stack_.back();
    stack_.pop_back();
    return i;
  }
  uint32_t top() {
    if (stack_.size() <= floor()) fail("the stack is empty");
    return stack_.back();
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<uint32_t> pop_mark() {  // the objects pushed since the last MARK
    if (marks_.empty()) fail("no MARK to pop to");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  PyObj& at(uint32_t i) { return heap_[i]; }
  PyObj& expect(uint32_t i, T t, std::string_view who) {
    if (heap_[i].t != t) fail(fmt::format("{} needs a {}, got a {}", who, type_name(t), type_name(heap_[i].t)));
    return heap_[i];
  }
  void memo_put(uint64_t k) {
    if (memo_.size() >= kMaxMemo && !memo_.count(k)) fail(fmt::format("more than {} memo entries", kMaxMemo));
    memo_[k] = top();
  }
  void memo_get(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail(fmt::format("memo entry {} was never stored", k));
    push(it->second);
  }

  static PyObj int_obj(int64_t v) { return PyObj{.t = T::Int, .i = v}; }
  PyObj seq_obj(T t, std::vector<uint32_t> items) {
    seqs_.push_back(std::move(items));
    return PyObj{.t = t, .ref = static_cast<uint32_t>(seqs_.size() - 1)};
  }
  std::vector<uint32_t>& elems(const PyObj& o) { return seqs_[o.ref]; }
  PyObj text_obj(T t, std::string_view s) {  // s lies in the pickle's bytes or in owned_
    texts_.push_back(s);
    return PyObj{.t = t, .ref = static_cast<uint32_t>(texts_.size() - 1)};
  }
  PyObj owned_text_obj(T t, std::string s) { return text_obj(t, owned_.emplace_back(std::move(s))); }
  std::string_view text_of(const PyObj& o) const { return texts_[o.ref]; }
  std::string_view str(uint32_t i, std::string_view who) { return text_of(expect(i, T::Str, who)); }
  PyObj array_obj(Tensor t, bool scalar) {
    tensors_.push_back(std::move(t));
    return PyObj{.t = T::Array, .b = scalar, .built = true, .ref = static_cast<uint32_t>(tensors_.size() - 1)};
  }

  void step(uint8_t op);
  void resolve(std::string_view module, std::string_view name);
  void call(uint32_t callable, uint32_t args);
  void build(uint32_t target, uint32_t state);

  // ---- the reconstructors ---------------------------------------------------------------------
  PyObj dtype(const std::vector<uint32_t>& args);
  Tensor array_data(const PyObj& dtype, const Shape& shape, bool fortran, const PyObj& data);
  Shape shape_of(uint32_t i);
  const PyObj& dtype_arg(uint32_t i, std::string_view who);
  std::string latin1(std::string_view utf8);

  Value to_value(uint32_t i, int depth);
  Value convert(const PyObj& o, int depth);

  std::span<const std::byte> p_;
  std::string_view what_;
  size_t pos_ = 0, op_at_ = 0;
  static constexpr uint32_t kNone = 0, kTrue = 1, kFalse = 2;  // shared, immutable
  std::deque<PyObj> heap_;  // a deque: references stay valid while objects are added
  std::deque<std::vector<uint32_t>> seqs_;
  std::vector<std::string_view> texts_;
  std::deque<std::string> owned_;  // text made here (global names, decoded bytes)
  std::vector<Tensor> tensors_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::unordered_map<uint32_t, Value> converted_;  // only the objects the result reaches
  std::unordered_set<uint32_t> converting_;        // being converted: a cycle when met again
};

void Machine::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      uint64_t v = u(1);
      if (v > 5) fail(fmt::format("protocol {} is newer than 5", v));
      return;
    }
    case 0x95: {  // FRAME: a length hint; the frame must lie within the file
      uint64_t n = u(8);
      if (n > p_.size() - pos_) fail(fmt::format("truncated: a frame of {} bytes, {} left", n, p_.size() - pos_));
      return;
    }
    case '(':
      if (marks_.size() >= kMaxStack) fail("too many nested MARKs");
      marks_.push_back(stack_.size());
      return;
    case '0': pop(); return;           // POP
    case '1': pop_mark(); return;      // POP_MARK
    case '2': push(top()); return;     // DUP
    case 'N': push(kNone); return;
    case 0x88: push(kTrue); return;   // NEWTRUE
    case 0x89: push(kFalse); return;  // NEWFALSE
    case 'J': push(int_obj(static_cast<int32_t>(static_cast<uint32_t>(u(4))))); return;  // BININT
    case 'K': push(int_obj(static_cast<int64_t>(u(1)))); return;                          // BININT1
    case 'M': push(int_obj(static_cast<int64_t>(u(2)))); return;                          // BININT2
    case 0x8a: push(int_obj(long_bytes(u(1)))); return;                                   // LONG1
    case 0x8b: push(int_obj(long_bytes(u(4)))); return;                                   // LONG4
    case 'G': {  // BINFLOAT: big-endian IEEE double
      uint64_t be = 0;
      const std::byte* q = take(8);
      for (int k = 0; k < 8; ++k) be = be << 8 | static_cast<uint64_t>(q[k]);
      PyObj o{.t = T::Float};
      std::memcpy(&o.f, &be, 8);
      push(std::move(o));
      return;
    }
    case 0x8c: push(text_obj(T::Str, text(u(1)))); return;    // SHORT_BINUNICODE
    case 'X': push(text_obj(T::Str, text(u(4)))); return;     // BINUNICODE
    case 0x8d: push(text_obj(T::Str, text(u(8)))); return;    // BINUNICODE8
    case 'C': push(text_obj(T::Bytes, text(u(1)))); return;   // SHORT_BINBYTES
    case 'B': push(text_obj(T::Bytes, text(u(4)))); return;   // BINBYTES
    case 0x8e: case 0x96: push(text_obj(T::Bytes, text(u(8)))); return;  // BINBYTES8, BYTEARRAY8
    case ']': push(seq_obj(T::List, {})); return;            // EMPTY_LIST
    case ')': push(seq_obj(T::Tuple, {})); return;           // EMPTY_TUPLE
    case '}': push(seq_obj(T::Dict, {})); return;            // EMPTY_DICT
    case 'l': push(seq_obj(T::List, pop_mark())); return;    // LIST
    case 't': push(seq_obj(T::Tuple, pop_mark())); return;   // TUPLE
    case 0x85: case 0x86: case 0x87: {                       // TUPLE1, TUPLE2, TUPLE3
      std::vector<uint32_t> items(op - 0x84);
      for (size_t k = items.size(); k-- > 0;) items[k] = pop();
      push(seq_obj(T::Tuple, std::move(items)));
      return;
    }
    case 'd': {  // DICT
      std::vector<uint32_t> items = pop_mark();
      if (items.size() % 2) fail("DICT with an odd number of items");
      push(seq_obj(T::Dict, std::move(items)));
      return;
    }
    case 'a': {  // APPEND
      uint32_t x = pop();
      elems(expect(top(), T::List, "APPEND")).push_back(x);
      return;
    }
    case 'e': {  // APPENDS
      std::vector<uint32_t> xs = pop_mark();
      auto& items = elems(expect(top(), T::List, "APPENDS"));
      items.insert(items.end(), xs.begin(), xs.end());
      return;
    }
    case 's': {  // SETITEM
      uint32_t v = pop(), k = pop();
      auto& items = elems(expect(top(), T::Dict, "SETITEM"));
      items.push_back(k);
      items.push_back(v);
      return;
    }
    case 'u': {  // SETITEMS
      std::vector<uint32_t> kv = pop_mark();
      if (kv.size() % 2) fail("SETITEMS with an odd number of items");
      auto& items = elems(expect(top(), T::Dict, "SETITEMS"));
      items.insert(items.end(), kv.begin(), kv.end());
      return;
    }
    case 'q': memo_put(u(1)); return;                     // BINPUT
    case 'r': memo_put(u(4)); return;                     // LONG_BINPUT
    case 0x94: memo_put(memo_.size()); return;            // MEMOIZE
    case 'h': memo_get(u(1)); return;                     // BINGET
    case 'j': memo_get(u(4)); return;                     // LONG_BINGET
    case 'c': {                                           // GLOBAL
      std::string_view module = line();
      resolve(module, line());
      return;
    }
    case 0x93: {  // STACK_GLOBAL
      uint32_t name = pop(), module = pop();
      resolve(str(module, "STACK_GLOBAL"), str(name, "STACK_GLOBAL"));
      return;
    }
    case 'R': {  // REDUCE: callable(*args)
      uint32_t args = pop();
      call(pop(), args);
      return;
    }
    case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
      uint32_t args = pop();
      call(pop(), args);
      return;
    }
    case 0x92: {  // NEWOBJ_EX: cls.__new__(cls, *args, **kwargs)
      uint32_t kwargs = pop(), args = pop();
      if (!elems(expect(kwargs, T::Dict, "NEWOBJ_EX")).empty()) fail("NEWOBJ_EX with keyword arguments");
      call(pop(), args);
      return;
    }
    case 'b': {  // BUILD: obj.__setstate__(state)
      uint32_t state = pop();
      build(top(), state);
      return;
    }
    case 0x8f: case 0x90: case 0x91: fail("sets are not supported");
    case 0x97: case 0x98: fail("out-of-band buffers are not supported (pickle with the buffers in-band)");
    case 'P': case 'Q': fail("persistent ids are not supported (a torch.save file? load .safetensors instead)");
    default: break;
  }
  if (op >= 0x20 && op < 0x7f)
    fail(fmt::format("opcode '{}' is not supported (protocol 0 or 1 text opcodes, extension codes or object construction)",
                     static_cast<char>(op)));
  fail(fmt::format("unknown opcode 0x{:02x}", op));
}

void Machine::resolve(std::string_view module, std::string_view name) {
  for (const Allowed& a : kAllowed) {
    if (a.module != module || a.name != name) continue;
    PyObj o = owned_text_obj(T::Global, fmt::format("{}.{}", module, name));
    o.g = a.g;
    push(std::move(o));
    return;
  }
  std::string allowed;
  for (const Allowed& a : kAllowed) allowed += fmt::format("{}{}.{}", allowed.empty() ? "" : ", ", a.module, a.name);
  throw SheafError(fmt::format("{}: refused global '{}.{}' at byte {}: pickles load only plain data and NumPy arrays, "
                               "and nothing is imported or called (allowed: {})",
                               what_, module, name, op_at_, allowed));
}

Shape Machine::shape_of(uint32_t i) {
  Shape s;
  for (uint32_t d : elems(expect(i, T::Tuple, "an array shape"))) {
    const PyObj& o = expect(d, T::Int, "an array dimension");
    if (o.i < 0) fail(fmt::format("negative array dimension {}", o.i));
    s.push_back(o.i);
  }
  return s;
}

const PyObj& Machine::dtype_arg(uint32_t i, std::string_view who) {
  const PyObj& d = expect(i, T::Dtype, who);
  if (!d.elem)
    fail(fmt::format("unsupported NumPy dtype '{}' (supported: f4 f2 i4 u4 b1, and i1 u1 i2 i8 as i32, f8 as f32)", text_of(d)));
  if (d.order == '>' && elem_size(*d.elem) > 1) fail(fmt::format("big-endian NumPy data ('>{}') is not supported", text_of(d)));
  return d;
}

// numpy.dtype(code, align, copy): the element type from the code; BUILD gives the byte order.
PyObj Machine::dtype(const std::vector<uint32_t>& args) {
  if (args.empty()) fail("numpy.dtype without arguments");
  PyObj o = text_obj(T::Dtype, str(args[0], "numpy.dtype"));
  std::string_view code = text_of(o);
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '=')) {
    o.order = code[0];
    code.remove_prefix(1);
  }
  o.elem = numpy_elem(code);
  return o;
}

// Array elements from a bytes object of exactly shape × item size bytes (C or Fortran order).
Tensor Machine::array_data(const PyObj& dtype, const Shape& shape, bool fortran, const PyObj& data) {
  if (data.t != T::Bytes) fail(fmt::format("array data must be bytes, got a {} (object arrays are not supported)", type_name(data.t)));
  auto extent = checked_extent(shape, elem_size(*dtype.elem));
  if (!extent) fail("the array shape is too large");
  std::string_view raw = text_of(data);
  if (extent->second != raw.size())
    fail(fmt::format("an array of shape ({}) and dtype {} needs {} bytes of data, got {}", fmt::join(shape, ", "), text_of(dtype),
                     extent->second, raw.size()));
  auto bytes = reinterpret_cast<const std::byte*>(raw.data());
  if (!fortran || shape.size() < 2) return decode(*dtype.elem, shape, bytes, what_);
  Shape reversed(shape.rbegin(), shape.rend());  // Fortran order is C order of the reversed shape
  std::vector<int64_t> perm(shape.size());
  for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int64_t>(perm.size() - 1 - k);
  return transpose(decode(*dtype.elem, reversed, bytes, what_), perm);
}

// A str of code points < 256 as the bytes they stand for (_codecs.encode(s, 'latin1')).
std::string Machine::latin1(std::string_view s) {
  std::string out;
  for (size_t k = 0; k < s.size(); ++k) {
    auto c = static_cast<uint8_t>(s[k]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c & 0xe0) == 0xc0 && k + 1 < s.size() && c <= 0xc3) {  // U+0080..U+00FF
      out += static_cast<char>(((c & 0x1f) << 6) | (static_cast<uint8_t>(s[++k]) & 0x3f));
    } else {
      fail("_codecs.encode of a string with characters beyond latin-1");
    }
  }
  return out;
}

void Machine::call(uint32_t callable, uint32_t args_index) {
  const PyObj& f = expect(callable, T::Global, "REDUCE");
  std::vector<uint32_t> args = elems(expect(args_index, T::Tuple, "REDUCE's arguments"));
  auto arity = [&](size_t lo, size_t hi) {
    if (args.size() < lo || args.size() > hi) fail(fmt::format("{} with {} arguments", text_of(f), args.size()));
  };
  switch (f.g) {
    case Global::Reconstruct: {  // (numpy.ndarray, (0,), b'b'): an array that BUILD fills
      arity(3, 3);
      if (at(args[0]).t != T::Global || at(args[0]).g != Global::Ndarray) fail("_reconstruct of a class other than numpy.ndarray");
      push(PyObj{.t = T::Array});
      return;
    }
    case Global::FromBuffer: {  // (buffer, dtype, shape, order)
      arity(4, 4);
      const PyObj& d = dtype_arg(args[1], "_frombuffer");
      std::string_view order = str(args[3], "_frombuffer's order");
      if (order != "C" && order != "F") fail(fmt::format("_frombuffer with order '{}'", order));
      push(array_obj(array_data(d, shape_of(args[2]), order == "F", at(args[0])), false));
      return;
    }
    case Global::Dtype: push(dtype(args)); return;
    case Global::Scalar: {  // (dtype, bytes of one element)
      arity(2, 2);
      const PyObj& d = dtype_arg(args[0], "numpy scalar");
      push(array_obj(array_data(d, {}, false, at(args[1])), true));
      return;
    }
    case Global::Encode: {  // (str, 'latin1')
      arity(1, 2);
      std::string_view enc = args.size() > 1 ? str(args[1], "_codecs.encode's encoding") : "utf-8";
      std::string_view s = str(args[0], "_codecs.encode");
      if (enc == "latin1" || enc == "latin-1") push(owned_text_obj(T::Bytes, latin1(s)));
      else if (enc == "utf-8" || enc == "utf8") push(text_obj(T::Bytes, s));
      else fail(fmt::format("_codecs.encode with encoding '{}'", enc));
      return;
    }
    case Global::EmptyBytes:  // () only: bytes(n) would allocate n bytes
      arity(0, 0);
      push(text_obj(T::Bytes, ""));
      return;
    case Global::OrderedDict: {  // () or ([(k, v), ...])
      arity(0, 1);
      std::vector<uint32_t> items;
      if (!args.empty())
        for (uint32_t pair : elems(expect(args[0], T::List, "OrderedDict's items"))) {
          const PyObj& kv = expect(pair, T::Tuple, "an OrderedDict item");
          if (elems(kv).size() != 2) fail("an OrderedDict item that is not a (key, value) pair");
          items.insert(items.end(), elems(kv).begin(), elems(kv).end());
        }
      push(seq_obj(T::Dict, std::move(items)));
      return;
    }
    case Global::Ndarray: break;
  }
  fail(fmt::format("{} cannot be called here", text_of(f)));
}

void Machine::build(uint32_t target, uint32_t state_index) {
  const std::vector<uint32_t>& st = elems(expect(state_index, T::Tuple, "BUILD's state"));
  PyObj& o = at(target);
  if (o.t == T::Dtype) {  // (version, byte order, subarray, names, fields, elsize, alignment, flags[, metadata])
    if (st.size() < 5) fail("a dtype state with fewer than 5 items");
    std::string_view order = str(st[1], "the dtype's byte order");
    if (order.size() != 1) fail(fmt::format("dtype byte order '{}'", order));
    for (size_t k = 2; k < 5; ++k)
      if (at(st[k]).t != T::None) o.elem.reset();  // subarrays and records are not supported
    o.order = order[0];
    return;
  }
  if (o.t == T::Array && !o.built) {  // ([version,] shape, dtype, is_fortran, rawdata)
    size_t k = st.size() == 5 ? 1 : 0;
    if (st.size() != 4 + k) fail(fmt::format("an ndarray state of {} items", st.size()));
    Shape shape = shape_of(st[k]);
    const PyObj& d = dtype_arg(st[k + 1], "an ndarray");
    bool fortran = expect(st[k + 2], T::Bool, "the ndarray's Fortran flag").b;
    Tensor t = array_data(d, shape, fortran, at(st[k + 3]));
    at(target) = array_obj(std::move(t), false);
    return;
  }
  fail(fmt::format("BUILD on a {} is not supported", type_name(o.t)));
}

Value Machine::to_value(uint32_t i, int depth) {
  if (auto it = converted_.find(i); it != converted_.end()) return it->second;
  if (converting_.count(i)) not_data("the data contains itself (a cycle)");
  if (depth > kMaxDataNesting || stack_exhausted())
    throw SheafError(fmt::format("{}: the data nests deeper than {} levels", what_, kMaxDataNesting));
  converting_.insert(i);
  Value v = convert(heap_[i], depth);
  converting_.erase(i);
  converted_.emplace(i, v);
  return v;
}

Value Machine::convert(const PyObj& o, int depth) {
  switch (o.t) {
    case T::None: return Value();
    case T::Bool: return Value::boolean(o.b);
    case T::Int: return Value::integer(o.i);
    case T::Float: return Value::real(static_cast<float>(o.f));
    case T::Str: case T::Bytes: return Value::string(std::string(text_of(o)));  // bytes load as a string of the same bytes
    case T::List: case T::Tuple: {
      std::vector<Value> items;
      items.reserve(elems(o).size());
      for (uint32_t x : elems(o)) items.push_back(to_value(x, depth + 1));
      return o.t == T::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case T::Dict: {
      std::vector<std::pair<std::string, Value>> entries;
      for (size_t k = 0; k + 1 < elems(o).size(); k += 2) {
        const PyObj& key = heap_[elems(o)[k]];
        std::string name = key.t == T::Str || key.t == T::Bytes ? std::string(text_of(key))
                           : key.t == T::Int                     ? std::to_string(key.i)
                                                                 : "";
        if (key.t != T::Str && key.t != T::Bytes && key.t != T::Int)
          not_data(fmt::format("a dict key of type {} (keys must be strings or integers)", type_name(key.t)));
        entries.emplace_back(std::move(name), to_value(elems(o)[k + 1], depth + 1));
      }
      return make_dict(std::move(entries));
    }
    case T::Array:
      if (!o.built) not_data("an ndarray that was never filled (BUILD missing)");
      return o.b ? scalar_value(tensors_[o.ref]) : Value::tensor(tensors_[o.ref]);
    case T::Global: not_data(fmt::format("a reference to {} is not data", text_of(o)));
    case T::Dtype: not_data(fmt::format("a NumPy dtype ('{}') is not data", text_of(o)));
  }
  return Value();
}

}  // namespace

Value parse_pickle(std::span<const std::byte> bytes, std::string_view what) { return Machine(bytes, what).run(); }

Value load_pickle(const std::string& path) {
  const std::string bytes = read_file(path);
  return parse_pickle(std::as_bytes(std::span(bytes)), fmt::format("'{}'", path));
}

}  // namespace sheaf
