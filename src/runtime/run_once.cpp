// runtime/run_once.cpp — trace, optimise and run one transform call (see run_once.hpp).
#include "runtime/run_once.hpp"

#include <fmt/format.h>

#include "backend/ref/executor.hpp"
#include "obs/guards.hpp"
#include "passes/passes.hpp"
#include "trace/tracer.hpp"

namespace sheaf {

Value run_once(std::span<const Value> args, SrcLoc site, std::string name,
               const std::function<Value(std::vector<Value>&)>& body, const std::function<void()>& recheck) {
  for (bool statics : {false, true}) {
    try {
      trace::Traced t = trace::trace_with(args, site, statics, name, body);
      passes::optimize(t.graph);
      ref::Plan plan = ref::plan(t.graph);
      std::string key;
      std::vector<Tensor> inputs;
      trace::flatten_args(args, statics, key, inputs);
      std::vector<Tensor> results = ref::run(t.graph, plan, inputs);
      if (t.guarded) {
        bool passed = trace::guards_passed(results.back());
        results.pop_back();
        if (!passed && recheck) recheck();
        else if (!passed)
          throw obs::GuardBreach(fmt::format("/!\\ Guard Breached\nFunction: {}\nA guard inside {} failed (checked on the traced "
                                             "values at {})\n",
                                             name.empty() ? "<lambda>" : name, name.empty() ? "the transformed function" : name,
                                             sources::describe(site)));
      }
      return trace::rebuild(t.result, results);
    } catch (const TraceAbort& abort) {
      if (statics || !std::string_view(abort.what()).starts_with("the value of a traced")) throw;
    }
  }
  return Value();  // not reached: the static attempt returns or throws
}

}  // namespace sheaf
