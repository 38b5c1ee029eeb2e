// backend/cuda/nccl.hpp — NCCL (NVIDIA's collective library), loaded at run time with dlopen like
// the driver (driver.hpp): the binary builds without nccl.h and runs where NCCL is absent. The few
// types and entry points used are declared here with their C ABI (nccl.h of NCCL 2.28).
//   nccl()       libnccl.so.2 / libnccl.so from the loader path, else $CUDA_HOME/lib and lib64,
//                /usr/local/cuda/lib and lib64; null with the reason when absent ("NCCL was not
//                found: ...") or when it lacks an entry point ("NCCL is too old: it lacks ...").
//                Loaded once per process and never unloaded.
//   NcclComm     the data-parallel job's communicator (dist/comm.hpp's ranks, one GPU each), made
//                collectively: rank 0 draws the unique id, dist::broadcast hands its 128 bytes to
//                every rank, every rank joins with ncclCommInitRank(world, id, rank).
// Errors throw SheafError("NCCL: <entry point> failed: <NCCL's text> (<code>)").
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backend/cuda/driver.hpp"
#include "tensor/dtype.hpp"

namespace sheaf::cuda {

using ncclResult_t = int;  // 0 = ncclSuccess
using ncclComm_t = struct ncclComm*;
using ncclDataType_t = int;
using ncclRedOp_t = int;
constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct ncclUniqueId {
  char internal[kNcclUniqueIdBytes];
};
static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes);

// Enum values of nccl.h used with these entry points.
constexpr ncclRedOp_t kNcclSum = 0;          // ncclRedOp_t: ncclSum
constexpr ncclDataType_t kNcclInt32 = 2;     // ncclDataType_t: ncclInt32
constexpr ncclDataType_t kNcclUint32 = 3;    // ncclDataType_t: ncclUint32
constexpr ncclDataType_t kNcclFloat32 = 7;   // ncclDataType_t: ncclFloat32

// The entry points used, listed by SHEAF_CUDA_NCCL_ENTRY_POINTS (nccl.cpp resolves them;
// tests/unit/cuda_abi_test.cpp checks them against nccl.h).
struct Nccl {
  ncclResult_t (*ncclGetVersion)(int* version);
  ncclResult_t (*ncclGetUniqueId)(ncclUniqueId* id);
  // The id is passed by value (a 128-byte struct, as nccl.h declares it).
  ncclResult_t (*ncclCommInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
  // `stream` is a cudaStream_t, the same handle as the driver's CUstream.
  ncclResult_t (*ncclAllReduce)(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t type,
                                ncclRedOp_t op, ncclComm_t comm, CUstream stream);
  ncclResult_t (*ncclCommDestroy)(ncclComm_t comm);
  ncclResult_t (*ncclCommAbort)(ncclComm_t comm);
  const char* (*ncclGetErrorString)(ncclResult_t result);
};
#define SHEAF_CUDA_NCCL_ENTRY_POINTS(X) X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclAllReduce) \
  X(ncclCommDestroy) X(ncclCommAbort) X(ncclGetErrorString)

// The loaded library, or null; `why` (if given) then says what is missing.
const Nccl* nccl(std::string* why = nullptr);

// "NCCL 2.28.9" for a version code of ncclGetVersion (2.9 and later: major·10000 + minor·100 +
// patch; before: major·1000 + minor·100 + patch).
std::string nccl_version_name(int code);
// "NCCL 2.28.9" for the loaded library, or the reason it is unavailable.
std::string nccl_version();

// "invalid argument (4)" for a result of `n`'s entry points.
std::string nccl_error(const Nccl& n, ncclResult_t r);

// NCCL's element type for `t`: f32, i32 and u32; nullopt for the others (f16/bf16 are summed on
// the host, in f32, like the CPU backend's all-reduce; bool cannot be summed).
std::optional<ncclDataType_t> nccl_type(DType t);

// The job's communicator. Invariants: made once, by every rank at the same point (it is a
// collective: each rank blocks in ncclCommInitRank until all have joined); the calling thread's
// current CUDA context is its own GPU's when it is made and at each call; after a failed call the
// communicator is aborted and every later call throws.
class NcclComm {
 public:
  // Joins the job of dist::world_size() ranks as dist::rank(). Throws SheafError when NCCL fails.
  static std::unique_ptr<NcclComm> join(const Nccl& n);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // Queues out = Σ over the ranks of `count` elements of `type` at `in` on `stream` (device
  // pointers; out may equal in).
  void all_reduce_sum(uint64_t in, uint64_t out, size_t count, ncclDataType_t type, CUstream stream);

 private:
  NcclComm(const Nccl& n, ncclComm_t comm) : n_(n), comm_(comm) {}
  const Nccl& n_;
  ncclComm_t comm_;     // null once aborted
  std::string failed_;  // the first failure, after which comm_ is aborted
};

}  // namespace sheaf::cuda
