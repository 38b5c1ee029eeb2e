// backend/cuda/cudnn_sdpa.cpp — cuDNN's fused attention through libsheaf_cudnn.so (see
// cudnn_sdpa.hpp): the libraries opened once, problems handed over as cudnn_abi.h's structs.
#include "backend/cuda/cudnn_sdpa.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "backend/cuda/cudnn_abi.h"
#include "backend/cuda/dynlib.hpp"
#include "base/clock.hpp"
#include "base/companion.hpp"
#include "base/error.hpp"

namespace sheaf::cuda {
namespace {

struct Plugin {
  void* cudnn = nullptr;  // libcudnn.so.9
  int (*abi)() = nullptr;
  void* (*open)(void*, void*, int, char*, int64_t) = nullptr;
  void (*close)(void*) = nullptr;
  int64_t (*version)(void*) = nullptr;
  int (*prepare)(void*, const sheaf_sdpa_problem*, int64_t*, int64_t*, int64_t*, char*, int64_t) = nullptr;
  int (*run)(void*, int64_t, int, const sheaf_sdpa_pointers*, void*, char*, int64_t) = nullptr;
  int (*validate)(void*, const sheaf_sdpa_problem*, int, char*, int64_t) = nullptr;
  std::string error;  // why cuDNN is not available
};

const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin p;
    if (const char* e = std::getenv("SHEAF_CUDNN"); e && std::string(e) == "0") {
      p.error = "SHEAF_CUDNN=0";
      return p;
    }
    std::string why;
    // The frontend finds cudart by its soname: the toolkit's, loaded first, is the one it gets.
    (void)open_library({"libcudart.so.13", "libcudart.so.12"}, true, why);
    why.clear();
    p.cudnn = open_library({"libcudnn.so.9"}, true, why);
    if (!p.cudnn) {
      p.error = "libcudnn.so.9 cannot be loaded: " + why;
      return p;
    }
    std::string tried;
    void* lib = open_companion("libsheaf_cudnn.so", "SHEAF_CUDNN_LIB", RTLD_NOW | RTLD_LOCAL, tried);
    if (!lib) {
      p.error = fmt::format("libsheaf_cudnn.so could not be loaded (Sheaf builds it when nvidia-cudnn-frontend and cuDNN's "
                            "headers are installed; or set SHEAF_CUDNN_LIB):{}", tried);
      return p;
    }
    p.abi = reinterpret_cast<int (*)()>(dlsym(lib, "sheaf_cudnn_abi"));
    p.open = reinterpret_cast<decltype(p.open)>(dlsym(lib, "sheaf_cudnn_open"));
    p.close = reinterpret_cast<decltype(p.close)>(dlsym(lib, "sheaf_cudnn_close"));
    p.version = reinterpret_cast<decltype(p.version)>(dlsym(lib, "sheaf_cudnn_version"));
    p.prepare = reinterpret_cast<decltype(p.prepare)>(dlsym(lib, "sheaf_cudnn_prepare"));
    p.run = reinterpret_cast<decltype(p.run)>(dlsym(lib, "sheaf_cudnn_run"));
    p.validate = reinterpret_cast<decltype(p.validate)>(dlsym(lib, "sheaf_cudnn_validate"));
    if (!p.abi || !p.open || !p.close || !p.version || !p.prepare || !p.run || !p.validate || p.abi() != SHEAF_CUDNN_ABI)
      p.error = "libsheaf_cudnn.so does not match this binary: rebuild Sheaf";
    return p;
  }();
  return p;
}

sheaf_sdpa_problem problem_of(const Sdpa& a) {
  sheaf_sdpa_problem p{};
  p.bf16 = a.dtype == DType::BF16;
  p.b = a.b, p.h = a.h, p.t = a.t, p.s = a.s, p.d = a.d, p.dv = a.dv;
  p.scale = a.scale, p.causal = a.causal, p.grad = a.grad;
  auto put = [](int64_t (&to)[4], const SdpaTensor& x) { std::copy(x.strides.begin(), x.strides.end(), to); };
  put(p.q, a.q), put(p.k, a.k), put(p.v, a.v), put(p.o, a.o), put(p.stats, a.stats);
  put(p.d_o, a.d_o), put(p.dq, a.dq), put(p.dk, a.dk), put(p.dv_, a.dv_);
  return p;
}

