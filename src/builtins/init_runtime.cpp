// builtins/init_runtime.cpp — the one place the evaluator's hooks are installed (see init_runtime.hpp).
#include "builtins/init_runtime.hpp"

#include <mutex>

#include "autodiff/value_and_grad.hpp"
#include "builtins/registry.hpp"
#include "obs/session.hpp"
#include "runtime/jit.hpp"
#include "trace/tracer.hpp"

namespace sheaf {

void init_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    install_builtins();
    trace::install_eval_hooks();
    install_jit();
    obs::install_eval_hooks();
    install_value_and_grad_form();
  });
}

}  // namespace sheaf
