// backend/cuda/driver_device.cpp — the real GPU behind cuda::gpu() (device.hpp): DriverDevice runs
// everything on one non-blocking stream of its GPU's primary context through the CUDA driver
// API (driver.hpp), loads kernels compiled by NVRTC to a cubin for the GPU's own architecture
// (cached on disk, driver_device.hpp), multiplies matrices with cuBLASLt (cublaslt.hpp; a strided
// kernel takes what cuBLASLt cannot, and everything when cuBLASLt is absent; cuBLASLt's candidates
// are timed on the stream, never while it is captured, and the choices kept beside the cubins:
// lt_tuning.hpp), captures work as CUDA graphs and sums over the ranks of a data-parallel job with
// NCCL (nccl.hpp).
// Its GPU is device gpu_ordinal(local_rank(), device count): one per rank of a multi-GPU node.
// The job's NCCL communicator is made on the first all-reduce of a job of several ranks, after the
// ranks agree (one all-gather) that every one of them has NCCL; otherwise no rank uses it and
// all-reduces go through host memory, so the ranks always take the same path.
// Invariants: every public entry (the device's, a module's, a capture's) first makes the primary
// context current on the calling thread (cuCtxSetCurrent is cheap), so any thread may call; every
// CUresult is checked and a failure throws SheafError("CUDA: <what> failed with <error>").
// The device lives as long as the process (gpu() keeps it and never destroys it: tearing the
// driver down during exit races with the driver's own teardown).
#include "backend/cuda/driver_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/cudnn_sdpa.hpp"
#include "backend/cuda/device.hpp"
#include "backend/cuda/nccl.hpp"
#include "backend/cuda/nvrtc.hpp"
#include "base/clock.hpp"
#include "base/error.hpp"
#include "base/placement.hpp"
#include "dist/comm.hpp"
#include "io/artifact_trust.hpp"

