// dist/comm.hpp — the process group of a data-parallel job (SPEC §10): rank, world size and the
// collectives on host memory. A process started by an MPI launcher (mpirun / mpiexec, SLURM srun:
// OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or SLURM_PROCID in the environment) loads
// libsheaf_mpi.so (dist/mpi_shim.c) with dlopen and joins the job; any other process is a
// job of one, where collectives are identities, cost nothing and need no MPI library.
//
// The sequence check: every collective is announced before its data moves. The ranks exchange a
// 64-bit hash of its description ("all-reduce of (f32[16], f32[])", "barrier") in one allgather;
// when the hashes differ they exchange the descriptions and every rank throws a SheafError naming
// each rank's collective. So ranks that call collectives in a different order, or the same one on
// different trees, get an error instead of a deadlock or mixed-up data. A rank that reaches the
// end of its program announces that too (finalize), so the others learn at once that it will
// not join their collective.
// Every wait runs under dist/watchdog.hpp (the timeout, and the report when the job is ended).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sheaf::dist {

// Joins the job when a launcher started the process; throws SheafError when it did but MPI cannot
// be loaded or initialised. Idempotent; rank()/world_size() call it.
void init();
int rank();
int world_size();
bool distributed();         // world_size() > 1 or started by a launcher
std::string where();        // "rank 1 of 4" ("" for a job of one)

// One collective as the ranks see it, made of the calls below while it is alive: constructing it
// announces `what` (see above) and throws SheafError when the ranks disagree. A call below made
// outside any Step announces itself (its name, sizes and root). Only in a distributed() job.
class Step {
 public:
  explicit Step(const std::string& what);
  ~Step();
  Step(const Step&) = delete;
  Step& operator=(const Step&) = delete;
};

// Element types of the reductions (the shim's codes).
enum class Elem : int { F32 = 0, I32 = 1, U32 = 2 };
// In place: data[i] = Σ over ranks of data[i]. `what` names the operation for messages.
void all_reduce_sum(void* data, int64_t count, Elem e, const char* what);
// Every rank receives `bytes` bytes of `data` from rank `root`.
void broadcast(void* data, int64_t bytes, int root, const char* what);
// Every rank's `mine`, indexed by rank.
std::vector<uint64_t> all_gather(uint64_t mine, const char* what);
// Waits until every rank has reached it (its announcement is the whole collective).
void barrier();

// Ends the whole job: MPI_Abort in a job of several ranks (the others stop too), exit otherwise.
[[noreturn]] void abort_job(int code);
// Leaves the job at a normal exit: announces the end of this rank's program and waits, without a
// timeout, until every rank has announced it (MPI_Finalize then); when another rank announced a
// collective instead, reports that and ends the job with status 1.
void finalize();

}  // namespace sheaf::dist
