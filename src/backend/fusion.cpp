// backend/fusion.cpp — fusion grouping (see fusion.hpp). One walk over the nodes in order:
//   - a view op composes its operand's View (a value computed inside a loop is first given a
//     buffer by the loop that computes it; a reshape that strides cannot express copies first);
//   - an elementwise node joins the loop of an operand with the same iteration space when every
//     other operand is readable there: computed in that loop at the same point, or held in a
//     buffer written by an earlier step (this is what keeps the order of steps valid);
//   - a reduction joins the loop computing its operand when that loop folds no dims yet or the
//     same dims; otherwise it starts a loop over its operand's shape;
//   - an operand computed in an earlier loop is recomputed in the reading loop when that is cheap
//     (recompute below), else that earlier loop writes it to a buffer;
//   - a dynamic_slice starts a loop over its result (its operand read through a view at the
//     clamped starts), which elementwise consumers may join;
//   - dynamic_update_slice becomes an Update step over its update's space; in GPU schedules, an
//     f32 scatter-add a Scatter step, arg_reduce and top_k a TopK step, and an attention chain
//     (attention.hpp, found before the walk) one Attention step placed at its last node, its
//     other nodes skipped (q, k and v copied first when their head dims are not contiguous and
//     16-byte aligned; read from the product under a projection's bias, which then is not
//     computed, when attention.hpp found one: fold_bias), and the chain's gradient one
//     AttentionGrad step placed at its first node (attention.hpp: a product reading dO, after the
//     chain), writing the gradients into their concatenation when attention.hpp found one
//     (concat_views; its pads and adds skipped);
//   - dot_general becomes a Dot step when both operands are (batched) strided matrices, after
//     copying an operand that is not; in GPU schedules with Epilogues, with the add of a bias
//     row that only products read (placed at the add) or with the reduce_sum of the rows it
//     contracts (placed at the earlier of the two): cuBLASLt's epilogues; a while becomes a While
//     step and other nodes Host steps, both reading contiguous buffers.
#include "backend/fusion.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include "base/error.hpp"
#include "passes/rewrite.hpp"
#include "tensor/shape.hpp"
#include "tensor/dot.hpp"

