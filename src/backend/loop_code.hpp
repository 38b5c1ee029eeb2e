// backend/loop_code.hpp — C-like code for the loop nests of a fused schedule, shared by the
// backends that render them: the CPU backend (C++ compiled by the system compiler) and the CUDA
// backend (CUDA C++ compiled by NVRTC with -default-device, where the same helpers become device
// functions). Element semantics follow the host kernels of src/tensor (elementwise.hpp,
// reduce.cpp): NaN-propagating max/min, wrapping integer arithmetic, Python-style integer
// division and remainder, saturating float→int conversion; kScalarHelpers spells them once.
// f16/bf16 elements are stored as 16-bit patterns and computed on as floats: a load widens, every
// op on them rounds its f32 result to the type (the host kernels compute each op in f32 and round),
// a store narrows; reductions of them accumulate in f32 and round once, when stored.
// A Loop, Copy or Update step becomes a LoopBody: the statements computed at every point of its
// iteration space (dims merged where every access allows it), over loop indices i0, i1, ...;
// the backend wraps them in its loops (CPU) or threads (CUDA).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/fusion.hpp"
#include "ir/ir.hpp"

namespace sheaf::loop_code {

// Typedefs (i64 i32 u32 b8 u16) and the sh_* helpers the expressions below call. Uses the
// compiler builtins __builtin_fabsf, __builtin_sqrtf, ... (GCC/Clang; the CUDA prelude maps them).
extern const char* const kScalarHelpers;

const char* ctype(DType d);                       // storage: "float", "i32", "u32", "b8", "u16"
const char* vtype(DType d);                       // values in loops: as ctype, "float" for f16/bf16
std::string literal(DType d, double v);           // a constant of type d (a vtype value)
std::string load_expr(DType d, const std::string& element);  // storage element → value
std::string store_expr(DType d, const std::string& value);   // value → storage element
std::string rounded(DType d, const std::string& value);      // an f32 value rounded to f16/bf16 d, as a value
std::string unary_expr(Unary u, DType d, const std::string& x);
std::string binary_expr(Binary op, DType d, const std::string& x, const std::string& y);
std::string convert_expr(DType from, DType to, const std::string& x);
double reduce_identity(Reduce r, DType d);

std::string combine_expr(Reduce r, DType d, const std::string& acc, const std::string& x);  // acc ⊕ x

// A rendered function (CPU loop function, CUDA kernel) `text` named `name` as the renderers
// compare them: the name (wherever it is called or defined: `name(`) and the comments dropped, the numbers of its buffer, value, accumulator,
// shared-array, column-sum, NaN-flag, held-row and held-point names (p{slot}, v{id}, a{id}, h{id}, k{id}, n{id}, q{id}, e{id})
// replaced by their order
// of first appearance. Functions with the same canonical text compute the same thing from their
// arguments, whatever step, slots and values they were rendered for (a model's repeated layers),
// so a unit keeps one of them.
std::string canonical(const std::string& text, const std::string& name);

// A loop nest over `space` after merging adjacent dims that every access (stride vector over
// the original dims) can walk as one: dims d, d+1 merge when both are reduced or both kept and
// stride[d] == stride[d+1]·size[d+1] for every access. Size-1 dims drop out.
struct Nest {
  std::vector<std::vector<size_t>> groups;  // merged dim → original dims (outermost first)
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;

