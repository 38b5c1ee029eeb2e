// backend/cpu/widen_halves.cpp — f16/bf16 products and reductions as f32 ones between conversions,
// for a backend that has neither in half precision (the CPU: OpenBLAS sgemm, f32 SIMD loops).
//   dot_general(a, b) : h  →  convert(dot_general(convert(a, f32), convert(b, f32)), h)
//   reduce(x) : h          →  convert(reduce(convert(x, f32)), h)
// for h = f16 or bf16. This is exactly what the reference kernels compute for such a node
// (tensor/dot.cpp, tensor/reduce.cpp: widen, compute in f32, round once), so results are the same
// bits up to the order of f32 additions; but the conversions now fuse into the loops that
// produce the operands and read the result, and the f32 node is a product (sgemm) or a SIMD loop
// instead of a host step. A value widened for several readers is converted once. The regions of
// while/case are widened too (a region shared by several nodes stays shared). Parameters and
// results keep their types; other values keep theirs, new ones are appended in node order.
#include <map>
#include <memory>

#include "backend/cpu/lowering.hpp"
#include "passes/rewrite.hpp"

namespace sheaf::cpu {

using ir::Node;
using ir::Op;
using passes::Rewriter;
using passes::rewrite_with_regions;

bool reduces_halves(const ir::Graph& g) {
  for (const Node& n : g.nodes) {
    if ((n.op == Op::DotGeneral && is_half(g.type(n.in[0]).dtype)) || (n.op == Op::Reduce && is_half(g.type(n.out).dtype))) return true;
    for (const auto& r : n.attrs.regions)
      if (reduces_halves(*r)) return true;
  }
  return false;
}

ir::Graph widen_halves(const ir::Graph& g) {
  std::map<const ir::Graph*, std::map<int32_t, int32_t>> wide;  // per graph: new half value → its f32 conversion
  return rewrite_with_regions(g, [&](Rewriter& r, const Node& n) {
    const ir::Graph& src = r.src();
    auto widened = [&](int32_t old) {
      int32_t v = r.map(old);
      auto [it, fresh] = wide[&src].try_emplace(v, -1);
      if (fresh) it->second = r.emit(Op::Convert, {v}, {.dtype = DType::F32}, n.loc);
      return it->second;
    };
    auto narrowed = [&](int32_t f32) {
      r.map_results(n, r.emit(Op::Convert, {f32}, {.dtype = src.type(n.out).dtype}, n.loc));
      return true;
    };
    if (n.op == Op::DotGeneral && is_half(src.type(n.in[0]).dtype))
      return narrowed(r.emit(Op::DotGeneral, {widened(n.in[0]), widened(n.in[1])}, n.attrs, n.loc));
    if (n.op == Op::Reduce && is_half(src.type(n.out).dtype))
      return narrowed(r.emit(Op::Reduce, {widened(n.in[0])}, n.attrs, n.loc));
    return false;
  });
}

}  // namespace sheaf::cpu
