// tensor/recorder.hpp — how the tensor primitives become IR while a function is traced.
// The primitives of src/tensor are the IR ops. Each checks its operands first: when any is
// symbolic, it hands the op to the active Recorder (src/trace/recording.hpp), which appends a node
// and returns symbolic results, instead of running the kernel. Concrete operands become
// constants. With no trace active the check is one branch per primitive call.
#pragma once
#include <vector>

#include "tensor/op.hpp"

namespace sheaf::ir {

class Recorder {
 public:
  virtual ~Recorder() = default;
  // Records `op` on `operands` (symbolic or concrete); `declared` gives the result type of ops
  // whose shape rule needs it (iota, reshape, broadcast_in_dim). Returns one tensor per result.
  virtual std::vector<Tensor> record(Op op, const std::vector<Tensor>& operands, const Attrs& attrs,
                                     const Type* declared = nullptr) = 0;
  // A concrete tensor as a symbolic constant of the trace (symbolic tensors pass through).
  virtual Tensor lift(const Tensor& t) = 0;
};

// The recorder of this thread's current trace (nullptr when not tracing).
Recorder* active_recorder();
void set_active_recorder(Recorder* r);
// The active recorder; a symbolic tensor used after its trace ended is a TraceAbort.
Recorder& recorder();

// The single result of a recorded op.
inline Tensor record1(Op op, const std::vector<Tensor>& operands, const Attrs& attrs, const Type* declared = nullptr) {
  return recorder().record(op, operands, attrs, declared)[0];
}

}  // namespace sheaf::ir
