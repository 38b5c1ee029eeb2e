/* backend/cuda/cudnn_abi.h — the C interface of libsheaf_cudnn.so (backend/cuda/cudnn_plugin.cpp),
 * which builds and runs cuDNN's fused attention with NVIDIA's header-only cudnn-frontend; the
 * binary (backend/cuda/cudnn_sdpa.cpp) loads it with dlopen, so the frontend (about 1 MB of code)
 * is not part of the binary. Changing a struct or a signature bumps SHEAF_CUDNN_ABI. */
#ifndef SHEAF_CUDNN_ABI_H
#define SHEAF_CUDNN_ABI_H
#include <stdint.h>

#define SHEAF_CUDNN_ABI 1

/* A problem (backend/cuda/sdpa.hpp): q [b,h,t,d], k [b,h,s,d], v [b,h,s,dv], o and d_o
 * [b,h,t,dv], stats [b,h,t,1] f32; each tensor's element strides (batch, head, row, column). */
typedef struct {
  int bf16; /* 1: bf16, 0: f16 */
  int64_t b, h, t, s, d, dv;
  float scale;
  int causal, grad;
  int64_t q[4], k[4], v[4], o[4], stats[4], d_o[4], dq[4], dk[4], dv_[4];
} sheaf_sdpa_problem;

typedef struct {
  void *q, *k, *v, *o, *stats, *d_o, *dq, *dk, *dv;
} sheaf_sdpa_pointers;

#ifdef __cplusplus
extern "C" {
#endif
int sheaf_cudnn_abi(void);
/* cuDNN (entry points resolved from `cudnn`, libcudnn.so.9's dlopen handle) on `stream` (a
 * CUstream of the context current on this thread) of a GPU of compute capability `cc` (90); NULL
 * with a message in err[0..err_size) when it does not start. */
void* sheaf_cudnn_open(void* cudnn, void* stream, int cc, char* err, int64_t err_size);
void sheaf_cudnn_close(void* ctx);
/* cudnnGetVersion(): 91400 for 9.14.0 */
int64_t sheaf_cudnn_version(void* ctx);
/* Builds the problem's forward and (grad) backward plans: their index in *plan, their workspaces'
 * bytes in *forward_bytes and *backward_bytes. 0, or -1 with a message in err. */
int sheaf_cudnn_prepare(void* ctx, const sheaf_sdpa_problem* p, int64_t* plan, int64_t* forward_bytes, int64_t* backward_bytes,
                        char* err, int64_t err_size);
/* Builds the problem's graphs for a GPU of compute capability `cc` and validates them — the
 * frontend's checks of shapes, strides and options, without a GPU. 0, or -1 with a message in err. */
int sheaf_cudnn_validate(void* cudnn, const sheaf_sdpa_problem* p, int cc, char* err, int64_t err_size);
/* Queues the forward or (backward != 0) the backward of prepared plan `plan` with `workspace`. 0,
 * or -1 with a message in err. */
int sheaf_cudnn_run(void* ctx, int64_t plan, int backward, const sheaf_sdpa_pointers* ptrs, void* workspace, char* err,
                    int64_t err_size);
#ifdef __cplusplus
}
#endif
#endif
