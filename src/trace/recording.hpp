// trace/recording.hpp — the recorder behind tracing (internal to src/trace): Tracer, an
// ir::Recorder that builds one graph, and Scope, which makes a Tracer the thread's active recorder.
// tracer.cpp traces functions with it; regions.cpp traces the regions of loops, checkpoints and
// custom-vjp calls (a Tracer whose `parent` is the enclosing trace; values of the parent it reads
// become its extra parameters, `captures`).
// Every primitive that meets a symbolic operand appends a node (typed by the shape rule) and
// returns symbolic results. Concrete tensors that meet symbolic ones (closure captures, literals,
// constants of builtins) become constant nodes, shared per storage, and large ones by content (a
// mask each layer builds anew is one node).
// A value computed from constants alone (a constant, an iota, and the elementwise and shape ops of
// such values: a scalar broadcast to a shape, a counter) is recorded once: a node equal to an
// earlier one of them (ir::node_key) is that one. Each random draw on a traced key builds its
// threefry's constants and counters anew, and each update rule its scalars: CSE would merge them
// later, but a model with many parameters would first trace, fold and simplify ~40 % more nodes.
// Merging such values cannot change a gradient (they have none; stop_gradient marks value ids).
#pragma once
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string_view>
#include <unordered_map>

#include "base/error.hpp"
#include "eval/constant_calls.hpp"
#include "ir/node_key.hpp"
#include "tensor/recorder.hpp"
#include "trace/tracer.hpp"

namespace sheaf::trace::detail {

inline constexpr size_t kMaxNodes = 200000;  // a bigger trace is almost surely an unrolled loop gone wrong

extern thread_local int g_depth;     // active traces on this thread
extern thread_local SrcLoc g_site;    // the source location recorded nodes get

// Traces get distinct serials, so a symbolic tensor knows which graph its id belongs to.
uint32_t next_serial();

class Tracer final : public ir::Recorder {
 public:
  ir::Graph g;
  const uint32_t serial = next_serial();
  // A region (loop body, condition) reads values of its enclosing trace as extra parameters.
  Tracer* parent = nullptr;
  bool discovering = false;         // first pass over a region: captures become parameters anywhere
  std::vector<Tensor> captures;     // enclosing-trace tensors read by this region, in order
  std::map<std::pair<uint32_t, int32_t>, int32_t> captured;  // (trace, id) → parameter id here
  std::vector<int32_t> no_gradient;  // value ids marked by stop_gradient
  std::vector<Tensor> guards;        // rank-0 bools recorded by record_guard

  std::vector<Tensor> record(ir::Op op, const std::vector<Tensor>& operands, const ir::Attrs& attrs,
                             const ir::Type* declared) override {
    if (g.nodes.size() > kMaxNodes) throw TraceAbort(fmt::format("the trace grew past {} IR nodes", kMaxNodes));
    std::vector<int32_t> ids;
    std::vector<ir::Type> types;
    bool weak = true;
    for (const Tensor& t : operands) {
      Tensor s = lift(t);
      ids.push_back(s.symbol_id());
      types.push_back(g.type(s.symbol_id()));
      weak = weak && t.rank() == 0 && (t.weak() || !t.is_symbolic());
    }
    // broadcast_in_dim(broadcast_in_dim(x)) is recorded as one broadcast of x, so that its VJP is
    // one reduce (vmap broadcasts an example's broadcast of a parameter again, over the batch);
    // not past a value whose gradient is stopped
    if (op == ir::Op::BroadcastInDim && g.producer(ids[0]).op == ir::Op::BroadcastInDim &&
        std::find(no_gradient.begin(), no_gradient.end(), ids[0]) == no_gradient.end()) {
      const ir::Node& inner = g.producer(ids[0]);
      ir::Attrs a = attrs;
      for (size_t i = 0; i < inner.attrs.dims.size(); ++i) a.dims[i] = attrs.dims[static_cast<size_t>(inner.attrs.dims[i])];
      a.dims.resize(inner.attrs.dims.size());
      return record(op, {symbolic(g.type(inner.in[0]), inner.in[0], operands[0].weak())}, a, declared);
    }
    std::vector<ir::Type> out = ir::infer_types(op, types, attrs, declared);
    const bool from_constants = of_constants(op, ids);
    int32_t first = g.add(op, std::move(ids), attrs, out, g_site);
    if (from_constants) first = recorded_once(first);
    std::vector<Tensor> r;
    for (size_t i = 0; i < out.size(); ++i)
      r.push_back(symbolic(out[i], first + static_cast<int32_t>(i), weak && out[i].shape.empty()));
    return r;
  }

  Tensor lift(const Tensor& t) override {
    if (t.is_symbolic()) return t.trace_id() == serial ? t : capture(t);
    auto key = std::make_tuple(t.storage().get(), t.dtype(), t.shape());
    auto it = constants_.find(key);
    if (it == constants_.end()) {
      pinned_.push_back(t);  // constants_ is keyed by the storage's address: it must not be reused while tracing
      it = constants_.emplace(key, constant(t)).first;
    }
    return symbolic(ir::Type{t.dtype(), t.shape()}, it->second, false);
  }

