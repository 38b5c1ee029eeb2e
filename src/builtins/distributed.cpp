// builtins/distributed.cpp — data-parallel training (SPEC §10): rank world-size all-reduce
// broadcast-tree barrier shard. The process group is dist/comm.hpp (a job of one without a
// launcher: rank 0, world size 1, collectives are identities).
// all-reduce is a primitive (dist/collectives.hpp), so a pure function calling it compiles
// with the collective inside. `rank` and `shard` depend on which process runs them, so they are
// effects: a compiled function never bakes one rank's value into code that another rank loads
// from the cache. broadcast-tree and barrier synchronise the processes, so they are effects too.
#include "builtins/registry.hpp"
#include "dist/collectives.hpp"
#include "dist/comm.hpp"
#include "eval/args.hpp"
#include "eval/interp.hpp"
#include "eval/pytree.hpp"
#include "eval/tensor_args.hpp"
#include "io/row_handle.hpp"
#include "tensor/elementwise.hpp"
#include "tensor/layout.hpp"
#include "value/handle.hpp"

namespace sheaf {
namespace {

Value b_rank(Interp&, const CallArgs&) { return Value::integer(dist::rank()); }
Value b_world_size(Interp&, const CallArgs&) { return Value::integer(dist::world_size()); }

Value b_barrier(Interp&, const CallArgs& a) {
  run_primitive(a, [] { dist::barrier(); });
  return Value::nil();
}

// The leaves of `tree` that a collective moves, as tensors: tensors as they are, host numbers as
// rank-0 tensors (ints as i32, floats as f32). Other leaves are an error naming them.
std::vector<Tensor> numeric_leaves(const Value& tree, const CallArgs& a) {
  std::vector<Value> leaves;
  tree_leaves(tree, leaves);
  std::vector<Tensor> out;
  for (const Value& v : leaves) {
    if (v.is(Kind::Tensor)) out.push_back(v.as_tensor());
    else if (v.is(Kind::Int)) out.push_back(Tensor::scalar(DType::I32, static_cast<double>(v.as_int())));
    else if (v.is(Kind::Float)) out.push_back(Tensor::scalar(DType::F32, v.as_float()));
    else if (v.is(Kind::Handle)) out.push_back(v.as<HandleObj>().materialize(a.site).as_tensor());
    else throw SheafError(fmt::format("{}: leaves must be tensors or numbers, got {}", a.name, describe_node(v)), a.site);
  }
  return out;
}

// `tree` with its leaves replaced by `results` in order; host numbers stay host numbers.
Value rebuild_numeric(const Value& tree, const std::vector<Tensor>& results) {
  size_t at = 0;
  return map_leaves(tree, [&](const Value& leaf) {
    const Tensor& r = results[at++];
    if (leaf.is(Kind::Int) || leaf.is(Kind::Float)) return r.is_symbolic() ? Value::tensor(r.as_weak()) : scalar_value(r);
    if (leaf.is(Kind::Tensor) && leaf.as_tensor().weak()) return Value::tensor(r.as_weak());
    return Value::tensor(r);
  });
}

// (all-reduce tree [:sum|:mean]): every leaf summed (or averaged) elementwise over the ranks.
Value b_all_reduce(Interp&, const CallArgs& a) {
  bool mean = false;
  if (a.size() > 1) {
    std::string op = a[1].is(Kind::Keyword) ? a[1].as_str() : "";
    if (op != "sum" && op != "mean") throw SheafError("all-reduce: the reduction must be :sum or :mean", a.site);
    mean = op == "mean";
  }
  std::vector<Tensor> xs = numeric_leaves(a[0], a);
  if (xs.empty()) return a[0];
  std::vector<Tensor> r = run_primitive(a, [&] { return dist::all_reduce_sum(xs); });
  if (mean)
    for (Tensor& t : r) {
      if (!is_float(t.dtype())) t = convert(t, DType::F32);
      t = binary(Binary::Div, t, Tensor::scalar(t.dtype(), dist::world_size()));
    }
  return rebuild_numeric(a[0], r);
}

// (broadcast-tree tree root): every rank gets rank root's leaves (tensors and numbers), in one
// message; the tree must have the same structure, dtypes and shapes on every rank.
Value b_broadcast_tree(Interp&, const CallArgs& a) {
  int64_t root = arg_int(a, 1);
  if (root < 0 || root >= dist::world_size())
    throw SheafError(fmt::format("broadcast-tree: root {} is not a rank of this job (world size {})", root, dist::world_size()), a.site);
  std::vector<Tensor> xs = numeric_leaves(a[0], a);
  return rebuild_numeric(a[0], run_primitive(a, [&] { return dist::broadcast_from(xs, static_cast<int>(root)); }));
}

// (shard x [rank world]): rank's contiguous part of the rows of x (a tensor, list or handle):
// rows [rank·n/world, (rank+1)·n/world), so the parts differ by at most one row and cover x.
Value b_shard(Interp&, const CallArgs& a) {
  int64_t world = a.size() > 2 ? arg_int(a, 2) : dist::world_size();
  int64_t r = a.size() > 1 ? arg_int(a, 1) : dist::rank();
  if (world < 1 || r < 0 || r >= world)
    throw SheafError(fmt::format("shard: rank {} is not in a world of size {}", r, world), a.site);
  const Value& x = a[0];
  int64_t n = 0;
  if (x.is(Kind::Handle)) n = x.as<HandleObj>().length();
  else if (x.is_list()) n = static_cast<int64_t>(x.as_list().items.size());
  else if (x.is(Kind::Tensor) && x.as_tensor().rank() > 0) n = x.as_tensor().dim(0);
  else throw SheafError(fmt::format("shard: expected a tensor with at least one axis, a list or a handle, got {}", describe_node(x)), a.site);
  int64_t begin = r * n / world, end = (r + 1) * n / world;
  if (x.is(Kind::Handle)) {
    const auto* rows = dynamic_cast<const RowHandle*>(x.raw());
    if (!rows) throw SheafError(fmt::format("shard: {} has no rows to split", x.as<HandleObj>().describe()), a.site);
    return Value::object(Kind::Handle, rows->subrange(begin, end));
  }
  if (x.is_list()) {
    const auto& items = x.as_list().items;
    return Value::list({items.begin() + begin, items.begin() + end}, x.as_list().kind);
  }
  const Tensor& t = x.as_tensor();
  std::vector<int64_t> starts(static_cast<size_t>(t.rank()), 0), limits = t.shape(), strides(starts.size(), 1);
  starts[0] = begin;
  limits[0] = end;
  return Value::tensor(run_primitive(a, [&] { return slice(t, starts, limits, strides); }));
}

constexpr BuiltinDef kDistributed[] = {
    {"rank", "(rank)", "This process's rank in a data-parallel job (0 without a launcher).", b_rank, 0, 0, true},
    {"world-size", "(world-size)", "Number of processes in the job (1 without a launcher).", b_world_size, 0, 0},
    {"all-reduce", "(all-reduce tree [:sum|:mean])",
     "Every leaf summed (default) or averaged elementwise over the ranks; compiled as one collective.", b_all_reduce, 1, 2},
    {"broadcast-tree", "(broadcast-tree tree root)", "Every rank receives rank root's leaves (same structure and shapes everywhere).",
     b_broadcast_tree, 2, 2, true},
    {"barrier", "(barrier)", "Waits until every rank has reached it.", b_barrier, 0, 0, true},
    {"shard", "(shard x [rank world])", "This rank's contiguous part of the rows of a tensor, list or handle.", b_shard, 1, 3, true},
};

}  // namespace

std::span<const BuiltinDef> distributed_builtins() { return kDistributed; }

}  // namespace sheaf
