// ir/composites.cpp — a composite's expansion, recorded by running its decomposition on symbolic
// operands under a recorder that appends to one graph (see composites.hpp).
#include "ir/composites.hpp"

#include "base/error.hpp"
#include "tensor/recorder.hpp"
#include "tensor/gelu.hpp"
#include "tensor/softmax.hpp"

namespace sheaf::ir {
namespace {

// Records the primitives into `g` (value ids are g's; concrete tensors become constants).
class GraphRecorder final : public Recorder {
 public:
  explicit GraphRecorder(Graph& g) : g_(g), saved_(active_recorder()) { set_active_recorder(this); }
  ~GraphRecorder() override { set_active_recorder(saved_); }
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;

  std::vector<Tensor> record(Op op, const std::vector<Tensor>& operands, const Attrs& attrs, const Type* declared) override {
    std::vector<int32_t> ids;
    std::vector<Type> types;
    for (const Tensor& t : operands) {
      ids.push_back(lift(t).symbol_id());
      types.push_back(g_.type(ids.back()));
    }
    std::vector<Type> out = infer_types(op, types, attrs, declared);
    const int32_t first = g_.add(op, std::move(ids), attrs, out);
    std::vector<Tensor> r;
    for (size_t i = 0; i < out.size(); ++i) r.push_back(value(first + static_cast<int32_t>(i)));
    return r;
  }

  Tensor lift(const Tensor& t) override { return t.is_symbolic() ? t : value(g_.emit_constant(t)); }

  Tensor value(int32_t id) const { return Tensor::symbolic(g_.type(id).dtype, g_.type(id).shape, id); }

 private:
  Graph& g_;
  Recorder* saved_;
};

}  // namespace

Expansion expand(const Node& n, const std::vector<Type>& in) {
  Expansion x;
  Graph& g = x.graph;
  g.name = std::string(op_name(n.op));
  GraphRecorder rec(g);
  std::vector<Tensor> args;
  for (const Type& t : in) {
    Attrs a;
    a.index = static_cast<int64_t>(g.params.size());
    args.push_back(rec.value(g.add(Op::Parameter, {}, a, {t})));
  }
  switch (n.op) {
    case Op::Softmax: {
      SoftmaxParts s = softmax_expansion(args.at(0), n.attrs.axis);
      x.row_max = s.row_max.symbol_id(), x.row_sum = s.row_sum.symbol_id();
      g.results = {s.out.symbol_id()};
      break;
    }
    case Op::SoftmaxGrad: g.results = {softmax_grad_expansion(args.at(0), args.at(1), n.attrs.axis).symbol_id()}; break;
    case Op::Gelu: g.results = {gelu_expansion(args.at(0)).symbol_id()}; break;
    case Op::GeluGrad: g.results = {gelu_grad_expansion(args.at(0), args.at(1)).symbol_id()}; break;
    default: throw SheafError(fmt::format("internal: {} is not a composite", op_name(n.op)));
  }
  return x;
}

}  // namespace sheaf::ir
