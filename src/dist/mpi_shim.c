/* dist/mpi_shim.c — the MPI calls Sheaf makes, behind a small C ABI, built as libsheaf_mpi.so
 * (linked against the system MPI; OpenMPI on Debian). The sheaf binary never links MPI: it loads
 * this library with dlopen only when a launcher (mpirun, srun) started it (dist/comm.cpp), so a
 * single-process run needs no MPI installed. Every function returns 0 or an MPI error code, with
 * the MPI error text in `err` (MPI_ERRORS_RETURN is set on the world communicator). Counts above
 * INT_MAX elements are sent in pieces. */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <string.h>

enum { SHEAF_MPI_ABI = 3 };
enum { SHEAF_F32 = 0, SHEAF_I32 = 1, SHEAF_U32 = 2 };

static int fail(int code, char* err, int errlen) {
  int len = 0;
  if (err && errlen > 0) {
    char text[MPI_MAX_ERROR_STRING];
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) strcpy(text, "unknown MPI error");
    strncpy(err, text, (size_t)errlen - 1);
    err[errlen - 1] = 0;
  }
  return code ? code : 1;
}

static MPI_Datatype datatype(int dtype, size_t* size) {
  switch (dtype) {
    case SHEAF_I32: *size = 4; return MPI_INT32_T;
    case SHEAF_U32: *size = 4; return MPI_UINT32_T;
    default: *size = 4; return MPI_FLOAT;
  }
}

int sheaf_mpi_abi(void) { return SHEAF_MPI_ABI; }

int sheaf_mpi_init(int* rank, int* size, char* err, int errlen) {
  int provided = 0, rc;
  if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS) return fail(rc, err, errlen);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS) return fail(rc, err, errlen);
  if ((rc = MPI_Comm_size(MPI_COMM_WORLD, size)) != MPI_SUCCESS) return fail(rc, err, errlen);
  return 0;
}

/* In place: buf[i] = Σ over ranks of buf[i]. */
int sheaf_mpi_allreduce_sum(void* buf, int64_t count, int dtype, char* err, int errlen) {
  size_t size = 0;
  MPI_Datatype t = datatype(dtype, &size);
  char* p = (char*)buf;
  while (count > 0) {
    int n = count > INT_MAX ? INT_MAX : (int)count;
    int rc = MPI_Allreduce(MPI_IN_PLACE, p, n, t, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, err, errlen);
    p += (size_t)n * size;
    count -= n;
  }
  return 0;
}

int sheaf_mpi_bcast(void* buf, int64_t bytes, int root, char* err, int errlen) {
  char* p = (char*)buf;
  while (bytes > 0) {
    int n = bytes > INT_MAX ? INT_MAX : (int)bytes;
    int rc = MPI_Bcast(p, n, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, err, errlen);
    p += n;
    bytes -= n;
  }
  return 0;
}

/* all[r·bytes ..] = the `bytes` bytes of `mine` of rank r (all holds world-size · bytes). */
int sheaf_mpi_allgather(const void* mine, int bytes, void* all, char* err, int errlen) {
  int rc = MPI_Allgather(mine, bytes, MPI_BYTE, all, bytes, MPI_BYTE, MPI_COMM_WORLD);
  return rc == MPI_SUCCESS ? 0 : fail(rc, err, errlen);
}

void sheaf_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void sheaf_mpi_finalize(void) {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}
