// backend/cuda/lt_tuning.cpp — timing cuBLASLt's candidates and the choices file (lt_tuning.hpp).
#include "backend/cuda/lt_tuning.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "backend/cuda/driver_device.hpp"
#include "base/hash.hpp"
#include "io/artifact_trust.hpp"

namespace sheaf::cuda {
namespace {

constexpr size_t kAlgoWords = sizeof(LtMatmulAlgo::data) / sizeof(uint64_t);  // 8

// `text` split at single spaces ("a  b" has an empty field).
std::vector<std::string_view> fields(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = text.find(' ', start);
    out.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// The whole of `text` as an integer in `base`, or nullopt.
template <typename T>
std::optional<T> whole_number(std::string_view text, int base) {
  T v{};
  if (text.empty() || text.front() == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// One body line: "<key integers> = <8 words of 16 hex digits>", or nullopt with `why`.
std::optional<std::pair<LtKey, LtMatmulAlgo>> parse_line(std::string_view line, std::string& why) {
  const std::vector<std::string_view> f = fields(line);
  size_t eq = 0;
  while (eq < f.size() && f[eq] != "=") ++eq;
  if (eq == 0 || eq == f.size()) {
    why = "expected key integers, '=' and the algorithm";
    return std::nullopt;
  }
  LtKey key;
  for (size_t i = 0; i < eq; ++i) {
    std::optional<int64_t> v = whole_number<int64_t>(f[i], 10);
    if (!v) {
      why = fmt::format("'{}' is not an integer", f[i]);
      return std::nullopt;
    }
    key.push_back(*v);
  }
  if (f.size() - eq - 1 != kAlgoWords) {
    why = fmt::format("expected {} algorithm words after '=', not {}", kAlgoWords, f.size() - eq - 1);
    return std::nullopt;
  }
  LtMatmulAlgo algo{};
  for (size_t w = 0; w < kAlgoWords; ++w) {
    std::string_view word = f[eq + 1 + w];
    std::optional<uint64_t> v = word.size() == 16 ? whole_number<uint64_t>(word, 16) : std::nullopt;
    if (!v) {
      why = fmt::format("'{}' is not 16 hex digits", word);
      return std::nullopt;
    }
    algo.data[w] = *v;
  }
  return std::pair{std::move(key), algo};
}

}  // namespace

bool lt_tuning_enabled() {
  const char* v = std::getenv("SHEAF_CUBLASLT_TUNE");
  return !(v && std::string_view(v) == "0");
}

bool same_algo(const LtMatmulAlgo& x, const LtMatmulAlgo& y) { return std::memcmp(x.data, y.data, sizeof x.data) == 0; }

std::vector<LtMatmulAlgo> usable_candidates(const std::vector<LtHeuristicResult>& results, int returned) {
  std::vector<LtMatmulAlgo> out;
  for (size_t i = 0; i < results.size() && static_cast<int64_t>(i) < returned; ++i)
    if (results[i].state == 0) out.push_back(results[i].algo);
  return out;
}

std::optional<size_t> fastest(const std::vector<std::optional<double>>& ms) {
  std::optional<size_t> best;
  for (size_t i = 0; i < ms.size(); ++i)
    if (ms[i] && std::isfinite(*ms[i]) && (!best || *ms[i] < *ms[*best])) best = i;
  return best;
}

std::optional<size_t> time_candidates(size_t count, const std::function<bool(size_t)>& run, const StreamTimer& timer) {
  if (!timer) return std::nullopt;
  std::vector<std::optional<double>> ms(count);
  for (size_t i = 0; i < count; ++i) {
    bool ran = true;  // every run of candidate i so far was accepted
    const std::function<void()> once = [&] { ran = ran && run(i); };
    if (!timer(once)) return std::nullopt;  // the warm-up
    for (int r = 0; ran && r < kLtTimedRuns; ++r) {
      std::optional<double> t = timer(once);
      if (!t) return std::nullopt;
      if (!ms[i] || *t < *ms[i]) ms[i] = *t;
    }
    if (!ran) ms[i].reset();
  }
  return fastest(ms);
}

std::string lt_choices_name(const std::string& gpu, size_t version) {
  return fmt::format("cublaslt-{:016x}.algos", fnv1a64_parts({gpu, std::to_string(version)}));
}

std::string format_lt_choices(const LtChoices& choices) {
  std::string out;
  for (const auto& [key, algo] : choices) {
    for (int64_t v : key) out += fmt::format("{} ", v);
    out += "=";
    for (uint64_t w : algo.data) out += fmt::format(" {:016x}", w);
    out += "\n";
  }
  return out;
}

std::optional<LtChoices> parse_lt_choices(const std::string& body, std::string* why) {
  LtChoices out;
  std::string problem;
  size_t start = 0;
  for (int line = 1; start < body.size(); ++line) {
    const size_t end = body.find('\n', start);
    if (end == std::string::npos) problem = "the last line is cut short";
    std::optional<std::pair<LtKey, LtMatmulAlgo>> choice;
    if (problem.empty()) choice = parse_line(std::string_view(body).substr(start, end - start), problem);
    if (!choice) {
      if (why) *why = fmt::format("line {}: {}", line + 2, problem);  // after the magic and MAC lines
      return std::nullopt;
    }
    out.insert_or_assign(std::move(choice->first), choice->second);
    start = end + 1;
  }
  return out;
}

std::string pack_lt_choices(const std::string& body, const std::string& mac) {
  return fmt::format("{}\nmac {}\n{}", kLtChoicesMagic, mac, body);
}

std::optional<LtChoices> read_lt_choices(const std::string& path, std::string* why) {
  std::optional<std::string> bytes = read_cache_file(path, why, kLtChoicesMaxBytes);
  if (!bytes) return std::nullopt;
  const std::string head = fmt::format("{}\nmac ", kLtChoicesMagic);
  const size_t body_at = head.size() + trust::kMacChars + 1;
  if (bytes->compare(0, head.size(), head) != 0 || bytes->size() < body_at || (*bytes)[body_at - 1] != '\n') {
    if (why) *why = fmt::format("not a '{}' file", kLtChoicesMagic);
    return std::nullopt;
  }
  const std::string body = bytes->substr(body_at);
  if (std::string problem = trust::mac_problem(body, bytes->substr(head.size(), trust::kMacChars)); !problem.empty()) {
    if (why) *why = "it " + problem;
    return std::nullopt;
  }
  return parse_lt_choices(body, why);
}

bool write_lt_choices(const std::string& path, const LtChoices& choices) {
  return write_cache_file(path, format_lt_choices(choices), pack_lt_choices);
}

std::string describe_product_tuning(const ProductTuning& t) {
  if (t.shapes == 0) return "";
  return fmt::format("products: {} shapes, {} timed, {} from the cache", t.shapes, t.timed, t.cached);
}

}  // namespace sheaf::cuda
