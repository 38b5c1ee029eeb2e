// backend/loop_code.cpp — loop-nest code shared by the CPU and CUDA renderers (see loop_code.hpp).
#include "backend/loop_code.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>

#include "base/error.hpp"
#include "tensor/tensor.hpp"

namespace sheaf::loop_code {

using fusion::Step;
using fusion::StepKind;
using fusion::View;
using ir::Op;

const char* const kScalarHelpers = R"(typedef long i64; typedef int i32; typedef unsigned u32; typedef unsigned char b8; typedef unsigned short u16;
static inline float sh_max(float x, float y) { return (x > y || x != x) ? x : y; }
static inline float sh_min(float x, float y) { return (x < y || x != x) ? x : y; }
static inline float sh_sign(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }
// pow with C semantics: with -fno-math-errno GCC turns pow(x, 0.5) into sqrt(x), which differs
// at -0 and -inf, so that case is spelled out.
static inline float sh_powf(float x, float y) {
  if (y == 0.5f) return (x == 0 || x == -__builtin_inff()) ? __builtin_fabsf(x) : __builtin_sqrtf(x);
  return __builtin_powf(x, y);
}
static inline float sh_rem(float x, float y) { float r = __builtin_fmodf(x, y); return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r; }
template <class T> static inline T sh_imax(T x, T y) { return x > y ? x : y; }
template <class T> static inline T sh_imin(T x, T y) { return x < y ? x : y; }
static inline i64 sh_clamp_start(i64 s, i64 hi) { return s < 0 ? 0 : s > hi ? hi : s; }
static inline i32 sh_add(i32 x, i32 y) { return (i32)((u32)x + (u32)y); }
static inline i32 sh_sub(i32 x, i32 y) { return (i32)((u32)x - (u32)y); }
static inline i32 sh_mul(i32 x, i32 y) { return (i32)((u32)x * (u32)y); }
static inline u32 sh_add(u32 x, u32 y) { return x + y; }
static inline u32 sh_sub(u32 x, u32 y) { return x - y; }
static inline u32 sh_mul(u32 x, u32 y) { return x * y; }
static inline i32 sh_div(i32 x, i32 y) {
  if (y == 0) return 0;
  if (y == -1) return (i32)(0u - (u32)x);
  i32 q = x / y; return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
static inline u32 sh_div(u32 x, u32 y) { return y == 0 ? 0 : x / y; }
static inline i32 sh_rem(i32 x, i32 y) {
  if (y == 0 || y == -1) return 0;
  i32 r = x % y; return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
static inline u32 sh_rem(u32 x, u32 y) { return y == 0 ? 0 : x % y; }
static inline u32 sh_upow(u32 b, i64 e) { u32 r = 1; for (; e > 0; e >>= 1, b *= b) if (e & 1) r *= b; return r; }
static inline i32 sh_pow(i32 x, i32 y) { if (y < 0) return x == 1 ? 1 : (x == -1 ? (y % 2 ? -1 : 1) : 0); return (i32)sh_upow((u32)x, y); }
static inline u32 sh_pow(u32 x, u32 y) { return sh_upow(x, y); }
static inline i32 sh_shl(i32 x, i32 y) { return (u32)y >= 32 ? 0 : (i32)((u32)x << y); }
static inline u32 sh_shl(u32 x, u32 y) { return y >= 32 ? 0 : x << y; }
static inline i32 sh_shrl(i32 x, i32 y) { return (u32)y >= 32 ? 0 : (i32)((u32)x >> y); }
static inline u32 sh_shrl(u32 x, u32 y) { return y >= 32 ? 0 : x >> y; }
static inline i32 sh_shra(i32 x, i32 y) { return (u32)y >= 32 ? (x < 0 ? -1 : 0) : x >> y; }
static inline u32 sh_shra(u32 x, u32 y) { return y >= 32 ? 0 : x >> y; }
static inline i32 sh_neg(i32 x) { return x == (i32)0x80000000u ? 2147483647 : -x; }
static inline i32 sh_abs(i32 x) { return x < 0 ? sh_neg(x) : x; }
static inline i32 sh_f2i(float x) {
  if (!(x - x == 0)) return 0;
  double t = __builtin_trunc((double)x);
  return t < -2147483648.0 ? (i32)0x80000000u : t > 2147483647.0 ? 2147483647 : (i32)t;
}
// f16/bf16 ↔ f32 as tensor.cpp converts (round to nearest even; NaN stays NaN).
union sh_pun { u32 u; float f; };
static inline u32 sh_bits(float x) { sh_pun p; p.f = x; return p.u; }
static inline float sh_float(u32 u) { sh_pun p; p.u = u; return p.f; }
static inline float sh_b2f(u16 h) { return sh_float((u32)h << 16); }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// The GPU's own conversions: the same rounding in one instruction instead of a dozen integer ones
// (bf16 kernels are otherwise bound by them); a NaN becomes the canonical NaN.
static inline u16 sh_f2b(float x) { u16 r; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x)); return r; }
static inline float sh_h2f(u16 h) { float r; asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h)); return r; }
static inline u16 sh_f2h(float x) { u16 r; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x)); return r; }
// x rounded to bf16, as an f32: bf16(x) in the upper half of a bf16 pair whose lower half is 0
static inline float sh_rb(float x) { u32 r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x), "f"(0.0f)); return sh_float(r); }
#else
static inline u16 sh_f2b(float x) {
  u32 u = sh_bits(x);
  if (x != x) return (u16)((u >> 16) | 0x40);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float sh_h2f(u16 h) {
  u32 sign = (u32)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { float v = (float)m * 5.9604644775390625e-08f; return sign ? -v : v; }
  if (e == 31) return sh_float(sign | 0x7f800000u | (m << 13));
  return sh_float(sign | ((e + 112) << 23) | (m << 13));
}
static inline u16 sh_f2h(float x) {
  u32 u = sh_bits(x);
  u16 sign = (u16)((u >> 16) & 0x8000u);
  float a = __builtin_fabsf(x);
  if (x != x) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 6.103515625e-05f) {  // subnormal: a·2²⁴ rounded to nearest even (exact below 2¹⁰)
    float t = a * 16777216.0f, f = __builtin_floorf(t), r = t - f;
    u32 q = (u32)f;
    if (r > 0.5f || (r == 0.5f && (q & 1u))) ++q;
    return sign | (u16)q;
  }
  u32 ax = sh_bits(a), h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffffu) >> 13), rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | (u16)h;
}
static inline float sh_rb(float x) { return sh_b2f(sh_f2b(x)); }
#endif
static inline float sh_rh(float x) { return sh_h2f(sh_f2h(x)); }
static inline u32 sh_f2u(float x) {
  if (!(x - x == 0)) return 0;
  double t = __builtin_trunc((double)x);
  return t < 0 ? 0u : t > 4294967295.0 ? 4294967295u : (u32)t;
}
)";

