// backend/cuda/lt_tuning.hpp — choosing a product's cuBLASLt algorithm by timing, and the file
// that keeps the choices (LtGemm, cublaslt.hpp, uses both).
// cuBLASLt's heuristic proposes up to kLtCandidates algorithms for a product; its first is not
// always the fastest (GPT-2 small's qkv product, 8192×2304×768 bf16 on an H100, ran at 29 TFLOP/s
// on it, the MLP's 8192×3072×768 at 380). On a product's first run every candidate runs once
// untimed, then kLtTimedRuns times timed one by one; the candidate of the fastest run wins.
//
// The choices file (one per GPU and cuBLASLt version, in the kernel cache's folder):
//   name     cublaslt-<16 hex digits>.algos, the digits the FNV-1a 64 hash of the GPU
//            ("NVIDIA H100 80GB HBM3 (sm_90)") and cuBLASLt's version, each followed by a NUL
//   content  "sheaf-cublaslt-algos 1\n" (kLtChoicesMagic; the number changes with the key's
//            layout or the format), "mac <64 hex digits>\n", then the body: one line per choice,
//            the key's integers in decimal, "=", and the algorithm's 8 words as 16 hex digits each,
//            separated by single spaces:
//              14 0 8192 2304 768 768 1 2304 1 1 0 0 256 256 256 33554432 = 0000000000000017 ...
// It is trusted like the kernel cache (driver_device.hpp): read once from a regular file and a
// folder of this user's that no one else may write, used only when the MAC (HMAC-SHA-256 of the
// body under this user's key) matches, replaced atomically (trust::replace_file). And whatever the
// file says, a choice is used only when its algorithm equals one the heuristic proposes for that
// key now: the file can pick among cuBLASLt's own candidates, never bring an algorithm of its own.
// A file that fails a check is ignored whole (LtGemm prints one line) and rewritten by the next
// choice timed.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt.hpp"
#include "backend/cuda/device.hpp"

namespace sheaf::cuda {

constexpr int kLtCandidates = 8;  // the heuristic's results asked for
constexpr int kLtTimedRuns = 3;   // timed runs of each candidate
constexpr const char* kLtChoicesMagic = "sheaf-cublaslt-algos 1";
constexpr size_t kLtChoicesMaxBytes = size_t{1} << 20;  // a file of ~5000 choices

// Whether SHEAF_CUBLASLT_TUNE allows timing (anything but "0"; unset: yes).
bool lt_tuning_enabled();

bool same_algo(const LtMatmulAlgo& x, const LtMatmulAlgo& y);

// The algorithms of the heuristic's `returned` results (at most `results.size()`) whose state is
// success, in its order.
std::vector<LtMatmulAlgo> usable_candidates(const std::vector<LtHeuristicResult>& results, int returned);

// The index of the least time (the first of equals); nullopt when no candidate has a time.
std::optional<size_t> fastest(const std::vector<std::optional<double>>& ms);

// Times `count` candidates: `run(i)` queues candidate i once, false when cuBLASLt refuses it (that
// candidate is then passed over). Each runs once in an untimed warm-up, then kLtTimedRuns times,
// each run timed alone; its time is its fastest run. The fastest candidate, or nullopt when the
// timer cannot time (at any point: what it ran was only extra work) or no candidate ran.
std::optional<size_t> time_candidates(size_t count, const std::function<bool(size_t)>& run, const StreamTimer& timer);

// "cublaslt-0123456789abcdef.algos" for the GPU `gpu` and cuBLASLt version `version`.
std::string lt_choices_name(const std::string& gpu, size_t version);

// The body of a choices file (its lines, unsigned).
std::string format_lt_choices(const LtChoices& choices);
// The choices of a body, or nullopt with `why` ("line 3: expected 8 algorithm words after '='").
std::optional<LtChoices> parse_lt_choices(const std::string& body, std::string* why = nullptr);
// A file's bytes: the magic line, the MAC line and the body.
std::string pack_lt_choices(const std::string& body, const std::string& mac);

// The choices kept at `path`: nullopt with `why` empty when there is no such file, with `why`
// saying what is wrong when the file, its folder, its MAC or its lines fail the checks above.
std::optional<LtChoices> read_lt_choices(const std::string& path, std::string* why = nullptr);
// Writes `choices` to `path` atomically with this user's MAC (creating its folder); false when it
// could not (the choices are then only not kept).
bool write_lt_choices(const std::string& path, const LtChoices& choices);

// "products: 8 shapes, 6 timed, 2 from the cache" (--jit-profile); empty when there are none.
std::string describe_product_tuning(const ProductTuning& t);

}  // namespace sheaf::cuda
