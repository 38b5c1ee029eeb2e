// backend/cuda/nccl.cpp — dlopen of NCCL and the job's communicator (see nccl.hpp).
#include "backend/cuda/nccl.hpp"

#include "backend/cuda/dynlib.hpp"

#include <fmt/format.h>

#include <mutex>
#include <vector>

#include "base/error.hpp"
#include "dist/comm.hpp"

namespace sheaf::cuda {
namespace {

Loaded<Nccl>& loaded_nccl() {
  static Loaded<Nccl> l;
  static std::once_flag once;
  return load_once<Nccl>(l, once, {"libnccl.so.2", "libnccl.so"}, true, "NCCL was not found", "NCCL is too old",
                         [](Resolver& need, Nccl& fns, std::string&) {
    SHEAF_CUDA_NCCL_ENTRY_POINTS(SHEAF_CUDA_RESOLVE)
    return true;
  });
}

[[noreturn]] void fail(const Nccl& n, std::string_view what, ncclResult_t r) {
  throw SheafError(fmt::format("NCCL: {} failed: {}", what, nccl_error(n, r)));
}

}  // namespace

const Nccl* nccl(std::string* why) {
  return loaded_nccl().get(why);
}

std::string nccl_version_name(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return fmt::format("NCCL {}.{}.{}", major, minor, code % 100);
}

std::string nccl_version() {
  std::string why;
  const Nccl* n = nccl(&why);
  if (!n) return why;
  int code = 0;
  if (ncclResult_t r = n->ncclGetVersion(&code); r != 0) return "ncclGetVersion failed: " + nccl_error(*n, r);
  return nccl_version_name(code);
}

std::string nccl_error(const Nccl& n, ncclResult_t r) {
  const char* text = n.ncclGetErrorString ? n.ncclGetErrorString(r) : nullptr;
  return fmt::format("{} ({})", text && *text ? text : "NCCL error", r);
}

std::optional<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::F32: return kNcclFloat32;
    case DType::I32: return kNcclInt32;
    case DType::U32: return kNcclUint32;
    default: return std::nullopt;
  }
}

std::unique_ptr<NcclComm> NcclComm::join(const Nccl& n) {
  const int world = dist::world_size(), rank = dist::rank();
  ncclUniqueId id{};
  // Rank 0's failure to draw an id must not leave the others waiting in the broadcast: it sends
  // its result code first, and every rank reports the failure.
  int32_t drawn = rank == 0 ? n.ncclGetUniqueId(&id) : 0;
  dist::broadcast(&drawn, sizeof drawn, 0, "NCCL setup (ncclGetUniqueId's result)");
  if (drawn != 0) fail(n, rank == 0 ? "ncclGetUniqueId" : "ncclGetUniqueId on rank 0", drawn);
  dist::broadcast(&id, sizeof id, 0, "NCCL setup (the communicator's id)");
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = n.ncclCommInitRank(&comm, world, id, rank); r != 0)
    fail(n, fmt::format("ncclCommInitRank ({} ranks)", world), r);
  return std::unique_ptr<NcclComm>(new NcclComm(n, comm));
}

NcclComm::~NcclComm() {
  if (comm_) n_.ncclCommDestroy(comm_);  // null once aborted after a failure
}

void NcclComm::all_reduce_sum(uint64_t in, uint64_t out, size_t count, ncclDataType_t type, CUstream stream) {
  if (!failed_.empty())
    throw SheafError("NCCL: the communicator is unusable after an earlier failure: " + failed_);
  ncclResult_t r = n_.ncclAllReduce(reinterpret_cast<const void*>(in), reinterpret_cast<void*>(out), count, type,
                                    kNcclSum, comm_, stream);
  if (r == 0) return;
  try {
    fail(n_, "ncclAllReduce", r);
  } catch (const SheafError& e) {
    failed_ = e.what();
    n_.ncclCommAbort(comm_);  // a failed collective may leave the peers' kernels waiting: free them
    comm_ = nullptr;
    throw;
  }
}

}  // namespace sheaf::cuda