namespace {
DType compute_type(DType d) { return is_half(d) ? DType::F32 : d; }  // what ops on d compute in
}  // namespace

std::string rounded(DType d, const std::string& e) {
  return d == DType::BF16 ? "sh_rb(" + e + ")" : d == DType::F16 ? "sh_rh(" + e + ")" : e;
}

const char* ctype(DType d) {
  switch (d) {
    case DType::F32: return "float";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::Bool: return "b8";
    case DType::F16: case DType::BF16: return "u16";
  }
  return "";
}

const char* vtype(DType d) { return is_half(d) ? "float" : ctype(d); }

std::string load_expr(DType d, const std::string& element) {
  return d == DType::BF16 ? "sh_b2f(" + element + ")" : d == DType::F16 ? "sh_h2f(" + element + ")" : element;
}

std::string store_expr(DType d, const std::string& value) {
  return d == DType::BF16 ? "sh_f2b(" + value + ")" : d == DType::F16 ? "sh_f2h(" + value + ")" : value;
}

std::string literal(DType d, double v) {
  if (d == DType::BF16) return literal(DType::F32, bf16_to_float(float_to_bf16(static_cast<float>(v))));
  if (d == DType::F16) return literal(DType::F32, half_to_float(float_to_half(static_cast<float>(v))));
  switch (d) {
    case DType::F32: {
      float f = static_cast<float>(v);
      if (std::isnan(f)) return "__builtin_nanf(\"\")";
      if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
      return f < 0 ? fmt::format("({})", buf) : buf;
    }
    case DType::I32: return fmt::format("((i32){})", static_cast<int64_t>(v));
    case DType::U32: return fmt::format("{}u", static_cast<uint64_t>(v));
    case DType::Bool: return v != 0 ? "((b8)1)" : "((b8)0)";
    default: return "";
  }
}

std::string unary_expr(Unary u, DType d, const std::string& x) {
  if (d == DType::F32) {
    switch (u) {
      case Unary::Neg: return "(-" + x + ")";
      case Unary::Abs: return "__builtin_fabsf(" + x + ")";
      case Unary::Exp: return "sh_exp(" + x + ")";
      case Unary::Log: return "logf(" + x + ")";
      case Unary::Sqrt: return "__builtin_sqrtf(" + x + ")";
      case Unary::Rsqrt: return "(1.0f / __builtin_sqrtf(" + x + "))";
      case Unary::Sin: return "sinf(" + x + ")";
      case Unary::Cos: return "cosf(" + x + ")";
      case Unary::Tan: return "__builtin_tanf(" + x + ")";
      case Unary::Tanh: return "sh_tanh(" + x + ")";
      case Unary::Floor: return "__builtin_floorf(" + x + ")";
      case Unary::Ceil: return "__builtin_ceilf(" + x + ")";
      case Unary::Round: return "__builtin_roundf(" + x + ")";
      case Unary::Sign: return "sh_sign(" + x + ")";
      case Unary::Logistic: return "(1.0f / (1.0f + sh_exp(-" + x + ")))";
      case Unary::Not: break;
    }
  } else if (d == DType::Bool) {
    return u == Unary::Not ? "((b8)!" + x + ")" : x;
  } else {
    bool s = d == DType::I32;
    switch (u) {
      case Unary::Neg: return s ? "sh_neg(" + x + ")" : "(0u - " + x + ")";
      case Unary::Abs: return s ? "sh_abs(" + x + ")" : x;
      case Unary::Sign: return s ? "((i32)(" + x + " > 0) - (i32)(" + x + " < 0))" : "((u32)(" + x + " > 0))";
      case Unary::Not: return fmt::format("(({})~{})", ctype(d), x);
      case Unary::Floor: case Unary::Ceil: case Unary::Round: return x;
      default: break;
    }
  }
  throw SheafError(fmt::format("internal: no loop code for {} on {}", ir::unary_name(u), dtype_name(d)));
}

