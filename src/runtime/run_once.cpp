// runtime/run_once.cpp — trace, optimise and run one transform call (see run_once.hpp).
#include "runtime/run_once.hpp"

#include "backend/ref/executor.hpp"
#include "passes/passes.hpp"
#include "trace/tracer.hpp"

namespace sheaf {

Value run_once(std::span<const Value> args, SrcLoc site, std::string name,
               const std::function<Value(std::vector<Value>&)>& body) {
  for (bool statics : {false, true}) {
    try {
      trace::Traced t = trace::trace_with(args, site, statics, name, body);
      passes::optimize(t.graph);
      ref::Plan plan = ref::plan(t.graph);
      std::string key;
      std::vector<Tensor> inputs;
      trace::flatten_args(args, statics, key, inputs);
      return trace::rebuild(t.result, ref::run(t.graph, plan, inputs));
    } catch (const TraceAbort& abort) {
      if (statics || !std::string_view(abort.what()).starts_with("the value of a traced")) throw;
    }
  }
  return Value();  // not reached: the static attempt returns or throws
}

}  // namespace sheaf
