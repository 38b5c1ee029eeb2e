// backend/cpu/toolchain.hpp — the system C++ compiler, run at JIT time, and loading its output.
// The compiler is $SHEAF_CXX, else the first of c++, g++, clang++ on PATH (a run from a warm
// `__sheaf__/` needs none). Generated units are built with compile_flags() into a shared object,
// every input, output and log in the process's private scratch directory (io/scratch_dir.hpp),
// and loaded with dlopen; a library is used only when its ABI version and embedded digest
// match what the caller rendered. -ffp-contract=off: no fused multiply-adds, so elementwise math
// rounds exactly as the interpreter's kernels do (only reductions may sum in another order);
// -fno-math-errno: sqrt and friends vectorise (errno is never read); -fno-trapping-math: a select
// whose arm GCC sinks into a branch (`mask ? x * y : 0`) if-converts and vectorises (no FP trap is
// ever enabled; results are unchanged, it only lets the compiler compute both arms). Transcendental functions
// vectorise through libmvec (within 4 ulp of the scalar libm the interpreter calls).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace sheaf::cpu {

inline constexpr const char* kCompileFlags = "-O3 -march=native -ffp-contract=off -fno-math-errno -fno-trapping-math -fopenmp-simd -fPIC -shared";
// $SHEAF_CXXFLAGS when set (then part of the cache key, like the CPU), else kCompileFlags and
// isa_flags().
const std::string& compile_flags();
// The vector ISA of this CPU (cpuid) spelled out, so that the generated loops use the host's
// vector width even where the compiler does not know the CPU by name (-march=native then falls
// back to a generic or older model): AVX-512 F/BW/DQ/VL/CD with 512-bit vectors preferred, else
// AVX2 with FMA and F16C, else nothing.
std::string isa_flags();
inline constexpr const char* kLinkFlags = "-lmvec";  // glibc's vector math (expf, logf, sinf, cosf on 8 or 16 lanes)

struct Toolchain {
  std::string compiler;  // resolved path
  std::string identity;  // first line of `compiler --version`
};

// Found once per process (nullopt: no compiler; the CPU backend then runs from cache only).
const std::optional<Toolchain>& toolchain();

// CPU model and ISA extensions (16 hex digits): artifacts are only reused on the same kind of CPU,
// since -march=native code may use instructions another CPU lacks.
const std::string& isa_fingerprint();

// Compiles `source` into the shared object `out` (written directly by the compiler: callers pass
// a scratch_path(".so")); a unit over kSplitBytes is compiled as its three parts (render.hpp) in
// parallel and linked, the entries at -O0: they are only calls, and GCC's -O3 spent a third of a
// large unit's time on them (bench/gpt_step_style3.shf: 0.4 of 1.2 s). Throws SheafError with the
// compiler's diagnostics on failure.
inline constexpr size_t kSplitBytes = 48 * 1024;
void compile_shared_object(const Toolchain& tc, const std::string& source, const std::string& out);

// A loaded shared object's entry point, or an error saying why it cannot be used.
struct Loaded {
  void* handle = nullptr;
  void (*entry)(const void* rt, void** buffers) = nullptr;
  void* const* loop_tasks = nullptr;  // sheaf_loop_tasks (render.hpp), when the source has loop sites
  std::string problem;  // non-empty: not usable
};
Loaded load_shared_object(const std::string& path, const std::string& digest);
// Loads exactly `bytes` (an artifact whose MAC was checked on these bytes, io/disk_cache.hpp):
// they are written to a new file in the private scratch directory, which no other user can
// replace between the check and dlopen (a memfd would need /proc for dlopen), loaded, and unlinked.
Loaded load_verified_bytes(std::string_view bytes, const std::string& digest);

}  // namespace sheaf::cpu
