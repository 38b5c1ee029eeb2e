// tests/unit/atomic_write_test.cpp — io/atomic_write: a regular file is replaced whole, a symbolic
// link keeps pointing at the file it names, and a device or named pipe is written in place (never
// renamed over: `sheaf build -o /dev/null` once replaced /dev/null with a regular file).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/atomic_write.hpp"

namespace sheaf {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct TempDir {
  fs::path dir;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "sheaf-atomic-XXXXXX").string();
    dir = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(dir); }
};

TEST(AtomicWrite, ReplacesARegularFileAndLeavesNoTemporary) {
  TempDir t;
  write_file_atomic((t.dir / "a.txt").string(), "old");
  write_file_atomic((t.dir / "a.txt").string(), "new");
  EXPECT_EQ(slurp(t.dir / "a.txt"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()), 1);
}

TEST(AtomicWrite, FollowsASymbolicLink) {
  TempDir t;
  fs::create_directory(t.dir / "real");
  write_file_atomic((t.dir / "real" / "f.txt").string(), "old");
  fs::create_symlink(t.dir / "real" / "f.txt", t.dir / "link.txt");
  write_file_atomic((t.dir / "link.txt").string(), "new");
  EXPECT_TRUE(fs::is_symlink(t.dir / "link.txt"));
  EXPECT_EQ(slurp(t.dir / "real" / "f.txt"), "new");
}

TEST(AtomicWrite, WritesANamedPipeInPlace) {
  TempDir t;
  const fs::path fifo = t.dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // opened first: the write cannot block
  ASSERT_GE(reader, 0);
  write_file_atomic(fifo.string(), "through the pipe");
  char buf[64] = {};
  const ssize_t n = ::read(reader, buf, sizeof buf);
  ::close(reader);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()), 1);
}

TEST(AtomicWrite, WritesDevNullInPlace) {
  struct stat before {};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(S_ISCHR(before.st_mode));
  write_file_atomic("/dev/null", "discarded");
  struct stat after {};
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(before.st_rdev, after.st_rdev);
}

}  // namespace
}  // namespace sheaf