std::string binary_expr(Binary op, DType d, const std::string& x, const std::string& y) {
  auto call = [&](const char* f) { return fmt::format("{}({}, {})", f, x, y); };
  auto infix = [&](const char* o) { return fmt::format("({} {} {})", x, o, y); };
  if (is_comparison(op)) {
    static const char* ops[] = {"==", "!=", "<", "<=", ">", ">="};
    return fmt::format("((b8)({} {} {}))", x, ops[static_cast<int>(op) - static_cast<int>(Binary::Eq)], y);
  }
  if (d == DType::Bool) {
    switch (op) {
      case Binary::And: case Binary::Mul: case Binary::Min: return fmt::format("((b8)({} && {}))", x, y);
      case Binary::Or: case Binary::Add: case Binary::Max: return fmt::format("((b8)({} || {}))", x, y);
      case Binary::Xor: return fmt::format("((b8)({} != {}))", x, y);
      default: return "((b8)0)";
    }
  }
  if (d == DType::F32) {
    switch (op) {
      case Binary::Add: return infix("+");
      case Binary::Sub: return infix("-");
      case Binary::Mul: return infix("*");
      case Binary::Div: return infix("/");
      case Binary::Pow: return call("sh_powf");
      case Binary::Max: return call("sh_max");
      case Binary::Min: return call("sh_min");
      case Binary::Rem: return call("sh_rem");
      case Binary::FloorDiv: return fmt::format("__builtin_floorf({} / {})", x, y);
      default: break;
    }
  } else {
    switch (op) {
      case Binary::Add: return call("sh_add");
      case Binary::Sub: return call("sh_sub");
      case Binary::Mul: return call("sh_mul");
      case Binary::Div: case Binary::FloorDiv: return call("sh_div");
      case Binary::Rem: return call("sh_rem");
      case Binary::Pow: return call("sh_pow");
      case Binary::Max: return call("sh_imax");
      case Binary::Min: return call("sh_imin");
      case Binary::And: return infix("&");
      case Binary::Or: return infix("|");
      case Binary::Xor: return infix("^");
      case Binary::ShiftLeft: return call("sh_shl");
      case Binary::ShiftRightLogical: return call("sh_shrl");
      case Binary::ShiftRightArithmetic: return call("sh_shra");
      default: break;
    }
  }
  throw SheafError(fmt::format("internal: no loop code for {} on {}", ir::binary_name(op), dtype_name(d)));
}

std::string convert_expr(DType from, DType to, const std::string& x) {
  if (from == to) return x;
  if (to == DType::Bool) return "((b8)(" + x + " != 0))";
  if (to == DType::F32) return from == DType::Bool ? "(" + x + " ? 1.0f : 0.0f)" : "((float)" + x + ")";
  if (from == DType::F32) return (to == DType::I32 ? "sh_f2i(" : "sh_f2u(") + x + ")";
  if (from == DType::Bool) return fmt::format("(({}){})", ctype(to), x);
  if (to == DType::U32) return "((u32)(" + x + " < 0 ? 0 : " + x + "))";  // i32 → u32 saturates
  return "((i32)(" + x + " > 2147483647u ? 2147483647u : " + x + "))";    // u32 → i32
}

double reduce_identity(Reduce r, DType d) {
  switch (r) {
    case Reduce::Sum: return 0;
    case Reduce::Prod: return 1;
    case Reduce::Max:
      return d == DType::F32 ? -std::numeric_limits<double>::infinity()
             : d == DType::I32 ? -2147483648.0 : 0;
    case Reduce::Min:
      return d == DType::F32 ? std::numeric_limits<double>::infinity()
             : d == DType::I32 ? 2147483647.0 : d == DType::U32 ? 4294967295.0 : 1;
  }
  return 0;
}

// The kernels of reduce.cpp: NaN wins max/min; bool max/min = any/all.
std::string combine_expr(Reduce r, DType d, const std::string& acc, const std::string& x) {
  d = compute_type(d);  // f16/bf16 accumulate in f32
  if (d == DType::Bool) return fmt::format("((b8)({} {} {}))", acc, r == Reduce::Max ? "||" : "&&", x);
  switch (r) {
    case Reduce::Sum: return d == DType::F32 ? fmt::format("({} + {})", acc, x) : fmt::format("sh_add({}, {})", acc, x);
    case Reduce::Prod: return d == DType::F32 ? fmt::format("({} * {})", acc, x) : fmt::format("sh_mul({}, {})", acc, x);
    case Reduce::Max: return fmt::format("{}({}, {})", d == DType::F32 ? "sh_max" : "sh_imax", x, acc);
    case Reduce::Min: return fmt::format("{}({}, {})", d == DType::F32 ? "sh_min" : "sh_imin", x, acc);
  }
  return acc;
}