namespace sheaf::fusion {

using ir::Op;

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

namespace {

bool is_contiguous(const View& v, const Shape& shape) {
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (v.strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

// Strides for `to` over the same elements as `v` (row-major order), or nullopt when the merges
// and splits of dims cannot be expressed by strides (NumPy's no-copy reshape rule).
std::optional<View> reshape_view(const View& v, const Shape& from, const Shape& to) {
  View r{v.buffer, v.offset, std::vector<int64_t>(to.size(), 0)};
  if (shape_numel(from) == 0) {
    r.strides = contiguous_strides(to);
    return r;
  }
  std::vector<int64_t> od, os;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1) od.push_back(from[i]), os.push_back(v.strides[i]);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  const size_t on = od.size(), nn = to.size();
  while (ni < nn && oi < on) {
    int64_t np = to[ni], op = od[oi];
    while (np != op) {
      if (np < op) {
        if (nj >= nn) return std::nullopt;
        np *= to[nj++];
      } else {
        if (oj >= on) return std::nullopt;
        op *= od[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;
    r.strides[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) r.strides[k - 1] = r.strides[k] * to[k];
    ni = nj++;
    oi = oj++;
  }
  return r;  // trailing size-1 dims keep stride 0
}

// `dims` (outermost first) of a strided operand as one matrix axis {size, stride}; nullopt when
// they are not evenly spaced in memory. Size-1 dims never matter.
std::optional<std::pair<int64_t, int64_t>> merge_axes(const Shape& shape, const std::vector<int64_t>& strides,
                                                      const std::vector<int64_t>& dims) {
  int64_t size = 1, stride = 1;
  bool any = false;
  for (int64_t d : dims) {
    if (shape[d] == 1) continue;
    if (any && stride != strides[d] * shape[d]) return std::nullopt;
    size *= shape[d];
    stride = strides[d];
    any = true;
  }
  return std::pair{size, stride};
}


std::optional<DotLayout> dot_layout(const Shape& ls, const View& l, const Shape& rs, const View& r, const DotDims& d) {
  auto rows = merge_axes(ls, l.strides, free_dims(static_cast<int64_t>(ls.size()), d.lhs_batch, d.lhs_contract));
  auto inner = merge_axes(ls, l.strides, d.lhs_contract);
  auto rinner = merge_axes(rs, r.strides, d.rhs_contract);
  auto cols = merge_axes(rs, r.strides, free_dims(static_cast<int64_t>(rs.size()), d.rhs_batch, d.rhs_contract));
  if (!rows || !inner || !rinner || !cols) return std::nullopt;
  DotLayout out;
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    out.batch.push_back(ls[d.lhs_batch[i]]);
    out.batch_lhs.push_back(l.strides[d.lhs_batch[i]]);
    out.batch_rhs.push_back(r.strides[d.rhs_batch[i]]);
  }
  out.m = rows->first, out.k = inner->first, out.n = cols->first;
  out.a_rs = rows->second, out.a_cs = inner->second, out.b_rs = rinner->second, out.b_cs = cols->second;
  return out;
}

class Fuser {
 public:
  Fuser(const ir::Graph& g, const FuseOptions& o) : g_(g), o_(o), readers_(g) {
    size_t nv = g.types.size();
    s_.step_of.assign(nv, -1);
    s_.view.assign(nv, std::nullopt);
    s_.has_buffer.assign(nv, false);
    internal_.assign(nv, false);
  }

  Schedule run() {
    if (o_.attention && o_.composites) find_attention_chains();
    const bool bias = o_.epilogues.bias;  // the CPU takes bias epilogues only (rt->sgemm_bias)
    if (o_.gpu && bias && o_.epilogues.gelu && o_.composites) find_gelu_epilogues();
    if (bias) find_bias_epilogues();
    if (o_.gpu && bias && o_.epilogues.row_sums) find_row_sums();
    for (size_t i = 0; i < g_.nodes.size(); ++i) place(static_cast<int32_t>(i));
    for (int32_t r : g_.results) own_buffer(r);
    drop_unused_nodes();
    drop_empty_steps();
    if (o_.gpu) mark_row_phases(g_, s_);
    return std::move(s_);
  }

 private:
  const ir::Graph& g_;
  const FuseOptions& o_;
  Schedule s_;
  std::vector<bool> internal_;  // computed elementwise inside its loop (readable there without a buffer)
  std::vector<AttentionMatch> chains_;  // GPU: the attention chains that become Attention steps
  std::vector<int32_t> chain_of_;               // node → its chain in chains_ (-1: none)
  // GPU: the GELU epilogues (find_gelu_epilogues), the node each is placed at → its index there
  // (-1: none), and the nodes they compute (placed with them, not on their own).
  struct GeluEpilogue {
    int32_t dot = -1, add = -1, row = -1;  // the product, its bias add and row (forward; -1: none)
    const passes::GeluSite* site = nullptr;
    bool grad = false;  // gelu_grad(x, g = the product)
    bool aux = false;   // forward: x is written too
  };
  std::vector<GeluEpilogue> gelus_;
  std::vector<int32_t> gelu_at_;
  std::vector<bool> claimed_;
  std::vector<int32_t> partner_;  // GPU: node → the other node of its product's epilogue (the bias add, the
                                  // row sum; the product) — one Dot step computes both (-1: none)
  passes::Readers readers_;                     // value → the nodes reading it

  const Shape& shape(int32_t v) const { return g_.type(v).shape; }
  bool in_chain(size_t node) const { return !chain_of_.empty() && chain_of_[node] >= 0; }
  bool claimed(size_t node) const { return !claimed_.empty() && claimed_[node]; }
  int32_t partner(size_t node) const { return partner_.empty() ? -1 : partner_[node]; }
  void pair(int32_t product, int32_t other) {
    if (partner_.empty()) partner_.assign(g_.nodes.size(), -1);
    partner_[static_cast<size_t>(product)] = other, partner_[static_cast<size_t>(other)] = product;
  }
  Step& step(int32_t i) { return s_.steps[static_cast<size_t>(i)]; }

  // Nodes of a loop whose value the loop neither writes nor uses go (their readers recompute them).
  void drop_unused_nodes() {
    std::vector<bool> used(g_.types.size(), false);
    for (size_t i = 0; i < s_.steps.size(); ++i) {
      Step& st = s_.steps[i];
      if (st.kind != StepKind::Loop) continue;
      std::vector<int32_t> kept;
      for (size_t k = st.nodes.size(); k-- > 0;) {
        const ir::Node& n = g_.nodes[static_cast<size_t>(st.nodes[k])];
        const bool writes = s_.has_buffer[n.out] && s_.step_of[n.out] == static_cast<int32_t>(i);
        if (!writes && !used[n.out]) {
          std::erase(st.recomputed, n.out);
          continue;
        }
        kept.push_back(st.nodes[k]);
        for (int32_t u : n.in) used[u] = true;
      }
      for (int32_t ni : kept)  // `used` is per loop
        for (int32_t u : g_.nodes[static_cast<size_t>(ni)].in) used[u] = false;
      st.nodes.assign(kept.rbegin(), kept.rend());
    }
  }

  // Loops emptied by move_loop or drop_unused_nodes go; step numbers are made dense again.
  void drop_empty_steps() {
    std::vector<int32_t> renumber(s_.steps.size(), -1);
    std::vector<Step> kept;
    for (size_t i = 0; i < s_.steps.size(); ++i)
      if (!s_.steps[i].nodes.empty()) {
        renumber[i] = static_cast<int32_t>(kept.size());
        kept.push_back(std::move(s_.steps[i]));
      }
    s_.steps = std::move(kept);
    for (int32_t& st : s_.step_of)
      if (st >= 0) st = renumber[static_cast<size_t>(st)];
  }

  void give_buffer(int32_t v, int32_t step_index) {
    s_.has_buffer[v] = true;
    s_.view[v] = View{v, 0, contiguous_strides(shape(v))};
    s_.step_of[v] = step_index;
    if (step_index >= 0) step(step_index).outputs.push_back(v);
  }

  // Where v's elements can be read from outside its loop (a loop-computed value gets a buffer).
  const View& view_of(int32_t v) {
    if (!s_.view[v]) give_buffer(v, s_.step_of[v]);
    return *s_.view[v];
  }

  int32_t push(Step st) {
    s_.steps.push_back(std::move(st));
    return static_cast<int32_t>(s_.steps.size()) - 1;
  }

  // v in a buffer of its own (a view is copied by a Copy step).
  void own_buffer(int32_t v) {
    View w = view_of(v);
    if (s_.has_buffer[v]) return;
    Step c{.kind = StepKind::Copy, .nodes = {g_.def[v]}, .space = shape(v), .source = w};
    give_buffer(v, push(std::move(c)));
  }

  // v readable as a contiguous block (an own buffer, or a view that is laid out row-major).
  void contiguous(int32_t v) {
    if (!is_contiguous(view_of(v), shape(v))) own_buffer(v);
  }

  // The step that writes the memory v is read from outside loop `g` (-1: none, an input).
  int32_t producer(int32_t v) const {
    if (s_.view[v]) return s_.step_of[s_.view[v]->buffer];
    return s_.step_of[v];
  }

  // v is computed in loop `loop` (by it, or recomputed there).
  bool computed_in(int32_t loop, int32_t v) const { return internal_[v] && computes(s_, v, loop); }

  bool readable_in(int32_t loop, int32_t v) const { return computed_in(loop, v) || producer(v) < loop; }

  // A loop whose values nobody outside it has read yet, with no reductions, can move later into
  // loop `into` (same space): its inputs were ready before it, so they are ready there too.
  bool can_move_into(int32_t from, int32_t into) {
    const Step& f = step(from);
    if (from == into || f.kind != StepKind::Loop || !f.outputs.empty() || f.reduces || f.space != step(into).space)
      return false;
    for (int32_t ni : f.nodes)  // one loop computing a value twice
      if (computes(s_, g_.nodes[static_cast<size_t>(ni)].out, into)) return false;
    return true;
  }

  void move_loop(int32_t from, int32_t into) {
    Step& f = step(from);
    Step& t = step(into);
    for (int32_t ni : f.nodes) {
      int32_t& st = s_.step_of[g_.nodes[static_cast<size_t>(ni)].out];
      if (st == from) st = into;
    }
    t.nodes.insert(t.nodes.begin(), f.nodes.begin(), f.nodes.end());
    for (int32_t v : f.recomputed) t.recomputed.insert(std::upper_bound(t.recomputed.begin(), t.recomputed.end(), v), v);
    f.nodes.clear();
    f.recomputed.clear();
  }

  // Makes u readable in loop `loop`: computed there, recomputed there, or read from a buffer.
  void read_in(int32_t loop, int32_t u) {
    if (!computed_in(loop, u) && !recompute(loop, u)) view_of(u);
  }

  static constexpr size_t kMaxRecomputed = 32;  // nodes computed again for one value

  // Computes u again in `loop` when u is an elementwise value of an earlier loop that has no buffer
  // yet, and the values its recomputation reads from buffers take at most 1.5× u's bytes per
  // point (values read through a broadcast count nothing: layer-norm's gradient recomputes
  // dy·γ·(x − mean)/σ from bf16 dy and f32 x, 6 bytes for an f32 value). Writing u and reading
  // it back costs 2× for one reader; recomputing in each reader costs at most 1.5× per reader,
  // and u never takes memory (GPU schedules: 2× for a value with one reader, recompute_limit).
  // Returns whether it did.
  bool recompute(int32_t loop, int32_t u) {
    if (!internal_[u] || s_.view[u] || shape(u) != step(loop).space) return false;
    std::vector<int32_t> chain, stack{u};  // the values to compute again; those still to visit
    std::vector<int32_t> leaves;           // read from buffers
    while (!stack.empty()) {
      const int32_t w = stack.back();
      stack.pop_back();
      if (std::find(chain.begin(), chain.end(), w) != chain.end()) continue;
      const ir::Node& p = g_.producer(w);
      const bool elementwise = ir::is_elementwise(p.op) || p.op == Op::Iota;
      if (!elementwise || chain.size() == kMaxRecomputed) return false;
      chain.push_back(w);
      for (int32_t x : p.in) {
        if (computed_in(loop, x)) continue;
        if (internal_[x] && !s_.view[x]) stack.push_back(x);
        else if (!s_.view[x] || producer(x) >= loop) return false;
        else if (std::find(leaves.begin(), leaves.end(), x) == leaves.end()) leaves.push_back(x);
      }
    }
    double bytes = 0;  // per point of the loop
    for (int32_t x : leaves) {
      const std::vector<int64_t>& strides = s_.view[x]->strides;
      // Read through a broadcast (a row's mean, a column's scale): one read serves the axis, cached.
      if (std::find(strides.begin(), strides.end(), 0) == strides.end()) bytes += static_cast<double>(dtype_size(g_.type(x).dtype));
    }
    if (bytes > recompute_limit(u) * static_cast<double>(dtype_size(g_.type(u).dtype))) return false;
    std::sort(chain.begin(), chain.end(), [&](int32_t a, int32_t b) { return g_.def[a] < g_.def[b]; });
    Step& st = step(loop);
    for (int32_t w : chain) {
      st.nodes.push_back(g_.def[w]);
      st.recomputed.insert(std::upper_bound(st.recomputed.begin(), st.recomputed.end(), w), w);
    }
    return true;
  }

  // GPU schedules: a value with one reader is recomputed from up to 2× its bytes (as much as
  // writing and reading it back; a row kernel's later phases find the row's inputs in cache).
  double recompute_limit(int32_t u) const { return o_.gpu && readers_.uses[static_cast<size_t>(u)] == 1 ? 2.0 : 1.5; }

  // The loop node n joins, or -1 for a new one. Other loops computing n's operands at the same
  // points move into it when they can (horizontal fusion: `b2·v` and `(1-b2)·g²` of Adam).
  int32_t loop_to_join(const ir::Node& n) {
    int32_t best = -1;
    for (int32_t u : n.in)
      if (internal_[u] && shape(u) == shape(n.out)) best = std::max(best, s_.step_of[u]);
    if (best < 0) return -1;
    for (int32_t u : n.in)
      if (internal_[u] && can_move_into(s_.step_of[u], best)) move_loop(s_.step_of[u], best);
    for (int32_t u : n.in)
      if (!readable_in(best, u)) return -1;
    return best;
  }

  void place_elementwise(int32_t i, const ir::Node& n) {
    int32_t loop = loop_to_join(n);
    if (loop < 0) loop = push(Step{.kind = StepKind::Loop, .space = shape(n.out)});
    for (int32_t u : n.in) read_in(loop, u);
    step(loop).nodes.push_back(i);
    s_.step_of[n.out] = loop;
    internal_[n.out] = true;
  }

  // A gather reads its table at other points than its own: a loop of its own, after the step
  // writing the table (later elementwise ops may join it); the indices may be computed in it.
  void place_gather(int32_t i, const ir::Node& n) {
    const int32_t x = n.in[0], idx = n.in[1];
    view_of(x);
    int32_t loop = internal_[idx] && shape(idx) == shape(n.out) ? s_.step_of[idx] : -1;
    if (loop < 0 || s_.step_of[x] == loop || !readable_in(loop, x)) {
      view_of(idx);
      loop = push(Step{.kind = StepKind::Loop, .space = shape(n.out)});
    }
    step(loop).nodes.push_back(i);
    s_.step_of[n.out] = loop;
    internal_[n.out] = true;
  }

  // The latest loop over x's space that already folds `dims` and can read x there (x read from a
  // buffer written before it, or computed by a loop of elementwise nodes that nothing has read
  // yet and that can move into it: each value it reads is computed in it or written before the
  // sibling), or -1. Reduction n joins it rather than walking the same points again in a loop of
  // its own (a cross-entropy's pick of the target's logit beside the row max: one pass over the
  // logits). On the CPU only f32 reductions join f32 ones: those loops run as SIMD
  // (cpu/render.cpp's simd_pragma), a loop with any other reduction runs scalar.
  int32_t sibling_reduction(const ir::Node& n) {
    const int32_t x = n.in[0];
    const int32_t own = internal_[x] ? s_.step_of[x] : -1;
    if (own >= 0 && (step(own).reduces || !step(own).outputs.empty())) return -1;
    auto simd = [&](const Step& st) {
      if (g_.type(n.out).dtype != DType::F32) return false;
      return std::all_of(st.nodes.begin(), st.nodes.end(), [&](int32_t ni) {
        const ir::Node& m = g_.nodes[static_cast<size_t>(ni)];
        return m.op != Op::Reduce || g_.type(m.out).dtype == DType::F32;
      });
    };
    for (int32_t k = static_cast<int32_t>(s_.steps.size()); k-- > 0;) {
      const Step& st = step(k);
      if (k == own || st.kind != StepKind::Loop || !st.reduces || st.reduce_dims != n.attrs.dims || st.space != shape(x)) continue;
      if (!o_.gpu && !simd(st)) continue;
      if (own < 0 ? producer(x) < k : reads_only_before(own, k)) return k;
    }
    return -1;
  }

  // Whether loop `from`'s nodes read only values it computes or that steps before `k` write, and
  // compute none that loop `k` computes too.
  bool reads_only_before(int32_t from, int32_t k) const {
    for (int32_t ni : s_.steps[static_cast<size_t>(from)].nodes) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(ni)];
      if (computes(s_, n.out, k)) return false;
      for (int32_t u : n.in)
        if (!computed_in(from, u) && producer(u) >= k) return false;
    }
    return true;
  }

  void place_reduce(int32_t i, const ir::Node& n) {
    int32_t x = n.in[0];
    int32_t loop = -1;
    if (internal_[x]) {
      const Step& st = step(s_.step_of[x]);
      if (!st.reduces || st.reduce_dims == n.attrs.dims) loop = s_.step_of[x];
    }
    if (loop < 0 || !step(loop).reduces) {  // no loop folds yet: a sibling reduction's may
      if (const int32_t sibling = sibling_reduction(n); sibling >= 0) {
        if (loop >= 0) move_loop(loop, sibling);
        else read_in(sibling, x);
        loop = sibling;
      }
    }
    if (loop < 0) {
      loop = push(Step{.kind = StepKind::Loop, .space = shape(x)});
      read_in(loop, x);
    }
    step(loop).reduces = true;
    step(loop).reduce_dims = n.attrs.dims;
    step(loop).nodes.push_back(i);
    give_buffer(n.out, loop);
  }

  void place_view(const ir::Node& n) {
    if (s_.has_buffer[n.out]) return;  // a transpose an attention step writes (attention_output)
    int32_t x = n.in[0];
    const ir::Attrs& a = n.attrs;
    View w = view_of(x);
    View r{w.buffer, w.offset, {}};
    switch (n.op) {
      case Op::BroadcastInDim:
        r.strides.assign(shape(n.out).size(), 0);
        for (size_t k = 0; k < a.dims.size(); ++k)
          if (shape(x)[k] != 1) r.strides[a.dims[k]] = w.strides[k];
        break;
      case Op::Transpose:
        for (int64_t d : a.dims) r.strides.push_back(w.strides[d]);
        break;
      case Op::Reshape: {
        auto v = reshape_view(w, shape(x), shape(n.out));
        if (!v) {
          own_buffer(x);
          v = reshape_view(*s_.view[x], shape(x), shape(n.out));
        }
        r = *v;
        break;
      }
      case Op::Slice:
        r.strides = w.strides;
        for (size_t d = 0; d < w.strides.size(); ++d) {
          r.offset += a.starts[d] * w.strides[d];
          r.strides[d] *= a.strides[d];
        }
        break;
      case Op::Reverse:
        r.strides = w.strides;
        for (int64_t d : a.dims) {
          r.offset += (shape(x)[d] - 1) * w.strides[d];
          r.strides[d] = -w.strides[d];
        }
        break;
      default: throw SheafError("internal: not a view op");
    }
    s_.view[n.out] = std::move(r);
  }

  // Whether operand u's free dims and its contracting dims each merge into one matrix axis.
  bool merges(int32_t u, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
    const View& w = view_of(u);
    const auto rank = static_cast<int64_t>(shape(u).size());
    return merge_axes(shape(u), w.strides, free_dims(rank, batch, contract)) && merge_axes(shape(u), w.strides, contract);
  }

  // Whether every reader of v, through views (reshape, transpose, slice), is a product (with
  // `in_attention`: one of an attention chain's): no loop could compute v as it reads it, so v is
  // written to memory whatever computes it.
  bool read_by_products_only(int32_t v, bool in_attention) const {
    if (std::find(g_.results.begin(), g_.results.end(), v) != g_.results.end()) return !in_attention;
    for (int32_t r : readers_.nodes[static_cast<size_t>(v)]) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(r)];
      const bool view = n.op == Op::Reshape || n.op == Op::Transpose || n.op == Op::Slice;
      if (view ? !read_by_products_only(n.out, in_attention)
               : n.op != Op::DotGeneral || (in_attention && !in_chain(static_cast<size_t>(r))))
        return false;
    }
    return true;
  }

