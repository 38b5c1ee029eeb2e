// base/placement.hpp — where this process runs: the CPU cores it may use, and its place among the
// ranks a launcher (mpirun, srun) started on the same machine. BLAS threads and the GPU a rank
// uses are chosen from these.
#pragma once
#include <string_view>
#include <vector>

namespace sheaf {

// The process's rank among the ranks on its machine, as the launcher says: the first of
// OMPI_COMM_WORLD_LOCAL_RANK (OpenMPI), MPI_LOCALRANKID (MPICH's Hydra), SLURM_LOCALID (srun)
// that holds a non-negative integer; 0 when none does (a job of one).
int local_rank();

// How many ranks of the job run on this machine: the first of OMPI_COMM_WORLD_LOCAL_SIZE,
// MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE that holds a positive integer; 1 when none does.
int local_ranks();

// Whole cores granted by a CFS quota: ⌈quota / period⌉ (at least 1); 0 when there is no quota
// ("max", -1, empty or malformed). `quota` and `period` are the texts of cgroup v2's cpu.max
// (its two fields) or of cgroup v1's cpu.cfs_quota_us and cpu.cfs_period_us.
int quota_cores(std::string_view quota, std::string_view period);

// Threads for one process's parallel kernels, from the CPUs of its affinity mask (`mask`), the
// machine's online CPUs (`online`), its cgroup's quota in cores (`quota`, 0: none) and the ranks
// on its machine (`ranks`): the mask capped by the quota; when the mask is the whole machine (no
// launcher or user binding has split it), shared evenly among the ranks. At least 1.
int share_cores(int mask, int online, int quota, int ranks);

// The CPUs (their numbers) of this process's affinity mask; empty when it cannot be read.
std::vector<int> affinity_cpus();

// share_cores for this process: sched_getaffinity (taskset, cpusets, a launcher's binding), the
// online CPUs, the quota of cgroup v2 (cpu.max) or v1 (cpu.cfs_quota_us; docker --cpus) and
// local_ranks().
int default_threads();

}  // namespace sheaf