  // A constant node; a tensor whose elements are all the same (zeros or ones made by a VJP rule)
  // is a rank-0 constant broadcast, never materialised in the graph. A large one equal to one
  // already in the graph is that one (a causal mask each layer builds anew: one constant, not 12).
  int32_t constant(const Tensor& t) {
    const size_t w = dtype_size(t.dtype());
    const std::byte* b = t.bytes();
    bool splat = t.numel() > 1;
    for (int64_t i = 1; splat && i < t.numel(); ++i) splat = std::memcmp(b, b + static_cast<size_t>(i) * w, w) == 0;
    if (!splat && t.nbytes() <= ir::kConstantKeyBytes) return recorded_once(g.emit_constant(t, g_site));  // keyed by their bytes
    if (!splat) {
      const size_t h = std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(b), t.nbytes()));
      for (auto [at, end] = by_content_.equal_range(h); at != end; ++at) {
        const Tensor& c = g.producer(at->second).attrs.value;
        if (c.dtype() == t.dtype() && c.shape() == t.shape() && std::memcmp(c.bytes(), b, t.nbytes()) == 0) return at->second;
      }
      return by_content_.emplace(h, recorded_once(g.emit_constant(t, g_site)))->second;
    }
    Tensor first = Tensor::empty(t.dtype(), {});
    std::memcpy(first.mutable_bytes(), b, w);
    ir::Attrs a;
    a.dims = {};
    const int32_t scalar = recorded_once(g.emit_constant(first, g_site));
    return recorded_once(g.add(ir::Op::BroadcastInDim, {scalar}, a, {ir::Type{t.dtype(), t.shape()}}, g_site));
  }

  Tensor parameter(DType dtype, Shape shape, bool weak) {
    ir::Attrs a;
    a.index = static_cast<int64_t>(g.params.size());
    int32_t id = g.add(ir::Op::Parameter, {}, a, {ir::Type{dtype, shape}});
    return symbolic(ir::Type{dtype, std::move(shape)}, id, weak);
  }

  Tensor symbolic(const ir::Type& t, int32_t id, bool weak) const { return Tensor::symbolic(t.dtype, t.shape, id, weak, serial); }

  // Declares `outer` (a tensor of an enclosing trace) as the next parameter of this region.
  void declare_capture(const Tensor& outer) {
    Tensor p = parameter(outer.dtype(), outer.shape(), outer.weak());
    captured[{outer.trace_id(), outer.symbol_id()}] = p.symbol_id();
    captures.push_back(outer);
  }

 private:
  std::map<std::tuple<const std::byte*, DType, Shape>, int32_t> constants_;
  std::unordered_multimap<size_t, int32_t> by_content_;  // large constants by a hash of their bytes
  std::vector<Tensor> pinned_;  // every tensor constants_ keys, alive until the trace ends
  std::vector<bool> of_constants_;  // by value id: computed from constants alone (see the top)
  ir::NodeKeyMap once_;             // the nodes of such values, by key

  // Whether a node of `op` reading `ids` computes a value from constants alone (of the ops that
  // build tensors: no reduction, product, region or barrier).
  bool of_constants(ir::Op op, const std::vector<int32_t>& ids) const {
    using enum ir::Op;
    static constexpr ir::Op kBuilding[] = {Iota,      Unary, Binary,  Convert,     Select, BroadcastInDim,
                                           Reshape,   Slice, Reverse, Concatenate, Pad,    Transpose};
    auto known = [&](int32_t v) { return static_cast<size_t>(v) < of_constants_.size() && of_constants_[static_cast<size_t>(v)]; };
    return std::find(std::begin(kBuilding), std::end(kBuilding), op) != std::end(kBuilding) && std::all_of(ids.begin(), ids.end(), known);
  }

  // The results of the node just appended (from `first`), a value of constants alone: those of an
  // equal earlier node, the new one dropped, or its own, remembered.
  int32_t recorded_once(int32_t first) {
    const ir::Node& n = g.nodes.back();
    if (const int32_t* earlier = once_.find(g, n, n.in)) {
      g.nodes.pop_back();
      g.types.resize(static_cast<size_t>(first));
      g.def.resize(static_cast<size_t>(first));
      return *earlier;
    }
    once_.insert_pending(first);
    of_constants_.resize(g.types.size(), false);
    std::fill(of_constants_.begin() + first, of_constants_.end(), true);
    return first;
  }

  Tensor capture(const Tensor& t) {
    if (!parent) throw TraceAbort("a traced value was used outside of its trace");
    if (auto it = captured.find({t.trace_id(), t.symbol_id()}); it != captured.end())
      return symbolic(g.type(it->second), it->second, t.weak());
    if (!discovering) throw TraceAbort("internal: a loop region read a value that was not declared");
    declare_capture(t);
    return symbolic(g.type(captured[{t.trace_id(), t.symbol_id()}]), captured[{t.trace_id(), t.symbol_id()}], t.weak());
  }
};

extern thread_local Tracer* g_tracer;  // the innermost active trace

// Active-trace scope: installs the recorder and marks the thread as tracing.
struct Scope {
  ir::Recorder* saved;
  Tracer* saved_tracer;
  SrcLoc saved_site;
  explicit Scope(Tracer& t) : saved(ir::active_recorder()), saved_tracer(g_tracer), saved_site(g_site) {
    ir::set_active_recorder(&t);
    g_tracer = &t;
    ++g_depth;
  }
  ~Scope() {
    ir::set_active_recorder(saved);
    g_tracer = saved_tracer;
    g_site = saved_site;
    if (--g_depth == 0) clear_constant_calls();  // results of builtins kept while tracing
  }
};

}  // namespace sheaf::trace::detail