void* host(DevicePtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace

bool CudnnSdpa::available(std::string* why) {
  const Plugin& p = plugin();
  if (why) *why = p.error;
  return p.error.empty();
}

bool CudnnSdpa::validate(const Sdpa& a, int cc, std::string& why) {
  if (!available(&why)) return false;
  const sheaf_sdpa_problem p = problem_of(a);
  char err[1024] = {};
  if (plugin().validate(plugin().cudnn, &p, cc, err, sizeof err) == 0) return true;
  why = err;
  return false;
}

std::unique_ptr<CudnnSdpa> CudnnSdpa::open(void* stream, int cc, Memory memory, std::string& why) {
  if (!available(&why)) return nullptr;
  const Plugin& p = plugin();
  char err[512] = {};
  void* ctx = p.open(p.cudnn, stream, cc, err, sizeof err);
  if (!ctx) {
    why = fmt::format("cuDNN does not start: {}", err);
    return nullptr;
  }
  return std::unique_ptr<CudnnSdpa>(new CudnnSdpa(ctx, std::move(memory)));
}

CudnnSdpa::~CudnnSdpa() {
  for (const Prepared& p : prepared_) release(p);
  plugin().close(ctx_);
}

const CudnnSdpa::Prepared* CudnnSdpa::find(const Sdpa& a) const {
  auto it = std::find_if(prepared_.begin(), prepared_.end(), [&](const Prepared& p) { return same_plan(p.problem, a); });
  return it == prepared_.end() ? nullptr : &*it;
}

void CudnnSdpa::release(const Prepared& p) {
  for (DevicePtr x : {p.forward, p.backward})
    if (x) memory_.release(x);
}

bool CudnnSdpa::prepare(const Sdpa& a, std::string& why) {
  if (find(a)) return true;
  const sheaf_sdpa_problem p = problem_of(a);
  Prepared w{.problem = a};
  int64_t forward = 0, backward = 0;
  char err[1024] = {};
  const auto t0 = Clock::now();
  const int built = plugin().prepare(ctx_, &p, &w.plan, &forward, &backward, err, sizeof err);
  plans_s_ += seconds_since(t0);
  if (built != 0) {
    why = fmt::format("cuDNN does not take attention {}: {}", sdpa_key(a), err);
    return false;
  }
  if (forward > 0) w.forward = memory_.allocate(static_cast<size_t>(forward));
  if (backward > 0) w.backward = memory_.allocate(static_cast<size_t>(backward));
  prepared_.push_back(w);
  const auto t1 = Clock::now();
  try {
    trial(a);
    trials_s_ += seconds_since(t1);
  } catch (const SheafError& e) {
    release(w);
    prepared_.pop_back();
    why = fmt::format("cuDNN's plans for attention {} do not run: {}", sdpa_key(a), e.what());
    return false;
  }
  return true;
}

void CudnnSdpa::trial(const Sdpa& a) {
  // Scratch tensors covering every element the strides reach, zeroed (probabilities of zeros are
  // uniform: no NaN), freed at the end.
  std::vector<DevicePtr> scratch;
  struct Release {
    std::vector<DevicePtr>& s;
    const Memory& m;
    ~Release() {
      for (DevicePtr x : s) {
        try {
          m.release(x);
        } catch (const SheafError&) {  // a failed free loses only the scratch
        }
      }
    }
  } release{scratch, memory_};
  auto tensor = [&](const SdpaTensor& x, int64_t rows, int64_t cols, size_t element) {
    int64_t last = 0;
    for (auto [extent, stride] : {std::pair{a.b, x.strides[0]}, {a.h, x.strides[1]}, {rows, x.strides[2]}, {cols, x.strides[3]}})
      last += (extent - 1) * stride;
    const size_t bytes = static_cast<size_t>(last + 1) * element;
    scratch.push_back(memory_.allocate(bytes));
    memory_.zero(scratch.back(), bytes);
    return scratch.back();
  };
  const size_t h = dtype_size(a.dtype);
  SdpaBuffers b{.q = tensor(a.q, a.t, a.d, h), .k = tensor(a.k, a.s, a.d, h), .v = tensor(a.v, a.s, a.dv, h), .o = tensor(a.o, a.t, a.dv, h)};
  if (a.grad) b.stats = tensor(a.stats, a.t, 1, 4);
  run(a, false, b);
  if (a.grad) {
    b.d_o = tensor(a.d_o, a.t, a.dv, h), b.dq = tensor(a.dq, a.t, a.d, h), b.dk = tensor(a.dk, a.s, a.d, h), b.dv = tensor(a.dv_, a.s, a.dv, h);
    run(a, true, b);
  }
  memory_.synchronize();
}

void CudnnSdpa::run(const Sdpa& a, bool backward, const SdpaBuffers& b) {
  const Prepared* w = find(a);
  if (!w) throw SheafError("internal: attention " + sdpa_key(a) + " was not prepared for cuDNN");
  const sheaf_sdpa_pointers x{host(b.q), host(b.k), host(b.v), host(b.o), host(b.stats), host(b.d_o), host(b.dq), host(b.dk), host(b.dv)};
  char err[1024] = {};
  if (plugin().run(ctx_, w->plan, backward, &x, host(backward ? w->backward : w->forward), err, sizeof err) != 0)
    throw SheafError(fmt::format("cuDNN: attention {} of {} failed: {}", backward ? "backward" : "forward", sdpa_key(a), err));
}

std::string CudnnSdpa::describe_preparation() const {
  return fmt::format("plans of {} problem{} built in {:.0f} ms, tried in {:.0f} ms", prepared_.size(), prepared_.size() == 1 ? "" : "s",
                     plans_s_ * 1e3, trials_s_ * 1e3);
}

std::string CudnnSdpa::version() const {
  const int64_t v = plugin().version(ctx_);
  return fmt::format("cuDNN {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

}  // namespace sheaf::cuda