  // The products a bias add joins (Epilogues::bias): dot_general without batch dims, read only
  // by an add (same type) of a broadcast_in_dim of a row onto the rhs's free dims, its result's
  // last (a vector along the last; an einsum's [H, Hd] along [.., H, Hd]), whose sum only products read (a loop reading
  // it would add the bias as it loads, for free) — unless the add is an attention operand's bias
  // that its Attention step folds. The epilogue rounds once where the graph rounds the product and
  // then the sum: the same bits in f32, not in f16/bf16, whose sums join their product only where
  // attention chains alone read them and a fused-attention library may run those chains (no
  // attention bias folds: its f32 scores do not round as the graph does either) — the projection
  // of q, k and v. The product is placed at the add (place_biased_dot, which checks the row's view).
  void find_bias_epilogues() {
    std::vector<bool> attention_sum(g_.types.size(), false);
    if (o_.fold_attention_bias)
      for (const AttentionMatch& m : chains_)
        for (const OperandBias& b : {m.bias_q, m.bias_k, m.bias_v})
          if (b.sum >= 0) attention_sum[static_cast<size_t>(b.sum)] = true;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& add = g_.nodes[i];
      if (add.op != Op::Binary || add.attrs.binary != Binary::Add || attention_sum[static_cast<size_t>(add.out)] || in_chain(i) || claimed(i))
        continue;
      const bool half = g_.type(add.out).dtype != DType::F32;
      if ((half && o_.fold_attention_bias) || !read_by_products_only(add.out, half)) continue;
      for (size_t side = 0; side < 2; ++side) {
        const ir::Node& d = g_.producer(add.in[side]);
        const ir::Node& row = g_.producer(add.in[1 - side]);
        if (d.op != Op::DotGeneral || readers_.sole(d.out) != static_cast<int32_t>(i) || !d.attrs.dot.lhs_batch.empty() ||
            g_.type(d.out) != g_.type(add.out) || row.op != Op::BroadcastInDim)
          continue;
        const size_t free = shape(d.in[1]).size() - d.attrs.dot.rhs_contract.size(), rank = shape(add.out).size();
        std::vector<int64_t> trailing(free);
        std::iota(trailing.begin(), trailing.end(), static_cast<int64_t>(rank - free));
        if (free == 0 || shape(row.in[0]).size() != free || row.attrs.dims != trailing) continue;
        pair(g_.def[d.out], static_cast<int32_t>(i));
        break;
      }
    }
  }

