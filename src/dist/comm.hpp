// dist/comm.hpp — the process group of a data-parallel job (SPEC §10): rank, world size and the
// collectives on host memory. A process started by an MPI launcher (mpirun / mpiexec, SLURM srun:
// OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or SLURM_PROCID in the environment) loads
// libsheaf_mpi.so (dist/mpi_shim.c) with dlopen and joins the job; any other process is a
// job of one, where collectives are identities and no MPI library is needed.
// Every blocking collective runs under a watchdog: when it has waited longer than
// SHEAF_COLLECTIVE_TIMEOUT seconds (default 600; 0 = forever) for the other ranks, the process
// reports it and exits with status 1, and the launcher ends the job (a rank that died or skipped
// a collective never leaves the others hanging).
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

// Element types of the reductions (the shim's codes).
enum class Elem : int { F32 = 0, I32 = 1, U32 = 2 };
// In place: data[i] = Σ over ranks of data[i]. `what` names the operation for messages.
void all_reduce_sum(void* data, int64_t count, Elem e, const char* what);
// Every rank receives `bytes` bytes of `data` from rank `root`.
void broadcast(void* data, int64_t bytes, int root, const char* what);
// Every rank's `mine`, indexed by rank.
std::vector<uint64_t> all_gather(uint64_t mine, const char* what);
void barrier();

// Ends the whole job: MPI_Abort in a job of several ranks (the others stop too), exit otherwise.
[[noreturn]] void abort_job(int code);
// Leaves the job (MPI_Finalize) at a normal exit.
void finalize();

}  // namespace sheaf::dist
