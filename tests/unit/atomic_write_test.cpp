// tests/unit/atomic_write_test.cpp — io/atomic_write: a regular file is replaced whole, a symbolic
// link keeps pointing at the file it names, and a device or named pipe is written in place (never
// renamed over: `sheaf build -o /dev/null` once replaced /dev/null with a regular file); the
// temporary of a process that died while saving is removed by the next save into its directory,
// and nothing else is (a live process's temporary, names that only look alike, directories).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

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

// Forks a process that begins saving `target` and stops before committing. It writes one byte to
// `ready` once its temporary exists, then waits until `hold` is closed (or exits at once when
// `hold` is -1), without removing the temporary — as if it were killed. `hold_writer` is the other
// end of the pipe of `hold`. Returns its pid.
pid_t begin_save(const fs::path& target, int ready, int hold, int hold_writer) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::close(hold_writer);  // else this process would keep `hold` open itself
  auto* f = new AtomicFile(target.string());  // never destroyed: the temporary stays
  f->write("partial");
  char c = 1;
  if (::write(ready, &c, 1) != 1) ::_exit(2);
  if (hold >= 0 && ::read(hold, &c, 1) < 0) ::_exit(3);
  ::_exit(0);
}

// The names in `dir` starting with `prefix`.
std::vector<std::string> named(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

TEST(AtomicWrite, RemovesTheTemporariesOfDeadProcessesOnly) {
  TempDir t;
  int ready[2], hold[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(hold), 0);
  char c;
  // The live one first: the other's save removes the temporaries of dead processes too.
  const pid_t alive = begin_save(t.dir / "other.bin", ready[1], hold[0], hold[1]);
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  const pid_t dead = begin_save(t.dir / "w.bin", ready[1], -1, hold[1]);
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);

  const std::vector<std::string> stale = named(t.dir, ".w.bin.tmp."), live = named(t.dir, ".other.bin.tmp.");
  ASSERT_EQ(stale.size(), 1u);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(stale[0].rfind(fmt::format(".w.bin.tmp.{}.", dead), 0), 0u) << stale[0];  // the owner's pid is in the name
  // Look-alikes of the dead process's temporary that must stay: another machine's (host digits
  // differ), a directory, and names that break the pattern.
  std::string other_host = stale[0], as_dir = stale[0];
  const size_t host_at = stale[0].size() - 16;
  other_host[host_at] = other_host[host_at] == '0' ? '1' : '0';
  as_dir.back() = as_dir.back() == '0' ? '1' : '0';
  std::ofstream(t.dir / other_host) << "x";
  fs::create_directory(t.dir / as_dir);
  std::ofstream(t.dir / (stale[0] + "x")) << "x";
  std::ofstream(t.dir / fmt::format("w.bin.tmp.{}.{}", dead, stale[0].substr(host_at))) << "x";

  write_file_atomic((t.dir / "w.bin").string(), "new");
  EXPECT_EQ(slurp(t.dir / "w.bin"), "new");
  EXPECT_FALSE(fs::exists(t.dir / stale[0])) << "the dead process's temporary is removed";
  EXPECT_TRUE(fs::exists(t.dir / live[0])) << "a live process's temporary stays";
  for (const std::string& kept : {other_host, as_dir, stale[0] + "x"}) EXPECT_TRUE(fs::exists(t.dir / kept)) << kept;
  EXPECT_EQ(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()), 6);

  ::close(hold[1]);
  EXPECT_EQ(::waitpid(alive, nullptr, 0), alive);
  for (int fd : {ready[0], ready[1], hold[0]}) ::close(fd);
}

TEST(AtomicWrite, SavesUnderTheLongestFileName) {
  TempDir t;
  const std::string name(NAME_MAX, 'n');
  write_file_atomic((t.dir / name).string(), "long");
  EXPECT_EQ(slurp(t.dir / name), "long");
  EXPECT_EQ(std::distance(fs::directory_iterator(t.dir), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace sheaf
