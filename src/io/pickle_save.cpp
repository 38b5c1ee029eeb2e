// io/pickle_save.cpp — `io "save"` to .pkl/.pickle (SPEC §1.4): protocol 4, the opcodes NumPy
// and Python's pickler themselves write, so that pickle.load with NumPy (1.x or 2.x) reads the
// file back as nested dicts, lists and tuples of NumPy arrays and Python numbers.
//
// A tensor becomes numpy.core.multiarray._reconstruct(numpy.ndarray, (0,), b'b') filled by
// BUILD with (1, shape, dtype, False, C-order bytes), and a dtype numpy.dtype(code, False, True)
// with BUILD (3, byte order, None, None, None, -1, -1, 0) — exactly what NumPy 1.x pickles; NumPy 2
// still reads those names. The globals and dtypes are memoized and fetched again by BINGET.
// Tensor bytes go straight to the file (no copy of the data in memory).
#include <bit>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "base/error.hpp"
#include "base/stack.hpp"
#include "io/atomic_write.hpp"
#include "io/formats.hpp"
#include "io/pickle.hpp"
#include "value/handle.hpp"

namespace sheaf {

namespace {

class Writer {
 public:
  Writer(AtomicFile& f, const std::string& path) : f_(f), path_(path) {}

  void run(const Value& v) {
    op(0x80);  // PROTO 4
    op(4);
    value(v, "", 0);
    op('.');  // STOP
    flush();
  }

 private:
  void op(uint8_t b) { buf_ += static_cast<char>(b); }
  void le(uint64_t v, size_t n) {
    for (size_t k = 0; k < n; ++k) op(static_cast<uint8_t>(v >> (8 * k)));
  }
  void flush() {
    f_.write(buf_);
    buf_.clear();
  }

  // A str or bytes object with the shortest length prefix: 1, 4 or 8 bytes.
  void sized(std::string_view s, uint8_t op1, uint8_t op4, uint8_t op8) {
    if (s.size() < 256) op(op1), le(s.size(), 1);
    else if (s.size() <= UINT32_MAX) op(op4), le(s.size(), 4);
    else op(op8), le(s.size(), 8);
    buf_ += s;
  }
  void str(std::string_view s) { sized(s, 0x8c, 'X', 0x8d); }  // SHORT_BINUNICODE, BINUNICODE, BINUNICODE8

  void integer(int64_t v) {
    if (v >= 0 && v < 256) op('K'), le(static_cast<uint64_t>(v), 1);             // BININT1
    else if (v >= INT32_MIN && v <= INT32_MAX) op('J'), le(static_cast<uint32_t>(v), 4);  // BININT
    else op(0x8a), op(8), le(static_cast<uint64_t>(v), 8);                        // LONG1, two's complement
  }

  // Pushes the object built by `emit` the first time `key` is seen, a BINGET of it after that.
  template <typename F>
  void memoized(const std::string& key, F emit) {
    if (auto it = memo_.find(key); it != memo_.end()) {
      if (it->second < 256) op('h'), le(it->second, 1);  // BINGET
      else op('j'), le(it->second, 4);                   // LONG_BINGET
      return;
    }
    emit();
    op(0x94);  // MEMOIZE
    memo_.emplace(key, static_cast<uint32_t>(memo_.size()));
  }
  void global(std::string_view module, std::string_view name) {
    memoized(fmt::format("{}.{}", module, name), [&] {
      str(module);
      str(name);
      op(0x93);  // STACK_GLOBAL
    });
  }

