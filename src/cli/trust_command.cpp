// cli/trust_command.cpp — `sheaf trust DIR`: lists the artifacts of a `__sheaf__/` folder (the CPU
// shared objects its manifest lists, the CUDA kernel caches beside them) with their function,
// backend, compiler and size, and signs each with this user's key (io/disk_cache.hpp,
// backend/cuda/driver_device.hpp), so that a cache copied from another machine or user loads
// without a compiler. The folder must be this user's and writable by no one else; a file that
// fails the checks (a FIFO, a link, someone else's, an incomplete copy) is listed as refused and
// left unsigned. Exit status: 0 when everything listed was signed, 1 otherwise.
#include "cli/trust_command.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "backend/cuda/driver_device.hpp"
#include "base/error.hpp"
#include "io/artifact_trust.hpp"
#include "io/disk_cache.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;

// DIR itself when it holds a manifest or is named __sheaf__, else DIR/__sheaf__ when that exists.
std::string cache_folder(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  if (p.filename() == "__sheaf__" || fs::exists(fs::symlink_status(p / "manifest.json", ec))) return p.string();
  if (fs::is_directory(p / "__sheaf__", ec)) return (p / "__sheaf__").string();
  throw SheafError(fmt::format("{} holds no Sheaf cache (no manifest.json and no __sheaf__/ folder)", dir));
}

// The CUDA kernel caches of `folder` ("cuda-<16 hex>.<arch>.cubin"), sorted.
std::vector<std::string> cubin_files(const std::string& folder) {
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
    std::string name = e.path().filename().string();
    if (name.rfind("cuda-", 0) == 0 && name.size() > 6 && name.ends_with(".cubin")) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Row {
  std::string function, backend, compiler, size, outcome;
  bool refused = false;
};

Row row_of(const DiskCache::Listed& l) {
  if (!l.problem.empty()) return {l.function, l.backend, l.compiler, "-", fmt::format("refused: {} {}", l.file, l.problem), true};
  return {l.function, l.backend, l.compiler, cuda::format_bytes(l.bytes), l.was_trusted ? "signed (was trusted already)" : "signed"};
}

Row cubin_row(const std::string& folder, const std::string& name) {
  std::string arch = name.substr(0, name.size() - 6);  // "cuda-<hex>.sm_90"
  arch = arch.substr(arch.find('.') + 1);
  std::string why;
  std::optional<size_t> size = cuda::resign_cached_cubin((fs::path(folder) / name).string(), &why);
  if (!size) return {"(kernels)", "cuda", "NVRTC, " + arch, "-", fmt::format("refused: {} ({})", name, why), true};
  return {"(kernels)", "cuda", "NVRTC, " + arch, cuda::format_bytes(*size), "signed"};
}

void print_table(const std::vector<Row>& rows) {
  size_t w[4] = {8, 7, 8, 4};  // the headers' widths
  for (const Row& r : rows)
    for (auto [i, s] : {std::pair{0, &r.function}, {1, &r.backend}, {2, &r.compiler}, {3, &r.size}}) w[i] = std::max(w[i], s->size());
  auto line = [&](std::string_view a, std::string_view b, std::string_view c, std::string_view d, std::string_view e) {
    std::string text = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {}", a, w[0], b, w[1], c, w[2], d, w[3], e);
    std::cout << text.substr(0, text.find_last_not_of(' ') + 1) << "\n";
  };
  line("function", "backend", "compiler", "size", "");
  for (const Row& r : rows) line(r.function, r.backend, r.compiler, r.size, r.outcome);
}

int sign_folder(const std::string& dir) {
  const std::string folder = cache_folder(dir);
  if (std::string why = trust::folder_problem(folder); !why.empty())
    throw SheafError(fmt::format("refusing to trust {}: it {}, so anyone may have changed its files", folder, why), {},
                     fmt::format("make it yours and writable only by you (chmod go-w {}) once you know its files are the ones you copied", folder));
  const trust::Key& key = trust::user_key();
  if (!key.problem.empty()) throw SheafError("cannot sign: " + key.problem);
  std::vector<Row> rows;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(fs::path(folder) / "manifest.json", ec)))
    for (const DiskCache::Listed& l : DiskCache(folder).sign_all()) rows.push_back(row_of(l));
  for (const std::string& name : cubin_files(folder)) rows.push_back(cubin_row(folder, name));
  if (rows.empty()) throw SheafError(fmt::format("{} lists no compiled artifacts", folder));
  const auto refused = static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const Row& r) { return r.refused; }));
  std::cout << fmt::format("Artifacts in {}:\n", folder);
  print_table(rows);
  std::cout << fmt::format("signed {} of {} artifacts with your key ({})", rows.size() - refused, rows.size(), key.path);
  if (refused) std::cout << fmt::format("; {} refused (never loaded: fix or delete them, then run sheaf trust again)", refused);
  std::cout << "\n";
  return refused ? 1 : 0;
}

}  // namespace

int trust_main(int argc, char** argv) {
  if (argc != 2 || std::string_view(argv[1]).rfind('-', 0) == 0) {
    std::cerr << "usage: sheaf trust DIR   (DIR: a __sheaf__/ folder copied from a machine you trust, or the folder holding it;\n"
                 "                          lists its compiled artifacts and signs them with your key so they load without a compiler)\n";
    return argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") ? 0 : 2;
  }
  try {
    return sign_folder(argv[1]);
  } catch (const SheafError& e) {
    std::cerr << "error: " << e.what() << "\n";
    if (!e.hint.empty()) std::cerr << " = hint: " << e.hint << "\n";
    return 1;
  } catch (const std::exception& e) {  // a folder that cannot be listed
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace sheaf
