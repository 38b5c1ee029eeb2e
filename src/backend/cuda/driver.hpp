// backend/cuda/driver.hpp — the CUDA driver API and NVRTC, loaded at run time with dlopen
// (DESIGN: the binary starts and runs where CUDA is absent). No CUDA header is needed to build:
// the few types and entry points used are declared here with their C ABI.
//   driver()  libcuda.so.1 (the NVIDIA driver), cuInit'ed; null with the reason when there is no
//             driver or no device ("no GPU was found: libcuda.so.1: cannot open shared object file")
//             or when it lacks an entry point (older than CUDA 11.4: cuGraphInstantiateWithFlags)
//   nvrtc()   libnvrtc.so.13 / libnvrtc.so from the loader path, else $CUDA_HOME/lib64 or
//             /usr/local/cuda/lib64; null with the reason when absent
// Both are loaded once per process and never unloaded.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

namespace sheaf::cuda {

using CUresult = int;  // 0 = CUDA_SUCCESS
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 (64-bit builds)
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;  // also cudaStream_t, which cuBLASLt takes
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;
using nvrtcResult = int;  // 0 = NVRTC_SUCCESS
using nvrtcProgram = struct _nvrtcProgram*;

struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device);  // cuDeviceTotalMem_v2
  CUresult (*cuGetErrorName)(CUresult error, const char** name);

  // Contexts and streams. Entry points whose name in cuda.h is a macro are resolved by the
  // symbol the macro names (noted as "= symbol"): the per-thread-default-stream variants
  // (_ptsz/_ptds) are not used, the one stream is an explicit non-blocking one.
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);  // = cuDevicePrimaryCtxRelease_v2
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream stream);  // = cuStreamDestroy_v2
  CUresult (*cuStreamSynchronize)(CUstream stream);

  // Memory (sizes in bytes).
  CUresult (*cuMemGetInfo)(size_t* free, size_t* total);                // = cuMemGetInfo_v2
  CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes);               // = cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr ptr);                               // = cuMemFree_v2
  // = cuMemcpyHtoDAsync_v2, cuMemcpyDtoHAsync_v2, cuMemcpyDtoDAsync_v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);

  // Modules and launches.
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void** params,
                             void** extra);

  // Graphs: stream capture (mode: a CUstreamCaptureMode) and replay.
  CUresult (*cuStreamBeginCapture)(CUstream stream, int mode);  // = cuStreamBeginCapture_v2
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
};

// Enum values of cuda.h used with these entry points.
constexpr unsigned kStreamNonBlocking = 1;  // CUstream_flags: CU_STREAM_NON_BLOCKING
constexpr int kCaptureModeThreadLocal = 1;  // CUstreamCaptureMode: CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr CUresult kErrorOutOfMemory = 2;   // cudaError_enum: CUDA_ERROR_OUT_OF_MEMORY

struct Nvrtc {
  nvrtcResult (*nvrtcVersion)(int* major, int* minor);
  const char* (*nvrtcGetErrorString)(nvrtcResult result);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* prog, const char* src, const char* name, int num_headers,
                                    const char* const* headers, const char* const* include_names);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options, const char* const* options);
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char* ptx);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char* cubin);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t* size);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char* log);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* prog);
};

// The loaded driver with at least one device, or null; `why` (if given) then says what is missing.
const Driver* driver(std::string* why = nullptr);
const Nvrtc* nvrtc(std::string* why = nullptr);

// Device `ordinal` of the driver: what kernels are compiled for and what --jit-profile reports.
struct DeviceInfo {
  int ordinal = 0;           // cuDeviceGet's ordinal (among the devices CUDA_VISIBLE_DEVICES shows)
  std::string name;
  int major = 0, minor = 0;  // compute capability (9.0 for H100/H200)
  int multiprocessors = 0;
  size_t memory = 0;         // bytes
  int driver_version = 0;    // 13000 = CUDA 13.0
};
// Null with `why` when there is no driver or no such device.
std::optional<DeviceInfo> device_info(std::string* why = nullptr, int ordinal = 0);
// How many devices the driver sees (0 without a driver).
int device_count();

// "CUDA_ERROR_NO_DEVICE (100)" for a driver result.
std::string error_name(CUresult r);

}  // namespace sheaf::cuda