  // numpy.dtype(code, False, True) with its byte order set by BUILD.
  void dtype(DType d, std::string_view where) {
    static const std::map<DType, std::string_view> kCodes = {
        {DType::F32, "f4"}, {DType::F16, "f2"}, {DType::I32, "i4"}, {DType::U32, "u4"}, {DType::Bool, "b1"}};
    auto it = kCodes.find(d);
    if (it == kCodes.end())
      throw SheafError(fmt::format("'{}': the tensor at '{}' is {}, which NumPy lacks; cast it to f32 first (or save .safetensors)",
                                   path_, where, dtype_name(d)));
    std::string_view code = it->second;
    memoized(fmt::format("dtype {}", code), [&] {
      global("numpy", "dtype");
      str(code);
      op(0x89), op(0x88), op(0x87);  // False, True, TUPLE3
      op('R');                       // REDUCE
      op('(');
      integer(3);
      str(d == DType::Bool ? "|" : "<");
      op('N'), op('N'), op('N');
      integer(-1), integer(-1), integer(0);
      op('t');  // TUPLE
      op('b');  // BUILD
    });
  }

  void tensor(const Tensor& t, std::string_view where) {
    global("numpy.core.multiarray", "_reconstruct");
    global("numpy", "ndarray");
    integer(0);
    op(0x85);                      // TUPLE1
    sized("b", 'C', 'B', 0x8e);    // SHORT_BINBYTES b'b'
    op(0x87), op('R');             // TUPLE3, REDUCE
    op('(');
    integer(1);
    op('(');
    for (int64_t d : t.shape()) integer(d);
    op('t');
    dtype(t.dtype(), where);
    op(0x89);  // not Fortran order
    size_t n = t.nbytes();
    if (n < 256) op('C'), le(n, 1);
    else if (n <= UINT32_MAX) op('B'), le(n, 4);
    else op(0x8e), le(n, 8);
    flush();
    f_.write(t.bytes(), n);
    op('t'), op('b');  // TUPLE, BUILD
  }

  void value(const Value& v, const std::string& where, int depth) {
    if (depth > kMaxDataNesting || stack_exhausted())
      throw SheafError(fmt::format("'{}': the data nests deeper than {} levels", path_, kMaxDataNesting));
    auto child = [&](std::string_view k) { return where.empty() ? std::string(k) : fmt::format("{}.{}", where, k); };
    switch (v.kind()) {
      case Kind::Nil: op('N'); return;
      case Kind::Bool: op(v.as_bool() ? 0x88 : 0x89); return;
      case Kind::Int: integer(v.as_int()); return;
      case Kind::Float: {
        op('G');  // BINFLOAT: big-endian double
        uint64_t bits = std::bit_cast<uint64_t>(static_cast<double>(v.as_float()));
        for (int k = 7; k >= 0; --k) op(static_cast<uint8_t>(bits >> (8 * k)));
        return;
      }
      case Kind::Str: case Kind::Keyword: case Kind::Symbol: str(v.as_str()); return;
      case Kind::List: {
        const auto& items = v.as_list().items;
        bool tuple = v.as_list().kind == ListKind::Tuple;
        op(tuple ? '(' : ']');
        if (!tuple && !items.empty()) op('(');
        for (size_t k = 0; k < items.size(); ++k) value(items[k], child(std::to_string(k)), depth + 1);
        if (tuple) op('t');
        else if (!items.empty()) op('e');  // APPENDS
        return;
      }
      case Kind::Dict: {
        op('}');
        if (v.as_dict().entries.empty()) return;
        op('(');
        for (const auto& [k, x] : v.as_dict().entries) {
          str(k);
          value(x, child(k), depth + 1);
        }
        op('u');  // SETITEMS
        return;
      }
      case Kind::Tensor: tensor(v.as_tensor(), where); return;
      case Kind::Handle: value(v.as<HandleObj>().materialize({}), where, depth + 1); return;
      default:
        throw SheafError(fmt::format("'{}': cannot pickle a {}{}", path_, kind_name(v.kind()),
                                     where.empty() ? "" : fmt::format(" (at '{}')", where)));
    }
  }

  AtomicFile& f_;
  const std::string& path_;
  std::string buf_;
  std::map<std::string, uint32_t> memo_;
};

}  // namespace

void save_pickle(const std::string& path, const Value& tree) {
  AtomicFile f(path);
  Writer(f, path).run(tree);
  f.commit();
}

}  // namespace sheaf
