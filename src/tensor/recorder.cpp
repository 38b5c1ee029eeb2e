// tensor/recorder.cpp — this thread's active recorder (see recorder.hpp).
#include "tensor/recorder.hpp"

namespace sheaf::ir {

namespace {
thread_local Recorder* g_recorder = nullptr;
}

Recorder* active_recorder() { return g_recorder; }
void set_active_recorder(Recorder* r) { g_recorder = r; }
Recorder& recorder() {
  if (!g_recorder) throw TraceAbort("a traced value was used outside of its trace");
  return *g_recorder;
}

}  // namespace sheaf::ir