std::string canonical(const std::string& text, const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  constexpr std::string_view kLetters = "pvahknqe";
  // Characters where a name, a comment or a numbered name may start; runs of others are copied whole.
  std::array<int8_t, 256> letter;  // index in kLetters, -1: none, -2: '/' or the name's first character
  letter.fill(-1);
  letter['/'] = -2;
  if (!name.empty()) letter[static_cast<unsigned char>(name[0])] = -2;
  for (size_t l = 0; l < kLetters.size(); ++l) letter[static_cast<unsigned char>(kLetters[l])] = static_cast<int8_t>(l);
  // (letter, number) → the order of its first appearance among that letter's numbers
  std::unordered_map<std::string_view, size_t> seen;  // keyed by the letter and its digits
  std::array<size_t, kLetters.size()> count{};
  std::string out;
  out.reserve(text.size());
  const std::string_view t(text);
  const std::string called = name + "(";
  for (size_t i = 0; i < t.size();) {
    size_t run = i;
    while (run < t.size() && letter[static_cast<unsigned char>(t[run])] == -1) ++run;
    out.append(t.substr(i, run - i));
    if ((i = run) == t.size()) break;
    const bool starts_word = i == 0 || !word(t[i - 1]);
    if (starts_word && t.compare(i, called.size(), called) == 0) {  // the name (a CPU task names it again)
      i += name.size();
      continue;
    }
    const char c = t[i];
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
      while (i < t.size() && t[i] != '\n') ++i;
      continue;
    }
    const int8_t l = letter[static_cast<unsigned char>(c)];
    if (l >= 0 && starts_word && i + 1 < t.size() && digit(t[i + 1])) {
      size_t j = i + 1;
      while (j < t.size() && digit(t[j])) ++j;
      if (j == t.size() || !word(t[j])) {
        auto [it, fresh] = seen.try_emplace(t.substr(i, j - i), count[static_cast<size_t>(l)]);
        count[static_cast<size_t>(l)] += fresh;
        const size_t id = it->second;
        char digits[24];
        out += c;
        out.append(digits, static_cast<size_t>(std::to_chars(digits, digits + sizeof digits, id).ptr - digits));
        i = j;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

Nest::Nest(const Shape& space, const std::vector<bool>& red, const std::vector<std::vector<int64_t>>& accesses) {
  for (size_t d = 0; d < space.size(); ++d) {
    if (space[d] == 1) continue;
    bool merge = !groups.empty() && reduced.back() == red[d];
    if (merge) {
      size_t prev = groups.back().back();
      for (const auto& s : accesses)
        if (s[prev] != s[d] * space[d]) merge = false;
    }
    if (merge) {
      groups.back().push_back(d);
      sizes.back() *= space[d];
    } else {
      groups.push_back({d});
      sizes.push_back(space[d]);
      reduced.push_back(red[d]);
    }
  }
}

std::string Nest::axis_index(size_t d) const {
  for (size_t k = 0; k < groups.size(); ++k)
    if (std::find(groups[k].begin(), groups[k].end(), d) != groups[k].end()) {
      if (groups[k].size() != 1) throw SheafError("internal: a padded dim merged with its neighbours");
      return fmt::format("i{}", k);
    }
  return "0";
}

std::string Nest::index(const std::vector<int64_t>& strides, int64_t offset, const std::function<std::string(size_t)>& at) const {
  std::string e = offset ? std::to_string(offset) : "";
  for (size_t k = 0; k < groups.size(); ++k) {
    int64_t s = strides[groups[k].back()];
    if (s == 0) continue;
    if (!e.empty()) e += " + ";
    std::string i = at ? at(k) : fmt::format("i{}", k);
    e += s == 1 ? i : fmt::format("{} * {}", i, s);
  }
  return e.empty() ? "0" : e;
}

uint64_t Nest::walks(const std::vector<int64_t>& strides) const {
  uint64_t m = 0;
  for (size_t k = 0; k < groups.size(); ++k)
    if (strides[groups[k].back()] != 0) m |= group_bit(k);
  return m;
}

bool Nest::kept_outside() {
  const size_t n = sizes.size();
  if (n == 0 || !reduced[n - 1]) return false;
  const auto first_reduced = std::find(reduced.begin(), reduced.end(), true);
  if (std::find(first_reduced, reduced.end(), false) == reduced.end()) return false;
  Nest moved;
  for (bool take_reduced : {false, true})
    for (size_t k = 0; k < n; ++k)
      if (reduced[k] == take_reduced) {
        moved.groups.push_back(groups[k]);
        moved.sizes.push_back(sizes[k]);
        moved.reduced.push_back(reduced[k]);
      }
  *this = std::move(moved);
  return true;
}

int64_t LoopBody::point_bytes(uint64_t looped) const {
  int64_t n = 0;
  for (const Load& l : loads)
    if (!l.direct || (l.walks & looped)) n += l.bytes;
  return n;
}

namespace {

// Builds the statements of one Loop/Copy step (see loop_body).
class BodyBuilder {
 public:
  BodyBuilder(const ir::Graph& g, const fusion::Schedule& s, size_t index, const std::function<std::string(int32_t)>& pointer,
              const Addressing& where)
      : g_(g), s_(s), index_(index), pointer_(pointer), where_(where) {}

  LoopBody build(const std::function<bool(Nest&)>& choose_scalar, bool nan_flags, const std::vector<int64_t>* rows) {
    const Step& st = s_.steps[index_];
    const size_t rank = st.space.size();
    std::vector<bool> red(rank, false);
    for (int64_t d : rows ? *rows : st.reduce_dims) red[static_cast<size_t>(d)] = true;
    const std::vector<int64_t> full = fusion::contiguous_strides(st.space);
    b_.kept.assign(rank, 0);  // where a reduction result goes, over the space
    for (size_t d = rank, stride = 1; d-- > 0;)
      if (!red[d]) b_.kept[d] = static_cast<int64_t>(stride), stride *= static_cast<size_t>(st.space[d]);
    point_strides_ = full;         // the element at the point (Addressing::held_points)
    row_strides_.assign(rank, 0);  // element t of a value per row (Addressing::held)
    for (size_t d = rank, stride = 1; d-- > 0;)
      if (red[d] == where_.rows_reduced) row_strides_[d] = static_cast<int64_t>(stride), stride *= static_cast<size_t>(st.space[d]);
    auto axis_vector = [&](int64_t axis) {
      std::vector<int64_t> e(rank, 0);
      e[static_cast<size_t>(axis)] = 1;
      return e;
    };

    // Every access (stride vector over the space) decides which dims may merge.
    std::vector<std::vector<int64_t>> accesses{full, b_.kept};
    if (st.kind == StepKind::Copy) accesses.push_back(st.source.strides);
    if (st.into) accesses.push_back(st.into->strides);
    for (int32_t ni : st.nodes) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(ni)];
      if (st.kind == StepKind::Copy) break;
      if (n.op == Op::Iota) accesses.push_back(axis_vector(n.attrs.axis));
      if (n.op == Op::Pad)  // a padded dim keeps its own loop index for the bounds test
        for (size_t d = 0; d < rank; ++d)
          if (n.attrs.lo[d] || n.attrs.hi[d]) accesses.push_back(axis_vector(static_cast<int64_t>(d)));
      if (n.op == Op::Concatenate) accesses.push_back(axis_vector(n.attrs.axis));  // the axis keeps its own loop index
      if (st.kind == StepKind::Update) {  // the update read and the result written at its points
        if (!literal_of(n.in[1])) accesses.push_back(at(n.in[1]).strides);
        accesses.push_back(fusion::contiguous_strides(g_.type(n.out).shape));
        break;
      }
      if (n.op == Op::DynamicSlice) {  // the starts are scalars
        accesses.push_back(at(n.in[0]).strides);
        continue;
      }
      if (n.op == Op::Gather) {
        accesses.push_back(gather_strides(n, 0));
        if (!internal(n.in[1])) accesses.push_back(gather_strides(n, 1));
        continue;
      }
      for (int32_t u : n.in)
        if (!internal(u) && !literal_of(u)) accesses.push_back(at(u).strides);
    }
    b_.nest = Nest(st.space, red, accesses);
    b_.scalar_acc = choose_scalar(b_.nest);
    const Nest& nest = b_.nest;

    for (int32_t v : st.outputs) declare(v, true);
    if (st.kind == StepKind::Copy) {
      const View to = st.into ? *st.into : View{st.outputs[0], 0, full};
      declare(to.buffer, true);
      declare_read(st.source);
      b_.stmts.push_back(fmt::format("{}[{}] = {}[{}];", pointer_(to.buffer), nest.index(to.strides, offset(to)), pointer_(st.source.buffer),
                                     nest.index(st.source.strides, offset(st.source))));
      b_.loads.push_back({.stmt = b_.stmts.size() - 1, .bytes = static_cast<int64_t>(dtype_size(g_.type(to.buffer).dtype)),
                          .walks = nest.walks(st.source.strides)});
      return std::move(b_);
    }
    if (st.kind == StepKind::Update) {  // out[starts + i] = u[i] (x is in out already)
      const ir::Node& n = g_.nodes[static_cast<size_t>(st.nodes[0])];
      const std::string value = load(n.in[1], nullptr);
      const std::vector<int64_t> out = fusion::contiguous_strides(g_.type(n.out).shape);
      b_.stmts.push_back(fmt::format("{}[{}{}] = {};", pointer_(n.out), nest.index(out, 0), start_offsets(n, 2, g_.type(n.in[1]).shape, out),
                                     store_expr(g_.type(n.out).dtype, value)));
      return std::move(b_);
    }
    for (int32_t ni : st.nodes) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(ni)];
      const int32_t v = n.out;
      const DType d = g_.type(v).dtype;
      if (n.op == Op::Reduce) {
        b_.reductions.push_back(v);
        b_.identities.push_back(literal(compute_type(d), reduce_identity(n.attrs.reduce, compute_type(d))));
        if (!b_.scalar_acc && is_half(d)) throw SheafError("internal: an f16/bf16 reduction accumulating in its output");
        std::string acc = b_.scalar_acc ? fmt::format("a{}", v) : fmt::format("{}[{}]", pointer_(v), nest.index(b_.kept, 0));
        const Reduce op = n.attrs.reduce;
        const bool flagged = nan_flags && b_.scalar_acc && d == DType::F32 && (op == Reduce::Max || op == Reduce::Min);
        b_.nan_flagged.push_back(flagged);
        const std::string x = operand(n.in[0]);
        if (flagged)
          b_.stmts.push_back(fmt::format("a{0} = {1} {2} a{0} ? {1} : a{0}; n{0} |= {1} != {1};", v, x, op == Reduce::Max ? ">" : "<"));
        else
          b_.stmts.push_back(fmt::format("{} = {};", acc, combine_expr(op, compute_type(d), acc, x)));
        continue;
      }
      const DType c = compute_type(d), in = n.in.empty() ? d : compute_type(g_.type(n.in[0]).dtype);
      std::string e;
      switch (n.op) {  // f16/bf16 operands are floats already; f16/bf16 results are rounded
        case Op::Unary: e = rounded(d, unary_expr(n.attrs.unary, c, operand(n.in[0]))); break;
        case Op::Binary: e = rounded(d, binary_expr(n.attrs.binary, in, operand(n.in[0]), operand(n.in[1]))); break;
        case Op::Convert:
          e = g_.type(n.in[0]).dtype == d ? operand(n.in[0]) : rounded(d, convert_expr(in, c, operand(n.in[0])));
          break;
        case Op::Select: e = fmt::format("({} ? {} : {})", operand(n.in[0]), operand(n.in[1]), operand(n.in[2])); break;
        case Op::Iota: e = rounded(d, fmt::format("(({}){})", vtype(d), nest.index(axis_vector(n.attrs.axis), 0))); break;
        case Op::Pad: e = pad_expr(n); break;
        case Op::Concatenate: e = concatenate_expr(n); break;
        case Op::Gather: e = gather_expr(n); break;
        case Op::DynamicSlice: {
          const View& w = at(n.in[0]);
          e = load_at(n.in[0], b_.nest.index(w.strides, offset(w)) + start_offsets(n, 1, g_.type(n.out).shape, w.strides),
                      b_.nest.walks(w.strides));
          break;
        }
        default: throw SheafError(fmt::format("internal: {} in a loop", ir::op_name(n.op)));
      }
      b_.stmts.push_back(fmt::format("const {} v{} = {};", vtype(d), v, e));
      if (s_.has_buffer[v] && s_.step_of[v] == static_cast<int32_t>(index_)) {
        b_.stmts.push_back(fmt::format("{}[{}] = {};", pointer_(v), nest.index(full, 0), store_expr(d, fmt::format("v{}", v))));
        b_.stores.push_back({.stmt = b_.stmts.size() - 1, .value = v});
      }
    }
    return std::move(b_);
  }

 private:
  const ir::Graph& g_;
  const fusion::Schedule& s_;
  size_t index_;
  const std::function<std::string(int32_t)>& pointer_;
  const Addressing& where_;
  std::vector<int64_t> row_strides_, point_strides_;
  LoopBody b_;
  int loads_ = 0;
  std::map<int32_t, std::string> loaded_;  // value → its load at the point (a value read twice is loaded once)

  const View& at(int32_t v) const { return fusion::read_view(s_, v, static_cast<int32_t>(index_)); }
  // Where w starts, from its buffer's pointer (loop_body's `bases`).
  int64_t offset(const View& w) const {
    const auto base = where_.bases.find(w.buffer);
    return w.offset - (base == where_.bases.end() ? 0 : base->second);
  }
  bool internal(int32_t v) const { return fusion::computes(s_, v, static_cast<int32_t>(index_)) && g_.producer(v).op != Op::Reduce; }

  // A rank-0 constant (or a broadcast of one) read as a literal.
  std::optional<std::string> literal_of(int32_t v) const {
    if (!s_.view[v]) return std::nullopt;
    const View& w = at(v);
    const ir::Node& src = g_.producer(w.buffer);
    if (src.op != Op::Constant || !src.attrs.value.shape().empty()) return std::nullopt;
    return literal(g_.type(v).dtype, src.attrs.value.get(0));
  }

  // buffer's parameter index (a new one when the body has none yet).
  size_t declare(int32_t buffer, bool write) {
    const size_t i = static_cast<size_t>(std::find(b_.buffers.begin(), b_.buffers.end(), buffer) - b_.buffers.begin());
    if (i == b_.buffers.size()) {
      b_.buffers.push_back(buffer);
      b_.written.push_back(write);
      b_.least_read.push_back(std::numeric_limits<int64_t>::max());
    }
    return i;
  }
  // A load through w: its buffer declared, read from w's offset on.
  void declare_read(const View& w) {
    const size_t i = declare(w.buffer, false);
    b_.least_read[i] = std::min(b_.least_read[i], w.offset);
  }

  // Every load is a statement of its own, so that selects choose between values, never between
  // loads (GCC 12 mis-vectorised a select of two loads accumulated over an outer loop).
  std::string load(int32_t u, const std::function<std::string(size_t)>& at_group) {
    if (auto lit = literal_of(u)) return *lit;
    const View& w = at(u);
    if (held_at(u, w, where_.held, row_strides_)) return fmt::format("q{}", w.buffer);
    if (held_at(u, w, where_.held_points, point_strides_)) {
      b_.reads_held_points = true;
      return fmt::format("e{}[s]", w.buffer);
    }
    return load_at(u, b_.nest.index(w.strides, offset(w), at_group), b_.nest.walks(w.strides));
  }
  // Whether u, read through w, is a value of `held` at the element that `strides` give (offset 0,
  // those strides over the dims longer than 1): its row's (row_strides_, Addressing::held) or
  // the point's own (point_strides_, Addressing::held_points).
  bool held_at(int32_t u, const View& w, const std::set<int32_t>& held, const std::vector<int64_t>& strides) const {
    if (!held.count(w.buffer) || offset(w) != 0 || g_.type(u).dtype != g_.type(w.buffer).dtype) return false;
    const Shape& space = s_.steps[index_].space;
    for (size_t d = 0; d < space.size(); ++d)
      if (space[d] != 1 && w.strides[d] != strides[d]) return false;
    return true;
  }
  // u's element at `index` (elements from its buffer's start), an index over the groups `walks`.
  std::string load_at(int32_t u, const std::string& index, uint64_t walks) {
    const View& w = at(u);
    declare_read(w);
    std::string name = fmt::format("l{}", loads_++);
    const DType d = g_.type(u).dtype;
    std::string expr = load_expr(d, fmt::format("{}[{}]", pointer_(w.buffer), index));
    b_.stmts.push_back(fmt::format("const {} {} = {};", vtype(d), name, expr));
    b_.loads.push_back({.stmt = b_.stmts.size() - 1, .bytes = static_cast<int64_t>(dtype_size(d)), .walks = walks, .direct = !names_a_value(index),
                        .buffer = w.buffer, .type = vtype(d), .name = name, .expr = std::move(expr)});
    return name;
  }
  // Whether `e` names a value or a load (v{id}, l{n}), not only loop indices i{k} and numbers.
  static bool names_a_value(std::string_view e) {
    for (size_t i = 0; i + 1 < e.size(); ++i)
      if ((e[i] == 'v' || e[i] == 'l') && (i == 0 || !(std::isalnum(static_cast<unsigned char>(e[i - 1])) || e[i - 1] == '_')) &&
          std::isdigit(static_cast<unsigned char>(e[i + 1])))
        return true;
    return false;
  }

  // gather (take along axis a): out = x.shape[:a] + idx.shape + x.shape[a+1:]. The strides over
  // the output space of operand k: x (k = 0) walks its own dims around the index dims (its axis
  // a is added from the index value), idx (k = 1) walks the index dims only.
  std::vector<int64_t> gather_strides(const ir::Node& n, int k) const {
    const int64_t a = n.attrs.axis;
    const auto xr = static_cast<int64_t>(g_.type(n.in[0]).shape.size()), ir = static_cast<int64_t>(g_.type(n.in[1]).shape.size());
    const std::vector<int64_t>& w = at(n.in[static_cast<size_t>(k)]).strides;
    std::vector<int64_t> out(static_cast<size_t>(xr - 1 + ir), 0);
    for (int64_t d = 0; d < xr - 1 + ir; ++d) {
      if (k == 1) out[static_cast<size_t>(d)] = d >= a && d < a + ir ? w[static_cast<size_t>(d - a)] : 0;
      else out[static_cast<size_t>(d)] = d < a ? w[static_cast<size_t>(d)] : d >= a + ir ? w[static_cast<size_t>(d - ir + 1)] : 0;
    }
    return out;
  }
  // x at (pre, clamp(idx[point]), post): indices are clamped into [0, n) like take.
  std::string gather_expr(const ir::Node& n) {
    const int32_t x = n.in[0], idx = n.in[1];
    const int64_t size = g_.type(x).shape[static_cast<size_t>(n.attrs.axis)];
    std::string i = internal(idx) ? fmt::format("v{}", idx) : load_at(idx, b_.nest.index(gather_strides(n, 1), offset(at(idx))), b_.nest.walks(gather_strides(n, 1)));
    std::string clamped = g_.type(idx).dtype == DType::U32 ? fmt::format("((i64)({0} >= {1}u ? {1}u - 1 : {0}))", i, size)
                                                            : fmt::format("((i64)({0} < 0 ? 0 : {0} >= {1} ? {1} - 1 : {0}))", i, size);
    int64_t stride = at(x).strides[static_cast<size_t>(n.attrs.axis)];
    return load_at(x, fmt::format("{} + {} * {}", b_.nest.index(gather_strides(n, 0), offset(at(x))), clamped, stride), ~uint64_t{0});
  }

  // " + s_d * stride_d" for each axis d of a window of shape `window` in x = n.in[0], s_d read
  // from operand first + d and clamped into [0, x.shape[d] - window[d]] (dynamic_slice,
  // dynamic_update_slice).
  std::string start_offsets(const ir::Node& n, size_t first, const Shape& window, const std::vector<int64_t>& strides) {
    const Shape& x = g_.type(n.in[0]).shape;
    std::string sum;
    for (size_t d = 0; d < x.size(); ++d) {
      const int32_t s = n.in[first + d];
      const std::optional<std::string> lit = literal_of(s);
      const std::string v = lit ? *lit : loaded_once(s, [&] { return load_at(s, std::to_string(offset(at(s))), 0); });
      sum += fmt::format(" + sh_clamp_start((i64)({}), {}) * {}", v, x[d] - window[d], strides[d]);
    }
    return sum;
  }

  // Notes a boundary of original dim d at index `at` (LoopBody::inner_cuts) when d is the innermost loop.
  void cut(size_t d, int64_t at) {
    const Nest& nest = b_.nest;
    if (nest.groups.empty() || nest.groups.back() != std::vector<size_t>{d} || at <= 0 || at >= nest.sizes.back()) return;
    std::vector<int64_t>& cuts = b_.inner_cuts;
    auto it = std::lower_bound(cuts.begin(), cuts.end(), at);
    if (it == cuts.end() || *it != at) cuts.insert(it, at);
  }

  // concatenate along a: operand j covers [off_j, off_j + size_j) of the axis; each operand is read
  // at its clamped position (always a valid load) and the axis index picks one.
  std::string concatenate_expr(const ir::Node& n) {
    const auto a = static_cast<size_t>(n.attrs.axis);
    const std::string i = b_.nest.axis_index(a);
    std::vector<std::string> values;
    std::vector<int64_t> ends;
    int64_t off = 0;
    for (int32_t u : n.in) {
      const int64_t size = g_.type(u).shape[a];
      std::string shifted = fmt::format("({0} < {1} ? 0 : {0} >= {2} ? {3} : {0} - {1})", i, off, off + size, size - 1);
      values.push_back(load(u, [&](size_t k) {  // a literal when u is a broadcast constant
        return b_.nest.groups[k].size() == 1 && b_.nest.groups[k][0] == a ? shifted : fmt::format("i{}", k);
      }));
      ends.push_back(off += size);
      cut(a, off);
    }
    std::string e = values.back();
    for (size_t j = values.size() - 1; j-- > 0;) e = fmt::format("({} < {} ? {} : {})", i, ends[j], values[j], e);
    return e;
  }
  std::string operand(int32_t u) { return internal(u) ? fmt::format("v{}", u) : loaded_once(u, [&] { return load(u, nullptr); }); }

  // u's load at the point, made by `load` the first time u is read there (u's view is the same
  // for every reader in a step).
  std::string loaded_once(int32_t u, const std::function<std::string()>& load) {
    auto [at, fresh] = loaded_.try_emplace(u);
    if (fresh) at->second = load();
    return at->second;
  }

  // pad(x): x at (i − lo) where every padded index is inside x, the padding value elsewhere. The
  // read itself is clamped into x, so it is always a valid load.
  std::string pad_expr(const ir::Node& n) {
    int32_t x = n.in[0];
    const Shape& xs = g_.type(x).shape;
    const Nest& nest = b_.nest;
    std::string pad = literal(g_.type(n.out).dtype, n.attrs.scalar);
    std::string cond;
    std::vector<std::string> idx(nest.groups.size());
    for (size_t k = 0; k < idx.size(); ++k) idx[k] = fmt::format("i{}", k);
    for (size_t d = 0; d < xs.size(); ++d) {
      int64_t lo = n.attrs.lo[d], hi = n.attrs.hi[d];
      if (!lo && !hi) continue;
      if (xs[d] == 0) return pad;  // nothing of x is ever inside
      std::string i = nest.axis_index(d);
      cut(d, lo);
      cut(d, lo + xs[d]);
      cond += fmt::format("{}({} >= {} && {} < {})", cond.empty() ? "" : " && ", i, lo, i, lo + xs[d]);
      for (size_t k = 0; k < idx.size(); ++k)
        if (idx[k] == i) idx[k] = fmt::format("({0} < {1} ? 0 : {0} >= {2} ? {3} : {0} - {1})", i, lo, lo + xs[d], xs[d] - 1);
    }
    std::string v = load(x, [&](size_t k) { return idx[k]; });
    return cond.empty() ? v : fmt::format("(({}) ? {} : {})", cond, v, pad);
  }
};

}  // namespace

LoopBody loop_body(const ir::Graph& g, const fusion::Schedule& s, size_t index,
                   const std::function<std::string(int32_t)>& pointer, const std::function<bool(Nest&)>& scalar_acc,
                   bool nan_flags, const std::vector<int64_t>* rows, const Addressing& where) {
  return BodyBuilder(g, s, index, pointer, where).build(scalar_acc, nan_flags, rows);
}

}  // namespace sheaf::loop_code