  // The products that sum an operand's rows as they contract them (Epilogues::row_sums,
  // DotLayout::row_sum): reduce_sum of y over its leading dims, keeping one or more (a bias
  // gradient [tokens, features] → [features]; an einsum's [B, T, H, Hd] → [H, Hd]), where y is in memory
  // whatever runs (a parameter, a product's result, an attention step's gradient, or a reshape of
  // one: no loop computes y, which could sum it as it goes), and a product without batch dims and without a
  // bias epilogue, of y's type, contracting exactly those dims of y. The pair is placed at the
  // earlier of its two nodes, where the later one's operands must be defined already.
  void find_row_sums() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const ir::Node& r = g_.nodes[i];
      if (r.op != Op::Reduce || r.attrs.reduce != Reduce::Sum || in_chain(i) || claimed(i)) continue;
      const int32_t y = r.in[0];
      const auto rank = static_cast<int64_t>(shape(y).size());
      const std::vector<int64_t> rows = leading_axes(r.attrs.dims.size());
      int32_t x = y;  // y's memory: a reshape of a value in memory is a view of it (merged heads' d(qkv))
      while (g_.producer(x).op == Op::Reshape) x = g_.producer(x).in[0];
      const ir::Node& from = g_.producer(x);
      const bool in_memory = from.op == Op::Parameter || from.op == Op::DotGeneral || in_chain(static_cast<size_t>(g_.def[x])) ||
                             gelu_grad_result(x);
      if (rows.empty() || static_cast<int64_t>(rows.size()) >= rank || r.attrs.dims != rows || !in_memory) continue;
      for (int32_t pi : readers_.nodes[static_cast<size_t>(y)]) {
        const ir::Node& p = g_.nodes[static_cast<size_t>(pi)];
        if (p.op != Op::DotGeneral || !p.attrs.dot.lhs_batch.empty() || g_.type(p.out).dtype != g_.type(y).dtype ||
            (p.in[0] == y) == (p.in[1] == y) || partner(static_cast<size_t>(pi)) >= 0 || in_chain(static_cast<size_t>(pi)) ||
            claimed(static_cast<size_t>(pi)))
          continue;
        std::vector<int64_t> contract = p.in[0] == y ? p.attrs.dot.lhs_contract : p.attrs.dot.rhs_contract;
        std::sort(contract.begin(), contract.end());
        // the pair is placed at its first node: the second's operands are defined before it
        const auto first = static_cast<int32_t>(std::min<size_t>(i, static_cast<size_t>(pi)));
        const std::vector<int32_t>& late = g_.nodes[static_cast<size_t>(std::max<size_t>(i, static_cast<size_t>(pi)))].in;
        if (contract != rows || std::any_of(late.begin(), late.end(), [&](int32_t u) { return g_.def[u] >= first; })) continue;
        pair(pi, static_cast<int32_t>(i));
        break;
      }
    }
  }

  // A product that can carry a GELU epilogue (DotLayout::act): dot_general without batch dims, of
  // one float type, nothing empty, whose result rows (its rhs free dims) are a multiple of 8
  // elements (the aux's leading dim), not already part of a chain or another epilogue.
  bool gelu_product(int32_t v) const {
    const ir::Node& d = g_.producer(v);
    const auto di = static_cast<size_t>(g_.def[v]);
    if (d.op != Op::DotGeneral || !d.attrs.dot.lhs_batch.empty() || in_chain(di) || claimed(di)) return false;
    const DType t = g_.type(d.out).dtype;
    if ((t != DType::F32 && t != DType::F16 && t != DType::BF16) || g_.type(d.in[0]).dtype != t || g_.type(d.in[1]).dtype != t) return false;
    if (shape_numel(shape(d.out)) == 0 || shape_numel(shape(d.in[0])) == 0 || shape_numel(shape(d.in[1])) == 0) return false;
    int64_t n = 1;
    for (int64_t a : free_dims(static_cast<int64_t>(shape(d.in[1]).size()), {}, d.attrs.dot.rhs_contract)) n *= shape(d.in[1])[static_cast<size_t>(a)];
    return n % 8 == 0;
  }

  // x = add(product, broadcast of a vector onto the last dim), the product read only by the add
  // and its free rhs dim the result's last (find_bias_epilogues' form), the vector in a buffer of
  // its own (not a view: its row is then contiguous and 16-byte aligned): the epilogue's product,
  // add and row, or nullopt.
  std::optional<GeluEpilogue> gelu_bias(int32_t x) const {
    const ir::Node& add = g_.producer(x);
    if (add.op != Op::Binary || add.attrs.binary != Binary::Add || in_chain(static_cast<size_t>(g_.def[x]))) return std::nullopt;
    for (size_t side = 0; side < 2; ++side) {
      const ir::Node& d = g_.producer(add.in[side]);
      const ir::Node& row = g_.producer(add.in[1 - side]);
      if (!gelu_product(add.in[side]) || readers_.sole(d.out) != g_.def[x] || g_.type(d.out) != g_.type(x) ||
          shape(d.in[1]).size() != d.attrs.dot.rhs_contract.size() + 1 || row.op != Op::BroadcastInDim || shape(row.in[0]).size() != 1 ||
          row.attrs.dims[0] != static_cast<int64_t>(shape(x).size()) - 1)
        continue;
      const Op vec = g_.producer(row.in[0]).op;
      if (vec == Op::BroadcastInDim || vec == Op::Reshape || vec == Op::Transpose || vec == Op::Slice || vec == Op::Reverse ||
          vec == Op::OptimizationBarrier)
        continue;
      return GeluEpilogue{.dot = g_.def[add.in[side]], .add = g_.def[x], .row = add.in[1 - side]};
    }
    return std::nullopt;
  }

  // The GELU epilogues (DotLayout::act) of the graph's gelu and gelu_grad sites: a gelu of a
  // product (gelu_product) or of its bias add (gelu_bias), placed at the product or the add; a
  // gelu_grad whose cotangent is a product that only the site reads, of an x computed before
  // it, placed at the product. The sites' nodes are claimed: not placed on their own. Then,
  // last to first, a claimed node that an unclaimed one (or the graph's results) reads is
  // unclaimed again — computed as usual, from x in memory (a gradient's expansion may share
  // nodes with its forward's) — and a forward writes x (aux) when an unclaimed node, a result or
  // a gradient's epilogue reads it.
  void find_gelu_epilogues() {
    const size_t nn = g_.nodes.size();
    for (const passes::GeluSite& s : o_.composites->gelu) {
      std::optional<GeluEpilogue> e = gelu_bias(s.x);
      if (!e && gelu_product(s.x)) e = GeluEpilogue{.dot = g_.def[s.x]};
      if (!e) continue;
      e->site = &s;
      gelus_.push_back(*e);
    }
    for (const passes::GeluSite& s : o_.composites->gelu_grad) {
      if (!gelu_product(s.g) || g_.type(s.x) != g_.type(s.g) || g_.def[s.x] >= g_.def[s.g]) continue;
      const std::vector<int32_t>& readers = readers_.nodes[static_cast<size_t>(s.g)];
      if (std::any_of(readers.begin(), readers.end(), [&](int32_t r) { return !std::binary_search(s.nodes.begin(), s.nodes.end(), r); }) ||
          std::find(g_.results.begin(), g_.results.end(), s.g) != g_.results.end())
        continue;
      gelus_.push_back(GeluEpilogue{.dot = g_.def[s.g], .site = &s, .grad = true});
    }
    // one epilogue per product (a product both sites could take keeps the first)
    std::vector<bool> taken(nn, false);
    std::erase_if(gelus_, [&](const GeluEpilogue& e) {
      const bool again = taken[static_cast<size_t>(e.dot)];
      taken[static_cast<size_t>(e.dot)] = true;
      return again;
    });
    if (gelus_.empty()) return;
    claimed_.assign(nn, false);
    gelu_at_.assign(nn, -1);
    // values the steps write or keep inside (x: decided below), and the steps' own nodes, which
    // read their operands from memory
    std::vector<bool> written(g_.types.size(), false), stepped(nn, false);
    for (size_t k = 0; k < gelus_.size(); ++k) {
      const GeluEpilogue& e = gelus_[k];
      for (int32_t ni : e.site->nodes) claimed_[static_cast<size_t>(ni)] = true;
      for (int32_t ni : {e.dot, e.add})
        if (ni >= 0) claimed_[static_cast<size_t>(ni)] = stepped[static_cast<size_t>(ni)] = true;
      written[static_cast<size_t>(g_.nodes[static_cast<size_t>(e.dot)].out)] = true;
      gelu_at_[static_cast<size_t>(e.add >= 0 ? e.add : e.dot)] = static_cast<int32_t>(k);
      written[static_cast<size_t>(e.site->out)] = true;
      if (!e.grad) written[static_cast<size_t>(e.site->x)] = true;
    }
    std::vector<bool> result(g_.types.size(), false);
    for (int32_t r : g_.results) result[static_cast<size_t>(r)] = true;
    for (size_t i = nn; i-- > 0;) {
      if (!claimed_[i]) continue;
      const ir::Node& n = g_.nodes[i];
      for (int32_t k = 0; k < n.nout && claimed_[i]; ++k) {
        const int32_t v = n.out + k;
        if (written[static_cast<size_t>(v)]) continue;
        const std::vector<int32_t>& rs = readers_.nodes[static_cast<size_t>(v)];
        if (result[static_cast<size_t>(v)] ||
            std::any_of(rs.begin(), rs.end(), [&](int32_t r) { return !claimed_[static_cast<size_t>(r)] || stepped[static_cast<size_t>(r)]; }))
          claimed_[i] = false;
      }
    }
    for (GeluEpilogue& e : gelus_) {
      if (e.grad) continue;
      const std::vector<int32_t>& rs = readers_.nodes[static_cast<size_t>(e.site->x)];
      e.aux = result[static_cast<size_t>(e.site->x)] || std::any_of(rs.begin(), rs.end(), [&](int32_t r) { return !claimed_[static_cast<size_t>(r)]; }) ||
              std::any_of(gelus_.begin(), gelus_.end(), [&](const GeluEpilogue& b) { return b.grad && b.site->x == e.site->x; });
    }
  }

  // Whether v is a gelu_grad epilogue's result (written by a Dot step whatever runs).
  bool gelu_grad_result(int32_t v) const {
    return std::any_of(gelus_.begin(), gelus_.end(), [&](const GeluEpilogue& e) { return e.grad && e.site->out == v; });
  }

  // GELU epilogue e as one Dot step (its anchor's turn). A gradient's x is read contiguous and
  // 16-byte aligned (copied when its view is not). Where the step cannot be (it always can: the
  // product's checks are gelu_product's), its nodes are placed as usual.
  void place_gelu(const GeluEpilogue& e) {
    const ir::Node& d = g_.nodes[static_cast<size_t>(e.dot)];
    const int32_t x = e.site->x;
    if (e.grad) {
      const View& w = view_of(x);
      if (!is_contiguous(w, shape(x)) || (w.offset * static_cast<int64_t>(dtype_size(g_.type(x).dtype))) % 16 != 0) own_buffer(x);
    }
    Epilogue ep{.add = e.add, .row = e.row, .act = e.grad ? DotLayout::Act::GeluGrad : DotLayout::Act::Gelu, .act_out = e.site->out,
                .aux = e.grad || e.aux ? x : -1};
    if (place_dot(e.dot, d, ep)) return;
    for (int32_t ni : e.site->nodes) claimed_[static_cast<size_t>(ni)] = false;  // placed at their turn
    for (int32_t ni : {e.dot, e.add})
      if (ni >= 0) place_node(ni, g_.nodes[static_cast<size_t>(ni)]);
  }

  // Node i of an epilogue pair (partner_) and its partner: the pair is placed at the add of a
  // bias (its row may be computed after the product) or at the first node of a row sum (the
  // product's other operand is defined before it) as one Dot step; nodes placed at neither are
  // skipped here. Where the step cannot be, each node is placed as usual.
  void place_pair(int32_t i, const ir::Node& n, int32_t other) {
    const ir::Node& o = g_.nodes[static_cast<size_t>(other)];
    const bool bias = n.op == Op::Binary || o.op == Op::Binary;
    if (bias ? n.op != Op::Binary : other < i) return;  // placed with its partner
    const int32_t di = n.op == Op::DotGeneral ? i : other, ei = n.op == Op::DotGeneral ? other : i;
    const ir::Node &d = g_.nodes[static_cast<size_t>(di)], &e = g_.nodes[static_cast<size_t>(ei)];
    if (bias ? place_biased_dot(di, d, ei, e) : place_dot(di, d, {.sum = ei, .sum_of_a = d.in[0] == e.in[0]})) return;
    for (int32_t k : {std::min(di, ei), std::max(di, ei)}) place_node(k, g_.nodes[static_cast<size_t>(k)]);
  }

  // Product d (node di) and its bias add (node ai) as one Dot step, when the row is readable as
  // DotLayout::bias says.
  bool place_biased_dot(int32_t di, const ir::Node& d, int32_t ai, const ir::Node& add) {
    const int32_t row = add.in[add.in[0] == d.out ? 1 : 0];
    const View& w = view_of(row);
    const size_t es = dtype_size(g_.type(row).dtype), free = shape(g_.producer(row).in[0]).size(), lead = w.strides.size() - free;
    bool plain = (w.offset * static_cast<int64_t>(es)) % 16 == 0;
    int64_t stride = 1;  // the row's dims row-major, the others broadcast
    for (size_t j = w.strides.size(); j-- > lead;) plain = plain && w.strides[j] == stride, stride *= shape(row)[j];
    for (size_t j = 0; j < lead; ++j) plain = plain && w.strides[j] == 0;
    return plain && place_dot(di, d, {.add = ai, .row = row});
  }

  // What a Dot step computes beside its product: with `add` (node index) and `row`, the bias
  // epilogue of find_bias_epilogues (the add's value is the step's output); with `sum` (node
  // index), the reduce of find_row_sums.
  // With `act` (and act_out, aux), the GELU epilogue of find_gelu_epilogues (DotLayout::act).
  struct Epilogue {
    int32_t add = -1, row = -1, sum = -1;
    bool sum_of_a = false;
    DotLayout::Act act = DotLayout::Act::None;
    int32_t act_out = -1, aux = -1;
  };

  // dot_general `n` (node i) as a Dot step, with `e`.
  bool place_dot(int32_t i, const ir::Node& n) { return place_dot(i, n, Epilogue{}); }
  bool place_dot(int32_t i, const ir::Node& n, const Epilogue& e) {
    int32_t l = n.in[0], r = n.in[1];
    DType t = g_.type(l).dtype;
    if ((t != DType::F32 && !(o_.gpu && (t == DType::F16 || t == DType::BF16))) || g_.type(n.out).dtype != t || shape_numel(shape(n.out)) == 0 || shape_numel(shape(l)) == 0 ||
        shape_numel(shape(r)) == 0)
      return false;
    const DotDims& d = n.attrs.dot;
    // An operand whose dims do not merge into matrix axes is copied into a buffer of its own
    // (canonical_dots put its dims in an order that merges when row-major).
    if (!merges(l, d.lhs_batch, d.lhs_contract)) own_buffer(l);
    if (!merges(r, d.rhs_batch, d.rhs_contract)) own_buffer(r);
    auto layout = dot_layout(shape(l), view_of(l), shape(r), view_of(r), d);
    if (!layout) return false;
    if (e.sum >= 0) {
      const int32_t sum = g_.nodes[static_cast<size_t>(e.sum)].out;
      layout->row_sum = sum, layout->row_sum_of_a = e.sum_of_a;
      const int32_t st = push(Step{.kind = StepKind::Dot, .nodes = {i, e.sum}, .dot = *layout});
      give_buffer(n.out, st);
      give_buffer(sum, st);
      return true;
    }
    if (e.act != DotLayout::Act::None) {
      layout->act = e.act, layout->act_out = e.act_out, layout->aux = e.aux, layout->bias = e.row;
      std::vector<int32_t> nodes{i};
      if (e.add >= 0) nodes.push_back(e.add);
      const int32_t st = push(Step{.kind = StepKind::Dot, .nodes = nodes, .dot = *layout});
      for (int32_t ni : nodes) s_.step_of[g_.nodes[static_cast<size_t>(ni)].out] = st;
      give_buffer(e.act_out, st);
      if (e.act == DotLayout::Act::Gelu && e.aux >= 0) give_buffer(e.aux, st);
      return true;
    }
    if (e.add < 0) {
      give_buffer(n.out, push(Step{.kind = StepKind::Dot, .nodes = {i}, .dot = *layout}));
      return true;
    }
    layout->bias = e.row;
    const int32_t st = push(Step{.kind = StepKind::Dot, .nodes = {i, e.add}, .dot = *layout});
    s_.step_of[n.out] = st;
    give_buffer(g_.nodes[static_cast<size_t>(e.add)].out, st);
    return true;
  }

  // CPU: concatenate(x1 .. xk) along axis a as one Copy step per operand, into the region
  // [off_j, off_j + size_j) of a of the result's buffer (placed by the first copy).
  void place_concatenate(int32_t i, const ir::Node& n) {
    const auto a = static_cast<size_t>(n.attrs.axis);
    const std::vector<int64_t> strides = contiguous_strides(shape(n.out));
    int64_t at = 0;
    for (int32_t u : n.in) {
      const View source = view_of(u);
      const int32_t st = push(Step{.kind = StepKind::Copy, .nodes = {i}, .space = shape(u), .source = source,
                                   .into = View{n.out, at * strides[a], strides}});
      if (!s_.has_buffer[n.out]) give_buffer(n.out, st);
      at += shape(u)[a];
    }
  }

  // dynamic_slice(x, starts..): a loop of its own over the result, reading x and the starts
  // through views (like a gather, x is never computed in that loop).
  void place_dynamic_slice(int32_t i, const ir::Node& n) {
    for (int32_t u : n.in) view_of(u);
    int32_t loop = push(Step{.kind = StepKind::Loop, .nodes = {i}, .space = shape(n.out)});
    s_.step_of[n.out] = loop;
    internal_[n.out] = true;
  }

  // The operand x of a Scatter or Update step: contiguous, unless it is a splat the step fills.
  void start_from(int32_t x) {
    if (!splat_byte(g_, view_of(x))) contiguous(x);
  }

  // dynamic_update_slice(x, u, starts..): x copied byte for byte into the result (unless the
  // backend runs it in place), then u's points written at the clamped starts.
  bool place_update(int32_t i, const ir::Node& n) {
    if (shape_numel(shape(n.out)) == 0) return false;
    start_from(n.in[0]);
    for (size_t k = 1; k < n.in.size(); ++k) view_of(n.in[k]);
    give_buffer(n.out, push(Step{.kind = StepKind::Update, .nodes = {i}, .space = shape(n.in[1])}));
    return true;
  }

  bool place_scatter(int32_t i, const ir::Node& n) {
    if (!o_.gpu || n.attrs.scatter != ScatterMode::Add || g_.type(n.out).dtype != DType::F32 || shape_numel(shape(n.out)) == 0)
      return false;
    start_from(n.in[0]);  // copied byte for byte into the result
    view_of(n.in[1]);
    view_of(n.in[2]);
    give_buffer(n.out, push(Step{.kind = StepKind::Scatter, .nodes = {i}, .space = shape(n.in[2])}));
    return true;
  }

  // A kernel makes a pass over x's row per element picked: top_k with a larger k runs on the host.
  static constexpr int64_t kMaxPicks = 64;

  bool place_top_k(int32_t i, const ir::Node& n) {
    if (!o_.gpu || shape_numel(shape(n.out)) == 0 || (n.op == Op::TopK && n.attrs.k > kMaxPicks)) return false;
    view_of(n.in[0]);
    int32_t st = push(Step{.kind = StepKind::TopK, .nodes = {i}, .space = shape(n.in[0])});
    for (int32_t k = 0; k < n.nout; ++k) give_buffer(n.out + k, st);
    return true;
  }

  // The attention chains whose shapes and types an Attention step takes (fusion.hpp), nothing
  // empty. GPU: f16/bf16, head dims multiples of 16 (the products' k and n steps) up to
  // kAttentionMaxHead (kAttentionGradMaxHead with a gradient). CPU: f32, at most
  // kCpuAttentionMaxBatchDims batch dims and kCpuAttentionMaxScores scores per batch index.
  void find_attention_chains() {
    for (AttentionMatch& m : find_attention(g_, *o_.composites)) {
      const ir::Node &d1 = g_.nodes[static_cast<size_t>(m.scores)], &d2 = g_.nodes[static_cast<size_t>(m.out)];
      const int64_t d = shape(d1.in[0])[static_cast<size_t>(d1.attrs.dot.lhs_contract[0])], dv = shape(d2.out).back();
      const int64_t most = m.grad ? kAttentionGradMaxHead : kAttentionMaxHead;
      auto head = [&](int64_t h) { return h > 0 && h % 16 == 0 && h <= most; };
      const Shape& scores = shape(d1.out);
      const bool takes = o_.gpu ? is_half(g_.type(d2.out).dtype) && head(d) && head(dv)
                                : g_.type(d2.out).dtype == DType::F32 && scores.size() - 2 <= kCpuAttentionMaxBatchDims &&
                                      scores[scores.size() - 2] * scores.back() <= kCpuAttentionMaxScores;
      if (!takes || shape_numel(shape(d2.out)) == 0 || shape_numel(scores) == 0) continue;
      if (chain_of_.empty()) chain_of_.assign(g_.nodes.size(), -1);
      if (m.grad && m.grad->concat >= 0 && !concat_views(*m.grad)) m.grad->concat = -1, m.grad->concat_nodes.clear();
      for (int32_t n : m.nodes) chain_of_[static_cast<size_t>(n)] = static_cast<int32_t>(chains_.size());
      if (m.grad)
        for (const std::vector<int32_t>* ns : {&m.grad->nodes, &m.grad->concat_nodes})
          for (int32_t n : *ns) chain_of_[static_cast<size_t>(n)] = static_cast<int32_t>(chains_.size());
      chains_.push_back(std::move(m));
    }
  }

  // Whether an attention operand read through `w`, dims (batch.., rows, head), has a contiguous
  // head dim and 16-byte alignment (GPU; fold_bias asks only there).
  bool aligned(const View& w, const std::vector<int64_t>& batch, int64_t rows, int64_t head) const {
    bool ok = (o_.aligned_params || g_.producer(w.buffer).op != Op::Parameter) && w.strides[static_cast<size_t>(head)] == 1 && w.offset % 8 == 0 && w.strides[static_cast<size_t>(rows)] % 8 == 0;
    for (int64_t b : batch) ok = ok && w.strides[static_cast<size_t>(b)] % 8 == 0;
    return ok;
  }

  // Operand u of an Attention step, dims (batch.., rows, head): its batch, row and head strides,
  // with a contiguous head dim and 16-byte alignment on the GPU, and on the CPU strides a BLAS
  // reads as a matrix (the head's or the rows' 1 and the other at least the size of that dim, or
  // both positive) — else u is copied to a buffer of its own first.
  void attention_operand(int32_t u, const std::vector<int64_t>& batch, int64_t rows, int64_t head,
                         std::vector<int64_t>& batch_strides, int64_t& row_stride, int64_t& head_stride) {
    const View& at = view_of(u);
    const int64_t rs = at.strides[static_cast<size_t>(rows)], cs = at.strides[static_cast<size_t>(head)];
    const int64_t nr = shape(u)[static_cast<size_t>(rows)], nc = shape(u)[static_cast<size_t>(head)];
    const bool fits = o_.gpu ? aligned(at, batch, rows, head) : (cs == 1 && rs >= nc) || (rs == 1 && cs >= nr) || (rs > 1 && cs > 1);
    if (!fits) own_buffer(u);
    const View& w = *s_.view[u];
    for (int64_t b : batch) batch_strides.push_back(w.strides[static_cast<size_t>(b)]);
    row_stride = w.strides[static_cast<size_t>(rows)], head_stride = w.strides[static_cast<size_t>(head)];
  }

  // Whether the mask [b.., t, s] of `a`, read through `w`, is a constant by which the scores are
  // kept (where it is `keep_if`) exactly at s ≤ t.
  // Each mask and layout is scanned once (attention heads written as modules share one mask).
  bool causal_mask(const View& w, const AttentionLayout& a, bool keep_if) {
    const Tensor* c = passes::constant_value(g_, w.buffer);
    if (!c) return false;
    std::vector<int64_t> key{w.buffer, w.offset, a.t, a.s, a.mask_ts, a.mask_ss, keep_if};
    key.insert(key.end(), a.batch.begin(), a.batch.end());
    key.insert(key.end(), a.batch_mask.begin(), a.batch_mask.end());
    auto [known, fresh] = causal_masks_.try_emplace(std::move(key), true);
    if (!fresh) return known->second;
    const bool every_batch_alike = std::all_of(a.batch_mask.begin(), a.batch_mask.end(), [](int64_t st) { return st == 0; });
    for (int64_t b = 0, nb = every_batch_alike ? 1 : shape_numel(a.batch); b < nb; ++b) {
      int64_t base = w.offset, rest = b;
      for (size_t i = a.batch.size(); i-- > 0; rest /= a.batch[i]) base += rest % a.batch[i] * a.batch_mask[i];
      for (int64_t t = 0; t < a.t; ++t)
        for (int64_t s = 0; s < a.s; ++s)
          if (((c->get(base + t * a.mask_ts + s * a.mask_ss) != 0) == keep_if) != (s <= t)) return known->second = false;
    }
    return true;
  }
  std::map<std::vector<int64_t>, bool> causal_masks_;  // causal_mask by (buffer, offset, t, s, strides, keep_if, batch)

  // An operand of an attention chain: its value, the bias under it, its dims, its layout's Bias.
  struct Operand {
    int32_t value;
    OperandBias under;
    std::vector<int64_t> batch;
    int64_t rows, head;
    AttentionLayout::Bias* bias;
  };

  // The operands read from B = `sum` (OperandBias; -1: none) read P's buffer instead, with
  // their Bias, and B gets no buffer — when every one of them is a view of B, read where the
  // columns of a batch index lie within one row of B and aligned in P as attention_operand wants.
  void fold_bias(int32_t sum, const std::vector<Operand>& operands) {
    if (sum < 0 || !s_.has_buffer[sum]) return;  // none, or folded already
    const OperandBias& under = std::find_if(operands.begin(), operands.end(), [&](const Operand& x) { return x.under.sum == sum; })->under;
    if (!s_.view[under.product] || !is_contiguous(*s_.view[under.product], shape(sum))) return;
    const View& pv = *s_.view[under.product];
    const int64_t row = shape(sum).back();
    if (!is_contiguous(view_of(under.bias), shape(under.bias))) return;
    for (const Operand& x : operands) {
      if (x.under.sum != sum) continue;
      if (!s_.view[x.value] || s_.view[x.value]->buffer != sum) return;
      View w = *s_.view[x.value];
      int64_t last = w.offset % row + shape(x.value)[static_cast<size_t>(x.head)];  // past the last column a batch index reads
      for (int64_t b : x.batch) {
        const int64_t st = w.strides[static_cast<size_t>(b)];
        if (st % row != 0) last += st < 0 ? row : (shape(x.value)[static_cast<size_t>(b)] - 1) * st;
      }
      w.offset += pv.offset;
      if (w.strides[static_cast<size_t>(x.rows)] % row != 0 || last > row || !aligned(w, x.batch, x.rows, x.head)) return;
    }
    for (std::optional<View>& w : s_.view)
      if (w && w->buffer == sum) w->buffer = pv.buffer, w->offset += pv.offset;
    s_.has_buffer[sum] = false;
    s_.view[sum].reset();
    std::erase(step(s_.step_of[sum]).outputs, sum);
    for (const Operand& x : operands)
      if (x.under.sum == sum) *x.bias = {.value = x.under.bias, .row = row, .shift = pv.offset};
  }

  void place_attention(const AttentionMatch& m) {
    const ir::Node &d1 = g_.nodes[static_cast<size_t>(m.scores)], &d2 = g_.nodes[static_cast<size_t>(m.out)];
    const DotDims &qk = d1.attrs.dot, &pv = d2.attrs.dot;
    const Shape& out = shape(d2.out);
    const size_t nb = out.size() - 2;
    AttentionLayout a{.batch = Shape(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(nb)),
                      .t = out[nb], .s = shape(d2.in[0])[nb + 1], .d = shape(d1.in[0])[static_cast<size_t>(qk.lhs_contract[0])],
                      .dv = out[nb + 1], .q = d1.in[0], .k = d1.in[1], .v = d2.in[1], .mask = m.mask, .prologue = m.prologue};
    auto free_dim = [&](int32_t u, const std::vector<int64_t>& batch, int64_t contract) {
      return free_dims(static_cast<int64_t>(shape(u).size()), batch, {contract})[0];
    };
    const std::vector<Operand> operands{
        {a.q, m.bias_q, qk.lhs_batch, free_dim(a.q, qk.lhs_batch, qk.lhs_contract[0]), qk.lhs_contract[0], &a.bias_q},
        {a.k, m.bias_k, qk.rhs_batch, free_dim(a.k, qk.rhs_batch, qk.rhs_contract[0]), qk.rhs_contract[0], &a.bias_k},
        {a.v, m.bias_v, pv.rhs_batch, pv.rhs_contract[0], free_dim(a.v, pv.rhs_batch, pv.rhs_contract[0]), &a.bias_v}};
    if (o_.fold_attention_bias)
      for (const Operand& x : operands) fold_bias(x.under.sum, operands);
    attention_operand(a.q, operands[0].batch, operands[0].rows, operands[0].head, a.batch_q, a.q_rs, a.q_cs);
    attention_operand(a.k, operands[1].batch, operands[1].rows, operands[1].head, a.batch_k, a.k_rs, a.k_cs);
    attention_operand(a.v, operands[2].batch, operands[2].rows, operands[2].head, a.batch_v, a.v_rs, a.v_cs);
    if (a.mask >= 0) {
      const View& w = view_of(a.mask);
      a.batch_mask.assign(w.strides.begin(), w.strides.begin() + static_cast<std::ptrdiff_t>(nb));
      a.mask_ts = w.strides[nb], a.mask_ss = w.strides[nb + 1];
      auto mask_op = std::find_if(a.prologue.begin(), a.prologue.end(), [](const ScoreOp& op) { return op.kind == ScoreOp::Kind::Mask; });
      a.causal = causal_mask(w, a, mask_op->keep_if);
    }
    if (m.grad) {
      a.row_max = g_.nodes[static_cast<size_t>(m.grad->row_max)].out;
      a.row_sum = g_.nodes[static_cast<size_t>(m.grad->row_sum)].out;
      if (!o_.gpu && shape_numel(shape(m.grad->probs)) * 4 <= kCpuAttentionStoredProbs) a.probs = m.grad->probs;
    }
    const int32_t st = push(Step{.kind = StepKind::Attention, .nodes = m.nodes, .space = shape(d1.out), .attention = std::move(a)});
    for (int32_t n : m.nodes) s_.step_of[g_.nodes[static_cast<size_t>(n)].out] = st;
    AttentionLayout& placed = step(st).attention;
    placed.out = attention_output(d2.out, st, nb, nb, nb + 1);
    if (m.grad) give_buffer(placed.row_max, st), give_buffer(placed.row_sum, st);
    if (placed.probs >= 0) give_buffer(placed.probs, st);
  }

  // Output v (dims: batch.. in the chain's order, then the rows at `rows`, the head columns at
  // `cols`) of attention step st: written into a buffer of its own, or into its only reader's
  // when that is a transpose (v not a result): the transpose's value gets the buffer, v becomes a
  // view of it, and the transpose is then placed already (place_view).
  AttentionLayout::Out attention_output(int32_t v, int32_t st, size_t nb, size_t rows, size_t cols) {
    const int32_t t = readers_.sole(v);
    const ir::Node* tn = t < 0 ? nullptr : &g_.nodes[static_cast<size_t>(t)];
    if (s_.view[v]) {  // placed in a concatenation (concat_views)
      s_.step_of[v] = st;
    } else if (tn && tn->op == Op::Transpose) {
      give_buffer(tn->out, st);
      const std::vector<int64_t> c = contiguous_strides(shape(tn->out));
      View w{tn->out, 0, std::vector<int64_t>(c.size())};
      for (size_t k = 0; k < c.size(); ++k) w.strides[static_cast<size_t>(tn->attrs.dims[k])] = c[k];
      s_.view[v] = std::move(w);
      s_.step_of[v] = st;
    } else {
      give_buffer(v, st);
    }
    const View& w = *s_.view[v];
    return {.value = v, .offset = w.offset, .batch = std::vector<int64_t>(w.strides.begin(), w.strides.begin() + static_cast<std::ptrdiff_t>(nb)),
            .rs = w.strides[rows], .cs = w.strides[cols]};
  }

  // Where the values from the concatenation C of a chain's gradients (AttentionGrad::concat) down
  // to the gradients lie in C's own buffer, when views can say (a pad's or a concatenate's operand:
  // C's region; a reshape's and a transpose's operand: their result's elements, reshaped or
  // permuted back).
  std::optional<std::vector<std::pair<int32_t, View>>> concat_views(const AttentionGrad& ag) const {
    const int32_t c = g_.nodes[static_cast<size_t>(ag.concat)].out;
    std::vector<std::pair<int32_t, View>> views;
    auto view = [&](int32_t v) { return std::find_if(views.begin(), views.end(), [v](const auto& x) { return x.first == v; }); };
    const View whole{c, 0, contiguous_strides(shape(c))};
    for (size_t i = ag.concat_nodes.size(); i-- > 0;) {
      const ir::Node& n = g_.nodes[static_cast<size_t>(ag.concat_nodes[i])];
      if (n.op == Op::Binary) continue;  // the adds: nothing but C is stored
      View w = whole;
      if (n.op == Op::Concatenate) {  // C itself: each operand its region along the axis
        const auto axis = static_cast<size_t>(n.attrs.axis);
        for (int32_t u : n.in) {
          views.emplace_back(u, w);
          w.offset += shape(u)[axis] * whole.strides[axis];
        }
        continue;
      }
      if (n.op == Op::Pad) {
        for (size_t d = 0; d < w.strides.size(); ++d) w.offset += n.attrs.lo[d] * w.strides[d];
      } else {
        const auto out = view(n.out);
        if (out == views.end()) return std::nullopt;
        if (n.op == Op::Transpose) {
          w = {c, out->second.offset, std::vector<int64_t>(n.attrs.dims.size())};
          for (size_t k = 0; k < n.attrs.dims.size(); ++k) w.strides[static_cast<size_t>(n.attrs.dims[k])] = out->second.strides[k];
        } else {
          std::optional<View> r = reshape_view(out->second, shape(n.out), shape(n.in[0]));
          if (!r) return std::nullopt;
          w = *r;
        }
      }
      views.emplace_back(n.in[0], std::move(w));
    }
    return views;
  }

  // The AttentionGrad step of chain m, whose Attention step has been placed.
  void place_attention_grad(const AttentionMatch& m) {
    const AttentionGrad& ag = *m.grad;
    AttentionLayout a = step(s_.step_of[g_.nodes[static_cast<size_t>(m.out)].out]).attention;  // the chain's step
    a.d_out = ag.d_out;
    attention_operand(a.d_out, ag.d_out_batch, ag.d_out_rows, ag.d_out_head, a.batch_do, a.do_rs, a.do_cs);
    const int32_t st = push(Step{.kind = StepKind::AttentionGrad, .nodes = ag.nodes, .space = shape(g_.nodes[static_cast<size_t>(m.scores)].out),
                                 .attention = a});
    for (int32_t n : ag.nodes) s_.step_of[g_.nodes[static_cast<size_t>(n)].out] = st;
    const size_t nb = a.batch.size();
    if (ag.concat >= 0) {  // the gradients are written into their concatenation's buffer
      give_buffer(g_.nodes[static_cast<size_t>(ag.concat)].out, st);
      const std::vector<std::pair<int32_t, View>> views = *concat_views(ag);  // checked in find_attention_chains
      for (const auto& [v, w] : views) s_.view[v] = w;
    }
    auto grad_out = [&](const GradProduct& p) {  // [b.., rows, head], or [b.., head, rows] transposed
      return attention_output(g_.nodes[static_cast<size_t>(p.node)].out, st, nb, p.transposed ? nb + 1 : nb, p.transposed ? nb : nb + 1);
    };
    AttentionLayout& placed = step(st).attention;
    placed.grad_q = grad_out(ag.dq), placed.grad_k = grad_out(ag.dk), placed.grad_v = grad_out(ag.dv);
  }

  void place_host(int32_t i, const ir::Node& n) {
    for (int32_t u : n.in) contiguous(u);
    int32_t st = push(Step{.kind = StepKind::Host, .nodes = {i}});
    for (int32_t k = 0; k < n.nout; ++k) give_buffer(n.out + k, st);
  }

  // Loop-invariant carried values are views of their operand; the others get buffers.
  void place_while(int32_t i, const ir::Node& n) {
    for (int32_t u : n.in) contiguous(u);
    int32_t st = push(Step{.kind = StepKind::While, .nodes = {i}});
    for (int32_t k = 0; k < n.nout; ++k) {
      if (loop_invariant(n, static_cast<size_t>(k))) s_.view[n.out + k] = view_of(n.in[static_cast<size_t>(k)]);
      else give_buffer(n.out + k, st);
    }
  }

  void place(int32_t i) {
    const ir::Node& n = g_.nodes[static_cast<size_t>(i)];
    if (claimed(static_cast<size_t>(i))) {  // placed with its GELU epilogue, at its anchor
      if (const int32_t e = gelu_at_[static_cast<size_t>(i)]; e >= 0) place_gelu(gelus_[static_cast<size_t>(e)]);
      return;
    }
    if (in_chain(static_cast<size_t>(i))) {  // placed with its chain's last node
      const AttentionMatch& m = chains_[static_cast<size_t>(chain_of_[static_cast<size_t>(i)])];
      if (m.out == i) place_attention(m);
      else if (m.grad && m.grad->nodes.front() == i) place_attention_grad(m);
      return;
    }
    if (const int32_t other = partner(static_cast<size_t>(i)); other >= 0) return place_pair(i, n, other);
    place_node(i, n);
  }

  void place_node(int32_t i, const ir::Node& n) {
    // The CPU and CUDA lowering facet of each op (docs/architecture.md, "An op's facets"): the
    // step it becomes; `place_host` runs the reference kernel on the host (ref/executor.cpp).
    switch (n.op) {
      case Op::Parameter: case Op::Constant: give_buffer(n.out, -1); return;
      case Op::BroadcastInDim: case Op::Reshape: case Op::Transpose: case Op::Slice: case Op::Reverse: place_view(n); return;
      case Op::Reduce: return loop_supported(g_, n, o_) ? place_reduce(i, n) : place_host(i, n);
      case Op::Gather: return loop_supported(g_, n, o_) ? place_gather(i, n) : place_host(i, n);
      case Op::DynamicSlice: place_dynamic_slice(i, n); return;
      case Op::Iota: case Op::Unary: case Op::Binary: case Op::Convert: case Op::Select: case Op::Pad:
        return loop_supported(g_, n, o_) ? place_elementwise(i, n) : place_host(i, n);
      case Op::Concatenate:
        if (!loop_supported(g_, n, o_)) return place_host(i, n);
        return o_.gpu ? place_elementwise(i, n) : place_concatenate(i, n);
      case Op::While: place_while(i, n); return;
      case Op::OptimizationBarrier:  // its results are its operands, read where they are
        for (int32_t k = 0; k < n.nout; ++k) s_.view[n.out + k] = view_of(n.in[static_cast<size_t>(k)]);
        return;
      case Op::Scatter: if (!place_scatter(i, n)) place_host(i, n); return;
      case Op::ArgReduce: case Op::TopK: if (!place_top_k(i, n)) place_host(i, n); return;
      case Op::DynamicUpdateSlice: if (!place_update(i, n)) place_host(i, n); return;
      case Op::DotGeneral: if (!place_dot(i, n)) place_host(i, n); return;
      case Op::Sort: case Op::Case: case Op::AllReduce: place_host(i, n); return;
      case Op::Call: place_host(i, n); return;  // not lowered: a finished trace has none (passes/inline_calls.hpp)
      case Op::Softmax: case Op::SoftmaxGrad: case Op::Gelu: case Op::GeluGrad:  // composites: expanded before (passes::lower_composites)
        place_host(i, n);
        return;
    }
  }
};

}  // namespace

