// builtins/loss.cpp — built-in losses (SPEC §5.14): sparse-cross-entropy. (cross-entropy-loss,
// mse-loss and mae-loss are written in Sheaf in lib/nn.shf.)
#include <cmath>

#include "builtins/registry.hpp"
#include "eval/args.hpp"
#include "eval/promote.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "tensor/reduce.hpp"
#include "tensor/shape.hpp"
#include "trace/tracer.hpp"

namespace sheaf {
namespace {

// (sparse-cross-entropy logits targets [:i32])
//   logits [..., C] (float; integers compute in f32), targets [...] integral class ids (any
//   numeric dtype; `:i32` only tags them) → mean over positions of −log_softmax(logits)[..., t].
//   Composed of primitives, so the same steps run eagerly and in a trace.
Value b_sparse_cross_entropy(Interp&, const CallArgs& a) {
  Options o = parse_options(a, {"i32"});
  if (o.positional.size() != 2)
    throw SheafError(fmt::format("sparse-cross-entropy: expected logits and targets, got {} arguments", o.positional.size()), a.site);
  const Value& lv = o.positional[0];
  const Value& tv = o.positional[1];
  if (!lv.is(Kind::Tensor) || lv.as_tensor().rank() == 0) type_error(a, 0, "a tensor of logits [..., classes]");
  Tensor logits = convert(lv.as_tensor(), float_dtype(lv.as_tensor().dtype()));
  Tensor targets;
  if (tv.is(Kind::Tensor)) targets = tv.as_tensor();
  else if (tv.is(Kind::Int)) targets = Tensor::scalar(DType::I32, static_cast<double>(tv.as_int()));
  else type_error(a, 1, "a tensor of integer class ids");

  const int64_t classes = logits.shape().back();
  Shape expected(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != expected)
    throw SheafError(fmt::format("sparse-cross-entropy: targets {} do not match logits {} (expected targets of shape [{}])",
                                 type_str(targets), type_str(logits), fmt::join(expected, "x")), a.site);
  // Known targets are checked; traced ones cannot be (compiled code raises no data-dependent
  // errors): there a target outside [0, C) picks no class and adds 0 to the sum.
  for (int64_t i = 0; !targets.is_symbolic() && i < targets.numel(); ++i) {
    double t = targets.get(i);
    if (t != std::trunc(t) || t < 0 || t >= static_cast<double>(classes))
      throw SheafError(fmt::format("sparse-cross-entropy: target {} is not a class index in [0, {})", t, classes), a.site);
  }

  // Row r's loss is −log_softmax(x)[r, t] = −((x[r, t] − m) − lse) with m the row max and lse
  // = log Σ exp(x − m). x[r, t] is picked by a one-hot sum, Σ_c x[r, c]·[c = t]: it reads only x,
  // so a compiled loop computes it beside the max in one pass over the logits (fusion.hpp's
  // sibling reductions), and its gradient, the one-hot itself, joins the softmax's. A target
  // outside [0, C) picks nothing (valid = 0) and adds 0. Ties of the max take no gradient (it
  // cancels).
  const int64_t last = logits.rank() - 1;
  Shape column = expected;
  column.push_back(1);
  Tensor ids = convert(targets, DType::I32);
  Tensor hit = binary(Binary::Eq, iota(DType::I32, {classes}, 0), reshape(ids, column));
  Tensor x_t = reduce(Reduce::Sum, convert(binary(Binary::Mul, logits, convert(hit, logits.dtype())), DType::F32), {last});
  Tensor valid = reduce(Reduce::Sum, convert(hit, DType::F32), {last});  // 1, or 0 for a target outside [0, C)
  Tensor m = reduce(Reduce::Max, logits, {last}, true);
  trace::stop_gradient(m);
  Tensor lse = unary(Unary::Log, reduce(Reduce::Sum, unary(Unary::Exp, binary(Binary::Sub, logits, m)), {last}, true));
  auto per_row = [&](const Tensor& kept) { return binary(Binary::Mul, valid, convert(reshape(kept, expected), DType::F32)); };
  // log p[r, t] per position [...] in f32, then their sum, in f32, then the logits' dtype
  Tensor total = binary(Binary::Sub, binary(Binary::Sub, x_t, per_row(m)), per_row(lse));
  std::vector<int64_t> positions(static_cast<size_t>(last));
  for (int64_t i = 0; i < last; ++i) positions[static_cast<size_t>(i)] = i;
  if (!positions.empty()) total = reduce(Reduce::Sum, total, positions);
  Tensor n = Tensor::scalar(DType::F32, static_cast<double>(targets.numel()));
  Tensor loss = binary(Binary::Sub, Tensor::scalar(DType::F32, 0), binary(Binary::Div, total, n));  // 0 − x: no −0.0
  return Value::tensor(convert(loss, logits.dtype()));
}

const BuiltinDef kLoss[] = {
    {"sparse-cross-entropy", "(sparse-cross-entropy logits targets [:i32])",
     "Mean categorical cross-entropy with integer class targets; log-softmax applied internally.", b_sparse_cross_entropy, 2, 3},
};

}  // namespace

std::span<const BuiltinDef> loss_builtins() { return kLoss; }

}  // namespace sheaf
