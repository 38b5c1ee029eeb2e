// tensor/blas.cpp — loading the BLAS and the portable matrix-product kernel.
// The library is opened with dlopen on the first product, the first that loads of: $SHEAF_BLAS
// (a path), the OpenBLAS the build ships beside the binary (libscipy_openblas.so: PyPI's
// scipy-openblas32, a recent DYNAMIC_ARCH OpenBLAS whose symbols carry a `scipy_` prefix; in the
// install tree under lib/sheaf), then the system's libopenblas.so.0 (Debian's). OpenBLAS picks its
// kernels when it is loaded, from OPENBLAS_CORETYPE or its own CPU detection; Debian's 0.3.21
// misdetects recent CPUs (Zen 5, Emerald Rapids) and falls back to a generic kernel two to five
// times slower, so for any library but the shipped one we ask for SkylakeX on CPUs with AVX-512
// F/BW/DQ/VL and Haswell on CPUs with AVX2 and FMA, unless the user chose a core.
#include "tensor/blas.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <vector>

#include "base/placement.hpp"
#include "tensor/blas_threads.hpp"

namespace sheaf {
namespace {

// cblas_sgemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); blasint = int.
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                         int);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

// OpenBLAS's AVX-512 cores (0.3.16 on) run an f32 product of at most 100³ multiply-adds with
// small-matrix kernels, without packing the operands or zeroing c first.
constexpr int64_t kSmallMacs = 1000000;

struct OpenBlas {
  SgemmFn sgemm = nullptr;
  std::string description = "portable kernel";
  int64_t small_macs = 0;  // blas_small_macs
  void (*set_threads)(int) = nullptr;
  int (*get_threads)() = nullptr;
  std::optional<BlasThreads> adaptive;  // when no variable fixes the count
  int threads = 1;                      // the count OpenBLAS has now
};

// The core to ask an OpenBLAS that may not know this CPU for (nullptr: its own detection).
const char* wanted_core() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Threads for OpenBLAS: SHEAF_NUM_THREADS, else whatever OPENBLAS_NUM_THREADS / OMP_NUM_THREADS
// asked for (0: leave OpenBLAS's choice), else -1: adapted to the load (blas_threads.hpp).
int wanted_threads() {
  if (const char* s = std::getenv("SHEAF_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(s, &end, 10);
    if (end != s && *end == '\0' && n >= 1 && n <= 1024) return static_cast<int>(n);
    fmt::print(stderr, "sheaf: warning: ignoring SHEAF_NUM_THREADS={} (expected a positive integer)\n", s);
  }
  if (std::getenv("OPENBLAS_NUM_THREADS") || std::getenv("OMP_NUM_THREADS")) return 0;
  return -1;
}

// A library to try: its path (or soname) and where it comes from.
struct Candidate {
  std::string path, origin;
};

constexpr const char* kShippedBlas = "libscipy_openblas.so";

std::vector<Candidate> candidates() {
  std::vector<Candidate> c;
  if (const char* p = std::getenv("SHEAF_BLAS"); p && *p) c.push_back({p, "$SHEAF_BLAS"});
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    c.push_back({(exe.parent_path() / kShippedBlas).string(), "beside the binary"});
    c.push_back({(exe.parent_path().parent_path() / "lib" / "sheaf" / kShippedBlas).string(), "lib/sheaf"});
  }
  c.push_back({"libopenblas.so.0", "system"});
  c.push_back({"libopenblas.so", "system"});
  return c;
}

// OpenBLAS's idle worker threads spin for 2^OPENBLAS_THREAD_TIMEOUT cycles before they sleep:
// 2^28, about a tenth of a second, by default. A compiled step runs its fused loops on the same
// cores between products, and a spinning worker takes a core from them: with 2^16 cycles (about
// 25 µs, which still spans the gap between back-to-back products) the char-GPT step's loops took
// 0.64x the time and the step 0.87x, the MLP step 0.77x, the CNN step 0.63x (2 cores).
constexpr const char* kThreadTimeout = "16";

// dlopen of one candidate with blas_load_environment set while OpenBLAS loads (it reads them
// then), or nullptr. Children see the user's environment.
void* open_candidate(const Candidate& c) {
  if (c.path.find('/') != std::string::npos && !std::filesystem::exists(c.path)) return nullptr;
  const std::vector<std::pair<std::string, std::string>> vars =
      blas_load_environment(std::filesystem::path(c.path).filename() == kShippedBlas);
  for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  void* h = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  for (const auto& [name, value] : vars) unsetenv(name.c_str());
  return h;
}

// A symbol of OpenBLAS's API, plain or with the `scipy_` prefix of the PyPI build.
template <typename F>
F symbol(void* h, const std::string& name) {
  void* p = dlsym(h, name.c_str());
  if (!p) p = dlsym(h, ("scipy_" + name).c_str());
  return reinterpret_cast<F>(p);
}

OpenBlas load_openblas() {
  OpenBlas lib;
  void* h = nullptr;
  Candidate from;
  for (const Candidate& c : candidates()) {
    if (!(h = open_candidate(c))) continue;
    if ((lib.sgemm = symbol<SgemmFn>(h, "cblas_sgemm"))) {
      from = c;
      break;
    }
    dlclose(h);
    h = nullptr;
  }
  if (!lib.sgemm) {
    fmt::print(stderr,
               "sheaf: note: OpenBLAS (libopenblas.so.0) could not be loaded; matrix products use a slower "
               "portable kernel\n");
    return lib;
  }
  auto set_threads = symbol<void (*)(int)>(h, "openblas_set_num_threads");
  auto get_threads = symbol<int (*)()>(h, "openblas_get_num_threads");
  auto config = symbol<const char* (*)()>(h, "openblas_get_config");
  auto corename = symbol<const char* (*)()>(h, "openblas_get_corename");
  lib.set_threads = set_threads;
  if (const int wanted = wanted_threads(); set_threads && wanted != 0) {
    if (wanted < 0) lib.adaptive.emplace(default_threads());
    set_threads(lib.adaptive ? lib.adaptive->cores() : wanted);
  }
  std::string version = "OpenBLAS";
  if (config) {  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH …": keep the first two words
    std::string c = config();
    size_t sp = c.find(' ', c.find(' ') + 1);
    version = c.substr(0, sp);
  }
  lib.get_threads = get_threads;
  lib.threads = get_threads ? get_threads() : 1;
  const std::string name = std::filesystem::path(from.path).filename().string();
  const std::string core = corename ? corename() : "?";
  if (core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids") lib.small_macs = kSmallMacs;
  lib.description = fmt::format("{} {} ({}, {}), {} thread{}{}", version, core, name, from.origin, lib.threads,
                                lib.threads == 1 ? "" : "s",
                                lib.adaptive && lib.threads > 1 ? " (fewer while other processes keep its cores busy)" : "");
  return lib;
}

OpenBlas& openblas() {
  static OpenBlas lib = load_openblas();
  return lib;
}

std::atomic<bool> serial_blas{false};  // a SerialBlas is open: the count stays at one

// Applies the adaptive count before a product (under a lock: products may come from several threads).
void adapt_threads(OpenBlas& lib) {
  if (!lib.adaptive || serial_blas.load(std::memory_order_relaxed)) return;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  if (int n = lib.adaptive->next(); n != lib.threads) {
    lib.set_threads(n);
    lib.threads = n;
  }
}

// c[i0..i0+R, j0..j0+jb] += a[i0..i0+R, p0..p0+kb] · panel[kb×nb] columns j0..j0+jb, with the
// R×jb block of c held in a local accumulator the compiler keeps in registers and L1.
template <typename T, int R>
void update_rows(const MatView<const T>& a, int64_t i0, int64_t p0, int64_t kb, const T* panel, int64_t nb,
                 int64_t j0, const MatView<T>& c, int64_t cj0) {
  constexpr int64_t JB = 64;
  const int64_t jb = std::min(JB, nb - j0);
  T acc[R][JB];
  for (int r = 0; r < R; ++r) std::copy_n(c.data + (i0 + r) * c.rs + cj0 + j0, jb, acc[r]);
  for (int64_t p = 0; p < kb; ++p) {
    const T* brow = panel + p * nb + j0;
    for (int r = 0; r < R; ++r) {
      const T av = a.data[(i0 + r) * a.rs + (p0 + p) * a.cs];
      for (int64_t j = 0; j < jb; ++j) acc[r][j] += av * brow[j];
    }
  }
  for (int r = 0; r < R; ++r) std::copy_n(acc[r], jb, c.data + (i0 + r) * c.rs + cj0 + j0);
}

// Blocked product: a KB×NB panel of b is packed contiguous (any strides in), then rows of a
// stream through it four at a time.
template <typename T>
void gemm_blocked(MatView<const T> a, MatView<const T> b, MatView<T> c, bool accumulate) {
  constexpr int64_t KB = 128, NB = 256;  // a 128 KiB f32 panel stays in L2
  const int64_t m = c.rows, n = c.cols, k = a.cols;
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::fill_n(c.data + i * c.rs, n, T{0});
  std::vector<T> panel(static_cast<size_t>(std::min(KB, k) * std::min(NB, n)));
  for (int64_t cj0 = 0; cj0 < n; cj0 += NB) {
    const int64_t nb = std::min(NB, n - cj0);
    for (int64_t p0 = 0; p0 < k; p0 += KB) {
      const int64_t kb = std::min(KB, k - p0);
      for (int64_t p = 0; p < kb; ++p)
        for (int64_t j = 0; j < nb; ++j) panel[p * nb + j] = b.data[(p0 + p) * b.rs + (cj0 + j) * b.cs];
      for (int64_t j0 = 0; j0 < nb; j0 += 64) {
        int64_t i = 0;
        for (; i + 4 <= m; i += 4) update_rows<T, 4>(a, i, p0, kb, panel.data(), nb, j0, c, cj0);
        for (; i < m; ++i) update_rows<T, 1>(a, i, p0, kb, panel.data(), nb, j0, c, cj0);
      }
    }
  }
}

// An operand as BLAS sees it: row-major, optionally transposed, with a leading dimension.
struct BlasOperand {
  const float* data;
  bool trans;
  int64_t ld;
};

// The view itself when one of its strides is 1, else a packed row-major copy in `store`.
BlasOperand blas_operand(const MatView<const float>& v, std::vector<float>& store) {
  const int64_t r = v.rows, c = v.cols;
  if (c == 1 || v.cs == 1) {
    int64_t ld = r == 1 ? std::max<int64_t>(1, c) : v.rs;
    if (ld >= std::max<int64_t>(1, c)) return {v.data, false, ld};
  }
  if (r == 1 || v.rs == 1) {
    int64_t ld = c == 1 ? std::max<int64_t>(1, r) : v.cs;
    if (ld >= std::max<int64_t>(1, r)) return {v.data, true, ld};
  }
  store.resize(static_cast<size_t>(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) store[i * c + j] = v.data[i * v.rs + j * v.cs];
  return {store.data(), false, c};
}

bool fits_int(std::initializer_list<int64_t> xs) {
  return std::all_of(xs.begin(), xs.end(), [](int64_t x) { return x <= INT_MAX; });
}

}  // namespace

void gemm_portable(MatView<const float> a, MatView<const float> b, MatView<float> c, bool accumulate) {
  gemm_blocked(a, b, c, accumulate);
}

void gemm(MatView<const uint32_t> a, MatView<const uint32_t> b, MatView<uint32_t> c) { gemm_blocked(a, b, c, false); }

void gemm(MatView<const float> a, MatView<const float> b, MatView<float> c, bool accumulate) {
  OpenBlas& lib = openblas();
  const int64_t m = c.rows, n = c.cols, k = a.cols;
  if (m == 0 || n == 0 || (k == 0 && accumulate)) return;
  if (!lib.sgemm || k == 0) return gemm_portable(a, b, c, accumulate);
  std::vector<float> store_a, store_b;
  BlasOperand pa = blas_operand(a, store_a), pb = blas_operand(b, store_b);
  const int64_t ldc = m == 1 ? n : c.rs;
  if (!fits_int({m, n, k, pa.ld, pb.ld, ldc})) return gemm_portable(a, b, c, accumulate);
  adapt_threads(lib);
  lib.sgemm(kRowMajor, pa.trans ? kTrans : kNoTrans, pb.trans ? kTrans : kNoTrans, static_cast<int>(m),
            static_cast<int>(n), static_cast<int>(k), 1.0f, pa.data, static_cast<int>(pa.ld), pb.data,
            static_cast<int>(pb.ld), accumulate ? 1.0f : 0.0f, c.data, static_cast<int>(ldc));
}

std::string blas_description() { return openblas().description; }

int64_t blas_small_macs() { return openblas().small_macs; }

ProductBlocks small_product_blocks(int64_t m, int64_t n, int64_t k, bool b_transposed, int64_t bound) {
  ProductBlocks p;
  if (bound == 0 || b_transposed || m * n * k <= bound) return p;
  auto macs = [&] { return m / p.rows * (n / p.cols) * k; };
  while (macs() > bound && n % (2 * p.cols) == 0 && n / (2 * p.cols) >= 64) p.cols *= 2;
  while (macs() > bound && m % (2 * p.rows) == 0 && m / (2 * p.rows) >= 16) p.rows *= 2;
  return macs() <= bound ? p : ProductBlocks{};
}

void gemm_blocks(MatView<const float> a, MatView<const float> b, MatView<float> c, ProductBlocks blocks) {
  const int64_t mb = c.rows / blocks.rows, nb = c.cols / blocks.cols;
  for (int64_t i = 0; i < c.rows; i += mb)
    for (int64_t j = 0; j < c.cols; j += nb)
      gemm(MatView<const float>{a.data + i * a.rs, mb, a.cols, a.rs, a.cs}, MatView<const float>{b.data + j * b.cs, b.rows, nb, b.rs, b.cs},
           MatView<float>{c.data + i * c.rs + j, mb, nb, c.rs, 1});
}

SerialBlas::SerialBlas() {
  OpenBlas& lib = openblas();
  serial_blas = true;
  if (lib.set_threads && lib.threads != 1) lib.set_threads(1);
}

SerialBlas::~SerialBlas() {
  OpenBlas& lib = openblas();
  if (lib.set_threads && lib.threads != 1) lib.set_threads(lib.threads);
  serial_blas = false;
}

int blas_threads() {
  OpenBlas& lib = openblas();
  if (serial_blas) return lib.get_threads ? lib.get_threads() : 1;  // the count OpenBLAS runs at now
  adapt_threads(lib);
  return lib.threads;
}

std::vector<std::pair<std::string, std::string>> blas_load_environment(bool shipped) {
  std::vector<std::pair<std::string, std::string>> vars;
  if (const char* core = shipped || std::getenv("OPENBLAS_CORETYPE") ? nullptr : wanted_core()) vars.emplace_back("OPENBLAS_CORETYPE", core);
  if (!std::getenv("OPENBLAS_THREAD_TIMEOUT")) vars.emplace_back("OPENBLAS_THREAD_TIMEOUT", kThreadTimeout);
  return vars;
}

}  // namespace sheaf