bool loop_supported(const ir::Graph& g, const ir::Node& n, const FuseOptions& o) {
  DType out = g.type(n.out).dtype;
  switch (n.op) {
    case Op::Iota: case Op::Convert: case Op::Select: case Op::Pad: return true;
    case Op::Gather: case Op::DynamicSlice: return true;
    case Op::Concatenate:  // an operand empty along the axis would leave another the output's shape (not read in place)
      for (int32_t u : n.in)
        if (g.type(u).shape[static_cast<size_t>(n.attrs.axis)] == 0) return false;
      return true;
    case Op::Binary:  // bitwise ops and shifts on floats are not elementwise math: the host kernel says what they do
      return !is_float(g.type(n.in[0]).dtype) || n.attrs.binary <= Binary::Ge;
    case Op::Unary:
      if (is_float(out)) return n.attrs.unary != Unary::Not;
      return n.attrs.unary == Unary::Neg || n.attrs.unary == Unary::Abs || n.attrs.unary == Unary::Sign ||
             n.attrs.unary == Unary::Not || n.attrs.unary == Unary::Floor || n.attrs.unary == Unary::Ceil ||
             n.attrs.unary == Unary::Round;
    case Op::Reduce:
      if (out == DType::F16 || out == DType::BF16) return o.gpu;
      return out != DType::Bool || n.attrs.reduce == Reduce::Max || n.attrs.reduce == Reduce::Min;
    default: return false;
  }
}