  Nest() = default;
  Nest(const Shape& space, const std::vector<bool>& red, const std::vector<std::vector<int64_t>>& accesses);
  // The loop index of original dim d ("0" when the dim has size 1); d must not be merged.
  std::string axis_index(size_t d) const;
  // offset + Σ i_k · stride of the innermost original dim of group k; `at(k)` spells the index
  // of group k (default i{k}).
  std::string index(const std::vector<int64_t>& strides, int64_t offset,
                    const std::function<std::string(size_t)>& at = nullptr) const;
  // The groups that strides walk: group_bit(k) for each group k whose stride is not 0.
  uint64_t walks(const std::vector<int64_t>& strides) const;
  // When the innermost group is reduced and a reduced group comes before a kept one, moves the
  // kept groups outside the reduced ones, each side in its order, so that every sum runs over
  // trailing loops ([N C HW] summed over N and HW, a convolution's bias gradient, runs as C
  // outside N, HW); returns whether it moved any.
  bool kept_outside();
  static uint64_t group_bit(size_t k) { return uint64_t{1} << std::min<size_t>(k, 63); }
};

struct LoopBody {
  Nest nest;
  std::vector<int32_t> buffers;     // the buffers the step touches, in parameter order
  std::vector<bool> written;        // per buffer
  std::vector<int64_t> least_read;  // per buffer: the least offset a load reads it at (INT64_MAX: none)
  std::vector<std::string> stmts;   // at every point of the space
  std::vector<int32_t> reductions;  // reduce results
  bool scalar_acc = false;          // reductions accumulate in scalars a{v}, stored after the loops
  std::vector<int64_t> kept;        // strides of the reduction results over the space
  std::vector<std::string> identities;  // per reduction: its identity literal
  // Per reduction: an f32 max/min accumulating in a scalar beside a NaN flag n{v} (loop_body's
  // `nan_flags`): a{v} = x > a{v} ? x : a{v} (< for min), n{v} |= x != x; the result is NaN when
  // the flag is set, a{v} otherwise.
  std::vector<bool> nan_flagged;
  // Where the innermost loop's index meets a concatenation's operand boundary or a pad's edge
  // (ascending, inside (0, size)): between two cuts every such test has one answer, so a
  // renderer may run the loop in these segments, each with constant bounds its compiler can
  // fold the tests and clamped indices against (the CPU backend does).
  std::vector<int64_t> inner_cuts;
  // A load: stmts[stmt] reads `bytes` at an index over the groups `walks` (bit k: group k) that
  // is `direct` when it names no value (loop indices and numbers only; such a load may move to
  // the body's start: the CUDA renderer issues a point's direct loads together). A Copy's one
  // statement counts as a load that is not direct.
  // A direct load's statement is `const {type} {name} = {expr};` (a renderer may split it: the
  // CUDA row runs load every slot's point before computing any).
  struct Load {
    size_t stmt = 0;
    int64_t bytes = 0;
    uint64_t walks = 0;
    bool direct = false;
    int32_t buffer = -1;
    std::string type, name, expr;
  };
  std::vector<Load> loads;  // ascending stmt
  // A value stored at its point: stmts[stmt] writes v{value} into the buffer `value`.
  struct Store {
    size_t stmt = 0;
    int32_t value = 0;
  };
  std::vector<Store> stores;
  bool reads_held_points = false;  // a load reads e{buffer}[s] (Addressing::held_points)
  // The bytes a point loads that a loop over the groups `looped` (a mask) cannot hoist: loads
  // whose index walks one of them or names a value.
  int64_t point_bytes(uint64_t looped = ~uint64_t{0}) const;
};

// The body of Loop/Copy/Update step `index` of `s` (an Update writes its update's points; the
// backend copies the operand first). `pointer(buffer)` names a buffer's pointer;
// `scalar_acc(nest)` may reorder the nest's loops (Nest::kept_outside) and says whether
// reductions accumulate in scalars (each point of the kept dims then runs its reduced dims to
// the end before the next) or in place in their outputs.
// `nan_flags`: f32 maxima and minima accumulating in scalars compare plainly beside a NaN flag
// (LoopBody::nan_flagged), which an OpenMP max/min reduction vectorises, instead of combining
// with the NaN-propagating sh_max/sh_min (the CPU backend).
// `rows`, when given, are the nest's reduced dims instead of the step's reduce_dims (a
// non-reducing row phase walked row by row like the reductions before it).
// `where.bases`: buffers the body only reads whose pointer lies that many elements past the
// buffer's start (the CUDA renderer's arguments at a kernel's views: the kernels of views at
// different offsets, a model's per-head slices, are then one text); their offsets are counted from there.
// `where.held`: buffers of one value per row that a CUDA row run keeps in registers: every thread
// of the block working on row t holds that row's value in q{buffer}. A load at element t (an
// index over the dims that count the rows, row-major, from the buffer's start: the kept dims, or
// the reduced dims when `where.rows_reduced`, a column phase's) reads the register instead.
// `where.held_points`: buffers over the step's space that a CUDA row run keeps in registers: the
// thread computing a point holds its element in e{buffer}[s], s the point's slot among the
// thread's points of the row (the renderer's loop variable). A load at the point itself (offset
// 0, the space's row-major strides) reads the register instead (LoopBody::reads_held_points).
struct Addressing {
  std::map<int32_t, int64_t> bases;
  std::set<int32_t> held;
  std::set<int32_t> held_points;
  bool rows_reduced = false;
};
LoopBody loop_body(const ir::Graph& g, const fusion::Schedule& s, size_t index,
                   const std::function<std::string(int32_t)>& pointer, const std::function<bool(Nest&)>& scalar_acc,
                   bool nan_flags, const std::vector<int64_t>* rows = nullptr, const Addressing& where = {});

}  // namespace sheaf::loop_code
