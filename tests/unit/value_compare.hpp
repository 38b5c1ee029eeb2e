// tests/unit/value_compare.hpp — comparing the final values of two runs of one program (the
// consistency tests: compiled vs interpreted, cpu backend vs reference executor). Kinds, dtypes,
// shapes, integers and bools must be equal; floats agree within a relative tolerance scaled by
// `scale` (1 for the reference executor; larger for native code, which sums in another order).
#pragma once
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "base/error.hpp"
#include "case_file.hpp"
#include "eval/interp.hpp"
#include "runtime/jit.hpp"
#include "tensor/shape.hpp"
#include "value/printer.hpp"
#include "value/tensor_value.hpp"

namespace sheaf::testing_support {

inline double tolerance(DType d) {
  switch (d) {
    case DType::F16: return 1e-3;
    case DType::BF16: return 1e-2;
    default: return 1e-5;
  }
}

// |x − y| within tol·(0.1·magnitude + |y|): `magnitude` sets the absolute floor (1, or the
// largest |y| of the tensor: difference's by_leaf).
inline bool close(double x, double y, DType d, double scale = 1, double magnitude = 1) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (std::isinf(x) || std::isinf(y)) return x == y;
  if (!is_float(d)) return x == y;
  double tol = tolerance(d) * scale;
  return std::fabs(x - y) <= tol * 0.1 * magnitude + tol * std::fabs(y);
}

// "" when `got` (compiled) matches `want` (interpreted), else where and how they differ.
// `by_leaf`: a tensor's absolute floor scales with its largest element (at least 1) — for runs
// whose f16/bf16 sums round differently from the program's (a fused-attention library's f32
// scores): there an element near 0 carries the rounding of the large terms it sums.
inline std::string difference(const Value& got, const Value& want, const std::string& at, double scale = 1,
                              bool by_leaf = false) {
  auto differ = [&](const std::string& what) {
    return fmt::format("at {}: {}\n  got:      {}\n  expected: {}", at.empty() ? "the result" : at, what,
                       print_value(got, false), print_value(want, false));
  };
  if (got.kind() != want.kind()) return differ(fmt::format("{} vs {}", kind_name(got.kind()), kind_name(want.kind())));
  switch (want.kind()) {
    case Kind::Tensor: {
      const Tensor &g = got.as_tensor(), &w = want.as_tensor();
      if (g.dtype() != w.dtype() || g.shape() != w.shape()) return differ(type_str(g) + " vs " + type_str(w));
      double magnitude = 1;
      for (int64_t i = 0; by_leaf && i < w.numel(); ++i)
        if (std::isfinite(w.get(i))) magnitude = std::max(magnitude, std::fabs(w.get(i)));
      for (int64_t i = 0; i < w.numel(); ++i)
        if (!close(g.get(i), w.get(i), w.dtype(), scale, magnitude))
          return differ(fmt::format("element {}: {} vs {}", i, g.get(i), w.get(i)));
      return "";
    }
    case Kind::Int: return got.as_int() == want.as_int() ? "" : differ("different integers");
    case Kind::Float: return close(got.as_float(), want.as_float(), DType::F32, scale) ? "" : differ("different floats");
    case Kind::List: {
      const auto &g = got.as_list(), &w = want.as_list();
      if (g.items.size() != w.items.size() || g.kind != w.kind) return differ("different lists");
      for (size_t i = 0; i < w.items.size(); ++i)
        if (std::string d = difference(g.items[i], w.items[i], fmt::format("{}[{}]", at, i), scale, by_leaf); !d.empty()) return d;
      return "";
    }
    case Kind::Dict: {
      const auto &g = got.as_dict().entries, &w = want.as_dict().entries;
      if (g.size() != w.size()) return differ("different dicts");
      for (size_t i = 0; i < w.size(); ++i) {
        if (g[i].first != w[i].first) return differ("different keys");
        if (std::string d = difference(g[i].second, w[i].second, at + ":" + w[i].first, scale, by_leaf); !d.empty()) return d;
      }
      return "";
    }
    default: return equal(got, want) ? "" : differ("different values");
  }
}

struct Outcome {
  Value value;
  std::string error;
};

inline Outcome run_case(Interp& in, const CaseSection& c) {
  try {
    return {in.run_text(c.text, "<" + c.name + ">"), ""};
  } catch (const SheafError& e) {
    return {Value(), e.what()};
  }
}

// "" when the JIT of `in` traced something and never fell back to the interpreter; else what
// went wrong, with every recorded fallback reason.
inline std::string compiled_cleanly(const Interp& in) {
  const JitStats& s = jit_of(in)->stats();
  std::string out = s.traces == 0 ? "never traced; " : "";
  for (const std::string& r : s.fallback_reasons) out += "interpreted " + r + "; ";
  return out + (s.fallbacks != 0 && s.fallback_reasons.empty() ? "interpreted calls" : "");
}

}  // namespace sheaf::testing_support