namespace sheaf::cuda {

// ---------------------------------------------------------------- the pure parts (driver_device.hpp)

namespace {
constexpr char kCubinMagic[12] = {'S', 'H', 'E', 'A', 'F', 'C', 'U', 'B', 'I', 'N', '2', '\n'};

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(const std::string& in, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return v;
}

// The cache file at `path` passed the file checks and parses; nullopt with `why` (empty when
// there is no such file).
std::optional<CubinFile> read_cubin_file(const std::string& path, std::string* why) {
  std::optional<std::string> bytes = read_cache_file(path, why);
  if (!bytes) return std::nullopt;
  return unpack_cubin(*bytes, why);
}
}  // namespace

std::optional<std::string> read_cache_file(const std::string& path, std::string* why, size_t limit) {
  auto bad = [&](std::string w) -> std::optional<std::string> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  if (why) why->clear();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  trust::Candidate c = trust::read_candidate(path, limit);
  if (c.missing) return std::nullopt;
  if (std::string folder = trust::folder_problem(dir); !folder.empty()) return bad("its folder " + folder);
  if (!c.problem.empty()) return bad("it " + c.problem);
  return std::move(c.bytes);
}

bool write_cache_file(const std::string& path, const std::string& payload,
                      std::string (*pack)(const std::string& payload, const std::string& mac)) {
  try {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    trust::make_folder(dir);
    if (!trust::folder_problem(dir).empty()) return false;  // never write where others may plant links
    trust::replace_file(path, pack(payload, trust::sign(payload)));
    return true;
  } catch (const std::exception&) {  // a read-only or blocked directory, no key: only the cache is lost
    return false;
  }
}

std::string cubin_cache_name(const std::string& source, const std::string& arch, const std::string& compiler) {
  return fmt::format("cuda-{:016x}.{}.cubin", fnv1a64_parts({source, arch, compiler}), arch);
}

std::string pack_cubin(const std::string& cubin, const std::string& mac) {
  std::string out(kCubinMagic, sizeof kCubinMagic);
  put_u64(out, cubin.size());
  out += mac.substr(0, trust::kMacChars);
  out.resize(kCubinHeaderBytes, '0');
  static_assert(sizeof kCubinMagic + 8 + trust::kMacChars == kCubinHeaderBytes);
  return out + cubin;
}

std::optional<CubinFile> unpack_cubin(const std::string& file, std::string* why) {
  auto bad = [&](std::string w) -> std::optional<CubinFile> {
    if (why) *why = std::move(w);
    return std::nullopt;
  };
  if (file.size() < kCubinHeaderBytes || file.compare(0, sizeof kCubinMagic, kCubinMagic, sizeof kCubinMagic) != 0)
    return bad("not a Sheaf cubin cache file");
  const uint64_t size = get_u64(file, sizeof kCubinMagic);
  const uint64_t have = file.size() - kCubinHeaderBytes;
  if (size == 0) return bad("its cubin is empty");
  if (have < size) return bad(fmt::format("truncated: {} of {} payload bytes", have, size));
  if (have > size) return bad(fmt::format("{} bytes past its {}-byte payload", have - size, size));
  return CubinFile{file.substr(kCubinHeaderBytes), file.substr(sizeof kCubinMagic + 8, trust::kMacChars)};
}

std::optional<std::string> read_cached_cubin(const std::string& path, std::string* why) {
  std::optional<CubinFile> f = read_cubin_file(path, why);
  if (!f) return std::nullopt;
  if (std::string problem = trust::mac_problem(f->cubin, f->mac); !problem.empty()) {
    if (why) *why = "it " + problem;
    return std::nullopt;
  }
  return std::move(f->cubin);
}

bool write_cached_cubin(const std::string& path, const std::string& cubin) {
  return write_cache_file(path, cubin, pack_cubin);
}

std::optional<size_t> resign_cached_cubin(const std::string& path, std::string* why) {
  std::optional<CubinFile> f = read_cubin_file(path, why);
  if (!f) {
    if (why && why->empty()) *why = "it is missing";
    return std::nullopt;
  }
  trust::replace_file(path, pack_cubin(f->cubin, trust::sign(f->cubin)));
  return f->cubin.size();
}

std::string format_bytes(size_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::string arch_name(const DeviceInfo& info) { return fmt::format("sm_{}{}", info.major, info.minor); }

std::string describe_device(const DeviceInfo& info) {
  return fmt::format("{} ({}, {} SMs, {})", info.name, arch_name(info), info.multiprocessors,
                     format_bytes(info.memory));
}

int gpu_ordinal(int local_rank, int device_count) {
  if (device_count <= 0 || local_rank < 0) return 0;
  return local_rank % device_count;
}

// ---------------------------------------------------------------- DriverDevice

namespace {

constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's scratch, allocated once
constexpr int64_t kMaxGrid = 2147483647;                  // gridDim.x ≤ 2³¹ − 1
constexpr int64_t kMaxBlock = 1024;

// One line on stderr, once per `flag`.
void notice_once(std::atomic<bool>& flag, const std::string& line) {
  if (!flag.exchange(true)) fmt::print(stderr, "sheaf: {}\n", line);
}

class DriverDevice;

class DriverModule final : public Module {
 public:
  // `keep` holds the device for modules handed out; the device's own (fallback) module does not.
  DriverModule(DriverDevice* dev, std::shared_ptr<DriverDevice> keep, CUmodule mod, std::vector<std::string> names)
      : dev_(dev), keep_(std::move(keep)), mod_(mod), names_(std::move(names)) {}
  ~DriverModule() override;
  void launch(size_t kernel, int64_t grid, int64_t block, void** args) override;

  DriverDevice* dev_;
  std::shared_ptr<DriverDevice> keep_;
  CUmodule mod_;
  std::vector<std::string> names_;
  std::vector<CUfunction> fns_;  // names_' functions, in order
};

class DriverCapture final : public Capture {
 public:
  DriverCapture(std::shared_ptr<DriverDevice> dev, CUgraphExec exec) : dev_(std::move(dev)), exec_(exec) {}
  ~DriverCapture() override;
  void replay() override;

 private:
  std::shared_ptr<DriverDevice> dev_;
  CUgraphExec exec_;
};

class DriverDevice final : public Device, public std::enable_shared_from_this<DriverDevice> {
 public:
  DriverDevice(const Driver& d, DeviceInfo info) : d_(d), info_(std::move(info)) {
    try {
      check(d_.cuDeviceGet(&dev_, info_.ordinal), "cuDeviceGet");
      check(d_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
      retained_ = true;
      bind();
      check(d_.cuStreamCreate(&stream_, kStreamNonBlocking), "cuStreamCreate");
    } catch (const SheafError&) {
      teardown();
      throw;
    }
    std::string why;
    if (const CublasLt* lt = cublaslt(&why)) {
      try {
        lt_ = std::make_unique<LtGemm>(*lt, [this](const std::function<void()>& work) { return time_on_stream(work); });
        workspace_ = allocate(kLtWorkspaceBytes);
      } catch (const SheafError& e) {
        lt_.reset();
        lt_why_ = e.what();
      }
    } else {
      lt_why_ = why;
    }
  }

  ~DriverDevice() override { teardown(); }

  // Releases what the device holds; errors are ignored. Runs only when construction fails (gpu()
  // keeps the device for the process).
  void teardown() {
    if (retained_ && d_.cuCtxSetCurrent(ctx_) == 0) {
      if (stream_) d_.cuStreamSynchronize(stream_);
      lt_.reset();
      sdpa_.reset();
      fallback_.reset();
      if (workspace_) pooled_.erase(workspace_) ? d_.cuMemFreeAsync(workspace_, stream_) : d_.cuMemFree_v2(workspace_);
      for (CUevent e : events_) d_.cuEventDestroy_v2(e);
      for (CUevent e : timing_)
        if (e) d_.cuEventDestroy_v2(e);
      if (stream_) d_.cuStreamDestroy_v2(stream_);
    }
    if (retained_) d_.cuDevicePrimaryCtxRelease_v2(dev_);
  }

  // Makes the context current on this thread.
  void bind() const { check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

  void check(CUresult r, std::string_view what) const {
    if (r != 0) throw SheafError(fmt::format("CUDA: {} failed with {}", what, error_name(r)));
  }

  const Driver& driver() const { return d_; }
  CUstream stream() const { return stream_; }

  std::string describe() const override { return describe_device(info_); }
  std::string arch() const override { return arch_name(info_); }
  int64_t multiprocessors() const override { return info_.multiprocessors; }

  // Stream-ordered where the driver can and the stream is not being recorded: every use of device
  // memory is queued on the one stream, so a block is ready for whatever is queued after its
  // allocation, and neither side waits (a training loop's first steps allocate their results;
  // SHEAF_CUDA_ASYNC_ALLOC=0 measures cuMemAlloc instead). A block goes back the way it came.
  DevicePtr allocate(size_t bytes) override {
    bind();
    CUdeviceptr p = 0;
    const size_t n = bytes == 0 ? 1 : bytes;  // 0 bytes is an error: a distinct pointer anyway
    const bool pooled = async_alloc_ && !recording_;
    CUresult r = pooled ? d_.cuMemAllocAsync(&p, n, stream_) : d_.cuMemAlloc_v2(&p, n);
    if (pooled && r == 0) pooled_.insert(p);
    if (r == kErrorOutOfMemory) {
      size_t free = 0, total = 0;
      if (d_.cuMemGetInfo_v2(&free, &total) == 0)
        throw SheafError(fmt::format("CUDA: cuMemAlloc of {} failed with {} ({} of {} free)", format_bytes(bytes),
                                     error_name(r), format_bytes(free), format_bytes(total)));
    }
    check(r, "cuMemAlloc of " + format_bytes(bytes));
    return p;
  }

  void release(DevicePtr p) override {
    if (p == 0) return;
    bind();
    if (!pooled_.count(p)) return check(d_.cuMemFree_v2(p), "cuMemFree");
    if (recording_) return unfreed_.push_back(p);  // a free queued now would be part of the capture
    for (CUdeviceptr q : std::exchange(unfreed_, {})) {
      pooled_.erase(q);
      check(d_.cuMemFreeAsync(q, stream_), "cuMemFreeAsync");
    }
    pooled_.erase(p);
    check(d_.cuMemFreeAsync(p, stream_), "cuMemFreeAsync");
  }

  void upload(DevicePtr dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    check(d_.cuMemcpyHtoDAsync_v2(dst, src, bytes, stream_), "cuMemcpyHtoDAsync of " + format_bytes(bytes));
    check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize after an upload");  // `src` may be reused
  }

  void download(void* dst, DevicePtr src, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    check(d_.cuMemcpyDtoHAsync_v2(dst, src, bytes, stream_), "cuMemcpyDtoHAsync of " + format_bytes(bytes));
    check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize after a download");
  }

  void copy(DevicePtr dst, DevicePtr src, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    check(d_.cuMemcpyDtoDAsync_v2(dst, src, bytes, stream_), "cuMemcpyDtoDAsync of " + format_bytes(bytes));
  }

  void fill(DevicePtr dst, uint8_t byte, size_t bytes) override {
    if (bytes == 0) return;
    bind();
    check(d_.cuMemsetD8Async(dst, byte, bytes, stream_), "cuMemsetD8Async of " + format_bytes(bytes));
  }

  std::unique_ptr<Module> load(const std::string& source, const std::vector<std::string>& names,
                               const std::string& cache_dir) override {
    return load_module(source, names, cache_dir, shared_from_this());
  }

  std::unique_ptr<Module> load_module(const std::string& source, const std::vector<std::string>& names,
                                      const std::string& cache_dir, std::shared_ptr<DriverDevice> keep) {
    bind();
    if (lt_) lt_->set_cache(cache_dir, fmt::format("{} ({})", info_.name, arch()));  // its choices beside the cubins
    std::string path, cubin;
    CUmodule mod = nullptr;
    if (!cache_dir.empty()) {
      path = (std::filesystem::path(cache_dir) / cubin_cache_name(source, arch())).string();
      std::string why;
      if (std::optional<std::string> cached = read_cached_cubin(path, &why)) {
        CUresult r = d_.cuModuleLoadData(&mod, cached->data());
        if (r != 0) {
          mod = nullptr;
          fmt::print(stderr, "sheaf: the cached kernels {} do not load ({}); rebuilding them\n", path, error_name(r));
        }
      } else if (!why.empty()) {
        fmt::print(stderr, "sheaf: ignoring the kernel cache {} ({}); rebuilding it\n", path, why);
      }
    }
    if (!mod) {
      cubin = compile_cuda(source, "sheaf_kernels.cu", info_.major, info_.minor, true).cubin;
      check(d_.cuModuleLoadData(&mod, cubin.data()), "cuModuleLoadData");
      if (!path.empty()) write_cached_cubin(path, cubin);  // a failure only loses the cache
    }
    auto m = std::make_unique<DriverModule>(this, std::move(keep), mod, names);  // unloads `mod` if what follows throws
    for (const std::string& name : names) {
      CUfunction fn = nullptr;
      check(d_.cuModuleGetFunction(&fn, mod, name.c_str()), "cuModuleGetFunction of " + name);
      m->fns_.push_back(fn);
    }
    return m;
  }

  void gemm(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr row, DevicePtr aux) override {
    if (!is_float(g.dtype))
      throw SheafError(fmt::format("CUDA: no matrix product of {} (f32, f16 or bf16 only)", dtype_name(g.dtype)));
    if (g.m <= 0 || g.n <= 0 || g.batches <= 0) return;
    bind();
    const bool epilogue = g.epilogue != GemmEpilogue::None || g.act != GemmAct::None;
    if (g.k <= 0 && !epilogue) {  // an empty sum: zeros (all-zero bytes are 0.0 in every float type)
      fill(c, 0, static_cast<size_t>(g.batches * g.m * g.n) * dtype_size(g.dtype));
      return;
    }
    if (lt_ && g.k > 0 && lt_->matmul(g, a, b, c, row, aux, stream_, workspace_, kLtWorkspaceBytes)) return;
    Gemm plain = g;
    plain.epilogue = GemmEpilogue::None, plain.act = GemmAct::None;
    if (!epilogue || !lt_ || g.k <= 0 || !lt_->matmul(plain, a, b, c, 0, 0, stream_, workspace_, kLtWorkspaceBytes)) {
      if (!lt_) notice_once(lt_notice_, "matrix products run on a simple kernel: " + lt_why_);
      fallback_gemm(plain, a, b, c);
    } else {
      notice_once(epilogue_notice_, fmt::format("cuBLASLt has no epilogue {} for a {}x{}x{} {} product: kernels do its part", lt_epilogue(g, aux != 0),
                                                g.m, g.n, g.k, dtype_name(g.dtype)));
    }
    if (epilogue) fallback_epilogue(g, a, b, c, row, aux);
  }

  // cuDNN's fused attention (cudnn_sdpa.hpp) on sm_80 and newer, opened at the first problem.
  bool has_sdpa() const override { return info_.major >= 8 && CudnnSdpa::available(); }
  bool sdpa_accepts(const Sdpa& a, std::string* why) override {
    std::string w;
    const bool ok = has_sdpa() && CudnnSdpa::validate(a, info_.major * 10 + info_.minor, w);
    if (!ok) ++sdpa_refused_, last_refusal_ = w;
    if (why) *why = w;
    return ok;
  }
  bool prepare_sdpa(const Sdpa& a, std::string* why) override {
    bind();
    std::call_once(sdpa_once_, [this] {
      const auto t0 = Clock::now();
      struct Timed {  // open's time, also when it throws
        Clock::time_point t0;
        double& s;
        ~Timed() { s = seconds_since(t0); }
      } timed{t0, sdpa_open_s_};
      sdpa_ = CudnnSdpa::open(stream_, info_.major * 10 + info_.minor,
                              {[this](size_t bytes) { return allocate(bytes); }, [this](DevicePtr p) { release(p); },
                               [this](DevicePtr p, size_t bytes) { fill(p, 0, bytes); }, [this] { synchronize(); }},
                              sdpa_why_);
    });
    std::string w;
    const bool ok = sdpa_ && sdpa_->prepare(a, w);
    ++(ok ? sdpa_taken_ : sdpa_refused_);
    if (!sdpa_) w = sdpa_why_;
    if (!ok) last_refusal_ = w;
    if (why) *why = w;
    return ok;
  }
  void sdpa(const Sdpa& a, bool backward, const SdpaBuffers& p) override {
    bind();
    if (!sdpa_) throw SheafError("internal: attention " + sdpa_key(a) + " was not prepared for cuDNN");
    sdpa_->run(a, backward, p);
  }
  std::string describe_sdpa() const override {
    if (sdpa_taken_ + sdpa_refused_ == 0) return {};
    std::string r = sdpa_ ? fmt::format("attention: {} runs {} of {} chains (started in {:.0f} ms; {})", sdpa_->version(), sdpa_taken_,
                                        sdpa_taken_ + sdpa_refused_, sdpa_open_s_ * 1e3, sdpa_->describe_preparation())
                          : "attention: own kernels";
    return sdpa_refused_ ? fmt::format("{} (last refusal: {})", r, last_refusal_) : r;
  }

  void synchronize() override {
    bind();
    check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  }

  // Stamps are events recorded on the stream, created as needed and kept for the next run.
  bool keeps_time() const override { return d_.cuEventElapsedTime_v2 != nullptr; }
  void stamp() override {
    bind();
    if (stamped_ == events_.size()) {
      CUevent e = nullptr;
      check(d_.cuEventCreate(&e, 0), "cuEventCreate");
      events_.push_back(e);
    }
    check(d_.cuEventRecord(events_[stamped_], stream_), "cuEventRecord");
    ++stamped_;
  }
  std::vector<double> stamps_ms() override {
    synchronize();
    std::vector<double> t;
    for (size_t i = 0; i < stamped_; ++i) {
      float ms = 0;
      check(d_.cuEventElapsedTime_v2(&ms, events_[0], events_[i]), "cuEventElapsedTime");
      t.push_back(ms);
    }
    stamped_ = 0;
    return t;
  }

  bool all_reduce_sum(DevicePtr in, DevicePtr out, int64_t count, DType dtype) override {
    if (count < 0) throw SheafError(fmt::format("CUDA: all-reduce of {} elements", count));
    if (dist::world_size() <= 1) {  // a job of one: the sum is the operand
      if (in != out) copy(out, in, static_cast<size_t>(count) * dtype_size(dtype));
      return true;
    }
    const std::optional<ncclDataType_t> type = nccl_type(dtype);
    if (!type) return false;  // decided by the dtype alone: the same on every rank
    NcclComm* comm = job_comm();
    if (!comm) return false;
    if (count == 0) return true;
    bind();
    comm->all_reduce_sum(in, out, static_cast<size_t>(count), *type, stream_);
    return true;
  }

  ProductTuning product_tuning() const override { return lt_ ? lt_->tuning() : ProductTuning{}; }

  std::unique_ptr<Capture> capture(const std::function<void()>& record) override {
    bind();
    // Whatever stops the capture, `record` then runs again uncaptured (device.hpp's contract);
    // an error of its own repeats there and propagates.
    auto uncaptured = [&](const std::string& why) -> std::unique_ptr<Capture> {
      notice_once(capture_notice_, "CUDA graph capture failed (" + why + "); running uncaptured");
      record();
      return nullptr;
    };
    CUresult r = d_.cuStreamBeginCapture_v2(stream_, kCaptureModeThreadLocal);
    if (r != 0) return uncaptured("cuStreamBeginCapture: " + error_name(r));
    CUgraph graph = nullptr;
    try {
      Recording recording(recording_);
      record();
    } catch (const std::exception& e) {
      if (d_.cuStreamEndCapture(stream_, &graph) == 0 && graph) d_.cuGraphDestroy(graph);
      return uncaptured(std::string("while recording: ") + e.what());
    }
    r = d_.cuStreamEndCapture(stream_, &graph);
    if (r != 0 || !graph) {
      if (graph) d_.cuGraphDestroy(graph);
      return uncaptured("cuStreamEndCapture: " + error_name(r));
    }
    CUgraphExec exec = nullptr;
    r = d_.cuGraphInstantiateWithFlags(&exec, graph, 0);
    d_.cuGraphDestroy(graph);  // the executable graph is independent of it
    if (r != 0) return uncaptured("cuGraphInstantiateWithFlags: " + error_name(r));
    return std::make_unique<DriverCapture>(shared_from_this(), exec);
  }

 private:
  // Sets `flag` while capture() records (the stream is captured: nothing may wait on it).
  struct Recording {
    std::atomic<bool>& flag;
    explicit Recording(std::atomic<bool>& f) : flag(f) { flag = true; }
    ~Recording() { flag = false; }
  };

  // LtGemm's StreamTimer (cublaslt.hpp): the milliseconds between events recorded before and
  // after `enqueue`'s work, once the stream is done with it; nullopt, before queuing anything, while
  // the stream is captured (or may be: without cuStreamIsCapturing) or when events keep no time,
  // and when an event fails (timing is then given up, not the product). A failed wait is the
  // queued work's error and throws. Called with LtGemm's lock held: one caller at a time.
  std::optional<double> time_on_stream(const std::function<void()>& enqueue) {
    if (recording_ || !d_.cuEventElapsedTime_v2 || !d_.cuStreamIsCapturing) return std::nullopt;
    int status = -1;
    if (d_.cuStreamIsCapturing(stream_, &status) != 0 || status != kCaptureStatusNone) return std::nullopt;
    for (CUevent& e : timing_)
      if (!e && d_.cuEventCreate(&e, 0) != 0) {
        e = nullptr;
        return std::nullopt;
      }
    if (d_.cuEventRecord(timing_[0], stream_) != 0) return std::nullopt;
    enqueue();
    const bool stamped = d_.cuEventRecord(timing_[1], stream_) == 0;
    check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize after timing a product");
    float ms = 0;
    if (!stamped || d_.cuEventElapsedTime_v2(&ms, timing_[0], timing_[1]) != 0) return std::nullopt;
    return ms;
  }

  // The job's communicator, decided on the first call (collectives over MPI and ncclCommInitRank:
  // that call must not be one recorded by capture()); null when NCCL is not used.
  NcclComm* job_comm() {
    std::lock_guard lock(comm_mutex_);
    if (!comm_decided_) {
      comm_decided_ = true;
      std::string why;
      const Nccl* n = nccl(&why);
      // Every rank must take the same path (a rank on NCCL and another on MPI would wait for each
      // other forever): NCCL only when all of them have it.
      const std::vector<uint64_t> have = dist::all_gather(n ? 1 : 0, "the NCCL check");
      const auto lacking = std::find(have.begin(), have.end(), 0u);
      if (lacking != have.end()) {
        if (n) why = fmt::format("rank {} of {} cannot load it", lacking - have.begin(), have.size());
        notice_once(nccl_notice_,
                    fmt::format("NCCL unavailable ({}): collectives on GPU tensors go through host memory", why));
        return nullptr;
      }
      try {
        bind();
        comm_ = NcclComm::join(*n);
      } catch (const SheafError& e) {
        comm_failure_ = e.what();
      }
    }
    if (!comm_failure_.empty()) throw SheafError(comm_failure_);
    return comm_.get();
  }

  // The fallback kernels (cublaslt.hpp), compiled on first use and kept: kernel index
  // 3·kind + dtype index (f32 0, f16 1, bf16 2).
  void fallback_launch(FallbackKernel kind, DType t, int64_t total, void** args) {
    {
      std::lock_guard lock(fallback_mutex_);
      if (!fallback_) {
        std::vector<std::string> names;
        for (FallbackKernel k : {FallbackKernel::Gemm, FallbackKernel::AddRow, FallbackKernel::SumRows, FallbackKernel::Gelu, FallbackKernel::GeluGrad})
          for (DType d : {DType::F32, DType::F16, DType::BF16}) names.push_back(fallback_gemm_kernel(d, k));
        fallback_ = load_module(fallback_gemm_source(), names, "", nullptr);
      }
    }
    const size_t kernel = 3 * static_cast<size_t>(kind) + (t == DType::F32 ? 0 : t == DType::F16 ? 1 : 2);
    const int64_t grid = std::min<int64_t>((total + kFallbackGemmBlock - 1) / kFallbackGemmBlock, int64_t{1} << 20);
    fallback_->launch(kernel, grid, kFallbackGemmBlock, args);
  }

  void fallback_gemm(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c) {
    long long v[10] = {g.m, g.n, g.k, g.a_rs, g.a_cs, g.b_rs, g.b_cs, g.batches, g.a_bs, g.b_bs};
    void* args[13] = {&a, &b, &c, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]};
    fallback_launch(FallbackKernel::Gemm, g.dtype, g.batches * g.m * g.n, args);
  }

  // What g's epilogue adds to a product made without it: the bias row added, or the rows summed;
  // then GELU or its derivative (the product rounded to g's type first: no longer one rounding).
  void fallback_epilogue(const Gemm& g, DevicePtr a, DevicePtr b, DevicePtr c, DevicePtr row, DevicePtr aux) {
    long long total = g.batches * g.m * g.n;
    if (g.epilogue == GemmEpilogue::Bias) {
      long long n = g.n;
      void* args[4] = {&c, &row, &total, &n};
      fallback_launch(FallbackKernel::AddRow, g.dtype, total, args);
    }
    if (g.act != GemmAct::None) {
      void* args[3] = {&c, &aux, &total};
      fallback_launch(g.act == GemmAct::Gelu ? FallbackKernel::Gelu : FallbackKernel::GeluGrad, g.dtype, total, args);
    }
    if (g.epilogue != GemmEpilogue::SumA && g.epilogue != GemmEpilogue::SumB) return;
    const bool of_a = g.epilogue == GemmEpilogue::SumA;
    DevicePtr x = of_a ? a : b;
    long long v[4] = {of_a ? g.m : g.n, g.k, of_a ? g.a_rs : g.b_cs, of_a ? g.a_cs : g.b_rs};
    void* args[6] = {&x, &row, &v[0], &v[1], &v[2], &v[3]};
    fallback_launch(FallbackKernel::SumRows, g.dtype, v[0], args);
  }

  const Driver& d_;
  DeviceInfo info_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  bool retained_ = false;
  CUstream stream_ = nullptr;
  std::unique_ptr<LtGemm> lt_;  // null: cuBLASLt is absent or failed (lt_why_ says why)
  std::string lt_why_;
  DevicePtr workspace_ = 0;     // kLtWorkspaceBytes for cuBLASLt
  std::mutex fallback_mutex_;
  std::unique_ptr<Module> fallback_;
  std::atomic<bool> lt_notice_{false}, epilogue_notice_{false}, capture_notice_{false}, nccl_notice_{false};
  std::vector<CUevent> events_;  // stamps: the first stamped_ are recorded since stamps_ms
  size_t stamped_ = 0;
  CUevent timing_[2] = {nullptr, nullptr};  // time_on_stream's start and end, made on first use
  std::atomic<bool> recording_{false};      // capture() is recording
  // allocate() by cuMemAllocAsync, and the blocks it so allocated
  const bool async_alloc_ = d_.cuMemAllocAsync && d_.cuMemFreeAsync && [] {
    const char* e = std::getenv("SHEAF_CUDA_ASYNC_ALLOC");
    return !(e && std::string_view(e) == "0");
  }();
  std::unordered_set<CUdeviceptr> pooled_;
  std::vector<CUdeviceptr> unfreed_;  // pooled blocks released while recording, freed at the next release
  std::once_flag sdpa_once_;
  std::unique_ptr<CudnnSdpa> sdpa_;  // null: not opened yet, or cuDNN is absent (sdpa_why_)
  std::string sdpa_why_, last_refusal_;
  size_t sdpa_taken_ = 0, sdpa_refused_ = 0;  // attention chains prepare_sdpa took and refused
  double sdpa_open_s_ = 0;                    // opening cuDNN (its libraries, a handle)
  // The job's NCCL communicator: decided on the first all-reduce of a job of several ranks (a
  // collective, so every rank decides at the same call); null when some rank lacks NCCL.
  std::mutex comm_mutex_;
  bool comm_decided_ = false;
  std::string comm_failure_;  // the error of joining, repeated by later calls
  std::unique_ptr<NcclComm> comm_;
};

DriverModule::~DriverModule() {
  try {
    dev_->bind();
    dev_->driver().cuStreamSynchronize(dev_->stream());  // no queued launch of its kernels left
    dev_->driver().cuModuleUnload(mod_);
  } catch (const SheafError&) {
  }
}

void DriverModule::launch(size_t kernel, int64_t grid, int64_t block, void** args) {
  if (kernel >= fns_.size())
    throw SheafError(fmt::format("CUDA: kernel {} launched from a module of {} kernels", kernel, fns_.size()));
  if (grid == 0) return;
  if (grid < 0 || grid > kMaxGrid || block < 1 || block > kMaxBlock)
    throw SheafError(fmt::format("CUDA: cannot launch {} with grid {} and block {} (at most {} and {})", names_[kernel],
                                 grid, block, kMaxGrid, kMaxBlock));
  dev_->bind();
  dev_->check(dev_->driver().cuLaunchKernel(fns_[kernel], static_cast<unsigned>(grid), 1, 1,
                                            static_cast<unsigned>(block), 1, 1, 0, dev_->stream(), args, nullptr),
              fmt::format("cuLaunchKernel of {} (grid {}, block {})", names_[kernel], grid, block));
}

DriverCapture::~DriverCapture() {
  try {
    dev_->bind();
    dev_->driver().cuGraphExecDestroy(exec_);
  } catch (const SheafError&) {
  }
}

void DriverCapture::replay() {
  dev_->bind();
  dev_->check(dev_->driver().cuGraphLaunch(exec_, dev_->stream()), "cuGraphLaunch");
}

}  // namespace

std::shared_ptr<Device> gpu(std::string* why) {
  static std::mutex mutex;
  static std::shared_ptr<Device>* device = nullptr;  // never destroyed (see the file comment)
  static std::string failure;
  std::lock_guard lock(mutex);
  if (!device) {
    device = new std::shared_ptr<Device>();
    std::string w;
    const Driver* d = driver(&w);
    // One GPU per rank of the machine (a job of one: local rank 0, GPU 0).
    const int ordinal = d ? gpu_ordinal(local_rank(), device_count()) : 0;
    std::optional<DeviceInfo> info = d ? device_info(&w, ordinal) : std::nullopt;
    if (!info) {
      failure = w;
    } else {
      try {
        *device = std::make_shared<DriverDevice>(*d, *info);
      } catch (const SheafError& e) {
        failure = fmt::format("GPU {} ({}) cannot be used: {}", ordinal, describe_device(*info), e.what());
      }
    }
  }
  if (!*device && why) *why = failure;
  return *device;
}

}  // namespace sheaf::cuda
