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
using CUevent = struct CUevent_st*;
using nvrtcResult = int;  // 0 = NVRTC_SUCCESS
using nvrtcProgram = struct _nvrtcProgram*;

// The entry points used. Each field is named by the exact symbol of its ABI, which is what dlsym
// resolves: cuda.h's macros map cuMemAlloc to cuMemAlloc_v2 and so on (the unsuffixed symbols are
// older ABIs kept for old binaries); the per-thread-default-stream variants (_ptsz/_ptds) are not
// used, the one stream is an explicit non-blocking one. SHEAF_CUDA_DRIVER_ENTRY_POINTS lists the
// fields (driver.cpp resolves them; tests/unit/cuda_abi_test.cpp checks them against cuda.h).
struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);

  // Contexts and streams.
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);

  // Memory (sizes in bytes).
  CUresult (*cuMemGetInfo_v2)(size_t* free, size_t* total);
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  // Stream-ordered allocation from the device's pool (CUDA 11.2 and later; optional): it neither
  // waits for the GPU nor makes it wait, where cuMemAlloc may do both.
  CUresult (*cuMemAllocAsync)(CUdeviceptr* ptr, size_t bytes, CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);

  // Modules and launches.
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                             unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void** params,
                             void** extra);

  // Graphs: stream capture (mode: a CUstreamCaptureMode) and replay.
  CUresult (*cuStreamBeginCapture_v2)(CUstream stream, int mode);
  CUresult (*cuStreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);

  // Events: timestamps queued on a stream (kernel timing, SHEAF_CUDA_PROFILE; timing cuBLASLt's
  // candidates). cuEventElapsedTime_v2 is optional (drivers of CUDA 12.8 and later): null where
  // absent, and nothing is then timed.
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuEventElapsedTime_v2)(float* ms, CUevent start, CUevent end);
  // Whether a stream is being captured (status: a CUstreamCaptureStatus); optional: where absent,
  // cuBLASLt's candidates are not timed (nothing may wait on a stream while it is captured).
  CUresult (*cuStreamIsCapturing)(CUstream stream, int* status);
};

#define SHEAF_CUDA_DRIVER_ENTRY_POINTS(X) X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2) X(cuGetErrorName) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease_v2) X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamSynchronize) \
  X(cuMemGetInfo_v2) X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) \
  X(cuMemcpyDtoDAsync_v2) X(cuMemsetD8Async) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
  X(cuLaunchKernel) X(cuStreamBeginCapture_v2) X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) \
  X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuEventCreate) X(cuEventRecord) X(cuEventDestroy_v2)
#define SHEAF_CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(X) X(cuEventElapsedTime_v2) X(cuStreamIsCapturing) X(cuMemAllocAsync) X(cuMemFreeAsync)

// Enum values of cuda.h used with these entry points.
constexpr unsigned kStreamNonBlocking = 1;  // CUstream_flags: CU_STREAM_NON_BLOCKING
constexpr int kCaptureModeThreadLocal = 1;  // CUstreamCaptureMode: CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr int kCaptureStatusNone = 0;       // CUstreamCaptureStatus: CU_STREAM_CAPTURE_STATUS_NONE
constexpr CUresult kErrorOutOfMemory = 2;   // cudaError_enum: CUDA_ERROR_OUT_OF_MEMORY
constexpr int kAttrMultiprocessors = 16;    // CUdevice_attribute: CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrMajor = 75;              // CUdevice_attribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrMinor = 76;              // CUdevice_attribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// NVRTC's entry points (nvrtc.h), listed by SHEAF_CUDA_NVRTC_ENTRY_POINTS like the driver's.
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
#define SHEAF_CUDA_NVRTC_ENTRY_POINTS(X) X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) \
  X(nvrtcCompileProgram) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcDestroyProgram)

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
