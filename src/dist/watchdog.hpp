// dist/watchdog.hpp — what a rank of a data-parallel job does while it waits for the others in a
// collective (dist/comm.hpp). A Wait says where the rank waits ("in all-reduce of (f32[16])", "at
// the end of its program"); while one is alive:
// - a timed Wait is watched: after SHEAF_COLLECTIVE_TIMEOUT seconds (default 600; 0 = forever)
//   the process reports which collective it waited in and exits with status 1, and the launcher
//   ends the job (a rank that hangs outside collectives never leaves the others waiting forever);
// - a SIGTERM — how mpirun ends the remaining ranks once one failed, was killed or called
//   MPI_Abort — prints which collective this rank waited in before the process ends, so the
//   job's output names both the rank that ended it (in its own or mpirun's message) and where
//   the others were.
#pragma once
#include <string>

namespace sheaf::dist {

class Wait {
 public:
  Wait(const std::string& where_waiting, bool timed);
  ~Wait();
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;
};

// Once, when this process joins a job of several ranks: the SIGTERM report above.
void install_stop_report();
// Before MPI_Finalize: the watchdog thread ends.
void stop_watchdog();

}  // namespace sheaf::dist