Schedule fuse(const ir::Graph& g, const FuseOptions& o) { return Fuser(g, o).run(); }

std::optional<uint8_t> splat_byte(const ir::Graph& g, const View& x) {
  if (std::any_of(x.strides.begin(), x.strides.end(), [](int64_t s) { return s != 0; })) return std::nullopt;
  const ir::Node& c = g.producer(x.buffer);
  if (c.op != Op::Constant) return std::nullopt;
  const size_t es = dtype_size(c.attrs.value.dtype());
  const auto* e = reinterpret_cast<const uint8_t*>(c.attrs.value.bytes()) + static_cast<size_t>(x.offset) * es;
  if (!std::all_of(e, e + es, [&](uint8_t b) { return b == e[0]; })) return std::nullopt;
  return e[0];
}

bool loop_invariant(const ir::Node& n, size_t k) {
  const ir::Graph& body = *n.attrs.regions[1];
  return body.results[k] == body.params[k];
}

std::vector<int32_t> attention_reads(const AttentionLayout& a, bool grad) {
  std::vector<int32_t> r{a.q, a.k, a.v};
  for (const AttentionLayout::Bias& b : {a.bias_q, a.bias_k, a.bias_v})
    if (b.value >= 0) r.push_back(b.value);
  if (a.mask >= 0) r.push_back(a.mask);
  if (grad) r.insert(r.end(), {a.d_out, a.out.value, a.row_max, a.row_sum});
  if (grad && a.probs >= 0) r.push_back(a.probs);
  return r;
}

int32_t dot_result(const ir::Graph& g, const Step& st) {
  if (st.dot.act != DotLayout::Act::None) return st.dot.act_out;
  return g.nodes[static_cast<size_t>(st.nodes[st.dot.bias >= 0 ? 1 : 0])].out;
}

bool computes(const Schedule& s, int32_t v, int32_t step) {
  if (s.step_of[v] == step) return true;
  if (step < 0) return false;
  const std::vector<int32_t>& r = s.steps[static_cast<size_t>(step)].recomputed;
  return std::binary_search(r.begin(), r.end(), v);
}

const View& read_view(const Schedule& s, int32_t v, int32_t reader) {
  int32_t st = s.step_of[v];
  if (st > reader && s.steps[static_cast<size_t>(st)].kind == StepKind::Copy) return s.steps[static_cast<size_t>(st)].source;
  return *s.view[v];
}

}  // namespace sheaf::fusion
