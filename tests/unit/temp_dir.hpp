// tests/unit/temp_dir.hpp — a fresh private folder for a test: mode 0700 (mkdtemp) under the
// system's temporary directory, named <prefix>-XXXXXX, removed with everything in it when the
// object goes.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace sheaf::testing_support {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix) {
    std::string p = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    EXPECT_NE(::mkdtemp(p.data()), nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace sheaf::testing_support
